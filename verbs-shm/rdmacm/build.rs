//! The drop-in `librdmacm.so.1`'s exact ABI, generated from two tables.
//!
//! `abi/defsyms.txt` lists every default-version symbol of rdma-core v44's librdmacm.so.1
//! as `NODE name` (68 lines in `RDMACM_1.0` … `RDMACM_1.3`). From it this script:
//!
//! 1. writes `$OUT_DIR/librdmacm.map`, the linker version script: one node per version,
//!    chained `RDMACM_1.0 ← 1.1 ← 1.2 ← 1.3` as rdma-core's librdmacm.map does, `local: *`
//!    in the first;
//! 2. checks that the `#[unsafe(no_mangle)]` items under `src/` are exactly the table;
//! 3. writes, for each source file that exports, `$OUT_DIR/symver_<path>.rs`: a
//!    `global_asm!` of `.symver X, X@@NODE` for that file's symbols, which the file must
//!    `include!` (rustc's own version script would otherwise export them unversioned, and
//!    LLVM takes `X@@NODE` only in the codegen unit that defines X);
//! 4. writes `$OUT_DIR/symbols.rs`: a `use` of every name from `crate::exports`, so a
//!    symbol of the table without an entry point does not compile;
//! 5. passes `--version-script` and `-soname librdmacm.so.1` to the cdylib link.
//!
//! `abi/layout.txt` holds the measured C layouts (`struct T: sizeof=N align=M`, then one
//! `  field off=O size=S` line per field); each becomes a `const _: () = assert!(…)` on the
//! mirrors of `src/abi.rs`, in `$OUT_DIR/layout_asserts.rs`. An unknown line fails the build.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::{env, fs};

const SYMBOLS: &str = "abi/defsyms.txt";
const LAYOUT: &str = "abi/layout.txt";
const SONAME: &str = "librdmacm.so.1";
/// The node that carries `local: *` and starts the chain.
const BASE_NODE: (u32, u32) = (1, 0);

fn main() {
    // NOTE(unwrap): cargo always sets these for build scripts.
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    // NOTE(unwrap): as above.
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    for input in [SYMBOLS, LAYOUT] {
        println!("cargo:rerun-if-changed={}", manifest.join(input).display());
    }
    println!("cargo:rerun-if-changed=src");

    let table = read_symbols(&manifest.join(SYMBOLS));
    let by_file = check_sources(&manifest.join("src"), &table);
    let script = out_dir.join("librdmacm.map");
    write(&script, &version_script(&table));
    write(&out_dir.join("symbols.rs"), &symbols_rs(&table));
    let versions: BTreeMap<&String, String> = table
        .iter()
        .flat_map(|(node, names)| names.iter().map(move |n| (n, node_name(*node))))
        .collect();
    for (snippet, names) in &by_file {
        write(&out_dir.join(snippet), &symver_rs(names, &versions));
    }
    write(
        &out_dir.join("layout_asserts.rs"),
        &layout_asserts(&manifest.join(LAYOUT)),
    );

    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        script.display()
    );
    // For tests/exports.rs, which compares the script's chain with rdma-core's.
    println!(
        "cargo:rustc-env=XROCE_RDMACM_VERSION_SCRIPT={}",
        script.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{SONAME}");
}

fn write(path: &Path, text: &str) {
    fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn node_name((major, minor): (u32, u32)) -> String {
    format!("RDMACM_{major}.{minor}")
}

/// Symbols by node (`RDMACM_<major>.<minor>`), in table order within a node.
fn read_symbols(path: &Path) -> BTreeMap<(u32, u32), Vec<String>> {
    let mut table: BTreeMap<(u32, u32), Vec<String>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for (index, line) in read(path).lines().enumerate() {
        let at = format!("{SYMBOLS}:{}", index + 1);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(node), Some(name), None) = (fields.next(), fields.next(), fields.next()) else {
            panic!("{at}: expected `NODE symbol`, got `{line}`");
        };
        let node = node
            .strip_prefix("RDMACM_")
            .and_then(|v| v.split_once('.'))
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .unwrap_or_else(|| panic!("{at}: bad version node `{node}`"));
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
        table.contains_key(&BASE_NODE),
        "{SYMBOLS}: no RDMACM_1.0 node to carry `local: *`"
    );
    table
}

fn version_script(table: &BTreeMap<(u32, u32), Vec<String>>) -> String {
    let mut out = String::from("/* Generated by build.rs from abi/defsyms.txt. */\n");
    let mut parent: Option<String> = None;
    for (node, names) in table {
        out.push_str(&format!("{} {{\n\tglobal:\n", node_name(*node)));
        for name in names {
            out.push_str(&format!("\t\t{name};\n"));
        }
        match &parent {
            _ if *node == BASE_NODE => out.push_str("\tlocal: *;\n};\n"),
            Some(p) => out.push_str(&format!("}} {p};\n")),
            None => out.push_str("};\n"),
        }
        parent = Some(node_name(*node));
    }
    out
}

fn symbols_rs(table: &BTreeMap<(u32, u32), Vec<String>>) -> String {
    let mut out = String::from(
        "// Generated by build.rs from abi/defsyms.txt. Do not edit.\n\n\
         // Every symbol of the table must be an entry point in `crate::exports`.\n\
         #[allow(unused_imports)]\nuse crate::exports::{\n",
    );
    for name in table.values().flatten() {
        out.push_str(&format!("    {name},\n"));
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

/// `src/exports/event.rs` → `symver_exports_event.rs`.
fn snippet_name(src: &Path, file: &Path) -> String {
    // NOTE(unwrap): `file` was found by walking `src`.
    let relative = file
        .strip_prefix(src)
        .expect("under src/")
        .with_extension("");
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    format!("symver_{}.rs", parts.join("_"))
}

/// The `#[unsafe(no_mangle)]` items under `src/` must be the table, and every file that
/// exports must include its `.symver` file. Returns the exported names by snippet name.
fn check_sources(
    src: &Path,
    table: &BTreeMap<(u32, u32), Vec<String>>,
) -> BTreeMap<String, Vec<String>> {
    let mut files = Vec::new();
    collect_rs(src, &mut files);
    let mut exported: BTreeMap<String, String> = BTreeMap::new();
    let mut by_file: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let text = read(file);
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
            let name = item
                .split_once(" fn ")
                .map(|(_, rest)| {
                    rest.chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| panic!("{at}: `#[unsafe(no_mangle)]` must precede `fn name(`"));
            if let Some(previous) = exported.insert(name.clone(), at.clone()) {
                panic!("{at}: `{name}` is already exported at {previous}");
            }
            by_file
                .entry(snippet_name(src, file))
                .or_default()
                .push(name);
        }
        if by_file.contains_key(&snippet_name(src, file)) {
            let include = format!(
                "include!(concat!(env!(\"OUT_DIR\"),\"/{}\"));",
                snippet_name(src, file)
            );
            // Compare without whitespace: rustfmt may wrap the line.
            let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            assert!(
                compact.contains(&include),
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
        "entry points missing from {SYMBOLS} (add `NODE name` or remove the export): {unlisted:?}"
    );
    assert!(
        undefined.is_empty(),
        "symbols of {SYMBOLS} with no entry point in src/: {undefined:?}"
    );
    by_file
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

/// The Rust place of a (possibly dotted) C field: members of rdma_addr's anonymous unions
/// are reached through the union the mirror names (`src_sin` → `src.src_sin`).
fn rust_field(owner: &str, field: &str) -> String {
    if owner == "rdma_addr" {
        for side in ["src", "dst"] {
            if field.starts_with(&format!("{side}_")) {
                return format!("{side}.{field}");
            }
        }
    }
    field.to_string()
}

fn number(text: &str, at: &str) -> u64 {
    text.parse()
        .unwrap_or_else(|_| panic!("{at}: `{text}` is not a number"))
}

/// `key=value` pairs of a line, tolerating the spaces printf puts after `=`.
fn pairs(line: &str) -> Vec<(String, String)> {
    let mut normal = line.to_string();
    while normal.contains("= ") {
        normal = normal.replace("= ", "=");
    }
    normal
        .split_whitespace()
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn layout_asserts(path: &Path) -> String {
    let mut out = String::from("// Generated by build.rs from abi/layout.txt. Do not edit.\n");
    let mut owner: Option<String> = None;
    let mut count = 0usize;
    for (index, line) in read(path).lines().enumerate() {
        let at = format!("{LAYOUT}:{}", index + 1);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut checks = Vec::new();
        if let Some(rest) = line.strip_prefix("struct ") {
            let (ty, attrs) = rest
                .split_once(':')
                .unwrap_or_else(|| panic!("{at}: no `:`"));
            for (key, value) in pairs(attrs) {
                let n = number(&value, &at);
                checks.push(match key.as_str() {
                    "sizeof" => format!("core::mem::size_of::<crate::abi::{ty}>() == {n}"),
                    "align" => format!("core::mem::align_of::<crate::abi::{ty}>() == {n}"),
                    other => panic!("{at}: unknown attribute `{other}`"),
                });
            }
            owner = Some(ty.to_string());
        } else if line.starts_with(' ') {
            let ty = owner
                .as_deref()
                .unwrap_or_else(|| panic!("{at}: field outside a struct"));
            let c_field = line
                .split_whitespace()
                .next()
                .unwrap_or_else(|| panic!("{at}: empty field"));
            let field = rust_field(ty, c_field);
            for (key, value) in pairs(line) {
                let n = number(&value, &at);
                checks.push(match key.as_str() {
                    "off" => format!("core::mem::offset_of!(crate::abi::{ty}, {field}) == {n}"),
                    "size" => format!("verbs_abi::field_size!(crate::abi::{ty}, {field}) == {n}"),
                    other => panic!("{at}: unknown attribute `{other}`"),
                });
            }
            assert!(checks.len() == 2, "{at}: expected `off=` and `size=`");
        } else {
            panic!("{at}: unrecognised line `{line}`");
        }
        for cond in checks {
            out.push_str(&format!(
                "const _: () = assert!({cond}, {:?});\n",
                format!("{at}: {cond} in rdma-core v44")
            ));
            count += 1;
        }
    }
    out.push_str("/// How many layout assertions abi/layout.txt produced.\n#[cfg(test)]\n");
    out.push_str(&format!(
        "pub(crate) const LAYOUT_ASSERTIONS: usize = {count};\n"
    ));
    out
}
