//! The attribute structures applications fill to create, modify and query objects:
//! address vectors, queue capacities, QP/SRQ/CQ creation and modification attributes.

use core::ffi::{c_int, c_void};

use crate::*;

/// `struct ibv_alloc_dm_attr` (verbs.h 161–165).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_alloc_dm_attr {
    /// Length in bytes.
    pub length: usize,
    /// Required alignment (log2).
    pub log_align_req: u32,
    /// Which extensions are valid.
    pub comp_mask: u32,
}

/// `struct ibv_td_init_attr` (verbs.h 632–634).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_td_init_attr {
    /// Must be 0.
    pub comp_mask: u32,
}

/// `struct ibv_xrcd_init_attr` (verbs.h 646–650).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_xrcd_init_attr {
    /// [`ibv_xrcd_init_attr_mask`] bits.
    pub comp_mask: u32,
    /// A file identifying the domain, or -1.
    pub fd: c_int,
    /// `O_CREAT`/`O_EXCL`.
    pub oflags: c_int,
}

/// `struct ibv_mw_bind_info` (verbs.h 620–625).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_mw_bind_info {
    /// The MR the window is bound to.
    pub mr: *mut ibv_mr,
    /// Start address.
    pub addr: u64,
    /// Length.
    pub length: u64,
    /// [`ibv_access_flags`] bits.
    pub mw_access_flags: u32,
}

/// `struct ibv_global_route` (verbs.h 686–692): the GRH part of an address vector. On RoCE
/// every address vector is global: `dgid` is the peer's GID.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_global_route {
    /// Destination GID.
    pub dgid: ibv_gid,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Index of the source GID in the local port's table.
    pub sgid_index: u8,
    /// Hop limit (IPv4 TTL).
    pub hop_limit: u8,
    /// Traffic class (IPv4 TOS).
    pub traffic_class: u8,
}

/// `struct ibv_grh` (verbs.h 694–701): the 40-byte GRH a UD receive buffer starts with.
/// For RoCE v2 over IPv4 the last 20 bytes hold the IPv4 header instead.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_grh {
    /// Version, traffic class and flow label (`__be32`).
    pub version_tclass_flow: u32,
    /// Payload length (`__be16`).
    pub paylen: u16,
    /// Next header.
    pub next_hdr: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source GID.
    pub sgid: ibv_gid,
    /// Destination GID.
    pub dgid: ibv_gid,
}

/// `struct ibv_ah_attr` (verbs.h 757–765): an address vector.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_ah_attr {
    /// Global route (used when `is_global` is 1).
    pub grh: ibv_global_route,
    /// Destination LID (0 on Ethernet).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub src_path_bits: u8,
    /// An [`ibv_rate`].
    pub static_rate: u8,
    /// 1 if `grh` is valid (always on RoCE).
    pub is_global: u8,
    /// Local port.
    pub port_num: u8,
}

/// `struct ibv_srq_attr` (verbs.h 772–776).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_srq_attr {
    /// Maximum outstanding work requests.
    pub max_wr: u32,
    /// Maximum SGEs per work request.
    pub max_sge: u32,
    /// Limit event threshold.
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr` (verbs.h 778–781).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_srq_init_attr {
    /// The application's cookie.
    pub srq_context: *mut c_void,
    /// Requested capacities (written back with the real ones).
    pub attr: ibv_srq_attr,
}

/// `struct ibv_tm_cap` (verbs.h 798–801).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_tm_cap {
    /// Maximum tags.
    pub max_num_tags: u32,
    /// Maximum outstanding list operations.
    pub max_ops: u32,
}

/// `struct ibv_srq_init_attr_ex` (verbs.h 803–813). Its first two fields are an
/// [`ibv_srq_init_attr`], which the inline `ibv_create_srq_ex` relies on.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_srq_init_attr_ex {
    /// The application's cookie.
    pub srq_context: *mut c_void,
    /// Requested capacities.
    pub attr: ibv_srq_attr,
    /// [`ibv_srq_init_attr_mask`] bits.
    pub comp_mask: u32,
    /// An [`ibv_srq_type`].
    pub srq_type: ibv_srq_type,
    /// The protection domain.
    pub pd: *mut ibv_pd,
    /// The XRC domain.
    pub xrcd: *mut ibv_xrcd,
    /// The CQ (XRC).
    pub cq: *mut ibv_cq,
    /// Tag matching.
    pub tm_cap: ibv_tm_cap,
}

/// `struct ibv_wq_init_attr` (verbs.h 832–841).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_wq_init_attr {
    /// The application's cookie.
    pub wq_context: *mut c_void,
    /// An [`ibv_wq_type`].
    pub wq_type: ibv_wq_type,
    /// Maximum work requests.
    pub max_wr: u32,
    /// Maximum SGEs.
    pub max_sge: u32,
    /// The protection domain.
    pub pd: *mut ibv_pd,
    /// The CQ.
    pub cq: *mut ibv_cq,
    /// Which extensions are valid.
    pub comp_mask: u32,
    /// Creation flags.
    pub create_flags: u32,
}

/// `struct ibv_wq_attr` (verbs.h 857–866).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_wq_attr {
    /// Which fields are valid.
    pub attr_mask: u32,
    /// Target [`ibv_wq_state`].
    pub wq_state: ibv_wq_state,
    /// Assumed current [`ibv_wq_state`].
    pub curr_wq_state: ibv_wq_state,
    /// Flags.
    pub flags: u32,
    /// Which flags to change.
    pub flags_mask: u32,
}

/// `struct ibv_rwq_ind_table_init_attr` (verbs.h 889–894).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_rwq_ind_table_init_attr {
    /// Table size (log2).
    pub log_ind_tbl_size: u32,
    /// The receive WQs.
    pub ind_tbl: *mut *mut ibv_wq,
    /// Which extensions are valid.
    pub comp_mask: u32,
}

/// `struct ibv_qp_cap` (verbs.h 906–912): queue capacities, requested at creation and
/// written back with the real values.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_qp_cap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Largest `IBV_SEND_INLINE` payload.
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr` (verbs.h 914–922).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_qp_init_attr {
    /// The application's cookie.
    pub qp_context: *mut c_void,
    /// The send CQ.
    pub send_cq: *mut ibv_cq,
    /// The receive CQ.
    pub recv_cq: *mut ibv_cq,
    /// The SRQ, or NULL.
    pub srq: *mut ibv_srq,
    /// Requested capacities (written back).
    pub cap: ibv_qp_cap,
    /// An [`ibv_qp_type`].
    pub qp_type: ibv_qp_type,
    /// Non-zero: every send request generates a completion.
    pub sq_sig_all: c_int,
}

/// `struct ibv_rx_hash_conf` (verbs.h 957–964).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_rx_hash_conf {
    /// The hash function.
    pub rx_hash_function: u8,
    /// Key length.
    pub rx_hash_key_len: u8,
    /// The key.
    pub rx_hash_key: *mut u8,
    /// Hashed fields.
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex` (verbs.h 966–985). Its first 60 bytes are an
/// [`ibv_qp_init_attr`], which the inline `ibv_create_qp_ex` relies on.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_qp_init_attr_ex {
    /// The application's cookie.
    pub qp_context: *mut c_void,
    /// The send CQ.
    pub send_cq: *mut ibv_cq,
    /// The receive CQ.
    pub recv_cq: *mut ibv_cq,
    /// The SRQ, or NULL.
    pub srq: *mut ibv_srq,
    /// Requested capacities (written back).
    pub cap: ibv_qp_cap,
    /// An [`ibv_qp_type`].
    pub qp_type: ibv_qp_type,
    /// Non-zero: every send request generates a completion.
    pub sq_sig_all: c_int,
    /// [`ibv_qp_init_attr_mask`] bits.
    pub comp_mask: u32,
    /// The protection domain.
    pub pd: *mut ibv_pd,
    /// The XRC domain.
    pub xrcd: *mut ibv_xrcd,
    /// [`ibv_qp_create_flags`] bits.
    pub create_flags: u32,
    /// Maximum TSO header.
    pub max_tso_header: u16,
    /// Receive WQ indirection table.
    pub rwq_ind_tbl: *mut ibv_rwq_ind_table,
    /// RSS configuration.
    pub rx_hash_conf: ibv_rx_hash_conf,
    /// Source QPN (with `IBV_QP_CREATE_SOURCE_QPN`).
    pub source_qpn: u32,
    /// [`ibv_qp_create_send_ops_flags`] bits.
    pub send_ops_flags: u64,
}

/// `struct ibv_qp_open_attr` (verbs.h 995–1001).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_qp_open_attr {
    /// [`ibv_qp_open_attr_mask`] bits.
    pub comp_mask: u32,
    /// QP number.
    pub qp_num: u32,
    /// The XRC domain.
    pub xrcd: *mut ibv_xrcd,
    /// The application's cookie.
    pub qp_context: *mut c_void,
    /// An [`ibv_qp_type`].
    pub qp_type: ibv_qp_type,
}

/// `struct ibv_qp_attr` (verbs.h 1052–1079): what `ibv_modify_qp` sets and `ibv_query_qp`
/// reports, field by field as [`ibv_qp_attr_mask`] says.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_qp_attr {
    /// Target [`ibv_qp_state`].
    pub qp_state: ibv_qp_state,
    /// Assumed current [`ibv_qp_state`].
    pub cur_qp_state: ibv_qp_state,
    /// Path MTU (an [`ibv_mtu`]).
    pub path_mtu: ibv_mtu,
    /// An [`ibv_mig_state`].
    pub path_mig_state: ibv_mig_state,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Receive queue PSN (24 bits).
    pub rq_psn: u32,
    /// Send queue PSN (24 bits).
    pub sq_psn: u32,
    /// Destination QP number.
    pub dest_qp_num: u32,
    /// Remote access rights ([`ibv_access_flags`]).
    pub qp_access_flags: u32,
    /// Capacities.
    pub cap: ibv_qp_cap,
    /// Primary path.
    pub ah_attr: ibv_ah_attr,
    /// Alternate path.
    pub alt_ah_attr: ibv_ah_attr,
    /// P_Key index.
    pub pkey_index: u16,
    /// Alternate P_Key index.
    pub alt_pkey_index: u16,
    /// Notify when the SQ drains.
    pub en_sqd_async_notify: u8,
    /// The SQ is draining (query only).
    pub sq_draining: u8,
    /// Outstanding RDMA reads/atomics as initiator.
    pub max_rd_atomic: u8,
    /// Outstanding RDMA reads/atomics as target.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code (5 bits).
    pub min_rnr_timer: u8,
    /// Local port.
    pub port_num: u8,
    /// Local ACK timeout code (4.096 µs × 2^timeout).
    pub timeout: u8,
    /// Retry count (3 bits).
    pub retry_cnt: u8,
    /// RNR retry count (3 bits, 7 = forever).
    pub rnr_retry: u8,
    /// Alternate port.
    pub alt_port_num: u8,
    /// Alternate timeout.
    pub alt_timeout: u8,
    /// Rate limit in kbit/s.
    pub rate_limit: u32,
}

/// `struct ibv_qp_rate_limit_attr` (verbs.h 1081–1086).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_qp_rate_limit_attr {
    /// Rate limit in kbit/s.
    pub rate_limit: u32,
    /// Burst size in bytes.
    pub max_burst_sz: u32,
    /// Typical packet size in bytes.
    pub typical_pkt_sz: u16,
    /// Which extensions are valid.
    pub comp_mask: u32,
}

/// `struct ibv_ece` (verbs.h 1449–1462): enhanced connection establishment options.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_ece {
    /// IEEE OUI of the vendor.
    pub vendor_id: u32,
    /// Vendor-specific options.
    pub options: u32,
    /// Which extensions are valid.
    pub comp_mask: u32,
}

/// `struct ibv_moderate_cq` (verbs.h 1539–1542).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_moderate_cq {
    /// Completions per event.
    pub cq_count: u16,
    /// Period in microseconds.
    pub cq_period: u16,
}

/// `struct ibv_modify_cq_attr` (verbs.h 1544–1547).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_modify_cq_attr {
    /// [`ibv_cq_attr_mask`] bits.
    pub attr_mask: u32,
    /// Moderation.
    pub moderate: ibv_moderate_cq,
}

/// `struct ibv_cq_init_attr_ex` (verbs.h 2018–2042), for the inline `ibv_create_cq_ex`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_cq_init_attr_ex {
    /// Minimum number of entries.
    pub cqe: u32,
    /// The application's cookie.
    pub cq_context: *mut c_void,
    /// Completion channel, or NULL.
    pub channel: *mut ibv_comp_channel,
    /// Completion vector (< `num_comp_vectors`).
    pub comp_vector: u32,
    /// [`ibv_create_cq_wc_flags`] bits.
    pub wc_flags: u64,
    /// [`ibv_cq_init_attr_mask`] bits.
    pub comp_mask: u32,
    /// [`ibv_create_cq_attr_flags`] bits.
    pub flags: u32,
    /// Parent domain.
    pub parent_domain: *mut ibv_pd,
}

/// `struct ibv_parent_domain_init_attr` (verbs.h 2051–2060).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_parent_domain_init_attr {
    /// The protection domain (not NULL).
    pub pd: *mut ibv_pd,
    /// A thread domain, or NULL.
    pub td: *mut ibv_td,
    /// Which extensions are valid.
    pub comp_mask: u32,
    /// Custom allocator.
    pub alloc: Option<
        unsafe extern "C" fn(
            pd: *mut ibv_pd,
            pd_context: *mut c_void,
            size: usize,
            alignment: usize,
            resource_type: u64,
        ) -> *mut c_void,
    >,
    /// Custom deallocator.
    pub free: Option<
        unsafe extern "C" fn(
            pd: *mut ibv_pd,
            pd_context: *mut c_void,
            ptr: *mut c_void,
            resource_type: u64,
        ),
    >,
    /// Allocator cookie.
    pub pd_context: *mut c_void,
}

/// `struct ibv_counters_init_attr` (verbs.h 2062–2064).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_counters_init_attr {
    /// Must be 0.
    pub comp_mask: u32,
}

/// `struct ibv_counter_attach_attr` (verbs.h 2075–2079).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_counter_attach_attr {
    /// An [`ibv_counter_description`].
    pub counter_desc: ibv_counter_description,
    /// Index in the counters object.
    pub index: u32,
    /// Which extensions are valid.
    pub comp_mask: u32,
}

/// `struct ibv_values_ex` (verbs.h 2090–2093).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_values_ex {
    /// Which values are requested/valid.
    pub comp_mask: u32,
    /// The raw hardware clock.
    pub raw_clock: timespec,
}

/// `struct ibv_flow_attr` (verbs.h 1881–1893): the header of a steering rule, followed in
/// memory by `num_of_specs` specifications.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_flow_attr {
    /// Which extensions are valid.
    pub comp_mask: u32,
    /// The rule type.
    pub r#type: u32,
    /// Size of this header plus the specifications.
    pub size: u16,
    /// Priority.
    pub priority: u16,
    /// Number of specifications that follow.
    pub num_of_specs: u8,
    /// Port.
    pub port: u8,
    /// Flags.
    pub flags: u32,
}

zeroed_default!(
    ibv_mw_bind_info,
    ibv_srq_init_attr,
    ibv_srq_init_attr_ex,
    ibv_wq_init_attr,
    ibv_rwq_ind_table_init_attr,
    ibv_qp_init_attr,
    ibv_rx_hash_conf,
    ibv_qp_init_attr_ex,
    ibv_qp_open_attr,
    ibv_cq_init_attr_ex,
    ibv_parent_domain_init_attr,
);
