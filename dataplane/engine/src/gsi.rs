//! QP1, the general services interface: the queue pair every RoCE port has for management
//! datagrams, which carries the connection manager's MADs.
//!
//! QP1 is a UD queue pair the daemon owns on behalf of every application. Its frames do not
//! belong to any application's queue pair, so the pollers pass them to the control plane
//! as they arrive, whole; [`parse`] checks one (ICRC, UD SEND Only to QP 1 with the GSI
//! Q_Key, a 256-byte MAD) and says where it came from; [`GsiSender`] wraps a MAD for a peer's
//! QP1 as rxe does (IBTA 13.5.1; rxe decides the rest): UDP source port 55410, IPv4 with DF,
//! TTL 64 and an identification that counts up, BTH with AckReq set and a PSN that counts
//! up per sender, DETH with Q_Key 0x80010000 and source QP 1.
//!
//! Nothing here does I/O: frames come in and go out as bytes.

use std::net::IpAddr;

use xroce_cm::MadAddress;
use xroce_wire::mad::{GSI_QKEY, GSI_QPN, MAD_LEN};
use xroce_wire::source_port::rxe_initial_udp_source_port;
use xroce_wire::{
    BthRepr, DethRepr, EthernetAddress, Frame, FrameRepr, Gid, IbRepr, IpRepr, Opcode, ParseError,
    Pkey, Psn,
};

/// A MAD that came to QP1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceivedMad {
    /// Where it came from (and where an answer goes).
    pub from: MadAddress,
    /// The Ethernet address it came from: a reply can go back there before the kernel's
    /// neighbour table knows the peer.
    pub src_mac: [u8; 6],
    /// The MAD.
    pub mad: [u8; MAD_LEN],
}

/// Why a frame for QP1 was dropped (each is a counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GsiDrop {
    /// The frame did not parse, or its ICRC was wrong.
    #[error("malformed frame or bad ICRC")]
    Malformed,
    /// The destination address is not one of the port's GIDs (rxe's `rxe_chk_dgid`).
    #[error("destination address is not one of the port's GIDs")]
    WrongDgid,
    /// Not a UD SEND Only with a DETH.
    #[error("not a UD SEND Only")]
    NotUdSend,
    /// The P_Key is not in the port's P_Key table (IBTA 10.9.3; rxe searches the table for
    /// QP1, whose one entry is 0xffff).
    #[error("P_Key is not in the port's P_Key table")]
    BadPkey,
    /// The DETH's Q_Key is not the GSI's (IBTA 13.5.3: QP1 takes only Q_Key 0x80010000).
    #[error("Q_Key is not 0x80010000")]
    BadQkey,
    /// The payload is not one 256-byte MAD.
    #[error("payload is not one 256-byte MAD")]
    BadLength,
}

/// Takes a frame for QP1 apart, checked as rxe checks one (its destination is one of the
/// port's `gids`, the opcode is UD's, the P_Key and the Q_Key match): its MAD and where it
/// came from.
pub fn parse(frame: &[u8], gids: &[Gid]) -> Result<ReceivedMad, GsiDrop> {
    let f = Frame::parse(frame).map_err(|_: ParseError| GsiDrop::Malformed)?;
    if !gids.contains(&Gid::from_ip(f.headers.ip.dst_addr())) {
        return Err(GsiDrop::WrongDgid);
    }
    if f.ib.bth.opcode != Opcode::UD_SEND_ONLY {
        return Err(GsiDrop::NotUdSend);
    }
    if f.ib.bth.pkey.0 & 0x7fff != 0x7fff {
        return Err(GsiDrop::BadPkey);
    }
    let deth = f.ib.deth.ok_or(GsiDrop::NotUdSend)?;
    if deth.qkey != GSI_QKEY {
        return Err(GsiDrop::BadQkey);
    }
    let mad: [u8; MAD_LEN] = f.payload.try_into().map_err(|_| GsiDrop::BadLength)?;
    let (local, remote) = match f.headers.ip {
        IpRepr::Ipv4(ip) => (IpAddr::V4(ip.dst_addr), IpAddr::V4(ip.src_addr)),
        IpRepr::Ipv6(ip) => (IpAddr::V6(ip.dst_addr), IpAddr::V6(ip.src_addr)),
    };
    Ok(ReceivedMad {
        from: MadAddress {
            local,
            remote,
            remote_qpn: deth.src_qp,
            pkey_index: 0,
        },
        src_mac: f.headers.ethernet.src_addr.0,
        mad,
    })
}

/// QP1's sending side: the PSN and IPv4 identification that count up with every MAD.
#[derive(Clone, Debug)]
pub struct GsiSender {
    psn: Psn,
    identification: u16,
}

impl Default for GsiSender {
    fn default() -> GsiSender {
        GsiSender::new()
    }
}

impl GsiSender {
    /// A sender whose first MAD has PSN 0, as a freshly loaded rxe's.
    pub fn new() -> GsiSender {
        GsiSender {
            psn: Psn::new(0),
            identification: 0,
        }
    }

    /// The frame that carries `mad` to `to` from the port with MAC `src_mac`, through the
    /// next hop `dst_mac`. `None` when the addresses are of different families.
    pub fn frame(
        &mut self,
        to: &MadAddress,
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        mad: &[u8; MAD_LEN],
    ) -> Option<Vec<u8>> {
        // rxe gives QP1 the source port it gives every UD QP at creation: 55410.
        let sport = rxe_initial_udp_source_port(GSI_QPN);
        let (src, dst) = (EthernetAddress(src_mac), EthernetAddress(dst_mac));
        let mut envelope = match (to.local, to.remote) {
            (IpAddr::V4(l), IpAddr::V4(r)) => FrameRepr::ipv4(src, dst, l, r, sport),
            (IpAddr::V6(l), IpAddr::V6(r)) => FrameRepr::ipv6(src, dst, l, r, sport),
            _ => return None,
        };
        if let IpRepr::Ipv4(ip) = &mut envelope.ip {
            ip.identification = self.identification;
        }
        let mut bth = BthRepr::new(Opcode::UD_SEND_ONLY, to.remote_qpn, self.psn);
        bth.pkey = Pkey::DEFAULT;
        bth.ack_request = true;
        let mut ib = IbRepr::new(bth);
        ib.deth = Some(DethRepr {
            qkey: GSI_QKEY,
            src_qp: GSI_QPN,
        });
        let mut buf = vec![0u8; envelope.frame_len(ib.header_len() + MAD_LEN)];
        let len = envelope.emit_packet(&mut buf, &ib, mad).ok()?;
        buf.truncate(len);
        self.psn = self.psn.next();
        self.identification = self.identification.wrapping_add(1);
        Some(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames of `rping_rdma_cm.pcap` (rxe on both ends): 10.77.0.3 -> 10.77.0.2, the REQ,
    /// the RTU (PSN 1) and the DREQ (PSN 2).
    fn capture() -> Vec<Vec<u8>> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../wire/tests/fixtures/rping_rdma_cm.pcap"
        );
        let Ok(file) = std::fs::File::open(path) else {
            return Vec::new();
        };
        let mut reader = pcap_file::pcap::PcapReader::new(file).unwrap();
        let mut frames = Vec::new();
        while let Some(p) = reader.next_packet() {
            frames.push(p.unwrap().data.into_owned());
        }
        frames
    }

    #[test]
    fn rxe_cm_mads_parse_and_are_rebuilt_byte_for_byte() {
        let frames = capture();
        let gsi: Vec<&Vec<u8>> = frames
            .iter()
            .filter(|f| crate::handoff::dest_qpn(f) == Some(1))
            .collect();
        assert_eq!(gsi.len(), 5, "REQ, REP, RTU, DREQ, DREP");
        for f in gsi {
            let dst = Frame::parse(f).unwrap().headers.ip.dst_addr();
            let got = parse(f, &[Gid::from_ip(dst)]).unwrap();
            assert_eq!(got.from.remote_qpn, GSI_QPN);
            // Rebuild it with the capture's PSN and identification.
            let parsed = Frame::parse(f).unwrap();
            let IpRepr::Ipv4(ip) = parsed.headers.ip else {
                panic!("IPv4 capture")
            };
            let mut sender = GsiSender {
                psn: parsed.ib.bth.psn,
                identification: ip.identification,
            };
            let to = MadAddress {
                local: got.from.remote,
                remote: got.from.local,
                remote_qpn: GSI_QPN,
                pkey_index: 0,
            };
            let rebuilt = sender
                .frame(
                    &to,
                    got.src_mac,
                    parsed.headers.ethernet.dst_addr.0,
                    &got.mad,
                )
                .unwrap();
            assert_eq!(rebuilt[..], f[..rebuilt.len()], "frame as rxe sent it");
        }
    }

    #[test]
    fn the_sender_counts_up_and_refuses_mixed_families() {
        let mut s = GsiSender::new();
        let to = MadAddress::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        let a = s.frame(&to, [2; 6], [4; 6], &[0; MAD_LEN]).unwrap();
        let b = s.frame(&to, [2; 6], [4; 6], &[0; MAD_LEN]).unwrap();
        let (fa, fb) = (Frame::parse(&a).unwrap(), Frame::parse(&b).unwrap());
        assert_eq!(fa.ib.bth.psn.next(), fb.ib.bth.psn);
        assert_eq!(fa.headers.udp.src_port, 55410);
        let ours = [Gid::from_ip([10, 0, 0, 2].into())];
        assert_eq!(
            parse(&a, &ours).unwrap().from.local,
            IpAddr::from([10, 0, 0, 2])
        );
        let mixed = MadAddress::new([10, 0, 0, 1].into(), "fd00::1".parse().unwrap());
        assert!(s.frame(&mixed, [2; 6], [4; 6], &[0; MAD_LEN]).is_none());
    }

    #[test]
    fn frames_that_are_not_gsi_mads_are_dropped_by_name() {
        let mut s = GsiSender::new();
        let to = MadAddress::new([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        let mut f = s.frame(&to, [2; 6], [4; 6], &[7; MAD_LEN]).unwrap();
        let ours = [Gid::from_ip(to.remote)];
        assert!(parse(&f, &ours).is_ok());
        assert_eq!(
            parse(&f, &[Gid::from_ip(to.local)]),
            Err(GsiDrop::WrongDgid)
        );
        let mut parsed = Frame::parse(&f).unwrap();
        parsed.ib.bth.pkey = Pkey(0x1234);
        let mut foreign = vec![0u8; f.len()];
        let n = parsed
            .headers
            .emit_packet(&mut foreign, &parsed.ib, parsed.payload)
            .unwrap();
        assert_eq!(parse(&foreign[..n], &ours), Err(GsiDrop::BadPkey));
        let last = f.len() - 1;
        f[last] ^= 1;
        assert_eq!(parse(&f, &ours), Err(GsiDrop::Malformed));
        assert_eq!(parse(&f[..20], &ours), Err(GsiDrop::Malformed));
    }
}
