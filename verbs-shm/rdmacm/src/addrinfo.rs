//! `rdma_getaddrinfo` and `rdma_freeaddrinfo`, over libc's `getaddrinfo` as addrinfo.c
//! does when no ibacm service runs (xroce has none): the first address found, its QP type
//! and port space from the socket type and protocol (or the hints'), `RAI_PASSIVE` giving
//! a source address, `RAI_NUMERICHOST` no name lookup. No route (`ai_route`) or connection
//! data (`ai_connect`) is ever added. `AF_IB` addresses (`RAI_FAMILY` with `AF_IB`) do not
//! exist on RoCE: `EAFNOSUPPORT`.
//!
//! Everything is allocated with libc's allocator, field by field, as addrinfo.c does.

use std::ffi::{c_char, c_int, c_void};

use libc::{addrinfo, sockaddr, socklen_t};
use verbs_abi::{IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_RECV, IBV_QPT_XRC_SEND};

use crate::abi::{
    AF_IB, RAI_FAMILY, RAI_NUMERICHOST, RAI_PASSIVE, RDMA_PS_IB, RDMA_PS_IPOIB, RDMA_PS_TCP,
    RDMA_PS_UDP, rdma_addrinfo,
};
use crate::cma::{Cma, lock};
use crate::ffi::{Cm, Errno};

/// The `addrinfo` hints of rdma hints (addrinfo.c's `ucma_convert_to_ai`).
fn to_ai(hints: &rdma_addrinfo) -> addrinfo {
    // Safety: all-zero is an empty addrinfo.
    let mut ai: addrinfo = unsafe { std::mem::zeroed() };
    if hints.ai_flags & RAI_PASSIVE != 0 {
        ai.ai_flags = libc::AI_PASSIVE;
    }
    if hints.ai_flags & RAI_NUMERICHOST != 0 {
        ai.ai_flags |= libc::AI_NUMERICHOST;
    }
    if hints.ai_family != AF_IB {
        ai.ai_family = hints.ai_family;
    }
    match u32::try_from(hints.ai_qp_type).unwrap_or(0) {
        IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_XRC_SEND | IBV_QPT_XRC_RECV => {
            ai.ai_socktype = libc::SOCK_STREAM;
        }
        IBV_QPT_UD => ai.ai_socktype = libc::SOCK_DGRAM,
        _ => {}
    }
    ai.ai_protocol = match hints.ai_port_space {
        RDMA_PS_TCP => libc::IPPROTO_TCP,
        RDMA_PS_IPOIB | RDMA_PS_UDP => libc::IPPROTO_UDP,
        RDMA_PS_IB if ai.ai_socktype == libc::SOCK_STREAM => libc::IPPROTO_TCP,
        RDMA_PS_IB if ai.ai_socktype == libc::SOCK_DGRAM => libc::IPPROTO_UDP,
        _ => 0,
    };
    ai
}

/// A malloc'd copy of `len` bytes of an address.
///
/// # Safety
///
/// `src` holds `len` readable bytes.
unsafe fn copy_addr(src: *const sockaddr, len: socklen_t) -> Cm<*mut sockaddr> {
    let size = usize::try_from(len).map_err(|_| Errno::EINVAL)?;
    // Safety: malloc has no preconditions.
    let dst = unsafe { libc::malloc(size.max(1)) }.cast::<sockaddr>();
    if dst.is_null() {
        return Err(Errno::ENOMEM);
    }
    // Safety: `size` bytes from the caller's address into the new allocation.
    unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), dst.cast::<u8>(), size) };
    Ok(dst)
}

/// A malloc'd copy of a C string, or NULL.
///
/// # Safety
///
/// `s` is NULL or NUL-terminated.
unsafe fn copy_name(s: *const c_char) -> *mut c_char {
    if s.is_null() {
        return std::ptr::null_mut();
    }
    // Safety: NUL-terminated (caller).
    unsafe { libc::strdup(s) }
}

/// Fills `rai` from the first `addrinfo` answer (addrinfo.c's `ucma_convert_to_rai`).
///
/// # Safety
///
/// `ai` is an answer of libc's getaddrinfo.
unsafe fn from_ai(rai: &mut rdma_addrinfo, hints: &rdma_addrinfo, ai: &addrinfo) -> Cm<()> {
    rai.ai_qp_type = if hints.ai_qp_type != 0 {
        hints.ai_qp_type
    } else {
        match ai.ai_socktype {
            libc::SOCK_STREAM => IBV_QPT_RC as c_int,
            libc::SOCK_DGRAM => IBV_QPT_UD as c_int,
            _ => 0,
        }
    };
    rai.ai_port_space = if hints.ai_port_space != 0 {
        hints.ai_port_space
    } else {
        match ai.ai_protocol {
            libc::IPPROTO_TCP => RDMA_PS_TCP,
            libc::IPPROTO_UDP => RDMA_PS_UDP,
            _ => 0,
        }
    };
    rai.ai_family = ai.ai_family;
    if ai.ai_flags & libc::AI_PASSIVE != 0 {
        rai.ai_flags = RAI_PASSIVE;
        // Safety: libc's answer (caller).
        rai.ai_src_canonname = unsafe { copy_name(ai.ai_canonname) };
        // Safety: as above: `ai_addrlen` bytes at `ai_addr`.
        rai.ai_src_addr = unsafe { copy_addr(ai.ai_addr, ai.ai_addrlen) }?;
        rai.ai_src_len = ai.ai_addrlen;
    } else {
        // Safety: as above.
        rai.ai_dst_canonname = unsafe { copy_name(ai.ai_canonname) };
        // Safety: as above.
        rai.ai_dst_addr = unsafe { copy_addr(ai.ai_addr, ai.ai_addrlen) }?;
        rai.ai_dst_len = ai.ai_addrlen;
    }
    Ok(())
}

/// `rdma_getaddrinfo`: 0 with `*res` set, libc's `EAI_*` code when the name lookup
/// fails, or an error (`EINVAL` without node, service and hints; `ENODEV` without a
/// device, as cma.c's `ucma_init` answers).
///
/// # Safety
///
/// `node` and `service` are NULL or NUL-terminated; `hints` is NULL or valid with
/// addresses as long as their lengths say; `res` is valid for writing a pointer.
pub(crate) unsafe fn getaddrinfo(
    cma: &Cma,
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> Cm<c_int> {
    if (node.is_null() && service.is_null() && hints.is_null()) || res.is_null() {
        return Err(Errno::EINVAL);
    }
    cma.init()?;
    let none = rdma_addrinfo::default();
    // Safety: NULL or valid (caller).
    let given = unsafe { hints.as_ref() };
    let h = given.unwrap_or(&none);
    if h.ai_flags & RAI_FAMILY != 0 && h.ai_family == AF_IB {
        return Err(Errno(libc::EAFNOSUPPORT));
    }
    // Safety: calloc has no preconditions.
    let rai = unsafe { libc::calloc(1, size_of::<rdma_addrinfo>()) }.cast::<rdma_addrinfo>();
    if rai.is_null() {
        return Err(Errno::ENOMEM);
    }
    // Safety: zeroed memory of the right size is an empty rdma_addrinfo.
    let r = unsafe { &mut *rai };
    // Safety: the caller's strings and hints, and this allocation.
    let filled = unsafe { fill(r, node, service, given, h) };
    match filled {
        Ok(0) => {
            lock(&cma.addrinfos).insert(rai as usize);
            // Safety: writable (caller).
            unsafe { res.write(rai) };
            Ok(0)
        }
        other => {
            // Safety: made just above, never handed out.
            unsafe { free_one(rai) };
            other
        }
    }
}

/// The body of [`getaddrinfo`] once `rai` is allocated: `Ok(code)` with libc's code.
///
/// # Safety
///
/// As [`getaddrinfo`].
unsafe fn fill(
    rai: &mut rdma_addrinfo,
    node: *const c_char,
    service: *const c_char,
    given: Option<&rdma_addrinfo>,
    h: &rdma_addrinfo,
) -> Cm<c_int> {
    if !node.is_null() || !service.is_null() {
        let ai_hints = given.map(to_ai);
        let mut ai: *mut addrinfo = std::ptr::null_mut();
        let hints_ptr = ai_hints
            .as_ref()
            .map_or(std::ptr::null(), |a| a as *const addrinfo);
        // Safety: NULL or NUL-terminated strings (caller), NULL or local hints, a local
        // result pointer.
        let code = unsafe { libc::getaddrinfo(node, service, hints_ptr, &mut ai) };
        if code != 0 {
            return Ok(code);
        }
        // Safety: a successful getaddrinfo answers at least one entry.
        let first = unsafe { &*ai };
        // Safety: an entry of libc's answer.
        let converted = unsafe { from_ai(rai, h, first) };
        // Safety: the list getaddrinfo made.
        unsafe { libc::freeaddrinfo(ai) };
        converted?;
    } else {
        rai.ai_flags = h.ai_flags;
        rai.ai_family = h.ai_family;
        rai.ai_qp_type = h.ai_qp_type;
        rai.ai_port_space = h.ai_port_space;
        if h.ai_dst_len != 0 {
            // Safety: `ai_dst_len` bytes at `ai_dst_addr` (caller).
            rai.ai_dst_addr = unsafe { copy_addr(h.ai_dst_addr, h.ai_dst_len) }?;
            rai.ai_dst_len = h.ai_dst_len;
        }
    }
    if rai.ai_src_len == 0 && h.ai_src_len != 0 {
        // Safety: `ai_src_len` bytes at `ai_src_addr` (caller).
        rai.ai_src_addr = unsafe { copy_addr(h.ai_src_addr, h.ai_src_len) }?;
        rai.ai_src_len = h.ai_src_len;
    }
    Ok(0)
}

/// Frees one entry and what it owns.
///
/// # Safety
///
/// `rai` was allocated by [`getaddrinfo`] and is not used again.
unsafe fn free_one(rai: *mut rdma_addrinfo) {
    // Safety: an entry of ours (caller).
    let r = unsafe { &*rai };
    let owned: [*mut c_void; 6] = [
        r.ai_connect,
        r.ai_route,
        r.ai_src_canonname.cast(),
        r.ai_dst_canonname.cast(),
        r.ai_src_addr.cast(),
        r.ai_dst_addr.cast(),
    ];
    for p in owned {
        // Safety: NULL or malloc'd by this module.
        unsafe { libc::free(p) };
    }
    // Safety: calloc'd by `getaddrinfo`.
    unsafe { libc::free(rai.cast()) };
}

/// `rdma_freeaddrinfo`: the list `rdma_getaddrinfo` returned; anything else is `EINVAL`.
pub(crate) fn freeaddrinfo(cma: &Cma, res: *mut rdma_addrinfo) -> Cm<()> {
    if res.is_null() {
        return Ok(());
    }
    if !lock(&cma.addrinfos).remove(&(res as usize)) {
        return Err(Errno::EINVAL);
    }
    let mut next = res;
    while !next.is_null() {
        // Safety: entries of a list this library made (registered above), freed once.
        let following = unsafe { (*next).ai_next };
        // Safety: as above.
        unsafe { free_one(next) };
        next = following;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;
    use std::net::SocketAddr;

    use super::*;
    use crate::address;
    use crate::fake::{self, addr};

    /// `rdma_getaddrinfo` with these arguments: its code and the entry it made.
    fn lookup(
        cma: &Cma,
        node: Option<&CStr>,
        service: Option<&CStr>,
        hints: Option<&rdma_addrinfo>,
    ) -> Cm<(c_int, *mut rdma_addrinfo)> {
        let mut res: *mut rdma_addrinfo = std::ptr::null_mut();
        let hints = hints.map_or(std::ptr::null(), |h| h as *const rdma_addrinfo);
        // Safety: NUL-terminated strings or NULL, valid hints or NULL, a local result.
        let code = unsafe {
            getaddrinfo(
                cma,
                node.map_or(std::ptr::null(), CStr::as_ptr),
                service.map_or(std::ptr::null(), CStr::as_ptr),
                hints,
                &mut res,
            )
        }?;
        Ok((code, res))
    }

    /// The address an entry holds.
    fn read(addr: *const sockaddr) -> Option<SocketAddr> {
        // Safety: NULL or an address this module copied from libc's answer.
        unsafe { address::read_optional(addr) }.ok().flatten()
    }

    #[test]
    fn a_passive_lookup_gives_a_source_address_and_the_hints_port_space() {
        let (cma, _) = fake::cma(&["10.0.0.1"], 0);
        let hints = rdma_addrinfo {
            ai_flags: RAI_PASSIVE,
            ai_family: libc::AF_INET,
            ai_port_space: RDMA_PS_TCP,
            ..rdma_addrinfo::default()
        };
        let (code, res) = lookup(cma, None, Some(c"7471"), Some(&hints)).unwrap();
        assert_eq!(code, 0);
        // Safety: the entry just made.
        let r = unsafe { &*res };
        assert_eq!(r.ai_flags, RAI_PASSIVE);
        assert_eq!((r.ai_family, r.ai_port_space), (libc::AF_INET, RDMA_PS_TCP));
        assert_eq!(r.ai_qp_type, IBV_QPT_RC as c_int, "a stream socket is RC");
        assert_eq!(read(r.ai_src_addr), Some(addr("0.0.0.0:7471")));
        assert_eq!(r.ai_src_len, 16);
        assert!(r.ai_dst_addr.is_null() && r.ai_route.is_null() && r.ai_connect.is_null());
        freeaddrinfo(cma, res).unwrap();
        assert_eq!(freeaddrinfo(cma, res), Err(Errno::EINVAL), "freed once");
    }

    #[test]
    fn an_active_lookup_gives_a_destination_with_the_hints_qp_type() {
        let (cma, _) = fake::cma(&["10.0.0.1"], 0);
        let src = address::storage(Some(addr("10.0.0.1:0")));
        let hints = rdma_addrinfo {
            ai_flags: RAI_NUMERICHOST,
            ai_qp_type: IBV_QPT_UD as c_int,
            ai_port_space: RDMA_PS_UDP,
            ai_src_len: 16,
            ai_src_addr: (&raw const src).cast_mut().cast(),
            ..rdma_addrinfo::default()
        };
        let (code, res) = lookup(cma, Some(c"127.0.0.1"), Some(c"7174"), Some(&hints)).unwrap();
        assert_eq!(code, 0);
        // Safety: the entry just made.
        let r = unsafe { &*res };
        assert_eq!(r.ai_flags, 0);
        assert_eq!(
            (r.ai_qp_type, r.ai_port_space),
            (IBV_QPT_UD as c_int, RDMA_PS_UDP)
        );
        assert_eq!(read(r.ai_dst_addr), Some(addr("127.0.0.1:7174")));
        assert_eq!(
            read(r.ai_src_addr),
            Some(addr("10.0.0.1:0")),
            "the hints' source"
        );
        freeaddrinfo(cma, res).unwrap();
    }

    #[test]
    fn hints_alone_are_copied_and_failures_answer_as_librdmacm() {
        let (cma, _) = fake::cma(&["10.0.0.1"], 0);
        let dst = address::storage(Some(addr("[fd00::2]:20079")));
        let hints = rdma_addrinfo {
            ai_family: libc::AF_INET6,
            ai_port_space: RDMA_PS_TCP,
            ai_dst_len: 28,
            ai_dst_addr: (&raw const dst).cast_mut().cast(),
            ..rdma_addrinfo::default()
        };
        let (code, res) = lookup(cma, None, None, Some(&hints)).unwrap();
        assert_eq!(code, 0);
        // Safety: the entry just made.
        let r = unsafe { &*res };
        assert_eq!(read(r.ai_dst_addr), Some(addr("[fd00::2]:20079")));
        assert_ne!(
            r.ai_dst_addr.cast_const(),
            hints.ai_dst_addr.cast_const(),
            "a copy"
        );
        freeaddrinfo(cma, res).unwrap();

        // A name that is not a number, with RAI_NUMERICHOST: libc's code comes back.
        let numeric = rdma_addrinfo {
            ai_flags: RAI_NUMERICHOST,
            ..rdma_addrinfo::default()
        };
        let (code, res) = lookup(cma, Some(c"not-a-number"), None, Some(&numeric)).unwrap();
        assert_eq!((code, res), (libc::EAI_NONAME, std::ptr::null_mut()));
        assert_eq!(lookup(cma, None, None, None).err(), Some(Errno::EINVAL));
        let ib = rdma_addrinfo {
            ai_flags: RAI_FAMILY | RAI_NUMERICHOST,
            ai_family: AF_IB,
            ..rdma_addrinfo::default()
        };
        let refused = lookup(cma, Some(c"::1"), None, Some(&ib)).err();
        assert_eq!(refused, Some(Errno(libc::EAFNOSUPPORT)));
        let mut foreign = rdma_addrinfo::default();
        assert_eq!(freeaddrinfo(cma, &mut foreign), Err(Errno::EINVAL));
        assert_eq!(freeaddrinfo(cma, std::ptr::null_mut()), Ok(()));

        let (none, _) = fake::cma(&[], 0);
        let without = lookup(none, Some(c"127.0.0.1"), None, None).err();
        assert_eq!(
            without,
            Some(Errno::ENODEV),
            "cma.c's ucma_init finds no device"
        );
    }
}
