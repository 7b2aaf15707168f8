//! What every completion is checked against: data byte for byte, atomics against the model,
//! send completions once and in order, receives once and in order; a retry exhaustion only
//! when the network log justifies it; UC and UD messages expire as delivered or lost.

use super::workload::OpKind;
use super::{GRH, RETRY_CNT, Side, Sim, SimFailure, UNRELIABLE_EXPIRY};
use xroce_transport::{Completion, CompletionQueue, QpType, WcFlags, WcOpcode, WcStatus};
use xroce_wire::Psn;

impl Sim {
    pub(super) fn flow_of(&self, side: Side, c: &Completion) -> Option<usize> {
        self.flows.iter().position(|f| match c.queue {
            CompletionQueue::Send => f.requester == side && f.req_qpn.value() == c.qpn,
            CompletionQueue::Recv => f.requester != side && f.resp_qpn.value() == c.qpn,
        })
    }

    pub(super) fn check_completions(&mut self, side: Side) -> Result<(), SimFailure> {
        while let Some(c) = self.host(side).endpoint.poll_completion() {
            let Some(f) = self.flow_of(side, &c) else {
                // Two flows share an RC pair: the send side of one is the other's requester.
                return Err(SimFailure(format!("completion for no flow: {c:?}")));
            };
            match c.queue {
                CompletionQueue::Send => self.on_send_completion(f, side, c)?,
                CompletionQueue::Recv => self.on_recv_completion(f, side, c)?,
            }
        }
        Ok(())
    }

    pub(super) fn on_send_completion(
        &mut self,
        f: usize,
        side: Side,
        c: Completion,
    ) -> Result<(), SimFailure> {
        let flow = &mut self.flows[f];
        let Some(op) = flow.in_flight.pop_front() else {
            return Err(SimFailure(format!(
                "send completion with nothing in flight: {c:?}"
            )));
        };
        ensure!(
            c.wr_id == op.id,
            "flow {f}: completion for wr {} but {} was posted first",
            c.wr_id,
            op.id
        );
        if flow.failed {
            ensure!(
                c.status == WcStatus::WrFlushErr,
                "flow {f}: after the failure, {:?} instead of a flush",
                c.status
            );
            self.completed += 1;
            return Ok(());
        }
        if c.status == WcStatus::RetryExcErr && flow.qp_type == QpType::Rc {
            let req = flow.req_qpn;
            let psn = self
                .host(side)
                .endpoint
                .qp(req)
                .map(|q| q.oldest_unacked_psn());
            let ra = matches!(
                op.kind,
                OpKind::Read | OpKind::FetchAdd | OpKind::CompareSwap
            );
            match self.justify_retry_exhaustion(f, side, psn, ra) {
                Ok(()) => {}
                Err(e) if std::env::var("SIM_TRACE").is_ok() => {
                    let qp = self.host(side).endpoint.qp(req).map(|q| format!("{q:#?}"));
                    return Err(SimFailure(format!(
                        "{e}\n{}\n{:?}",
                        qp.unwrap_or_default(),
                        self.host(side).endpoint.counters()
                    )));
                }
                Err(e) => return Err(e),
            }
            let flow = &mut self.flows[f];
            flow.failed = true;
            self.net.report.justified_failures += 1;
            self.completed += 1;
            return Ok(());
        }
        let flow = &mut self.flows[f];
        ensure!(
            c.status == WcStatus::Success,
            "flow {f} ({:?}): {:?} failed with {:?}",
            flow.qp_type,
            op.kind,
            c.status
        );
        let qp_type = flow.qp_type;
        let (src, dst) = (flow.src(op.slot), flow.dst(op.slot));
        let resp_side = if side == Side::A { Side::B } else { Side::A };
        if qp_type == QpType::Rc {
            match op.kind {
                OpKind::Write | OpKind::WriteImm => {
                    let got = self.mem_read(resp_side, dst, op.len);
                    ensure!(
                        got == op.data,
                        "flow {f}: WRITE {} of {} bytes did not land intact",
                        op.id,
                        op.len
                    );
                }
                OpKind::Read => {
                    let got = self.mem_read(side, src, op.len);
                    ensure!(
                        got == op.data,
                        "flow {f}: READ {} of {} bytes did not come back intact",
                        op.id,
                        op.len
                    );
                }
                OpKind::FetchAdd | OpKind::CompareSwap => {
                    let got = self.mem_read(side, src, 8);
                    let orig = u64::from_le_bytes(got.try_into().unwrap_or_default());
                    ensure!(
                        orig == op.expect_orig,
                        "flow {f}: atomic {} returned {orig:#x}, the model says {:#x}",
                        op.id,
                        op.expect_orig
                    );
                }
                OpKind::Send | OpKind::SendImm => {}
            }
        }
        let expected_opcode = match op.kind {
            OpKind::Write | OpKind::WriteImm => WcOpcode::RdmaWrite,
            OpKind::Send | OpKind::SendImm => WcOpcode::Send,
            OpKind::Read => WcOpcode::RdmaRead,
            OpKind::FetchAdd => WcOpcode::FetchAdd,
            OpKind::CompareSwap => WcOpcode::CompSwap,
        };
        ensure!(
            c.opcode == expected_opcode,
            "flow {f}: completion opcode {:?} for {:?}",
            c.opcode,
            op.kind
        );
        if qp_type == QpType::Rc {
            self.flows[f].free_slots.push(op.slot);
        } else if let Some(u) = self.flows[f].unreliable.get_mut(&op.id) {
            // The slot stays busy until the message arrives or is known lost: a late
            // packet must not land in a reused slot.
            u.sent_at = Some(self.now);
        }
        self.completed += 1;
        Ok(())
    }

    pub(super) fn on_recv_completion(
        &mut self,
        f: usize,
        side: Side,
        c: Completion,
    ) -> Result<(), SimFailure> {
        let qp_failed = self
            .flows
            .iter()
            .any(|g| g.failed && (g.req_qpn.value() == c.qpn || g.resp_qpn.value() == c.qpn));
        let flow = &mut self.flows[f];
        let slot = flow.posted_recvs.pop_front();
        ensure!(
            slot == Some(c.wr_id as usize),
            "flow {f}: receive completion {} out of order (expected {slot:?})",
            c.wr_id
        );
        if c.status == WcStatus::WrFlushErr && qp_failed {
            // The QP of a failed flow was flushed.
            return Ok(());
        }
        ensure!(
            c.status == WcStatus::Success,
            "flow {f}: receive failed with {:?}",
            c.status
        );
        let slot = c.wr_id as usize;
        let recv_at = flow.recv(slot);
        let qp_type = flow.qp_type;
        let grh = if qp_type == QpType::Ud { GRH } else { 0 };
        let op = if qp_type == QpType::Rc {
            let Some(id) = flow.recv_consumers.pop_front() else {
                return Err(SimFailure(format!(
                    "flow {f}: receive completion with no message sent"
                )));
            };
            flow.in_flight
                .iter()
                .find(|o| o.id == id)
                .cloned()
                .or_else(|| flow.unreliable.get(&id).cloned())
        } else {
            let id = if c.flags.contains(WcFlags::WITH_IMM) {
                Some(u64::from(c.imm))
            } else {
                None
            };
            let id = match id {
                Some(id) => id,
                None => {
                    let first = self.mem_read(side, recv_at + grh as u64, 8);
                    u64::from_le_bytes(first.try_into().unwrap_or_default())
                }
            };
            let flow = &mut self.flows[f];
            let qp_type = flow.qp_type;
            let Some(op) = flow.unreliable.get_mut(&id) else {
                return Err(SimFailure(format!(
                    "flow {f}: message {id} was never sent, or arrived too late"
                )));
            };
            op.deliveries += 1;
            // UD has no duplicate detection: a duplicated datagram is delivered twice, as on
            // any RDMA NIC. UC drops duplicates by PSN.
            ensure!(
                op.deliveries == 1 || qp_type == QpType::Ud,
                "flow {f}: UC message {id} delivered {} times",
                op.deliveries
            );
            Some(op.clone())
        };
        if let Some(op) = op {
            match op.kind {
                OpKind::WriteImm => {
                    ensure!(
                        c.opcode == WcOpcode::RecvRdmaWithImm && c.byte_len as usize == op.len,
                        "flow {f}: WRITE_IMM receive {c:?} for {} bytes",
                        op.len
                    );
                    let dst = self.flows[f].dst(op.slot);
                    let got = self.mem_read(side, dst, op.len);
                    ensure!(
                        got == op.data,
                        "flow {f}: WRITE_IMM {} data wrong at the responder",
                        op.id
                    );
                }
                _ => {
                    ensure!(
                        c.opcode == WcOpcode::Recv && c.byte_len as usize == op.len + grh,
                        "flow {f}: receive {c:?} for a {}-byte SEND",
                        op.len
                    );
                    let got = self.mem_read(side, recv_at + grh as u64, op.len);
                    ensure!(
                        got == op.data,
                        "flow {f}: SEND {} data wrong in the receive buffer",
                        op.id
                    );
                }
            }
            if matches!(op.kind, OpKind::SendImm | OpKind::WriteImm) {
                ensure!(
                    c.flags.contains(WcFlags::WITH_IMM) && c.imm == op.id as u32,
                    "flow {f}: immediate data lost"
                );
            }
        }
        self.flows[f].free_recv_slots.push(slot);
        Ok(())
    }

    /// Notes when each RC requester's oldest unacknowledged PSN moves: its retry budget is
    /// reset then, so only what happens afterwards can exhaust it.
    pub(super) fn sample_progress(&mut self) {
        for f in 0..self.flows.len() {
            let flow = &self.flows[f];
            if flow.qp_type != QpType::Rc {
                continue;
            }
            let (side, qpn) = (flow.requester, flow.req_qpn);
            let now = self.now;
            let psn = self
                .host(side)
                .endpoint
                .qp(qpn)
                .map(|q| q.oldest_unacked_psn());
            let flow = &mut self.flows[f];
            match (psn, flow.oldest) {
                (Some(p), Some((q, _))) if p == q => {}
                (Some(p), _) => flow.oldest = Some((p, now)),
                (None, _) => {}
            }
        }
    }

    /// A retry exhaustion is legitimate only if each of the last `retry_cnt + 1` attempts to
    /// get the oldest unacknowledged PSN through failed on the network: its request did not
    /// arrive intact, or no response covering it came back intact before the next attempt.
    pub(super) fn justify_retry_exhaustion(
        &self,
        f: usize,
        side: Side,
        psn: Option<Psn>,
        read_or_atomic: bool,
    ) -> Result<(), SimFailure> {
        let flow = &self.flows[f];
        let (req, resp) = (flow.req_qpn, flow.resp_qpn);
        let Some(psn) = psn else {
            return Err(SimFailure(format!("QP {req} vanished")));
        };
        // Since when P has been the oldest unacknowledged PSN (the budget was full then).
        let since = match flow.oldest {
            Some((p, t)) if p == psn => t,
            _ => self.now,
        };
        let other = if side == Side::A { Side::B } else { Side::A };
        let attempts = self
            .net
            .log
            .iter()
            .filter(|e| {
                e.to == other
                    && e.dest_qpn == resp
                    && !e.response
                    && e.at >= since
                    && e.psn.distance(psn) <= 0
                    && e.last_psn.distance(psn) >= 0
            })
            .count();
        // The first transmission may predate `since`; the retransmissions cannot.
        ensure!(
            attempts >= usize::from(RETRY_CNT),
            "QP {req}: retry budget exhausted after only {attempts} retransmissions of PSN {psn:?} since {since:?}"
        );
        // Any answer to P arriving intact after `since` would have moved P on: for a READ a
        // response for P itself, for an atomic its acknowledgement, for a SEND/WRITE a
        // positive ACK for P or any response for a later PSN.
        let answer = self.net.log.iter().find(|e| {
            e.to == side
                && e.dest_qpn == req
                && e.response
                && e.arrived.is_some_and(|t| t >= since && t <= self.now)
                && if read_or_atomic {
                    e.psn == psn && e.positive && !e.plain_ack
                } else {
                    e.psn.distance(psn) > 0 || (e.psn == psn && e.positive)
                }
        });
        if let Some(e) = answer {
            return Err(SimFailure(format!(
                "QP {req}: retry budget exhausted (noticed at {:?}) although an answer for PSN {psn:?} (read/atomic: {read_or_atomic}) arrived intact at {:?}, after it became the oldest at {since:?}: {e:?}",
                self.now, e.arrived
            )));
        }
        Ok(())
    }

    /// UC/UD messages (and UC WRITEs, which complete nowhere at the responder) that were
    /// sent long enough ago are either delivered or lost: release their slots.
    pub(super) fn expire_unreliable(&mut self) {
        let now = self.now;
        for flow in &mut self.flows {
            let expired: Vec<u64> = flow
                .unreliable
                .iter()
                .filter(|(_, op)| op.sent_at.is_some_and(|t| now - t >= UNRELIABLE_EXPIRY))
                .map(|(&id, _)| id)
                .collect();
            for id in expired {
                if let Some(op) = flow.unreliable.remove(&id) {
                    flow.free_slots.push(op.slot);
                    let consumes =
                        matches!(op.kind, OpKind::Send | OpKind::SendImm | OpKind::WriteImm);
                    if consumes && op.deliveries == 0 {
                        flow.lost += 1;
                    }
                }
            }
        }
    }
}
