//! A poller and a host that answer from memory, so that the control plane's handlers run
//! in unit tests: no network namespace, no AF_XDP socket, no poller thread.

use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};

use verbs_shm::contract;
use verbs_shm::protocol::{Piece, QpCaps, Reply, Request};
use verbs_shm::sys;
use xroce_transport::{QpAttr, SrqAttr};
use xroce_wire::{Gid, IbMtu};

use super::{
    Answer, AppLimits, Control, Host, Link, Neighbour, PortView, Refusal, Resolver, RouteOut,
};
use crate::poller::{Command, PollerStats};

/// The MAC address of the fake port.
pub(super) const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

/// The fake port's one GID.
pub(super) const GID: Gid = Gid::from_ipv4(Ipv4Addr::new(192, 0, 2, 1));

/// What the fake poller was told, and how it answers.
#[derive(Debug, Default)]
pub(super) struct FakeState {
    /// Every command it answered, in order.
    pub(super) commands: Vec<Command>,
    /// It has stopped: commands do not reach it.
    pub(super) stopped: bool,
    /// Creations and modifications are refused with this.
    pub(super) refuse: Option<String>,
    /// Destroying a CQ or an SRQ is refused with this errno.
    pub(super) busy: Option<i32>,
}

/// A poller that answers every command at once, on the caller's thread.
#[derive(Clone, Debug, Default)]
pub(super) struct FakePoller(Arc<Mutex<FakeState>>);

impl FakePoller {
    pub(super) fn state(&self) -> MutexGuard<'_, FakeState> {
        // NOTE(unwrap): tests; a panicking test poisons only itself.
        self.0.lock().expect("fake poller state")
    }
}

impl Link for FakePoller {
    fn send(&self, command: Command) -> bool {
        let mut s = self.state();
        if s.stopped {
            return false;
        }
        let done = |refuse: &Option<String>| refuse.clone().map_or(Ok(()), Err);
        let busy = s.busy.map_or(Ok(()), Err);
        let _ = match &command {
            Command::RegMr(_, tx)
            | Command::ReregMr(_, tx)
            | Command::CreateSrq(_, tx)
            | Command::CreateQp(_, tx)
            | Command::ModifyQp(_, _, _, tx) => tx.send(done(&s.refuse)).is_ok(),
            Command::DeregMr(_, tx)
            | Command::CreateCq(_, tx)
            | Command::DestroyQp(_, tx)
            | Command::CreateAh(_, _, _, tx)
            | Command::DestroyAh(_, tx) => tx.send(()).is_ok(),
            Command::DestroyCq(_, tx) | Command::DestroySrq(_, tx) => tx.send(busy).is_ok(),
            Command::ModifySrq(_, limit, tx) => tx
                .send(Ok(SrqAttr {
                    max_wr: 16,
                    max_sge: 1,
                    srq_limit: *limit,
                }))
                .is_ok(),
            Command::QuerySrq(_, tx) => tx
                .send(Ok(SrqAttr {
                    max_wr: 16,
                    max_sge: 1,
                    srq_limit: 0,
                }))
                .is_ok(),
            Command::QueryQp(_, tx) => tx.send(Some(QpAttr::default())).is_ok(),
            Command::Mcast(_, _, _, tx) => tx.send(Ok(true)).is_ok(),
            Command::Stats(tx) => tx.send(PollerStats::default()).is_ok(),
            Command::QpStats { reply, .. } => reply.send(Vec::new()).is_ok(),
            Command::SetGids(_) | Command::Transmit(_) | Command::Stop => true,
        };
        s.commands.push(command);
        true
    }

    fn doorbell(&self) -> std::io::Result<OwnedFd> {
        sys::eventfd()
    }
}

/// A host with one port, one GID and a neighbour table of one answer.
#[derive(Clone, Debug)]
pub(super) struct FakeHost {
    pub(super) port: PortView,
    /// What every lookup finds.
    pub(super) neighbour: Neighbour,
    /// What every resolution ends with.
    pub(super) resolved: Result<Option<[u8; 6]>, String>,
    /// Whether every process is privileged (`CAP_NET_RAW`).
    pub(super) privileged: bool,
    /// The hop limit of every route.
    pub(super) hop_limit: u8,
    /// Every multicast group joined (`true`) or left, in order; a join of a group in
    /// `refuse_groups` fails with `ENOBUFS`.
    pub(super) groups: Arc<Mutex<Vec<(bool, Gid)>>>,
    /// See `groups`.
    pub(super) refuse_groups: Vec<Gid>,
    /// Where every route leaves.
    pub(super) route: RouteOut,
}

impl Default for FakeHost {
    fn default() -> FakeHost {
        FakeHost {
            port: PortView {
                netdev: "fake0".into(),
                mac: MAC,
                mtu: 1500,
                active_mtu: IbMtu::Mtu1024,
                up: true,
                gids: vec![GID],
            },
            neighbour: Neighbour::Mac([2, 0, 0, 0, 0, 2]),
            resolved: Ok(Some([2, 0, 0, 0, 0, 3])),
            privileged: true,
            hop_limit: crate::control::ROCE_HOP_LIMIT,
            groups: Arc::default(),
            refuse_groups: Vec::new(),
            route: RouteOut::Port(None),
        }
    }
}

impl Host for FakeHost {
    fn port(&mut self) -> PortView {
        self.port.clone()
    }

    fn lookup(&mut self, _dgid: Gid) -> Neighbour {
        self.neighbour.clone()
    }

    fn hop_limit(&mut self, _dgid: Gid) -> u8 {
        self.hop_limit
    }

    fn resolver(&self) -> Resolver {
        let outcome = self.resolved.clone();
        Arc::new(move |_| outcome.clone())
    }

    fn is_privileged(&self, _pid: i32) -> bool {
        self.privileged
    }

    fn join_group(&mut self, gid: Gid) -> std::io::Result<()> {
        if self.refuse_groups.contains(&gid) {
            return Err(std::io::Error::from_raw_os_error(libc::ENOBUFS));
        }
        self.groups.lock().expect("groups").push((true, gid));
        Ok(())
    }

    fn leave_group(&mut self, gid: Gid) {
        self.groups.lock().expect("groups").push((false, gid));
    }

    fn route(&mut self, _destination: std::net::IpAddr) -> RouteOut {
        self.route.clone()
    }
}

/// A control plane over one fake poller, with one application that said hello.
pub(super) struct Fixture {
    pub(super) control: Control,
    pub(super) poller: FakePoller,
    /// The application's connection.
    pub(super) id: u64,
    /// The application's end of its control socket.
    pub(super) app: OwnedFd,
}

impl Fixture {
    pub(super) fn new() -> Fixture {
        Fixture::with(AppLimits::default(), FakeHost::default())
    }

    /// With these limits and this host. The daemon's mappings count as none, so that
    /// tests running side by side in one process do not see each other's.
    pub(super) fn with(limits: AppLimits, host: FakeHost) -> Fixture {
        let poller = FakePoller::default();
        // NOTE(unwrap): tests.
        let listener = sys::eventfd().unwrap();
        let wake_page = sys::memfd("test-wake", 4096, false).unwrap();
        let mut control = Control::new(
            "test0",
            listener,
            vec![poller.clone()],
            wake_page,
            Box::new(host),
            limits,
        )
        .unwrap()
        .with_map_budget(1 << 20);
        control.registry.live_areas = || 0;
        control.registry.locking = Box::new(|_| Ok(super::memlock::Locking::UNBOUNDED));
        let (id, app) = Fixture::connect(&mut control);
        let mut fx = Fixture {
            control,
            poller,
            id,
            app,
        };
        let hello = fx.ask(Request::Hello {
            version: contract::VERSION,
        });
        assert!(
            matches!(hello, Ok(Reply::Hello { pollers: 1, .. })),
            "{hello:?}"
        );
        fx
    }

    /// Connects another application (no hello yet): its connection and its end.
    pub(super) fn connect(control: &mut Control) -> (u64, OwnedFd) {
        let peer = super::Peer {
            pid: 1,
            ..super::Peer::default()
        };
        Fixture::connect_as(control, peer)
    }

    /// Connects another application as `peer` (no hello yet): its connection and its end.
    pub(super) fn connect_as(control: &mut Control, peer: super::Peer) -> (u64, OwnedFd) {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        // NOTE(unwrap): tests.
        let (daemon, app) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        )
        .unwrap();
        (control.registry.connect(daemon, peer), app)
    }

    /// The reply to `request`.
    pub(super) fn ask(&mut self, request: Request) -> Result<Reply, Refusal> {
        self.ask_with(request, Vec::new()).map(|a| a.reply)
    }

    /// The answer to `request` sent with `fds`.
    pub(super) fn ask_with(
        &mut self,
        request: Request,
        fds: Vec<OwnedFd>,
    ) -> Result<Answer, Refusal> {
        self.control.handle(self.id, request, fds)
    }

    /// How many commands reached the poller.
    pub(super) fn commands(&self) -> usize {
        self.poller.state().commands.len()
    }

    pub(super) fn pd(&mut self) -> u32 {
        match self.ask(Request::AllocPd) {
            Ok(Reply::Pd { pd }) => pd,
            other => panic!("{other:?}"),
        }
    }

    pub(super) fn cq(&mut self) -> u32 {
        match self.ask(Request::CreateCq {
            entries: 4,
            channel: false,
        }) {
            Ok(Reply::Cq { cq, .. }) => cq,
            other => panic!("{other:?}"),
        }
    }

    /// An RC QP with small queues.
    pub(super) fn create_qp(&mut self, pd: u32, cq: u32) -> Result<Reply, Refusal> {
        self.create_qp_of(pd, cq, 2)
    }

    /// A QP of type `qp_type` (`ibv_qp_type`) with small queues.
    pub(super) fn create_qp_of(
        &mut self,
        pd: u32,
        cq: u32,
        qp_type: u32,
    ) -> Result<Reply, Refusal> {
        self.ask(Request::CreateQp {
            pd,
            qp_type,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            caps: QpCaps {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            sq_sig_all: false,
        })
    }

    /// A UD QP with small queues: its handle and QP number.
    pub(super) fn ud_qp(&mut self, pd: u32, cq: u32) -> (u32, u32) {
        match self.create_qp_of(pd, cq, 4) {
            Ok(Reply::Qp { qp, qpn, .. }) => (qp, qpn),
            other => panic!("{other:?}"),
        }
    }

    pub(super) fn qp(&mut self, pd: u32, cq: u32) -> u32 {
        match self.create_qp(pd, cq) {
            Ok(Reply::Qp { qp, .. }) => qp,
            other => panic!("{other:?}"),
        }
    }

    /// Registers `pages` pages of a new memory file in `pd`.
    pub(super) fn reg_mr(&mut self, pd: u32, pages: u64) -> Result<Reply, Refusal> {
        let len = pages * sys::PAGE_SIZE as u64;
        // NOTE(unwrap): tests.
        let file = sys::memfd("test-mr", len as usize, false).unwrap();
        let request = Request::RegMrPieces {
            pd,
            iova: 0x1000,
            length: len,
            access: 0,
            start: 0,
            pieces: vec![Piece { offset: 0, len }],
        };
        self.ask_with(request, vec![file]).map(|a| a.reply)
    }

    pub(super) fn mr(&mut self, pd: u32) -> u32 {
        match self.reg_mr(pd, 1) {
            Ok(Reply::Mr { mr, .. }) => mr,
            other => panic!("{other:?}"),
        }
    }
}

/// `result` is a refusal with `errno` whose message contains `words`.
#[track_caller]
pub(super) fn refused<T: std::fmt::Debug>(result: Result<T, Refusal>, errno: i32, words: &str) {
    let e = result.expect_err("a refusal");
    assert_eq!(e.errno, errno, "{e}");
    assert!(e.message.contains(words), "{words:?} missing from {e}");
}
