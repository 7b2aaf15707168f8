//! Frames: received Ethernet frames become packets, packets become frames.
//!
//! This is where the transport meets the wire crate's frame layer: the ICRC is verified on
//! receive (a bad one is counted and the frame dropped, which the transport treats as loss),
//! and on transmit the Ethernet/IP/UDP envelope is built around headers and a payload that a
//! queue pair wrote in place.

use xroce_wire::{
    EtherType, EthernetAddress, EthernetRepr, Frame, FrameRepr, FrameTemplate, Gid, IpRepr,
    Ipv4Repr, Ipv6Repr, ParseError, Qpn, UdpChecksum, UdpRepr, VlanTag, source_port,
};

use crate::attributes::{Path, QpType};
use crate::context::Emit;
use crate::counters::Counter;
use crate::packet::{Headers, Net, Packet};

/// The largest frame an endpoint emits: Ethernet with a VLAN tag (18), IPv6 (40), UDP (8),
/// the largest IB headers (BTH + AtomicETH = 40), a 4096-byte payload, pad and ICRC.
pub const MAX_FRAME: usize = 18 + 40 + 8 + 40 + 4096 + 3 + 4;

/// A received packet and the QP it is for.
#[derive(Debug)]
pub(crate) struct Received<'a> {
    pub(crate) packet: Packet<'a>,
    pub(crate) dest_qpn: Qpn,
}

/// Takes a received frame apart: it must parse, its ICRC verify and its destination be one
/// of `gids`. The error is the counter the drop lands in.
#[inline]
pub(crate) fn parse<'a>(bytes: &'a [u8], gids: &[Gid]) -> Result<Received<'a>, Counter> {
    let frame = match Frame::parse(bytes) {
        Ok(frame) => frame,
        Err(ParseError::IcrcMismatch { .. }) => return Err(Counter::rcvd_icrc_err),
        // An ACKNOWLEDGE with bytes after its AETH: xroce's selective acknowledgement,
        // which only a queue pair in selective repeat takes (the endpoint drops it as
        // malformed for any other, as every such frame was before). Any error is
        // `rcvd_malformed`, as it was.
        Err(ParseError::UnexpectedPayload { opcode, .. })
            if opcode == xroce_wire::Opcode::RC_ACKNOWLEDGE =>
        {
            Frame::parse_acknowledge_with_trailer(bytes).map_err(|_| Counter::rcvd_malformed)?
        }
        Err(_) => return Err(Counter::rcvd_malformed),
    };
    let ip_start = frame.headers.ethernet.header_len();
    let ipv6 = matches!(frame.headers.ip, IpRepr::Ipv6(_));
    let ip_header = &bytes[ip_start..ip_start + frame.headers.ip.header_len()];
    let (sgid, dgid) = addresses(ip_header, ipv6);
    // rxe's `rxe_chk_dgid`: the destination must be one of the port's GIDs. The queue
    // pair's own checks (its path, its keys) come later, once it is found
    // (`receive::check_header`). Compared as numbers: one comparison per GID of the table.
    // A multicast destination passes here as in rxe (`rdma_is_multicast_addr`): the
    // endpoint hands the packet to the queue pairs attached to its group.
    let wanted = u128::from_ne_bytes(dgid.0);
    if !gids.iter().any(|gid| u128::from_ne_bytes(gid.0) == wanted) && !dgid.is_multicast() {
        return Err(Counter::rcvd_wrong_dgid);
    }
    let h = Headers::from_wire(&frame.ib).ok_or(Counter::rcvd_unsupported_opcode)?;
    let net = Net {
        ip_header,
        sgid,
        dgid,
        ipv6,
    };
    Ok(Received {
        packet: Packet {
            h,
            payload: frame.payload,
            net,
        },
        dest_qpn: frame.ib.bth.dest_qp,
    })
}

/// The source and destination GIDs of a packet, read from its IP header (which parsed: 20
/// bytes or more for IPv4, 40 for IPv6): what `Gid::from_ip` of the parsed addresses gives,
/// taken from the bytes at once rather than rebuilt from the parsed fields.
#[inline]
fn addresses(ip_header: &[u8], ipv6: bool) -> (Gid, Gid) {
    let gid = |at: usize| {
        let mut g = [0u8; 16];
        if ipv6 {
            g.copy_from_slice(&ip_header[at..at + 16]);
        } else {
            g[10] = 0xff;
            g[11] = 0xff;
            g[12..].copy_from_slice(&ip_header[at..at + 4]);
        }
        Gid(g)
    };
    if ipv6 {
        (gid(8), gid(24))
    } else {
        (gid(12), gid(16))
    }
}

/// The envelope a queue pair last sent with, written once: a QP sends along one path until
/// it is modified (UD: until the next work request names another address), so its headers
/// are copied rather than built field by field for every frame.
#[derive(Debug, Clone)]
pub(crate) struct EnvelopeCache {
    /// Everything the envelope was made from that can change: the path, the source GID it
    /// names (the GID table can change), the peer QP (the UDP source port) and the QP type.
    key: (Path, Gid, Qpn, QpType),
    template: FrameTemplate,
}

/// The local end of the frames an endpoint sends: its MAC address, its GID table (a path
/// names its source GID by index) and the IP TTL / hop limit for paths that set none.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Origin<'a> {
    pub(crate) mac: [u8; 6],
    pub(crate) gids: &'a [Gid],
    pub(crate) default_hop_limit: u8,
}

/// Writes one packet into a frame buffer: the envelope from the path and the endpoint's
/// addresses, the IB headers, the payload the queue pair copies in, pad and ICRC.
pub(crate) struct FrameWriter<'b> {
    buf: &'b mut [u8],
    origin: Origin<'b>,
    ip_id: &'b mut u16,
    qpn: Qpn,
    cache: &'b mut Option<EnvelopeCache>,
    /// The IB part's length and the IPv4 identification of the frame begun.
    pending: Option<(usize, u16)>,
    committed: usize,
}

impl<'b> FrameWriter<'b> {
    pub(crate) fn new(
        buf: &'b mut [u8],
        origin: Origin<'b>,
        ip_id: &'b mut u16,
        qpn: Qpn,
        cache: &'b mut Option<EnvelopeCache>,
    ) -> FrameWriter<'b> {
        FrameWriter {
            buf,
            origin,
            ip_id,
            qpn,
            cache,
            pending: None,
            committed: 0,
        }
    }

    /// The length of the frame committed, 0 if none.
    pub(crate) fn committed(&self) -> usize {
        self.committed
    }

    /// Makes the cached template the one for `path` (keeps it if nothing it was made from
    /// has changed). `None` if the path cannot be reached from here.
    fn refresh(&mut self, path: &Path, remote: Qpn, transport: QpType) -> Option<()> {
        // A connected queue pair sends along its own path to its own peer, which change
        // only when it is modified, and its source GID only with the GID table: the
        // endpoint drops the cache then ([`crate::Endpoint::modify_qp`],
        // [`crate::Endpoint::set_gids`]), so a cache there is the right one without
        // comparing its key on every packet. A UD work request names its own destination.
        if transport != QpType::Ud
            && let Some(cache) = self.cache.as_ref()
        {
            debug_assert!(
                self.origin
                    .gids
                    .get(usize::from(path.sgid_index))
                    .is_some_and(|&sgid| cache.key == (*path, sgid, remote, transport)),
                "a connected queue pair's envelope changed without the endpoint dropping it"
            );
            return Some(());
        }
        let sgid = *self.origin.gids.get(usize::from(path.sgid_index))?;
        let key = (*path, sgid, remote, transport);
        if self.cache.as_ref().is_none_or(|cache| cache.key != key) {
            *self.cache = None;
            let template = FrameTemplate::new(self.envelope(sgid, path, remote, transport)?);
            *self.cache = Some(EnvelopeCache { key, template });
        }
        Some(())
    }

    fn envelope(
        &self,
        sgid: Gid,
        path: &Path,
        remote: Qpn,
        transport: QpType,
    ) -> Option<FrameRepr> {
        let hop_limit = if path.hop_limit == 0 {
            self.origin.default_hop_limit
        } else {
            path.hop_limit
        };
        let dscp = path.traffic_class >> 2;
        let ecn = path.traffic_class & 3;
        let ip = match (sgid.to_ipv4(), path.dgid.to_ipv4()) {
            (Some(src_addr), Some(dst_addr)) => IpRepr::Ipv4(Ipv4Repr {
                src_addr,
                dst_addr,
                protocol: 17,
                payload_len: 0,
                dscp,
                ecn,
                ttl: hop_limit,
                // Each frame gets its own (`FrameWriter::begin`).
                identification: 0,
                // rxe sets DF, so we do too.
                dont_fragment: true,
            }),
            (None, None) => IpRepr::Ipv6(Ipv6Repr {
                src_addr: sgid.to_ipv6(),
                dst_addr: path.dgid.to_ipv6(),
                next_header: 17,
                payload_len: 0,
                dscp,
                ecn,
                flow_label: path.flow_label & 0x000f_ffff,
                hop_limit,
            }),
            // An IPv4 source cannot reach an IPv6 destination or the other way round.
            _ => return None,
        };
        let src_port = if path.udp_sport != 0 {
            path.udp_sport
        } else if transport == QpType::Ud {
            // rxe gives a UD QP a source port when it creates it and keeps it whatever the
            // address handle says, so we do too (ud_pingpong.pcap: QP 0x12 sends from
            // 0xf806, not from the port its QP numbers would give).
            source_port::rxe_initial_udp_source_port(self.qpn)
        } else {
            source_port::udp_source_port(path.flow_label, self.qpn, remote)
        };
        Some(FrameRepr {
            ethernet: EthernetRepr {
                src_addr: EthernetAddress(self.origin.mac),
                dst_addr: EthernetAddress(path.dmac),
                vlan: path.vlan.map(|vid| VlanTag {
                    pcp: 0,
                    dei: false,
                    vid,
                }),
                ethertype: EtherType::IPV4,
            },
            ip,
            // rxe sends UDP checksum 0, so we do too.
            udp: UdpRepr {
                src_port,
                dst_port: xroce_wire::ROCE_V2_UDP_PORT,
                checksum: UdpChecksum::None,
            },
        })
    }
}

impl Emit for FrameWriter<'_> {
    // Out of line, as the optimizer chose before `begin_with_trailer` called it too:
    // inlined there, its own callees (the IB headers' emit) left the packet path.
    #[inline(never)]
    fn begin(&mut self, headers: &Headers, path: &Path, payload_len: usize) -> Option<&mut [u8]> {
        self.pending = None;
        self.refresh(path, headers.dest_qpn, headers.transport)?;
        let repr = self.cache.as_ref()?.template.repr();
        let start = repr.header_len();
        let ipv4 = matches!(repr.ip, IpRepr::Ipv4(_));
        let header_len = headers.write(self.buf.get_mut(start..)?, payload_len)?;
        let payload = start + header_len;
        if repr.frame_len(header_len + payload_len) > self.buf.len() {
            return None;
        }
        let id = if ipv4 {
            *self.ip_id = self.ip_id.wrapping_add(1);
            *self.ip_id
        } else {
            0
        };
        self.pending = Some((header_len + payload_len, id));
        self.buf.get_mut(payload..payload + payload_len)
    }

    #[cold]
    #[inline(never)]
    fn begin_with_trailer(
        &mut self,
        headers: &Headers,
        path: &Path,
        trailer_len: usize,
    ) -> Option<&mut [u8]> {
        // The headers as an ACKNOWLEDGE without payload (the pad stays 0: the trailer is
        // a multiple of 4 bytes), the trailer right behind them, inside the ICRC.
        if headers.kind != crate::packet::Kind::Ack || !trailer_len.is_multiple_of(4) {
            return None;
        }
        self.begin(headers, path, 0)?;
        let (ib_len, id) = self.pending.take()?;
        let repr = self.cache.as_ref()?.template.repr();
        let start = repr.header_len() + ib_len;
        if repr.frame_len(ib_len + trailer_len) > self.buf.len() {
            return None;
        }
        self.pending = Some((ib_len + trailer_len, id));
        self.buf.get_mut(start..start + trailer_len)
    }

    fn reaches(&self, path: &Path) -> bool {
        self.origin
            .gids
            .get(usize::from(path.sgid_index))
            .is_some_and(|sgid| sgid.is_ipv4() == path.dgid.is_ipv4())
    }

    #[inline(never)]
    fn commit(&mut self) {
        if let Some((ib_len, id)) = self.pending.take()
            && let Some(cache) = self.cache.as_ref()
        {
            self.committed = cache.template.emit(self.buf, ib_len, id).unwrap_or(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};
    use xroce_wire::{BthRepr, IbRepr, Opcode, Psn};

    /// The GIDs read from the header bytes are those of the parsed addresses, both families.
    #[test]
    fn addresses_are_the_parsed_ones() {
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let ib = IbRepr::new(BthRepr::new(Opcode::UD_SEND_ONLY, Qpn::new(5), Psn::new(1)));
        let v4 = FrameRepr::ipv4(
            mac,
            mac,
            Ipv4Addr::new(10, 1, 2, 3),
            Ipv4Addr::new(192, 168, 7, 9),
            0xc000,
        );
        let v6 = FrameRepr::ipv6(
            mac,
            mac,
            Ipv6Addr::new(0xfd00, 1, 2, 3, 4, 5, 6, 7),
            Ipv6Addr::new(0xfd00, 8, 9, 10, 11, 12, 13, 14),
            0xc000,
        );
        for repr in [v4, v6] {
            let mut ib = ib;
            ib.deth = Some(xroce_wire::DethRepr {
                qkey: xroce_wire::Qkey(1),
                src_qp: Qpn::new(2),
            });
            let mut buf = [0u8; 256];
            let len = repr.emit_packet(&mut buf, &ib, &[7; 8]).unwrap();
            let dgid = Gid::from_ip(repr.ip.dst_addr());
            let received = parse(&buf[..len], &[dgid]).unwrap();
            assert_eq!(received.packet.net.sgid, Gid::from_ip(repr.ip.src_addr()));
            assert_eq!(received.packet.net.dgid, dgid);
            assert_eq!(received.packet.net.ipv6, matches!(repr.ip, IpRepr::Ipv6(_)));
            assert_eq!(
                parse(&buf[..len], &[Gid::from_ip(repr.ip.src_addr())]).unwrap_err(),
                Counter::rcvd_wrong_dgid
            );
        }
    }
}
