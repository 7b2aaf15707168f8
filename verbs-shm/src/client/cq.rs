//! Completion queues and completion channels.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use zerocopy::FromBytes;

use super::context::{Inner, channel_pair, map_rings};
use super::{Error, Result};
use crate::contract::{ARM_NEXT, ARM_SOLICITED, Cqe};
use crate::protocol::{CompletionEvent, Reply, Request};
use crate::ring::{Consumer, Ring};
use crate::sys::Mapping;

/// A work completion (`ibv_wc`).
pub type WorkCompletion = Cqe;

/// A completion channel: a descriptor that becomes readable when an armed CQ gets a
/// completion (`ibv_comp_channel`).
#[derive(Debug)]
pub struct CompChannel {
    /// Our end: read completion events here.
    ours: OwnedFd,
    /// The daemon's end, handed over (duplicated) with every CQ that uses the channel.
    theirs: OwnedFd,
}

impl CompChannel {
    pub(crate) fn new() -> Result<CompChannel> {
        let (ours, theirs) = channel_pair()?;
        Ok(CompChannel { ours, theirs })
    }

    /// The descriptor to poll (readable when an event waits).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.ours.as_fd()
    }

    /// Waits for the next event and returns the handle of the CQ it is for
    /// (`ibv_get_cq_event`). Honours `O_NONBLOCK` set on [`CompChannel::fd`].
    pub fn get_event(&self) -> Result<u32> {
        let mut b = [0u8; size_of::<CompletionEvent>()];
        let n = nix::unistd::read(self.ours.as_fd(), &mut b)
            .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
        let ev = CompletionEvent::read_from_bytes(&b[..n])
            .map_err(|_| Error::Protocol("short completion event".into()))?;
        Ok(ev.cq)
    }

    pub(crate) fn daemon_end(&self) -> BorrowedFd<'_> {
        self.theirs.as_fd()
    }
}

/// A completion queue. The queue pairs using it keep it alive in the daemon: it is
/// destroyed (`ibv_destroy_cq`) once this handle and every one of them are gone, in
/// whatever order they are dropped.
#[derive(Debug)]
pub struct Cq {
    handle: u32,
    entries: u32,
    ring: Mutex<Consumer<Cqe>>,
    life: Arc<CqLife>,
}

/// What keeps a CQ in the daemon: dropping the last one destroys it there.
#[derive(Debug)]
pub(crate) struct CqLife {
    ctx: Arc<Inner>,
    handle: u32,
}

impl Drop for CqLife {
    fn drop(&mut self) {
        let _ = self.ctx.call(&Request::DestroyCq { cq: self.handle }, &[]);
    }
}

impl Cq {
    pub(crate) fn create(
        ctx: Arc<Inner>,
        entries: u32,
        channel: Option<&CompChannel>,
    ) -> Result<Cq> {
        let req = Request::CreateCq {
            entries,
            channel: channel.is_some(),
        };
        let fds: Vec<BorrowedFd<'_>> = channel.map(|c| c.daemon_end()).into_iter().collect();
        let (reply, mut fds) = ctx.call(&req, &fds)?;
        let Reply::Cq {
            cq,
            entries,
            ring_len,
        } = reply
        else {
            return Err(Error::Protocol(format!("unexpected reply {reply:?}")));
        };
        let map = map_rings(&mut fds, ring_len)?;
        let ring = Ring::new(map, 0, entries).map_err(|e| Error::Protocol(e.to_string()))?;
        Ok(Cq {
            life: Arc::new(CqLife { ctx, handle: cq }),
            handle: cq,
            entries,
            ring: Mutex::new(Consumer::new(ring)),
        })
    }

    /// What keeps the CQ in the daemon (a QP using it holds one).
    pub(crate) fn life(&self) -> Arc<CqLife> {
        self.life.clone()
    }

    /// The daemon's handle (what completion events name).
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The number of entries.
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// Moves up to `out.len()` completions into `out` and returns how many
    /// (`ibv_poll_cq`). Shared memory only.
    pub fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize> {
        // NOTE(unwrap): the ring state stays consistent even if a poller panicked.
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        if ring.ring().broken().load(Ordering::Acquire) != 0 {
            return Err(Error::Broken);
        }
        let avail = ring.available().map_err(|_| Error::Broken)? as usize;
        let n = avail.min(out.len());
        for (i, slot) in out.iter_mut().enumerate().take(n) {
            *slot = ring.peek(i as u32);
        }
        ring.release(n as u32);
        Ok(n)
    }

    /// Removes the completions of QP `qpn` not polled yet, keeping the others in order
    /// (after the QP is reset: its old completions must not surface after it is reused,
    /// as RDMA NICs clean them). Returns how many were removed.
    pub fn purge(&self, qpn: u32) -> Result<usize> {
        // NOTE(unwrap): the ring state stays consistent even if a poller panicked.
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        if ring.ring().broken().load(Ordering::Acquire) != 0 {
            return Err(Error::Broken);
        }
        let dropped = ring
            .retain(|c| c.qp_num != qpn)
            .map_err(|_| Error::Broken)?;
        Ok(dropped as usize)
    }

    /// Asks for a completion event on the next completion, or only on the next solicited
    /// or error completion (`ibv_req_notify_cq`).
    pub fn req_notify(&self, solicited_only: bool) {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let mode = if solicited_only {
            ARM_SOLICITED
        } else {
            ARM_NEXT
        };
        ring.ring().arm().store(mode, Ordering::Release);
    }

    /// The shared memory holding this CQ's ring: what a buggy or hostile application can
    /// write anything into. For tests of the daemon's defences only.
    #[doc(hidden)]
    pub fn ring_memory(&self) -> Arc<Mapping> {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        ring.ring().mapping().clone()
    }

    /// Completion events raised so far for this CQ.
    pub fn events_raised(&self) -> u32 {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        ring.ring().events().load(Ordering::Acquire)
    }
}
