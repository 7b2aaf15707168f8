//! Packets as the transport roles see them: the BTH fields and extension headers of one
//! RoCEv2 packet, plus the payload.
//!
//! The extension headers are the wire crate's own representations ([`RethRepr`],
//! [`AethRepr`], …). What this module adds is the roles' classification of an opcode — its
//! transport service, its [`Kind`] and its [`Position`] in a message — asked of the wire
//! crate's opcode table in both directions, never by matching opcode numbers: a received
//! opcode is looked up ([`Opcode::info`]), an opcode to send is found from what the packet
//! does ([`Opcode::find`]).

use xroce_wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, DethRepr, Gid, IbRepr, IethRepr, ImmDtRepr, Opcode,
    OpcodeInfo, Operation, Pkey, Position, Psn, Qpn, RethRepr, Transport,
};

use crate::attributes::QpType;
use crate::completion::NetworkHeader;

/// What a packet does: the operations of the opcode table the transport implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A SEND (any position, with or without immediate or invalidate).
    Send,
    /// An RDMA WRITE (any position, with or without immediate).
    Write,
    /// An RDMA READ request.
    ReadRequest,
    /// An RDMA READ response (any position).
    ReadResponse,
    /// An ACK or NAK (ACKNOWLEDGE).
    Ack,
    /// An ATOMIC ACKNOWLEDGE.
    AtomicAck,
    /// A compare-and-swap request.
    CompareSwap,
    /// A fetch-and-add request.
    FetchAdd,
}

impl Kind {
    /// Whether packets of this kind are responses (go to the completer).
    pub fn is_response(self) -> bool {
        matches!(self, Kind::ReadResponse | Kind::Ack | Kind::AtomicAck)
    }

    /// Whether this is an atomic request.
    pub fn is_atomic(self) -> bool {
        matches!(self, Kind::CompareSwap | Kind::FetchAdd)
    }

    /// Whether this is a READ or atomic request: one that takes a responder resource.
    pub fn is_read_or_atomic(self) -> bool {
        matches!(self, Kind::ReadRequest | Kind::CompareSwap | Kind::FetchAdd)
    }

    /// The opcode table's operation.
    const fn operation(self) -> Operation {
        match self {
            Kind::Send => Operation::Send,
            Kind::Write => Operation::RdmaWrite,
            Kind::ReadRequest => Operation::RdmaReadRequest,
            Kind::ReadResponse => Operation::RdmaReadResponse,
            Kind::Ack => Operation::Acknowledge,
            Kind::AtomicAck => Operation::AtomicAcknowledge,
            Kind::CompareSwap => Operation::CompareSwap,
            Kind::FetchAdd => Operation::FetchAdd,
        }
    }
}

/// The transport headers of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers {
    /// The transport service of the opcode.
    pub transport: QpType,
    /// What the packet does.
    pub kind: Kind,
    /// Its position in the message.
    pub pos: Position,
    /// BTH SE.
    pub solicited: bool,
    /// BTH A.
    pub ack_req: bool,
    /// BTH PadCnt.
    pub pad: u8,
    /// BTH P_Key.
    pub pkey: Pkey,
    /// BTH DestQP.
    pub dest_qpn: Qpn,
    /// BTH PSN.
    pub psn: Psn,
    /// RETH.
    pub reth: Option<RethRepr>,
    /// AETH.
    pub aeth: Option<AethRepr>,
    /// AtomicETH.
    pub atomic: Option<AtomicEthRepr>,
    /// AtomicAckETH: the original value.
    pub atomic_ack: Option<AtomicAckEthRepr>,
    /// ImmDt.
    pub imm: Option<ImmDtRepr>,
    /// IETH: the rkey to invalidate.
    pub ieth: Option<IethRepr>,
    /// DETH.
    pub deth: Option<DethRepr>,
}

impl Headers {
    /// Headers with only the BTH fields that every packet has.
    pub fn new(transport: QpType, kind: Kind, pos: Position, dest_qpn: Qpn, psn: Psn) -> Headers {
        Headers {
            transport,
            kind,
            pos,
            solicited: false,
            ack_req: false,
            pad: 0,
            pkey: Pkey::DEFAULT,
            dest_qpn,
            psn,
            reth: None,
            aeth: None,
            atomic: None,
            atomic_ack: None,
            imm: None,
            ieth: None,
            deth: None,
        }
    }
}

/// The network layer a packet arrived over: its addresses, which a connected queue pair
/// checks against its path, and its IP header, for UD receives (the 40-byte GRH area) and
/// address handles built from completions.
#[derive(Clone, Copy, Debug)]
pub struct Net<'a> {
    /// The raw IP header: 20 bytes for IPv4 (options excluded), 40 for IPv6.
    pub ip_header: &'a [u8],
    /// The source GID (from the source IP address).
    pub sgid: Gid,
    /// The destination GID (from the destination IP address).
    pub dgid: Gid,
    /// Whether the packet came over IPv6 (its GIDs may still be IPv4-mapped in form).
    pub ipv6: bool,
}

/// A received packet.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    /// Its headers.
    pub h: Headers,
    /// Its payload (pad and ICRC removed).
    pub payload: &'a [u8],
    /// Its network layer.
    pub net: Net<'a>,
}

impl Packet<'_> {
    /// Whether it is an acknowledgement with bytes after its AETH (xroce's selective
    /// acknowledgement, or garbage): ACKNOWLEDGE carries no payload otherwise.
    #[inline]
    pub fn has_trailer(&self) -> bool {
        !self.payload.is_empty() && self.h.kind == Kind::Ack
    }

    /// The 40 bytes a UD receive places in front of the payload, as rxe and RDMA NICs do:
    /// the IPv6 header, or 20 zero bytes followed by the IPv4 header.
    pub fn grh(&self) -> [u8; 40] {
        let mut grh = [0u8; 40];
        let ip = self.net.ip_header;
        match self.network_header() {
            NetworkHeader::Ipv6 => grh.copy_from_slice(&ip[..40]),
            NetworkHeader::Ipv4 => {
                let n = ip.len().min(20);
                grh[20..20 + n].copy_from_slice(&ip[..n]);
            }
        }
        grh
    }

    /// The network header it arrived with: only an IPv6 header is 40 bytes long.
    pub fn network_header(&self) -> NetworkHeader {
        if self.net.ip_header.len() >= 40 {
            NetworkHeader::Ipv6
        } else {
            NetworkHeader::Ipv4
        }
    }
}

// ---------------------------------------------------------------------------------------
// Conversion to and from the wire crate's representation.

/// The roles' classification of an opcode, from the opcode table. `None` for opcodes the
/// transport does not implement (RD, CNP, reserved, XRC, FLUSH, ATOMIC WRITE).
pub(crate) const fn classify(info: &OpcodeInfo) -> Option<(QpType, Kind, Position)> {
    let transport = match info.transport {
        Transport::Rc => QpType::Rc,
        Transport::Uc => QpType::Uc,
        Transport::Ud => QpType::Ud,
        _ => return None,
    };
    let kind = match info.operation {
        Operation::Send => Kind::Send,
        Operation::RdmaWrite => Kind::Write,
        Operation::RdmaReadRequest => Kind::ReadRequest,
        Operation::RdmaReadResponse => Kind::ReadResponse,
        Operation::Acknowledge => Kind::Ack,
        Operation::AtomicAcknowledge => Kind::AtomicAck,
        Operation::CompareSwap => Kind::CompareSwap,
        Operation::FetchAdd => Kind::FetchAdd,
        _ => return None,
    };
    match info.position {
        Some(position) => Some((transport, kind, position)),
        None => None,
    }
}

/// [`classify`] of every opcode, worked out when the crate is compiled: a received packet's
/// classification is one load.
static CLASSES: [Option<(QpType, Kind, Position)>; 256] = {
    let mut classes = [None; 256];
    let mut i = 0;
    while i < 256 {
        classes[i] = classify(&xroce_wire::opcode::OPCODE_TABLE[i]);
        i += 1;
    }
    classes
};

/// The opcode table's transport service of a queue pair type.
const fn transport_of(qp_type: QpType) -> Transport {
    match qp_type {
        QpType::Rc => Transport::Rc,
        QpType::Uc => Transport::Uc,
        QpType::Ud => Transport::Ud,
    }
}

impl Headers {
    /// The roles' view of parsed wire headers; `None` for opcodes the transport does not
    /// implement.
    // Forced inline: built in its caller's frame, the headers are not copied once more per
    // received packet (1.4 % of the pipeline benchmark's instructions, callgrind).
    #[inline(always)]
    pub(crate) fn from_wire(ib: &IbRepr) -> Option<Headers> {
        let (transport, kind, pos) = CLASSES[usize::from(ib.bth.opcode.0)]?;
        let b = &ib.bth;
        Some(Headers {
            transport,
            kind,
            pos,
            solicited: b.solicited_event,
            ack_req: b.ack_request,
            pad: b.pad_count,
            pkey: b.pkey,
            dest_qpn: b.dest_qp,
            psn: b.psn,
            reth: ib.reth,
            aeth: ib.aeth,
            atomic: ib.atomic_eth,
            atomic_ack: ib.atomic_ack_eth,
            imm: ib.immdt,
            ieth: ib.ieth,
            deth: ib.deth,
        })
    }

    /// The opcode of a packet with these headers, found in the opcode table.
    fn opcode(&self) -> Option<Opcode> {
        Opcode::find(
            transport_of(self.transport),
            self.kind.operation(),
            self.pos,
            self.imm.is_some(),
            self.ieth.is_some(),
        )
    }

    /// Writes the BTH and the extension headers of a packet with `payload_len` payload
    /// bytes at the start of `buf`, byte for byte what [`Headers::to_wire`] and
    /// [`IbRepr::emit`] write (the pad count from the payload's length), without building
    /// the wire crate's representation first: the headers of every packet sent are written
    /// here. Returns their length; `None` if no opcode has this shape, the AtomicETH or
    /// DETH the opcode carries is not set, the opcode carries no payload and `payload_len`
    /// is not 0, or `buf` is too short.
    #[inline]
    pub(crate) fn write(&self, buf: &mut [u8], payload_len: usize) -> Option<usize> {
        use xroce_wire::ExtHeader as X;
        use xroce_wire::{AethPacket, AtomicAckEth, AtomicEth, DethPacket, Ieth, ImmDt, Reth};
        let opcode = self.opcode()?;
        let info = opcode.info();
        if payload_len > 0 && !info.has_payload() {
            return None;
        }
        let header_len = info.header_len();
        let buf = buf.get_mut(..header_len)?;
        // BTH (IBTA 9.2): opcode; SE, MigReq (0), pad count, TVer (0); P_Key; FECN, BECN
        // and reserved bits (0); DestQP; AckReq and reserved bits; PSN.
        let mut flags = (IbRepr::pad_for(payload_len) & 0x03) << 4;
        if self.solicited {
            flags |= 0x80;
        }
        let word0 = u32::from(opcode.0) << 24 | u32::from(flags) << 16 | u32::from(self.pkey.0);
        let word1 = self.dest_qpn.value() & 0x00ff_ffff;
        let word2 = u32::from(self.ack_req) << 31 | (self.psn.value() & 0x00ff_ffff);
        buf[0..4].copy_from_slice(&word0.to_be_bytes());
        buf[4..8].copy_from_slice(&word1.to_be_bytes());
        buf[8..12].copy_from_slice(&word2.to_be_bytes());
        for &header in info.headers() {
            let at = info.offset(header)?;
            let bytes = buf.get_mut(at..at + header.len())?;
            match header {
                X::Reth => self
                    .reth
                    .unwrap_or(RethRepr {
                        va: 0,
                        rkey: xroce_wire::Rkey(0),
                        dma_len: 0,
                    })
                    .emit(Reth::new_checked_mut(bytes).ok()?),
                X::Aeth => self
                    .aeth
                    .unwrap_or(AethRepr {
                        syndrome: xroce_wire::Syndrome::ACK_UNLIMITED,
                        msn: 0,
                    })
                    .emit(&mut AethPacket::new_unchecked(bytes)),
                X::Deth => self.deth?.emit(&mut DethPacket::new_unchecked(bytes)),
                X::AtomicEth => self.atomic?.emit(AtomicEth::new_checked_mut(bytes).ok()?),
                X::AtomicAckEth => self
                    .atomic_ack
                    .unwrap_or(AtomicAckEthRepr { orig_data: 0 })
                    .emit(AtomicAckEth::new_checked_mut(bytes).ok()?),
                X::ImmDt => self
                    .imm
                    .unwrap_or(ImmDtRepr { data: 0 })
                    .emit(ImmDt::new_checked_mut(bytes).ok()?),
                X::Ieth => self
                    .ieth
                    .unwrap_or(IethRepr {
                        rkey: xroce_wire::Rkey(0),
                    })
                    .emit(Ieth::new_checked_mut(bytes).ok()?),
                // No opcode the transport sends carries them (RD, CNP).
                X::Rdeth | X::CnpReserved => return None,
            }
        }
        Some(header_len)
    }

    /// The wire representation of these headers, or `None` if no opcode has this shape
    /// (a bug in the caller). A header the opcode carries and the caller did not set is
    /// sent zeroed (an AETH as a plain ACK); the AtomicETH and the DETH must be set.
    /// What [`Headers::write`] must write, byte for byte (its test compares them).
    #[cfg(test)]
    pub(crate) fn to_wire(self) -> Option<IbRepr> {
        let opcode = self.opcode()?;
        let mut bth = xroce_wire::BthRepr::new(opcode, self.dest_qpn, self.psn);
        bth.solicited_event = self.solicited;
        bth.ack_request = self.ack_req;
        bth.pad_count = self.pad;
        bth.pkey = self.pkey;
        let info = opcode.info();
        let carries = |h| info.carries(h);
        use xroce_wire::ExtHeader as X;
        Some(IbRepr {
            bth,
            rdeth: None,
            deth: if carries(X::Deth) {
                Some(self.deth?)
            } else {
                None
            },
            reth: carries(X::Reth).then(|| {
                self.reth.unwrap_or(RethRepr {
                    va: 0,
                    rkey: xroce_wire::Rkey(0),
                    dma_len: 0,
                })
            }),
            atomic_eth: if carries(X::AtomicEth) {
                Some(self.atomic?)
            } else {
                None
            },
            aeth: carries(X::Aeth).then(|| {
                self.aeth.unwrap_or(AethRepr {
                    syndrome: xroce_wire::Syndrome::ACK_UNLIMITED,
                    msn: 0,
                })
            }),
            atomic_ack_eth: carries(X::AtomicAckEth)
                .then(|| self.atomic_ack.unwrap_or(AtomicAckEthRepr { orig_data: 0 })),
            immdt: carries(X::ImmDt).then(|| self.imm.unwrap_or(ImmDtRepr { data: 0 })),
            ieth: carries(X::Ieth).then(|| {
                self.ieth.unwrap_or(IethRepr {
                    rkey: xroce_wire::Rkey(0),
                })
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xroce_wire::{Qkey, Rkey};

    #[test]
    fn every_implemented_opcode_round_trips_through_the_roles_view() {
        let mut seen = 0;
        for byte in 0..=255u8 {
            let info = Opcode(byte).info();
            if !info.is_supported() {
                continue;
            }
            let Some((t, k, p)) = classify(info) else {
                continue;
            };
            let mut h = Headers::new(t, k, p, Qpn::new(7), Psn::new(9));
            if info.has_immediate() {
                h.imm = Some(ImmDtRepr { data: 1 });
            }
            if info.has_invalidate() {
                h.ieth = Some(IethRepr { rkey: Rkey(2) });
            }
            if k.is_atomic() {
                h.atomic = Some(AtomicEthRepr {
                    va: 0,
                    rkey: Rkey(0),
                    swap_add: 0,
                    compare: 0,
                });
            }
            if t == QpType::Ud {
                h.deth = Some(DethRepr {
                    qkey: Qkey(0),
                    src_qp: Qpn::new(3),
                });
            }
            let ib = h.to_wire().expect("an opcode for every classified shape");
            assert_eq!(ib.bth.opcode, Opcode(byte), "{}", info.name);
            // The headers written straight are those of the wire crate's representation,
            // byte for byte, with and without the optional headers set, for payloads of
            // every pad.
            let mut full = h;
            full.solicited = byte % 2 == 0;
            full.ack_req = byte % 3 == 0;
            full.pkey = Pkey(0x8000 | u16::from(byte));
            full.dest_qpn = Qpn::new(0x00ab_cdef ^ u32::from(byte));
            full.psn = Psn::new(0x00fe_dcba ^ u32::from(byte));
            full.reth = Some(RethRepr {
                va: 0x0123_4567_89ab_cdef,
                rkey: Rkey(0xdead_beef),
                dma_len: 0x0001_0203,
            });
            full.aeth = Some(AethRepr {
                syndrome: xroce_wire::Syndrome::Ack { credit_count: 5 },
                msn: 0x00aa_bbcc,
            });
            full.atomic_ack = Some(AtomicAckEthRepr {
                orig_data: 0x1122_3344_5566_7788,
            });
            if k.is_atomic() {
                full.atomic = Some(AtomicEthRepr {
                    va: 0x99,
                    rkey: Rkey(0x77),
                    swap_add: 0x1234,
                    compare: 0x5678,
                });
            }
            for headers in [h, full] {
                let payloads: &[usize] = if Opcode(byte).info().has_payload() {
                    &[0, 1, 2, 3, 4, 1023, 4096]
                } else {
                    &[0]
                };
                for &payload in payloads {
                    let mut expected = [0x5au8; 64];
                    let mut written = [0xa5u8; 64];
                    let wire = headers.to_wire().unwrap();
                    let len = wire.emit(&mut expected, payload).unwrap();
                    assert_eq!(
                        headers.write(&mut written, payload),
                        Some(len),
                        "{}",
                        info.name
                    );
                    assert_eq!(
                        written[..len],
                        expected[..len],
                        "{} payload {payload}",
                        info.name
                    );
                    assert_eq!(headers.write(&mut written[..len - 1], payload), None);
                }
                if !Opcode(byte).info().has_payload() {
                    assert_eq!(headers.write(&mut [0u8; 64], 1), None, "{}", info.name);
                }
            }
            seen += 1;
        }
        // RC: 23 implemented opcodes (not FLUSH, ATOMIC WRITE), UC: 12, UD: 2.
        assert_eq!(seen, 37);
        for byte in 0..=255u8 {
            assert_eq!(CLASSES[usize::from(byte)], classify(Opcode(byte).info()));
        }
    }
}
