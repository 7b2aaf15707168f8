//! What a queue pair borrows from its owner for one call: the time, the memory table, the
//! counters, its shared receive queue, and the sinks for events and packets.

use std::collections::VecDeque;

use xroce_wire::Qpn;

use crate::attributes::Path;
use crate::counters::{Counter, Counters};
use crate::memory::MemoryTable;
use crate::packet::Headers;
use crate::srq::{Srq, SrqId};
use crate::time::Instant;

/// Asynchronous events (`ibv_event_type`), for the engine to deliver to the application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// The QP entered the error state because of an error the application did not cause
    /// through a work request (`IBV_EVENT_QP_FATAL`).
    QpFatal(Qpn),
    /// A request from the peer was invalid and the QP entered the error state
    /// (`IBV_EVENT_QP_REQ_ERR`).
    QpRequestError(Qpn),
    /// A request from the peer violated access rights and the QP entered the error state
    /// (`IBV_EVENT_QP_ACCESS_ERR`).
    QpAccessError(Qpn),
    /// The first packet arrived on a QP in RTR (`IBV_EVENT_COMM_EST`).
    CommEstablished(Qpn),
    /// The send queue of a QP in SQD has drained (`IBV_EVENT_SQ_DRAINED`).
    SqDrained(Qpn),
    /// A QP attached to an SRQ entered the error state and will take no more of its work
    /// requests (`IBV_EVENT_QP_LAST_WQE_REACHED`).
    LastWqeReached(Qpn),
    /// An SRQ fell below its armed limit (`IBV_EVENT_SRQ_LIMIT_REACHED`).
    SrqLimitReached(SrqId),
}

/// Where a queue pair writes the packets it transmits.
///
/// A packet is written in two steps so that its payload can be copied straight from a
/// memory region into the frame: [`Emit::begin`] lays out the headers and returns the slice
/// the payload goes into; [`Emit::commit`] finishes the packet. A packet begun and not
/// committed is abandoned.
pub trait Emit {
    /// Starts a packet with these headers to `path`, with `payload_len` payload bytes, and
    /// returns the slice the payload must be written to. `None` when the buffer is too small.
    fn begin(&mut self, headers: &Headers, path: &Path, payload_len: usize) -> Option<&mut [u8]>;

    /// Starts an acknowledgement with these headers to `path` followed by `trailer_len`
    /// bytes after its AETH (xroce's selective acknowledgement, a multiple of 4 bytes), and
    /// returns the slice the trailer must be written to. `None` when the buffer is too
    /// small or the emitter cannot carry one.
    fn begin_with_trailer(
        &mut self,
        headers: &Headers,
        path: &Path,
        trailer_len: usize,
    ) -> Option<&mut [u8]> {
        let _ = (headers, path, trailer_len);
        None
    }

    /// Finishes the packet begun last.
    fn commit(&mut self);

    /// Whether packets to `path` can be framed at all: its source GID exists and is of the
    /// destination's address family. A work request to a path that cannot be reached fails
    /// (rxe completes it with a local QP operation error when it cannot route it) instead
    /// of waiting at the head of the send queue forever.
    fn reaches(&self, path: &Path) -> bool {
        let _ = path;
        true
    }
}

/// What a queue pair borrows for one call.
pub struct Cx<'a, M: MemoryTable + ?Sized> {
    /// The current time.
    pub now: Instant,
    /// The memory regions.
    pub mem: &'a mut M,
    /// The endpoint's counters.
    pub counters: &'a mut Counters,
    /// The counters of the QP being served (every increment goes to both).
    pub qp_counters: &'a mut Counters,
    /// The QP's shared receive queue, if it has one.
    pub srq: Option<&'a mut Srq>,
    /// Asynchronous events.
    pub events: &'a mut VecDeque<AsyncEvent>,
    /// The endpoint's budget of unacknowledged RC request packets (its `max_inflight`), and
    /// how much of it the other queue pairs hold.
    pub budget: Budget,
}

/// The endpoint-wide budget of unacknowledged RC request packets, as one queue pair sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The most the endpoint may have unacknowledged (`u32::MAX`: no limit).
    pub limit: u32,
    /// Unacknowledged request packets of the other queue pairs.
    pub others: u32,
    /// Set by the requester when the budget held it back: the room it needs.
    pub held: Option<u32>,
}

impl Budget {
    /// No limit.
    pub const UNLIMITED: Budget = Budget {
        limit: u32::MAX,
        others: 0,
        held: None,
    };
}

impl<M: MemoryTable + ?Sized> Cx<'_, M> {
    /// Increments a counter.
    pub(crate) fn count(&mut self, counter: Counter) {
        self.counters.inc(counter);
        self.qp_counters.inc(counter);
    }
}

impl<M: MemoryTable + ?Sized> core::fmt::Debug for Cx<'_, M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Cx")
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}
