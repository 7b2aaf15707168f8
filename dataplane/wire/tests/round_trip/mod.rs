//! The parse → emit → parse property, shared by the fuzz target
//! (`fuzz/fuzz_targets/parse_emit.rs`) and the stable corpus test (`tests/corpus.rs`).
//!
//! The same bytes are tried three ways:
//! 1. as a whole Ethernet frame: what [`Frame::parse_unverified`] accepts must emit, the
//!    emitted frame must parse (ICRC verified) to the same headers, IB repr and payload, and
//!    emitting that again must give the same bytes;
//! 2. as the IB part alone (BTH to ICRC): what [`IbRepr::parse`] accepts must emit and
//!    parse back to the same repr and payload;
//! 3. that IB part wrapped in a fixed IPv4 or IPv6 envelope, so the frame builder sees every
//!    IB shape the parser accepts.

#![allow(dead_code, unreachable_pub)]

use xroce_wire::{EthernetAddress, Frame, FrameRepr, IbRepr, VlanTag};

/// Panics if the property does not hold for `data`.
pub fn check(data: &[u8]) {
    check_frame(data);
    if let Ok((ib, payload)) = IbRepr::parse(data) {
        check_ib(&ib, payload);
        check_wrapped(&ib, payload, data.len());
    }
}

fn check_frame(data: &[u8]) {
    let Ok(first) = Frame::parse_unverified(data) else {
        return;
    };
    let mut buf = vec![0xa5u8; data.len()];
    let n = first
        .emit(&mut buf)
        .unwrap_or_else(|e| panic!("a parsed frame must emit: {e}"));
    assert_eq!(n, first.len(), "emitted length");
    let second =
        Frame::parse(&buf[..n]).unwrap_or_else(|e| panic!("an emitted frame must parse: {e}"));
    assert_eq!(second.headers, first.headers);
    assert_eq!(second.ib, first.ib);
    assert_eq!(second.payload, first.payload);
    // Emitting normalizes what the repr does not keep (reserved bits, pad bytes, Ethernet
    // padding), so the first emit may differ from the input, even when the input's ICRC
    // was valid; but the emitted form is a fixed point.
    let mut again = vec![0x5au8; n];
    assert_eq!(second.emit(&mut again), Ok(n));
    assert_eq!(
        again,
        buf[..n],
        "emit(parse(emit(parse(x)))) == emit(parse(x))"
    );
}

fn check_ib(ib: &IbRepr, payload: &[u8]) {
    let mut buf = vec![0xa5u8; ib.ib_len(payload.len())];
    let header_len = ib
        .emit(&mut buf, payload.len())
        .unwrap_or_else(|e| panic!("a parsed IB repr must emit: {e}"));
    assert_eq!(header_len, ib.header_len());
    buf[header_len..header_len + payload.len()].copy_from_slice(payload);
    let (again, again_payload) =
        IbRepr::parse(&buf).unwrap_or_else(|e| panic!("an emitted IB part must parse: {e}"));
    assert_eq!(&again, ib);
    assert_eq!(again_payload, payload);
    let mut buf2 = vec![0x5au8; buf.len()];
    assert_eq!(again.emit(&mut buf2, payload.len()), Ok(header_len));
    assert_eq!(
        buf2[..header_len],
        buf[..header_len],
        "emitted headers are a fixed point"
    );
}

fn check_wrapped(ib: &IbRepr, payload: &[u8], seed: usize) {
    let a = EthernetAddress([2, 0, 0, 0, 0, 1]);
    let b = EthernetAddress([2, 0, 0, 0, 0, 2]);
    let headers = if seed.is_multiple_of(2) {
        FrameRepr::ipv4(a, b, [10, 0, 0, 1].into(), [10, 0, 0, 2].into(), 0xc000)
    } else {
        FrameRepr::ipv6(
            a,
            b,
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
            0xffff,
        )
        .with_vlan(Some(VlanTag {
            pcp: 3,
            dei: true,
            vid: 4095,
        }))
    };
    let mut buf = vec![0u8; headers.frame_len(ib.header_len() + payload.len())];
    let n = headers
        .emit_packet(&mut buf, ib, payload)
        .unwrap_or_else(|e| panic!("a parsed IB repr must wrap into a frame: {e}"));
    assert_eq!(n, buf.len());
    let f = Frame::parse(&buf).unwrap_or_else(|e| panic!("a built frame must parse: {e}"));
    assert_eq!(&f.ib, ib);
    assert_eq!(f.payload, payload);
}
