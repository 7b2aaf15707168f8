//! Whatever arrives on QP1: random bytes, captured MADs with random bytes changed, other
//! management classes, LAP and APR, messages for connections that do not exist. Nothing
//! panics, every MAD lands in exactly one disposition counter, strays are answered only
//! where Linux answers, and the hosts still connect afterwards.

mod common;

use std::time::Duration;

use common::*;
use xroce_cm::testing::{Pair, Side};
use xroce_cm::{Counters, EventKind, SeededRandom};
use xroce_wire::PortSpace;

fn assert_rule(c: &Counters) {
    assert_eq!(c.rcvd_mads, c.dispositions(), "{c:?}");
}

#[test]
fn random_and_mutated_mads_never_panic_and_are_all_counted() {
    let mut p = Pair::new(50);
    // B has a listener, an established connection and a pending request.
    let (_, _, _) = establish(&mut p, PORT);
    connect(&mut p, PORT);
    wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let captured: Vec<Vec<u8>> = [
        captured_mads("rping_rdma_cm.pcap"),
        captured_mads("write_bw_rdma_cm.pcap"),
    ]
    .concat();
    let own: Vec<[u8; 256]> = p.wire.iter().map(|s| s.mad).collect();
    let mut rng = SeededRandom::new(0x5eed);
    let before = p.b.cm.counters().rcvd_mads;
    let n = 20_000u64;
    for i in 0..n {
        let mut mad = match i % 3 {
            0 => {
                let mut m = vec![0u8; 256];
                for b in m.iter_mut() {
                    *b = rng.next_u64() as u8;
                }
                // Often a valid CM header, so the message parsers see it.
                if i % 2 == 0 {
                    m[..4].copy_from_slice(&[1, 7, 2, 3]);
                    m[16] = 0;
                    m[17] = 0x10 + (rng.below(11) as u8);
                }
                m
            }
            1 => captured[rng.below(captured.len() as u64) as usize].clone(),
            _ => own[rng.below(own.len() as u64) as usize].to_vec(),
        };
        for _ in 0..rng.below(4) {
            let at = rng.below(256) as usize;
            mad[at] ^= 1 << rng.below(8);
        }
        let len = if i % 11 == 0 {
            rng.below(257) as usize
        } else {
            256
        };
        let now = p.now;
        let from = xroce_cm::MadAddress::new(p.b.addr, p.a.addr);
        p.b.cm.handle_mad(now, from, &mad[..len]);
        // The answers B gives go nowhere; its events are read.
        while p.b.cm.poll_transmit().is_some() {}
        while p.b.cm.poll_event().is_some() {}
    }
    let c = p.b.cm.counters();
    assert_eq!(c.rcvd_mads - before, n);
    assert_rule(c);
    assert!(c.rcvd_malformed > 0 && c.rcvd_not_cm > 0 && c.rcvd_unsupported_attribute > 0);
    assert!(c.rcvd_unmatched > 0 && c.rcvd_duplicate > 0);
    // Timers still run, and a new connection still works.
    p.run_for(Duration::from_secs(200));
    assert_rule(p.b.cm.counters());
    let mut q = Pair::new(51);
    std::mem::swap(&mut q.b, &mut p.b);
    q.b.events.clear();
    q.b.cm.owner_gone(q.now, OWNER_B);
    establish(&mut q, PORT + 1);
}

#[test]
fn strays_are_answered_only_where_linux_answers() {
    let mut p = Pair::new(52);
    let (a, _, _) = establish(&mut p, PORT);
    let mut q = Pair::new(53);
    // A DREQ for a connection B does not have: answered with a DREP (cm_issue_drep).
    let dreq = {
        let now = p.now;
        p.a.cm.disconnect(now, a).unwrap();
        p.a.cm.poll_transmit().unwrap().mad
    };
    q.inject(Side::B, &dreq);
    assert_eq!(q.b.cm.counters().rcvd_unmatched, 1);
    assert_eq!(
        q.sent_by(Side::B, |m| matches!(m, xroce_wire::CmMessage::Drep(_)))
            .len(),
        1
    );
    // An RTU, REP, MRA or REJ for nothing: dropped, not answered.
    let before = q.wire.len();
    for s in p.wire.clone() {
        if !matches!(
            s.message(),
            Some(xroce_wire::CmMessage::Req(_)) | Some(xroce_wire::CmMessage::Dreq(_))
        ) {
            q.inject(Side::B, &s.mad);
        }
    }
    assert_eq!(q.wire.len(), before, "nothing answered");
    assert_rule(q.b.cm.counters());
}

#[test]
fn other_classes_and_lap_are_counted_not_served() {
    let mut p = Pair::new(54);
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let mut mad = [0u8; 256];
    mad[..4].copy_from_slice(&[1, 0x03, 2, 1]); // SA Get
    p.inject(Side::B, &mad);
    mad[..4].copy_from_slice(&[1, 0x07, 2, 1]); // CM Get ClassPortInfo
    mad[16..18].copy_from_slice(&[0, 1]);
    p.inject(Side::B, &mad);
    mad[3] = 3;
    mad[16..18].copy_from_slice(&[0, 0x19]); // LAP
    p.inject(Side::B, &mad);
    p.inject(Side::B, &mad[..100]);
    let c = p.b.cm.counters();
    assert_eq!(
        (
            c.rcvd_not_cm,
            c.rcvd_unsupported_attribute,
            c.rcvd_malformed
        ),
        (2, 1, 1)
    );
    assert_rule(c);
    assert!(p.wire.is_empty());
}
