//! Two namespaces over veth, xroce's XDP program and an AF_XDP port on both ends: UDP 4791
//! frames sent from one port arrive on the other with the right bytes, in order, none lost
//! at a gentle rate; then nothing is left behind. Once with native XDP (MTU 1500), once with
//! generic XDP at an MTU above veth's native limit for programs without fragment support
//! (3504), and on a 9000-byte link with multi-buffer ports (frames of up to two UMEM frames),
//! natively and generically.
//!
//! Needs root (`#[ignore]`d: `cargo xtask test` runs it).

use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::xsk_support::{Endpoint, Fixture, PAGES_PER_MULTI_BUFFER_PORT, in_host};
use xroce_ebpf::Counter;
use xroce_engine::umem::FRAME_CAPACITY;
use xroce_engine::xdp::{AttachMode, AttachRequest};
use xroce_lab::frame::UdpFrame;
use xroce_lab::{Lab, LabConfig, Side, netns};

const FRAMES: usize = 3000;

/// Frame `seq` from a to b: IPv4, IPv6 every third, 802.1Q-tagged every fifth, with a
/// payload of varying length (up to `max_payload`) whose bytes depend on `seq`.
fn frame(lab: &Lab, seq: usize, max_payload: usize) -> Vec<u8> {
    let (src, dst) = lab.udp_endpoints(
        Side::A,
        seq.is_multiple_of(3),
        0xc000 | (seq as u16 & 0xff),
        4791,
    );
    let len = 4 + (seq * 37) % (max_payload - 4);
    let mut payload = vec![0u8; len];
    payload[..4].copy_from_slice(&(seq as u32).to_be_bytes());
    for (i, b) in payload[4..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_mul(31).wrapping_add(i as u8);
    }
    let vlan = seq.is_multiple_of(5).then_some(42);
    UdpFrame {
        src,
        dst,
        vlan,
        payload: &payload,
    }
    .build()
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xsk_frames_cross_the_veth_in_order_with_the_right_bytes() {
    xroce_lab::require_root();
    // veth's native XDP takes MTUs up to 3504.
    exchange(Fixture::new(), 1400, AttachMode::Native, false);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xsk_frames_cross_the_veth_with_generic_xdp_above_the_native_mtu_limit() {
    xroce_lab::require_root();
    // Above 3504 bytes veth refuses native XDP to a program without fragment support; xroce's
    // has it, so generic is asked for here. Frames up to a UMEM frame's capacity (3840
    // bytes) still arrive whole.
    let config = LabConfig {
        mtu: 4000,
        ..LabConfig::default()
    };
    exchange(Fixture::with(&config), 3700, AttachMode::Generic, false);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xsk_jumbo_frames_cross_the_veth_in_two_umem_frames_with_native_xdp() {
    xroce_lab::require_root();
    jumbo(AttachMode::Native);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xsk_jumbo_frames_cross_the_veth_in_two_umem_frames_with_generic_xdp() {
    xroce_lab::require_root();
    jumbo(AttachMode::Generic);
}

/// Multi-buffer ports on a 9000-byte link: frames up to 7566 bytes (two UMEM frames' 7680)
/// are sent as one or two descriptors and arrive whole.
fn jumbo(mode: AttachMode) {
    let config = LabConfig {
        mtu: 9000,
        ..LabConfig::default()
    };
    let fixture = Fixture::with_pages(&config, 2 * PAGES_PER_MULTI_BUFFER_PORT);
    exchange(fixture, 7500, mode, true);
}

fn exchange(fixture: Fixture, max_payload: usize, want_mode: AttachMode, multi_buffer: bool) {
    let lab = &fixture.lab;
    let request = match want_mode {
        AttachMode::Native => AttachRequest::Auto,
        AttachMode::Generic => AttachRequest::Generic,
    };
    let expected: Vec<Vec<u8>> = (0..FRAMES)
        .map(|seq| frame(lab, seq, max_payload))
        .collect();
    let ready = Barrier::new(2);
    let done = std::sync::atomic::AtomicBool::new(false);

    let (receiver, sender) = std::thread::scope(|scope| {
        let receiver = scope.spawn(|| {
            netns::enter(&lab.b.netns).expect("entering b");
            let mut end = Endpoint::open_with(lab, Side::B, request, multi_buffer);
            let before = end.xdp.counters().expect("counters");
            ready.wait();
            let mut got: Vec<Vec<u8>> = Vec::with_capacity(FRAMES);
            let deadline = Instant::now() + Duration::from_secs(30);
            while got.len() < FRAMES && Instant::now() < deadline {
                let batch = end.port.rx().poll();
                if batch.is_empty() {
                    drop(batch);
                    end.port.wait_rx(Duration::from_millis(10)).expect("poll");
                    continue;
                }
                got.extend(batch.iter().map(<[u8]>::to_vec));
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            let counters = end.xdp.counters().expect("counters").since(&before);
            let stats = end.port.kernel_stats().expect("XDP_STATISTICS");
            (
                got,
                counters,
                end.port.counters(),
                stats,
                end.mode,
                end.port.info().clone(),
                end.xdp.program_id().expect("id"),
            )
        });
        let sender = scope.spawn(|| {
            netns::enter(&lab.a.netns).expect("entering a");
            let mut end = Endpoint::open_with(lab, Side::A, request, multi_buffer);
            ready.wait();
            let tx = end.port.tx();
            for chunk in expected.chunks(16) {
                for packet in chunk {
                    // Gentle: wait for the kernel to complete frames rather than fill the ring.
                    while !tx.send(packet) {
                        tx.poll_completions();
                    }
                }
                tx.flush();
                std::thread::sleep(Duration::from_micros(200));
                tx.poll_completions();
            }
            while tx.in_flight() > 0 && !done.load(std::sync::atomic::Ordering::Relaxed) {
                tx.poll_completions();
                std::thread::sleep(Duration::from_millis(1));
            }
            (
                end.port.counters(),
                end.mode,
                end.xdp.program_id().expect("id"),
            )
        });
        (
            receiver.join().expect("receiver panicked"),
            sender.join().expect("sender panicked"),
        )
    });

    let (got, xdp_counters, rx_counters, stats, rx_mode, rx_info, rx_id) = receiver;
    let (tx_counters, tx_mode, tx_id) = sender;
    eprintln!(
        "attach a: {tx_mode}, b: {rx_mode}; port b: {} mode, UMEM on {}; kernel stats b: {stats:?}",
        rx_info.bind_mode, rx_info.backing
    );
    // Descriptors: one per UMEM frame a frame takes (one each without multi-buffer).
    let parts: usize = expected
        .iter()
        .map(|f| f.len().div_ceil(FRAME_CAPACITY))
        .sum();
    let long = expected.iter().filter(|f| f.len() > FRAME_CAPACITY).count() as u64;
    assert_eq!(
        tx_counters.tx.frames, parts as u64,
        "frames a put on its TX ring"
    );
    assert_eq!(
        tx_counters.tx.completed, parts as u64,
        "frames a's kernel completed"
    );
    assert_eq!(tx_counters.tx.multi_buffer_packets, long);
    assert_eq!(
        got.len(),
        FRAMES,
        "frames b received (kernel stats {stats:?})"
    );
    for (seq, (got, want)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "frame {seq} differs");
    }
    assert_eq!(
        xdp_counters.get(Counter::Redirected),
        FRAMES as u64,
        "redirected by b's XDP"
    );
    assert_eq!(xdp_counters.get(Counter::PassNoSocket), 0);
    assert_eq!(rx_counters.rx.frames, parts as u64);
    assert_eq!(rx_counters.rx.multi_buffer_packets, long);
    assert_eq!(rx_counters.rx.oversized, 0);
    assert_eq!(
        multi_buffer,
        long > 0,
        "frames longer than one UMEM frame were sent"
    );
    let bytes: usize = expected.iter().map(Vec::len).sum();
    assert_eq!(rx_counters.rx.bytes, bytes as u64);
    assert_eq!(rx_mode, want_mode, "XDP attach mode on b");
    assert_eq!(tx_mode, want_mode, "XDP attach mode on a");
    assert!(
        rx_info.backing.is_hugepages(),
        "UMEM should be on the reserved hugepages"
    );
    fixture.finish(&[rx_id, tx_id]);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xsk_opening_a_port_attaches_no_xdp_program() {
    xroce_lab::require_root();
    let fixture = Fixture::new();
    let lab = &fixture.lab;
    let link = || {
        let out = xroce_lab::run(std::process::Command::new("ip").args([
            "-n",
            &lab.a.netns,
            "link",
            "show",
            "dev",
            &lab.a.interface,
        ]))
        .expect("ip link show");
        out.contains("xdp")
    };
    in_host(lab, Side::A, || {
        let port =
            xroce_engine::xsk::Port::open(&xroce_engine::xsk::PortConfig::new(&lab.a.interface, 0))
                .expect("opening a port");
        // libxdp would attach its default program here unless told not to.
        assert!(!link(), "a port alone attached an XDP program");
        drop(port);
    });
    assert!(!link());
    fixture.finish(&[]);
}
