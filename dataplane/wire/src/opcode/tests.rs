//! The opcode table checked against the specification and rxe: every entry its own
//! opcode, offsets and header lengths, flags and headers following from what each opcode
//! does, the named constants, the reverse lookup.

use super::*;
use std::collections::HashSet;
use std::vec::Vec;

#[test]
fn every_entry_is_its_own_opcode() {
    for (i, info) in OPCODE_TABLE.iter().enumerate() {
        assert_eq!(usize::from(info.opcode.0), i);
        assert_eq!(info.transport, transport_of(i as u8));
    }
}

#[test]
fn offsets_add_up_to_the_header_length_for_all_256() {
    for info in &OPCODE_TABLE {
        let mut expected_offset = crate::bth::HEADER_LEN;
        let mut previous: Option<ExtHeader> = None;
        for &h in info.headers() {
            if let Some(p) = previous {
                assert!(
                    p < h,
                    "{}: {p} before {h} breaks IBTA wire order",
                    info.name
                );
            }
            assert_eq!(info.offset(h), Some(expected_offset), "{} {h}", info.name);
            expected_offset += h.len();
            previous = Some(h);
        }
        assert_eq!(info.header_len(), expected_offset, "{}", info.name);
        for h in ExtHeader::ALL {
            assert_eq!(
                info.carries(h),
                info.headers().contains(&h),
                "{} {h}",
                info.name
            );
            assert_eq!(info.offset(h).is_some(), info.carries(h));
        }
        if !info.is_supported() {
            assert!(info.headers().is_empty());
            assert_eq!(info.flags, OpcodeFlags::EMPTY);
            assert_eq!(info.position, None);
        }
    }
}

/// Derives each opcode's headers from its transport, operation, position and flags —
/// independently of the table's header lists — and compares.
#[test]
fn headers_follow_from_what_the_opcode_does() {
    for info in OPCODE_TABLE.iter().filter(|i| i.is_supported()) {
        let op = info.operation;
        let rd = info.transport == Transport::Rd;
        let mut expected = Vec::new();
        if rd {
            expected.push(ExtHeader::Rdeth);
        }
        if info.transport == Transport::Ud || (rd && info.is_request()) {
            expected.push(ExtHeader::Deth);
        }
        if op == Operation::RdmaReadRequest || (op == Operation::RdmaWrite && info.starts_message())
        {
            expected.push(ExtHeader::Reth);
        }
        if matches!(op, Operation::CompareSwap | Operation::FetchAdd) {
            expected.push(ExtHeader::AtomicEth);
        }
        if matches!(op, Operation::Acknowledge | Operation::AtomicAcknowledge)
            || (op == Operation::RdmaReadResponse && !info.is_middle())
        {
            expected.push(ExtHeader::Aeth);
        }
        if op == Operation::AtomicAcknowledge {
            expected.push(ExtHeader::AtomicAckEth);
        }
        if info.has_immediate() {
            expected.push(ExtHeader::ImmDt);
        }
        if info.has_invalidate() {
            expected.push(ExtHeader::Ieth);
        }
        if op == Operation::Cnp {
            expected.push(ExtHeader::CnpReserved);
        }
        assert_eq!(info.headers(), &expected[..], "{}", info.name);
    }
}

#[test]
fn flags_follow_from_what_the_opcode_does() {
    for info in OPCODE_TABLE.iter().filter(|i| i.is_supported()) {
        let op = info.operation;
        let carries_data = matches!(
            op,
            Operation::Send | Operation::RdmaWrite | Operation::RdmaReadResponse
        );
        assert_eq!(info.has_payload(), carries_data, "{}", info.name);
        let responder_sends = matches!(
            op,
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
        );
        assert_eq!(info.is_response(), responder_sends, "{}", info.name);
        assert_eq!(
            info.is_request(),
            !responder_sends && op != Operation::Cnp,
            "{}",
            info.name
        );
        let reliable = matches!(info.transport, Transport::Rc | Transport::Rd);
        assert_eq!(
            info.needs_ack(),
            reliable && info.is_request(),
            "{}",
            info.name
        );
        assert!(info.name.contains("IMMEDIATE") == info.has_immediate());
        assert!(info.name.contains("INVALIDATE") == info.has_invalidate());
        // A receive WQE is consumed by the packet that starts a SEND or that carries
        // the immediate of a WRITE; a completion is raised at a SEND's end or with it.
        let needs_wqe = (op == Operation::Send && info.starts_message())
            || (op == Operation::RdmaWrite && info.has_immediate());
        assert_eq!(info.has(OpcodeFlags::RECV_WQE), needs_wqe, "{}", info.name);
        let completes = (op == Operation::Send && info.ends_message())
            || (op == Operation::RdmaWrite && info.has_immediate());
        assert_eq!(
            info.has(OpcodeFlags::RECV_COMPLETION),
            completes,
            "{}",
            info.name
        );
    }
}

#[test]
fn header_lengths_match_rxe() {
    // rxe_opcode.c `.length` values.
    let cases = [
        (Opcode::RC_SEND_FIRST, 12),
        (Opcode::RC_SEND_LAST_WITH_IMMEDIATE, 16),
        (Opcode::RC_RDMA_WRITE_FIRST, 28),
        (Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 32),
        (Opcode::RC_RDMA_READ_REQUEST, 28),
        (Opcode::RC_RDMA_READ_RESPONSE_FIRST, 16),
        (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 12),
        (Opcode::RC_ACKNOWLEDGE, 16),
        (Opcode::RC_ATOMIC_ACKNOWLEDGE, 24),
        (Opcode::RC_COMPARE_SWAP, 40),
        (Opcode::RC_FETCH_ADD, 40),
        (Opcode::RC_SEND_ONLY_WITH_INVALIDATE, 16),
        (Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 32),
        (Opcode::RD_SEND_FIRST, 24),
        (Opcode::RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 44),
        (Opcode::RD_RDMA_READ_RESPONSE_MIDDLE, 16),
        (Opcode::RD_ATOMIC_ACKNOWLEDGE, 28),
        (Opcode::RD_FETCH_ADD, 52),
        (Opcode::UD_SEND_ONLY, 20),
        (Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, 24),
        (Opcode::CNP, 28),
    ];
    for (op, len) in cases {
        assert_eq!(op.info().header_len(), len, "{op}");
    }
    // Offsets that are easy to get wrong.
    let info = Opcode::RC_ATOMIC_ACKNOWLEDGE.info();
    assert_eq!(info.offset(ExtHeader::Aeth), Some(12));
    assert_eq!(info.offset(ExtHeader::AtomicAckEth), Some(16));
    let info = Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE.info();
    assert_eq!(info.offset(ExtHeader::Reth), Some(12));
    assert_eq!(info.offset(ExtHeader::ImmDt), Some(28));
    let info = Opcode::RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE.info();
    assert_eq!(info.offset(ExtHeader::Rdeth), Some(12));
    assert_eq!(info.offset(ExtHeader::Deth), Some(16));
    assert_eq!(info.offset(ExtHeader::Reth), Some(24));
    assert_eq!(info.offset(ExtHeader::ImmDt), Some(40));
    assert_eq!(MAX_HEADER_LEN_WITH_PAYLOAD, 32);
}

#[test]
fn constants_name_their_entries() {
    let constants = [
        (Opcode::RC_SEND_FIRST, "RC_SEND_FIRST"),
        (Opcode::RC_SEND_MIDDLE, "RC_SEND_MIDDLE"),
        (Opcode::RC_SEND_LAST, "RC_SEND_LAST"),
        (
            Opcode::RC_SEND_LAST_WITH_IMMEDIATE,
            "RC_SEND_LAST_WITH_IMMEDIATE",
        ),
        (Opcode::RC_SEND_ONLY, "RC_SEND_ONLY"),
        (
            Opcode::RC_SEND_ONLY_WITH_IMMEDIATE,
            "RC_SEND_ONLY_WITH_IMMEDIATE",
        ),
        (Opcode::RC_RDMA_WRITE_FIRST, "RC_RDMA_WRITE_FIRST"),
        (Opcode::RC_RDMA_WRITE_MIDDLE, "RC_RDMA_WRITE_MIDDLE"),
        (Opcode::RC_RDMA_WRITE_LAST, "RC_RDMA_WRITE_LAST"),
        (
            Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
            "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        ),
        (Opcode::RC_RDMA_WRITE_ONLY, "RC_RDMA_WRITE_ONLY"),
        (
            Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        ),
        (Opcode::RC_RDMA_READ_REQUEST, "RC_RDMA_READ_REQUEST"),
        (
            Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            "RC_RDMA_READ_RESPONSE_FIRST",
        ),
        (
            Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            "RC_RDMA_READ_RESPONSE_MIDDLE",
        ),
        (
            Opcode::RC_RDMA_READ_RESPONSE_LAST,
            "RC_RDMA_READ_RESPONSE_LAST",
        ),
        (
            Opcode::RC_RDMA_READ_RESPONSE_ONLY,
            "RC_RDMA_READ_RESPONSE_ONLY",
        ),
        (Opcode::RC_ACKNOWLEDGE, "RC_ACKNOWLEDGE"),
        (Opcode::RC_ATOMIC_ACKNOWLEDGE, "RC_ATOMIC_ACKNOWLEDGE"),
        (Opcode::RC_COMPARE_SWAP, "RC_COMPARE_SWAP"),
        (Opcode::RC_FETCH_ADD, "RC_FETCH_ADD"),
        (
            Opcode::RC_SEND_LAST_WITH_INVALIDATE,
            "RC_SEND_LAST_WITH_INVALIDATE",
        ),
        (
            Opcode::RC_SEND_ONLY_WITH_INVALIDATE,
            "RC_SEND_ONLY_WITH_INVALIDATE",
        ),
        (Opcode::RC_FLUSH, "RC_FLUSH"),
        (Opcode::RC_ATOMIC_WRITE, "RC_ATOMIC_WRITE"),
        (Opcode::UC_SEND_FIRST, "UC_SEND_FIRST"),
        (Opcode::UC_SEND_MIDDLE, "UC_SEND_MIDDLE"),
        (Opcode::UC_SEND_LAST, "UC_SEND_LAST"),
        (
            Opcode::UC_SEND_LAST_WITH_IMMEDIATE,
            "UC_SEND_LAST_WITH_IMMEDIATE",
        ),
        (Opcode::UC_SEND_ONLY, "UC_SEND_ONLY"),
        (
            Opcode::UC_SEND_ONLY_WITH_IMMEDIATE,
            "UC_SEND_ONLY_WITH_IMMEDIATE",
        ),
        (Opcode::UC_RDMA_WRITE_FIRST, "UC_RDMA_WRITE_FIRST"),
        (Opcode::UC_RDMA_WRITE_MIDDLE, "UC_RDMA_WRITE_MIDDLE"),
        (Opcode::UC_RDMA_WRITE_LAST, "UC_RDMA_WRITE_LAST"),
        (
            Opcode::UC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
            "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        ),
        (Opcode::UC_RDMA_WRITE_ONLY, "UC_RDMA_WRITE_ONLY"),
        (
            Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        ),
        (Opcode::RD_SEND_FIRST, "RD_SEND_FIRST"),
        (Opcode::RD_SEND_MIDDLE, "RD_SEND_MIDDLE"),
        (Opcode::RD_SEND_LAST, "RD_SEND_LAST"),
        (
            Opcode::RD_SEND_LAST_WITH_IMMEDIATE,
            "RD_SEND_LAST_WITH_IMMEDIATE",
        ),
        (Opcode::RD_SEND_ONLY, "RD_SEND_ONLY"),
        (
            Opcode::RD_SEND_ONLY_WITH_IMMEDIATE,
            "RD_SEND_ONLY_WITH_IMMEDIATE",
        ),
        (Opcode::RD_RDMA_WRITE_FIRST, "RD_RDMA_WRITE_FIRST"),
        (Opcode::RD_RDMA_WRITE_MIDDLE, "RD_RDMA_WRITE_MIDDLE"),
        (Opcode::RD_RDMA_WRITE_LAST, "RD_RDMA_WRITE_LAST"),
        (
            Opcode::RD_RDMA_WRITE_LAST_WITH_IMMEDIATE,
            "RD_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        ),
        (Opcode::RD_RDMA_WRITE_ONLY, "RD_RDMA_WRITE_ONLY"),
        (
            Opcode::RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            "RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        ),
        (Opcode::RD_RDMA_READ_REQUEST, "RD_RDMA_READ_REQUEST"),
        (
            Opcode::RD_RDMA_READ_RESPONSE_FIRST,
            "RD_RDMA_READ_RESPONSE_FIRST",
        ),
        (
            Opcode::RD_RDMA_READ_RESPONSE_MIDDLE,
            "RD_RDMA_READ_RESPONSE_MIDDLE",
        ),
        (
            Opcode::RD_RDMA_READ_RESPONSE_LAST,
            "RD_RDMA_READ_RESPONSE_LAST",
        ),
        (
            Opcode::RD_RDMA_READ_RESPONSE_ONLY,
            "RD_RDMA_READ_RESPONSE_ONLY",
        ),
        (Opcode::RD_ACKNOWLEDGE, "RD_ACKNOWLEDGE"),
        (Opcode::RD_ATOMIC_ACKNOWLEDGE, "RD_ATOMIC_ACKNOWLEDGE"),
        (Opcode::RD_COMPARE_SWAP, "RD_COMPARE_SWAP"),
        (Opcode::RD_FETCH_ADD, "RD_FETCH_ADD"),
        (Opcode::RD_RESYNC, "RD_RESYNC"),
        (Opcode::UD_SEND_ONLY, "UD_SEND_ONLY"),
        (
            Opcode::UD_SEND_ONLY_WITH_IMMEDIATE,
            "UD_SEND_ONLY_WITH_IMMEDIATE",
        ),
        (Opcode::CNP, "CNP"),
    ];
    let mut seen = HashSet::new();
    for (op, name) in constants {
        assert_eq!(op.name(), name, "{:#04x}", op.0);
        assert!(seen.insert(op.0), "{name} duplicates {:#04x}", op.0);
    }
    // Every supported opcode has a constant, and nothing else is supported.
    let supported: HashSet<u8> = OPCODE_TABLE
        .iter()
        .filter(|i| i.is_supported())
        .map(|i| i.opcode.0)
        .collect();
    let with_constant: HashSet<u8> = constants
        .iter()
        .filter(|(op, _)| op.is_supported())
        .map(|(op, _)| op.0)
        .collect();
    assert_eq!(supported, with_constant);
}

#[test]
fn find_reads_the_table_backwards() {
    let mut found = 0;
    for info in OPCODE_TABLE.iter().filter(|i| i.is_supported()) {
        let position = info.position.unwrap();
        let opcode = Opcode::find(
            info.transport,
            info.operation,
            position,
            info.has_immediate(),
            info.has_invalidate(),
        );
        assert_eq!(opcode, Some(info.opcode), "{}", info.name);
        found += 1;
    }
    assert_eq!(found, 60);
    // Shapes no opcode has.
    use Operation::*;
    use Position::*;
    assert_eq!(Opcode::find(Transport::Rc, Send, First, true, false), None);
    assert_eq!(Opcode::find(Transport::Uc, Send, Only, false, true), None);
    assert_eq!(Opcode::find(Transport::Ud, Send, First, false, false), None);
    assert_eq!(
        Opcode::find(Transport::Uc, RdmaReadRequest, Only, false, false),
        None
    );
    assert_eq!(Opcode::find(Transport::Xrc, Send, Only, false, false), None);
    assert_eq!(
        Opcode::find(Transport::Rc, Reserved, Only, false, false),
        None
    );
    assert_eq!(
        Opcode::find(Transport::Rc, RdmaWrite, Last, true, false),
        Some(Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE)
    );
    assert_eq!(
        Opcode::find(Transport::Ud, Send, Only, true, false),
        Some(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE)
    );
}

#[test]
fn positions_start_and_end_messages() {
    use Position::*;
    assert!(First.starts_message() && !First.ends_message());
    assert!(!Middle.starts_message() && !Middle.ends_message());
    assert!(!Last.starts_message() && Last.ends_message());
    assert!(Only.starts_message() && Only.ends_message());
}

#[test]
fn coverage_per_transport() {
    let count = |t: Transport| {
        OPCODE_TABLE
            .iter()
            .filter(|i| i.transport == t && i.is_supported())
            .count()
    };
    assert_eq!(count(Transport::Rc), 23);
    assert_eq!(count(Transport::Uc), 12);
    assert_eq!(count(Transport::Rd), 22);
    assert_eq!(count(Transport::Ud), 2);
    assert_eq!(count(Transport::Cnp), 1);
    assert_eq!(count(Transport::Xrc), 0);
    assert_eq!(count(Transport::Manufacturer), 0);
    assert_eq!(OPCODE_TABLE.iter().filter(|i| i.is_supported()).count(), 60);
}

#[test]
fn display_names_unsupported_with_their_number() {
    use std::format;
    assert_eq!(format!("{}", Opcode::RC_SEND_ONLY), "RC_SEND_ONLY");
    assert_eq!(format!("{}", Opcode(0x15)), "RC_RESERVED(0x15)");
    assert_eq!(format!("{}", Opcode(0xa4)), "XRC_UNSUPPORTED(0xa4)");
    assert_eq!(format!("{}", Opcode(0xff)), "MANUFACTURER_SPECIFIC(0xff)");
    assert_eq!(format!("{}", Opcode::RC_FLUSH), "RC_FLUSH(0x1c)");
}
