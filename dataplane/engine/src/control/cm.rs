//! rdma_cm requests: the port's connection manager ([`crate::rdma_cm`]) serves them, with
//! the registry's word on whose QPs a connection may name and the host's on where routes
//! leave; the MADs it produces leave
//! through the first poller, and its timers and resolutions run in the daemon's loop.

use std::os::fd::OwnedFd;

use verbs_shm::cm::{CmReply, CmRequest};
use verbs_shm::protocol::Reply;

use super::convert::qp_attr_to_protocol;
use super::{Control, Refusal};
use crate::poller::Command;
use crate::rdma_cm::{self, Asker};

impl From<rdma_cm::Refusal> for Refusal {
    fn from(r: rdma_cm::Refusal) -> Refusal {
        Refusal::new(r.errno, r.message)
    }
}

impl Control {
    /// One rdma_cm request of connection `id`.
    pub(super) fn cm_request(
        &mut self,
        id: u64,
        request: CmRequest,
        fds: Vec<OwnedFd>,
    ) -> Result<Reply, Refusal> {
        let pid = self.registry.conn(id).peer.pid;
        let reply = match request {
            CmRequest::InitQpAttr { id: cm_id, state } => {
                let (attr, mask) = self.cm.init_qp_attr(id, cm_id, state)?;
                CmReply::QpAttr {
                    attr: qp_attr_to_protocol(&attr),
                    mask: mask.0,
                }
            }
            other => {
                let registry = &self.registry;
                let owner = |qpn: u32| registry.pid_of_qpn(qpn);
                let host = std::cell::RefCell::new(&mut self.host);
                let route = |destination| host.borrow_mut().route(destination);
                let asker = Asker {
                    conn: id,
                    pid,
                    qp_owner: &owner,
                    route: &route,
                };
                self.cm.handle(asker, other, fds)?
            }
        };
        self.send_mads();
        Ok(Reply::Cm(reply))
    }

    /// Hands the MADs the connection manager made to the first poller for the wire.
    pub(super) fn send_mads(&mut self) {
        while let Some(frame) = self.cm.poll_frame() {
            self.pollers[0].send(Command::Transmit(frame));
        }
    }

    /// QP1 frames the pollers passed on.
    pub(super) fn on_mads(&mut self) {
        let Some((frames, bell)) = &self.gsi else {
            return;
        };
        verbs_shm::sys::eventfd_drain(std::os::fd::AsFd::as_fd(bell.as_ref()));
        let frames: Vec<Vec<u8>> = frames.try_iter().collect();
        for f in &frames {
            self.cm.handle_frame(f);
        }
        self.send_mads();
    }

    /// Resolutions the connection manager waited for.
    pub(super) fn on_cm_resolved(&mut self) {
        self.cm.on_resolved();
        self.send_mads();
    }

    /// When the connection manager's next timer is due, if it has one.
    pub fn cm_deadline(&mut self) -> Option<std::time::Instant> {
        self.cm.poll_timeout()
    }

    /// Runs the connection manager's timers that are due, and retries event channels that
    /// were full.
    pub fn on_tick(&mut self) {
        if self
            .cm
            .poll_timeout()
            .is_some_and(|t| t <= std::time::Instant::now())
            || self.cm.has_backlog()
        {
            self.cm.handle_timeout();
            self.send_mads();
        }
    }
}
