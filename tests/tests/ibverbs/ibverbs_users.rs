//! Debian's unmodified verbs programs run by ordinary users (`setpriv`, no supplementary
//! groups unless given) on daemons that run as a user of their own: `ibv_devices` lists
//! the device, `ibv_rc_pingpong`, `ib_write_bw` and `rping` (rdma_cm) run between two
//! users' processes, a
//! user the daemon does not allow is told why, and registering past a user's
//! `RLIMIT_MEMLOCK` fails as on a kernel RDMA device, saying so.

use crate::ibverbs_support::{Bench, Finished, bandwidth, pingpong, require_tools, serial};
use xroce_lab::Side;
use xroce_lab::daemons::DEVICE;

/// The daemons' own user (the service's `xroce`).
const DAEMON: &str = "--user=64000:64000";
/// An ordinary user.
const NOBODY: u32 = 65534;
/// Another ordinary user.
const OTHER: u32 = 64001;

/// `argv` run as `uid` (its own gid) with supplementary `groups` only, and, when given, a
/// memory lock limit of `memlock` bytes.
fn as_user(uid: u32, groups: &[u32], memlock: Option<u64>, argv: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    if let Some(bytes) = memlock {
        v.extend(["prlimit".into(), format!("--memlock={bytes}:{bytes}")]);
    }
    v.extend([
        "setpriv".into(),
        format!("--reuid={uid}"),
        format!("--regid={uid}"),
    ]);
    if groups.is_empty() {
        v.push("--clear-groups".into());
    } else {
        let list: Vec<String> = groups.iter().map(u32::to_string).collect();
        v.push(format!("--groups={}", list.join(",")));
    }
    v.extend(argv.iter().map(|s| s.to_string()));
    v
}

fn run_as(bench: &Bench, side: Side, argv: Vec<String>) -> Finished {
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    bench.run(side, &argv)
}

/// Runs `tool` as a server on A as `NOBODY` and as a client on B as `OTHER`, both under a
/// memory lock limit of `memlock` bytes; returns (server, client).
fn pair_of_users(
    bench: &Bench,
    tool: &str,
    port: u16,
    args: &[&str],
    memlock: u64,
) -> (Finished, Finished) {
    let port_text = port.to_string();
    let mut argv = vec![tool, "-p", &port_text];
    argv.extend_from_slice(args);
    let server_argv = as_user(NOBODY, &[], Some(memlock), &argv);
    let server_argv: Vec<&str> = server_argv.iter().map(String::as_str).collect();
    let mut server = bench.spawn(Side::A, &server_argv);
    bench.wait_listening(Side::A, port, &mut server);
    let address = bench.address(Side::A);
    argv.push(&address);
    let client = run_as(bench, Side::B, as_user(OTHER, &[], Some(memlock), &argv));
    (server.finish(), client)
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP, setpriv (cargo xtask test runs it)"]
fn ordinary_users_list_the_device_and_run_pingpong_and_perftest_between_them() {
    require_tools(&[
        "ibv_devices",
        "ibv_rc_pingpong",
        "ib_write_bw",
        "rping",
        "setpriv",
    ]);
    let _one_at_a_time = serial();
    let bench = Bench::start_with(&[DAEMON]);
    for (side, uid) in [(Side::A, NOBODY), (Side::B, OTHER)] {
        let out = run_as(&bench, side, as_user(uid, &[], None, &["ibv_devices"]));
        out.assert_success();
        assert!(
            out.stdout
                .lines()
                .any(|l| l.split_whitespace().next() == Some(DEVICE)),
            "{out}"
        );
    }
    // 4 MiB each: more than either program registers, and well under Linux's default.
    let memlock = 4 << 20;
    let (server, client) = pair_of_users(
        &bench,
        "ibv_rc_pingpong",
        18661,
        &["-g", "0", "-n", "200"],
        memlock,
    );
    for out in [&server, &client] {
        out.assert_success();
        let p = pingpong(out);
        assert_eq!(p.iters, 200, "{out}");
        assert_eq!(p.bytes, 2 * 200 * 4096, "{out}");
    }
    let (server, client) = pair_of_users(
        &bench,
        "ib_write_bw",
        18662,
        &["-n", "100", "-s", "65536"],
        memlock,
    );
    server.assert_success();
    client.assert_success();
    let rows = bandwidth(&client);
    assert_eq!(rows.len(), 1, "{client}");
    assert_eq!(
        (rows[0].bytes, rows[0].iterations),
        (65536, 100),
        "{client}"
    );
    assert!(rows[0].average > 0.0, "{client}");
    // rdma_cm: rping's server as one user, its client as the other, data verified.
    let a = bench.address(Side::A);
    let server = as_user(
        NOBODY,
        &[],
        Some(memlock),
        &["rping", "-s", "-a", &a, "-C", "50", "-V", "-S", "1024"],
    );
    let client = as_user(
        OTHER,
        &[],
        Some(memlock),
        &["rping", "-c", "-a", &a, "-C", "50", "-V", "-S", "1024"],
    );
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let client: Vec<&str> = client.iter().map(String::as_str).collect();
    let (server, client) = bench.cm_pair(Side::A, Side::B, &server, &client);
    server.assert_success();
    client.assert_success();
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP, setpriv (cargo xtask test runs it)"]
fn a_user_the_daemon_does_not_allow_sees_the_device_and_is_told_why_it_may_not_open_it() {
    require_tools(&[
        "ibv_devices",
        "ibv_devinfo",
        "ibv_rc_pingpong",
        "rping",
        "setpriv",
    ]);
    let _one_at_a_time = serial();
    let allowed = OTHER.to_string();
    let bench = Bench::start_with(&[DAEMON, "--allow-users", &allowed, "--allow-groups", "64100"]);
    // Listed, as a kernel device is in sysfs to every user.
    let out = run_as(
        &bench,
        Side::A,
        as_user(NOBODY, &[], None, &["ibv_devices"]),
    );
    out.assert_success();
    assert!(out.stdout.contains(DEVICE), "{out}");
    // Opening it is refused, with the daemon's reason.
    let refusal = format!(
        "libibverbs: {DEVICE}: ibv_open_device: access to {DEVICE} denied for uid {NOBODY} \
         (the daemon allows root, the user uid {OTHER} and the group gid 64100"
    );
    let out = run_as(
        &bench,
        Side::A,
        as_user(NOBODY, &[], None, &["ibv_devinfo", "-d", DEVICE]),
    );
    assert!(!out.status.success(), "{out}");
    assert!(out.stderr.contains(&refusal), "{out}");
    let out = run_as(
        &bench,
        Side::A,
        as_user(
            NOBODY,
            &[],
            None,
            &["ibv_rc_pingpong", "-g", "0", "-p", "18663"],
        ),
    );
    assert!(!out.status.success(), "{out}");
    assert!(out.stderr.contains(&refusal), "{out}");
    assert!(
        out.stderr.contains("Couldn't get context"),
        "the program's own words too: {out}"
    );
    // Through rdma_cm too.
    let a = bench.address(Side::A);
    let out = run_as(
        &bench,
        Side::A,
        as_user(NOBODY, &[], None, &["rping", "-s", "-a", &a, "-C", "1"]),
    );
    assert!(!out.status.success(), "{out}");
    assert!(
        out.stderr.contains(&format!(
            "librdmacm: {DEVICE}: access to {DEVICE} denied for uid {NOBODY}"
        )),
        "{out}"
    );
    // The user named, and a member of the group named, open it.
    for (uid, groups) in [(OTHER, &[][..]), (64002, &[64100][..])] {
        let out = run_as(
            &bench,
            Side::A,
            as_user(uid, groups, None, &["ibv_devinfo", "-d", DEVICE]),
        );
        out.assert_success();
        assert!(out.stdout.contains("PORT_ACTIVE"), "{out}");
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP, setpriv (cargo xtask test runs it)"]
fn registering_past_a_users_memlock_limit_fails_as_on_a_kernel_device() {
    require_tools(&["ibv_rc_pingpong", "setpriv", "prlimit"]);
    let _one_at_a_time = serial();
    let bench = Bench::start_with(&[DAEMON]);
    // 1 MiB of buffer under a limit of 256 KiB: ENOMEM, with the limit named.
    let argv = ["ibv_rc_pingpong", "-g", "0", "-p", "18664", "-s", "1048576"];
    let out = run_as(
        &bench,
        Side::A,
        as_user(NOBODY, &[], Some(256 << 10), &argv),
    );
    assert!(!out.status.success(), "{out}");
    assert!(out.stderr.contains("Couldn't register MR"), "{out}");
    assert!(
        out.stderr.contains(&format!(
            "libibverbs: {DEVICE}: ibv_reg_mr: memory lock limit exceeded (RLIMIT_MEMLOCK 256 KiB)"
        )),
        "{out}"
    );
    assert!(out.stderr.contains(&format!("(uid {NOBODY})")), "{out}");
    // A limit of 0: no registration at all (EPERM).
    let argv = ["ibv_rc_pingpong", "-g", "0", "-p", "18665"];
    let out = run_as(&bench, Side::A, as_user(NOBODY, &[], Some(0), &argv));
    assert!(!out.status.success(), "{out}");
    assert!(
        out.stderr
            .contains("memory lock limit exceeded (RLIMIT_MEMLOCK 0)"),
        "{out}"
    );
    // Within the limit the same user registers: the server gets as far as waiting for its
    // client, which is then killed.
    let argv = ["ibv_rc_pingpong", "-g", "0", "-p", "18666", "-s", "65536"];
    let argv = as_user(NOBODY, &[], Some(256 << 10), &argv);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let mut server = bench.spawn(Side::A, &argv);
    bench.wait_listening(Side::A, 18666, &mut server);
    server.kill();
}
