//! Contexts (the connection to a daemon), the device/port/GID/P_Key queries, and
//! asynchronous events.
//!
//! The device is presented as a RoCE v2 port, as rxe and RDMA NICs present theirs: node
//! type CA, transport IB, link layer Ethernet, one port, ACTIVE when the interface is up,
//! active MTU = the path MTU of the interface, GID index 0 = the interface's first address
//! as an IPv4-mapped (or IPv6) RoCE v2 GID in a table with empty entries to spare, one
//! P_Key (0xffff), LID 0, and rxe's `vendor_id` 0xffffff with part 0, which perftest does
//! not know, so it takes its generic verbs path (it switches to the `ibv_qp_ex` `wr_*`
//! API and vendor-specific direct verbs only for vendors it knows).

use std::cell::UnsafeCell;
use std::ffi::{CString, c_char, c_int, c_uint, c_void};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use verbs_abi::*;
use verbs_shm::client::{self, DeviceAttr, PortAttr};
use verbs_shm::contract;

use super::device;
use super::objects::{Context, Targets, find, lock, public, publish, retire};
use crate::ffi::{Errno, Verb};
use crate::ops;

/// The errno a verbs call reports for a verbs-shm error (the daemon's own errno, or the
/// one a provider returns for the condition). With `XROCE_IBVERBS_DEBUG=1` a refusal of the
/// daemon is printed on stderr with its reason ([`debug`](super::debug)).
pub(crate) fn errno(error: &client::Error) -> Errno {
    super::debug::report(None, error);
    Errno(error.errno())
}

/// `ibv_open_device`: connects to the device's daemon. A daemon whose access policy leaves
/// the user out refuses (`EACCES`, as `open` of a kernel device's node the user may not
/// open), and its reason is shown on stderr.
pub(crate) fn open_device(device: *mut ibv_device) -> Verb<*mut ibv_context> {
    let name = device::name_string(device)?;
    let client = client::Context::open(&name).map_err(|e| {
        super::refusal::show("ibv_open_device", &name, &e);
        errno(&e)
    })?;
    let async_fd = client.async_fd().as_raw_fd();
    // The daemon creates the event socket pair non-blocking; verbs' async_fd blocks until
    // the application asks otherwise (our end is our own file description).
    set_nonblocking(async_fd, false)?;
    // Resolved now, from the namespace the application opened the device in (the
    // daemon's): a context may be used from threads in other namespaces afterwards.
    let ifindex = client.query_port().map_or(0, |p| self::ifindex(&p.netdev));
    let mut vctx = verbs_context {
        query_port: Some(ops::query_port),
        query_device_ex: Some(ops::query_device_ex),
        create_cq_ex: Some(ops::create_cq_ex),
        create_qp_ex: Some(ops::create_qp_ex),
        sz: size_of::<verbs_context>(),
        ..verbs_context::default()
    };
    vctx.context.device = device;
    vctx.context.ops = ops::context_ops();
    // The command descriptor is the control connection to the daemon, as the uverbs file
    // is a kernel provider's (callers that duplicate it get a real descriptor);
    // `ibv_import_device` is not supported.
    vctx.context.cmd_fd = client.control_fd();
    vctx.context.async_fd = async_fd;
    vctx.context.num_comp_vectors = 1;
    vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED as *mut c_void;
    let ctx = publish(Context {
        vctx: UnsafeCell::new(vctx),
        client,
        ifindex,
        targets: std::sync::Mutex::new(Targets::default()),
    });
    Ok(ctx.ibv())
}

/// `ibv_close_device`. Objects still open keep the daemon connection alive until they
/// are destroyed (rdma-core leaves them to the kernel; using them afterwards is the
/// application's bug either way).
pub(crate) fn close_device(context: *mut ibv_context) -> Verb<()> {
    retire::<Context>(context).map(drop)
}

/// Sets or clears `O_NONBLOCK` on `fd`.
pub(crate) fn set_nonblocking(fd: c_int, on: bool) -> Verb<()> {
    // Safety: fcntl with F_GETFL/F_SETFL has no memory arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(Errno::of(&std::io::Error::last_os_error()));
    }
    let wanted = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // Safety: as above.
    if wanted != flags && unsafe { libc::fcntl(fd, libc::F_SETFL, wanted) } < 0 {
        return Err(Errno::of(&std::io::Error::last_os_error()));
    }
    Ok(())
}

/// The context behind a pointer of the slow path.
pub(crate) fn context(context: *const ibv_context) -> Verb<Arc<Context>> {
    find::<Context>(context)
}

fn device_attr(ctx: &Context) -> Verb<DeviceAttr> {
    ctx.client.query_device().map_err(|e| errno(&e))
}

fn port_attr(ctx: &Context, port_num: u32) -> Verb<PortAttr> {
    if port_num != 1 {
        return Err(Errno::EINVAL);
    }
    ctx.client.query_port().map_err(|e| errno(&e))
}

fn c_string<const N: usize>(text: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (o, b) in out.iter_mut().zip(text.bytes().take(N - 1)) {
        *o = b as c_char;
    }
    out
}

fn clamp(v: u32) -> c_int {
    c_int::try_from(v).unwrap_or(c_int::MAX)
}

/// The daemon's device attributes as `ibv_device_attr`.
fn to_device_attr(d: &DeviceAttr) -> ibv_device_attr {
    ibv_device_attr {
        fw_ver: c_string(&d.fw_ver),
        node_guid: d.node_guid.to_be(),
        sys_image_guid: d.sys_image_guid.to_be(),
        max_mr_size: d.max_mr_size,
        page_size_cap: d.page_size_cap,
        vendor_id: d.vendor_id,
        vendor_part_id: d.vendor_part_id,
        hw_ver: d.hw_ver,
        max_qp: clamp(d.max_qp),
        max_qp_wr: clamp(d.max_qp_wr),
        device_cap_flags: d.device_cap_flags,
        max_sge: clamp(d.max_sge),
        max_sge_rd: clamp(d.max_sge),
        max_cq: clamp(d.max_cq),
        max_cqe: clamp(d.max_cqe),
        max_mr: clamp(d.max_mr),
        max_pd: clamp(d.max_pd),
        max_qp_rd_atom: clamp(d.max_qp_rd_atom),
        max_res_rd_atom: clamp(d.max_res_rd_atom),
        max_qp_init_rd_atom: clamp(d.max_qp_init_rd_atom),
        atomic_cap: d.atomic_cap,
        max_ah: clamp(d.max_ah),
        max_srq: clamp(d.max_srq),
        max_srq_wr: clamp(d.max_srq_wr),
        max_srq_sge: clamp(d.max_srq_sge),
        max_pkeys: d.max_pkeys,
        max_mcast_grp: clamp(contract::MAX_MCAST_GRP),
        max_mcast_qp_attach: clamp(contract::MAX_MCAST_QP_ATTACH),
        max_total_mcast_qp_attach: clamp(contract::MAX_TOTAL_MCAST_QP_ATTACH),
        // rxe reports 15 (about 134 ms), so do we.
        local_ca_ack_delay: 15,
        phys_port_cnt: 1,
        ..ibv_device_attr::default()
    }
}

/// The daemon's port attributes as `ibv_port_attr`.
fn to_port_attr(p: &PortAttr) -> ibv_port_attr {
    ibv_port_attr {
        state: p.state,
        max_mtu: p.max_mtu,
        active_mtu: p.active_mtu,
        gid_tbl_len: clamp(p.gid_tbl_len),
        // rxe advertises connection management support and nothing else; so do we.
        port_cap_flags: IBV_PORT_CM_SUP,
        max_msg_sz: p.max_msg_sz,
        pkey_tbl_len: p.pkey_tbl_len,
        max_vl_num: 1,
        active_width: p.active_width,
        active_speed: p.active_speed,
        phys_state: p.phys_state,
        link_layer: IBV_LINK_LAYER_ETHERNET as u8,
        ..ibv_port_attr::default()
    }
}

/// `ibv_query_device`.
///
/// # Safety
///
/// `attr` is NULL or valid for writing an `ibv_device_attr`.
pub(crate) unsafe fn query_device(
    context: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> Verb<()> {
    let ctx = self::context(context)?;
    if attr.is_null() {
        return Err(Errno::EINVAL);
    }
    let value = to_device_attr(&device_attr(&ctx)?);
    // Safety: checked non-NULL; the caller guarantees it is writable.
    unsafe { attr.write(value) };
    Ok(())
}

/// `verbs_context::query_device_ex` (behind the inline `ibv_query_device_ex`): the
/// extended attributes say nothing beyond the legacy ones (no ODP, TSO, RSS, tag matching,
/// timestamps).
///
/// # Safety
///
/// `input` is NULL or readable; `attr` is NULL or valid for writing `attr_size` bytes.
pub(crate) unsafe fn query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> Verb<()> {
    let ctx = self::context(context)?;
    // Safety: NULL or readable, per the caller.
    if unsafe { input.as_ref() }.is_some_and(|i| i.comp_mask != 0) {
        return Err(Errno::EINVAL);
    }
    if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
        return Err(Errno::EINVAL);
    }
    let legacy = to_device_attr(&device_attr(&ctx)?);
    let value = ibv_device_attr_ex {
        orig_attr: legacy,
        device_cap_flags_ex: u64::from(legacy.device_cap_flags),
        phys_port_cnt_ex: 1,
        ..ibv_device_attr_ex::default()
    };
    // Safety: `attr` is valid for `attr_size` bytes (caller).
    unsafe { write_sized(attr.cast(), attr_size, &value) };
    Ok(())
}

/// `verbs_context::query_port` (behind the inline `ibv_query_port` of every application
/// built against a current verbs.h): fills `port_attr_len` bytes, the caller's
/// `sizeof(struct ibv_port_attr)`, which an older application has smaller.
///
/// # Safety
///
/// `attr` is NULL or valid for writing `port_attr_len` bytes.
pub(crate) unsafe fn query_port_ex(
    context: *mut ibv_context,
    port_num: u8,
    attr: *mut ibv_port_attr,
    port_attr_len: usize,
) -> Verb<()> {
    let ctx = self::context(context)?;
    if attr.is_null() {
        return Err(Errno::EINVAL);
    }
    let value = to_port_attr(&port_attr(&ctx, u32::from(port_num))?);
    // Safety: `attr` is valid for `port_attr_len` bytes (caller).
    unsafe { write_sized(attr.cast(), port_attr_len, &value) };
    Ok(())
}

/// Writes `value`, a plain C structure, into the caller's `len`-byte version of it:
/// truncated when the caller's is older (smaller), zero-extended when it is newer.
///
/// # Safety
///
/// `dst` is valid for writing `len` bytes.
unsafe fn write_sized<T: Copy>(dst: *mut u8, len: usize, value: &T) {
    let known = len.min(size_of::<T>());
    // Safety: `known` bytes of a local value into `known <= len` writable bytes.
    unsafe { std::ptr::copy_nonoverlapping((value as *const T).cast::<u8>(), dst, known) };
    // Safety: `known <= len`, so the rest lies inside the caller's bytes.
    let rest = unsafe { dst.add(known) };
    // Safety: `len - known` writable bytes from `rest`.
    unsafe { std::ptr::write_bytes(rest, 0, len - known) };
}

/// `ibv_query_port@IBVERBS_1.1`: the 48-byte `_compat_ibv_port_attr`, nothing beyond.
///
/// # Safety
///
/// `attr` is NULL or valid for writing a `_compat_ibv_port_attr`.
pub(crate) unsafe fn query_port(
    context: *mut ibv_context,
    port_num: u8,
    attr: *mut _compat_ibv_port_attr,
) -> Verb<()> {
    // Safety: a `_compat_ibv_port_attr` is the first 48 bytes of an `ibv_port_attr`;
    // `query_port_ex` writes exactly that many.
    unsafe {
        query_port_ex(
            context,
            port_num,
            attr.cast(),
            size_of::<_compat_ibv_port_attr>(),
        )
    }
}

/// The GID at `index`: `None` for an empty entry inside the table, `EINVAL` outside it.
fn gid_at(port: &PortAttr, index: u32) -> Verb<Option<[u8; 16]>> {
    if index >= port.gid_tbl_len {
        return Err(Errno::EINVAL);
    }
    Ok(port
        .gids
        .get(index as usize)
        .copied()
        .filter(|g| *g != [0; 16]))
}

/// `ibv_query_gid`: an empty entry inside the table answers a zero GID, as rdma-core.
///
/// # Safety
///
/// `gid` is NULL or valid for writing an `ibv_gid`.
pub(crate) unsafe fn query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> Verb<c_int> {
    let ctx = self::context(context)?;
    let index = u32::try_from(index).map_err(|_| Errno::EINVAL)?;
    if gid.is_null() {
        return Err(Errno::EINVAL);
    }
    let port = port_attr(&ctx, u32::from(port_num))?;
    let raw = gid_at(&port, index)?.unwrap_or([0; 16]);
    // Safety: checked non-NULL; writable per the caller.
    unsafe { gid.write(ibv_gid::from_raw(raw)) };
    Ok(0)
}

fn ifindex(netdev: &str) -> u32 {
    let Ok(name) = CString::new(netdev) else {
        return 0;
    };
    // Safety: `name` is a NUL-terminated string that outlives the call.
    unsafe { libc::if_nametoindex(name.as_ptr()) }
}

fn gid_entry(ctx: &Context, index: u32, gid: [u8; 16]) -> ibv_gid_entry {
    ibv_gid_entry {
        gid: ibv_gid::from_raw(gid),
        gid_index: index,
        port_num: 1,
        gid_type: IBV_GID_TYPE_ROCE_V2,
        ndev_ifindex: ctx.ifindex,
    }
}

/// `_ibv_query_gid_ex`: `ENODATA` for an empty entry.
///
/// # Safety
///
/// `entry` is NULL or valid for writing `entry_size` bytes.
pub(crate) unsafe fn query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> Verb<()> {
    let ctx = self::context(context)?;
    if flags != 0 || entry.is_null() || entry_size < size_of::<ibv_gid_entry>() {
        return Err(Errno::EINVAL);
    }
    let port = port_attr(&ctx, port_num)?;
    let gid = gid_at(&port, gid_index)?.ok_or(Errno(libc::ENODATA))?;
    // Safety: checked non-NULL and at least an `ibv_gid_entry` long; writable per the
    // caller.
    unsafe { entry.write(gid_entry(&ctx, gid_index, gid)) };
    Ok(())
}

/// `_ibv_query_gid_table`: every valid entry, `entry_size` bytes apart.
///
/// # Safety
///
/// `entries` is NULL or valid for writing `max_entries * entry_size` bytes.
pub(crate) unsafe fn query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> Verb<isize> {
    let ctx = self::context(context)?;
    if flags != 0 || entry_size < size_of::<ibv_gid_entry>() {
        return Err(Errno::EINVAL);
    }
    let port = port_attr(&ctx, 1)?;
    let valid: Vec<(u32, [u8; 16])> = (0..port.gid_tbl_len)
        .filter_map(|i| gid_at(&port, i).ok().flatten().map(|g| (i, g)))
        .collect();
    if valid.len() > max_entries || (entries.is_null() && !valid.is_empty()) {
        return Err(Errno::EINVAL);
    }
    for (n, (index, gid)) in valid.iter().enumerate() {
        let value = gid_entry(&ctx, *index, *gid);
        // Safety: `n < max_entries`, so the entry lies inside the caller's array; entries
        // are `entry_size` bytes apart (a newer caller's entry is larger) and may not be
        // aligned for ours.
        let slot = unsafe { entries.cast::<u8>().add(n * entry_size) };
        // Safety: at least an `ibv_gid_entry` of the caller's array from `slot`.
        unsafe { slot.cast::<ibv_gid_entry>().write_unaligned(value) };
    }
    isize::try_from(valid.len()).map_err(|_| Errno::EINVAL)
}

/// `ibv_query_gid_type` (private; `ibv_devinfo -v`): every GID is RoCE v2, which this
/// older enumeration calls `IBV_GID_TYPE_SYSFS_ROCE_V2`. An empty entry answers
/// `IBV_GID_TYPE_SYSFS_IB_ROCE_V1` and success, as rdma-core v44 does ("preserve API
/// behavior for empty GID"), so `ibv_devinfo -v` walks the whole table.
///
/// # Safety
///
/// `gid_type` is NULL or valid for writing.
pub(crate) unsafe fn query_gid_type(
    context: *mut ibv_context,
    port_num: u8,
    index: c_uint,
    gid_type: *mut ibv_gid_type_sysfs,
) -> Verb<c_int> {
    let ctx = self::context(context)?;
    if gid_type.is_null() {
        return Err(Errno::EINVAL);
    }
    let port = port_attr(&ctx, u32::from(port_num))?;
    let value = match gid_at(&port, index)? {
        Some(_) => IBV_GID_TYPE_SYSFS_ROCE_V2,
        None => IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
    };
    // Safety: checked non-NULL; writable per the caller.
    unsafe { gid_type.write(value) };
    Ok(0)
}

/// The default P_Key, full membership (RoCE has exactly this one).
const DEFAULT_PKEY: u16 = 0xffff;

/// `ibv_query_pkey`: index 0 is 0xffff; `pkey` is big-endian (0xffff either way).
///
/// # Safety
///
/// `pkey` is NULL or valid for writing a `u16`.
pub(crate) unsafe fn query_pkey(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> Verb<c_int> {
    let ctx = self::context(context)?;
    let port = port_attr(&ctx, u32::from(port_num))?;
    if pkey.is_null() || index < 0 || index >= c_int::from(port.pkey_tbl_len) {
        return Err(Errno::EINVAL);
    }
    // Safety: checked non-NULL; writable per the caller.
    unsafe { pkey.write(DEFAULT_PKEY.to_be()) };
    Ok(0)
}

/// `ibv_get_pkey_index`: 0 for the default P_Key, `ENOENT` for any other.
pub(crate) fn pkey_index(context: *mut ibv_context, port_num: u8, pkey: u16) -> Verb<c_int> {
    let ctx = self::context(context)?;
    port_attr(&ctx, u32::from(port_num))?;
    if u16::from_be(pkey) == DEFAULT_PKEY {
        Ok(0)
    } else {
        Err(Errno(libc::ENOENT))
    }
}

/// The element of an event record, by what the event is about.
enum Element {
    Cq,
    Qp,
    Srq,
    Port,
    Device,
}

fn element_of(event_type: u32) -> Option<Element> {
    Some(match event_type {
        IBV_EVENT_CQ_ERR => Element::Cq,
        IBV_EVENT_QP_FATAL
        | IBV_EVENT_QP_REQ_ERR
        | IBV_EVENT_QP_ACCESS_ERR
        | IBV_EVENT_COMM_EST
        | IBV_EVENT_SQ_DRAINED
        | IBV_EVENT_PATH_MIG
        | IBV_EVENT_PATH_MIG_ERR
        | IBV_EVENT_QP_LAST_WQE_REACHED => Element::Qp,
        IBV_EVENT_SRQ_ERR | IBV_EVENT_SRQ_LIMIT_REACHED => Element::Srq,
        IBV_EVENT_PORT_ACTIVE
        | IBV_EVENT_PORT_ERR
        | IBV_EVENT_LID_CHANGE
        | IBV_EVENT_PKEY_CHANGE
        | IBV_EVENT_SM_CHANGE
        | IBV_EVENT_CLIENT_REREGISTER
        | IBV_EVENT_GID_CHANGE => Element::Port,
        IBV_EVENT_DEVICE_FATAL => Element::Device,
        _ => return None,
    })
}

/// `ibv_get_async_event`: the next event the daemon raised for this context. Blocks
/// unless the application made `async_fd` non-blocking (then `EAGAIN`). Events about
/// objects already destroyed are skipped.
///
/// # Safety
///
/// `event` is NULL or valid for writing an `ibv_async_event`.
pub(crate) unsafe fn get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event,
) -> Verb<c_int> {
    let ctx = self::context(context)?;
    if event.is_null() {
        return Err(Errno::EINVAL);
    }
    let fd = ctx.client.async_fd().as_raw_fd();
    loop {
        let mut record = [0u8; size_of::<client::EventRecord>()];
        // Safety: reads into a local buffer of exactly its length.
        let n = unsafe { libc::read(fd, record.as_mut_ptr().cast(), record.len()) };
        if n < 0 {
            return Err(Errno::of(&std::io::Error::last_os_error()));
        }
        if n == 0 {
            // The daemon went away: what rdma-core reports for a disassociated device.
            return Err(Errno(libc::EIO));
        }
        if n as usize != record.len() {
            continue;
        }
        let event_type = u32::from_ne_bytes([record[0], record[1], record[2], record[3]]);
        let handle = u32::from_ne_bytes([record[4], record[5], record[6], record[7]]);
        let mut out = ibv_async_event {
            event_type,
            ..ibv_async_event::default()
        };
        let targets = lock(&ctx.targets);
        let found = match element_of(event_type) {
            Some(Element::Cq) => targets.cqs.get(&handle).map(|cq| {
                cq.async_events.report();
                out.element.cq = public(cq);
            }),
            Some(Element::Qp) => targets.qps.get(&handle).map(|qp| {
                qp.events.report();
                out.element.qp = public(qp);
            }),
            Some(Element::Srq) => targets.srqs.get(&handle).map(|srq| {
                srq.events.report();
                out.element.srq = public(srq);
            }),
            Some(Element::Port) => {
                out.element.port_num = c_int::try_from(handle).unwrap_or(1);
                Some(())
            }
            Some(Element::Device) => Some(()),
            None => None,
        };
        drop(targets);
        if found.is_some() {
            // Safety: checked non-NULL; writable per the caller.
            unsafe { event.write(out) };
            return Ok(0);
        }
    }
}

/// `ibv_ack_async_event`: acknowledges one event from [`get_async_event`].
///
/// # Safety
///
/// `event` is NULL or an event filled by `ibv_get_async_event`.
pub(crate) unsafe fn ack_async_event(event: *mut ibv_async_event) -> Verb<()> {
    // Safety: NULL or readable, per the caller.
    let Some(event) = (unsafe { event.as_ref() }) else {
        return Err(Errno::EINVAL);
    };
    let element = event.element;
    // Reading a member of the element union (below): every member is a pointer or an int,
    // so any bits are a valid value of each; which one is meant follows from the type.
    match element_of(event.event_type) {
        Some(Element::Cq) => {
            // Safety: see above.
            let cq = find::<super::objects::Cq>(unsafe { element.cq })?;
            let total = cq.async_events.ack(1);
            // Safety: the CQ is live (found); rdma-core updates this field the same way.
            unsafe { (*super::objects::raw(&cq.ibv)).async_events_completed = total };
        }
        Some(Element::Qp) => {
            // Safety: see above.
            let qp = find::<super::objects::Qp>(unsafe { element.qp })?;
            let total = qp.events.ack(1);
            // Safety: as for the CQ.
            unsafe { (*super::objects::raw(&qp.ibv)).qp_base.events_completed = total };
        }
        Some(Element::Srq) => {
            // Safety: see above.
            let srq = find::<super::objects::Srq>(unsafe { element.srq })?;
            let total = srq.events.ack(1);
            // Safety: as for the CQ.
            unsafe { (*super::objects::raw(&srq.ibv)).events_completed = total };
        }
        Some(Element::Port) | Some(Element::Device) | None => {}
    }
    Ok(())
}
