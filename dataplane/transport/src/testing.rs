//! Building blocks for tests, the deterministic simulation, fuzz targets and benchmarks:
//! an in-process memory table, hosts with an endpoint and that memory, connected queue
//! pairs, and a lossless in-order link. The engine does not use this module.

use std::net::{Ipv4Addr, Ipv6Addr};

use xroce_wire::{Gid, IbMtu, Psn, Qpn};

use crate::attributes::{Access, AttrMask, Limits, Path, QpAttr, QpCaps, QpState, QpType};
use crate::endpoint::{Endpoint, EndpointConfig};
use crate::frame::MAX_FRAME;
use crate::memory::{
    AccessRequest, AtomicOp, KeyEntry, KeyKind, KeyRef, MemoryError, MemoryTable, PdId,
    check_access, check_invalidate,
};
use crate::qp::QpConfig;
use crate::time::Instant;

/// The protection domain every helper uses.
pub const PD: PdId = PdId(1);

/// One region of a [`Regions`] table.
#[derive(Clone, Debug)]
pub struct Region {
    /// The key local work requests use.
    pub lkey: u32,
    /// The key the peer uses; `None` once invalidated (SEND with invalidate).
    pub rkey: Option<u32>,
    /// Its protection domain.
    pub pd: PdId,
    /// Its rights.
    pub access: Access,
    /// The address of its first byte, as work requests and the peer name it.
    pub base: u64,
    /// Its contents.
    pub bytes: Vec<u8>,
}

impl Region {
    /// What [`check_access`] checks an access against.
    pub fn entry(&self) -> KeyEntry {
        KeyEntry {
            lkey: self.lkey,
            rkey: self.rkey,
            pd: self.pd,
            access: self.access,
            base: self.base,
            len: self.bytes.len() as u64,
        }
    }
}

/// A plain in-process [`MemoryTable`]: regions backed by `Vec<u8>`, looked up linearly and
/// checked by [`check_access`], as the engine's table is. Used by unit tests, the
/// deterministic simulation, the fuzz targets and the benchmarks.
#[derive(Clone, Debug, Default)]
pub struct Regions {
    regions: Vec<Region>,
}

impl Regions {
    /// An empty table.
    pub fn new() -> Regions {
        Regions::default()
    }

    /// Adds a region and returns its index.
    pub fn insert(&mut self, region: Region) -> usize {
        self.regions.push(region);
        self.regions.len() - 1
    }

    /// Removes every region with this lkey (deregistration).
    pub fn remove(&mut self, lkey: u32) {
        self.regions.retain(|r| r.lkey != lkey);
    }

    /// Every region, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &Region> + '_ {
        self.regions.iter()
    }

    /// The region at `index`.
    pub fn region(&self, index: usize) -> &Region {
        &self.regions[index]
    }

    /// The region at `index`, mutably.
    pub fn region_mut(&mut self, index: usize) -> &mut Region {
        &mut self.regions[index]
    }

    /// The first region `key` names, if any.
    fn lookup(&self, key: KeyRef) -> Option<&Region> {
        self.regions.iter().find(|r| r.entry().answers(key))
    }

    /// The first region `key` names, if any, to change.
    fn lookup_mut(&mut self, key: KeyRef) -> Option<&mut Region> {
        self.regions.iter_mut().find(|r| r.entry().answers(key))
    }
}

/// The byte range `request` touches in `region`, the region the table found under its key,
/// if [`check_access`] lets the access through (it refuses one without a region).
fn checked_range(
    region: Option<&Region>,
    request: &AccessRequest,
) -> Result<core::ops::Range<usize>, MemoryError> {
    let offset = check_access(region.map(Region::entry).as_ref(), request)?;
    // Both fit in usize: offset + len <= the region's length.
    let start = offset as usize;
    Ok(start..start + request.len as usize)
}

impl MemoryTable for Regions {
    fn invalidate(&mut self, key: KeyRef) -> Result<(), MemoryError> {
        let rkey = KeyRef {
            kind: KeyKind::Remote,
            ..key
        };
        let region = self.lookup_mut(rkey);
        check_invalidate(region.as_deref().map(Region::entry).as_ref(), key)?;
        if let Some(region) = region {
            region.rkey = None;
        }
        Ok(())
    }

    fn check(&self, key: KeyRef, addr: u64, len: u64, needed: Access) -> Result<(), MemoryError> {
        let request = AccessRequest {
            key,
            addr,
            len,
            needed,
        };
        checked_range(self.lookup(key), &request).map(|_| ())
    }

    fn read(
        &self,
        key: KeyRef,
        addr: u64,
        dst: &mut [u8],
        needed: Access,
    ) -> Result<(), MemoryError> {
        let request = AccessRequest {
            key,
            addr,
            len: dst.len() as u64,
            needed,
        };
        let region = self.lookup(key);
        let range = checked_range(region, &request)?;
        let region = region.ok_or(MemoryError::UnknownKey(key.key))?;
        dst.copy_from_slice(&region.bytes[range]);
        Ok(())
    }

    fn write(
        &mut self,
        key: KeyRef,
        addr: u64,
        src: &[u8],
        needed: Access,
    ) -> Result<(), MemoryError> {
        let request = AccessRequest {
            key,
            addr,
            len: src.len() as u64,
            needed,
        };
        let region = self.lookup_mut(key);
        let range = checked_range(region.as_deref(), &request)?;
        let region = region.ok_or(MemoryError::UnknownKey(key.key))?;
        region.bytes[range].copy_from_slice(src);
        Ok(())
    }

    fn atomic(&mut self, key: KeyRef, addr: u64, op: AtomicOp) -> Result<u64, MemoryError> {
        let request = AccessRequest::atomic(key, addr)?;
        let region = self.lookup_mut(key);
        let range = checked_range(region.as_deref(), &request)?;
        let region = region.ok_or(MemoryError::UnknownKey(key.key))?;
        let bytes = &mut region.bytes[range];
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes);
        let orig = u64::from_le_bytes(word);
        bytes.copy_from_slice(&op.apply(orig).to_le_bytes());
        Ok(orig)
    }
}

/// A host: an endpoint, its memory and its addresses.
#[derive(Debug)]
pub struct Host {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Its memory regions.
    pub mem: Regions,
    /// Its MAC address.
    pub mac: [u8; 6],
    /// Its GID (an IPv4-mapped 10.0.0.x, or fd00::x).
    pub gid: Gid,
}

impl Host {
    /// Host number `n`: MAC 02:00:00:00:00:n, address 10.0.0.n.
    pub fn new(n: u8) -> Host {
        Host::with_limits(n, Limits::default())
    }

    /// Host number `n` addressed over IPv6: MAC 02:00:00:00:00:n, address fd00::n.
    pub fn ipv6(n: u8) -> Host {
        let gid = Gid::from_ipv6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(n)));
        Host::with_gid(n, gid, Limits::default())
    }

    /// Host number `n` with these device limits.
    pub fn with_limits(n: u8, limits: Limits) -> Host {
        Host::with_gid(n, Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, n)), limits)
    }

    /// Host number `n` (MAC 02:00:00:00:00:n) whose GID table holds `gid` alone.
    pub fn with_gid(n: u8, gid: Gid, limits: Limits) -> Host {
        let mac = [2, 0, 0, 0, 0, n];
        let config = EndpointConfig {
            mac,
            gids: vec![gid],
            limits,
            default_hop_limit: 64,
            max_inflight: u32::MAX,
        };
        Host {
            endpoint: Endpoint::new(config),
            mem: Regions::new(),
            mac,
            gid,
        }
    }

    /// Registers a zeroed region of `len` bytes at `base` with keys `key` (lkey) and
    /// `key | 0x8000_0000` (rkey), and returns its index in [`Host::mem`].
    pub fn add_region(&mut self, key: u32, base: u64, len: usize, access: Access) -> usize {
        self.mem.insert(Region {
            lkey: key,
            rkey: Some(key | 0x8000_0000),
            pd: PD,
            access,
            base,
            bytes: vec![0; len],
        })
    }

    /// The path from this host to `other`.
    pub fn path_to(&self, other: &Host) -> Path {
        Path {
            dgid: other.gid,
            dmac: other.mac,
            hop_limit: 64,
            ..Path::default()
        }
    }
}

/// Parameters of a connection made by [`connect`].
#[derive(Clone, Copy, Debug)]
pub struct Connection {
    /// The path MTU.
    pub mtu: IbMtu,
    /// The local ACK timeout code.
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries.
    pub rnr_retry: u8,
    /// The RNR timer code each side sends.
    pub min_rnr_timer: u8,
    /// Outstanding READ/atomic requests, both directions.
    pub max_rd_atomic: u8,
    /// Access each side grants.
    pub access: Access,
    /// The first PSN each side sends (the other expects it).
    pub psn_a: Psn,
    /// The first PSN the second side sends.
    pub psn_b: Psn,
    /// The Q_Key (UD).
    pub qkey: u32,
    /// Send and receive queue depth.
    pub depth: u32,
}

impl Default for Connection {
    fn default() -> Connection {
        Connection {
            mtu: IbMtu::Mtu1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 16,
            access: Access::ALL,
            psn_a: Psn::new(0x100),
            psn_b: Psn::new(0x200),
            qkey: 0x1111_1111,
            depth: 1024,
        }
    }
}

/// The creation parameters helpers use.
pub fn qp_config(qpn: Qpn, qp_type: QpType, depth: u32, limits: Limits) -> QpConfig {
    QpConfig {
        qpn,
        qp_type,
        pd: PD,
        caps: QpCaps {
            max_send_wr: depth,
            max_recv_wr: depth,
            max_send_sge: 16,
            max_recv_sge: 16,
            max_inline_data: 256,
        },
        srq: None,
        sq_sig_all: false,
        limits,
    }
}

/// The far end of a connection, as the out-of-band exchange tells it.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    /// The path to it.
    pub path: Path,
    /// Its QP number.
    pub qpn: Qpn,
    /// The first PSN this side sends.
    pub sq_psn: Psn,
    /// The first PSN this side expects.
    pub rq_psn: Psn,
}

/// Brings a created QP to RTS connected to `peer`, as `ibv_rc_pingpong` does.
pub fn bring_up(
    host: &mut Host,
    now: Instant,
    qpn: Qpn,
    qp_type: QpType,
    peer: Peer,
    c: &Connection,
) {
    let Peer {
        path,
        qpn: dest,
        sq_psn,
        rq_psn,
    } = peer;
    let ep = &mut host.endpoint;
    let mut attr = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        access: c.access,
        qkey: c.qkey,
        ..QpAttr::default()
    };
    let init = match qp_type {
        QpType::Ud => AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY,
        _ => AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
    };
    // NOTE(unwrap): the attributes are the ones verbs applications use; a failure is a bug.
    ep.modify_qp(now, qpn, &attr, init).unwrap();
    attr.qp_state = QpState::Rtr;
    attr.path = path;
    attr.path_mtu = c.mtu;
    attr.dest_qpn = dest;
    attr.rq_psn = rq_psn;
    attr.max_dest_rd_atomic = c.max_rd_atomic;
    attr.min_rnr_timer = c.min_rnr_timer;
    let rtr = match qp_type {
        QpType::Ud => AttrMask::STATE,
        QpType::Uc => {
            AttrMask::STATE
                | AttrMask::AV
                | AttrMask::PATH_MTU
                | AttrMask::DEST_QPN
                | AttrMask::RQ_PSN
        }
        QpType::Rc => {
            AttrMask::STATE
                | AttrMask::AV
                | AttrMask::PATH_MTU
                | AttrMask::DEST_QPN
                | AttrMask::RQ_PSN
                | AttrMask::MAX_DEST_RD_ATOMIC
                | AttrMask::MIN_RNR_TIMER
        }
    };
    ep.modify_qp(now, qpn, &attr, rtr).unwrap();
    attr.qp_state = QpState::Rts;
    attr.sq_psn = sq_psn;
    attr.timeout = c.timeout;
    attr.retry_cnt = c.retry_cnt;
    attr.rnr_retry = c.rnr_retry;
    attr.max_rd_atomic = c.max_rd_atomic;
    let rts = match qp_type {
        QpType::Rc => {
            AttrMask::STATE
                | AttrMask::SQ_PSN
                | AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
                | AttrMask::MAX_QP_RD_ATOMIC
        }
        _ => AttrMask::STATE | AttrMask::SQ_PSN,
    };
    ep.modify_qp(now, qpn, &attr, rts).unwrap();
}

/// Creates QP `qa` on `a` and `qb` on `b` and connects them (UD QPs are only brought up).
pub fn connect(
    a: &mut Host,
    qa: Qpn,
    b: &mut Host,
    qb: Qpn,
    qp_type: QpType,
    c: &Connection,
    now: Instant,
) {
    let limits_a = a.endpoint.config().limits;
    let limits_b = b.endpoint.config().limits;
    // NOTE(unwrap): fresh QP numbers chosen by the test.
    a.endpoint
        .create_qp(qp_config(qa, qp_type, c.depth, limits_a))
        .unwrap();
    b.endpoint
        .create_qp(qp_config(qb, qp_type, c.depth, limits_b))
        .unwrap();
    let (pa, pb) = (a.path_to(b), b.path_to(a));
    let peer_of_a = Peer {
        path: pa,
        qpn: qb,
        sq_psn: c.psn_a,
        rq_psn: c.psn_b,
    };
    let peer_of_b = Peer {
        path: pb,
        qpn: qa,
        sq_psn: c.psn_b,
        rq_psn: c.psn_a,
    };
    bring_up(a, now, qa, qp_type, peer_of_a, c);
    bring_up(b, now, qb, qp_type, peer_of_b, c);
}

/// Which way a frame travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the first host to the second.
    AtoB,
    /// From the second host to the first.
    BtoA,
}

/// Moves every frame each host has to send to the other, in order, until neither has
/// anything, passing each through `filter` (return `false` to drop it). Returns the number
/// of frames sent.
pub fn exchange(
    a: &mut Host,
    b: &mut Host,
    now: Instant,
    filter: &mut dyn FnMut(Direction, &[u8]) -> bool,
) -> usize {
    let mut buf = vec![0u8; MAX_FRAME];
    let mut sent = 0;
    loop {
        let mut moved = false;
        while let Some(t) = a.endpoint.poll_transmit(now, &mut buf, &mut a.mem) {
            sent += 1;
            moved = true;
            if filter(Direction::AtoB, &buf[..t.len]) {
                b.endpoint.handle_frame(now, &buf[..t.len], &mut b.mem);
            }
        }
        while let Some(t) = b.endpoint.poll_transmit(now, &mut buf, &mut b.mem) {
            sent += 1;
            moved = true;
            if filter(Direction::BtoA, &buf[..t.len]) {
                a.endpoint.handle_frame(now, &buf[..t.len], &mut a.mem);
            }
        }
        if !moved {
            return sent;
        }
    }
}

/// Runs both hosts until nothing is left to send and no timer is pending, jumping virtual
/// time to the next timer whenever the link is idle. Stops after `max_rounds` rounds.
/// Returns the final time.
pub fn run(
    a: &mut Host,
    b: &mut Host,
    mut now: Instant,
    max_rounds: usize,
    filter: &mut dyn FnMut(Direction, &[u8]) -> bool,
) -> Instant {
    for _ in 0..max_rounds {
        exchange(a, b, now, filter);
        let next = match (a.endpoint.poll_timeout(), b.endpoint.poll_timeout()) {
            (Some(x), Some(y)) => x.min(y),
            (x, y) => match x.or(y) {
                Some(t) => t,
                None => return now,
            },
        };
        now = now.max(next);
        a.endpoint.handle_timeout(now, &mut a.mem);
        b.endpoint.handle_timeout(now, &mut b.mem);
    }
    now
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Regions {
        let mut t = Regions::new();
        t.insert(Region {
            lkey: 0x100,
            rkey: Some(0x200),
            pd: PdId(1),
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            base: 0x1000,
            bytes: vec![0; 64],
        });
        t
    }

    fn remote(key: u32) -> KeyRef {
        KeyRef {
            key,
            kind: KeyKind::Remote,
            pd: PdId(1),
        }
    }

    #[test]
    fn write_inside_the_region_lands() {
        let mut t = table();
        t.write(remote(0x200), 0x1010, &[1, 2, 3], Access::REMOTE_WRITE)
            .unwrap();
        assert_eq!(&t.region(0).bytes[0x10..0x13], &[1, 2, 3]);
    }

    #[test]
    fn every_violation_is_refused_and_nothing_is_written() {
        let mut t = table();
        let w = Access::REMOTE_WRITE;
        assert_eq!(
            t.write(remote(0x201), 0x1000, &[1], w),
            Err(MemoryError::UnknownKey(0x201))
        );
        let wrong_pd = KeyRef {
            pd: PdId(2),
            ..remote(0x200)
        };
        assert_eq!(
            t.write(wrong_pd, 0x1000, &[1], w),
            Err(MemoryError::WrongPd(0x200))
        );
        assert!(matches!(
            t.write(remote(0x200), 0x1000, &[1], Access::REMOTE_READ),
            Err(MemoryError::AccessDenied { .. })
        ));
        // One byte past the end, one byte before the start, and an overflowing range.
        assert!(matches!(
            t.write(remote(0x200), 0x103f, &[1, 2], w),
            Err(MemoryError::OutOfBounds { .. })
        ));
        assert!(matches!(
            t.write(remote(0x200), 0xfff, &[1], w),
            Err(MemoryError::OutOfBounds { .. })
        ));
        assert!(matches!(
            t.check(remote(0x200), u64::MAX, 2, w),
            Err(MemoryError::OutOfBounds { .. })
        ));
        // The lkey does not work as an rkey.
        assert_eq!(
            t.write(remote(0x100), 0x1000, &[1], w),
            Err(MemoryError::UnknownKey(0x100))
        );
        assert!(t.region(0).bytes.iter().all(|&b| b == 0));
    }

    #[test]
    fn atomics_need_alignment_and_rights() {
        let mut t = table();
        let op = AtomicOp::FetchAdd { add: 1 };
        assert_eq!(
            t.atomic(remote(0x200), 0x1004, op),
            Err(MemoryError::Misaligned(0x1004))
        );
        assert!(matches!(
            t.atomic(remote(0x200), 0x1008, op),
            Err(MemoryError::AccessDenied { .. })
        ));
        t.region_mut(0).access = Access::ALL;
        assert_eq!(t.atomic(remote(0x200), 0x1008, op), Ok(0));
        assert_eq!(t.atomic(remote(0x200), 0x1008, op), Ok(1));
        let cas = AtomicOp::CompareSwap {
            compare: 2,
            swap: 7,
        };
        assert_eq!(t.atomic(remote(0x200), 0x1008, cas), Ok(2));
        assert_eq!(t.atomic(remote(0x200), 0x1008, cas), Ok(7));
    }

    #[test]
    fn an_invalidated_rkey_is_unknown_and_cannot_be_invalidated_again() {
        let mut t = table();
        let wrong_pd = KeyRef {
            pd: PdId(2),
            ..remote(0x200)
        };
        assert_eq!(t.invalidate(wrong_pd), Err(MemoryError::WrongPd(0x200)));
        t.invalidate(remote(0x200)).unwrap();
        assert_eq!(
            t.check(remote(0x200), 0x1000, 1, Access::NONE),
            Err(MemoryError::UnknownKey(0x200))
        );
        assert_eq!(
            t.invalidate(remote(0x200)),
            Err(MemoryError::UnknownKey(0x200))
        );
        // The lkey still works.
        let local = KeyRef {
            key: 0x100,
            kind: KeyKind::Local,
            pd: PdId(1),
        };
        assert!(t.check(local, 0x1000, 64, Access::LOCAL_WRITE).is_ok());
    }
}
