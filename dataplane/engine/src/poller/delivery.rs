//! Delivery: completions into the applications' CQ rings, completion-channel
//! notifications, and asynchronous events.
//!
//! A completion is the moment an application may reuse its buffers and its ring slots, and
//! an application may sleep on a completion channel for it: the ring slots of the
//! completed work requests are freed before the CQE is published, and a CQ's arm word is
//! checked once per pass for the CQs written in it, not once per completion nor for every
//! CQ of the poller. Nothing here blocks on an application: a CQ that overflows is in
//! error and its owner hears of it (IBTA 10.10.2.3), and a channel or event socket nobody
//! reads loses what does not fit.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::debug;
use verbs_shm::contract::{ARM_NEXT, ARM_NONE, ARM_SOLICITED, Cqe};
use verbs_shm::protocol::{CompletionEvent, EventRecord};
use verbs_shm::ring::Producer;
use xroce_transport::{
    AsyncEvent, Completion, CompletionQueue, Instant, NetworkHeader, WcFlags, WcStatus,
};
use xroce_wire::Qpn;
use zerocopy::IntoBytes;

use super::Poller;

/// `ibv_event_type` values the daemon raises.
pub mod event_type {
    /// `IBV_EVENT_CQ_ERR`.
    pub const CQ_ERR: u32 = 0;
    /// `IBV_EVENT_QP_FATAL`.
    pub const QP_FATAL: u32 = 1;
    /// `IBV_EVENT_QP_REQ_ERR`.
    pub const QP_REQ_ERR: u32 = 2;
    /// `IBV_EVENT_QP_ACCESS_ERR`.
    pub const QP_ACCESS_ERR: u32 = 3;
    /// `IBV_EVENT_COMM_EST`.
    pub const COMM_EST: u32 = 4;
    /// `IBV_EVENT_SQ_DRAINED`.
    pub const SQ_DRAINED: u32 = 5;
    /// `IBV_EVENT_SRQ_ERR`.
    pub const SRQ_ERR: u32 = 14;
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`.
    pub const SRQ_LIMIT_REACHED: u32 = 15;
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`.
    pub const QP_LAST_WQE_REACHED: u32 = 16;
}

/// Where an application's asynchronous events go.
#[derive(Debug)]
pub struct EventSink {
    sock: OwnedFd,
}

impl EventSink {
    /// Events are written to `sock` (the daemon's end of the application's event socket).
    pub fn new(sock: OwnedFd) -> EventSink {
        EventSink { sock }
    }

    pub(super) fn raise(&self, event_type: u32, element: u32) {
        let record = EventRecord {
            event_type,
            element,
        };
        send_without_waiting(&self.sock, record.as_bytes());
    }
}

/// Sends one record on an application's socket without blocking: an application that
/// never reads its socket loses records, and no other application waits for it.
fn send_without_waiting(sock: &impl AsRawFd, bytes: &[u8]) {
    let _ = nix::sys::socket::send(
        sock.as_raw_fd(),
        bytes,
        nix::sys::socket::MsgFlags::MSG_DONTWAIT | nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
    );
}

/// A completion queue: its ring and whom to tell.
#[derive(Debug)]
pub(super) struct CqEntry {
    pub(super) ring: Producer<Cqe>,
    pub(super) channel: Option<Arc<OwnedFd>>,
    pub(super) events: Arc<EventSink>,
    pub(super) broken: bool,
    /// Something was written since the notification check.
    pub(super) wrote: bool,
    pub(super) wrote_solicited: bool,
}

impl Poller {
    /// Writes completions into CQ rings, raises notifications and events.
    pub(super) fn deliver(&mut self, now: Instant) -> usize {
        // The pass's clock reading stamps its completions (one clock read, not one each).
        let stamp = Duration::from_nanos(now.as_nanos());
        let mut n = 0;
        while let Some(c) = self
            .endpoint
            .poll_completion()
            .or_else(|| self.rings.refused.pop_front())
        {
            n += 1;
            self.write_completion(&c, stamp);
        }
        self.notify_written();
        while let Some(e) = self.endpoint.poll_event() {
            n += 1;
            self.raise(e);
        }
        n
    }

    /// Writes one completion into its CQ's ring, after freeing the ring slots of the work
    /// requests it completes.
    fn write_completion(&mut self, c: &Completion, stamp: Duration) {
        let Some(q) = self.rings.qps.get(&c.qpn) else {
            debug!("completion for a QP that is gone: {c:?}");
            return;
        };
        // The completed work requests' ring slots are free again before the application
        // sees the completion, so that it can post in their place at once (the rings
        // themselves are read only when their post bits say so).
        if let Some(qp) = self.endpoint.qp(Qpn::new(c.qpn)) {
            match c.queue {
                CompletionQueue::Send => q.sq.retire(qp.send_queue_len() as u32),
                CompletionQueue::Recv => match (&q.rq, qp.config().srq) {
                    (Some(rq), _) => rq.retire(qp.recv_queue_len() as u32),
                    (None, Some(id)) => {
                        if let (Some(s), Some(srq)) =
                            (self.rings.srqs.get(&id.0), self.endpoint.srq(id))
                        {
                            s.ring.retire(srq.len() as u32);
                        }
                    }
                    (None, None) => {}
                },
            }
        }
        let cq = match c.queue {
            CompletionQueue::Send => q.send_cq,
            CompletionQueue::Recv => q.recv_cq,
        };
        let Some(entry) = self.cqs.get_mut(&cq) else {
            debug!("completion for a CQ that is gone: {c:?}");
            return;
        };
        if entry.broken {
            return;
        }
        tracing::trace!("CQ {cq}: {c:?}");
        match entry.ring.push(&to_cqe(c, stamp)) {
            Ok(true) => {
                if !entry.wrote {
                    self.written.push(cq);
                }
                entry.wrote = true;
                entry.wrote_solicited |= c.solicited || c.status != WcStatus::Success;
            }
            Ok(false) | Err(_) => {
                // IBTA 10.10.2.3: CQ overrun is a CQ error; the application hears of it.
                self.counters.cq_overflow += 1;
                entry.broken = true;
                entry.ring.ring().broken().store(1, Ordering::Release);
                entry.events.raise(event_type::CQ_ERR, cq);
            }
        }
    }

    /// Notifies the armed CQs written since the last call (not every CQ of the poller on
    /// every pass): their event count, and their completion channel.
    fn notify_written(&mut self) {
        let mut written = std::mem::take(&mut self.written);
        for &handle in &written {
            let Some(entry) = self.cqs.get_mut(&handle) else {
                continue;
            };
            let arm = entry.ring.ring().arm();
            let mode = arm.load(Ordering::Acquire);
            let fire = mode == ARM_NEXT || (mode == ARM_SOLICITED && entry.wrote_solicited);
            if fire
                && arm
                    .compare_exchange(mode, ARM_NONE, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                entry.ring.ring().events().fetch_add(1, Ordering::AcqRel);
                if let Some(ch) = &entry.channel {
                    let ev = CompletionEvent {
                        cq: handle,
                        reserved: 0,
                    };
                    send_without_waiting(ch.as_ref(), ev.as_bytes());
                }
            }
            entry.wrote = false;
            entry.wrote_solicited = false;
        }
        written.clear();
        self.written = written;
    }

    /// Tells the owner of the QP or SRQ an event concerns.
    fn raise(&self, e: AsyncEvent) {
        let (qpn, kind) = match e {
            AsyncEvent::QpFatal(q) => (q, event_type::QP_FATAL),
            AsyncEvent::QpRequestError(q) => (q, event_type::QP_REQ_ERR),
            AsyncEvent::QpAccessError(q) => (q, event_type::QP_ACCESS_ERR),
            AsyncEvent::CommEstablished(q) => (q, event_type::COMM_EST),
            AsyncEvent::SqDrained(q) => (q, event_type::SQ_DRAINED),
            AsyncEvent::LastWqeReached(q) => (q, event_type::QP_LAST_WQE_REACHED),
            AsyncEvent::SrqLimitReached(id) => {
                if let Some(s) = self.rings.srqs.get(&id.0) {
                    s.events.raise(event_type::SRQ_LIMIT_REACHED, s.handle);
                }
                return;
            }
        };
        if let Some(q) = self.rings.qps.get(&qpn.value()) {
            q.events.raise(kind, q.handle);
        }
    }
}

/// What a UD receive's `sl` says on RoCE: which network header the datagram came with,
/// as RDMA NICs (ConnectX) report it there for IBTA Annex A17.4.5.1 (RoCE carries no
/// service level). rxe leaves it 0 for user space; UCX's UD transport, which finds the
/// destination address in the GRH area by this value, then takes every IPv4 datagram
/// for a stranger's and drops it.
fn roce_packet_type(header: NetworkHeader) -> u8 {
    match header {
        NetworkHeader::Ipv6 => 1,
        NetworkHeader::Ipv4 => 2,
    }
}

/// Converts a completion into the shared CQE format.
fn to_cqe(c: &Completion, at: Duration) -> Cqe {
    // Immediate data travels in network byte order through verbs (`__be32 imm_data`); the
    // invalidated rkey is a host-order number.
    let imm = if c.flags.contains(WcFlags::WITH_IMM) {
        c.imm.to_be()
    } else {
        c.imm
    };
    Cqe {
        wr_id: c.wr_id,
        status: c.status as u32,
        opcode: c.opcode as u32,
        vendor_err: 0,
        byte_len: c.byte_len,
        imm_data: imm,
        qp_num: c.qpn,
        src_qp: c.src_qp,
        wc_flags: c.flags.0,
        pkey_index: 0,
        slid: 0,
        sl: c.network_header.map_or(0, roce_packet_type),
        dlid_path_bits: 0,
        solicited: u8::from(c.solicited),
        reserved0: 0,
        timestamp_ns: at.as_nanos() as u64,
        reserved1: 0,
    }
}

#[cfg(test)]
mod tests {
    use xroce_transport::WcOpcode;

    use super::*;

    #[test]
    fn immediate_data_goes_out_in_network_byte_order() {
        let mut c = Completion::flushed(1, WcOpcode::Recv, CompletionQueue::Recv, 0x42);
        c.imm = 0x1234_5678;
        c.flags = WcFlags::WITH_IMM;
        let cqe = to_cqe(&c, Duration::from_nanos(99));
        assert_eq!(cqe.imm_data, 0x1234_5678u32.to_be());
        assert_eq!((cqe.qp_num, cqe.timestamp_ns), (0x42, 99));
        // An invalidated rkey is a number, not bytes.
        c.flags = WcFlags::default();
        assert_eq!(to_cqe(&c, Duration::ZERO).imm_data, 0x1234_5678);
    }

    #[test]
    fn a_ud_receive_says_its_network_header_in_sl_as_rdma_nics_do() {
        let mut c = Completion::flushed(1, WcOpcode::Recv, CompletionQueue::Recv, 0x42);
        assert_eq!(to_cqe(&c, Duration::ZERO).sl, 0);
        c.network_header = Some(NetworkHeader::Ipv4);
        assert_eq!(to_cqe(&c, Duration::ZERO).sl, 2);
        c.network_header = Some(NetworkHeader::Ipv6);
        assert_eq!(to_cqe(&c, Duration::ZERO).sl, 1);
    }
}
