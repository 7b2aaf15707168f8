//! Running the programs of a check: bounded in time, their output kept in a log file and
//! returned, servers waited for until they listen.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use xroce_lab::{Lab, Side};

/// A program that ran to its end, or was killed at its deadline.
#[derive(Debug)]
pub(crate) struct Finished {
    /// Its exit status (`None`: killed at the deadline).
    pub status: Option<ExitStatus>,
    /// Its standard output and error, interleaved as written.
    pub output: String,
}

impl Finished {
    /// Whether it exited with status 0.
    pub(crate) fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// How it ended, in words.
    pub(crate) fn ending(&self) -> String {
        match self.status {
            Some(s) => s.to_string(),
            None => "killed at its deadline".into(),
        }
    }
}

/// A program started in the background (a server), killed with its process group when
/// dropped unless it ended.
#[derive(Debug)]
pub(crate) struct Background {
    child: Child,
    log: std::path::PathBuf,
}

/// Starts `cmd` in a process group of its own, with stdout and stderr to `log`.
fn spawn(cmd: &mut Command, log: &Path) -> Result<Child> {
    let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = file.try_clone().context("duplicating a log file")?;
    cmd.stdin(Stdio::null()).stdout(file).stderr(err);
    // Its own process group, so that a deadline kills what it started too (mpirun's
    // daemons, ranks).
    cmd.process_group(0);
    cmd.spawn().with_context(|| format!("starting {cmd:?}"))
}

/// Kills `child`'s process group and reaps it.
fn kill_group(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        // Safety: kill(2) on a process group this process made; no memory is involved.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    }
    let _ = child.wait();
}

fn read_log(log: &Path) -> String {
    std::fs::read(log)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Runs `cmd` to its end or until `limit` has passed (then kills it and everything it
/// started); its output goes to `log` and comes back.
pub(crate) fn run(cmd: &mut Command, log: &Path, limit: Duration) -> Result<Finished> {
    let mut child = spawn(cmd, log)?;
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() > deadline || xroce_lab::signals::interrupted() {
            kill_group(&mut child);
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Finished {
        status,
        output: read_log(log),
    })
}

impl Background {
    /// Starts `cmd` in the background with its output to `log`.
    pub(crate) fn start(cmd: &mut Command, log: &Path) -> Result<Background> {
        Ok(Background {
            child: spawn(cmd, log)?,
            log: log.to_owned(),
        })
    }

    /// Waits until something listens on TCP `port` in `side`'s namespace; fails if the
    /// program ends first or `limit` passes.
    pub(crate) fn wait_listening(
        &mut self,
        lab: &Lab,
        side: Side,
        port: u16,
        limit: Duration,
    ) -> Result<()> {
        let deadline = Instant::now() + limit;
        let filter = format!("sport = :{port}");
        loop {
            let out = lab
                .command(side, &["ss", "-Hltn", filter.as_str()])
                .output()
                .context("running ss")?;
            if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "the server ended ({status}) before listening on port {port}: {}",
                    tail(&read_log(&self.log), 5)
                );
            }
            if Instant::now() > deadline {
                bail!("the server did not listen on port {port} within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the program to end, at most `limit` (then kills it); its output.
    pub(crate) fn finish(mut self, limit: Duration) -> Result<Finished> {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait()? {
                break Some(status);
            }
            if Instant::now() > deadline {
                kill_group(&mut self.child);
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ok(Finished {
            status,
            output: read_log(&self.log),
        })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        kill_group(&mut self.child);
    }
}

/// The last `n` non-empty lines of `text`, on one line.
pub(crate) fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}
