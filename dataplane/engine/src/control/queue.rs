//! Completion queues and shared receive queues, and the ring memory the daemon maps for
//! them (and for QPs and post bits).

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use verbs_shm::contract::{self, Cqe, RecvWqe, ring_bytes};
use verbs_shm::protocol::{Reply, Request};
use verbs_shm::ring::{Producer, Ring};
use verbs_shm::sys::{self, Mapping};
use xroce_transport::{PdId, SrqAttr};

use super::convert::srq_attr_reply;
use super::registry::Object;
use super::{Answer, Control, MAX_QUEUE, Refusal};
use crate::poller::{Command, CqSetup, SrqSetup};

impl Control {
    /// `len` bytes of new shared memory for the application of connection `id` (a ring or
    /// its post-bits page), within its budget of mappings: the file to send and the
    /// daemon's mapping.
    pub(super) fn ring_memory(
        &self,
        id: u64,
        name: &str,
        len: usize,
    ) -> Result<(OwnedFd, Arc<Mapping>), Refusal> {
        self.registry.map_room(id, 1)?;
        let fd = sys::memfd(name, len, false)
            .map_err(|e| Refusal::new(libc::ENOMEM, format!("cannot create ring memory: {e}")))?;
        let map = Mapping::map(fd.as_fd(), len, 0, true)
            .map_err(|e| Refusal::new(libc::ENOMEM, format!("cannot map ring memory: {e}")))?;
        Ok((fd, Arc::new(map)))
    }

    /// A ring of `entries` slots of `T` in new shared memory (`what` names it in a
    /// refusal): the file to send, the ring, and its length in bytes.
    fn ring<T: zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable>(
        &self,
        id: u64,
        name: &str,
        entries: u32,
        what: &str,
    ) -> Result<(OwnedFd, Ring<T>, usize), Refusal> {
        let len = ring_bytes(entries, size_of::<T>());
        let (fd, map) = self.ring_memory(id, name, len)?;
        let ring = Ring::<T>::new(map, 0, entries)
            .map_err(|_| Refusal::invalid(format!("bad {what} geometry")))?;
        Ok((fd, ring, len))
    }

    /// `ibv_create_cq`, with its completion channel's socket in `fds` when it has one.
    pub(super) fn create_cq(
        &mut self,
        id: u64,
        entries: u32,
        channel: bool,
        mut fds: Vec<OwnedFd>,
    ) -> Result<Answer, Refusal> {
        self.registry.room_for(id, Object::Cq)?;
        if entries == 0 || entries > MAX_QUEUE {
            return Err(Refusal::invalid(format!(
                "a completion queue holds 1 to {MAX_QUEUE} entries"
            )));
        }
        let channel = if channel {
            if fds.len() != 1 {
                return Err(Refusal::invalid(
                    "a completion channel socket must come with CreateCq",
                ));
            }
            let fd = fds.remove(0);
            let is_socket = nix::sys::stat::fstat(&fd)
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFSOCK);
            if !is_socket {
                return Err(Refusal::invalid("a completion channel must be a socket"));
            }
            Some(Arc::new(fd))
        } else {
            None
        };
        let entries = entries.next_power_of_two();
        let (fd, ring, len) = self.ring::<Cqe>(id, "xroce-cq", entries, "completion queue")?;
        let c = self.registry.conn(id);
        let (events, poller) = (c.events()?, c.poller);
        let handle = self.registry.handle();
        let setup = CqSetup {
            handle,
            ring: Producer::new(ring),
            channel,
            events,
        };
        self.ask(poller, |tx| Command::CreateCq(Box::new(setup), tx))?;
        self.registry.conn_mut(id).cqs.insert(handle);
        let reply = Reply::Cq {
            cq: handle,
            entries,
            ring_len: len as u64,
        };
        Ok(Answer {
            reply,
            fds: vec![fd],
        })
    }

    /// `ibv_destroy_cq`: refused with `EBUSY` while a QP uses the CQ.
    pub(super) fn destroy_cq(&mut self, id: u64, cq: u32) -> Result<Reply, Refusal> {
        let c = self.registry.conn(id);
        if !c.cqs.contains(&cq) {
            return Err(Refusal::invalid("no such completion queue"));
        }
        self.ask(c.poller, |tx| Command::DestroyCq(cq, tx))?
            .map_err(|e| Refusal::new(e, "the completion queue is still used by a QP"))?;
        self.registry.conn_mut(id).cqs.remove(&cq);
        Ok(Reply::Done)
    }

    /// `ibv_create_srq`.
    pub(super) fn create_srq(&mut self, id: u64, request: Request) -> Result<Answer, Refusal> {
        let Request::CreateSrq {
            pd,
            max_wr,
            max_sge,
            limit,
        } = request
        else {
            return Err(Refusal::invalid("not a creation of a shared receive queue"));
        };
        self.registry.room_for(id, Object::Srq)?;
        self.registry.conn(id).pd(pd)?;
        if max_wr == 0 || max_wr > MAX_QUEUE || max_sge as usize > contract::MAX_SGE {
            return Err(Refusal::invalid(format!(
                "an SRQ holds 1 to {MAX_QUEUE} work requests of up to {} SGEs",
                contract::MAX_SGE
            )));
        }
        let entries = max_wr.next_power_of_two();
        let (fd, ring, len) = self.ring::<RecvWqe>(id, "xroce-srq", entries, "SRQ")?;
        let c = self.registry.conn(id);
        let (events, poller) = (c.events()?, c.poller);
        let handle = self.registry.handle();
        let attr = SrqAttr {
            max_wr: entries,
            max_sge: max_sge.max(1),
            srq_limit: limit.min(entries),
        };
        let post_bit = self.registry.conn_mut(id).take_bit(handle);
        let bit = post_bit.as_ref().map(|b| b.bit);
        let setup = SrqSetup {
            handle,
            pd: PdId(pd),
            attr,
            ring,
            events,
            post_bit,
        };
        if let Err(e) = self.ask(poller, |tx| Command::CreateSrq(Box::new(setup), tx))? {
            self.registry.conn_mut(id).release_bit(handle);
            return Err(Refusal::invalid(e));
        }
        self.registry.conn_mut(id).srqs.insert(handle, PdId(pd));
        let reply = Reply::Srq {
            srq: handle,
            max_wr: entries,
            max_sge: attr.max_sge,
            entries,
            ring_len: len as u64,
            poller: poller as u32,
            post_bit: bit,
        };
        Ok(Answer {
            reply,
            fds: vec![fd],
        })
    }

    /// The poller of the application of connection `id`, if it owns SRQ `srq`.
    fn srq_poller(&self, id: u64, srq: u32) -> Result<usize, Refusal> {
        let c = self.registry.conn(id);
        if !c.srqs.contains_key(&srq) {
            return Err(Refusal::invalid("no such shared receive queue"));
        }
        Ok(c.poller)
    }

    /// `ibv_modify_srq`: arms the SRQ's limit.
    pub(super) fn modify_srq(&mut self, id: u64, srq: u32, limit: u32) -> Result<Reply, Refusal> {
        let poller = self.srq_poller(id, srq)?;
        let attr = self
            .ask(poller, |tx| Command::ModifySrq(srq, limit, tx))?
            .map_err(|e| Refusal::new(e, "srq_limit is larger than max_wr"))?;
        Ok(srq_attr_reply(attr))
    }

    /// `ibv_query_srq`.
    pub(super) fn query_srq(&mut self, id: u64, srq: u32) -> Result<Reply, Refusal> {
        let poller = self.srq_poller(id, srq)?;
        match self.pollers[poller].call(|tx| Command::QuerySrq(srq, tx)) {
            Some(Ok(attr)) => Ok(srq_attr_reply(attr)),
            _ => Err(Refusal::invalid("no such shared receive queue")),
        }
    }

    /// `ibv_destroy_srq`: refused with `EBUSY` while a QP uses the SRQ.
    pub(super) fn destroy_srq(&mut self, id: u64, srq: u32) -> Result<Reply, Refusal> {
        let poller = self.srq_poller(id, srq)?;
        self.ask(poller, |tx| Command::DestroySrq(srq, tx))?
            .map_err(|e| Refusal::new(e, "the shared receive queue is still attached to a QP"))?;
        let c = self.registry.conn_mut(id);
        c.srqs.remove(&srq);
        c.release_bit(srq);
        Ok(Reply::Done)
    }
}

#[cfg(test)]
mod tests {
    use verbs_shm::protocol::Request;

    use super::*;
    use crate::control::AppLimits;
    use crate::control::fake::{FakeHost, Fixture, refused};

    fn create_cq(entries: u32, channel: bool) -> Request {
        Request::CreateCq { entries, channel }
    }

    fn create_srq(pd: u32, max_wr: u32) -> Request {
        Request::CreateSrq {
            pd,
            max_wr,
            max_sge: 1,
            limit: 0,
        }
    }

    #[test]
    fn a_completion_queue_is_rounded_up_and_comes_with_its_ring() {
        let mut fx = Fixture::new();
        let answer = fx.ask_with(create_cq(5, false), Vec::new()).unwrap();
        let Reply::Cq {
            entries, ring_len, ..
        } = answer.reply
        else {
            panic!("{:?}", answer.reply);
        };
        assert_eq!(entries, 8);
        assert_eq!(ring_len as usize, ring_bytes(8, size_of::<Cqe>()));
        assert_eq!(answer.fds.len(), 1);
    }

    #[test]
    fn completion_queues_are_checked() {
        let limits = AppLimits {
            max_cqs: 1,
            ..AppLimits::default()
        };
        let mut fx = Fixture::with(limits, FakeHost::default());
        let before = fx.commands();
        refused(
            fx.ask(create_cq(0, false)),
            libc::EINVAL,
            "1 to 32768 entries",
        );
        refused(
            fx.ask(create_cq(MAX_QUEUE + 1, false)),
            libc::EINVAL,
            "1 to 32768 entries",
        );
        refused(fx.ask(create_cq(4, true)), libc::EINVAL, "must come with");
        let not_a_socket = vec![sys::eventfd().unwrap()];
        refused(
            fx.ask_with(create_cq(4, true), not_a_socket),
            libc::EINVAL,
            "must be a socket",
        );
        assert_eq!(fx.commands(), before);
        fx.cq();
        refused(
            fx.ask(create_cq(4, false)),
            libc::ENOMEM,
            "already has 1 completion queue,",
        );
    }

    #[test]
    fn a_completion_queue_in_use_stays() {
        let mut fx = Fixture::new();
        let cq = fx.cq();
        fx.poller.state().busy = Some(libc::EBUSY);
        refused(
            fx.ask(Request::DestroyCq { cq }),
            libc::EBUSY,
            "still used by a QP",
        );
        assert!(fx.control.registry.conn(fx.id).cqs.contains(&cq));
        fx.poller.state().busy = None;
        assert_eq!(fx.ask(Request::DestroyCq { cq }), Ok(Reply::Done));
        refused(
            fx.ask(Request::DestroyCq { cq }),
            libc::EINVAL,
            "no such completion queue",
        );
    }

    #[test]
    fn rings_stay_within_the_map_budget() {
        let mut fx = Fixture::new();
        // A share of 3: the post-bits page and two rings.
        fx.control.registry.map_budget = 12;
        fx.cq();
        fx.cq();
        refused(
            fx.ask(create_cq(4, false)),
            libc::ENOMEM,
            "would pass its share of 3",
        );
        assert_eq!(fx.control.registry.conn(fx.id).cqs.len(), 2);
    }

    #[test]
    fn shared_receive_queues_are_checked() {
        let limits = AppLimits {
            max_srqs: 1,
            ..AppLimits::default()
        };
        let mut fx = Fixture::with(limits, FakeHost::default());
        let pd = fx.pd();
        refused(
            fx.ask(create_srq(pd + 1, 4)),
            libc::EINVAL,
            "no such protection domain",
        );
        refused(fx.ask(create_srq(pd, 0)), libc::EINVAL, "an SRQ holds 1 to");
        let Ok(Reply::Srq {
            srq,
            max_wr,
            post_bit,
            ..
        }) = fx.ask(create_srq(pd, 3))
        else {
            panic!("no SRQ");
        };
        assert_eq!(max_wr, 4);
        assert!(post_bit.is_some());
        refused(
            fx.ask(create_srq(pd, 4)),
            libc::ENOMEM,
            "already has 1 shared receive queue,",
        );
        let limit = fx.ask(Request::ModifySrq { srq, limit: 2 });
        assert!(matches!(limit, Ok(Reply::SrqAttr { limit: 2, .. })));
        assert!(fx.ask(Request::QuerySrq { srq }).is_ok());
        for request in [
            Request::ModifySrq {
                srq: srq + 1,
                limit: 1,
            },
            Request::QuerySrq { srq: srq + 1 },
            Request::DestroySrq { srq: srq + 1 },
        ] {
            refused(
                fx.ask(request),
                libc::EINVAL,
                "no such shared receive queue",
            );
        }
        fx.poller.state().busy = Some(libc::EBUSY);
        refused(
            fx.ask(Request::DestroySrq { srq }),
            libc::EBUSY,
            "still attached to a QP",
        );
        fx.poller.state().busy = None;
        assert_eq!(fx.ask(Request::DestroySrq { srq }), Ok(Reply::Done));
    }

    #[test]
    fn an_srq_the_poller_refuses_gives_its_post_bit_back() {
        let mut fx = Fixture::new();
        let pd = fx.pd();
        fx.poller.state().refuse = Some("no room".into());
        refused(fx.ask(create_srq(pd, 4)), libc::EINVAL, "no room");
        fx.poller.state().refuse = None;
        let Ok(Reply::Srq { post_bit, .. }) = fx.ask(create_srq(pd, 4)) else {
            panic!("no SRQ");
        };
        assert_eq!(post_bit, Some(0), "the first bit, given back");
    }
}
