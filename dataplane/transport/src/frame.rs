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
    let frame = Frame::parse(bytes).map_err(|e| match e {
        ParseError::IcrcMismatch { .. } => Counter::rcvd_icrc_err,
        _ => Counter::rcvd_malformed,
    })?;
    // rxe's `rxe_chk_dgid`: the destination must be one of the port's GIDs. The queue
    // pair's own checks (its path, its keys) come later, once it is found
    // (`receive::check_header`).
    let dgid = Gid::from_ip(frame.headers.ip.dst_addr());
    if !gids.contains(&dgid) {
        return Err(Counter::rcvd_wrong_dgid);
    }
    let h = Headers::from_wire(&frame.ib).ok_or(Counter::rcvd_unsupported_opcode)?;
    let ip_start = frame.headers.ethernet.header_len();
    let ip_header = &bytes[ip_start..ip_start + frame.headers.ip.header_len()];
    let net = Net {
        ip_header,
        sgid: Gid::from_ip(frame.headers.ip.src_addr()),
        dgid,
        ipv6: matches!(frame.headers.ip, IpRepr::Ipv6(_)),
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
    #[inline]
    fn begin(&mut self, headers: &Headers, path: &Path, payload_len: usize) -> Option<&mut [u8]> {
        self.pending = None;
        let ib = headers.to_wire()?;
        self.refresh(path, headers.dest_qpn, headers.transport)?;
        let repr = self.cache.as_ref()?.template.repr();
        let start = repr.header_len();
        let ipv4 = matches!(repr.ip, IpRepr::Ipv4(_));
        let header_len = ib.emit(self.buf.get_mut(start..)?, payload_len).ok()?;
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

    fn reaches(&self, path: &Path) -> bool {
        self.origin
            .gids
            .get(usize::from(path.sgid_index))
            .is_some_and(|sgid| sgid.to_ipv4().is_some() == path.dgid.to_ipv4().is_some())
    }

    fn commit(&mut self) {
        if let Some((ib_len, id)) = self.pending.take()
            && let Some(cache) = self.cache.as_ref()
        {
            self.committed = cache.template.emit(self.buf, ib_len, id).unwrap_or(0);
        }
    }
}
