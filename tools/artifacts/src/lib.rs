//! Building the project's own programs and libraries, and finding what cargo built.
//!
//! The tools, the test harnesses and `cargo xtask` start the daemon, the examples and
//! unmodified verbs programs on the drop-in libraries; none of these are linked into the
//! code that runs them. [`build`] runs the cargo that runs us (a no-op when up to date) with
//! `--message-format=json-render-diagnostics` and reads cargo's own report of its artifacts
//! with `cargo_metadata`, so a path never depends on the target directory's layout.
//! [`install_drop_in`] puts the drop-in `libibverbs.so.1` and `librdmacm.so.1` under their
//! sonames where `LD_LIBRARY_PATH` can find them.
//!
//! This crate only builds and copies files: it runs no program it built.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cargo_metadata::{Message, TargetKind};

/// A cargo profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `dev`: what `cargo build` makes.
    Debug,
    /// `release`: what the daemon runs with in the demo, the bench and in production.
    Release,
}

impl Profile {
    /// The profile of the code calling this: tests built in debug get debug programs.
    pub fn of_this_build() -> Profile {
        if cfg!(debug_assertions) {
            Profile::Debug
        } else {
            Profile::Release
        }
    }
}

/// One target of a package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// `--bin NAME`.
    Bin(&'a str),
    /// `--example NAME`.
    Example(&'a str),
    /// `--lib`: the package's library, whose shared object (`cdylib`) is wanted.
    Cdylib(&'a str),
}

impl Target<'_> {
    fn name(&self) -> &str {
        match self {
            Target::Bin(n) | Target::Example(n) | Target::Cdylib(n) => n,
        }
    }
}

/// What went wrong building an artifact.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Cargo could not be started.
    #[error("running {cargo}: {source}")]
    Spawn {
        /// The cargo that was run.
        cargo: String,
        /// Why it could not run.
        source: std::io::Error,
    },
    /// Cargo failed; its diagnostics went to stderr.
    #[error(
        "`cargo build -p {package} {target}` failed ({status}); its errors are above. A missing C \
         library or clang is installed by `cargo xtask deps`"
    )]
    Failed {
        /// The package.
        package: String,
        /// The target, as cargo's option.
        target: String,
        /// Cargo's exit status.
        status: std::process::ExitStatus,
    },
    /// Cargo's report could not be read.
    #[error("reading cargo's report: {0}")]
    Report(std::io::Error),
    /// Cargo built, but named no file for the target.
    #[error("cargo reported no {what} for {target} of package {package}")]
    NotReported {
        /// The package.
        package: String,
        /// The target, as cargo's option.
        target: String,
        /// What was looked for.
        what: &'static str,
    },
    /// Installing a built file.
    #[error("installing {path}: {source}")]
    Install {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The workspace's manifest: cargo runs on it whatever the caller's directory.
fn workspace_manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml")
}

/// Builds `target` of `package` with `profile` and returns the file cargo reports for it:
/// the executable of a binary or an example, the `.so` of a cdylib.
pub fn build(package: &str, target: Target<'_>, profile: Profile) -> Result<PathBuf, BuildError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let option = match target {
        Target::Bin(n) => format!("--bin {n}"),
        Target::Example(n) => format!("--example {n}"),
        Target::Cdylib(_) => "--lib".to_owned(),
    };
    let mut cmd = Command::new(&cargo);
    cmd.arg("build")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(workspace_manifest())
        .args(["-p", package])
        .args(option.split(' '))
        .arg("--message-format=json-render-diagnostics");
    if profile == Profile::Release {
        cmd.arg("--release");
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|source| BuildError::Spawn {
            cargo: cargo.clone(),
            source,
        })?;
    // NOTE(unwrap): stdout was piped just above.
    let stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut found = None;
    for message in Message::parse_stream(stdout) {
        let Message::CompilerArtifact(artifact) = message.map_err(BuildError::Report)? else {
            continue;
        };
        if artifact.target.name != target.name() {
            continue;
        }
        found = match target {
            Target::Bin(_) | Target::Example(_) => artifact.executable.map(Into::into),
            Target::Cdylib(_) if artifact.target.kind.contains(&TargetKind::CDyLib) => artifact
                .filenames
                .into_iter()
                .find(|f| f.extension() == Some("so"))
                .map(Into::into),
            Target::Cdylib(_) => None,
        }
        .or(found);
    }
    let status = child.wait().map_err(BuildError::Report)?;
    if !status.success() {
        return Err(BuildError::Failed {
            package: package.into(),
            target: option,
            status,
        });
    }
    found.ok_or(BuildError::NotReported {
        package: package.into(),
        target: option,
        what: match target {
            Target::Cdylib(_) => "shared object",
            _ => "executable",
        },
    })
}

/// The soname of the drop-in verbs library.
pub const IBVERBS_SONAME: &str = "libibverbs.so.1";

/// The soname of the drop-in rdma_cm library.
pub const RDMACM_SONAME: &str = "librdmacm.so.1";

/// Builds the drop-in `libibverbs.so.1` and `librdmacm.so.1` (release) and installs both in
/// `<target>/xroce/lib`, each with its development link (`libibverbs.so`, `librdmacm.so`);
/// returns that directory and the installed `libibverbs.so.1` (`librdmacm.so.1` is beside
/// it, [`RDMACM_SONAME`]). Each file is replaced by a rename, so a process that has the old
/// one mapped keeps it intact.
pub fn install_drop_in() -> Result<(PathBuf, PathBuf), BuildError> {
    let ibverbs = build("xroce-ibverbs", Target::Cdylib("ibverbs"), Profile::Release)?;
    let rdmacm = build("xroce-rdmacm", Target::Cdylib("rdmacm"), Profile::Release)?;
    // `<target>/release/libibverbs.so` -> `<target>`.
    let target = ibverbs
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| BuildError::Install {
            path: ibverbs.clone(),
            source: std::io::Error::other("the artifact is not in <target>/release"),
        })?;
    let lib = target.join("xroce").join("lib");
    std::fs::create_dir_all(&lib).map_err(install_error(&lib))?;
    let installed = install(&ibverbs, &lib, IBVERBS_SONAME, "libibverbs.so")?;
    install(&rdmacm, &lib, RDMACM_SONAME, "librdmacm.so")?;
    Ok((lib, installed))
}

/// A `BuildError::Install` about `path`.
fn install_error(path: &Path) -> impl FnOnce(std::io::Error) -> BuildError + use<> {
    let path = path.to_owned();
    move |source| BuildError::Install { path, source }
}

/// Copies `artifact` into `lib` as `soname` (by a rename) with the `link` to it; returns
/// the installed file.
fn install(artifact: &Path, lib: &Path, soname: &str, link: &str) -> Result<PathBuf, BuildError> {
    let installed = lib.join(soname);
    let staging = lib.join(format!("{soname}.new"));
    std::fs::copy(artifact, &staging).map_err(install_error(&staging))?;
    std::fs::rename(&staging, &installed).map_err(install_error(&installed))?;
    let link = lib.join(link);
    match std::fs::remove_file(&link) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(install_error(&link)(e)),
    }
    std::os::unix::fs::symlink(soname, &link).map_err(install_error(&link))?;
    Ok(installed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_manifest_is_found() {
        let text = std::fs::read_to_string(workspace_manifest()).unwrap();
        assert!(text.contains("[workspace]"));
    }

    #[test]
    fn a_missing_target_is_a_build_error_that_names_it() {
        let err = build(
            "xroce-artifacts",
            Target::Bin("no-such-bin"),
            Profile::Debug,
        )
        .expect_err("there is no such binary");
        assert!(
            err.to_string().contains("--bin no-such-bin"),
            "the error names the target: {err}"
        );
    }
}
