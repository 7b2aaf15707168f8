//! Compiles the XDP program (`xdp/xroce_xdp.c`) with `clang -target bpf` into `OUT_DIR`, so
//! that `src/lib.rs` can embed the object with `include_bytes!`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = "xdp/xroce_xdp.c";
const HEADER: &str = "xdp/xroce_xdp.h";
const OBJECT: &str = "xroce_xdp.o";

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed={HEADER}");
    println!("cargo:rerun-if-env-changed=XROCE_BPF_CLANG");

    // NOTE(unwrap): cargo always sets CARGO_MANIFEST_DIR and OUT_DIR for build scripts.
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let clang = find_clang().unwrap_or_else(|| {
        panic!(
            "\n\nxroce-ebpf: no clang found to compile the XDP program ({SOURCE}).\n  \
             Install it with: apt-get install -y clang llvm\n  \
             or run:          cargo xtask deps\n  \
             (or point XROCE_BPF_CLANG at a clang binary)\n\n"
        )
    });

    let mut cmd = Command::new(&clang);
    cmd.args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"])
        .arg("-I")
        .arg(manifest_dir.join("xdp"));
    // `-target bpf` does not search the multiarch include directory where Debian keeps
    // <asm/types.h>; gcc-multilib's /usr/include/asm covers it too, this does not need it.
    if let Some(dir) = multiarch_include_dir() {
        cmd.arg("-I").arg(dir);
    }
    cmd.arg("-c")
        .arg(manifest_dir.join(SOURCE))
        .arg("-o")
        .arg(out_dir.join(OBJECT));

    let output = cmd.output().unwrap_or_else(|e| {
        panic!("xroce-ebpf: running {}: {e}", clang.display());
    });
    if !output.status.success() {
        panic!(
            "\n\nxroce-ebpf: {} failed to compile {SOURCE} ({}):\n{}\n\
             If kernel headers are missing: apt-get install -y linux-libc-dev gcc-multilib\n\n",
            clang.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// `XROCE_BPF_CLANG`, else `clang` on `PATH`, else the newest versioned `clang-N`.
fn find_clang() -> Option<PathBuf> {
    if let Some(explicit) = env::var_os("XROCE_BPF_CLANG") {
        return Some(PathBuf::from(explicit));
    }
    let candidates =
        std::iter::once("clang".to_owned()).chain((11..=21).rev().map(|v| format!("clang-{v}")));
    for name in candidates {
        if let Some(path) = on_path(&name) {
            return Some(path);
        }
    }
    None
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn multiarch_include_dir() -> Option<&'static Path> {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").ok()?;
    let dir: &'static str = match arch.as_str() {
        "x86_64" => "/usr/include/x86_64-linux-gnu",
        "aarch64" => "/usr/include/aarch64-linux-gnu",
        "riscv64" => "/usr/include/riscv64-linux-gnu",
        "powerpc64" => "/usr/include/powerpc64le-linux-gnu",
        "s390x" => "/usr/include/s390x-linux-gnu",
        _ => return None,
    };
    let dir = Path::new(dir);
    dir.is_dir().then_some(dir)
}
