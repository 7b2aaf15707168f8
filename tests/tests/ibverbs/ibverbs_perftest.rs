//! Debian's unmodified `perftest` on xroce: every bandwidth and latency test between two
//! network namespaces through two daemons, loaded with `LD_LIBRARY_PATH`, with the figures
//! they print parsed and checked (iterations as asked, bandwidth and latency positive and
//! consistent). perftest sees rxe's vendor 0xffffff,
//! unknown to it, so it takes its generic verbs path.

use crate::ibverbs_support::{
    Bench, BwRow, Finished, LatRow, bandwidth, latency, require_tools, serial,
};

/// The iterations of every run: enough to measure something, few enough for a 2-core VM.
const ITERS: u64 = 200;

fn iters_text() -> String {
    ITERS.to_string()
}

/// Runs a bandwidth `tool` (server on A, client on B) with `args` and returns both
/// reports' rows.
fn bw(tool: &str, port: u16, args: &[&str]) -> (Vec<BwRow>, Vec<BwRow>, Finished) {
    require_tools(&[tool]);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let (server, client) = bench.pair(tool, port, args, args);
    server.assert_success();
    client.assert_success();
    assert!(
        client.stdout.contains("ibv_wr* API     : OFF"),
        "an unknown vendor selects perftest's generic verbs path: {client}"
    );
    assert!(
        client.stdout.contains("Link type       : Ethernet"),
        "{client}"
    );
    (bandwidth(&server), bandwidth(&client), client)
}

/// Checks a one-size bandwidth run of `size` bytes.
fn check_bw(tool: &str, port: u16, size: u64, extra: &[&str]) {
    let iters = iters_text();
    let size_text = size.to_string();
    let mut args = vec!["-n", iters.as_str(), "-s", size_text.as_str()];
    args.extend_from_slice(extra);
    let (server, client, out) = bw(tool, port, &args);
    assert_eq!(client.len(), 1, "{out}");
    let row = client[0];
    assert_eq!((row.bytes, row.iterations), (size, ITERS), "{out}");
    assert!(
        row.peak > 0.0 && row.average > 0.0 && row.mpps > 0.0,
        "{row:?}"
    );
    assert!(
        row.average <= row.peak * 1.0001,
        "average above peak: {row:?}"
    );
    // The server reports the same run (a send server measures only its average).
    assert_eq!(server.len(), 1, "the server's report: {server:?}");
    assert_eq!((server[0].bytes, server[0].iterations), (size, ITERS));
    assert!(server[0].average > 0.0, "{:?}", server[0]);
    if extra.contains(&"-x") {
        assert_ipv6_gids(&out);
    }
    eprintln!("{tool} {extra:?}: {row:?}");
}

/// With `-x 1` both ends use GID 1, the hosts' global IPv6 addresses fd00:77::1 and ::2,
/// which perftest prints byte by byte in decimal.
fn assert_ipv6_gids(client: &Finished) {
    assert_eq!(
        client.stdout.matches("GID: 253:00:00:119:").count(),
        2,
        "the local and the remote address are IPv6 GIDs: {client}"
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_write_bw_rc() {
    check_bw("ib_write_bw", 18611, 65536, &[]);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_read_bw_rc() {
    check_bw("ib_read_bw", 18612, 65536, &[]);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_send_bw_rc() {
    check_bw("ib_send_bw", 18613, 65536, &[]);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_send_bw_ud() {
    // A UD message fits one MTU (1024 on the lab's 1500-byte link).
    check_bw("ib_send_bw", 18614, 1024, &["-c", "UD"]);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_atomic_bw_rc() {
    check_bw("ib_atomic_bw", 18615, 8, &[]);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_write_bw_all_sizes() {
    let (server, client, out) = bw("ib_write_bw", 18616, &["-a", "-n", "20"]);
    let sizes: Vec<u64> = (1..=23).map(|k| 1u64 << k).collect();
    assert_eq!(
        client.iter().map(|r| r.bytes).collect::<Vec<_>>(),
        sizes,
        "every size from 2 B to 8 MiB: {out}"
    );
    for row in &client {
        assert_eq!(row.iterations, 20, "{row:?}");
        // perftest prints MB/s with two decimals: 20 small writes delayed by one scheduling
        // stall of a loaded host print 0.00, so small sizes are judged by their message rate.
        assert!(row.mpps > 0.0, "{row:?}");
        if row.bytes >= 4096 {
            assert!(row.average > 0.0 && row.peak > 0.0, "{row:?}");
        }
    }
    // The WRITE target is passive: its report is the last size's, from the client.
    assert_eq!(server.len(), 1, "{server:?}");
    assert_eq!((server[0].bytes, server[0].iterations), (1 << 23, 20));
    eprintln!("ib_write_bw -a: {client:?}");
}

/// Runs a latency `tool` and checks the client's report (and the server's, when
/// `server_reports`): one row of `size` bytes, `ITERS` iterations, consistent times.
fn check_lat(tool: &str, port: u16, size: u64, server_reports: bool) {
    check_lat_with(tool, port, size, server_reports, &[]);
}

/// As [`check_lat`], with `extra` arguments on both ends.
fn check_lat_with(tool: &str, port: u16, size: u64, server_reports: bool, extra: &[&str]) {
    require_tools(&[tool]);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let iters = iters_text();
    let size_text = size.to_string();
    let mut args = vec!["-n", iters.as_str(), "-s", size_text.as_str()];
    args.extend_from_slice(extra);
    let (server, client) = bench.pair(tool, port, &args, &args);
    if extra.contains(&"-x") {
        assert_ipv6_gids(&client);
    }
    server.assert_success();
    client.assert_success();
    let mut reports = vec![(latency(&client), &client)];
    if server_reports {
        reports.push((latency(&server), &server));
    }
    for (rows, out) in reports {
        assert_eq!(rows.len(), 1, "{out}");
        let r: LatRow = rows[0];
        assert_eq!((r.bytes, r.iterations), (size, ITERS), "{out}");
        assert!(r.t_min > 0.0, "{r:?}");
        assert!(
            r.t_min <= r.t_typical && r.t_typical <= r.t_max && r.t_min <= r.t_avg,
            "{r:?}"
        );
        eprintln!("{tool}: {r:?}");
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_write_lat_rc() {
    check_lat("ib_write_lat", 18621, 64, true);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_read_lat_rc() {
    // The READ target is passive: only the client measures.
    check_lat("ib_read_lat", 18622, 64, false);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_send_lat_rc() {
    check_lat("ib_send_lat", 18623, 64, true);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_atomic_lat_rc() {
    check_lat("ib_atomic_lat", 18624, 8, false);
}

// RoCEv2 over IPv6: `-x 1` is GID 1, each host's global IPv6 address.

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_write_bw_rc_over_ipv6() {
    check_bw("ib_write_bw", 18617, 65536, &["-x", "1"]);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ib_read_lat_rc_over_ipv6() {
    check_lat_with("ib_read_lat", 18625, 64, false, &["-x", "1"]);
}
