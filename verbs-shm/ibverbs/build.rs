//! Exact symbol versions for the drop-in `libibverbs.so.1`, generated from one table.
//!
//! `abi/defsyms.txt` lists every default-version symbol of rdma-core v44's libibverbs.so.1
//! as `NODE name` (146 lines: 75 public symbols in `IBVERBS_1.0` … `IBVERBS_1.14`, 71 in
//! `IBVERBS_PRIVATE_34`). From it this script:
//!
//! 1. writes `$OUT_DIR/libibverbs.map`, the linker version script: one node per version,
//!    the public ones chained `IBVERBS_1.0 ← 1.1 ← 1.5 ← … ← 1.14` in numeric order (as
//!    rdma-core's libibverbs.map.in does), the private one standalone, `local: *` in the
//!    first node;
//! 2. scans `src/` for `#[unsafe(no_mangle)]` items and fails the build if one is missing
//!    from the table, or if a table entry has no such item;
//! 3. writes, for each source file that exports, `$OUT_DIR/symver_<path>.rs`: a
//!    `global_asm!` with `.symver X, X@@NODE` for each of that file's symbols, which the
//!    file must `include!` (checked). rustc passes its own unversioned version script,
//!    which would otherwise win and export everything at the `Base` version. The
//!    directive must be assembled in the same codegen unit as the definition (LLVM refuses
//!    `X@@NODE` for a symbol defined elsewhere), hence one per module rather than one for
//!    the crate: rustc keeps a module's non-inline items together;
//! 4. writes `$OUT_DIR/symbols.rs`: a `use` of every name from `crate::exports`, so a
//!    symbol of the table without an entry point there does not compile;
//! 5. passes `--version-script` and `-soname libibverbs.so.1` to the cdylib link.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::{env, fs};

const TABLE: &str = "abi/defsyms.txt";
const SONAME: &str = "libibverbs.so.1";

/// A version node: `IBVERBS_<major>.<minor>` or `IBVERBS_PRIVATE_<n>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Public(u32, u32),
    Private(u32),
}

impl Node {
    fn parse(text: &str) -> Option<Node> {
        let rest = text.strip_prefix("IBVERBS_")?;
        if let Some(abi) = rest.strip_prefix("PRIVATE_") {
            return abi.parse().ok().map(Node::Private);
        }
        let (major, minor) = rest.split_once('.')?;
        Some(Node::Public(major.parse().ok()?, minor.parse().ok()?))
    }

    fn name(&self) -> String {
        match self {
            Node::Public(major, minor) => format!("IBVERBS_{major}.{minor}"),
            Node::Private(abi) => format!("IBVERBS_PRIVATE_{abi}"),
        }
    }
}

fn main() {
    // NOTE(unwrap): cargo always sets these for build scripts.
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    // NOTE(unwrap): as above.
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let table_path = manifest.join(TABLE);
    println!("cargo:rerun-if-changed={}", table_path.display());
    println!("cargo:rerun-if-changed=src");

    let table = read_table(&table_path);
    let by_file = check_sources(&manifest.join("src"), &table);

    let script = out_dir.join("libibverbs.map");
    write(&script, &version_script(&table));
    write(&out_dir.join("symbols.rs"), &symbols_rs(&table));
    let versions: BTreeMap<&String, String> = table
        .iter()
        .flat_map(|(node, names)| names.iter().map(|n| (n, node.name())))
        .collect();
    for (snippet, names) in &by_file {
        write(&out_dir.join(snippet), &symver_rs(names, &versions));
    }

    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        script.display()
    );
    // For tests/exports.rs, which compares the script's parent chain with rdma-core's.
    println!(
        "cargo:rustc-env=XROCE_IBVERBS_VERSION_SCRIPT={}",
        script.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{SONAME}");
}

fn write(path: &Path, text: &str) {
    fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// Symbols by node, in table order within a node.
fn read_table(path: &Path) -> BTreeMap<Node, Vec<String>> {
    let text =
        fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut table: BTreeMap<Node, Vec<String>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for (index, line) in text.lines().enumerate() {
        let at = format!("{TABLE}:{}", index + 1);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(node), Some(name), None) = (fields.next(), fields.next(), fields.next()) else {
            panic!("{at}: expected `NODE symbol`, got `{line}`");
        };
        let node = Node::parse(node).unwrap_or_else(|| panic!("{at}: bad version node `{node}`"));
        let valid = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        assert!(valid, "{at}: `{name}` is not a C identifier");
        assert!(
            seen.insert(name.to_string()),
            "{at}: `{name}` is listed twice"
        );
        table.entry(node).or_default().push(name.to_string());
    }
    assert!(
        table.keys().any(|n| *n == Node::Public(1, 0)),
        "{TABLE}: no IBVERBS_1.0 node to carry `local: *`"
    );
    table
}

fn version_script(table: &BTreeMap<Node, Vec<String>>) -> String {
    let mut out = String::from("/* Generated by build.rs from abi/defsyms.txt. */\n");
    let mut parent: Option<String> = None;
    for (node, names) in table {
        out.push_str(&format!("{} {{\n\tglobal:\n", node.name()));
        for name in names {
            out.push_str(&format!("\t\t{name};\n"));
        }
        match node {
            Node::Public(1, 0) => out.push_str("\tlocal: *;\n};\n"),
            Node::Public(..) => match &parent {
                Some(p) => out.push_str(&format!("}} {p};\n")),
                None => out.push_str("};\n"),
            },
            Node::Private(_) => out.push_str("};\n"),
        }
        if let Node::Public(..) = node {
            parent = Some(node.name());
        }
    }
    out
}

fn symbols_rs(table: &BTreeMap<Node, Vec<String>>) -> String {
    let mut out = String::from(
        "// Generated by build.rs from abi/defsyms.txt. Do not edit.\n\n\
         // Every symbol of the table must be an entry point in `crate::exports`.\n\
         #[allow(unused_imports)]\nuse crate::exports::{\n",
    );
    for names in table.values() {
        for name in names {
            out.push_str(&format!("    {name},\n"));
        }
    }
    out.push_str("};\n\n");
    out.push_str("/// Number of exported symbols, as listed in `abi/defsyms.txt`.\n#[cfg(test)]\n");
    let count: usize = table.values().map(Vec::len).sum();
    out.push_str(&format!(
        "pub(crate) const EXPORTED_SYMBOLS: usize = {count};\n"
    ));
    out
}

/// The `.symver` directives of one source file's exports.
fn symver_rs(names: &[String], versions: &BTreeMap<&String, String>) -> String {
    let mut out = String::from(
        "// Generated by build.rs from abi/defsyms.txt. Do not edit.\n\
         // `X@@NODE` gives the definition of X its default version without a second\n\
         // (unversioned) name. Test builds link no version script, so they skip it.\n\
         #[cfg(not(test))]\ncore::arch::global_asm!(\n",
    );
    for name in names {
        out.push_str(&format!(
            "    \".symver {name}, {name}@@{}\",\n",
            versions[name]
        ));
    }
    out.push_str(");\n");
    out
}

/// The name of the generated `.symver` file for a source file (`src/exports/device.rs` →
/// `symver_exports_device.rs`).
fn snippet_name(src: &Path, file: &Path) -> String {
    // NOTE(unwrap): `file` was found by walking `src`.
    let relative = file.strip_prefix(src).expect("under src/");
    let stem = relative.with_extension("");
    let parts: Vec<String> = stem
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    format!("symver_{}.rs", parts.join("_"))
}

/// Every `#[unsafe(no_mangle)]` item under `src/` must be in the table, and vice versa;
/// every file that exports must include its `.symver` file. Returns the exported names by
/// `.symver` file name.
fn check_sources(src: &Path, table: &BTreeMap<Node, Vec<String>>) -> BTreeMap<String, Vec<String>> {
    let mut files = Vec::new();
    collect_rs(src, &mut files);
    let mut exported = BTreeMap::new();
    let mut by_file: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let text =
            fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            let at = format!("{}:{}", file.display(), index + 1);
            let trimmed = line.trim();
            if trimmed.starts_with("//") {
                continue;
            }
            assert!(
                !trimmed.contains("#[no_mangle]") && !trimmed.contains("export_name"),
                "{at}: export entry points with `#[unsafe(no_mangle)]` only, so this check sees them"
            );
            if trimmed != "#[unsafe(no_mangle)]" {
                continue;
            }
            let item = lines[index + 1..]
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.starts_with("#[") && !l.starts_with("//"))
                .unwrap_or_else(|| panic!("{at}: `#[unsafe(no_mangle)]` on nothing"));
            let name = item_name(item).unwrap_or_else(|| {
                panic!("{at}: `#[unsafe(no_mangle)]` must precede `fn name(` or `static name:`")
            });
            if let Some(previous) = exported.insert(name.clone(), at.clone()) {
                panic!("{at}: `{name}` is already exported at {previous}");
            }
            by_file
                .entry(snippet_name(src, file))
                .or_default()
                .push(name);
        }
        if let Some(snippet) = by_file.get_key_value(&snippet_name(src, file)).map(|e| e.0) {
            let include = format!("include!(concat!(env!(\"OUT_DIR\"), \"/{snippet}\"));");
            // Compare without whitespace: rustfmt may wrap the line.
            let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            assert!(
                compact.contains(&include.replace(' ', "")),
                "{}: exports symbols, so it must contain `{include}`",
                file.display()
            );
        }
    }
    let listed: BTreeSet<&String> = table.values().flatten().collect();
    let defined: BTreeSet<&String> = exported.keys().collect();
    let unlisted: Vec<String> = defined
        .difference(&listed)
        .map(|n| format!("{n} ({})", exported[*n]))
        .collect();
    let undefined: Vec<&&String> = listed.difference(&defined).collect();
    assert!(
        unlisted.is_empty(),
        "entry points missing from {TABLE} (add `NODE name` or remove the export): {unlisted:?}"
    );
    assert!(
        undefined.is_empty(),
        "symbols of {TABLE} with no entry point in src/: {undefined:?}"
    );
    by_file
}

fn item_name(item: &str) -> Option<String> {
    let after = if let Some((_, rest)) = item.split_once(" fn ") {
        rest
    } else if let Some((_, rest)) = item.split_once("static ") {
        rest.strip_prefix("mut ").unwrap_or(rest)
    } else {
        return None;
    };
    let name: String = after
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

fn collect_rs(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .path();
        if path.is_dir() {
            collect_rs(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
}
