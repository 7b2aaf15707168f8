//! The impairment router of `xroce-impair` as a process of its own (a release build, so
//! that forwarding keeps up with two daemons even when the tests are a debug build), in the
//! router namespace of a lab.
//!
//! The process is stopped (SIGTERM) when the [`ImpairProcess`] is stopped or dropped, and
//! dies with the test process even when the test is killed.

use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use xroce_artifacts::{Profile, Target};
use xroce_lab::Lab;

use crate::{ImpairCounters, Impairment};

/// The path of a release build of `xroce-impair`, built once per process.
pub fn xroce_impair() -> io::Result<PathBuf> {
    static PATH: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PATH.get_or_init(|| {
        xroce_artifacts::build(
            "xroce-impair",
            Target::Bin("xroce-impair"),
            Profile::Release,
        )
        .map_err(|e| e.to_string())
    })
    .clone()
    .map_err(io::Error::other)
}

/// A running `xroce-impair` on a lab's router.
#[derive(Debug)]
pub struct ImpairProcess {
    child: Option<Child>,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl ImpairProcess {
    /// Starts impairing the path between the hosts of `lab` (which needs a router) and
    /// returns once every RoCEv2 frame between them goes through the forwarder.
    pub fn start(lab: &Lab, impairment: &Impairment) -> io::Result<ImpairProcess> {
        let router = lab
            .router
            .as_ref()
            .ok_or_else(|| io::Error::other("the lab has no router"))?;
        if !impairment.rate_bps.is_multiple_of(1_000_000)
            || !impairment.queue_bytes.is_multiple_of(1024)
        {
            return Err(io::Error::other(
                "xroce-impair takes a bottleneck's rate in whole Mbit/s and its queue in whole KiB",
            ));
        }
        let bin = xroce_impair()?;
        let dir = std::env::temp_dir();
        let stdout = dir.join(format!("xroce-impair-{}.out", router.netns));
        let stderr = dir.join(format!("xroce-impair-{}.err", router.netns));
        let mut cmd = Command::new(bin);
        cmd.args(["--netns", &router.netns])
            .args(["--toward-a", &router.toward_a])
            .args(["--toward-b", &router.toward_b])
            .args(["--loss", &(impairment.loss * 100.0).to_string()])
            .args(["--loss-burst", &impairment.loss_burst.to_string()])
            .args([
                "--burst-idle-us",
                &impairment.burst_idle.as_micros().to_string(),
            ])
            .args(["--duplicate", &(impairment.duplicate * 100.0).to_string()])
            .args(["--reorder", &(impairment.reorder * 100.0).to_string()])
            .args(["--gap", &impairment.reorder_gap.to_string()])
            .args(["--seed", &impairment.seed.to_string()])
            .args([
                "--rate-mbit",
                &(impairment.rate_bps / 1_000_000).to_string(),
            ])
            .args(["--queue-kib", &(impairment.queue_bytes / 1024).to_string()])
            .args(["--every", "0"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout)?)
            .stderr(std::fs::File::create(&stderr)?);
        let die_with_parent = || {
            // Safety: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
            Ok(())
        };
        // Safety: the closure only makes one async-signal-safe system call.
        unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, die_with_parent) };
        let mut process = ImpairProcess {
            child: Some(cmd.spawn()?),
            stdout,
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let said = std::fs::read_to_string(&process.stderr).unwrap_or_default();
            if said.contains("impairing") {
                return Ok(process);
            }
            if let Some(child) = process.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                process.child = None;
                return Err(io::Error::other(format!(
                    "xroce-impair exited ({status}): {said}"
                )));
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "xroce-impair did not start in 20 s: {said}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the forwarder and returns what it did.
    pub fn stop(mut self) -> io::Result<ImpairCounters> {
        let status = self.terminate()?;
        let out = std::fs::read_to_string(&self.stdout)?;
        if !status.success() {
            let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
            return Err(io::Error::other(format!(
                "xroce-impair failed ({status}): {err}"
            )));
        }
        out.parse().map_err(io::Error::other)
    }

    fn terminate(&mut self) -> io::Result<std::process::ExitStatus> {
        let Some(mut child) = self.child.take() else {
            return Err(io::Error::other("xroce-impair already stopped"));
        };
        // Only a child not yet reaped: a reaped child's pid may be another process's.
        if child.try_wait()?.is_none() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return child.wait();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for ImpairProcess {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.terminate();
        }
    }
}
