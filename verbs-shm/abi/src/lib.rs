//! The C ABI of libibverbs as rdma-core v44 defines it (Debian 12, Ubuntu 22.04/24.04,
//! RHEL 9): `#[repr(C)]` mirrors of the structures, unions and enumerations of
//! `<infiniband/verbs.h>` that the exported functions and the inline verbs.h code touch.
//!
//! This is the bottom layer of the drop-in `libibverbs.so.1` (crate `xroce-ibverbs`):
//! applications compiled against the real verbs.h read and write these structures directly
//! and call through their function pointers, so every size, alignment and offset must match
//! byte for byte. `build.rs` turns the measured layouts in `layout.txt` and
//! `layout-extra.txt` into compile-time assertions (see [`layout`]); a test compiles a C
//! program against the system's verbs.h, when installed, to re-measure them and every
//! enumerator in [`ENUMERATORS`].
//!
//! What this crate never does: allocate, call, or hold any state. It has no functions
//! beyond trivial accessors; it only describes memory.
//!
//! Naming: the mirrors keep their C names (`ibv_qp_attr`, `IBV_QPS_RTS`, field
//! `qp_num`), like the `libc` crate, so that verbs.h, the rdma-core man pages and this code
//! read the same. Members of anonymous C unions are described in [`work`]. Rust keywords
//! used as C field names are raw identifiers (`r#type`, `r#priv`). Enumerations are
//! integer type aliases plus constants (see `enums`). Function pointer fields are
//! `Option<unsafe extern "C" fn …>` (NULL is `None`).
//!
//! Only x86_64 Linux with glibc is described: `pthread_mutex_t` and friends differ
//! elsewhere.
//!
//! Modules: [`device`] (devices, contexts with their function tables, device and port
//! attributes, GIDs), [`resources`] (the objects a provider allocates: protection domains,
//! memory regions, CQs, QPs, SRQs, address handles and the rarer ones), [`attributes`]
//! (what applications fill to create, modify and query objects), [`work`] (work requests,
//! completions, events), [`enums`] (every enumeration and flag set with its values),
//! [`driver`] (the types of the provider-private interface), [`sync`] (the glibc
//! synchronisation types inside objects), [`layout`] (the compile-time proof of every
//! layout); the private `macros` write the mirrors. Everything is re-exported at the root.

#![no_std]
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

#[cfg(not(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu")))]
compile_error!("verbs-abi describes the x86_64 Linux glibc layout of rdma-core v44 only");

#[macro_use]
mod macros;

pub mod attributes;
pub mod device;
pub mod driver;
pub mod enums;
pub mod layout;
pub mod resources;
pub mod sync;
pub mod work;

pub use attributes::*;
pub use device::*;
pub use driver::*;
pub use enums::*;
pub use resources::*;
pub use sync::*;
pub use work::*;
