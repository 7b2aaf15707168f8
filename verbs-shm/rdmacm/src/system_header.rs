//! Re-measures every layout the crate asserts (`abi/layout.txt`) and every constant it
//! declares (`abi::CONSTANTS`) with a C program compiled against the system's
//! `<rdma/rdma_cma.h>`.
//!
//! The compile-time assertions prove the mirrors match `abi/layout.txt`; this test proves
//! the file matches the real header, closing the chain header → file → Rust. It needs a C
//! compiler and Debian's `librdmacm-dev`, hence `#[ignore]` (`cargo xtask test` installs
//! them and runs it). It is a unit test because the mirrors are private to the cdylib.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const HEADER: &str = "/usr/include/rdma/rdma_cma.h";

/// One value to measure: a C expression and what the crate says it is.
struct Check {
    label: String,
    c_expr: String,
    expected: i64,
}

fn pairs(line: &str) -> Vec<(String, i64)> {
    let mut normal = line.to_string();
    while normal.contains("= ") {
        normal = normal.replace("= ", "=");
    }
    normal
        .split_whitespace()
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().expect("a number")))
        .collect()
}

/// The checks of `abi/layout.txt`, in build.rs's grammar, as C expressions.
fn layout_checks(path: &Path) -> Vec<Check> {
    let text = std::fs::read_to_string(path).expect("reading abi/layout.txt");
    let mut checks = Vec::new();
    let mut owner = String::new();
    for (index, line) in text.lines().enumerate() {
        let at = format!("layout.txt:{}", index + 1);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix("struct ") {
            let (name, attrs) = rest.split_once(':').expect("`struct T: …`");
            owner = format!("struct {name}");
            for (key, value) in pairs(attrs) {
                let c_expr = match key.as_str() {
                    "sizeof" => format!("sizeof({owner})"),
                    "align" => format!("_Alignof({owner})"),
                    other => panic!("{at}: unknown attribute {other}"),
                };
                checks.push(Check {
                    label: format!("{at} {key}"),
                    c_expr,
                    expected: value,
                });
            }
        } else {
            let field = line.split_whitespace().next().expect("a field");
            for (key, value) in pairs(line) {
                let c_expr = match key.as_str() {
                    "off" => format!("offsetof({owner}, {field})"),
                    "size" => format!("sizeof((({owner} *)0)->{field})"),
                    other => panic!("{at}: unknown attribute {other}"),
                };
                checks.push(Check {
                    label: format!("{at} {key}"),
                    c_expr,
                    expected: value,
                });
            }
        }
    }
    checks
}

#[test]
#[ignore = "needs Debian's librdmacm-dev and a C compiler (cargo xtask test installs and runs it)"]
fn layouts_and_constants_match_the_system_rdma_cma_h() {
    assert!(
        Path::new(HEADER).exists(),
        "{HEADER} is missing: install librdmacm-dev (cargo xtask deps)"
    );
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut checks = layout_checks(&manifest.join("abi/layout.txt"));
    let from_layout = checks.len();
    checks.extend(crate::abi::CONSTANTS.iter().map(|&(name, value)| Check {
        label: format!("constant {name}"),
        c_expr: name.to_string(),
        expected: value,
    }));

    let mut program = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <rdma/rdma_cma.h>\n\
         #include <infiniband/ib.h>\nint main(void) {\n",
    );
    for (i, check) in checks.iter().enumerate() {
        writeln!(
            program,
            "  printf(\"%d %lld\\n\", {i}, (long long)({}));",
            check.c_expr
        )
        .unwrap();
    }
    program.push_str("  return 0;\n}\n");

    let dir = std::env::temp_dir().join(format!("rdmacm-header-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("measure.c");
    let binary = dir.join("measure");
    std::fs::write(&source, program).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let compiled = Command::new(&cc)
        .arg("-o")
        .arg(&binary)
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
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
        let value: i64 = value.parse().unwrap();
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
    assert_eq!(
        from_layout, 202,
        "every line of abi/layout.txt was measured"
    );
    assert_eq!(
        checks.len() - from_layout,
        39,
        "every constant was measured"
    );
}
