//! Shared receive queues: receive work requests that several queue pairs draw from.

use std::collections::VecDeque;

use crate::memory::PdId;
use crate::wqe::{PostError, RecvWqe};

/// A shared receive queue number, chosen by the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SrqId(pub u32);

/// Attributes of a shared receive queue (`ibv_srq_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqAttr {
    /// The most receive work requests it holds.
    pub max_wr: u32,
    /// The most scatter/gather elements per work request.
    pub max_sge: u32,
    /// Raise `SRQ_LIMIT_REACHED` when fewer than this many remain (0 = disarmed).
    pub srq_limit: u32,
}

/// A shared receive queue.
#[derive(Debug)]
pub struct Srq {
    id: SrqId,
    pd: PdId,
    attr: SrqAttr,
    queue: VecDeque<RecvWqe>,
}

impl Srq {
    /// A new, empty shared receive queue.
    pub fn new(id: SrqId, pd: PdId, attr: SrqAttr) -> Srq {
        Srq {
            id,
            pd,
            attr,
            queue: VecDeque::with_capacity(attr.max_wr as usize),
        }
    }

    /// Its number.
    pub fn id(&self) -> SrqId {
        self.id
    }

    /// Its protection domain.
    pub fn pd(&self) -> PdId {
        self.pd
    }

    /// Its attributes (`ibv_query_srq`).
    pub fn attr(&self) -> SrqAttr {
        self.attr
    }

    /// Receive work requests waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no receive work request is waiting.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Posts a receive work request (`ibv_post_srq_recv`).
    pub fn post_recv(&mut self, wqe: RecvWqe) -> Result<(), PostError> {
        if wqe.sges.as_slice().len() > self.attr.max_sge as usize {
            return Err(PostError::Invalid(
                "more scatter/gather elements than max_sge",
            ));
        }
        if self.queue.len() >= self.attr.max_wr as usize {
            return Err(PostError::QueueFull);
        }
        self.queue.push_back(wqe);
        Ok(())
    }

    /// Arms the limit event (`ibv_modify_srq` with `IBV_SRQ_LIMIT`).
    pub fn set_limit(&mut self, limit: u32) -> Result<(), PostError> {
        if limit > self.attr.max_wr {
            return Err(PostError::Invalid("srq_limit is larger than max_wr"));
        }
        self.attr.srq_limit = limit;
        Ok(())
    }

    /// Takes the oldest receive work request. The flag is true when this take crossed the
    /// armed limit: the caller raises `SRQ_LIMIT_REACHED`, and the limit is disarmed
    /// (IBTA 10.2.9.2).
    pub fn take(&mut self) -> Option<(RecvWqe, bool)> {
        let wqe = self.queue.pop_front()?;
        let limit = self.attr.srq_limit;
        let crossed = limit != 0 && (self.queue.len() as u64) < u64::from(limit);
        if crossed {
            self.attr.srq_limit = 0;
        }
        Some((wqe, crossed))
    }

    /// Puts back a work request taken by [`Srq::take`] whose message was abandoned before it
    /// used the buffer (a UC message broken by loss), at the head so order is kept.
    pub fn give_back(&mut self, wqe: RecvWqe) {
        self.queue.push_front(wqe);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_fires_once_when_crossed() {
        let mut srq = Srq::new(
            SrqId(1),
            PdId(1),
            SrqAttr {
                max_wr: 4,
                max_sge: 1,
                srq_limit: 0,
            },
        );
        for i in 0..4 {
            srq.post_recv(RecvWqe {
                wr_id: i,
                ..Default::default()
            })
            .unwrap();
        }
        assert_eq!(srq.post_recv(RecvWqe::default()), Err(PostError::QueueFull));
        srq.set_limit(2).unwrap();
        assert_eq!(srq.take().map(|(w, f)| (w.wr_id, f)), Some((0, false)));
        assert_eq!(srq.take().map(|(w, f)| (w.wr_id, f)), Some((1, false)));
        assert_eq!(srq.take().map(|(w, f)| (w.wr_id, f)), Some((2, true)));
        assert_eq!(srq.take().map(|(w, f)| (w.wr_id, f)), Some((3, false)));
        assert!(srq.take().is_none());
        assert!(srq.set_limit(5).is_err());
    }
}
