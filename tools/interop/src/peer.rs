//! The rxe side of a run: Debian's kernel in a VM ([`super::vm`]), or this host's own rxe
//! in the lab's second namespace ([`super::local`]). Either runs shell commands in the
//! background or to completion and says when a TCP port listens, so the checks and the
//! bench run the same commands on both.

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::Result;

use super::checks::Net;
use super::local::{self, LocalRxe};
use super::vm::{self, Finished, Vm};

/// Which peer to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PeerKind {
    /// This host's rxe when its kernel has it (and rxe works in a namespace), else a VM.
    #[default]
    Auto,
    /// This host's rxe, or fail.
    Local,
    /// A VM, always.
    Vm,
}

/// The peer a run starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice {
    Local,
    /// A VM; with `--peer-kind auto`, why this host's rxe is not used.
    Vm {
        why_not_local: Option<String>,
    },
}

/// Chooses the peer: `probe` says whether this host's kernel has rxe (it is not called
/// for [`PeerKind::Vm`]).
pub(crate) fn choose(
    kind: PeerKind,
    probe: impl FnOnce() -> Result<(), String>,
) -> Result<Choice, String> {
    match kind {
        PeerKind::Vm => Ok(Choice::Vm {
            why_not_local: None,
        }),
        PeerKind::Local => probe().map(|()| Choice::Local),
        PeerKind::Auto => Ok(match probe() {
            Ok(()) => Choice::Local,
            Err(why) => Choice::Vm {
                why_not_local: Some(why),
            },
        }),
    }
}

/// The peer.
#[derive(Debug)]
pub(crate) enum Peer {
    Vm {
        vm: Vm,
        /// Index of rxe0's IPv4 GID.
        gid_index: u32,
        /// Index of rxe0's global IPv6 GID, if it has one.
        ipv6_gid_index: Option<u32>,
        /// Index of rxe0's link-local IPv6 GID, if it has one.
        link_local_gid_index: Option<u32>,
        ip: Ipv4Addr,
    },
    Local {
        rxe: LocalRxe,
        ip: Ipv4Addr,
    },
}

/// A command started on the peer.
#[derive(Debug)]
pub(crate) enum Job {
    Vm(vm::Job),
    Local(local::Job),
}

impl Job {
    /// What it printed so far.
    pub(crate) fn output(&self) -> String {
        match self {
            Job::Vm(job) => job.output(),
            Job::Local(job) => job.output(),
        }
    }
}

impl Peer {
    /// The rxe device's name.
    pub(crate) fn device(&self) -> &str {
        match self {
            Peer::Vm { .. } => "rxe0",
            Peer::Local { rxe, .. } => rxe.device(),
        }
    }

    /// The index of the device's IPv4 GID.
    pub(crate) fn gid_index(&self) -> u32 {
        match self {
            Peer::Vm { gid_index, .. } => *gid_index,
            Peer::Local { rxe, .. } => rxe.gid_index(),
        }
    }

    /// The index of the device's global IPv6 GID, if it has one.
    pub(crate) fn ipv6_gid_index(&self) -> Option<u32> {
        match self {
            Peer::Vm { ipv6_gid_index, .. } => *ipv6_gid_index,
            Peer::Local { rxe, .. } => rxe.ipv6_gid_indices()[0],
        }
    }

    /// The index of the device's GID of `net`, if it has one.
    pub(crate) fn gid_index_of(&self, net: Net) -> Option<u32> {
        match (net, self) {
            (Net::Ipv4, _) => Some(self.gid_index()),
            (Net::Ipv6, _) => self.ipv6_gid_index(),
            (
                Net::Ipv6LinkLocal,
                Peer::Vm {
                    link_local_gid_index,
                    ..
                },
            ) => *link_local_gid_index,
            (Net::Ipv6LinkLocal, Peer::Local { rxe, .. }) => rxe.ipv6_gid_indices()[1],
        }
    }

    /// Where the peer is, for logs: `VM 10.77.0.2` or `namespace … 10.77.0.2`.
    pub(crate) fn place(&self) -> String {
        match self {
            Peer::Vm { ip, .. } => format!("VM {ip}"),
            Peer::Local { rxe, ip } => format!("namespace {} {ip}", rxe.ns()),
        }
    }

    pub(crate) fn is_vm(&self) -> bool {
        matches!(self, Peer::Vm { .. })
    }

    /// Starts `script` on the peer.
    pub(crate) fn spawn(&self, script: &str) -> Result<Job> {
        Ok(match self {
            Peer::Vm { vm, .. } => Job::Vm(vm.spawn(script)?),
            Peer::Local { rxe, .. } => Job::Local(rxe.spawn(script)?),
        })
    }

    /// Waits for a job; kills it after `timeout`. An error means the peer itself died.
    pub(crate) fn wait(&mut self, job: &mut Job, timeout: Duration) -> Result<Finished> {
        match (self, job) {
            (Peer::Vm { vm, .. }, Job::Vm(job)) => job.wait(vm, timeout),
            (_, Job::Local(job)) => Ok(job.wait(timeout)),
            (Peer::Local { .. }, Job::Vm(_)) => {
                anyhow::bail!("a VM's job on a local peer")
            }
        }
    }

    /// Kills a job.
    pub(crate) fn kill(&mut self, job: &mut Job) {
        match (self, job) {
            (Peer::Vm { vm, .. }, Job::Vm(job)) => job.kill(vm),
            (_, Job::Local(job)) => job.kill(),
            (Peer::Local { .. }, Job::Vm(_)) => {}
        }
    }

    /// Runs `script` on the peer and waits for it.
    pub(crate) fn run(&mut self, script: &str, timeout: Duration) -> Result<Finished> {
        let mut job = self.spawn(script)?;
        self.wait(&mut job, timeout)
    }

    /// Waits until a TCP socket listens on `port` on the peer.
    pub(crate) fn listening(&mut self, port: u16, timeout: Duration) -> Result<bool> {
        match self {
            Peer::Vm { .. } => {
                let polls = timeout.as_millis() / 50;
                let f = self.run(
                    &format!(
                        "n=0; while ! netstat -ltn | grep -q ':{port} '; do \
                         usleep 50000; n=$((n + 1)); [ $n -gt {polls} ] && exit 1; done; exit 0"
                    ),
                    timeout + Duration::from_secs(30),
                )?;
                Ok(f.ok())
            }
            Peer::Local { rxe, .. } => Ok(rxe.listening(port, timeout)),
        }
    }

    /// Waits until an rdma_cm id listens on `port` on the peer (its kernel lists it in
    /// `rdma resource show cm_id`: `... state LISTEN ... src-addr 10.77.0.2:7174 ...`).
    pub(crate) fn cm_listening(&mut self, port: u16, timeout: Duration) -> Result<bool> {
        let polls = timeout.as_millis() / 50;
        let f = self.run(
            &format!(
                "n=0; while ! rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q ':{port} '; do \
                 usleep 50000; n=$((n + 1)); [ $n -gt {polls} ] && exit 1; done; exit 0"
            ),
            timeout + Duration::from_secs(30),
        )?;
        Ok(f.ok())
    }

    /// Stops the peer: powers the VM off, or deletes the local device.
    pub(crate) fn shutdown(&mut self) {
        match self {
            Peer::Vm { vm, .. } => vm.shutdown(),
            Peer::Local { rxe, .. } => rxe.delete(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_falls_back_to_a_vm_and_says_why() {
        let c = choose(PeerKind::Auto, || Err("this kernel has no rdma_rxe".into())).unwrap();
        assert_eq!(
            c,
            Choice::Vm {
                why_not_local: Some("this kernel has no rdma_rxe".into())
            }
        );
        assert_eq!(choose(PeerKind::Auto, || Ok(())).unwrap(), Choice::Local);
    }

    #[test]
    fn local_is_local_or_an_error() {
        assert_eq!(choose(PeerKind::Local, || Ok(())).unwrap(), Choice::Local);
        assert_eq!(
            choose(PeerKind::Local, || Err("no".into())),
            Err("no".to_owned())
        );
    }

    #[test]
    fn vm_never_probes() {
        let c = choose(PeerKind::Vm, || panic!("probed")).unwrap();
        assert_eq!(
            c,
            Choice::Vm {
                why_not_local: None
            }
        );
    }
}
