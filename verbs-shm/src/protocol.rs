//! The control protocol: what an application asks the daemon over its control socket, and
//! what the daemon answers.
//!
//! One `SOCK_SEQPACKET` connection per application context. Every message is one
//! [`Request`] or [`Reply`], encoded with `postcard`, with file descriptors alongside
//! (`SCM_RIGHTS`) where the message says so, and at most [`MAX_MESSAGE`] bytes long.
//! Requests are answered in order, one reply each. Everything slow or rare goes here
//! (creating objects, modifying QPs); nothing on the data path does. Answers that grow
//! with the number of objects come in pages ([`Request::QpStatsPage`]).
//!
//! Compatibility: the application and the daemon must speak the same contract version
//! ([`crate::contract::VERSION`], checked by [`Request::Hello`]). Within a version, new
//! requests and replies are only ever appended to the end of their enums (postcard numbers
//! variants in order), so both sides still understand every message they share, and a
//! daemon that does not know a newer request answers it with `EINVAL` ("undecodable
//! request") instead of hanging up. Changing an existing message changes the version.
//!
//! Two more channels carry what the daemon raises by itself, both as fixed-size records
//! ([`EventRecord`], [`CompletionEvent`]) on sockets the application owns: asynchronous
//! events (the context's `async_fd`) and completion events (a completion channel's fd).

use serde::{Deserialize, Serialize};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The largest encoded message.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// The bytes a page of [`Reply::QpStatsPage`] may fill with entries: a whole message less
/// room for the reply's own framing (variant, list length, `next`).
pub const PAGE_BYTES: usize = MAX_MESSAGE - 64;

/// A request from an application.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The first message: the contract version the application speaks.
    Hello {
        /// [`crate::contract::VERSION`].
        version: u32,
    },
    /// `ibv_query_device`.
    QueryDevice,
    /// `ibv_query_port` (port 1) with the GID table.
    QueryPort,
    /// `ibv_alloc_pd`.
    AllocPd,
    /// `ibv_dealloc_pd`.
    DeallocPd {
        /// The PD handle.
        pd: u32,
    },
    /// `ibv_reg_mr`: the memory file comes alongside; `length` bytes at `offset` in it
    /// appear at `iova` in the application.
    RegMr {
        /// The PD handle.
        pd: u32,
        /// The address the application uses for the first byte.
        iova: u64,
        /// The length in bytes.
        length: u64,
        /// `ibv_access_flags`.
        access: u32,
        /// Where the region starts in the memory file.
        offset: u64,
    },
    /// `ibv_dereg_mr`.
    DeregMr {
        /// The MR handle.
        mr: u32,
    },
    /// `ibv_create_cq`. When `channel` is true the completion channel's socket comes
    /// alongside: the daemon writes a [`CompletionEvent`] to it for each notification.
    CreateCq {
        /// The entries requested (rounded up to a power of two).
        entries: u32,
        /// A completion channel is attached.
        channel: bool,
    },
    /// `ibv_destroy_cq`.
    DestroyCq {
        /// The CQ handle.
        cq: u32,
    },
    /// `ibv_create_srq`.
    CreateSrq {
        /// The PD handle.
        pd: u32,
        /// Work requests.
        max_wr: u32,
        /// Scatter/gather elements per work request.
        max_sge: u32,
        /// Limit event threshold (0 = disarmed).
        limit: u32,
    },
    /// `ibv_modify_srq` (only the limit can change).
    ModifySrq {
        /// The SRQ handle.
        srq: u32,
        /// The new limit.
        limit: u32,
    },
    /// `ibv_query_srq`.
    QuerySrq {
        /// The SRQ handle.
        srq: u32,
    },
    /// `ibv_destroy_srq`.
    DestroySrq {
        /// The SRQ handle.
        srq: u32,
    },
    /// `ibv_create_qp`.
    CreateQp {
        /// The PD handle.
        pd: u32,
        /// `ibv_qp_type` (2 = RC, 3 = UC, 4 = UD).
        qp_type: u32,
        /// The send CQ handle.
        send_cq: u32,
        /// The receive CQ handle.
        recv_cq: u32,
        /// The SRQ handle, if any.
        srq: Option<u32>,
        /// Requested capacities (the reply says what was granted).
        caps: QpCaps,
        /// Every send work request completes with a completion.
        sq_sig_all: bool,
    },
    /// `ibv_modify_qp`.
    ModifyQp {
        /// The QP handle.
        qp: u32,
        /// The attributes.
        attr: QpAttr,
        /// `ibv_qp_attr_mask`.
        mask: u32,
    },
    /// `ibv_query_qp`.
    QueryQp {
        /// The QP handle.
        qp: u32,
    },
    /// `ibv_destroy_qp`.
    DestroyQp {
        /// The QP handle.
        qp: u32,
    },
    /// `ibv_create_ah`.
    CreateAh {
        /// The PD handle.
        pd: u32,
        /// The address vector.
        attr: AhAttr,
    },
    /// `ibv_destroy_ah`.
    DestroyAh {
        /// The AH handle.
        ah: u32,
    },
    /// The daemon's counters.
    Stats,
    /// Every queue pair's state and counters in one reply (only while they fit one
    /// message: about 80 QPs; then `E2BIG`). [`Request::QpStatsPage`] has no such limit.
    QpStats,
    /// `ibv_rereg_mr`: the MR `mr` now covers `length` bytes from `start` bytes into
    /// `pieces`, at `iova`, in protection domain `pd`, with `access`; its handle and keys
    /// stay the same. Answered with [`Reply::Mr`].
    ReregMr {
        /// The MR handle.
        mr: u32,
        /// The (new or same) PD handle.
        pd: u32,
        /// The address the application uses for the first byte.
        iova: u64,
        /// The length in bytes.
        length: u64,
        /// `ibv_access_flags`.
        access: u32,
        /// Where the region starts in the concatenation of `pieces`.
        start: u64,
        /// The memory behind the region, in order; their memory files come alongside.
        pieces: Vec<Piece>,
    },
    /// `ibv_reg_mr` of application memory that lies on several memory files (pages shared
    /// by earlier registrations, and new ones): `length` bytes from `start` bytes into
    /// the concatenation of `pieces` appear at `iova`. Answered with [`Reply::Mr`].
    RegMrPieces {
        /// The PD handle.
        pd: u32,
        /// The address the application uses for the first byte.
        iova: u64,
        /// The length in bytes.
        length: u64,
        /// `ibv_access_flags`.
        access: u32,
        /// Where the region starts in the concatenation of `pieces`.
        start: u64,
        /// The memory behind the region, in order; their memory files come alongside.
        pieces: Vec<Piece>,
    },
    /// The state and counters of the queue pairs whose QP numbers are `from_qpn` or
    /// larger, in QP number order, as many as fit one message (`xroced stat --qp` asks
    /// page after page). Answered with [`Reply::QpStatsPage`].
    QpStatsPage {
        /// The smallest QP number wanted (0 for the first page).
        from_qpn: u32,
    },
    /// rdma_cm ([`crate::cm`]). Answered with [`Reply::Cm`].
    Cm(crate::cm::CmRequest),
    /// `ibv_attach_mcast`: the UD queue pair `qp` joins the multicast group `gid` (its
    /// packets for the multicast QP to that GID reach it; on the port's interface the host
    /// joins the IP group). Attaching again is no error. [`Reply::Done`].
    AttachMcast {
        /// The QP handle.
        qp: u32,
        /// The group's GID (an IPv4 group in its mapped form).
        gid: [u8; 16],
    },
    /// `ibv_detach_mcast`. [`Reply::Done`]; `EINVAL` when the QP is not attached.
    DetachMcast {
        /// The QP handle.
        qp: u32,
        /// The group's GID.
        gid: [u8; 16],
    },
}

/// A piece of the memory behind a region: `len` bytes at `offset` of a memory file, both
/// whole pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// Where the piece starts in its file.
    pub offset: u64,
    /// Its length.
    pub len: u64,
}

/// The daemon's answer to one [`Request`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// The request failed: `errno` is what the verbs call returns or sets.
    Error {
        /// An `errno` value (`EINVAL`, `ENOMEM`, `EOPNOTSUPP`, …).
        errno: i32,
        /// What was wrong, for people.
        message: String,
    },
    /// Accepted. Alongside: the wake page memory file, the socket asynchronous events
    /// arrive on, one eventfd per poller, and the application's post-bits page.
    Hello {
        /// The daemon's contract version.
        version: u32,
        /// The device's name (`xroce0`).
        device: String,
        /// The number of pollers (eventfds sent).
        pollers: u32,
    },
    /// Device attributes.
    Device(DeviceAttr),
    /// Port attributes and GIDs.
    Port(PortAttr),
    /// A new PD.
    Pd {
        /// Its handle.
        pd: u32,
    },
    /// A new MR.
    Mr {
        /// Its handle.
        mr: u32,
        /// Its local key.
        lkey: u32,
        /// Its remote key.
        rkey: u32,
    },
    /// A new CQ. Alongside: its ring's memory file.
    Cq {
        /// Its handle.
        cq: u32,
        /// Slots in its ring.
        entries: u32,
        /// Bytes of the memory file.
        ring_len: u64,
    },
    /// A new SRQ. Alongside: its ring's memory file.
    Srq {
        /// Its handle.
        srq: u32,
        /// Work requests granted.
        max_wr: u32,
        /// Scatter/gather elements granted.
        max_sge: u32,
        /// Slots in its ring.
        entries: u32,
        /// Bytes of the memory file.
        ring_len: u64,
        /// The poller whose wake word and eventfd to use after posting.
        poller: u32,
        /// The bit to set in the post-bits page after posting (none: the poller reads this
        /// ring on every pass).
        post_bit: Option<u32>,
    },
    /// SRQ attributes.
    SrqAttr {
        /// Work requests.
        max_wr: u32,
        /// Scatter/gather elements.
        max_sge: u32,
        /// Limit.
        limit: u32,
    },
    /// A new QP. Alongside: the memory file holding its send ring at offset 0 and its
    /// receive ring at `rq_offset`.
    Qp {
        /// Its handle.
        qp: u32,
        /// Its QP number.
        qpn: u32,
        /// Capacities granted.
        caps: QpCaps,
        /// Send ring slots.
        sq_entries: u32,
        /// Receive ring slots (0 with an SRQ).
        rq_entries: u32,
        /// Where the receive ring starts.
        rq_offset: u64,
        /// Bytes of the memory file.
        ring_len: u64,
        /// The poller whose wake word and eventfd to use after posting.
        poller: u32,
        /// The bit to set in the post-bits page after posting (none: the poller reads this
        /// ring on every pass).
        post_bit: Option<u32>,
    },
    /// QP attributes (`ibv_query_qp`).
    QpAttr {
        /// The attributes.
        attr: QpAttr,
        /// The capacities.
        caps: QpCaps,
    },
    /// A new AH.
    Ah {
        /// Its handle.
        ah: u32,
    },
    /// Counters, by name.
    Stats {
        /// `(name, value)`.
        counters: Vec<(String, u64)>,
    },
    /// Per-QP counters.
    QpStats {
        /// One entry per queue pair, by QP number.
        qps: Vec<QpStat>,
    },
    /// Done, nothing to return.
    Done,
    /// One page of per-QP counters ([`Request::QpStatsPage`]).
    QpStatsPage {
        /// Queue pairs by QP number, from the one asked for on.
        qps: Vec<QpStat>,
        /// Where the next page starts (ask with this `from_qpn`); none after the last QP.
        next: Option<u32>,
    },
    /// The answer to a [`Request::Cm`].
    Cm(crate::cm::CmReply),
}

/// One queue pair's state and counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpStat {
    /// The QP number.
    pub qpn: u32,
    /// Its transport service: `RC`, `UC` or `UD`.
    pub qp_type: String,
    /// Its state, as `ibv_qp_state` names it (`RTS`, `ERR`, ...).
    pub state: String,
    /// `(name, value)` for every transport counter.
    pub counters: Vec<(String, u64)>,
    /// `(name, value)` for what its requester measured of the path and how it recovers
    /// from loss: `selective_repeat` (1: on); connected RC and UC QPs' `sq_psn`,
    /// `unacked_psn`, `rq_psn` and `held` (packets held ahead of a gap); and once measured
    /// `srtt_us`, `min_rtt_us`, `rto_us` (before backoff) and `window` (packets in flight
    /// allowed).
    pub path: Vec<(String, u64)>,
}

/// QP capacities (`ibv_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpCaps {
    /// Send work requests.
    pub max_send_wr: u32,
    /// Receive work requests.
    pub max_recv_wr: u32,
    /// Scatter/gather elements per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather elements per receive work request.
    pub max_recv_sge: u32,
    /// Inline bytes per send work request.
    pub max_inline_data: u32,
}

/// An address vector (`ibv_ah_attr` with its `ibv_global_route`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AhAttr {
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Flow label.
    pub flow_label: u32,
    /// Source GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Service level.
    pub sl: u8,
    /// Whether the GRH is valid (always required on RoCE).
    pub is_global: bool,
    /// Port number.
    pub port_num: u8,
}

/// QP attributes (`ibv_qp_attr`, the part xroce implements).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpAttr {
    /// `ibv_qp_state`.
    pub qp_state: u32,
    /// `ibv_qp_state`.
    pub cur_qp_state: u32,
    /// `ibv_mtu`.
    pub path_mtu: u32,
    /// Q_Key.
    pub qkey: u32,
    /// Receive PSN.
    pub rq_psn: u32,
    /// Send PSN.
    pub sq_psn: u32,
    /// Destination QP number.
    pub dest_qp_num: u32,
    /// `ibv_access_flags`.
    pub qp_access_flags: u32,
    /// Primary path.
    pub ah_attr: AhAttr,
    /// P_Key index.
    pub pkey_index: u16,
    /// Raise SQ drained.
    pub en_sqd_async_notify: bool,
    /// The SQ is draining (query only).
    pub sq_draining: bool,
    /// Requester READ/atomic depth.
    pub max_rd_atomic: u8,
    /// Responder READ/atomic depth.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Port.
    pub port_num: u8,
    /// Local ACK timeout code.
    pub timeout: u8,
    /// Retry count.
    pub retry_cnt: u8,
    /// RNR retry count.
    pub rnr_retry: u8,
}

/// Device attributes (the part of `ibv_device_attr` that has meaning here).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAttr {
    /// Firmware version string.
    pub fw_ver: String,
    /// Node GUID (from the MAC, EUI-64).
    pub node_guid: u64,
    /// System image GUID.
    pub sys_image_guid: u64,
    /// Largest memory region.
    pub max_mr_size: u64,
    /// Supported page sizes.
    pub page_size_cap: u64,
    /// Vendor ID (0: perftest then takes its generic verbs path).
    pub vendor_id: u32,
    /// Vendor part ID.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// QPs.
    pub max_qp: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// `ibv_device_cap_flags`.
    pub device_cap_flags: u32,
    /// Scatter/gather elements.
    pub max_sge: u32,
    /// CQs.
    pub max_cq: u32,
    /// Entries per CQ.
    pub max_cqe: u32,
    /// MRs.
    pub max_mr: u32,
    /// PDs.
    pub max_pd: u32,
    /// READ/atomic depth per QP.
    pub max_qp_rd_atom: u32,
    /// READ/atomic resources in total.
    pub max_res_rd_atom: u32,
    /// Initiator READ/atomic depth per QP.
    pub max_qp_init_rd_atom: u32,
    /// `ibv_atomic_cap`.
    pub atomic_cap: u32,
    /// SRQs.
    pub max_srq: u32,
    /// Work requests per SRQ.
    pub max_srq_wr: u32,
    /// Scatter/gather elements per SRQ work request.
    pub max_srq_sge: u32,
    /// AHs.
    pub max_ah: u32,
    /// P_Keys.
    pub max_pkeys: u16,
    /// Inline data per work request.
    pub max_inline_data: u32,
}

/// Port attributes (`ibv_port_attr`) and the GID table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortAttr {
    /// `ibv_port_state` (4 = ACTIVE, 1 = DOWN).
    pub state: u32,
    /// `ibv_mtu`: the largest MTU the port supports.
    pub max_mtu: u32,
    /// `ibv_mtu`: the active MTU (path MTU for the netdev).
    pub active_mtu: u32,
    /// GID table length.
    pub gid_tbl_len: u32,
    /// Largest message.
    pub max_msg_sz: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// `ibv_port_phys_state` (5 = LINK_UP).
    pub phys_state: u8,
    /// Link width code.
    pub active_width: u8,
    /// Link speed code.
    pub active_speed: u8,
    /// The netdev's MTU.
    pub netdev_mtu: u32,
    /// The netdev's name.
    pub netdev: String,
    /// The netdev's MAC.
    pub mac: [u8; 6],
    /// The GID table (index 0 first); all RoCE v2.
    pub gids: Vec<[u8; 16]>,
}

/// An asynchronous event as the daemon writes it to the context's event socket.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EventRecord {
    /// `ibv_event_type`.
    pub event_type: u32,
    /// The handle of the QP, CQ or SRQ the event is about, or the port number.
    pub element: u32,
}

/// A completion notification as the daemon writes it to a completion channel.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct CompletionEvent {
    /// The CQ handle.
    pub cq: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// Encodes a message.
pub fn encode<T: Serialize + ?Sized>(message: &T) -> Vec<u8> {
    // NOTE(unwrap): serialising these plain structures into a Vec cannot fail.
    postcard::to_allocvec(message).unwrap_or_default()
}

/// Decodes a message; an error means the peer spoke nonsense.
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, postcard::Error> {
    postcard::from_bytes(bytes)
}

/// How many of `items`, from the first, fit in `budget` encoded bytes (at least one
/// whenever there is one, even if it alone is larger: the caller then sees it does not
/// fit).
pub fn page_len<T: Serialize>(items: &[T], budget: usize) -> usize {
    let mut used = 0usize;
    for (n, item) in items.iter().enumerate() {
        let size = postcard::experimental::serialized_size(item).unwrap_or(usize::MAX);
        used = used.saturating_add(size);
        if used > budget {
            return n.max(1);
        }
    }
    items.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let r = Request::ModifyQp {
            qp: 3,
            attr: QpAttr {
                qp_state: 2,
                dest_qp_num: 0x11,
                ..Default::default()
            },
            mask: 0x1f,
        };
        assert_eq!(decode::<Request>(&encode(&r)).unwrap(), r);
        let reply = Reply::Error {
            errno: 22,
            message: "bad".into(),
        };
        assert_eq!(decode::<Reply>(&encode(&reply)).unwrap(), reply);
        assert!(decode::<Request>(&[0xff, 0xff, 0xff]).is_err());
    }

    /// Messages are numbered in the order of their enums: appending keeps every existing
    /// message's bytes, so both sides of one contract version keep understanding them.
    #[test]
    fn existing_messages_keep_their_numbers() {
        assert_eq!(encode(&Request::Hello { version: 2 }), [0, 2]);
        assert_eq!(encode(&Request::DeallocPd { pd: 7 }), [4, 7]);
        assert_eq!(encode(&Request::QpStats), [20]);
        assert_eq!(encode(&Request::QpStatsPage { from_qpn: 5 }), [23, 5]);
        assert_eq!(encode(&Reply::Done), [14]);
        let page = Reply::QpStatsPage {
            qps: Vec::new(),
            next: None,
        };
        assert_eq!(encode(&page), [15, 0, 0]);
        // A request from a newer application that this side does not know is an error to
        // answer, not a crash.
        assert!(decode::<Request>(&[24]).is_err());
    }

    fn stat(qpn: u32) -> QpStat {
        QpStat {
            qpn,
            qp_type: "RC".into(),
            state: "RTS".into(),
            counters: (0..64)
                .map(|i| (format!("a_rather_long_counter_name_{i}"), u64::MAX - i))
                .collect(),
            path: vec![("srtt_us".into(), u64::MAX)],
        }
    }

    #[test]
    fn pages_of_qp_stats_fit_one_message_and_cover_every_qp() {
        let all: Vec<QpStat> = (0..1024).map(|i| stat(0x100 + i)).collect();
        assert!(
            encode(&all).len() > MAX_MESSAGE,
            "the test needs more than one page"
        );
        let mut at = 0;
        let mut pages = 0;
        while at < all.len() {
            let n = page_len(&all[at..], PAGE_BYTES);
            assert!(n >= 1);
            let reply = Reply::QpStatsPage {
                qps: all[at..at + n].to_vec(),
                next: Some(all[at + n - 1].qpn + 1),
            };
            let bytes = encode(&reply);
            assert!(bytes.len() <= MAX_MESSAGE, "page of {} bytes", bytes.len());
            // Full pages are nearly full: the next entry would not have fitted.
            if at + n < all.len() {
                let more = encode(&all[at..=at + n]).len();
                assert!(more > PAGE_BYTES, "a page stopped early");
            }
            at += n;
            pages += 1;
        }
        assert!(pages > 1);
        assert_eq!(page_len::<QpStat>(&[], PAGE_BYTES), 0);
        assert_eq!(page_len(&all[..1], 1), 1, "one entry always goes");
    }
}
