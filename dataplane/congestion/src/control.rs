//! Congestion control for every queue pair of one endpoint, beside the transport as an RDMA
//! NIC's congestion control sits beside its transport engine: it reads the headers of the
//! frames going out and coming in, marks outgoing ones ECN-capable, answers marked ones
//! with CNPs, and tells the transport one thing only: when a queue pair may send again
//! ([`Endpoint::pace`](xroce_transport::Endpoint::pace)).
//!
//! Per queue pair:
//!
//! - **ECN**: data and responses carry ECT(0) only when the queue pair's peer is known to
//!   take part ([`EcnMode::Auto`], the default): once a packet from the peer came
//!   ECN-capable (an xroce endpoint that knows this one, an RDMA NIC with ECN on, an
//!   endpoint with [`EcnMode::On`]) or carried xroce's hello. The hello is a computed UDP
//!   checksum on the first [`HELLO_PACKETS`] packets a queue pair sends to its peer
//!   (requests or answers): RoCEv2 senders (Linux rxe, RDMA NICs) send 0 there and RoCEv2 receivers
//!   ignore it (the ICRC masks it), while any UDP receiver that checks it, Linux's under
//!   rxe included, finds it right. So two xroce endpoints find each other within a round
//!   trip (each from the other's hello: [`Congestion::poll_xroce_peer`]), and toward Linux rxe no ECN bit is ever set and no CNP is ever sent (CE
//!   marks come only on ECN-capable packets): what differs from its own packets is the
//!   checksum of a connection's first packets. A traffic class that asks for ECN bits
//!   itself keeps them.
//! - **Notification point**: a CE-marked packet for a queue pair is counted and answered
//!   with a CNP to the peer QP, at most one per `cnp_interval`.
//! - **Reaction point**: CNPs from the peer drive DCQCN ([`crate::dcqcn`]), each CNP also
//!   bounding DCQCN's rate by what the queue pair sent over the last one to three
//!   milliseconds ([`ReactionPoint::bound_by_sending`]: a rate above what a window lets it
//!   send holds nothing back, and neither does a cut of it). On paths that never mark,
//!   once the queue pair has lost a packet, the delay controller ([`crate::delay`]) sets
//!   the rate from losses alone ([`Algorithm::Auto`]: round-trip times, on a host whose
//!   pollers share cores, say more about the scheduler than about the path), or from
//!   round-trip times and losses ([`Algorithm::Delay`], asked for); once a CNP has come,
//!   DCQCN alone does, until the peer changes. Under `Auto` a queue pair
//!   that neither loses nor sees a mark is not limited.
//! - **Signals from the transport's own traffic**: a round-trip sample is the time from a
//!   request packet that asks for an acknowledgement to the first response covering its
//!   PSN (one sample outstanding at a time), and the PSNs acknowledged between two samples
//!   over the time between them is the rate the path delivered; a loss is the requester
//!   going back (a request whose PSN does not follow the last one sent: go-back-N after a
//!   NAK or a timeout, or any retransmission), but not after an RNR NAK (a busy receiver
//!   is not congestion). The delay controller cuts for it; under [`Algorithm::Auto`]
//!   DCQCN halves the rate for it ([`ReactionPoint::handle_loss`]: a CNP would cut by
//!   alpha, which sparse marks keep small), under [`Algorithm::Dcqcn`] it counts as a CNP.
//!   Not every loss is congestion: in selective repeat a few per cent of a round trip's
//!   packets are tolerated ([`CongestionConfig::loss_tolerance_per_mille`]), and under
//!   `Auto` a go-back-N loss that comes without a rise of the round trip, and seldom, is
//!   taken for random loss ([`CongestionConfig::calm_losses`]).
//! - **Pacing**: the rate feeds the queue pair's token bucket ([`crate::pacer`]), and a
//!   bucket in debt is the instant the transport must hold the queue pair until.
//!
//! UD queue pairs are left alone (their peers are many), and so is every queue pair whose
//! traffic class's DSCP is not in [`CongestionConfig::dscps`].

use core::time::Duration;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

use xroce_transport::Instant;
use xroce_transport::endpoint::NumberHasher;
use xroce_wire::peek::{self, ECN_CE, ECN_ECT0};
use xroce_wire::{Frame, Opcode, Psn, Qpn, Syndrome, Transport};

use crate::cnp::{CnpPath, DEFAULT_CNP_DSCP};
use crate::dcqcn::{DcqcnParams, ReactionPoint};
use crate::delay::{DelayControl, DelayParams, DelayVerdict};
use crate::notification::{DEFAULT_CNP_INTERVAL, NotificationPoint};
use crate::pacer::{DEFAULT_BURST, Pacer};
use crate::rate::Rate;

/// Which controller sets a queue pair's rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Algorithm {
    /// Nothing until the first loss or CNP; from a loss, the delay controller reacting to
    /// losses alone ([`DelayParams::loss_only`]); from a CNP, DCQCN. A path that neither
    /// loses nor marks is not slowed by anything, and round-trip times never slow a flow
    /// (on a host whose pollers share cores they say more about the scheduler than about
    /// the path).
    #[default]
    Auto,
    /// DCQCN alone (a loss counts as a CNP).
    Dcqcn,
    /// The delay controller alone, from the first packet, on round-trip times and losses
    /// (CNPs are ignored).
    Delay,
    /// No congestion control: no pacing, no ECN marks, CNPs ignored.
    Off,
}

/// Whether packets are sent ECN-capable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EcnMode {
    /// ECT(0) toward peers that show they take part (see the module documentation).
    #[default]
    Auto,
    /// ECT(0) on every packet of a queue pair under congestion control.
    On,
    /// Never (CE marks are not answered either).
    Off,
}

/// A set of DSCP values (0..=63).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DscpSet(u64);

impl DscpSet {
    /// Every DSCP.
    pub const ALL: DscpSet = DscpSet(u64::MAX);

    /// No DSCP.
    pub const NONE: DscpSet = DscpSet(0);

    /// The set with `dscp` added.
    pub const fn with(self, dscp: u8) -> DscpSet {
        DscpSet(self.0 | 1 << (dscp & 63))
    }

    /// Whether `dscp` is in the set.
    pub const fn contains(self, dscp: u8) -> bool {
        self.0 & (1 << (dscp & 63)) != 0
    }
}

impl Default for DscpSet {
    fn default() -> DscpSet {
        DscpSet::ALL
    }
}

/// How an endpoint's congestion control behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CongestionConfig {
    /// The rate controller.
    pub algorithm: Algorithm,
    /// ECN marking and CNPs.
    pub ecn: EcnMode,
    /// The port's rate: queue pairs start at it, and a rate at it is no limit.
    pub line_rate: Rate,
    /// DCQCN's parameters.
    pub dcqcn: DcqcnParams,
    /// The delay controller's.
    pub delay: DelayParams,
    /// At most one CNP per queue pair this often.
    pub cnp_interval: Duration,
    /// The DSCP CNPs are sent with.
    pub cnp_dscp: u8,
    /// Queue pairs whose traffic class has one of these DSCPs are under congestion control.
    pub dscps: DscpSet,
    /// The token bucket of each queue pair, in bytes.
    pub burst: u64,
    /// A loss of a queue pair whose peer is xroce is not taken for congestion while the
    /// packets it sent again in the round trip are at most this many per thousand of the
    /// packets it sent in it (counted as at least 256; 0: every loss is). Between xroce
    /// daemons in selective repeat a random loss costs the packet lost, not a window, and
    /// halving the rate for each (once per round trip) is what collapses a path that loses
    /// a percent at random; a queue that overflows loses far more than a few percent of
    /// what its senders send. Never tolerated: a loss within a millisecond (or four round
    /// trips) of a CNP the queue pair handled (that path marks congestion), and three
    /// packets or more lost in a row (a queue that overflows drops runs of what its senders
    /// send; random loss rarely does).
    pub loss_tolerance_per_mille: u32,
    /// Under [`Algorithm::Auto`], a go-back-N loss (any peer; selective repeat has the
    /// tolerance above) that comes without a rise of the round trip, and at most one per
    /// 50 new packets on average, is taken for random loss and cuts nothing (counted in
    /// `cc_losses_tolerated`); `false`: every loss is congestion. Go-back-N resends its
    /// window at every loss whatever the rate: halving the rate as well for each loss
    /// on a path that loses a percent at random cost a WRITE stream two thirds of what
    /// loss recovery alone leaves it. A queue that overflows does so at the top of a
    /// rise of the round trip (or more than a millisecond above the base), and is still
    /// congestion.
    pub calm_losses: bool,
    /// Send xroce's hello and watch for the peer's even when neither ECN nor a rate
    /// controller asks for it: what else the endpoint agrees with an xroce peer (selective
    /// repeat) needs to know who its peer is. [`Congestion::poll_xroce_peer`] tells.
    pub announce: bool,
}

impl CongestionConfig {
    /// The defaults for a port of `line_rate`. DCQCN runs NVIDIA's parameters with the
    /// DCQCN paper's timers ([`DcqcnParams::paper_timers`]): xroce's round trips, between
    /// hosts whose pollers are scheduled threads and behind software switches, are tens of
    /// microseconds at best and a millisecond behind a queue, where NVIDIA's timers (made
    /// for a fabric's few microseconds) forget each CNP before the next arrives.
    pub fn new(line_rate: Rate) -> CongestionConfig {
        CongestionConfig {
            algorithm: Algorithm::Auto,
            ecn: EcnMode::Auto,
            line_rate,
            dcqcn: DcqcnParams::paper_timers(),
            delay: DelayParams::default(),
            cnp_interval: DEFAULT_CNP_INTERVAL,
            cnp_dscp: DEFAULT_CNP_DSCP,
            dscps: DscpSet::ALL,
            burst: DEFAULT_BURST,
            loss_tolerance_per_mille: 0,
            calm_losses: true,
            announce: true,
        }
    }

    /// Nothing at all: no pacing, no marks, no CNPs, no hello.
    pub fn off(line_rate: Rate) -> CongestionConfig {
        CongestionConfig {
            algorithm: Algorithm::Off,
            ecn: EcnMode::Off,
            announce: false,
            ..CongestionConfig::new(line_rate)
        }
    }
}

macro_rules! counters {
    ($name:ident { $( $(#[doc = $doc:literal])* $field:ident ),* $(,)? }) => {
        /// What congestion control did. The names of the first four are mlx5's.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $( $(#[doc = $doc])* pub $field: u64, )*
        }

        impl $name {
            /// `(name, value)` for every counter.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
                [$( (stringify!($field), self.$field), )*].into_iter()
            }

            /// Adds `other` to `self`.
            pub fn add(&mut self, other: &$name) {
                $( self.$field += other.$field; )*
            }
        }
    };
}

counters!(CongestionCounters {
    /// RoCE packets received marked congestion-experienced (ECN CE).
    np_ecn_marked_roce_packets,
    /// CNPs sent for them.
    np_cnp_sent,
    /// CNPs received and acted upon.
    rp_cnp_handled,
    /// CNPs received for a queue pair that does not react to them (no congestion control,
    /// the delay controller alone, or no such queue pair).
    rp_cnp_ignored,
    /// CNPs not sent: their queue pair is gone or has no path back.
    np_cnp_no_path,
    /// Packets sent ECN-capable (ECT(0) set here).
    cc_ect_packets,
    /// Packets sent with xroce's hello (a computed UDP checksum): the first a queue pair
    /// sends to its peer.
    cc_hello_packets,
    /// Queue pairs whose peer showed xroce's hello.
    cc_xroce_peers,
    /// Losses not taken for congestion: in selective repeat, the round trip's packets
    /// sent again within `loss_tolerance_per_mille` of its packets (peer xroce); in
    /// go-back-N, a loss without a rise of the round trip (`calm_losses`).
    cc_losses_tolerated,
    /// Losses taken as congestion (the requester going back to a PSN sent before).
    cc_loss_events,
    /// Rate cuts of the delay controller.
    cc_delay_cuts,
    /// Round-trip samples taken.
    cc_rtt_samples,
    /// Frames after which a queue pair had to wait for its rate.
    cc_paced,
});

/// What [`Congestion::handle_frame`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Pass it to the transport.
    Transport,
    /// It was a CNP, handled here.
    Consumed,
}

/// Which controller has a queue pair's rate now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Controller {
    /// None: nothing limits its rate (no congestion control for this queue pair, or under
    /// [`Algorithm::Auto`] neither a CNP nor a loss yet).
    None,
    /// The delay controller, on round-trip times and losses.
    Delay,
    /// The delay controller on losses alone ([`Algorithm::Auto`] after a loss).
    Loss,
    /// DCQCN.
    Dcqcn,
}

/// A queue pair's congestion state, for `xroced stat --qp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCongestion {
    /// Who sets the rate.
    pub controller: Controller,
    /// The rate, `None` when unlimited.
    pub rate: Option<Rate>,
    /// DCQCN's alpha (in 1/1024ths) while it limits the rate.
    pub alpha: Option<u32>,
    /// What it sent over the last one to three milliseconds (frame bytes), which bounds
    /// DCQCN's rate at each CNP; `None` before a millisecond of sending, or after a pause.
    pub sending: Option<Rate>,
    /// The base round-trip time the delay controller measured.
    pub base_rtt: Option<Duration>,
    /// Whether its packets go out ECN-capable.
    pub ecn_capable: bool,
    /// Whether its peer showed xroce's hello.
    pub peer_xroce: bool,
    /// Its counters.
    pub counters: CongestionCounters,
}

/// The span of each of the two windows [`SendMeter`] measures over.
const METER_SPAN: Duration = Duration::from_millis(1);

/// What a queue pair sent over the last one to three [`METER_SPAN`]s.
#[derive(Clone, Copy, Debug, Default)]
struct SendMeter {
    /// When the current window started, and the bytes sent in it.
    start: Option<Instant>,
    bytes: u64,
    /// The previous window's length and bytes, when it ended where the current began.
    last: Option<(Duration, u64)>,
}

impl SendMeter {
    fn on_sent(&mut self, now: Instant, bytes: u64) {
        match self.start {
            Some(start) if now.saturating_duration_since(start) < METER_SPAN => {}
            Some(start) if now.saturating_duration_since(start) < 2 * METER_SPAN => {
                self.last = Some((now.saturating_duration_since(start), self.bytes));
                self.start = Some(now);
                self.bytes = 0;
            }
            // The first frame, or after a pause: what came before says nothing of now.
            _ => {
                self.last = None;
                self.start = Some(now);
                self.bytes = 0;
            }
        }
        self.bytes += bytes;
    }

    /// The rate sent over the last one to three spans (the current window runs until the
    /// first frame a span or more after its start); `None` before a span has passed, or
    /// after a pause of two (which the next frame takes for one).
    fn rate(&self, now: Instant) -> Option<Rate> {
        let start = self.start?;
        let current = now.saturating_duration_since(start);
        if current >= 2 * METER_SPAN {
            return None;
        }
        let (before, bytes_before) = self.last?;
        let span = (before + current).as_nanos().max(1);
        let bits = u128::from(self.bytes + bytes_before) * 8 * 1_000_000_000 / span;
        Some(Rate::from_bits_per_sec(
            bits.min(u128::from(u64::MAX)) as u64
        ))
    }
}

#[derive(Debug)]
struct QpControl {
    /// The peer QP its packets go to.
    dest_qp: Option<Qpn>,
    enabled: bool,
    /// The peer is known to take part in ECN.
    peer_ecn: bool,
    /// The peer showed xroce's hello.
    peer_xroce: bool,
    /// Hello packets still to send (the first a queue pair sends to its peer say who it is,
    /// whether or not it knows the peer).
    hellos: u8,
    np: NotificationPoint,
    rp: Option<ReactionPoint>,
    delay: DelayControl,
    pacer: Pacer,
    /// The packet whose acknowledgement is the next round-trip sample, when it was sent,
    /// and whether it was its first sending.
    probe: Option<(Psn, Instant, bool)>,
    /// The PSN acknowledged at the last round-trip sample, and when.
    delivered_mark: Option<(Psn, Instant)>,
    /// What it sent lately (DCQCN's rate is bounded by it at each CNP).
    meter: SendMeter,
    /// The length of the last new request frame.
    frame_bytes: u64,
    /// The last request PSN sent, and the highest.
    last_psn: Option<Psn>,
    highest_psn: Option<Psn>,
    rnr: bool,
    /// The current round's start, request packets sent and packets sent again in it (the
    /// loss tolerance's), and the last round trip measured, whoever has the rate.
    round: (Option<Instant>, u64, u64),
    last_rtt: Duration,
    /// The last few round-trip samples (the smallest is the go-back-N loss rule's delay),
    /// their moving average (gain 1/16) and the smallest of a packet sent once.
    recent_rtts: [Duration; CALM_SAMPLES],
    rtt_samples: usize,
    typical_rtt: Duration,
    min_rtt: Option<Duration>,
    /// Credit of the go-back-N loss rule, in new packets sent (see [`CALM_SPACING`]).
    calm_credit: u64,
    /// When the latest CNP for the queue pair was handled.
    last_cnp: Option<Instant>,
    /// The last packet sent again, and how many sent again in a row before it, each the
    /// PSN after the one before (lost in a row).
    last_resent: Option<Psn>,
    resend_run: u32,
    /// The loss that started the current resends was tolerated.
    batch_tolerated: bool,
    /// A loss was seen (under [`Algorithm::Auto`], the delay controller has the rate from
    /// then on, until a CNP).
    lossy: bool,
    counters: CongestionCounters,
}

impl QpControl {
    fn new(config: &CongestionConfig) -> QpControl {
        QpControl {
            dest_qp: None,
            enabled: config.algorithm != Algorithm::Off,
            peer_ecn: false,
            peer_xroce: false,
            hellos: HELLO_PACKETS,
            np: NotificationPoint::default(),
            rp: None,
            delay: DelayControl::new(
                DelayParams {
                    loss_only: config.delay.loss_only || config.algorithm == Algorithm::Auto,
                    ..config.delay
                },
                config.line_rate,
            ),
            pacer: Pacer::new(config.burst),
            probe: None,
            delivered_mark: None,
            meter: SendMeter::default(),
            frame_bytes: 0,
            last_psn: None,
            highest_psn: None,
            rnr: false,
            round: (None, 0, 0),
            last_rtt: Duration::ZERO,
            recent_rtts: [Duration::ZERO; CALM_SAMPLES],
            rtt_samples: 0,
            typical_rtt: Duration::ZERO,
            min_rtt: None,
            calm_credit: CALM_SPACING,
            last_cnp: None,
            last_resent: None,
            resend_run: 0,
            batch_tolerated: false,
            lossy: false,
            counters: CongestionCounters::default(),
        }
    }

    /// A round-trip sample was taken (`last_rtt`), of a packet sent for the first time
    /// (`first`) or again (whose acknowledgement may be the first sending's).
    fn note_rtt(&mut self, first: bool) {
        let rtt = self.last_rtt;
        self.recent_rtts[self.rtt_samples % CALM_SAMPLES] = rtt;
        self.typical_rtt = if self.rtt_samples == 0 {
            rtt
        } else {
            (self.typical_rtt * 15 + rtt) / 16
        };
        self.rtt_samples += 1;
        if first {
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
    }

    /// Whether a go-back-N loss is taken for a random one, not for congestion: the round
    /// trip did not rise before it (the smallest of the last [`CALM_SAMPLES`] within half
    /// as much again as their moving average, and within [`CALM_CEILING`] of the base),
    /// and losses are rare (at most one per [`CALM_SPACING`] new packets, on average).
    /// Spends the credit if so.
    ///
    /// A queue that overflows does so at the top of a rise: the senders filled it faster
    /// than it drains, and the round trips grew with it. Random loss comes at any round
    /// trip, and on a host whose pollers share cores the round trip under load is many
    /// times the base without any queue: the rise, not the height, is the signal.
    fn calm_loss(&mut self) -> bool {
        let n = self.rtt_samples.min(CALM_SAMPLES);
        let (Some(recent), Some(base)) =
            (self.recent_rtts[..n].iter().copied().min(), self.min_rtt)
        else {
            return false;
        };
        let risen = recent > self.typical_rtt + self.typical_rtt / 2;
        let deep = recent > base + base.max(CALM_CEILING);
        if risen || deep || self.calm_credit < CALM_SPACING {
            return false;
        }
        self.calm_credit -= CALM_SPACING;
        true
    }

    fn controller(&self, algorithm: Algorithm) -> Controller {
        if !self.enabled {
            return Controller::None;
        }
        match algorithm {
            Algorithm::Off => Controller::None,
            Algorithm::Dcqcn => Controller::Dcqcn,
            Algorithm::Delay => Controller::Delay,
            Algorithm::Auto if self.rp.is_some() => Controller::Dcqcn,
            Algorithm::Auto if self.lossy => Controller::Loss,
            Algorithm::Auto => Controller::None,
        }
    }
}

/// Round-trip samples whose smallest is the go-back-N loss rule's delay (one sample may be
/// a host's hiccup; a queue lasts).
const CALM_SAMPLES: usize = 4;
/// A go-back-N loss is congestion when the round trip is more than this much above the
/// base (or the base itself, when longer), whatever else: a queue that deep overflowed.
const CALM_CEILING: Duration = Duration::from_millis(1);
/// New packets per loss the go-back-N loss rule takes for random loss, on average.
const CALM_SPACING: u64 = 50;
/// The most credit it keeps (three losses close together).
const CALM_CREDIT: u64 = 3 * CALM_SPACING;

/// The loss tolerance counts a round as at least this many packets. A share of a few
/// dozen packets cannot tell random loss from a queue that overflows: at 5 % random loss a
/// round of 64 has 3.2 losses on average and passes a tolerance of 10 % (6.4) in about one
/// round in twenty, while selective repeat's resends come in batches (an acknowledgement
/// shows many holes at once), which makes such rounds commoner still. Over 256 the same
/// tolerance is 3.6 standard deviations above 5 %. A queue that overflows is still found
/// at once by its runs of losses ([`BURST_LOSSES`]) and by CNPs.
const TOLERANCE_PACKETS: u64 = 256;

/// Packets lost in a row (resent one after the other, each the PSN after the one before)
/// that make a loss congestion whatever its share: a queue that overflows drops a run of
/// what its senders send (every packet that arrives while it is full), random loss rarely
/// (at 5 % random loss, one loss in 400 starts such a run).
const BURST_LOSSES: u32 = 3;

/// A queue pair that handled a CNP within this long (or four round trips, when that is
/// longer) is on a path that marks congestion: no loss is tolerated on it.
const CNP_MEMORY: Duration = Duration::from_millis(1);

/// Packets of a queue pair that carry xroce's hello (a computed UDP checksum): the first
/// it sends to its peer.
pub const HELLO_PACKETS: u8 = 8;

/// Whether a packet from the wire shows that its sender takes part in ECN: it is
/// ECN-capable, or carries xroce's hello (checked only while the peer is not known).
fn shows_ecn(frame: &[u8], p: &peek::Peek) -> bool {
    p.ecn != 0 || peek::has_udp_checksum(frame, p)
}

type NumberMap<V> = HashMap<u32, V, core::hash::BuildHasherDefault<NumberHasher>>;

/// Congestion control for the queue pairs of one endpoint.
#[derive(Debug)]
pub struct Congestion {
    config: CongestionConfig,
    qps: NumberMap<QpControl>,
    /// QPs owed a CNP, in order.
    cnps: VecDeque<u32>,
    /// QPs whose peer just showed xroce's hello, in order.
    xroce_peers: VecDeque<u32>,
    counters: CongestionCounters,
}

impl Congestion {
    /// Congestion control as `config` says.
    pub fn new(config: CongestionConfig) -> Congestion {
        Congestion {
            config,
            qps: NumberMap::default(),
            cnps: VecDeque::new(),
            xroce_peers: VecDeque::new(),
            counters: CongestionCounters::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CongestionConfig {
        &self.config
    }

    /// The counters.
    pub fn counters(&self) -> &CongestionCounters {
        &self.counters
    }

    fn idle(&self) -> bool {
        self.config.algorithm == Algorithm::Off
            && self.config.ecn == EcnMode::Off
            && !self.config.announce
    }

    /// A queue pair whose peer has just shown xroce's hello (each once, until the queue pair
    /// is reset and connected again).
    pub fn poll_xroce_peer(&mut self) -> Option<Qpn> {
        self.xroce_peers.pop_front().map(Qpn::new)
    }

    /// A frame arrived, before the transport sees it. `exists` says whether the endpoint
    /// has a queue pair (state is made only for those).
    pub fn handle_frame(
        &mut self,
        now: Instant,
        frame: &[u8],
        exists: impl FnOnce(Qpn) -> bool,
    ) -> Arrival {
        if self.idle() {
            return Arrival::Transport;
        }
        let Some(p) = peek::peek(frame) else {
            return Arrival::Transport;
        };
        let qpn = p.dest_qp.value();
        if p.opcode == Opcode::CNP {
            // A CNP that does not verify goes to the transport, which counts it.
            if Frame::parse(frame).is_err() {
                return Arrival::Transport;
            }
            let algorithm = self.config.algorithm;
            let reacts = matches!(algorithm, Algorithm::Auto | Algorithm::Dcqcn);
            match self.qps.get_mut(&qpn) {
                Some(qc) if qc.enabled && reacts => {
                    self.counters.rp_cnp_handled += 1;
                    qc.counters.rp_cnp_handled += 1;
                    qc.last_cnp = Some(now);
                    // Under Auto, DCQCN takes over from the delay controller's rate.
                    let held_at = match algorithm {
                        Algorithm::Auto => qc.delay.rate(now),
                        _ => Rate::from_bits_per_sec(u64::MAX),
                    };
                    let (params, line) = (self.config.dcqcn, self.config.line_rate);
                    let rp = qc
                        .rp
                        .get_or_insert_with(|| ReactionPoint::new(params, line));
                    rp.handle_cnp_below(now, held_at);
                    if let Some(sending) = qc.meter.rate(now) {
                        rp.bound_by_sending(now, sending);
                    }
                }
                Some(qc) => {
                    self.counters.rp_cnp_ignored += 1;
                    qc.counters.rp_cnp_ignored += 1;
                }
                None => self.counters.rp_cnp_ignored += 1,
            }
            return Arrival::Consumed;
        }
        let info = p.opcode.info();
        if !matches!(info.transport, Transport::Rc | Transport::Uc) {
            return Arrival::Transport;
        }
        let qc = match self.qps.entry(qpn) {
            Entry::Occupied(e) => e.into_mut(),
            // Only a packet from a peer that takes part makes state for a QP that has sent
            // nothing yet (a responder learning that its peer takes part).
            Entry::Vacant(v) if shows_ecn(frame, &p) && exists(p.dest_qp) => {
                let qc = v.insert(QpControl::new(&self.config));
                qc.peer_ecn = true;
                qc
            }
            Entry::Vacant(_) => return Arrival::Transport,
        };
        if !qc.peer_xroce {
            // The checksum is computed only while the peer is not known to be xroce, and
            // only when the packet has one (RoCEv2 senders send 0).
            if peek::has_udp_checksum(frame, &p) {
                qc.peer_xroce = true;
                qc.peer_ecn = true;
                self.counters.cc_xroce_peers += 1;
                qc.counters.cc_xroce_peers += 1;
                self.xroce_peers.push_back(qpn);
            } else if !qc.peer_ecn && p.ecn != 0 {
                qc.peer_ecn = true;
            }
        } else if !qc.peer_ecn && p.ecn != 0 {
            qc.peer_ecn = true;
        }
        if p.ecn == ECN_CE && self.config.ecn != EcnMode::Off && Frame::parse(frame).is_ok() {
            self.counters.np_ecn_marked_roce_packets += 1;
            qc.counters.np_ecn_marked_roce_packets += 1;
            if qc.np.on_marked(now, self.config.cnp_interval) {
                self.cnps.push_back(qpn);
            }
        }
        if info.transport == Transport::Rc && info.is_response() {
            if matches!(p.syndrome, Some(Syndrome::RnrNak { .. })) {
                qc.rnr = true;
            }
            let acked = !matches!(
                p.syndrome,
                Some(Syndrome::Nak(_) | Syndrome::RnrNak { .. } | Syndrome::Reserved(_))
            );
            if let Some((psn, sent, first)) = qc.probe
                && acked
                && !p.psn.precedes(psn)
            {
                qc.probe = None;
                qc.last_rtt = now.saturating_duration_since(sent);
                qc.note_rtt(first);
                if matches!(
                    qc.controller(self.config.algorithm),
                    Controller::Delay | Controller::Loss
                ) {
                    if let Some((from, then)) = qc.delivered_mark
                        && let Ok(packets) = u64::try_from(p.psn.distance(from))
                        && packets > 0
                        && now > then
                    {
                        let bits = u128::from(packets * qc.frame_bytes * 8) * 1_000_000_000;
                        let rate = bits / u128::from((now - then).as_nanos().max(1) as u64);
                        qc.delay.on_delivered(Rate::from_bits_per_sec(
                            rate.min(u128::from(u64::MAX)) as u64,
                        ));
                    }
                    qc.delivered_mark = Some((p.psn, now));
                    self.counters.cc_rtt_samples += 1;
                    qc.counters.cc_rtt_samples += 1;
                    if qc.delay.on_rtt(now, now - sent) == DelayVerdict::Cut {
                        self.counters.cc_delay_cuts += 1;
                        qc.counters.cc_delay_cuts += 1;
                    }
                }
            }
        }
        Arrival::Transport
    }

    /// The transport sent `frame` for queue pair `qpn` at `now` (before it leaves: its ECN
    /// bits may be set here). Returns the instant before which the queue pair must not send
    /// again, if its rate says so.
    pub fn on_transmit(&mut self, now: Instant, qpn: Qpn, frame: &mut [u8]) -> Option<Instant> {
        if self.idle() {
            return None;
        }
        let p = peek::peek(frame)?;
        let info = p.opcode.info();
        if !matches!(info.transport, Transport::Rc | Transport::Uc) {
            return None;
        }
        let config = &self.config;
        let qc = self
            .qps
            .entry(qpn.value())
            .or_insert_with(|| QpControl::new(config));
        match qc.dest_qp {
            Some(peer) if peer == p.dest_qp => {}
            // Made by arrivals before its first frame: what they said stands.
            None => qc.dest_qp = Some(p.dest_qp),
            Some(_) => {
                // A new peer (the QP was reset and connected again): start over.
                let counters = qc.counters;
                *qc = QpControl::new(config);
                qc.counters = counters;
                qc.dest_qp = Some(p.dest_qp);
            }
        }
        qc.enabled = config.algorithm != Algorithm::Off && config.dscps.contains(p.dscp);
        let mark = qc.enabled
            && p.ecn == 0
            && match config.ecn {
                EcnMode::On => true,
                EcnMode::Off => false,
                EcnMode::Auto => qc.peer_ecn,
            };
        let hello = (qc.enabled && config.ecn == EcnMode::Auto) || config.announce;
        if hello && qc.hellos > 0 {
            qc.hellos -= 1;
            peek::fill_udp_checksum(frame, &p);
            self.counters.cc_hello_packets += 1;
            qc.counters.cc_hello_packets += 1;
        }
        if mark {
            peek::set_ecn(frame, &p, ECN_ECT0);
            self.counters.cc_ect_packets += 1;
            qc.counters.cc_ect_packets += 1;
        }
        if !qc.enabled {
            return None;
        }
        if info.transport == Transport::Rc && info.is_request() {
            // The round the loss tolerance counts in: the last round trip measured, at least
            // 100 µs.
            let length = qc.last_rtt.max(Duration::from_micros(100));
            match qc.round.0 {
                Some(start) if now.saturating_duration_since(start) < length => {}
                _ => qc.round = (Some(now), 0, 0),
            }
            qc.round.1 += 1;
            let went_back = qc.last_psn.is_some_and(|last| !last.precedes(p.psn));
            qc.last_psn = Some(p.psn);
            let new = qc.highest_psn.is_none_or(|h| h.precedes(p.psn));
            if new {
                qc.highest_psn = Some(p.psn);
                qc.frame_bytes = frame.len() as u64;
                qc.calm_credit = (qc.calm_credit + 1).min(CALM_CREDIT);
            }
            let mut burst = false;
            if !new {
                // Sent before: one packet more the path lost (or was thought to).
                qc.round.2 += 1;
                let follows = qc.last_resent.is_some_and(|l| l.next() == p.psn);
                qc.resend_run = if !went_back && follows {
                    qc.resend_run.saturating_add(1)
                } else {
                    1
                };
                qc.last_resent = Some(p.psn);
                burst = qc.resend_run == BURST_LOSSES;
            }
            if went_back {
                qc.probe = None;
                // Over at least TOLERANCE_PACKETS: a queue pair already slowed sends few
                // packets a round, and one loss among them is no larger a share of what
                // the path loses at random.
                // A loss on a path that marks congestion (a CNP within the last few
                // round trips) is congestion, whatever its share.
                let marking = qc.last_cnp.is_some_and(|at| {
                    now.saturating_duration_since(at) < (4 * qc.last_rtt).max(CNP_MEMORY)
                });
                let selective = qc.peer_xroce && config.loss_tolerance_per_mille > 0;
                let tolerated = if selective {
                    !marking
                        && qc.round.2 * 1000
                            <= u64::from(config.loss_tolerance_per_mille)
                                * qc.round.1.max(TOLERANCE_PACKETS)
                } else {
                    !marking
                        && config.calm_losses
                        && config.algorithm == Algorithm::Auto
                        && qc.calm_loss()
                };
                if qc.rnr {
                    qc.rnr = false;
                    qc.batch_tolerated = false;
                } else if tolerated {
                    self.counters.cc_losses_tolerated += 1;
                    qc.counters.cc_losses_tolerated += 1;
                    qc.batch_tolerated = true;
                } else {
                    qc.batch_tolerated = false;
                    loss_event(qc, &mut self.counters, config, now);
                }
            } else if burst
                && qc.batch_tolerated
                && qc.peer_xroce
                && config.loss_tolerance_per_mille > 0
            {
                // The resends of this going back are of consecutive packets: a queue that
                // overflowed drops a run of what its senders send, random loss rarely does.
                qc.batch_tolerated = false;
                loss_event(qc, &mut self.counters, config, now);
            } else if p.ack_request && qc.probe.is_none() {
                // Retransmissions too: go-back-N discards what followed a loss, so their
                // acknowledgements are theirs (and without them a lossy flow has no
                // samples, the signal it needs most).
                qc.probe = Some((p.psn, now, new));
            }
        }
        let bytes = frame.len() as u64;
        qc.meter.on_sent(now, bytes);
        let rate = match qc.controller(config.algorithm) {
            Controller::Dcqcn => match &mut qc.rp {
                Some(rp) => {
                    rp.on_sent(now, bytes);
                    rp.rate(now)
                }
                None => config.line_rate,
            },
            Controller::Delay | Controller::Loss => qc.delay.rate(now),
            Controller::None => config.line_rate,
        };
        let limit = if rate >= config.line_rate {
            Rate::ZERO
        } else {
            rate
        };
        let next = qc.pacer.on_sent(now, bytes, limit);
        if next.is_some() {
            self.counters.cc_paced += 1;
            qc.counters.cc_paced += 1;
        }
        next
    }

    /// Whether CNPs wait to be sent.
    pub fn has_cnp(&self) -> bool {
        !self.cnps.is_empty()
    }

    /// Writes the next CNP into `buf` (a frame of at least 128 bytes) and returns its
    /// length. `path` gives a queue pair's way back to its peer ([`CnpPath::of`]).
    pub fn poll_cnp(
        &mut self,
        buf: &mut [u8],
        mut path: impl FnMut(Qpn) -> Option<CnpPath>,
    ) -> Option<usize> {
        while let Some(qpn) = self.cnps.pop_front() {
            let emitted = path(Qpn::new(qpn)).and_then(|p| p.emit(buf, self.config.cnp_dscp).ok());
            match emitted {
                Some(n) => {
                    self.counters.np_cnp_sent += 1;
                    if let Some(qc) = self.qps.get_mut(&qpn) {
                        qc.counters.np_cnp_sent += 1;
                    }
                    return Some(n);
                }
                None => self.counters.np_cnp_no_path += 1,
            }
        }
        None
    }

    /// Forgets a queue pair (destroyed).
    pub fn remove_qp(&mut self, qpn: Qpn) {
        self.qps.remove(&qpn.value());
        self.cnps.retain(|&q| q != qpn.value());
        self.xroce_peers.retain(|&q| q != qpn.value());
    }

    /// A queue pair's congestion state at `now`, if it has any.
    pub fn qp(&mut self, qpn: Qpn, now: Instant) -> Option<QpCongestion> {
        let algorithm = self.config.algorithm;
        let line = self.config.line_rate;
        let qc = self.qps.get_mut(&qpn.value())?;
        let controller = qc.controller(algorithm);
        let (rate, alpha) = match controller {
            Controller::Dcqcn => match &mut qc.rp {
                Some(rp) => (rp.rate(now), rp.state().map(|(a, _)| a)),
                None => (line, None),
            },
            Controller::Delay | Controller::Loss => (qc.delay.rate(now), None),
            Controller::None => (line, None),
        };
        let ecn_capable = qc.enabled
            && match self.config.ecn {
                EcnMode::On => true,
                EcnMode::Off => false,
                EcnMode::Auto => qc.peer_ecn,
            };
        Some(QpCongestion {
            controller,
            rate: (rate < line).then_some(rate),
            alpha,
            sending: qc.meter.rate(now),
            base_rtt: qc.delay.base_rtt(),
            ecn_capable,
            peer_xroce: qc.peer_xroce,
            counters: qc.counters,
        })
    }

    /// The number of queue pairs with state.
    pub fn len(&self) -> usize {
        self.qps.len()
    }

    /// Whether no queue pair has state.
    pub fn is_empty(&self) -> bool {
        self.qps.is_empty()
    }
}

/// A loss taken for congestion: the controller that has the queue pair's rate cuts it.
fn loss_event(
    qc: &mut QpControl,
    counters: &mut CongestionCounters,
    config: &CongestionConfig,
    now: Instant,
) {
    counters.cc_loss_events += 1;
    qc.counters.cc_loss_events += 1;
    qc.lossy = true;
    match qc.controller(config.algorithm) {
        Controller::Dcqcn => {
            let (params, line) = (config.dcqcn, config.line_rate);
            let rp = qc
                .rp
                .get_or_insert_with(|| ReactionPoint::new(params, line));
            // Under Auto a loss halves the rate whoever has it; DCQCN alone takes it as a
            // CNP.
            if config.algorithm == Algorithm::Auto {
                rp.handle_loss(now);
            } else {
                rp.handle_cnp(now);
            }
        }
        Controller::Delay | Controller::Loss => {
            if qc.delay.on_loss(now) {
                counters.cc_delay_cuts += 1;
                qc.counters.cc_delay_cuts += 1;
            }
        }
        Controller::None => {}
    }
}
