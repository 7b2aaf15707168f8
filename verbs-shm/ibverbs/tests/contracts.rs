//! The built library, loaded with `dlopen` and called through symbols looked up by name
//! and version (`dlvsym`), answers as each function's C contract says: the functions that
//! need no daemon give their real answers; calls on objects this library did not hand out
//! (NULL or foreign pointers) and unsupported verbs fail the way verbs.h documents for them
//! (NULL + `errno`, a positive errno value, -1 + `errno`, a negated errno value), never with
//! a silent success and never by reading through the pointer. (With a daemon, the
//! `ibverbs_*` tests of `xroce-tests` drive the real thing.)

mod common;

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};

use common::Library;
use verbs_abi::*;

/// The library, opened with `RTLD_NOW | RTLD_LOCAL`.
struct Loaded {
    handle: *mut c_void,
    _library: Library,
}

impl Loaded {
    fn open() -> Loaded {
        let library = Library::build();
        let path = CString::new(library.path.to_str().unwrap()).unwrap();
        // Safety: `path` is a NUL-terminated path; the library has no unsafe initialisers.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen {}", library.path.display());
        Loaded {
            handle,
            _library: library,
        }
    }

    /// The address of `name@version`.
    fn symbol(&self, name: &str, version: &str) -> *mut c_void {
        let (c_name, c_version) = (CString::new(name).unwrap(), CString::new(version).unwrap());
        // Safety: a live handle and NUL-terminated strings.
        let address = unsafe { libc::dlvsym(self.handle, c_name.as_ptr(), c_version.as_ptr()) };
        assert!(!address.is_null(), "{name}@{version} is defined");
        address
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        // Safety: the handle came from dlopen and nothing uses its symbols afterwards.
        unsafe { libc::dlclose(self.handle) };
    }
}

/// Looks up `name@version` as a function pointer of type `$ty`.
macro_rules! function {
    ($loaded:expr, $name:literal @ $version:literal as $ty:ty) => {{
        let address = $loaded.symbol($name, $version);
        // Safety: the symbol is the library's definition of this verbs.h function, whose
        // C signature `$ty` transcribes.
        unsafe { std::mem::transmute::<*mut c_void, $ty>(address) }
    }};
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

fn clear_errno() {
    // Safety: no preconditions.
    let slot = unsafe { libc::__errno_location() };
    // Safety: the calling thread's errno slot, valid for writes.
    unsafe { *slot = 0 };
}

#[test]
fn implemented_functions_give_real_answers() {
    let lib = Loaded::open();
    let get_list = function!(lib, "ibv_get_device_list" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device);
    let free_list = function!(lib, "ibv_free_device_list" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut *mut ibv_device));
    let mut count: c_int = -7;
    // Safety: a valid `int *`.
    let list = unsafe { get_list(&mut count) };
    assert!(!list.is_null(), "an empty list, not NULL");
    assert_eq!(count, 0);
    // Safety: the list holds its NULL terminator.
    assert!(unsafe { *list }.is_null());
    // Safety: a list from ibv_get_device_list, freed once.
    unsafe { free_list(list) };
    // Safety: NULL for `num_devices` is allowed.
    let list = unsafe { get_list(std::ptr::null_mut()) };
    // Safety: as above.
    unsafe { free_list(list) };

    let status_str = function!(lib, "ibv_wc_status_str" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(ibv_wc_status) -> *const c_char);
    // Safety: takes an integer.
    let text = unsafe { status_str(IBV_WC_RETRY_EXC_ERR) };
    // Safety: the function returns a static NUL-terminated string.
    let text = unsafe { CStr::from_ptr(text) };
    assert_eq!(text, c"transport retry counter exceeded");
    let to_mbps = function!(lib, "ibv_rate_to_mbps" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(ibv_rate) -> c_int);
    // Safety: takes an integer.
    assert_eq!(unsafe { to_mbps(IBV_RATE_100_GBPS) }, 103_125);
    let to_mult = function!(lib, "ibv_rate_to_mult" @ "IBVERBS_1.0"
        as unsafe extern "C" fn(ibv_rate) -> c_int);
    // Safety: takes an integer.
    assert_eq!(unsafe { to_mult(IBV_RATE_40_GBPS) }, 16);

    let fork_init =
        function!(lib, "ibv_fork_init" @ "IBVERBS_1.1" as unsafe extern "C" fn() -> c_int);
    let fork_status = function!(lib, "ibv_is_fork_initialized" @ "IBVERBS_1.13"
        as unsafe extern "C" fn() -> ibv_fork_status);
    // Safety: no arguments.
    assert_eq!(unsafe { fork_init() }, 0);
    // Safety: no arguments.
    assert_eq!(unsafe { fork_status() }, IBV_FORK_UNNEEDED);

    let register = function!(lib, "verbs_register_driver_34" @ "IBVERBS_PRIVATE_34"
        as unsafe extern "C" fn(*const verbs_device_ops));
    // Safety: the argument is ignored.
    unsafe { register(std::ptr::null()) };

    let read_file = function!(lib, "ibv_read_sysfs_file" @ "IBVERBS_1.0"
        as unsafe extern "C" fn(*const c_char, *const c_char, *mut c_char, usize) -> c_int);
    let dir = std::env::temp_dir().join(format!("xroce-contracts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("fw_ver"), "1.2.3\n").unwrap();
    let c_dir = CString::new(dir.to_str().unwrap()).unwrap();
    let mut buf = [0x55 as c_char; 16];
    // Safety: NUL-terminated strings and a buffer of the given size.
    let len = unsafe {
        read_file(
            c_dir.as_ptr(),
            c"fw_ver".as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    assert_eq!(len, 5);
    // Safety: the function NUL-terminated what it read.
    assert_eq!(unsafe { CStr::from_ptr(buf.as_ptr()) }, c"1.2.3");
    clear_errno();
    // Safety: as above; the file does not exist.
    let missing = unsafe {
        read_file(
            c_dir.as_ptr(),
            c"nope".as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    assert_eq!((missing, errno()), (-1, libc::ENOENT));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn invalid_and_unsupported_calls_fail_through_their_contracts() {
    let lib = Loaded::open();
    let mut foreign = ibv_device::default();

    let name = function!(lib, "ibv_get_device_name" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut ibv_device) -> *const c_char);
    clear_errno();
    // Safety: the library checks the pointer before reading it.
    assert!(unsafe { name(&mut foreign) }.is_null());
    assert_eq!(errno(), libc::ENODEV);
    let guid = function!(lib, "ibv_get_device_guid" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut ibv_device) -> u64);
    // Safety: as above.
    assert_eq!(unsafe { guid(&mut foreign) }, 0);
    let index = function!(lib, "ibv_get_device_index" @ "IBVERBS_1.9"
        as unsafe extern "C" fn(*mut ibv_device) -> c_int);
    // Safety: as above.
    assert_eq!(unsafe { index(&mut foreign) }, -1);

    // NULL + errno.
    let open = function!(lib, "ibv_open_device" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context);
    clear_errno();
    // Safety: the library looks pointers up before reading through them.
    assert!(unsafe { open(&mut foreign) }.is_null());
    assert_eq!(errno(), libc::ENODEV);
    let import = function!(lib, "ibv_import_device" @ "IBVERBS_1.10"
        as unsafe extern "C" fn(c_int) -> *mut ibv_context);
    clear_errno();
    // Safety: takes an integer.
    assert!(unsafe { import(3) }.is_null());
    assert_eq!(errno(), libc::EOPNOTSUPP, "unsupported");
    let alloc_pd = function!(lib, "ibv_alloc_pd" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd);
    clear_errno();
    // Safety: as above.
    assert!(unsafe { alloc_pd(std::ptr::null_mut()) }.is_null());
    assert_eq!(errno(), libc::EINVAL);
    let reg_mr = function!(lib, "ibv_reg_mr_iova2" @ "IBVERBS_1.8"
        as unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, u64, c_uint) -> *mut ibv_mr);
    clear_errno();
    let (pd, addr) = (std::ptr::null_mut(), std::ptr::null_mut());
    // Safety: as above.
    let mr = unsafe { reg_mr(pd, addr, 4096, 0, 0x100003) };
    assert!(mr.is_null());
    assert_eq!(errno(), libc::EINVAL);
    let to_qp_ex = function!(lib, "ibv_qp_to_qp_ex" @ "IBVERBS_1.6"
        as unsafe extern "C" fn(*mut ibv_qp) -> *mut ibv_qp_ex);
    // Safety: as above.
    assert!(unsafe { to_qp_ex(std::ptr::null_mut()) }.is_null());

    // A positive errno value.
    let modify_qp = function!(lib, "ibv_modify_qp" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int);
    // Safety: as above.
    let modified = unsafe { modify_qp(std::ptr::null_mut(), std::ptr::null_mut(), 0) };
    assert_eq!(modified, libc::EINVAL);
    let query_port = function!(lib, "ibv_query_port" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut ibv_context, u8, *mut _compat_ibv_port_attr) -> c_int);
    // Safety: as above.
    let queried = unsafe { query_port(std::ptr::null_mut(), 1, std::ptr::null_mut()) };
    assert_eq!(queried, libc::EINVAL);
    let cmd = function!(lib, "ibv_cmd_destroy_cq" @ "IBVERBS_PRIVATE_34"
        as unsafe extern "C" fn(*mut ibv_cq) -> c_int);
    // Safety: as above.
    assert_eq!(unsafe { cmd(std::ptr::null_mut()) }, libc::EOPNOTSUPP);

    // -1 + errno.
    let query_gid = function!(lib, "ibv_query_gid" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut ibv_gid) -> c_int);
    clear_errno();
    // Safety: as above.
    let queried = unsafe { query_gid(std::ptr::null_mut(), 1, 0, std::ptr::null_mut()) };
    assert_eq!(queried, -1);
    assert_eq!(errno(), libc::EINVAL);
    let cq_event = function!(lib, "ibv_get_cq_event" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut ibv_comp_channel, *mut *mut ibv_cq, *mut *mut c_void) -> c_int);
    // Safety: as above.
    let got = unsafe {
        cq_event(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(got, -1);

    // Negated errno values and ibv_rereg_mr's own code.
    let gid_table = function!(lib, "_ibv_query_gid_table" @ "IBVERBS_1.11"
        as unsafe extern "C" fn(*mut ibv_context, *mut ibv_gid_entry, usize, u32, usize) -> isize);
    // Safety: as above.
    let entries = unsafe { gid_table(std::ptr::null_mut(), std::ptr::null_mut(), 4, 0, 32) };
    assert_eq!(entries, -(libc::EINVAL as isize));
    let resolve = function!(lib, "ibv_resolve_eth_l2_from_gid" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut ibv_context, *mut ibv_ah_attr, *mut u8, *mut u16) -> c_int);
    // Safety: as above.
    let resolved = unsafe {
        resolve(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(resolved, -libc::EINVAL);
    let rereg = function!(lib, "ibv_rereg_mr" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut ibv_mr, c_int, *mut ibv_pd, *mut c_void, usize, c_int) -> c_int);
    clear_errno();
    // Safety: as above.
    let code = unsafe {
        rereg(
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            0,
        )
    };
    assert_eq!((code, errno()), (IBV_REREG_MR_ERR_INPUT, libc::EINVAL));

    // void: errno only.
    let ack = function!(lib, "ibv_ack_cq_events" @ "IBVERBS_1.1"
        as unsafe extern "C" fn(*mut ibv_cq, c_uint));
    clear_errno();
    // Safety: as above.
    unsafe { ack(std::ptr::null_mut(), 1) };
    assert_eq!(errno(), libc::EINVAL);
}
