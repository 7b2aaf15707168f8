//! The devices this library lists, and the arrays `ibv_get_device_list` hands out.
//!
//! Devices are created once and never freed: verbs.h lets applications keep an
//! `ibv_device *` after `ibv_free_device_list` (to open it later) and compare pointers, so
//! their addresses must stay valid and stable for the life of the process. Every pointer
//! an application passes back is looked up here before it is read, so a foreign or stale
//! pointer is an `ENODEV`/`EINVAL`, never a wild read.
//!
//! Discovery: the devices are the xroce daemons serving the caller's network namespace
//! (`verbs_shm::client::devices`). A device seen for the first time is registered with the
//! node GUID its daemon reports (also one whose daemon does not let the user open it, as
//! rdma-core lists a kernel device whatever its node's mode); a list holds the registered
//! devices whose daemon is serving now.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int};
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError};

use verbs_abi::{IBV_NODE_CA, IBV_SYSFS_NAME_MAX, IBV_TRANSPORT_IB, ibv_device};

use crate::ffi::{Errno, Verb};

/// A device this library lists.
#[repr(C)]
struct Device {
    /// What applications see; first, so the `ibv_device *` is the `Device *`.
    ibv: ibv_device,
    /// Node GUID in host order.
    guid: u64,
    /// The index `ibv_get_device_index` reports.
    index: c_int,
}

/// A registered device. Registered devices are leaked, never written after registration,
/// and never freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DevicePtr(NonNull<Device>);

// Safety: the pointee is immutable after registration and lives forever, so sharing the
// pointer between threads shares only reads of immutable data.
unsafe impl Send for DevicePtr {}
// Safety: as for `Send`.
unsafe impl Sync for DevicePtr {}

impl DevicePtr {
    /// The pointer applications get for this device.
    fn as_ibv(self) -> *mut ibv_device {
        self.0.cast::<ibv_device>().as_ptr()
    }

    fn get(self) -> &'static Device {
        // Safety: registered devices are leaked boxes (valid forever) that nothing writes
        // after registration, so a shared reference for any lifetime is sound.
        unsafe { self.0.as_ref() }
    }
}

struct Registry {
    devices: Vec<DevicePtr>,
    /// Arrays handed out by [`list`], by address, with their length (terminator included).
    lists: BTreeMap<usize, usize>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    devices: Vec::new(),
    lists: BTreeMap::new(),
});

fn registry() -> MutexGuard<'static, Registry> {
    // A panic while holding the lock can only have interrupted a `Vec::push` or a
    // `BTreeMap` insert/remove, which leave the collections valid: keep using them.
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why a device could not be registered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RegisterError {
    /// The name does not fit `ibv_device::name` with its NUL, or contains a NUL.
    BadName,
    /// A device with this name is already listed.
    Duplicate,
}

/// Adds a device to the list: a RoCE channel adapter (`IBV_NODE_CA`, `IBV_TRANSPORT_IB`)
/// named `name`, with node GUID `guid` (host order) and index `index`.
pub(crate) fn register(
    name: &str,
    guid: u64,
    index: c_int,
) -> Result<*mut ibv_device, RegisterError> {
    if name.is_empty() || name.len() >= IBV_SYSFS_NAME_MAX || name.contains('\0') {
        return Err(RegisterError::BadName);
    }
    let mut registry = registry();
    if registry
        .devices
        .iter()
        .any(|d| d.get().ibv.name[..name.len() + 1] == c_name(name)[..])
    {
        return Err(RegisterError::Duplicate);
    }
    let mut ibv = ibv_device {
        node_type: IBV_NODE_CA,
        transport_type: IBV_TRANSPORT_IB,
        ..Default::default()
    };
    ibv.name[..=name.len()].copy_from_slice(&c_name(name));
    // Where rdma-core's devices have their sysfs directories. Nothing exists there for
    // xroce: tools that read optional sysfs files (`ibv_devinfo`'s board id) skip them.
    let dev_name = format!("uverbs-{name}");
    ibv.dev_name[..=dev_name.len()].copy_from_slice(&c_name(&dev_name));
    let dev_path = format!("/sys/class/infiniband_verbs/{dev_name}");
    ibv.dev_path[..=dev_path.len()].copy_from_slice(&c_name(&dev_path));
    let ibdev_path = format!("/sys/class/infiniband/{name}");
    ibv.ibdev_path[..=ibdev_path.len()].copy_from_slice(&c_name(&ibdev_path));
    let device = DevicePtr(NonNull::from(Box::leak(Box::new(Device {
        ibv,
        guid,
        index,
    }))));
    registry.devices.push(device);
    Ok(device.as_ibv())
}

/// `name` as C characters with its NUL terminator.
fn c_name(name: &str) -> Vec<c_char> {
    name.bytes().chain([0]).map(|b| b as c_char).collect()
}

/// A NULL-terminated array from [`list`].
#[derive(Debug)]
pub(crate) struct DeviceList {
    /// The array (`struct ibv_device **`).
    pub(crate) array: *mut *mut ibv_device,
    /// Devices in it, terminator excluded.
    pub(crate) count: c_int,
}

/// `ibv_get_device_list`: a new NULL-terminated array of the devices serving the caller's
/// network namespace now. A daemon that cannot be reached is left out.
pub(crate) fn list() -> Verb<DeviceList> {
    // No daemon (or no /proc) is an empty list, as rdma-core answers without devices.
    let names = verbs_shm::client::devices().unwrap_or_default();
    for name in &names {
        // A name too long for `ibv_device::name` cannot be listed (register refuses it).
        if name.len() >= IBV_SYSFS_NAME_MAX || registered(name) {
            continue;
        }
        // A device the user may not open is listed all the same, as rdma-core lists a
        // kernel device whose node the user may not open: opening it says why.
        let guid = match verbs_shm::client::Context::open(name) {
            Ok(ctx) => ctx.query_device(),
            Err(e) if e.errno() == libc::EACCES => verbs_shm::client::describe(name),
            Err(e) => Err(e),
        }
        .map(|attr| attr.node_guid);
        let Ok(guid) = guid else {
            continue;
        };
        let index = c_int::try_from(registry().devices.len()).map_err(|_| Errno::ENOMEM)?;
        // A concurrent discovery may have registered it meanwhile: either copy is fine.
        let _ = register(name, guid, index);
    }
    list_of(&names)
}

fn registered(name: &str) -> bool {
    name.len() < IBV_SYSFS_NAME_MAX
        && registry()
            .devices
            .iter()
            .any(|d| d.get().ibv.name[..name.len() + 1] == c_name(name)[..])
}

/// A new NULL-terminated array of the registered devices named in `names`.
pub(crate) fn list_of(names: &[String]) -> Verb<DeviceList> {
    let mut registry = registry();
    let present: Vec<*mut ibv_device> = registry
        .devices
        .iter()
        .filter(|d| {
            names.iter().any(|n| {
                n.len() < IBV_SYSFS_NAME_MAX && d.get().ibv.name[..n.len() + 1] == c_name(n)[..]
            })
        })
        .map(|d| d.as_ibv())
        .collect();
    let count = c_int::try_from(present.len()).map_err(|_| Errno::ENOMEM)?;
    let array: Box<[*mut ibv_device]> = present.into_iter().chain([std::ptr::null_mut()]).collect();
    let len = array.len();
    let array = Box::into_raw(array).cast::<*mut ibv_device>();
    registry.lists.insert(array as usize, len);
    Ok(DeviceList { array, count })
}

/// `ibv_free_device_list`: frees an array from [`list`]. NULL is ignored; anything else
/// that is not an outstanding array from [`list`] (a double free, a foreign pointer) is
/// refused with `EINVAL` and left alone.
pub(crate) fn free_list(array: *mut *mut ibv_device) -> Verb<()> {
    if array.is_null() {
        return Ok(());
    }
    let len = registry()
        .lists
        .remove(&(array as usize))
        .ok_or(Errno::EINVAL)?;
    let slice = std::ptr::slice_from_raw_parts_mut(array, len);
    // Safety: `array` and `len` come from `Box::into_raw` of a `Box<[*mut ibv_device]>` in
    // `list`, and removing it from `lists` under the lock guarantees it is freed only once.
    drop(unsafe { Box::from_raw(slice) });
    Ok(())
}

/// The listed device at `device`, or `ENODEV` if it is not one of ours.
fn lookup(device: *const ibv_device) -> Verb<&'static Device> {
    let registry = registry();
    let found = registry
        .devices
        .iter()
        .find(|d| d.as_ibv().cast_const() == device);
    found.map(|d| d.get()).ok_or(Errno::ENODEV)
}

/// `ibv_get_device_name`.
pub(crate) fn name(device: *const ibv_device) -> Verb<*const c_char> {
    Ok(lookup(device)?.ibv.name.as_ptr())
}

/// `ibv_get_device_guid`: the node GUID as a `__be64`.
pub(crate) fn guid(device: *const ibv_device) -> Verb<u64> {
    Ok(lookup(device)?.guid.to_be())
}

/// `ibv_get_device_index`.
pub(crate) fn index(device: *const ibv_device) -> Verb<c_int> {
    Ok(lookup(device)?.index)
}

/// The name of a listed device (what its daemon is called), or `ENODEV`.
pub(crate) fn name_string(device: *const ibv_device) -> Verb<String> {
    let d = lookup(device)?;
    let bytes: Vec<u8> = d
        .ibv
        .name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8(bytes).map_err(|_| Errno::ENODEV)
}

/// The name of a listed device, for diagnostics.
#[cfg(test)]
pub(crate) fn name_of(device: *const ibv_device) -> Option<&'static std::ffi::CStr> {
    lookup(device).ok().map(|d| {
        // Safety: `register` wrote a NUL-terminated name into the array.
        unsafe { std::ffi::CStr::from_ptr(d.ibv.name.as_ptr()) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(array: *mut *mut ibv_device, count: c_int) -> Vec<*mut ibv_device> {
        // Safety: `array` is a live array from `list` with `count` entries and a terminator.
        let all = unsafe { std::slice::from_raw_parts(array, count as usize + 1) };
        assert!(
            all[count as usize].is_null(),
            "the array is NULL-terminated"
        );
        all[..count as usize].to_vec()
    }

    // One test: the registry is process-global and tests run in parallel threads.
    #[test]
    fn registered_devices_are_listed_named_and_outlive_their_lists() {
        let foreign = ibv_device::default();
        assert_eq!(
            name(&foreign),
            Err(Errno::ENODEV),
            "a device we did not list"
        );
        assert_eq!(guid(std::ptr::null()), Err(Errno::ENODEV));

        let names: Vec<String> = vec!["xroce-test0".into(), "xroce-test1".into()];
        let before = list_of(&names).unwrap();
        let first = register("xroce-test0", 0x0200_00ff_fe00_0001, 7).unwrap();
        assert_eq!(register("xroce-test0", 1, 1), Err(RegisterError::Duplicate));
        assert_eq!(register(&"x".repeat(64), 1, 1), Err(RegisterError::BadName));
        assert_eq!(register("", 1, 1), Err(RegisterError::BadName));
        let second = register("xroce-test1", 2, 8).unwrap();

        let after = list_of(&names).unwrap();
        assert_eq!(after.count, before.count + 2);
        let only_first = list_of(&names[..1]).unwrap();
        assert_eq!(
            only_first.count, 1,
            "only devices whose daemon serves are listed"
        );
        assert_eq!(listed(only_first.array, 1), vec![first]);
        assert_eq!(free_list(only_first.array), Ok(()));
        assert_eq!(name_string(second), Ok("xroce-test1".to_string()));
        let too_long = list_of(&["x".repeat(100)]).unwrap();
        assert_eq!(
            too_long.count, 0,
            "a name that cannot be a device is no device"
        );
        assert_eq!(free_list(too_long.array), Ok(()));
        let devices = listed(after.array, after.count);
        assert!(devices.contains(&first) && devices.contains(&second));
        assert_eq!(name_of(first).unwrap(), c"xroce-test0");
        assert_eq!(guid(first), Ok(0x0200_00ff_fe00_0001u64.to_be()));
        assert_eq!(index(second), Ok(8));

        assert_eq!(free_list(after.array), Ok(()));
        assert_eq!(
            free_list(after.array),
            Err(Errno::EINVAL),
            "double free refused"
        );
        assert_eq!(free_list(before.array), Ok(()));
        assert_eq!(free_list(std::ptr::null_mut()), Ok(()));
        // Devices stay valid after their lists are freed.
        assert_eq!(name_of(second).unwrap(), c"xroce-test1");
        // Safety: `first` points at a leaked, never-freed device.
        assert_eq!(unsafe { (*first).node_type }, IBV_NODE_CA);
    }
}
