//! The control socket: connections, the dispatch of requests to their handlers, replies,
//! and requests parked while a destination resolves.
//!
//! One thread serves every application, and a next hop the kernel has not resolved yet
//! takes up to seconds: waiting for it there would stall every other application's
//! requests. A handler that needs one sets `parking` and refuses with `EINPROGRESS`; the
//! server then leaves the reply unsent, stops reading the connection (so its requests
//! stay answered in order) and starts a thread that waits for the resolution. That
//! thread's outcome comes back through a channel and an eventfd in the poll set, and the
//! parked request is handled again from the start, the outcome waiting in its
//! connection.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};
use tracing::{debug, info, warn};
use verbs_shm::protocol::{self, Reply, Request};
use verbs_shm::sys;
use xroce_wire::Gid;

use super::access::{AccessPolicy, Peer};
use super::registry::Registry;
use super::subject;
use super::{Answer, AppLimits, Host, Link, PortView, Refusal, Resolver, node_guid};
use crate::poller::Command;
use crate::rdma_cm::{CmPort, CmService};

/// What the connection manager needs of the port.
fn cm_port(port: &PortView) -> CmPort {
    CmPort {
        mac: port.mac,
        gids: port.gids.clone(),
        active_mtu: port.active_mtu,
    }
}

/// The poll-set id of the listener.
const LISTENER: u64 = 0;

/// The poll-set id of the resolutions' doorbell.
const RESOLVED: u64 = u64::MAX;

/// The poll-set id of the doorbell of QP1 frames from the pollers.
const MADS: u64 = u64::MAX - 1;

/// The poll-set id of the connection manager's resolutions.
const CM_RESOLVED: u64 = u64::MAX - 2;

/// How many refusals of one application are logged at warning level.
const REFUSALS_LOGGED: u32 = 32;

/// The command name of process `pid` (`/proc/<pid>/comm`), or `?` when it cannot be read.
fn command_name(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|name| name.trim_end().to_owned())
        .unwrap_or_else(|_| "?".into())
}

/// A resolution that finished: the connection that waits for it, the GID, the outcome.
type Resolved = (u64, Gid, Result<Option<[u8; 6]>, String>);

/// The control plane.
pub struct Control {
    pub(super) device: String,
    listener: OwnedFd,
    pub(super) pollers: Vec<Box<dyn Link>>,
    pub(super) wake_page: OwnedFd,
    pub(super) host: Box<dyn Host>,
    pub(super) registry: Registry,
    gids: Vec<Gid>,
    resolver: Resolver,
    /// Finished resolutions, and the eventfd that says one came.
    resolved: (Sender<Resolved>, Receiver<Resolved>),
    resolved_bell: Arc<OwnedFd>,
    /// Set by a request that must wait for this GID to resolve.
    pub(super) parking: Option<Gid>,
    /// The port's connection manager.
    pub(super) cm: CmService,
    /// QP1 frames from the pollers, and the eventfd that says one came.
    pub(super) gsi: Option<(Receiver<Vec<u8>>, Arc<OwnedFd>)>,
    /// Who may open the device.
    pub(super) access: AccessPolicy,
    /// Users refused so far (each is logged once).
    pub(super) refused_uids: std::collections::HashSet<u32>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl Control {
    /// A control plane listening as `device`, with these pollers.
    pub fn new<L: Link + 'static>(
        device: &str,
        listener: OwnedFd,
        pollers: Vec<L>,
        wake_page: OwnedFd,
        mut host: Box<dyn Host>,
        limits: AppLimits,
    ) -> io::Result<Control> {
        let resolved_bell = Arc::new(sys::eventfd()?);
        let port = host.port();
        let gids = port.gids.clone();
        let resolver = host.resolver();
        let cm = CmService::new(node_guid(port.mac), cm_port(&port), resolver.clone())?;
        let pollers: Vec<Box<dyn Link>> = pollers
            .into_iter()
            .map(|p| Box::new(p) as Box<dyn Link>)
            .collect();
        Ok(Control {
            device: device.to_owned(),
            listener,
            registry: Registry::new(limits, pollers.len()),
            pollers,
            wake_page,
            host,
            gids,
            resolver,
            resolved: crossbeam_channel::unbounded(),
            resolved_bell,
            parking: None,
            cm,
            gsi: None,
            access: AccessPolicy::everybody(),
            refused_uids: std::collections::HashSet::new(),
        })
    }

    /// Lets only the users `access` allows open the device (by default every user may).
    pub fn with_access(mut self, access: AccessPolicy) -> Control {
        self.access = access;
        self
    }

    /// Takes the QP1 frames the pollers pass on through `frames`, rung by `bell`.
    pub fn with_gsi(mut self, frames: Receiver<Vec<u8>>, bell: Arc<OwnedFd>) -> Control {
        self.gsi = Some((frames, bell));
        self
    }

    /// Replaces the budget of memory areas the daemon maps (by default `vm.max_map_count`
    /// less room for the daemon's own; see [`Control::new`]).
    pub fn with_map_budget(mut self, areas: usize) -> Control {
        self.registry.map_budget = areas;
        self
    }

    /// The listening socket (for the daemon's poll set).
    pub fn listener(&self) -> BorrowedFd<'_> {
        self.listener.as_fd()
    }

    /// The descriptors to poll: the listener, every connection not waiting for a
    /// resolution, and the resolutions' doorbell, with their ids.
    pub fn poll_set(&self) -> Vec<(u64, BorrowedFd<'_>)> {
        let mut v = vec![
            (LISTENER, self.listener.as_fd()),
            (RESOLVED, self.resolved_bell.as_fd()),
            (CM_RESOLVED, self.cm.bell()),
        ];
        if let Some((_, bell)) = &self.gsi {
            v.push((MADS, bell.as_fd()));
        }
        v.extend(
            self.registry
                .conns()
                .filter(|(_, c)| c.parked.is_none())
                .map(|(id, c)| (id, c.sock.as_fd())),
        );
        v
    }

    /// Handles readiness of poll-set entry `id` (0 is the listener).
    pub fn on_ready(&mut self, id: u64) {
        match id {
            LISTENER => self.accept(),
            RESOLVED => self.on_resolved(),
            MADS => self.on_mads(),
            CM_RESOLVED => self.on_cm_resolved(),
            _ => self.serve(id),
        }
    }

    /// Answers the requests whose destinations resolved.
    fn on_resolved(&mut self) {
        sys::eventfd_drain(self.resolved_bell.as_fd());
        while let Ok((id, dgid, outcome)) = self.resolved.1.try_recv() {
            let mac = self.host.port().mac;
            let Some(conn) = self.registry.find_mut(id) else {
                continue;
            };
            let Some(request) = conn.parked.take() else {
                continue;
            };
            conn.resolved = Some((dgid, outcome.map(|m| m.unwrap_or(mac))));
            let answer = self.handle(id, request.clone(), Vec::new());
            self.answer(id, request, answer);
        }
    }

    /// Starts waiting for `dgid` on a thread of its own; the answer comes through
    /// [`Control::on_resolved`].
    fn start_resolution(&self, id: u64, dgid: Gid) -> io::Result<()> {
        let resolve = self.resolver.clone();
        let done = self.resolved.0.clone();
        let bell = self.resolved_bell.clone();
        std::thread::Builder::new()
            .name("xroce-resolve".into())
            .spawn(move || {
                let outcome = resolve(dgid);
                let _ = done.send((id, dgid, outcome));
                sys::eventfd_signal(bell.as_fd());
            })
            .map(drop)
    }

    /// Re-reads the port and tells every poller when the GID table changed (addresses
    /// added or removed on the interface).
    pub fn refresh_host(&mut self) {
        let port = self.host.port();
        let gids = port.gids.clone();
        if gids == self.gids || gids.is_empty() {
            return;
        }
        self.cm.update_port(cm_port(&port));
        info!(
            "GID table changed: {:?}",
            gids.iter().map(|g| g.to_ip()).collect::<Vec<_>>()
        );
        for p in &self.pollers {
            p.send(Command::SetGids(gids.clone()));
        }
        self.gids = gids;
    }

    fn accept(&mut self) {
        loop {
            let sock = match sys::accept(self.listener.as_fd()) {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    warn!("accept on the control socket failed: {e}");
                    return;
                }
            };
            // Whether it may open the device is decided on its hello, where a refusal can
            // say why.
            let peer = Peer::of(&sock);
            let (pid, uid) = (peer.pid, peer.uid);
            let id = self.registry.connect(sock, peer);
            let poller = self.registry.conn(id).poller;
            debug!("application pid {pid} uid {uid} connected (context {id}, poller {poller})");
        }
    }

    fn serve(&mut self, id: u64) {
        let mut buf = vec![0u8; protocol::MAX_MESSAGE];
        let Some(conn) = self.registry.find(id) else {
            return;
        };
        let received = sys::recv_message(conn.sock.as_fd(), &mut buf);
        let (n, fds) = match received {
            Ok((0, _)) => return self.hang_up(id),
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => {
                debug!("context {id}: {e}; closing");
                return self.hang_up(id);
            }
        };
        match protocol::decode::<Request>(&buf[..n]) {
            Ok(request) => {
                let answer = self.handle(id, request.clone(), fds);
                self.answer(id, request, answer);
            }
            Err(e) => {
                let refusal = Refusal::invalid(format!("undecodable request: {e}"));
                self.reply(id, refusal.into());
            }
        }
    }

    /// Handles one request of connection `id` (which exists) with the descriptors that
    /// came with it.
    pub(super) fn handle(
        &mut self,
        id: u64,
        request: Request,
        fds: Vec<OwnedFd>,
    ) -> Result<Answer, Refusal> {
        let hello = self.registry.find(id).is_some_and(|c| c.hello);
        // Before its hello a connection may only describe the device: what sysfs shows
        // every user of a kernel device, also one who may not open it.
        if !hello && !matches!(request, Request::Hello { .. } | Request::QueryDevice) {
            return Err(Refusal::new(
                libc::EPROTO,
                "the first request must be Hello",
            ));
        }
        let reply = match request {
            Request::Hello { version } => return self.hello(id, version),
            Request::QueryDevice => Reply::Device(self.device_attr()),
            Request::QueryPort => Reply::Port(self.port_attr()),
            Request::AllocPd => self.alloc_pd(id)?,
            Request::DeallocPd { pd } => self.dealloc_pd(id, pd)?,
            request @ (Request::RegMr { .. }
            | Request::RegMrPieces { .. }
            | Request::ReregMr { .. }) => self.register_mr(id, request, fds)?,
            Request::DeregMr { mr } => self.dereg_mr(id, mr)?,
            Request::CreateCq { entries, channel } => {
                return self.create_cq(id, entries, channel, fds);
            }
            Request::DestroyCq { cq } => self.destroy_cq(id, cq)?,
            request @ Request::CreateSrq { .. } => return self.create_srq(id, request),
            Request::ModifySrq { srq, limit } => self.modify_srq(id, srq, limit)?,
            Request::QuerySrq { srq } => self.query_srq(id, srq)?,
            Request::DestroySrq { srq } => self.destroy_srq(id, srq)?,
            request @ Request::CreateQp { .. } => return self.create_qp(id, request),
            Request::ModifyQp { qp, attr, mask } => self.modify_qp(id, qp, &attr, mask)?,
            Request::QueryQp { qp } => self.query_qp(id, qp)?,
            Request::DestroyQp { qp } => self.destroy_qp(id, qp)?,
            Request::CreateAh { pd, attr } => self.create_ah(id, pd, &attr)?,
            Request::DestroyAh { ah } => self.destroy_ah(id, ah)?,
            Request::Stats => Reply::Stats {
                counters: self.stats(),
            },
            Request::QpStats => self.all_qp_stats()?,
            Request::QpStatsPage { from_qpn } => self.qp_stats_page(from_qpn)?,
            Request::Cm(request) => self.cm_request(id, request, fds)?,
            Request::AttachMcast { qp, gid } => self.attach_mcast(id, qp, Gid(gid))?,
            Request::DetachMcast { qp, gid } => self.detach_mcast(id, qp, Gid(gid))?,
        };
        Ok(reply.into())
    }

    /// The poller `poller`'s answer to the command `make` builds; `EIO` when it stopped.
    pub(super) fn ask<T>(
        &self,
        poller: usize,
        make: impl FnOnce(Sender<T>) -> Command,
    ) -> Result<T, Refusal> {
        self.pollers[poller]
            .call(make)
            .ok_or_else(Refusal::poller_stopped)
    }

    /// Sends the answer to `request`, or parks the request when it waits for a
    /// destination to resolve.
    fn answer(&mut self, id: u64, request: Request, answer: Result<Answer, Refusal>) {
        let Some(dgid) = self.parking.take() else {
            if let Err(refusal) = &answer {
                self.log_refusal(id, &request, refusal);
            }
            return self.reply(id, answer.unwrap_or_else(Answer::from));
        };
        match self.start_resolution(id, dgid) {
            Ok(()) => {
                debug!("context {id}: waiting for {} to resolve", dgid.to_ip());
                if let Some(c) = self.registry.find_mut(id) {
                    c.parked = Some(request);
                }
            }
            Err(e) => {
                let refusal =
                    Refusal::new(libc::EAGAIN, format!("cannot start resolving a path: {e}"));
                self.log_refusal(id, &request, &refusal);
                self.reply(id, refusal.into());
            }
        }
    }

    /// Logs one line for a refused request (but a hello: see [`Control::hello`]): the application, what it asked for and why
    /// it was refused, the text its error carries. An application that loops on a
    /// refusal must not flood the log: past [`REFUSALS_LOGGED`] of them, its further
    /// refusals are logged at debug level.
    fn log_refusal(&mut self, id: u64, request: &Request, refusal: &Refusal) {
        // A refused hello is logged where it is refused, once per user.
        if matches!(request, Request::Hello { .. }) {
            return;
        }
        let Some(conn) = self.registry.find_mut(id) else {
            return;
        };
        let handle = match request {
            Request::ModifyQp { qp, .. }
            | Request::QueryQp { qp }
            | Request::DestroyQp { qp }
            | Request::AttachMcast { qp, .. }
            | Request::DetachMcast { qp, .. } => Some(*qp),
            _ => None,
        };
        let qpn = handle.and_then(|h| conn.qps.get(&h)).map(|info| info.qpn);
        let errno = nix::errno::Errno::from_raw(refusal.errno);
        let line = format!(
            "application pid {} ({}): {} refused: {} ({errno})",
            conn.peer.pid,
            command_name(conn.peer.pid),
            subject::subject(request, qpn),
            refusal.message
        );
        if conn.refusals_logged < REFUSALS_LOGGED {
            conn.refusals_logged += 1;
            if conn.refusals_logged == REFUSALS_LOGGED {
                warn!("{line} (its further refusals are logged at debug level)");
            } else {
                warn!("{line}");
            }
        } else {
            debug!("{line}");
        }
    }

    /// Sends a reply and its descriptors.
    fn reply(&mut self, id: u64, Answer { reply, fds }: Answer) {
        let mut bytes = protocol::encode(&reply);
        if bytes.len() > protocol::MAX_MESSAGE {
            // The application could not receive it: say so instead.
            warn!("context {id}: a reply of {} bytes is too long", bytes.len());
            bytes = protocol::encode(&Reply::Error {
                errno: libc::E2BIG,
                message: "the reply would exceed a control message".into(),
            });
        }
        let Some(conn) = self.registry.find_mut(id) else {
            return;
        };
        let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|f| f.as_fd()).collect();
        if let Err(e) = sys::send_message(conn.sock.as_fd(), &bytes, &borrowed) {
            debug!("context {id}: reply failed: {e}; closing");
            self.hang_up(id);
        }
    }

    /// An application went away: destroy everything it owned.
    fn hang_up(&mut self, id: u64) {
        let Some(c) = self.registry.disconnect(id) else {
            return;
        };
        // Its rdma_cm ids go first: the peers of its connections hear a DREQ or a REJ.
        self.cm.connection_closed(id);
        self.send_mads();
        let link = &self.pollers[c.poller];
        let (qps, srqs, cqs, mrs, ahs) = (
            c.qps.len(),
            c.srqs.len(),
            c.cqs.len(),
            c.mrs.len(),
            c.ahs.len(),
        );
        let mut groups = Vec::new();
        for (_, qp) in c.qps {
            link.call(|tx| Command::DestroyQp(qp.qpn, tx));
            self.registry.release_qpn(qp.qpn);
            groups.extend(qp.groups);
        }
        for srq in c.srqs.keys() {
            link.call(|tx| Command::DestroySrq(*srq, tx));
        }
        for cq in c.cqs {
            link.call(|tx| Command::DestroyCq(cq, tx));
        }
        for (_, mr) in c.mrs {
            link.call(|tx| Command::DeregMr(mr.lkey, tx));
            self.registry.release_keys(mr.lkey, mr.rkey);
        }
        for ah in c.ahs.keys() {
            link.call(|tx| Command::DestroyAh(*ah, tx));
        }
        self.leave_groups(&groups);
        info!(
            "application pid {} (context {id}) went away: released {qps} QPs, {srqs} SRQs, {cqs} CQs, {mrs} MRs, {ahs} AHs",
            c.peer.pid
        );
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use verbs_shm::protocol::{AhAttr, QpAttr};
    use xroce_transport::{AttrMask, QpState};

    use super::*;
    use crate::control::fake::{FakeHost, Fixture, GID, refused};
    use crate::control::{Neighbour, Refusal};

    /// Sends `request` as the application does.
    fn send(fx: &Fixture, request: &Request) {
        sys::send_message(fx.app.as_fd(), &protocol::encode(request), &[]).unwrap();
    }

    /// The next reply the application receives, serving the daemon's side meanwhile.
    fn receive(fx: &mut Fixture) -> Reply {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut buf = vec![0u8; protocol::MAX_MESSAGE];
        loop {
            match sys::recv_message(fx.app.as_fd(), &mut buf) {
                Ok((n, _)) => return protocol::decode(&buf[..n]).unwrap(),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
            assert!(Instant::now() < deadline, "no reply");
            let ready: Vec<u64> = fx.control.poll_set().iter().map(|(id, _)| *id).collect();
            for id in ready.into_iter().filter(|&id| id != LISTENER) {
                fx.control.on_ready(id);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn to_rtr(qp: u32) -> Request {
        let attr = QpAttr {
            qp_state: QpState::Rtr.raw(),
            ah_attr: AhAttr {
                dgid: GID.0,
                is_global: true,
                ..AhAttr::default()
            },
            ..QpAttr::default()
        };
        let mask = AttrMask::STATE | AttrMask::AV;
        Request::ModifyQp {
            qp,
            attr,
            mask: mask.0,
        }
    }

    /// A fixture whose host must resolve every destination, ending with `resolved`.
    fn resolving(resolved: Result<Option<[u8; 6]>, String>) -> (Fixture, u32) {
        let host = FakeHost {
            neighbour: Neighbour::Pending,
            resolved,
            ..FakeHost::default()
        };
        let mut fx = Fixture::with(AppLimits::default(), host);
        let pd = fx.pd();
        let cq = fx.cq();
        let qp = fx.qp(pd, cq);
        (fx, qp)
    }

    #[test]
    fn the_first_request_must_be_hello() {
        let mut fx = Fixture::new();
        let (id, _app) = Fixture::connect(&mut fx.control);
        let answer = fx.control.handle(id, Request::AllocPd, Vec::new());
        refused(answer, libc::EPROTO, "the first request must be Hello");
        assert!(fx.control.registry.conn(id).pds.is_empty());
    }

    /// rdma_cm requests reach the connection manager; the ids of a connection go with it.
    #[test]
    fn rdma_cm_requests_are_served_and_go_with_their_connection() {
        use verbs_shm::cm::{CmReply, CmRequest, CmSockAddr, port_space};
        let mut fx = Fixture::new();
        let (_app, daemon) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::SeqPacket,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let channel = match fx.ask_with(Request::Cm(CmRequest::Channel), vec![daemon]) {
            Ok(Answer {
                reply: Reply::Cm(CmReply::Channel { channel }),
                ..
            }) => channel,
            other => panic!("{other:?}"),
        };
        let create = CmRequest::CreateId {
            channel,
            port_space: port_space::TCP,
            qp_type: 2,
        };
        let Ok(Reply::Cm(CmReply::Id { id })) = fx.ask(Request::Cm(create)) else {
            panic!("no id");
        };
        let bind = CmRequest::Bind {
            id,
            addr: CmSockAddr::from(std::net::SocketAddr::new(GID.to_ip(), 7174)),
        };
        assert!(matches!(
            fx.ask(Request::Cm(bind)),
            Ok(Reply::Cm(CmReply::Info(_)))
        ));
        // A connect naming a QP this application does not own is refused.
        let connect = CmRequest::Connect {
            id,
            param: verbs_shm::cm::CmConnParam {
                qp_num: 0x77,
                ..Default::default()
            },
        };
        refused(
            fx.ask(Request::Cm(connect)),
            libc::EINVAL,
            "not one of this process's",
        );
        // Once the connection is gone, so are its id and its channel.
        let gauge = |fx: &Fixture, name: &str| {
            fx.control
                .cm
                .stats()
                .iter()
                .find(|(n, _)| n == name)
                .map(|x| x.1)
        };
        assert_eq!(gauge(&fx, "cm_ids"), Some(1));
        assert_eq!(gauge(&fx, "cm_event_channels"), Some(1));
        let (_, app) = Fixture::connect(&mut fx.control);
        drop(std::mem::replace(&mut fx.app, app));
        fx.control.on_ready(fx.id);
        assert_eq!(gauge(&fx, "cm_ids"), Some(0));
        assert_eq!(gauge(&fx, "cm_event_channels"), Some(0));
    }

    /// An rdma_cm id with no address of its own resolves a multicast group by the host's
    /// route to it: none here, so the call fails as Linux's `rdma_resolve_addr` does.
    #[test]
    fn a_multicast_group_is_resolved_by_the_hosts_route() {
        use verbs_shm::cm::{CmReply, CmRequest, CmSockAddr, port_space};
        let host = FakeHost {
            route: super::super::RouteOut::Unreachable("the table of the test is empty".into()),
            ..FakeHost::default()
        };
        let mut fx = Fixture::with(AppLimits::default(), host);
        let (_app, daemon) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::SeqPacket,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let Ok(Answer {
            reply: Reply::Cm(CmReply::Channel { channel }),
            ..
        }) = fx.ask_with(Request::Cm(CmRequest::Channel), vec![daemon])
        else {
            panic!("no channel");
        };
        let create = CmRequest::CreateId {
            channel,
            port_space: port_space::UDP,
            qp_type: 4,
        };
        let Ok(Reply::Cm(CmReply::Id { id })) = fx.ask(Request::Cm(create)) else {
            panic!("no id");
        };
        let resolve = CmRequest::ResolveAddr {
            id,
            src: CmSockAddr::NONE,
            dst: CmSockAddr::from(std::net::SocketAddr::from(([230, 1, 2, 3], 0))),
            timeout_ms: 2000,
        };
        refused(
            fx.ask(Request::Cm(resolve)),
            libc::ENETUNREACH,
            "the table of the test is empty",
        );
    }

    #[test]
    fn a_request_is_answered_on_its_socket() {
        let mut fx = Fixture::new();
        send(&fx, &Request::AllocPd);
        let Reply::Pd { pd } = receive(&mut fx) else {
            panic!("no PD");
        };
        assert!(fx.control.registry.conn(fx.id).pds.contains(&pd));
        sys::send_message(fx.app.as_fd(), &[0xff; 3], &[]).unwrap();
        let reply = receive(&mut fx);
        assert!(
            matches!(&reply, Reply::Error { errno, message } if *errno == libc::EINVAL && message.contains("undecodable")),
            "{reply:?}"
        );
    }

    #[test]
    fn a_request_waits_for_its_path_while_its_connection_is_not_read() {
        let (mut fx, qp) = resolving(Ok(Some([2, 0, 0, 0, 0, 3])));
        send(&fx, &to_rtr(qp));
        fx.control.on_ready(fx.id);
        // Parked: the connection is out of the poll set, nothing reached the poller.
        let parked = fx.control.registry.conn(fx.id).parked.is_some();
        assert!(parked);
        let polled = fx.control.poll_set().iter().any(|(id, _)| *id == fx.id);
        assert!(!polled);
        assert!(!matches!(
            fx.poller.state().commands.last(),
            Some(Command::ModifyQp(..))
        ));
        assert_eq!(receive(&mut fx), Reply::Done);
        let state = fx.poller.state();
        let Some(Command::ModifyQp(_, attr, ..)) = state.commands.last() else {
            panic!("no ModifyQp");
        };
        assert_eq!(attr.path.dmac, [2, 0, 0, 0, 0, 3]);
        drop(state);
        assert!(fx.control.registry.conn(fx.id).parked.is_none());
    }

    #[test]
    fn a_local_destination_resolves_to_the_ports_own_address() {
        let (mut fx, qp) = resolving(Ok(None));
        send(&fx, &to_rtr(qp));
        assert_eq!(receive(&mut fx), Reply::Done);
        let state = fx.poller.state();
        let Some(Command::ModifyQp(_, attr, ..)) = state.commands.last() else {
            panic!("no ModifyQp");
        };
        assert_eq!(attr.path.dmac, crate::control::fake::MAC);
    }

    #[test]
    fn a_path_that_does_not_resolve_fails_with_ehostunreach() {
        let (mut fx, qp) = resolving(Err("no answer from the neighbour".into()));
        send(&fx, &to_rtr(qp));
        let reply = receive(&mut fx);
        let expected = Reply::from(Refusal::new(
            libc::EHOSTUNREACH,
            "cannot reach 192.0.2.1: no answer from the neighbour",
        ));
        assert_eq!(reply, expected);
        // The application carries on.
        send(&fx, &Request::AllocPd);
        assert!(matches!(receive(&mut fx), Reply::Pd { .. }));
    }

    #[test]
    fn a_hang_up_destroys_everything_the_application_owned() {
        let mut fx = Fixture::new();
        let pd = fx.pd();
        let cq = fx.cq();
        fx.qp(pd, cq);
        fx.mr(pd);
        let before = fx.commands();
        let (_, app) = Fixture::connect(&mut fx.control);
        drop(std::mem::replace(&mut fx.app, app));
        fx.control.on_ready(fx.id);
        assert!(fx.control.registry.find(fx.id).is_none());
        let state = fx.poller.state();
        let gone: Vec<&str> = state.commands[before..]
            .iter()
            .map(|c| match c {
                Command::DestroyQp(..) => "qp",
                Command::DestroyCq(..) => "cq",
                Command::DeregMr(..) => "mr",
                _ => "other",
            })
            .collect();
        assert_eq!(gone, ["qp", "cq", "mr"]);
    }
}
