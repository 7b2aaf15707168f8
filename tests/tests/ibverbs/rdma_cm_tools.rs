//! Unmodified Debian programs that connect through rdma_cm (rdmacm-utils and perftest's
//! `-R`), on the drop-in `librdmacm.so.1` and `libibverbs.so.1`, between two daemons and
//! with both ends on one daemon: each exits 0, with its data verified where the program
//! verifies it; qperf and fio as storage and network people run them; and the failures
//! librdmacm users meet: a port nobody listens on, an address nobody answers, a peer
//! killed mid-connection.

use std::net::ToSocketAddrs;
use std::time::{Duration, Instant};

use xroce_lab::Side;

use crate::ibverbs_support::{Bench, both_ok, require_tools, serial};

const UTILS: &[&str] = &[
    "rping",
    "ucmatose",
    "udaddy",
    "rdma_server",
    "rdma_client",
    "rdma_xserver",
    "rdma_xclient",
    "mckey",
];

/// rping's client and server between the two daemons, data verified (`-V`), then the
/// same with both on one daemon.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn rping_between_two_daemons_and_in_loopback() {
    require_tools(UTILS);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let a = bench.address(Side::A);
    for client_side in [Side::B, Side::A] {
        let (server, client) = both_ok(
            "rping",
            bench.cm_pair(
                Side::A,
                client_side,
                &["rping", "-s", "-a", &a, "-C", "1000", "-V", "-S", "1024"],
                &["rping", "-c", "-a", &a, "-C", "1000", "-V", "-S", "1024"],
            ),
        );
        assert!(
            server.stdout.is_empty() || !server.stdout.contains("error"),
            "{server}"
        );
        assert!(!client.stderr.contains("error"), "{client}");
    }
}

/// Loopback addresses: a server bound to 127.0.0.1 listens on every address of its host,
/// as the kernel's rdma_cm has it (`cma_any_addr`), so rping's server bound there takes a
/// client that connects to the host's address, and one on the same host that connects to
/// 127.0.0.1 (the kernel resolves that to its own device, `cma_resolve_loopback`, but on
/// RoCE its route then fails with `ENODEV`; xroce connects it). libfabric's verbs
/// provider, which binds a passive endpoint given no address to `localhost`, runs
/// fi_pingpong over MSG endpoints and over RDM endpoints (`ofi_rxm`), data checked.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_server_bound_to_the_loopback_address_listens_on_every_address() {
    require_tools(UTILS);
    require_tools(&["fi_pingpong"]);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let a = bench.address(Side::A);
    both_ok(
        "rping, server bound to 127.0.0.1",
        bench.cm_pair(
            Side::A,
            Side::B,
            &["rping", "-s", "-a", "127.0.0.1", "-C", "100", "-V"],
            &["rping", "-c", "-a", &a, "-C", "100", "-V"],
        ),
    );
    both_ok(
        "rping to 127.0.0.1 on one host",
        bench.cm_pair(
            Side::A,
            Side::A,
            &["rping", "-s", "-a", "127.0.0.1", "-C", "100", "-V"],
            &["rping", "-c", "-a", "127.0.0.1", "-C", "100", "-V"],
        ),
    );
    // libfabric's verbs provider binds a server given no address to `localhost`: a
    // machine where that name does not resolve (a root made by debootstrap has no
    // /etc/hosts) fails there whatever the device, rxe too.
    if ("localhost", 0)
        .to_socket_addrs()
        .map_or(true, |mut a| a.next().is_none())
    {
        eprintln!("fi_pingpong skipped: \"localhost\" does not resolve on this machine");
        return;
    }
    // ofi_rxm sizes its CQ for 256 peers by default, beyond the device's max_cqe (and
    // rxe's): 16 peers here.
    let env = [("FI_UNIVERSE_SIZE", "16")];
    for (provider, endpoint) in [("verbs", "msg"), ("verbs;ofi_rxm", "rdm")] {
        let argv = [
            "fi_pingpong",
            "-p",
            provider,
            "-e",
            endpoint,
            "-I",
            "200",
            "-S",
            "4096",
            "-c",
        ];
        let mut server = bench.spawn_with_env(Side::A, &argv, &env);
        // fi_pingpong's control connection (TCP 47592) comes first.
        bench.wait_listening(Side::A, 47592, &mut server);
        let mut client_argv = argv.to_vec();
        client_argv.push(&a);
        let client = bench.spawn_with_env(Side::B, &client_argv, &env).finish();
        let server = server.finish();
        let (_, client) = both_ok(
            &format!("fi_pingpong -p {provider} -e {endpoint}"),
            (server, client),
        );
        assert!(client.stdout.contains("4k"), "{client}");
    }
}

/// rdma_cm over IPv6: rping (RC, data verified), ucmatose and udaddy (UD over SIDR)
/// between the hosts' global IPv6 addresses, and rping between their link-local ones
/// (the interface named as the address's scope, as `ping` takes it).
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn rping_ucmatose_and_udaddy_over_ipv6() {
    require_tools(UTILS);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let host = bench.hosts.lab.host(Side::A);
    let a = host.ipv6.to_string();
    let (client, peer) = (Side::B, bench.hosts.lab.host(Side::B));
    let server_scoped = format!("{}%{}", host.link_local(), host.interface);
    let client_scoped = format!("{}%{}", host.link_local(), peer.interface);
    let rping = |server_addr: &str, client_addr: &str| {
        both_ok(
            "rping over IPv6",
            bench.cm_pair(
                Side::A,
                client,
                &[
                    "rping",
                    "-s",
                    "-a",
                    server_addr,
                    "-C",
                    "50",
                    "-V",
                    "-S",
                    "1024",
                ],
                &[
                    "rping",
                    "-c",
                    "-a",
                    client_addr,
                    "-C",
                    "50",
                    "-V",
                    "-S",
                    "1024",
                ],
            ),
        )
    };
    let (_, out) = rping(&a, &a);
    assert!(!out.stderr.contains("error"), "{out}");
    let (_, out) = rping(&server_scoped, &client_scoped);
    assert!(!out.stderr.contains("error"), "{out}");
    let (_, out) = both_ok(
        "ucmatose over IPv6",
        bench.cm_pair(
            Side::A,
            client,
            &["ucmatose", "-b", &a, "-c", "4", "-C", "20"],
            &["ucmatose", "-s", &a, "-c", "4", "-C", "20"],
        ),
    );
    assert!(out.stdout.contains("test complete"), "{out}");
    let (_, out) = both_ok(
        "udaddy over IPv6",
        bench.cm_pair(
            Side::A,
            client,
            &["udaddy", "-b", &a],
            &["udaddy", "-s", &a],
        ),
    );
    assert!(out.stdout.contains("test complete"), "{out}");
}

/// ucmatose: several connections, messages both ways; udaddy: UD over SIDR.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ucmatose_and_udaddy_between_two_daemons_and_in_loopback() {
    require_tools(UTILS);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let a = bench.address(Side::A);
    for client_side in [Side::B, Side::A] {
        let (_, client) = both_ok(
            "ucmatose",
            bench.cm_pair(
                Side::A,
                client_side,
                &["ucmatose", "-b", &a, "-c", "16", "-C", "100"],
                &["ucmatose", "-s", &a, "-c", "16", "-C", "100"],
            ),
        );
        assert!(client.stdout.contains("test complete"), "{client}");
        let (_, client) = both_ok(
            "udaddy",
            bench.cm_pair(
                Side::A,
                client_side,
                &["udaddy", "-b", &a],
                &["udaddy", "-s", &a],
            ),
        );
        assert!(client.stdout.contains("test complete"), "{client}");
    }
}

/// mckey: receivers of a multicast group on the other host and on the sender's own, and a
/// sender that joins it too, then as a send-only member (`-o`); each receiver gets every
/// message.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn mckey_between_two_daemons_and_on_the_senders_host() {
    require_tools(UTILS);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let (a, b) = (bench.address(Side::A), bench.address(Side::B));
    // The queue pairs attached to groups on `side`, once the daemon's count is `want`.
    let attached = |side: Side, want: u64, what: &str| {
        let ctx = bench.hosts.open(side).expect("opening the device");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let n = xroce_lab::daemons::counter(&ctx.stats().unwrap(), "mcast_attachments");
            if n == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what} on {side:?}: {n} attached"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    for (group, send_only) in [("239.77.0.9", false), ("239.77.0.10", true)] {
        // The last round's members have gone (the daemon sees an application leave after
        // it has exited).
        for side in [Side::B, Side::A] {
            attached(side, 0, "members of the last round");
        }
        let receivers = [
            bench.spawn(
                Side::B,
                &["mckey", "-m", group, "-b", &b, "-C", "50", "-S", "1000"],
            ),
            bench.spawn(
                Side::A,
                &["mckey", "-m", group, "-b", &a, "-C", "50", "-S", "1000"],
            ),
        ];
        // Both receivers' queue pairs attached (nothing else tells a sender when to send;
        // a join is answered before the application reads it and attaches).
        for side in [Side::B, Side::A] {
            attached(side, 1, "the receiver");
        }
        let mut argv = vec![
            "mckey", "-m", group, "-b", &a, "-s", "-C", "50", "-S", "1000",
        ];
        if send_only {
            argv.push("-o");
        }
        let sender = bench.spawn(Side::A, &argv).finish();
        assert!(sender.status.success(), "{sender}");
        for r in receivers {
            let done = r.finish();
            assert!(done.status.success(), "{group}: {done}");
            assert!(done.stdout.contains("data transfers complete"), "{done}");
        }
    }
}

/// rdma_server and rdma_client: the `rdma_create_ep` / `rdma_get_request` API with
/// synchronous ids.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn rdma_server_and_rdma_client() {
    require_tools(UTILS);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let a = bench.address(Side::A);
    let (_, client) = both_ok(
        "rdma_server/rdma_client",
        bench.cm_pair(
            Side::A,
            Side::B,
            &["rdma_server", "-s", &a, "-p", "7471"],
            &["rdma_client", "-s", &a, "-p", "7471"],
        ),
    );
    assert!(client.stdout.contains("rdma_client: end 0"), "{client}");
    // rdma_xclient sends 16 bytes inline on a QP that asked for no inline data: rxe
    // grants one element's worth, and so does xroce.
    let (_, client) = both_ok(
        "rdma_xserver/rdma_xclient",
        bench.cm_pair(
            Side::A,
            Side::B,
            &["rdma_xserver", "-p", "7472"],
            &["rdma_xclient", "-s", &a, "-p", "7472"],
        ),
    );
    assert!(client.stdout.contains("rdma_xclient: end 0"), "{client}");
}

/// perftest with `-R`: every bandwidth and latency test, RC, and SEND over UD.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn perftest_over_rdma_cm() {
    let tools = [
        ("ib_write_bw", &[][..]),
        ("ib_read_bw", &[][..]),
        ("ib_send_bw", &[][..]),
        ("ib_atomic_bw", &[][..]),
        ("ib_send_bw", &["-c", "UD"][..]),
        ("ib_write_lat", &[][..]),
        ("ib_read_lat", &[][..]),
        ("ib_send_lat", &[][..]),
        ("ib_atomic_lat", &[][..]),
    ];
    require_tools(&tools.map(|(t, _)| t));
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let a = bench.address(Side::A);
    for (i, (tool, extra)) in tools.iter().enumerate() {
        let port = (18700 + i).to_string();
        let mut server = vec![*tool, "-R", "-n", "200", "-p", &port];
        server.extend_from_slice(extra);
        let mut client = server.clone();
        client.push(&a);
        let (_, client) = both_ok(tool, bench.cm_pair(Side::A, Side::B, &server, &client));
        assert!(
            client.stdout.contains("#bytes"),
            "{tool} printed no result: {client}"
        );
    }
}

/// qperf with `-cm1` (its RDMA tests connect through rdma_cm; without it qperf gives its
/// address vectors no GRH, which no RoCE device takes): RC bandwidth, latency, RDMA WRITE
/// and READ, and atomics, each printing its figure. Then fio's `rdma` engine, a server
/// reading and a client writing 64 KiB blocks with RDMA WRITE, RDMA READ and SEND (for
/// SEND the receiving side is the deeper, as fio's engine asks: it connects with an RNR
/// retry count of 0).
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn qperf_and_fio_over_rdma_cm() {
    require_tools(&["qperf", "fio"]);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let a = bench.address(Side::A);

    // qperf's server answers clients until it is stopped (dropped: killed).
    let mut server = bench.spawn(Side::A, &["qperf", "-lp", "19766"]);
    bench.wait_listening(Side::A, 19766, &mut server);
    let tests = [
        ("rc_bw", "bw  ="),
        ("rc_lat", "latency  ="),
        ("rc_rdma_write_bw", "bw  ="),
        ("rc_rdma_read_bw", "bw  ="),
        ("rc_rdma_write_lat", "latency  ="),
        ("rc_compare_swap_mr", "msg_rate  ="),
        ("rc_fetch_add_mr", "msg_rate  ="),
    ];
    for (test, figure) in tests {
        let client = bench
            .spawn(
                Side::B,
                &["qperf", "-lp", "19766", "-cm1", "-t", "1", &a, test],
            )
            .finish();
        assert!(
            client.status.success() && client.stdout.contains(figure),
            "qperf {test}: {client}"
        );
    }
    drop(server);

    let verbs = [("write", "16"), ("read", "16"), ("send", "64")];
    for (i, (verb, server_depth)) in verbs.into_iter().enumerate() {
        let port = (5570 + i).to_string();
        let port_arg = format!("--port={port}");
        let host_arg = format!("--hostname={a}");
        let depth_arg = format!("--iodepth={server_depth}");
        let verb_arg = format!("--verb={verb}");
        // The engine first: fio knows an engine's options (`--verb`, `--port`,
        // `--hostname`) only once it has been named.
        let server_argv = [
            "fio",
            "--name=server",
            "--ioengine=rdma",
            &port_arg,
            &verb_arg,
            "--rw=read",
            &depth_arg,
            "--bs=64k",
            "--size=32m",
        ];
        let client_argv = [
            "fio",
            "--name=client",
            "--ioengine=rdma",
            &port_arg,
            &verb_arg,
            &host_arg,
            "--rw=write",
            "--iodepth=16",
            "--bs=64k",
            "--size=32m",
        ];
        let (server, client) = both_ok(
            &format!("fio --verb={verb}"),
            bench.cm_pair(Side::A, Side::B, &server_argv, &client_argv),
        );
        // The client moves the 32 MiB (with RDMA WRITE and READ the server's CPU takes
        // no part); both report no error.
        assert!(
            server.stdout.contains("err= 0"),
            "fio --verb={verb}: {server}"
        );
        assert!(
            client.stdout.contains("err= 0") && client.stdout.contains("io=32.0MiB"),
            "fio --verb={verb}: {client}"
        );
    }
}

/// A port nobody listens on: REJECTED with reason 8; an address nobody answers:
/// ADDR_ERROR. rping says so and exits non-zero, at once.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn connecting_to_nobody_fails_with_the_events_librdmacm_users_expect() {
    require_tools(UTILS);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let a = bench.address(Side::A);
    let started = Instant::now();
    let out = bench.run(Side::B, &["rping", "-c", "-a", &a, "-p", "9999", "-C", "1"]);
    assert!(!out.status.success(), "{out}");
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("RDMA_CM_EVENT_REJECTED"), "{out}");
    assert!(text.contains("error 8"), "reject reason 8: {out}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // 10.77.0.99 is on the link but nobody has it: the neighbour never resolves.
    let out = bench.run(Side::B, &["rping", "-c", "-a", "10.77.0.99", "-C", "1"]);
    assert!(!out.status.success(), "{out}");
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(
        text.contains("RDMA_CM_EVENT_ADDR_ERROR") || text.contains("RDMA_CM_EVENT_UNREACHABLE"),
        "{out}"
    );
}

/// `kill -9` of either side of a connected rping: the killed side's daemon disconnects
/// for it, and the other side hears DISCONNECTED and ends.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_killed_peer_disconnects_the_other() {
    require_tools(UTILS);
    let _one_at_a_time = serial();
    let bench = Bench::start();
    let a = bench.address(Side::A);
    for kill_server in [true, false] {
        // No count: the ping-pong goes on until one side goes.
        let mut server = bench.spawn(Side::A, &["rping", "-s", "-a", &a, "-v"]);
        bench.wait_cm_listening(Side::A, 1, &mut server);
        let mut client = bench.spawn(Side::B, &["rping", "-c", "-a", &a, "-v"]);
        std::thread::sleep(Duration::from_millis(500));
        let (victim, survivor) = if kill_server {
            (&mut server, client)
        } else {
            (&mut client, server)
        };
        victim.kill();
        let started = Instant::now();
        let survivor = survivor.finish();
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the survivor waited {:?}",
            started.elapsed()
        );
        let text = format!("{}{}", survivor.stdout, survivor.stderr);
        assert!(
            text.contains("DISCONNECT") || text.contains("RDMA_CM_EVENT_DISCONNECTED"),
            "{survivor}"
        );
        assert!(
            survivor.stdout.contains("ping data"),
            "it had pinged: {survivor}"
        );
    }
}
