//! Devices and contexts: the connection to a daemon.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{Ordering, fence};
use std::sync::{Arc, Mutex};

use zerocopy::FromBytes;

use super::cq::{CompChannel, Cq};
use super::qp::Pd;
use super::{Error, Result};
use crate::contract::{self, PaddedWord, WakePage};
use crate::protocol::{self, DeviceAttr, EventRecord, PortAttr, Reply, Request};
use crate::sys::{self, Mapping};

/// The xroce devices (daemons) serving the caller's network namespace, by name.
pub fn devices() -> Result<Vec<String>> {
    Ok(sys::list_devices()?)
}

/// The attributes of device `name` without opening it: what a kernel RDMA device shows
/// every user in sysfs (its node GUID, its limits), also to one its daemon does not let
/// open it. A program lists such a device, and learns why it may not use it when it opens
/// it ([`Context::open`]).
pub fn describe(name: &str) -> Result<DeviceAttr> {
    let sock = connect(name)?;
    sys::send_message(sock.as_fd(), &protocol::encode(&Request::QueryDevice), &[])?;
    let mut buf = vec![0u8; protocol::MAX_MESSAGE];
    let (n, _) = sys::recv_message(sock.as_fd(), &mut buf)?;
    match protocol::decode::<Reply>(&buf[..n]) {
        Ok(Reply::Device(d)) => Ok(d),
        Ok(Reply::Error { errno, message }) => Err(Error::Daemon { errno, message }),
        Ok(other) => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        Err(e) => Err(Error::Protocol(format!("undecodable reply: {e}"))),
    }
}

/// The control connection to the daemon of device `name`.
fn connect(name: &str) -> Result<OwnedFd> {
    sys::connect(name).map_err(|e| match e.raw_os_error() {
        Some(libc::ECONNREFUSED) | Some(libc::ENOENT) => Error::NoDevice(name.to_owned()),
        _ => Error::Io(e),
    })
}

pub(crate) struct Inner {
    pub(crate) device: String,
    sock: Mutex<OwnedFd>,
    wake: Mapping,
    doorbells: Vec<OwnedFd>,
    events: OwnedFd,
    post_bits: Mapping,
    /// The process that opened it: a forked child shares the socket, and requests of two
    /// processes on one socket would take each other's replies.
    pid: u32,
}

/// How to tell a poller about new work on one QP's or SRQ's rings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bell {
    /// The poller.
    pub(crate) poller: u32,
    /// The QP's or SRQ's bit in the post-bits page.
    pub(crate) bit: Option<u32>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl Inner {
    /// Sends a request and waits for its reply.
    pub(crate) fn call(
        &self,
        request: &Request,
        fds: &[BorrowedFd<'_>],
    ) -> Result<(Reply, Vec<OwnedFd>)> {
        if std::process::id() != self.pid {
            return Err(Error::OtherProcess(self.pid));
        }
        let bytes = protocol::encode(request);
        // NOTE(unwrap): a poisoned lock means another thread panicked mid-call; the socket
        // itself is still usable, so carry on with it.
        let sock = self.sock.lock().unwrap_or_else(|e| e.into_inner());
        // A signal handler of the application (perftest's SIGALRM, …) may interrupt either
        // system call: retry it, or the reply would be read by the next request.
        retry_interrupted(|| sys::send_message(sock.as_fd(), &bytes, fds))?;
        let mut buf = vec![0u8; protocol::MAX_MESSAGE];
        let (n, fds) = retry_interrupted(|| sys::recv_message(sock.as_fd(), &mut buf))?;
        if n == 0 {
            return Err(Error::Protocol("the daemon closed the connection".into()));
        }
        let reply: Reply = protocol::decode(&buf[..n])
            .map_err(|e| Error::Protocol(format!("undecodable reply: {e}")))?;
        match reply {
            Reply::Error { errno, message } => Err(Error::Daemon { errno, message }),
            r => Ok((r, fds)),
        }
    }

    /// Sets the post bit, then rings the poller's doorbell if it sleeps. Called after
    /// publishing work.
    pub(crate) fn doorbell(&self, bell: Bell) {
        if let Some(bit) = bell.bit
            && let Some(word) = self.post_bits.u64_at(bit as usize / 64 * 8)
        {
            word.fetch_or(1 << (bit % 64), Ordering::SeqCst);
        }
        let poller = bell.poller;
        fence(Ordering::SeqCst);
        let at = poller as usize * size_of::<PaddedWord>();
        let sleeping = self
            .wake
            .u32_at(at)
            .map(|w| w.load(Ordering::SeqCst))
            .unwrap_or(1);
        if sleeping != 0
            && let Some(fd) = self.doorbells.get(poller as usize)
        {
            sys::eventfd_signal(fd.as_fd());
        }
    }

    /// Writes the poller's doorbell whether it sleeps or not.
    pub(crate) fn doorbell_always(&self, bell: Bell) {
        if let Some(fd) = self.doorbells.get(bell.poller as usize) {
            sys::eventfd_signal(fd.as_fd());
        }
    }
}

/// Runs `call` again while it fails with `EINTR`.
/// The memory of the rings the daemon passed with a reply (the last descriptor), mapped.
pub(crate) fn map_rings(fds: &mut Vec<OwnedFd>, ring_len: u64) -> Result<Arc<Mapping>> {
    let fd = fds
        .pop()
        .ok_or_else(|| Error::Protocol("no ring memory".into()))?;
    Ok(Arc::new(Mapping::map(
        fd.as_fd(),
        ring_len as usize,
        0,
        true,
    )?))
}

/// The two ends of a channel on which a daemon writes events (completion channels,
/// rdma_cm event channels): ours to poll and read, theirs to hand over.
pub(crate) fn channel_pair() -> Result<(OwnedFd, OwnedFd)> {
    let pair = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
    Ok(pair)
}

fn retry_interrupted<T>(mut call: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    loop {
        match call() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// An open device: the connection to one xroce daemon.
#[derive(Debug, Clone)]
pub struct Context {
    pub(crate) inner: Arc<Inner>,
}

impl Context {
    /// Opens the device `name` (as listed by [`devices`]). A daemon whose access policy
    /// leaves the calling user out refuses with `EACCES` ([`Error::Daemon`], saying whom it
    /// allows), as opening a kernel device's `/dev/infiniband/uverbs*` would fail.
    pub fn open(name: &str) -> Result<Context> {
        let sock = connect(name)?;
        let bytes = protocol::encode(&Request::Hello {
            version: contract::VERSION,
        });
        sys::send_message(sock.as_fd(), &bytes, &[])?;
        let mut buf = vec![0u8; protocol::MAX_MESSAGE];
        let (n, mut fds) = sys::recv_message(sock.as_fd(), &mut buf)?;
        let reply: Reply = protocol::decode(&buf[..n])
            .map_err(|e| Error::Protocol(format!("undecodable hello: {e}")))?;
        let (device, pollers) = match reply {
            Reply::Hello {
                device, pollers, ..
            } => (device, pollers as usize),
            Reply::Error { errno, message } => return Err(Error::Daemon { errno, message }),
            other => return Err(Error::Protocol(format!("unexpected hello reply {other:?}"))),
        };
        if fds.len() != 3 + pollers {
            return Err(Error::Protocol(format!(
                "hello brought {} descriptors",
                fds.len()
            )));
        }
        let post_bits_fd = fds
            .pop()
            .ok_or_else(|| Error::Protocol("no post-bits page".into()))?;
        let post_bits = Mapping::map(
            post_bits_fd.as_fd(),
            contract::post_bits_bytes(pollers),
            0,
            true,
        )?;
        let doorbells = fds.split_off(2);
        let events = fds
            .pop()
            .ok_or_else(|| Error::Protocol("no event socket".into()))?;
        let wake_fd = fds
            .pop()
            .ok_or_else(|| Error::Protocol("no wake page".into()))?;
        let wake = Mapping::map(wake_fd.as_fd(), size_of::<WakePage>(), 0, false)?;
        Ok(Context {
            inner: Arc::new(Inner {
                device,
                sock: Mutex::new(sock),
                wake,
                doorbells,
                events,
                post_bits,
                pid: std::process::id(),
            }),
        })
    }

    /// Opens the first device serving this network namespace.
    pub fn open_default() -> Result<Context> {
        let list = devices()?;
        let name = list
            .first()
            .ok_or_else(|| Error::NoDevice("(any)".into()))?;
        Context::open(name)
    }

    /// The device's name.
    pub fn device(&self) -> &str {
        &self.inner.device
    }

    /// Device attributes (`ibv_query_device`).
    pub fn query_device(&self) -> Result<DeviceAttr> {
        match self.inner.call(&Request::QueryDevice, &[])?.0 {
            Reply::Device(d) => Ok(d),
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// Port attributes and GID table (`ibv_query_port`, `ibv_query_gid`).
    pub fn query_port(&self) -> Result<PortAttr> {
        match self.inner.call(&Request::QueryPort, &[])?.0 {
            Reply::Port(p) => Ok(p),
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// A protection domain (`ibv_alloc_pd`).
    pub fn alloc_pd(&self) -> Result<Pd> {
        match self.inner.call(&Request::AllocPd, &[])?.0 {
            Reply::Pd { pd } => Ok(Pd::new(self.inner.clone(), pd)),
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// A completion channel (`ibv_create_comp_channel`).
    pub fn create_comp_channel(&self) -> Result<CompChannel> {
        CompChannel::new()
    }

    /// A completion queue of at least `entries` entries (`ibv_create_cq`), notifying
    /// `channel` when armed.
    pub fn create_cq(&self, entries: u32, channel: Option<&CompChannel>) -> Result<Cq> {
        Cq::create(self.inner.clone(), entries, channel)
    }

    /// The descriptor of the control connection to the daemon (what a kernel device's
    /// uverbs command descriptor is to rdma-core). Requests go through this context only;
    /// the descriptor is shown so that callers which only look at it have a real one.
    pub fn control_fd(&self) -> std::os::fd::RawFd {
        // NOTE(unwrap): the socket stays valid even if a caller panicked holding the lock.
        let sock = self.inner.sock.lock().unwrap_or_else(|e| e.into_inner());
        std::os::fd::AsRawFd::as_raw_fd(&*sock)
    }

    /// The descriptor asynchronous events arrive on (readable when one waits).
    pub fn async_fd(&self) -> BorrowedFd<'_> {
        self.inner.events.as_fd()
    }

    /// The next asynchronous event, if one waits (non-blocking).
    pub fn poll_async_event(&self) -> Option<EventRecord> {
        let mut b = [0u8; size_of::<EventRecord>()];
        let n = nix::sys::socket::recv(
            std::os::fd::AsRawFd::as_raw_fd(&self.inner.events),
            &mut b,
            nix::sys::socket::MsgFlags::MSG_DONTWAIT,
        )
        .ok()?;
        EventRecord::read_from_bytes(b.get(..n)?).ok()
    }

    /// Sends one raw control request and returns the daemon's reply (an error reply as
    /// [`Error::Daemon`]; descriptors that come with the reply are closed). For tests of
    /// the daemon's protocol handling and for tools; applications use the typed calls.
    #[doc(hidden)]
    pub fn request(&self, request: &Request) -> Result<Reply> {
        Ok(self.inner.call(request, &[])?.0)
    }

    /// The daemon's counters.
    pub fn stats(&self) -> Result<Vec<(String, u64)>> {
        match self.inner.call(&Request::Stats, &[])?.0 {
            Reply::Stats { counters } => Ok(counters),
            other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// Every queue pair's state and counters, by QP number, however many there are: the
    /// daemon answers page by page (QPs created or destroyed meanwhile may or may not be
    /// listed; none is listed twice).
    pub fn qp_stats(&self) -> Result<Vec<crate::protocol::QpStat>> {
        let mut all = Vec::new();
        let mut from_qpn = 0;
        loop {
            let page = self.inner.call(&Request::QpStatsPage { from_qpn }, &[]);
            match page {
                Ok((Reply::QpStatsPage { qps, next }, _)) => {
                    all.extend(qps);
                    match next {
                        None => return Ok(all),
                        Some(n) if n > from_qpn => from_qpn = n,
                        Some(n) => {
                            return Err(Error::Protocol(format!(
                                "the page after QP {from_qpn:#x} starts at {n:#x}"
                            )));
                        }
                    }
                }
                // A daemon older than paging: everything in one reply.
                Err(Error::Daemon { errno, message })
                    if from_qpn == 0
                        && errno == libc::EINVAL
                        && message.starts_with("undecodable request") =>
                {
                    return match self.inner.call(&Request::QpStats, &[])?.0 {
                        Reply::QpStats { qps } => Ok(qps),
                        other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
                    };
                }
                Ok((other, _)) => {
                    return Err(Error::Protocol(format!("unexpected reply {other:?}")));
                }
                Err(e) => return Err(e),
            }
        }
    }
}
