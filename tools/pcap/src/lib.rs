//! The project's capture reader: one line per RoCEv2 packet of a capture, with its ICRC
//! verdict, decoded by `xroce-wire` ([`describe`]), over every frame of a classic pcap or
//! pcapng file (Ethernet link type, read with the `pcap-file` crate: [`for_each_frame`]).
//! Frames that are not UDP to port 4791 (ARP, TCP, other UDP) are skipped. xroce's
//! selective-acknowledgement NAK (a PSN sequence error NAK with PSN ranges after its AETH,
//! `xroce_wire::sack`) is decoded with its ranges, ` sack(first-last, ...)`.
//!
//! `cargo xtask pcap FILE...` runs the binary `xroce-pcap` ([`run`]), which exits non-zero if
//! any RoCEv2 packet is malformed or carries a bad ICRC; the interop harness checks its
//! captures with the same functions. This crate reads files and prints: it sends nothing.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};
use xroce_wire::{Frame, FrameRepr, ParseError};

/// What became of one RoCEv2 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Parsed, ICRC valid.
    Ok,
    /// Parsed, ICRC wrong.
    BadIcrc,
    /// Did not parse.
    Malformed,
}

/// The tally printed at the end.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub packets: usize,
    pub ok: usize,
    pub bad_icrc: usize,
    pub malformed: usize,
}

impl Tally {
    fn add(&mut self, verdict: Verdict) {
        self.packets += 1;
        match verdict {
            Verdict::Ok => self.ok += 1,
            Verdict::BadIcrc => self.bad_icrc += 1,
            Verdict::Malformed => self.malformed += 1,
        }
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} packets, {} ok, {} bad icrc, {} malformed",
            self.packets, self.ok, self.bad_icrc, self.malformed
        )
    }
}

/// `true` for errors that say the frame is simply not RoCEv2 (so it is skipped, not
/// reported): not IP, not UDP, or UDP to another port.
fn is_not_roce(e: &ParseError) -> bool {
    matches!(
        e,
        ParseError::UnsupportedEthertype(_) | ParseError::NotUdp(_) | ParseError::NotRoceV2Port(_)
    )
}

fn endpoint(addr: std::net::IpAddr, port: u16) -> String {
    match addr {
        std::net::IpAddr::V4(a) => format!("{a}:{port}"),
        std::net::IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}

/// The line for frame `number`, or `None` if the frame is not RoCEv2.
///
/// `12 10.77.0.3:49441 -> 10.77.0.2:4791 RC_SEND_ONLY qp=0x000011 psn=0x58f05a ack=1 len=64 icrc=ok`
pub fn describe(number: usize, bytes: &[u8]) -> Option<(String, Verdict)> {
    let mut line = format!("{number:5} ");
    match Frame::parse_unverified(bytes) {
        Ok(f) => {
            let ip = &f.headers.ip;
            let _ = write!(
                line,
                "{} -> {} {} len={}",
                endpoint(ip.src_addr(), f.headers.udp.src_port),
                endpoint(ip.dst_addr(), f.headers.udp.dst_port),
                f.ib,
                f.payload.len()
            );
            if f.ib.bth.dest_qp == xroce_wire::Qpn::GSI {
                line.push_str(&cm_text(f.payload));
            }
            if f.icrc_ok() {
                line.push_str(" icrc=ok");
                Some((line, Verdict::Ok))
            } else {
                let _ = write!(
                    line,
                    " icrc=BAD (carried {:#010x}, computed {:#010x})",
                    f.icrc,
                    f.computed_icrc()
                );
                Some((line, Verdict::BadIcrc))
            }
        }
        Err(e) if is_not_roce(&e) => None,
        Err(ParseError::UnexpectedPayload { opcode, len })
            if opcode == xroce_wire::Opcode::RC_ACKNOWLEDGE =>
        {
            match Frame::parse_acknowledge_with_trailer(bytes) {
                Ok(f) => match selective_ack(&f) {
                    Ok(text) => {
                        let ip = &f.headers.ip;
                        let _ = write!(
                            line,
                            "{} -> {} {}{text} len={} icrc=ok",
                            endpoint(ip.src_addr(), f.headers.udp.src_port),
                            endpoint(ip.dst_addr(), f.headers.udp.dst_port),
                            f.ib,
                            f.payload.len()
                        );
                        Some((line, Verdict::Ok))
                    }
                    Err(why) => Some(malformed(
                        line,
                        bytes,
                        &format!("RC_ACKNOWLEDGE with {len} bytes after its AETH: {why}"),
                    )),
                },
                // The ICRC covers the trailer: when it is wrong the bytes are not decoded.
                Err(ParseError::IcrcMismatch { .. }) => Some(malformed(
                    line,
                    bytes,
                    &format!("RC_ACKNOWLEDGE with {len} bytes after its AETH, not decoded"),
                )),
                Err(e) => Some(malformed(line, bytes, &e)),
            }
        }
        Err(e) => Some(malformed(line, bytes, &e)),
    }
}

/// xroce's selective acknowledgement after the AETH of `f` (an ACKNOWLEDGE whose ICRC was
/// verified), as ` sack(first-last, ...)` (and `, highest PSN` when it says the highest
/// held PSN lies beyond its ranges); or why it is none: the AETH is no PSN sequence
/// error NAK, or the bytes do not parse.
fn selective_ack(f: &Frame<'_>) -> std::result::Result<String, String> {
    use xroce_wire::{NakCode, SackRepr, Syndrome};
    let syndrome = f.ib.aeth.map(|a| a.syndrome);
    if syndrome != Some(Syndrome::Nak(NakCode::PsnSequenceError)) {
        return Err("a selective acknowledgement follows only a PSN sequence error NAK".into());
    }
    let sack = SackRepr::parse(f.payload).map_err(|e| e.to_string())?;
    let ranges: Vec<String> = sack
        .ranges()
        .iter()
        .map(|(first, last)| format!("{first}-{last}"))
        .collect();
    let beyond = match sack.highest() {
        Some(highest) if sack.beyond() > 0 => format!(", highest {highest}"),
        _ => String::new(),
    };
    Ok(format!(" sack({}{beyond})", ranges.join(", ")))
}

/// The line of a RoCEv2 frame that does not parse (`line` holds its number): the endpoints
/// when the envelope is fine, why, and the ICRC verdict when it holds a BTH and an ICRC.
fn malformed(mut line: String, bytes: &[u8], why: &dyn std::fmt::Display) -> (String, Verdict) {
    // Show the endpoints when the envelope itself is fine.
    if let Ok(h) = FrameRepr::parse(bytes) {
        let _ = write!(
            line,
            "{} -> {} ",
            endpoint(h.ip.src_addr(), h.udp.src_port),
            endpoint(h.ip.dst_addr(), h.udp.dst_port)
        );
    }
    let _ = write!(line, "malformed: {why}");
    // The ICRC covers the headers and the bytes as they are, whatever they mean: it
    // is reported whenever the envelope holds a BTH and an ICRC. A frame whose bits
    // were flipped (say, into a reserved opcode) is then seen for what it is.
    match xroce_wire::icrc::verify_frame(bytes) {
        Ok(()) => {
            line.push_str(" icrc=ok");
            (line, Verdict::Malformed)
        }
        Err(ParseError::IcrcMismatch { found, computed }) => {
            let _ = write!(
                line,
                " icrc=BAD (carried {found:#010x}, computed {computed:#010x})"
            );
            (line, Verdict::BadIcrc)
        }
        Err(_) => (line, Verdict::Malformed),
    }
}

/// What a MAD to QP1 says, when it is a CM message: the message, its comm IDs, and the
/// fields that decide a connection (service ID and the rdma_cm port behind it, the IP CM
/// header's addresses, QPN, starting PSN, reject reason, SIDR status).
///
/// ` CM REQ comm=0xaad7e16b tid=0x26be1d7aa svc=0x1061c06 (tcp port 7174) 10.77.0.3:35151 -> 10.77.0.2 qpn=0x00001a psn=0xffe37a`
pub fn cm_text(mad: &[u8]) -> String {
    use xroce_wire::cm::{CmMad, CmMessage, IpCmPacket, IpCmRepr, ServiceId};
    let mad = match CmMad::parse(mad) {
        Ok(m) => m,
        Err(e) => return format!(" MAD ({e})"),
    };
    let svc = |s: ServiceId| match s.to_rdma_cm() {
        Some((ps, port)) => format!("svc={:#x} ({ps:?} port {port})", s.0),
        None => format!("svc={:#x}", s.0),
    };
    let tid = mad.transaction_id;
    let body = match mad.message {
        CmMessage::Req(r) => {
            let ip = IpCmPacket::new_checked(r.private_data)
                .ok()
                .and_then(|p| IpCmRepr::parse(&p).ok())
                .map(|h| format!(" {} -> {}", endpoint(h.src_addr, h.src_port), h.dst_addr))
                .unwrap_or_default();
            format!(
                "REQ comm={} {}{ip} qpn={:#08x} psn={:#08x} mtu={} retry={} rnr={} ack_timeout={}",
                r.local_comm_id,
                svc(r.service_id),
                r.local_qpn.value(),
                r.starting_psn.value(),
                r.path_mtu,
                r.retry_count,
                r.rnr_retry_count,
                r.primary_path.local_ack_timeout,
            )
        }
        CmMessage::Rep(r) => format!(
            "REP comm={} remote={} qpn={:#08x} psn={:#08x} ack_delay={}",
            r.local_comm_id,
            r.remote_comm_id,
            r.local_qpn.value(),
            r.starting_psn.value(),
            r.target_ack_delay
        ),
        CmMessage::Rtu(r) => format!("RTU comm={} remote={}", r.local_comm_id, r.remote_comm_id),
        CmMessage::Rej(r) => format!(
            "REJ comm={} remote={} reason={} ({})",
            r.local_comm_id,
            r.remote_comm_id,
            r.reason.0,
            r.reason.name().unwrap_or("reserved")
        ),
        CmMessage::Mra(r) => format!(
            "MRA comm={} remote={} timeout={}",
            r.local_comm_id, r.remote_comm_id, r.service_timeout
        ),
        CmMessage::Dreq(r) => format!(
            "DREQ comm={} remote={} qpn={:#08x}",
            r.local_comm_id,
            r.remote_comm_id,
            r.remote_qpn.value()
        ),
        CmMessage::Drep(r) => format!("DREP comm={} remote={}", r.local_comm_id, r.remote_comm_id),
        CmMessage::SidrReq(r) => format!("SIDR_REQ id={} {}", r.request_id, svc(r.service_id)),
        CmMessage::SidrRep(r) => format!(
            "SIDR_REP id={} status={} qpn={:#08x} qkey={:#x}",
            r.request_id,
            r.status.0,
            r.qpn.value(),
            r.qkey.0
        ),
    };
    format!(" CM {body} tid={tid:#x}")
}

/// Calls `each` with the frame number and bytes of every packet in a pcap or pcapng file.
pub fn for_each_frame(path: &Path, mut each: impl FnMut(usize, &[u8])) -> Result<()> {
    let mut file =
        BufReader::new(File::open(path).with_context(|| format!("opening {}", path.display()))?);
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic)
        .with_context(|| format!("{}: too short for a capture file", path.display()))?;
    let file =
        BufReader::new(File::open(path).with_context(|| format!("opening {}", path.display()))?);
    if magic == [0x0a, 0x0d, 0x0d, 0x0a] {
        let mut reader =
            PcapNgReader::new(file).with_context(|| format!("{}: bad pcapng", path.display()))?;
        let mut number = 0;
        while let Some(block) = reader.next_block() {
            let block = block
                .with_context(|| format!("{}: bad pcapng block", path.display()))?
                .into_owned();
            let (interface, data) = match &block {
                Block::EnhancedPacket(p) => (p.interface_id, &p.data),
                Block::SimplePacket(p) => (0, &p.data),
                Block::Packet(p) => (u32::from(p.interface_id), &p.data),
                _ => continue,
            };
            number += 1;
            let linktype = reader
                .interfaces()
                .get(interface as usize)
                .map(|i| i.linktype);
            if linktype != Some(DataLink::ETHERNET) {
                bail!(
                    "{}: packet {number} is on link type {linktype:?}; only Ethernet is supported",
                    path.display()
                );
            }
            each(number, data);
        }
    } else {
        let mut reader = PcapReader::new(file)
            .with_context(|| format!("{}: not a pcap file", path.display()))?;
        let datalink = reader.header().datalink;
        if datalink != DataLink::ETHERNET {
            bail!(
                "{}: link type {datalink:?}; only Ethernet is supported",
                path.display()
            );
        }
        let mut number = 0;
        while let Some(packet) = reader.next_packet() {
            let packet = packet.with_context(|| format!("{}: bad pcap record", path.display()))?;
            number += 1;
            each(number, &packet.data);
        }
    }
    Ok(())
}

/// Prints one line per RoCEv2 packet of every file, then the tally; fails if any packet is
/// malformed or carries a bad ICRC.
pub fn run(files: &[PathBuf]) -> Result<Tally> {
    let mut total = Tally::default();
    let several = files.len() > 1;
    for path in files {
        if several {
            println!("==> {} <==", path.display());
        }
        for_each_frame(path, |number, bytes| {
            if let Some((line, verdict)) = describe(number, bytes) {
                println!("{line}");
                total.add(verdict);
            }
        })?;
    }
    println!("{total}");
    if total.bad_icrc + total.malformed > 0 {
        bail!("{} bad ICRC, {} malformed", total.bad_icrc, total.malformed);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rc_pingpong.pcap frame 19: an ACK from 10.77.0.2 to 10.77.0.3.
    const ACK: [u8; 62] = [
        0x52, 0x54, 0x00, 0x77, 0x00, 0x03, 0x52, 0x54, 0x00, 0x77, 0x00, 0x02, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x30, 0x9c, 0xf4, 0x40, 0x00, 0x40, 0x11, 0x89, 0x2a, 0x0a, 0x4d, 0x00, 0x02,
        0x0a, 0x4d, 0x00, 0x03, 0xc1, 0x21, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, 0x11, 0x00, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x58, 0xf0, 0x5d, 0x1f, 0x00, 0x00, 0x01, 0x35, 0x25,
        0x8f, 0x66,
    ];

    #[test]
    fn good_packet_line() {
        let (line, verdict) = describe(19, &ACK).unwrap();
        assert_eq!(
            line,
            "   19 10.77.0.2:49441 -> 10.77.0.3:4791 RC_ACKNOWLEDGE qp=0x000011 psn=0x58f05d \
             ack=0 aeth(ACK credits=31 msn=1) len=0 icrc=ok"
        );
        assert_eq!(verdict, Verdict::Ok);
    }

    /// rxe's CM MADs of `rping`, one line each with what decides the connection.
    #[test]
    fn cm_mads_are_decoded() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../dataplane/wire/tests/fixtures/rping_rdma_cm.pcap");
        let mut lines = Vec::new();
        for_each_frame(&path, |n, bytes| {
            if let Some((line, _)) = describe(n, bytes)
                && line.contains(" CM ")
            {
                lines.push(line);
            }
        })
        .unwrap();
        assert_eq!(lines.len(), 5, "{lines:#?}");
        let expect = [
            "CM REQ comm=0xaad7e16b svc=0x1061c06 (Tcp port 7174) 10.77.0.3:35151 -> 10.77.0.2 \
             qpn=0x00001a psn=0xffe37a mtu=3 retry=7 rnr=7 ack_timeout=19 tid=0x26be1d7aa icrc=ok",
            "CM REP comm=0x88726210 remote=0xaad7e16b qpn=0x00001a psn=0xa8d369 ack_delay=15 \
             tid=0x26be1d7aa icrc=ok",
            "CM RTU comm=0xaad7e16b remote=0x88726210 tid=0x26be1d7aa icrc=ok",
            "CM DREQ comm=0xaad7e16b remote=0x88726210 qpn=0x00001a tid=0x26be1d7aa icrc=ok",
            "CM DREP comm=0x88726210 remote=0xaad7e16b tid=0x26be1d7aa icrc=ok",
        ];
        for (line, tail) in lines.iter().zip(expect) {
            assert!(line.ends_with(tail), "{line}\n  should end with\n{tail}");
        }
    }

    #[test]
    fn flipped_bit_is_bad_icrc() {
        let mut f = ACK;
        f[57] ^= 0x01; // MSN 1 -> 0
        let computed = Frame::parse_unverified(&f).unwrap().computed_icrc();
        assert_ne!(computed, 0x668f_2535);
        let (line, verdict) = describe(7, &f).unwrap();
        assert_eq!(verdict, Verdict::BadIcrc);
        assert_eq!(
            line,
            format!(
                "    7 10.77.0.2:49441 -> 10.77.0.3:4791 RC_ACKNOWLEDGE qp=0x000011 psn=0x58f05d \
                 ack=0 aeth(ACK credits=31 msn=0) len=0 icrc=BAD (carried 0x668f2535, \
                 computed {computed:#010x})"
            )
        );
    }

    #[test]
    fn malformed_packet_line() {
        let mut f = ACK;
        f[42] = 0x15; // reserved opcode
        // With an ICRC made for it, the frame is only malformed.
        let icrc = xroce_wire::icrc::compute_frame(&f).unwrap();
        f[58..62].copy_from_slice(&icrc.to_le_bytes());
        let (line, verdict) = describe(3, &f).unwrap();
        assert_eq!(verdict, Verdict::Malformed);
        assert_eq!(
            line,
            "    3 10.77.0.2:49441 -> 10.77.0.3:4791 malformed: opcode 0x15 is reserved or not \
             supported icrc=ok"
        );
        let (line, verdict) = describe(4, &ACK[..40]).unwrap();
        assert_eq!(verdict, Verdict::Malformed);
        assert!(
            line.starts_with("    4 malformed: IPv4 total length 48"),
            "{line}"
        );
    }

    /// A bit flipped on the wire that turns the opcode into a reserved one: the frame does
    /// not parse, and its ICRC says why.
    #[test]
    fn a_damaged_frame_that_does_not_parse_still_has_its_icrc_checked() {
        let mut f = ACK;
        f[42] ^= 0x04; // RC_ACKNOWLEDGE 0x11 -> 0x15, reserved
        let computed = xroce_wire::icrc::compute_frame(&f).unwrap();
        let (line, verdict) = describe(8, &f).unwrap();
        assert_eq!(verdict, Verdict::BadIcrc);
        assert_eq!(
            line,
            format!(
                "    8 10.77.0.2:49441 -> 10.77.0.3:4791 malformed: opcode 0x15 is reserved or \
                 not supported icrc=BAD (carried 0x668f2535, computed {computed:#010x})"
            )
        );
        // A frame too short to hold a BTH and an ICRC has none to check.
        let (line, verdict) = describe(9, &ACK[..40]).unwrap();
        assert_eq!(verdict, Verdict::Malformed);
        assert!(!line.contains("icrc"), "{line}");
    }

    /// Recomputes the IPv4 header checksum of an edited frame.
    fn fix_ipv4_checksum(f: &mut [u8]) {
        f[24] = 0;
        f[25] = 0;
        let mut sum: u32 = f[14..34]
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    }

    #[test]
    fn other_traffic_is_skipped() {
        let mut tcp = ACK;
        tcp[23] = 6;
        fix_ipv4_checksum(&mut tcp);
        assert_eq!(describe(1, &tcp), None);
        let mut arp = ACK;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(describe(1, &arp), None);
        let mut other_port = ACK;
        other_port[36..38].copy_from_slice(&53u16.to_be_bytes());
        assert_eq!(describe(1, &other_port), None);
        // The edit helper is right: the untouched frame keeps its checksum.
        let mut same = ACK;
        fix_ipv4_checksum(&mut same);
        assert_eq!(same, ACK);
    }

    #[test]
    fn tally_line() {
        let mut t = Tally::default();
        t.add(Verdict::Ok);
        t.add(Verdict::Ok);
        t.add(Verdict::BadIcrc);
        t.add(Verdict::Malformed);
        assert_eq!(t.to_string(), "4 packets, 2 ok, 1 bad icrc, 1 malformed");
    }
}
