//! Devices: the libibverbs devices whose names are daemons', opened once, as cma.c's
//! `cma_device` list.
//!
//! A device is listed by `ibv_get_device_list`, then opened on first use: its daemon is
//! connected (the library's own control connection, [`Daemon`]) and its `ibv_context` is
//! opened with `ibv_open_device`; that context is every id's `verbs` on the device and what
//! `rdma_get_devices` returns. A device whose daemon cannot be reached (a kernel device of
//! rdma-core's libibverbs, a daemon gone) is dead and skipped. The protection domain all
//! ids of a device share is allocated with the first id that gets the device and
//! deallocated with the last, as cma.c does.
//!
//! Which device has an address is read from its GID table: an IPv4 address `a.b.c.d` is
//! the GID `::ffff:a.b.c.d`, an IPv6 address its own 16 bytes.

use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};

use verbs_abi::{ibv_context, ibv_device, ibv_pd};

use crate::cma::lock;
use crate::daemon::{self, Daemon};
use crate::ffi::{Cm, Errno};
use crate::verbs::Verbs;

/// A raw pointer to a libibverbs object, shared between threads as libibverbs allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ptr<T>(pub(crate) *mut T);

// Safety: the pointers are libibverbs objects (device, context, PD), which libibverbs lets
// any thread use; this library never dereferences them itself beyond what verbs.h does.
unsafe impl<T> Send for Ptr<T> {}
// Safety: as above.
unsafe impl<T> Sync for Ptr<T> {}

/// A device that was opened: its context and daemon, and the limits ids check.
#[derive(Debug)]
pub(crate) struct Open {
    /// The context every id of the device has as `verbs`.
    pub(crate) verbs: Ptr<ibv_context>,
    /// The library's connection to the device's daemon.
    pub(crate) daemon: Arc<dyn Daemon>,
    /// `max_qp_init_rd_atom`: what `RDMA_MAX_INIT_DEPTH` stands for.
    pub(crate) max_initiator_depth: u8,
    /// `max_qp_rd_atom`: what `RDMA_MAX_RESP_RES` stands for.
    pub(crate) max_responder_resources: u8,
}

/// The shared protection domain and how many ids use it.
#[derive(Debug)]
struct SharedPd {
    pd: Ptr<ibv_pd>,
    users: usize,
}

/// One device of the list.
#[derive(Debug)]
pub(crate) struct Device {
    /// Its place in the list (stable: the list only grows).
    pub(crate) index: usize,
    /// Its name, which is its daemon's.
    pub(crate) name: String,
    ibv_device: Ptr<ibv_device>,
    open: OnceLock<Option<Open>>,
    pd: Mutex<SharedPd>,
}

impl Device {
    pub(crate) fn new(index: usize, name: String, ibv_device: *mut ibv_device) -> Device {
        Device {
            index,
            name,
            ibv_device: Ptr(ibv_device),
            open: OnceLock::new(),
            pd: Mutex::new(SharedPd {
                pd: Ptr(std::ptr::null_mut()),
                users: 0,
            }),
        }
    }

    /// The opened device, opening it on first use; `None` when it is dead.
    pub(crate) fn open(&self, verbs: &Verbs, connect: daemon::Connector) -> Option<&Open> {
        self.open
            .get_or_init(|| self.open_now(verbs, connect))
            .as_ref()
    }

    /// The opened device, if it was opened and is alive.
    pub(crate) fn opened(&self) -> Option<&Open> {
        self.open.get().and_then(Option::as_ref)
    }

    fn open_now(&self, verbs: &Verbs, connect: daemon::Connector) -> Option<Open> {
        let daemon = match connect(&self.name) {
            Ok(d) => d,
            Err(e) => {
                daemon::refused_open(&self.name, &e);
                return None;
            }
        };
        let attr = match daemon.device() {
            Ok(a) => a,
            Err(e) => {
                daemon::errno(&self.name, "query device", &e);
                return None;
            }
        };
        // Safety: a device of the loaded libibverbs' list, never freed by this library.
        let context = unsafe { (verbs.open_device)(self.ibv_device.0) };
        if context.is_null() {
            return None;
        }
        Some(Open {
            verbs: Ptr(context),
            daemon,
            max_initiator_depth: u8::try_from(attr.max_qp_init_rd_atom).unwrap_or(u8::MAX),
            max_responder_resources: u8::try_from(attr.max_qp_rd_atom).unwrap_or(u8::MAX),
        })
    }

    /// The index of `ip` in the device's GID table, if the device has that address.
    pub(crate) fn gid_index(&self, ip: IpAddr) -> Option<u8> {
        let open = self.opened()?;
        let port = match open.daemon.port() {
            Ok(p) => p,
            Err(e) => {
                daemon::errno(&self.name, "query port", &e);
                return None;
            }
        };
        let gid = gid_of(ip);
        let index = port.gids.iter().position(|g| *g == gid)?;
        u8::try_from(index).ok()
    }

    /// The shared protection domain, allocated for the first id that gets the device
    /// (cma.c's `ucma_get_device`).
    pub(crate) fn acquire_pd(&self, verbs: &Verbs) -> Cm<*mut ibv_pd> {
        let open = self.opened().ok_or(Errno::ENODEV)?;
        let mut shared = lock(&self.pd);
        if shared.pd.0.is_null() {
            // Safety: the context this device opened.
            let pd = unsafe { (verbs.alloc_pd)(open.verbs.0) };
            if pd.is_null() {
                return Err(Errno::last());
            }
            shared.pd = Ptr(pd);
        }
        shared.users += 1;
        Ok(shared.pd.0)
    }

    /// One id less uses the device; the last one deallocates the PD (cma.c's
    /// `ucma_put_device`, which ignores a failure as well).
    pub(crate) fn release_pd(&self, verbs: &Verbs) {
        let mut shared = lock(&self.pd);
        shared.users = shared.users.saturating_sub(1);
        if shared.users == 0 && !shared.pd.0.is_null() {
            // Safety: the PD this device allocated, no longer shared by any id.
            unsafe { (verbs.dealloc_pd)(shared.pd.0) };
            shared.pd = Ptr(std::ptr::null_mut());
        }
    }
}

/// The RoCE v2 GID of an IP address.
pub(crate) fn gid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The devices `ibv_get_device_list` shows now, by name; the lists are kept, as cma.c
/// keeps its `dev_list` (its entries stay valid while listed).
pub(crate) fn list(verbs: &Verbs) -> Cm<Vec<(String, *mut ibv_device)>> {
    let mut count = 0;
    // Safety: `count` is a valid int.
    let list = unsafe { (verbs.get_device_list)(&mut count) };
    if list.is_null() {
        return Err(Errno::ENODEV);
    }
    let mut devices = Vec::new();
    for i in 0..usize::try_from(count).unwrap_or(0) {
        let slot = list.wrapping_add(i);
        // Safety: the list has `count` entries and a NULL after them.
        let device = unsafe { *slot };
        if device.is_null() {
            break;
        }
        // Safety: a listed device.
        if let Some(name) = unsafe { verbs.device_name(device) } {
            devices.push((name, device));
        }
    }
    Ok(devices)
}
