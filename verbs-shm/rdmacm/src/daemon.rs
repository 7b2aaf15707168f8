//! The connection to one device's daemon, as this library uses it: rdma_cm requests, the
//! registration of event channels, and the port and device attributes that say which
//! addresses the device has and what it can do.
//!
//! [`Daemon`] is a trait so that tests put a fake daemon behind a device; the real one is
//! a `verbs_shm::client::Context` of the library's own (a control connection apart from
//! the application's `ibv_context`s). A refusal of the daemon is printed to stderr when
//! `XROCE_RDMACM_DEBUG=1`: a C caller only sees its errno. A device the daemon does not
//! let the user open says so always ([`refused_open`]).

use std::sync::{Arc, OnceLock};

use verbs_shm::client::{Context, Error, EventChannel};
use verbs_shm::cm::{CmReply, CmRequest};
use verbs_shm::protocol::{DeviceAttr, PortAttr};

use crate::ffi::{Cm, Errno};

/// What this library asks of a device's daemon.
pub(crate) trait Daemon: Send + Sync + std::fmt::Debug {
    /// One rdma_cm request and its answer.
    fn cm(&self, request: CmRequest) -> Result<CmReply, Error>;
    /// Hands the daemon the writing end of `channel`; returns the daemon's handle for it.
    fn register_channel(&self, channel: &EventChannel) -> Result<u32, Error>;
    /// The port's attributes and GID table.
    fn port(&self) -> Result<PortAttr, Error>;
    /// The device's attributes.
    fn device(&self) -> Result<DeviceAttr, Error>;
}

impl Daemon for Context {
    fn cm(&self, request: CmRequest) -> Result<CmReply, Error> {
        Context::cm(self, request)
    }

    fn register_channel(&self, channel: &EventChannel) -> Result<u32, Error> {
        self.cm_register_channel(channel)
    }

    fn port(&self) -> Result<PortAttr, Error> {
        self.query_port()
    }

    fn device(&self) -> Result<DeviceAttr, Error> {
        self.query_device()
    }
}

/// Opens the daemon of a device, by the device's name.
pub(crate) type Connector = fn(&str) -> Result<Arc<dyn Daemon>, Error>;

/// The real connector: a `verbs_shm` context of the library's own.
pub(crate) fn connect(name: &str) -> Result<Arc<dyn Daemon>, Error> {
    Ok(Arc::new(Context::open(name)?))
}

/// Whether `XROCE_RDMACM_DEBUG=1` asks for the daemon's refusals on stderr.
fn debug() -> bool {
    static DEBUG: OnceLock<bool> = OnceLock::new();
    *DEBUG.get_or_init(|| std::env::var_os("XROCE_RDMACM_DEBUG").is_some_and(|v| v == "1"))
}

/// The errno of a failed daemon call, after printing the daemon's message when asked to.
pub(crate) fn errno(device: &str, what: &str, error: &Error) -> Errno {
    if debug() {
        eprintln!("librdmacm (xroce): {device}: {what}: {error}");
    }
    Errno(error.errno())
}

/// A device that could not be opened. A daemon whose access policy leaves the user out
/// says so on stderr, debugging or not (as the drop-in libibverbs does: a user cannot
/// tell that refusal from a missing device otherwise); other failures as [`errno`] says.
/// Called once per device and process: a device that failed to open stays dead.
pub(crate) fn refused_open(device: &str, error: &Error) -> Errno {
    match error {
        Error::Daemon { errno, message } if *errno == libc::EACCES => {
            eprintln!("librdmacm: {device}: {message}");
            Errno(*errno)
        }
        _ => errno(device, "open", error),
    }
}

/// Runs `call` on `daemon`, turning its error into an errno (see [`errno`]).
pub(crate) fn ask(device: &str, daemon: &dyn Daemon, request: CmRequest) -> Cm<CmReply> {
    let what = request_name(&request);
    daemon.cm(request).map_err(|e| errno(device, what, &e))
}

/// The request's name, for messages.
pub(crate) fn request_name(request: &CmRequest) -> &'static str {
    match request {
        CmRequest::Channel => "channel",
        CmRequest::DestroyChannel { .. } => "destroy channel",
        CmRequest::CreateId { .. } => "create id",
        CmRequest::DestroyId { .. } => "destroy id",
        CmRequest::MigrateId { .. } => "migrate id",
        CmRequest::SetOption { .. } => "set option",
        CmRequest::Bind { .. } => "bind",
        CmRequest::ResolveAddr { .. } => "resolve address",
        CmRequest::ResolveRoute { .. } => "resolve route",
        CmRequest::Listen { .. } => "listen",
        CmRequest::Connect { .. } => "connect",
        CmRequest::Accept { .. } => "accept",
        CmRequest::Reject { .. } => "reject",
        CmRequest::Establish { .. } => "establish",
        CmRequest::Notify { .. } => "notify",
        CmRequest::Disconnect { .. } => "disconnect",
        CmRequest::InitQpAttr { .. } => "init QP attributes",
        CmRequest::Query { .. } => "query",
        CmRequest::JoinMulticast { .. } => "join multicast",
        CmRequest::LeaveMulticast { .. } => "leave multicast",
    }
}
