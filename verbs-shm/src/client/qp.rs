//! Protection domains, queue pairs, shared receive queues and address handles.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::context::{Bell, Inner, map_rings};
use super::cq::{Cq, CqLife};
use super::mr::Mr;
use super::{Error, Result};
use crate::contract::{MAX_INLINE, MAX_SGE, RecvWqe, SendWqe, Sge};
use crate::protocol::{AhAttr, QpAttr, QpCaps, Reply, Request};
use crate::ring::{Producer, Ring};
use crate::sys::Mapping;
use xroce_transport::{Access, AttrMask, QpType, SendFlags, SendOp};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// A protection domain.
///
/// Every object made in it (memory region, queue pair, shared receive queue, address
/// handle) holds a clone of this handle, so the domain is deallocated (`ibv_dealloc_pd`)
/// only when the last of them and of the application's clones is dropped, whatever the
/// order of the drops. [`Pd::dealloc`] deallocates it on the spot, and says why not.
#[derive(Debug, Clone)]
pub struct Pd {
    inner: Arc<PdInner>,
}

#[derive(Debug)]
struct PdInner {
    ctx: Arc<Inner>,
    handle: u32,
    /// Deallocated already ([`Pd::dealloc`]).
    released: AtomicBool,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        if !self.released.load(Ordering::Acquire) {
            let _ = self.ctx.call(&Request::DeallocPd { pd: self.handle }, &[]);
        }
    }
}

impl Pd {
    pub(crate) fn new(ctx: Arc<Inner>, handle: u32) -> Pd {
        Pd {
            inner: Arc::new(PdInner {
                ctx,
                handle,
                released: AtomicBool::new(false),
            }),
        }
    }

    /// The daemon's handle.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// The context's connection.
    pub(crate) fn ctx(&self) -> &Arc<Inner> {
        &self.inner.ctx
    }

    /// Deallocates the protection domain now (`ibv_dealloc_pd`) instead of when its last
    /// handle is dropped. While queue pairs, memory regions, shared receive queues or
    /// address handles of the application use it, the daemon refuses with `EBUSY`
    /// ([`Error::Daemon`], naming what still uses it) and nothing changes: the domain
    /// stays allocated, and goes when its last handle does. After a success, other clones
    /// of this handle name a domain that is gone: what they try to create is refused
    /// (`EINVAL`).
    pub fn dealloc(self) -> Result<()> {
        let request = Request::DeallocPd {
            pd: self.inner.handle,
        };
        match self.inner.ctx.call(&request, &[])?.0 {
            Reply::Done => {
                self.inner.released.store(true, Ordering::Release);
                Ok(())
            }
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// Allocates and registers `len` bytes of shared memory (huge pages when available).
    pub fn alloc_mr(&self, len: usize, access: Access) -> Result<Mr> {
        Mr::alloc(self, len, access)
    }

    /// Registers memory the application already owns (`ibv_reg_mr` on an existing
    /// buffer): its pages are moved onto shared memory in place (see [`Mr`]'s module
    /// documentation for the trade-offs).
    ///
    /// # Safety
    ///
    /// `[addr, addr + len)` must be mapped, readable and writable memory of this process
    /// that nothing remaps concurrently; the pages holding it are replaced in place by
    /// pages with the same contents.
    pub unsafe fn register(&self, addr: *mut u8, len: usize, access: Access) -> Result<Mr> {
        // Safety: forwarded from the caller.
        unsafe { self.register_iova(addr, len, addr as u64, access) }
    }

    /// As [`Pd::register`], but work requests and peers name the first byte `iova`
    /// instead of its address (`ibv_reg_mr_iova`).
    ///
    /// # Safety
    ///
    /// As for [`Pd::register`].
    pub unsafe fn register_iova(
        &self,
        addr: *mut u8,
        len: usize,
        iova: u64,
        access: Access,
    ) -> Result<Mr> {
        // Safety: forwarded from the caller.
        unsafe { Mr::register_existing(self, addr, len, iova, access) }
    }

    /// Creates a queue pair (`ibv_create_qp`), in RESET.
    pub fn create_qp(&self, init: &QpInit<'_>) -> Result<Qp> {
        Qp::create(self, init)
    }

    /// Creates a shared receive queue (`ibv_create_srq`).
    pub fn create_srq(&self, max_wr: u32, max_sge: u32, limit: u32) -> Result<Srq> {
        Srq::create(self, max_wr, max_sge, limit)
    }

    /// Creates an address handle for UD sends (`ibv_create_ah`).
    pub fn create_ah(&self, attr: &AhAttr) -> Result<Ah> {
        let req = Request::CreateAh {
            pd: self.inner.handle,
            attr: *attr,
        };
        match self.inner.ctx.call(&req, &[])?.0 {
            Reply::Ah { ah } => Ok(Ah {
                ctx: self.inner.ctx.clone(),
                handle: ah,
                _pd: self.clone(),
            }),
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }
}

/// How to create a queue pair (`ibv_qp_init_attr`).
#[derive(Debug, Clone)]
pub struct QpInit<'a> {
    /// The transport service.
    pub qp_type: QpType,
    /// The send completion queue.
    pub send_cq: &'a Cq,
    /// The receive completion queue.
    pub recv_cq: &'a Cq,
    /// A shared receive queue instead of a receive queue.
    pub srq: Option<&'a Srq>,
    /// Requested capacities.
    pub caps: QpCaps,
    /// Every send work request generates a completion.
    pub sq_sig_all: bool,
}

impl<'a> QpInit<'a> {
    /// Defaults: 128 send and receive work requests of one SGE, 64 inline bytes.
    pub fn new(qp_type: QpType, send_cq: &'a Cq, recv_cq: &'a Cq) -> QpInit<'a> {
        QpInit {
            qp_type,
            send_cq,
            recv_cq,
            srq: None,
            caps: QpCaps {
                max_send_wr: 128,
                max_recv_wr: 128,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 64,
            },
            sq_sig_all: false,
        }
    }
}

/// A UD destination.
#[derive(Debug, Clone, Copy)]
pub struct UdTarget<'a> {
    /// The address handle.
    pub ah: &'a Ah,
    /// The destination QP number.
    pub qpn: u32,
    /// The Q_Key.
    pub qkey: u32,
}

/// A send work request.
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local data (ignored when `inline` is set).
    pub sges: &'a [Sge],
    /// Copy these bytes into the work request instead of gathering from memory.
    pub inline: Option<&'a [u8]>,
    /// Generate a completion on success.
    pub signaled: bool,
    /// Set the solicited event bit.
    pub solicited: bool,
    /// Wait for earlier READs and atomics.
    pub fence: bool,
    /// UD destination.
    pub ud: Option<UdTarget<'a>>,
}

impl<'a> SendWr<'a> {
    /// A signaled work request with these local elements.
    pub fn new(wr_id: u64, op: SendOp, sges: &'a [Sge]) -> SendWr<'a> {
        SendWr {
            wr_id,
            op,
            sges,
            inline: None,
            signaled: true,
            solicited: false,
            fence: false,
            ud: None,
        }
    }

    /// The shared-memory form.
    pub fn encode(&self) -> Result<SendWqe> {
        let mut w = SendWqe {
            wr_id: self.wr_id,
            opcode: 0,
            send_flags: 0,
            num_sge: 0,
            imm_data: 0,
            remote_addr: 0,
            rkey: 0,
            remote_qpn: 0,
            compare_add: 0,
            swap: 0,
            ah: 0,
            remote_qkey: 0,
            data: [0; MAX_INLINE],
            reserved: [0; 8],
        };
        w.set_op(self.op);
        for (wanted, flag) in [
            (self.signaled, SendFlags::SIGNALED),
            (self.solicited, SendFlags::SOLICITED),
            (self.fence, SendFlags::FENCE),
        ] {
            if wanted {
                w.send_flags |= flag.0;
            }
        }
        if let Some(bytes) = self.inline {
            if bytes.len() > MAX_INLINE {
                return Err(Error::Invalid("inline data longer than 256 bytes"));
            }
            w.send_flags |= SendFlags::INLINE.0;
            w.num_sge = bytes.len() as u32;
            w.data[..bytes.len()].copy_from_slice(bytes);
        } else {
            if self.sges.len() > MAX_SGE {
                return Err(Error::Invalid("more than 16 scatter/gather elements"));
            }
            w.num_sge = self.sges.len() as u32;
            for (i, s) in self.sges.iter().enumerate() {
                w.set_sge(i, *s);
            }
        }
        if let Some(ud) = self.ud {
            w.ah = ud.ah.handle;
            w.remote_qpn = ud.qpn;
            w.remote_qkey = ud.qkey;
        }
        Ok(w)
    }
}

/// A receive work request.
#[derive(Debug, Clone, Copy)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where data lands.
    pub sges: &'a [Sge],
}

impl RecvWr<'_> {
    /// The shared-memory form.
    pub fn encode(&self) -> Result<RecvWqe> {
        if self.sges.len() > MAX_SGE {
            return Err(Error::Invalid("more than 16 scatter/gather elements"));
        }
        let mut w = RecvWqe {
            wr_id: self.wr_id,
            num_sge: self.sges.len() as u32,
            reserved: 0,
            sge: [Sge::default(); MAX_SGE],
        };
        w.sge[..self.sges.len()].copy_from_slice(self.sges);
        Ok(w)
    }
}

/// A queue pair.
#[derive(Debug)]
pub struct Qp {
    ctx: Arc<Inner>,
    handle: u32,
    qpn: u32,
    qp_type: QpType,
    caps: QpCaps,
    poller: Bell,
    sq: Mutex<Producer<SendWqe>>,
    rq: Option<Mutex<Producer<RecvWqe>>>,
    /// What the QP uses, destroyed after it (when no other handle holds them).
    _keep: (Pd, Option<Srq>, [Arc<CqLife>; 2]),
}

impl Qp {
    fn create(pd: &Pd, init: &QpInit<'_>) -> Result<Qp> {
        let ctx = pd.inner.ctx.clone();
        let req = Request::CreateQp {
            pd: pd.handle(),
            qp_type: init.qp_type.raw(),
            send_cq: init.send_cq.handle(),
            recv_cq: init.recv_cq.handle(),
            srq: init.srq.map(|s| s.handle),
            caps: init.caps,
            sq_sig_all: init.sq_sig_all,
        };
        let (reply, mut fds) = ctx.call(&req, &[])?;
        let Reply::Qp {
            qp,
            qpn,
            caps,
            sq_entries,
            rq_entries,
            rq_offset,
            ring_len,
            poller,
            post_bit,
        } = reply
        else {
            return Err(Error::Protocol(format!("unexpected reply {reply:?}")));
        };
        let map = map_rings(&mut fds, ring_len)?;
        let bad = |e: crate::ring::RingError| Error::Protocol(e.to_string());
        let sq = Producer::new(Ring::new(map.clone(), 0, sq_entries).map_err(bad)?);
        let rq = if rq_entries > 0 {
            Some(Mutex::new(Producer::new(
                Ring::new(map, rq_offset as usize, rq_entries).map_err(bad)?,
            )))
        } else {
            None
        };
        Ok(Qp {
            ctx,
            handle: qp,
            qpn,
            qp_type: init.qp_type,
            caps,
            poller: Bell {
                poller,
                bit: post_bit,
            },
            sq: Mutex::new(sq),
            rq,
            _keep: (
                pd.clone(),
                init.srq.cloned(),
                [init.send_cq.life(), init.recv_cq.life()],
            ),
        })
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The daemon's handle (what asynchronous events name).
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The transport service.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The capacities granted.
    pub fn caps(&self) -> QpCaps {
        self.caps
    }

    /// Modifies the QP (`ibv_modify_qp`); `mask` says which fields of `attr` to apply.
    pub fn modify(&self, attr: &QpAttr, mask: AttrMask) -> Result<()> {
        match self
            .ctx
            .call(
                &Request::ModifyQp {
                    qp: self.handle,
                    attr: *attr,
                    mask: mask.0,
                },
                &[],
            )?
            .0
        {
            Reply::Done => Ok(()),
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// Attaches the QP to the multicast group `gid` (`ibv_attach_mcast`).
    pub fn attach_mcast(&self, gid: [u8; 16]) -> Result<()> {
        let request = Request::AttachMcast {
            qp: self.handle,
            gid,
        };
        match self.ctx.call(&request, &[])?.0 {
            Reply::Done => Ok(()),
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// Detaches the QP from the multicast group `gid` (`ibv_detach_mcast`).
    pub fn detach_mcast(&self, gid: [u8; 16]) -> Result<()> {
        let request = Request::DetachMcast {
            qp: self.handle,
            gid,
        };
        match self.ctx.call(&request, &[])?.0 {
            Reply::Done => Ok(()),
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// The QP's attributes (`ibv_query_qp`).
    pub fn query(&self) -> Result<QpAttr> {
        match self.ctx.call(&Request::QueryQp { qp: self.handle }, &[])?.0 {
            Reply::QpAttr { attr, .. } => Ok(attr),
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// Posts send work requests (`ibv_post_send`). Shared memory plus a doorbell when the
    /// poller sleeps. On error, the index of the first request not posted comes with it.
    pub fn post_send(&self, wrs: &[SendWr<'_>]) -> std::result::Result<(), (usize, Error)> {
        post_each(&self.sq, &self.ctx, self.poller, wrs, |wr| {
            let w = wr.encode()?;
            if wr.inline.is_some() && w.num_sge > self.caps.max_inline_data {
                return Err(Error::Invalid("more inline data than max_inline_data"));
            }
            if wr.inline.is_none() && w.num_sge > self.caps.max_send_sge {
                return Err(Error::Invalid(
                    "more scatter/gather elements than max_send_sge",
                ));
            }
            Ok(w)
        })
    }

    /// Overwrites the send ring's producer counter: what a buggy or hostile application
    /// can do to its own ring. For tests of the daemon's defences only.
    #[doc(hidden)]
    pub fn scribble_send_producer(&self, value: u32) {
        let sq = self.sq.lock().unwrap_or_else(|e| e.into_inner());
        sq.ring().publish_producer(value);
        drop(sq);
        self.ctx.doorbell(self.poller);
    }

    /// The shared memory holding this QP's rings (the send ring's header at offset 0, the
    /// receive ring's after the send ring): what a buggy or hostile application can write
    /// anything into. For tests of the daemon's defences only.
    #[doc(hidden)]
    pub fn ring_memory(&self) -> Arc<Mapping> {
        let sq = self.sq.lock().unwrap_or_else(|e| e.into_inner());
        sq.ring().mapping().clone()
    }

    /// Posts a receive work request in its shared-memory form without checking it against
    /// the QP's capacities: what a buggy or hostile application can write into its ring.
    /// For tests of the daemon's defences only.
    #[doc(hidden)]
    pub fn post_recv_unchecked(&self, wqe: &RecvWqe) -> Result<()> {
        let Some(rq) = &self.rq else {
            return Err(Error::Invalid("the QP uses a shared receive queue"));
        };
        post_each(rq, &self.ctx, self.poller, &[*wqe], |w| Ok(*w)).map_err(|(_, e)| e)
    }

    /// Writes the poller's doorbell whether it sleeps or not (a flood of these is what a
    /// hostile application can do). For tests of the daemon's defences only.
    #[doc(hidden)]
    pub fn ring_doorbell_always(&self) {
        self.ctx.doorbell_always(self.poller);
    }

    /// Posts raw shared-memory send work requests (for the drop-in libibverbs).
    pub fn post_send_raw(&self, wqe: &SendWqe) -> Result<()> {
        let mut sq = self.sq.lock().unwrap_or_else(|e| e.into_inner());
        match sq.push(wqe) {
            Ok(true) => {}
            Ok(false) => return Err(Error::QueueFull),
            Err(_) => return Err(Error::Broken),
        }
        drop(sq);
        self.ctx.doorbell(self.poller);
        Ok(())
    }

    /// Checks a send work request in its shared-memory form against the capacities
    /// granted: inline bytes against `max_inline_data`, elements against `max_send_sge`.
    fn check_granted(&self, w: &SendWqe) -> Result<()> {
        if w.is_inline() {
            if w.num_sge > self.caps.max_inline_data {
                return Err(Error::Invalid("more inline data than max_inline_data"));
            }
        } else if w.num_sge > self.caps.max_send_sge {
            return Err(Error::Invalid(
                "more scatter/gather elements than max_send_sge",
            ));
        }
        Ok(())
    }

    /// Posts send work requests already in their shared-memory form (the drop-in
    /// libibverbs builds them from `ibv_send_wr` lists), checked against the capacities
    /// granted as [`Qp::post_send`] checks them; one publish and at most one doorbell for
    /// the whole slice. On error, the index of the first request not posted comes with it.
    pub fn post_send_wqes(&self, wqes: &[SendWqe]) -> std::result::Result<(), (usize, Error)> {
        let mut sq = self.sq.lock().unwrap_or_else(|e| e.into_inner());
        let mut staged = false;
        let mut outcome = Ok(());
        for (i, w) in wqes.iter().enumerate() {
            if let Err(e) = self.check_granted(w) {
                outcome = Err((i, e));
                break;
            }
            match sq.stage(w) {
                Ok(true) => staged = true,
                Ok(false) => {
                    outcome = Err((i, Error::QueueFull));
                    break;
                }
                Err(_) => {
                    outcome = Err((i, Error::Broken));
                    break;
                }
            }
        }
        if staged {
            sq.publish();
            drop(sq);
            self.ctx.doorbell(self.poller);
        }
        outcome
    }

    /// Posts send work requests already in their shared-memory form all together or not
    /// at all (`ibv_wr_complete`): on error none of them is posted.
    pub fn post_send_all(&self, wqes: &[SendWqe]) -> Result<()> {
        let mut sq = self.sq.lock().unwrap_or_else(|e| e.into_inner());
        for w in wqes {
            self.check_granted(w)?;
        }
        for w in wqes {
            match sq.stage(w) {
                Ok(true) => {}
                Ok(false) => {
                    sq.discard();
                    return Err(Error::QueueFull);
                }
                Err(_) => {
                    sq.discard();
                    return Err(Error::Broken);
                }
            }
        }
        if wqes.is_empty() {
            return Ok(());
        }
        sq.publish();
        drop(sq);
        self.ctx.doorbell(self.poller);
        Ok(())
    }

    /// Posts receive work requests (`ibv_post_recv`).
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), (usize, Error)> {
        let Some(rq) = &self.rq else {
            return Err((0, Error::Invalid("the QP uses a shared receive queue")));
        };
        post_each(rq, &self.ctx, self.poller, wrs, |wr| {
            if wr.sges.len() > self.caps.max_recv_sge as usize {
                return Err(Error::Invalid(
                    "more scatter/gather elements than max_recv_sge",
                ));
            }
            wr.encode()
        })
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        let _ = self.ctx.call(&Request::DestroyQp { qp: self.handle }, &[]);
    }
}

/// A shared receive queue.
#[derive(Debug, Clone)]
pub struct Srq {
    handle: u32,
    inner: Arc<SrqInner>,
}

#[derive(Debug)]
struct SrqInner {
    ctx: Arc<Inner>,
    handle: u32,
    max_sge: u32,
    poller: Bell,
    ring: Mutex<Producer<RecvWqe>>,
    _pd: Pd,
}

impl Drop for SrqInner {
    fn drop(&mut self) {
        let _ = self
            .ctx
            .call(&Request::DestroySrq { srq: self.handle }, &[]);
    }
}

impl Srq {
    fn create(pd: &Pd, max_wr: u32, max_sge: u32, limit: u32) -> Result<Srq> {
        let ctx = pd.inner.ctx.clone();
        let req = Request::CreateSrq {
            pd: pd.handle(),
            max_wr,
            max_sge,
            limit,
        };
        let (reply, mut fds) = ctx.call(&req, &[])?;
        let Reply::Srq {
            srq,
            max_sge,
            entries,
            ring_len,
            poller,
            post_bit,
            ..
        } = reply
        else {
            return Err(Error::Protocol(format!("unexpected reply {reply:?}")));
        };
        let map = map_rings(&mut fds, ring_len)?;
        let ring = Ring::new(map, 0, entries).map_err(|e| Error::Protocol(e.to_string()))?;
        Ok(Srq {
            handle: srq,
            inner: Arc::new(SrqInner {
                ctx,
                handle: srq,
                max_sge,
                poller: Bell {
                    poller,
                    bit: post_bit,
                },
                ring: Mutex::new(Producer::new(ring)),
                _pd: pd.clone(),
            }),
        })
    }

    /// The daemon's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Posts receive work requests (`ibv_post_srq_recv`).
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> std::result::Result<(), (usize, Error)> {
        let inner = &*self.inner;
        post_each(&inner.ring, &inner.ctx, inner.poller, wrs, |wr| {
            if wr.sges.len() > inner.max_sge as usize {
                return Err(Error::Invalid("more scatter/gather elements than max_sge"));
            }
            wr.encode()
        })
    }

    /// Posts a receive work request in its shared-memory form without checking it: what a
    /// buggy or hostile application can write into its ring. For tests of the daemon's
    /// defences only.
    #[doc(hidden)]
    pub fn post_recv_unchecked(&self, wqe: &RecvWqe) -> Result<()> {
        let inner = &*self.inner;
        post_each(&inner.ring, &inner.ctx, inner.poller, &[*wqe], |w| Ok(*w)).map_err(|(_, e)| e)
    }

    /// Arms the limit event (`ibv_modify_srq` with `IBV_SRQ_LIMIT`).
    pub fn set_limit(&self, limit: u32) -> Result<()> {
        match self
            .inner
            .ctx
            .call(
                &Request::ModifySrq {
                    srq: self.handle,
                    limit,
                },
                &[],
            )?
            .0
        {
            Reply::SrqAttr { .. } => Ok(()),
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// `(max_wr, max_sge, limit)` (`ibv_query_srq`).
    pub fn query(&self) -> Result<(u32, u32, u32)> {
        match self
            .inner
            .ctx
            .call(&Request::QuerySrq { srq: self.handle }, &[])?
            .0
        {
            Reply::SrqAttr {
                max_wr,
                max_sge,
                limit,
            } => Ok((max_wr, max_sge, limit)),
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }
}

/// An address handle.
#[derive(Debug)]
pub struct Ah {
    ctx: Arc<Inner>,
    handle: u32,
    _pd: Pd,
}

impl Ah {
    /// The daemon's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        let _ = self.ctx.call(&Request::DestroyAh { ah: self.handle }, &[]);
    }
}

/// Stages each of `wrs` on `ring` (checked and encoded by `encode`) until one fails, then
/// publishes what was staged and rings the doorbell: the requests before a failing one are
/// reported as posted (verbs' `bad_wr`), so they must go.
fn post_each<W, T: FromBytes + IntoBytes + Immutable>(
    ring: &Mutex<Producer<T>>,
    ctx: &Inner,
    bell: Bell,
    wrs: &[W],
    mut encode: impl FnMut(&W) -> Result<T>,
) -> std::result::Result<(), (usize, Error)> {
    let mut ring = ring.lock().unwrap_or_else(|e| e.into_inner());
    let mut result = Ok(());
    for (i, wr) in wrs.iter().enumerate() {
        let staged = encode(wr).and_then(|w| match ring.stage(&w) {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::QueueFull),
            Err(_) => Err(Error::Broken),
        });
        if let Err(e) = staged {
            result = Err((i, e));
            break;
        }
    }
    ring.publish();
    drop(ring);
    ctx.doorbell(bell);
    result
}
