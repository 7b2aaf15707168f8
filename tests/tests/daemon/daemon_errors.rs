//! `xroced` refuses to start with one clear line, never a panic, and leaves nothing behind,
//! when: it is not root, the interface does not exist, XDP attach is refused, hugepages are
//! short, the configuration is wrong. (A taken device name: `daemon_lifecycle.rs`.)

use std::process::Output;

use xroce_lab::daemons::xroced;
use xroce_lab::{Lab, LabConfig, Side, require_root};

fn run(lab: &Lab, argv: &[&str]) -> Output {
    let bin = xroced().unwrap().to_string_lossy().into_owned();
    let mut full = vec![bin.as_str()];
    full.extend_from_slice(argv);
    lab.command(Side::A, &full).output().unwrap()
}

/// The daemon failed with exit code 1 and a line that starts `xroced: ` and contains
/// `expect` (what follows it may quote the configuration file).
fn refused(out: &Output, expect: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it started: {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "a panic: {err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("xroced: "))
        .unwrap_or_default();
    assert!(
        line.contains(expect),
        "unclear error, wanted {expect:?}: {err}"
    );
}

fn no_xdp_left(lab: &Lab, dev: &str) {
    let out = lab
        .command(Side::A, &["ip", "-details", "link", "show", "dev", dev])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        !text.contains("prog/xdp"),
        "an XDP program was left on {dev}: {text}"
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn clear_errors_and_nothing_left_behind() {
    require_root();
    let lab = Lab::new(&LabConfig::default()).unwrap();
    let iface = lab.host(Side::A).interface.clone();

    refused(
        &run(&lab, &["--netdev", "nosuch0"]),
        "no interface named \"nosuch0\"",
    );

    // Without root: no capabilities at all.
    let bin = xroced().unwrap().to_string_lossy().into_owned();
    let out = lab
        .command(
            Side::A,
            &[
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                &bin,
                "--netdev",
                &iface,
            ],
        )
        .output()
        .unwrap();
    refused(&out, "must run as root, or with CAP_NET_ADMIN");

    // The loopback interface has no native XDP.
    let add = lab
        .command(Side::A, &["ip", "addr", "add", "10.99.0.1/32", "dev", "lo"])
        .status()
        .unwrap();
    assert!(add.success());
    refused(
        &run(&lab, &["--netdev", "lo", "--xdp", "native"]),
        "attaching the XDP program to lo failed",
    );
    no_xdp_left(&lab, "lo");

    // 2 x 1 Mi frames of 4 KiB: 8 GiB of hugepages, more than any pool here holds. The
    // XDP program attached before the UMEM failed must be gone again.
    refused(
        &run(
            &lab,
            &[
                "--netdev",
                &iface,
                "--hugepages",
                "required",
                "--frames",
                "1048576",
            ],
        ),
        "free 2 MiB hugepages",
    );
    no_xdp_left(&lab, &iface);

    refused(
        &run(&lab, &["--netdev", &iface, "--frames", "1000"]),
        "--frames must be a power of two",
    );
    // More queues than the wake page has words for pollers.
    refused(
        &run(&lab, &["--netdev", &iface, "--queues", "65"]),
        "a daemon serves 1 to 64 queues",
    );
    refused(
        &run(&lab, &["--config", "/nonexistent/xroced.toml"]),
        "reading /nonexistent/xroced.toml",
    );
    let bad = std::env::temp_dir().join(format!("xroced-bad-{}.toml", std::process::id()));
    std::fs::write(&bad, "queus = 2\n").unwrap();
    let bad_text = bad.to_string_lossy().into_owned();
    let out = run(&lab, &["--netdev", &iface, "--config", &bad_text]);
    let _ = std::fs::remove_file(&bad);
    refused(&out, "is not a valid xroced configuration");
}
