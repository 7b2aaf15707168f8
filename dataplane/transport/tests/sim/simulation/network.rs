//! The simulated network: frames queued by delivery time, each one dropped, duplicated,
//! corrupted, delayed or held back as the run's knobs say, and a log of what happened to
//! every frame for judging retry exhaustion afterwards.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use super::{Side, SimConfig, SimReport};
use rand::Rng;
use rand::rngs::StdRng;
use xroce_transport::Instant;
use xroce_wire::{Psn, Qpn};

pub(super) struct InFlight {
    pub(super) to: Side,
    pub(super) frame: Vec<u8>,
}

/// What the network did with one frame, for judging retry exhaustion.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sent {
    pub(super) at: Instant,
    pub(super) to: Side,
    pub(super) dest_qpn: Qpn,
    pub(super) psn: Psn,
    /// The last PSN the request covers (a READ covers one per response packet).
    pub(super) last_psn: Psn,
    pub(super) response: bool,
    /// A positive response: an ACK (not a NAK or RNR NAK), a READ response, an atomic
    /// acknowledgement.
    pub(super) positive: bool,
    /// A plain ACKNOWLEDGE (which cannot carry READ data or an atomic result).
    pub(super) plain_ack: bool,
    /// At least one copy arrived uncorrupted.
    pub(super) intact: bool,
    /// When the first uncorrupted copy arrived.
    pub(super) arrived: Option<Instant>,
}

/// The simulated network: one queue of frames ordered by delivery time.
pub(super) struct Network {
    pub(super) rng: StdRng,
    pub(super) cfg: SimConfig,
    pub(super) queue: BinaryHeap<Reverse<(Instant, u64)>>,
    pub(super) frames: HashMap<u64, InFlight>,
    pub(super) seq: u64,
    /// The delivery time of the last in-order frame, per direction.
    pub(super) last: [Instant; 2],
    pub(super) log: Vec<Sent>,
    pub(super) report: SimReport,
}

impl Network {
    pub(super) fn send(&mut self, now: Instant, to: Side, frame: &[u8]) {
        self.report.frames += 1;
        // A NAK with a selective acknowledgement needs the parse that accepts one.
        let parsed = xroce_wire::Frame::parse(frame)
            .or_else(|_| xroce_wire::Frame::parse_acknowledge_with_trailer(frame));
        let mut entry = parsed.ok().map(|f| {
            let positive = f.ib.aeth.is_none_or(|a| a.syndrome.is_ack());
            let response = f.ib.info().is_response();
            let psn = f.ib.bth.psn;
            let mtu = self.cfg.mtu.bytes() as u64;
            let last_psn = match (f.ib.info().operation, f.ib.reth) {
                (xroce_wire::Operation::RdmaReadRequest, Some(reth)) => {
                    psn.wrapping_add((u64::from(reth.dma_len).div_ceil(mtu).max(1) - 1) as u32)
                }
                _ => psn,
            };
            let plain_ack = f.ib.info().operation == xroce_wire::Operation::Acknowledge;
            Sent {
                at: now,
                to,
                dest_qpn: f.ib.bth.dest_qp,
                psn,
                last_psn,
                response,
                positive,
                plain_ack,
                intact: false,
                arrived: None,
            }
        });
        if self.rng.random_bool(self.cfg.loss) {
            self.report.dropped += 1;
            self.log.extend(entry);
            return;
        }
        let copies = if self.rng.random_bool(self.cfg.duplicate) {
            self.report.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut frame = frame.to_vec();
            let mut intact_copy = false;
            if self.rng.random_bool(self.cfg.corrupt) {
                // Corrupt something the ICRC covers: from the IP header to the end.
                let bit = self.rng.random_range(14 * 8..frame.len() * 8);
                frame[bit / 8] ^= 1 << (bit % 8);
                self.report.corrupted += 1;
            } else {
                intact_copy = true;
            }
            // A link delivers in order with a little jitter; a reordered frame is held back
            // and overtaken by the frames behind it.
            let jitter = Duration::from_nanos(self.rng.random_range(2_000..8_000));
            let lane = usize::from(to == Side::A);
            let mut at = (now + jitter).max(self.last[lane]);
            self.last[lane] = at;
            if self.rng.random_bool(self.cfg.reorder) {
                at = at + Duration::from_nanos(self.rng.random_range(10_000..60_000));
                self.report.reordered += 1;
            }
            if intact_copy && let Some(e) = entry.as_mut() {
                e.intact = true;
                e.arrived = Some(e.arrived.map_or(at, |t| t.min(at)));
            }
            self.seq += 1;
            self.queue.push(Reverse((at, self.seq)));
            self.frames.insert(self.seq, InFlight { to, frame });
        }
        self.log.extend(entry);
    }

    pub(super) fn next_time(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse((t, _))| *t)
    }

    pub(super) fn pop_due(&mut self, now: Instant) -> Option<InFlight> {
        let Reverse((t, seq)) = *self.queue.peek()?;
        if t > now {
            return None;
        }
        self.queue.pop();
        self.frames.remove(&seq)
    }
}
