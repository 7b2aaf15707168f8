//! UCX and Open MPI on xroce, through `cargo xtask ucx`: two lab hosts with a daemon each,
//! Debian's UCX 1.13 and Open MPI 4.1 on the drop-in libibverbs.so.1.
//!
//! Asserted: `ucx_info -d` offers `rc_verbs` and `ud_verbs` on xroce's device;
//! `ucx_perftest` between the hosts passes every run over both transports (tag matching,
//! puts, active messages); the Open MPI jobs with `--mca pml ucx` (2 and 4 ranks over RC,
//! 2 over UD) check their allreduce, ping-pong and all-to-all results and UCX reached the
//! other ranks through the expected verbs transport on xroce's device and nothing else;
//! UCX's client-server example connects by socket address through UCX's rdma_cm connection
//! manager (the drop-in librdmacm.so.1) and exchanges its messages.
//! The figures are printed, never asserted.
//!
//! Needs root (`#[ignore]`d: `cargo xtask test` runs it).

use std::process::Command;

/// The `ucx_perftest` runs that must pass: (transport, test).
const PERFTEST: &[(&str, &str)] = &[
    ("rc_verbs", "tag_bw"),
    ("rc_verbs", "tag_lat"),
    ("rc_verbs", "put_bw"),
    ("rc_verbs", "put_lat"),
    ("rc_verbs", "am_bw"),
    ("ud_verbs", "tag_bw"),
    ("ud_verbs", "tag_lat"),
    ("ud_verbs", "ucp_put_bw"),
    ("ud_verbs", "ucp_put_lat"),
    ("ud_verbs", "am_bw"),
];

/// The MPI jobs that must pass: (name, the lane every remote endpoint uses).
const MPI: &[(&str, &str)] = &[
    ("2 ranks, rc_verbs", "rc_verbs/xroce0:1"),
    ("4 ranks, rc_verbs", "rc_verbs/xroce0:1"),
    ("2 ranks, ud_verbs", "ud_verbs/xroce0:1"),
];

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP, Debian's UCX and Open MPI (cargo xtask test runs it)"]
fn ucx_perftest_and_open_mpi_run_between_two_xroce_hosts() {
    xroce_lab::require_root();
    let report = std::env::temp_dir().join(format!("xroce-ucx-{}.tsv", std::process::id()));
    let _ = std::fs::remove_file(&report);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["run", "--quiet", "-p", "xroce-ucx", "--"])
        .args(["--bw-iters", "500", "--lat-iters", "2000", "--report"])
        .arg(&report)
        .status()
        .expect("running cargo xtask ucx");
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("cargo xtask ucx ({status}) wrote no report: {e}"));
    let _ = std::fs::remove_file(&report);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();

    for transport in ["rc_verbs", "ud_verbs"] {
        assert!(
            rows.iter()
                .any(|r| r[..] == ["ucx_info", transport, "xroce0:1"]),
            "ucx_info -d does not offer {transport} on xroce0:1:\n{text}"
        );
    }
    for (transport, test) in PERFTEST {
        let row = rows
            .iter()
            .find(|r| r.len() >= 5 && r[0] == "perftest" && r[1] == *transport && r[2] == *test)
            .unwrap_or_else(|| panic!("ucx_perftest -t {test} over {transport} did not run"));
        assert_eq!(
            row[4],
            "ok",
            "ucx_perftest -t {test} over {transport}: {}",
            row[5..].join(" ")
        );
    }
    for (job, lane) in MPI {
        let row = rows
            .iter()
            .find(|r| r.len() >= 5 && r[0] == "mpi" && r[1] == *job)
            .unwrap_or_else(|| panic!("the MPI job with {job} did not run"));
        assert_eq!(row[2], "ok", "MPI job, {job}: {}", row[3]);
        for check in [
            "allreduce:",
            "ping-pong:",
            "all-to-all:",
            "all checks passed",
        ] {
            assert!(
                row[3].contains(check),
                "MPI job, {job}: no {check} in {}",
                row[3]
            );
        }
        assert!(
            row[4].contains(lane),
            "MPI job, {job}: UCX selected {}, not {lane}",
            row[4]
        );
    }
    let sockaddr = rows
        .iter()
        .find(|r| r[0] == "sockaddr")
        .expect("the client-server example did not run");
    assert_eq!(
        sockaddr[1..],
        ["ok", "rdmacm"],
        "UCX's client-server example by socket address"
    );
    assert!(status.success(), "cargo xtask ucx failed ({status})");
}
