//! verbs-shm's example programs between two daemons: `rc_pingpong` against itself and
//! against `xroce-pingpong` (both roles), `rdma_write` and `rdma_read` moving generated
//! data and real files, each side reporting success and the data verified; and
//! `rc_pingpong` and `rdma_write` between two ordinary users' processes.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::sync::OnceLock;

use xroce_artifacts::{Profile, Target};
use xroce_lab::daemons::TwoHosts;
use xroce_lab::{LabConfig, Side, require_root};

fn example(name: &'static str) -> String {
    static PATHS: OnceLock<std::sync::Mutex<Vec<(&'static str, String)>>> = OnceLock::new();
    let paths = PATHS.get_or_init(Default::default);
    let mut paths = paths.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = paths.iter().find(|(n, _)| *n == name) {
        return p.clone();
    }
    let p = xroce_artifacts::build("verbs-shm", Target::Example(name), Profile::of_this_build())
        .unwrap_or_else(|e| panic!("building example {name}: {e}"))
        .to_string_lossy()
        .into_owned();
    paths.push((name, p.clone()));
    p
}

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

/// Kills the server if the test fails half-way.
struct Running(Option<Child>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `server` on host B until it prints its first line, then `client` on host A with
/// B's address appended; returns (client stdout, server stdout) after asserting both
/// succeeded.
fn pair(hosts: &TwoHosts, server: &[&str], client: &[&str]) -> (String, String) {
    let mut srv = hosts
        .lab
        .command(Side::B, server)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the server");
    let mut out = BufReader::new(srv.stdout.take().expect("piped stdout"));
    let mut err = srv.stderr.take().expect("piped stderr");
    let mut guard = Running(Some(srv));
    let mut first = String::new();
    out.read_line(&mut first).expect("reading the server");
    if first.is_empty() {
        let mut e = String::new();
        let _ = err.read_to_string(&mut e);
        panic!("the server {server:?} exited at once: {e}");
    }
    let peer = hosts.lab.host(Side::B).ipv4.to_string();
    let mut argv = client.to_vec();
    argv.push(&peer);
    let c = hosts
        .lab
        .command(Side::A, &argv)
        .output()
        .expect("running the client");
    let mut rest = String::new();
    let _ = out.read_to_string(&mut rest);
    let mut e = String::new();
    let _ = err.read_to_string(&mut e);
    let s: Output = guard
        .0
        .take()
        .expect("running server")
        .wait_with_output()
        .expect("waiting for the server");
    let (cout, sout) = (text(&c.stdout), first + &rest);
    assert!(
        c.status.success() && s.status.success(),
        "client {argv:?} {}:\n{cout}{}\nserver {server:?} {}:\n{sout}{e}",
        c.status,
        text(&c.stderr),
        s.status,
    );
    (cout, sout)
}

fn check_pingpong_report(out: &str, size: u64, iters: u64) {
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
fn rc_pingpong_example_against_itself_and_xroce_pingpong() {
    require_root();
    let hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    let ex = example("rc_pingpong");
    let pp = pingpong_bin();
    let common = ["-g", "0", "-d", "xroce0", "-p", "18600", "--timeout", "60"];
    let with = |bin: &str, extra: &[&'static str]| -> Vec<String> {
        let mut v = vec![bin.to_owned()];
        v.extend(common.iter().map(|s| s.to_string()));
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    // (server program, client program, arguments of both, size, iterations)
    let runs: [(&str, &str, &[&'static str], u64, u64); 6] = [
        (&ex, &ex, &["-s", "64", "-n", "200", "--verify"], 64, 200),
        (
            &ex,
            &ex,
            &["-s", "16384", "-n", "50", "--verify"],
            16384,
            50,
        ),
        (
            &ex,
            &ex,
            &["-n", "1000", "--verify-fill", "0x7b"],
            4096,
            1000,
        ),
        (
            &ex,
            &ex,
            &["-e", "-s", "4096", "-n", "50", "--verify"],
            4096,
            50,
        ),
        // Against xroce-pingpong in both roles, the examples' own data (0x7b) checked.
        (
            &ex,
            &pp,
            &["-s", "8192", "-n", "100", "--verify-fill", "0x7b"],
            8192,
            100,
        ),
        (
            &pp,
            &ex,
            &["-s", "100", "-n", "100", "--verify-fill", "0x7b"],
            100,
            100,
        ),
    ];
    for (server, client, args, size, iters) in runs {
        let s = with(server, args);
        let mut c = with(client, args);
        c.extend(["--connect-timeout".to_owned(), "10".to_owned()]);
        let s: Vec<&str> = s.iter().map(String::as_str).collect();
        let c: Vec<&str> = c.iter().map(String::as_str).collect();
        let (cout, sout) = pair(&hosts, &s, &c);
        check_pingpong_report(&cout, size, iters);
        check_pingpong_report(&sout, size, iters);
        assert!(cout.contains("GID ::ffff:"), "{cout}");
    }
}

/// The digest a side printed.
fn sha256_line(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("sha256 "))
        .unwrap_or_else(|| panic!("no digest in {out}"))
        .to_owned()
}

fn check_transfer(cout: &str, sout: &str, bytes: u64) {
    println!("client:\n{cout}server:\n{sout}");
    for out in [cout, sout] {
        assert!(
            out.lines()
                .any(|l| l
                    == format!("data verified: {bytes} bytes, SHA-256 identical on both sides")),
            "{out}"
        );
    }
    assert_eq!(sha256_line(cout), sha256_line(sout));
    let rate = format!("{bytes} bytes in ");
    assert!(
        cout.lines()
            .any(|l| l.starts_with(&rate) && l.contains(" Mbit/sec")),
        "no throughput line: {cout}"
    );
}

/// A file of `len` bytes of pseudo-random data in the temporary directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn random(tag: &str, len: usize) -> TempFile {
        let path = std::env::temp_dir().join(format!("xroce-{tag}-{}", std::process::id()));
        let data: Vec<u8> = (0..len).map(|_| rand::random::<u8>()).collect();
        std::fs::write(&path, data).expect("writing a test file");
        TempFile(path)
    }

    fn named(tag: &str) -> TempFile {
        TempFile(std::env::temp_dir().join(format!("xroce-{tag}-{}", std::process::id())))
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temporary path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn rdma_write_example_moves_a_buffer_and_a_file() {
    require_root();
    let hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    let ex = example("rdma_write");
    let base = [ex.as_str(), "-p", "18601", "--timeout", "120"];
    // The default: 64 MiB of generated data in 64 KiB WRITEs, 32 outstanding.
    let mut client = base.to_vec();
    client.extend(["--connect-timeout", "10"]);
    let (c, s) = pair(&hosts, &base, &client);
    check_transfer(&c, &s, 64 << 20);
    // A real file of an odd size, saved on the server: the bytes are the file's.
    let input = TempFile::random("write-in", (3 << 20) + 4321);
    let output = TempFile::named("write-out");
    let mut server = base.to_vec();
    server.extend(["--output", output.path()]);
    let mut client = base.to_vec();
    client.extend([
        "--connect-timeout",
        "10",
        "--file",
        input.path(),
        "--chunk",
        "100000",
        "--depth",
        "100",
    ]);
    let (c, s) = pair(&hosts, &server, &client);
    check_transfer(&c, &s, (3 << 20) + 4321);
    assert!(
        std::fs::read(&input.0).unwrap() == std::fs::read(&output.0).unwrap(),
        "the file the server saved differs from the one sent"
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn rdma_read_example_moves_a_buffer_and_a_file() {
    require_root();
    let hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    let ex = example("rdma_read");
    let base = [ex.as_str(), "-p", "18602", "--timeout", "120"];
    let mut client = base.to_vec();
    client.extend(["--connect-timeout", "10"]);
    let (c, s) = pair(&hosts, &base, &client);
    check_transfer(&c, &s, 64 << 20);
    // The server serves a real file; the client saves what it read.
    let input = TempFile::random("read-in", (2 << 20) + 777);
    let output = TempFile::named("read-out");
    let mut server = base.to_vec();
    server.extend(["--file", input.path()]);
    let mut client = base.to_vec();
    client.extend([
        "--connect-timeout",
        "10",
        "--output",
        output.path(),
        "--chunk",
        "4K",
        "--depth",
        "64",
    ]);
    let (c, s) = pair(&hosts, &server, &client);
    check_transfer(&c, &s, (2 << 20) + 777);
    assert!(
        std::fs::read(&input.0).unwrap() == std::fs::read(&output.0).unwrap(),
        "the file the client saved differs from the one served"
    );
}

/// `argv` run as user `uid` (its own gid, no supplementary groups), with the test's memory
/// lock limit (Linux's default is 8 MiB).
fn as_user(uid: u32, argv: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "setpriv",
        &format!("--reuid={uid}"),
        &format!("--regid={uid}"),
        "--clear-groups",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(argv.iter().map(|s| s.to_string()));
    v
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP, setpriv (cargo xtask test runs it)"]
fn the_examples_run_between_two_ordinary_users() {
    require_root();
    // Daemons running as a user of their own; the server as nobody, the client as another
    // user.
    let hosts = TwoHosts::start(&LabConfig::default(), &["--user", "64000:64000"])
        .expect("lab with two daemons");
    let (nobody, other) = (65534, 64001);
    let ex = example("rc_pingpong");
    let args = [
        ex.as_str(),
        "-g",
        "0",
        "-d",
        "xroce0",
        "-p",
        "18607",
        "--timeout",
        "60",
        "-n",
        "100",
        "--verify",
    ];
    let server = as_user(nobody, &args);
    let mut client = as_user(other, &args);
    client.extend(["--connect-timeout".to_owned(), "10".to_owned()]);
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let client: Vec<&str> = client.iter().map(String::as_str).collect();
    let (cout, sout) = pair(&hosts, &server, &client);
    check_pingpong_report(&cout, 4096, 100);
    check_pingpong_report(&sout, 4096, 100);
    let ex = example("rdma_write");
    let base = [
        ex.as_str(),
        "-p",
        "18608",
        "--timeout",
        "120",
        "--size",
        "2M",
    ];
    let server = as_user(nobody, &base);
    let mut client = as_user(other, &base);
    client.extend(["--connect-timeout".to_owned(), "10".to_owned()]);
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let client: Vec<&str> = client.iter().map(String::as_str).collect();
    let (c, s) = pair(&hosts, &server, &client);
    check_transfer(&c, &s, 2 << 20);
}
