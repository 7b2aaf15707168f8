//! Frames that arrive on one poller's queue for a queue pair another poller owns.
//!
//! A QP belongs to the poller whose index is its number modulo the number of pollers (the
//! control plane allocates QPNs that way), so any poller can tell a frame's owner from its
//! BTH without a shared table. RSS spreads RoCE flows over the queues by UDP source port,
//! which the peer chooses, so a frame may land on any queue: it is copied into a buffer
//! and handed to its owner through a bounded channel, with no lock on the packet path.
//! Buffers travel back to the poller that filled them, so a steady stream allocates
//! nothing. A poller that sleeps is woken through its doorbell, as applications wake it.
//!
//! A multicast frame goes to every poller with a queue pair attached to its group: the
//! mesh shares which those are (each poller records its own memberships), so a frame
//! crosses only to them, and one for a group nobody joined is counted where it arrived.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{Ordering, fence};
use std::sync::{Arc, Mutex, PoisonError};

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use verbs_shm::contract::PaddedWord;
use verbs_shm::sys::{self, Mapping};

/// Frames in flight towards one poller before the next one is dropped (and counted).
const DEPTH: usize = 1024;

/// Spare buffers a poller keeps.
const POOL: usize = DEPTH;

/// A frame on its way to its owner.
#[derive(Debug)]
struct Parcel {
    buf: Vec<u8>,
    len: usize,
    from: usize,
}

#[derive(Debug, Clone)]
struct Peer {
    parcels: Sender<Parcel>,
    returns: Sender<Vec<u8>>,
    doorbell: Arc<OwnedFd>,
}

/// The pollers (one bit each, by index) with queue pairs attached to each multicast group
/// (by its GID, as the transport keys it), shared by the mesh. Read for each multicast
/// frame that arrives, written when a poller's queue pairs join or leave a group.
type McastPollers = Arc<Mutex<HashMap<u128, u64>>>;

/// The most pollers whose memberships [`McastPollers`] records; with more, a multicast
/// frame goes to every poller, as if each had members.
const MCAST_TRACKED: usize = 64;

/// One poller's end of the hand-over mesh.
#[derive(Debug)]
pub struct Handoff {
    index: usize,
    peers: Vec<Peer>,
    mcast: McastPollers,
    inbox: Receiver<Parcel>,
    returns: Receiver<Vec<u8>>,
    pool: Vec<Vec<u8>>,
    wake_page: Arc<Mapping>,
    frame_len: usize,
}

/// The pollers with members of a multicast frame's group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct McastMembers(u64);

impl McastMembers {
    /// Poller `index` has a queue pair attached to the group.
    pub fn has(self, index: usize) -> bool {
        index >= MCAST_TRACKED || self.0 & (1 << index) != 0
    }

    /// No poller has.
    pub fn none(self) -> bool {
        self.0 == 0
    }
}

/// What [`Handoff::send`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// On its way to its owner.
    Handed,
    /// Dropped: the owner's inbox is full (a lost packet, which the transport recovers).
    Full,
}

/// The mesh for `doorbells.len()` pollers: element `i` belongs to poller `i`. Frames are at
/// most `frame_len` bytes.
pub fn mesh(
    doorbells: &[Arc<OwnedFd>],
    wake_page: &Arc<Mapping>,
    frame_len: usize,
) -> Vec<Handoff> {
    let n = doorbells.len();
    let mcast = McastPollers::default();
    let channels: Vec<_> = (0..n)
        .map(|_| (bounded::<Parcel>(DEPTH), bounded::<Vec<u8>>(POOL)))
        .collect();
    let peers: Vec<Peer> = channels
        .iter()
        .zip(doorbells)
        .map(|(((parcels, _), (returns, _)), doorbell)| Peer {
            parcels: parcels.clone(),
            returns: returns.clone(),
            doorbell: doorbell.clone(),
        })
        .collect();
    channels
        .into_iter()
        .enumerate()
        .map(|(index, ((_, inbox), (_, returns)))| Handoff {
            index,
            peers: peers.clone(),
            mcast: mcast.clone(),
            inbox,
            returns,
            pool: Vec::new(),
            wake_page: wake_page.clone(),
            frame_len,
        })
        .collect()
}

impl Handoff {
    /// The poller that owns the QP a RoCEv2 frame is addressed to: this one when there is
    /// only one, or when the frame is too mangled to say (the transport will count it).
    pub fn owner(&self, frame: &[u8]) -> usize {
        let n = self.peers.len();
        if n <= 1 {
            return self.index;
        }
        match dest_qpn(frame) {
            Some(qpn) => (qpn % n as u32) as usize,
            None => self.index,
        }
    }

    /// Every other poller's index.
    pub fn others(&self) -> impl Iterator<Item = usize> + use<> {
        let index = self.index;
        (0..self.peers.len()).filter(move |&i| i != index)
    }

    /// The pollers with queue pairs attached to the group a multicast frame is addressed
    /// to, as each recorded its own with [`Self::set_mcast_member`].
    pub fn mcast_members(&self, frame: &[u8]) -> McastMembers {
        if self.peers.len() <= 1 || self.peers.len() > MCAST_TRACKED {
            return McastMembers(u64::MAX);
        }
        let Some(gid) = dest_gid(frame) else {
            // Too mangled to say: the transport of the poller it arrived at counts it.
            return McastMembers(0);
        };
        let key = u128::from_ne_bytes(gid.0);
        let map = self.mcast.lock().unwrap_or_else(PoisonError::into_inner);
        McastMembers(map.get(&key).copied().unwrap_or(0))
    }

    /// Records whether this poller has queue pairs attached to the group `key` (the
    /// transport's key of its GID).
    pub fn set_mcast_member(&self, key: u128, member: bool) {
        if self.index >= MCAST_TRACKED {
            return;
        }
        let bit = 1u64 << self.index;
        let mut map = self.mcast.lock().unwrap_or_else(PoisonError::into_inner);
        let mask = map.entry(key).or_default();
        if member {
            *mask |= bit;
        } else {
            *mask &= !bit;
        }
        if *mask == 0 {
            map.remove(&key);
        }
    }

    /// The groups this poller is recorded a member of.
    pub fn mcast_groups(&self) -> Vec<u128> {
        if self.index >= MCAST_TRACKED {
            return Vec::new();
        }
        let bit = 1u64 << self.index;
        let map = self.mcast.lock().unwrap_or_else(PoisonError::into_inner);
        map.iter()
            .filter(|(_, mask)| *mask & bit != 0)
            .map(|(key, _)| *key)
            .collect()
    }

    /// Hands `frame` to poller `to`, waking it if it sleeps.
    pub fn send(&mut self, to: usize, frame: &[u8]) -> Sent {
        let Some(peer) = self.peers.get(to) else {
            return Sent::Full;
        };
        // Buffers the others have finished with come home first.
        while let Ok(buf) = self.returns.try_recv() {
            if self.pool.len() < POOL {
                self.pool.push(buf);
            }
        }
        let mut buf = self.pool.pop().unwrap_or_else(|| vec![0u8; self.frame_len]);
        let len = frame.len().min(buf.len());
        buf[..len].copy_from_slice(&frame[..len]);
        let parcel = Parcel {
            buf,
            len,
            from: self.index,
        };
        match peer.parcels.try_send(parcel) {
            Ok(()) => {}
            Err(TrySendError::Full(p) | TrySendError::Disconnected(p)) => {
                self.pool.push(p.buf);
                return Sent::Full;
            }
        }
        // The same protocol as an application's doorbell: publish, then look.
        fence(Ordering::SeqCst);
        let at = to * size_of::<PaddedWord>();
        let sleeping = self
            .wake_page
            .u32_at(at)
            .map_or(1, |w| w.load(Ordering::SeqCst));
        if sleeping != 0 {
            sys::eventfd_signal(peer.doorbell.as_fd());
        }
        Sent::Handed
    }

    /// Whether frames wait in this poller's inbox.
    pub fn pending(&self) -> bool {
        !self.inbox.is_empty()
    }

    /// Gives every frame waiting in the inbox (at most `max`) to `handle`; returns how many.
    pub fn receive(&mut self, max: usize, mut handle: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < max {
            let Ok(parcel) = self.inbox.try_recv() else {
                break;
            };
            handle(&parcel.buf[..parcel.len]);
            n += 1;
            let home = &self.peers[parcel.from].returns;
            if let Err(e) = home.try_send(parcel.buf) {
                // Its owner's pool is full: keep it here instead.
                if self.pool.len() < POOL {
                    self.pool.push(e.into_inner());
                }
            }
        }
        n
    }
}

/// The destination QP of a RoCEv2 frame (Ethernet, one optional 802.1Q tag, IPv4 or IPv6,
/// UDP, BTH), read without checking anything else.
pub fn dest_qpn(frame: &[u8]) -> Option<u32> {
    let (at, ethertype) = ip_header(frame)?;
    let at = at
        + match ethertype {
            0x0800 => usize::from(frame.get(at)? & 0x0f) * 4,
            0x86dd => 40,
            _ => return None,
        };
    // UDP header, then BTH: the destination QP is bytes 5..8 of the BTH.
    let bth = at + 8;
    let q = frame.get(bth + 5..bth + 8)?;
    Some(u32::from_be_bytes([0, q[0], q[1], q[2]]))
}

/// Where a frame's IP header starts, past Ethernet and one optional 802.1Q tag, and the
/// EtherType that says what it is.
fn ip_header(frame: &[u8]) -> Option<(usize, u16)> {
    let mut at = 12;
    let mut ethertype = u16::from_be_bytes(frame.get(at..at + 2)?.try_into().ok()?);
    at += 2;
    if ethertype == 0x8100 {
        ethertype = u16::from_be_bytes(frame.get(at + 2..at + 4)?.try_into().ok()?);
        at += 4;
    }
    Some((at, ethertype))
}

/// The destination GID of a RoCEv2 frame (its IP destination address; IPv4 in its mapped
/// form), read without checking anything else.
pub fn dest_gid(frame: &[u8]) -> Option<xroce_wire::Gid> {
    let (at, ethertype) = ip_header(frame)?;
    match ethertype {
        0x0800 => {
            let a: [u8; 4] = frame.get(at + 16..at + 20)?.try_into().ok()?;
            Some(xroce_wire::Gid::from_ipv4(a.into()))
        }
        0x86dd => {
            let a: [u8; 16] = frame.get(at + 24..at + 40)?.try_into().ok()?;
            Some(xroce_wire::Gid(a))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(vlan: bool, v6: bool, qpn: u32) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        }
        if v6 {
            f.extend_from_slice(&[0x86, 0xdd]);
            f.extend_from_slice(&[0x60; 40]);
        } else {
            f.extend_from_slice(&[0x08, 0x00]);
            f.push(0x45);
            f.extend_from_slice(&[0; 19]);
        }
        f.extend_from_slice(&[0x12, 0x34, 0x12, 0xb7, 0, 0, 0, 0]);
        let q = qpn.to_be_bytes();
        f.extend_from_slice(&[0x04, 0, 0xff, 0xff, 0, q[1], q[2], q[3], 0, 0, 0, 1]);
        f
    }

    #[test]
    fn dest_qpn_through_vlan_ipv4_and_ipv6() {
        for vlan in [false, true] {
            for v6 in [false, true] {
                assert_eq!(dest_qpn(&frame(vlan, v6, 0xabcdef)), Some(0xabcdef));
            }
        }
    }

    #[test]
    fn dest_gid_through_vlan_ipv4_and_ipv6() {
        for vlan in [false, true] {
            let mut f = frame(vlan, false, 0xff_ffff);
            let ip = if vlan { 18 } else { 14 };
            f[ip + 16..ip + 20].copy_from_slice(&[230, 1, 2, 3]);
            let want = xroce_wire::Gid::from_ipv4(std::net::Ipv4Addr::new(230, 1, 2, 3));
            assert_eq!(dest_gid(&f), Some(want));
            let f6 = frame(vlan, true, 0xff_ffff);
            assert_eq!(dest_gid(&f6), Some(xroce_wire::Gid([0x60; 16])));
            assert_eq!(dest_gid(&f6[..ip + 39]), None);
        }
        let mut arp = frame(false, false, 1);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(dest_gid(&arp), None);
    }

    #[test]
    fn truncated_or_foreign_frames_have_no_owner() {
        let f = frame(false, false, 0x11);
        for len in 0..f.len() {
            assert!(len >= 42 || dest_qpn(&f[..len]).is_none(), "len {len}");
        }
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(dest_qpn(&arp), None);
    }

    #[test]
    fn frames_reach_their_owner_and_buffers_come_home() {
        let bells: Vec<Arc<OwnedFd>> = (0..2).map(|_| Arc::new(sys::eventfd().unwrap())).collect();
        let fd = sys::memfd("xroce-test-wake", 4096, false).unwrap();
        let page = Arc::new(Mapping::map(fd.as_fd(), 4096, 0, true).unwrap());
        let mut mesh = mesh(&bells, &page, 64);
        let (a, rest) = mesh.split_at_mut(1);
        let (a, b) = (&mut a[0], &mut rest[0]);
        let f3 = frame(false, false, 3);
        assert_eq!(a.others().collect::<Vec<_>>(), [1]);
        assert_eq!(b.others().collect::<Vec<_>>(), [0]);
        assert_eq!(a.owner(&f3), 1);
        assert_eq!(a.owner(&frame(false, false, 4)), 0);
        for _ in 0..3 {
            assert_eq!(a.send(1, &f3[..f3.len().min(64)]), Sent::Handed);
        }
        assert!(b.pending());
        let mut got = Vec::new();
        assert_eq!(b.receive(usize::MAX, |f| got.push(f.to_vec())), 3);
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|f| dest_qpn(f) == Some(3)));
        // The three buffers went back to poller 0, which reuses them.
        assert_eq!(a.returns.len(), 3);
        a.send(1, &f3[..f3.len().min(64)]);
        assert_eq!((a.returns.len(), a.pool.len()), (0, 2));
        // A full inbox drops and says so.
        for _ in 1..DEPTH {
            assert_eq!(a.send(1, &f3[..10]), Sent::Handed);
        }
        assert_eq!(a.send(1, &f3[..10]), Sent::Full);
    }

    #[test]
    fn the_mesh_shares_which_pollers_have_members_of_a_group() {
        let bells: Vec<Arc<OwnedFd>> = (0..3).map(|_| Arc::new(sys::eventfd().unwrap())).collect();
        let fd = sys::memfd("xroce-test-wake", 4096, false).unwrap();
        let page = Arc::new(Mapping::map(fd.as_fd(), 4096, 0, true).unwrap());
        let mesh = mesh(&bells, &page, 64);
        let mut f = frame(false, false, 0xff_ffff);
        f[30..34].copy_from_slice(&[239, 77, 0, 3]);
        let key = u128::from_ne_bytes(dest_gid(&f).unwrap().0);
        let members = |i: usize| mesh[0].mcast_members(&f).has(i);
        assert!(mesh[0].mcast_members(&f).none(), "nobody joined");
        mesh[2].set_mcast_member(key, true);
        mesh[1].set_mcast_member(key, true);
        assert!(!members(0) && members(1) && members(2));
        assert_eq!(mesh[2].mcast_groups(), [key]);
        assert!(mesh[0].mcast_groups().is_empty());
        mesh[2].set_mcast_member(key, false);
        assert!(!members(2) && members(1));
        mesh[1].set_mcast_member(key, false);
        assert!(mesh[1].mcast_members(&f).none(), "everyone left");
        // Another group's frame, or one too short to name its group, has no members.
        mesh[1].set_mcast_member(key, true);
        f[33] = 4;
        assert!(mesh[0].mcast_members(&f).none());
        assert!(mesh[0].mcast_members(&f[..20]).none());
    }
}
