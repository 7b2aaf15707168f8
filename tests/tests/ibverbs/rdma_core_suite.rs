//! rdma-core's own test suite (Debian's python3-pyverbs) on xroce, through
//! `cargo xtask rdma-core-tests`: one daemon in a lab namespace, the suite run on its
//! device with the drop-in libibverbs.so.1, every test bounded in time.
//!
//! The assertion is the list of tests that must pass: every test of the suite that
//! exercises something xroce offers (RC/UC/UD traffic in loopback, SEND/WRITE/READ/atomics,
//! CQ events, extended CQs and QPs with the `ibv_wr_*` API, MR registration and
//! re-registration, address handles, QP creation, state transitions and queries, device,
//! port and GID queries, rdma_cm's multicast joins and leaves). Such a test that fails, errs *or is skipped* fails this test: a
//! supported verb that starts answering `EOPNOTSUPP` makes the suite skip, not fail. Any
//! failure or error anywhere in the suite fails it too. The other tests are skipped by the
//! suite itself because xroce answers as a provider without the feature (memory windows,
//! XRC, ODP, device memory, raw packet QPs, flow steering, parent domains, tag matching,
//! CQ resizing, timestamps, importing objects) or because they are for mlx5/efa
//! hardware, CUDA or dmabuf devices.
//!
//! Needs root (`#[ignore]`d: `cargo xtask test` runs it).

use std::collections::BTreeMap;
use std::process::Command;

/// Every test of rdma-core 44's suite (Debian 12's python3-pyverbs 44.0-2) that xroce
/// supports.
const MUST_PASS: &[&str] = &[
    "tests.test_addr.AHTest.test_create_ah",
    "tests.test_addr.AHTest.test_create_ah_roce",
    "tests.test_addr.AHTest.test_destroy_ah",
    "tests.test_atomic.AtomicTest.test_atomic_cmp_and_swap",
    "tests.test_atomic.AtomicTest.test_atomic_fetch_and_add",
    "tests.test_atomic.AtomicTest.test_atomic_invalid_lkey",
    "tests.test_atomic.AtomicTest.test_atomic_invalid_mr_access",
    "tests.test_atomic.AtomicTest.test_atomic_invalid_qp_access",
    "tests.test_atomic.AtomicTest.test_atomic_invalid_rkey",
    "tests.test_atomic.AtomicTest.test_atomic_non_aligned_addr",
    "tests.test_cq.CQAPITest.test_create_cq",
    "tests.test_cq.CQAPITest.test_create_cq_bad_flow",
    "tests.test_cq.CQAPITest.test_create_cq_with_comp_channel",
    "tests.test_cq_events.CqEventsTestCase.test_cq_events_rc",
    "tests.test_cq_events.CqEventsTestCase.test_cq_events_ud",
    "tests.test_cqex.CQEXAPITest.test_create_cq_ex",
    "tests.test_cqex.CQEXAPITest.test_create_cq_ex_bad_flow",
    "tests.test_cqex.CqExTestCase.test_rc_traffic_cq_ex",
    "tests.test_cqex.CqExTestCase.test_ud_traffic_cq_ex",
    "tests.test_device.DeviceTest.test_dev_list",
    "tests.test_device.DeviceTest.test_open_dev",
    "tests.test_device.DeviceTest.test_phys_port_cnt_ex",
    "tests.test_device.DeviceTest.test_query_device",
    "tests.test_device.DeviceTest.test_query_device_ex",
    "tests.test_device.DeviceTest.test_query_gid",
    "tests.test_device.DeviceTest.test_query_gid_ex",
    "tests.test_device.DeviceTest.test_query_gid_ex_bad_flow",
    "tests.test_device.DeviceTest.test_query_gid_table",
    "tests.test_device.DeviceTest.test_query_gid_table_bad_flow",
    "tests.test_device.DeviceTest.test_query_pkey",
    "tests.test_device.DeviceTest.test_query_port",
    "tests.test_device.DeviceTest.test_query_port_bad_flow",
    "tests.test_fork.ForkAPITest.test_is_fork_initialized",
    "tests.test_mr.MRTest.test_mr_rereg_access",
    "tests.test_mr.MRTest.test_mr_rereg_access_bad_flow",
    "tests.test_mr.MRTest.test_mr_rereg_addr",
    "tests.test_mr.MRTest.test_mr_rereg_pd",
    "tests.test_mr.MRTest.test_reg_mr_bad_flags",
    "tests.test_pd.PDTest.test_alloc_pd",
    "tests.test_pd.PDTest.test_dealloc_pd",
    "tests.test_pd.PDTest.test_destroy_pd_twice",
    "tests.test_pd.PDTest.test_multiple_pd_creation",
    "tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_recv_sge",
    "tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_recv_wr",
    "tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_send_sge",
    "tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_send_wr",
    "tests.test_qp.QPTest.test_create_rc_qp_ex_no_attr",
    "tests.test_qp.QPTest.test_create_rc_qp_ex_with_attr",
    "tests.test_qp.QPTest.test_create_rc_qp_no_attr",
    "tests.test_qp.QPTest.test_create_rc_qp_with_attr",
    "tests.test_qp.QPTest.test_create_uc_qp_ex_no_attr",
    "tests.test_qp.QPTest.test_create_uc_qp_ex_with_attr",
    "tests.test_qp.QPTest.test_create_uc_qp_no_attr",
    "tests.test_qp.QPTest.test_create_uc_qp_with_attr",
    "tests.test_qp.QPTest.test_create_ud_qp_ex_no_attr",
    "tests.test_qp.QPTest.test_create_ud_qp_ex_with_attr",
    "tests.test_qp.QPTest.test_create_ud_qp_no_attr",
    "tests.test_qp.QPTest.test_create_ud_qp_with_attr",
    "tests.test_qp.QPTest.test_modify_ud_qp",
    "tests.test_qp.QPTest.test_query_data_in_order",
    "tests.test_qp.QPTest.test_query_rc_qp",
    "tests.test_qp.QPTest.test_query_uc_qp",
    "tests.test_qp.QPTest.test_query_ud_qp",
    "tests.test_qpex.QpExTestCase.test_full_rq_bad_flow",
    "tests.test_qpex.QpExTestCase.test_post_receive_qp_state_bad_flow",
    "tests.test_qpex.QpExTestCase.test_post_send_qp_state_bad_flow",
    "tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_cmp_swp",
    "tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_fetch_add",
    "tests.test_qpex.QpExTestCase.test_qp_ex_rc_rdma_read",
    "tests.test_qpex.QpExTestCase.test_qp_ex_rc_rdma_read_zero_size",
    "tests.test_qpex.QpExTestCase.test_qp_ex_rc_rdma_write",
    "tests.test_qpex.QpExTestCase.test_qp_ex_rc_rdma_write_imm",
    "tests.test_qpex.QpExTestCase.test_qp_ex_rc_rdma_write_zero_length",
    "tests.test_qpex.QpExTestCase.test_qp_ex_rc_send",
    "tests.test_qpex.QpExTestCase.test_qp_ex_rc_send_imm",
    "tests.test_qpex.QpExTestCase.test_qp_ex_ud_send",
    "tests.test_qpex.QpExTestCase.test_qp_ex_ud_send_imm",
    "tests.test_qpex.QpExTestCase.test_qp_ex_ud_zero_size",
    "tests.test_qpex.QpExTestCase.test_rq_with_larger_sgl_bad_flow",
    "tests.test_rdmacm.CMTestCase.test_rdmacm_async_ex_leave_multicast_traffic",
    "tests.test_rdmacm.CMTestCase.test_rdmacm_async_ex_multicast_traffic",
    "tests.test_rdmacm.CMTestCase.test_rdmacm_async_multicast_traffic",
    "tests.test_rdmacm.CMTestCase.test_rdmacm_async_read",
    "tests.test_rdmacm.CMTestCase.test_rdmacm_async_reject_traffic",
    "tests.test_rdmacm.CMTestCase.test_rdmacm_async_traffic",
    "tests.test_rdmacm.CMTestCase.test_rdmacm_async_traffic_external_qp",
    "tests.test_rdmacm.CMTestCase.test_rdmacm_async_udp_traffic",
    "tests.test_rdmacm.CMTestCase.test_rdmacm_async_write",
    "tests.test_rdmacm.CMTestCase.test_rdmacm_sync_traffic",
    "tests.test_relaxed_ordering.RoTestCase.test_ro_rc_traffic",
    "tests.test_relaxed_ordering.RoTestCase.test_ro_ud_traffic",
];

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn rdma_core_suite_passes_on_xroce() {
    xroce_lab::require_root();
    let report =
        std::env::temp_dir().join(format!("xroce-rdma-core-tests-{}.tsv", std::process::id()));
    let _ = std::fs::remove_file(&report);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["run", "--quiet", "-p", "xroce-rdma-core-tests", "--"])
        .arg("--report")
        .arg(&report)
        .status()
        .expect("running cargo xtask rdma-core-tests");
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("cargo xtask rdma-core-tests ({status}) wrote no report: {e}"));
    let _ = std::fs::remove_file(&report);
    let outcomes: BTreeMap<&str, (&str, &str)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, '\t');
            let status = f.next()?;
            let id = f.next()?;
            Some((id, (status, f.next().unwrap_or(""))))
        })
        .collect();

    let broken: Vec<String> = outcomes
        .iter()
        .filter(|(_, (s, _))| matches!(*s, "failed" | "error"))
        .map(|(id, (s, reason))| format!("{s} {id}: {reason}"))
        .collect();
    assert!(
        broken.is_empty(),
        "tests failed or erred:\n{}",
        broken.join("\n")
    );
    let missing: Vec<String> = MUST_PASS
        .iter()
        .filter_map(|id| match outcomes.get(id) {
            Some(("passed", _)) => None,
            Some((s, reason)) => Some(format!("{s} {id}: {reason}")),
            None => Some(format!("not run: {id}")),
        })
        .collect();
    assert!(
        missing.is_empty(),
        "tests of supported features did not pass:\n{}",
        missing.join("\n")
    );
    assert!(
        status.success(),
        "cargo xtask rdma-core-tests failed ({status})"
    );
    let passed = outcomes.values().filter(|(s, _)| *s == "passed").count();
    eprintln!(
        "rdma-core suite: {} tests, {passed} passed ({} required), {} skipped",
        outcomes.len(),
        MUST_PASS.len(),
        outcomes.values().filter(|(s, _)| *s == "skipped").count()
    );
}
