//! What the responder sends back, in PSN order through one queue: ACKs (coalesced: a new
//! ACK replaces an ACK still waiting at the tail), NAKs, READ responses (streamed one packet
//! per transmit opportunity) and atomic acknowledgements.
//!
//! READ and atomic requests leave responder resources behind, so that duplicates are
//! answered per IBTA 9.7.5.1.4: SEND/WRITE re-ACKed, READ replayed from the resource over
//! the original range, atomics answered with the saved original value and never executed
//! twice.

use xroce_wire::{AethRepr, AtomicAckEthRepr, NakCode, Position, Psn, Syndrome};

use crate::attributes::QpType;
use crate::context::{AsyncEvent, Cx, Emit};
use crate::counters::Counter;
use crate::memory::{GatherFrom, MemoryTable, gather};
use crate::packet::{Headers, Kind, Packet};
use crate::qp::QueuePair;

/// A response waiting to be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Response {
    /// An ACK, NAK or RNR NAK.
    Ack {
        psn: Psn,
        syndrome: Syndrome,
        msn: u32,
    },
    /// READ response packets still to send.
    Read {
        rkey: u32,
        va: u64,
        resid: u64,
        psn: Psn,
        first: bool,
        msn: u32,
    },
    /// An atomic acknowledgement.
    AtomicAck { psn: Psn, orig: u64, msn: u32 },
    /// Selective repeat: a PSN sequence error NAK with a selective acknowledgement of what
    /// is held, both as they are when it is sent (a newer one replaces one still waiting
    /// at the tail).
    Sack,
}

/// What a READ or atomic request left behind, to answer its duplicates (IBTA 9.7.5.1.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resource {
    Read {
        first_psn: Psn,
        last_psn: Psn,
        va: u64,
        len: u64,
        rkey: u32,
    },
    Atomic {
        psn: Psn,
        orig: u64,
    },
}

impl QueuePair {
    /// A request with a PSN already executed (IBTA 9.7.5.1.4).
    pub(super) fn handle_duplicate<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) {
        let h = &pkt.h;
        match h.kind {
            Kind::Send | Kind::Write => {
                // C9-105: acknowledge again, with the last PSN executed; never re-execute.
                let ack = Response::Ack {
                    psn: self.resp.psn.wrapping_sub(1),
                    syndrome: Syndrome::ACK_UNLIMITED,
                    msn: self.resp.msn,
                };
                if self.queue_response(ack, cx) {
                    cx.count(Counter::duplicate_request);
                }
            }
            Kind::ReadRequest => {
                let Some(reth) = h.reth else {
                    return cx.count(Counter::duplicate_request_no_resource);
                };
                let found = self.resp.resources.iter().rev().find_map(|r| match *r {
                    Resource::Read {
                        first_psn,
                        last_psn,
                        va,
                        len,
                        rkey,
                    } if h.psn.distance(first_psn) >= 0 && h.psn.distance(last_psn) <= 0 => {
                        Some((first_psn, va, len, rkey))
                    }
                    _ => None,
                });
                // The retried request may only ask for (the rest of) the original range.
                let valid = found.filter(|&(_, va, len, rkey)| {
                    let end = va.checked_add(len);
                    let req_end = reth.va.checked_add(u64::from(reth.dma_len));
                    rkey == reth.rkey.0 && reth.va >= va && req_end.is_some() && req_end <= end
                });
                let Some((first_psn, ..)) = valid else {
                    return cx.count(Counter::duplicate_request_no_resource);
                };
                let read = Response::Read {
                    rkey: reth.rkey.0,
                    va: reth.va,
                    resid: u64::from(reth.dma_len),
                    psn: h.psn,
                    first: h.psn == first_psn,
                    msn: self.resp.msn,
                };
                if self.queue_response(read, cx) {
                    cx.count(Counter::duplicate_request);
                }
            }
            Kind::CompareSwap | Kind::FetchAdd => {
                let orig = self.resp.resources.iter().find_map(|r| match *r {
                    Resource::Atomic { psn, orig } if psn == h.psn => Some(orig),
                    _ => None,
                });
                let Some(orig) = orig else {
                    return cx.count(Counter::duplicate_request_no_resource);
                };
                let ack = Response::AtomicAck {
                    psn: h.psn,
                    orig,
                    msn: self.resp.msn,
                };
                if self.queue_response(ack, cx) {
                    cx.count(Counter::duplicate_request);
                }
            }
            _ => cx.count(Counter::rcvd_wrong_transport),
        }
    }

    /// Keeps what a READ or atomic left behind, for its duplicates.
    pub(super) fn add_resource(&mut self, res: Resource) {
        // The requester must not exceed max_dest_rd_atomic; if it does, the oldest resource
        // is recycled, as rxe does.
        if self.resp.resources.len() >= self.resp.max_resources.max(1) {
            self.resp.resources.pop_front();
        }
        self.resp.resources.push_back(res);
    }

    /// Queues a response and says whether it was. A positive ACK replaces a positive ACK
    /// still waiting at the tail (coalescing), and a selective acknowledgement is not
    /// queued while one waits anywhere in the queue (it reports the store as it is when it
    /// leaves); a full queue drops it, counted in
    /// `response_queue_full` (the requester's timer recovers). The caller counts what the
    /// request was only when the response was queued, so that a request lands in exactly
    /// one counter.
    // Forced inline: the acknowledgement of every request goes through here, and out of
    // line it costs 0.4 % of the pipeline benchmark's instructions (callgrind).
    #[inline(always)]
    pub(super) fn queue_response<M: MemoryTable + ?Sized>(
        &mut self,
        r: Response,
        cx: &mut Cx<'_, M>,
    ) -> bool {
        let q = &mut self.resp.responses;
        if let (
            Response::Ack {
                syndrome: Syndrome::Ack { .. },
                ..
            },
            Some(
                back @ Response::Ack {
                    syndrome: Syndrome::Ack { .. },
                    ..
                },
            ),
        ) = (r, q.back_mut())
        {
            *back = r;
            return true;
        }
        // A selective acknowledgement says what is held when it leaves, not when it was
        // queued: one already waiting says all a second would.
        if r == Response::Sack && q.contains(&Response::Sack) {
            return true;
        }
        if !self.resp.has_room() {
            cx.count(Counter::response_queue_full);
            return false;
        }
        self.resp.responses.push_back(r);
        true
    }

    /// Emits the selective acknowledgement at the front of the responses: a PSN sequence
    /// error NAK for the PSN expected, with what is held as it is now (nothing if nothing
    /// is held any more: the acknowledgement that followed says so).
    // Cold, out of line: only selective repeat comes here.
    #[cold]
    #[inline(never)]
    fn poll_sack<M: MemoryTable + ?Sized, E: Emit>(
        &mut self,
        cx: &mut Cx<'_, M>,
        out: &mut E,
    ) -> bool {
        self.resp.responses.pop_front();
        if self.resp.held.is_empty() {
            return self.poll_response(cx, out);
        }
        let psn = self.resp.psn;
        let dest = self.attr.dest_qpn;
        let path = self.attr.path;
        let mut h = Headers::new(QpType::Rc, Kind::Ack, Position::Only, dest, psn);
        h.aeth = Some(AethRepr {
            syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
            msn: self.resp.msn,
        });
        let sack = self.resp.held.sack();
        self.resp.held.on_reported();
        let Some(dst) = out.begin_with_trailer(&h, &path, sack.buffer_len()) else {
            self.resp.responses.push_front(Response::Sack);
            return false;
        };
        if sack.emit(dst).is_err() {
            return false;
        }
        out.commit();
        cx.count(Counter::sr_naks_sent);
        true
    }

    /// Emits the next response packet, if one waits. Returns whether one was emitted.
    pub(crate) fn poll_response<M: MemoryTable + ?Sized, E: Emit>(
        &mut self,
        cx: &mut Cx<'_, M>,
        out: &mut E,
    ) -> bool {
        let Some(front) = self.resp.responses.front().copied() else {
            return false;
        };
        let dest = self.attr.dest_qpn;
        let path = self.attr.path;
        match front {
            Response::Ack { psn, syndrome, msn } => {
                let mut h = Headers::new(QpType::Rc, Kind::Ack, Position::Only, dest, psn);
                h.aeth = Some(AethRepr { syndrome, msn });
                if out.begin(&h, &path, 0).is_none() {
                    return false;
                }
                out.commit();
                self.resp.responses.pop_front();
            }
            Response::Sack => return self.poll_sack(cx, out),
            Response::AtomicAck { psn, orig, msn } => {
                let mut h = Headers::new(QpType::Rc, Kind::AtomicAck, Position::Only, dest, psn);
                h.aeth = Some(AethRepr {
                    syndrome: Syndrome::ACK_UNLIMITED,
                    msn,
                });
                h.atomic_ack = Some(AtomicAckEthRepr { orig_data: orig });
                if out.begin(&h, &path, 0).is_none() {
                    return false;
                }
                out.commit();
                self.resp.responses.pop_front();
            }
            Response::Read {
                rkey,
                va,
                resid,
                psn,
                first,
                msn,
            } => {
                let mtu = u64::from(self.mtu());
                let n = resid.min(mtu);
                let pos = match (first, resid <= mtu) {
                    (true, true) => Position::Only,
                    (true, false) => Position::First,
                    (false, false) => Position::Middle,
                    (false, true) => Position::Last,
                };
                let mut h = Headers::new(QpType::Rc, Kind::ReadResponse, pos, dest, psn);
                if pos != Position::Middle {
                    h.aeth = Some(AethRepr {
                        syndrome: Syndrome::ACK_UNLIMITED,
                        msn,
                    });
                }
                let from = GatherFrom::Remote { rkey, va };
                let Some(dst) = out.begin(&h, &path, n as usize) else {
                    return false;
                };
                if n > 0 && gather(&*cx.mem, self.config.pd, from, 0, dst).is_err() {
                    // The region went away under the READ: a remote access error.
                    self.resp.responses.pop_front();
                    cx.count(Counter::sent_nak_remote_access);
                    let nak = Response::Ack {
                        psn,
                        syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
                        msn,
                    };
                    self.resp.responses.push_front(nak);
                    self.enter_error(cx, None, AsyncEvent::QpAccessError(self.config.qpn));
                    // Send the NAK in this turn: a QP that sends nothing now leaves the
                    // endpoint's active list, and nothing else would bring it back.
                    return self.poll_response(cx, out);
                }
                out.commit();
                let resid = resid - n;
                if resid == 0 {
                    self.resp.responses.pop_front();
                } else if let Some(Response::Read {
                    va: v,
                    resid: r,
                    psn: p,
                    first: f,
                    ..
                }) = self.resp.responses.front_mut()
                {
                    *v = va.wrapping_add(n);
                    *r = resid;
                    *p = psn.next();
                    *f = false;
                }
            }
        }
        true
    }
}
