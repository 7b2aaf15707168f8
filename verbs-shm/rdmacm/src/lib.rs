//! A drop-in `librdmacm.so.1`: unmodified rdma_cm programs (rping, ucmatose, udaddy,
//! cmtime, rdma_server/rdma_client, perftest's `-R`, fio, libfabric, UCX, librpma,
//! pyverbs, anything linked against rdma-core v44's librdmacm) load this library instead of
//! rdma-core's, through `LD_LIBRARY_PATH` beside the drop-in `libibverbs.so.1`, and connect
//! over xroce.
//!
//! It plays the role of rdma-core's `cma.c`: the connection manager itself (the CM
//! protocol on QP1, port spaces, address and route resolution, timers) runs in the daemon,
//! which this library asks over a control connection of its own (`verbs_shm::cm`, the
//! kernel's `rdma_cm` device to cma.c) and hears through event channels. Here: the ids and
//! their C structures, the devices (the libibverbs devices whose names are daemons'), the
//! verbs objects of ids (made through the process's libibverbs, so the application uses
//! them with libibverbs), the QP's state changes around a connection, synchronous ids, and
//! `rdma_getaddrinfo`.
//!
//! The layers: the exact exported symbol set with exact versions (`abi/defsyms.txt`, see
//! `build.rs`); the structure mirrors, their layouts asserted at compile time from a
//! measurement (`abi`, `abi/layout.txt`); the entry points with their C signatures
//! (`exports`); the C error contracts and panic containment (`ffi`); and the implementation
//! (the other modules).
//!
//! What it never does: let a panic unwind into the application; read through an id, event
//! channel, event, device list or address list pointer that it did not hand out (those are
//! `EINVAL`); link libibverbs or open kernel RDMA devices (`/dev/infiniband/rdma_cm`); talk
//! to ibacm; implement rsocket.
//!
//! Modules, from the C boundary inwards:
//!
//! - `exports`: the 68 entry points; `ffi`: errno and the guards; `abi`: the mirrors and
//!   constants of rdma_cma.h.
//! - `id`: ids, their addresses, options and channels; `connection`: connect, accept,
//!   reject, disconnect and the QP's states; `event`: records become events (cma.c's
//!   `rdma_get_cm_event`); `qp`: the id's QP, CQs and SRQ; `endpoint`: `rdma_create_ep`,
//!   `rdma_get_request`; `addrinfo`: `rdma_getaddrinfo`; `multicast`: joins and leaves of
//!   multicast groups.
//! - `channel`: event channels over one socket per daemon; `device`: the device list;
//!   `daemon`: the connection to a daemon (a trait, faked in tests); `verbs`: the
//!   libibverbs functions, found at run time; `address`: socket addresses; `cma`: the state
//!   and registries.
//! - Tests only: `fake` (fake daemons and libibverbs functions), `flows`, `handshakes` and
//!   `joins` (whole flows against them), `system_header` (the layouts against rdma_cma.h).
//!
//! `XROCE_RDMACM_DEBUG=1` prints every refusal of a daemon to stderr (a C caller sees only
//! the errno). cma.c does not re-initialise after `fork`, and neither does this library.
//!
//! # The 68 functions
//!
//! | functions | status |
//! |---|---|
//! | `rdma_create_event_channel`, `rdma_destroy_event_channel`, `rdma_get_cm_event`, `rdma_ack_cm_event`, `rdma_event_str` | implemented (the channel's descriptor polls, epolls and honours `O_NONBLOCK`) |
//! | `rdma_create_id`, `rdma_destroy_id`, `rdma_migrate_id`, `rdma_bind_addr`, `rdma_resolve_addr`, `rdma_resolve_route`, `rdma_listen`, `rdma_set_option` (`TOS`, `REUSEADDR`, `AFONLY`, `ACK_TIMEOUT`), `rdma_get_src_port`, `rdma_get_dst_port` | implemented |
//! | `rdma_connect`, `rdma_accept`, `rdma_reject`, `rdma_disconnect`, `rdma_notify`, `rdma_establish`, `rdma_init_qp_attr` | implemented |
//! | `rdma_create_qp`, `rdma_create_qp_ex`, `rdma_destroy_qp`, `rdma_create_srq`, `rdma_create_srq_ex`, `rdma_destroy_srq` | implemented; XRC: `EOPNOTSUPP` (xroce has no XRC domains) |
//! | `rdma_create_ep`, `rdma_destroy_ep`, `rdma_get_request` | implemented; `ai_route` (ibacm paths): `EOPNOTSUPP` |
//! | `rdma_get_devices`, `rdma_free_devices` | implemented |
//! | `rdma_getaddrinfo`, `rdma_freeaddrinfo` | implemented over libc's `getaddrinfo` (no ibacm); `AF_IB`: `EAFNOSUPPORT` |
//! | `rdma_set_local_ece`, `rdma_get_remote_ece`, `rdma_reject_ece` | `EOPNOTSUPP` after cma.c's argument checks: xroce devices have no ECE (enhanced connection establishment is a vendor extension) |
//! | `rdma_join_multicast`, `rdma_join_multicast_ex` | implemented, as Linux's rdma_cm on RoCE v2: `MULTICAST_JOIN` carries the group's address vector (MGID `::ffff:a.b.c.d`) and the join's `context`, and the id's QP is attached to the group when the event is read (not for a send-only join); an IPv6 group: `ENOTSUPP` (524) |
//! | `rdma_leave_multicast` | implemented: the QP detached, the daemon told, the join's events waited for; `EADDRNOTAVAIL` for an address not joined |
//! | `rsocket`, `rbind`, `rlisten`, `raccept`, `rconnect`, `rshutdown`, `rclose`, `rrecv`, `rrecvfrom`, `rrecvmsg`, `rsend`, `rsendto`, `rsendmsg`, `rread`, `rreadv`, `rwrite`, `rwritev`, `rpoll`, `rselect`, `rgetpeername`, `rgetsockname`, `rsetsockopt`, `rgetsockopt`, `rfcntl`, `riomap`, `riounmap`, `riowrite` | -1 with `ENOSYS`: rsocket (sockets over RDMA, librdmacm's own protocol) is not implemented; the symbols exist so that programs linked `BIND_NOW` load |
//!
//! Where this library differs from cma.c over the kernel's rdma_cm: `rdma_resolve_addr`
//! fails at once with `ENODEV` when it cannot tell which device reaches the destination
//! (several devices and none on the route) instead of reporting `ADDR_ERROR`; a wildcard
//! bind takes its port from the first device's daemon; an event the library itself turns
//! into an error (`ADDR_ERROR`, `ROUTE_ERROR`, `CONNECT_ERROR`, `MULTICAST_ERROR`) has a
//! negative errno as its status where cma.c puts -1; a synchronous id's
//! `rdma_leave_multicast` acknowledges the join's event the id keeps (cma.c would wait for
//! it for ever), and `rdma_destroy_id` detaches a QP the id still has from its groups
//! (cma.c leaves that to the QP's destruction); and NULL or foreign pointers are `EINVAL`
//! where cma.c would read through them.

mod abi;
mod address;
mod addrinfo;
mod channel;
mod cma;
mod connection;
mod daemon;
mod device;
mod endpoint;
mod event;
mod exports;
#[cfg(test)]
mod fake;
mod ffi;
#[cfg(test)]
mod flows;
#[cfg(test)]
mod handshakes;
mod id;
#[cfg(test)]
mod joins;
mod multicast;
mod qp;
#[cfg(test)]
mod system_header;
mod verbs;

/// The version script's companion: a compile-time check that every symbol of
/// `abi/defsyms.txt` has an entry point (generated by `build.rs`).
mod symbols {
    include!(concat!(env!("OUT_DIR"), "/symbols.rs"));
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_symbol_table_has_rdma_core_v44s_68_functions() {
        assert_eq!(super::symbols::EXPORTED_SYMBOLS, 68);
    }

    #[test]
    fn every_measured_layout_line_is_asserted() {
        // 11 structures with size and alignment, 90 fields with offset and size.
        assert_eq!(super::abi::layout::LAYOUT_ASSERTIONS, 202);
    }
}
