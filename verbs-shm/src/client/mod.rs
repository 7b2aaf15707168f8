//! The application library: open a device, create protection domains, memory regions,
//! completion queues, queue pairs, shared receive queues and address handles, and move data
//! with `post_send`, `post_recv` and `poll` — which touch only shared memory (plus a
//! doorbell write when the daemon's poller sleeps).
//!
//! Every object is a handle that releases its daemon-side resources when dropped, and
//! keeps the objects it depends on alive (a [`Qp`] holds its [`Cq`]s, [`Srq`] and [`Pd`]; an
//! [`Mr`], [`Srq`] or [`Ah`] its [`Pd`]), so handles may be dropped in any order.
//!
//! ```no_run
//! use verbs_shm::client::{Context, Access, QpType, QpInit};
//!
//! let ctx = Context::open_default()?;
//! let pd = ctx.alloc_pd()?;
//! let mr = pd.alloc_mr(1 << 20, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
//! let cq = ctx.create_cq(256, None)?;
//! let qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq, &cq))?;
//! println!("QPN {:#x}, rkey {:#x}", qp.qpn(), mr.rkey());
//! # Ok::<(), verbs_shm::client::Error>(())
//! ```

mod cm;
mod connect;
mod context;
mod cq;
mod mr;
mod qp;

pub use cm::EventChannel;
pub use connect::{ConnectError, Connection};
pub use context::{Context, describe, devices};
pub use cq::{CompChannel, Cq, WorkCompletion};
pub use mr::Mr;
pub use qp::{Ah, Pd, Qp, QpInit, RecvWr, SendWr, Srq, UdTarget};
pub use xroce_transport::{Access, AttrMask, QpState, QpType, SendOp};

pub use crate::contract::Sge;
pub use crate::protocol::{AhAttr, DeviceAttr, EventRecord, PortAttr, QpAttr, QpCaps};

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No xroce daemon serves this network namespace (or the named one does not exist).
    #[error("no xroce device {0}: start xroced in this network namespace")]
    NoDevice(String),
    /// The daemon refused the request; `errno` is what verbs would return.
    #[error("{message} (errno {errno})")]
    Daemon {
        /// The errno value.
        errno: i32,
        /// The daemon's explanation.
        message: String,
    },
    /// A system call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The daemon answered something the protocol does not allow.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A queue is full (`ENOMEM` from `ibv_post_*`).
    #[error("the queue is full")]
    QueueFull,
    /// A work request is invalid (`EINVAL`); the reason says why.
    #[error("invalid work request: {0}")]
    Invalid(&'static str),
    /// The object broke (its ring was corrupted or its CQ overflowed).
    #[error("the object is in error (ring corrupted or CQ overrun)")]
    Broken,
    /// The device was opened by another process (this one's parent, before a fork): a
    /// process talks to the daemon over its own connections.
    #[error("the device was opened by process {0}, not this one: open it again after fork")]
    OtherProcess(u32),
}

impl Error {
    /// The errno a verbs call would report for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::NoDevice(_) => libc::ENODEV,
            Error::Daemon { errno, .. } => *errno,
            Error::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
            Error::Protocol(_) => libc::EPROTO,
            Error::QueueFull => libc::ENOMEM,
            Error::Invalid(_) => libc::EINVAL,
            Error::Broken => libc::EIO,
            Error::OtherProcess(_) => libc::EPERM,
        }
    }
}

/// The result of a library call.
pub type Result<T> = std::result::Result<T, Error>;
