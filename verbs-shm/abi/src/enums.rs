//! The enumerations and flag sets of verbs.h v44, with their exact numeric values.
//!
//! Each C `enum` is a type alias of its storage type plus one constant per enumerator (see
//! `c_enum!` for why not a Rust `enum`). Enums with a negative enumerator are `c_int`, the
//! others `c_uint`, as GCC stores them. Line numbers refer to rdma-core v44.0
//! `libibverbs/verbs.h`.

use core::ffi::{c_int, c_uint};

c_enums! {
    /// `enum ibv_gid_type` (verbs.h 73–77), as reported by `ibv_query_gid_ex`.
    pub enum ibv_gid_type: c_uint {
        /// InfiniBand GID.
        IBV_GID_TYPE_IB = 0,
        /// RoCE v1 (Ethernet, no IP/UDP encapsulation).
        IBV_GID_TYPE_ROCE_V1 = 1,
        /// RoCE v2 (UDP port 4791), the only type xroce reports.
        IBV_GID_TYPE_ROCE_V2 = 2,
    }

    /// `enum ibv_node_type` (verbs.h 95–104).
    pub enum ibv_node_type: c_int {
        /// Unknown node type.
        IBV_NODE_UNKNOWN = -1,
        /// A channel adapter: what every RDMA NIC, rxe and xroce report.
        IBV_NODE_CA = 1,
        /// A switch.
        IBV_NODE_SWITCH = 2,
        /// A router.
        IBV_NODE_ROUTER = 3,
        /// An iWARP NIC.
        IBV_NODE_RNIC = 4,
        /// Cisco usNIC.
        IBV_NODE_USNIC = 5,
        /// Cisco usNIC over UDP.
        IBV_NODE_USNIC_UDP = 6,
        /// Unspecified.
        IBV_NODE_UNSPECIFIED = 7,
    }

    /// `enum ibv_transport_type` (verbs.h 106–113). RoCE devices report `IBV_TRANSPORT_IB`.
    pub enum ibv_transport_type: c_int {
        /// Unknown transport.
        IBV_TRANSPORT_UNKNOWN = -1,
        /// InfiniBand transport (also RoCE).
        IBV_TRANSPORT_IB = 0,
        /// iWARP.
        IBV_TRANSPORT_IWARP = 1,
        /// usNIC.
        IBV_TRANSPORT_USNIC = 2,
        /// usNIC over UDP.
        IBV_TRANSPORT_USNIC_UDP = 3,
        /// Unspecified.
        IBV_TRANSPORT_UNSPECIFIED = 4,
    }

    /// `enum ibv_device_cap_flags` (verbs.h 115–140), bits of
    /// [`ibv_device_attr::device_cap_flags`](crate::ibv_device_attr::device_cap_flags).
    pub enum ibv_device_cap_flags: c_uint {
        /// Resizing to the maximum WR count is supported.
        IBV_DEVICE_RESIZE_MAX_WR = 1,
        /// Bad P_Key counter.
        IBV_DEVICE_BAD_PKEY_CNTR = 1 << 1,
        /// Bad Q_Key counter.
        IBV_DEVICE_BAD_QKEY_CNTR = 1 << 2,
        /// Raw multicast.
        IBV_DEVICE_RAW_MULTI = 1 << 3,
        /// Automatic path migration.
        IBV_DEVICE_AUTO_PATH_MIG = 1 << 4,
        /// Physical port change.
        IBV_DEVICE_CHANGE_PHY_PORT = 1 << 5,
        /// UD address vector port enforcement.
        IBV_DEVICE_UD_AV_PORT_ENFORCE = 1 << 6,
        /// Current QP state may be given to modify.
        IBV_DEVICE_CURR_QP_STATE_MOD = 1 << 7,
        /// Port shutdown.
        IBV_DEVICE_SHUTDOWN_PORT = 1 << 8,
        /// InitType.
        IBV_DEVICE_INIT_TYPE = 1 << 9,
        /// Port active event.
        IBV_DEVICE_PORT_ACTIVE_EVENT = 1 << 10,
        /// System image GUID.
        IBV_DEVICE_SYS_IMAGE_GUID = 1 << 11,
        /// RC RNR NAK generation.
        IBV_DEVICE_RC_RNR_NAK_GEN = 1 << 12,
        /// SRQ resize.
        IBV_DEVICE_SRQ_RESIZE = 1 << 13,
        /// N-notify CQ.
        IBV_DEVICE_N_NOTIFY_CQ = 1 << 14,
        /// Memory windows.
        IBV_DEVICE_MEM_WINDOW = 1 << 17,
        /// UD IP checksum offload.
        IBV_DEVICE_UD_IP_CSUM = 1 << 18,
        /// XRC.
        IBV_DEVICE_XRC = 1 << 20,
        /// Memory management extensions.
        IBV_DEVICE_MEM_MGT_EXTENSIONS = 1 << 21,
        /// Memory window type 2A.
        IBV_DEVICE_MEM_WINDOW_TYPE_2A = 1 << 23,
        /// Memory window type 2B.
        IBV_DEVICE_MEM_WINDOW_TYPE_2B = 1 << 24,
        /// RC IP checksum offload.
        IBV_DEVICE_RC_IP_CSUM = 1 << 25,
        /// Raw IP checksum offload.
        IBV_DEVICE_RAW_IP_CSUM = 1 << 26,
        /// Managed flow steering.
        IBV_DEVICE_MANAGED_FLOW_STEERING = 1 << 29,
    }

    /// `enum ibv_fork_status` (verbs.h 142–146), the answer of `ibv_is_fork_initialized`.
    pub enum ibv_fork_status: c_uint {
        /// `ibv_fork_init` was not called and fork protection is needed.
        IBV_FORK_DISABLED = 0,
        /// `ibv_fork_init` was called.
        IBV_FORK_ENABLED = 1,
        /// The provider does not need fork protection.
        IBV_FORK_UNNEEDED = 2,
    }

    /// `enum ibv_atomic_cap` (verbs.h 155–159).
    pub enum ibv_atomic_cap: c_uint {
        /// No atomics.
        IBV_ATOMIC_NONE = 0,
        /// Atomic with respect to this HCA.
        IBV_ATOMIC_HCA = 1,
        /// Atomic globally.
        IBV_ATOMIC_GLOB = 2,
    }

    /// `enum ibv_mtu` (verbs.h 364–370): the IB path MTU codes.
    pub enum ibv_mtu: c_uint {
        /// 256 bytes.
        IBV_MTU_256 = 1,
        /// 512 bytes.
        IBV_MTU_512 = 2,
        /// 1024 bytes (what fits a 1500-byte Ethernet link).
        IBV_MTU_1024 = 3,
        /// 2048 bytes.
        IBV_MTU_2048 = 4,
        /// 4096 bytes.
        IBV_MTU_4096 = 5,
    }

    /// `enum ibv_port_state` (verbs.h 372–379).
    pub enum ibv_port_state: c_uint {
        /// No state change.
        IBV_PORT_NOP = 0,
        /// Down.
        IBV_PORT_DOWN = 1,
        /// Initialising.
        IBV_PORT_INIT = 2,
        /// Armed.
        IBV_PORT_ARMED = 3,
        /// Active: perftest refuses any other state.
        IBV_PORT_ACTIVE = 4,
        /// Active, deferred.
        IBV_PORT_ACTIVE_DEFER = 5,
    }

    /// The anonymous link-layer enum (verbs.h 381–385), stored in
    /// [`ibv_port_attr::link_layer`](crate::ibv_port_attr::link_layer) as a `u8`.
    pub enum ibv_link_layer: c_uint {
        /// Unspecified (treated as InfiniBand by tools).
        IBV_LINK_LAYER_UNSPECIFIED = 0,
        /// InfiniBand.
        IBV_LINK_LAYER_INFINIBAND = 1,
        /// Ethernet: RoCE.
        IBV_LINK_LAYER_ETHERNET = 2,
    }

    /// `enum ibv_port_cap_flags` (verbs.h 387–412), bits of
    /// [`ibv_port_attr::port_cap_flags`](crate::ibv_port_attr::port_cap_flags).
    pub enum ibv_port_cap_flags: c_uint {
        /// Subnet manager.
        IBV_PORT_SM = 1 << 1,
        /// Notice support.
        IBV_PORT_NOTICE_SUP = 1 << 2,
        /// Trap support.
        IBV_PORT_TRAP_SUP = 1 << 3,
        /// Optional IPD support.
        IBV_PORT_OPT_IPD_SUP = 1 << 4,
        /// Automatic migration support.
        IBV_PORT_AUTO_MIGR_SUP = 1 << 5,
        /// SL map support.
        IBV_PORT_SL_MAP_SUP = 1 << 6,
        /// M_Key NVRAM.
        IBV_PORT_MKEY_NVRAM = 1 << 7,
        /// P_Key NVRAM.
        IBV_PORT_PKEY_NVRAM = 1 << 8,
        /// LED info support.
        IBV_PORT_LED_INFO_SUP = 1 << 9,
        /// System image GUID support.
        IBV_PORT_SYS_IMAGE_GUID_SUP = 1 << 11,
        /// P_Key switch external port trap support.
        IBV_PORT_PKEY_SW_EXT_PORT_TRAP_SUP = 1 << 12,
        /// Extended speeds support.
        IBV_PORT_EXTENDED_SPEEDS_SUP = 1 << 14,
        /// CapabilityMask2 support.
        IBV_PORT_CAP_MASK2_SUP = 1 << 15,
        /// Communication manager support.
        IBV_PORT_CM_SUP = 1 << 16,
        /// SNMP tunnel support.
        IBV_PORT_SNMP_TUNNEL_SUP = 1 << 17,
        /// Reinit support.
        IBV_PORT_REINIT_SUP = 1 << 18,
        /// Device management support.
        IBV_PORT_DEVICE_MGMT_SUP = 1 << 19,
        /// Vendor class support.
        IBV_PORT_VENDOR_CLASS_SUP = 1 << 20,
        /// DR notice support.
        IBV_PORT_DR_NOTICE_SUP = 1 << 21,
        /// Capability mask notice support.
        IBV_PORT_CAP_MASK_NOTICE_SUP = 1 << 22,
        /// Boot management support.
        IBV_PORT_BOOT_MGMT_SUP = 1 << 23,
        /// Link latency support.
        IBV_PORT_LINK_LATENCY_SUP = 1 << 24,
        /// Client reregistration support.
        IBV_PORT_CLIENT_REG_SUP = 1 << 25,
        /// GIDs are IP based (RoCE).
        IBV_PORT_IP_BASED_GIDS = 1 << 26,
    }

    /// `enum ibv_event_type` (verbs.h 449–470), the kind of an asynchronous event.
    pub enum ibv_event_type: c_uint {
        /// CQ error.
        IBV_EVENT_CQ_ERR = 0,
        /// QP catastrophic error.
        IBV_EVENT_QP_FATAL = 1,
        /// Invalid request on a QP.
        IBV_EVENT_QP_REQ_ERR = 2,
        /// Local access violation on a QP.
        IBV_EVENT_QP_ACCESS_ERR = 3,
        /// Communication established.
        IBV_EVENT_COMM_EST = 4,
        /// Send queue drained.
        IBV_EVENT_SQ_DRAINED = 5,
        /// Path migrated.
        IBV_EVENT_PATH_MIG = 6,
        /// Path migration error.
        IBV_EVENT_PATH_MIG_ERR = 7,
        /// Device catastrophic error.
        IBV_EVENT_DEVICE_FATAL = 8,
        /// Port became active.
        IBV_EVENT_PORT_ACTIVE = 9,
        /// Port error.
        IBV_EVENT_PORT_ERR = 10,
        /// LID changed.
        IBV_EVENT_LID_CHANGE = 11,
        /// P_Key table changed.
        IBV_EVENT_PKEY_CHANGE = 12,
        /// Subnet manager changed.
        IBV_EVENT_SM_CHANGE = 13,
        /// SRQ catastrophic error.
        IBV_EVENT_SRQ_ERR = 14,
        /// SRQ limit reached.
        IBV_EVENT_SRQ_LIMIT_REACHED = 15,
        /// Last WQE reached on a QP attached to an SRQ.
        IBV_EVENT_QP_LAST_WQE_REACHED = 16,
        /// Client reregistration.
        IBV_EVENT_CLIENT_REREGISTER = 17,
        /// GID table changed.
        IBV_EVENT_GID_CHANGE = 18,
        /// WQ catastrophic error.
        IBV_EVENT_WQ_FATAL = 19,
    }

    /// `enum ibv_wc_status` (verbs.h 483–508), the status of a work completion.
    pub enum ibv_wc_status: c_uint {
        /// Success.
        IBV_WC_SUCCESS = 0,
        /// Local length error.
        IBV_WC_LOC_LEN_ERR = 1,
        /// Local QP operation error.
        IBV_WC_LOC_QP_OP_ERR = 2,
        /// Local EE context operation error.
        IBV_WC_LOC_EEC_OP_ERR = 3,
        /// Local protection error.
        IBV_WC_LOC_PROT_ERR = 4,
        /// Work request flushed.
        IBV_WC_WR_FLUSH_ERR = 5,
        /// Memory window bind error.
        IBV_WC_MW_BIND_ERR = 6,
        /// Bad response.
        IBV_WC_BAD_RESP_ERR = 7,
        /// Local access error.
        IBV_WC_LOC_ACCESS_ERR = 8,
        /// Remote invalid request.
        IBV_WC_REM_INV_REQ_ERR = 9,
        /// Remote access error.
        IBV_WC_REM_ACCESS_ERR = 10,
        /// Remote operation error.
        IBV_WC_REM_OP_ERR = 11,
        /// Transport retry counter exceeded.
        IBV_WC_RETRY_EXC_ERR = 12,
        /// RNR retry counter exceeded.
        IBV_WC_RNR_RETRY_EXC_ERR = 13,
        /// Local RDD violation.
        IBV_WC_LOC_RDD_VIOL_ERR = 14,
        /// Remote invalid RD request.
        IBV_WC_REM_INV_RD_REQ_ERR = 15,
        /// Remote abort.
        IBV_WC_REM_ABORT_ERR = 16,
        /// Invalid EE context number.
        IBV_WC_INV_EECN_ERR = 17,
        /// Invalid EE context state.
        IBV_WC_INV_EEC_STATE_ERR = 18,
        /// Fatal error.
        IBV_WC_FATAL_ERR = 19,
        /// Response timeout.
        IBV_WC_RESP_TIMEOUT_ERR = 20,
        /// General error.
        IBV_WC_GENERAL_ERR = 21,
        /// Tag matching error.
        IBV_WC_TM_ERR = 22,
        /// Tag matching rendezvous incomplete.
        IBV_WC_TM_RNDV_INCOMPLETE = 23,
    }

    /// `enum ibv_wc_opcode` (verbs.h 511–536). Receive completions have bit 7 set, so
    /// `opcode & IBV_WC_RECV` tells a receive.
    pub enum ibv_wc_opcode: c_uint {
        /// Send.
        IBV_WC_SEND = 0,
        /// RDMA write.
        IBV_WC_RDMA_WRITE = 1,
        /// RDMA read.
        IBV_WC_RDMA_READ = 2,
        /// Atomic compare and swap.
        IBV_WC_COMP_SWAP = 3,
        /// Atomic fetch and add.
        IBV_WC_FETCH_ADD = 4,
        /// Memory window bind.
        IBV_WC_BIND_MW = 5,
        /// Local invalidate.
        IBV_WC_LOCAL_INV = 6,
        /// TCP segmentation offload send.
        IBV_WC_TSO = 7,
        /// Atomic write.
        IBV_WC_ATOMIC_WRITE = 9,
        /// Receive (of a send).
        IBV_WC_RECV = 1 << 7,
        /// Receive of an RDMA write with immediate.
        IBV_WC_RECV_RDMA_WITH_IMM = (1 << 7) + 1,
        /// Tag matching: add.
        IBV_WC_TM_ADD = (1 << 7) + 2,
        /// Tag matching: delete.
        IBV_WC_TM_DEL = (1 << 7) + 3,
        /// Tag matching: sync.
        IBV_WC_TM_SYNC = (1 << 7) + 4,
        /// Tag matching: receive.
        IBV_WC_TM_RECV = (1 << 7) + 5,
        /// Tag matching: no tag.
        IBV_WC_TM_NO_TAG = (1 << 7) + 6,
        /// Driver specific 1.
        IBV_WC_DRIVER1 = (1 << 7) + 7,
        /// Driver specific 2.
        IBV_WC_DRIVER2 = (1 << 7) + 8,
        /// Driver specific 3.
        IBV_WC_DRIVER3 = (1 << 7) + 9,
    }

    /// `enum ibv_create_cq_wc_flags` (verbs.h 542–555): which fields an extended CQ reports.
    pub enum ibv_create_cq_wc_flags: c_uint {
        /// Byte length.
        IBV_WC_EX_WITH_BYTE_LEN = 1 << 0,
        /// Immediate data.
        IBV_WC_EX_WITH_IMM = 1 << 1,
        /// QP number.
        IBV_WC_EX_WITH_QP_NUM = 1 << 2,
        /// Source QP.
        IBV_WC_EX_WITH_SRC_QP = 1 << 3,
        /// Source LID.
        IBV_WC_EX_WITH_SLID = 1 << 4,
        /// Service level.
        IBV_WC_EX_WITH_SL = 1 << 5,
        /// DLID path bits.
        IBV_WC_EX_WITH_DLID_PATH_BITS = 1 << 6,
        /// Completion timestamp.
        IBV_WC_EX_WITH_COMPLETION_TIMESTAMP = 1 << 7,
        /// Customer VLAN.
        IBV_WC_EX_WITH_CVLAN = 1 << 8,
        /// Flow tag.
        IBV_WC_EX_WITH_FLOW_TAG = 1 << 9,
        /// Tag matching info.
        IBV_WC_EX_WITH_TM_INFO = 1 << 10,
        /// Wall-clock completion timestamp.
        IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK = 1 << 11,
    }

    /// `enum ibv_wc_flags` (verbs.h 576–584), bits of [`ibv_wc::wc_flags`](crate::ibv_wc::wc_flags).
    pub enum ibv_wc_flags: c_uint {
        /// A GRH is present in the first 40 bytes of the receive buffer (UD).
        IBV_WC_GRH = 1 << 0,
        /// `imm_data` is valid.
        IBV_WC_WITH_IMM = 1 << 1,
        /// The IP checksum was verified.
        IBV_WC_IP_CSUM_OK = 1 << 2,
        /// `invalidated_rkey` is valid.
        IBV_WC_WITH_INV = 1 << 3,
        /// Tag matching sync request.
        IBV_WC_TM_SYNC_REQ = 1 << 4,
        /// Tag matching match.
        IBV_WC_TM_MATCH = 1 << 5,
        /// Tag matching data valid.
        IBV_WC_TM_DATA_VALID = 1 << 6,
    }

    /// `enum ibv_access_flags` (verbs.h 608–618), memory region and QP access rights.
    pub enum ibv_access_flags: c_uint {
        /// Local write.
        IBV_ACCESS_LOCAL_WRITE = 1,
        /// Remote write.
        IBV_ACCESS_REMOTE_WRITE = 1 << 1,
        /// Remote read.
        IBV_ACCESS_REMOTE_READ = 1 << 2,
        /// Remote atomic.
        IBV_ACCESS_REMOTE_ATOMIC = 1 << 3,
        /// Memory window bind.
        IBV_ACCESS_MW_BIND = 1 << 4,
        /// Zero-based addressing.
        IBV_ACCESS_ZERO_BASED = 1 << 5,
        /// On-demand paging.
        IBV_ACCESS_ON_DEMAND = 1 << 6,
        /// Huge pages.
        IBV_ACCESS_HUGETLB = 1 << 7,
        /// Relaxed ordering (optional: perftest always sets it).
        IBV_ACCESS_RELAXED_ORDERING = IBV_ACCESS_OPTIONAL_FIRST,
    }

    /// `enum ibv_xrcd_init_attr_mask` (verbs.h 640–644).
    pub enum ibv_xrcd_init_attr_mask: c_uint {
        /// `fd` is valid.
        IBV_XRCD_INIT_ATTR_FD = 1 << 0,
        /// `oflags` is valid.
        IBV_XRCD_INIT_ATTR_OFLAGS = 1 << 1,
        /// Reserved.
        IBV_XRCD_INIT_ATTR_RESERVED = 1 << 2,
    }

    /// `enum ibv_rereg_mr_flags` (verbs.h 656–661).
    pub enum ibv_rereg_mr_flags: c_uint {
        /// Change address and length.
        IBV_REREG_MR_CHANGE_TRANSLATION = 1 << 0,
        /// Change protection domain.
        IBV_REREG_MR_CHANGE_PD = 1 << 1,
        /// Change access flags.
        IBV_REREG_MR_CHANGE_ACCESS = 1 << 2,
        /// Every supported flag.
        IBV_REREG_MR_FLAGS_SUPPORTED = (1 << 3) - 1,
    }

    /// `enum ibv_rereg_mr_err_code` (verbs.h 2589–2600), the negative results of `ibv_rereg_mr`.
    pub enum ibv_rereg_mr_err_code: c_int {
        /// The old MR is still valid; the input was invalid.
        IBV_REREG_MR_ERR_INPUT = -1,
        /// The old MR is still valid; `dontfork` on the new range failed.
        IBV_REREG_MR_ERR_DONT_FORK_NEW = -2,
        /// The new MR is valid; `dofork` on the old range failed.
        IBV_REREG_MR_ERR_DO_FORK_OLD = -3,
        /// The MR must not be used: the command failed.
        IBV_REREG_MR_ERR_CMD = -4,
        /// The MR must not be used: the command failed and the new range's fork state is wrong.
        IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW = -5,
    }

    /// `enum ibv_mw_type` (verbs.h 673–676).
    pub enum ibv_mw_type: c_uint {
        /// Type 1 memory window (bound with `ibv_bind_mw`).
        IBV_MW_TYPE_1 = 1,
        /// Type 2 memory window (bound with a work request).
        IBV_MW_TYPE_2 = 2,
    }

    /// `enum ibv_rate` (verbs.h 703–728): static rate codes. The values are not in rate order.
    pub enum ibv_rate: c_uint {
        /// No limit: the port's maximum.
        IBV_RATE_MAX = 0,
        /// 2.5 Gbit/s.
        IBV_RATE_2_5_GBPS = 2,
        /// 5 Gbit/s.
        IBV_RATE_5_GBPS = 5,
        /// 10 Gbit/s.
        IBV_RATE_10_GBPS = 3,
        /// 20 Gbit/s.
        IBV_RATE_20_GBPS = 6,
        /// 30 Gbit/s.
        IBV_RATE_30_GBPS = 4,
        /// 40 Gbit/s.
        IBV_RATE_40_GBPS = 7,
        /// 60 Gbit/s.
        IBV_RATE_60_GBPS = 8,
        /// 80 Gbit/s.
        IBV_RATE_80_GBPS = 9,
        /// 120 Gbit/s.
        IBV_RATE_120_GBPS = 10,
        /// 14 Gbit/s (FDR x1).
        IBV_RATE_14_GBPS = 11,
        /// 56 Gbit/s (FDR x4).
        IBV_RATE_56_GBPS = 12,
        /// 112 Gbit/s (FDR x8).
        IBV_RATE_112_GBPS = 13,
        /// 168 Gbit/s (FDR x12).
        IBV_RATE_168_GBPS = 14,
        /// 25 Gbit/s (EDR x1).
        IBV_RATE_25_GBPS = 15,
        /// 100 Gbit/s (EDR x4).
        IBV_RATE_100_GBPS = 16,
        /// 200 Gbit/s.
        IBV_RATE_200_GBPS = 17,
        /// 300 Gbit/s.
        IBV_RATE_300_GBPS = 18,
        /// 28 Gbit/s.
        IBV_RATE_28_GBPS = 19,
        /// 50 Gbit/s.
        IBV_RATE_50_GBPS = 20,
        /// 400 Gbit/s.
        IBV_RATE_400_GBPS = 21,
        /// 600 Gbit/s.
        IBV_RATE_600_GBPS = 22,
        /// 800 Gbit/s.
        IBV_RATE_800_GBPS = 23,
        /// 1200 Gbit/s.
        IBV_RATE_1200_GBPS = 24,
    }

    /// `enum ibv_srq_attr_mask` (verbs.h 767–770).
    pub enum ibv_srq_attr_mask: c_uint {
        /// `max_wr` is valid.
        IBV_SRQ_MAX_WR = 1 << 0,
        /// `srq_limit` is valid.
        IBV_SRQ_LIMIT = 1 << 1,
    }

    /// `enum ibv_srq_type` (verbs.h 783–787).
    pub enum ibv_srq_type: c_uint {
        /// A basic SRQ.
        IBV_SRQT_BASIC = 0,
        /// An XRC SRQ.
        IBV_SRQT_XRC = 1,
        /// A tag-matching SRQ.
        IBV_SRQT_TM = 2,
    }

    /// `enum ibv_srq_init_attr_mask` (verbs.h 789–796).
    pub enum ibv_srq_init_attr_mask: c_uint {
        /// `srq_type` is valid.
        IBV_SRQ_INIT_ATTR_TYPE = 1 << 0,
        /// `pd` is valid.
        IBV_SRQ_INIT_ATTR_PD = 1 << 1,
        /// `xrcd` is valid.
        IBV_SRQ_INIT_ATTR_XRCD = 1 << 2,
        /// `cq` is valid.
        IBV_SRQ_INIT_ATTR_CQ = 1 << 3,
        /// `tm_cap` is valid.
        IBV_SRQ_INIT_ATTR_TM = 1 << 4,
        /// Reserved.
        IBV_SRQ_INIT_ATTR_RESERVED = 1 << 5,
    }

    /// `enum ibv_wq_type` (verbs.h 815–817).
    pub enum ibv_wq_type: c_uint {
        /// A receive work queue.
        IBV_WQT_RQ = 0,
    }

    /// `enum ibv_wq_state` (verbs.h 843–848).
    pub enum ibv_wq_state: c_uint {
        /// Reset.
        IBV_WQS_RESET = 0,
        /// Ready.
        IBV_WQS_RDY = 1,
        /// Error.
        IBV_WQS_ERR = 2,
        /// Unknown.
        IBV_WQS_UNKNOWN = 3,
    }

    /// `enum ibv_qp_type` (verbs.h 896–904).
    pub enum ibv_qp_type: c_uint {
        /// Reliable connected.
        IBV_QPT_RC = 2,
        /// Unreliable connected.
        IBV_QPT_UC = 3,
        /// Unreliable datagram.
        IBV_QPT_UD = 4,
        /// Raw packet.
        IBV_QPT_RAW_PACKET = 8,
        /// XRC initiator.
        IBV_QPT_XRC_SEND = 9,
        /// XRC target.
        IBV_QPT_XRC_RECV = 10,
        /// Driver specific.
        IBV_QPT_DRIVER = 0xff,
    }

    /// `enum ibv_qp_init_attr_mask` (verbs.h 924–932), bits of
    /// [`ibv_qp_init_attr_ex::comp_mask`](crate::ibv_qp_init_attr_ex::comp_mask).
    pub enum ibv_qp_init_attr_mask: c_uint {
        /// `pd` is valid. A `comp_mask` of exactly this bit makes `ibv_create_qp_ex` call
        /// `ibv_create_qp`.
        IBV_QP_INIT_ATTR_PD = 1 << 0,
        /// `xrcd` is valid.
        IBV_QP_INIT_ATTR_XRCD = 1 << 1,
        /// `create_flags` is valid.
        IBV_QP_INIT_ATTR_CREATE_FLAGS = 1 << 2,
        /// `max_tso_header` is valid.
        IBV_QP_INIT_ATTR_MAX_TSO_HEADER = 1 << 3,
        /// `rwq_ind_tbl` is valid.
        IBV_QP_INIT_ATTR_IND_TABLE = 1 << 4,
        /// `rx_hash_conf` is valid.
        IBV_QP_INIT_ATTR_RX_HASH = 1 << 5,
        /// `send_ops_flags` is valid: the QP is used through `ibv_qp_ex`.
        IBV_QP_INIT_ATTR_SEND_OPS_FLAGS = 1 << 6,
    }

    /// `enum ibv_qp_create_flags` (verbs.h 934–940).
    pub enum ibv_qp_create_flags: c_uint {
        /// Block multicast loopback to self.
        IBV_QP_CREATE_BLOCK_SELF_MCAST_LB = 1 << 1,
        /// Scatter the FCS.
        IBV_QP_CREATE_SCATTER_FCS = 1 << 8,
        /// Strip customer VLANs.
        IBV_QP_CREATE_CVLAN_STRIPPING = 1 << 9,
        /// `source_qpn` is valid.
        IBV_QP_CREATE_SOURCE_QPN = 1 << 10,
        /// PCI write end padding.
        IBV_QP_CREATE_PCI_WRITE_END_PADDING = 1 << 11,
    }

    /// `enum ibv_qp_create_send_ops_flags` (verbs.h 942–955): which `ibv_wr_*` operations an
    /// extended QP accepts.
    pub enum ibv_qp_create_send_ops_flags: c_uint {
        /// RDMA write.
        IBV_QP_EX_WITH_RDMA_WRITE = 1 << 0,
        /// RDMA write with immediate.
        IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM = 1 << 1,
        /// Send.
        IBV_QP_EX_WITH_SEND = 1 << 2,
        /// Send with immediate.
        IBV_QP_EX_WITH_SEND_WITH_IMM = 1 << 3,
        /// RDMA read.
        IBV_QP_EX_WITH_RDMA_READ = 1 << 4,
        /// Atomic compare and swap.
        IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP = 1 << 5,
        /// Atomic fetch and add.
        IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD = 1 << 6,
        /// Local invalidate.
        IBV_QP_EX_WITH_LOCAL_INV = 1 << 7,
        /// Memory window bind.
        IBV_QP_EX_WITH_BIND_MW = 1 << 8,
        /// Send with invalidate.
        IBV_QP_EX_WITH_SEND_WITH_INV = 1 << 9,
        /// TCP segmentation offload.
        IBV_QP_EX_WITH_TSO = 1 << 10,
        /// Atomic write.
        IBV_QP_EX_WITH_ATOMIC_WRITE = 1 << 12,
    }

    /// `enum ibv_qp_open_attr_mask` (verbs.h 987–993).
    pub enum ibv_qp_open_attr_mask: c_uint {
        /// `qp_num` is valid.
        IBV_QP_OPEN_ATTR_NUM = 1 << 0,
        /// `xrcd` is valid.
        IBV_QP_OPEN_ATTR_XRCD = 1 << 1,
        /// `qp_context` is valid.
        IBV_QP_OPEN_ATTR_CONTEXT = 1 << 2,
        /// `qp_type` is valid.
        IBV_QP_OPEN_ATTR_TYPE = 1 << 3,
        /// Reserved.
        IBV_QP_OPEN_ATTR_RESERVED = 1 << 4,
    }

    /// `enum ibv_qp_attr_mask` (verbs.h 1003–1033): which fields of
    /// [`ibv_qp_attr`](crate::ibv_qp_attr) `ibv_modify_qp`/`ibv_query_qp` use.
    pub enum ibv_qp_attr_mask: c_uint {
        /// `qp_state`.
        IBV_QP_STATE = 1 << 0,
        /// `cur_qp_state`.
        IBV_QP_CUR_STATE = 1 << 1,
        /// `en_sqd_async_notify`.
        IBV_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
        /// `qp_access_flags`.
        IBV_QP_ACCESS_FLAGS = 1 << 3,
        /// `pkey_index`.
        IBV_QP_PKEY_INDEX = 1 << 4,
        /// `port_num`.
        IBV_QP_PORT = 1 << 5,
        /// `qkey`.
        IBV_QP_QKEY = 1 << 6,
        /// `ah_attr` (the primary path).
        IBV_QP_AV = 1 << 7,
        /// `path_mtu`.
        IBV_QP_PATH_MTU = 1 << 8,
        /// `timeout`.
        IBV_QP_TIMEOUT = 1 << 9,
        /// `retry_cnt`.
        IBV_QP_RETRY_CNT = 1 << 10,
        /// `rnr_retry`.
        IBV_QP_RNR_RETRY = 1 << 11,
        /// `rq_psn`.
        IBV_QP_RQ_PSN = 1 << 12,
        /// `max_rd_atomic`.
        IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
        /// `alt_ah_attr`, `alt_pkey_index`, `alt_port_num`, `alt_timeout`.
        IBV_QP_ALT_PATH = 1 << 14,
        /// `min_rnr_timer`.
        IBV_QP_MIN_RNR_TIMER = 1 << 15,
        /// `sq_psn`.
        IBV_QP_SQ_PSN = 1 << 16,
        /// `max_dest_rd_atomic`.
        IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
        /// `path_mig_state`.
        IBV_QP_PATH_MIG_STATE = 1 << 18,
        /// `cap`.
        IBV_QP_CAP = 1 << 19,
        /// `dest_qp_num`.
        IBV_QP_DEST_QPN = 1 << 20,
        /// `rate_limit`.
        IBV_QP_RATE_LIMIT = 1 << 25,
    }

    /// `enum ibv_qp_state` (verbs.h 1035–1044).
    pub enum ibv_qp_state: c_uint {
        /// Reset.
        IBV_QPS_RESET = 0,
        /// Initialised.
        IBV_QPS_INIT = 1,
        /// Ready to receive.
        IBV_QPS_RTR = 2,
        /// Ready to send.
        IBV_QPS_RTS = 3,
        /// Send queue drain.
        IBV_QPS_SQD = 4,
        /// Send queue error.
        IBV_QPS_SQE = 5,
        /// Error.
        IBV_QPS_ERR = 6,
        /// Unknown.
        IBV_QPS_UNKNOWN = 7,
    }

    /// `enum ibv_mig_state` (verbs.h 1046–1050).
    pub enum ibv_mig_state: c_uint {
        /// Migrated.
        IBV_MIG_MIGRATED = 0,
        /// Rearm.
        IBV_MIG_REARM = 1,
        /// Armed.
        IBV_MIG_ARMED = 2,
    }

    /// `enum ibv_wr_opcode` (verbs.h 1088–1102), the operation of a send work request.
    pub enum ibv_wr_opcode: c_uint {
        /// RDMA write.
        IBV_WR_RDMA_WRITE = 0,
        /// RDMA write with immediate.
        IBV_WR_RDMA_WRITE_WITH_IMM = 1,
        /// Send.
        IBV_WR_SEND = 2,
        /// Send with immediate.
        IBV_WR_SEND_WITH_IMM = 3,
        /// RDMA read.
        IBV_WR_RDMA_READ = 4,
        /// Atomic compare and swap.
        IBV_WR_ATOMIC_CMP_AND_SWP = 5,
        /// Atomic fetch and add.
        IBV_WR_ATOMIC_FETCH_AND_ADD = 6,
        /// Local invalidate.
        IBV_WR_LOCAL_INV = 7,
        /// Memory window bind.
        IBV_WR_BIND_MW = 8,
        /// Send with invalidate.
        IBV_WR_SEND_WITH_INV = 9,
        /// TCP segmentation offload.
        IBV_WR_TSO = 10,
        /// Driver specific.
        IBV_WR_DRIVER1 = 11,
        /// Atomic write.
        IBV_WR_ATOMIC_WRITE = 15,
    }

    /// `enum ibv_send_flags` (verbs.h 1104–1110), bits of
    /// [`ibv_send_wr::send_flags`](crate::ibv_send_wr::send_flags).
    pub enum ibv_send_flags: c_uint {
        /// Wait for earlier reads/atomics before this request.
        IBV_SEND_FENCE = 1 << 0,
        /// Generate a completion for this request.
        IBV_SEND_SIGNALED = 1 << 1,
        /// Set the solicited event bit.
        IBV_SEND_SOLICITED = 1 << 2,
        /// Copy the payload into the request now (up to `max_inline_data`).
        IBV_SEND_INLINE = 1 << 3,
        /// Offload the IP checksum.
        IBV_SEND_IP_CSUM = 1 << 4,
    }

    /// `enum ibv_ops_wr_opcode` (verbs.h 1180–1184), tag-matching list operations.
    pub enum ibv_ops_wr_opcode: c_uint {
        /// Add a tag.
        IBV_WR_TAG_ADD = 0,
        /// Delete a tag.
        IBV_WR_TAG_DEL = 1,
        /// Sync.
        IBV_WR_TAG_SYNC = 2,
    }

    /// `enum ibv_cq_attr_mask` (verbs.h 1534–1537).
    pub enum ibv_cq_attr_mask: c_uint {
        /// `moderate` is valid.
        IBV_CQ_ATTR_MODERATE = 1 << 0,
        /// Reserved.
        IBV_CQ_ATTR_RESERVED = 1 << 1,
    }

    /// `enum ibv_cq_init_attr_mask` (verbs.h 2008–2011).
    pub enum ibv_cq_init_attr_mask: c_uint {
        /// `flags` is valid.
        IBV_CQ_INIT_ATTR_MASK_FLAGS = 1 << 0,
        /// `parent_domain` is valid.
        IBV_CQ_INIT_ATTR_MASK_PD = 1 << 1,
    }

    /// `enum ibv_create_cq_attr_flags` (verbs.h 2013–2016).
    pub enum ibv_create_cq_attr_flags: c_uint {
        /// The CQ is used by one thread only.
        IBV_CREATE_CQ_ATTR_SINGLE_THREADED = 1 << 0,
        /// Overruns are ignored.
        IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN = 1 << 1,
    }

    /// `enum ibv_counter_description` (verbs.h 2070–2073).
    pub enum ibv_counter_description: c_uint {
        /// Packets.
        IBV_COUNTER_PACKETS = 0,
        /// Bytes.
        IBV_COUNTER_BYTES = 1,
    }

    /// `enum ib_uverbs_advise_mr_advice` (kernel rdma/ib_user_ioctl_verbs.h), spelled
    /// `ibv_advise_mr_advice` by verbs_api.h.
    pub enum ibv_advise_mr_advice: c_uint {
        /// Prefetch for reading.
        IBV_ADVISE_MR_ADVICE_PREFETCH = 0,
        /// Prefetch for writing.
        IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE = 1,
        /// Prefetch without faulting.
        IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT = 2,
    }
}

c_enum! {
    /// `enum ibv_gid_type_sysfs` (driver.h 130–133), the answer of the private
    /// `ibv_query_gid_type`. Note that RoCE v2 is 1 here, 2 in [`ibv_gid_type`].
    pub enum ibv_gid_type_sysfs: c_uint {
        /// IB or RoCE v1.
        IBV_GID_TYPE_SYSFS_IB_ROCE_V1 = 0,
        /// RoCE v2.
        IBV_GID_TYPE_SYSFS_ROCE_V2 = 1,
    }
}

/// `IB_UVERBS_ACCESS_OPTIONAL_FIRST` (kernel rdma/ib_user_ioctl_verbs.h): the first access
/// bit a kernel may silently ignore.
pub const IBV_ACCESS_OPTIONAL_FIRST: c_uint = 1 << 20;
/// `IB_UVERBS_ACCESS_OPTIONAL_RANGE`: access bits 20..=29. When a constant `access` has any
/// of them, the `ibv_reg_mr` macro calls `ibv_reg_mr_iova2` instead of `ibv_reg_mr`.
pub const IBV_ACCESS_OPTIONAL_RANGE: c_uint =
    (((1 << 29) << 1) - 1) & !(IBV_ACCESS_OPTIONAL_FIRST - 1);

/// `IBV_SYSFS_NAME_MAX` (verbs.h 1935–1938): the size of `ibv_device::name`/`dev_name`.
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`: the size of `ibv_device::dev_path`/`ibdev_path`.
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `__VERBS_ABI_IS_EXTENDED` (verbs.h 89–93): the value of
/// [`ibv_context::abi_compat`](crate::ibv_context::abi_compat) that tells inline verbs.h code
/// the context is embedded in a [`verbs_context`](crate::verbs_context) (`(void *)UINTPTR_MAX`).
pub const __VERBS_ABI_IS_EXTENDED: usize = usize::MAX;
