//! Selective repeat between two xroce endpoints: the responder keeps request packets that
//! arrive ahead of a gap instead of discarding them, and tells the requester which it
//! holds; the requester resends only the packets the responder does not hold.
//!
//! Go-back-N, the standard's recovery, resends everything sent after a lost packet: what
//! one loss costs is the window. [`recovery`](crate::recovery) keeps that window close to
//! what the path needs, which is all a standard peer allows. Between two xroce endpoints a
//! loss can cost only the lost packets.
//!
//! **The wire.** A responder in selective repeat answers a request packet ahead of the PSN
//! it expects with a PSN sequence error NAK exactly as the standard has it (the expected PSN
//! in the BTH, the NAK code in the AETH), followed by xroce's selective acknowledgement
//! ([`xroce_wire::sack`]): the first PSN ranges it holds beyond the gap, in PSN order, up
//! to thirty, and how far beyond the last of them the highest PSN it holds lies (4 + 8 ×
//! ranges bytes, so no pad; version 1 of the format, eight ranges at most and nothing
//! beyond, when that says everything). A held READ request covers the PSNs of all its
//! responses. A daemon from before version 2 takes one that needed it for malformed
//! (`sr_sack_malformed`) and finds those holes on its timer: run one version on both
//! ends. The NAK is sent for the first three packets held beyond a gap, for every
//! packet that fills a hole below the highest held (a resend), for every eighth packet
//! beyond the highest reported (a NAK per packet would answer a window packet for packet),
//! and after a packet filled the gap while others remain held (the next gap: without it the
//! requester would know of nothing held beyond that gap, and only its timer would resend
//! it), always as the store is when it leaves (one waiting is not queued twice); a resend
//! that leaves nothing held is acknowledged at once.
//!
//! **How the two ends agree.** Selective repeat is a per-QP switch, off by default
//! ([`Endpoint::set_selective_repeat`](crate::Endpoint::set_selective_repeat)). The engine
//! turns it on, on both ends of a connection, once it knows the peer QP is served by an
//! xroce daemon that advertised it; a standard peer (rxe, an RDMA NIC) never has it on,
//! so it never receives a selective acknowledgement and never sees anything but standard
//! RC traffic. With the switch off a QP sends nothing new and takes a selective
//! acknowledgement for the PSN sequence error NAK it is, its ranges ignored
//! (`sr_naks_taken_as_standard`, and `rcvd_seq_err`); any other ACKNOWLEDGE that carries
//! bytes after its AETH is dropped as malformed (`rcvd_malformed`), as before. So if only
//! one end has it on, the connection stays correct and recovers as go-back-N does: a
//! requester in go-back-N facing a responder in selective repeat goes back N on its NAKs,
//! and what it resends is either a gap the responder fills or a duplicate (of a packet
//! already executed, answered as the standard says, or of one held, dropped); a requester
//! in selective repeat facing a standard responder never receives a selective
//! acknowledgement and goes back N as the standard does.
//!
//! **The responder** (`ReorderStore`) copies a packet ahead of the expected PSN into a
//! store bounded in packets and bytes ([`Limits::max_held_packets`],
//! [`Limits::max_held_bytes`]), and in bytes with every other store of its endpoint
//! ([`Limits::max_endpoint_held_bytes`], 64 MiB: a thousand QPs on a lossy path would
//! hold gigabytes otherwise; `held_bytes` in the endpoint's diagnostics): one that does
//! not fit is dropped
//! (`sr_held_dropped_full`) and is resent as a gap, as go-back-N would; a second copy of a
//! held packet is dropped (`sr_duplicates_dropped`). When the packet at the expected PSN
//! has been executed, the held packets that follow it go through the responder's chain in
//! PSN order, exactly as if they had arrived in order: every check, the placement, the
//! READ, atomic and duplicate semantics, MSN and acknowledgements are those of an
//! in-order packet. Nothing held is placed into memory before its turn. The store is
//! emptied when the QP is reset, enters the error state or is destroyed, and when the
//! switch is turned off.
//!
//! **The requester** (`Scoreboard`) merges the ranges of each selective acknowledgement
//! into a scoreboard and resends the packets between the oldest unacknowledged PSN and the
//! highest held one that the responder does not hold (holes), in PSN order, each asking for
//! an acknowledgement, paced as every resend, the window not holding them back (they are
//! in flight already). A hole is resent once three packets beyond it are held and it has
//! been known for a quarter of the smallest round trip (packets overtaken on the path fill
//! theirs sooner: RACK's reordering allowance), and resent again a round trip (the smoothed
//! round trip and its variation) after its last resend, or as soon as a hole resent later
//! has arrived while it has not (RACK's rule: that resend was lost). Before the path is
//! measured a hole is resent again after the device's retransmission floor, doubled at each
//! resend of it up to the QP's timeout, so that an answer can come between two resends and
//! be timed (Karn). These times are kept by a timer of the QP's, not only looked at when the
//! next selective acknowledgement comes: the responder reports held packets sparingly and
//! the window may hold everything else back, so none may come (a QP then waited for its
//! own timeout after an incast's onset). Round trips are measured on the oldest hole's first resend (the
//! responder answers it as soon as it arrives) and on a new packet that a selective
//! acknowledgement shows held (it arrived, and the NAK answered it). On the retransmission
//! timer the requester resends only the oldest unacknowledged packet when the scoreboard
//! holds anything (its answer says what else is missing); with an empty scoreboard (a lost
//! tail: nothing is known to be held) it goes back N. A standard NAK, a response showing a
//! READ's or atomic's answer lost, and an RNR NAK go back N as before, and going back
//! forgets the scoreboard. A selective acknowledgement spends no retry (the peer answers);
//! the retry count still counts the QP's timeouts. Completions follow the cumulative
//! acknowledgement, so they stay in posting order. With the switch on, the window of
//! packets in flight is not narrowed for a random loss ([`recovery`](crate::recovery): a
//! loss costs only the lost packets), only after a round trip that resent more than random
//! loss does (a queue that overflows). While the responder holds packets, what the window
//! counts in flight is what was sent after the highest PSN it holds, and the holes resent
//! and not yet seen to arrive (FACK's estimate): every other PSN up to that highest one has
//! arrived (it waits in the store) or was lost, and neither is on the path. What bounds the
//! requester beyond a hole is then the store: the PSNs from the oldest unacknowledged one
//! stay within [`Limits::max_held_packets`] and [`Limits::max_held_bytes`] over the path
//! MTU (the peer's store is taken to be as large as the requester's own), never below the
//! device's window (`sr_held_by_store` counts the packets it held back). Counting them in
//! flight, as go-back-N must, shut the window for the round trip each hole's resend took,
//! however much of it had long arrived: on a path whose round trip is a good part of the
//! window that held selective repeat to about three quarters of its loss-free goodput at
//! 1 % loss, and under half at 5 %.
//!
//! **What it does not do.** READ responses are not repeated selectively: a lost READ
//! response makes the requester ask again from the missing one, as the standard does.
//! UC and UD are untouched. A selective acknowledgement that fails to parse is dropped
//! (`sr_sack_malformed`); its frame must still carry a good ICRC (a bad one is counted in
//! `rcvd_malformed`, as every acknowledgement with bytes after its AETH was before).
//!
//! [`Limits::max_held_packets`]: crate::Limits::max_held_packets
//! [`Limits::max_held_bytes`]: crate::Limits::max_held_bytes
//! [`Limits::max_endpoint_held_bytes`]: crate::Limits::max_endpoint_held_bytes

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use xroce_wire::{Gid, Psn, SackRepr};

use crate::packet::{Headers, Kind, Net, Packet};
use crate::recovery::HoleTiming;
use crate::time::Instant;

/// A request packet held by the responder until the gap before it is filled: its headers
/// and a copy of its IP header and payload.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    /// The PSN of the packet.
    psn: Psn,
    /// The last PSN it stands for (a READ request: its last response's).
    last: Psn,
    h: Headers,
    /// The IP header, then the payload.
    bytes: Vec<u8>,
    ip_len: usize,
    sgid: Gid,
    dgid: Gid,
    ipv6: bool,
}

impl Held {
    /// The packet as it arrived.
    pub(crate) fn packet(&self) -> Packet<'_> {
        Packet {
            h: self.h,
            payload: &self.bytes[self.ip_len..],
            net: Net {
                ip_header: &self.bytes[..self.ip_len],
                sgid: self.sgid,
                dgid: self.dgid,
                ipv6: self.ipv6,
            },
        }
    }
}

/// What [`ReorderStore::hold`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Kept until its turn; `report`: the requester should hear of it now (see
    /// [`ReorderStore::hold`]).
    Held { report: bool },
    /// A copy of it is held already: dropped.
    Duplicate,
    /// The store is full: dropped (the requester resends it as a gap).
    Full,
}

/// The payload bytes the stores of one endpoint's queue pairs hold together (see
/// [`Limits::max_endpoint_held_bytes`](crate::Limits::max_endpoint_held_bytes)).
#[derive(Clone, Debug, Default)]
pub(crate) struct HeldBudget(Arc<AtomicU64>);

impl HeldBudget {
    /// Bytes held now.
    pub(crate) fn held(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The responder's store of request packets that arrived ahead of the expected PSN, in
/// PSN order, bounded in packets and bytes, and with every other store of its endpoint in
/// bytes.
#[derive(Debug, Default)]
pub(crate) struct ReorderStore {
    held: VecDeque<Held>,
    bytes: usize,
    /// Shared with the endpoint's other stores (`None`: a store of its own, bounded alone).
    budget: Option<HeldBudget>,
    /// Packets held beyond the highest one reported in a selective acknowledgement since
    /// the last one was sent.
    unreported: u32,
    /// Buffers of packets that had their turn, for the next held ones: under loss most
    /// packets are held, and each would otherwise cost an allocation.
    spare: Vec<Vec<u8>>,
}

/// Buffers a store keeps for reuse at most.
const SPARE_BUFFERS: usize = 16;

/// A responder reports the packets it holds beyond the highest it reported once this many
/// arrived (a packet that fills a hole below it, and the first [`HOLE_THRESHOLD`] held, at
/// once): a NAK for every packet would answer a whole window packet for packet.
pub(crate) const REPORT_EVERY: u32 = 8;

impl ReorderStore {
    /// Whether nothing is held.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Packets held.
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    /// Drops everything held.
    pub(crate) fn clear(&mut self) {
        self.held.clear();
        self.spare = Vec::new();
        self.release(self.bytes);
        self.bytes = 0;
        self.unreported = 0;
    }

    /// Shares `budget` with the endpoint's other stores (nothing is held yet).
    pub(crate) fn share(&mut self, budget: HeldBudget) {
        debug_assert_eq!(self.bytes, 0);
        self.budget = Some(budget);
    }

    /// The endpoint's budget this store shares, if any.
    pub(crate) fn budget(&self) -> Option<HeldBudget> {
        self.budget.clone()
    }

    /// `bytes` held no longer.
    fn release(&self, bytes: usize) {
        if let Some(b) = &self.budget {
            b.0.fetch_sub(bytes as u64, Ordering::Relaxed);
        }
    }

    /// Keeps `pkt`, which is ahead of `expected`, unless a copy is held or it does not fit
    /// in `max_packets` and `max_bytes`, or in what the endpoint's stores hold together,
    /// `max_endpoint_bytes` (its payload counts). `mtu` gives the PSNs a READ
    /// request stands for. A packet held is to be reported at once if it fills a hole
    /// below the highest held (a resend: the requester learns what is still missing), is
    /// one of the first [`HOLE_THRESHOLD`] (the requester resends a hole once that many
    /// lie beyond it), or completes [`REPORT_EVERY`] unreported beyond the highest.
    pub(crate) fn hold(
        &mut self,
        pkt: &Packet<'_>,
        expected: Psn,
        mtu: u32,
        max_packets: u32,
        max_bytes: u32,
        max_endpoint_bytes: u64,
    ) -> Hold {
        let psn = pkt.h.psn;
        let ahead = psn.distance(expected);
        // From the back: packets mostly arrive in order behind the gap.
        let mut at = self.held.len();
        while at > 0 {
            let d = self.held[at - 1].psn.distance(expected);
            if d == ahead {
                return Hold::Duplicate;
            }
            if d < ahead {
                break;
            }
            at -= 1;
        }
        let len = pkt.payload.len();
        if self.held.len() >= max_packets as usize
            || self.bytes.saturating_add(len) > max_bytes as usize
            || self
                .budget
                .as_ref()
                .is_some_and(|b| b.held().saturating_add(len as u64) > max_endpoint_bytes)
        {
            return Hold::Full;
        }
        let last = match (pkt.h.kind, pkt.h.reth) {
            (Kind::ReadRequest, Some(reth)) => {
                let npkts = u64::from(reth.dma_len).div_ceil(u64::from(mtu)).max(1);
                // At most 2^31 / 256 response packets: fits in u32.
                psn.wrapping_add(npkts as u32 - 1)
            }
            _ => psn,
        };
        let ip = pkt.net.ip_header;
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.clear();
        // One allocation for a new buffer, not one per slice.
        bytes.reserve(ip.len() + pkt.payload.len());
        bytes.extend_from_slice(ip);
        bytes.extend_from_slice(pkt.payload);
        self.held.insert(
            at,
            Held {
                psn,
                last,
                h: pkt.h,
                bytes,
                ip_len: ip.len(),
                sgid: pkt.net.sgid,
                dgid: pkt.net.dgid,
                ipv6: pkt.net.ipv6,
            },
        );
        self.bytes += len;
        if let Some(b) = &self.budget {
            b.0.fetch_add(len as u64, Ordering::Relaxed);
        }
        let inner = at + 1 < self.held.len();
        if !inner {
            self.unreported += 1;
        }
        let report =
            inner || self.held.len() <= HOLE_THRESHOLD as usize || self.unreported >= REPORT_EVERY;
        Hold::Held { report }
    }

    /// A selective acknowledgement of what is held was sent.
    pub(crate) fn on_reported(&mut self) {
        self.unreported = 0;
    }

    /// The first held packet if its turn has come (its PSN is `expected` or behind it).
    pub(crate) fn take_due(&mut self, expected: Psn) -> Option<Held> {
        if self.held.front()?.psn.distance(expected) > 0 {
            return None;
        }
        let held = self.held.pop_front()?;
        let len = held.bytes.len() - held.ip_len;
        self.bytes -= len;
        self.release(len);
        Some(held)
    }

    /// `held`, taken by [`ReorderStore::take_due`] and done with: its buffer serves the
    /// next packet held.
    pub(crate) fn recycle(&mut self, held: Held) {
        if self.spare.len() < SPARE_BUFFERS {
            self.spare.push(held.bytes);
        }
    }

    /// The selective acknowledgement of what is held: its first ranges of consecutive
    /// PSNs, and how far beyond the last of them the highest held PSN lies.
    pub(crate) fn sack(&self) -> SackRepr {
        let mut sack = SackRepr::new();
        let mut run: Option<(Psn, Psn)> = None;
        for h in &self.held {
            run = match run {
                Some((first, last)) if h.psn == last.next() => Some((first, h.last)),
                Some((first, last)) => {
                    if !sack.push(first, last) {
                        if let (Some(reported), Some(highest)) = (sack.highest(), self.held.back())
                        {
                            let beyond = highest.last.distance(reported).max(0);
                            sack.set_beyond(beyond.min(i32::from(u16::MAX)) as u16);
                        }
                        return sack;
                    }
                    Some((h.psn, h.last))
                }
                None => Some((h.psn, h.last)),
            };
        }
        if let Some((first, last)) = run {
            sack.push(first, last);
        }
        sack
    }
}

/// How many packets beyond a hole must be held before it is taken for lost (fewer may be
/// packets overtaken on the path).
pub(crate) const HOLE_THRESHOLD: u32 = 3;

impl Drop for ReorderStore {
    fn drop(&mut self) {
        self.release(self.bytes);
    }
}

/// A hole the requester knows of.
#[derive(Clone, Copy, Debug)]
struct Hole {
    psn: Psn,
    /// When a selective acknowledgement first showed it.
    seen: Instant,
    /// When it was last resent.
    resent: Option<Instant>,
    /// How many times it was resent.
    resends: u32,
    /// It waits in the resend queue.
    queued: bool,
}

/// The requester's view of what the responder holds, and the holes to resend.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scoreboard {
    /// PSN ranges held, inclusive, in PSN order, merged.
    held: Vec<(Psn, Psn)>,
    /// The highest PSN the responder said it holds, beyond the ranges kept when its
    /// selective acknowledgement had more than it carries (forward acknowledgement).
    forward: Option<Psn>,
    /// Holes resent whose resend has not been seen to arrive.
    resent_out: u32,
    /// The holes below the highest held PSN, in PSN order.
    holes: Vec<Hole>,
    /// Holes to resend, oldest first.
    queue: VecDeque<Psn>,
    /// The latest resend of a hole that has since arrived (held or acknowledged): a hole
    /// resent before it whose resend has not arrived was lost again (RACK's rule).
    arrived: Option<Instant>,
    /// The earliest time a hole with enough packets held beyond it, not yet due when the
    /// holes were last looked at, becomes due (its reordering allowance or its round trip
    /// since the last resend will have passed): the holes are looked at again then, and not
    /// only when the next selective acknowledgement comes (none may come: the responder
    /// reports held packets sparingly, and the window may hold everything else back).
    next_due: Option<Instant>,
}

/// The most ranges the scoreboard keeps (beyond them, what the responder holds is resent
/// if it is a hole, which costs a duplicate, never correctness).
const MAX_RANGES: usize = 64;

impl Scoreboard {
    /// Whether nothing is known to be held.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Whether holes wait to be resent.
    #[inline]
    pub(crate) fn has_resend(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Request packets in flight, with `next` the next PSN to send: those sent after the
    /// highest PSN the responder holds, and the holes resent whose resend has not been
    /// seen to arrive. Every other PSN up to that highest one has either arrived (held) or
    /// been lost: neither is on the path (FACK's estimate). Only while something is held.
    #[inline]
    pub(crate) fn in_flight(&self, next: Psn) -> i32 {
        let held = self.highest().unwrap_or(next);
        let highest = match self.forward {
            Some(f) if f.distance(held) > 0 => f,
            _ => held,
        };
        next.distance(highest.next()).max(0) + self.resent_out as i32
    }

    /// Forgets everything (going back N, or the switch turned off).
    pub(crate) fn clear(&mut self) {
        self.forward = None;
        self.resent_out = 0;
        self.held.clear();
        self.holes.clear();
        self.queue.clear();
        self.arrived = None;
        self.next_due = None;
    }

    /// Forgets what lies before `unacked` (acknowledged).
    // Cold, out of line: every acknowledgement may call it, and it must cost the packet
    // path nothing but the test for an empty scoreboard.
    #[cold]
    #[inline(never)]
    pub(crate) fn prune(&mut self, unacked: Psn) {
        self.held.retain(|&(_, last)| last.distance(unacked) >= 0);
        if let Some((first, _)) = self.held.first_mut()
            && first.distance(unacked) < 0
        {
            *first = unacked;
        }
        if self.forward.is_some_and(|f| f.distance(unacked) < 0) {
            self.forward = None;
        }
        let (mut arrived, mut out) = (self.arrived, self.resent_out);
        self.holes.retain(|h| {
            let keep = h.psn.distance(unacked) >= 0;
            if !keep && let Some(t) = h.resent {
                arrived = arrived.max(Some(t));
                out = out.saturating_sub(1);
            }
            keep
        });
        (self.arrived, self.resent_out) = (arrived, out);
        self.queue.retain(|&p| p.distance(unacked) >= 0);
    }

    /// Merges the ranges of a selective acknowledgement, those before `unacked` dropped.
    pub(crate) fn merge(&mut self, sack: &SackRepr, unacked: Psn) {
        for &(first, last) in sack.ranges() {
            if last.distance(unacked) < 0 {
                continue;
            }
            let first = if first.distance(unacked) < 0 {
                unacked
            } else {
                first
            };
            self.insert(first, last);
        }
        while self.held.len() > MAX_RANGES {
            self.held.pop();
        }
        if let Some(h) = sack.highest()
            && h.distance(unacked) >= 0
            && self.forward.is_none_or(|f| h.distance(f) > 0)
        {
            self.forward = Some(h);
        }
        let held = &self.held;
        let (mut arrived, mut out) = (self.arrived, self.resent_out);
        self.holes.retain(|h| {
            let keep = !held.iter().any(|&(f, l)| within(h.psn, f, l));
            if !keep && let Some(t) = h.resent {
                arrived = arrived.max(Some(t));
                out = out.saturating_sub(1);
            }
            keep
        });
        (self.arrived, self.resent_out) = (arrived, out);
        self.queue
            .retain(|&p| !held.iter().any(|&(f, l)| within(p, f, l)));
    }

    fn insert(&mut self, first: Psn, last: Psn) {
        // Ranges overlapping or touching the new one are absorbed into it.
        let (mut first, mut last) = (first, last);
        let mut at = self.held.len();
        let mut i = 0;
        while i < self.held.len() {
            let (f, l) = self.held[i];
            if l.next().distance(first) < 0 {
                i += 1;
                continue;
            }
            if last.next().distance(f) < 0 {
                at = at.min(i);
                break;
            }
            if f.distance(first) < 0 {
                first = f;
            }
            if l.distance(last) > 0 {
                last = l;
            }
            self.held.remove(i);
            at = i;
        }
        let at = at.min(self.held.len());
        self.held.insert(at, (first, last));
    }

    /// The highest PSN known to be held.
    pub(crate) fn highest(&self) -> Option<Psn> {
        self.held.last().map(|&(_, last)| last)
    }

    /// The held range at `index` (in PSN order), if there are that many.
    #[inline]
    pub(crate) fn range(&self, index: usize) -> Option<(Psn, Psn)> {
        self.held.get(index).copied()
    }

    /// The PSNs of the holes known, in PSN order.
    #[cfg(test)]
    pub(crate) fn hole_psns(&self) -> Vec<Psn> {
        self.holes.iter().map(|h| h.psn).collect()
    }

    /// Whether every PSN of `first..=last` is held.
    pub(crate) fn holds(&self, first: Psn, last: Psn) -> bool {
        self.held
            .iter()
            .any(|&(f, l)| first.distance(f) >= 0 && last.distance(l) <= 0)
    }

    /// Packets held beyond `psn`.
    pub(crate) fn held_beyond(&self, psn: Psn) -> u32 {
        self.held
            .iter()
            .filter(|&&(_, l)| l.distance(psn) > 0)
            .map(|&(f, l)| {
                let from = if f.distance(psn) > 0 { f } else { psn.next() };
                l.distance(from) as u32 + 1
            })
            .sum()
    }

    /// The request packet at `psn` is not held: a hole. Queued for a resend at `now` if
    /// [`HOLE_THRESHOLD`] packets beyond it are held, it has been a hole for
    /// `timing.reorder` and was not resent within `timing.again` (doubled for each resend
    /// before the path is measured). Returns whether it was queued.
    pub(crate) fn on_hole(&mut self, psn: Psn, now: Instant, timing: HoleTiming) -> bool {
        let reorder = timing.reorder;
        let beyond = self.held_beyond(psn);
        let at = self
            .holes
            .iter()
            .position(|h| h.psn.distance(psn) >= 0)
            .unwrap_or(self.holes.len());
        if self.holes.get(at).is_none_or(|h| h.psn != psn) {
            self.holes.insert(
                at,
                Hole {
                    psn,
                    seen: now,
                    resent: None,
                    resends: 0,
                    queued: false,
                },
            );
        }
        let arrived = self.arrived;
        let hole = &mut self.holes[at];
        let interval = match timing.backoff {
            Some(cap) => timing
                .again
                .saturating_mul(1 << hole.resends.saturating_sub(1).min(16))
                .min(cap),
            None => timing.again,
        };
        // Resent again a round trip after its resend, or as soon as a hole resent later
        // (by more than the reordering allowance) has arrived while it has not.
        let again = |t: Instant| {
            now.saturating_duration_since(t) >= interval
                || arrived.is_some_and(|a| a.saturating_duration_since(t) > reorder)
        };
        let due = !hole.queued
            && beyond >= HOLE_THRESHOLD
            && now.saturating_duration_since(hole.seen) >= reorder
            && hole.resent.is_none_or(again);
        if !due && !hole.queued && beyond >= HOLE_THRESHOLD {
            let mut at = hole.seen + reorder;
            if let Some(resent) = hole.resent {
                at = at.max(resent + interval);
            }
            self.next_due = Some(self.next_due.map_or(at, |t| t.min(at)));
        }
        if due {
            hole.queued = true;
            let q = self
                .queue
                .iter()
                .position(|p| p.distance(psn) > 0)
                .unwrap_or(self.queue.len());
            self.queue.insert(q, psn);
        }
        due
    }

    /// When the holes must be looked at again (see the field).
    #[inline]
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.next_due
    }

    /// The holes are being looked at: when they must be again is found anew.
    pub(crate) fn clear_due(&mut self) {
        self.next_due = None;
    }

    /// Queues the oldest hole, `psn`, for a resend now, whatever the rules (the
    /// retransmission timer expired).
    pub(crate) fn force(&mut self, psn: Psn, now: Instant) {
        if let Some(h) = self.holes.iter_mut().find(|h| h.psn == psn) {
            if h.queued {
                return;
            }
            h.queued = true;
        } else {
            self.holes.insert(
                0,
                Hole {
                    psn,
                    seen: now,
                    resent: None,
                    resends: 0,
                    queued: true,
                },
            );
        }
        self.queue.push_front(psn);
    }

    /// The next hole to resend.
    pub(crate) fn next_resend(&mut self) -> Option<Psn> {
        self.queue.pop_front()
    }

    /// The hole `psn` taken by [`Scoreboard::next_resend`] cannot be resent alone (it was
    /// acknowledged meanwhile, or lies inside a READ's responses): forgotten.
    pub(crate) fn forget(&mut self, psn: Psn) {
        let mut out = self.resent_out;
        self.holes.retain(|h| {
            let keep = h.psn != psn;
            if !keep && h.resent.is_some() {
                out = out.saturating_sub(1);
            }
            keep
        });
        self.resent_out = out;
    }

    /// The hole `psn` taken by [`Scoreboard::next_resend`] could not be sent now: it goes
    /// first again.
    pub(crate) fn put_back(&mut self, psn: Psn) {
        self.queue.push_front(psn);
    }

    /// The hole `psn` was resent at `now`. Returns whether it was its first resend.
    pub(crate) fn on_resent(&mut self, psn: Psn, now: Instant) -> bool {
        match self.holes.iter_mut().find(|h| h.psn == psn) {
            Some(h) => {
                h.queued = false;
                h.resends = h.resends.saturating_add(1);
                let first = h.resent.replace(now).is_none();
                if first {
                    self.resent_out += 1;
                }
                first
            }
            None => true,
        }
    }
}

/// Whether `psn` lies in `first..=last`.
fn within(psn: Psn, first: Psn, last: Psn) -> bool {
    psn.distance(first) >= 0 && psn.distance(last) <= 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attributes::QpType;
    use std::time::Duration;
    use xroce_wire::{Position, Qpn};

    fn at(micros: u64) -> Instant {
        Instant::from_nanos(micros * 1000)
    }

    fn timing(reorder: Duration, again: Duration) -> HoleTiming {
        HoleTiming {
            reorder,
            again,
            backoff: None,
        }
    }

    fn packet(psn: u32, payload: &[u8]) -> (Headers, Vec<u8>) {
        let h = Headers::new(
            QpType::Rc,
            Kind::Send,
            Position::Only,
            Qpn::new(1),
            Psn::new(psn),
        );
        (h, payload.to_vec())
    }

    fn hold(store: &mut ReorderStore, psn: u32, expected: u32, max: u32) -> Hold {
        let (h, payload) = packet(psn, &[psn as u8; 8]);
        let ip = [0x45u8; 20];
        let pkt = Packet {
            h,
            payload: &payload,
            net: Net {
                ip_header: &ip,
                sgid: Gid::default(),
                dgid: Gid::default(),
                ipv6: false,
            },
        };
        store.hold(&pkt, Psn::new(expected), 1024, max, 1 << 20, u64::MAX)
    }

    #[test]
    fn a_packet_done_with_gives_its_buffer_to_the_next_held() {
        let mut s = ReorderStore::default();
        assert!(matches!(hold(&mut s, 11, 10, 8), Hold::Held { .. }));
        let first = s.take_due(Psn::new(11)).unwrap();
        let buffer = first.bytes.as_ptr();
        s.recycle(first);
        assert!(matches!(hold(&mut s, 13, 12, 8), Hold::Held { .. }));
        let next = s.take_due(Psn::new(13)).unwrap();
        assert_eq!(next.bytes.as_ptr(), buffer, "the same buffer");
        assert_eq!(next.packet().payload, &[13; 8]);
        assert_eq!(next.packet().net.ip_header, &[0x45; 20]);
        // At most SPARE_BUFFERS kept; a cleared store keeps none.
        for _ in 0..2 * SPARE_BUFFERS {
            s.recycle(next.clone());
        }
        assert_eq!(s.spare.len(), SPARE_BUFFERS);
        s.clear();
        assert!(s.spare.is_empty());
    }

    #[test]
    fn a_store_with_more_ranges_than_an_acknowledgement_carries_says_where_its_highest_lies() {
        let mut s = ReorderStore::default();
        // Every other PSN from 11: 40 ranges of one packet.
        for i in 0..40 {
            assert!(matches!(
                hold(&mut s, 11 + 2 * i, 10, 64),
                Hold::Held { .. }
            ));
        }
        let sack = s.sack();
        assert_eq!(sack.ranges().len(), xroce_wire::MAX_SACK_RANGES);
        assert_eq!(sack.ranges()[29], (Psn::new(69), Psn::new(69)));
        assert_eq!(sack.beyond(), 20, "the highest held is 89");
        assert_eq!(sack.highest(), Some(Psn::new(89)));
        // Fewer: nothing beyond.
        let mut few = ReorderStore::default();
        for psn in [11, 13] {
            assert!(matches!(hold(&mut few, psn, 10, 64), Hold::Held { .. }));
        }
        assert_eq!(few.sack().beyond(), 0);
    }

    #[test]
    fn in_flight_are_the_packets_sent_after_the_highest_held_and_the_holes_resent() {
        let mut b = Scoreboard::default();
        let unacked = Psn::new(100);
        // Held 101..=104 and 110..=112, and (beyond the ranges) up to 150; sent up to 199.
        let mut sack = SackRepr::new();
        assert!(sack.push(Psn::new(101), Psn::new(104)));
        assert!(sack.push(Psn::new(110), Psn::new(112)));
        sack.set_beyond(38);
        b.merge(&sack, unacked);
        let next = Psn::new(200);
        assert_eq!(b.in_flight(next), 49, "151..=199");
        // Two holes resent: in flight until seen to arrive.
        let t = timing(Duration::ZERO, Duration::from_millis(1));
        assert!(b.on_hole(Psn::new(100), at(0), t));
        assert!(b.on_hole(Psn::new(105), at(0), t));
        for psn in [100, 105] {
            assert_eq!(b.next_resend(), Some(Psn::new(psn)));
            assert!(b.on_resent(Psn::new(psn), at(1)));
        }
        assert_eq!(b.in_flight(next), 51);
        // 105 arrived; a later acknowledgement says less beyond: the highest stays.
        let mut later = SackRepr::new();
        assert!(later.push(Psn::new(101), Psn::new(105)));
        b.merge(&later, unacked);
        assert_eq!(b.in_flight(next), 50);
        // Acknowledged past the highest: nothing is known held (the window counts every
        // PSN unacknowledged again).
        b.prune(Psn::new(160));
        assert!(b.is_empty());
        assert_eq!((b.forward, b.resent_out), (None, 0));
    }

    #[test]
    fn the_store_keeps_packets_in_psn_order_and_gives_them_back_in_turn() {
        let mut s = ReorderStore::default();
        for psn in [13, 11, 12, 16, 15] {
            assert!(matches!(hold(&mut s, psn, 10, 8), Hold::Held { .. }));
        }
        assert_eq!(hold(&mut s, 12, 10, 8), Hold::Duplicate);
        assert_eq!(
            s.sack().ranges(),
            &[(Psn::new(11), Psn::new(13)), (Psn::new(15), Psn::new(16))]
        );
        assert!(s.take_due(Psn::new(10)).is_none());
        let first = s.take_due(Psn::new(11)).unwrap();
        assert_eq!(first.packet().h.psn, Psn::new(11));
        assert_eq!(first.packet().payload, &[11; 8]);
        assert_eq!(first.packet().net.ip_header, &[0x45; 20]);
        assert_eq!(s.len(), 4);
        // Bounded in packets: the fifth of five does not fit.
        let mut small = ReorderStore::default();
        for psn in 1..5 {
            assert!(matches!(hold(&mut small, psn, 0, 4), Hold::Held { .. }));
        }
        assert_eq!(hold(&mut small, 7, 0, 4), Hold::Full);
        small.clear();
        assert!(small.is_empty());
        assert_eq!(small.bytes, 0);
    }

    #[test]
    fn what_is_held_is_reported_at_the_threshold_for_every_resend_and_every_eighth_packet() {
        let mut s = ReorderStore::default();
        let report = |h| matches!(h, Hold::Held { report: true });
        // The first three beyond the gap at 10: at once.
        for psn in 11..14 {
            assert!(report(hold(&mut s, psn, 10, 64)), "{psn}");
        }
        s.on_reported();
        // Then every eighth packet beyond the highest reported.
        for psn in 14..21 {
            assert!(!report(hold(&mut s, psn, 10, 64)), "{psn}");
        }
        assert!(report(hold(&mut s, 21, 10, 64)));
        s.on_reported();
        // A hole filled below the highest (a resend): at once.
        assert!(!report(hold(&mut s, 23, 10, 64)));
        assert!(report(hold(&mut s, 22, 10, 64)), "fills the hole at 22");
    }

    #[test]
    fn the_store_wraps_and_is_bounded_in_bytes() {
        let mut s = ReorderStore::default();
        let (h, payload) = packet(0xff_ffff, &[1; 600]);
        let ip = [0u8; 20];
        let pkt = |h, payload| Packet {
            h,
            payload,
            net: Net {
                ip_header: &ip,
                sgid: Gid::default(),
                dgid: Gid::default(),
                ipv6: false,
            },
        };
        assert_eq!(
            s.hold(
                &pkt(h, &payload),
                Psn::new(0xff_fffd),
                1024,
                8,
                1000,
                u64::MAX
            ),
            Hold::Held { report: true }
        );
        let (h2, _) = packet(1, &[]);
        assert_eq!(
            s.hold(
                &pkt(h2, &payload),
                Psn::new(0xff_fffd),
                1024,
                8,
                1000,
                u64::MAX
            ),
            Hold::Full
        );
        assert_eq!(
            s.hold(
                &pkt(h2, &payload[..400]),
                Psn::new(0xff_fffd),
                1024,
                8,
                1000,
                u64::MAX
            ),
            Hold::Held { report: true }
        );
        assert_eq!(
            s.sack().ranges(),
            &[
                (Psn::new(0xff_ffff), Psn::new(0xff_ffff)),
                (Psn::new(1), Psn::new(1))
            ]
        );
    }

    #[test]
    fn the_scoreboard_merges_ranges_and_queues_holes_once_per_round_trip() {
        let mut b = Scoreboard::default();
        let mut sack = SackRepr::new();
        assert!(sack.push(Psn::new(12), Psn::new(14)));
        assert!(sack.push(Psn::new(16), Psn::new(20)));
        b.merge(&sack, Psn::new(10));
        let mut more = SackRepr::new();
        assert!(more.push(Psn::new(15), Psn::new(15)));
        b.merge(&more, Psn::new(10));
        assert_eq!(b.held, vec![(Psn::new(12), Psn::new(20))]);
        assert!(b.holds(Psn::new(13), Psn::new(20)));
        assert!(!b.holds(Psn::new(11), Psn::new(12)));
        assert_eq!(b.highest(), Some(Psn::new(20)));
        let rtt = Duration::from_micros(100);
        let reorder = Duration::from_micros(25);
        // Seen now: not yet a loss (it may have been overtaken).
        assert!(!b.on_hole(Psn::new(10), at(0), timing(reorder, rtt)));
        assert!(b.on_hole(Psn::new(10), at(30), timing(reorder, rtt)));
        assert!(
            !b.on_hole(Psn::new(10), at(31), timing(reorder, rtt)),
            "queued"
        );
        assert!(
            !b.on_hole(Psn::new(11), at(31), timing(reorder, rtt)),
            "seen only now"
        );
        assert_eq!(b.next_resend(), Some(Psn::new(10)));
        b.on_resent(Psn::new(10), at(40));
        assert!(
            !b.on_hole(Psn::new(10), at(100), timing(reorder, rtt)),
            "within a round trip"
        );
        assert!(b.on_hole(Psn::new(10), at(140), timing(reorder, rtt)));
        // Acknowledged up to 13: what lies before is forgotten.
        b.prune(Psn::new(13));
        assert_eq!(b.held, vec![(Psn::new(13), Psn::new(20))]);
        assert!(!b.has_resend());
        b.force(Psn::new(13), at(200));
        assert_eq!(b.next_resend(), Some(Psn::new(13)));
        b.clear();
        assert!(b.is_empty());
    }

    #[test]
    fn a_resend_overtaken_by_a_later_one_is_taken_for_lost() {
        let mut b = Scoreboard::default();
        let mut sack = SackRepr::new();
        assert!(sack.push(Psn::new(11), Psn::new(13)));
        assert!(sack.push(Psn::new(15), Psn::new(19)));
        b.merge(&sack, Psn::new(10));
        let (reorder, rtt) = (Duration::from_micros(10), Duration::from_millis(5));
        assert!(b.on_hole(Psn::new(10), at(100), timing(Duration::ZERO, rtt)));
        assert!(b.on_hole(Psn::new(14), at(100), timing(Duration::ZERO, rtt)));
        assert_eq!(b.next_resend(), Some(Psn::new(10)));
        assert!(b.on_resent(Psn::new(10), at(100)), "the first resend");
        assert_eq!(b.next_resend(), Some(Psn::new(14)));
        b.on_resent(Psn::new(14), at(200));
        // 14's resend arrived (held), 10's did not: lost again, long before a round trip.
        let mut more = SackRepr::new();
        assert!(more.push(Psn::new(14), Psn::new(14)));
        b.merge(&more, Psn::new(10));
        assert!(b.on_hole(Psn::new(10), at(300), timing(reorder, rtt)));
        assert_eq!(b.next_resend(), Some(Psn::new(10)));
        assert!(!b.on_resent(Psn::new(10), at(300)), "not the first");
        // Resent later than the one that arrived: it waits for its round trip.
        assert!(!b.on_hole(Psn::new(10), at(400), timing(reorder, rtt)));
    }

    #[test]
    fn before_the_path_is_measured_a_hole_is_resent_again_less_and_less_often() {
        let mut b = Scoreboard::default();
        let mut sack = SackRepr::new();
        assert!(sack.push(Psn::new(11), Psn::new(19)));
        b.merge(&sack, Psn::new(10));
        let unmeasured = HoleTiming {
            reorder: Duration::ZERO,
            again: Duration::from_millis(1),
            backoff: Some(Duration::from_millis(3)),
        };
        let hole = Psn::new(10);
        assert!(b.on_hole(hole, at(0), unmeasured));
        assert_eq!(b.next_resend(), Some(hole));
        assert!(b.on_resent(hole, at(0)));
        assert!(!b.on_hole(hole, at(999), unmeasured));
        assert!(
            b.on_hole(hole, at(1000), unmeasured),
            "1 ms after the first"
        );
        assert_eq!(b.next_resend(), Some(hole));
        assert!(!b.on_resent(hole, at(1000)));
        assert!(!b.on_hole(hole, at(2999), unmeasured));
        assert!(
            b.on_hole(hole, at(3000), unmeasured),
            "2 ms after the second"
        );
        assert_eq!(b.next_resend(), Some(hole));
        b.on_resent(hole, at(3000));
        assert!(!b.on_hole(hole, at(5999), unmeasured));
        assert!(
            b.on_hole(hole, at(6000), unmeasured),
            "at most the cap, 3 ms"
        );
    }

    #[test]
    fn a_hole_needs_packets_held_beyond_it() {
        let mut b = Scoreboard::default();
        let mut sack = SackRepr::new();
        assert!(sack.push(Psn::new(11), Psn::new(12)));
        b.merge(&sack, Psn::new(10));
        assert!(!b.on_hole(
            Psn::new(10),
            at(100),
            timing(Duration::ZERO, Duration::ZERO)
        ));
        let mut more = SackRepr::new();
        assert!(more.push(Psn::new(13), Psn::new(13)));
        b.merge(&more, Psn::new(10));
        assert!(b.on_hole(
            Psn::new(10),
            at(100),
            timing(Duration::ZERO, Duration::ZERO)
        ));
    }
}
