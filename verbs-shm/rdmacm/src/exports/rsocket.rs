//! rsocket (rsocket.h): sockets over RDMA, a protocol of librdmacm's own on RC QPs, which
//! this library does not implement. Every function is exported with its signature, since
//! programs linked `BIND_NOW` import them even when they never call them (rping, ucmatose,
//! udaddy, cmtime and mckey import `rpoll` for an unused helper), and each answers -1 with
//! `errno` `ENOSYS` (`riowrite`, whose result is a `size_t`, answers `(size_t)-1`).
//!
//! None of them reads an argument.

use std::ffi::{c_int, c_void};

use libc::{fd_set, iovec, msghdr, nfds_t, off_t, pollfd, sockaddr, socklen_t, timeval};

use crate::ffi::{self, Errno};

/// `int rsocket(int domain, int type, int protocol)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rsocket(_domain: c_int, _type: c_int, _protocol: c_int) -> c_int {
    ffi::not_implemented()
}

/// `int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rbind(_socket: c_int, _addr: *const sockaddr, _len: socklen_t) -> c_int {
    ffi::not_implemented()
}

/// `int rlisten(int socket, int backlog)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rlisten(_socket: c_int, _backlog: c_int) -> c_int {
    ffi::not_implemented()
}

/// `int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn raccept(
    _socket: c_int,
    _addr: *mut sockaddr,
    _len: *mut socklen_t,
) -> c_int {
    ffi::not_implemented()
}

/// `int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rconnect(
    _socket: c_int,
    _addr: *const sockaddr,
    _len: socklen_t,
) -> c_int {
    ffi::not_implemented()
}

/// `int rshutdown(int socket, int how)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rshutdown(_socket: c_int, _how: c_int) -> c_int {
    ffi::not_implemented()
}

/// `int rclose(int socket)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rclose(_socket: c_int) -> c_int {
    ffi::not_implemented()
}

/// `ssize_t rrecv(int socket, void *buf, size_t len, int flags)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rrecv(
    _socket: c_int,
    _buf: *mut c_void,
    _len: usize,
    _flags: c_int,
) -> isize {
    ffi::not_implemented()
}

/// `ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr
/// *src_addr, socklen_t *addrlen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rrecvfrom(
    _socket: c_int,
    _buf: *mut c_void,
    _len: usize,
    _flags: c_int,
    _src_addr: *mut sockaddr,
    _addrlen: *mut socklen_t,
) -> isize {
    ffi::not_implemented()
}

/// `ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rrecvmsg(_socket: c_int, _msg: *mut msghdr, _flags: c_int) -> isize {
    ffi::not_implemented()
}

/// `ssize_t rsend(int socket, const void *buf, size_t len, int flags)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rsend(
    _socket: c_int,
    _buf: *const c_void,
    _len: usize,
    _flags: c_int,
) -> isize {
    ffi::not_implemented()
}

/// `ssize_t rsendto(int socket, const void *buf, size_t len, int flags, const struct
/// sockaddr *dest_addr, socklen_t addrlen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rsendto(
    _socket: c_int,
    _buf: *const c_void,
    _len: usize,
    _flags: c_int,
    _dest_addr: *const sockaddr,
    _addrlen: socklen_t,
) -> isize {
    ffi::not_implemented()
}

/// `ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rsendmsg(_socket: c_int, _msg: *const msghdr, _flags: c_int) -> isize {
    ffi::not_implemented()
}

/// `ssize_t rread(int socket, void *buf, size_t count)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rread(_socket: c_int, _buf: *mut c_void, _count: usize) -> isize {
    ffi::not_implemented()
}

/// `ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rreadv(_socket: c_int, _iov: *const iovec, _iovcnt: c_int) -> isize {
    ffi::not_implemented()
}

/// `ssize_t rwrite(int socket, const void *buf, size_t count)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rwrite(_socket: c_int, _buf: *const c_void, _count: usize) -> isize {
    ffi::not_implemented()
}

/// `ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rwritev(_socket: c_int, _iov: *const iovec, _iovcnt: c_int) -> isize {
    ffi::not_implemented()
}

/// `int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rpoll(_fds: *mut pollfd, _nfds: nfds_t, _timeout: c_int) -> c_int {
    ffi::not_implemented()
}

/// `int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct
/// timeval *timeout)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rselect(
    _nfds: c_int,
    _readfds: *mut fd_set,
    _writefds: *mut fd_set,
    _exceptfds: *mut fd_set,
    _timeout: *mut timeval,
) -> c_int {
    ffi::not_implemented()
}

/// `int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rgetpeername(
    _socket: c_int,
    _addr: *mut sockaddr,
    _len: *mut socklen_t,
) -> c_int {
    ffi::not_implemented()
}

/// `int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rgetsockname(
    _socket: c_int,
    _addr: *mut sockaddr,
    _len: *mut socklen_t,
) -> c_int {
    ffi::not_implemented()
}

/// `int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t
/// optlen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rsetsockopt(
    _socket: c_int,
    _level: c_int,
    _optname: c_int,
    _optval: *const c_void,
    _optlen: socklen_t,
) -> c_int {
    ffi::not_implemented()
}

/// `int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rgetsockopt(
    _socket: c_int,
    _level: c_int,
    _optname: c_int,
    _optval: *mut c_void,
    _optlen: *mut socklen_t,
) -> c_int {
    ffi::not_implemented()
}

/// `int rfcntl(int socket, int cmd, ...)`: the variable arguments are never read, so the
/// definition names the fixed ones only (the x86_64 calling convention passes them alike).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rfcntl(_socket: c_int, _cmd: c_int) -> c_int {
    ffi::not_implemented()
}

/// `off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn riomap(
    _socket: c_int,
    _buf: *mut c_void,
    _len: usize,
    _prot: c_int,
    _flags: c_int,
    _offset: off_t,
) -> off_t {
    ffi::not_implemented()
}

/// `int riounmap(int socket, void *buf, size_t len)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn riounmap(_socket: c_int, _buf: *mut c_void, _len: usize) -> c_int {
    ffi::not_implemented()
}

/// `size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn riowrite(
    _socket: c_int,
    _buf: *const c_void,
    _count: usize,
    _offset: off_t,
    _flags: c_int,
) -> usize {
    Errno::ENOSYS.set();
    usize::MAX
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_rsocket.rs"));
