//! Every exported function, with its exact C signature from rdma-core v44's rdma_cma.h,
//! rdma_verbs.h and rsocket.h.
//!
//! Each entry point is a thin shim: it runs its body inside one of the `crate::ffi`
//! guards (panic containment and the function's error contract), checks the pointers it
//! is given against the library's registries, and calls the implementation. The set of
//! `#[unsafe(no_mangle)]` items here must equal `abi/defsyms.txt`; `build.rs` checks both
//! directions and gives each its version.
//!
//! Functions that read or write through an argument beyond looking it up are
//! `unsafe extern "C" fn`s whose `# Safety` section states what rdma_cma.h requires of the
//! caller.

mod channel;
mod connection;
mod id;
mod multicast;
mod resources;
mod rsocket;

pub(crate) use channel::*;
pub(crate) use connection::*;
pub(crate) use id::*;
pub(crate) use multicast::*;
pub(crate) use resources::*;
pub(crate) use rsocket::*;
