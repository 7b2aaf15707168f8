//! Debian's unmodified `ibverbs-utils` on xroce: `ibv_devices` and `ibv_devinfo` see the
//! daemon's device, and the four pingpong examples (RC, UC, UD, SRQ) run between two
//! network namespaces through two daemons with `-g 0`, loaded with `LD_LIBRARY_PATH`.

use crate::ibverbs_support::{Bench, Finished, pingpong, require_tools, serial};
use xroce_lab::Side;
use xroce_lab::daemons::DEVICE;

/// The node GUID xroce derives from a MAC (EUI-64), as `ibv_devices` prints it.
fn guid_text(mac: [u8; 6]) -> String {
    let g = [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ];
    g.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ibv_devices_lists_the_daemons_device_with_its_guid() {
    require_tools(&["ibv_devices"]);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    for side in [Side::A, Side::B] {
        let out = bench.run(side, &["ibv_devices"]);
        out.assert_success();
        let rows: Vec<Vec<&str>> = out
            .stdout
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().collect())
            .filter(|w: &Vec<&str>| !w.is_empty())
            .collect();
        let guid = guid_text(bench.hosts.lab.host(side).mac);
        assert_eq!(rows, vec![vec![DEVICE, guid.as_str()]], "{out}");
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ibv_devinfo_reports_an_active_roce_v2_port() {
    require_tools(&["ibv_devinfo"]);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let out = bench.run(Side::A, &["ibv_devinfo", "-v"]);
    out.assert_success();
    let field = |name: &str| -> String {
        out.stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .unwrap_or_else(|| panic!("no `{name}` in {out}"))
            .trim()
            .to_owned()
    };
    assert_eq!(field("hca_id:"), DEVICE);
    assert_eq!(field("transport:"), "InfiniBand (0)");
    assert_eq!(field("vendor_id:"), "0xffffff");
    assert_eq!(field("phys_port_cnt:"), "1");
    assert_eq!(field("state:"), "PORT_ACTIVE (4)");
    assert_eq!(
        field("active_mtu:"),
        "1024 (3)",
        "the path MTU of a 1500-byte link"
    );
    assert_eq!(field("link_layer:"), "Ethernet");
    assert_eq!(field("port_lid:"), "0");
    let ipv4 = bench.hosts.lab.host(Side::A).ipv4;
    assert_eq!(
        field("GID[  0]:"),
        format!("::ffff:{ipv4}, RoCE v2"),
        "GID 0 is the IPv4-mapped address"
    );
    assert!(
        !out.stdout.contains("Unknown flags"),
        "only real capability flags: {out}"
    );
}

/// Runs `tool` with `args` on both sides (server on A, client on B) and checks both
/// summaries: `iters` iterations of `size` bytes each way.
fn pingpong_pair(tool: &str, port: u16, args: &[&str], iters: u64, size: u64) {
    pingpong_pair_with_gids(tool, port, args, iters, size, "GID ::ffff:");
}

/// As [`pingpong_pair`], with every address printed with a GID that starts with `gid`
/// (the tool prints its own and its peer's).
fn pingpong_pair_with_gids(tool: &str, port: u16, args: &[&str], iters: u64, size: u64, gid: &str) {
    require_tools(&[tool]);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let (server, client) = bench.pair(tool, port, args, args);
    for out in [&server, &client] {
        check_pingpong(out, iters, size);
        // The local and remote addresses of every QP (16 of each for the SRQ example).
        let addresses: Vec<&str> = out.stdout.lines().filter(|l| l.contains(" GID ")).collect();
        assert!(addresses.len() >= 2, "{out}");
        assert!(
            addresses.iter().all(|l| l.contains(gid)),
            "every address carries a GID starting {gid}: {out}"
        );
    }
}

fn check_pingpong(out: &Finished, iters: u64, size: u64) {
    out.assert_success();
    let p = pingpong(out);
    assert_eq!(p.iters, iters, "{out}");
    assert_eq!(
        p.bytes,
        2 * iters * size,
        "each iteration is a ping and a pong: {out}"
    );
    assert!(p.mbit > 0.0 && p.usec_per_iter > 0.0, "{p:?}: {out}");
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ibv_rc_pingpong_runs_between_two_daemons() {
    pingpong_pair(
        "ibv_rc_pingpong",
        18601,
        &["-g", "0", "-n", "500"],
        500,
        4096,
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ibv_rc_pingpong_with_completion_events_runs_between_two_daemons() {
    pingpong_pair(
        "ibv_rc_pingpong",
        18602,
        &["-g", "0", "-e", "-n", "300", "-s", "8192"],
        300,
        8192,
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ibv_uc_pingpong_runs_between_two_daemons() {
    pingpong_pair(
        "ibv_uc_pingpong",
        18603,
        &["-g", "0", "-n", "500"],
        500,
        4096,
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ibv_ud_pingpong_runs_between_two_daemons() {
    // UD messages fit one MTU (1024 on the lab's 1500-byte link).
    pingpong_pair(
        "ibv_ud_pingpong",
        18604,
        &["-g", "0", "-n", "500", "-s", "1024"],
        500,
        1024,
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ibv_srq_pingpong_runs_between_two_daemons() {
    // 16 RC QPs sharing one SRQ on each side.
    pingpong_pair(
        "ibv_srq_pingpong",
        18605,
        &["-g", "0", "-n", "500"],
        500,
        4096,
    );
}

// GID 1 is each host's global IPv6 address (fd00:77::1 and ::2), GID 2 its link-local one:
// RoCEv2 over IPv6. The out-of-band exchange stays on IPv4 (the tools' servers listen on
// the first address getaddrinfo gives them).

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ibv_rc_pingpong_runs_over_ipv6() {
    pingpong_pair_with_gids(
        "ibv_rc_pingpong",
        18606,
        &["-g", "1", "-n", "500"],
        500,
        4096,
        "GID fd00:77::",
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ibv_rc_pingpong_runs_over_ipv6_link_local() {
    pingpong_pair_with_gids(
        "ibv_rc_pingpong",
        18607,
        &["-g", "2", "-n", "500"],
        500,
        4096,
        "GID fe80::",
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ibv_uc_pingpong_runs_over_ipv6() {
    pingpong_pair_with_gids(
        "ibv_uc_pingpong",
        18608,
        &["-g", "1", "-n", "500"],
        500,
        4096,
        "GID fd00:77::",
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ibv_ud_pingpong_runs_over_ipv6() {
    pingpong_pair_with_gids(
        "ibv_ud_pingpong",
        18609,
        &["-g", "1", "-n", "500", "-s", "1024"],
        500,
        1024,
        "GID fd00:77::",
    );
}

/// A refused `ibv_modify_qp` says why: the server connects from its IPv4 GID (`-g 0`) to the
/// client's IPv6 one (`-g 1`), a path no RoCE device can take. The daemon logs the
/// application, the queue pair and the reason, and the drop-in library prints the reason
/// on the program's stderr with `XROCE_IBVERBS_DEBUG=1` (and nothing without it).
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_refused_modify_says_why_in_the_daemons_log_and_on_stderr() {
    require_tools(&["ibv_rc_pingpong"]);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let (server, client) = bench.pair_with_server_env(
        "ibv_rc_pingpong",
        18610,
        &["-g", "0", "-n", "5"],
        &["-g", "1", "-n", "5"],
        &[("XROCE_IBVERBS_DEBUG", "1")],
    );
    assert!(!server.status.success(), "{server}");
    assert!(
        server.stderr.contains("Failed to modify QP to RTR"),
        "{server}"
    );
    let (a, b) = (bench.hosts.lab.host(Side::A), bench.hosts.lab.host(Side::B));
    let reason = format!(
        "GID 0 ({}) is IPv4 and the destination {} is IPv6",
        a.ipv4, b.ipv6
    );
    let printed: Vec<&str> = server
        .stderr
        .lines()
        .filter(|l| l.starts_with("libibverbs (xroce): "))
        .collect();
    assert_eq!(printed.len(), 1, "one refusal, one line: {server}");
    assert!(
        printed[0].starts_with("libibverbs (xroce): ibv_modify_qp: ")
            && printed[0].contains(&reason),
        "{server}"
    );
    assert!(
        !client.stderr.contains("libibverbs (xroce)"),
        "nothing printed without the variable: {client}"
    );
    let log = std::fs::read_to_string(bench.hosts.log(Side::A)).expect("the daemon's log");
    let line = log
        .lines()
        .find(|l| l.contains("ibv_modify_qp"))
        .unwrap_or_else(|| panic!("no refusal in the daemon's log:\n{log}"));
    assert!(
        line.contains("(ibv_rc_pingpong): ibv_modify_qp of QP 0x")
            && line.contains(&format!(" to RTR refused: {reason}"))
            && line.contains("(EINVAL"),
        "{line}"
    );
}
