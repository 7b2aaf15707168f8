//! Re-measures every layout the crate asserts, and every enumerator it declares, with a C
//! program compiled against the system's `<infiniband/verbs.h>`.
//!
//! The compile-time assertions prove the Rust mirrors match `layout.txt` and
//! `layout-extra.txt`; this test proves those files match the real header, so the chain
//! header → files → Rust is closed. It needs a C compiler and Debian's `libibverbs-dev`.
//! It is `#[ignore]`d for that reason: `cargo xtask test` installs them and runs it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const HEADER: &str = "/usr/include/infiniband/verbs.h";

/// One value to measure: a C expression and what the layout files say it is.
struct Check {
    label: String,
    c_expr: String,
    expected: u64,
}

fn number(text: &str) -> u64 {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).expect("hex number"),
        None => text.parse().expect("decimal number"),
    }
}

fn pairs(line: &str) -> Vec<(String, String)> {
    let mut normal = line.to_string();
    while normal.contains("= ") {
        normal = normal.replace("= ", "=");
    }
    normal
        .split_whitespace()
        .filter_map(|t| {
            t.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// The same line grammar as build.rs, producing C expressions instead of Rust assertions.
fn checks_from(path: &Path) -> Vec<Check> {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(path).expect("reading a layout file");
    let mut checks = Vec::new();
    let mut owner: Option<String> = None;
    let mut negative_offsets = false;
    for (index, line) in text.lines().enumerate() {
        let at = format!("{name}:{}", index + 1);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if !line.starts_with(' ') {
            owner = None;
            negative_offsets = false;
        }
        if line.starts_with("struct ") || line.starts_with("union ") {
            let (c_type, attrs) = line.split_once(':').unwrap();
            for (key, value) in pairs(attrs) {
                let c_expr = match key.as_str() {
                    "sizeof" => format!("sizeof({c_type})"),
                    "align" => format!("_Alignof({c_type})"),
                    other => panic!("{at}: unknown attribute {other}"),
                };
                checks.push(Check {
                    label: format!("{at} {key}"),
                    c_expr,
                    expected: number(&value),
                });
            }
            owner = Some(c_type.to_string());
        } else if line.starts_with(' ') && negative_offsets {
            let mut tokens = line.split_whitespace();
            let field = tokens.next().unwrap();
            let delta = tokens.next().unwrap().strip_prefix("ctx-").unwrap();
            checks.push(Check {
                label: format!("{at} ctx-"),
                c_expr: format!(
                    "offsetof(struct verbs_context, context) - offsetof(struct verbs_context, {field})"
                ),
                expected: number(delta),
            });
        } else if line.starts_with(' ') {
            let c_type = owner.clone().unwrap();
            let field = line.split_whitespace().next().unwrap();
            for (key, value) in pairs(line) {
                let c_expr = match key.as_str() {
                    "off" => format!("offsetof({c_type}, {field})"),
                    "size" => format!("sizeof((({c_type} *)0)->{field})"),
                    other => panic!("{at}: unknown attribute {other}"),
                };
                checks.push(Check {
                    label: format!("{at} {key}"),
                    c_expr,
                    expected: number(&value),
                });
            }
        } else if line.starts_with("verbs_context: offsetof(context)=") {
            checks.push(Check {
                label: format!("{at} offsetof"),
                c_expr: "offsetof(struct verbs_context, context)".into(),
                expected: number(&pairs(line)[0].1),
            });
            negative_offsets = true;
        } else if let Some(rest) = line.strip_prefix("enums:") {
            for (key, value) in pairs(rest) {
                checks.push(Check {
                    label: format!("{at} {key}"),
                    c_expr: key,
                    expected: number(&value),
                });
            }
        } else if line.starts_with("pthread_") {
            for (key, value) in pairs(line) {
                checks.push(Check {
                    label: format!("{at} {key}"),
                    c_expr: format!("sizeof({key})"),
                    expected: number(&value),
                });
            }
        } else if line.starts_with("__VERBS_ABI_IS_EXTENDED=") {
            checks.push(Check {
                label: format!("{at} __VERBS_ABI_IS_EXTENDED"),
                c_expr: "(uintptr_t)__VERBS_ABI_IS_EXTENDED".into(),
                expected: number(&pairs(line)[0].1),
            });
        } else {
            panic!("{at}: unrecognised line {line}");
        }
    }
    checks
}

/// Every enumerator and constant of the crate, with the Rust value.
fn constant_checks() -> Vec<Check> {
    let mut checks: Vec<Check> = verbs_abi::ENUMERATORS
        .iter()
        .map(|&(name, value)| Check {
            label: format!("enumerator {name}"),
            c_expr: name.to_string(),
            expected: value as u64,
        })
        .collect();
    let extra: [(&str, u64); 5] = [
        (
            "IBV_ACCESS_OPTIONAL_FIRST",
            verbs_abi::IBV_ACCESS_OPTIONAL_FIRST.into(),
        ),
        (
            "IBV_ACCESS_OPTIONAL_RANGE",
            verbs_abi::IBV_ACCESS_OPTIONAL_RANGE.into(),
        ),
        ("IBV_SYSFS_NAME_MAX", verbs_abi::IBV_SYSFS_NAME_MAX as u64),
        ("IBV_SYSFS_PATH_MAX", verbs_abi::IBV_SYSFS_PATH_MAX as u64),
        (
            "(uintptr_t)__VERBS_ABI_IS_EXTENDED",
            verbs_abi::__VERBS_ABI_IS_EXTENDED as u64,
        ),
    ];
    for (c_expr, expected) in extra {
        checks.push(Check {
            label: format!("constant {c_expr}"),
            c_expr: c_expr.into(),
            expected,
        });
    }
    checks
}

#[test]
#[ignore = "needs Debian's libibverbs-dev (cargo xtask test installs and runs it)"]
fn layouts_and_enumerators_match_the_system_verbs_h() {
    if !Path::new(HEADER).exists() {
        panic!("{HEADER} is missing: install libibverbs-dev (cargo xtask deps)");
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut checks = checks_from(&manifest.join("layout.txt"));
    let from_layout = checks.len();
    checks.extend(checks_from(&manifest.join("layout-extra.txt")));
    checks.extend(constant_checks());

    let mut program = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <stdint.h>\n\
         #include <infiniband/verbs.h>\nint main(void) {\n",
    );
    for (i, check) in checks.iter().enumerate() {
        writeln!(
            program,
            "  printf(\"%d %llu\\n\", {i}, (unsigned long long)({}));",
            check.c_expr
        )
        .unwrap();
    }
    program.push_str("  return 0;\n}\n");

    let dir = std::env::temp_dir().join(format!("verbs-abi-header-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("measure.c");
    let binary = dir.join("measure");
    std::fs::write(&source, program).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let compiled = Command::new(&cc)
        .arg("-o")
        .arg(&binary)
        .arg(&source)
        .output();
    let compiled = compiled.unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(
        compiled.status.success(),
        "the measuring program did not compile against {HEADER}:\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let run = Command::new(&binary).output().unwrap();
    assert!(run.status.success());
    std::fs::remove_dir_all(&dir).unwrap();

    let stdout = String::from_utf8(run.stdout).unwrap();
    let mut mismatches = Vec::new();
    let mut measured = 0;
    for line in stdout.lines() {
        let (index, value) = line.split_once(' ').unwrap();
        let check = &checks[index.parse::<usize>().unwrap()];
        let value: u64 = value.parse().unwrap();
        measured += 1;
        if value != check.expected {
            mismatches.push(format!(
                "{}: `{}` is {value} in {HEADER}, {} in the crate",
                check.label, check.c_expr, check.expected
            ));
        }
    }
    assert_eq!(measured, checks.len(), "the program printed every value");
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(from_layout > 400, "layout.txt yielded {from_layout} checks");
    println!(
        "{} values measured against {HEADER} ({} enumerators/constants), all equal",
        checks.len(),
        constant_checks().len()
    );
}
