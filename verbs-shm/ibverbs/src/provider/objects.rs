//! The objects this library hands to applications, and how a pointer coming back from an
//! application is turned into one of them.
//!
//! Each object is a `#[repr(C)]` struct whose first field is the verbs.h structure the
//! application sees (for a context: the `verbs_context`, whose last field is the
//! `ibv_context`), inside an `UnsafeCell` because the application reads and writes it
//! through its own pointer while this library holds references to the object. Behind it
//! sit the verbs-shm object that does the work and the objects it depends on.
//!
//! Objects live in `Arc`s. Every live object is listed in one registry keyed by the
//! address the application holds, so a pointer an application passes to a slow-path verb
//! is looked up before anything is read through it: a foreign, stale or wrongly typed
//! pointer is `EINVAL`, never a wild read, and an object destroyed by one thread while
//! another is still inside a verb on it stays allocated until that verb returns.
//!
//! The fast path (`post_send`, `post_recv`, `poll_cq`, `req_notify_cq`, `post_srq_recv`)
//! is reached through `context->ops` of an object the application already dereferenced,
//! and must not take a global lock: it trusts the C contract that the pointer is an object
//! of this library and checks a magic word before using it ([`trusted`]).

use std::cell::UnsafeCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use verbs_abi::{
    IBV_QPS_INIT, IBV_QPS_RESET, IBV_QPS_RTR, ibv_ah, ibv_comp_channel, ibv_context, ibv_cq,
    ibv_cq_ex, ibv_mr, ibv_pd, ibv_qp, ibv_qp_ex, ibv_srq, verbs_context,
};
use verbs_shm::client::{self, WorkCompletion};

use super::work_request::Builder;

use crate::ffi::{Errno, Verb};

/// Locks `mutex`, ignoring poisoning: every structure behind these locks is left
/// consistent by each critical section (inserts, removals, counter updates).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A live object of any kind, as the registry holds it.
pub(crate) enum Entry {
    Context(Arc<Context>),
    Pd(Arc<Pd>),
    Mr(Arc<Mr>),
    Channel(Arc<Channel>),
    Cq(Arc<Cq>),
    Srq(Arc<Srq>),
    Qp(Arc<Qp>),
    Ah(Arc<Ah>),
}

/// What every object kind tells the registry.
pub(crate) trait Object: Send + Sync + Sized + 'static {
    /// The verbs.h structure the application holds a pointer to.
    type Public;
    /// Where that structure sits inside `Self`.
    const OFFSET: usize;
    /// Wraps an object for the registry.
    fn wrap(this: Arc<Self>) -> Entry;
    /// The object in `entry`, if it is of this kind.
    fn unwrap(entry: &Entry) -> Option<&Arc<Self>>;
}

/// Objects that the fast path reaches without the registry carry a magic word.
pub(crate) trait Magic: Object {
    /// This kind's magic word.
    const MAGIC: u64;
    /// The object's magic word.
    fn magic(&self) -> u64;
}

/// The registry: public address → object.
static LIVE: Mutex<BTreeMap<usize, Entry>> = Mutex::new(BTreeMap::new());

/// The pointer the application gets for `this`.
pub(crate) fn public<T: Object>(this: &Arc<T>) -> *mut T::Public {
    Arc::as_ptr(this)
        .cast::<u8>()
        .wrapping_add(T::OFFSET)
        .cast_mut()
        .cast()
}

/// Lists a new object and returns it.
pub(crate) fn publish<T: Object>(object: T) -> Arc<T> {
    let object = Arc::new(object);
    lock(&LIVE).insert(public(&object) as usize, T::wrap(object.clone()));
    object
}

/// The live object of kind `T` the application calls `pointer`, or `EINVAL`.
pub(crate) fn find<T: Object>(pointer: *const T::Public) -> Verb<Arc<T>> {
    lock(&LIVE)
        .get(&(pointer as usize))
        .and_then(T::unwrap)
        .cloned()
        .ok_or(Errno::EINVAL)
}

/// Removes the object `pointer` from the registry (it is being destroyed) and returns it.
pub(crate) fn retire<T: Object>(pointer: *const T::Public) -> Verb<Arc<T>> {
    let mut live = lock(&LIVE);
    let key = pointer as usize;
    let object = live
        .get(&key)
        .and_then(T::unwrap)
        .cloned()
        .ok_or(Errno::EINVAL)?;
    live.remove(&key);
    Ok(object)
}

/// The object of kind `T` behind a pointer the fast path received.
///
/// # Safety
///
/// `pointer` is NULL or points at memory readable for a `T` laid out from
/// `pointer - T::OFFSET` that stays allocated while the returned reference is used: what
/// the C contract of the inline verbs.h functions guarantees for the object they are
/// called on (a QP, CQ or SRQ of this library that the application has not destroyed).
pub(crate) unsafe fn trusted<'a, T: Magic>(pointer: *const T::Public) -> Verb<&'a T> {
    if pointer.is_null() {
        return Err(Errno::EINVAL);
    }
    let object = pointer.cast::<u8>().wrapping_sub(T::OFFSET).cast::<T>();
    // Safety: the caller guarantees `object` is a live `T` (or, for a contract violation,
    // readable memory whose magic word will not match).
    let object = unsafe { &*object };
    if object.magic() != T::MAGIC {
        return Err(Errno::EINVAL);
    }
    Ok(object)
}

/// Asynchronous or completion events handed to the application and acknowledged by it.
/// Destroying an object waits until every event reported on it has been acknowledged,
/// as verbs requires.
#[derive(Debug, Default)]
pub(crate) struct EventCount {
    /// (reported, acknowledged), both free-running.
    counts: Mutex<(u32, u32)>,
    acked: Condvar,
}

impl EventCount {
    /// One more event was handed out.
    pub(crate) fn report(&self) {
        let mut c = lock(&self.counts);
        c.0 = c.0.wrapping_add(1);
    }

    /// `n` events were acknowledged; returns the acknowledged total.
    pub(crate) fn ack(&self, n: u32) -> u32 {
        let mut c = lock(&self.counts);
        c.1 = c.1.wrapping_add(n);
        self.acked.notify_all();
        c.1
    }

    /// Waits until every reported event has been acknowledged.
    pub(crate) fn wait_all_acked(&self) {
        let mut c = lock(&self.counts);
        while c.1 != c.0 {
            c = self.acked.wait(c).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// How many objects depend on this one (QPs on a CQ, anything on a PD): destroying it
/// while some do is `EBUSY`, as the kernel answers.
#[derive(Debug, Default)]
pub(crate) struct Users(AtomicU32);

impl Users {
    pub(crate) fn add(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn remove(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }

    pub(crate) fn busy(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }
}

/// The objects asynchronous events can name, by their daemon handles.
#[derive(Default)]
pub(crate) struct Targets {
    pub(crate) qps: HashMap<u32, Arc<Qp>>,
    pub(crate) cqs: HashMap<u32, Arc<Cq>>,
    pub(crate) srqs: HashMap<u32, Arc<Srq>>,
}

/// An open device (`ibv_context`, inside its `verbs_context`).
#[repr(C)]
pub(crate) struct Context {
    pub(crate) vctx: UnsafeCell<verbs_context>,
    pub(crate) client: client::Context,
    /// The served interface's index in the network namespace the device was opened in
    /// (the daemon's), for `ibv_gid_entry::ndev_ifindex`; 0 if unknown.
    pub(crate) ifindex: u32,
    /// The objects events can name.
    pub(crate) targets: Mutex<Targets>,
}

/// A protection domain.
#[repr(C)]
pub(crate) struct Pd {
    pub(crate) ibv: UnsafeCell<ibv_pd>,
    pub(crate) client: client::Pd,
    pub(crate) ctx: Arc<Context>,
    /// MRs, QPs, SRQs and AHs in it.
    pub(crate) users: Users,
}

/// A memory region.
#[repr(C)]
pub(crate) struct Mr {
    pub(crate) ibv: UnsafeCell<ibv_mr>,
    /// The registration and its protection domain: `ibv_rereg_mr` replaces both.
    pub(crate) state: Mutex<MrState>,
}

/// What a memory region is now.
pub(crate) struct MrState {
    pub(crate) client: client::Mr,
    pub(crate) pd: Arc<Pd>,
    /// The address peers use for its first byte.
    pub(crate) iova: u64,
    /// The rights the daemon enforces.
    pub(crate) access: u32,
}

/// A completion channel.
#[repr(C)]
pub(crate) struct Channel {
    pub(crate) ibv: UnsafeCell<ibv_comp_channel>,
    pub(crate) client: client::CompChannel,
    pub(crate) ctx: Arc<Context>,
    /// The CQs using it, by handle (what completion events name).
    pub(crate) cqs: Mutex<HashMap<u32, Arc<Cq>>>,
}

/// A completion queue. Every CQ carries the `ibv_cq_ex` (which begins with the `ibv_cq`
/// layout, so `ibv_cq_ex_to_cq` is a cast); its polling functions are set for CQs made by
/// `ibv_create_cq_ex`.
#[repr(C)]
pub(crate) struct Cq {
    pub(crate) ibv: UnsafeCell<ibv_cq_ex>,
    pub(crate) magic: u64,
    pub(crate) client: client::Cq,
    /// The completion `ibv_start_poll`/`ibv_next_poll` made current, which the
    /// `ibv_wc_read_*` functions read.
    pub(crate) current: Mutex<WorkCompletion>,
    pub(crate) ctx: Arc<Context>,
    pub(crate) channel: Option<Arc<Channel>>,
    /// QPs using it.
    pub(crate) users: Users,
    pub(crate) comp_events: EventCount,
    pub(crate) async_events: EventCount,
}

/// A shared receive queue.
#[repr(C)]
pub(crate) struct Srq {
    pub(crate) ibv: UnsafeCell<ibv_srq>,
    pub(crate) magic: u64,
    pub(crate) client: client::Srq,
    pub(crate) ctx: Arc<Context>,
    pub(crate) pd: Arc<Pd>,
    /// QPs using it.
    pub(crate) users: Users,
    pub(crate) events: EventCount,
}

/// A queue pair. Every QP carries the `ibv_qp_ex` (which begins with the `ibv_qp`); its
/// `wr_*` functions are set, and `ibv_qp_to_qp_ex` returns it, for QPs made by
/// `ibv_create_qp_ex` with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
#[repr(C)]
pub(crate) struct Qp {
    pub(crate) ibv: UnsafeCell<ibv_qp_ex>,
    pub(crate) magic: u64,
    pub(crate) client: client::Qp,
    pub(crate) ctx: Arc<Context>,
    pub(crate) pd: Arc<Pd>,
    pub(crate) send_cq: Arc<Cq>,
    pub(crate) recv_cq: Arc<Cq>,
    pub(crate) srq: Option<Arc<Srq>>,
    /// `ibv_qp_type`.
    pub(crate) qp_type: u32,
    pub(crate) sq_sig_all: bool,
    pub(crate) events: EventCount,
    /// `ibv_qp_create_send_ops_flags` of an extended QP; 0 for a QP without `wr_*`.
    pub(crate) send_ops: u64,
    /// The work requests between `ibv_wr_start` and `ibv_wr_complete`.
    pub(crate) builder: Mutex<Builder>,
    /// The state the application last set or queried (`qp->state`, for the fast path).
    pub(crate) state: AtomicU32,
}

impl Qp {
    /// Send requests are refused before RTS, as verbs providers refuse them (`EINVAL`);
    /// a QP the transport moved to an error state since still takes them (and flushes
    /// them).
    pub(crate) fn may_send(&self) -> Verb<()> {
        match self.state.load(Ordering::Acquire) {
            IBV_QPS_RESET | IBV_QPS_INIT | IBV_QPS_RTR => Err(Errno::EINVAL),
            _ => Ok(()),
        }
    }

    /// Receive requests are refused in RESET (`EINVAL`).
    pub(crate) fn may_receive(&self) -> Verb<()> {
        if self.state.load(Ordering::Acquire) == IBV_QPS_RESET {
            return Err(Errno::EINVAL);
        }
        Ok(())
    }
}

/// An address handle.
#[repr(C)]
pub(crate) struct Ah {
    pub(crate) ibv: UnsafeCell<ibv_ah>,
    pub(crate) magic: u64,
    pub(crate) client: client::Ah,
    pub(crate) pd: Arc<Pd>,
}

// The object kinds below are Send and Sync: the verbs.h structure in the `UnsafeCell` is
// shared with the application, which reads and writes it through its own pointer exactly
// as it would with rdma-core; this library writes it only where rdma-core does (state,
// event counters) and reads fields through raw pointers. Everything else in the objects
// is `Send + Sync` (the verbs-shm objects lock internally). The raw pointers inside the
// verbs.h structures point at other objects of this library or at application memory,
// never at thread-local data.
// Safety: as above.
unsafe impl Send for Context {}
// Safety: as above.
unsafe impl Sync for Context {}
// Safety: as above.
unsafe impl Send for Pd {}
// Safety: as above.
unsafe impl Sync for Pd {}
// Safety: as above.
unsafe impl Send for Mr {}
// Safety: as above.
unsafe impl Sync for Mr {}
// Safety: as above.
unsafe impl Send for Channel {}
// Safety: as above.
unsafe impl Sync for Channel {}
// Safety: as above.
unsafe impl Send for Cq {}
// Safety: as above.
unsafe impl Sync for Cq {}
// Safety: as above.
unsafe impl Send for Srq {}
// Safety: as above.
unsafe impl Sync for Srq {}
// Safety: as above.
unsafe impl Send for Qp {}
// Safety: as above.
unsafe impl Sync for Qp {}
// Safety: as above.
unsafe impl Send for Ah {}
// Safety: as above.
unsafe impl Sync for Ah {}

macro_rules! object {
    ($t:ident, $variant:ident, $public:ty, $offset:expr) => {
        impl Object for $t {
            type Public = $public;
            const OFFSET: usize = $offset;
            fn wrap(this: Arc<Self>) -> Entry {
                Entry::$variant(this)
            }
            fn unwrap(entry: &Entry) -> Option<&Arc<Self>> {
                match entry {
                    Entry::$variant(o) => Some(o),
                    _ => None,
                }
            }
        }
    };
}

object!(
    Context,
    Context,
    ibv_context,
    core::mem::offset_of!(Context, vctx) + core::mem::offset_of!(verbs_context, context)
);
object!(Pd, Pd, ibv_pd, 0);
object!(Mr, Mr, ibv_mr, 0);
object!(Channel, Channel, ibv_comp_channel, 0);
object!(Cq, Cq, ibv_cq, 0);
object!(Srq, Srq, ibv_srq, 0);
object!(Qp, Qp, ibv_qp, 0);
object!(Ah, Ah, ibv_ah, 0);

macro_rules! magic {
    ($t:ident, $magic:expr) => {
        impl Magic for $t {
            const MAGIC: u64 = $magic;
            fn magic(&self) -> u64 {
                self.magic
            }
        }
    };
}

magic!(Cq, u64::from_be_bytes(*b"xroce:CQ"));
magic!(Srq, u64::from_be_bytes(*b"xroceSRQ"));
magic!(Qp, u64::from_be_bytes(*b"xroce:QP"));
magic!(Ah, u64::from_be_bytes(*b"xroce:AH"));

impl Context {
    /// The `ibv_context` applications hold.
    pub(crate) fn ibv(self: &Arc<Self>) -> *mut ibv_context {
        public(self)
    }
}

/// The verbs.h structure inside `cell`, for writing the fields rdma-core updates.
pub(crate) fn raw<T>(cell: &UnsafeCell<T>) -> *mut T {
    cell.get()
}

const _: () = {
    // The public structure is the first field (the context's is at verbs.h's offset), so
    // `public` and `trusted` agree with the application's pointers.
    assert!(core::mem::offset_of!(Context, vctx) == 0);
    assert!(core::mem::offset_of!(verbs_context, context) == 320);
    assert!(core::mem::offset_of!(Qp, ibv) == 0);
    assert!(core::mem::offset_of!(Cq, ibv) == 0);
    // The extended structures begin with the basic ones, as verbs.h's casts require.
    assert!(core::mem::offset_of!(ibv_qp_ex, qp_base) == 0);
    assert!(size_of::<ibv_cq>() <= size_of::<ibv_cq_ex>());
    assert!(core::mem::offset_of!(ibv_cq_ex, async_events_completed) == 124);
};
