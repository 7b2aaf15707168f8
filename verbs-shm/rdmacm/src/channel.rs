//! Event channels (`rdma_event_channel`): one descriptor the application polls, fed by
//! every daemon whose ids report to the channel.
//!
//! The records a daemon writes name its own ids, which mean nothing on another daemon's
//! connection, so each device gets a socket of its own: a `verbs_shm` [`EventChannel`]
//! registered with that daemon the first time an id of the channel lives on it. The
//! descriptor the application sees (`rdma_event_channel.fd`) is an epoll instance over
//! those sockets: readable exactly when one of them holds a record, pollable and
//! epoll-able like the kernel's `rdma_cm` descriptor, and `O_NONBLOCK` on it (set with
//! `fcntl`, as UCX and librpma do) makes [`Channel::read`] answer `EAGAIN` instead of
//! waiting. A record is read from the socket of its device, so it is always known which
//! daemon wrote it.

use std::cell::UnsafeCell;
use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use verbs_shm::client::EventChannel;
use verbs_shm::cm::{CmEventRecord, CmRequest};
use zerocopy::FromBytes;

use crate::abi::rdma_event_channel;
use crate::cma::{Cma, lock};
use crate::daemon;
use crate::device::Device;
use crate::ffi::{Cm, Errno};

/// One device's socket of a channel.
#[derive(Debug)]
struct Link {
    device: Arc<Device>,
    events: EventChannel,
    /// The daemon's handle for the channel.
    handle: u32,
}

/// An event channel. The application holds a pointer to its first field.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Channel {
    c: UnsafeCell<rdma_event_channel>,
    epoll: OwnedFd,
    links: Mutex<Vec<Link>>,
    /// The ids reporting to the channel, by address.
    members: Mutex<HashSet<usize>>,
    /// The link read first next time, so that a busy daemon does not starve the others.
    turn: AtomicUsize,
}

// Safety: the C part is written once, at creation, before the channel is shared; the
// application may read it (and only ever reads it) from any thread, as librdmacm allows.
unsafe impl Sync for Channel {}
// Safety: nothing in a channel is tied to the thread that made it.
unsafe impl Send for Channel {}

impl Channel {
    /// A channel with no device yet, registered as live.
    pub(crate) fn new(cma: &Cma) -> Cm<Arc<Channel>> {
        // Safety: epoll_create1 has no preconditions.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(Errno::last());
        }
        // Safety: a descriptor just created and owned by nothing else.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let channel = Arc::new(Channel {
            c: UnsafeCell::new(rdma_event_channel { fd }),
            epoll,
            links: Mutex::new(Vec::new()),
            members: Mutex::default(),
            turn: AtomicUsize::new(0),
        });
        lock(&cma.channels).insert(channel.as_c() as usize, channel.clone());
        Ok(channel)
    }

    /// The live channel behind an application's pointer; `EINVAL` for NULL or anything
    /// else.
    pub(crate) fn lookup(cma: &Cma, channel: *mut rdma_event_channel) -> Cm<Arc<Channel>> {
        lock(&cma.channels)
            .get(&(channel as usize))
            .cloned()
            .ok_or(Errno::EINVAL)
    }

    /// The pointer the application holds.
    pub(crate) fn as_c(&self) -> *mut rdma_event_channel {
        self.c.get()
    }

    /// An id reports to the channel from now on.
    pub(crate) fn join(&self, id: usize) {
        lock(&self.members).insert(id);
    }

    /// An id no longer reports to the channel.
    pub(crate) fn leave(&self, id: usize) {
        lock(&self.members).remove(&id);
    }

    /// The ids reporting to the channel, which no longer do.
    pub(crate) fn take_members(&self) -> Vec<usize> {
        lock(&self.members).drain().collect()
    }

    /// The daemon's handle for this channel on `device`, registering the channel with the
    /// device's daemon the first time.
    pub(crate) fn handle(&self, device: &Arc<Device>) -> Cm<u32> {
        let mut links = lock(&self.links);
        if let Some(link) = links.iter().find(|l| l.device.index == device.index) {
            return Ok(link.handle);
        }
        let open = device.opened().ok_or(Errno::ENODEV)?;
        let events = EventChannel::new().map_err(|e| Errno(e.errno()))?;
        let handle = open
            .daemon
            .register_channel(&events)
            .map_err(|e| daemon::errno(&device.name, "channel", &e))?;
        let mut interest = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: device.index as u64,
        };
        // Safety: both descriptors are open; `interest` is a valid epoll_event.
        let added = unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                events.fd().as_raw_fd(),
                &mut interest,
            )
        };
        if added != 0 {
            let errno = Errno::last();
            let _ = daemon::ask(
                &device.name,
                open.daemon.as_ref(),
                CmRequest::DestroyChannel { channel: handle },
            );
            return Err(errno);
        }
        links.push(Link {
            device: device.clone(),
            events,
            handle,
        });
        Ok(handle)
    }

    /// Whether the application set `O_NONBLOCK` on the descriptor.
    fn nonblocking(&self) -> bool {
        // Safety: F_GETFL on an open descriptor.
        let flags = unsafe { libc::fcntl(self.epoll.as_raw_fd(), libc::F_GETFL) };
        flags >= 0 && flags & libc::O_NONBLOCK != 0
    }

    /// The next record and the device whose daemon wrote it: waiting for one, or `EAGAIN`
    /// at once when the descriptor is non-blocking. A record of the wrong size is dropped
    /// (and said on stderr with `XROCE_RDMACM_DEBUG=1`).
    pub(crate) fn read(&self) -> Cm<(Arc<Device>, CmEventRecord)> {
        loop {
            if let Some(found) = self.try_read()? {
                return Ok(found);
            }
            if self.nonblocking() {
                return Err(Errno::EAGAIN);
            }
            let mut ready = [libc::epoll_event { events: 0, u64: 0 }];
            // Safety: an open epoll descriptor and room for one event.
            let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), ready.as_mut_ptr(), 1, -1) };
            if n < 0 && Errno::last() != Errno(libc::EINTR) {
                return Err(Errno::last());
            }
        }
    }

    /// One record from any device's socket, without waiting.
    fn try_read(&self) -> Cm<Option<(Arc<Device>, CmEventRecord)>> {
        let links = lock(&self.links);
        let first = self.turn.fetch_add(1, Ordering::Relaxed);
        for k in 0..links.len() {
            let link = &links[(first + k) % links.len()];
            let mut buf = [0u8; size_of::<CmEventRecord>() + 1];
            let received = nix::sys::socket::recv(
                link.events.fd().as_fd().as_raw_fd(),
                &mut buf,
                nix::sys::socket::MsgFlags::MSG_DONTWAIT,
            );
            let n = match received {
                Ok(n) => n,
                Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            match buf
                .get(..n)
                .and_then(|b| CmEventRecord::read_from_bytes(b).ok())
            {
                Some(record) => return Ok(Some((link.device.clone(), record))),
                None => {
                    let error = verbs_shm::client::Error::Protocol(format!(
                        "an event record of {n} bytes, not {}",
                        size_of::<CmEventRecord>()
                    ));
                    daemon::errno(&link.device.name, "event", &error);
                }
            }
        }
        Ok(None)
    }

    /// Unregisters the channel, tells every daemon it is gone and closes its sockets
    /// (`rdma_destroy_event_channel`).
    pub(crate) fn close(&self, cma: &Cma) {
        lock(&cma.channels).remove(&(self.as_c() as usize));
        let links = std::mem::take(&mut *lock(&self.links));
        for link in links {
            if let Some(open) = link.device.opened() {
                let _ = daemon::ask(
                    &link.device.name,
                    open.daemon.as_ref(),
                    CmRequest::DestroyChannel {
                        channel: link.handle,
                    },
                );
            }
        }
    }
}
