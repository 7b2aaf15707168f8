//! Frames in and out: a receive batch into the transport (or to the poller that owns its
//! QP), the transport's frames onto the transmit ring, and frames to this host's own GIDs
//! straight back into the transport (loopback). Congestion control sees each frame from
//! the wire before the transport does (and keeps the CNPs), and each frame to the wire
//! after the transport made it (its ECN bits, its queue pair's rate); its CNPs go out
//! before the transport's frames.

use xroce_congestion::{Arrival, CnpPath, Congestion};
use xroce_transport::{Endpoint, Instant};

use super::Poller;
use crate::xsk::RX_BATCH;

/// The destination QP of multicast packets.
const MULTICAST: u32 = xroce_wire::Qpn::MULTICAST.value();

/// The most frames one transmit call sends (the pass then goes round: receive, timers,
/// completions).
const TX_BUDGET: usize = 256;

impl Poller {
    /// Receives a batch of frames.
    pub(super) fn receive(&mut self, now: Instant) -> usize {
        let Poller {
            cfg,
            port,
            endpoint,
            cc,
            mem,
            rings,
            counters,
            ..
        } = self;
        let handoff = &mut cfg.handoff;
        let batch = port.rx().poll();
        let n = batch.len();
        if n > 0 || handoff.pending() {
            // Receive work requests posted before these frames were sent must be there to
            // meet them (a UC or UD message finding none is dropped): take the rings first.
            // Their post bits were set before their application could tell its peer.
            rings.pull_rung(endpoint, now);
        }
        for frame in batch.iter() {
            if crate::handoff::dest_qpn(frame) == Some(xroce_wire::Qpn::GSI.value()) {
                // QP1 belongs to the connection manager, on the control thread.
                if cfg.gsi.forward(frame) {
                    counters.gsi_in += 1;
                } else {
                    counters.gsi_in_dropped += 1;
                }
                continue;
            }
            if crate::handoff::dest_qpn(frame) == Some(MULTICAST) {
                if handoff.others().next().is_none() {
                    // One poller: every member is its own.
                    endpoint.handle_frame(now, frame, mem);
                    continue;
                }
                // For every queue pair attached to the group, on any poller.
                let members = handoff.mcast_members(frame);
                for other in handoff.others().filter(|&i| members.has(i)) {
                    counters.count_handoff(handoff.send(other, frame));
                }
                if members.none() {
                    // Nobody's: the transport checks it and counts it unjoined.
                    endpoint.handle_frame(now, frame, mem);
                } else if members.has(cfg.index) {
                    endpoint.handle_multicast_copy(now, frame, mem);
                }
                continue;
            }
            let owner = handoff.owner(frame);
            if owner == cfg.index {
                if cc.handle_frame(now, frame, |q| endpoint.qp(q).is_some()) == Arrival::Transport {
                    agree(cc, endpoint, cfg.selective_repeat);
                    endpoint.handle_frame(now, frame, mem);
                }
            } else {
                counters.count_handoff(handoff.send(owner, frame));
            }
        }
        drop(batch);
        let selective_repeat = cfg.selective_repeat;
        let taken = handoff.receive(RX_BATCH, |frame| {
            if crate::handoff::dest_qpn(frame) == Some(MULTICAST) {
                endpoint.handle_multicast_copy(now, frame, mem);
                return;
            }
            if cc.handle_frame(now, frame, |q| endpoint.qp(q).is_some()) == Arrival::Transport {
                agree(cc, endpoint, selective_repeat);
                endpoint.handle_frame(now, frame, mem);
            }
        });
        counters.rx_frames += n as u64;
        counters.taken_over += taken as u64;
        n + taken
    }

    /// Sends what the transport has to send.
    pub(super) fn transmit(&mut self, now: Instant) -> usize {
        let mut sent = 0;
        self.port.tx().poll_completions();
        // The connection manager's MADs, first: few, and their peers wait on them.
        while let Some(raw) = self.raw_tx.front() {
            let tx = self.port.tx();
            let Some(mut frame) = tx.frame() else {
                self.counters.tx_full += 1;
                break;
            };
            let buf = frame.buf();
            if raw.len() > buf.len() {
                self.raw_tx.pop_front();
                continue;
            }
            buf[..raw.len()].copy_from_slice(raw);
            frame.submit(raw.len());
            self.raw_tx.pop_front();
            self.counters.gsi_out += 1;
            self.counters.tx_frames += 1;
            sent += 1;
        }
        // CNPs, next: few (one per QP per interval), and every sender they slow waits on
        // them.
        while self.cc.has_cnp() {
            let tx = self.port.tx();
            let Some(mut frame) = tx.frame() else {
                self.counters.tx_full += 1;
                break;
            };
            let endpoint = &self.endpoint;
            let Some(len) = self.cc.poll_cnp(frame.buf(), |q| CnpPath::of(endpoint, q)) else {
                break;
            };
            frame.submit(len);
            self.counters.tx_frames += 1;
            sent += 1;
        }
        // Bounded: loopback frames go back to the free list at once and their answers come
        // back within the loop, so without a bound two local QPs could keep the poller here
        // for a whole transfer (no receiving, no timers, no other application's work).
        while sent < TX_BUDGET {
            if !self.endpoint.has_transmit() && self.endpoint.poll_timeout().is_none_or(|t| t > now)
            {
                break;
            }
            let tx = self.port.tx();
            let Some(mut frame) = tx.frame() else {
                self.counters.tx_full += 1;
                break;
            };
            let Some(t) = self.endpoint.poll_transmit(now, frame.buf(), &mut self.mem) else {
                break;
            };
            let buf = frame.buf();
            if buf[0] & 1 == 1 {
                // A multicast frame goes to the wire, and to this host's queue pairs
                // attached to its group (on any poller): the NIC does not bring it back.
                let bytes = &buf[..t.len];
                self.counters.loopback_frames += 1;
                let members = self.cfg.handoff.mcast_members(bytes);
                for other in self.cfg.handoff.others().filter(|&i| members.has(i)) {
                    let handed = self.cfg.handoff.send(other, bytes);
                    self.counters.count_handoff(handed);
                }
                if let Some(gid) = crate::handoff::dest_gid(bytes) {
                    // As for a frame to one QP below: the members' receives posted before
                    // this send must be there to meet it.
                    for qpn in self.endpoint.mcast_members(gid).to_vec() {
                        self.rings.pull_receives_of(&mut self.endpoint, now, qpn);
                    }
                }
                self.endpoint
                    .handle_multicast_copy(now, bytes, &mut self.mem);
            }
            if buf[..6] == self.mac {
                // Addressed to ourselves: deliver it here (or to the poller that owns the
                // destination QP), as the NIC would not.
                let buf = &buf[..t.len];
                self.counters.loopback_frames += 1;
                let owner = self.cfg.handoff.owner(buf);
                if owner != self.cfg.index {
                    let handed = self.cfg.handoff.send(owner, buf);
                    self.counters.count_handoff(handed);
                } else {
                    // As `receive` does before handling frames from the wire: a receive
                    // posted before this frame's send was posted must be there to meet it.
                    // The receive rings may have been read before the application published
                    // that receive: read the destination's again (and no send ring, so no
                    // later send slips in).
                    if let Some(qpn) = crate::handoff::dest_qpn(buf) {
                        self.rings.pull_receives_of(&mut self.endpoint, now, qpn);
                    }
                    self.endpoint.handle_frame(now, buf, &mut self.mem);
                }
                drop(frame);
            } else {
                // A destroyed QP that lingers has no congestion state, and makes none.
                if !t.closed
                    && let Some(until) = self.cc.on_transmit(now, t.qpn, &mut buf[..t.len])
                {
                    self.endpoint.pace(t.qpn, until);
                }
                frame.submit(t.len);
                self.counters.tx_frames += 1;
            }
            sent += 1;
        }
        if sent > 0 {
            self.port.tx().flush();
        }
        sent
    }
}

/// Turns selective repeat on for each queue pair whose peer has just shown xroce's hello
/// (when the daemon runs it), before the frame that showed it reaches the transport: both
/// ends of a connection between xroce daemons learn of the other from its first packets, and
/// a standard peer (Linux rxe, an RDMA NIC) never shows the hello, so never meets it.
fn agree(cc: &mut Congestion, endpoint: &mut Endpoint, on: bool) {
    while let Some(qpn) = cc.poll_xroce_peer() {
        if on {
            // A queue pair destroyed meanwhile has nothing to turn on.
            let _ = endpoint.set_selective_repeat(qpn, true);
        }
    }
}
