//! Open MPI jobs with `--mca pml ucx` across the lab's two hosts.
//!
//! `mpirun` runs in host `a`'s namespace and reaches the hosts through its rsh launcher
//! (`--mca plm_rsh_agent`), which here is `netns-agent.sh`: the host names are the lab's
//! namespace names and the agent runs Open MPI's daemon (`orted`) in that namespace with
//! `ip netns exec`, as ssh would on another machine; the daemons call `mpirun` back over
//! the lab's link. The ranks load the drop-in `libibverbs.so.1` (`-x LD_LIBRARY_PATH`) and
//! UCX is given the verbs transports only (`UCX_TLS`), so that every message between two
//! ranks, in the same namespace or not, goes through xroce: both namespaces are on one
//! machine with one host name, and UCX would otherwise join ranks through shared memory.
//! `UCX_LOG_LEVEL=info` makes each rank print what UCX selected (`ep_cfg` lines).
//!
//! The program (`mpi_check.c`, built with `mpicc`) runs an allreduce, a ping-pong between
//! the first and the last rank at 8 B to 1 MiB (UCX's eager and rendezvous protocols) and
//! an all-to-all, each checking every element it receives.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use xroce_lab::{Lab, Side};

use crate::perftest::selected;
use crate::process;

/// The MPI program.
const PROGRAM: &str = include_str!("mpi_check.c");
/// mpirun's rsh agent.
const AGENT: &str = include_str!("netns-agent.sh");
/// What the program prints when every check passed.
const PASSED: &str = "all checks passed";

/// One job.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Job {
    /// Its name in reports.
    pub name: &'static str,
    /// Ranks on each host.
    pub ranks_per_host: u32,
    /// `UCX_TLS`.
    pub tls: &'static str,
    /// The transport every endpoint to another rank must use.
    pub transport: &'static str,
}

/// The jobs: 2 and 4 ranks over RC (UD wires RC up), and 2 ranks over UD alone.
pub(crate) const JOBS: &[Job] = &[
    Job {
        name: "2 ranks, rc_verbs",
        ranks_per_host: 1,
        tls: "self,rc_verbs,ud_verbs",
        transport: "rc_verbs",
    },
    Job {
        name: "4 ranks, rc_verbs",
        ranks_per_host: 2,
        tls: "self,rc_verbs,ud_verbs",
        transport: "rc_verbs",
    },
    Job {
        name: "2 ranks, ud_verbs",
        ranks_per_host: 1,
        tls: "self,ud_verbs",
        transport: "ud_verbs",
    },
];

/// What a job did.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The job.
    pub job: Job,
    /// The program's check lines (rank 0's), or why it failed.
    pub result: Result<Vec<String>, String>,
    /// What UCX selected, over all ranks (`ep_cfg` lines without repeats).
    pub selected: Vec<String>,
}

/// The built program and the agent, in `work`.
#[derive(Debug)]
pub(crate) struct Prepared {
    program: PathBuf,
    agent: PathBuf,
}

/// Writes the agent and builds the program with `mpicc` in `work`.
pub(crate) fn prepare(work: &Path) -> Result<Prepared> {
    let source = work.join("mpi_check.c");
    std::fs::write(&source, PROGRAM).with_context(|| format!("writing {}", source.display()))?;
    let program = work.join("mpi_check");
    let out = Command::new("mpicc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .context("running mpicc (Debian's libopenmpi-dev)")?;
    if !out.status.success() {
        bail!(
            "mpicc failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let agent = work.join("netns-agent.sh");
    std::fs::write(&agent, AGENT).with_context(|| format!("writing {}", agent.display()))?;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", agent.display()))?;
    Ok(Prepared { program, agent })
}

/// Runs `job` with `mpirun` in host `a`'s namespace.
pub(crate) fn run(
    lab: &Lab,
    lib: &Path,
    work: &Path,
    prepared: &Prepared,
    job: &Job,
    timeout: Duration,
) -> Outcome {
    let a = &lab.host(Side::A).netns;
    let b = &lab.host(Side::B).netns;
    let hosts = format!("{a}:{n},{b}:{n}", n = job.ranks_per_host);
    let ranks = (2 * job.ranks_per_host).to_string();
    let agent = prepared.agent.display().to_string();
    let program = prepared.program.display().to_string();
    let tls = format!("UCX_TLS={}", job.tls);
    let argv = [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        ranks.as_str(),
        "--host",
        hosts.as_str(),
        "--mca",
        "plm_rsh_agent",
        agent.as_str(),
        "--mca",
        "pml",
        "ucx",
        // Open MPI's own verbs and libfabric transports stay out of it: UCX is the one
        // on xroce.
        "--mca",
        "btl",
        "^openib,ofi",
        // Open MPI 4.1's daemon (`orted`) maps hwloc's topology into a shared segment at an
        // address it guesses from its own memory map ("the biggest hole"); now and then the
        // guess lands on its stack and `orted` dies with SIGSEGV in
        // `hwloc_shmem_topology_write` before any rank starts. Without the segment each
        // process reads the topology itself, which is what happens on most clusters anyway.
        "--mca",
        "rtc_hwloc_vmhole",
        "none",
        "-x",
        "LD_LIBRARY_PATH",
        "-x",
        tls.as_str(),
        "-x",
        "UCX_LOG_LEVEL=info",
        program.as_str(),
    ];
    let mut cmd = lab.command(Side::A, &argv);
    cmd.env("LD_LIBRARY_PATH", lib);
    // Session directories: mpirun's and each host's of its own (see netns-agent.sh), in a
    // short path (they hold PMIx's Unix sockets), made for this job and removed after it.
    let sessions = PathBuf::from(format!("/tmp/xroce-mpi-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&sessions);
    let launcher = sessions.join("mpirun");
    if let Err(e) = std::fs::create_dir_all(&launcher) {
        return Outcome {
            job: *job,
            result: Err(format!("creating {}: {e}", launcher.display())),
            selected: Vec::new(),
        };
    }
    cmd.env("TMPDIR", &launcher);
    cmd.env("XROCE_MPI_SESSIONS", &sessions);
    let log = work.join(format!("mpi-{}ranks-{}.log", ranks, job.transport));
    let result = process::run(&mut cmd, &log, timeout).map_err(|e| format!("{e:#}"));
    let _ = std::fs::remove_dir_all(&sessions);
    let (result, selected) = match result {
        Err(e) => (Err(e), Vec::new()),
        Ok(done) => {
            let selected = selected(&done.output);
            let checks: Vec<String> = done
                .output
                .lines()
                .filter(|l| {
                    ["allreduce:", "ping-pong:", "all-to-all:", PASSED]
                        .iter()
                        .any(|p| l.starts_with(p))
                })
                .map(str::to_owned)
                .collect();
            let result = if !done.success() || !checks.iter().any(|l| l == PASSED) {
                Err(format!(
                    "mpirun ended {}: {} (log: {})",
                    done.ending(),
                    process::tail(&done.output, 4),
                    log.display()
                ))
            } else if let Some(other) = foreign(&selected, job.transport) {
                Err(format!("UCX selected {other}, not {} alone", job.transport))
            } else {
                Ok(checks)
            };
            (result, selected)
        }
    };
    Outcome {
        job: *job,
        result,
        selected,
    }
}

/// An endpoint configuration that reaches another rank through something else than
/// `transport` on xroce's device (`self` is a rank's endpoint to itself).
fn foreign(selected: &[String], transport: &str) -> Option<String> {
    let own = format!("{transport}/{}:1", crate::DEVICE);
    selected
        .iter()
        .flat_map(|line| {
            // `tag(self/memory0 rc_verbs/xroce0:1) …`: each lane is `transport/device`.
            line.split(|c: char| c == '(' || c == ')' || c.is_whitespace())
                .filter(|w| w.contains('/'))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .find(|lane| lane != &own && !lane.starts_with("self/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_expected_transport_may_reach_other_ranks() {
        let rc = vec![
            "tag(self/memory0 rc_verbs/xroce0:1)".to_owned(),
            "tag(rc_verbs/xroce0:1)".to_owned(),
        ];
        assert_eq!(foreign(&rc, "rc_verbs"), None);
        assert_eq!(
            foreign(&rc, "ud_verbs").as_deref(),
            Some("rc_verbs/xroce0:1")
        );
        let shm = vec!["tag(self/memory0 posix/memory cma/memory)".to_owned()];
        assert_eq!(foreign(&shm, "rc_verbs").as_deref(), Some("posix/memory"));
    }
}
