//! Packets as the transport roles see them: the BTH and extension headers of one RoCEv2
//! packet as plain values, plus the payload.
//!
//! This is the one module that converts between the roles' view and the wire crate's
//! [`IbRepr`]; the roles classify packets by asking the wire crate's opcode table through
//! [`Kind`] and [`Pos`], never by matching opcode numbers.

use xroce_wire::{Gid, Psn, Qpn};

use crate::qp::QpType;

/// What a packet does (the operation part of its opcode).
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
}

/// Where a packet sits in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pos {
    /// The first of several.
    First,
    /// Neither first nor last.
    Middle,
    /// The last of several.
    Last,
    /// The only one.
    Only,
}

impl Pos {
    /// First or only: a message starts here.
    pub fn is_start(self) -> bool {
        matches!(self, Pos::First | Pos::Only)
    }

    /// Last or only: a message ends here.
    pub fn is_end(self) -> bool {
        matches!(self, Pos::Last | Pos::Only)
    }

    /// The position of the packet carrying bytes `[offset, offset + n)` of a message of
    /// `total` bytes.
    pub fn of(offset: u64, n: u64, total: u64) -> Pos {
        match (offset == 0, offset + n >= total) {
            (true, true) => Pos::Only,
            (true, false) => Pos::First,
            (false, true) => Pos::Last,
            (false, false) => Pos::Middle,
        }
    }
}

/// RETH fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub len: u32,
}

/// AtomicETH fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicEth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (compare-and-swap) or add (fetch-and-add) data.
    pub swap_add: u64,
    /// Compare data.
    pub compare: u64,
}

/// DETH fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deth {
    /// Q_Key.
    pub qkey: u32,
    /// Source QP.
    pub src_qpn: Qpn,
}

/// The AETH syndrome, decoded (IBTA 9.3.5, table 43).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syndrome {
    /// A positive acknowledgement with a credit count (31 = "no credit count", what rxe
    /// sends).
    Ack(u8),
    /// Receiver not ready; the 5-bit RNR timer code.
    RnrNak(u8),
    /// A negative acknowledgement.
    Nak(NakCode),
}

/// NAK codes (IBTA 9.3.5, table 44).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NakCode {
    /// PSN sequence error.
    PsnSeqErr,
    /// Invalid request.
    InvalidRequest,
    /// Remote access error.
    RemoteAccess,
    /// Remote operational error.
    RemoteOp,
    /// Invalid RD request, or a reserved code.
    Other(u8),
}

/// AETH fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aeth {
    /// The syndrome.
    pub syndrome: Syndrome,
    /// The 24-bit message sequence number.
    pub msn: u32,
}

/// The ACK syndrome rxe sends: ACK with credit count 31 ("no credit count"), so we do too.
pub const ACK_UNLIMITED: Syndrome = Syndrome::Ack(31);

/// The transport headers of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers {
    /// The transport service of the opcode.
    pub transport: QpType,
    /// What the packet does.
    pub kind: Kind,
    /// Its position in the message.
    pub pos: Pos,
    /// BTH SE.
    pub solicited: bool,
    /// BTH A.
    pub ack_req: bool,
    /// BTH PadCnt.
    pub pad: u8,
    /// BTH P_Key.
    pub pkey: u16,
    /// BTH DestQP.
    pub dest_qpn: Qpn,
    /// BTH PSN.
    pub psn: Psn,
    /// RETH.
    pub reth: Option<Reth>,
    /// AETH.
    pub aeth: Option<Aeth>,
    /// AtomicETH.
    pub atomic: Option<AtomicEth>,
    /// AtomicAckETH: the original value.
    pub atomic_ack: Option<u64>,
    /// ImmDt.
    pub imm: Option<u32>,
    /// IETH: the rkey to invalidate.
    pub ieth: Option<u32>,
    /// DETH.
    pub deth: Option<Deth>,
}

impl Headers {
    /// Headers with only the BTH fields that every packet has.
    pub fn new(transport: QpType, kind: Kind, pos: Pos, dest_qpn: Qpn, psn: Psn) -> Headers {
        Headers {
            transport,
            kind,
            pos,
            solicited: false,
            ack_req: false,
            pad: 0,
            pkey: 0xffff,
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

/// The network layer a request arrived over, for UD receives (the 40-byte GRH area) and
/// address handles built from completions.
#[derive(Clone, Copy, Debug)]
pub struct Net<'a> {
    /// The raw IP header: 20 bytes for IPv4 (options excluded), 40 for IPv6.
    pub ip_header: &'a [u8],
    /// The source GID (from the source IP address).
    pub sgid: Gid,
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
    /// The 40 bytes a UD receive places in front of the payload, as rxe and RDMA NICs do:
    /// the IPv6 header, or 20 zero bytes followed by the IPv4 header.
    pub fn grh(&self) -> [u8; 40] {
        let mut grh = [0u8; 40];
        let ip = self.net.ip_header;
        if ip.len() >= 40 {
            grh.copy_from_slice(&ip[..40]);
        } else {
            let n = ip.len().min(20);
            grh[20..20 + n].copy_from_slice(&ip[..n]);
        }
        grh
    }
}

// ---------------------------------------------------------------------------------------
// Conversion to and from the wire crate's representation.

use std::sync::OnceLock;

use xroce_wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, IbRepr, IethRepr, ImmDtRepr,
    NakCode as WireNak, Opcode, OpcodeInfo, Operation, Position, Qkey, RethRepr, Rkey, RnrTimer,
    Syndrome as WireSyndrome, Transport,
};

/// The roles' classification of an opcode, from the opcode table. `None` for opcodes the
/// transport does not implement (RD, CNP, reserved, XRC, FLUSH, ATOMIC WRITE).
pub(crate) fn classify(info: &OpcodeInfo) -> Option<(QpType, Kind, Pos)> {
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
    let pos = match info.position? {
        Position::First => Pos::First,
        Position::Middle => Pos::Middle,
        Position::Last => Pos::Last,
        Position::Only => Pos::Only,
    };
    Some((transport, kind, pos))
}

fn key_index(transport: QpType, kind: Kind, pos: Pos, imm: bool, inv: bool) -> usize {
    let t = transport as usize;
    let k = kind as usize;
    let p = pos as usize;
    (((t * 8 + k) * 4 + p) * 2 + usize::from(imm)) * 2 + usize::from(inv)
}

/// The opcode for a packet, found in the opcode table (inverted once).
fn opcode_for(h: &Headers) -> Option<Opcode> {
    static TABLE: OnceLock<[Option<Opcode>; 3 * 8 * 4 * 4]> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = [None; 3 * 8 * 4 * 4];
        for byte in 0..=255u8 {
            let info = Opcode(byte).info();
            if !info.is_supported() {
                continue;
            }
            if let Some((t, k, p)) = classify(info) {
                let i = key_index(t, k, p, info.has_immediate(), info.has_invalidate());
                table[i] = Some(Opcode(byte));
            }
        }
        table
    });
    table[key_index(
        h.transport,
        h.kind,
        h.pos,
        h.imm.is_some(),
        h.ieth.is_some(),
    )]
}

impl Syndrome {
    fn from_wire(s: WireSyndrome) -> Syndrome {
        match s {
            WireSyndrome::Ack { credit_count } => Syndrome::Ack(credit_count),
            WireSyndrome::RnrNak { timer } => Syndrome::RnrNak(timer.code()),
            WireSyndrome::Nak(code) => Syndrome::Nak(match code {
                WireNak::PsnSequenceError => NakCode::PsnSeqErr,
                WireNak::InvalidRequest => NakCode::InvalidRequest,
                WireNak::RemoteAccessError => NakCode::RemoteAccess,
                WireNak::RemoteOperationalError => NakCode::RemoteOp,
                WireNak::InvalidRdRequest => NakCode::Other(4),
                WireNak::Reserved(c) => NakCode::Other(c),
            }),
            // A reserved syndrome type is a protocol violation; the completer treats it like
            // a NAK it does not know.
            WireSyndrome::Reserved(v) => Syndrome::Nak(NakCode::Other(v)),
        }
    }

    fn to_wire(self) -> WireSyndrome {
        match self {
            Syndrome::Ack(credit_count) => WireSyndrome::Ack { credit_count },
            Syndrome::RnrNak(code) => WireSyndrome::RnrNak {
                timer: RnrTimer::new(code),
            },
            Syndrome::Nak(code) => WireSyndrome::Nak(match code {
                NakCode::PsnSeqErr => WireNak::PsnSequenceError,
                NakCode::InvalidRequest => WireNak::InvalidRequest,
                NakCode::RemoteAccess => WireNak::RemoteAccessError,
                NakCode::RemoteOp => WireNak::RemoteOperationalError,
                NakCode::Other(4) => WireNak::InvalidRdRequest,
                NakCode::Other(c) => WireNak::Reserved(c),
            }),
        }
    }
}

impl Headers {
    /// The roles' view of parsed wire headers; `None` for opcodes the transport does not
    /// implement.
    #[inline]
    pub(crate) fn from_wire(ib: &IbRepr) -> Option<Headers> {
        let (transport, kind, pos) = classify(ib.info())?;
        let b = &ib.bth;
        Some(Headers {
            transport,
            kind,
            pos,
            solicited: b.solicited_event,
            ack_req: b.ack_request,
            pad: b.pad_count,
            pkey: b.pkey.0,
            dest_qpn: b.dest_qp,
            psn: b.psn,
            reth: ib.reth.map(|r| Reth {
                va: r.va,
                rkey: r.rkey.0,
                len: r.dma_len,
            }),
            aeth: ib.aeth.map(|a| Aeth {
                syndrome: Syndrome::from_wire(a.syndrome),
                msn: a.msn,
            }),
            atomic: ib.atomic_eth.map(|a| AtomicEth {
                va: a.va,
                rkey: a.rkey.0,
                swap_add: a.swap_add,
                compare: a.compare,
            }),
            atomic_ack: ib.atomic_ack_eth.map(|a| a.orig_data),
            imm: ib.immdt.map(|i| i.data),
            ieth: ib.ieth.map(|i| i.rkey.0),
            deth: ib.deth.map(|d| Deth {
                qkey: d.qkey.0,
                src_qpn: d.src_qp,
            }),
        })
    }

    /// The wire representation of these headers, or `None` if no opcode has this shape
    /// (a bug in the caller).
    #[inline]
    pub(crate) fn to_wire(self) -> Option<IbRepr> {
        let opcode = opcode_for(&self)?;
        let mut bth = BthRepr::new(opcode, self.dest_qpn, self.psn);
        bth.solicited_event = self.solicited;
        bth.ack_request = self.ack_req;
        bth.pad_count = self.pad;
        bth.pkey = xroce_wire::Pkey(self.pkey);
        let mut ib = IbRepr::new(bth);
        let info = opcode.info();
        let carries = |h| info.carries(h);
        use xroce_wire::ExtHeader as X;
        if carries(X::Reth) {
            let r = self.reth.unwrap_or(Reth {
                va: 0,
                rkey: 0,
                len: 0,
            });
            ib.reth = Some(RethRepr {
                va: r.va,
                rkey: Rkey(r.rkey),
                dma_len: r.len,
            });
        }
        if carries(X::Aeth) {
            let a = self.aeth.unwrap_or(Aeth {
                syndrome: ACK_UNLIMITED,
                msn: 0,
            });
            ib.aeth = Some(AethRepr {
                syndrome: a.syndrome.to_wire(),
                msn: a.msn,
            });
        }
        if carries(X::AtomicEth) {
            let a = self.atomic?;
            ib.atomic_eth = Some(AtomicEthRepr {
                va: a.va,
                rkey: Rkey(a.rkey),
                swap_add: a.swap_add,
                compare: a.compare,
            });
        }
        if carries(X::AtomicAckEth) {
            ib.atomic_ack_eth = Some(AtomicAckEthRepr {
                orig_data: self.atomic_ack.unwrap_or(0),
            });
        }
        if carries(X::ImmDt) {
            ib.immdt = Some(ImmDtRepr {
                data: self.imm.unwrap_or(0),
            });
        }
        if carries(X::Ieth) {
            ib.ieth = Some(IethRepr {
                rkey: Rkey(self.ieth.unwrap_or(0)),
            });
        }
        if carries(X::Deth) {
            let d = self.deth?;
            ib.deth = Some(DethRepr {
                qkey: Qkey(d.qkey),
                src_qp: d.src_qpn,
            });
        }
        Some(ib)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                h.imm = Some(1);
            }
            if info.has_invalidate() {
                h.ieth = Some(2);
            }
            if k.is_atomic() {
                h.atomic = Some(AtomicEth {
                    va: 0,
                    rkey: 0,
                    swap_add: 0,
                    compare: 0,
                });
            }
            if t == QpType::Ud {
                h.deth = Some(Deth {
                    qkey: 0,
                    src_qpn: Qpn::new(3),
                });
            }
            let ib = h.to_wire().expect("an opcode for every classified shape");
            assert_eq!(ib.bth.opcode, Opcode(byte), "{}", info.name);
            seen += 1;
        }
        // RC: 23 implemented opcodes (not FLUSH, ATOMIC WRITE), UC: 12, UD: 2.
        assert_eq!(seen, 37);
    }

    #[test]
    fn positions_of_message_bytes() {
        assert_eq!(Pos::of(0, 0, 0), Pos::Only);
        assert_eq!(Pos::of(0, 10, 10), Pos::Only);
        assert_eq!(Pos::of(0, 1024, 2050), Pos::First);
        assert_eq!(Pos::of(1024, 1024, 2050), Pos::Middle);
        assert_eq!(Pos::of(2048, 2, 2050), Pos::Last);
    }
}
