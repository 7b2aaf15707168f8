//! The built library's dynamic symbol table is exactly `abi/defsyms.txt`: every
//! `symbol@@VERSION` present with its version, nothing else exported (no Rust internals,
//! nothing unversioned), and the version nodes chained as rdma-core's.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{Libraries, defined_dynamic_symbols, expected_exports, imports_per_binary};

const SYSTEM_LIBRARY: &str = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1";

#[test]
fn exports_are_exactly_the_table_with_default_versions() {
    let libraries = Libraries::build();
    let exported: BTreeSet<String> = defined_dynamic_symbols(&libraries.rdmacm)
        .into_iter()
        .collect();
    let expected = expected_exports();
    assert_eq!(
        expected.len(),
        68,
        "rdma-core v44's librdmacm has 68 functions"
    );
    let missing: Vec<&String> = expected.difference(&exported).collect();
    let extra: Vec<&String> = exported.difference(&expected).collect();
    assert!(
        missing.is_empty(),
        "expected exports missing or with another version: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "exported but not in abi/defsyms.txt: {extra:?}"
    );
}

#[test]
fn the_soname_and_version_nodes_are_rdma_cores() {
    let libraries = Libraries::build();
    assert_eq!(
        common::soname(&libraries.rdmacm).as_deref(),
        Some("librdmacm.so.1")
    );
    let names: Vec<String> = common::version_definitions(&libraries.rdmacm)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        names,
        [
            "librdmacm.so.1",
            "RDMACM_1.0",
            "RDMACM_1.1",
            "RDMACM_1.2",
            "RDMACM_1.3"
        ]
    );
    assert_eq!(
        version_script_parents(),
        [
            ("RDMACM_1.1".to_string(), vec!["RDMACM_1.0".to_string()]),
            ("RDMACM_1.2".to_string(), vec!["RDMACM_1.1".to_string()]),
            ("RDMACM_1.3".to_string(), vec!["RDMACM_1.2".to_string()]),
        ]
    );
}

/// Every `@RDMACM_*` import of every program and library of `imports_per_binary.txt`
/// (rdmacm-utils, perftest, fio, qperf, libfabric, UCX, librpma, pyverbs, qemu, ceph) is
/// exported with that version: what a `BIND_NOW` program needs to start.
#[test]
fn every_recorded_import_is_exported_with_its_version() {
    let libraries = Libraries::build();
    let exported: BTreeSet<String> = defined_dynamic_symbols(&libraries.rdmacm)
        .into_iter()
        .collect();
    let mut checked = 0;
    let mut unsatisfied = Vec::new();
    for (binary, imports) in imports_per_binary() {
        for import in imports {
            let (name, version) = import.split_once('@').unwrap();
            assert!(version.starts_with("RDMACM_"), "{binary}: {import}");
            checked += 1;
            if !exported.contains(&format!("{name}@@{version}")) {
                unsatisfied.push(format!("{binary}: {import}"));
            }
        }
    }
    assert!(checked > 600, "checked {checked} imports");
    assert!(
        unsatisfied.is_empty(),
        "imports the library does not satisfy: {unsatisfied:?}"
    );
}

/// With Debian's librdmacm1 installed, its default-version symbols, its version nodes and
/// their chain are ours.
#[test]
#[ignore = "needs Debian's librdmacm1 (cargo xtask test installs and runs it)"]
fn default_versions_equal_the_installed_rdma_core() {
    assert!(
        Path::new(SYSTEM_LIBRARY).exists(),
        "{SYSTEM_LIBRARY} is not installed (package librdmacm1): run `cargo xtask deps`"
    );
    let system: BTreeSet<String> = defined_dynamic_symbols(Path::new(SYSTEM_LIBRARY))
        .into_iter()
        // Keep default versions; drop the version-node marker symbols ld.bfd adds.
        .filter(|s| s.split_once("@@").is_some_and(|(name, node)| name != node))
        .collect();
    assert_eq!(system.len(), 68);
    assert_eq!(
        system,
        expected_exports(),
        "abi/defsyms.txt is {SYSTEM_LIBRARY}'s"
    );

    let libraries = Libraries::build();
    let ours: Vec<String> = common::version_definitions(&libraries.rdmacm)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let theirs = common::version_definitions(Path::new(SYSTEM_LIBRARY));
    let their_names: Vec<String> = theirs.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(ours, their_names);
    // lld, rustc's linker, does not record parents in the output, so rdma-core's chain is
    // compared with our version script.
    let parents: Vec<(String, Vec<String>)> = theirs
        .into_iter()
        .filter(|(_, parents)| !parents.is_empty())
        .collect();
    assert_eq!(parents, version_script_parents());
}

/// `(node, [parent])` for every node of the generated version script that has a parent.
fn version_script_parents() -> Vec<(String, Vec<String>)> {
    let script = std::fs::read_to_string(env!("XROCE_RDMACM_VERSION_SCRIPT")).unwrap();
    let mut result = Vec::new();
    let mut current: Option<String> = None;
    for line in script.lines() {
        if let Some(node) = line.strip_suffix(" {") {
            current = Some(node.to_string());
        } else if let Some(parent) = line.strip_prefix("} ") {
            let parent = parent.trim_end_matches(';').to_string();
            result.push((current.take().unwrap(), vec![parent]));
        }
    }
    result
}
