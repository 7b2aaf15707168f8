//! `xroce-pingpong` against itself through two daemons (no VM): RC, UC and UD, with every
//! message's data checked, as the interop harness runs it against Linux rxe.

use std::io::{BufRead, BufReader};
use std::process::{Child, Output, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

use xroce_artifacts::{Profile, Target};
use xroce_lab::daemons::TwoHosts;
use xroce_lab::{LabConfig, Side, require_root};

fn pingpong_bin() -> String {
    static PATH: OnceLock<Result<String, String>> = OnceLock::new();
    PATH.get_or_init(|| {
        xroce_artifacts::build(
            "xroce-pingpong",
            Target::Bin("xroce-pingpong"),
            Profile::of_this_build(),
        )
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|e| e.to_string())
    })
    .clone()
    .expect("building xroce-pingpong")
}

/// Kills the child if the test fails half-way.
struct Running(Option<Child>);

impl Running {
    fn wait(mut self) -> Output {
        // NOTE(unwrap): the child is only taken here.
        let child = self.0.take().expect("running child");
        child
            .wait_with_output()
            .expect("waiting for xroce-pingpong")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn client(hosts: &TwoHosts, args: &[&str]) -> Output {
    let bin = pingpong_bin();
    let peer = hosts.lab.host(Side::B).ipv4.to_string();
    let mut argv = vec![bin.as_str(), "-g", "0", "--timeout", "30"];
    argv.extend_from_slice(args);
    argv.push(&peer);
    hosts
        .lab
        .command(Side::A, &argv)
        .output()
        .expect("running the client")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One ping-pong; returns (client stdout, server stdout).
fn pingpong(hosts: &TwoHosts, args: &[&str]) -> (String, String) {
    let started = Instant::now();
    let bin = pingpong_bin();
    let mut argv = vec![bin.as_str(), "-g", "0", "--timeout", "30"];
    argv.extend_from_slice(args);
    let mut srv = hosts
        .lab
        .command(Side::B, &argv)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the server");
    // NOTE(unwrap): stdout was piped just above.
    let mut out = BufReader::new(srv.stdout.take().expect("piped stdout"));
    let mut first = String::new();
    out.read_line(&mut first)
        .expect("reading the server's output");
    let guard = Running(Some(srv));
    assert!(
        first.starts_with("  local address:"),
        "server said {first:?}"
    );
    let c = client(hosts, args);
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut out, &mut rest);
    let s = guard.wait();
    let (cout, sout) = (text(&c.stdout), first + &rest);
    assert!(
        c.status.success() && s.status.success(),
        "{args:?} after {:?}:\nclient {}: {cout}{}\nserver {}: {sout}{}",
        started.elapsed(),
        c.status,
        text(&c.stderr),
        s.status,
        text(&s.stderr)
    );
    (cout, sout)
}

/// The `QPN 0x…, PSN 0x…` part of the line that starts with `prefix`.
fn address(out: &str, prefix: &str) -> String {
    let line = out
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {out:?}"));
    let at = line.find("QPN").expect("QPN in the address line");
    line[at..at + 26].to_owned()
}

fn check_report(out: &str, size: u64, iters: u64) {
    let bytes = format!("{} bytes in ", size * iters * 2);
    let iters = format!("{iters} iters in ");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&bytes) && l.ends_with(" Mbit/sec")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with(&iters) && l.ends_with(" usec/iter")),
        "{out}"
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn pingpong_rc_uc_ud_between_two_daemons() {
    require_root();
    let hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    for (args, size, iters) in [
        (vec!["-s", "64", "-n", "50", "--verify"], 64, 50),
        (vec!["-s", "4096", "-n", "20", "--verify"], 4096, 20),
        (vec!["-s", "1048576", "-n", "3", "--verify"], 1 << 20, 3),
        (vec!["-n", "10", "--verify-fill", "0x7b"], 4096, 10),
        (vec!["-s", "4096", "-n", "20", "-e", "--verify"], 4096, 20),
        (vec!["--uc", "-s", "2000", "-n", "20", "--verify"], 2000, 20),
        (vec!["--ud", "-s", "1024", "-n", "20", "--verify"], 1024, 20),
        (vec!["--ud", "-s", "64", "-n", "20", "--verify"], 64, 20),
    ] {
        let (c, s) = pingpong(&hosts, &args);
        check_report(&c, size, iters);
        check_report(&s, size, iters);
        // Each side's remote address is the other's local one.
        assert_eq!(address(&c, "  remote"), address(&s, "  local"), "{args:?}");
        assert_eq!(address(&s, "  remote"), address(&c, "  local"), "{args:?}");
    }
}
