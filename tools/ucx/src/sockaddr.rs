//! UCP's connection establishment by socket address, which goes through rdma_cm: UCX's
//! own example `ucp_client_server` (Debian's `libucx-dev` ships its source), built with
//! `gcc` and run between the hosts. The server listens on an IP address and port; the
//! client connects to it with `ucp_ep_create` on that address, and UCX opens the
//! connection with its `rdmacm` connection manager through the drop-in `librdmacm.so.1`
//! (first in UCX's `UCX_SOCKADDR_TLS_PRIORITY`), then exchanges tagged messages.
//! `UCX_LOG_LEVEL=debug` shows which connection manager the endpoint used.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use xroce_lab::{Lab, Side};

use crate::process::{self, Background};
use crate::{DEVICE, PORT_BASE};

/// Where `libucx-dev` puts UCX's examples.
const EXAMPLES: &str = "/usr/share/doc/libucx-dev/examples";
/// The port the server listens on: after those of the perftest runs.
const PORT: u16 = PORT_BASE + 100;
/// Messages the client exchanges.
const ITERATIONS: u32 = 10;

/// What the run showed.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The connection managers the client's endpoint used (`lane[N]: cm X` lines), or why
    /// the run failed.
    pub(crate) result: Result<Vec<String>, String>,
}

/// Builds UCX's example in `work`.
pub(crate) fn prepare(work: &Path) -> Result<PathBuf> {
    let dir = work.join("examples");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for name in ["ucp_client_server.c", "ucp_util.h", "hello_world_util.h"] {
        let from = Path::new(EXAMPLES).join(name);
        std::fs::copy(&from, dir.join(name))
            .with_context(|| format!("copying {} (Debian's libucx-dev)", from.display()))?;
    }
    let program = dir.join("ucp_client_server");
    let out = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&program)
        .arg(dir.join("ucp_client_server.c"))
        .args(["-lucp", "-lucs"])
        .output()
        .context("running gcc")?;
    if !out.status.success() {
        bail!(
            "building UCX's ucp_client_server failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(program)
}

/// Runs the example's server on host `b` and its client on host `a`.
pub(crate) fn run(
    lab: &Lab,
    lib: &Path,
    work: &Path,
    program: &Path,
    timeout: Duration,
) -> Outcome {
    Outcome {
        result: exchange(lab, lib, work, program, timeout),
    }
}

fn exchange(
    lab: &Lab,
    lib: &Path,
    work: &Path,
    program: &Path,
    timeout: Duration,
) -> Result<Vec<String>, String> {
    let program = program.display().to_string();
    let port = PORT.to_string();
    let iterations = ITERATIONS.to_string();
    let env = [
        ("LD_LIBRARY_PATH", lib.display().to_string()),
        ("UCX_TLS", "rc_verbs,ud_verbs".to_owned()),
        ("UCX_NET_DEVICES", format!("{DEVICE}:1")),
        ("UCX_LOG_LEVEL", "debug".to_owned()),
    ];
    let common = [
        program.as_str(),
        "-p",
        port.as_str(),
        "-c",
        "tag",
        "-s",
        "4096",
        "-i",
        iterations.as_str(),
    ];
    let mut server_cmd = lab.command(Side::B, &common);
    server_cmd.envs(env.iter().map(|(k, v)| (k, v)));
    // The example's server waits for the next client forever: it is killed when dropped.
    let mut server = Background::start(&mut server_cmd, &work.join("sockaddr.server.log"))
        .map_err(|e| format!("{e:#}"))?;
    server
        .wait_listening(lab, Side::B, PORT, Duration::from_secs(20))
        .map_err(|e| format!("{e:#}"))?;
    let peer = lab.host(Side::B).ipv4.to_string();
    let mut argv = common.to_vec();
    argv.extend(["-a", peer.as_str()]);
    let mut client = lab.command(Side::A, &argv);
    client.envs(env.iter().map(|(k, v)| (k, v)));
    let log = work.join("sockaddr.client.log");
    let done = process::run(&mut client, &log, timeout).map_err(|e| format!("{e:#}"))?;
    drop(server);
    // The example prints its first and its last iteration.
    let last = format!("Client: iteration #{ITERATIONS}");
    if !done.success() || !done.output.lines().any(|l| l == last) {
        return Err(format!(
            "ucp_client_server ended {} without its iteration {ITERATIONS}: {} (log: {})",
            done.ending(),
            process::tail(
                &done
                    .output
                    .lines()
                    .filter(|l| !l.contains("UCX  DEBUG"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                4
            ),
            log.display()
        ));
    }
    Ok(managers(&done.output))
}

/// The connection managers of the endpoints' `lane[N]: cm X` lines, without repeats.
fn managers(output: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in output.lines() {
        if let Some((_, cm)) = line.split_once(": cm ") {
            let cm = cm.trim().to_owned();
            if !out.contains(&cm) {
                out.push(cm);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_manager_comes_from_the_lane_lines() {
        let log = "[1] [vm:1:0] wireup.c:1094 UCX  DEBUG     ep 0x1: lane[0]: cm rdmacm\n\
                   [2] [vm:1:0] wireup.c:1094 UCX  DEBUG   ep 0x1: lane[0]: cm rdmacm\n\
                   [3] [vm:1:0] wireup.c:1094 UCX  DEBUG   ep 0x1: lane[1]:  1:rc_verbs/xroce0:1.0\n";
        assert_eq!(managers(log), ["rdmacm"]);
        assert!(managers("nothing\n").is_empty());
    }
}
