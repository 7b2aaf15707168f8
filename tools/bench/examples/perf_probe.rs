//! A latency probe for profiling: 2-byte WRITE round trips between two daemons, as root:
//! `cargo run --release -p xroce-bench --example perf_probe` (`XARGS="--spin-us 0"` passes
//! arguments to both daemons).

use std::time::{Duration, Instant};

use verbs_shm::client::{Access, QpInit, QpType, SendOp, SendWr, Sge, WorkCompletion};
use xroce_lab::daemons::{TwoHosts, connect, xroced_release};
use xroce_lab::{LabConfig, Side};

fn main() {
    xroce_lab::require_root();
    let extra: Vec<String> = std::env::var("XARGS")
        .map(|s| s.split(' ').map(str::to_owned).collect())
        .unwrap_or_default();
    let extra: Vec<&str> = extra
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    let h =
        TwoHosts::start_with(&xroced_release().unwrap(), &LabConfig::default(), &extra).unwrap();
    let (ca, cb) = (h.open(Side::A).unwrap(), h.open(Side::B).unwrap());
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let (ma, mb) = (
        pa.alloc_mr(65536, Access::ALL).unwrap(),
        pb.alloc_mr(65536, Access::ALL).unwrap(),
    );
    let (cqa, cqb) = (
        ca.create_cq(64, None).unwrap(),
        cb.create_cq(64, None).unwrap(),
    );
    let qa = pa.create_qp(&QpInit::new(QpType::Rc, &cqa, &cqa)).unwrap();
    let qb = pb.create_qp(&QpInit::new(QpType::Rc, &cqb, &cqb)).unwrap();
    connect(&qa, h.av(Side::A), qb.qpn(), 1, 2).unwrap();
    connect(&qb, h.av(Side::B), qa.qpn(), 2, 1).unwrap();
    let sge = [Sge {
        addr: ma.addr(),
        length: 2,
        lkey: ma.lkey(),
    }];
    let w = SendOp::Write {
        remote_addr: mb.addr(),
        rkey: mb.rkey(),
    };
    let mut buf = [WorkCompletion::default(); 4];
    let mut rtts = Vec::new();
    for i in 0..3000 {
        let t = Instant::now();
        qa.post_send(&[SendWr::new(i, w, &sge)]).unwrap();
        loop {
            let n = cqa.poll(&mut buf).unwrap();
            if n > 0 {
                break;
            }
            std::hint::spin_loop();
        }
        rtts.push(t.elapsed());
    }
    rtts.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    eprintln!(
        "WRITE 2 B round trip (post -> completion): min {:.1} median {:.1} p99 {:.1} µs",
        us(rtts[0]),
        us(rtts[rtts.len() / 2]),
        us(rtts[rtts.len() * 99 / 100])
    );
    let stats = ca.stats().unwrap();
    eprintln!(
        "{:?}",
        stats.iter().filter(|(_, v)| *v > 0).collect::<Vec<_>>()
    );
}
