//! Every exported function (and the one exported variable), with its exact C signature
//! from rdma-core v44's verbs.h and driver.h.
//!
//! Each entry point is a thin shim: it runs its body inside one of the `crate::ffi`
//! guards, which catches panics and applies the function's error contract, and calls
//! `crate::provider`. The set of `#[unsafe(no_mangle)]` items here must equal
//! `abi/defsyms.txt`; `build.rs` checks both directions and gives each its version.
//!
//! Functions that never dereference an argument are safe `extern "C" fn`s (any pointer
//! value is acceptable to them); those that do are `unsafe extern "C" fn`s whose
//! `# Safety` section states what verbs.h requires of the caller.

mod completion;
mod device;
mod kernel_provider;
mod legacy;
mod memory;
mod query;
mod queue_pair;
mod text;

pub(crate) use completion::*;
pub(crate) use device::*;
pub(crate) use kernel_provider::*;
pub(crate) use legacy::*;
pub(crate) use memory::*;
pub(crate) use query::*;
pub(crate) use queue_pair::*;
pub(crate) use text::*;
