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

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

/// Where the nodes live.
pub const DIRECTORY: &str = "/dev/infiniband";

/// The node of a device, held while the daemon runs.
#[derive(Debug)]
pub struct DeviceNode {
    path: PathBuf,
    /// Open, with a shared lock on it.
    file: File,
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
            return Ok(DeviceNode { path, file });
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
}

impl Drop for DeviceNode {
    fn drop(&mut self) {
        // Safety: flock on the descriptor we own. Exclusive only if no other daemon holds it.
        let last =
            unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if last {
            let _ = std::fs::remove_file(&self.path);
            // Only if empty: other nodes (a kernel's own devices) stay.
            let _ = std::fs::remove_dir(DIRECTORY);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_is_named_as_the_drop_in_names_the_device() {
        assert_eq!(dev_name("xroce0"), "uverbs-xroce0");
    }
}
