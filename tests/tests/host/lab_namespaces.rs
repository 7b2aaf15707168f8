//! The lab: hosts joined through a router (where netem applies), and cleanup on every exit
//! path: drop, panic, SIGINT/SIGTERM, and leftovers of dead processes.
//!
//! Needs root (`#[ignore]`d: `cargo xtask test` runs it).

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use xroce_lab::{Lab, LabConfig, LabError, Side, netns};

/// The tests of this file take turns: one of them counts this process's namespaces.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn ping(lab: &Lab, to: IpAddr, wait_secs: u32) -> bool {
    let (to, wait) = (to.to_string(), wait_secs.to_string());
    lab.command(Side::A, &["ping", "-c", "2", "-i", "0.2", "-W", &wait, &to])
        .output()
        .expect("running ping (apt-get install -y iputils-ping)")
        .status
        .success()
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn lab_router_forwards_and_netem_shapes_its_egress() {
    xroce_lab::require_root();
    let _serial = serial();
    let mut lab = Lab::new(&LabConfig {
        router: true,
        ..LabConfig::default()
    })
    .expect("lab");
    let namespaces = lab.namespaces().to_vec();
    assert_eq!(namespaces.len(), 3);
    for ns in &namespaces {
        assert!(netns::exists(ns), "{ns} missing");
    }
    assert!(ping(&lab, lab.b.ipv4.into(), 5), "IPv4 through the router");
    assert!(ping(&lab, lab.b.ipv6.into(), 5), "IPv6 through the router");
    // The hosts' next hop is the router, not each other.
    assert_ne!(lab.a.next_hop_mac, lab.b.mac);

    match lab.netem(Side::B, &["loss", "100%"]) {
        Ok(()) => {
            assert!(
                !ping(&lab, lab.b.ipv4.into(), 1),
                "ping went through a 100% loss netem"
            );
            lab.netem(Side::B, &["delay", "1ms"]).expect("netem delay");
            assert!(
                ping(&lab, lab.b.ipv4.into(), 5),
                "ping after the loss was lifted"
            );
        }
        Err(LabError::NoNetem) => eprintln!("netem part skipped: this kernel has no sch_netem"),
        Err(e) => panic!("netem: {e}"),
    }

    lab.teardown().expect("teardown");
    for ns in &namespaces {
        assert!(!netns::exists(ns), "{ns} left behind");
    }
    let plain = Lab::new(&LabConfig::default()).expect("lab");
    assert!(
        plain.netem(Side::B, &["loss", "1%"]).is_err(),
        "netem without a router is an error"
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn lab_is_removed_when_a_test_panics() {
    xroce_lab::require_root();
    let _serial = serial();
    let mut seen = Vec::new();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let lab = Lab::new(&LabConfig::default()).expect("lab");
        seen = lab.namespaces().to_vec();
        panic!("a failing test");
    }));
    assert!(result.is_err());
    assert_eq!(seen.len(), 2);
    for ns in &seen {
        assert!(!netns::exists(ns), "{ns} survived the panic");
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn lab_a_bad_config_leaves_nothing() {
    xroce_lab::require_root();
    let _serial = serial();
    // MTU 65536 is refused before anything exists; 70000 bytes of MTU on veth is refused by
    // the kernel half-way through building.
    assert!(
        Lab::new(&LabConfig {
            mtu: 65536,
            ..LabConfig::default()
        })
        .is_err()
    );
    let before: Vec<String> = own_namespaces();
    assert!(
        Lab::new(&LabConfig {
            mtu: 65535,
            queues: 100_000,
            ..LabConfig::default()
        })
        .is_err()
    );
    assert_eq!(
        own_namespaces(),
        before,
        "a failed build left namespaces behind"
    );
}

fn own_namespaces() -> Vec<String> {
    let prefix = format!("xr-{}-", std::process::id());
    let mut names: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn lab_cleanup_stale_removes_only_labs_of_dead_processes() {
    xroce_lab::require_root();
    let _serial = serial();
    // Pids are always below pid_max, so no process has this one.
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .expect("pid_max")
        .trim()
        .parse()
        .expect("a number");
    let stale = format!("xr-{pid_max}-0-a");
    xroce_lab::run(Command::new("ip").args(["netns", "add", &stale])).expect("ip netns add");
    let live = Lab::new(&LabConfig::default()).expect("lab");

    let removed = xroce_lab::cleanup_stale().expect("cleanup_stale");
    assert!(removed.contains(&stale), "{stale} not removed: {removed:?}");
    assert!(!netns::exists(&stale));
    for ns in live.namespaces() {
        assert!(!removed.contains(ns), "a live lab's {ns} was removed");
        assert!(netns::exists(ns));
    }
}

/// Not a test on its own: the child process of `lab_signals_tear_the_labs_down` (it returns
/// at once unless that test started it).
#[test]
fn lab_child_holds_a_lab_until_signalled() {
    if std::env::var_os("XROCE_LAB_CHILD").is_none() {
        return;
    }
    xroce_lab::signals::install().expect("installing the signal handler");
    let lab = Lab::new(&LabConfig {
        router: true,
        ..LabConfig::default()
    })
    .expect("lab");
    println!("READY {}", lab.namespaces().join(" "));
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no signal came");
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn lab_signals_tear_the_labs_down() {
    xroce_lab::require_root();
    for (signal, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")] {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "lab_namespaces::lab_child_holds_a_lab_until_signalled",
                "--nocapture",
            ])
            .env("XROCE_LAB_CHILD", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the child");
        let stdout = child.stdout.take().expect("piped");
        let namespaces: Vec<String> = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("READY ").map(str::to_owned))
            .expect("the child never built its lab")
            .split(' ')
            .map(str::to_owned)
            .collect();
        assert_eq!(namespaces.len(), 3);
        for ns in &namespaces {
            assert!(netns::exists(ns), "{ns} missing while the child runs");
        }
        let pid = libc::pid_t::try_from(child.id()).expect("pid");
        // Safety: kill takes plain integers; `pid` is our own child.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let status = child.wait().expect("waiting for the child");
        assert_eq!(
            status.code(),
            Some(128 + signal),
            "{name}: exit status {status}"
        );
        for ns in &namespaces {
            assert!(!netns::exists(ns), "{name}: {ns} left behind");
        }
    }
}
