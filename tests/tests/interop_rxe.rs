//! xroce against Linux rxe: runs `cargo xtask interop` (Debian's kernel with Soft-RoCE in a
//! VM, the Debian verbs programs against xroce in both directions, every packet's ICRC
//! checked). It boots a VM and takes about a minute on an emulated CPU, so it runs only
//! with `XROCE_INTEROP=1`; `XROCE_INTEROP_ONLY=word,…` passes `--only` to run a subset.

use std::path::Path;
use std::process::Command;

use xroce_lab::require_root;

#[test]
fn xroce_against_linux_rxe() {
    if std::env::var("XROCE_INTEROP").as_deref() != Ok("1") {
        eprintln!(
            "skipped: xroce_against_linux_rxe boots Linux rxe in a VM (about a minute); run it \
             with XROCE_INTEROP=1 cargo test -p xroce-tests --test interop_rxe, or run \
             cargo xtask interop"
        );
        return;
    }
    if !require_root("xroce_against_linux_rxe") {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["run", "--quiet", "-p", "xtask", "--", "interop"])
        .current_dir(root);
    if let Ok(only) = std::env::var("XROCE_INTEROP_ONLY") {
        cmd.args(["--only", &only]);
    }
    let status = cmd.status().expect("running cargo xtask interop");
    assert!(
        status.success(),
        "cargo xtask interop failed ({status}); its table above says which check"
    );
}
