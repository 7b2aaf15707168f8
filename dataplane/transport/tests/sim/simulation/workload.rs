//! The workload: the flows (one direction of traffic over one QP pair), the operations in
//! flight with what the model expects of each, and posting receives and random operations
//! of every kind the flow's service has.

use std::collections::{HashMap, VecDeque};

use super::{BASE, GRH, KEY, RKEY, Side, Sim, SimFailure, WINDOW};
use rand::Rng;
use xroce_transport::{
    Gather, Instant, QpType, RecvWqe, SendFlags, SendOp, SendWqe, SgeList, UdDest,
};
use xroce_wire::{Psn, Qpn};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OpKind {
    Write,
    WriteImm,
    Send,
    SendImm,
    Read,
    FetchAdd,
    CompareSwap,
}

#[derive(Clone, Debug)]
pub(super) struct Op {
    pub(super) id: u64,
    pub(super) kind: OpKind,
    pub(super) slot: usize,
    pub(super) len: usize,
    pub(super) data: Vec<u8>,
    /// Atomics: the original value the model expects back.
    pub(super) expect_orig: u64,
    /// UC/UD: when the send completed (the message is lost if it has not arrived within
    /// [`UNRELIABLE_EXPIRY`] of that).
    pub(super) sent_at: Option<Instant>,
    /// UC/UD: how many times it arrived.
    pub(super) deliveries: u32,
}

/// One direction of traffic over one QP pair.
pub(super) struct Flow {
    pub(super) qp_type: QpType,
    pub(super) requester: Side,
    pub(super) req_qpn: Qpn,
    pub(super) resp_qpn: Qpn,
    /// Byte offsets of this flow's areas in the two hosts' regions.
    pub(super) src_area: u64,
    pub(super) dst_area: u64,
    pub(super) recv_area: u64,
    pub(super) atomic_word: u64,
    pub(super) next_id: u64,
    pub(super) free_slots: Vec<usize>,
    pub(super) in_flight: VecDeque<Op>,
    /// Ops that consume a receive at the responder, in posting order (RC).
    pub(super) recv_consumers: VecDeque<u64>,
    /// UC/UD ops by id, until checked.
    pub(super) unreliable: HashMap<u64, Op>,
    pub(super) free_recv_slots: Vec<usize>,
    /// Receive slots posted, in order.
    pub(super) posted_recvs: VecDeque<usize>,
    pub(super) atomic_value: u64,
    pub(super) slot_len: usize,
    /// UC/UD messages that never arrived.
    pub(super) lost: usize,
    /// The requester's oldest unacknowledged PSN and when it last changed (RC).
    pub(super) oldest: Option<(Psn, Instant)>,
    /// The flow's QP failed with an exhausted retry budget (justified by the network log);
    /// what remains is flushed.
    pub(super) failed: bool,
}

impl Flow {
    pub(super) fn src(&self, slot: usize) -> u64 {
        self.src_area + (slot * self.slot_len) as u64
    }
    pub(super) fn dst(&self, slot: usize) -> u64 {
        self.dst_area + (slot * self.slot_len) as u64
    }
    pub(super) fn recv(&self, slot: usize) -> u64 {
        self.recv_area + (slot * (self.slot_len + GRH)) as u64
    }
}

impl Sim {
    pub(super) fn pick_len(&mut self, max: usize) -> usize {
        let mtu = self.cfg.mtu.bytes();
        let edges = [0, 1, 7, 8, mtu - 1, mtu, mtu + 1, 2 * mtu, 4 * mtu];
        let len = if self.rng.random_bool(0.3) {
            edges[self.rng.random_range(0..edges.len())]
        } else {
            self.rng.random_range(0..=4 * mtu)
        };
        len.min(max)
    }

    pub(super) fn random_bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.rng.fill(&mut v[..]);
        v
    }

    /// Keeps receive queues stocked (now and then letting them run dry).
    pub(super) fn post_receives(&mut self) -> Result<(), SimFailure> {
        for f in 0..self.flows.len() {
            if self.cfg.starve_receives && self.rng.random_bool(0.05) {
                continue;
            }
            let (resp_side, resp_qpn) = {
                let flow = &self.flows[f];
                let side = if flow.requester == Side::A {
                    Side::B
                } else {
                    Side::A
                };
                (side, flow.resp_qpn)
            };
            while let Some(slot) = self.flows[f].free_recv_slots.pop() {
                let flow = &self.flows[f];
                let len = (flow.slot_len + GRH) as u32;
                let wqe = RecvWqe {
                    wr_id: slot as u64,
                    sges: SgeList::single(BASE + flow.recv(slot), len, KEY),
                };
                let now = self.now;
                let r = self.host(resp_side).endpoint.post_recv(now, resp_qpn, wqe);
                ensure!(r.is_ok(), "post_recv on {resp_qpn} failed: {r:?}");
                self.flows[f].posted_recvs.push_back(slot);
            }
        }
        Ok(())
    }

    /// Posts new operations while the flows have room and work remains.
    pub(super) fn post_ops(&mut self) -> Result<(), SimFailure> {
        for f in 0..self.flows.len() {
            while self.posted < self.cfg.ops
                && !self.flows[f].failed
                && self.flows[f].in_flight.len() < WINDOW
                && !self.flows[f].free_slots.is_empty()
            {
                self.post_one(f)?;
            }
        }
        Ok(())
    }

    pub(super) fn post_one(&mut self, f: usize) -> Result<(), SimFailure> {
        let qp_type = self.flows[f].qp_type;
        let kinds: &[OpKind] = match qp_type {
            QpType::Rc => &[
                OpKind::Write,
                OpKind::WriteImm,
                OpKind::Send,
                OpKind::SendImm,
                OpKind::Read,
                OpKind::FetchAdd,
                OpKind::CompareSwap,
            ],
            QpType::Uc => &[
                OpKind::Write,
                OpKind::WriteImm,
                OpKind::Send,
                OpKind::SendImm,
            ],
            QpType::Ud => &[OpKind::Send, OpKind::SendImm],
        };
        let kind = kinds[self.rng.random_range(0..kinds.len())];
        // NOTE(unwrap): post_ops checked that a slot is free.
        let slot = self.flows[f].free_slots.pop().unwrap();
        let slot_len = self.flows[f].slot_len;
        let mtu = self.cfg.mtu.bytes();
        let mut len = match (qp_type, kind) {
            (_, OpKind::FetchAdd | OpKind::CompareSwap) => 8,
            (QpType::Ud, _) => self.pick_len(mtu),
            _ => self.pick_len(slot_len - 64),
        };
        // Unreliable messages that carry no immediate are identified by their first 8 bytes.
        if qp_type != QpType::Rc && kind == OpKind::Send {
            len = len.max(8);
        }
        let id = self.flows[f].next_id;
        self.flows[f].next_id += 1;
        let mut data = self.random_bytes(len);
        if qp_type != QpType::Rc && kind == OpKind::Send {
            data[..8].copy_from_slice(&id.to_le_bytes());
        }
        let flow = &self.flows[f];
        let (req_side, resp_side) = if flow.requester == Side::A {
            (Side::A, Side::B)
        } else {
            (Side::B, Side::A)
        };
        let src = flow.src(slot);
        let dst = flow.dst(slot);
        let word = flow.atomic_word;
        let mut expect_orig = 0;
        let op = match kind {
            OpKind::Write => SendOp::Write {
                remote_addr: BASE + dst,
                rkey: RKEY,
            },
            OpKind::WriteImm => SendOp::WriteWithImm {
                remote_addr: BASE + dst,
                rkey: RKEY,
                imm: id as u32,
            },
            OpKind::Send => SendOp::Send,
            OpKind::SendImm => SendOp::SendWithImm { imm: id as u32 },
            OpKind::Read => SendOp::Read {
                remote_addr: BASE + dst,
                rkey: RKEY,
            },
            OpKind::FetchAdd => {
                let add = self.rng.random::<u64>() >> 8;
                let flow = &mut self.flows[f];
                expect_orig = flow.atomic_value;
                flow.atomic_value = flow.atomic_value.wrapping_add(add);
                SendOp::FetchAdd {
                    remote_addr: BASE + word,
                    rkey: RKEY,
                    add,
                }
            }
            OpKind::CompareSwap => {
                let hit = self.rng.random_bool(0.5);
                let swap = self.rng.random::<u64>();
                let flow = &mut self.flows[f];
                let compare = if hit {
                    flow.atomic_value
                } else {
                    flow.atomic_value ^ 1
                };
                expect_orig = flow.atomic_value;
                if hit {
                    flow.atomic_value = swap;
                }
                SendOp::CompareSwap {
                    remote_addr: BASE + word,
                    rkey: RKEY,
                    compare,
                    swap,
                }
            }
        };
        match kind {
            OpKind::Read => self.mem_write(resp_side, dst, &data),
            OpKind::FetchAdd | OpKind::CompareSwap => {}
            _ => self.mem_write(req_side, src, &data),
        }
        let ud = if qp_type == QpType::Ud {
            let (from, to) = if req_side == Side::A {
                (&self.a, &self.b)
            } else {
                (&self.b, &self.a)
            };
            Some(UdDest {
                path: from.path_to(to),
                remote_qpn: self.flows[f].resp_qpn.value(),
                remote_qkey: 0x1111_1111,
            })
        } else {
            None
        };
        let wqe = SendWqe {
            wr_id: id,
            op,
            flags: SendFlags::SIGNALED,
            data: Gather::Sges(SgeList::single(BASE + src, len as u32, KEY)),
            ud,
        };
        let now = self.now;
        let req_qpn = self.flows[f].req_qpn;
        let r = self.host(req_side).endpoint.post_send(now, req_qpn, wqe);
        ensure!(r.is_ok(), "post_send {kind:?} on {req_qpn} failed: {r:?}");
        let op = Op {
            id,
            kind,
            slot,
            len,
            data,
            expect_orig,
            sent_at: None,
            deliveries: 0,
        };
        let flow = &mut self.flows[f];
        if qp_type != QpType::Rc {
            flow.unreliable.insert(id, op.clone());
        } else if matches!(kind, OpKind::Send | OpKind::SendImm | OpKind::WriteImm) {
            flow.recv_consumers.push_back(id);
        }
        flow.in_flight.push_back(op);
        self.posted += 1;
        Ok(())
    }
}
