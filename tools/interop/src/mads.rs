//! The connection manager's MADs in a capture, checked against what Linux's CM puts in
//! them: every MAD xroce sent is compared, field by field, with the same message sent by
//! the rxe peer in the same run (the fields the kernel sets, not the ones an application or
//! chance chooses), and the rules Linux follows for every message are checked on both
//! sides: transaction IDs echoed (a REP, RTU or REJ carries its REQ's, a DREP its DREQ's,
//! a SIDR_REP its SIDR_REQ's), the IP CM header and the path's GIDs naming the frame's own
//! addresses, the path's flow label formed from the rdma_cm ports as `cma.c` forms it.
//!
//! Only xroce's MADs can fail the check; what rxe does is the reference.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;

use anyhow::Result;
use xroce_wire::cm::{CmMad, CmMessage, CommId, IpCmPacket, IpCmRepr, MsgResponse};
use xroce_wire::{Frame, Gid, Qpn};

/// One CM MAD of the capture.
#[derive(Debug, Clone)]
struct Sent {
    number: usize,
    src: IpAddr,
    tid: u64,
    kind: &'static str,
    /// The fields the sending CM sets whatever the application asks.
    fields: BTreeMap<&'static str, String>,
    link: Link,
    /// Problems found in the message alone.
    problems: Vec<String>,
}

/// What a message answers, for the transaction ID rules.
#[derive(Debug, Clone, Copy)]
enum Link {
    Req {
        local: CommId,
    },
    Rep {
        remote: CommId,
    },
    Rtu {
        local: CommId,
    },
    Rej {
        remote: CommId,
        rejected: MsgResponse,
    },
    Dreq {
        local: CommId,
    },
    Drep {
        remote: CommId,
    },
    SidrReq {
        id: CommId,
    },
    SidrRep {
        id: CommId,
    },
    Other,
}

/// What [`check`] found.
#[derive(Debug, Default, Clone)]
pub(super) struct Findings {
    /// CM MADs xroce sent.
    pub(super) xroce_mads: usize,
    /// CM MADs the peer sent.
    pub(super) peer_mads: usize,
    /// Messages xroce sent that were compared with the peer's.
    pub(super) compared: BTreeSet<&'static str>,
    /// Messages xroce sent that the peer never sent in the capture (so not compared).
    pub(super) uncompared: BTreeSet<&'static str>,
    /// What is wrong in xroce's MADs, one line each.
    pub(super) problems: Vec<String>,
    /// Rules the peer's own MADs break (the rules may be wrong; these never fail).
    pub(super) peer_oddities: Vec<String>,
}

impl Findings {
    pub(super) fn summary(&self) -> String {
        let mut s = format!(
            "{} xroce CM MADs ({} compared with rxe's: {}), {} from rxe",
            self.xroce_mads,
            self.compared.len(),
            self.compared.iter().copied().collect::<Vec<_>>().join(" "),
            self.peer_mads
        );
        if !self.uncompared.is_empty() {
            s.push_str(&format!(
                "; rxe sent no {} to compare with",
                self.uncompared
                    .iter()
                    .copied()
                    .collect::<Vec<_>>()
                    .join("/")
            ));
        }
        if let Some(first) = self.problems.first() {
            s.push_str(&format!(
                "; {} problems (first: {first})",
                self.problems.len()
            ));
        }
        if let Some(first) = self.peer_oddities.first() {
            s.push_str(&format!("; rxe breaks a rule too: {first}"));
        }
        s
    }
}

/// Checks the CM MADs of a capture file; `xroce` is xroce's address in it.
pub(super) fn check(pcap: &Path, xroce: IpAddr) -> Result<Findings> {
    let mut frames = Vec::new();
    xroce_pcap::for_each_frame(pcap, |n, bytes| frames.push((n, bytes.to_vec())))?;
    Ok(check_frames(
        frames.iter().map(|(n, b)| (*n, b.as_slice())),
        xroce,
    ))
}

/// [`check`] on frames already read: `(number, bytes)`.
pub(super) fn check_frames<'a>(
    frames: impl Iterator<Item = (usize, &'a [u8])>,
    xroce: IpAddr,
) -> Findings {
    let sent: Vec<Sent> = frames.filter_map(|(n, b)| read(n, b)).collect();
    let mut f = Findings::default();
    let by_kind = |kind: &str, from_xroce: bool| -> Vec<&Sent> {
        sent.iter()
            .filter(|s| s.kind == kind && (s.src == xroce) == from_xroce)
            .collect()
    };
    for s in &sent {
        let mine = s.src == xroce;
        if mine {
            f.xroce_mads += 1;
        } else {
            f.peer_mads += 1;
        }
        let mut problems: Vec<String> = s.problems.clone();
        if let Some(p) = tid_problem(s, &sent) {
            problems.push(p);
        }
        if !mine {
            f.peer_oddities.extend(
                problems
                    .into_iter()
                    .map(|p| format!("frame {}: {p}", s.number)),
            );
            continue;
        }
        let theirs = by_kind(s.kind, false);
        if theirs.is_empty() {
            f.uncompared.insert(s.kind);
        } else {
            f.compared.insert(s.kind);
            if !theirs.iter().any(|t| t.fields == s.fields) {
                let t = theirs[0];
                let diff: Vec<String> = s
                    .fields
                    .iter()
                    .filter(|(k, v)| t.fields.get(*k) != Some(v))
                    .map(|(k, v)| {
                        format!(
                            "{k}={v} where rxe sends {}",
                            t.fields.get(k).map_or("nothing", String::as_str)
                        )
                    })
                    .collect();
                problems.push(format!(
                    "unlike rxe's {} (frame {}): {}",
                    t.kind,
                    t.number,
                    diff.join(", ")
                ));
            }
        }
        f.problems.extend(
            problems
                .into_iter()
                .map(|p| format!("frame {} {}: {p}", s.number, s.kind)),
        );
    }
    f
}

/// The rule on transaction IDs: an answer carries the TID of what it answers (when that
/// is in the capture).
fn tid_problem(s: &Sent, all: &[Sent]) -> Option<String> {
    let answered = |pred: &dyn Fn(&Link) -> bool| all.iter().find(|o| pred(&o.link));
    let (what, origin) = match s.link {
        Link::Rep { remote } => (
            "REQ",
            answered(&|l| matches!(l, Link::Req { local } if *local == remote)),
        ),
        Link::Rtu { local } => (
            "REQ",
            answered(&|l| matches!(l, Link::Req { local: l2 } if *l2 == local)),
        ),
        Link::Rej { remote, rejected } if rejected == MsgResponse::REQ => (
            "REQ",
            answered(&|l| matches!(l, Link::Req { local } if *local == remote)),
        ),
        Link::Drep { remote } => (
            "DREQ",
            answered(&|l| matches!(l, Link::Dreq { local } if *local == remote)),
        ),
        Link::SidrRep { id } => (
            "SIDR_REQ",
            answered(&|l| matches!(l, Link::SidrReq { id: i } if *i == id)),
        ),
        _ => return None,
    };
    let origin = origin?;
    (origin.tid != s.tid).then(|| {
        format!(
            "tid={:#x}, not its {what}'s {:#x} (frame {})",
            s.tid, origin.tid, origin.number
        )
    })
}

/// Linux's flow label for a RoCEv2 connection (`cma_get_roce_udp_flow_label`): from the
/// active side's rdma_cm port and the service's port.
fn flow_label(src_port: u16, dst_port: u16) -> u32 {
    (u32::from(src_port) * 31 + u32::from(dst_port)) & 0xf_ffff
}

/// Reads a frame as a CM MAD to QP1; `None` for anything else.
fn read(number: usize, bytes: &[u8]) -> Option<Sent> {
    let frame = Frame::parse_unverified(bytes).ok()?;
    if frame.ib.bth.dest_qp != Qpn::GSI {
        return None;
    }
    let mad = CmMad::parse(frame.payload).ok()?;
    let ip = &frame.headers.ip;
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let mut fields: BTreeMap<&'static str, String> = BTreeMap::new();
    let mut put = |k: &'static str, v: String| {
        fields.insert(k, v);
    };
    // The envelope and the MAD header, common to every message.
    put("ip.hop_limit", ip.hop_limit().to_string());
    put("ip.dscp", ip.dscp().to_string());
    put("ip.ecn", ip.ecn().to_string());
    put("bth.pkey", format!("{:#x}", frame.ib.bth.pkey.0));
    put("bth.se", frame.ib.bth.solicited_event.to_string());
    put("bth.migreq", frame.ib.bth.migreq.to_string());
    if let Some(d) = frame.ib.deth {
        put("deth.qkey", format!("{:#x}", d.qkey.0));
        put("deth.src_qp", format!("{:#x}", d.src_qp.value()));
    }
    put(
        "mad.status",
        format!(
            "{:#x}",
            frame
                .payload
                .get(4..6)
                .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
        ),
    );
    put(
        "mad.class_specific",
        format!(
            "{:#x}",
            frame
                .payload
                .get(6..8)
                .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
        ),
    );
    put(
        "mad.attribute_modifier",
        format!("{:#x}", mad.attribute_modifier),
    );
    let mut problems = Vec::new();
    let ip_cm = |private: &[u8], problems: &mut Vec<String>| -> Option<IpCmRepr> {
        match IpCmPacket::new_checked(private).and_then(|p| IpCmRepr::parse(&p)) {
            Ok(h) => {
                if h.src_addr != src || h.dst_addr != dst {
                    problems.push(format!(
                        "IP CM header says {} -> {}, the frame {src} -> {dst}",
                        h.src_addr, h.dst_addr
                    ));
                }
                Some(h)
            }
            Err(e) => {
                problems.push(format!("no IP CM header: {e}"));
                None
            }
        }
    };
    let (kind, link) = match mad.message {
        CmMessage::Req(r) => {
            put(
                "remote_cm_response_timeout",
                r.remote_cm_response_timeout.to_string(),
            );
            put(
                "local_cm_response_timeout",
                r.local_cm_response_timeout.to_string(),
            );
            put("max_cm_retries", r.max_cm_retries.to_string());
            put(
                "transport_service_type",
                r.transport_service_type.0.to_string(),
            );
            put(
                "end_to_end_flow_control",
                r.end_to_end_flow_control.to_string(),
            );
            put("path_mtu", r.path_mtu.to_string());
            put("partition_key", format!("{:#x}", r.partition_key.0));
            put("local_qkey", format!("{:#x}", r.local_qkey.0));
            put("local_eecn", r.local_eecn.to_string());
            put("remote_eecn", r.remote_eecn.to_string());
            put("rdc_exists", r.rdc_exists.to_string());
            put(
                "extended_transport_type",
                r.extended_transport_type.to_string(),
            );
            put("retry_count", r.retry_count.to_string());
            put("rnr_retry_count", r.rnr_retry_count.to_string());
            put("vendor_id", format!("{:#x}", r.vendor_id));
            let p = &r.primary_path;
            put("path.local_lid", format!("{:#x}", p.local_lid));
            put("path.remote_lid", format!("{:#x}", p.remote_lid));
            put("path.packet_rate", p.packet_rate.to_string());
            put("path.traffic_class", p.traffic_class.to_string());
            put("path.hop_limit", p.hop_limit.to_string());
            put("path.sl", p.sl.to_string());
            put("path.subnet_local", p.subnet_local.to_string());
            put("path.local_ack_timeout", p.local_ack_timeout.to_string());
            put(
                "alternate_path.zero",
                r.alternate_path.is_zero().to_string(),
            );
            if p.local_gid != Gid::from(src) || p.remote_gid != Gid::from(dst) {
                problems.push(format!(
                    "path GIDs {:?} -> {:?}, not the frame's {src} -> {dst}",
                    p.local_gid, p.remote_gid
                ));
            }
            if let (Some(h), Some((_, port))) = (
                ip_cm(r.private_data, &mut problems),
                r.service_id.to_rdma_cm(),
            ) {
                let want = flow_label(h.src_port, port);
                if p.flow_label != want {
                    problems.push(format!(
                        "flow label {:#x}, not {want:#x} (ports {} -> {port})",
                        p.flow_label, h.src_port
                    ));
                }
            }
            (
                "REQ",
                Link::Req {
                    local: r.local_comm_id,
                },
            )
        }
        CmMessage::Rep(r) => {
            put("local_qkey", format!("{:#x}", r.local_qkey.0));
            put("local_eecn", r.local_eecn.to_string());
            put("target_ack_delay", r.target_ack_delay.to_string());
            put("failover_accepted", r.failover_accepted.to_string());
            put(
                "end_to_end_flow_control",
                r.end_to_end_flow_control.to_string(),
            );
            put("rnr_retry_count", r.rnr_retry_count.to_string());
            put("vendor_id", format!("{:#x}", r.vendor_id));
            (
                "REP",
                Link::Rep {
                    remote: r.remote_comm_id,
                },
            )
        }
        CmMessage::Rtu(r) => (
            "RTU",
            Link::Rtu {
                local: r.local_comm_id,
            },
        ),
        CmMessage::Rej(r) => {
            put("message_rejected", r.message_rejected.0.to_string());
            put("reason", r.reason.0.to_string());
            put("ari_length", r.ari.len().to_string());
            (
                "REJ",
                Link::Rej {
                    remote: r.remote_comm_id,
                    rejected: r.message_rejected,
                },
            )
        }
        CmMessage::Mra(r) => {
            put("message_mraed", r.message_mraed.0.to_string());
            put("service_timeout", r.service_timeout.to_string());
            ("MRA", Link::Other)
        }
        CmMessage::Dreq(r) => (
            "DREQ",
            Link::Dreq {
                local: r.local_comm_id,
            },
        ),
        CmMessage::Drep(r) => (
            "DREP",
            Link::Drep {
                remote: r.remote_comm_id,
            },
        ),
        CmMessage::SidrReq(r) => {
            put("partition_key", format!("{:#x}", r.partition_key.0));
            ip_cm(r.private_data, &mut problems);
            ("SIDR_REQ", Link::SidrReq { id: r.request_id })
        }
        CmMessage::SidrRep(r) => {
            put("status", r.status.0.to_string());
            put("qkey", format!("{:#x}", r.qkey.0));
            put("vendor_id", format!("{:#x}", r.vendor_id));
            ("SIDR_REP", Link::SidrRep { id: r.request_id })
        }
    };
    Some(Sent {
        number,
        src,
        tid: mad.transaction_id,
        kind,
        fields,
        link,
        problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use xroce_wire::cm::ReqPacket;

    fn fixture(name: &str) -> Vec<(usize, Vec<u8>)> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../dataplane/wire/tests/fixtures")
            .join(name);
        let mut frames = Vec::new();
        xroce_pcap::for_each_frame(&path, |n, b| frames.push((n, b.to_vec())))
            .expect("fixture readable");
        frames
    }

    fn run(frames: &[(usize, Vec<u8>)], xroce: &str) -> Findings {
        check_frames(
            frames.iter().map(|(n, b)| (*n, b.as_slice())),
            xroce.parse().unwrap(),
        )
    }

    #[test]
    fn linux_follows_the_rules_the_check_applies() {
        for name in ["rping_rdma_cm.pcap", "write_bw_rdma_cm.pcap"] {
            let frames = fixture(name);
            for side in ["10.77.0.2", "10.77.0.3"] {
                let f = run(&frames, side);
                assert!(f.problems.is_empty(), "{name} as {side}: {:?}", f.problems);
                assert!(f.peer_oddities.is_empty(), "{name}: {:?}", f.peer_oddities);
                assert!(f.xroce_mads > 0 && f.peer_mads > 0, "{name}: {f:?}");
            }
        }
    }

    #[test]
    fn a_rep_with_another_tid_is_reported() {
        let mut frames = fixture("rping_rdma_cm.pcap");
        // The REP (from the server, 10.77.0.2): change a byte of its transaction ID.
        let rep = frames
            .iter_mut()
            .find(|(n, b)| read(*n, b).is_some_and(|s| s.kind == "REP"))
            .expect("the capture has a REP");
        let frame = Frame::parse_unverified(&rep.1).unwrap();
        let mad_at = rep.1.len() - 4 - frame.payload.len();
        rep.1[mad_at + 15] ^= 0x01;
        let f = run(&frames, "10.77.0.2");
        assert!(
            f.problems
                .iter()
                .any(|p| p.contains("REP") && p.contains("not its REQ's")),
            "{:?}",
            f.problems
        );
    }

    #[test]
    fn a_field_unlike_the_peers_is_named() {
        // rxe's REQ, and a copy from another address standing for xroce's, with another
        // local ACK timeout in its primary path.
        let frames = fixture("rping_rdma_cm.pcap");
        let (n, req) = frames
            .iter()
            .find(|(n, b)| read(*n, b).is_some_and(|s| s.kind == "REQ"))
            .cloned()
            .expect("the capture has a REQ");
        let frame = Frame::parse_unverified(&req).unwrap();
        let mad_at = req.len() - 4 - frame.payload.len();
        let ip_at = 14;
        let mut mine = req.clone();
        ReqPacket::new_unchecked(&mut mine[mad_at + 24..mad_at + 256])
            .primary_path_mut()
            .set_local_ack_timeout(17);
        mine[ip_at + 12..ip_at + 16].copy_from_slice(&[10, 77, 0, 9]);
        mine[ip_at + 10..ip_at + 12].fill(0);
        let sum = mine[ip_at..ip_at + 20]
            .chunks(2)
            .fold(0u32, |a, w| a + u32::from(u16::from_be_bytes([w[0], w[1]])));
        let sum = (sum & 0xffff) + (sum >> 16);
        let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
        mine[ip_at + 10..ip_at + 12].copy_from_slice(&sum.to_be_bytes());
        let f = check_frames(
            [(n, req.as_slice()), (n + 1, mine.as_slice())].into_iter(),
            "10.77.0.9".parse().unwrap(),
        );
        assert_eq!(f.xroce_mads, 1, "{f:?}");
        assert!(
            f.problems
                .iter()
                .any(|p| p.contains("path.local_ack_timeout=17 where rxe sends 19")),
            "{:?}",
            f.problems
        );
        // And the IP CM header still names the old address: said too.
        assert!(
            f.problems.iter().any(|p| p.contains("IP CM header says")),
            "{:?}",
            f.problems
        );
    }
}
