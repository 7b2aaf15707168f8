//! `/dev/infiniband/uverbs-<device>`: the node RDMA software looks for before it opens a
//! device.
//!
//! Kernel RDMA devices have a character device under `/dev/infiniband/`, and some software
//! checks it exists and is read-write for the user before it uses a device it found
//! through libibverbs (UCX's IB transports do: `stat` and `access` of
//! `/dev/infiniband/<ibv_device.dev_name>`, never an open). xroce's devices are daemons,
//! not kernel devices, so the daemon makes that node itself: a character device with the
//! numbers of `/dev/null` (1, 3), mode 0666, named after the `dev_name` the drop-in
//! libibverbs gives the device. Nothing ever talks to it.
//!
//! `/dev` is shared by every network namespace, and daemons of the same device name may
//! run in several: each holds a shared lock on the node while it runs, and the last one to
//! go removes it (the one that can take the lock exclusively).
//!
//! Removing a file from `/dev/infiniband` takes write access to that root-owned directory,
//! which the daemon gives up after setup ([`crate::privileges`]). So before it does, it
//! hands the node to a keeper ([`DeviceNode::hand_to_keeper`]): `xroced keep-device-node`,
//! a process of the same user holding `CAP_DAC_OVERRIDE` and nothing else, which shares
//! the node's open file (and with it the lock) and reads nothing but its standard input,
//! a pipe from the daemon. It says on its standard output when it has given up the rest,
//! and the daemon waits for that before it lets go of the node. When the pipe from the
//! daemon closes (the daemon stops, or dies), the keeper removes the node if it is the
//! last holder, and exits; a daemon that stops waits for it.

use std::fs::File;
use std::io::{self, BufRead, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::privileges::{self, User};

/// What the keeper says once it holds the node with its privileges given up.
const READY: &str = "keeping";

/// Where the nodes live.
pub const DIRECTORY: &str = "/dev/infiniband";

/// The node of a device, held while the daemon runs.
#[derive(Debug)]
pub struct DeviceNode {
    path: PathBuf,
    /// Open, with a shared lock on it (`None` once handed to a keeper).
    file: Option<File>,
}

/// The `ibv_device.dev_name` of device `device` (what the drop-in libibverbs reports).
pub fn dev_name(device: &str) -> String {
    format!("uverbs-{device}")
}

impl DeviceNode {
    /// Makes (or joins) the node of `device`.
    pub fn create(device: &str) -> io::Result<DeviceNode> {
        let path = PathBuf::from(DIRECTORY).join(dev_name(device));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(DIRECTORY)?;
        // Another daemon may remove it between our mknod and our open: try again.
        for _ in 0..8 {
            let dev = libc::makedev(1, 3);
            match nix::sys::stat::mknod(
                &path,
                nix::sys::stat::SFlag::S_IFCHR,
                nix::sys::stat::Mode::from_bits_truncate(0o666),
                dev,
            ) {
                Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                Err(e) => return Err(io::Error::from_raw_os_error(e as i32)),
            }
            // mknod honours the umask: make it read-write for every user, as rdma-core's
            // udev rules make uverbs nodes.
            let _ = nix::sys::stat::fchmodat(
                nix::fcntl::AT_FDCWD,
                &path,
                nix::sys::stat::Mode::from_bits_truncate(0o666),
                nix::sys::stat::FchmodatFlags::FollowSymlink,
            );
            let file = match std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(&path)
            {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            // Safety: flock on a descriptor we own; no memory is involved.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH) } != 0 {
                return Err(io::Error::last_os_error());
            }
            return Ok(DeviceNode {
                path,
                file: Some(file),
            });
        }
        Err(io::Error::other(format!(
            "{} kept disappearing while it was made",
            path.display()
        )))
    }

    /// The node's path.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Hands the node to a keeper process, `program keep-device-node` (`program` is
    /// `xroced`), which runs as `user` and removes the node once the returned [`Keeper`] is
    /// dropped or this process dies. Called before the daemon gives up its privileges, and
    /// while it is one thread.
    pub fn hand_to_keeper(mut self, program: &Path, user: Option<&User>) -> io::Result<Keeper> {
        let file = self
            .file
            .take()
            .ok_or_else(|| io::Error::other("the node was handed over already"))?;
        let fd = file.as_raw_fd();
        let mut cmd = Command::new(program);
        cmd.arg0("xroced")
            .arg("keep-device-node")
            .arg("--fd")
            .arg(fd.to_string())
            .arg("--path")
            .arg(&self.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if let Some(user) = user {
            cmd.arg("--user").arg(user.numeric());
        }
        let inherit = move || {
            // Safety: fcntl on a descriptor of this (forked) process; clearing FD_CLOEXEC
            // here, after the fork, lets the keeper inherit it and leaves the daemon's
            // descriptor as it was.
            if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // Nothing else reaches the keeper: not the AF_XDP sockets, the BPF objects or
            // the control socket of the daemon (some are opened without close-on-exec by
            // the libraries that open them), nor what the daemon itself inherited.
            for (first, last) in [(3, fd - 1), (fd + 1, libc::c_int::MAX)] {
                if first > last {
                    continue;
                }
                // Safety: close_range takes two descriptor numbers and flags, no memory;
                // the descriptors are this forked process's, about to exec.
                let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
                if r != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        };
        // Safety: the closure makes only async-signal-safe system calls.
        unsafe { cmd.pre_exec(inherit) };
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                self.file = Some(file);
                return Err(e);
            }
        };
        // The keeper says when it holds the node and has given up its privileges: until
        // then the daemon keeps its own copy, and a keeper that fails leaves it the node.
        let mut said = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = io::BufReader::new(out).read_line(&mut said);
        }
        if said.trim_end() != READY {
            let _ = child.kill();
            let _ = child.wait();
            self.file = Some(file);
            return Err(io::Error::other(format!(
                "{} keep-device-node did not start",
                program.display()
            )));
        }
        // The keeper's lock is this file's: the daemon's copy may go.
        drop(file);
        let stdin = child.stdin.take();
        Ok(Keeper {
            path: std::mem::take(&mut self.path),
            child,
            stdin,
        })
    }
}

/// Removes the node at `path` if no other daemon holds it (`file` is ours, locked shared).
fn remove_if_last(file: &File, path: &Path) {
    // Safety: flock on the descriptor we own. Exclusive only if no other daemon holds it.
    let last = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if last {
        let _ = std::fs::remove_file(path);
        // Only if empty: other nodes (a kernel's own devices) stay.
        let _ = std::fs::remove_dir(DIRECTORY);
    }
}

impl Drop for DeviceNode {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            remove_if_last(file, &self.path);
        }
    }
}

/// The keeper of a device node: dropping it lets the keeper remove the node (if this
/// daemon was its last holder) and waits until it did.
#[derive(Debug)]
pub struct Keeper {
    path: PathBuf,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Keeper {
    /// The keeper's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The node it keeps.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // The end of its input is the keeper's signal.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// The keeper's side (`xroced keep-device-node --fd FD --path PATH [--user UID:GID]`):
/// takes over descriptor `fd`, the node's file with its shared lock, becomes `user` with
/// `CAP_DAC_OVERRIDE` alone, and once its standard input ends removes the node if it was
/// the last holder. Stop signals from a terminal or a service manager are ignored: the
/// daemon's end of the pipe says when.
pub fn keep(fd: RawFd, path: &Path, user: Option<&User>) -> Result<(), privileges::PrivilegeError> {
    if fd <= 2 || !path.starts_with(DIRECTORY) {
        return Err(privileges::PrivilegeError::System {
            what: "keeping the device node",
            source: io::Error::other(format!(
                "descriptor {fd} and {} are not a device node's",
                path.display()
            )),
        });
    }
    // Safety: the daemon passed this descriptor, open and ours alone, to be taken over.
    let file = unsafe { File::from_raw_fd(fd) };
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // Safety: setting a signal to be ignored touches no memory of ours.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
    privileges::drop_to(user, privileges::KEEPER_KEPT)?;
    let mut out = io::stdout().lock();
    writeln!(out, "{READY}")
        .and_then(|()| out.flush())
        .map_err(|source| privileges::PrivilegeError::System {
            what: "telling the daemon the keeper is ready",
            source,
        })?;
    drop(out);
    let mut buf = [0u8; 64];
    let mut input = io::stdin().lock();
    // Anything the daemon writes is ignored; its end, or an error, is the signal.
    loop {
        match input.read(&mut buf) {
            Ok(n) if n > 0 => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            _ => break,
        }
    }
    remove_if_last(&file, path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_is_named_as_the_drop_in_names_the_device() {
        assert_eq!(dev_name("xroce0"), "uverbs-xroce0");
    }
}
