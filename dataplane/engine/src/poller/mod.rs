//! A poller: one pinned thread that owns one AF_XDP port, one transport [`Endpoint`], the
//! memory regions, and the queue pairs, completion queues and shared receive queues of the
//! applications assigned to it.
//!
//! Every microsecond a poller spends away from its rings is latency for every application
//! it serves, and a lock or an allocation on the packet path costs more than the packet.
//! So one thread owns everything it touches and runs one batched loop, with no lock and no
//! allocation on the packet path; the control thread reaches it only through commands,
//! which it takes at the top of each pass:
//!
//! ```text
//! commands from the control thread (create/modify/destroy; rare)      command
//! RX batch        -> Congestion::handle_frame        (CE marks, CNPs, round trips) frames
//!                 -> Endpoint::handle_frame          (ICRC, QP, copy into the MR)  frames
//! SQ/RQ/SRQ rings -> Endpoint::post_send/post_recv   (copied out, validated)       intake
//! timers          -> Endpoint::handle_timeout        (retransmits, paced QPs)
//! Congestion::poll_cnp    -> TX frames               (CNPs for marked packets)     frames
//! Endpoint::poll_transmit -> TX frames               (headers + payload from the MR)  frames
//!                 -> Congestion::on_transmit         (ECT(0), rate -> Endpoint::pace)
//! completions     -> CQ rings (+ completion channel), events -> the application  delivery
//! idle            -> spin, yield, then sleep on the socket, the doorbell and the timer  run
//! ```
//!
//! Frames the endpoint addresses to one of its own GIDs never reach the NIC: they are
//! delivered straight back to the endpoint (loopback), through exactly the same transport
//! code as frames from the wire (and no congestion control: they cross no network).
//!
//! Congestion control ([`xroce_congestion::Congestion`]) sits beside the endpoint as an RDMA
//! NIC's sits beside its transport engine: it sees the headers of every frame from and to
//! the wire, and tells the endpoint when a queue pair may send again.
//!
//! - [`run`]: the loop and the idle policy.
//! - [`command`]: commands from the control thread.
//! - [`frames`]: receive, transmit, hand-over and loopback.
//! - [`intake`]: work requests from the applications' rings into the transport, checked
//!   and converted in [`work_request`].
//! - [`delivery`]: completions and events to the applications.

mod command;
mod delivery;
mod frames;
mod intake;
mod run;
mod work_request;

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Instant as StdInstant;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use verbs_shm::sys::Mapping;
use xroce_congestion::{Congestion, CongestionConfig};
use xroce_transport::Endpoint;

pub use command::{Command, CqSetup, PollerStats, QpSetup, SrqSetup};
pub use delivery::{EventSink, event_type};
pub use run::IdlePolicy;

use crate::handoff::{Handoff, Sent};
use crate::memory::MrTable;
use crate::xsk::Port;
use delivery::CqEntry;
use intake::Rings;

/// What a poller counts of its own (the intake counts its own, [`intake::IntakeCounters`]).
#[derive(Debug, Default)]
struct DaemonCounters {
    cq_overflow: u64,
    loopback_frames: u64,
    tx_full: u64,
    idle_sleeps: u64,
    rx_frames: u64,
    tx_frames: u64,
    handed_over: u64,
    taken_over: u64,
    handoff_full: u64,
    gsi_in: u64,
    gsi_in_dropped: u64,
    gsi_out: u64,
}

impl DaemonCounters {
    /// Counts a frame sent to the poller that owns its QP.
    fn count_handoff(&mut self, sent: Sent) {
        match sent {
            Sent::Handed => self.handed_over += 1,
            Sent::Full => self.handoff_full += 1,
        }
    }
}

/// How a poller is set up.
#[derive(Debug)]
pub struct PollerConfig {
    /// Its index (its word in the wake page).
    pub index: usize,
    /// The wake page, shared read-only with applications.
    pub wake_page: Arc<Mapping>,
    /// Applications write this eventfd to wake the poller.
    pub doorbell: Arc<OwnedFd>,
    /// Commands arrive here.
    pub commands: Receiver<Command>,
    /// The CPU to pin to, if any.
    pub core: Option<core_affinity::CoreId>,
    /// How an idle poller waits.
    pub idle: IdlePolicy,
    /// Frames for QPs of other pollers go through here.
    pub handoff: Handoff,
    /// Frames for QP1 go to the connection manager through here.
    pub gsi: GsiLink,
    /// Congestion control for its queue pairs.
    pub congestion: CongestionConfig,
    /// Selective repeat with each queue pair whose peer shows xroce's hello.
    pub selective_repeat: bool,
}

/// Where a poller sends the frames that arrive for QP1 (the connection manager's MADs):
/// the control thread, woken through `bell`. Bounded: a flood of MADs is dropped and
/// counted, as a NIC drops what its QP1 ring cannot take (the CM retransmits).
#[derive(Debug, Clone)]
pub struct GsiLink {
    /// The frames.
    pub frames: Sender<Vec<u8>>,
    /// Written after each frame.
    pub bell: Arc<OwnedFd>,
}

impl GsiLink {
    /// The MADs in flight to the control thread before the next is dropped.
    pub const DEPTH: usize = 1024;

    /// Passes a QP1 frame on; `false` when the control thread has no room for it.
    fn forward(&self, frame: &[u8]) -> bool {
        match self.frames.try_send(frame.to_vec()) {
            Ok(()) => {
                verbs_shm::sys::eventfd_signal(self.bell.as_fd());
                true
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }
}

/// One poller.
pub struct Poller {
    cfg: PollerConfig,
    port: Port,
    endpoint: Endpoint,
    /// Congestion control beside the endpoint.
    cc: Congestion,
    mem: MrTable,
    /// The applications' QPs, SRQs and address handles, and what reading their rings
    /// needs.
    rings: Rings,
    cqs: HashMap<u32, CqEntry>,
    /// CQs written since their notification was last checked.
    written: Vec<u32>,
    epoch: StdInstant,
    counters: DaemonCounters,
    mac: [u8; 6],
    /// Whole frames the control thread gave to send (QP1's MADs).
    raw_tx: VecDeque<Vec<u8>>,
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller")
            .field("index", &self.cfg.index)
            .finish_non_exhaustive()
    }
}

impl Poller {
    /// A poller over `port` and `endpoint`.
    pub fn new(cfg: PollerConfig, port: Port, endpoint: Endpoint, mac: [u8; 6]) -> Poller {
        let rings = Rings::new(cfg.idle.full_scan);
        let cc = Congestion::new(cfg.congestion.clone());
        Poller {
            cfg,
            port,
            endpoint,
            cc,
            mem: MrTable::new(),
            rings,
            cqs: HashMap::new(),
            written: Vec::new(),
            epoch: StdInstant::now(),
            counters: DaemonCounters::default(),
            mac,
            raw_tx: VecDeque::new(),
        }
    }
}
