//! AF_XDP ports: one socket bound to one queue of one interface, with its own UMEM, and the
//! batched receive/transmit API the pollers run on.
//!
//! ```text
//! Port::open(&PortConfig::new("eth0", 0))      socket + UMEM, fill ring primed
//! xdp.insert_socket(0, port.as_fd())            RoCEv2 frames of queue 0 now arrive here
//! let (rx, tx) = port.split();
//! let batch = rx.poll();                         up to RX_BATCH frames, one ring access
//! for frame in batch.iter() { .. }               &[u8] views into the UMEM
//! drop(batch);                                   frames go back to the fill ring
//! if let Some(mut f) = tx.frame() {              a free UMEM frame
//!     let n = write_packet(f.buf());             &mut [u8] of FRAME_CAPACITY bytes
//!     f.submit(n);                               staged; every TX_BATCH: onto the TX ring
//! }
//! tx.flush();                                    staged frames onto the TX ring, kick if asked
//! tx.poll_completions();                         sent frames back to the free list
//! backoff.on_idle(rx)?                          spin, then yield, then poll(2) on the fd
//! ```
//!
//! Hot path rules: no allocation (every buffer is sized at open), no lock, no syscall per
//! packet. Syscalls happen only to kick the kernel when it asks (`need_wakeup`): a `sendto`
//! when the TX ring needs it (in copy mode the kernel sends at most 32 frames per kick), a
//! `poll` when the fill ring needs it, and `poll(2)` when a poller goes to sleep.
//!
//! Receive and transmit frames are separate pools: `rx_frames` live between the fill ring,
//! the RX ring and a [`RxBatch`]; `tx_frames` between the free list, the TX ring and the
//! completion ring. Neither can starve the other.
//!
//! Built on `xsk-rs` (libxdp's ring code), with libxdp's own XDP program inhibited: xroce
//! attaches its own program ([`crate::xdp`]) and puts the socket in its own XSKMAP.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use tracing::info;
use xsk_rs::config::{BindFlags, Interface, LibxdpFlags, QueueSize, SocketConfig};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue};

use crate::error_chain;
use crate::umem::{
    Backing, FRAME_CAPACITY, HugepagePolicy, RING_SLACK, Umem, UmemConfig, UmemError,
};

/// Most frames one [`Receiver::poll`] returns.
pub const RX_BATCH: usize = 64;
/// Staged transmit frames that trigger a [`Transmitter::flush`] on their own.
pub const TX_BATCH: usize = 64;
/// Completion ring entries reaped per ring access.
const COMPLETION_BATCH: usize = 256;

/// Whether to ask for zero-copy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ZeroCopy {
    /// Zero-copy where the driver supports it, copy mode otherwise (logged).
    #[default]
    Auto,
    /// Copy mode.
    Never,
    /// Zero-copy or an error.
    Required,
}

/// How the socket is bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BindMode {
    /// The driver DMAs straight into the UMEM.
    ZeroCopy,
    /// The kernel copies between its buffers and the UMEM (veth, generic XDP).
    Copy,
}

impl fmt::Display for BindMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindMode::ZeroCopy => "zero-copy",
            BindMode::Copy => "copy",
        })
    }
}

/// How to open a [`Port`].
#[derive(Clone, Debug)]
pub struct PortConfig {
    /// Interface name (in the calling thread's network namespace).
    pub interface: String,
    /// Queue id to bind to; the XDP program redirects the RoCEv2 frames of this queue here.
    pub queue: u32,
    /// Receive frames (= RX ring slots; the fill ring has twice as many). A power of two, at
    /// least 64.
    pub rx_frames: u32,
    /// Transmit frames (the TX and completion rings have twice as many slots). A power of
    /// two, at least 64.
    pub tx_frames: u32,
    /// Zero-copy or copy mode.
    pub zero_copy: ZeroCopy,
    /// Hugepages for the UMEM.
    pub hugepages: HugepagePolicy,
}

impl PortConfig {
    /// A port on `interface` queue `queue` with 2048 receive and 2048 transmit frames (16 MiB
    /// of UMEM), zero-copy and hugepages where available.
    pub fn new(interface: &str, queue: u32) -> PortConfig {
        PortConfig {
            interface: interface.to_owned(),
            queue,
            rx_frames: 2048,
            tx_frames: 2048,
            zero_copy: ZeroCopy::Auto,
            hugepages: HugepagePolicy::Auto,
        }
    }
}

/// What went wrong opening a port.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The UMEM could not be made.
    #[error(transparent)]
    Umem(#[from] UmemError),
    /// The interface name has a NUL byte.
    #[error("interface name {0:?} contains a NUL byte")]
    InterfaceName(String),
    /// The socket could not be created or bound.
    #[error(
        "opening an AF_XDP socket on {interface} queue {queue} failed: {reason} (it needs root \
         or CAP_NET_ADMIN + CAP_NET_RAW, and the queue must exist: see `ethtool -l {interface}`)"
    )]
    Socket {
        /// The interface.
        interface: String,
        /// The queue.
        queue: u32,
        /// What the kernel said, per mode tried.
        reason: String,
    },
}

/// What a port is: fixed at open.
#[derive(Clone, Debug)]
pub struct PortInfo {
    /// The interface.
    pub interface: String,
    /// The queue.
    pub queue: u32,
    /// Zero-copy or copy.
    pub bind_mode: BindMode,
    /// Hugepages or pages, and why.
    pub backing: Backing,
    /// Receive frames.
    pub rx_frames: u32,
    /// Transmit frames.
    pub tx_frames: u32,
}

/// Receive-side counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxCounters {
    /// Frames received.
    pub frames: u64,
    /// Bytes received (Ethernet header onwards, no FCS).
    pub bytes: u64,
    /// Polls that found the RX ring empty.
    pub empty_polls: u64,
    /// Polls that found frames while the fill ring was empty: the kernel had nowhere to put
    /// the next frame (it drops them and counts `rx_fill_ring_empty_descs`).
    pub fill_ring_empty: u64,
    /// Kicks (`poll`) because the fill ring asked for a wakeup.
    pub fill_kicks: u64,
    /// Times received frames could not go back to the fill ring at once and waited for the
    /// next poll (not expected: the fill ring has two slots per receive frame).
    pub fill_deferred: u64,
}

/// Transmit-side counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxCounters {
    /// Frames put on the TX ring.
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames reaped from the completion ring.
    pub completed: u64,
    /// Times [`Transmitter::frame`] found every transmit frame in flight (TX ring full).
    pub ring_full: u64,
    /// Kicks (`sendto`) because the TX ring asked for a wakeup.
    pub kicks: u64,
    /// Kicks that failed with something other than "busy, try again".
    pub kick_errors: u64,
    /// Frames submitted with a length of 0 or beyond the frame: not sent.
    pub bad_length: u64,
}

/// Both sides' counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Receive side.
    pub rx: RxCounters,
    /// Transmit side.
    pub tx: TxCounters,
}

/// The kernel's own counters for a socket (`XDP_STATISTICS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Frames dropped for reasons other than those below.
    pub rx_dropped: u64,
    /// Frames dropped because of an invalid descriptor.
    pub rx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame came.
    pub rx_fill_ring_empty_descs: u64,
    /// Invalid transmit descriptors.
    pub tx_invalid_descs: u64,
    /// Times the kernel found the TX ring empty when it looked.
    pub tx_ring_empty_descs: u64,
}

/// An AF_XDP socket bound to one queue, with its UMEM. Split it into its [`Receiver`] and
/// [`Transmitter`] with [`Port::split`] to receive and send in the same loop.
pub struct Port {
    rx: Receiver,
    tx: Transmitter,
    info: PortInfo,
    fd: RawFd,
    /// Keeps the UMEM's memory and registration alive for the views handed out.
    _umem: Umem,
}

impl fmt::Debug for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Port")
            .field("info", &self.info)
            .field("fd", &self.fd)
            .finish()
    }
}

impl Port {
    /// Opens an AF_XDP socket on `config.interface` queue `config.queue` (in the calling
    /// thread's network namespace): makes the UMEM, binds (zero-copy first where asked,
    /// copy mode otherwise, logged) without loading any XDP program, and primes the fill
    /// ring with every receive frame. Put it in the XSKMAP afterwards
    /// ([`crate::xdp::XdpProgram::insert_socket`]) to get frames.
    pub fn open(config: &PortConfig) -> Result<Port, PortError> {
        let interface: Interface = config
            .interface
            .parse()
            .map_err(|_| PortError::InterfaceName(config.interface.clone()))?;
        let umem_config = UmemConfig {
            rx_frames: config.rx_frames,
            tx_frames: config.tx_frames,
            hugepages: config.hugepages,
        };
        let socket_error = |reason: String| PortError::Socket {
            interface: config.interface.clone(),
            queue: config.queue,
            reason,
        };

        let mut umem = Umem::new(umem_config)?;
        let first = match config.zero_copy {
            ZeroCopy::Never => BindMode::Copy,
            ZeroCopy::Auto | ZeroCopy::Required => BindMode::ZeroCopy,
        };
        let (queues, bind_mode) = match bind(&umem, &interface, config, first) {
            Ok(queues) => (queues, first),
            Err(zc) if config.zero_copy == ZeroCopy::Auto => {
                info!(
                    "xsk: {} queue {}: zero-copy refused ({zc}); using copy mode",
                    config.interface, config.queue
                );
                // libxdp keeps the UMEM's registration and rings across a failed bind
                // (xsk-rs lends them and takes them back), so the same UMEM binds again: a
                // fresh one would wait for the kernel to unpin the old one's pages.
                let queues = bind(&umem, &interface, config, BindMode::Copy)
                    .map_err(|copy| socket_error(format!("zero-copy: {zc}; copy mode: {copy}")))?;
                (queues, BindMode::Copy)
            }
            Err(e) => return Err(socket_error(format!("{first}: {e}"))),
        };
        let (tx_queue, rx_queue, fill, completion) = queues;
        let fd = rx_queue.fd().as_raw_fd();

        // What the kernel actually did, rather than what was asked.
        let bind_mode = match bound_zero_copy(fd) {
            Ok(true) => BindMode::ZeroCopy,
            Ok(false) => BindMode::Copy,
            Err(_) => bind_mode,
        };

        let rx_frames = config.rx_frames as usize;
        let frames = std::mem::take(&mut umem.frames);
        let (rx_descs, tx_descs) = frames.split_at(rx_frames);
        let mut rx = Receiver {
            ring: rx_queue,
            fill,
            fd,
            umem: umem.inner.clone(),
            batch: vec![FrameDesc::default(); RX_BATCH].into_boxed_slice(),
            fill_size: config.rx_frames * RING_SLACK,
            deferred: Vec::with_capacity(rx_frames),
            counters: RxCounters::default(),
        };
        // Safety: the descriptors are the receive frames of this UMEM, owned by nobody else
        // yet; the fill ring has exactly `rx_frames` slots.
        let primed = unsafe { rx.fill.produce(rx_descs) };
        if primed != rx_frames {
            return Err(socket_error(format!(
                "priming the fill ring took {primed} of {rx_frames} frames"
            )));
        }
        let tx = Transmitter {
            ring: tx_queue,
            completion,
            umem: umem.inner.clone(),
            free: tx_descs.to_vec(),
            staged: Vec::with_capacity(TX_BATCH),
            completed: vec![FrameDesc::default(); COMPLETION_BATCH].into_boxed_slice(),
            in_flight: 0,
            counters: TxCounters::default(),
        };
        let info = PortInfo {
            interface: config.interface.clone(),
            queue: config.queue,
            bind_mode,
            backing: umem.backing.clone(),
            rx_frames: config.rx_frames,
            tx_frames: config.tx_frames,
        };
        info!(
            "xsk: {} queue {}: AF_XDP socket in {bind_mode} mode, UMEM on {}, {} rx + {} tx \
             frames",
            info.interface, info.queue, info.backing, info.rx_frames, info.tx_frames
        );
        Ok(Port {
            rx,
            tx,
            info,
            fd,
            _umem: umem,
        })
    }

    /// What the port is.
    pub fn info(&self) -> &PortInfo {
        &self.info
    }

    /// The receive side.
    pub fn rx(&mut self) -> &mut Receiver {
        &mut self.rx
    }

    /// The transmit side.
    pub fn tx(&mut self) -> &mut Transmitter {
        &mut self.tx
    }

    /// Both sides at once, to receive and transmit in one loop.
    pub fn split(&mut self) -> (&mut Receiver, &mut Transmitter) {
        (&mut self.rx, &mut self.tx)
    }

    /// Both sides' counters (plain reads, no syscall).
    pub fn counters(&self) -> PortCounters {
        PortCounters {
            rx: self.rx.counters,
            tx: self.tx.counters,
        }
    }

    /// The kernel's counters for the socket (one `getsockopt`).
    pub fn kernel_stats(&self) -> io::Result<KernelStats> {
        let zero = libc::xdp_statistics {
            rx_dropped: 0,
            rx_invalid_descs: 0,
            tx_invalid_descs: 0,
            rx_ring_full: 0,
            rx_fill_ring_empty_descs: 0,
            tx_ring_empty_descs: 0,
        };
        let stats = xdp_sockopt(self.fd, libc::XDP_STATISTICS, zero)?;
        Ok(KernelStats {
            rx_dropped: stats.rx_dropped,
            rx_invalid_descs: stats.rx_invalid_descs,
            rx_ring_full: stats.rx_ring_full,
            rx_fill_ring_empty_descs: stats.rx_fill_ring_empty_descs,
            tx_invalid_descs: stats.tx_invalid_descs,
            tx_ring_empty_descs: stats.tx_ring_empty_descs,
        })
    }

    /// Sleeps in `poll(2)` until the RX ring has frames or `timeout` passes; returns whether
    /// it has frames. Same as [`Receiver::wait`].
    pub fn wait_rx(&self, timeout: Duration) -> io::Result<bool> {
        self.rx.wait(timeout)
    }
}

impl AsRawFd for Port {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl AsFd for Port {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // Safety: the socket stays open as long as the port (its queues own it), and the
        // borrow cannot outlive `self`.
        unsafe { BorrowedFd::borrow_raw(self.fd) }
    }
}

type Queues = (TxQueue, RxQueue, FillQueue, CompQueue);

fn bind(
    umem: &Umem,
    interface: &Interface,
    config: &PortConfig,
    mode: BindMode,
) -> Result<Queues, String> {
    let size = |n: u32| QueueSize::new(n).map_err(|e| e.to_string());
    let mut bind_flags = BindFlags::XDP_USE_NEED_WAKEUP;
    bind_flags |= match mode {
        BindMode::ZeroCopy => BindFlags::XDP_ZEROCOPY,
        BindMode::Copy => BindFlags::XDP_COPY,
    };
    let socket_config = SocketConfig::builder()
        .rx_queue_size(size(config.rx_frames)?)
        .tx_queue_size(size(config.tx_frames * RING_SLACK)?)
        // xroce attaches its own XDP program and XSKMAP: libxdp must not load its default.
        .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
        .bind_flags(bind_flags)
        .build();
    // Safety: the UMEM is fresh (not shared), so the `(interface, queue)` pair is not bound
    // from it yet; program loading is inhibited as xsk-rs requires for shared use.
    let (tx, rx, rings) =
        unsafe { Socket::new(socket_config, &umem.inner, interface, config.queue) }
            .map_err(|e| error_chain(&e))?;
    let (fill, completion) = rings
        .ok_or_else(|| "libxdp returned no fill/completion rings for a new UMEM".to_owned())?;
    Ok((tx, rx, fill, completion))
}

/// Whether the kernel bound the socket in zero-copy mode (`XDP_OPTIONS`).
fn bound_zero_copy(fd: RawFd) -> io::Result<bool> {
    let options = xdp_sockopt(fd, libc::XDP_OPTIONS, libc::xdp_options { flags: 0 })?;
    Ok(options.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
}

/// `getsockopt(fd, SOL_XDP, option)` into a `T` (starting from `value`) that the kernel must
/// fill whole.
fn xdp_sockopt<T: Copy>(fd: RawFd, option: libc::c_int, mut value: T) -> io::Result<T> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // Safety: `value` is a writable, initialised `T` of `len` bytes and `len` a valid in/out
    // length; a bad fd or option only makes the call fail.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            option,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != size_of::<T>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "SOL_XDP option {option}: {len} bytes, expected {}",
                size_of::<T>()
            ),
        ));
    }
    Ok(value)
}

/// The receive side of a [`Port`]: the RX ring and the fill ring.
pub struct Receiver {
    ring: RxQueue,
    fill: FillQueue,
    fd: RawFd,
    umem: xsk_rs::Umem,
    /// The descriptors of the frames lent out by the current [`RxBatch`].
    batch: Box<[FrameDesc]>,
    fill_size: u32,
    /// Received frames that found no room in the fill ring, for the next poll.
    deferred: Vec<FrameDesc>,
    counters: RxCounters,
}

impl fmt::Debug for Receiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("counters", &self.counters)
            .finish()
    }
}

impl Receiver {
    /// Takes up to [`RX_BATCH`] received frames off the RX ring (one ring access). The
    /// frames go back to the fill ring when the returned batch is dropped. When the ring is
    /// empty and the kernel asked for a wakeup on the fill ring, kicks it.
    #[inline]
    pub fn poll(&mut self) -> RxBatch<'_> {
        // Safety: `batch` only ever holds descriptors of this UMEM, written by the RX ring of
        // a socket bound to it.
        let len = unsafe { self.ring.consume(&mut self.batch) };
        if len == 0 {
            self.counters.empty_polls += 1;
            if self.fill.needs_wakeup() {
                self.counters.fill_kicks += 1;
                let mut pollfd = libc::pollfd {
                    fd: self.fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // Safety: one valid pollfd, zero timeout: this only prods the driver.
                unsafe { libc::poll(&mut pollfd, 1, 0) };
            }
        } else {
            self.counters.frames += len as u64;
            for desc in &self.batch[..len] {
                self.counters.bytes += desc.lengths().data() as u64;
            }
            if self.fill.nb_free(self.fill_size) == self.fill_size {
                self.counters.fill_ring_empty += 1;
            }
        }
        RxBatch {
            receiver: self,
            len,
        }
    }

    /// The receive counters.
    pub fn counters(&self) -> &RxCounters {
        &self.counters
    }

    /// Sleeps in `poll(2)` until the RX ring has frames or `timeout` passes; returns whether
    /// it has frames. For an idle poller ([`Backoff`] calls it).
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let mut pollfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // Safety: one valid pollfd, the count says one.
        let ret = unsafe { libc::poll(&mut pollfd, 1, millis) };
        if ret < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        Ok(ret > 0 && pollfd.revents & libc::POLLIN != 0)
    }

    fn refill(&mut self, len: usize) {
        if !self.deferred.is_empty() {
            // Safety: deferred descriptors came off this UMEM's RX ring in earlier batches
            // and nothing refers to their frames any more.
            if unsafe { self.fill.produce(&self.deferred) } == self.deferred.len() {
                self.deferred.clear();
            }
        }
        if len == 0 {
            return;
        }
        // Safety: these descriptors came off this UMEM's RX ring and nothing refers to their
        // frames any more (the batch that lent them is being dropped).
        let produced = unsafe { self.fill.produce(&self.batch[..len]) };
        if produced != len {
            // Keep them (at most `rx_frames` ever: no allocation) rather than lose them.
            self.counters.fill_deferred += 1;
            self.deferred.extend_from_slice(&self.batch[..len]);
        }
    }
}

/// Frames received by one [`Receiver::poll`], in arrival order. Dropping the batch returns
/// the frames to the fill ring.
pub struct RxBatch<'a> {
    receiver: &'a mut Receiver,
    len: usize,
}

impl fmt::Debug for RxBatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RxBatch").field("len", &self.len).finish()
    }
}

impl RxBatch<'_> {
    /// Frames in the batch.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Frame `index` (Ethernet header onwards), or `None` past the end.
    #[inline]
    pub fn frame(&self, index: usize) -> Option<&[u8]> {
        let desc = self.receiver.batch[..self.len].get(index)?;
        // Safety: `desc` came off this UMEM's RX ring; the kernel does not touch the frame
        // until it is back on the fill ring, which happens only when this batch is dropped,
        // and the batch holds the receiver exclusively until then.
        let data = unsafe { self.receiver.umem.data(desc) };
        Some(data.contents())
    }

    /// The frames, in arrival order.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.len).filter_map(|i| self.frame(i))
    }
}

impl Drop for RxBatch<'_> {
    fn drop(&mut self) {
        self.receiver.refill(self.len);
    }
}

/// The transmit side of a [`Port`]: the TX ring, the completion ring and the free frames.
pub struct Transmitter {
    ring: TxQueue,
    completion: CompQueue,
    umem: xsk_rs::Umem,
    /// Transmit frames nobody uses: popped by [`Transmitter::frame`].
    free: Vec<FrameDesc>,
    /// Written frames not yet on the TX ring.
    staged: Vec<FrameDesc>,
    /// Scratch for reaping the completion ring.
    completed: Box<[FrameDesc]>,
    /// Frames on the TX ring or in the kernel, not yet completed.
    in_flight: usize,
    counters: TxCounters,
}

impl fmt::Debug for Transmitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transmitter")
            .field("free", &self.free.len())
            .field("staged", &self.staged.len())
            .field("in_flight", &self.in_flight)
            .field("counters", &self.counters)
            .finish()
    }
}

impl Transmitter {
    /// A free transmit frame to write a packet into, or `None` when every transmit frame is
    /// staged or in flight (counted as `ring_full`; reap with
    /// [`poll_completions`](Self::poll_completions) or wait). Reaps completions itself when
    /// the free list is empty.
    #[inline]
    pub fn frame(&mut self) -> Option<TxFrame<'_>> {
        // A full stage that could not be flushed must not grow (that would allocate).
        if self.staged.len() >= TX_BATCH && self.flush() == 0 {
            self.counters.ring_full += 1;
            return None;
        }
        if self.free.is_empty() {
            self.poll_completions();
        }
        let Some(mut desc) = self.free.pop() else {
            self.counters.ring_full += 1;
            return None;
        };
        // Safety: `desc` is a transmit frame of this UMEM that was on the free list: not on
        // any ring, and not lent to any other TxFrame.
        let mut data = unsafe { self.umem.data_mut(&mut desc) };
        let capacity = {
            let mut cursor = data.cursor();
            let capacity = cursor.buf_len();
            cursor.set_pos(capacity);
            capacity
        };
        debug_assert_eq!(capacity, FRAME_CAPACITY);
        let buf = data.contents_mut().as_mut_ptr();
        Some(TxFrame {
            transmitter: self,
            desc,
            buf,
            capacity,
            done: false,
        })
    }

    /// Copies `packet` into a free frame and submits it; `false` when no frame is free or the
    /// packet does not fit.
    pub fn send(&mut self, packet: &[u8]) -> bool {
        let Some(mut frame) = self.frame() else {
            return false;
        };
        let Some(dst) = frame.buf().get_mut(..packet.len()) else {
            frame.transmitter.counters.bad_length += 1;
            return false;
        };
        dst.copy_from_slice(packet);
        frame.submit(packet.len())
    }

    /// Puts every staged frame on the TX ring (one ring access) and kicks the kernel if it
    /// asked for a wakeup. Returns how many frames went on the ring.
    #[inline]
    pub fn flush(&mut self) -> usize {
        let len = self.staged.len();
        if len == 0 {
            return 0;
        }
        // Safety: staged descriptors are transmit frames of this UMEM, written and no longer
        // referenced by any TxFrame.
        let produced = unsafe { self.ring.produce(&self.staged) };
        if produced == 0 {
            // Cannot happen while the ring has a slot per transmit frame; keep them staged.
            self.counters.ring_full += 1;
            return 0;
        }
        for desc in &self.staged {
            self.counters.bytes += desc.lengths().data() as u64;
        }
        self.counters.frames += len as u64;
        self.in_flight += len;
        self.staged.clear();
        self.kick_if_asked();
        len
    }

    /// Moves sent frames from the completion ring back to the free list and returns how
    /// many. Kicks the kernel again while frames wait on the TX ring and it asks for it (in
    /// copy mode one kick sends at most 32 frames).
    #[inline]
    pub fn poll_completions(&mut self) -> usize {
        let mut total = 0;
        loop {
            // Safety: the completion ring of this UMEM only returns its own transmit frames.
            let n = unsafe { self.completion.consume(&mut self.completed) };
            self.free.extend_from_slice(&self.completed[..n]);
            total += n;
            if n < self.completed.len() {
                break;
            }
        }
        self.in_flight -= total.min(self.in_flight);
        self.counters.completed += total as u64;
        if self.in_flight > 0 {
            self.kick_if_asked();
        }
        total
    }

    /// Frames on the TX ring or in the kernel, not yet completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Frames submitted but not yet flushed to the TX ring.
    pub fn staged(&self) -> usize {
        self.staged.len()
    }

    /// Free transmit frames.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// The transmit counters.
    pub fn counters(&self) -> &TxCounters {
        &self.counters
    }

    #[inline]
    fn kick_if_asked(&mut self) {
        if self.ring.needs_wakeup() {
            self.counters.kicks += 1;
            // xsk-rs already treats EAGAIN/EBUSY/ENOBUFS/ENETDOWN as "try later".
            if self.ring.wakeup().is_err() {
                self.counters.kick_errors += 1;
            }
        }
    }

    fn stage(&mut self, mut desc: FrameDesc, len: usize) -> bool {
        // Safety: `desc` is the frame the finished TxFrame held; nothing else refers to it.
        let mut data = unsafe { self.umem.data_mut(&mut desc) };
        data.cursor().set_pos(len);
        self.staged.push(desc);
        if self.staged.len() >= TX_BATCH {
            self.flush();
        }
        true
    }
}

/// A free transmit frame lent by [`Transmitter::frame`]: write a packet into
/// [`buf`](Self::buf) and [`submit`](Self::submit) its length. Dropping it unsubmitted
/// returns the frame to the free list.
pub struct TxFrame<'a> {
    transmitter: &'a mut Transmitter,
    desc: FrameDesc,
    buf: *mut u8,
    capacity: usize,
    done: bool,
}

impl fmt::Debug for TxFrame<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TxFrame")
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl TxFrame<'_> {
    /// The frame's bytes: write the packet (Ethernet header first) at the start.
    #[inline]
    pub fn buf(&mut self) -> &mut [u8] {
        // Safety: `buf..buf+capacity` is this frame's packet area inside the UMEM mapping,
        // which the transmitter's UMEM handle keeps alive; the frame is on no ring and lent
        // only to this TxFrame, and `&mut self` keeps the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.buf, self.capacity) }
    }

    /// Bytes the frame holds: [`FRAME_CAPACITY`].
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Stages the first `len` bytes for transmission (they go on the TX ring at the next
    /// [`Transmitter::flush`], or at once when [`TX_BATCH`] frames are staged). A length of
    /// 0 or beyond the frame sends nothing, is counted as `bad_length` and returns `false`.
    #[inline]
    pub fn submit(mut self, len: usize) -> bool {
        self.done = true;
        if len == 0 || len > self.capacity {
            self.transmitter.counters.bad_length += 1;
            self.transmitter.free.push(self.desc);
            return false;
        }
        self.transmitter.stage(self.desc, len)
    }
}

impl Drop for TxFrame<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.transmitter.free.push(self.desc);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IdlePhase {
    Spin,
    Yield,
    Sleep,
}

/// Adaptive idling for a poller thread: spin while work is near, then yield the core, then
/// sleep in `poll(2)` on the port until frames arrive. Never spins forever: on a small
/// machine two spinners sharing a core turn microseconds into milliseconds.
#[derive(Clone, Debug)]
pub struct Backoff {
    spin: Duration,
    yield_until: Duration,
    sleep: Duration,
    idle_since: Option<Instant>,
    sleeps: u64,
}

impl Default for Backoff {
    /// Spin 50 µs, yield until 1 ms, then sleep in `poll(2)` 10 ms at a time.
    fn default() -> Self {
        Backoff::new(
            Duration::from_micros(50),
            Duration::from_millis(1),
            Duration::from_millis(10),
        )
    }
}

impl Backoff {
    /// Spin for `spin` after the last work, yield the core until `yield_until`, then sleep
    /// in `poll(2)` for up to `sleep` at a time.
    pub fn new(spin: Duration, yield_until: Duration, sleep: Duration) -> Backoff {
        Backoff {
            spin,
            yield_until,
            sleep,
            idle_since: None,
            sleeps: 0,
        }
    }

    /// The poller did something: start spinning again on the next idle round.
    #[inline]
    pub fn on_work(&mut self) {
        self.idle_since = None;
    }

    /// The poller found nothing to do: spin, yield or sleep on the RX ring of `rx`
    /// (`port.rx()`), depending on how long it has been idle.
    #[inline]
    pub fn on_idle(&mut self, rx: &Receiver) -> io::Result<()> {
        let idle = self.idle_since.get_or_insert_with(Instant::now).elapsed();
        match self.phase(idle) {
            IdlePhase::Spin => std::hint::spin_loop(),
            IdlePhase::Yield => std::thread::yield_now(),
            IdlePhase::Sleep => {
                self.sleeps += 1;
                rx.wait(self.sleep)?;
            }
        }
        Ok(())
    }

    fn phase(&self, idle: Duration) -> IdlePhase {
        if idle < self.spin {
            IdlePhase::Spin
        } else if idle < self.yield_until {
            IdlePhase::Yield
        } else {
            IdlePhase::Sleep
        }
    }

    /// Times the poller went to sleep in `poll(2)`.
    pub fn sleeps(&self) -> u64 {
        self.sleeps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_spins_then_yields_then_sleeps() {
        let backoff = Backoff::default();
        assert_eq!(backoff.phase(Duration::ZERO), IdlePhase::Spin);
        assert_eq!(backoff.phase(Duration::from_micros(49)), IdlePhase::Spin);
        assert_eq!(backoff.phase(Duration::from_micros(50)), IdlePhase::Yield);
        assert_eq!(backoff.phase(Duration::from_micros(999)), IdlePhase::Yield);
        assert_eq!(backoff.phase(Duration::from_millis(1)), IdlePhase::Sleep);
        assert_eq!(backoff.phase(Duration::from_secs(60)), IdlePhase::Sleep);
    }
}
