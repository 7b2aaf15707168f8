//! What the netns + XDP + AF_XDP tests share: a lab with hugepages, one XDP program and one
//! AF_XDP port per host, and the check that nothing is left behind.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses a different part"
)]

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use xroce_engine::xdp::{AttachMode, AttachRequest, XdpProgram};
use xroce_engine::xsk::{Port, PortConfig};
use xroce_lab::hugepages::{self, HugepageReservation};
use xroce_lab::{Lab, LabConfig, Side, netns};

/// Hugepages one port's UMEM needs (2048 + 2048 frames of 4 KiB = 16 MiB).
pub const PAGES_PER_PORT: u64 = 8;
/// Hugepages one multi-buffer port's UMEM needs (2048 + 2 × 2048 frames = 24 MiB).
pub const PAGES_PER_MULTI_BUFFER_PORT: u64 = 12;

/// Tests of one binary take turns: they reserve hugepages and check the pool's size
/// afterwards, which parallel tests would blur.
static SERIAL: Mutex<()> = Mutex::new(());

/// A lab for one test, with the state to check after it is gone.
pub struct Fixture {
    // Field order is drop order: the lab goes before the hugepages are given back.
    pub lab: Lab,
    pub hugepages: HugepageReservation,
    hugepages_before: u64,
    _serial: MutexGuard<'static, ()>,
}

impl Fixture {
    /// A two-host lab (no router) and hugepages for two ports.
    pub fn new() -> Fixture {
        Fixture::with(&LabConfig::default())
    }

    /// A lab built from `config` and hugepages for two ports.
    pub fn with(config: &LabConfig) -> Fixture {
        Fixture::with_pages(config, 2 * PAGES_PER_PORT)
    }

    /// A lab built from `config` and `pages` hugepages.
    pub fn with_pages(config: &LabConfig, pages: u64) -> Fixture {
        let serial = SERIAL
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let removed = xroce_lab::cleanup_stale().expect("removing stale labs");
        if !removed.is_empty() {
            eprintln!("removed stale lab namespaces: {removed:?}");
        }
        let hugepages_before = hugepages::persistent().expect("reading the hugepage pool");
        let hugepages = HugepageReservation::reserve(pages).expect("reserving hugepages");
        let lab = Lab::new(config).expect("building the lab");
        Fixture {
            lab,
            hugepages,
            hugepages_before,
            _serial: serial,
        }
    }

    /// Tears everything down and checks that nothing the test made is left: no namespace,
    /// no XDP program with one of `program_ids`, no hugepage reservation.
    pub fn finish(self, program_ids: &[u32]) {
        let Fixture {
            mut lab,
            hugepages,
            hugepages_before,
            _serial,
        } = self;
        let namespaces = lab.namespaces().to_vec();
        lab.teardown().expect("tearing the lab down");
        drop(lab);
        drop(hugepages);
        for ns in &namespaces {
            assert!(!netns::exists(ns), "namespace {ns} is still there");
        }
        // Programs are freed once the last reference goes, which the kernel finishes
        // asynchronously: wait for it (bounded), never assert how long it took.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let alive = loaded_program_ids();
            let left: Vec<u32> = program_ids
                .iter()
                .copied()
                .filter(|id| alive.contains(id))
                .collect();
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "XDP programs {left:?} are still loaded"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The pool is back to its size (pages a UMEM still pins until the kernel releases it
        // from a work queue are surplus now, and go back to the system when freed).
        let persistent = hugepages::persistent().expect("reading the hugepage pool");
        assert_eq!(
            persistent, hugepages_before,
            "the hugepage pool kept pages of the test"
        );
        // ... and those surplus pages do go.
        loop {
            let surplus = hugepages::total()
                .expect("nr_hugepages")
                .saturating_sub(persistent);
            if surplus == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{surplus} surplus hugepages never freed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn loaded_program_ids() -> Vec<u32> {
    aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .map(|info| info.id())
        .collect()
}

/// One host's XDP program and port, made on a thread inside its namespace.
pub struct Endpoint {
    pub xdp: XdpProgram,
    pub port: Port,
    pub mode: AttachMode,
}

impl Endpoint {
    /// Loads and attaches the XDP program to the host's interface (native where possible),
    /// opens a port on queue 0 and puts it in the XSKMAP. Call from inside the namespace.
    pub fn open(lab: &Lab, side: Side) -> Endpoint {
        Endpoint::open_with(lab, side, AttachRequest::Auto, false)
    }

    /// [`Endpoint::open`] with the XDP attach mode asked for and multi-buffer on or off.
    pub fn open_with(
        lab: &Lab,
        side: Side,
        request: AttachRequest,
        multi_buffer: bool,
    ) -> Endpoint {
        let interface = lab.host(side).interface.clone();
        let mut xdp = XdpProgram::load(1).expect("loading the XDP program");
        let mode = xdp
            .attach(&interface, request)
            .expect("attaching the XDP program");
        let mut config = PortConfig::new(&interface, 0);
        config.multi_buffer = multi_buffer;
        let port = Port::open(&config).expect("opening the AF_XDP port");
        xdp.insert_socket(0, std::os::fd::AsFd::as_fd(&port))
            .expect("filling the XSKMAP");
        Endpoint { xdp, port, mode }
    }
}

/// Runs `f` on a thread inside `side`'s namespace of `lab`.
pub fn in_host<T: Send>(lab: &Lab, side: Side, f: impl FnOnce() -> T + Send) -> T {
    lab.run_in(side, f).expect("entering the namespace")
}
