//! The BTH opcode table (IBTA 9.2, the OpCode field; Annex A17.9.3 for the CNP).
//!
//! All 256 opcodes, each with its name, transport, operation, position in a message, flags
//! and the extension headers it carries with their offsets from the start of the BTH. The
//! rest of the dataplane asks this table ([`Opcode::info`]) instead of matching on opcode
//! numbers, as rxe does with `rxe_opcode[]`.
//!
//! The top three bits of an opcode name the transport (RC 000, UC 001, RD 010, UD 011,
//! CNP 100, XRC 101, manufacturer-specific 11x); the low five the operation. Supported are
//! every RC, UC, RD and UD opcode of IBTA 1.4 and the RoCEv2 CNP (0x81). Reserved codes,
//! the XRC transport, manufacturer-specific codes, and the IBTA 1.5 additions RC FLUSH
//! (0x1C) and RC ATOMIC WRITE (0x1D) (which Linux rxe sends from 6.2 on) are in the table
//! but marked unsupported: a packet carrying one fails to parse.

use core::fmt;

/// A BTH opcode.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u8);

/// An extension header an opcode may carry after the BTH, in IBTA wire order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExtHeader {
    /// Reliable Datagram ETH, 4 bytes (IBTA 9.3.1).
    Rdeth,
    /// Datagram ETH, 8 bytes (IBTA 9.3.2).
    Deth,
    /// RDMA ETH, 16 bytes (IBTA 9.3.3).
    Reth,
    /// Atomic ETH, 28 bytes (IBTA 9.3.4).
    AtomicEth,
    /// ACK ETH, 4 bytes (IBTA 9.3.5).
    Aeth,
    /// Atomic Acknowledge ETH, 8 bytes (IBTA 9.3.6).
    AtomicAckEth,
    /// Immediate data, 4 bytes (IBTA 9.3.7).
    ImmDt,
    /// Invalidate ETH, 4 bytes (IBTA 9.3.8).
    Ieth,
    /// The 16 reserved bytes of a CNP (IBTA A17.9.3).
    CnpReserved,
}

impl ExtHeader {
    /// Number of extension header kinds.
    pub const COUNT: usize = 9;

    /// Every kind, in wire order.
    pub const ALL: [ExtHeader; ExtHeader::COUNT] = [
        ExtHeader::Rdeth,
        ExtHeader::Deth,
        ExtHeader::Reth,
        ExtHeader::AtomicEth,
        ExtHeader::Aeth,
        ExtHeader::AtomicAckEth,
        ExtHeader::ImmDt,
        ExtHeader::Ieth,
        ExtHeader::CnpReserved,
    ];

    /// Length on the wire.
    pub const fn len(self) -> usize {
        match self {
            ExtHeader::Rdeth => crate::rdeth::HEADER_LEN,
            ExtHeader::Deth => crate::deth::HEADER_LEN,
            ExtHeader::Reth => crate::reth::HEADER_LEN,
            ExtHeader::AtomicEth => crate::atomic_eth::HEADER_LEN,
            ExtHeader::Aeth => crate::aeth::HEADER_LEN,
            ExtHeader::AtomicAckEth => crate::atomic_ack_eth::HEADER_LEN,
            ExtHeader::ImmDt => crate::immdt::HEADER_LEN,
            ExtHeader::Ieth => crate::ieth::HEADER_LEN,
            ExtHeader::CnpReserved => crate::cnp::RESERVED_LEN,
        }
    }

    /// Never true: every header has a length. (Present for API symmetry with `len`.)
    pub const fn is_empty(self) -> bool {
        false
    }

    /// The header's name as the specification writes it.
    pub const fn name(self) -> &'static str {
        match self {
            ExtHeader::Rdeth => "RDETH",
            ExtHeader::Deth => "DETH",
            ExtHeader::Reth => "RETH",
            ExtHeader::AtomicEth => "AtomicETH",
            ExtHeader::Aeth => "AETH",
            ExtHeader::AtomicAckEth => "AtomicAckETH",
            ExtHeader::ImmDt => "ImmDt",
            ExtHeader::Ieth => "IETH",
            ExtHeader::CnpReserved => "CNP reserved bytes",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ExtHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The transport service an opcode belongs to (its top three bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable connection, 0x00–0x1F.
    Rc,
    /// Unreliable connection, 0x20–0x3F.
    Uc,
    /// Reliable datagram, 0x40–0x5F.
    Rd,
    /// Unreliable datagram, 0x60–0x7F.
    Ud,
    /// Congestion notification, 0x80–0x9F (only 0x81 is defined).
    Cnp,
    /// Extended reliable connection, 0xA0–0xBF (not supported).
    Xrc,
    /// Manufacturer-specific, 0xC0–0xFF.
    Manufacturer,
}

/// What a packet asks for or answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SEND (a message into a receive WQE).
    Send,
    /// RDMA WRITE.
    RdmaWrite,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response.
    RdmaReadResponse,
    /// Acknowledge (ACK or NAK).
    Acknowledge,
    /// Atomic acknowledge.
    AtomicAcknowledge,
    /// Atomic CompareSwap.
    CompareSwap,
    /// Atomic FetchAdd.
    FetchAdd,
    /// RD RESYNC.
    Resync,
    /// Congestion notification packet.
    Cnp,
    /// Reserved, manufacturer-specific or not supported.
    Reserved,
}

/// Where a packet sits in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    /// The first packet of a multi-packet message.
    First,
    /// A packet between first and last.
    Middle,
    /// The last packet of a multi-packet message.
    Last,
    /// The whole message in one packet (also every ACK, atomic and CNP).
    Only,
}

impl Position {
    /// A message starts here: first or only.
    pub const fn starts_message(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }

    /// A message ends here: last or only.
    pub const fn ends_message(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }
}

/// Properties of an opcode, as a small bit set.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OpcodeFlags(u16);

impl OpcodeFlags {
    /// No flag.
    pub const EMPTY: OpcodeFlags = OpcodeFlags(0);
    /// Sent by a requester (rxe `RXE_REQ_MASK`).
    pub const REQUEST: OpcodeFlags = OpcodeFlags(1 << 0);
    /// Sent by a responder: read responses, acknowledges (rxe `RXE_ACK_MASK`).
    pub const RESPONSE: OpcodeFlags = OpcodeFlags(1 << 1);
    /// May carry a payload after its headers (rxe `RXE_PAYLOAD_MASK`).
    pub const PAYLOAD: OpcodeFlags = OpcodeFlags(1 << 2);
    /// Carries ImmDt.
    pub const IMMEDIATE: OpcodeFlags = OpcodeFlags(1 << 3);
    /// Carries an IETH.
    pub const INVALIDATE: OpcodeFlags = OpcodeFlags(1 << 4);
    /// A request on a reliable transport (RC, RD): the responder must acknowledge it,
    /// explicitly or by a later (coalesced) ACK or response.
    pub const NEEDS_ACK: OpcodeFlags = OpcodeFlags(1 << 5);
    /// Completes a receive WQE at the responder (rxe `RXE_COMP_MASK`).
    pub const RECV_COMPLETION: OpcodeFlags = OpcodeFlags(1 << 6);
    /// Needs a receive WQE to start (rxe `RXE_RWR_MASK`).
    pub const RECV_WQE: OpcodeFlags = OpcodeFlags(1 << 7);

    /// The union of two sets.
    pub const fn union(self, other: OpcodeFlags) -> OpcodeFlags {
        OpcodeFlags(self.0 | other.0)
    }

    /// `true` if every flag of `other` is in `self`.
    pub const fn contains(self, other: OpcodeFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }
}

impl core::ops::BitOr for OpcodeFlags {
    type Output = OpcodeFlags;

    fn bitor(self, rhs: OpcodeFlags) -> OpcodeFlags {
        self.union(rhs)
    }
}

impl fmt::Debug for OpcodeFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(OpcodeFlags, &str); 8] = [
            (OpcodeFlags::REQUEST, "REQUEST"),
            (OpcodeFlags::RESPONSE, "RESPONSE"),
            (OpcodeFlags::PAYLOAD, "PAYLOAD"),
            (OpcodeFlags::IMMEDIATE, "IMMEDIATE"),
            (OpcodeFlags::INVALIDATE, "INVALIDATE"),
            (OpcodeFlags::NEEDS_ACK, "NEEDS_ACK"),
            (OpcodeFlags::RECV_COMPLETION, "RECV_COMPLETION"),
            (OpcodeFlags::RECV_WQE, "RECV_WQE"),
        ];
        let mut set = f.debug_set();
        for (flag, name) in NAMES {
            if self.contains(flag) {
                set.entry(&format_args!("{name}"));
            }
        }
        set.finish()
    }
}

/// Everything the table knows about one opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// The opcode.
    pub opcode: Opcode,
    /// Its name, e.g. `RC_SEND_FIRST` (rxe's `IB_OPCODE_*` without the prefix).
    pub name: &'static str,
    /// The transport service (from the top three bits).
    pub transport: Transport,
    /// What the packet does; [`Operation::Reserved`] for unsupported opcodes.
    pub operation: Operation,
    /// Where the packet sits in its message; `None` for unsupported opcodes.
    pub position: Option<Position>,
    /// Properties.
    pub flags: OpcodeFlags,
    headers: &'static [ExtHeader],
    offsets: [u8; ExtHeader::COUNT],
    header_len: u8,
}

impl OpcodeInfo {
    /// `true` if packets with this opcode can be parsed and emitted.
    pub const fn is_supported(&self) -> bool {
        !matches!(self.operation, Operation::Reserved)
    }

    /// The extension headers after the BTH, in wire order.
    pub const fn headers(&self) -> &'static [ExtHeader] {
        self.headers
    }

    /// Offset of `header` from the start of the BTH, `None` if the opcode does not carry it.
    pub const fn offset(&self, header: ExtHeader) -> Option<usize> {
        match self.offsets[header.index()] {
            0 => None,
            off => Some(off as usize),
        }
    }

    /// `true` if the opcode carries `header`.
    pub const fn carries(&self, header: ExtHeader) -> bool {
        self.offsets[header.index()] != 0
    }

    /// Length of the BTH and all extension headers: the payload's offset from the BTH.
    pub const fn header_len(&self) -> usize {
        self.header_len as usize
    }

    /// `true` if `flag` is set.
    pub const fn has(&self, flag: OpcodeFlags) -> bool {
        self.flags.contains(flag)
    }

    /// Sent by a requester.
    pub const fn is_request(&self) -> bool {
        self.has(OpcodeFlags::REQUEST)
    }

    /// Sent by a responder.
    pub const fn is_response(&self) -> bool {
        self.has(OpcodeFlags::RESPONSE)
    }

    /// May carry a payload.
    pub const fn has_payload(&self) -> bool {
        self.has(OpcodeFlags::PAYLOAD)
    }

    /// Carries immediate data.
    pub const fn has_immediate(&self) -> bool {
        self.has(OpcodeFlags::IMMEDIATE)
    }

    /// Carries an R_Key to invalidate.
    pub const fn has_invalidate(&self) -> bool {
        self.has(OpcodeFlags::INVALIDATE)
    }

    /// Must be acknowledged by the responder.
    pub const fn needs_ack(&self) -> bool {
        self.has(OpcodeFlags::NEEDS_ACK)
    }

    /// The first packet of a multi-packet message.
    pub const fn is_first(&self) -> bool {
        matches!(self.position, Some(Position::First))
    }

    /// A middle packet.
    pub const fn is_middle(&self) -> bool {
        matches!(self.position, Some(Position::Middle))
    }

    /// The last packet of a multi-packet message.
    pub const fn is_last(&self) -> bool {
        matches!(self.position, Some(Position::Last))
    }

    /// A single-packet message.
    pub const fn is_only(&self) -> bool {
        matches!(self.position, Some(Position::Only))
    }

    /// Starts a message: first or only (rxe `RXE_START_MASK`).
    pub const fn starts_message(&self) -> bool {
        match self.position {
            Some(position) => position.starts_message(),
            None => false,
        }
    }

    /// Ends a message: last or only (rxe `RXE_END_MASK`).
    pub const fn ends_message(&self) -> bool {
        match self.position {
            Some(position) => position.ends_message(),
            None => false,
        }
    }
}

impl Opcode {
    // RC (IBTA 9.2).
    /// RC SEND First.
    pub const RC_SEND_FIRST: Opcode = Opcode(0x00);
    /// RC SEND Middle.
    pub const RC_SEND_MIDDLE: Opcode = Opcode(0x01);
    /// RC SEND Last.
    pub const RC_SEND_LAST: Opcode = Opcode(0x02);
    /// RC SEND Last with Immediate.
    pub const RC_SEND_LAST_WITH_IMMEDIATE: Opcode = Opcode(0x03);
    /// RC SEND Only.
    pub const RC_SEND_ONLY: Opcode = Opcode(0x04);
    /// RC SEND Only with Immediate.
    pub const RC_SEND_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x05);
    /// RC RDMA WRITE First.
    pub const RC_RDMA_WRITE_FIRST: Opcode = Opcode(0x06);
    /// RC RDMA WRITE Middle.
    pub const RC_RDMA_WRITE_MIDDLE: Opcode = Opcode(0x07);
    /// RC RDMA WRITE Last.
    pub const RC_RDMA_WRITE_LAST: Opcode = Opcode(0x08);
    /// RC RDMA WRITE Last with Immediate.
    pub const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: Opcode = Opcode(0x09);
    /// RC RDMA WRITE Only.
    pub const RC_RDMA_WRITE_ONLY: Opcode = Opcode(0x0a);
    /// RC RDMA WRITE Only with Immediate.
    pub const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x0b);
    /// RC RDMA READ Request.
    pub const RC_RDMA_READ_REQUEST: Opcode = Opcode(0x0c);
    /// RC RDMA READ Response First.
    pub const RC_RDMA_READ_RESPONSE_FIRST: Opcode = Opcode(0x0d);
    /// RC RDMA READ Response Middle.
    pub const RC_RDMA_READ_RESPONSE_MIDDLE: Opcode = Opcode(0x0e);
    /// RC RDMA READ Response Last.
    pub const RC_RDMA_READ_RESPONSE_LAST: Opcode = Opcode(0x0f);
    /// RC RDMA READ Response Only.
    pub const RC_RDMA_READ_RESPONSE_ONLY: Opcode = Opcode(0x10);
    /// RC Acknowledge.
    pub const RC_ACKNOWLEDGE: Opcode = Opcode(0x11);
    /// RC ATOMIC Acknowledge.
    pub const RC_ATOMIC_ACKNOWLEDGE: Opcode = Opcode(0x12);
    /// RC CmpSwap.
    pub const RC_COMPARE_SWAP: Opcode = Opcode(0x13);
    /// RC FetchAdd.
    pub const RC_FETCH_ADD: Opcode = Opcode(0x14);
    /// RC SEND Last with Invalidate.
    pub const RC_SEND_LAST_WITH_INVALIDATE: Opcode = Opcode(0x16);
    /// RC SEND Only with Invalidate.
    pub const RC_SEND_ONLY_WITH_INVALIDATE: Opcode = Opcode(0x17);
    /// RC FLUSH (IBTA 1.5; not supported here).
    pub const RC_FLUSH: Opcode = Opcode(0x1c);
    /// RC ATOMIC WRITE (IBTA 1.5; not supported here).
    pub const RC_ATOMIC_WRITE: Opcode = Opcode(0x1d);

    // UC.
    /// UC SEND First.
    pub const UC_SEND_FIRST: Opcode = Opcode(0x20);
    /// UC SEND Middle.
    pub const UC_SEND_MIDDLE: Opcode = Opcode(0x21);
    /// UC SEND Last.
    pub const UC_SEND_LAST: Opcode = Opcode(0x22);
    /// UC SEND Last with Immediate.
    pub const UC_SEND_LAST_WITH_IMMEDIATE: Opcode = Opcode(0x23);
    /// UC SEND Only.
    pub const UC_SEND_ONLY: Opcode = Opcode(0x24);
    /// UC SEND Only with Immediate.
    pub const UC_SEND_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x25);
    /// UC RDMA WRITE First.
    pub const UC_RDMA_WRITE_FIRST: Opcode = Opcode(0x26);
    /// UC RDMA WRITE Middle.
    pub const UC_RDMA_WRITE_MIDDLE: Opcode = Opcode(0x27);
    /// UC RDMA WRITE Last.
    pub const UC_RDMA_WRITE_LAST: Opcode = Opcode(0x28);
    /// UC RDMA WRITE Last with Immediate.
    pub const UC_RDMA_WRITE_LAST_WITH_IMMEDIATE: Opcode = Opcode(0x29);
    /// UC RDMA WRITE Only.
    pub const UC_RDMA_WRITE_ONLY: Opcode = Opcode(0x2a);
    /// UC RDMA WRITE Only with Immediate.
    pub const UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x2b);

    // RD.
    /// RD SEND First.
    pub const RD_SEND_FIRST: Opcode = Opcode(0x40);
    /// RD SEND Middle.
    pub const RD_SEND_MIDDLE: Opcode = Opcode(0x41);
    /// RD SEND Last.
    pub const RD_SEND_LAST: Opcode = Opcode(0x42);
    /// RD SEND Last with Immediate.
    pub const RD_SEND_LAST_WITH_IMMEDIATE: Opcode = Opcode(0x43);
    /// RD SEND Only.
    pub const RD_SEND_ONLY: Opcode = Opcode(0x44);
    /// RD SEND Only with Immediate.
    pub const RD_SEND_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x45);
    /// RD RDMA WRITE First.
    pub const RD_RDMA_WRITE_FIRST: Opcode = Opcode(0x46);
    /// RD RDMA WRITE Middle.
    pub const RD_RDMA_WRITE_MIDDLE: Opcode = Opcode(0x47);
    /// RD RDMA WRITE Last.
    pub const RD_RDMA_WRITE_LAST: Opcode = Opcode(0x48);
    /// RD RDMA WRITE Last with Immediate.
    pub const RD_RDMA_WRITE_LAST_WITH_IMMEDIATE: Opcode = Opcode(0x49);
    /// RD RDMA WRITE Only.
    pub const RD_RDMA_WRITE_ONLY: Opcode = Opcode(0x4a);
    /// RD RDMA WRITE Only with Immediate.
    pub const RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x4b);
    /// RD RDMA READ Request.
    pub const RD_RDMA_READ_REQUEST: Opcode = Opcode(0x4c);
    /// RD RDMA READ Response First.
    pub const RD_RDMA_READ_RESPONSE_FIRST: Opcode = Opcode(0x4d);
    /// RD RDMA READ Response Middle.
    pub const RD_RDMA_READ_RESPONSE_MIDDLE: Opcode = Opcode(0x4e);
    /// RD RDMA READ Response Last.
    pub const RD_RDMA_READ_RESPONSE_LAST: Opcode = Opcode(0x4f);
    /// RD RDMA READ Response Only.
    pub const RD_RDMA_READ_RESPONSE_ONLY: Opcode = Opcode(0x50);
    /// RD Acknowledge.
    pub const RD_ACKNOWLEDGE: Opcode = Opcode(0x51);
    /// RD ATOMIC Acknowledge.
    pub const RD_ATOMIC_ACKNOWLEDGE: Opcode = Opcode(0x52);
    /// RD CmpSwap.
    pub const RD_COMPARE_SWAP: Opcode = Opcode(0x53);
    /// RD FetchAdd.
    pub const RD_FETCH_ADD: Opcode = Opcode(0x54);
    /// RD RESYNC.
    pub const RD_RESYNC: Opcode = Opcode(0x55);

    // UD.
    /// UD SEND Only.
    pub const UD_SEND_ONLY: Opcode = Opcode(0x64);
    /// UD SEND Only with Immediate.
    pub const UD_SEND_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x65);

    // RoCEv2 congestion management (IBTA A17.9.3).
    /// Congestion Notification Packet.
    pub const CNP: Opcode = Opcode(0x81);

    /// Everything the table knows about this opcode.
    pub fn info(self) -> &'static OpcodeInfo {
        &OPCODE_TABLE[usize::from(self.0)]
    }

    /// The supported opcode of this transport and operation, at this position in a message,
    /// with or without immediate data and an IETH: the table read backwards (a sender knows
    /// what a packet does and asks for its opcode). `None` when no supported opcode has that
    /// shape. The reverse table is built at compile time from the table itself.
    pub const fn find(
        transport: Transport,
        operation: Operation,
        position: Position,
        immediate: bool,
        invalidate: bool,
    ) -> Option<Opcode> {
        REVERSE_TABLE[reverse_index(transport, operation, position, immediate, invalidate)]
    }

    /// The opcode's name, e.g. `RC_SEND_FIRST`.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// `true` if packets with this opcode can be parsed and emitted.
    pub fn is_supported(self) -> bool {
        self.info().is_supported()
    }
}

impl fmt::Display for Opcode {
    /// The name; unsupported opcodes also show their number, e.g. `RC_RESERVED(0x15)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.info();
        if info.is_supported() {
            f.write_str(info.name)
        } else {
            write!(f, "{}({:#04x})", info.name, self.0)
        }
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Opcode({:#04x} {})", self.0, self.info().name)
    }
}

/// The table, indexed by opcode.
pub static OPCODE_TABLE: [OpcodeInfo; 256] = TABLE;

const TABLE: [OpcodeInfo; 256] = build_table();

/// Transports × operations × positions × immediate × invalidate.
const REVERSE_LEN: usize = 7 * 11 * 4 * 2 * 2;

/// [`Opcode::find`]'s table: every supported opcode at the index of its shape.
const REVERSE_TABLE: [Option<Opcode>; REVERSE_LEN] = build_reverse_table();

const fn reverse_index(
    transport: Transport,
    operation: Operation,
    position: Position,
    immediate: bool,
    invalidate: bool,
) -> usize {
    let shape = (transport as usize * 11 + operation as usize) * 4 + position as usize;
    (shape * 2 + immediate as usize) * 2 + invalidate as usize
}

const fn build_reverse_table() -> [Option<Opcode>; REVERSE_LEN] {
    let mut reverse = [None; REVERSE_LEN];
    let mut i = 0;
    while i < 256 {
        let info = &TABLE[i];
        if let Some(position) = info.position
            && info.is_supported()
        {
            let at = reverse_index(
                info.transport,
                info.operation,
                position,
                info.has_immediate(),
                info.has_invalidate(),
            );
            // Two opcodes of one shape would make the table ambiguous: refuse to build.
            assert!(reverse[at].is_none(), "two opcodes have the same shape");
            reverse[at] = Some(info.opcode);
        }
        i += 1;
    }
    reverse
}

/// The longest header chain (BTH included) of any payload-carrying RC, UC or UD opcode:
/// what a full-MTU packet adds to its payload. 32 bytes (RDMA WRITE Only with Immediate:
/// BTH + RETH + ImmDt).
pub const MAX_HEADER_LEN_WITH_PAYLOAD: usize = max_header_len_with_payload();

const fn max_header_len_with_payload() -> usize {
    let mut max = 0;
    let mut i = 0;
    while i < 256 {
        let info = &TABLE[i];
        let transport_ok = matches!(
            info.transport,
            Transport::Rc | Transport::Uc | Transport::Ud
        );
        if transport_ok && info.flags.contains(OpcodeFlags::PAYLOAD) && info.header_len() > max {
            max = info.header_len();
        }
        i += 1;
    }
    max
}

const fn build_table() -> [OpcodeInfo; 256] {
    let mut table = [entry(0, "", Transport::Rc, Operation::Reserved, None, F0, &[]); 256];
    let mut i = 0;
    while i < 256 {
        table[i] = describe(i as u8);
        i += 1;
    }
    table
}

const fn entry(
    opcode: u8,
    name: &'static str,
    transport: Transport,
    operation: Operation,
    position: Option<Position>,
    flags: OpcodeFlags,
    headers: &'static [ExtHeader],
) -> OpcodeInfo {
    let mut offsets = [0u8; ExtHeader::COUNT];
    let mut off = crate::bth::HEADER_LEN;
    let mut i = 0;
    while i < headers.len() {
        offsets[headers[i].index()] = off as u8;
        off += headers[i].len();
        i += 1;
    }
    OpcodeInfo {
        opcode: Opcode(opcode),
        name,
        transport,
        operation,
        position,
        flags,
        headers,
        offsets,
        header_len: off as u8,
    }
}

const fn transport_of(op: u8) -> Transport {
    match op >> 5 {
        0 => Transport::Rc,
        1 => Transport::Uc,
        2 => Transport::Rd,
        3 => Transport::Ud,
        4 => Transport::Cnp,
        5 => Transport::Xrc,
        _ => Transport::Manufacturer,
    }
}

const fn reserved(op: u8, name: &'static str) -> OpcodeInfo {
    entry(
        op,
        name,
        transport_of(op),
        Operation::Reserved,
        None,
        F0,
        &[],
    )
}

// Flag shorthands for the table below.
const F0: OpcodeFlags = OpcodeFlags::EMPTY;
const REQ: OpcodeFlags = OpcodeFlags::REQUEST;
const RSP: OpcodeFlags = OpcodeFlags::RESPONSE;
const PAY: OpcodeFlags = OpcodeFlags::PAYLOAD;
const IMM: OpcodeFlags = OpcodeFlags::IMMEDIATE;
const INV: OpcodeFlags = OpcodeFlags::INVALIDATE;
const ACK: OpcodeFlags = OpcodeFlags::NEEDS_ACK;
const CMP: OpcodeFlags = OpcodeFlags::RECV_COMPLETION;
const RWR: OpcodeFlags = OpcodeFlags::RECV_WQE;

const fn f(parts: &[OpcodeFlags]) -> OpcodeFlags {
    let mut acc = F0;
    let mut i = 0;
    while i < parts.len() {
        acc = acc.union(parts[i]);
        i += 1;
    }
    acc
}

/// One row of IBTA table "OpCode field" (and of rxe's `rxe_opcode[]`).
// Each transport's defined codes come first, then a range arm for the rest of its block.
#[allow(clippy::match_overlapping_arm)]
#[rustfmt::skip]
const fn describe(op: u8) -> OpcodeInfo {
    use ExtHeader::*;
    use Operation::*;
    use Position::*;
    let t = transport_of(op);
    // Requests on RC and RD must be acknowledged; on UC and UD they are not.
    let ack = if matches!(t, Transport::Rc | Transport::Rd) {
        ACK
    } else {
        F0
    };
    let rd: &[ExtHeader] = &[Rdeth, Deth];
    match op {
        // RC 0x00–0x17 and UC 0x20–0x2B share their low five bits.
        0x00 | 0x20 => entry(op, pick(op, "RC_SEND_FIRST", "UC_SEND_FIRST"), t, Send, Some(First), f(&[REQ, ack, PAY, RWR]), &[]),
        0x01 | 0x21 => entry(op, pick(op, "RC_SEND_MIDDLE", "UC_SEND_MIDDLE"), t, Send, Some(Middle), f(&[REQ, ack, PAY]), &[]),
        0x02 | 0x22 => entry(op, pick(op, "RC_SEND_LAST", "UC_SEND_LAST"), t, Send, Some(Last), f(&[REQ, ack, PAY, CMP]), &[]),
        0x03 | 0x23 => entry(op, pick(op, "RC_SEND_LAST_WITH_IMMEDIATE", "UC_SEND_LAST_WITH_IMMEDIATE"), t, Send, Some(Last), f(&[REQ, ack, PAY, CMP, IMM]), &[ImmDt]),
        0x04 | 0x24 => entry(op, pick(op, "RC_SEND_ONLY", "UC_SEND_ONLY"), t, Send, Some(Only), f(&[REQ, ack, PAY, CMP, RWR]), &[]),
        0x05 | 0x25 => entry(op, pick(op, "RC_SEND_ONLY_WITH_IMMEDIATE", "UC_SEND_ONLY_WITH_IMMEDIATE"), t, Send, Some(Only), f(&[REQ, ack, PAY, CMP, RWR, IMM]), &[ImmDt]),
        0x06 | 0x26 => entry(op, pick(op, "RC_RDMA_WRITE_FIRST", "UC_RDMA_WRITE_FIRST"), t, RdmaWrite, Some(First), f(&[REQ, ack, PAY]), &[Reth]),
        0x07 | 0x27 => entry(op, pick(op, "RC_RDMA_WRITE_MIDDLE", "UC_RDMA_WRITE_MIDDLE"), t, RdmaWrite, Some(Middle), f(&[REQ, ack, PAY]), &[]),
        0x08 | 0x28 => entry(op, pick(op, "RC_RDMA_WRITE_LAST", "UC_RDMA_WRITE_LAST"), t, RdmaWrite, Some(Last), f(&[REQ, ack, PAY]), &[]),
        0x09 | 0x29 => entry(op, pick(op, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE"), t, RdmaWrite, Some(Last), f(&[REQ, ack, PAY, CMP, RWR, IMM]), &[ImmDt]),
        0x0a | 0x2a => entry(op, pick(op, "RC_RDMA_WRITE_ONLY", "UC_RDMA_WRITE_ONLY"), t, RdmaWrite, Some(Only), f(&[REQ, ack, PAY]), &[Reth]),
        0x0b | 0x2b => entry(op, pick(op, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"), t, RdmaWrite, Some(Only), f(&[REQ, ack, PAY, CMP, RWR, IMM]), &[Reth, ImmDt]),
        0x0c => entry(op, "RC_RDMA_READ_REQUEST", t, RdmaReadRequest, Some(Only), f(&[REQ, ACK]), &[Reth]),
        0x0d => entry(op, "RC_RDMA_READ_RESPONSE_FIRST", t, RdmaReadResponse, Some(First), f(&[RSP, PAY]), &[Aeth]),
        0x0e => entry(op, "RC_RDMA_READ_RESPONSE_MIDDLE", t, RdmaReadResponse, Some(Middle), f(&[RSP, PAY]), &[]),
        0x0f => entry(op, "RC_RDMA_READ_RESPONSE_LAST", t, RdmaReadResponse, Some(Last), f(&[RSP, PAY]), &[Aeth]),
        0x10 => entry(op, "RC_RDMA_READ_RESPONSE_ONLY", t, RdmaReadResponse, Some(Only), f(&[RSP, PAY]), &[Aeth]),
        0x11 => entry(op, "RC_ACKNOWLEDGE", t, Acknowledge, Some(Only), RSP, &[Aeth]),
        0x12 => entry(op, "RC_ATOMIC_ACKNOWLEDGE", t, AtomicAcknowledge, Some(Only), RSP, &[Aeth, AtomicAckEth]),
        0x13 => entry(op, "RC_COMPARE_SWAP", t, CompareSwap, Some(Only), f(&[REQ, ACK]), &[AtomicEth]),
        0x14 => entry(op, "RC_FETCH_ADD", t, FetchAdd, Some(Only), f(&[REQ, ACK]), &[AtomicEth]),
        0x16 => entry(op, "RC_SEND_LAST_WITH_INVALIDATE", t, Send, Some(Last), f(&[REQ, ACK, PAY, CMP, INV]), &[Ieth]),
        0x17 => entry(op, "RC_SEND_ONLY_WITH_INVALIDATE", t, Send, Some(Only), f(&[REQ, ACK, PAY, CMP, RWR, INV]), &[Ieth]),
        0x1c => reserved(op, "RC_FLUSH"),
        0x1d => reserved(op, "RC_ATOMIC_WRITE"),
        0x00..=0x1f => reserved(op, "RC_RESERVED"),
        0x20..=0x3f => reserved(op, "UC_RESERVED"),

        // RD: RDETH (and DETH on requests) before the headers of the RC equivalent.
        0x40 => entry(op, "RD_SEND_FIRST", t, Send, Some(First), f(&[REQ, ACK, PAY, RWR]), rd),
        0x41 => entry(op, "RD_SEND_MIDDLE", t, Send, Some(Middle), f(&[REQ, ACK, PAY]), rd),
        0x42 => entry(op, "RD_SEND_LAST", t, Send, Some(Last), f(&[REQ, ACK, PAY, CMP]), rd),
        0x43 => entry(op, "RD_SEND_LAST_WITH_IMMEDIATE", t, Send, Some(Last), f(&[REQ, ACK, PAY, CMP, IMM]), &[Rdeth, Deth, ImmDt]),
        0x44 => entry(op, "RD_SEND_ONLY", t, Send, Some(Only), f(&[REQ, ACK, PAY, CMP, RWR]), rd),
        0x45 => entry(op, "RD_SEND_ONLY_WITH_IMMEDIATE", t, Send, Some(Only), f(&[REQ, ACK, PAY, CMP, RWR, IMM]), &[Rdeth, Deth, ImmDt]),
        0x46 => entry(op, "RD_RDMA_WRITE_FIRST", t, RdmaWrite, Some(First), f(&[REQ, ACK, PAY]), &[Rdeth, Deth, Reth]),
        0x47 => entry(op, "RD_RDMA_WRITE_MIDDLE", t, RdmaWrite, Some(Middle), f(&[REQ, ACK, PAY]), rd),
        0x48 => entry(op, "RD_RDMA_WRITE_LAST", t, RdmaWrite, Some(Last), f(&[REQ, ACK, PAY]), rd),
        0x49 => entry(op, "RD_RDMA_WRITE_LAST_WITH_IMMEDIATE", t, RdmaWrite, Some(Last), f(&[REQ, ACK, PAY, CMP, RWR, IMM]), &[Rdeth, Deth, ImmDt]),
        0x4a => entry(op, "RD_RDMA_WRITE_ONLY", t, RdmaWrite, Some(Only), f(&[REQ, ACK, PAY]), &[Rdeth, Deth, Reth]),
        0x4b => entry(op, "RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE", t, RdmaWrite, Some(Only), f(&[REQ, ACK, PAY, CMP, RWR, IMM]), &[Rdeth, Deth, Reth, ImmDt]),
        0x4c => entry(op, "RD_RDMA_READ_REQUEST", t, RdmaReadRequest, Some(Only), f(&[REQ, ACK]), &[Rdeth, Deth, Reth]),
        0x4d => entry(op, "RD_RDMA_READ_RESPONSE_FIRST", t, RdmaReadResponse, Some(First), f(&[RSP, PAY]), &[Rdeth, Aeth]),
        0x4e => entry(op, "RD_RDMA_READ_RESPONSE_MIDDLE", t, RdmaReadResponse, Some(Middle), f(&[RSP, PAY]), &[Rdeth]),
        0x4f => entry(op, "RD_RDMA_READ_RESPONSE_LAST", t, RdmaReadResponse, Some(Last), f(&[RSP, PAY]), &[Rdeth, Aeth]),
        0x50 => entry(op, "RD_RDMA_READ_RESPONSE_ONLY", t, RdmaReadResponse, Some(Only), f(&[RSP, PAY]), &[Rdeth, Aeth]),
        0x51 => entry(op, "RD_ACKNOWLEDGE", t, Acknowledge, Some(Only), RSP, &[Rdeth, Aeth]),
        0x52 => entry(op, "RD_ATOMIC_ACKNOWLEDGE", t, AtomicAcknowledge, Some(Only), RSP, &[Rdeth, Aeth, AtomicAckEth]),
        0x53 => entry(op, "RD_COMPARE_SWAP", t, CompareSwap, Some(Only), f(&[REQ, ACK]), &[Rdeth, Deth, AtomicEth]),
        0x54 => entry(op, "RD_FETCH_ADD", t, FetchAdd, Some(Only), f(&[REQ, ACK]), &[Rdeth, Deth, AtomicEth]),
        0x55 => entry(op, "RD_RESYNC", t, Resync, Some(Only), f(&[REQ, ACK]), rd),
        0x40..=0x5f => reserved(op, "RD_RESERVED"),

        // UD: every message is one packet with a DETH.
        0x64 => entry(op, "UD_SEND_ONLY", t, Send, Some(Only), f(&[REQ, PAY, CMP, RWR]), &[Deth]),
        0x65 => entry(op, "UD_SEND_ONLY_WITH_IMMEDIATE", t, Send, Some(Only), f(&[REQ, PAY, CMP, RWR, IMM]), &[Deth, ImmDt]),
        0x60..=0x7f => reserved(op, "UD_RESERVED"),

        // RoCEv2 CNP: BTH (BECN set) + 16 reserved bytes (IBTA A17.9.3).
        0x81 => entry(op, "CNP", t, Cnp, Some(Only), F0, &[CnpReserved]),
        0x80..=0x9f => reserved(op, "CNP_RESERVED"),
        0xa0..=0xbf => reserved(op, "XRC_UNSUPPORTED"),
        _ => reserved(op, "MANUFACTURER_SPECIFIC"),
    }
}

/// The RC or UC name of an opcode whose low five bits RC and UC share.
const fn pick(op: u8, rc: &'static str, uc: &'static str) -> &'static str {
    if op < 0x20 { rc } else { uc }
}

#[cfg(test)]
mod tests;
