//! Loading and attaching xroce's XDP program (`xroce_ebpf`), filling its XSKMAP and reading
//! its verdict counters.
//!
//! [`XdpProgram::load`] loads the embedded object with aya; [`XdpProgram::attach`] attaches it
//! to an interface by name, in native (driver) mode where the driver has it and in generic
//! (SKB) mode otherwise, and says which in the log; dropping the [`XdpProgram`] detaches it.
//! AF_XDP sockets are put in the XSKMAP by receive queue id with
//! [`XdpProgram::insert_socket`]. [`XdpProgram::test_run`] runs the program on a crafted frame
//! through `BPF_PROG_TEST_RUN`, with no network at all.
//!
//! Nothing here is on the per-packet path: the program runs in the kernel.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use aya::maps::{MapError, PerCpuArray, XskMap};
use aya::programs::{ProgramError, Xdp, XdpMode};
use aya::{Ebpf, EbpfLoader};
use tracing::{info, warn};
use xroce_ebpf::Counter;

use crate::error_chain;

/// How the program is (to be) attached to an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttachMode {
    /// Native XDP, run by the driver before any socket buffer exists.
    Native,
    /// Generic XDP, run by the kernel on socket buffers: works on every interface, slower.
    Generic,
}

impl AttachMode {
    /// `"native"` or `"generic"`, for logs and reports.
    pub const fn name(self) -> &'static str {
        match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        }
    }
}

impl fmt::Display for AttachMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which attach modes [`XdpProgram::attach`] may use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AttachRequest {
    /// Native where the driver supports it, generic otherwise (logged).
    #[default]
    Auto,
    /// Native only: fail if the driver refuses.
    Native,
    /// Generic only.
    Generic,
}

/// What went wrong loading, attaching or using the XDP program.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// The kernel refused the object or the program.
    #[error(
        "loading the XDP program failed: {0} (it needs root, or CAP_BPF + CAP_PERFMON + \
         CAP_NET_ADMIN, and a kernel with BTF and XDP support)"
    )]
    Load(String),
    /// No interface of that name in this network namespace.
    #[error("no network interface named {0:?} in this network namespace")]
    UnknownInterface(String),
    /// Neither native nor generic attach worked (or the requested one did not).
    #[error("attaching the XDP program to {interface} failed: {reason}")]
    Attach {
        /// The interface.
        interface: String,
        /// What the kernel said, per mode tried.
        reason: String,
    },
    /// The program is not attached, or already attached, where the call needs the other.
    #[error("the XDP program is {0}")]
    State(&'static str),
    /// A queue id outside the XSKMAP.
    #[error("queue {queue} is outside the XSKMAP (it has {entries} slots); load with more queues")]
    QueueOutOfRange {
        /// The queue id asked for.
        queue: u32,
        /// Slots in the map.
        entries: u32,
    },
    /// A map operation failed.
    #[error("XDP map {map}: {source}")]
    Map {
        /// The map's name.
        map: &'static str,
        /// What aya said.
        #[source]
        source: MapError,
    },
    /// `BPF_PROG_TEST_RUN` failed.
    #[error("BPF_PROG_TEST_RUN failed: {0}")]
    TestRun(#[source] io::Error),
}

/// The verdict counters of the program, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpCounters {
    values: [u64; Counter::COUNT],
}

impl XdpCounters {
    /// The value of one counter.
    pub fn get(&self, counter: Counter) -> u64 {
        self.values[counter.index() as usize]
    }

    /// Every counter with its value, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (Counter, u64)> + '_ {
        Counter::ALL.iter().map(|&c| (c, self.get(c)))
    }

    /// Frames the program has seen (the sum of all counters).
    pub fn total(&self) -> u64 {
        self.values.iter().sum()
    }

    /// `self - earlier`, counter by counter (saturating).
    pub fn since(&self, earlier: &XdpCounters) -> XdpCounters {
        let mut values = [0; Counter::COUNT];
        for (i, v) in values.iter_mut().enumerate() {
            *v = self.values[i].saturating_sub(earlier.values[i]);
        }
        XdpCounters { values }
    }
}

/// Where the program is attached.
#[derive(Debug)]
struct Attachment {
    interface: String,
    mode: AttachMode,
    link: aya::programs::xdp::XdpLinkId,
}

/// xroce's XDP program, loaded into the kernel and perhaps attached to one interface.
///
/// Dropping it detaches the program (if attached) and unloads it together with its maps.
#[derive(Debug)]
pub struct XdpProgram {
    ebpf: Ebpf,
    xsks_entries: u32,
    attachment: Option<Attachment>,
}

impl XdpProgram {
    /// Loads the program and its maps, with an XSKMAP of `queues` slots (receive queue ids
    /// `0..queues`). Nothing is attached yet.
    pub fn load(queues: u32) -> Result<Self, XdpError> {
        let queues = queues.max(1);
        let mut ebpf = EbpfLoader::new()
            .map_max_entries(xroce_ebpf::XSKS_MAP, queues)
            .load(xroce_ebpf::object())
            .map_err(|e| XdpError::Load(error_chain(&e)))?;
        let program = xdp_mut(&mut ebpf)?;
        program
            .load()
            .map_err(|e| XdpError::Load(error_chain(&e)))?;
        Ok(XdpProgram {
            ebpf,
            xsks_entries: queues,
            attachment: None,
        })
    }

    /// Attaches the program to `interface` (a name in the calling thread's network
    /// namespace). With [`AttachRequest::Auto`], native mode is tried first and generic mode
    /// is used when the driver refuses, with the reason logged. veth, for one, refuses
    /// native XDP when the peer's MTU is above 3504 bytes (a page minus headroom).
    ///
    /// The attachment is a BPF link on kernels that have them (5.9+): it goes when the
    /// program is dropped, from any thread. On older kernels aya falls back to netlink, and
    /// the program must then be dropped in the network namespace it was attached in.
    pub fn attach(
        &mut self,
        interface: &str,
        request: AttachRequest,
    ) -> Result<AttachMode, XdpError> {
        if self.attachment.is_some() {
            return Err(XdpError::State("already attached; drop it or detach first"));
        }
        let program = xdp_mut(&mut self.ebpf)?;
        let attempt = |program: &mut Xdp, mode: AttachMode| {
            let aya_mode = match mode {
                AttachMode::Native => XdpMode::Driver,
                AttachMode::Generic => XdpMode::Skb,
            };
            program.attach(interface, aya_mode)
        };
        let (mode, link) = match request {
            AttachRequest::Native | AttachRequest::Generic => {
                let mode = if request == AttachRequest::Native {
                    AttachMode::Native
                } else {
                    AttachMode::Generic
                };
                match attempt(program, mode) {
                    Ok(link) => (mode, link),
                    Err(e) => return Err(attach_error(interface, &[(mode, e)])),
                }
            }
            AttachRequest::Auto => match attempt(program, AttachMode::Native) {
                Ok(link) => (AttachMode::Native, link),
                Err(native) => {
                    if let ProgramError::UnknownInterface { .. } = native {
                        return Err(XdpError::UnknownInterface(interface.to_owned()));
                    }
                    warn!(
                        "xdp: native XDP on {interface} refused ({}); falling back to generic \
                         (SKB) mode",
                        error_chain(&native)
                    );
                    match attempt(program, AttachMode::Generic) {
                        Ok(link) => (AttachMode::Generic, link),
                        Err(generic) => {
                            return Err(attach_error(
                                interface,
                                &[(AttachMode::Native, native), (AttachMode::Generic, generic)],
                            ));
                        }
                    }
                }
            },
        };
        info!(
            "xdp: {} attached to {interface} in {mode} mode",
            xroce_ebpf::PROGRAM
        );
        self.attachment = Some(Attachment {
            interface: interface.to_owned(),
            mode,
            link,
        });
        Ok(mode)
    }

    /// Detaches the program from its interface (a no-op when not attached). Dropping the
    /// program does this too.
    pub fn detach(&mut self) -> Result<(), XdpError> {
        let Some(attachment) = self.attachment.take() else {
            return Ok(());
        };
        let program = xdp_mut(&mut self.ebpf)?;
        program
            .detach(attachment.link)
            .map_err(|e| XdpError::Attach {
                interface: attachment.interface.clone(),
                reason: format!("detaching: {}", error_chain(&e)),
            })?;
        info!(
            "xdp: {} detached from {}",
            xroce_ebpf::PROGRAM,
            attachment.interface
        );
        Ok(())
    }

    /// The interface and mode the program is attached with, if it is.
    pub fn attached(&self) -> Option<(&str, AttachMode)> {
        self.attachment
            .as_ref()
            .map(|a| (a.interface.as_str(), a.mode))
    }

    /// Slots in the XSKMAP: the receive queue ids `0..queues()` can have a socket.
    pub fn queues(&self) -> u32 {
        self.xsks_entries
    }

    /// Puts an AF_XDP socket in the XSKMAP slot of receive queue `queue`: from now on
    /// RoCEv2 frames arriving on that queue go to it. The socket must be bound to that
    /// queue of the attached interface, or the kernel drops what is redirected to it.
    pub fn insert_socket(&mut self, queue: u32, socket: BorrowedFd<'_>) -> Result<(), XdpError> {
        self.check_queue(queue)?;
        let mut map = self.xsks()?;
        map.set(queue, socket.as_raw_fd(), 0)
            .map_err(|source| XdpError::Map {
                map: xroce_ebpf::XSKS_MAP,
                source,
            })
    }

    /// Empties the XSKMAP slot of `queue`: its RoCEv2 frames pass to the kernel again.
    pub fn remove_socket(&mut self, queue: u32) -> Result<(), XdpError> {
        self.check_queue(queue)?;
        let mut map = self.xsks()?;
        match map.unset(queue) {
            Ok(()) => Ok(()),
            // An empty slot is what the caller wants.
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {
                Ok(())
            }
            Err(source) => Err(XdpError::Map {
                map: xroce_ebpf::XSKS_MAP,
                source,
            }),
        }
    }

    /// The verdict counters, summed over all CPUs.
    pub fn counters(&self) -> Result<XdpCounters, XdpError> {
        let map_err = |source| XdpError::Map {
            map: xroce_ebpf::COUNTERS_MAP,
            source,
        };
        let map = self
            .ebpf
            .map(xroce_ebpf::COUNTERS_MAP)
            .ok_or(XdpError::Load(format!(
                "the object has no {} map",
                xroce_ebpf::COUNTERS_MAP
            )))?;
        let array: PerCpuArray<_, u64> = PerCpuArray::try_from(map).map_err(map_err)?;
        let mut counters = XdpCounters::default();
        for counter in Counter::ALL {
            let per_cpu = array.get(&counter.index(), 0).map_err(map_err)?;
            counters.values[counter.index() as usize] = per_cpu.iter().sum();
        }
        Ok(counters)
    }

    /// The kernel's id for the loaded program (as `bpftool prog show` lists it).
    pub fn program_id(&self) -> Result<u32, XdpError> {
        let program = self.xdp()?;
        let info = program
            .info()
            .map_err(|e| XdpError::Load(error_chain(&e)))?;
        Ok(info.id())
    }

    /// Runs the program once on `frame` through `BPF_PROG_TEST_RUN`, as if it had arrived on
    /// receive queue 0 of no particular device, and returns its action (`XDP_PASS` = 2,
    /// `XDP_REDIRECT` = 4, ...). Counters move as for a real frame. The kernel refuses frames
    /// shorter than an Ethernet header (`EINVAL`).
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, XdpError> {
        let program = self.xdp()?;
        let fd = program.fd().map_err(|e| XdpError::Load(error_chain(&e)))?;
        prog_test_run(fd.as_fd(), frame).map_err(XdpError::TestRun)
    }

    fn check_queue(&self, queue: u32) -> Result<(), XdpError> {
        if queue >= self.xsks_entries {
            return Err(XdpError::QueueOutOfRange {
                queue,
                entries: self.xsks_entries,
            });
        }
        Ok(())
    }

    fn xsks(&mut self) -> Result<XskMap<&mut aya::maps::MapData>, XdpError> {
        let map = self
            .ebpf
            .map_mut(xroce_ebpf::XSKS_MAP)
            .ok_or(XdpError::Load(format!(
                "the object has no {} map",
                xroce_ebpf::XSKS_MAP
            )))?;
        XskMap::try_from(map).map_err(|source| XdpError::Map {
            map: xroce_ebpf::XSKS_MAP,
            source,
        })
    }

    fn xdp(&self) -> Result<&Xdp, XdpError> {
        let program = self
            .ebpf
            .program(xroce_ebpf::PROGRAM)
            .ok_or_else(no_program)?;
        program
            .try_into()
            .map_err(|e: ProgramError| XdpError::Load(error_chain(&e)))
    }
}

impl Drop for XdpProgram {
    fn drop(&mut self) {
        if let Err(e) = self.detach() {
            warn!("xdp: {e}");
        }
    }
}

fn xdp_mut(ebpf: &mut Ebpf) -> Result<&mut Xdp, XdpError> {
    let program = ebpf
        .program_mut(xroce_ebpf::PROGRAM)
        .ok_or_else(no_program)?;
    program
        .try_into()
        .map_err(|e: ProgramError| XdpError::Load(error_chain(&e)))
}

fn no_program() -> XdpError {
    XdpError::Load(format!("the object has no program {}", xroce_ebpf::PROGRAM))
}

fn attach_error(interface: &str, attempts: &[(AttachMode, ProgramError)]) -> XdpError {
    if let Some((_, ProgramError::UnknownInterface { .. })) = attempts.first() {
        return XdpError::UnknownInterface(interface.to_owned());
    }
    let reason = attempts
        .iter()
        .map(|(mode, e)| format!("{mode}: {}", error_chain(e)))
        .collect::<Vec<_>>()
        .join("; ");
    let hint = match attempts {
        [(AttachMode::Native, _)] => {
            " (the driver has no native XDP for this interface and configuration: try --xdp auto or generic)"
        }
        _ if reason.contains("busy") || reason.contains("exists") => {
            " (another XDP program is attached: `ip link set dev IFACE xdp off` removes it)"
        }
        _ => "",
    };
    XdpError::Attach {
        interface: interface.to_owned(),
        reason: reason + hint,
    }
}

/// The `test` member of `union bpf_attr` (include/uapi/linux/bpf.h) for `BPF_PROG_TEST_RUN`.
#[repr(C)]
#[derive(Default)]
struct ProgTestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

const BPF_PROG_TEST_RUN: libc::c_long = 10;

/// `bpf(BPF_PROG_TEST_RUN)` on an XDP program with `frame` as its packet; returns the
/// program's return value. aya 0.14 does not wrap this command.
fn prog_test_run(program: BorrowedFd<'_>, frame: &[u8]) -> io::Result<u32> {
    let len = u32::try_from(frame.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too long"))?;
    let mut attr = ProgTestRunAttr {
        // NOTE(unwrap): an open fd is never negative.
        prog_fd: u32::try_from(program.as_raw_fd()).expect("fds are non-negative"),
        data_size_in: len,
        data_in: frame.as_ptr() as u64,
        repeat: 1,
        ..ProgTestRunAttr::default()
    };
    // Safety: `attr` is a valid, fully initialised `bpf_attr.test` of the size passed; the
    // kernel reads `len` bytes from `frame` (alive for the call) and writes only `attr`
    // (no data_out/ctx_out buffers are given).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            &mut attr as *mut ProgTestRunAttr,
            size_of::<ProgTestRunAttr>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(attr.retval)
}

/// XDP action values (`enum xdp_action`, include/uapi/linux/bpf.h).
pub mod action {
    /// `XDP_ABORTED`
    pub const ABORTED: u32 = 0;
    /// `XDP_DROP`
    pub const DROP: u32 = 1;
    /// `XDP_PASS`
    pub const PASS: u32 = 2;
    /// `XDP_TX`
    pub const TX: u32 = 3;
    /// `XDP_REDIRECT`
    pub const REDIRECT: u32 = 4;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prog_test_run_attr_has_the_kernel_layout() {
        // include/uapi/linux/bpf.h: data_in at 16, repeat at 32, ctx_in at 48, flags at 64,
        // batch_size at 72.
        assert_eq!(std::mem::offset_of!(ProgTestRunAttr, data_in), 16);
        assert_eq!(std::mem::offset_of!(ProgTestRunAttr, repeat), 32);
        assert_eq!(std::mem::offset_of!(ProgTestRunAttr, ctx_in), 48);
        assert_eq!(std::mem::offset_of!(ProgTestRunAttr, flags), 64);
        assert_eq!(std::mem::offset_of!(ProgTestRunAttr, batch_size), 72);
    }

    #[test]
    fn counters_since_subtracts_per_counter() {
        let mut a = XdpCounters::default();
        let mut b = XdpCounters::default();
        a.values[0] = 10;
        a.values[3] = 4;
        b.values[0] = 7;
        b.values[3] = 9;
        let d = a.since(&b);
        assert_eq!(d.get(Counter::Redirected), 3);
        assert_eq!(d.get(Counter::PassNotUdp), 0);
        assert_eq!(a.total(), 14);
    }
}
