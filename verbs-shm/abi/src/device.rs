//! Devices, contexts and what they report: `ibv_device`, `ibv_context` with its two function
//! tables (`ibv_context_ops` and the extended `verbs_context`), device and port attributes,
//! GIDs.

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::fmt;

use crate::*;

/// `union ibv_gid` (verbs.h 65–71): a 128-bit global identifier. For RoCE v2 over IPv4 it
/// is the IPv4-mapped IPv6 address `::ffff:a.b.c.d`.
///
/// Alignment is 8 because of the `__be64` view, which is why [`ibv_global_route`] and
/// [`ibv_gid_entry`] are 8-aligned.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    /// The 16 bytes in network order.
    pub raw: [u8; 16],
    /// The prefix/interface-id view, both big-endian.
    pub global: ibv_gid_global,
}

/// The `global` view of [`ibv_gid`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_gid_global {
    /// Subnet prefix (`__be64`).
    pub subnet_prefix: u64,
    /// Interface identifier (`__be64`).
    pub interface_id: u64,
}

impl ibv_gid {
    /// A GID from its 16 bytes in network order.
    pub const fn from_raw(raw: [u8; 16]) -> Self {
        Self { raw }
    }

    /// The 16 bytes in network order.
    pub const fn raw(&self) -> [u8; 16] {
        // Safety: both views are plain integers covering all 16 bytes, so every bit pattern
        // is a valid `[u8; 16]`.
        unsafe { self.raw }
    }
}

impl fmt::Debug for ibv_gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ibv_gid").field(&self.raw()).finish()
    }
}

impl PartialEq for ibv_gid {
    fn eq(&self, other: &Self) -> bool {
        self.raw() == other.raw()
    }
}

impl Eq for ibv_gid {}

/// `struct ibv_gid_entry` (verbs.h 79–85), filled by `ibv_query_gid_ex`/`ibv_query_gid_table`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ibv_gid_entry {
    /// The GID.
    pub gid: ibv_gid,
    /// Its index in the port's GID table.
    pub gid_index: u32,
    /// The port.
    pub port_num: u32,
    /// An [`ibv_gid_type`] value.
    pub gid_type: u32,
    /// The netdev's ifindex, 0 if none.
    pub ndev_ifindex: u32,
}

/// `struct _ibv_device_ops` (verbs.h 1930–1933): obsolete, never used, kept for layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct _ibv_device_ops {
    /// Unused.
    pub _dummy1:
        Option<unsafe extern "C" fn(device: *mut ibv_device, cmd_fd: c_int) -> *mut ibv_context>,
    /// Unused.
    pub _dummy2: Option<unsafe extern "C" fn(context: *mut ibv_context)>,
}

/// `struct ibv_device` (verbs.h 1940–1952): what `ibv_get_device_list` lists.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_device {
    /// Obsolete, zero.
    pub _ops: _ibv_device_ops,
    /// An [`ibv_node_type`]; `IBV_NODE_CA` for RoCE devices.
    pub node_type: ibv_node_type,
    /// An [`ibv_transport_type`]; `IBV_TRANSPORT_IB` for RoCE devices.
    pub transport_type: ibv_transport_type,
    /// The device name (NUL-terminated), e.g. "rxe0"; what `ibv_get_device_name` returns.
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    /// The uverbs device name, e.g. "uverbs0".
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    /// The infiniband_verbs class device path in sysfs.
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    /// The infiniband class device path in sysfs.
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// A function pointer slot of [`ibv_context_ops`] that libibverbs no longer uses (`void
/// *(*)(void)`); always NULL.
pub type ibv_compat_op = Option<unsafe extern "C" fn() -> *mut c_void>;

/// `struct ibv_context_ops` (verbs.h 1955–1996): the provider's fast-path functions that
/// inline verbs.h code calls directly (`ibv_post_send`, `ibv_poll_cq`, …). Every
/// `_compat_*` slot is unused and must stay NULL.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_context_ops {
    /// Unused.
    pub _compat_query_device: Option<
        unsafe extern "C" fn(context: *mut ibv_context, device_attr: *mut ibv_device_attr) -> c_int,
    >,
    /// Unused.
    pub _compat_query_port: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            port_num: u8,
            port_attr: *mut _compat_ibv_port_attr,
        ) -> c_int,
    >,
    /// Unused.
    pub _compat_alloc_pd: ibv_compat_op,
    /// Unused.
    pub _compat_dealloc_pd: ibv_compat_op,
    /// Unused.
    pub _compat_reg_mr: ibv_compat_op,
    /// Unused.
    pub _compat_rereg_mr: ibv_compat_op,
    /// Unused.
    pub _compat_dereg_mr: ibv_compat_op,
    /// `ibv_alloc_mw` (inline); NULL makes it fail with `EOPNOTSUPP`.
    pub alloc_mw: Option<unsafe extern "C" fn(pd: *mut ibv_pd, type_: ibv_mw_type) -> *mut ibv_mw>,
    /// `ibv_bind_mw` (inline).
    pub bind_mw: Option<
        unsafe extern "C" fn(qp: *mut ibv_qp, mw: *mut ibv_mw, mw_bind: *mut ibv_mw_bind) -> c_int,
    >,
    /// `ibv_dealloc_mw` (inline).
    pub dealloc_mw: Option<unsafe extern "C" fn(mw: *mut ibv_mw) -> c_int>,
    /// Unused.
    pub _compat_create_cq: ibv_compat_op,
    /// `ibv_poll_cq` (inline): returns the number of completions written to `wc`, or a
    /// negative value on error.
    pub poll_cq:
        Option<unsafe extern "C" fn(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int>,
    /// `ibv_req_notify_cq` (inline).
    pub req_notify_cq:
        Option<unsafe extern "C" fn(cq: *mut ibv_cq, solicited_only: c_int) -> c_int>,
    /// Unused.
    pub _compat_cq_event: ibv_compat_op,
    /// Unused.
    pub _compat_resize_cq: ibv_compat_op,
    /// Unused.
    pub _compat_destroy_cq: ibv_compat_op,
    /// Unused.
    pub _compat_create_srq: ibv_compat_op,
    /// Unused.
    pub _compat_modify_srq: ibv_compat_op,
    /// Unused.
    pub _compat_query_srq: ibv_compat_op,
    /// Unused.
    pub _compat_destroy_srq: ibv_compat_op,
    /// `ibv_post_srq_recv` (inline).
    pub post_srq_recv: Option<
        unsafe extern "C" fn(
            srq: *mut ibv_srq,
            recv_wr: *mut ibv_recv_wr,
            bad_recv_wr: *mut *mut ibv_recv_wr,
        ) -> c_int,
    >,
    /// Unused.
    pub _compat_create_qp: ibv_compat_op,
    /// Unused.
    pub _compat_query_qp: ibv_compat_op,
    /// Unused.
    pub _compat_modify_qp: ibv_compat_op,
    /// Unused.
    pub _compat_destroy_qp: ibv_compat_op,
    /// `ibv_post_send` (inline).
    pub post_send: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp,
            wr: *mut ibv_send_wr,
            bad_wr: *mut *mut ibv_send_wr,
        ) -> c_int,
    >,
    /// `ibv_post_recv` (inline).
    pub post_recv: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp,
            wr: *mut ibv_recv_wr,
            bad_wr: *mut *mut ibv_recv_wr,
        ) -> c_int,
    >,
    /// Unused.
    pub _compat_create_ah: ibv_compat_op,
    /// Unused.
    pub _compat_destroy_ah: ibv_compat_op,
    /// Unused.
    pub _compat_attach_mcast: ibv_compat_op,
    /// Unused.
    pub _compat_detach_mcast: ibv_compat_op,
    /// Unused.
    pub _compat_async_event: ibv_compat_op,
}

/// `struct ibv_context` (verbs.h 1998–2006): an open device.
///
/// A provider embeds it as the last field of a [`verbs_context`] and sets `abi_compat` to
/// [`__VERBS_ABI_IS_EXTENDED`]; inline verbs.h code then finds the extended table by
/// subtracting `offsetof(struct verbs_context, context)` (320).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_context {
    /// The device this context was opened on.
    pub device: *mut ibv_device,
    /// The fast-path function table.
    pub ops: ibv_context_ops,
    /// The command fd (for rdma-core: the uverbs char device).
    pub cmd_fd: c_int,
    /// The fd `ibv_get_async_event` reads; must be pollable.
    pub async_fd: c_int,
    /// How many completion vectors `ibv_create_cq` accepts.
    pub num_comp_vectors: c_int,
    /// Protects comp channel reference counts.
    pub mutex: pthread_mutex_t,
    /// [`__VERBS_ABI_IS_EXTENDED`] when embedded in a [`verbs_context`].
    pub abi_compat: *mut c_void,
}

/// `struct verbs_context` (verbs.h 2095–2171): the extended function table, placed
/// *before* the [`ibv_context`] it extends ("grows up": new ops are added at the front).
///
/// Inline verbs.h code uses an op only if `sz >= sizeof(verbs_context) - offsetof(op)` and
/// the pointer is not NULL, so a provider sets `sz` to `size_of::<verbs_context>()` (648)
/// and leaves unsupported ops NULL (the inline wrapper then returns `EOPNOTSUPP`).
#[repr(C)]
#[derive(Debug)]
pub struct verbs_context {
    /// The inline `ibv_query_port` macro: `port_attr_len` is the caller's
    /// `sizeof(struct ibv_port_attr)`.
    pub query_port: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            port_num: u8,
            port_attr: *mut ibv_port_attr,
            port_attr_len: usize,
        ) -> c_int,
    >,
    /// `ibv_advise_mr`.
    pub advise_mr: Option<
        unsafe extern "C" fn(
            pd: *mut ibv_pd,
            advice: ibv_advise_mr_advice,
            flags: u32,
            sg_list: *mut ibv_sge,
            num_sges: u32,
        ) -> c_int,
    >,
    /// `ibv_alloc_null_mr`.
    pub alloc_null_mr: Option<unsafe extern "C" fn(pd: *mut ibv_pd) -> *mut ibv_mr>,
    /// `ibv_read_counters`.
    pub read_counters: Option<
        unsafe extern "C" fn(
            counters: *mut ibv_counters,
            counters_value: *mut u64,
            ncounters: u32,
            flags: u32,
        ) -> c_int,
    >,
    /// `ibv_attach_counters_point_flow`.
    pub attach_counters_point_flow: Option<
        unsafe extern "C" fn(
            counters: *mut ibv_counters,
            attr: *mut ibv_counter_attach_attr,
            flow: *mut ibv_flow,
        ) -> c_int,
    >,
    /// `ibv_create_counters`.
    pub create_counters: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            init_attr: *mut ibv_counters_init_attr,
        ) -> *mut ibv_counters,
    >,
    /// `ibv_destroy_counters`.
    pub destroy_counters: Option<unsafe extern "C" fn(counters: *mut ibv_counters) -> c_int>,
    /// `ibv_reg_dm_mr`.
    pub reg_dm_mr: Option<
        unsafe extern "C" fn(
            pd: *mut ibv_pd,
            dm: *mut ibv_dm,
            dm_offset: u64,
            length: usize,
            access: c_uint,
        ) -> *mut ibv_mr,
    >,
    /// `ibv_alloc_dm`.
    pub alloc_dm: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            attr: *mut ibv_alloc_dm_attr,
        ) -> *mut ibv_dm,
    >,
    /// `ibv_free_dm`.
    pub free_dm: Option<unsafe extern "C" fn(dm: *mut ibv_dm) -> c_int>,
    /// `ibv_modify_flow_action_esp`.
    pub modify_flow_action_esp: Option<
        unsafe extern "C" fn(
            action: *mut ibv_flow_action,
            attr: *mut ibv_flow_action_esp_attr,
        ) -> c_int,
    >,
    /// `ibv_destroy_flow_action`.
    pub destroy_flow_action: Option<unsafe extern "C" fn(action: *mut ibv_flow_action) -> c_int>,
    /// `ibv_create_flow_action_esp`.
    pub create_flow_action_esp: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            attr: *mut ibv_flow_action_esp_attr,
        ) -> *mut ibv_flow_action,
    >,
    /// `ibv_modify_qp_rate_limit`.
    pub modify_qp_rate_limit:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp, attr: *mut ibv_qp_rate_limit_attr) -> c_int>,
    /// `ibv_alloc_parent_domain`.
    pub alloc_parent_domain: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            attr: *mut ibv_parent_domain_init_attr,
        ) -> *mut ibv_pd,
    >,
    /// `ibv_dealloc_td`.
    pub dealloc_td: Option<unsafe extern "C" fn(td: *mut ibv_td) -> c_int>,
    /// `ibv_alloc_td`.
    pub alloc_td: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            init_attr: *mut ibv_td_init_attr,
        ) -> *mut ibv_td,
    >,
    /// `ibv_modify_cq`.
    pub modify_cq:
        Option<unsafe extern "C" fn(cq: *mut ibv_cq, attr: *mut ibv_modify_cq_attr) -> c_int>,
    /// `ibv_post_srq_ops`.
    pub post_srq_ops: Option<
        unsafe extern "C" fn(
            srq: *mut ibv_srq,
            op: *mut ibv_ops_wr,
            bad_op: *mut *mut ibv_ops_wr,
        ) -> c_int,
    >,
    /// `ibv_destroy_rwq_ind_table`.
    pub destroy_rwq_ind_table:
        Option<unsafe extern "C" fn(rwq_ind_table: *mut ibv_rwq_ind_table) -> c_int>,
    /// `ibv_create_rwq_ind_table`.
    pub create_rwq_ind_table: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            init_attr: *mut ibv_rwq_ind_table_init_attr,
        ) -> *mut ibv_rwq_ind_table,
    >,
    /// `ibv_destroy_wq`.
    pub destroy_wq: Option<unsafe extern "C" fn(wq: *mut ibv_wq) -> c_int>,
    /// `ibv_modify_wq`.
    pub modify_wq:
        Option<unsafe extern "C" fn(wq: *mut ibv_wq, wq_attr: *mut ibv_wq_attr) -> c_int>,
    /// `ibv_create_wq`.
    pub create_wq: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            wq_init_attr: *mut ibv_wq_init_attr,
        ) -> *mut ibv_wq,
    >,
    /// `ibv_query_rt_values_ex`.
    pub query_rt_values: Option<
        unsafe extern "C" fn(context: *mut ibv_context, values: *mut ibv_values_ex) -> c_int,
    >,
    /// `ibv_create_cq_ex`.
    pub create_cq_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            init_attr: *mut ibv_cq_init_attr_ex,
        ) -> *mut ibv_cq_ex,
    >,
    /// libibverbs-private data (rdma-core's `struct verbs_ex_private`).
    pub r#priv: *mut verbs_ex_private,
    /// `ibv_query_device_ex`: `EOPNOTSUPP`/`ENOSYS` make the inline wrapper fall back to
    /// `ibv_query_device`.
    pub query_device_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            input: *const ibv_query_device_ex_input,
            attr: *mut ibv_device_attr_ex,
            attr_size: usize,
        ) -> c_int,
    >,
    /// `ibv_destroy_flow`.
    pub ibv_destroy_flow: Option<unsafe extern "C" fn(flow: *mut ibv_flow) -> c_int>,
    /// Unused placeholder.
    pub ABI_placeholder2: Option<unsafe extern "C" fn()>,
    /// `ibv_create_flow`.
    pub ibv_create_flow: Option<
        unsafe extern "C" fn(qp: *mut ibv_qp, flow_attr: *mut ibv_flow_attr) -> *mut ibv_flow,
    >,
    /// Unused placeholder.
    pub ABI_placeholder1: Option<unsafe extern "C" fn()>,
    /// `ibv_open_qp`.
    pub open_qp: Option<
        unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_qp_open_attr) -> *mut ibv_qp,
    >,
    /// `ibv_create_qp_ex` (unless `comp_mask` is exactly `IBV_QP_INIT_ATTR_PD`).
    pub create_qp_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            qp_init_attr_ex: *mut ibv_qp_init_attr_ex,
        ) -> *mut ibv_qp,
    >,
    /// `ibv_get_srq_num`.
    pub get_srq_num: Option<unsafe extern "C" fn(srq: *mut ibv_srq, srq_num: *mut u32) -> c_int>,
    /// `ibv_create_srq_ex` (unless the request is a basic SRQ).
    pub create_srq_ex: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            srq_init_attr_ex: *mut ibv_srq_init_attr_ex,
        ) -> *mut ibv_srq,
    >,
    /// `ibv_open_xrcd`.
    pub open_xrcd: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            xrcd_init_attr: *mut ibv_xrcd_init_attr,
        ) -> *mut ibv_xrcd,
    >,
    /// `ibv_close_xrcd` (called without a NULL check by the inline wrapper).
    pub close_xrcd: Option<unsafe extern "C" fn(xrcd: *mut ibv_xrcd) -> c_int>,
    /// Unused placeholder.
    pub _ABI_placeholder3: u64,
    /// The size of this structure as the provider knows it; must immediately precede
    /// `context`.
    pub sz: usize,
    /// The base context; must be the last field.
    pub context: ibv_context,
}

/// `struct ibv_device_attr` (verbs.h 182–223), answered by `ibv_query_device`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_device_attr {
    /// Firmware version string (NUL-terminated).
    pub fw_ver: [c_char; 64],
    /// Node GUID (`__be64`).
    pub node_guid: u64,
    /// System image GUID (`__be64`).
    pub sys_image_guid: u64,
    /// Largest registrable region in bytes.
    pub max_mr_size: u64,
    /// Supported page sizes (bit mask).
    pub page_size_cap: u64,
    /// IEEE vendor id; perftest picks its code path by it (0 = legacy `ibv_post_send`).
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Maximum QPs.
    pub max_qp: c_int,
    /// Maximum outstanding work requests per queue.
    pub max_qp_wr: c_int,
    /// [`ibv_device_cap_flags`] bits.
    pub device_cap_flags: c_uint,
    /// Maximum scatter/gather entries per work request.
    pub max_sge: c_int,
    /// Maximum SGEs for RDMA read.
    pub max_sge_rd: c_int,
    /// Maximum CQs.
    pub max_cq: c_int,
    /// Maximum entries per CQ.
    pub max_cqe: c_int,
    /// Maximum MRs.
    pub max_mr: c_int,
    /// Maximum PDs.
    pub max_pd: c_int,
    /// Maximum outstanding RDMA reads/atomics as target per QP (perftest needs > 0).
    pub max_qp_rd_atom: c_int,
    /// Maximum outstanding RDMA reads/atomics per EE context.
    pub max_ee_rd_atom: c_int,
    /// Maximum resources for incoming reads/atomics.
    pub max_res_rd_atom: c_int,
    /// Maximum outstanding RDMA reads/atomics as initiator per QP.
    pub max_qp_init_rd_atom: c_int,
    /// Maximum outstanding RDMA reads/atomics as initiator per EE context.
    pub max_ee_init_rd_atom: c_int,
    /// An [`ibv_atomic_cap`].
    pub atomic_cap: ibv_atomic_cap,
    /// Maximum EE contexts.
    pub max_ee: c_int,
    /// Maximum RDDs.
    pub max_rdd: c_int,
    /// Maximum memory windows.
    pub max_mw: c_int,
    /// Maximum raw IPv6 QPs.
    pub max_raw_ipv6_qp: c_int,
    /// Maximum raw Ethertype QPs.
    pub max_raw_ethy_qp: c_int,
    /// Maximum multicast groups.
    pub max_mcast_grp: c_int,
    /// Maximum QPs per multicast group.
    pub max_mcast_qp_attach: c_int,
    /// Maximum QP attachments over all groups.
    pub max_total_mcast_qp_attach: c_int,
    /// Maximum address handles.
    pub max_ah: c_int,
    /// Maximum FMRs.
    pub max_fmr: c_int,
    /// Maximum remaps per FMR.
    pub max_map_per_fmr: c_int,
    /// Maximum SRQs.
    pub max_srq: c_int,
    /// Maximum work requests per SRQ.
    pub max_srq_wr: c_int,
    /// Maximum SGEs per SRQ work request.
    pub max_srq_sge: c_int,
    /// P_Key table size.
    pub max_pkeys: u16,
    /// Local CA ACK delay.
    pub local_ca_ack_delay: u8,
    /// Number of ports.
    pub phys_port_cnt: u8,
}

/// `struct ibv_query_device_ex_input` (verbs.h 227–229).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_query_device_ex_input {
    /// Must be 0 (the inline wrapper returns `EINVAL` otherwise).
    pub comp_mask: u32,
}

/// The `per_transport_caps` member of [`ibv_odp_caps`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_odp_caps_per_transport {
    /// RC capabilities (`IBV_ODP_SUPPORT_*`).
    pub rc_odp_caps: u32,
    /// UC capabilities.
    pub uc_odp_caps: u32,
    /// UD capabilities.
    pub ud_odp_caps: u32,
}

/// `struct ibv_odp_caps` (verbs.h 240–247): on-demand paging capabilities.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_odp_caps {
    /// General capabilities.
    pub general_caps: u64,
    /// Per-transport capabilities.
    pub per_transport_caps: ibv_odp_caps_per_transport,
}

/// `struct ibv_tso_caps` (verbs.h 254–257).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_tso_caps {
    /// Maximum TSO payload.
    pub max_tso: u32,
    /// Bit mask of QP types (`1 << qp_type`).
    pub supported_qpts: u32,
}

/// `struct ibv_rss_caps` (verbs.h 285–291).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_rss_caps {
    /// Bit mask of QP types.
    pub supported_qpts: u32,
    /// Maximum indirection tables.
    pub max_rwq_indirection_tables: u32,
    /// Maximum indirection table size.
    pub max_rwq_indirection_table_size: u32,
    /// Supported hash fields.
    pub rx_hash_fields_mask: u64,
    /// Supported hash functions.
    pub rx_hash_function: u8,
}

/// `struct ibv_packet_pacing_caps` (verbs.h 293–297).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_packet_pacing_caps {
    /// Minimum rate limit in kbit/s.
    pub qp_rate_limit_min: u32,
    /// Maximum rate limit in kbit/s.
    pub qp_rate_limit_max: u32,
    /// Bit mask of QP types.
    pub supported_qpts: u32,
}

/// `struct ibv_tm_caps` (verbs.h 310–321): tag-matching capabilities.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_tm_caps {
    /// Maximum rendezvous header size.
    pub max_rndv_hdr_size: u32,
    /// Maximum tags.
    pub max_num_tags: u32,
    /// Capability flags.
    pub flags: u32,
    /// Maximum outstanding list operations.
    pub max_ops: u32,
    /// Maximum SGEs per tagged buffer.
    pub max_sge: u32,
}

/// `struct ibv_cq_moderation_caps` (verbs.h 323–326).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_cq_moderation_caps {
    /// Maximum completion count.
    pub max_cq_count: u16,
    /// Maximum period in microseconds.
    pub max_cq_period: u16,
}

/// `struct ibv_pci_atomic_caps` (verbs.h 338–342).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_pci_atomic_caps {
    /// Fetch-and-add operand sizes.
    pub fetch_add: u16,
    /// Swap operand sizes.
    pub swap: u16,
    /// Compare-and-swap operand sizes.
    pub compare_swap: u16,
}

/// `struct ibv_device_attr_ex` (verbs.h 344–362), answered by `ibv_query_device_ex`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_device_attr_ex {
    /// The legacy attributes.
    pub orig_attr: ibv_device_attr,
    /// Which extensions are valid.
    pub comp_mask: u32,
    /// On-demand paging.
    pub odp_caps: ibv_odp_caps,
    /// Completion timestamp mask.
    pub completion_timestamp_mask: u64,
    /// HCA core clock in kHz.
    pub hca_core_clock: u64,
    /// Extended device capability flags.
    pub device_cap_flags_ex: u64,
    /// TSO.
    pub tso_caps: ibv_tso_caps,
    /// RSS.
    pub rss_caps: ibv_rss_caps,
    /// Maximum receive WQs.
    pub max_wq_type_rq: u32,
    /// Packet pacing.
    pub packet_pacing_caps: ibv_packet_pacing_caps,
    /// Raw packet capabilities.
    pub raw_packet_caps: u32,
    /// Tag matching.
    pub tm_caps: ibv_tm_caps,
    /// CQ moderation.
    pub cq_mod_caps: ibv_cq_moderation_caps,
    /// Maximum device memory.
    pub max_dm_size: u64,
    /// PCI atomics.
    pub pci_atomic_caps: ibv_pci_atomic_caps,
    /// XRC on-demand paging.
    pub xrc_odp_caps: u32,
    /// Number of ports (beyond the `u8` of `orig_attr`).
    pub phys_port_cnt_ex: u32,
}

/// `struct ibv_port_attr` (verbs.h 424–447), answered by the inline `ibv_query_port`
/// through [`verbs_context::query_port`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_port_attr {
    /// An [`ibv_port_state`]; perftest requires `IBV_PORT_ACTIVE`.
    pub state: ibv_port_state,
    /// An [`ibv_mtu`].
    pub max_mtu: ibv_mtu,
    /// An [`ibv_mtu`]; perftest and the pingpongs use it as the path MTU.
    pub active_mtu: ibv_mtu,
    /// GID table length (≥ 1).
    pub gid_tbl_len: c_int,
    /// [`ibv_port_cap_flags`] bits.
    pub port_cap_flags: u32,
    /// Maximum message size.
    pub max_msg_sz: u32,
    /// Bad P_Key counter.
    pub bad_pkey_cntr: u32,
    /// Q_Key violation counter.
    pub qkey_viol_cntr: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// LID (0 on Ethernet).
    pub lid: u16,
    /// SM LID.
    pub sm_lid: u16,
    /// LID mask count.
    pub lmc: u8,
    /// Maximum VLs.
    pub max_vl_num: u8,
    /// SM service level.
    pub sm_sl: u8,
    /// Subnet timeout.
    pub subnet_timeout: u8,
    /// InitTypeReply.
    pub init_type_reply: u8,
    /// Active link width.
    pub active_width: u8,
    /// Active link speed.
    pub active_speed: u8,
    /// Physical port state.
    pub phys_state: u8,
    /// An [`ibv_link_layer`] value; `IBV_LINK_LAYER_ETHERNET` for RoCE.
    pub link_layer: u8,
    /// Flags (`IBV_QPF_GRH_REQUIRED`).
    pub flags: u8,
    /// `ibv_port_cap_flags2` bits. Not in [`_compat_ibv_port_attr`].
    pub port_cap_flags2: u16,
}

/// `struct _compat_ibv_port_attr` (libibverbs/verbs.c 197–219): what the exported
/// `ibv_query_port@IBVERBS_1.1` fills. It is [`ibv_port_attr`] without `port_cap_flags2`,
/// 48 bytes; the exported function must not write beyond it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct _compat_ibv_port_attr {
    /// As in [`ibv_port_attr`].
    pub state: ibv_port_state,
    /// As in [`ibv_port_attr`].
    pub max_mtu: ibv_mtu,
    /// As in [`ibv_port_attr`].
    pub active_mtu: ibv_mtu,
    /// As in [`ibv_port_attr`].
    pub gid_tbl_len: c_int,
    /// As in [`ibv_port_attr`].
    pub port_cap_flags: u32,
    /// As in [`ibv_port_attr`].
    pub max_msg_sz: u32,
    /// As in [`ibv_port_attr`].
    pub bad_pkey_cntr: u32,
    /// As in [`ibv_port_attr`].
    pub qkey_viol_cntr: u32,
    /// As in [`ibv_port_attr`].
    pub pkey_tbl_len: u16,
    /// As in [`ibv_port_attr`].
    pub lid: u16,
    /// As in [`ibv_port_attr`].
    pub sm_lid: u16,
    /// As in [`ibv_port_attr`].
    pub lmc: u8,
    /// As in [`ibv_port_attr`].
    pub max_vl_num: u8,
    /// As in [`ibv_port_attr`].
    pub sm_sl: u8,
    /// As in [`ibv_port_attr`].
    pub subnet_timeout: u8,
    /// As in [`ibv_port_attr`].
    pub init_type_reply: u8,
    /// As in [`ibv_port_attr`].
    pub active_width: u8,
    /// As in [`ibv_port_attr`].
    pub active_speed: u8,
    /// As in [`ibv_port_attr`].
    pub phys_state: u8,
    /// As in [`ibv_port_attr`].
    pub link_layer: u8,
    /// As in [`ibv_port_attr`].
    pub flags: u8,
}

zeroed_default!(
    ibv_gid,
    ibv_gid_entry,
    _ibv_device_ops,
    ibv_device,
    ibv_context_ops,
    ibv_context,
    verbs_context,
    ibv_device_attr,
    ibv_device_attr_ex,
);
