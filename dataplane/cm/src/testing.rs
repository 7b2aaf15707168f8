//! Two hosts and a network between them, in virtual time: the deterministic simulation the
//! tests (and the engine's tests) drive rdma_cm with. MADs are lost, duplicated and
//! reordered by a seeded generator, so every run of a seed is the same run.
//!
//! Host A is 10.0.0.1, host B 10.0.0.2. [`Pair::step`] moves time to the next thing that
//! happens (a MAD arriving, a timer) and lets both hosts react; [`Pair::run_until`] steps
//! until a condition holds. Events pile up in [`Host::events`] for the test to read.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use xroce_transport::Instant;
use xroce_wire::mad::MAD_LEN;
use xroce_wire::{CmMad, CmMessage, Guid};

use crate::address::{MadAddress, Transmit};
use crate::random::{Random, SeededRandom};
use crate::rdma_cm::events::{Event, EventKind};
use crate::rdma_cm::id::IdHandle;
use crate::rdma_cm::{Config, RdmaCm};

/// One end.
#[derive(Debug)]
pub struct Host {
    /// Its rdma_cm.
    pub cm: RdmaCm,
    /// Its address.
    pub addr: IpAddr,
    /// Every event it reported, in order.
    pub events: Vec<Event>,
}

impl Host {
    /// Host `n`: address 10.0.0.n, node GUID 02:00:00:ff:fe:00:00:0n, randomness from
    /// `random`.
    pub fn new(n: u8, random: Box<dyn Random>) -> Host {
        Host::configured(n, random, |_| {})
    }

    /// Host `n` as [`Host::new`] makes it, its configuration changed by `edit` first.
    pub fn configured(n: u8, random: Box<dyn Random>, edit: impl FnOnce(&mut Config)) -> Host {
        let addr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, n));
        let mut config = Config::new(Guid(0x0200_00ff_fe00_0000 | u64::from(n)));
        edit(&mut config);
        let mut cm = RdmaCm::new(config, random);
        cm.add_local_address(addr);
        Host {
            cm,
            addr,
            events: Vec::new(),
        }
    }

    /// The events reported so far, emptied.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// The first event of `kind` for `id`, if any.
    pub fn event(&self, id: IdHandle, kind: EventKind) -> Option<&Event> {
        self.events.iter().find(|e| e.id == id && e.kind == kind)
    }

    /// The first event of `kind` for any id, if any.
    pub fn any(&self, kind: EventKind) -> Option<&Event> {
        self.events.iter().find(|e| e.kind == kind)
    }

    /// How many events of `kind` were reported.
    pub fn count(&self, kind: EventKind) -> usize {
        self.events.iter().filter(|e| e.kind == kind).count()
    }

    fn collect(&mut self) -> bool {
        let mut any = false;
        while let Some(e) = self.cm.poll_event() {
            self.events.push(e);
            any = true;
        }
        any
    }
}

/// How the network mistreats MADs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Impairments {
    /// Probability that a MAD is lost.
    pub loss: f64,
    /// Probability that a MAD arrives twice.
    pub duplicate: f64,
    /// Probability that a MAD is held back up to 20 latencies (and so overtaken).
    pub reorder: f64,
    /// One-way latency.
    pub latency: Duration,
}

impl Impairments {
    /// A perfect network with 10 µs of latency.
    pub const NONE: Impairments = Impairments {
        loss: 0.0,
        duplicate: 0.0,
        reorder: 0.0,
        latency: Duration::from_micros(10),
    };

    /// This loss, and nothing else.
    pub const fn lossy(loss: f64) -> Impairments {
        Impairments {
            loss,
            ..Impairments::NONE
        }
    }
}

/// Which host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Host A (10.0.0.1).
    A,
    /// Host B (10.0.0.2).
    B,
}

/// A MAD a host sent, as the wire saw it (before any loss).
#[derive(Clone, Debug)]
pub struct Sent {
    /// When.
    pub at: Instant,
    /// By whom.
    pub from: Side,
    /// Whether the network lost it.
    pub lost: bool,
    /// The bytes.
    pub mad: [u8; MAD_LEN],
}

impl Sent {
    /// The parsed message.
    pub fn message(&self) -> Option<CmMessage<'_>> {
        CmMad::parse(&self.mad).ok().map(|m| m.message)
    }

    /// The transaction ID.
    pub fn tid(&self) -> u64 {
        CmMad::parse(&self.mad).map_or(0, |m| m.transaction_id)
    }
}

#[derive(Debug)]
struct Flight {
    at: Instant,
    to: Side,
    tx: Transmit,
}

/// Two hosts, a network, and the time.
#[derive(Debug)]
pub struct Pair {
    /// Host A.
    pub a: Host,
    /// Host B.
    pub b: Host,
    /// The virtual time.
    pub now: Instant,
    /// How the network behaves.
    pub impair: Impairments,
    /// Every MAD sent, in order.
    pub wire: Vec<Sent>,
    /// MADs addressed to neither host.
    pub misrouted: u64,
    /// Positions in [`Pair::wire`] of MADs the network loses whatever the impairments
    /// say: `vec![0]` loses the first MAD sent.
    pub lose: Vec<usize>,
    rng: SeededRandom,
    flights: Vec<Flight>,
}

impl Pair {
    /// Two hosts with seeded randomness and a perfect network.
    pub fn new(seed: u64) -> Pair {
        Pair::with(seed, Impairments::NONE)
    }

    /// Two hosts with seeded randomness and this network.
    pub fn with(seed: u64, impair: Impairments) -> Pair {
        let a = Host::new(1, Box::new(SeededRandom::new(seed ^ 0xa)));
        let b = Host::new(2, Box::new(SeededRandom::new(seed ^ 0xb)));
        Pair::of(a, b, seed, impair)
    }

    /// These two hosts (A sends to B's address and back), a seed for the network's
    /// choices, and this network.
    pub fn of(a: Host, b: Host, seed: u64, impair: Impairments) -> Pair {
        Pair {
            a,
            b,
            now: Instant::from_nanos(1_000_000_000),
            impair,
            wire: Vec::new(),
            misrouted: 0,
            lose: Vec::new(),
            rng: SeededRandom::new(seed),
            flights: Vec::new(),
        }
    }

    /// The host on one side.
    pub fn host(&mut self, side: Side) -> &mut Host {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// Puts what both hosts want to send on the network.
    fn send(&mut self) -> bool {
        let mut any = false;
        for from in [Side::A, Side::B] {
            while let Some(tx) = self.host(from).cm.poll_transmit() {
                any = true;
                let to = if tx.to.remote == self.b.addr && from == Side::A {
                    Side::B
                } else if tx.to.remote == self.a.addr && from == Side::B {
                    Side::A
                } else {
                    self.misrouted += 1;
                    continue;
                };
                let lost =
                    self.rng.chance(self.impair.loss) || self.lose.contains(&self.wire.len());
                self.wire.push(Sent {
                    at: self.now,
                    from,
                    lost,
                    mad: tx.mad,
                });
                if lost {
                    continue;
                }
                let copies = if self.rng.chance(self.impair.duplicate) {
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    let mut delay = self.impair.latency;
                    if self.rng.chance(self.impair.reorder) {
                        delay += self.impair.latency * (1 + self.rng.below(20) as u32);
                    }
                    self.flights.push(Flight {
                        at: self.now + delay,
                        to,
                        tx: tx.clone(),
                    });
                }
            }
        }
        any
    }

    /// Delivers what has arrived by now.
    fn deliver(&mut self) -> bool {
        let now = self.now;
        let mut due: Vec<Flight> = Vec::new();
        let mut i = 0;
        while i < self.flights.len() {
            if self.flights[i].at <= now {
                due.push(self.flights.remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|f| f.at);
        let any = !due.is_empty();
        for f in due {
            let from = MadAddress {
                local: f.tx.to.remote,
                remote: f.tx.to.local,
                remote_qpn: xroce_wire::mad::GSI_QPN,
                pkey_index: f.tx.to.pkey_index,
            };
            self.host(f.to).cm.handle_mad(now, from, &f.tx.mad);
        }
        any
    }

    /// Lets both hosts react to everything due at the current time, until they are quiet.
    pub fn settle(&mut self) {
        loop {
            let now = self.now;
            self.a.cm.handle_timeout(now);
            self.b.cm.handle_timeout(now);
            let mut any = self.send();
            any |= self.deliver();
            any |= self.a.collect();
            any |= self.b.collect();
            any |= self.send();
            if !any {
                break;
            }
        }
    }

    /// When the next thing happens, `None` if nothing ever will.
    pub fn next_time(&mut self) -> Option<Instant> {
        let flights = self.flights.iter().map(|f| f.at).min();
        [flights, self.a.cm.poll_timeout(), self.b.cm.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Settles, moves time to the next thing that happens and settles again; `false` if
    /// nothing was left to happen.
    pub fn step(&mut self) -> bool {
        self.settle();
        let Some(next) = self.next_time() else {
            return false;
        };
        self.now = self.now.max(next);
        self.settle();
        true
    }

    /// Steps until `done` holds or `limit` of virtual time has passed; whether it held.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Pair) -> bool) -> bool {
        let end = self.now + limit;
        self.settle();
        while !done(self) {
            match self.next_time() {
                Some(next) if next <= end => {
                    self.now = self.now.max(next);
                    self.settle();
                }
                _ => {
                    self.now = end;
                    self.settle();
                    return done(self);
                }
            }
        }
        true
    }

    /// Lets `d` of virtual time pass.
    pub fn run_for(&mut self, d: Duration) {
        let _ = self.run_until(d, |_| false);
    }

    /// Delivers `mad` to `to` now, as if `to`'s peer had sent it (a copy the network made,
    /// or a MAD of a peer that is not simulated).
    pub fn inject(&mut self, to: Side, mad: &[u8]) {
        let (local, remote) = match to {
            Side::A => (self.a.addr, self.b.addr),
            Side::B => (self.b.addr, self.a.addr),
        };
        let now = self.now;
        self.host(to)
            .cm
            .handle_mad(now, MadAddress::new(local, remote), mad);
        self.settle();
    }

    /// The MADs `from` sent whose message `pick` selects.
    pub fn sent_by(&self, from: Side, mut pick: impl FnMut(&CmMessage<'_>) -> bool) -> Vec<&Sent> {
        self.wire
            .iter()
            .filter(|s| s.from == from && s.message().is_some_and(|m| pick(&m)))
            .collect()
    }
}
