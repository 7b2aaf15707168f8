//! Commands from the control thread: creating, modifying and destroying the objects a
//! poller owns, and reading its counters. Each comes with the channel its answer goes
//! back on; the control plane has checked it already (handles, sizes, limits), so what is
//! refused here is what only the transport can tell.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use crossbeam_channel::Sender;
use verbs_shm::contract::{self, Cqe};
use verbs_shm::protocol::QpStat;
use verbs_shm::ring::{Producer, Ring};
use xroce_transport::{
    AttrMask, Counters, Path, PdId, QpAttr, QpConfig, QpState, Srq, SrqAttr, SrqId,
};
use xroce_wire::Qpn;

use super::Poller;
use super::delivery::{CqEntry, EventSink};
use super::intake::{Intake, QpEntry, SrqEntry};
use super::work_request::SendBounds;
use crate::bells::{PostBit, Target};
use crate::memory::Region;

/// A request from the control thread, with the channel its answer goes back on.
#[derive(Debug)]
pub enum Command {
    /// Registers a memory region.
    RegMr(Region, Sender<Result<(), String>>),
    /// Removes a memory region (by lkey).
    DeregMr(u32, Sender<()>),
    /// Replaces the memory region with the same lkey (`ibv_rereg_mr`); the old one stays
    /// if the new one cannot be added.
    ReregMr(Region, Sender<Result<(), String>>),
    /// Adds a completion queue.
    CreateCq(Box<CqSetup>, Sender<()>),
    /// Removes a completion queue.
    DestroyCq(u32, Sender<Result<(), i32>>),
    /// Adds a shared receive queue.
    CreateSrq(Box<SrqSetup>, Sender<Result<(), String>>),
    /// Arms an SRQ's limit.
    ModifySrq(u32, u32, Sender<Result<SrqAttr, i32>>),
    /// Reads an SRQ's attributes.
    QuerySrq(u32, Sender<Result<SrqAttr, i32>>),
    /// Removes a shared receive queue.
    DestroySrq(u32, Sender<Result<(), i32>>),
    /// Adds a queue pair (in RESET).
    CreateQp(Box<QpSetup>, Sender<Result<(), String>>),
    /// Modifies a queue pair.
    ModifyQp(Qpn, Box<QpAttr>, AttrMask, Sender<Result<(), String>>),
    /// Reads a queue pair's attributes.
    QueryQp(Qpn, Sender<Option<QpAttr>>),
    /// Removes a queue pair.
    DestroyQp(Qpn, Sender<()>),
    /// Attaches (`true`) or detaches a UD queue pair to or from a multicast group; the
    /// answer to an attach says whether it was new.
    Mcast(Qpn, xroce_wire::Gid, bool, Sender<Result<bool, String>>),
    /// Adds an address handle.
    CreateAh(u32, PdId, Path, Sender<()>),
    /// Removes an address handle.
    DestroyAh(u32, Sender<()>),
    /// Reads the counters.
    Stats(Sender<PollerStats>),
    /// The state and counters of the QPs numbered `from` or more: the first `most` of
    /// them by QP number.
    QpStats {
        /// The smallest QP number wanted.
        from: u32,
        /// How many at most.
        most: usize,
        /// Where the answer goes.
        reply: Sender<Vec<QpStat>>,
    },
    /// Replaces the GID table.
    SetGids(Vec<xroce_wire::Gid>),
    /// Sends a whole frame as it is (a MAD of the connection manager, from QP1).
    Transmit(Vec<u8>),
    /// Stops the poller.
    Stop,
}

/// A completion queue to add.
#[derive(Debug)]
pub struct CqSetup {
    /// Its handle.
    pub handle: u32,
    /// Its ring (the daemon produces).
    pub ring: Producer<Cqe>,
    /// The completion channel to notify, if any.
    pub channel: Option<Arc<OwnedFd>>,
    /// The owner's event sink.
    pub events: Arc<EventSink>,
}

/// A shared receive queue to add.
#[derive(Debug)]
pub struct SrqSetup {
    /// Its handle.
    pub handle: u32,
    /// Its protection domain.
    pub pd: PdId,
    /// Its transport attributes.
    pub attr: SrqAttr,
    /// Its ring (the application produces).
    pub ring: Ring<contract::RecvWqe>,
    /// The owner's event sink.
    pub events: Arc<EventSink>,
    /// Its bit in the owner's post-bits page.
    pub post_bit: Option<PostBit>,
}

/// A queue pair to add.
#[derive(Debug)]
pub struct QpSetup {
    /// Its handle.
    pub handle: u32,
    /// The transport's creation parameters.
    pub config: QpConfig,
    /// Its send ring.
    pub sq: Ring<contract::SendWqe>,
    /// Its receive ring (none with an SRQ).
    pub rq: Option<Ring<contract::RecvWqe>>,
    /// The send CQ handle.
    pub send_cq: u32,
    /// The receive CQ handle.
    pub recv_cq: u32,
    /// The SRQ handle.
    pub srq: Option<u32>,
    /// The owner's event sink.
    pub events: Arc<EventSink>,
    /// Its bit in the owner's post-bits page.
    pub post_bit: Option<PostBit>,
}

/// What the poller reports.
#[derive(Clone, Debug, Default)]
pub struct PollerStats {
    /// Transport counters.
    pub transport: Counters,
    /// Daemon counters.
    pub daemon: Vec<(&'static str, u64)>,
}

impl Poller {
    /// Handles pending commands. `None` means stop.
    pub(super) fn commands(&mut self) -> Option<usize> {
        let mut n = 0;
        while let Ok(cmd) = self.cfg.commands.try_recv() {
            n += 1;
            if !self.on_command(cmd) {
                return None;
            }
        }
        Some(n)
    }

    /// Handles one command; `false` for [`Command::Stop`].
    fn on_command(&mut self, cmd: Command) -> bool {
        match cmd {
            Command::RegMr(region, reply) => {
                let r = self.mem.insert(region).map_err(|e| e.to_string());
                let _ = reply.send(r);
            }
            Command::DeregMr(lkey, reply) => {
                self.mem.remove(lkey);
                let _ = reply.send(());
            }
            Command::ReregMr(region, reply) => {
                let _ = reply.send(self.on_rereg_mr(region));
            }
            Command::CreateCq(setup, reply) => {
                self.on_create_cq(*setup);
                let _ = reply.send(());
            }
            Command::DestroyCq(handle, reply) => {
                let _ = reply.send(self.on_destroy_cq(handle));
            }
            Command::CreateSrq(setup, reply) => {
                let _ = reply.send(self.on_create_srq(*setup));
            }
            Command::ModifySrq(handle, limit, reply) => {
                let _ = reply.send(self.on_modify_srq(handle, limit));
            }
            Command::QuerySrq(handle, reply) => {
                let r = self
                    .endpoint
                    .srq(SrqId(handle))
                    .map(|s| s.attr())
                    .ok_or(libc::EINVAL);
                let _ = reply.send(r);
            }
            Command::DestroySrq(handle, reply) => {
                let _ = reply.send(self.on_destroy_srq(handle));
            }
            Command::CreateQp(setup, reply) => {
                let _ = reply.send(self.on_create_qp(*setup));
            }
            Command::ModifyQp(qpn, attr, mask, reply) => {
                let _ = reply.send(self.on_modify_qp(qpn, &attr, mask));
            }
            Command::QueryQp(qpn, reply) => {
                let _ = reply.send(self.endpoint.qp(qpn).map(|q| q.attr()));
            }
            Command::DestroyQp(qpn, reply) => {
                let _ = self.endpoint.close_qp(self.now(), qpn);
                // Its groups may have no member left here.
                for key in self.cfg.handoff.mcast_groups() {
                    let gid = xroce_wire::Gid(key.to_ne_bytes());
                    let member = !self.endpoint.mcast_members(gid).is_empty();
                    self.cfg.handoff.set_mcast_member(key, member);
                }
                self.cc.remove_qp(qpn);
                if let Some(q) = self.rings.qps.remove(&qpn.value()) {
                    self.rings.bells.remove(q.bell, Target::Qp(qpn.value()));
                }
                let _ = reply.send(());
            }
            Command::Mcast(qpn, gid, attach, reply) => {
                let done = if attach {
                    self.endpoint.attach_mcast(qpn, gid)
                } else {
                    self.endpoint.detach_mcast(qpn, gid).map(|()| true)
                };
                // The other pollers hand this one the group's frames while it has members.
                let member = !self.endpoint.mcast_members(gid).is_empty();
                self.cfg
                    .handoff
                    .set_mcast_member(u128::from_ne_bytes(gid.0), member);
                let _ = reply.send(done.map_err(|e| e.to_string()));
            }
            Command::CreateAh(handle, pd, path, reply) => {
                self.rings.ahs.insert(handle, (pd, path));
                let _ = reply.send(());
            }
            Command::DestroyAh(handle, reply) => {
                self.rings.ahs.remove(&handle);
                let _ = reply.send(());
            }
            Command::QpStats { from, most, reply } => {
                let _ = reply.send(self.qp_stats(from, most));
            }
            Command::Stats(reply) => {
                let _ = reply.send(self.stats());
            }
            Command::SetGids(gids) => self.endpoint.set_gids(gids),
            Command::Transmit(frame) => self.raw_tx.push_back(frame),
            Command::Stop => return false,
        }
        true
    }

    /// `ibv_rereg_mr`: the region with the same lkey is replaced; the old one stays if the
    /// new one cannot be added.
    fn on_rereg_mr(&mut self, region: Region) -> Result<(), String> {
        let old = self.mem.remove(region.lkey);
        self.mem.insert(region).map_err(|e| {
            if let Some(old) = old {
                let _ = self.mem.insert(old);
            }
            e.to_string()
        })
    }

    fn on_create_cq(&mut self, s: CqSetup) {
        let entry = CqEntry {
            ring: s.ring,
            channel: s.channel,
            events: s.events,
            broken: false,
            wrote: false,
            wrote_solicited: false,
        };
        self.cqs.insert(s.handle, entry);
    }

    /// Refused with `EBUSY` while a QP completes on the CQ.
    fn on_destroy_cq(&mut self, handle: u32) -> Result<(), i32> {
        let busy = self
            .rings
            .qps
            .values()
            .any(|q| q.send_cq == handle || q.recv_cq == handle);
        if busy {
            Err(libc::EBUSY)
        } else if self.cqs.remove(&handle).is_some() {
            Ok(())
        } else {
            Err(libc::EINVAL)
        }
    }

    fn on_create_srq(&mut self, s: SrqSetup) -> Result<(), String> {
        self.endpoint
            .create_srq(Srq::new(SrqId(s.handle), s.pd, s.attr))
            .map_err(|e| e.to_string())?;
        let bell = self
            .rings
            .bells
            .add(self.cfg.index, s.post_bit.as_ref(), Target::Srq(s.handle));
        let entry = SrqEntry {
            ring: Intake::new(s.ring),
            events: s.events,
            handle: s.handle,
            bell,
            broken: false,
        };
        self.rings.srqs.insert(s.handle, entry);
        Ok(())
    }

    /// Arms an SRQ's limit.
    fn on_modify_srq(&mut self, handle: u32, limit: u32) -> Result<SrqAttr, i32> {
        let mut attr = self
            .endpoint
            .srq(SrqId(handle))
            .map(|s| s.attr())
            .ok_or(libc::EINVAL)?;
        attr.srq_limit = limit;
        self.endpoint
            .modify_srq(SrqId(handle), attr)
            .map(|()| attr)
            .map_err(|_| libc::EINVAL)
    }

    /// Refused with `EBUSY` while a QP uses the SRQ.
    fn on_destroy_srq(&mut self, handle: u32) -> Result<(), i32> {
        match self.endpoint.destroy_srq(SrqId(handle)) {
            Ok(()) => {
                if let Some(s) = self.rings.srqs.remove(&handle) {
                    self.rings.bells.remove(s.bell, Target::Srq(handle));
                }
                Ok(())
            }
            Err(xroce_transport::EndpointError::SrqBusy(_)) => Err(libc::EBUSY),
            Err(_) => Err(libc::EINVAL),
        }
    }

    fn on_create_qp(&mut self, s: QpSetup) -> Result<(), String> {
        let qpn = s.config.qpn;
        let caps = s.config.caps;
        let pd = s.config.pd;
        self.endpoint
            .create_qp(s.config)
            .map_err(|e| e.to_string())?;
        let bell =
            self.rings
                .bells
                .add(self.cfg.index, s.post_bit.as_ref(), Target::Qp(qpn.value()));
        let entry = QpEntry {
            handle: s.handle,
            sq: Intake::new(s.sq),
            rq: s.rq.map(Intake::new),
            send_cq: s.send_cq,
            recv_cq: s.recv_cq,
            send_bounds: SendBounds {
                pd,
                max_sge: caps.max_send_sge,
                max_inline: caps.max_inline_data,
            },
            max_recv_sge: caps.max_recv_sge,
            events: s.events,
            broken: false,
            bell,
        };
        self.rings.qps.insert(qpn.value(), entry);
        Ok(())
    }

    fn on_modify_qp(&mut self, qpn: Qpn, attr: &QpAttr, mask: AttrMask) -> Result<(), String> {
        let now = self.now();
        let to_reset = mask.contains(AttrMask::STATE) && attr.qp_state == QpState::Reset;
        if to_reset {
            // Every completion the QP made so far goes to its CQs now, before the reset:
            // the application then removes the ones it has not polled (as RDMA NICs clean
            // their CQs), and none can surface after it.
            self.deliver(now);
        }
        self.endpoint
            .modify_qp(now, qpn, attr, mask)
            .map_err(|e| e.to_string())?;
        if to_reset {
            // A reset QP connects anew, perhaps to another peer: its congestion state (and
            // what it knew of its peer) starts over, as the transport's selective repeat,
            // which RESET turned off, does.
            self.cc.remove_qp(qpn);
            // RESET discards every work request: the rings restart empty.
            if let Some(q) = self.rings.qps.get_mut(&qpn.value()) {
                q.reset_rings();
            }
        } else if mask.contains(AttrMask::STATE) {
            // Work requests posted before this state waited in the ring.
            self.rings.pull_qp(&mut self.endpoint, now, qpn);
        }
        Ok(())
    }

    /// The state and counters of the first `most` QPs numbered `from` or more. Only the
    /// QPs asked for are described (a page of a few dozen, out of thousands).
    fn qp_stats(&mut self, from: u32, most: usize) -> Vec<QpStat> {
        let now = self.now();
        let mut wanted: Vec<_> = self
            .endpoint
            .qp_stats()
            .filter(|(qpn, ..)| qpn.value() >= from)
            .collect();
        wanted.sort_unstable_by_key(|(qpn, ..)| qpn.value());
        wanted.truncate(most);
        wanted
            .into_iter()
            .filter_map(|(qpn, state, counters)| {
                let qp = self.endpoint.qp(qpn)?;
                let mut counters: Vec<(String, u64)> =
                    counters.iter().map(|(n, v)| (n.to_owned(), v)).collect();
                let mut path = path_of(qp);
                if let Some(cc) = self.cc.qp(qpn, now) {
                    path.extend(congestion_of(&cc));
                    counters.extend(cc.counters.iter().map(|(n, v)| (n.to_owned(), v)));
                }
                Some(QpStat {
                    qpn: qpn.value(),
                    qp_type: qp.qp_type().name().to_owned(),
                    state: state.name().to_owned(),
                    counters,
                    path,
                })
            })
            .collect()
    }

    /// The transport's counters and the daemon's own.
    fn stats(&self) -> PollerStats {
        let c = &self.counters;
        let intake = &self.rings.counters;
        let port = self.port.counters();
        // The kernel's own drops on this socket: frames that never reached the rings.
        let kernel = self.port.kernel_stats().unwrap_or_default();
        let mut daemon = vec![
            ("rx_frames", c.rx_frames),
            ("tx_frames", c.tx_frames),
            ("loopback_frames", c.loopback_frames),
            ("handed_over_frames", c.handed_over),
            ("taken_over_frames", c.taken_over),
            ("handoff_full_drops", c.handoff_full),
            ("gsi_frames_in", c.gsi_in),
            ("gsi_frames_in_dropped", c.gsi_in_dropped),
            ("gsi_frames_out", c.gsi_out),
            ("tx_ring_full", c.tx_full),
            ("bad_work_requests", intake.bad_wqe),
            ("broken_rings", intake.broken_rings),
            ("cq_overflows", c.cq_overflow),
            ("idle_sleeps", c.idle_sleeps),
            // Not a counter: destroyed QPs that linger now (`Endpoint::close_qp`).
            ("lingering_qps", self.endpoint.lingering() as u64),
            ("full_ring_scans", intake.full_ring_scans),
            ("xsk_rx_fill_ring_empty", port.rx.fill_ring_empty),
            ("xsk_tx_kicks", port.tx.kicks),
            ("xsk_rx_multi_buffer_packets", port.rx.multi_buffer_packets),
            ("xsk_rx_oversized_drops", port.rx.oversized),
            ("xsk_tx_multi_buffer_packets", port.tx.multi_buffer_packets),
            ("xsk_rx_dropped", kernel.rx_dropped),
            ("xsk_rx_ring_full", kernel.rx_ring_full),
            (
                "xsk_rx_fill_ring_empty_descs",
                kernel.rx_fill_ring_empty_descs,
            ),
            ("xsk_rx_invalid_descs", kernel.rx_invalid_descs),
            ("xsk_tx_invalid_descs", kernel.tx_invalid_descs),
        ];
        // Congestion control's, under mlx5's names where it has them.
        daemon.extend(self.cc.counters().iter());
        PollerStats {
            transport: self.endpoint.counters().clone(),
            daemon,
        }
    }
}

/// What `xroced stat --qp` shows of a QP's congestion control, after its path: whether its
/// packets go out ECN-capable and its peer showed xroce's hello, while a controller limits
/// it, the rate (Mbit/s) and DCQCN's alpha (1/1024ths), and, while it sends, what it sent
/// over the last one to three milliseconds (Mbit/s of frames: what a CNP bounds DCQCN's
/// rate by).
fn congestion_of(cc: &xroce_congestion::QpCongestion) -> Vec<(String, u64)> {
    let mut v = vec![
        ("ecn_capable".to_owned(), u64::from(cc.ecn_capable)),
        ("peer_xroce".to_owned(), u64::from(cc.peer_xroce)),
    ];
    if let Some(rate) = cc.rate {
        v.push(("cc_rate_mbit".to_owned(), rate.bits_per_sec() / 1_000_000));
    }
    if let Some(alpha) = cc.alpha {
        v.push(("cc_alpha".to_owned(), u64::from(alpha)));
    }
    if let Some(sending) = cc.sending {
        v.push((
            "cc_sending_mbit".to_owned(),
            sending.bits_per_sec() / 1_000_000,
        ));
    }
    v
}

/// What `xroced stat --qp` shows of a QP's path: whether it runs selective repeat, where its
/// sequence numbers stand (RC and UC, once connected), and what its requester measured
/// (absent until measured).
fn path_of(qp: &xroce_transport::QueuePair) -> Vec<(String, u64)> {
    use xroce_transport::{QpState, QpType};
    let e = qp.path_estimate();
    let us = |d: Option<std::time::Duration>| d.map(|d| d.as_micros() as u64);
    let mut path = vec![(
        "selective_repeat".to_owned(),
        u64::from(qp.selective_repeat()),
    )];
    let connected = !matches!(qp.state(), QpState::Reset | QpState::Init);
    if qp.qp_type() != QpType::Ud && connected {
        // As `rdma res show qp` shows them: the next PSN sent, the oldest not yet
        // acknowledged, the next expected, and the packets held ahead of a gap.
        let d = qp.diagnostics();
        path.extend([
            ("sq_psn".to_owned(), u64::from(d.next_psn.value())),
            (
                "unacked_psn".to_owned(),
                u64::from(d.oldest_unacked_psn.value()),
            ),
            ("rq_psn".to_owned(), u64::from(d.expected_psn.value())),
            ("held".to_owned(), d.held as u64),
        ]);
    }
    let measured = [
        ("srtt_us", us(e.srtt)),
        ("min_rtt_us", us(e.min_rtt)),
        ("rto_us", us(e.rto)),
        ("window", e.window.map(u64::from)),
    ];
    path.extend(
        measured
            .into_iter()
            .filter_map(|(name, v)| v.map(|v| (name.to_owned(), v))),
    );
    path
}
