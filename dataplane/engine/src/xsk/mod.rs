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
//! Multi-buffer ([`PortConfig::multi_buffer`], for links whose frames do not fit one UMEM
//! frame): the socket is bound with `XDP_USE_SG` and a packet spans up to
//! [`MAX_PARTS`](crate::umem::MAX_PARTS) frames. On receive the parts are put together
//! ([`RxBatch`] lends whole packets only); on transmit each frame is a pair of neighbouring
//! UMEM frames written as one buffer, and a packet longer than one frame goes on the TX ring
//! as two descriptors, the first marked `XDP_PKT_CONTD` (see [`Transmitter`]).
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
use std::time::Duration;

use tracing::info;
use xsk_rs::config::{BindFlags, Interface, LibxdpFlags, QueueSize, SocketConfig};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue};

mod backoff;
mod receive;
mod transmit;

pub use backoff::Backoff;
pub use receive::{Receiver, RxBatch};
pub use transmit::{Transmitter, TxFrame};

use crate::error_chain;
use crate::umem::{Backing, HugepagePolicy, RING_SLACK, Umem, UmemConfig, UmemError};

/// Most frames one [`Receiver::poll`] returns.
pub const RX_BATCH: usize = 64;
/// Staged transmit frames that trigger a [`Transmitter::flush`] on their own.
pub const TX_BATCH: usize = 64;
/// Completion ring entries reaped per ring access.
const COMPLETION_BATCH: usize = 256;
/// The descriptor option that says more parts of the packet follow (`XDP_PKT_CONTD`,
/// include/uapi/linux/if_xdp.h).
pub(crate) const XDP_PKT_CONTD: u32 = 1;

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
    /// AF_XDP multi-buffer (`XDP_USE_SG`): packets up to
    /// [`MULTI_BUFFER_CAPACITY`](crate::umem::MULTI_BUFFER_CAPACITY) bytes (a 4096-byte path
    /// MTU) instead of [`FRAME_CAPACITY`](crate::umem::FRAME_CAPACITY); transmit frames take
    /// twice the UMEM.
    pub multi_buffer: bool,
}

impl PortConfig {
    /// A port on `interface` queue `queue` with 2048 receive and 2048 transmit frames (16 MiB
    /// of UMEM), zero-copy and hugepages where available, no multi-buffer.
    pub fn new(interface: &str, queue: u32) -> PortConfig {
        PortConfig {
            interface: interface.to_owned(),
            queue,
            rx_frames: 2048,
            tx_frames: 2048,
            zero_copy: ZeroCopy::Auto,
            hugepages: HugepagePolicy::Auto,
            multi_buffer: false,
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
    /// Whether packets may span several frames (`XDP_USE_SG`).
    pub multi_buffer: bool,
}

impl PortInfo {
    /// The longest packet the port receives or sends (Ethernet header onwards).
    pub fn max_packet(&self) -> usize {
        if self.multi_buffer {
            crate::umem::MULTI_BUFFER_CAPACITY
        } else {
            crate::umem::FRAME_CAPACITY
        }
    }
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
    /// Packets put together from several frames (multi-buffer).
    pub multi_buffer_packets: u64,
    /// Packets longer than the port takes
    /// ([`MULTI_BUFFER_CAPACITY`](crate::umem::MULTI_BUFFER_CAPACITY)): dropped.
    pub oversized: u64,
}

/// Transmit-side counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxCounters {
    /// Frames (descriptors) put on the TX ring.
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
    /// Packets sent in two frames (multi-buffer).
    pub multi_buffer_packets: u64,
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
            multi_buffer: config.multi_buffer,
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
            assembly: config
                .multi_buffer
                .then(|| Box::new(receive::Assembly::new())),
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
        let parts = umem_config.tx_parts() as usize;
        let tx = Transmitter {
            ring: tx_queue,
            completion,
            umem: umem.inner.clone(),
            // With multi-buffer, a transmit frame is a pair of neighbouring UMEM frames,
            // known by its first.
            free: tx_descs.iter().step_by(parts).copied().collect(),
            staged: Vec::with_capacity(TX_BATCH * parts),
            completed: vec![FrameDesc::default(); COMPLETION_BATCH].into_boxed_slice(),
            in_flight: 0,
            pairs: (parts > 1).then(|| transmit::Pairs::new(tx_descs, rx_frames)),
            counters: TxCounters::default(),
        };
        let info = PortInfo {
            interface: config.interface.clone(),
            queue: config.queue,
            bind_mode,
            backing: umem.backing.clone(),
            rx_frames: config.rx_frames,
            tx_frames: config.tx_frames,
            multi_buffer: config.multi_buffer,
        };
        info!(
            "xsk: {} queue {}: AF_XDP socket in {bind_mode} mode, UMEM on {}, {} rx + {} tx \
             frames, packets up to {} bytes{}",
            info.interface,
            info.queue,
            info.backing,
            info.rx_frames,
            info.tx_frames,
            info.max_packet(),
            if info.multi_buffer {
                " (multi-buffer)"
            } else {
                ""
            }
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
    if config.multi_buffer {
        bind_flags |= BindFlags::XDP_USE_SG;
    }
    let tx_chunks = if config.multi_buffer {
        config.tx_frames * crate::umem::MAX_PARTS as u32
    } else {
        config.tx_frames
    };
    bind_flags |= match mode {
        BindMode::ZeroCopy => BindFlags::XDP_ZEROCOPY,
        BindMode::Copy => BindFlags::XDP_COPY,
    };
    let socket_config = SocketConfig::builder()
        .rx_queue_size(size(config.rx_frames)?)
        .tx_queue_size(size(tx_chunks * RING_SLACK)?)
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
