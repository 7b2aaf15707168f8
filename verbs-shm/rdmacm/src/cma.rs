//! The library's state, as cma.c's globals: the libibverbs functions, the device list, and
//! the registries of the objects handed to the application.
//!
//! Every pointer an application passes back (an id, a channel, an event, a device list) is
//! looked up in its registry before anything reads through it, so a stale or foreign
//! pointer is `EINVAL`, not a crash. Ids are also found by their daemon handle: the
//! records of an event channel name the daemon's id, and [`Ids::by_handle`] maps
//! `(device, daemon id)` to the library's.
//!
//! One [`Cma`] serves the process ([`Cma::global`]); tests build their own with fake
//! libibverbs functions and fake daemons. cma.c does not re-initialise after `fork`, and
//! neither does this library: a child shares the parent's daemon connections, as it would
//! share the kernel's `rdma_cm` descriptor.

use std::collections::{HashMap, HashSet};
use std::ffi::c_int;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use verbs_abi::ibv_context;

use crate::channel::Channel;
use crate::daemon::{self, Connector};
use crate::device::{self, Device};
use crate::ffi::{Cm, Errno};
use crate::verbs::Verbs;

/// Live ids by address, and by daemon handle.
#[derive(Debug, Default)]
pub(crate) struct Ids {
    /// The address of every live id (its `rdma_cm_id`).
    pub(crate) live: HashSet<usize>,
    /// `(device index, daemon id)` → the id's address.
    pub(crate) by_handle: HashMap<(usize, u64), usize>,
}

/// The library's state.
#[derive(Debug)]
pub(crate) struct Cma {
    load: fn() -> Cm<Verbs>,
    pub(crate) connect: Connector,
    verbs: OnceLock<Cm<Verbs>>,
    devices: Mutex<Vec<Arc<Device>>>,
    /// Live ids.
    pub(crate) ids: Mutex<Ids>,
    /// Live event channels, by address.
    pub(crate) channels: Mutex<HashMap<usize, Arc<Channel>>>,
    /// Events handed out and not acknowledged, by address.
    pub(crate) events: Mutex<HashSet<usize>>,
    /// Lists `rdma_get_devices` handed out, by address.
    pub(crate) device_lists: Mutex<HashSet<usize>>,
    /// Lists `rdma_getaddrinfo` handed out, by address.
    pub(crate) addrinfos: Mutex<HashSet<usize>>,
}

/// Locks `mutex`, carrying on after a panic elsewhere poisoned it: every structure behind
/// these locks is left consistent between statements, and the C caller must not be denied
/// service because an earlier call failed.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // NOTE(unwrap): see above; poisoning is tolerated knowingly.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Cma {
    pub(crate) fn new(load: fn() -> Cm<Verbs>, connect: Connector) -> Cma {
        Cma {
            load,
            connect,
            verbs: OnceLock::new(),
            devices: Mutex::new(Vec::new()),
            ids: Mutex::default(),
            channels: Mutex::default(),
            events: Mutex::default(),
            device_lists: Mutex::default(),
            addrinfos: Mutex::default(),
        }
    }

    /// The process's state: the libibverbs the process has, and xroce's daemons.
    ///
    /// A forked child starts afresh: the state it inherited holds its parent's connections
    /// to the daemons (a process's requests on another's socket would take its replies)
    /// and its parent's ids. It is left as it is, never used or freed, as a child of a
    /// process using the kernel's rdma_cm cannot use its parent's ids either.
    pub(crate) fn global() -> &'static Cma {
        static GLOBAL: Mutex<Option<(u32, &'static Cma)>> = Mutex::new(None);
        let pid = std::process::id();
        let mut global = lock(&GLOBAL);
        match *global {
            Some((owner, cma)) if owner == pid => cma,
            _ => {
                let cma: &'static Cma = Box::leak(Box::new(Cma::new(Verbs::load, daemon::connect)));
                *global = Some((pid, cma));
                cma
            }
        }
    }

    /// The libibverbs functions.
    pub(crate) fn verbs(&self) -> Cm<&Verbs> {
        self.verbs.get_or_init(self.load).as_ref().map_err(|e| *e)
    }

    /// cma.c's `ucma_init`: the device list, read if it is still empty; `ENODEV` when no
    /// device is listed.
    pub(crate) fn init(&self) -> Cm<()> {
        if !lock(&self.devices).is_empty() {
            return Ok(());
        }
        self.sync_devices()?;
        if lock(&self.devices).is_empty() {
            return Err(Errno::ENODEV);
        }
        Ok(())
    }

    /// Adds the devices listed now that the list does not have yet.
    pub(crate) fn sync_devices(&self) -> Cm<()> {
        let listed = device::list(self.verbs()?)?;
        let mut devices = lock(&self.devices);
        for (name, ibv_device) in listed {
            if !devices.iter().any(|d| d.name == name) {
                let index = devices.len();
                devices.push(Arc::new(Device::new(index, name, ibv_device)));
            }
        }
        Ok(())
    }

    /// Every device that opens (opening each on first use), in list order.
    pub(crate) fn live_devices(&self) -> Cm<Vec<Arc<Device>>> {
        let verbs = self.verbs()?;
        let devices: Vec<Arc<Device>> = lock(&self.devices).clone();
        Ok(devices
            .into_iter()
            .filter(|device| device.open(verbs, self.connect).is_some())
            .collect())
    }

    /// The live device whose GID table has `ip`, and its GID index.
    pub(crate) fn device_with_address(&self, ip: IpAddr) -> Cm<Option<(Arc<Device>, u8)>> {
        Ok(self
            .live_devices()?
            .into_iter()
            .find_map(|device| device.gid_index(ip).map(|index| (device, index))))
    }

    /// `rdma_get_devices`: the context of every live device (the list read again first, as
    /// cma.c does), in a NULL-terminated array of libc's allocator; `*count` gets their
    /// number.
    pub(crate) fn get_devices(&self, count: Option<&mut c_int>) -> Cm<*mut *mut ibv_context> {
        let listed = self.init().and_then(|()| self.sync_devices());
        let live = listed.and_then(|()| self.live_devices());
        let contexts: Vec<*mut ibv_context> = match &live {
            Ok(devices) => devices
                .iter()
                .filter_map(|d| d.opened().map(|o| o.verbs.0))
                .collect(),
            Err(_) => Vec::new(),
        };
        if let Some(count) = count {
            *count = if live.is_ok() {
                c_int::try_from(contexts.len()).unwrap_or(c_int::MAX)
            } else {
                0
            };
        }
        live?;
        let bytes = size_of::<*mut ibv_context>() * (contexts.len() + 1);
        // Safety: malloc has no preconditions.
        let array = unsafe { libc::malloc(bytes) }.cast::<*mut ibv_context>();
        if array.is_null() {
            return Err(Errno::ENOMEM);
        }
        for (i, context) in contexts
            .iter()
            .copied()
            .chain([std::ptr::null_mut()])
            .enumerate()
        {
            let slot = array.wrapping_add(i);
            // Safety: the array has room for every context and the NULL after them.
            unsafe { slot.write(context) };
        }
        lock(&self.device_lists).insert(array as usize);
        Ok(array)
    }

    /// `rdma_free_devices`: frees a list `rdma_get_devices` returned (the devices stay).
    pub(crate) fn free_devices(&self, list: *mut *mut ibv_context) -> Cm<()> {
        if !lock(&self.device_lists).remove(&(list as usize)) {
            return Err(Errno::EINVAL);
        }
        // Safety: malloc'd by `get_devices` and unregistered just now.
        unsafe { libc::free(list.cast()) };
        Ok(())
    }
}
