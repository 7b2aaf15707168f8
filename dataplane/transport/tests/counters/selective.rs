//! Selective repeat: each packet a responder in selective repeat holds, drops for want of
//! room or drops as a duplicate of one held lands in one counter, each NAK with a selective
//! acknowledgement is counted once where it is sent and once where it is received, a QP
//! without selective repeat takes one for the standard NAK it is (`rcvd_seq_err`), and an
//! acknowledgement with bytes after its AETH that is no selective acknowledgement lands in
//! `rcvd_malformed` on a QP without selective repeat (as before) and in
//! `sr_sack_malformed` on one with it.

use crate::helpers::*;
use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{Access, Counter, Limits, QpType};
use xroce_wire::{Frame, NakCode, Psn, SackRepr, Syndrome};

/// Two hosts in selective repeat, B holding at most `held` packets.
fn selective_pair(held: u32) -> (Host, Host) {
    let limits = Limits {
        max_held_packets: held,
        ..Limits::default()
    };
    let mut a = Host::with_limits(1, limits);
    let mut b = Host::with_limits(2, limits);
    a.add_region(KEY, BASE, 1 << 16, Access::ALL);
    b.add_region(KEY, BASE, 1 << 16, Access::ALL);
    connect(
        &mut a,
        QA,
        &mut b,
        QB,
        QpType::Rc,
        &Connection::default(),
        NOW,
    );
    a.endpoint.set_selective_repeat(QA, true).unwrap();
    b.endpoint.set_selective_repeat(QB, true).unwrap();
    (a, b)
}

/// The PSN and selective acknowledgement of a NAK that carries one.
fn sack_of(frame: &[u8]) -> (u32, SackRepr) {
    assert!(Frame::parse(frame).is_err(), "a standard parse refuses it");
    let f = Frame::parse_acknowledge_with_trailer(frame).unwrap();
    assert_eq!(
        f.ib.aeth.unwrap().syndrome,
        Syndrome::Nak(NakCode::PsnSequenceError)
    );
    (f.ib.bth.psn.value(), SackRepr::parse(f.payload).unwrap())
}

#[test]
fn held_duplicate_and_full_each_land_in_one_counter() {
    let (mut a, mut b) = selective_pair(2);
    for _ in 0..4 {
        a.endpoint.post_send(NOW, QA, write(64)).unwrap();
    }
    let f = take(&mut a);
    assert_eq!(f.len(), 4);
    let before = counters(&b);
    give(&mut b, &f[1]);
    assert_counted(&b, &before, &[]);
    assert_eq!(b.endpoint.counters().sr_packets_held, 1);
    give_counting(&mut b, &f[1], &[(Counter::sr_duplicates_dropped, 1)]);
    give(&mut b, &f[2]);
    give_counting(&mut b, &f[3], &[(Counter::sr_held_dropped_full, 1)]);
    assert_eq!(b.endpoint.counters().sr_packets_held, 2);
    // One NAK (coalesced) saying what is held: PSNs 1 and 2 after the expected one.
    let before = counters(&b);
    let nak = take(&mut b);
    assert_counted(&b, &before, &[(Counter::sr_naks_sent, 1)]);
    assert_eq!(nak.len(), 1);
    let (psn, sack) = sack_of(&nak[0]);
    assert_eq!(psn, PSN_A);
    let held: Vec<(u32, u32)> = sack
        .ranges()
        .iter()
        .map(|(f, l)| (f.value(), l.value()))
        .collect();
    assert_eq!(held, [(PSN_A + 1, PSN_A + 2)]);
    give_counting(&mut a, &nak[0], &[(Counter::sr_naks_received, 1)]);
    assert_eq!(a.endpoint.counters().rcvd_seq_err, 0);
    assert_eq!(
        a.endpoint.counters().completer_retry_err,
        0,
        "no retry spent"
    );
    // The gap filled: the held packets go through in order, one acknowledgement for all
    // three (the fourth, dropped for want of room, is still missing).
    give(&mut b, &f[0]);
    let ack = take(&mut b);
    assert_eq!(syndrome(&ack), Syndrome::ACK_UNLIMITED);
    assert_eq!(Frame::parse(&ack[0]).unwrap().ib.bth.psn.value(), PSN_A + 2);
    assert_eq!(
        b.endpoint
            .qp(QB)
            .unwrap()
            .diagnostics()
            .expected_psn
            .value(),
        PSN_A + 3
    );
    assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().held, 0);
}

/// A selective acknowledgement says what is held when it leaves: one waiting in the
/// response queue, even behind another response, is not queued again (a second would say
/// the same and take a place a positive acknowledgement needs).
#[test]
fn a_selective_acknowledgement_waiting_is_not_queued_twice() {
    let (mut a, mut b) = selective_pair(16);
    for _ in 0..4 {
        a.endpoint.post_send(NOW, QA, write(64)).unwrap();
    }
    let f = take(&mut a);
    assert_eq!(f.len(), 4);
    // PSN 1 held (a selective acknowledgement queued), PSN 0 fills the gap (an ACK queued
    // behind it), PSN 3 held beyond the next gap: the one waiting will say so.
    give(&mut b, &f[1]);
    give(&mut b, &f[0]);
    give(&mut b, &f[3]);
    let before = counters(&b);
    let out = take(&mut b);
    assert_counted(&b, &before, &[(Counter::sr_naks_sent, 1)]);
    let sacks: Vec<(u32, Vec<(u32, u32)>)> = out
        .iter()
        .filter(|frame| Frame::parse(frame).is_err())
        .map(|frame| {
            let (psn, sack) = sack_of(frame);
            let ranges = sack
                .ranges()
                .iter()
                .map(|(f, l)| (f.value(), l.value()))
                .collect();
            (psn, ranges)
        })
        .collect();
    assert_eq!(sacks, [(PSN_A + 2, vec![(PSN_A + 3, PSN_A + 3)])]);
    assert_eq!(b.endpoint.counters().response_queue_full, 0);
}

#[test]
fn a_selective_acknowledgement_that_does_not_parse_lands_in_sr_sack_malformed() {
    let (mut a, mut b) = selective_pair(8);
    for _ in 0..5 {
        a.endpoint.post_send(NOW, QA, write(64)).unwrap();
    }
    let f = take(&mut a);
    for frame in &f[1..] {
        give(&mut b, frame);
    }
    let nak = take(&mut b).remove(0);
    // Garbled: the version byte (the ICRC is made again, so only the trailer is wrong).
    let f2 = Frame::parse_acknowledge_with_trailer(&nak).unwrap();
    let mut trailer = f2.payload.to_vec();
    trailer[0] = 9;
    let garbled = emit_with_trailer(&f2, &trailer);
    give_counting(&mut a, &garbled, &[(Counter::sr_sack_malformed, 1)]);
    // With a positive syndrome it is no selective acknowledgement either.
    let mut positive = f2;
    positive.ib.aeth = Some(xroce_wire::AethRepr {
        syndrome: Syndrome::ACK_UNLIMITED,
        msn: 0,
    });
    let positive = emit_with_trailer(&positive, f2.payload);
    give_counting(&mut a, &positive, &[(Counter::sr_sack_malformed, 1)]);
    // Saying something held beyond the last PSN sent (PSN_A + 4): a lie, which would open
    // the window.
    let mut lie = SackRepr::new();
    assert!(lie.push(Psn::new(PSN_A + 1), Psn::new(PSN_A + 4)));
    lie.set_beyond(1);
    let mut bytes = [0u8; 12];
    assert_eq!(lie.emit(&mut bytes), Ok(12));
    give_counting(
        &mut a,
        &emit_with_trailer(&f2, &bytes),
        &[(Counter::sr_sack_malformed, 1)],
    );
    lie.set_beyond(0);
    assert_eq!(lie.emit(&mut bytes), Ok(12));
    give_counting(
        &mut a,
        &emit_with_trailer(&f2, &bytes),
        &[(Counter::sr_naks_received, 1)],
    );
    // Without selective repeat (the peer has it on, this end off) a selective
    // acknowledgement is the PSN sequence error NAK it is, its ranges ignored: the
    // requester goes back N at once instead of waiting for its timer. Anything else with
    // bytes after its AETH is malformed, as it always was.
    a.endpoint.set_selective_repeat(QA, false).unwrap();
    give_counting(&mut a, &garbled, &[(Counter::rcvd_malformed, 1)]);
    give_counting(&mut a, &nak, &[(Counter::rcvd_seq_err, 1)]);
    assert_eq!(a.endpoint.counters().sr_naks_taken_as_standard, 1);
    let resent = take(&mut a);
    assert_eq!(resent.len(), 5, "go-back-N from the NAK's PSN");
    assert_eq!(Frame::parse(&resent[0]).unwrap().ib.bth.psn.value(), PSN_A);
    a.endpoint.set_selective_repeat(QA, true).unwrap();
    give_counting(&mut a, &nak, &[(Counter::sr_naks_received, 1)]);
}

/// The frame `f` again with `trailer` after its AETH.
fn emit_with_trailer(f: &Frame<'_>, trailer: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 512];
    let at = f.headers.header_len();
    let n = f.ib.emit(&mut buf[at..], 0).unwrap();
    buf[at + n..at + n + trailer.len()].copy_from_slice(trailer);
    let len = f.headers.emit(&mut buf, n + trailer.len()).unwrap();
    buf.truncate(len);
    buf
}
