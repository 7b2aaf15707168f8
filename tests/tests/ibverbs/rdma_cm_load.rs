//! rdma_cm at scale and over a path that loses frames: `cmtime` setting up and tearing
//! down 200 connections between two daemons and with both ends on one daemon (its step
//! timings are printed: they are the connection setup rate a user sees), and rping,
//! ucmatose, udaddy and cmtime across a router that loses, duplicates and reorders RoCEv2
//! frames — CM MADs among them — where connections must still establish because the CM
//! retransmits what was lost and ignores what was duplicated.

use std::time::{Duration, Instant};

use xroce_impair::Impairment;
use xroce_lab::Side;
use xroce_lab::daemons::counter;

use crate::ibverbs_support::{Bench, Finished, Running, both_ok, require_tools, serial};

const UTILS: &[&str] = &["rping", "ucmatose", "udaddy", "cmtime"];

/// Connections cmtime sets up and tears down.
const CONNECTIONS: &str = "200";

/// A daemon's counters.
fn stats(bench: &Bench, side: Side) -> Vec<(String, u64)> {
    let ctx = bench.hosts.open(side).expect("opening the device");
    ctx.stats().expect("the daemon's counters")
}

/// Waits until the daemon of `side` holds no rdma_cm id: every tool's ids were destroyed
/// when it exited (or the daemon did it for them).
fn no_ids_left(bench: &Bench, side: Side) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ids = counter(&stats(bench, side), "cm_ids");
        if ids == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{side:?}'s daemon still holds {ids} rdma_cm ids"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// cmtime's client output: every step it timed, and the connect step's rate.
fn report(what: &str, client: &Finished) {
    println!("{what}:\n{}", client.stdout.trim_end());
}

/// cmtime's server on A (it serves until it is killed: it never exits by itself) and its
/// client on `client_side`, which must exit 0 having connected and disconnected every
/// connection. Returns the client's output.
fn cmtime(bench: &Bench, client_side: Side) -> Finished {
    let a = bench.address(Side::A);
    let mut server: Running = bench.spawn(Side::A, &["cmtime", "-b", &a, "-c", CONNECTIONS]);
    bench.wait_cm_listening(Side::A, 1, &mut server);
    let client = bench
        .spawn(client_side, &["cmtime", "-s", &a, "-c", CONNECTIONS])
        .finish();
    server.kill();
    assert!(client.status.success(), "cmtime's client:\n{client}");
    for step in ["resolve addr", "connect", "disconnect"] {
        assert!(client.stdout.contains(step), "no `{step}` step: {client}");
    }
    client
}

/// cmtime: 200 connections set up (address and route resolution, QP creation, REQ, REP,
/// RTU) and torn down (DREQ, DREP) between two daemons, then with both ends on one; no
/// id is left behind in either daemon.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn cmtime_sets_up_and_tears_down_200_connections() {
    require_tools(UTILS);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    for client_side in [Side::B, Side::A] {
        let client = cmtime(&bench, client_side);
        report(&format!("cmtime, client on {client_side:?}"), &client);
        no_ids_left(&bench, Side::A);
        no_ids_left(&bench, Side::B);
    }
}

/// Across a router that loses 1 % of RoCEv2 frames, duplicates 0.5 % and reorders 0.5 %
/// (CM MADs as much as data): rping with its data verified, ucmatose's 16 connections,
/// udaddy's address resolution over SIDR (without datagrams: a lost datagram is lost for
/// good on UD, on any stack) and cmtime's 200 connections all complete, because lost MADs are sent
/// again (the daemons' `cm_retransmits` grow) and duplicates are recognised.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn connections_establish_over_a_lossy_path() {
    require_tools(UTILS);
    let _one_at_a_time = serial();
    let impairment = Impairment {
        loss: 0.01,
        duplicate: 0.005,
        reorder: 0.005,
        reorder_gap: 3,
        seed: 0xc0,
        ..Impairment::default()
    };
    let mut bench = Bench::impaired(&impairment);
    let a = bench.address(Side::A);
    both_ok(
        "rping",
        bench.cm_pair(
            Side::A,
            Side::B,
            &["rping", "-s", "-a", &a, "-C", "200", "-V", "-S", "1024"],
            &["rping", "-c", "-a", &a, "-C", "200", "-V", "-S", "1024"],
        ),
    );
    let (_, client) = both_ok(
        "ucmatose",
        bench.cm_pair(
            Side::A,
            Side::B,
            &["ucmatose", "-b", &a, "-c", "16", "-C", "100"],
            &["ucmatose", "-s", &a, "-c", "16", "-C", "100"],
        ),
    );
    assert!(client.stdout.contains("test complete"), "{client}");
    let (_, client) = both_ok(
        "udaddy",
        bench.cm_pair(
            Side::A,
            Side::B,
            &["udaddy", "-b", &a, "-c", "8", "-C", "0"],
            &["udaddy", "-s", &a, "-c", "8", "-C", "0"],
        ),
    );
    assert!(client.stdout.contains("test complete"), "{client}");
    let client = cmtime(&bench, Side::B);
    report("cmtime over the lossy path", &client);
    no_ids_left(&bench, Side::A);
    no_ids_left(&bench, Side::B);

    let (sa, sb) = (stats(&bench, Side::A), stats(&bench, Side::B));
    let sum = |name: &str| counter(&sa, name) + counter(&sb, name);
    let impaired = bench
        .impair
        .take()
        .expect("the bench has its forwarder")
        .stop()
        .expect("the forwarder's counters");
    println!(
        "forwarder: {impaired:?}; CM MADs sent {}, retransmitted {}, duplicates {}",
        sum("cm_sent_mads"),
        sum("cm_retransmits"),
        sum("cm_rcvd_duplicate"),
    );
    assert!(
        sum("cm_retransmits") > 0,
        "no CM MAD was retransmitted: was any lost? {impaired:?}"
    );
}
