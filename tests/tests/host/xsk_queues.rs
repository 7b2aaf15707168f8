//! One AF_XDP port per queue: with two-queue veth interfaces, a port on each queue of each
//! end, frames sent from a's queue q arrive on b's port for queue q and no other (the XDP
//! program redirects by `rx_queue_index` into the XSKMAP slot of that queue).
//!
//! Needs root (`#[ignore]`d: `cargo xtask test` runs it).

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crate::xsk_support::{Fixture, in_host};
use xroce_ebpf::Counter;
use xroce_engine::umem::HugepagePolicy;
use xroce_engine::xdp::{AttachRequest, XdpProgram};
use xroce_engine::xsk::{Port, PortConfig};
use xroce_lab::frame::UdpFrame;
use xroce_lab::{Lab, LabConfig, Side};

const QUEUES: u32 = 2;
const PER_QUEUE: usize = 200;

struct MultiEnd {
    xdp: XdpProgram,
    ports: Vec<Port>,
}

fn open(lab: &Lab, side: Side) -> MultiEnd {
    let interface = lab.host(side).interface.clone();
    let mut xdp = XdpProgram::load(QUEUES).expect("loading");
    xdp.attach(&interface, AttachRequest::Native)
        .expect("native XDP on veth");
    let ports = (0..QUEUES)
        .map(|queue| {
            let mut config = PortConfig::new(&interface, queue);
            // Four ports: ordinary pages, not to depend on the hugepage pool here.
            config.hugepages = HugepagePolicy::Never;
            let port = Port::open(&config).expect("opening a port");
            xdp.insert_socket(queue, port.as_fd()).expect("XSKMAP");
            port
        })
        .collect();
    MultiEnd { xdp, ports }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xsk_each_queue_has_its_own_socket() {
    xroce_lab::require_root();
    let fixture = Fixture::with(&LabConfig {
        queues: QUEUES,
        ..LabConfig::default()
    });
    let lab = &fixture.lab;
    let mut a = in_host(lab, Side::A, || open(lab, Side::A));
    let mut b = in_host(lab, Side::B, || open(lab, Side::B));
    let ids = [
        a.xdp.program_id().expect("id"),
        b.xdp.program_id().expect("id"),
    ];
    let before = b.xdp.counters().expect("counters");

    let (src, dst) = lab.udp_endpoints(Side::A, false, 0xc000, 4791);
    for (queue, port) in a.ports.iter_mut().enumerate() {
        for seq in 0..PER_QUEUE {
            let payload = [queue as u8, (seq >> 8) as u8, seq as u8, 0xab];
            let frame = UdpFrame {
                src,
                dst,
                vlan: None,
                payload: &payload,
            }
            .build();
            let tx = port.tx();
            while !tx.send(&frame) {
                tx.poll_completions();
            }
            if seq % 16 == 15 {
                tx.flush();
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        port.tx().flush();
    }

    for (queue, port) in b.ports.iter_mut().enumerate() {
        let mut seqs = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while seqs.len() < PER_QUEUE && Instant::now() < deadline {
            let batch = port.rx().poll();
            for frame in batch.iter() {
                let payload = &frame[frame.len() - 4..];
                assert_eq!(
                    payload[0] as usize, queue,
                    "a frame of another queue on queue {queue}"
                );
                seqs.push(usize::from(payload[1]) << 8 | usize::from(payload[2]));
            }
            if batch.is_empty() {
                drop(batch);
                port.wait_rx(Duration::from_millis(10)).expect("poll");
            }
        }
        assert_eq!(seqs, (0..PER_QUEUE).collect::<Vec<_>>(), "queue {queue}");
    }
    let moved = b.xdp.counters().expect("counters").since(&before);
    assert_eq!(
        moved.get(Counter::Redirected),
        u64::from(QUEUES) * PER_QUEUE as u64
    );
    assert_eq!(moved.get(Counter::PassNoSocket), 0);

    in_host(lab, Side::A, move || drop(a));
    in_host(lab, Side::B, move || drop(b));
    fixture.finish(&ids);
}
