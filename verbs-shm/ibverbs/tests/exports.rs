//! The built library's dynamic symbol table is exactly `abi/defsyms.txt`: every
//! `symbol@@VERSION` present with its version, and nothing else exported (no Rust
//! internals, nothing unversioned).

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{Library, defined_dynamic_symbols, expected_exports, imports_per_binary};

const SYSTEM_LIBRARY: &str = "/lib/x86_64-linux-gnu/libibverbs.so.1";

#[test]
fn exports_are_exactly_the_table_with_default_versions() {
    let library = Library::build();
    let exported: BTreeSet<String> = defined_dynamic_symbols(&library.path).into_iter().collect();
    let expected = expected_exports();
    assert_eq!(
        expected.len(),
        146,
        "rdma-core v44 has 146 default-version symbols"
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
    let library = Library::build();
    assert_eq!(
        common::soname(&library.path).as_deref(),
        Some("libibverbs.so.1")
    );

    let names: Vec<String> = common::version_definitions(&library.path)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let expected: Vec<&str> = vec![
        "libibverbs.so.1",
        "IBVERBS_1.0",
        "IBVERBS_1.1",
        "IBVERBS_1.5",
        "IBVERBS_1.6",
        "IBVERBS_1.7",
        "IBVERBS_1.8",
        "IBVERBS_1.9",
        "IBVERBS_1.10",
        "IBVERBS_1.11",
        "IBVERBS_1.12",
        "IBVERBS_1.13",
        "IBVERBS_1.14",
        "IBVERBS_PRIVATE_34",
    ];
    assert_eq!(names, expected);
}

/// Every `@IBVERBS_*` import of every program and library in `imports_per_binary.txt`
/// (the ibverbs tools, perftest, librdmacm, libmlx5, libefa, the rdmacm tools) is exported
/// with that version. This is what a `BIND_NOW` program needs to start.
#[test]
fn every_recorded_import_is_exported_with_its_version() {
    let library = Library::build();
    let exported: BTreeSet<String> = defined_dynamic_symbols(&library.path).into_iter().collect();
    let mut checked = 0;
    let mut unsatisfied = Vec::new();
    for (binary, imports) in imports_per_binary() {
        for import in imports {
            let Some((name, version)) = import.split_once('@') else {
                continue;
            };
            if !version.starts_with("IBVERBS_") {
                continue;
            }
            checked += 1;
            if !exported.contains(&format!("{name}@@{version}")) {
                unsatisfied.push(format!("{binary}: {import}"));
            }
        }
    }
    assert!(checked > 300, "checked {checked} imports");
    assert!(
        unsatisfied.is_empty(),
        "imports the library does not satisfy: {unsatisfied:?}"
    );
}

/// When Debian's libibverbs1 is installed, its default-version symbols and version nodes
/// are the same as ours.
#[test]
#[ignore = "needs Debian's libibverbs1 (cargo xtask test installs and runs it)"]
fn default_versions_equal_the_installed_rdma_core() {
    assert!(
        Path::new(SYSTEM_LIBRARY).exists(),
        "{SYSTEM_LIBRARY} is not installed (package libibverbs1): run `cargo xtask deps`"
    );
    let system: BTreeSet<String> = defined_dynamic_symbols(Path::new(SYSTEM_LIBRARY))
        .into_iter()
        // Keep default versions; drop the version-node marker symbols ld.bfd adds.
        .filter(|s| s.split_once("@@").is_some_and(|(name, node)| name != node))
        .collect();
    assert_eq!(
        system,
        expected_exports(),
        "abi/defsyms.txt matches {SYSTEM_LIBRARY}"
    );

    let library = Library::build();
    let ours: Vec<String> = common::version_definitions(&library.path)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let theirs: Vec<(String, Vec<String>)> = common::version_definitions(Path::new(SYSTEM_LIBRARY));
    let their_names: Vec<String> = theirs.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(ours, their_names);
    // rdma-core's chain, as written into our version script. (lld, rustc's linker, does
    // not record parents in the output, so they are compared with the script.)
    let parents: Vec<(String, Vec<String>)> = theirs
        .into_iter()
        .filter(|(_, parents)| !parents.is_empty())
        .collect();
    let script = version_script_parents();
    assert_eq!(parents, script);
}

/// `(node, [parent])` for every node of the generated version script that has a parent.
fn version_script_parents() -> Vec<(String, Vec<String>)> {
    let script = std::fs::read_to_string(env!("XROCE_IBVERBS_VERSION_SCRIPT")).unwrap();
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
