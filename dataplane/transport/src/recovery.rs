//! Loss recovery within the standard: what a requester measures of its path, and what it
//! does with it.
//!
//! Go-back-N resends everything sent after a lost packet, so what one loss costs is what
//! the QP had in flight when it learned of it; and a loss nothing reports (the last packet
//! before a pause, a lost NAK, a lost retransmission) waits for the QP's `timeout`, 67 ms
//! for most applications, a hundred thousand packets on a fast path. An RDMA NIC keeps a
//! few packets in flight on a path whose bandwidth-delay product is a few packets, and
//! retransmits on a timer it derives from the round trips it measures; a software requester
//! with a window of hundreds of packets and only the QP's timer falls off a cliff at 1 %
//! loss.
//!
//! This module measures the path one timed packet at a time: a request packet that asks
//! for an acknowledgement and is sent for the first time (never a retransmission, Karn's
//! rule) is timed until the acknowledgement that covers it, which gives a round-trip sample
//! and a delivery-rate sample (the packets acknowledged meanwhile over the time it took).
//! From them it keeps a smoothed round trip and its variation (RFC 6298), the smallest
//! round trip seen lately, and the largest recent delivery rate. The smallest round trip
//! is taken in a probe, as BBR's ProbeRTT does: the first sample (which waited behind the
//! packets the requester sent before it knew the path) and then every ten seconds the window is held at [`PROBE_WINDOW`] packets until a packet sent with no more than
//! that many ahead of it is answered; a round trip taken behind the requester's own queue
//! would give a window that keeps that queue for ever. It derives:
//! - the **window**: packets in flight at most twice the largest rate times the smallest
//!   round trip (IRN's bandwidth-delay-product flow control, with BBR's gain of 2 so the
//!   window can grow when the path is faster than what it was asked to carry), the round
//!   trip lengthened by the largest delay of the last 64 round trips that neither the path
//!   nor a queue explains (a host whose threads share cores answers late now and then).
//!   Once the path lost packets, that allowance is at most a twentieth of the packets
//!   delivered between two losses: go-back-N resends the whole window at each loss, so a
//!   wide window costs its width each time. Never below [`MIN_WINDOW`], never above the
//!   device's `max_unacked_psns`; with AckReq at least every half window, so
//!   acknowledgements clock it. Until the path lost a packet (outside a probe) the window
//!   is the device's: without loss a wide window costs nothing, and a window from round
//!   trips measured on a busy host idles the path whenever a poller answers late;
//! - the **retransmission timeout**, once the path lost a packet (until then the QP's own,
//!   as the window is the device's: a measured timer that expires while a busy peer's
//!   answers are late resends the device's window for nothing; except over a tail of at
//!   most [`TAIL_PACKETS`] in flight, which nothing but a timer finds when it is lost, and
//!   whose needless resend costs a few packets: a ping-pong is all tails, and the QP's
//!   own timer, seconds through rdma_cm, would cost a latency test that much per loss;
//!   such a timer waits twice the measured timeout, since on a path that never lost a
//!   packet a late answer is likelier than a loss, and its expiry is taken for the path's
//!   first loss only once the answer does not show it needless): the smoothed round trip
//!   plus four variations, at least
//!   one and a half times the largest of the last 32 round trips and, for a second, of the
//!   time an answer took that came after a needless expiry (an answer sooner after the
//!   first expiry since the last progress than half the smallest round trip answers
//!   what was sent before: the peer was late,
//!   not the packet lost; counted in `spurious_timeouts`; or, RFC 5682's test, F-RTO:
//!   the first expiry since the last progress in go-back-N resends the oldest
//!   unacknowledged packet alone, asking for an answer, and sends nothing else until
//!   one comes; an answer, or the one right behind it, that acknowledges packets sent
//!   before the expiry and not since shows that the responder, which accepts packets in
//!   order only, had the first copy of the oldest: nothing is resent, and if that answer
//!   took longer after the resend than the timeout, the peer was late; an answer that
//!   acknowledges the resent packet and no more shows it lost, and the requester goes
//!   back N from the next; a second expiry goes back N at once. Without the test a peer
//!   later than the timer's first two expiries was never recognised: by then go-back-N
//!   had resent all it had in flight, and nothing in the late answer told it from the
//!   answer to a resend. After two tests in a row (`FRTO_GIVE_UP`) that found the oldest
//!   lost, the test runs at one expiry in eight (`FRTO_RETEST`) only, until one finds an
//!   expiry needless: on a lossy path nearly every expiry is a loss, and each test
//!   delays going back by a round trip with nothing sent), never
//!   below the device's `min_retransmit_timeout` (the path cannot answer sooner), never above
//!   the QP's `timeout`, doubled for each expiry until a packet is timed again (Karn's
//!   algorithm: progress alone does not end the backoff, since the answers to what a
//!   premature expiry resent would each restart a timer that expires too soon again), and
//!   after going back lengthened by the time what was in flight takes to drain at the
//!   measured rate (it is ahead of the resend on the path). It resends only when an
//!   answer is late: an expiry while no packet in flight asked for one (the endpoint's
//!   rate limiter held the QP after a burst none of whose packets asked) runs the timer
//!   again without resending, until the QP's own timeout (counted in `unasked_timeouts`),
//!   and the first packet that asks after the last progress starts the timer's count
//!   over. An expiry before the
//!   QP's own timeout resends without spending the retry count: the retry count still
//!   counts the QP's timeouts (and sequence-error NAKs), so a QP fails when it would have
//!   without this timer, and never sooner;
//! - the **pacing** of a retransmission: after going back, the packets sent again leave no
//!   faster than the path delivered, in bursts of half a window (at least [`PACE_BURST`]
//!   packets) one burst time at the measured rate apart, instead of all at once into the
//!   queue that just lost a packet. Bursts, not single packets: a software poller that
//!   waits between packets gives its core away (or sleeps) each time, which on a busy host
//!   costs far more than the wait.
//!
//! In selective repeat ([`crate::selective`], between two xroce endpoints only) a random
//! loss costs the lost packets, not the window: the allowance for late answers keeps its
//! full width under random loss, and is held as go-back-N's only after round trips whose
//! resent packets passed [`SELECTIVE_LOSS_TOLERANCE`] of the packets they moved, or an
//! expiry of the timer (a queue that overflows: left wide, the window would keep it
//! overflowing, since nothing else narrows it there); holes are resent at the times this
//! module derives, and round trips are also
//! taken from the first resend of the oldest hole and from a packet a selective
//! acknowledgement shows held.
//!
//! Before the first sample the window is the device's and AckReq every `ack_req_every`
//! packets, exactly as a requester without this module. The timer is the QP's until the
//! peer shows a gap; from then, until the first sample, it is three times the time from
//! the first packet in flight to the gap (a bound on the round trip, taken as RFC 6298
//! takes a first sample), and after going back what was in flight drains at the rate the
//! gap showed: a resend the peer lost is not NAKed again, and under loss the first
//! sample can be long in coming (every packet that asks may follow a loss).
//! Nothing here puts anything new on the wire: the packets are the standard's, only their
//! timing and AckReq bits differ, so rxe and RDMA NICs see ordinary RC traffic.

use core::time::Duration;

use xroce_wire::Psn;

use crate::time::Instant;

/// The fewest packets the window allows in flight once measured: a path whose measured
/// product is smaller still gets this many (round trips measured on a loaded host are
/// noisy, and a window of a few packets would starve on the first hiccup).
pub const MIN_WINDOW: u32 = 16;

/// Packets in flight allowed while the smallest round trip is being measured (a probe):
/// the queue the requester built drains, and a packet sent with at most this many ahead of
/// it measures the path, not the queue. The round trip of a packet that waited behind a
/// queue of its own making would give a window that keeps that queue for ever (every
/// later round trip waits behind it, so no smaller one ever shows).
pub const PROBE_WINDOW: u32 = 4;

/// Packets in flight at most that make a tail: before the path lost a packet the timer is
/// the QP's own, except over a tail, where it is the measured one. A lost tail draws no
/// NAK (nothing follows it), so only a timer finds it, and a latency test's ping-pong is
/// all tails: with the QP's timer each loss would cost its whole timeout (67 ms at code
/// 14, seconds through rdma_cm). A needless expiry of a tail resends no more than this.
pub const TAIL_PACKETS: u32 = MIN_WINDOW;

/// The fewest packets a paced resend sends back to back before it waits (it sends half a
/// window when that is more).
pub const PACE_BURST: u32 = 16;

/// The window is this many times the bandwidth-delay product.
const GAIN: u64 = 2;

/// RFC 5682's test after an expiry is left out once this many tests in a row did not show
/// their expiry needless: on a path that loses packets nearly every expiry is a loss, and
/// each test costs a round trip with nothing sent (and, when the resent packet or its
/// answer is lost too, a backed-off timeout) before going back N.
const FRTO_GIVE_UP: u32 = 2;

/// While the test is left out, every this many expiries still runs it: a peer that
/// became late is found so (the first needless expiry it shows resumes the test).
const FRTO_RETEST: u32 = 8;

/// Delivery-rate samples the largest rate is taken over (one sample per round trip).
const RATE_SAMPLES: usize = 8;

/// Round trips the largest excess is taken over: late answers come every few
/// milliseconds on a busy host, many round trips apart.
const EXCESS_SAMPLES: usize = 64;

/// Round trips the largest recent one is taken over: the retransmission timeout is never
/// below [`LATE_GAIN_EIGHTHS`] eighths of it.
const LATE_SAMPLES: usize = 32;

/// The retransmission timeout is at least this many eighths (1.5 times) of the largest
/// recent round trip, and of the time an answer took that came after a needless expiry:
/// a peer that answered that late once (a slow host, rxe in a busy virtual machine) is not
/// taken for lost when it does so again.
const LATE_GAIN_EIGHTHS: u64 = 12;

/// How long the time a late answer took after a needless expiry holds the timeout up:
/// late answers come seconds apart on some hosts, far more round trips apart than
/// [`LATE_SAMPLES`].
const LATE_LIFETIME: Duration = Duration::from_secs(1);

/// How long the smallest round trip seen is trusted before a probe measures it again (the
/// path may have changed).
const MIN_RTT_LIFETIME: Duration = Duration::from_secs(10);

/// Once the path lost packets, the allowance for late answers is at most the mean number
/// of packets delivered between two losses over this: each loss resends the allowance,
/// so it costs at most this share of what is delivered (a twentieth: 5 %, what leaves
/// 0.95 of the loss-free goodput).
const ALLOWANCE_SHARE: u64 = 20;

/// In selective repeat, a round trip in which the packets resent were more than this many
/// thousandths of the packets it moved is taken for congestion, not random loss: the
/// allowance for late answers is then held as go-back-N's is (a random loss costs the
/// lost packet; a queue that overflows again and again must be given less).
pub const SELECTIVE_LOSS_TOLERANCE: u32 = 100;

/// A round trip's packets count as at least this many when its share of resent packets is
/// judged: a QP that sends a few packets a round trip is no more likely to see its share
/// of random losses doubled than one that sends many.
const SELECTIVE_TOLERANCE_PACKETS: u64 = 64;

/// The largest backoff shift of the retransmission timeout (the QP's timeout caps it
/// anyway).
const MAX_BACKOFF: u32 = 16;

/// When selective repeat resends a hole ([`crate::selective`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HoleTiming {
    /// How long a hole must have been known before it is taken for lost.
    pub(crate) reorder: Duration,
    /// How long after its last resend a hole is resent again.
    pub(crate) again: Duration,
    /// Before the path is measured: `again` doubles at each resend of the hole, up to
    /// this.
    pub(crate) backoff: Option<Duration>,
}

/// After an expiry in go-back-N, RFC 5682's test (F-RTO): the resend stops after the
/// oldest packet until an answer shows whether it was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frto {
    /// No test runs.
    Idle,
    /// The timer expired for the first time since the last progress: the send queue may
    /// resend the oldest unacknowledged packet alone, asking for an answer, without going
    /// back ([`crate::send_queue::SendQueue::probe_oldest`]).
    Armed,
    /// That packet left (its PSN is the one before this), at this time. An answer that
    /// acknowledges this PSN or beyond answers packets sent before the expiry and not
    /// since.
    Sent(Psn, Instant),
    /// The first answer acknowledged that packet and no more: it may answer its first
    /// copy or the resend. The resend waits a moment more for the next answer (RFC
    /// 5682's second step): one that acknowledges beyond shows the expiry needless.
    Answered {
        after: Psn,
        sent: Instant,
        /// The timer's start and latest expiry, and whether it expired more than once.
        armed: Instant,
        expired: Instant,
        again: bool,
    },
}

/// The packet being timed.
#[derive(Clone, Copy, Debug)]
struct Timed {
    /// Its PSN: the sample is taken when the oldest unacknowledged PSN passes it.
    psn: Psn,
    /// When it was sent.
    sent_at: Instant,
    /// The oldest unacknowledged PSN when it was sent: what was acknowledged by the time
    /// its acknowledgement came is the delivery-rate sample.
    acked_before: Psn,
    /// Packets sent and not acknowledged when it left, itself included: at most what it
    /// queued behind (after going back, the packets sent before the resend may still be
    /// on their way, ahead of it).
    ahead: u64,
}

/// What one requester knows of its path and how it recovers from loss (see the module
/// documentation).
#[derive(Clone, Debug)]
pub(crate) struct Recovery {
    timed: Option<Timed>,
    /// Smoothed round trip, nanoseconds; `None` before the first sample.
    srtt: Option<u64>,
    /// Its mean deviation, nanoseconds.
    rttvar: u64,
    /// The smallest round trip seen, nanoseconds, and when (`None` until a probe ended).
    min_rtt: Option<(u64, Instant)>,
    /// The smallest round trip seen since the current probe began, nanoseconds.
    probe_min_rtt: Option<u64>,
    /// The smallest round trip is being measured: the window is [`PROBE_WINDOW`] until a
    /// packet sent with no more than that many ahead of it is answered. From the first
    /// sample on, and again whenever the smallest round trip has lived its time.
    probing: bool,
    /// The latest delivery-rate samples, packets per second (0: none).
    rates: [u64; RATE_SAMPLES],
    /// Of the same samples, what each round trip took beyond what the path explains,
    /// nanoseconds.
    excess: [u64; EXCESS_SAMPLES],
    next_excess: usize,
    next_rate: usize,
    /// Packets in flight allowed (`u32::MAX`: the device's limit, before the first sample
    /// and, outside a probe, until the path lost a packet).
    window: u32,
    /// The retransmission timeout before backoff; `None` before the first sample.
    rto: Option<Duration>,
    /// Expiries of the retransmission timer since the last packet timed (Karn).
    backoff: u32,
    /// The latest round trips, nanoseconds (0: none).
    late: [u64; LATE_SAMPLES],
    next_late: usize,
    /// The largest time an answer took after a needless expiry within the last
    /// [`LATE_LIFETIME`], nanoseconds, and when it came.
    late_answer: Option<(u64, Instant)>,
    /// When the retransmission timer was last started (armed from idle, or restarted by
    /// progress).
    armed_at: Option<Instant>,
    /// Since the last progress the timer expired: when it was started before the first of
    /// those expiries, and when the latest came.
    expired: Option<(Instant, Instant)>,
    /// The timer expired more than once since the last progress: an answer then may be
    /// to what an expiry resent, and the time it took includes the backoff, so it says
    /// nothing of how late the peer answers (taken as one, it would lengthen the timeout,
    /// which lengthens the next such time, until the timeout is the QP's).
    expired_again: bool,
    /// The last progress showed the latest expiry needless.
    spurious: bool,
    /// RFC 5682's test after an expiry (go-back-N only).
    frto: Frto,
    /// A test ran whose expiry has not been shown needless since.
    frto_pending: bool,
    /// Tests in a row that did not show their expiry needless ([`FRTO_GIVE_UP`]).
    frto_useless: u32,
    /// Expiries since the last test, while tests are left out ([`FRTO_RETEST`]).
    frto_skipped: u32,
    /// The last progress showed, by RFC 5682's test, that what the requester had in
    /// flight before the expiry arrived: nothing is resent (the requester never went back).
    forward: bool,
    /// Since the last progress, a tail's timer expired before the path lost a packet: the
    /// progress that follows says whether the tail was lost (then the path has lost one).
    tail_expired: bool,
    /// Packets that were in flight when the requester last went back and that no
    /// progress has shown answered since: they are still ahead of the resend on the path
    /// (the peer drops them, but only once they arrive), so the resend's answer waits for
    /// them to drain.
    drain: u64,
    /// When an expiry spends the retry count: the QP's own timeout after the last progress
    /// (or the last expiry that spent it).
    retry_due: Option<Instant>,
    /// After going back: packets before this PSN are being sent again, and paced.
    resend_until: Option<Psn>,
    /// The next paced packet may not leave before this.
    pace_until: Option<Instant>,
    /// Packets of the current paced burst sent.
    burst: u32,
    /// The peer showed a gap since the last rewind or expiry.
    peer_saw_gap: bool,
    /// Resent packets may be timed (the resend is one the peer asked for).
    time_resends: bool,
    /// The oldest unacknowledged PSN at the last progress.
    acked: Option<Psn>,
    /// Packets acknowledged since the last loss.
    since_loss: u64,
    /// The mean number of packets acknowledged between two losses (`None`: no loss yet).
    loss_interval: Option<u64>,
    /// Before the first sample: a packet sent with nothing in flight ahead of it, and when
    /// (every later packet left after it).
    first_sent: Option<(Psn, Instant)>,
    /// Before the first sample, what the first gap the peer showed says of the path: the
    /// time from [`Recovery::first_sent`] to it, nanoseconds (at least the round trip of
    /// the packet that showed it), and the packets it showed delivered in that time per
    /// second (at most the delivery rate).
    provisional: Option<(u64, u64)>,
    /// The QP is in selective repeat ([`crate::selective`]): a loss costs only the lost
    /// packets, so the window keeps its whole allowance for late answers under loss.
    selective: bool,
    /// Selective repeat: packets resent since the last round-trip sample.
    resent: u64,
    /// Selective repeat: the mean number of packets acknowledged between two round trips
    /// taken for congestion ([`SELECTIVE_LOSS_TOLERANCE`]; `None`: none yet), and the
    /// oldest unacknowledged PSN at the latest.
    congested: Option<(u64, Psn)>,
}

impl Default for Recovery {
    fn default() -> Recovery {
        Recovery {
            timed: None,
            srtt: None,
            rttvar: 0,
            min_rtt: None,
            probe_min_rtt: None,
            probing: true,
            rates: [0; RATE_SAMPLES],
            excess: [0; EXCESS_SAMPLES],
            next_excess: 0,
            next_rate: 0,
            window: u32::MAX,
            rto: None,
            backoff: 0,
            late: [0; LATE_SAMPLES],
            next_late: 0,
            late_answer: None,
            armed_at: None,
            expired: None,
            expired_again: false,
            spurious: false,
            frto: Frto::Idle,
            frto_pending: false,
            frto_useless: 0,
            frto_skipped: 0,
            forward: false,
            tail_expired: false,
            drain: 0,
            retry_due: None,
            resend_until: None,
            pace_until: None,
            burst: 0,
            peer_saw_gap: false,
            time_resends: false,
            acked: None,
            since_loss: 0,
            loss_interval: None,
            first_sent: None,
            provisional: None,
            selective: false,
            resent: 0,
            congested: None,
        }
    }
}

/// A round-trip measurement, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathEstimate {
    /// Smoothed round trip.
    pub srtt: Option<Duration>,
    /// The smallest round trip seen lately.
    pub min_rtt: Option<Duration>,
    /// The largest recent delivery rate, packets per second.
    pub rate: u64,
    /// Packets in flight allowed (`None`: the device's limit; not measured yet, or no
    /// loss yet).
    pub window: Option<u32>,
    /// The retransmission timeout before backoff (`None`: the QP's).
    pub rto: Option<Duration>,
}

impl Recovery {
    /// Forgets everything (the QP was reset or its send queue flushed: the next messages may
    /// go elsewhere).
    pub(crate) fn reset(&mut self) {
        *self = Recovery {
            selective: self.selective,
            ..Recovery::default()
        };
    }

    /// Selective repeat on or off: with it on, random losses no longer narrow the window.
    pub(crate) fn set_selective(&mut self, on: bool) {
        self.selective = on;
        self.resent = 0;
        self.update_window();
    }

    /// The responder showed a gap and, in selective repeat, what it holds beyond it: a
    /// loss (one episode until progress). Nothing goes back, so no resend of going back is
    /// timed.
    pub(crate) fn on_selective_gap(&mut self) {
        self.time_resends = false;
        self.on_loss();
    }

    /// A selective acknowledgement at `now`, `acked` being the oldest unacknowledged PSN:
    /// if it says the packet being timed is held, that packet arrived and was answered
    /// now, a round-trip sample (returns whether one was taken), with what arrived
    /// meanwhile up to the highest held PSN as the delivery-rate sample. Otherwise that
    /// packet stays timed: held later, or acknowledged once the gap before it is filled
    /// (a round trip that then includes the recovery, and is rare: a packet that arrived
    /// is held and said so).
    #[cold]
    #[inline(never)]
    pub(crate) fn on_sacked(&mut self, sack: &xroce_wire::SackRepr, now: Instant) -> bool {
        let Some(timed) = self.timed else {
            return false;
        };
        let held = sack
            .ranges()
            .iter()
            .any(|&(f, l)| timed.psn.distance(f) >= 0 && timed.psn.distance(l) <= 0);
        let Some(&(_, highest)) = sack.ranges().last() else {
            return false;
        };
        if !held {
            return false;
        }
        self.timed = None;
        let rtt = now.saturating_duration_since(timed.sent_at);
        let delivered = highest.next().distance(timed.acked_before).max(0) as u64;
        let taught = self.sample(rtt, delivered, timed.ahead, now);
        if taught {
            self.backoff = 0;
        }
        taught
    }

    /// Selective repeat: how long a hole must have been known before it is taken for lost
    /// (a quarter of the smallest round trip, as RACK waits: packets overtaken on the path
    /// fill theirs sooner), and how long after a resend a hole is resent again (the
    /// smoothed round trip and its variation). Before the path is measured, a hole is
    /// resent again after `floor`, doubled at each resend of it up to `cap` (the QP's
    /// timeout): resent again and again before an answer can come, no resend could be
    /// timed (Karn) and the path would stay unmeasured.
    pub(crate) fn selective_times(&self, floor: Duration, cap: Duration) -> HoleTiming {
        match self.srtt {
            Some(srtt) => {
                let least = self.min_rtt.map_or(srtt, |(m, _)| m);
                let again = srtt.saturating_add(self.rttvar);
                HoleTiming {
                    reorder: Duration::from_nanos(least / 4),
                    again: Duration::from_nanos(again),
                    backoff: None,
                }
            }
            None => HoleTiming {
                reorder: Duration::ZERO,
                again: floor,
                backoff: Some(cap),
            },
        }
    }

    /// Selective repeat resends holes below `sent_high` (exclusive): paced as a resend
    /// after going back is, until new packets follow.
    pub(crate) fn on_selective_resend(&mut self, sent_high: Psn) {
        if self.resend_until.is_none() {
            self.resend_until = Some(sent_high);
            self.burst = 0;
        }
    }

    /// Packets in flight allowed, with `max` the device's limit.
    #[inline]
    pub(crate) fn window(&self, max: u32) -> u32 {
        self.window.min(max)
    }

    /// Whether the path has been measured.
    #[cfg(test)]
    fn measured(&self) -> bool {
        self.srtt.is_some()
    }

    /// The AckReq interval: `every` (rxe's), or half the window when that is less.
    #[inline]
    pub(crate) fn ack_req_every(&self, every: u32, max: u32) -> u32 {
        every.min(self.window(max) / 2).max(1)
    }

    /// A request packet with PSN `psn` left at `now`, `acked` being the oldest
    /// unacknowledged PSN and `sent_high` the PSN after the highest sent before it: timed
    /// if it asks for an acknowledgement, is sent for the first time (or is a resend the
    /// peer asked for) and nothing else is being timed.
    #[inline]
    pub(crate) fn on_sent(
        &mut self,
        psn: Psn,
        ack_req: bool,
        fresh: bool,
        now: Instant,
        acked: Psn,
        sent_high: Psn,
    ) {
        if fresh && psn == acked && self.srtt.is_none() {
            self.first_sent = Some((psn, now));
        }
        if ack_req && (fresh || self.time_resends) && self.timed.is_none() {
            let high = if psn.next().distance(sent_high) > 0 {
                psn.next()
            } else {
                sent_high
            };
            self.timed = Some(Timed {
                psn,
                sent_at: now,
                acked_before: acked,
                ahead: high.distance(acked).max(1) as u64,
            });
        }
    }

    /// Selective repeat resent the hole `psn` at `now` (for the `first` time): timed if
    /// nothing else is and it is the oldest unacknowledged packet (`acked`). The
    /// responder held three packets or more beyond it, so its first copy was lost, not
    /// late, and the answer to the resend comes as soon as the resend arrives; under loss
    /// the holes are what can be timed (a new packet waits behind them).
    pub(crate) fn on_hole_resent(
        &mut self,
        psn: Psn,
        first: bool,
        now: Instant,
        acked: Psn,
        sent_high: Psn,
    ) {
        self.resent += 1;
        // Karn: an answer now may be to the earlier copy.
        if self.timed.is_some_and(|t| t.psn == psn) {
            self.timed = None;
        }
        if !first {
            return;
        }
        // Only the oldest: the answer to a later hole moves nothing until the holes
        // before it are filled, and its round trip would be theirs.
        if self.timed.is_none() && psn == acked {
            self.timed = Some(Timed {
                psn,
                sent_at: now,
                acked_before: acked,
                ahead: sent_high.distance(acked).max(1) as u64,
            });
        }
    }

    /// Every PSN before `acked` is acknowledged at `now`: a sample if the timed packet is
    /// among them (returns whether one was taken). Progress: the backoff ends and the
    /// retry count's deadline moves on (none when `idle`, nothing in flight).
    pub(crate) fn on_progress(
        &mut self,
        acked: Psn,
        now: Instant,
        idle: bool,
        qp_timeout: Option<Duration>,
    ) -> bool {
        if let Some(before) = self.acked {
            self.since_loss = self
                .since_loss
                .saturating_add(acked.distance(before).max(0) as u64);
        }
        self.acked = Some(acked);
        self.drain = 0;
        self.armed_at = Some(now);
        let again = std::mem::take(&mut self.expired_again);
        let frto = std::mem::replace(&mut self.frto, Frto::Idle);
        if let Some((armed, expired)) = self.expired.take() {
            match frto {
                Frto::Sent(after, sent) if acked.distance(after) > 0 => {
                    self.frto_proven(sent, armed, expired, again, now);
                }
                Frto::Sent(after, sent) if acked == after => {
                    if !again {
                        self.on_answer_after_expiry(armed, expired, now);
                    }
                    if !self.spurious {
                        self.frto = Frto::Answered {
                            after,
                            sent,
                            armed,
                            expired,
                            again,
                        };
                        // The next answer of a late peer comes right behind the first.
                        if let Some((min_rtt, _)) = self.min_rtt {
                            self.pace_until = Some(now + Duration::from_nanos(min_rtt / 2));
                        }
                    }
                }
                _ if !again => self.on_answer_after_expiry(armed, expired, now),
                _ => {}
            }
        } else if let Frto::Answered {
            after,
            sent,
            armed,
            expired,
            again,
        } = frto
            && acked.distance(after) > 0
        {
            self.frto_proven(sent, armed, expired, again, now);
        }
        // A tail's expiry the answer did not show needless: the tail was lost, and the
        // path has lost a packet (its timer is the measured one from now on, at once).
        if std::mem::take(&mut self.tail_expired) && !self.spurious {
            self.on_loss();
        }
        self.retry_due = match qp_timeout {
            Some(t) if !idle => Some(now + t),
            _ => None,
        };
        if let Some(until) = self.resend_until
            && acked.distance(until) >= 0
        {
            self.resend_until = None;
            self.pace_until = None;
        }
        let Some(timed) = self.timed.filter(|t| acked.distance(t.psn) > 0) else {
            return false;
        };
        self.timed = None;
        let rtt = now.saturating_duration_since(timed.sent_at);
        let delivered = acked.distance(timed.acked_before).max(0) as u64;
        let taught = self.sample(rtt, delivered, timed.ahead, now);
        if taught {
            // Karn: the backed-off timer is kept until a packet is timed again. Progress
            // alone ends nothing: an expiry a little too soon is followed by the answers
            // to what it resent, and a timer back at its unbacked value would expire
            // again before the next, a little too soon each time, and the resends would
            // kill every timing for ever.
            self.backoff = 0;
        }
        taught
    }

    /// One round-trip sample of `rtt` over which `delivered` packets were acknowledged, of
    /// a packet sent with `in_flight` packets in flight (itself included); returns whether
    /// it taught anything.
    // Out of line: once per round trip, from progress and from a selective
    // acknowledgement; inlined, it made the acknowledgement's path longer for every packet.
    #[inline(never)]
    fn sample(&mut self, rtt: Duration, delivered: u64, in_flight: u64, now: Instant) -> bool {
        let rtt = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX);
        if rtt == 0 {
            // Time did not move (a caller with a frozen clock): nothing learned.
            return false;
        }
        // RFC 6298 2.2 and 2.3.
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                self.rttvar = (3 * self.rttvar + srtt.abs_diff(rtt)) / 4;
                self.srtt = Some((7 * srtt + rtt) / 8);
            }
        }
        self.on_round_trip(rtt, in_flight, now);
        let min_rtt = self.min_rtt.map_or(rtt, |(m, _)| m);
        self.rates[self.next_rate] = delivered.saturating_mul(1_000_000_000) / rtt;
        if self.selective {
            self.judge_round(delivered);
        }
        let rate = self.rate();
        // What the round trip took beyond what the path explains: the smallest round trip,
        // or the time the packets ahead of it took at the path's rate (a queue, ours),
        // whichever is more. A host whose threads share cores answers late now and then;
        // a window of the smallest round trip alone would idle the path each time. The
        // excess of a queue is not counted, so the window does not feed on its own queue.
        let queued = in_flight
            .saturating_mul(1_000_000_000)
            .checked_div(rate)
            .unwrap_or(0);
        self.excess[self.next_excess] = rtt.saturating_sub(min_rtt.max(queued));
        self.next_excess = (self.next_excess + 1) % EXCESS_SAMPLES;
        self.next_rate = (self.next_rate + 1) % RATE_SAMPLES;
        self.update_window();
        self.late[self.next_late] = rtt;
        self.next_late = (self.next_late + 1) % LATE_SAMPLES;
        self.update_rto(now);
        true
    }

    /// The retransmission timeout at `now`: the smoothed round trip plus four variations
    /// (RFC 6298 2.3), at least [`LATE_GAIN_EIGHTHS`] eighths of the largest recent round
    /// trip and of the latest late answer's time.
    fn update_rto(&mut self, now: Instant) {
        let Some(srtt) = self.srtt else {
            return;
        };
        if self
            .late_answer
            .is_some_and(|(_, at)| now.saturating_duration_since(at) >= LATE_LIFETIME)
        {
            self.late_answer = None;
        }
        let largest = self
            .late
            .iter()
            .copied()
            .chain(self.late_answer.map(|(took, _)| took))
            .max()
            .unwrap_or(0);
        let rto = srtt
            .saturating_add(4 * self.rttvar)
            .max(largest.saturating_mul(LATE_GAIN_EIGHTHS) / 8);
        self.rto = Some(Duration::from_nanos(rto));
    }

    /// An expiry of the timer, started at `armed`, was needless, as the progress at `now`
    /// showed: the time that answer took counts as a round trip for the timeout's floor,
    /// so the peer is not taken for lost again when it is as late; and the backoff stays
    /// until a packet is timed again (Karn).
    fn on_needless_expiry(&mut self, armed: Instant, now: Instant) {
        self.spurious = true;
        let took = now.saturating_duration_since(armed);
        let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        // A larger late answer replaces a smaller one; a smaller one neither replaces nor
        // prolongs it (one that prolonged it would hold the timeout up for ever).
        if self.late_answer.is_none_or(|(held, _)| took > held) {
            self.late_answer = Some((took, now));
        }
        self.update_rto(now);
    }

    /// Progress at `now` acknowledged packets sent before the expiry (the timer started at
    /// `armed`, expired at `expired`, more than once if `again`) and not since the oldest
    /// was resent at `sent` (RFC 5682). The responder accepts packets in order only, and
    /// on a path that keeps their order the first copies arrive before any resend: it had
    /// the first copy of the oldest, which was not lost, and nothing need be resent.
    /// Either the peer was late, or its answer was lost and the resend drew it again (a
    /// duplicate is answered with what the responder has): an answer that took longer
    /// after the resend than the timeout is late whatever it answers; one within it may
    /// be the resend's own, and only the timing of a single expiry can still tell.
    #[cold]
    #[inline(never)]
    fn frto_proven(
        &mut self,
        sent: Instant,
        armed: Instant,
        expired: Instant,
        again: bool,
        now: Instant,
    ) {
        self.forward = true;
        self.frto_pending = false;
        self.frto_useless = 0;
        let took = now.saturating_duration_since(sent);
        if self.rto.is_some_and(|rto| took > rto) {
            self.on_needless_expiry(armed, now);
        } else if !again {
            self.on_answer_after_expiry(armed, expired, now);
        }
    }

    /// Whether the last progress showed, by RFC 5682's test, that what was in flight before
    /// the expiry arrived (once): nothing is resent.
    pub(crate) fn take_forward(&mut self) -> bool {
        std::mem::take(&mut self.forward)
    }

    /// Whether RFC 5682's test runs at this expiry: unless the last [`FRTO_GIVE_UP`] tests
    /// were no use, and then at one expiry in [`FRTO_RETEST`].
    fn frto_worth_it(&mut self) -> bool {
        if self.frto_useless < FRTO_GIVE_UP {
            return true;
        }
        self.frto_skipped += 1;
        if self.frto_skipped < FRTO_RETEST {
            return false;
        }
        self.frto_skipped = 0;
        true
    }

    /// Whether the timer expired for the first time since the last progress in go-back-N:
    /// RFC 5682's test may resend the oldest packet alone, instead of going back N at once.
    #[inline]
    pub(crate) fn probe_armed(&self) -> bool {
        self.frto == Frto::Armed
    }

    /// Progress at `now` after the timer, started at `armed`, expired once (at `expired`),
    /// where RFC 5682's test did not show the expiry needless: if the progress came sooner
    /// after the expiry than the path carries a packet and its answer (half the smallest
    /// round trip), it answers what was sent before, and the expiry was needless all the
    /// same (the peer was late, not the packet lost; rxe in a busy virtual machine answers
    /// milliseconds late now and then).
    fn on_answer_after_expiry(&mut self, armed: Instant, expired: Instant, now: Instant) {
        let Some((min_rtt, _)) = self.min_rtt else {
            return;
        };
        let since = now.saturating_duration_since(expired);
        // Half the smallest round trip: that was measured with a packet or two ahead,
        // and the answer to a lone resend can come a little sooner than it (taken for a
        // late peer, it would lengthen the timeout at each tail loss until it is the QP's).
        if u64::try_from(since.as_nanos()).unwrap_or(u64::MAX) >= min_rtt / 2 {
            return;
        }
        self.on_needless_expiry(armed, now);
    }

    /// Whether the last progress showed the latest expiry of the timer needless (once).
    pub(crate) fn take_spurious(&mut self) -> bool {
        std::mem::take(&mut self.spurious)
    }

    /// The smallest round trip, from a round trip of `rtt` of a packet sent with
    /// `in_flight` packets in flight: a probe ends with a packet sent behind no more than
    /// [`PROBE_WINDOW`] (the smallest round trip of the probe is taken); outside a probe a
    /// smaller round trip is taken at once, and one that lived [`MIN_RTT_LIFETIME`] starts a
    /// probe (the path may have changed, and only a drained queue shows it).
    fn on_round_trip(&mut self, rtt: u64, in_flight: u64, now: Instant) {
        if self.probing {
            let least = self.probe_min_rtt.map_or(rtt, |m| m.min(rtt));
            self.probe_min_rtt = Some(least);
            if in_flight <= u64::from(PROBE_WINDOW) {
                self.min_rtt = Some((least, now));
                self.probe_min_rtt = None;
                self.probing = false;
            }
            return;
        }
        match self.min_rtt {
            Some((m, _)) if rtt < m => self.min_rtt = Some((rtt, now)),
            Some((_, at)) if now.saturating_duration_since(at) < MIN_RTT_LIFETIME => {}
            _ => {
                self.probing = true;
                self.probe_min_rtt = Some(rtt);
            }
        }
    }

    /// The window from the largest recent rate, the smallest round trip and the largest
    /// recent excess ([`PROBE_WINDOW`] during a probe; none before the first sample).
    fn update_window(&mut self) {
        if self.probing {
            if self.srtt.is_some() {
                self.window = PROBE_WINDOW;
            }
            return;
        }
        let Some((min_rtt, _)) = self.min_rtt else {
            return;
        };
        let rate = u128::from(self.rate()) * u128::from(GAIN);
        let excess = u128::from(self.excess.iter().copied().max().unwrap_or(0));
        let product = (rate * u128::from(min_rtt)).div_ceil(1_000_000_000);
        let allowance = (rate * excess).div_ceil(1_000_000_000);
        // Until the path lost a packet a wide window costs nothing: the device's.
        let Some(interval) = self.loss_interval else {
            self.window = u32::MAX;
            return;
        };
        // The packets delivered since the last loss count once they are more.
        let interval = interval.max(self.since_loss);
        // In selective repeat a random loss costs the lost packets, not the window: the
        // allowance is held only after round trips that lost more than random loss does.
        let interval = if self.selective {
            match (self.congested, self.acked) {
                (Some((mean, at)), Some(acked)) => mean.max(acked.distance(at).max(0) as u64),
                _ => u64::MAX,
            }
        } else {
            interval
        };
        let allowance = allowance.min(u128::from(interval / ALLOWANCE_SHARE));
        let window = product.saturating_add(allowance);
        self.window = u32::try_from(window).unwrap_or(u32::MAX).max(MIN_WINDOW);
    }

    /// Selective repeat: a round trip ended that acknowledged `delivered` packets; if the
    /// packets resent during it were more than [`SELECTIVE_LOSS_TOLERANCE`] of what it
    /// moved, the path is congested, and the window's allowance is held from now on by the
    /// mean number of packets acknowledged between such round trips.
    #[cold]
    #[inline(never)]
    fn judge_round(&mut self, delivered: u64) {
        let resent = std::mem::take(&mut self.resent);
        let moved = delivered
            .saturating_add(resent)
            .max(SELECTIVE_TOLERANCE_PACKETS);
        if resent.saturating_mul(1000) <= u64::from(SELECTIVE_LOSS_TOLERANCE) * moved {
            return;
        }
        self.congest();
    }

    /// Selective repeat: the path is congested now (see [`Self::judge_round`]).
    fn congest(&mut self) {
        let Some(acked) = self.acked else {
            return;
        };
        let since = match self.congested {
            Some((_, at)) => acked.distance(at).max(0) as u64,
            None => self.since_loss,
        };
        let mean = match self.congested {
            None => since,
            Some((mean, _)) => (3 * mean + since) / 4,
        };
        self.congested = Some((mean, acked));
    }

    /// A loss (the peer showed a gap, or the timer expired): whatever go-back-N has in
    /// flight is resent, so the allowance for late answers is held to a share of the
    /// packets delivered between losses ([`ALLOWANCE_SHARE`]). Without loss a late answer
    /// costs a little idle time; with loss, a wide window costs its whole width at every
    /// loss.
    fn on_loss(&mut self) {
        // Losses before any progress since the last are one episode (a resend lost
        // again, a timer's expiry after a NAK).
        if self.since_loss > 0 || self.loss_interval.is_none() {
            let since = std::mem::take(&mut self.since_loss);
            self.loss_interval = Some(match self.loss_interval {
                None => since,
                Some(mean) => (3 * mean + since) / 4,
            });
        }
        self.update_window();
    }

    /// The largest recent delivery rate, packets per second.
    fn rate(&self) -> u64 {
        self.rates.iter().copied().max().unwrap_or(0)
    }

    /// How long the retransmission timer runs when armed now: the QP's `timeout` until the
    /// path is measured, then the measured timeout at least `floor`, doubled for each expiry
    /// since the last packet timed, plus the time the packets still ahead of a resend take
    /// at the measured rate, at most the QP's timeout.
    #[cfg(test)]
    pub(crate) fn retransmit_after(&self, qp_timeout: Duration, floor: Duration) -> Duration {
        self.retransmit_after_for(qp_timeout, floor, u64::MAX)
    }

    /// [`Recovery::retransmit_after`] with `in_flight` packets in flight: before the path
    /// lost a packet, the measured timer for a tail ([`TAIL_PACKETS`] or fewer).
    pub(crate) fn retransmit_after_for(
        &self,
        qp_timeout: Duration,
        floor: Duration,
        in_flight: u64,
    ) -> Duration {
        let (rto, rate) = match (self.rto, self.provisional) {
            (Some(rto), _) => (rto, self.rate()),
            // Before the first sample, what the first gap showed: the timeout RFC 6298
            // takes from a first sample (three times it), and its rate for the drain.
            (None, Some((rtt, rate))) => (Duration::from_nanos(rtt.saturating_mul(3)), rate),
            (None, None) => return qp_timeout,
        };
        if self.loss_interval.is_none() && in_flight > u64::from(TAIL_PACKETS) {
            // Until the path lost a packet the timer is the QP's, as the window is the
            // device's: a measured timer can expire while a busy peer's answers are late,
            // and that expiry would resend the device's window and narrow it, which a
            // path that loses nothing never needs. A tail is the exception: what a
            // needless expiry resends is a few packets, and a lost tail has nothing else
            // to find it.
            return qp_timeout;
        }
        let drain = self
            .drain
            .saturating_mul(1_000_000_000)
            .checked_div(rate)
            .unwrap_or(0);
        // A tail's timer before the path lost a packet waits twice as long: on a path that
        // never lost one, a late answer is likelier than a loss.
        let shift = self.backoff + u32::from(self.loss_interval.is_none());
        rto.max(floor)
            .saturating_mul(1 << shift.min(MAX_BACKOFF))
            .saturating_add(Duration::from_nanos(drain))
            .min(qp_timeout)
    }

    /// The retransmission timer was armed at `now` with nothing outstanding before: the
    /// retry count's deadline starts.
    pub(crate) fn on_armed(&mut self, now: Instant, qp_timeout: Duration) {
        self.armed_at = Some(now);
        if self.retry_due.is_none() {
            self.retry_due = Some(now + qp_timeout);
        }
    }

    /// The retransmission timer was restarted at `now` for the answer to a packet sent
    /// then, the first that asked for one since the last progress: an answer's time is
    /// counted from there.
    pub(crate) fn on_restarted(&mut self, now: Instant) {
        if self.expired.is_none() {
            self.armed_at = Some(now);
        }
    }

    /// The retransmission timer expired at `now` with no packet in flight asking for an
    /// answer: when it may expire next without resending (none: the QP's own timeout has
    /// passed since the last progress, and the expiry is taken as any other).
    pub(crate) fn unasked_until(&self, now: Instant, wait: Duration) -> Option<Instant> {
        let due = self.retry_due?;
        (now < due).then(|| (now + wait).min(due))
    }

    /// The retransmission timer, armed for a tail before the path lost a packet, expired at
    /// `now` with `in_flight` packets in flight: if that is more than a tail now (the QP
    /// sent on since it was armed), this is no expiry, and the timer runs on until the
    /// QP's own timeout since it was armed (returned).
    pub(crate) fn tail_outgrown(&self, now: Instant, in_flight: u64) -> Option<Instant> {
        if self.loss_interval.is_some() || in_flight <= u64::from(TAIL_PACKETS) {
            return None;
        }
        self.retry_due.filter(|&due| due > now)
    }

    /// The retransmission timer expired at `now`: whether this expiry spends the retry
    /// count (the QP's own timeout has passed since the last progress). Either way the
    /// timer backs off. The expiry of a tail's timer before the path lost a packet is not
    /// taken for a loss yet: it may be a late peer, and a path that loses nothing keeps
    /// the device's window. The answer decides: unless it shows the expiry needless, the
    /// tail was lost.
    pub(crate) fn on_expiry(&mut self, now: Instant, qp_timeout: Duration) -> bool {
        self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
        self.expired_again = self.expired.is_some();
        // The first expiry since the last progress tests whether the oldest was lost
        // (RFC 5682); a second resends everything. A test that ran before and was not
        // shown needless since was no use; after a few such in a row the tests are left
        // out but for one in every few expiries.
        if std::mem::take(&mut self.frto_pending) {
            self.frto_useless = self.frto_useless.saturating_add(1);
        }
        self.frto = if self.selective || self.expired_again || !self.frto_worth_it() {
            Frto::Idle
        } else {
            self.frto_pending = true;
            Frto::Armed
        };
        let armed = self.expired.map_or(self.armed_at, |(armed, _)| Some(armed));
        self.expired = armed.map(|armed| (armed, now));
        self.peer_saw_gap = false;
        let spends = self.retry_due.is_none_or(|due| now >= due);
        if spends || self.loss_interval.is_some() {
            if self.selective {
                self.congest();
            }
            self.on_loss();
        } else {
            self.tail_expired = true;
        }
        if spends {
            self.retry_due = Some(now + qp_timeout);
        }
        spends
    }

    /// An RNR NAK: the peer answered, and the wait that follows is not a loss.
    pub(crate) fn on_rnr(&mut self) {
        self.retry_due = None;
        self.backoff = 0;
    }

    /// The peer showed a gap at the oldest unacknowledged PSN, `acked` (a sequence-error
    /// NAK, or a response after a missing one), at `now`: the resend that follows may be
    /// timed. Before the first sample the gap is the first answer, and the timer is
    /// derived from it until a sample comes (else a lost resend, which the peer does not
    /// NAK again, would wait for the QP's own timeout): the packet that showed the gap
    /// left after [`Recovery::first_sent`], so the time since is at least its round trip,
    /// and the packets from that one to the gap's were delivered within it.
    pub(crate) fn on_gap_shown(&mut self, now: Instant, acked: Psn) {
        self.peer_saw_gap = true;
        self.frto = Frto::Idle;
        if self.srtt.is_none()
            && self.provisional.is_none()
            && let Some((first, at)) = self.first_sent
        {
            let took = now.saturating_duration_since(at);
            let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
            // The packets before the gap, and the one after it that showed it.
            let delivered = acked.distance(first).max(0) as u64 + 1;
            if let Some(rate) = delivered.saturating_mul(1_000_000_000).checked_div(took) {
                self.provisional = Some((took, rate.max(1)));
            }
        }
        self.on_loss();
    }

    /// The requester goes back to resend what it sent from the oldest unacknowledged PSN,
    /// `acked`, up to `sent_high` (exclusive): the timed packet may be resent, so its sample
    /// would be ambiguous (Karn); the resent packets are paced, and their timer waits for
    /// what was in flight to drain first (after a requester sent a device's window at once
    /// the path holds a queue of it, and a timer of the measured round trip alone would
    /// expire before the resend could be answered, again and again). A resend the peer asked for by
    /// showing a gap is timed all the same: the peer dropped every packet after the gap, so
    /// only a resent packet can be acknowledged (under loss, go-back-N resends so often
    /// that fresh packets alone would leave the path unmeasured).
    pub(crate) fn on_rewind(&mut self, acked: Psn, sent_high: Psn) {
        self.timed = None;
        self.drain = sent_high.distance(acked).max(0) as u64;
        if self.selective {
            self.resent = self.resent.saturating_add(self.drain);
        }
        self.time_resends = std::mem::take(&mut self.peer_saw_gap);
        self.resend_until = Some(sent_high);
        self.pace_until = None;
        self.burst = 0;
    }

    /// Whether a packet may leave at `now` (pacing).
    #[inline]
    pub(crate) fn may_send(&self, now: Instant) -> bool {
        self.pace_until.is_none_or(|t| now >= t) && !matches!(self.frto, Frto::Sent(..))
    }

    /// The pacing deadline passed at `now`: it is forgotten, so that it is never reported
    /// as a timer again (the endpoint would run an expired timer for ever).
    pub(crate) fn end_pace(&mut self, now: Instant) {
        if self.pace_until.is_some_and(|t| now >= t) {
            self.pace_until = None;
        }
    }

    /// When pacing lets the next packet go, if it holds one back.
    pub(crate) fn pace_deadline(&self) -> Option<Instant> {
        self.pace_until
    }

    /// Packet `psn` left at `now`: if it is resent during a retransmission and ends a
    /// burst, the next one waits a burst time at the measured rate (`max`: the device's
    /// window).
    #[inline]
    pub(crate) fn pace(&mut self, psn: Psn, now: Instant, max: u32) {
        let Some(until) = self.resend_until else {
            return;
        };
        if psn.distance(until) >= 0 {
            self.resend_until = None;
            self.pace_until = None;
            return;
        }
        let burst = (self.window(max) / 2).max(PACE_BURST);
        self.burst += 1;
        if self.burst < burst {
            return;
        }
        self.burst = 0;
        let burst = u64::from(burst) * 1_000_000_000;
        if let Some(gap) = burst.checked_div(self.rate()) {
            self.pace_until = Some(now + Duration::from_nanos(gap));
        }
    }

    /// RFC 5682's test resent the oldest unacknowledged packet, `psn`, alone at `now`:
    /// nothing else leaves until an answer says whether it was lost (or the timer expires
    /// again). Its answer may be to the first copy: it is not timed (Karn).
    pub(crate) fn on_probe_sent(&mut self, psn: Psn, now: Instant) {
        if self.timed.is_some_and(|t| t.psn == psn) {
            self.timed = None;
        }
        self.frto = Frto::Sent(psn.next(), now);
    }

    /// Whether RFC 5682's test waits a moment after the answer to its resend (the
    /// requester goes back N when it is over, unless an answer beyond comes first).
    #[inline]
    pub(crate) fn probe_answered(&self) -> bool {
        matches!(self.frto, Frto::Answered { .. })
    }

    /// Whether RFC 5682's test is over at `now` without showing the expiry needless: the
    /// answer acknowledged the resent packet and no more, and no answer beyond came in
    /// the moment after. The oldest was lost; the requester goes back N from the next.
    #[inline]
    pub(crate) fn probe_failed(&mut self, now: Instant) -> bool {
        if !matches!(self.frto, Frto::Answered { .. }) || !self.may_send(now) {
            return false;
        }
        self.frto = Frto::Idle;
        self.pace_until = None;
        if std::mem::take(&mut self.frto_pending) {
            self.frto_useless = self.frto_useless.saturating_add(1);
        }
        true
    }

    /// What is known of the path.
    pub(crate) fn estimate(&self) -> PathEstimate {
        PathEstimate {
            srtt: self.srtt.map(Duration::from_nanos),
            min_rtt: self.min_rtt.map(|(m, _)| Duration::from_nanos(m)),
            rate: self.rate(),
            window: (self.window != u32::MAX).then_some(self.window),
            rto: self.rto,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(micros: u64) -> Instant {
        Instant::from_nanos(micros * 1000)
    }

    /// Times packet `psn` sent at `sent` (µs) and acknowledged with everything before
    /// `acked` at `ack` (µs), `before` being the oldest unacknowledged PSN when it left.
    fn round_trip(r: &mut Recovery, psn: u32, before: u32, sent: u64, acked: u32, ack: u64) {
        r.on_sent(
            Psn::new(psn),
            true,
            true,
            at(sent),
            Psn::new(before),
            Psn::new(psn),
        );
        r.on_progress(
            Psn::new(acked),
            at(ack),
            false,
            Some(Duration::from_millis(67)),
        );
    }

    /// Ends the probe that the first sample starts: packet 100, sent at 0 with 4 packets
    /// in flight, acknowledged at 100 µs. The path lost a packet long ago (until the
    /// first loss the window is the device's).
    fn probe(r: &mut Recovery) {
        r.loss_interval = Some(u64::MAX / 8);
        round_trip(r, 100, 97, 0, 101, 100);
        assert!(!r.probing);
    }

    #[test]
    fn until_the_path_lost_a_packet_the_timer_is_the_qps() {
        // Measured (srtt 100 µs), but nothing lost yet: the QP's timeout, as the window
        // is the device's.
        let mut r = Recovery::default();
        round_trip(&mut r, 10, 0, 0, 11, 100);
        let qp = Duration::from_millis(67);
        assert_eq!(r.retransmit_after(qp, Duration::from_micros(10)), qp);
        // The first loss (here, the QP's own timeout) hands it to the measured timer.
        r.on_armed(at(0), qp);
        assert!(
            r.on_expiry(at(67_100), qp),
            "the QP's own timeout spends a retry"
        );
        assert!(r.retransmit_after(qp, Duration::from_micros(10)) < qp);
    }

    #[test]
    fn before_the_path_lost_a_packet_a_tail_has_the_measured_timer() {
        let mut r = Recovery::default();
        round_trip(&mut r, 10, 0, 0, 11, 100);
        let qp = Duration::from_millis(67);
        let floor = Duration::from_micros(10);
        let tail = u64::from(TAIL_PACKETS);
        assert!(r.retransmit_after_for(qp, floor, 1) < qp / 100);
        assert!(r.retransmit_after_for(qp, floor, tail) < qp / 100);
        assert_eq!(r.retransmit_after_for(qp, floor, tail + 1), qp);
        // Armed for a tail; the QP sent on meanwhile: at the tail's expiry the timer runs
        // on to the QP's own timeout since the last progress (at 100 µs), and nothing is
        // taken for lost.
        r.on_armed(at(1_000), qp);
        assert_eq!(r.tail_outgrown(at(2_000), tail + 1), Some(at(67_100)));
        assert_eq!(r.tail_outgrown(at(2_000), tail), None);
        assert_eq!(r.tail_outgrown(at(67_100), tail + 1), None, "the QP's own");
        // The tail's expiry resends without spending the retry count, and is not a loss:
        // the window stays the device's (no loss narrows it), and only a tail has the
        // measured timer.
        assert!(!r.on_expiry(at(2_000), qp));
        assert_eq!(r.loss_interval, None);
        assert_eq!(r.retransmit_after_for(qp, floor, tail + 1), qp);
        // The answer comes a round trip after the resend: the tail was lost, and every
        // flight has the measured timer from now on.
        r.on_progress(Psn::new(12), at(2_100), true, Some(qp));
        assert!(r.loss_interval.is_some());
        assert!(r.retransmit_after_for(qp, floor, tail + 1) < qp);
        assert_eq!(r.tail_outgrown(at(3_000), tail + 1), None);
        // An answer sooner after the expiry than the path allows shows it needless: a late
        // peer, and the path has still lost nothing.
        let mut r = Recovery::default();
        round_trip(&mut r, 10, 9, 0, 11, 100);
        r.on_armed(at(1_000), qp);
        assert!(!r.on_expiry(at(2_000), qp));
        r.on_progress(Psn::new(12), at(2_010), true, Some(qp));
        assert!(r.take_spurious());
        assert_eq!(r.loss_interval, None);
        // A NAK is a loss at once.
        r.on_gap_shown(at(2_020), Psn::new(12));
        assert!(r.retransmit_after_for(qp, floor, tail + 1) < qp);
    }

    #[test]
    fn unmeasured_it_changes_nothing() {
        let r = Recovery::default();
        assert_eq!(r.window(512), 512);
        assert_eq!(r.ack_req_every(66, 512), 66);
        let qp = Duration::from_millis(67);
        assert_eq!(r.retransmit_after(qp, Duration::from_micros(200)), qp);
        assert!(r.may_send(at(0)));
    }

    #[test]
    fn before_the_first_sample_a_gap_gives_the_timer_a_round_trip_and_a_rate() {
        let qp = Duration::from_millis(67);
        let floor = Duration::from_micros(200);
        let mut r = Recovery::default();
        // Packets 0 to 31 leave 10 µs apart, the first with nothing ahead of it. None is
        // answered until a NAK at 100 µs: 0 to 3 arrived, 4 was lost and 5 showed the gap,
        // five packets delivered in 100 µs.
        for psn in 0..32 {
            r.on_sent(
                Psn::new(psn),
                psn % 16 == 15,
                true,
                at(u64::from(psn) * 10),
                Psn::new(0),
                Psn::new(psn),
            );
        }
        assert_eq!(
            r.retransmit_after_for(qp, floor, 32),
            qp,
            "nothing shown yet"
        );
        r.on_progress(Psn::new(4), at(100), false, Some(qp));
        r.on_gap_shown(at(100), Psn::new(4));
        assert_eq!(r.provisional, Some((100_000, 50_000)));
        // Three times the round trip; after going back, plus what was in flight (28
        // packets beyond the gap) drained at the rate shown.
        assert_eq!(
            r.retransmit_after_for(qp, floor, 32),
            Duration::from_micros(300)
        );
        r.on_rewind(Psn::new(4), Psn::new(32));
        assert_eq!(
            r.retransmit_after_for(qp, floor, 32),
            Duration::from_micros(300 + 560)
        );
        // A second gap changes nothing; a sample takes over.
        r.on_gap_shown(at(900), Psn::new(10));
        assert_eq!(r.provisional, Some((100_000, 50_000)));
        round_trip(&mut r, 40, 39, 1000, 41, 1050);
        assert!(r.rto.is_some());
        assert_eq!(
            r.retransmit_after_for(qp, floor, 1),
            r.rto.unwrap().max(floor)
        );
        // Without a packet sent with nothing ahead of it, a gap teaches nothing.
        let mut r = Recovery::default();
        r.on_sent(Psn::new(5), false, true, at(0), Psn::new(3), Psn::new(5));
        r.on_gap_shown(at(100), Psn::new(4));
        assert_eq!(r.provisional, None);
        assert_eq!(r.retransmit_after_for(qp, floor, 32), qp);
    }

    #[test]
    fn the_window_is_twice_the_measured_product_within_its_bounds() {
        let mut r = Recovery::default();
        probe(&mut r);
        assert_eq!(r.window(512), MIN_WINDOW);
        // 100 packets acknowledged over a 100 µs round trip: a million packets a second,
        // a product of 100 packets, a window of 200.
        round_trip(&mut r, 200, 101, 0, 201, 100);
        assert_eq!(r.window(512), 200);
        assert_eq!(r.ack_req_every(66, 512), 66);
        assert_eq!(r.window(150), 150, "never above the device's limit");
        // A slow path: 2 packets over 100 µs is a product of 2; the largest recent rate
        // still holds the window up.
        round_trip(&mut r, 300, 299, 1000, 301, 1100);
        assert_eq!(r.window(512), 200);
        let mut slow = Recovery {
            loss_interval: Some(u64::MAX / 8),
            ..Recovery::default()
        };
        round_trip(&mut slow, 10, 8, 0, 11, 100);
        assert_eq!(slow.window(512), MIN_WINDOW, "never below the minimum");
        assert_eq!(slow.ack_req_every(66, 512), MIN_WINDOW / 2);
    }

    #[test]
    fn a_resend_the_peer_asked_for_is_timed() {
        let mut r = Recovery::default();
        r.on_sent(Psn::new(10), true, true, at(0), Psn::new(0), Psn::new(10));
        // A NAK for PSN 5: the timed packet will be resent, its sample is lost.
        r.on_gap_shown(at(50), Psn::new(5));
        r.on_rewind(Psn::new(11), Psn::new(11));
        r.on_sent(Psn::new(8), true, false, at(100), Psn::new(5), Psn::new(11));
        r.on_progress(Psn::new(9), at(150), false, None);
        assert_eq!(r.estimate().srtt, Some(Duration::from_micros(50)));
        // A rewind on a timeout: resends are not timed.
        r.on_expiry(at(200), Duration::from_millis(1));
        r.on_rewind(Psn::new(11), Psn::new(11));
        r.on_sent(Psn::new(9), true, false, at(300), Psn::new(9), Psn::new(11));
        r.on_progress(Psn::new(10), at(310), false, None);
        assert_eq!(r.estimate().srtt, Some(Duration::from_micros(50)));
    }

    #[test]
    fn late_answers_widen_the_window_and_a_queue_does_not() {
        // 100 packets over 100 µs: a million a second, a window of 200.
        let mut r = Recovery::default();
        probe(&mut r);
        round_trip(&mut r, 200, 101, 0, 201, 100);
        assert_eq!(r.window(4096), 200);
        // 400 in flight answered in 400 µs: a queue of our own making, explained by the
        // rate; the window stays.
        round_trip(&mut r, 700, 301, 1000, 701, 1400);
        assert_eq!(r.window(4096), 200);
        // 50 in flight answered in 300 µs: 200 µs more than the path explains (a late
        // poller); the window covers it.
        round_trip(&mut r, 800, 751, 2000, 801, 2300);
        assert_eq!(r.window(4096), 600);
    }

    #[test]
    fn under_loss_the_allowance_for_late_answers_is_a_share_of_the_packets_between_losses() {
        let qp = Duration::from_millis(67);
        let mut r = Recovery::default();
        probe(&mut r);
        r.loss_interval = None;
        round_trip(&mut r, 200, 101, 0, 201, 100);
        // A late answer (200 µs): 400 packets of allowance on a product of 200; but no
        // loss yet, so the window is the device's.
        round_trip(&mut r, 800, 751, 2000, 801, 2300);
        assert_eq!(r.window(4096), 4096);
        // A loss after 700 packets: the allowance is at most a share of them.
        r.on_gap_shown(at(2300), Psn::new(801));
        let share = ALLOWANCE_SHARE as u32;
        assert_eq!(r.window(4096), 200 + 700 / share);
        // A resend lost again before any progress is the same loss.
        r.on_expiry(at(2400), qp);
        assert_eq!(r.window(4096), 200 + 700 / share);
        // The next loss 100 packets later: the mean interval falls to 550.
        round_trip(&mut r, 900, 851, 3000, 901, 3300);
        r.on_gap_shown(at(3300), Psn::new(901));
        assert_eq!(r.window(4096), 200 + 550 / share);
        // A long stretch without loss gives the allowance back.
        round_trip(&mut r, 30000, 29951, 4000, 30001, 4300);
        assert_eq!(r.window(4096), 600);
    }

    #[test]
    fn in_selective_repeat_only_round_trips_that_lose_more_than_random_loss_hold_the_allowance() {
        let qp = Duration::from_millis(67);
        let mut r = Recovery::default();
        probe(&mut r);
        r.loss_interval = None;
        r.set_selective(true);
        round_trip(&mut r, 200, 101, 0, 201, 100);
        // A late answer (200 µs): 400 packets of allowance on a product of 200.
        round_trip(&mut r, 800, 751, 2000, 801, 2300);
        // A loss: in selective repeat it costs the lost packet, not the allowance.
        r.on_selective_gap();
        assert_eq!(r.window(4096), 600);
        let resend = |r: &mut Recovery, n: u32, acked: u32| {
            for i in 0..n {
                let (hole, high) = (Psn::new(acked + i), Psn::new(acked + 100));
                r.on_hole_resent(hole, false, at(0), Psn::new(acked), high);
            }
        };
        // 3 resent in a round trip that moved 50 (counted as 64): random loss.
        resend(&mut r, 3, 801);
        round_trip(&mut r, 900, 851, 3000, 901, 3300);
        assert_eq!(r.window(4096), 600);
        assert!(r.congested.is_none());
        // 20 resent in a round trip that moved 50: more than a tenth, a queue that
        // overflows. The allowance is held by the 200 packets since the loss, as
        // go-back-N's would be.
        resend(&mut r, 20, 901);
        round_trip(&mut r, 1000, 951, 4000, 1001, 4300);
        let share = ALLOWANCE_SHARE as u32;
        assert_eq!(r.window(4096), 200 + 200 / share);
        // An expiry of the timer is taken for congestion too: none delivered since, the
        // mean falls to 150.
        r.on_expiry(at(4400), qp);
        assert_eq!(r.window(4096), 200 + 150 / share);
        // A long stretch without such a round trip gives the allowance back.
        round_trip(&mut r, 30000, 29951, 5000, 30001, 5300);
        assert_eq!(r.window(4096), 600);
    }

    #[test]
    fn a_round_trip_behind_our_own_queue_is_not_the_smallest() {
        let mut r = Recovery {
            loss_interval: Some(u64::MAX / 8),
            ..Recovery::default()
        };
        // The first sample, behind the device's window of packets sent at once: 400 µs
        // with 400 in flight. It measures the rate (a million a second) but not the path:
        // the window drops to the probe's until the queue drained.
        round_trip(&mut r, 400, 1, 0, 401, 400);
        assert!(r.measured());
        assert_eq!(r.window(512), PROBE_WINDOW);
        assert_eq!(r.estimate().min_rtt, None);
        assert_eq!(r.ack_req_every(66, 512), PROBE_WINDOW / 2);
        // Still behind the queue (10 ahead): still probing.
        round_trip(&mut r, 500, 491, 500, 501, 800);
        assert_eq!(r.window(512), PROBE_WINDOW);
        // Drained: 3 ahead, 20 µs. The path's product is 20 packets, the window 40.
        round_trip(&mut r, 600, 598, 1000, 601, 1020);
        assert_eq!(r.estimate().min_rtt, Some(Duration::from_micros(20)));
        assert_eq!(r.window(512), 40);
        // Round trips behind a queue again (the window's own) leave it there.
        round_trip(&mut r, 700, 661, 2000, 701, 2040);
        assert_eq!(r.window(512), 40);
        assert_eq!(r.estimate().min_rtt, Some(Duration::from_micros(20)));
    }

    /// An expiry of the timer started at `t` µs, with `psn` the oldest unacknowledged
    /// packet; if RFC 5682's test runs, the answer to its resend acknowledges that packet
    /// alone (`lost`: the test is over, the oldest was lost) or beyond it (the expiry was
    /// needless). Returns whether the test ran.
    fn expire(r: &mut Recovery, t: u64, psn: u32, lost: bool) -> bool {
        let qp = Duration::from_millis(67);
        r.on_armed(at(t), qp);
        r.on_expiry(at(t + 500), qp);
        let tested = r.probe_armed();
        if tested {
            r.on_probe_sent(Psn::new(psn), at(t + 500));
            let acked = if lost { psn + 1 } else { psn + 5 };
            r.on_progress(Psn::new(acked), at(t + 600), false, Some(qp));
            if lost {
                assert!(r.probe_failed(at(t + 1000)));
            } else {
                assert!(r.take_forward());
            }
        } else {
            r.on_progress(Psn::new(psn + 5), at(t + 600), false, Some(qp));
        }
        tested
    }

    #[test]
    fn after_tests_that_found_losses_an_expiry_goes_back_at_once_but_now_and_then() {
        let mut r = Recovery::default();
        probe(&mut r);
        let tested: Vec<bool> = (0..20u32)
            .map(|i| expire(&mut r, 1_000 + u64::from(i) * 10_000, 200 + i * 10, true))
            .collect();
        // Two tests that found the oldest lost, then one expiry in eight tests again.
        let runs: Vec<usize> = (0..20).filter(|&i| tested[i]).collect();
        assert_eq!(runs, [0, 1, 9, 17], "{tested:?}");
        // A test that shows its expiry needless (a late peer) brings the tests back.
        let mut i = 20u32;
        while !expire(&mut r, 1_000 + u64::from(i) * 10_000, 200 + i * 10, false) {
            i += 1;
        }
        for j in i + 1..i + 4 {
            assert!(expire(
                &mut r,
                1_000 + u64::from(j) * 10_000,
                200 + j * 10,
                false
            ));
        }
    }

    #[test]
    fn a_smallest_round_trip_that_lived_its_time_is_probed_again() {
        let mut r = Recovery::default();
        probe(&mut r);
        round_trip(&mut r, 200, 101, 200, 201, 300);
        assert_eq!(r.window(512), 200);
        // Ten seconds on, a round trip behind a queue (200 µs, 200 ahead) starts a probe
        // instead of becoming the smallest round trip.
        let later = 10_000_000;
        round_trip(&mut r, 1200, 1001, later, 1201, later + 200);
        assert_eq!(r.window(512), PROBE_WINDOW);
        // The path got longer: 150 µs with 2 ahead.
        round_trip(&mut r, 1300, 1299, later + 300, 1301, later + 450);
        assert_eq!(r.estimate().min_rtt, Some(Duration::from_micros(150)));
        assert_eq!(r.window(512), 300, "twice a million a second times 150 µs");
    }

    #[test]
    fn a_resend_behind_what_was_sent_before_it_widens_nothing() {
        let mut r = Recovery::default();
        probe(&mut r);
        round_trip(&mut r, 200, 101, 0, 201, 100);
        assert_eq!(r.window(512), 200);
        // A NAK for 201 after 400 more were sent: the timed resend of 210 waits behind the
        // 400 still on their way (400 µs at a million a second) and is no late answer.
        r.on_gap_shown(at(100), Psn::new(201));
        r.on_rewind(Psn::new(601), Psn::new(601));
        r.on_sent(
            Psn::new(210),
            true,
            false,
            at(1000),
            Psn::new(201),
            Psn::new(601),
        );
        r.on_progress(Psn::new(211), at(1400), false, None);
        assert_eq!(r.window(512), 200);
    }

    #[test]
    fn a_frozen_clock_measures_nothing_and_a_resend_is_never_timed() {
        let mut r = Recovery::default();
        round_trip(&mut r, 10, 0, 5, 11, 5);
        assert!(!r.measured());
        r.on_sent(Psn::new(20), true, false, at(0), Psn::new(0), Psn::new(21));
        r.on_progress(Psn::new(21), at(50), false, None);
        assert!(!r.measured(), "a retransmitted packet gives no sample");
        r.on_sent(Psn::new(30), true, true, at(0), Psn::new(0), Psn::new(30));
        r.on_rewind(Psn::new(31), Psn::new(31));
        r.on_progress(Psn::new(31), at(50), false, None);
        assert!(!r.measured(), "going back discards the timed packet");
    }

    #[test]
    fn the_timeout_follows_the_round_trip_between_its_floor_and_the_qps() {
        let mut r = Recovery {
            loss_interval: Some(u64::MAX / 8),
            ..Recovery::default()
        };
        round_trip(&mut r, 10, 0, 0, 11, 100);
        // RFC 6298: srtt 100 µs, rttvar 50 µs: 300 µs.
        let qp = Duration::from_millis(67);
        assert_eq!(
            r.retransmit_after(qp, Duration::from_micros(10)),
            Duration::from_micros(300)
        );
        assert_eq!(
            r.retransmit_after(qp, Duration::from_millis(1)),
            Duration::from_millis(1)
        );
        assert_eq!(
            r.retransmit_after(Duration::from_micros(250), Duration::ZERO),
            Duration::from_micros(250)
        );
        // Each expiry doubles it; progress ends the backoff.
        r.on_armed(at(0), qp);
        assert!(!r.on_expiry(at(300), qp));
        assert_eq!(
            r.retransmit_after(qp, Duration::ZERO),
            Duration::from_micros(600)
        );
        assert!(!r.on_expiry(at(900), qp));
        assert_eq!(
            r.retransmit_after(qp, Duration::ZERO),
            Duration::from_micros(1200)
        );
        // Progress alone keeps it (Karn): the answers to what an expiry a little too soon
        // resent would otherwise each restart a timer that expires too soon again.
        r.on_progress(Psn::new(12), at(1000), false, Some(qp));
        assert_eq!(
            r.retransmit_after(qp, Duration::ZERO),
            Duration::from_micros(1200)
        );
        // A packet timed again ends the backoff: 100 µs once more, srtt 100 µs, rttvar
        // 37.5 µs.
        round_trip(&mut r, 20, 12, 1000, 21, 1100);
        assert_eq!(
            r.retransmit_after(qp, Duration::ZERO),
            Duration::from_micros(250)
        );
    }

    #[test]
    fn an_answer_sooner_after_an_expiry_than_the_path_allows_marks_it_needless() {
        let qp = Duration::from_millis(67);
        let mut r = Recovery::default();
        // The smallest round trip: 100 µs.
        probe(&mut r);
        let rto = r.estimate().rto.expect("measured");
        // Armed at 1 ms, expired at 1.3 ms; the answer 200 µs later may be the resend's:
        // nothing is learned.
        r.on_armed(at(1000), qp);
        r.on_expiry(at(1300), qp);
        r.on_progress(Psn::new(102), at(1500), false, Some(qp));
        assert!(!r.take_spurious());
        assert_eq!(r.estimate().rto, Some(rto));
        // Restarted by that progress at 1.5 ms, expired at 2.3 ms, answered 60 µs later:
        // more than half the smallest round trip, which a lone resend's answer may take
        // (the smallest was measured with packets ahead): nothing is learned.
        r.on_expiry(at(2300), qp);
        r.on_progress(Psn::new(103), at(2360), false, Some(qp));
        assert!(!r.take_spurious());
        assert_eq!(r.estimate().rto, Some(rto));
        // Restarted at 2.36 ms, expired at 3.2 ms, answered 40 µs later, sooner than a
        // resend can be: the answer took 880 µs, and the timeout is at least one and a
        // half times that.
        r.on_expiry(at(3200), qp);
        r.on_progress(Psn::new(104), at(3240), false, Some(qp));
        assert!(r.take_spurious());
        assert!(!r.take_spurious(), "once");
        assert_eq!(r.estimate().rto, Some(Duration::from_micros(1320)));
        // A smaller late answer neither replaces nor prolongs it.
        r.on_expiry(at(3700), qp);
        r.on_progress(Psn::new(105), at(3710), false, Some(qp));
        assert!(r.take_spurious());
        assert_eq!(r.estimate().rto, Some(Duration::from_micros(1320)));
        // An answer after a second expiry says nothing of the peer (the backoff is in it).
        r.on_expiry(at(6000), qp);
        r.on_expiry(at(9000), qp);
        r.on_progress(Psn::new(106), at(9010), false, Some(qp));
        assert!(!r.take_spurious());
        assert_eq!(r.estimate().rto, Some(Duration::from_micros(1320)));
        // For a while: a round trip 2 s later has it forgotten.
        round_trip(&mut r, 110, 109, 2_000_000, 111, 2_000_100);
        assert!(r.estimate().rto < Some(Duration::from_micros(1320)));
    }

    #[test]
    fn the_timeout_is_at_least_one_and_a_half_times_the_largest_recent_round_trip() {
        let mut r = Recovery::default();
        probe(&mut r);
        // One round trip of 1 ms among many of 100 µs.
        round_trip(&mut r, 200, 199, 1000, 201, 2000);
        for i in 0..8 {
            round_trip(
                &mut r,
                300 + i,
                299 + i,
                3000 + 200 * i as u64,
                301 + i,
                3100 + 200 * i as u64,
            );
        }
        assert!(r.estimate().rto >= Some(Duration::from_micros(1500)));
        // Forgotten once LATE_SAMPLES round trips followed.
        for i in 0..LATE_SAMPLES as u32 {
            round_trip(
                &mut r,
                400 + i,
                399 + i,
                10_000 + 200 * u64::from(i),
                401 + i,
                10_100 + 200 * u64::from(i),
            );
        }
        assert!(r.estimate().rto < Some(Duration::from_micros(1500)));
    }

    #[test]
    fn a_resend_waits_for_what_was_in_flight_to_drain() {
        // 11 packets delivered in 100 µs: 110 000 a second; the timeout 300 µs.
        let mut r = Recovery {
            loss_interval: Some(u64::MAX / 8),
            ..Recovery::default()
        };
        round_trip(&mut r, 10, 0, 0, 11, 100);
        let qp = Duration::from_millis(67);
        // Going back with 110 packets in flight (from 11 up to 121): they take 1 ms to
        // drain ahead of the resend.
        r.on_rewind(Psn::new(11), Psn::new(121));
        assert_eq!(
            r.retransmit_after(qp, Duration::ZERO),
            Duration::from_micros(1300)
        );
        assert_eq!(
            r.retransmit_after(Duration::from_micros(800), Duration::ZERO),
            Duration::from_micros(800),
            "never beyond the QP's timeout"
        );
        // Progress: what was ahead was answered or dropped.
        r.on_progress(Psn::new(12), at(2000), false, Some(qp));
        assert_eq!(
            r.retransmit_after(qp, Duration::ZERO),
            Duration::from_micros(300)
        );
    }

    #[test]
    fn only_an_expiry_a_qp_timeout_after_progress_spends_the_retry_count() {
        let qp = Duration::from_millis(10);
        let mut r = Recovery::default();
        r.on_armed(at(0), qp);
        assert!(!r.on_expiry(at(1_000), qp));
        assert!(!r.on_expiry(at(9_999), qp));
        assert!(r.on_expiry(at(10_000), qp));
        assert!(!r.on_expiry(at(15_000), qp));
        assert!(r.on_expiry(at(20_000), qp));
        // Progress moves the deadline a QP timeout on.
        r.on_progress(Psn::new(1), at(25_000), false, Some(qp));
        assert!(!r.on_expiry(at(30_000), qp));
        assert!(r.on_expiry(at(35_000), qp));
        // Without a measurement the timer is the QP's: every expiry spends it.
        let mut plain = Recovery::default();
        plain.on_armed(at(0), qp);
        assert!(plain.on_expiry(at(10_000), qp));
        assert!(plain.on_expiry(at(20_000), qp));
    }

    /// Sends the resent packets `from..to` at `now`.
    fn burst(r: &mut Recovery, from: u32, to: u32, now: Instant) {
        for psn in from..to {
            assert!(r.may_send(now), "{psn}");
            r.pace(Psn::new(psn), now, 32);
        }
    }

    #[test]
    fn a_resend_leaves_in_bursts_at_the_measured_rate() {
        let mut r = Recovery::default();
        probe(&mut r);
        // A million packets a second: with a window of 32 (the device's limit here), a
        // burst of 16 every 16 µs.
        round_trip(&mut r, 200, 101, 0, 201, 100);
        r.on_rewind(Psn::new(250), Psn::new(250));
        burst(&mut r, 201, 201 + PACE_BURST - 1, at(200));
        assert!(r.may_send(at(200)), "the burst goes on");
        r.pace(Psn::new(216), at(200), 32);
        assert!(!r.may_send(at(200)));
        assert_eq!(r.pace_deadline(), Some(at(216)));
        assert!(r.may_send(at(216)));
        burst(&mut r, 217, 230, at(216));
        // New packets are not paced; the resend ends there.
        r.pace(Psn::new(250), at(217), 32);
        assert!(r.may_send(at(217)));
        assert_eq!(r.pace_deadline(), None);
    }

    #[test]
    fn a_pacing_deadline_that_passed_is_no_longer_a_timer() {
        let mut r = Recovery::default();
        probe(&mut r);
        round_trip(&mut r, 200, 101, 0, 201, 100);
        r.on_rewind(Psn::new(250), Psn::new(250));
        burst(&mut r, 201, 201 + PACE_BURST, at(200));
        r.end_pace(at(200));
        assert_eq!(r.pace_deadline(), Some(at(216)), "not yet");
        // The QP could not send at the deadline (its window was full, say): the deadline
        // is forgotten, or the endpoint would run it again and again at the same instant.
        r.end_pace(at(216));
        assert_eq!(r.pace_deadline(), None);
        assert!(r.may_send(at(216)));
        // The resend goes on paced.
        burst(&mut r, 217, 217 + PACE_BURST, at(220));
        assert_eq!(r.pace_deadline(), Some(at(236)));
    }
}
