//! Many queue pairs at once between two daemons: 256 RC pairs each doing a WRITE, a SEND and
//! a READ of its own data, and a mesh of UD QPs each sending to every peer QP, every byte
//! and every completion checked.

use std::time::{Duration, Instant};

use verbs_shm::client::{
    Access, Cq, Mr, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, UdTarget, WorkCompletion,
};
use xroce_lab::daemons::{POST_BITS_ONLY, TwoHosts, connect, ud_ready};
use xroce_lab::{LabConfig, Side, require_root};

/// Polls `cq` until `n` completions arrived (panics after `secs` with what came).
fn wait(cq: &Cq, n: usize, secs: u64) -> Vec<WorkCompletion> {
    let mut got = Vec::with_capacity(n);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut buf = [WorkCompletion::default(); 64];
    while got.len() < n {
        let k = cq.poll(&mut buf).expect("poll");
        got.extend_from_slice(&buf[..k]);
        assert!(
            Instant::now() < deadline,
            "only {} of {n} completions after {secs} s",
            got.len()
        );
        if k == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    got
}

/// Bytes that differ for every pair, every operation and every position.
fn data(pair: usize, op: u8, len: usize) -> Vec<u8> {
    let seed = (pair as u32).wrapping_mul(2_654_435_761) ^ u32::from(op) << 24;
    (0..len as u32)
        .map(|i| (seed.wrapping_add(i.wrapping_mul(40_503)) >> 13) as u8)
        .collect()
}

fn read(mr: &Mr, at: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    assert!(mr.read(at, &mut v));
    v
}

const PAIRS: usize = 256;
/// Sizes spanning several packets at the 1024-byte path MTU.
const WRITE_LEN: usize = 3000;
const SEND_LEN: usize = 2500;
const READ_LEN: usize = 5000;
/// Each pair's slice of the regions: three 8 KiB slots.
const SLOT: usize = 8192;
const STRIDE: usize = 3 * SLOT;

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn many_rc_pairs_write_send_and_read_their_own_data() {
    require_root();
    // Post bits alone tell the pollers which of the many rings to read.
    let h = TwoHosts::start(&LabConfig::default(), POST_BITS_ONLY).expect("lab with two daemons");
    let (ca, cb) = (h.open(Side::A).unwrap(), h.open(Side::B).unwrap());
    // The daemon's per-application limits (`--max-qps`, `--max-cqs`, `--max-mr-mib`;
    // 4096 QPs, 4096 CQs and 16 GiB by default) leave room for this test.
    let dev = ca.query_device().unwrap();
    assert!(dev.max_qp as usize >= PAIRS, "max_qp {}", dev.max_qp);
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let (ma, mb) = (
        pa.alloc_mr(PAIRS * STRIDE, Access::ALL).unwrap(),
        pb.alloc_mr(PAIRS * STRIDE, Access::ALL).unwrap(),
    );
    // Sixteen CQs a side, each shared by sixteen QPs.
    let cqs_a: Vec<Cq> = (0..16).map(|_| ca.create_cq(1024, None).unwrap()).collect();
    let cqs_b: Vec<Cq> = (0..16).map(|_| cb.create_cq(1024, None).unwrap()).collect();
    let mut qas = Vec::with_capacity(PAIRS);
    let mut qbs = Vec::with_capacity(PAIRS);
    for i in 0..PAIRS {
        let (ca_, cb_) = (&cqs_a[i % 16], &cqs_b[i % 16]);
        qas.push(pa.create_qp(&QpInit::new(QpType::Rc, ca_, ca_)).unwrap());
        qbs.push(pb.create_qp(&QpInit::new(QpType::Rc, cb_, cb_)).unwrap());
    }
    // Each daemon draws its QP numbers at random, so two daemons may draw the same number
    // (as two hosts may): only one daemon's numbers must be distinct.
    for (side, qps) in [("A", &qas), ("B", &qbs)] {
        let mut qpns: Vec<u32> = qps.iter().map(|q| q.qpn()).collect();
        qpns.sort_unstable();
        qpns.dedup();
        assert_eq!(qpns.len(), PAIRS, "{side}'s QP numbers are distinct");
    }
    for (i, (qa, qb)) in qas.iter().zip(&qbs).enumerate() {
        let (pa_, pb_) = (0x1000 + i as u32 * 7, 0x8000 + i as u32 * 13);
        connect(qa, h.av(Side::A), qb.qpn(), pa_, pb_).unwrap();
        connect(qb, h.av(Side::B), qa.qpn(), pb_, pa_).unwrap();
    }

    // A's slots: [WRITE source | SEND source | READ destination];
    // B's slots: [WRITE destination | receive buffer | READ source].
    for (i, qb) in qbs.iter().enumerate() {
        let base = i * STRIDE;
        assert!(ma.write(base, &data(i, 1, WRITE_LEN)));
        assert!(ma.write(base + SLOT, &data(i, 2, SEND_LEN)));
        assert!(mb.write(base + 2 * SLOT, &data(i, 3, READ_LEN)));
        let rsge = [Sge {
            addr: mb.addr() + (base + SLOT) as u64,
            length: SLOT as u32,
            lkey: mb.lkey(),
        }];
        qb.post_recv(&[RecvWr {
            wr_id: i as u64,
            sges: &rsge,
        }])
        .unwrap();
    }
    let started = Instant::now();
    for (i, qa) in qas.iter().enumerate() {
        let base = (i * STRIDE) as u64;
        let sge = |off: u64, len: usize| {
            [Sge {
                addr: ma.addr() + base + off,
                length: len as u32,
                lkey: ma.lkey(),
            }]
        };
        let (w, s, r) = (
            sge(0, WRITE_LEN),
            sge(SLOT as u64, SEND_LEN),
            sge(2 * SLOT as u64, READ_LEN),
        );
        let remote = mb.addr() + base;
        let mut wrs = [
            SendWr::new(
                (i as u64) << 8 | 1,
                SendOp::Write {
                    remote_addr: remote,
                    rkey: mb.rkey(),
                },
                &w,
            ),
            SendWr::new((i as u64) << 8 | 2, SendOp::Send, &s),
            SendWr::new(
                (i as u64) << 8 | 3,
                SendOp::Read {
                    remote_addr: remote + 2 * SLOT as u64,
                    rkey: mb.rkey(),
                },
                &r,
            ),
        ];
        for wr in &mut wrs {
            wr.signaled = true;
        }
        qa.post_send(&wrs).unwrap();
    }

    // Every work request completes, successfully, on the QP that posted it.
    let mut seen = vec![[false; 3]; PAIRS];
    for (k, cq) in cqs_a.iter().enumerate() {
        for c in wait(cq, 3 * PAIRS / 16, 60) {
            let (i, op) = ((c.wr_id >> 8) as usize, (c.wr_id & 0xff) as usize);
            assert_eq!(c.status, 0, "pair {i} op {op}: {c:?}");
            assert_eq!(i % 16, k, "completion on the wrong CQ: {c:?}");
            assert_eq!(c.qp_num, qas[i].qpn(), "{c:?}");
            assert!(!seen[i][op - 1], "two completions for pair {i} op {op}");
            seen[i][op - 1] = true;
        }
    }
    for (k, cq) in cqs_b.iter().enumerate() {
        for c in wait(cq, PAIRS / 16, 60) {
            let i = c.wr_id as usize;
            assert_eq!((c.status, c.byte_len), (0, SEND_LEN as u32), "{c:?}");
            assert_eq!((i % 16, c.qp_num), (k, qbs[i].qpn()), "{c:?}");
        }
    }
    let took = started.elapsed();
    println!(
        "{PAIRS} RC pairs: {} work requests and {PAIRS} receives in {took:?}",
        3 * PAIRS
    );

    // Every byte where it belongs, and nothing written beyond.
    for i in 0..PAIRS {
        let base = i * STRIDE;
        assert!(
            read(&mb, base, WRITE_LEN) == data(i, 1, WRITE_LEN),
            "pair {i}: WRITE data"
        );
        assert!(
            read(&mb, base + SLOT, SEND_LEN) == data(i, 2, SEND_LEN),
            "pair {i}: SEND data"
        );
        assert!(
            read(&ma, base + 2 * SLOT, READ_LEN) == data(i, 3, READ_LEN),
            "pair {i}: READ data"
        );
        assert!(
            read(&mb, base + WRITE_LEN, SLOT - WRITE_LEN)
                .iter()
                .all(|&b| b == 0),
            "pair {i}: bytes after the WRITE"
        );
    }
    for q in qas.iter().chain(&qbs) {
        assert_eq!(q.query().unwrap().qp_state, 3, "every QP still RTS");
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_mesh_of_ud_qps_delivers_every_datagram_to_its_qp() {
    require_root();
    const N: usize = 8;
    const LEN: usize = 1000;
    const GRH: usize = 40;
    const QKEY: u32 = 0x1111_1111;
    // Post bits alone tell the pollers which of the many rings to read.
    let h = TwoHosts::start(&LabConfig::default(), POST_BITS_ONLY).expect("lab with two daemons");
    let (ca, cb) = (h.open(Side::A).unwrap(), h.open(Side::B).unwrap());
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    // A: N send slots of LEN per QP; B: N receive slots of GRH + LEN per QP.
    let slot = GRH + LEN;
    let (ma, mb) = (
        pa.alloc_mr(N * N * LEN, Access::ALL).unwrap(),
        pb.alloc_mr(N * N * slot, Access::ALL).unwrap(),
    );
    let (cqa, cqb) = (
        ca.create_cq((4 * N * N) as u32, None).unwrap(),
        cb.create_cq((4 * N * N) as u32, None).unwrap(),
    );
    let qas: Vec<_> = (0..N)
        .map(|_| pa.create_qp(&QpInit::new(QpType::Ud, &cqa, &cqa)).unwrap())
        .collect();
    let qbs: Vec<_> = (0..N)
        .map(|_| pb.create_qp(&QpInit::new(QpType::Ud, &cqb, &cqb)).unwrap())
        .collect();
    for (k, q) in qas.iter().chain(&qbs).enumerate() {
        ud_ready(q, QKEY, k as u32).unwrap();
    }
    // Each B QP gets N receives, one per possible sender.
    for (j, qb) in qbs.iter().enumerate() {
        let sges: Vec<[Sge; 1]> = (0..N)
            .map(|s| {
                [Sge {
                    addr: mb.addr() + ((j * N + s) * slot) as u64,
                    length: slot as u32,
                    lkey: mb.lkey(),
                }]
            })
            .collect();
        let wrs: Vec<RecvWr<'_>> = sges
            .iter()
            .enumerate()
            .map(|(s, sge)| RecvWr {
                wr_id: (j * N + s) as u64,
                sges: sge,
            })
            .collect();
        qb.post_recv(&wrs).unwrap();
    }
    // A QP i sends message (i, j) to B QP j; the message's first four bytes name it.
    let ah = pa.create_ah(&h.av(Side::A)).unwrap();
    let message = |i: usize, j: usize| {
        let mut m = data(i * N + j, 9, LEN);
        m[..4].copy_from_slice(&((i * N + j) as u32).to_le_bytes());
        m
    };
    for i in 0..N {
        for j in 0..N {
            assert!(ma.write((i * N + j) * LEN, &message(i, j)));
        }
    }
    for (i, qa) in qas.iter().enumerate() {
        let sges: Vec<[Sge; 1]> = (0..N)
            .map(|j| {
                [Sge {
                    addr: ma.addr() + ((i * N + j) * LEN) as u64,
                    length: LEN as u32,
                    lkey: ma.lkey(),
                }]
            })
            .collect();
        let wrs: Vec<SendWr<'_>> = sges
            .iter()
            .enumerate()
            .map(|(j, sge)| {
                let mut wr = SendWr::new((i * N + j) as u64, SendOp::Send, sge);
                wr.signaled = true;
                wr.ud = Some(UdTarget {
                    ah: &ah,
                    qpn: qbs[j].qpn(),
                    qkey: QKEY,
                });
                wr
            })
            .collect();
        qa.post_send(&wrs).unwrap();
    }
    for c in wait(&cqa, N * N, 30) {
        assert_eq!(c.status, 0, "{c:?}");
        assert_eq!(c.qp_num, qas[c.wr_id as usize / N].qpn(), "{c:?}");
    }
    // Every datagram reached the QP it was sent to, from the QP that sent it, whole; one
    // from every sender for every receiver.
    let mut got = vec![vec![false; N]; N];
    for c in wait(&cqb, N * N, 30) {
        assert_eq!((c.status, c.byte_len), (0, (GRH + LEN) as u32), "{c:?}");
        let j = c.wr_id as usize / N;
        assert_eq!(c.qp_num, qbs[j].qpn(), "{c:?}");
        let i = qas
            .iter()
            .position(|q| q.qpn() == c.src_qp)
            .unwrap_or_else(|| panic!("unknown source QP in {c:?}"));
        let body = read(&mb, c.wr_id as usize * slot + GRH, LEN);
        assert!(body == message(i, j), "datagram {i} -> {j} differs");
        assert!(!got[i][j], "datagram {i} -> {j} twice");
        got[i][j] = true;
    }
    assert!(got.iter().flatten().all(|&g| g));
}
