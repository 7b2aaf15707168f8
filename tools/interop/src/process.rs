//! Processes of ours on the host, inside the lab's namespaces: their output in files,
//! signalled only while they are ours, killed when dropped.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use xroce_lab::netns;

/// A process of ours on the host (in a namespace), its output in files; killed on drop.
#[derive(Debug)]
pub(super) struct Proc {
    pub(super) child: Option<Child>,
    pub(super) stdout: PathBuf,
    pub(super) stderr: PathBuf,
}

impl Proc {
    pub(super) fn spawn(
        ns: &str,
        argv: &[&str],
        env: &[(&str, &str)],
        logs: &Path,
        name: &str,
    ) -> Result<Proc> {
        let stdout = logs.join(format!("{name}.out"));
        let stderr = logs.join(format!("{name}.err"));
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns]);
        if !env.is_empty() {
            cmd.arg("env");
            for (k, v) in env {
                cmd.arg(format!("{k}={v}"));
            }
        }
        cmd.args(argv)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&stdout)?)
            .stderr(fs::File::create(&stderr)?);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", argv.join(" ")))?;
        Ok(Proc {
            child: Some(child),
            stdout,
            stderr,
        })
    }

    pub(super) fn output(&self) -> String {
        let mut s = fs::read_to_string(&self.stdout).unwrap_or_default();
        let e = fs::read_to_string(&self.stderr).unwrap_or_default();
        if !e.is_empty() {
            s.push_str(&e);
        }
        s
    }

    pub(super) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Waits for it to exit; kills it after `timeout` (`None`: killed).
    pub(super) fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if Instant::now() > deadline {
                self.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Signals it if it has not been reaped: the pid of a reaped child may already belong
    /// to another process (this machine's pid space wraps within minutes under load). A
    /// zombie keeps its pid until reaped, so checking first is enough.
    pub(super) fn signal(&mut self, signal: signal::Signal) {
        if let Some(c) = &mut self.child
            && let Ok(None) = c.try_wait()
        {
            signal::send(c.id(), signal);
        }
    }

    pub(super) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The signals this module sends.
pub(super) mod signal {
    #[derive(Debug, Clone, Copy)]
    pub(crate) enum Signal {
        Int,
        Term,
    }

    pub(crate) fn send(pid: u32, signal: Signal) {
        let sig = match signal {
            Signal::Int => libc::SIGINT,
            Signal::Term => libc::SIGTERM,
        };
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return;
        };
        // Safety: kill takes plain integers and touches no memory of ours; the caller checked
        // that `pid` is a child of ours not yet reaped, so it cannot be another process.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Whether a TCP socket listens on `port` in namespace `ns`.
pub(super) fn tcp_listening(ns: &str, port: u16) -> bool {
    let want = format!(":{port:04X} ");
    netns::run_in(ns, || {
        ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"]
            .iter()
            .filter_map(|p| fs::read_to_string(p).ok())
            .any(|t| {
                t.lines().skip(1).any(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    // local_address rem_address st: st 0A is LISTEN.
                    f.len() > 3 && format!("{} ", f[1]).ends_with(&want) && f[3] == "0A"
                })
            })
    })
    .unwrap_or(false)
}
