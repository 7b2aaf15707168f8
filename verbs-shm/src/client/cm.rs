//! rdma_cm from the application's side: event channels, and the requests of
//! [`crate::cm`] on a device's control connection.
//!
//! An [`EventChannel`] is a socket pair: the application reads [`CmEventRecord`]s from its
//! end ([`EventChannel::fd`] is what `rdma_event_channel.fd` holds), and every daemon whose
//! ids report to the channel holds a duplicate of the other end, handed over once per
//! device with [`Context::cm_register_channel`]. Everything else is one request, one reply
//! ([`Context::cm`]); what librdmacm builds on top (ids without a device yet, the QP's
//! state changes around a connection, synchronous ids) is the drop-in library's work.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::context::{Context, channel_pair};
use super::{Error, Result};
use crate::cm::{CmEventRecord, CmReply, CmRequest};
use crate::protocol::{Reply, Request};

/// An event channel (`rdma_event_channel`).
#[derive(Debug)]
pub struct EventChannel {
    /// The application's end: events are read here.
    ours: OwnedFd,
    /// The daemons' end, duplicated to each daemon the channel is registered with.
    theirs: OwnedFd,
}

impl EventChannel {
    /// A new channel.
    pub fn new() -> Result<EventChannel> {
        let (ours, theirs) = channel_pair()?;
        Ok(EventChannel { ours, theirs })
    }

    /// The descriptor to poll: readable when an event waits.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.ours.as_fd()
    }

    /// The end the daemons write to.
    pub fn daemon_end(&self) -> BorrowedFd<'_> {
        self.theirs.as_fd()
    }

    /// Reads the next event, waiting for one unless `O_NONBLOCK` is set on [`Self::fd`]
    /// (then `EAGAIN` comes back as an [`Error::Io`] of kind `WouldBlock`).
    pub fn read_event(&self) -> Result<CmEventRecord> {
        let mut record = CmEventRecord::default();
        let n = loop {
            match nix::unistd::read(
                self.ours.as_fd(),
                zerocopy::IntoBytes::as_mut_bytes(&mut record),
            ) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(std::io::Error::from_raw_os_error(e as i32).into()),
                Ok(n) => break n,
            }
        };
        if n != size_of::<CmEventRecord>() {
            return Err(Error::Protocol(format!(
                "an event record of {n} bytes, not {}",
                size_of::<CmEventRecord>()
            )));
        }
        Ok(record)
    }
}

impl Context {
    /// Sends an rdma_cm request and returns the daemon's answer.
    pub fn cm(&self, request: CmRequest) -> Result<CmReply> {
        self.cm_with(request, &[])
    }

    /// Hands the daemon the channel's writing end; returns the daemon's handle for it.
    pub fn cm_register_channel(&self, channel: &EventChannel) -> Result<u32> {
        match self.cm_with(CmRequest::Channel, &[channel.daemon_end()])? {
            CmReply::Channel { channel } => Ok(channel),
            other => Err(Error::Protocol(format!(
                "unexpected answer to a channel: {other:?}"
            ))),
        }
    }

    fn cm_with(&self, request: CmRequest, fds: &[BorrowedFd<'_>]) -> Result<CmReply> {
        match self.inner.call(&Request::Cm(request), fds)?.0 {
            Reply::Cm(reply) => Ok(reply),
            other => Err(Error::Protocol(format!(
                "unexpected answer to an rdma_cm request: {other:?}"
            ))),
        }
    }
}
