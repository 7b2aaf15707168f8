//! The drop-in library driven through its C ABI (loaded with `dlopen`, called through
//! versioned symbols and through the function pointers of the objects it hands out, as
//! verbs.h's inline functions call them), between two namespaces through two daemons:
//!
//! - the queries answer a RoCE v2 port, and the exported `ibv_query_port@IBVERBS_1.1`
//!   writes only its 48-byte compat structure;
//! - unsupported features answer as a provider without them, and destroying an object in
//!   use is `EBUSY`;
//! - a completion channel honours `O_NONBLOCK`;
//! - extended CQs are polled with `ibv_start_poll`/`ibv_next_poll`, extended QPs post with
//!   the `ibv_wr_*` builder all or nothing, and `ibv_rereg_mr` keeps the keys;
//! - threads post on different QPs and poll one shared CQ concurrently, and the daemon
//!   writes into memory the application registered in place while the receiving threads
//!   sleep in `ibv_get_cq_event`.

use std::collections::BTreeSet;
use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ibverbs_support::{Bench, serial};
use verbs_abi::*;
use xroce_lab::daemons::DEVICE;
use xroce_lab::{Family, Side};

/// The library, opened with `dlopen`, and the functions the tests call.
struct Verbs {
    handle: *mut c_void,
    get_device_list: unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device,
    free_device_list: unsafe extern "C" fn(*mut *mut ibv_device),
    get_device_name: unsafe extern "C" fn(*mut ibv_device) -> *const c_char,
    open_device: unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context,
    close_device: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    query_device: unsafe extern "C" fn(*mut ibv_context, *mut ibv_device_attr) -> c_int,
    query_port: unsafe extern "C" fn(*mut ibv_context, u8, *mut _compat_ibv_port_attr) -> c_int,
    query_gid: unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut ibv_gid) -> c_int,
    query_gid_ex:
        unsafe extern "C" fn(*mut ibv_context, u32, u32, *mut ibv_gid_entry, u32, usize) -> c_int,
    query_gid_table:
        unsafe extern "C" fn(*mut ibv_context, *mut ibv_gid_entry, usize, u32, usize) -> isize,
    query_pkey: unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut u16) -> c_int,
    get_pkey_index: unsafe extern "C" fn(*mut ibv_context, u8, u16) -> c_int,
    alloc_pd: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd,
    dealloc_pd: unsafe extern "C" fn(*mut ibv_pd) -> c_int,
    reg_mr: unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, c_int) -> *mut ibv_mr,
    dereg_mr: unsafe extern "C" fn(*mut ibv_mr) -> c_int,
    create_comp_channel: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_comp_channel,
    destroy_comp_channel: unsafe extern "C" fn(*mut ibv_comp_channel) -> c_int,
    create_cq: unsafe extern "C" fn(
        *mut ibv_context,
        c_int,
        *mut c_void,
        *mut ibv_comp_channel,
        c_int,
    ) -> *mut ibv_cq,
    destroy_cq: unsafe extern "C" fn(*mut ibv_cq) -> c_int,
    get_cq_event:
        unsafe extern "C" fn(*mut ibv_comp_channel, *mut *mut ibv_cq, *mut *mut c_void) -> c_int,
    ack_cq_events: unsafe extern "C" fn(*mut ibv_cq, c_uint),
    create_qp: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp,
    modify_qp: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int,
    query_qp:
        unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int, *mut ibv_qp_init_attr) -> c_int,
    destroy_qp: unsafe extern "C" fn(*mut ibv_qp) -> c_int,
    qp_to_qp_ex: unsafe extern "C" fn(*mut ibv_qp) -> *mut ibv_qp_ex,
    reg_dmabuf_mr: unsafe extern "C" fn(*mut ibv_pd, u64, usize, u64, c_int, c_int) -> *mut ibv_mr,
    rereg_mr:
        unsafe extern "C" fn(*mut ibv_mr, c_int, *mut ibv_pd, *mut c_void, usize, c_int) -> c_int,
    get_async_event: unsafe extern "C" fn(*mut ibv_context, *mut ibv_async_event) -> c_int,
    ack_async_event: unsafe extern "C" fn(*mut ibv_async_event),
    create_ah: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_ah_attr) -> *mut ibv_ah,
    destroy_ah: unsafe extern "C" fn(*mut ibv_ah) -> c_int,
    init_ah_from_wc: unsafe extern "C" fn(
        *mut ibv_context,
        u8,
        *mut ibv_wc,
        *mut ibv_grh,
        *mut ibv_ah_attr,
    ) -> c_int,
    create_ah_from_wc:
        unsafe extern "C" fn(*mut ibv_pd, *mut ibv_wc, *mut ibv_grh, u8) -> *mut ibv_ah,
    _library: crate::ibverbs_support::Library,
}

// Safety: the function pointers and the handle are plain addresses into a library that
// stays loaded while the `Verbs` exists; the library's functions are thread-safe, which
// is what the tests check.
unsafe impl Send for Verbs {}
// Safety: as above.
unsafe impl Sync for Verbs {}

macro_rules! symbol {
    ($handle:expr, $name:literal @ $version:literal) => {{
        let name = CString::new($name).unwrap();
        let version = CString::new($version).unwrap();
        // Safety: a live handle and NUL-terminated strings.
        let address = unsafe { libc::dlvsym($handle, name.as_ptr(), version.as_ptr()) };
        assert!(!address.is_null(), "{}@{} is defined", $name, $version);
        // Safety: the symbol is the library's definition of this verbs.h function, whose C
        // signature the field's type transcribes.
        unsafe { as_function(address) }
    }};
}

/// A symbol's address as the function pointer type `F`.
///
/// # Safety
///
/// `address` is a function whose C signature `F` transcribes.
unsafe fn as_function<F: Copy>(address: *mut c_void) -> F {
    assert_eq!(
        size_of::<F>(),
        size_of::<*mut c_void>(),
        "a function pointer"
    );
    // Safety: same size (checked); the caller guarantees the signature.
    unsafe { std::mem::transmute_copy(&address) }
}

impl Verbs {
    fn load() -> Verbs {
        let library = crate::ibverbs_support::Library::build();
        let path = CString::new(
            library
                .dir
                .join("libibverbs.so.1")
                .to_str()
                .expect("UTF-8 path"),
        )
        .unwrap();
        // Safety: a NUL-terminated path to the freshly built library.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen {path:?}");
        Verbs {
            handle,
            get_device_list: symbol!(handle, "ibv_get_device_list" @ "IBVERBS_1.1"),
            free_device_list: symbol!(handle, "ibv_free_device_list" @ "IBVERBS_1.1"),
            get_device_name: symbol!(handle, "ibv_get_device_name" @ "IBVERBS_1.1"),
            open_device: symbol!(handle, "ibv_open_device" @ "IBVERBS_1.1"),
            close_device: symbol!(handle, "ibv_close_device" @ "IBVERBS_1.1"),
            query_device: symbol!(handle, "ibv_query_device" @ "IBVERBS_1.1"),
            query_port: symbol!(handle, "ibv_query_port" @ "IBVERBS_1.1"),
            query_gid: symbol!(handle, "ibv_query_gid" @ "IBVERBS_1.1"),
            query_gid_ex: symbol!(handle, "_ibv_query_gid_ex" @ "IBVERBS_1.11"),
            query_gid_table: symbol!(handle, "_ibv_query_gid_table" @ "IBVERBS_1.11"),
            query_pkey: symbol!(handle, "ibv_query_pkey" @ "IBVERBS_1.1"),
            get_pkey_index: symbol!(handle, "ibv_get_pkey_index" @ "IBVERBS_1.5"),
            alloc_pd: symbol!(handle, "ibv_alloc_pd" @ "IBVERBS_1.1"),
            dealloc_pd: symbol!(handle, "ibv_dealloc_pd" @ "IBVERBS_1.1"),
            reg_mr: symbol!(handle, "ibv_reg_mr" @ "IBVERBS_1.1"),
            dereg_mr: symbol!(handle, "ibv_dereg_mr" @ "IBVERBS_1.1"),
            create_comp_channel: symbol!(handle, "ibv_create_comp_channel" @ "IBVERBS_1.0"),
            destroy_comp_channel: symbol!(handle, "ibv_destroy_comp_channel" @ "IBVERBS_1.0"),
            create_cq: symbol!(handle, "ibv_create_cq" @ "IBVERBS_1.1"),
            destroy_cq: symbol!(handle, "ibv_destroy_cq" @ "IBVERBS_1.1"),
            get_cq_event: symbol!(handle, "ibv_get_cq_event" @ "IBVERBS_1.1"),
            ack_cq_events: symbol!(handle, "ibv_ack_cq_events" @ "IBVERBS_1.1"),
            create_qp: symbol!(handle, "ibv_create_qp" @ "IBVERBS_1.1"),
            modify_qp: symbol!(handle, "ibv_modify_qp" @ "IBVERBS_1.1"),
            query_qp: symbol!(handle, "ibv_query_qp" @ "IBVERBS_1.1"),
            destroy_qp: symbol!(handle, "ibv_destroy_qp" @ "IBVERBS_1.1"),
            qp_to_qp_ex: symbol!(handle, "ibv_qp_to_qp_ex" @ "IBVERBS_1.6"),
            reg_dmabuf_mr: symbol!(handle, "ibv_reg_dmabuf_mr" @ "IBVERBS_1.12"),
            rereg_mr: symbol!(handle, "ibv_rereg_mr" @ "IBVERBS_1.1"),
            get_async_event: symbol!(handle, "ibv_get_async_event" @ "IBVERBS_1.1"),
            ack_async_event: symbol!(handle, "ibv_ack_async_event" @ "IBVERBS_1.1"),
            create_ah: symbol!(handle, "ibv_create_ah" @ "IBVERBS_1.1"),
            destroy_ah: symbol!(handle, "ibv_destroy_ah" @ "IBVERBS_1.1"),
            init_ah_from_wc: symbol!(handle, "ibv_init_ah_from_wc" @ "IBVERBS_1.1"),
            create_ah_from_wc: symbol!(handle, "ibv_create_ah_from_wc" @ "IBVERBS_1.1"),
            _library: library,
        }
    }
}

impl Drop for Verbs {
    fn drop(&mut self) {
        // Safety: the handle came from dlopen; nothing calls into the library afterwards.
        unsafe { libc::dlclose(self.handle) };
    }
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A pointer the tests pass between threads (threads use it through [`Ptr::get`], so
/// closures capture the whole `Ptr`, not its raw field).
#[derive(Debug)]
struct Ptr<T>(*mut T);

impl<T> Clone for Ptr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Ptr<T> {}

impl<T> Ptr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}
// Safety: the pointees are objects of the library, whose verbs are thread-safe.
unsafe impl<T> Send for Ptr<T> {}
// Safety: as above.
unsafe impl<T> Sync for Ptr<T> {}

/// Opens the daemon's device from inside `side`'s namespace (where discovery finds it);
/// the context then works from any thread.
fn open(verbs: &Verbs, bench: &Bench, side: Side) -> Ptr<ibv_context> {
    let ctx = bench
        .hosts
        .lab
        .run_in(side, || {
            let mut n: c_int = 0;
            // Safety: a valid `int *`.
            let list = unsafe { (verbs.get_device_list)(&mut n) };
            assert!(
                !list.is_null() && n == 1,
                "one device in the namespace ({n})"
            );
            // Safety: `list` holds `n` devices.
            let device = unsafe { *list };
            // Safety: a listed device.
            let name = unsafe { (verbs.get_device_name)(device) };
            // Safety: a device's name is a NUL-terminated string that lives as long as it.
            let name = unsafe { CStr::from_ptr(name) };
            assert_eq!(name.to_str().unwrap(), DEVICE);
            // Safety: a listed device.
            let ctx = unsafe { (verbs.open_device)(device) };
            // Safety: a list from ibv_get_device_list, freed once; the device stays valid.
            unsafe { (verbs.free_device_list)(list) };
            Ptr(ctx)
        })
        .expect("entering the namespace");
    assert!(!ctx.0.is_null(), "ibv_open_device: errno {}", errno());
    ctx
}

/// The `verbs_context` around a context, as verbs.h finds it.
fn vctx(ctx: Ptr<ibv_context>) -> *mut verbs_context {
    ctx.0
        .cast::<u8>()
        .wrapping_sub(std::mem::offset_of!(verbs_context, context))
        .cast()
}

/// Anonymous memory of its own (registration moves whole pages; nothing else of this test
/// process shares them), unmapped on drop.
struct Pages {
    addr: *mut u8,
    len: usize,
}

// Safety: plain memory owned by the test; threads touch disjoint ranges or synchronise.
unsafe impl Send for Pages {}
// Safety: as above.
unsafe impl Sync for Pages {}

impl Pages {
    fn new(len: usize) -> Pages {
        // Safety: a fresh private anonymous mapping chosen by the kernel.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        Pages {
            addr: addr.cast(),
            len,
        }
    }

    fn at(&self, offset: usize) -> *mut u8 {
        assert!(offset < self.len);
        self.addr.wrapping_add(offset)
    }

    /// Reads `n` bytes at `offset` (volatile: the daemon writes them).
    fn read(&self, offset: usize, n: usize) -> Vec<u8> {
        assert!(offset + n <= self.len);
        (0..n)
            // Safety: inside the mapping (checked above); the daemon writes these bytes.
            .map(|i| unsafe { std::ptr::read_volatile(self.addr.wrapping_add(offset + i)) })
            .collect()
    }

    fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.len);
        let to = self.addr.wrapping_add(offset);
        // Safety: inside the mapping (checked above).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), to, bytes.len()) };
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // Safety: the mapping made in `new`, not used afterwards.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

fn create_qp(
    verbs: &Verbs,
    pd: *mut ibv_pd,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    depth: u32,
) -> Ptr<ibv_qp> {
    let mut init = ibv_qp_init_attr {
        send_cq,
        recv_cq,
        cap: ibv_qp_cap {
            max_send_wr: depth,
            max_recv_wr: depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: IBV_QPT_RC,
        ..ibv_qp_init_attr::default()
    };
    // Safety: a PD and CQs of the library, and a valid attribute structure.
    let qp = unsafe { (verbs.create_qp)(pd, &mut init) };
    assert!(!qp.is_null(), "ibv_create_qp: errno {}", errno());
    assert!(init.cap.max_send_wr >= depth && init.cap.max_recv_wr >= depth);
    Ptr(qp)
}

/// Moves `qp` to RTS, connected to `dest_qpn` at `peer`'s IPv4 address.
fn connect(verbs: &Verbs, qp: Ptr<ibv_qp>, peer: std::net::Ipv4Addr, dest_qpn: u32) {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&peer.octets());
    let mut a = ibv_qp_attr {
        qp_state: IBV_QPS_INIT,
        port_num: 1,
        qp_access_flags: IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
        ..ibv_qp_attr::default()
    };
    let mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    // Safety: a QP of the library and a valid attribute structure.
    assert_eq!(unsafe { (verbs.modify_qp)(qp.0, &mut a, mask as c_int) }, 0);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest_qpn;
    a.rq_psn = 7;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.ah_attr = ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid::from_raw(gid),
            hop_limit: 64,
            ..ibv_global_route::default()
        },
        is_global: 1,
        port_num: 1,
        ..ibv_ah_attr::default()
    };
    let mask = IBV_QP_STATE
        | IBV_QP_AV
        | IBV_QP_PATH_MTU
        | IBV_QP_DEST_QPN
        | IBV_QP_RQ_PSN
        | IBV_QP_MAX_DEST_RD_ATOMIC
        | IBV_QP_MIN_RNR_TIMER;
    // Safety: as above.
    assert_eq!(unsafe { (verbs.modify_qp)(qp.0, &mut a, mask as c_int) }, 0);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 7;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    let mask = IBV_QP_STATE
        | IBV_QP_SQ_PSN
        | IBV_QP_TIMEOUT
        | IBV_QP_RETRY_CNT
        | IBV_QP_RNR_RETRY
        | IBV_QP_MAX_QP_RD_ATOMIC;
    // Safety: as above.
    assert_eq!(unsafe { (verbs.modify_qp)(qp.0, &mut a, mask as c_int) }, 0);
    // Safety: a QP of the library; the state field is what rdma-core maintains.
    assert_eq!(unsafe { (*qp.0).state }, IBV_QPS_RTS);
}

/// The `ibv_context_ops` of the context `object` (a QP or CQ) belongs to.
///
/// # Safety
///
/// `object` is a live QP or CQ of the library (both start with their context pointer).
unsafe fn ops<T>(object: *mut T) -> ibv_context_ops {
    // Safety: QPs and CQs start with `struct ibv_context *context` (the caller's object).
    let ctx = unsafe { *object.cast::<*mut ibv_context>() };
    // Safety: the library's context, alive as long as its objects.
    unsafe { (*ctx).ops }
}

/// `ibv_post_send` as verbs.h inlines it.
///
/// # Safety
///
/// `qp` is a QP of the library; `wr`'s buffers are registered.
unsafe fn post_send(qp: Ptr<ibv_qp>, wr: &mut ibv_send_wr) -> c_int {
    let mut bad = std::ptr::null_mut();
    // Safety: the QP's context and its ops table belong to the library.
    let post = unsafe { ops(qp.0) }.post_send.expect("post_send op");
    // Safety: forwarded from the caller.
    unsafe { post(qp.0, wr, &mut bad) }
}

/// `ibv_post_recv` as verbs.h inlines it.
///
/// # Safety
///
/// As [`post_send`].
unsafe fn post_recv(qp: Ptr<ibv_qp>, wr: &mut ibv_recv_wr) -> c_int {
    let mut bad = std::ptr::null_mut();
    // Safety: as in `post_send`.
    let post = unsafe { ops(qp.0) }.post_recv.expect("post_recv op");
    // Safety: forwarded from the caller.
    unsafe { post(qp.0, wr, &mut bad) }
}

/// `ibv_poll_cq` as verbs.h inlines it.
fn poll_cq(cq: Ptr<ibv_cq>, out: &mut [ibv_wc]) -> usize {
    // Safety: the CQ's context and its ops table belong to the library.
    let poll = unsafe { ops(cq.0) }.poll_cq.expect("poll_cq op");
    // Safety: a CQ of the library and room for `out.len()` completions.
    let n = unsafe { poll(cq.0, out.len() as c_int, out.as_mut_ptr()) };
    assert!(n >= 0, "ibv_poll_cq failed");
    n as usize
}

/// `ibv_req_notify_cq` as verbs.h inlines it.
fn req_notify_cq(cq: Ptr<ibv_cq>) {
    // Safety: as in `poll_cq`.
    let notify = unsafe { ops(cq.0) }
        .req_notify_cq
        .expect("req_notify_cq op");
    // Safety: a CQ of the library.
    assert_eq!(unsafe { notify(cq.0, 0) }, 0);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn queries_unsupported_features_and_busy_objects_answer_as_verbs_says() {
    xroce_lab::require_root();
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let verbs = Verbs::load();
    let ctx = open(&verbs, &bench, Side::A);
    let ipv4 = bench.hosts.lab.host(Side::A).ipv4;

    // The extended table verbs.h uses, and the inline ibv_query_port through it.
    let v = vctx(ctx);
    // Safety: a context of the library.
    let abi = unsafe { (*ctx.0).abi_compat };
    // Safety: the context is embedded in a verbs_context (abi_compat says so).
    let ext = unsafe { &*v };
    let (sz, query_port_op, create_qp_ex, create_cq_ex) =
        (ext.sz, ext.query_port, ext.create_qp_ex, ext.create_cq_ex);
    assert_eq!(
        abi as usize,
        usize::MAX,
        "abi_compat = __VERBS_ABI_IS_EXTENDED"
    );
    assert_eq!(sz, 648);
    assert!(
        create_qp_ex.is_some() && create_cq_ex.is_some(),
        "extended QPs and CQs"
    );
    let mut port = ibv_port_attr::default();
    let query_port_op = query_port_op.expect("verbs_context::query_port");
    // Safety: a context of the library and a full-size attribute structure.
    let rc = unsafe { query_port_op(ctx.0, 1, &mut port, size_of::<ibv_port_attr>()) };
    assert_eq!(rc, 0);
    assert_eq!(
        (port.state, port.active_mtu, port.link_layer, port.lid),
        (
            IBV_PORT_ACTIVE,
            IBV_MTU_1024,
            IBV_LINK_LAYER_ETHERNET as u8,
            0
        )
    );
    assert!(port.gid_tbl_len >= 1 && port.pkey_tbl_len == 1);
    // Safety: as above; port 2 does not exist.
    let rc = unsafe { query_port_op(ctx.0, 2, &mut port, size_of::<ibv_port_attr>()) };
    assert_eq!(rc, libc::EINVAL);

    // The exported compat ibv_query_port writes 48 bytes and not one more.
    let mut raw = [0xa5u8; 64];
    // Safety: 64 writable bytes, more than the 48 it may write.
    let rc = unsafe { (verbs.query_port)(ctx.0, 1, raw.as_mut_ptr().cast()) };
    assert_eq!(rc, 0);
    assert!(raw[48..].iter().all(|&b| b == 0xa5), "wrote past 48 bytes");
    assert_eq!(
        raw[46], IBV_LINK_LAYER_ETHERNET as u8,
        "link_layer at offset 46"
    );
    assert_eq!(raw[0], IBV_PORT_ACTIVE as u8);

    // Device attributes: rxe's vendor 0xffffff (unknown to perftest: its generic path), READ/atomic depth > 0.
    let mut dev = ibv_device_attr::default();
    // Safety: a context and a writable structure.
    assert_eq!(unsafe { (verbs.query_device)(ctx.0, &mut dev) }, 0);
    assert_eq!((dev.vendor_id, dev.phys_port_cnt), (0xff_ffff, 1));
    assert!(dev.max_qp_rd_atom > 0 && dev.max_qp_wr > 0);
    assert_eq!(dev.atomic_cap, IBV_ATOMIC_HCA);

    // GIDs: index 0 is the IPv4-mapped address, RoCE v2; past the table is an error.
    let mut gid = ibv_gid::default();
    // Safety: as above.
    assert_eq!(unsafe { (verbs.query_gid)(ctx.0, 1, 0, &mut gid) }, 0);
    let mut mapped = [0u8; 16];
    mapped[10] = 0xff;
    mapped[11] = 0xff;
    mapped[12..].copy_from_slice(&ipv4.octets());
    assert_eq!(gid.raw(), mapped);
    let mut entry = std::mem::MaybeUninit::<ibv_gid_entry>::zeroed();
    // Safety: as above.
    let rc = unsafe {
        (verbs.query_gid_ex)(
            ctx.0,
            1,
            0,
            entry.as_mut_ptr(),
            0,
            size_of::<ibv_gid_entry>(),
        )
    };
    assert_eq!(rc, 0);
    // Safety: filled by the call.
    let entry = unsafe { entry.assume_init() };
    assert_eq!(
        (entry.gid.raw(), entry.gid_type),
        (mapped, IBV_GID_TYPE_ROCE_V2)
    );
    assert!(entry.ndev_ifindex > 0, "the interface's index");
    // Safety: as above.
    let past = unsafe { (verbs.query_gid)(ctx.0, 1, port.gid_tbl_len, &mut gid) };
    assert_eq!((past, errno()), (-1, libc::EINVAL));
    let mut table = vec![entry; port.gid_tbl_len as usize];
    // Safety: room for `gid_tbl_len` entries.
    let n = unsafe {
        (verbs.query_gid_table)(
            ctx.0,
            table.as_mut_ptr(),
            table.len(),
            0,
            size_of::<ibv_gid_entry>(),
        )
    };
    assert!(n >= 1 && n as usize <= table.len(), "{n}");
    assert_eq!(table[0].gid.raw(), mapped);
    // Safety: no room: the contract's negated EINVAL.
    let n = unsafe { (verbs.query_gid_table)(ctx.0, table.as_mut_ptr(), 0, 0, 32) };
    assert_eq!(n, -(libc::EINVAL as isize));

    // One P_Key, the default one.
    let mut pkey = 0u16;
    // Safety: as above.
    assert_eq!(unsafe { (verbs.query_pkey)(ctx.0, 1, 0, &mut pkey) }, 0);
    assert_eq!(pkey, 0xffff);
    // Safety: takes integers.
    assert_eq!(unsafe { (verbs.get_pkey_index)(ctx.0, 1, 0xffff) }, 0);

    // Objects; in-use ones refuse to go; unsupported ones answer EOPNOTSUPP.
    // Safety: a context of the library.
    let pd = unsafe { (verbs.alloc_pd)(ctx.0) };
    assert!(!pd.is_null());
    let pages = Pages::new(1 << 16);
    let access = (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) as c_int;
    // Safety: the library's PD and memory of this process.
    let mr = unsafe { (verbs.reg_mr)(pd, pages.at(0).cast(), pages.len, access) };
    assert!(!mr.is_null(), "ibv_reg_mr: errno {}", errno());
    // Safety: a live MR.
    let mr_fields = unsafe { &*mr };
    assert_eq!(
        (mr_fields.addr, mr_fields.length),
        (pages.at(0).cast(), pages.len)
    );
    // Safety: remote write without local write is invalid.
    let bad = unsafe {
        (verbs.reg_mr)(
            pd,
            pages.at(0).cast(),
            4096,
            IBV_ACCESS_REMOTE_WRITE as c_int,
        )
    };
    assert!(bad.is_null() && errno() == libc::EINVAL);
    // Safety: on-demand paging is not supported.
    let odp =
        unsafe { (verbs.reg_mr)(pd, pages.at(0).cast(), 4096, IBV_ACCESS_ON_DEMAND as c_int) };
    assert!(odp.is_null() && errno() == libc::EOPNOTSUPP);
    // Safety: no dmabuf support; the fd is never used.
    let dmabuf = unsafe { (verbs.reg_dmabuf_mr)(pd, 0, 4096, 0, -1, 1) };
    assert!(dmabuf.is_null() && errno() == libc::EOPNOTSUPP);
    // Safety: the PD still holds the MR.
    assert_eq!(unsafe { (verbs.dealloc_pd)(pd) }, libc::EBUSY);
    // Safety: memory windows are not supported: verbs.h checks the op before calling it.
    assert!(unsafe { (*ctx.0).ops.alloc_mw }.is_none());

    // Safety: a context of the library.
    let channel = unsafe { (verbs.create_comp_channel)(ctx.0) };
    assert!(!channel.is_null());
    // Safety: a context and a channel of the library.
    let cq = unsafe { (verbs.create_cq)(ctx.0, 16, std::ptr::null_mut(), channel, 0) };
    assert!(!cq.is_null());
    // Safety: a live CQ.
    let entries = unsafe { (*cq).cqe };
    // Safety: a live channel.
    let refcnt = unsafe { (*channel).refcnt };
    assert_eq!((entries >= 16, refcnt), (true, 1));
    // Safety: the channel still serves the CQ.
    let busy = unsafe { (verbs.destroy_comp_channel)(channel) };
    assert_eq!(busy, libc::EBUSY);
    // A non-blocking channel has no event to give.
    // Safety: the channel's fd is a descriptor the library owns; only its flags change.
    let fd = unsafe { (*channel).fd };
    // Safety: fcntl on a valid descriptor.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // Safety: as above.
    let set = unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) };
    assert_eq!(set, 0);
    let (mut got_cq, mut cookie) = (std::ptr::null_mut(), std::ptr::null_mut());
    // Safety: a channel of the library and writable out-pointers.
    let rc = unsafe { (verbs.get_cq_event)(channel, &mut got_cq, &mut cookie) };
    assert_eq!((rc, errno()), (-1, libc::EAGAIN));

    let qp = create_qp(&verbs, pd, cq, cq, 8);
    // Safety: a QP of the library.
    let qp_ex = unsafe { (verbs.qp_to_qp_ex)(qp.0) };
    assert!(
        qp_ex.is_null(),
        "no ibv_qp_ex for a QP created without IBV_QP_INIT_ATTR_SEND_OPS_FLAGS"
    );
    let mut attr = ibv_qp_attr::default();
    let mut init = ibv_qp_init_attr::default();
    // Safety: a QP and writable structures.
    let rc = unsafe { (verbs.query_qp)(qp.0, &mut attr, IBV_QP_CAP as c_int, &mut init) };
    assert_eq!(rc, 0);
    assert_eq!(
        (attr.qp_state, init.qp_type, init.send_cq),
        (IBV_QPS_RESET, IBV_QPT_RC, cq)
    );
    assert!(attr.cap.max_send_wr >= 8);
    // Safety: the QP still uses the CQ.
    assert_eq!(unsafe { (verbs.destroy_cq)(cq) }, libc::EBUSY);
    // A GRH-less address vector cannot reach anything on RoCE.
    let mut a = ibv_qp_attr {
        qp_state: IBV_QPS_INIT,
        port_num: 1,
        ..ibv_qp_attr::default()
    };
    let mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    // Safety: a QP and a valid attribute structure.
    assert_eq!(unsafe { (verbs.modify_qp)(qp.0, &mut a, mask as c_int) }, 0);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    let mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    // Safety: as above.
    let refused = unsafe { (verbs.modify_qp)(qp.0, &mut a, mask as c_int) };
    assert_eq!(refused, libc::EINVAL);

    // Everything goes, in dependency order.
    // Safety: live objects of the library, each destroyed once.
    assert_eq!(unsafe { (verbs.destroy_qp)(qp.0) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.destroy_cq)(cq) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.destroy_comp_channel)(channel) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.dereg_mr)(mr) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.dealloc_pd)(pd) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.close_device)(ctx.0) }, 0);
    // Safety: the library looks the pointer up: a second close is refused, not a double
    // free.
    assert_eq!(unsafe { (verbs.close_device)(ctx.0) }, libc::EINVAL);
}

/// The daemon's per-application limits reach C programs as the kernel's errno values:
/// `ibv_query_device` reports them, an object past one is `ENOMEM`, and a PD is `EBUSY`
/// while a region uses it and can be deallocated (and allocated again) once it does not.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn limits_are_reported_and_refused_with_enomem() {
    xroce_lab::require_root();
    let _one_at_a_time = serial();
    let bench = Bench::start_with(&["--max-pds", "1", "--max-mrs", "1", "--max-qps", "3"]);
    let verbs = Verbs::load();
    let ctx = open(&verbs, &bench, Side::A);
    let mut dev = ibv_device_attr::default();
    // Safety: a context and a writable structure.
    assert_eq!(unsafe { (verbs.query_device)(ctx.0, &mut dev) }, 0);
    assert_eq!((dev.max_pd, dev.max_mr, dev.max_qp), (1, 1, 3));
    // Safety: a context of the library.
    let pd = unsafe { (verbs.alloc_pd)(ctx.0) };
    assert!(!pd.is_null(), "ibv_alloc_pd: errno {}", errno());
    // Safety: as above.
    let second = unsafe { (verbs.alloc_pd)(ctx.0) };
    assert!(second.is_null() && errno() == libc::ENOMEM, "{}", errno());
    let pages = Pages::new(2 << 12);
    let access = IBV_ACCESS_LOCAL_WRITE as c_int;
    // Safety: the library's PD and memory of this process.
    let mr = unsafe { (verbs.reg_mr)(pd, pages.at(0).cast(), 4096, access) };
    assert!(!mr.is_null(), "ibv_reg_mr: errno {}", errno());
    // Safety: as above.
    let more = unsafe { (verbs.reg_mr)(pd, pages.at(4096).cast(), 4096, access) };
    assert!(more.is_null() && errno() == libc::ENOMEM, "{}", errno());
    // Safety: a live PD that a region uses.
    assert_eq!(unsafe { (verbs.dealloc_pd)(pd) }, libc::EBUSY);
    // Safety: live objects of the library, each destroyed once.
    assert_eq!(unsafe { (verbs.dereg_mr)(mr) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.dealloc_pd)(pd) }, 0);
    // The daemon let it go: the one PD this application may have is available again.
    // Safety: a context of the library.
    let again = unsafe { (verbs.alloc_pd)(ctx.0) };
    assert!(!again.is_null(), "ibv_alloc_pd: errno {}", errno());
    // Safety: live objects of the library, each destroyed once.
    assert_eq!(unsafe { (verbs.dealloc_pd)(again) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.close_device)(ctx.0) }, 0);
}

/// Threads of one process, each on its own QP, sharing a context, a PD, an MR and (on the
/// sending side) one CQ that all of them poll at once.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn threads_post_and_poll_concurrently_on_shared_objects() {
    xroce_lab::require_root();
    let _one_at_a_time = serial();
    const THREADS: usize = 4;
    const MESSAGES: usize = 200;
    /// Each message has its own 256 bytes (a receiver checks message m while later ones
    /// are already being written).
    const MESSAGE: usize = 256;
    const SLOT: usize = MESSAGES * MESSAGE;
    let bench = Bench::start();
    let verbs = Arc::new(Verbs::load());
    let (ca, cb) = (open(&verbs, &bench, Side::A), open(&verbs, &bench, Side::B));
    let access = (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) as c_int;
    let region = THREADS * SLOT * 2;
    let (mem_a, mem_b) = (Arc::new(Pages::new(region)), Arc::new(Pages::new(region)));
    // Safety: a context of the library.
    let pd_a = unsafe { (verbs.alloc_pd)(ca.0) };
    // Safety: as above.
    let pd_b = unsafe { (verbs.alloc_pd)(cb.0) };
    assert!(!pd_a.is_null() && !pd_b.is_null());
    // Safety: as above.
    let mr_a = unsafe { (verbs.reg_mr)(pd_a, mem_a.at(0).cast(), region, access) };
    // Safety: as above.
    let mr_b = unsafe { (verbs.reg_mr)(pd_b, mem_b.at(0).cast(), region, access) };
    assert!(!mr_a.is_null() && !mr_b.is_null());
    // Safety: a live MR.
    let lkey_a = unsafe { (*mr_a).lkey };
    // Safety: as above.
    let mr_b_fields = unsafe { &*mr_b };
    let (rkey_b, lkey_b) = (mr_b_fields.rkey, mr_b_fields.lkey);

    // A: one send CQ for every QP; B: one CQ and one completion channel per QP.
    let depth = (MESSAGES * 2) as c_int;
    // Safety: a context of the library.
    let shared_cq = Ptr(unsafe {
        (verbs.create_cq)(
            ca.0,
            depth * THREADS as c_int,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    });
    assert!(!shared_cq.0.is_null());
    let (ipv4_a, ipv4_b) = (
        bench.hosts.lab.host(Side::A).ipv4,
        bench.hosts.lab.host(Side::B).ipv4,
    );
    let mut pairs = Vec::new();
    for i in 0..THREADS {
        // Safety: a context of the library.
        let channel = Ptr(unsafe { (verbs.create_comp_channel)(cb.0) });
        // Safety: a context and a channel of the library; the cookie is the index.
        let cq_b = Ptr(unsafe { (verbs.create_cq)(cb.0, depth, i as *mut c_void, channel.0, 0) });
        assert!(!channel.0.is_null() && !cq_b.0.is_null());
        let qa = create_qp(&verbs, pd_a, shared_cq.0, shared_cq.0, MESSAGES as u32);
        let qb = create_qp(&verbs, pd_b, cq_b.0, cq_b.0, MESSAGES as u32);
        // Safety: a live QP.
        let qpn_a = unsafe { (*qa.0).qp_num };
        // Safety: as above.
        let qpn_b = unsafe { (*qb.0).qp_num };
        connect(&verbs, qa, ipv4_b, qpn_b);
        connect(&verbs, qb, ipv4_a, qpn_a);
        pairs.push((qa, qb, cq_b, channel));
    }

    let deadline = Instant::now() + Duration::from_secs(120);
    let polled = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
    std::thread::scope(|scope| {
        for (i, &(qa, qb, cq_b, channel)) in pairs.iter().enumerate() {
            // Receiver i on B: every message is a WRITE into its slot followed by a SEND
            // with immediate data; it sleeps in ibv_get_cq_event between them.
            let (verbs, receiver_mem) = (verbs.clone(), mem_b.clone());
            scope.spawn(move || {
                let base = i * SLOT * 2;
                for m in 0..MESSAGES {
                    let mut sge = ibv_sge {
                        addr: receiver_mem.at(base + SLOT) as u64,
                        length: MESSAGE as u32,
                        lkey: lkey_b,
                    };
                    let mut wr = ibv_recv_wr {
                        wr_id: m as u64,
                        sg_list: &mut sge,
                        num_sge: 1,
                        ..ibv_recv_wr::default()
                    };
                    // Safety: a QP of the library and registered memory.
                    assert_eq!(unsafe { post_recv(qb, &mut wr) }, 0);
                }
                let mut received = 0;
                let mut wc = [ibv_wc::default(); 8];
                while received < MESSAGES {
                    req_notify_cq(cq_b);
                    let n = poll_cq(cq_b, &mut wc);
                    if n == 0 {
                        let (mut got, mut cookie) = (std::ptr::null_mut(), std::ptr::null_mut());
                        // Safety: a channel of the library; blocks until the next event.
                        let rc =
                            unsafe { (verbs.get_cq_event)(channel.get(), &mut got, &mut cookie) };
                        assert_eq!(rc, 0, "ibv_get_cq_event: errno {}", errno());
                        assert_eq!((got, cookie as usize), (cq_b.get(), i));
                        // Safety: the CQ the event was for.
                        unsafe { (verbs.ack_cq_events)(got, 1) };
                        continue;
                    }
                    for c in &wc[..n] {
                        assert_eq!(c.status, IBV_WC_SUCCESS, "{c:?}");
                        assert_eq!(c.opcode, IBV_WC_RECV);
                        assert_ne!(c.wc_flags & IBV_WC_WITH_IMM, 0);
                        let m = u32::from_be(c.imm_data) as usize;
                        assert_eq!(m, received, "messages arrive in order on a QP");
                        // The WRITE before the SEND landed in its place, in memory the
                        // application registered in place.
                        let expected = pattern(i, m, MESSAGE);
                        assert_eq!(
                            receiver_mem.read(base + m * MESSAGE, MESSAGE),
                            expected,
                            "QP {i} message {m}"
                        );
                        received += 1;
                    }
                    assert!(Instant::now() < deadline, "QP {i}: {received} messages");
                }
            });
            // Sender i on A: WRITE then SEND, one message at a time,
            // polling the shared CQ like every other sender.
            let (mem_a, mem_b, polled) = (mem_a.clone(), mem_b.clone(), polled.clone());
            scope.spawn(move || {
                let base = i * SLOT * 2;
                let mut wc = [ibv_wc::default(); 4];
                for m in 0..MESSAGES {
                    let at = base + m * MESSAGE;
                    mem_a.write(at, &pattern(i, m, MESSAGE));
                    let mut sge = ibv_sge {
                        addr: mem_a.at(at) as u64,
                        length: MESSAGE as u32,
                        lkey: lkey_a,
                    };
                    let mut write = ibv_send_wr {
                        wr_id: ((i * MESSAGES + m) * 2) as u64,
                        sg_list: &mut sge,
                        num_sge: 1,
                        opcode: IBV_WR_RDMA_WRITE,
                        send_flags: IBV_SEND_SIGNALED,
                        ..ibv_send_wr::default()
                    };
                    write.wr.rdma = ibv_send_wr_rdma {
                        remote_addr: mem_b.at(at) as u64,
                        rkey: rkey_b,
                    };
                    let mut send = ibv_send_wr {
                        wr_id: ((i * MESSAGES + m) * 2 + 1) as u64,
                        num_sge: 0,
                        opcode: IBV_WR_SEND_WITH_IMM,
                        send_flags: IBV_SEND_SIGNALED,
                        imm_data: (m as u32).to_be(),
                        ..ibv_send_wr::default()
                    };
                    write.next = &mut send;
                    // Safety: a QP of the library, registered memory, a two-element list.
                    assert_eq!(unsafe { post_send(qa, &mut write) }, 0);
                    // Wait until this message's two completions have been polled by
                    // anyone (whichever thread polls the shared CQ).
                    loop {
                        let n = poll_cq(shared_cq, &mut wc);
                        let mut seen = polled.lock().unwrap();
                        for c in &wc[..n] {
                            assert_eq!(c.status, IBV_WC_SUCCESS, "{c:?}");
                            seen.push(c.wr_id);
                        }
                        let mine = [write.wr_id, send.wr_id];
                        if mine.iter().all(|id| seen.contains(id)) {
                            break;
                        }
                        drop(seen);
                        assert!(Instant::now() < deadline, "sender {i} stuck at {m}");
                        std::thread::yield_now();
                    }
                }
            });
        }
    });

    // Every signaled send completed exactly once, whichever thread polled it.
    let polled = polled.lock().unwrap();
    let unique: BTreeSet<u64> = polled.iter().copied().collect();
    assert_eq!(polled.len(), THREADS * MESSAGES * 2, "no completion twice");
    assert_eq!(unique, (0..(THREADS * MESSAGES * 2) as u64).collect());

    // Live objects, each destroyed once, in dependency order.
    for &(qa, qb, cq_b, channel) in &pairs {
        // Safety: live objects of the library.
        assert_eq!(unsafe { (verbs.destroy_qp)(qa.0) }, 0);
        // Safety: as above.
        assert_eq!(unsafe { (verbs.destroy_qp)(qb.0) }, 0);
        // Safety: as above.
        assert_eq!(unsafe { (verbs.destroy_cq)(cq_b.0) }, 0);
        // Safety: as above.
        assert_eq!(unsafe { (verbs.destroy_comp_channel)(channel.0) }, 0);
    }
    // Safety: as above.
    assert_eq!(unsafe { (verbs.destroy_cq)(shared_cq.0) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.dereg_mr)(mr_a) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.dereg_mr)(mr_b) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.dealloc_pd)(pd_a) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.dealloc_pd)(pd_b) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.close_device)(ca.0) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.close_device)(cb.0) }, 0);
}

/// An overrun CQ is reported as verbs says (IBTA 10.10.2.3): an `IBV_EVENT_CQ_ERR`
/// asynchronous event naming it, on a blocking `async_fd`; polling it fails from then on.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn an_overrun_cq_raises_an_asynchronous_event() {
    xroce_lab::require_root();
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let verbs = Verbs::load();
    let (ca, cb) = (open(&verbs, &bench, Side::A), open(&verbs, &bench, Side::B));
    // Safety: a context of the library.
    let async_fd = unsafe { (*ca.0).async_fd };
    // Safety: fcntl on the library's descriptor, reading its flags only.
    let flags = unsafe { libc::fcntl(async_fd, libc::F_GETFL) };
    assert_eq!(flags & libc::O_NONBLOCK, 0, "async_fd blocks by default");

    let pages = Pages::new(1 << 16);
    let access = (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) as c_int;
    // Safety: a context of the library.
    let pd_a = unsafe { (verbs.alloc_pd)(ca.0) };
    // Safety: as above.
    let pd_b = unsafe { (verbs.alloc_pd)(cb.0) };
    // Safety: the library's PD and memory of this process.
    let mr_b = unsafe { (verbs.reg_mr)(pd_b, pages.at(0).cast(), pages.len, access) };
    assert!(!pd_a.is_null() && !mr_b.is_null());
    let no_channel = std::ptr::null_mut();
    // One entry on A; B's receive side sees nothing anyway.
    // Safety: a context of the library.
    let cq_a = Ptr(unsafe { (verbs.create_cq)(ca.0, 1, std::ptr::null_mut(), no_channel, 0) });
    // Safety: as above.
    let cq_b = Ptr(unsafe { (verbs.create_cq)(cb.0, 2, std::ptr::null_mut(), no_channel, 0) });
    // Safety: a live CQ.
    assert_eq!(unsafe { (*cq_a.0).cqe }, 1);
    let qa = create_qp(&verbs, pd_a, cq_a.0, cq_a.0, 8);
    let qb = create_qp(&verbs, pd_b, cq_b.0, cq_b.0, 8);
    // Safety: a live QP.
    let qpn_a = unsafe { (*qa.0).qp_num };
    // Safety: as above.
    let qpn_b = unsafe { (*qb.0).qp_num };
    connect(&verbs, qa, bench.hosts.lab.host(Side::B).ipv4, qpn_b);
    connect(&verbs, qb, bench.hosts.lab.host(Side::A).ipv4, qpn_a);
    // Safety: a live MR.
    let rkey = unsafe { (*mr_b).rkey };

    // Three signaled zero-length WRITEs into a one-entry CQ that nobody polls.
    for id in 0..3u64 {
        let mut wr = ibv_send_wr {
            wr_id: id,
            opcode: IBV_WR_RDMA_WRITE,
            send_flags: IBV_SEND_SIGNALED,
            ..ibv_send_wr::default()
        };
        wr.wr.rdma = ibv_send_wr_rdma {
            remote_addr: pages.at(0) as u64,
            rkey,
        };
        // Safety: a QP of the library; no local memory is read.
        assert_eq!(unsafe { post_send(qa, &mut wr) }, 0);
    }
    let mut ready = libc::pollfd {
        fd: async_fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // Safety: one valid pollfd.
    let n = unsafe { libc::poll(&mut ready, 1, 30_000) };
    assert_eq!(n, 1, "an asynchronous event within 30 s");
    let mut event = ibv_async_event::default();
    // Safety: a context of the library and a writable event.
    assert_eq!(unsafe { (verbs.get_async_event)(ca.0, &mut event) }, 0);
    assert_eq!(event.event_type, IBV_EVENT_CQ_ERR);
    // Safety: for a CQ event the element is the CQ.
    assert_eq!(unsafe { event.element.cq }, cq_a.0);
    // Safety: the event just received, acknowledged once.
    unsafe { (verbs.ack_async_event)(&mut event) };
    let mut wc = [ibv_wc::default(); 4];
    // Safety: the CQ's context and ops table belong to the library.
    let poll = unsafe { ops(cq_a.0) }.poll_cq.expect("poll_cq op");
    // Safety: a CQ of the library and room for 4 completions.
    let polled = unsafe { poll(cq_a.0, 4, wc.as_mut_ptr()) };
    assert!(polled < 0, "a broken CQ fails to poll ({polled})");

    // Everything goes (the event was acknowledged: destroying the CQ does not wait).
    // Safety: live objects of the library, each destroyed once.
    assert_eq!(unsafe { (verbs.destroy_qp)(qa.0) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.destroy_qp)(qb.0) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.destroy_cq)(cq_a.0) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.destroy_cq)(cq_b.0) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.dereg_mr)(mr_b) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.dealloc_pd)(pd_a) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.dealloc_pd)(pd_b) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.close_device)(ca.0) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.close_device)(cb.0) }, 0);
}

/// A UD QP in RTS with Q_Key `QKEY`.
fn ud_qp(verbs: &Verbs, pd: *mut ibv_pd, cq: *mut ibv_cq) -> Ptr<ibv_qp> {
    let mut init = ibv_qp_init_attr {
        send_cq: cq,
        recv_cq: cq,
        cap: ibv_qp_cap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: IBV_QPT_UD,
        ..ibv_qp_init_attr::default()
    };
    // Safety: a PD and a CQ of the library, and a valid attribute structure.
    let qp = Ptr(unsafe { (verbs.create_qp)(pd, &mut init) });
    assert!(!qp.0.is_null(), "ibv_create_qp(UD): errno {}", errno());
    let mut a = ibv_qp_attr {
        qp_state: IBV_QPS_INIT,
        port_num: 1,
        qkey: QKEY,
        ..ibv_qp_attr::default()
    };
    let mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
    // Safety: a QP of the library and a valid attribute structure.
    assert_eq!(unsafe { (verbs.modify_qp)(qp.0, &mut a, mask as c_int) }, 0);
    a.qp_state = IBV_QPS_RTR;
    let mask = IBV_QP_STATE;
    // Safety: as above.
    assert_eq!(unsafe { (verbs.modify_qp)(qp.0, &mut a, mask as c_int) }, 0);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 1;
    let mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    // Safety: as above.
    assert_eq!(unsafe { (verbs.modify_qp)(qp.0, &mut a, mask as c_int) }, 0);
    qp
}

const QKEY: u32 = 0x1111_1111;
/// The GRH area that starts every UD receive buffer.
const GRH: usize = 40;

/// Posts a receive of `GRH + len` bytes at `at`.
fn post_ud_recv(qp: Ptr<ibv_qp>, pages: &Pages, lkey: u32, at: usize, len: usize) {
    let mut sge = ibv_sge {
        addr: pages.at(at) as u64,
        length: (GRH + len) as u32,
        lkey,
    };
    let mut wr = ibv_recv_wr {
        wr_id: at as u64,
        sg_list: &mut sge,
        num_sge: 1,
        ..ibv_recv_wr::default()
    };
    // Safety: a QP of the library and registered memory.
    assert_eq!(unsafe { post_recv(qp, &mut wr) }, 0);
}

/// Sends `len` bytes at `at` to `qpn` through `ah`.
fn post_ud_send(
    qp: Ptr<ibv_qp>,
    ah: *mut ibv_ah,
    qpn: u32,
    pages: &Pages,
    lkey: u32,
    at: usize,
    len: usize,
) {
    let mut sge = ibv_sge {
        addr: pages.at(at) as u64,
        length: len as u32,
        lkey,
    };
    let mut wr = ibv_send_wr {
        wr_id: at as u64,
        sg_list: &mut sge,
        num_sge: 1,
        opcode: IBV_WR_SEND,
        send_flags: IBV_SEND_SIGNALED,
        ..ibv_send_wr::default()
    };
    wr.wr.ud = ibv_send_wr_ud {
        ah,
        remote_qpn: qpn,
        remote_qkey: QKEY,
    };
    // Safety: a QP and an AH of the library, and registered memory.
    assert_eq!(unsafe { post_send(qp, &mut wr) }, 0);
}

/// Polls `cq` until a receive completion arrives (send completions are checked and
/// skipped).
fn wait_recv(cq: Ptr<ibv_cq>) -> ibv_wc {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut wc = [ibv_wc::default(); 1];
    loop {
        if poll_cq(cq, &mut wc) == 1 {
            assert_eq!(wc[0].status, IBV_WC_SUCCESS, "{:?}", wc[0]);
            if wc[0].opcode == IBV_WC_RECV {
                return wc[0];
            }
        }
        assert!(Instant::now() < deadline, "no receive within 30 s");
        std::thread::yield_now();
    }
}

/// A UD request carries its sender's address in the 40-byte GRH area of the receive
/// buffer; `ibv_init_ah_from_wc` and `ibv_create_ah_from_wc` turn it into the address
/// vector of the reply, and the reply arrives.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_ud_reply_goes_back_to_where_the_request_came_from() {
    ud_reply_goes_back(Family::Ipv4);
}

/// The same over IPv6: the GRH area holds the request's IPv6 header.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_ud_reply_over_ipv6_goes_back_to_where_the_request_came_from() {
    ud_reply_goes_back(Family::Ipv6);
}

fn ud_reply_goes_back(family: Family) {
    xroce_lab::require_root();
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let verbs = Verbs::load();
    let (ca, cb) = (open(&verbs, &bench, Side::A), open(&verbs, &bench, Side::B));
    let gid = |side: Side| xroce_wire::Gid::from_ip(bench.hosts.lab.host(side).address(family)).0;
    let (gid_a, gid_b) = (gid(Side::A), gid(Side::B));
    let (mem_a, mem_b) = (Pages::new(1 << 16), Pages::new(1 << 16));
    let access = IBV_ACCESS_LOCAL_WRITE as c_int;
    let mut sides = Vec::new();
    for (ctx, mem) in [(ca, &mem_a), (cb, &mem_b)] {
        // Safety: a context of the library.
        let pd = unsafe { (verbs.alloc_pd)(ctx.0) };
        // Safety: the library's PD and memory of this process.
        let mr = unsafe { (verbs.reg_mr)(pd, mem.at(0).cast(), mem.len, access) };
        // Safety: a context of the library.
        let cq = Ptr(unsafe {
            (verbs.create_cq)(ctx.0, 8, std::ptr::null_mut(), std::ptr::null_mut(), 0)
        });
        assert!(!pd.is_null() && !mr.is_null() && !cq.0.is_null());
        let qp = ud_qp(&verbs, pd, cq.0);
        // Safety: a live MR.
        let lkey = unsafe { (*mr).lkey };
        // Safety: a live QP.
        let qpn = unsafe { (*qp.0).qp_num };
        sides.push((pd, mr, cq, qp, lkey, qpn));
    }
    let (pd_a, _, cq_a, qp_a, lkey_a, qpn_a) = sides[0];
    let (pd_b, _, cq_b, qp_b, lkey_b, qpn_b) = sides[1];

    // A -> B with an address handle made from B's GID.
    let mut av = ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid::from_raw(gid_b),
            sgid_index: family.gid_index(),
            hop_limit: 64,
            ..ibv_global_route::default()
        },
        is_global: 1,
        port_num: 1,
        ..ibv_ah_attr::default()
    };
    // Safety: the library's PD and a valid address vector.
    let to_b = unsafe { (verbs.create_ah)(pd_a, &mut av) };
    assert!(!to_b.is_null(), "ibv_create_ah: errno {}", errno());
    post_ud_recv(qp_b, &mem_b, lkey_b, 0, 64);
    post_ud_recv(qp_a, &mem_a, lkey_a, 0, 64);
    mem_a.write(4096, b"ping from A");
    post_ud_send(qp_a, to_b, qpn_b, &mem_a, lkey_a, 4096, 11);

    let mut wc = wait_recv(cq_b);
    assert_eq!((wc.byte_len, wc.src_qp), (GRH as u32 + 11, qpn_a), "{wc:?}");
    assert_ne!(wc.wc_flags & IBV_WC_GRH, 0, "a UD receive has its GRH area");
    assert_eq!(mem_b.read(GRH, 11), b"ping from A");
    let grh = mem_b.at(0).cast::<ibv_grh>();
    let mut reply = ibv_ah_attr::default();
    // Safety: a context of the library, the completion, its receive buffer's GRH area.
    let rc = unsafe { (verbs.init_ah_from_wc)(cb.0, 1, &mut wc, grh, &mut reply) };
    assert_eq!(rc, 0, "ibv_init_ah_from_wc: errno {}", errno());
    assert_eq!(reply.is_global, 1);
    assert_eq!(reply.grh.dgid.raw(), gid_a, "the reply goes to A");
    assert_eq!(
        reply.grh.sgid_index,
        family.gid_index(),
        "from the GID the request was sent to"
    );
    assert_eq!(
        (
            reply.grh.hop_limit,
            reply.grh.traffic_class,
            reply.grh.flow_label
        ),
        (64, 0, 0),
        "as the request's IP header says"
    );
    assert_eq!(reply.port_num, 1);
    // Safety: as above.
    let to_a = unsafe { (verbs.create_ah_from_wc)(pd_b, &mut wc, grh, 1) };
    assert!(!to_a.is_null(), "ibv_create_ah_from_wc: errno {}", errno());
    mem_b.write(4096, b"pong from B");
    post_ud_send(qp_b, to_a, wc.src_qp, &mem_b, lkey_b, 4096, 11);
    let wc = wait_recv(cq_a);
    assert_eq!((wc.byte_len, wc.src_qp), (GRH as u32 + 11, qpn_b), "{wc:?}");
    assert_eq!(mem_a.read(GRH, 11), b"pong from B");

    // Safety: live objects of the library, each destroyed once.
    assert_eq!(unsafe { (verbs.destroy_ah)(to_b) }, 0);
    // Safety: as above.
    assert_eq!(unsafe { (verbs.destroy_ah)(to_a) }, 0);
    for (ctx, (pd, mr, cq, qp, _, _)) in [(ca, sides[0]), (cb, sides[1])] {
        // Safety: as above.
        assert_eq!(unsafe { (verbs.destroy_qp)(qp.0) }, 0);
        // Safety: as above.
        assert_eq!(unsafe { (verbs.destroy_cq)(cq.0) }, 0);
        // Safety: as above.
        assert_eq!(unsafe { (verbs.dereg_mr)(mr) }, 0);
        // Safety: as above.
        assert_eq!(unsafe { (verbs.dealloc_pd)(pd) }, 0);
        // Safety: as above.
        assert_eq!(unsafe { (verbs.close_device)(ctx.0) }, 0);
    }
}

/// The bytes of message `m` of QP `i`.
fn pattern(i: usize, m: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| (i * 31 + m * 7 + k) as u8).collect()
}

/// Every completion of an extended CQ until `n` came (10 s at most), as
/// (wr_id, status, opcode, byte_len), read the way verbs.h's inline functions read them.
fn poll_ex(cq: *mut ibv_cq_ex, n: usize) -> Vec<(u64, u32, u32, u32)> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    // Safety: a live extended CQ of the library.
    let c = unsafe { &*cq };
    let (start, next, end) = (
        c.start_poll.expect("start_poll"),
        c.next_poll.expect("next_poll"),
        c.end_poll.expect("end_poll"),
    );
    let (opcode, byte_len) = (
        c.read_opcode.expect("read_opcode"),
        c.read_byte_len.expect("read_byte_len"),
    );
    while got.len() < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n} completions: {got:?}",
            got.len()
        );
        let mut attr = ibv_poll_cq_attr::default();
        // Safety: the CQ's own polling function, with a valid attribute structure.
        let mut r = unsafe { start(cq, &mut attr) };
        if r == libc::ENOENT {
            std::thread::sleep(Duration::from_micros(100));
            continue;
        }
        assert_eq!(r, 0, "ibv_start_poll");
        while r == 0 {
            // Safety: a live CQ; a completion is current, whose fields the provider set.
            let current = unsafe { &*cq };
            let (wr_id, status) = (current.wr_id, current.status);
            // Safety: a completion is current.
            let op = unsafe { opcode(cq) };
            // Safety: as above.
            let len = unsafe { byte_len(cq) };
            got.push((wr_id, status, op, len));
            // Safety: inside a successful start_poll.
            r = unsafe { next(cq) };
        }
        assert_eq!(r, libc::ENOENT, "ibv_next_poll");
        // Safety: after a successful start_poll.
        unsafe { end(cq) };
    }
    got
}

/// The `ibv_wr_*` functions of one extended QP, called as verbs.h's inline functions call
/// them.
struct WrApi {
    qp: *mut ibv_qp_ex,
    x: &'static ibv_qp_ex,
}

impl WrApi {
    /// # Safety
    ///
    /// `qp` is an extended QP of the library that outlives the `WrApi`.
    unsafe fn new(qp: *mut ibv_qp_ex) -> WrApi {
        // Safety: forwarded from the caller.
        let x = unsafe { &*qp };
        WrApi { qp, x }
    }

    fn start(&self) {
        // Safety: the QP's own function.
        unsafe { self.x.wr_start.unwrap()(self.qp) }
    }

    fn complete(&self) -> c_int {
        // Safety: the QP's own function.
        unsafe { self.x.wr_complete.unwrap()(self.qp) }
    }

    /// Sets the next request's id, signaled.
    fn id(&self, id: u64) {
        // Safety: the application's fields of a live extended QP.
        unsafe { (*self.qp).wr_id = id };
        // Safety: as above.
        unsafe { (*self.qp).wr_flags = IBV_SEND_SIGNALED };
    }

    fn write(&self, rkey: u32, addr: u64) {
        // Safety: the QP's own function.
        unsafe { self.x.wr_rdma_write.unwrap()(self.qp, rkey, addr) }
    }

    fn send(&self) {
        // Safety: the QP's own function.
        unsafe { self.x.wr_send.unwrap()(self.qp) }
    }

    fn fetch_add(&self, rkey: u32, addr: u64) {
        // Safety: the QP's own function.
        unsafe { self.x.wr_atomic_fetch_add.unwrap()(self.qp, rkey, addr, 1) }
    }

    fn sge(&self, lkey: u32, addr: *mut u8, length: u32) {
        // Safety: the QP's own function; the memory is registered.
        unsafe { self.x.wr_set_sge.unwrap()(self.qp, lkey, addr as u64, length) }
    }

    fn inline(&self, bytes: &[u8]) {
        // Safety: the QP's own function; it copies the bytes before returning.
        unsafe {
            self.x.wr_set_inline_data.unwrap()(
                self.qp,
                bytes.as_ptr().cast_mut().cast(),
                bytes.len(),
            )
        }
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn extended_cqs_and_qps_post_all_or_nothing_and_rereg_keeps_the_keys() {
    xroce_lab::require_root();
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let verbs = Verbs::load();
    let ctx = open(&verbs, &bench, Side::A);
    // Both QPs on host A: loopback.
    let own = bench.hosts.lab.host(Side::A).ipv4;
    // Safety: a context of the library, embedded in its verbs_context.
    let ext = unsafe { &*vctx(ctx) };
    let (create_cq_ex, create_qp_ex) = (
        ext.create_cq_ex.expect("create_cq_ex"),
        ext.create_qp_ex.expect("create_qp_ex"),
    );
    // Safety: a context of the library.
    let pd = unsafe { (verbs.alloc_pd)(ctx.0) };
    assert!(!pd.is_null());

    // Extended CQ: a field the device does not offer is EOPNOTSUPP; the standard ones work.
    let mut cattr = ibv_cq_init_attr_ex {
        cqe: 64,
        cq_context: std::ptr::null_mut(),
        channel: std::ptr::null_mut(),
        comp_vector: 0,
        wc_flags: u64::from(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP),
        comp_mask: 0,
        flags: 0,
        parent_domain: std::ptr::null_mut(),
    };
    // Safety: a context and a valid attribute structure.
    let refused = unsafe { create_cq_ex(ctx.0, &mut cattr) };
    assert!(refused.is_null() && errno() == libc::EOPNOTSUPP);
    cattr.wc_flags =
        u64::from(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_IMM);
    // Safety: as above.
    let cq = unsafe { create_cq_ex(ctx.0, &mut cattr) };
    assert!(!cq.is_null(), "ibv_create_cq_ex: errno {}", errno());

    // Extended QPs with WRITE, SEND and READ; memory window binds are refused.
    let ops = u64::from(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ);
    let qp_attr = |send_ops_flags: u64| ibv_qp_init_attr_ex {
        qp_context: std::ptr::null_mut(),
        send_cq: cq.cast(),
        recv_cq: cq.cast(),
        srq: std::ptr::null_mut(),
        cap: ibv_qp_cap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 64,
        },
        qp_type: IBV_QPT_RC,
        sq_sig_all: 0,
        comp_mask: IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        pd,
        xrcd: std::ptr::null_mut(),
        create_flags: 0,
        max_tso_header: 0,
        rwq_ind_tbl: std::ptr::null_mut(),
        rx_hash_conf: ibv_rx_hash_conf::default(),
        source_qpn: 0,
        send_ops_flags,
    };
    let mut bind = qp_attr(ops | u64::from(IBV_QP_EX_WITH_BIND_MW));
    // Safety: a context and a valid attribute structure.
    let refused = unsafe { create_qp_ex(ctx.0, &mut bind) };
    assert!(refused.is_null() && errno() == libc::EOPNOTSUPP);
    let (mut attr_a, mut attr_b) = (qp_attr(ops), qp_attr(ops));
    // Safety: as above.
    let qa = unsafe { create_qp_ex(ctx.0, &mut attr_a) };
    // Safety: as above.
    let qb = unsafe { create_qp_ex(ctx.0, &mut attr_b) };
    assert!(
        !qa.is_null() && !qb.is_null(),
        "ibv_create_qp_ex: errno {}",
        errno()
    );
    let (qa, qb) = (Ptr(qa), Ptr(qb));
    // Safety: a QP of the library.
    let qpn_a = unsafe { (*qa.0).qp_num };
    // Safety: as above.
    let qpn_b = unsafe { (*qb.0).qp_num };
    connect(&verbs, qa, own, qpn_b);
    connect(&verbs, qb, own, qpn_a);
    // Safety: a QP of the library created with send operations.
    let xa = unsafe { (verbs.qp_to_qp_ex)(qa.0) };
    assert_eq!(
        xa.cast::<ibv_qp>(),
        qa.0,
        "the ibv_qp_ex begins with the ibv_qp"
    );
    // Safety: an extended QP of the library, alive until the end of the test.
    let wr = unsafe { WrApi::new(xa) };

    let (src, dst, moved) = (Pages::new(65536), Pages::new(65536), Pages::new(65536));
    let data = pattern(1, 2, 4096);
    src.write(0, &data);
    let access =
        (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) as c_int;
    // Safety: a PD and mapped memory of this process.
    let mr_src = unsafe { (verbs.reg_mr)(pd, src.at(0).cast(), 65536, access) };
    // Safety: as above.
    let mr_dst = unsafe { (verbs.reg_mr)(pd, dst.at(0).cast(), 65536, access) };
    assert!(!mr_src.is_null() && !mr_dst.is_null());
    // Safety: a live MR of the library.
    let src_lkey = unsafe { (*mr_src).lkey };
    // Safety: as above.
    let dst_mr = unsafe { &*mr_dst };
    let (dst_lkey, dst_rkey) = (dst_mr.lkey, dst_mr.rkey);

    // One sequence, a WRITE and an inline SEND, posted together.
    let mut rsge = ibv_sge {
        addr: dst.at(32768) as u64,
        length: 4096,
        lkey: dst_lkey,
    };
    let mut rwr = ibv_recv_wr {
        wr_id: 100,
        sg_list: &mut rsge,
        num_sge: 1,
        ..ibv_recv_wr::default()
    };
    // Safety: a QP of the library; registered buffer.
    assert_eq!(unsafe { post_recv(qb, &mut rwr) }, 0);
    let greeting = b"hello, inline";
    wr.start();
    wr.id(1);
    wr.write(dst_rkey, dst.at(0) as u64);
    wr.sge(src_lkey, src.at(0), 4096);
    wr.id(2);
    wr.send();
    wr.inline(greeting);
    assert_eq!(wr.complete(), 0);
    let mut got = poll_ex(cq, 3);
    got.sort();
    assert_eq!(
        got,
        [
            (1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 4096),
            (2, IBV_WC_SUCCESS, IBV_WC_SEND, greeting.len() as u32),
            (100, IBV_WC_SUCCESS, IBV_WC_RECV, greeting.len() as u32),
        ]
    );
    assert_eq!(dst.read(0, 4096), data);
    assert_eq!(dst.read(32768, greeting.len()), greeting);

    // An operation the QP was not created for: EINVAL, and nothing of the sequence goes.
    wr.start();
    wr.id(3);
    wr.write(dst_rkey, dst.at(0) as u64);
    wr.sge(src_lkey, src.at(0), 8);
    wr.id(4);
    wr.fetch_add(dst_rkey, dst.at(0) as u64);
    wr.sge(src_lkey, src.at(0), 8);
    assert_eq!(wr.complete(), libc::EINVAL);
    // More requests than the send queue holds: ENOMEM, and none goes.
    wr.start();
    for i in 0..=u64::from(attr_a.cap.max_send_wr) {
        wr.id(10 + i);
        wr.write(dst_rkey, dst.at(0) as u64);
        wr.sge(src_lkey, src.at(0), 8);
    }
    assert_eq!(wr.complete(), libc::ENOMEM);

    // Re-registration onto other memory keeps both keys: a WRITE with the old rkey lands
    // in the new memory.
    // Safety: a live MR; mapped memory of this process.
    let r = unsafe {
        (verbs.rereg_mr)(
            mr_dst,
            IBV_REREG_MR_CHANGE_TRANSLATION as c_int,
            std::ptr::null_mut(),
            moved.at(0).cast(),
            65536,
            0,
        )
    };
    assert_eq!(r, 0, "ibv_rereg_mr: errno {}", errno());
    // Safety: a live MR of the library, re-read after the call changed it.
    let after = unsafe { std::ptr::read_volatile(mr_dst) };
    let after = (after.lkey, after.rkey, after.addr);
    assert_eq!(after, (dst_lkey, dst_rkey, moved.at(0).cast::<c_void>()));
    wr.start();
    wr.id(50);
    wr.write(dst_rkey, moved.at(0) as u64);
    wr.sge(src_lkey, src.at(0), 4096);
    assert_eq!(wr.complete(), 0);
    assert_eq!(
        poll_ex(cq, 1),
        [(50, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 4096)],
        "only the last sequence was posted"
    );
    assert_eq!(moved.read(0, 4096), data);

    // Without remote write any more, the same WRITE is a remote access error.
    // Safety: a live MR.
    let r = unsafe {
        (verbs.rereg_mr)(
            mr_dst,
            IBV_REREG_MR_CHANGE_ACCESS as c_int,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            IBV_ACCESS_LOCAL_WRITE as c_int,
        )
    };
    assert_eq!(r, 0, "ibv_rereg_mr: errno {}", errno());
    wr.start();
    wr.id(51);
    wr.write(dst_rkey, moved.at(0) as u64);
    wr.sge(src_lkey, src.at(0), 8);
    assert_eq!(wr.complete(), 0);
    let c = poll_ex(cq, 1);
    assert_eq!((c[0].0, c[0].1), (51, IBV_WC_REM_ACCESS_ERR));
}
