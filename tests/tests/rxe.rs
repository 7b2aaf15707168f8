//! The interop tier: xroce against Linux rxe. Runs `cargo xtask interop` (Debian's kernel
//! with Soft-RoCE in a VM, the Debian verbs programs against xroce in both directions,
//! every packet's ICRC checked). It boots a VM (about a minute, plus building its image
//! from Debian packages on a first run), so it is `#[ignore]`d; `cargo xtask test` runs
//! it, and `cargo xtask test --no-interop` skips it by its name (`against_linux_rxe`).

use std::path::Path;
use std::process::Command;

#[test]
#[ignore = "interop: boots Linux rxe in a VM (cargo xtask test runs it)"]
fn xroce_against_linux_rxe() {
    xroce_lab::require_root();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["run", "--quiet", "-p", "xroce-interop", "--"])
        .current_dir(root)
        .status()
        .expect("running xroce-interop");
    assert!(
        status.success(),
        "cargo xtask interop failed ({status}); its table above says which check"
    );
}
