//! What a router does to a frame it forwards, and the dice that decide its fate.
//!
//! Pure functions over bytes: no I/O, so that they are tested without a network.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;

/// What [`route`] made of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routed {
    /// Rewritten for the next hop: send it.
    Forward,
    /// Its TTL or hop limit ran out (RFC 791, RFC 8200): a router drops it.
    TtlExpired,
    /// Not an Ethernet frame with an IPv4 or IPv6 header: dropped.
    Malformed,
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

/// Rewrites `frame` in place the way a router forwards it: destination MAC `next_hop`,
/// source MAC `own` (the router's outgoing interface), IPv4 TTL or IPv6 hop limit one less
/// and, for IPv4, the header checksum computed again (RFC 791). One 802.1Q or 802.1ad tag
/// is kept as it is. Nothing else changes: the RoCEv2 ICRC masks the TTL and hop limit
/// (IBTA A17.8), so it stays valid.
pub fn route(frame: &mut [u8], own: [u8; 6], next_hop: [u8; 6]) -> Routed {
    let Some(mut ethertype) = be16(frame, 12) else {
        return Routed::Malformed;
    };
    let mut ip = 14;
    if ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ {
        let Some(inner) = be16(frame, 16) else {
            return Routed::Malformed;
        };
        ethertype = inner;
        ip = 18;
    }
    match ethertype {
        ETHERTYPE_IPV4 => {
            let Some(&version_ihl) = frame.get(ip) else {
                return Routed::Malformed;
            };
            let ihl = usize::from(version_ihl & 0x0f) * 4;
            if version_ihl >> 4 != 4 || ihl < 20 || frame.len() < ip + ihl {
                return Routed::Malformed;
            }
            let header = &mut frame[ip..ip + ihl];
            if header[8] <= 1 {
                return Routed::TtlExpired;
            }
            header[8] -= 1;
            header[10..12].fill(0);
            let checksum = ipv4_checksum(header);
            header[10..12].copy_from_slice(&checksum.to_be_bytes());
        }
        ETHERTYPE_IPV6 => {
            let Some(header) = frame.get_mut(ip..ip + 40) else {
                return Routed::Malformed;
            };
            if header[0] >> 4 != 6 {
                return Routed::Malformed;
            }
            if header[7] <= 1 {
                return Routed::TtlExpired;
            }
            header[7] -= 1;
        }
        _ => return Routed::Malformed,
    }
    frame[0..6].copy_from_slice(&next_hop);
    frame[6..12].copy_from_slice(&own);
    Routed::Forward
}

/// The Internet checksum (RFC 1071) of an IPv4 header whose checksum field is zero.
fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// How a lab's path misbehaves. Probabilities are fractions (0.01 is 1 %), drawn for every
/// frame in this order: loss, then duplication, then reordering.
///
/// Losses are independent from frame to frame when [`loss_burst`](Self::loss_burst) is 1.
/// Above 1 they come in bursts, as a congested queue or a flapping link loses them: a
/// Gilbert model of two states, where every frame is lost in the bad state and none in the
/// good one, with the chance of leaving the bad state after each frame 1/`loss_burst`
/// (bursts of `loss_burst` frames on average, geometrically distributed) and the chance
/// of entering it chosen so that the long-run fraction lost is still `loss`.
///
/// A network's burst of loss is a moment of trouble (a queue overflowing, a link's errors)
/// and ends in time as well: once the path carried nothing for
/// [`burst_idle`](Self::burst_idle), the next frame meets a state drawn afresh from the
/// model's long-run share (bad with the chance `loss`). Counted in frames alone, a burst
/// would last for ever on a path that carries little: a queue pair that sends only its
/// retransmissions, one per timeout, would find every one of them lost until the burst's
/// frames were used up, seconds later, which no network does short of a link down.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Impairment {
    /// A frame is dropped (the long-run fraction).
    pub loss: f64,
    /// The mean length of a run of lost frames (1: each loss on its own).
    pub loss_burst: f64,
    /// A pause of the path this long ends a burst of loss (zero: bursts count frames only).
    pub burst_idle: Duration,
    /// A frame is sent twice, back to back.
    pub duplicate: f64,
    /// A frame is held back and sent after the next [`reorder_gap`](Self::reorder_gap)
    /// frames of its direction.
    pub reorder: f64,
    /// How many frames overtake a frame held back (at least 1).
    pub reorder_gap: u32,
    /// Seed of the random generator: the same seed draws the same fates for the same
    /// sequence of frames.
    pub seed: u64,
    /// Each direction's egress a bottleneck of this many bits a second of frame bytes,
    /// after the frames' fates (0: none, frames leave as they come): a queue of
    /// [`queue_bytes`](Self::queue_bytes) in front of a port of this rate, the frame
    /// that does not fit dropped (tail drop), as a switch port slower than the hosts does.
    pub rate_bps: u64,
    /// The bottleneck's queue, in bytes of frames.
    pub queue_bytes: usize,
    /// ECN marking at the bottleneck (none: tail drop alone), as a switch port marks for
    /// DCQCN: CE on ECN-capable frames from `kmin` bytes queued.
    pub ecn: Option<crate::switch::Marking>,
}

impl Default for Impairment {
    /// A perfect path (nothing lost, duplicated or reordered), seed 1, gap 3, bursts
    /// ended by [`BURST_IDLE`].
    fn default() -> Self {
        Impairment {
            loss: 0.0,
            loss_burst: 1.0,
            burst_idle: BURST_IDLE,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_gap: 3,
            seed: 1,
            rate_bps: 0,
            queue_bytes: 128 << 10,
            ecn: None,
        }
    }
}

/// A pause of the path that ends a burst of loss by default: the time a switch's queue of
/// 64 KiB takes to drain at 1 Gbit/s, and half the smallest retransmission timeout of an
/// xroce queue pair (so its timer's resends never all fall into one burst).
pub const BURST_IDLE: Duration = Duration::from_micros(500);

impl Impairment {
    /// Why this impairment cannot be applied, if it cannot.
    pub fn check(&self) -> Result<(), &'static str> {
        let fraction = |p: f64| (0.0..=1.0).contains(&p);
        if !(fraction(self.loss) && fraction(self.duplicate) && fraction(self.reorder)) {
            return Err("loss, duplicate and reorder are fractions within 0..=1");
        }
        if self.reorder_gap == 0 {
            return Err("reorder_gap must be at least 1");
        }
        if !(self.loss_burst >= 1.0 && self.loss_burst.is_finite()) {
            return Err("loss_burst is a mean run length of at least 1");
        }
        if self.loss_burst > 1.0 && self.loss >= 1.0 {
            return Err("bursty loss needs a loss fraction below 1");
        }
        if let Some(m) = self.ecn
            && (self.rate_bps == 0 || m.kmin > m.kmax || m.pmax_percent > 100)
        {
            return Err(
                "ECN marking needs a bottleneck, a kmin no larger than kmax and pmax within 0..=100",
            );
        }
        if self.rate_bps > 0 && self.queue_bytes < MAX_QUEUED_FRAME {
            return Err("a bottleneck's queue must hold at least one frame of 9216 bytes");
        }
        Ok(())
    }
}

/// The largest frame a bottleneck's queue must be able to take.
const MAX_QUEUED_FRAME: usize = 9216;

/// A port slower than what reaches it: frames wait in a queue of bounded bytes and leave
/// one after another at its rate; a frame that does not fit is dropped (tail drop).
/// Driven by the caller's clock: [`Bottleneck::offer`] when a frame arrives,
/// [`Bottleneck::release`] whenever time has passed.
#[derive(Debug)]
pub struct Bottleneck {
    rate_bps: u64,
    capacity: usize,
    frames: std::collections::VecDeque<Vec<u8>>,
    bytes: usize,
    /// When the port is free to start the next frame.
    free_at: Instant,
    /// Buffers of frames that left, for the next ones.
    spare: Vec<Vec<u8>>,
    /// Frames dropped because the queue was full.
    pub dropped: u64,
    /// The most bytes queued so far.
    pub max_bytes: usize,
    /// ECN marking, if any, and the random generator it draws from.
    marking: Option<(crate::switch::Marking, StdRng)>,
    /// Frames marked CE.
    pub marked: u64,
}

impl Bottleneck {
    /// A port of `rate_bps` (more than 0) with a queue of `capacity` bytes, idle at `now`.
    pub fn new(rate_bps: u64, capacity: usize, now: Instant) -> Bottleneck {
        Bottleneck {
            rate_bps: rate_bps.max(1),
            capacity,
            frames: std::collections::VecDeque::new(),
            bytes: 0,
            free_at: now,
            spare: Vec::new(),
            dropped: 0,
            max_bytes: 0,
            marking: None,
            marked: 0,
        }
    }

    /// The port marks ECN-capable frames CE by `marking` (none: it marks nothing), drawing
    /// from a generator seeded with `seed`.
    pub fn with_marking(mut self, marking: Option<crate::switch::Marking>, seed: u64) -> Self {
        self.marking = marking.map(|m| (m, StdRng::seed_from_u64(seed)));
        self
    }

    /// Bytes queued now.
    pub fn queued_bytes(&self) -> usize {
        self.bytes
    }

    /// Whether a frame waits.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// A frame arrives at `now`: queued (a copy) if it fits, else dropped. Returns whether
    /// it was queued.
    pub fn offer(&mut self, frame: &[u8], now: Instant) -> bool {
        if self.bytes + frame.len() > self.capacity {
            self.dropped += 1;
            return false;
        }
        if self.frames.is_empty() && self.free_at < now {
            // An idle port starts the frame at once.
            self.free_at = now;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        if let Some((m, rng)) = &mut self.marking
            && m.apply(&mut buf, self.bytes, rng)
        {
            self.marked += 1;
        }
        self.bytes += frame.len();
        self.max_bytes = self.max_bytes.max(self.bytes);
        self.frames.push_back(buf);
        true
    }

    /// Sends (`send`) every frame whose turn has come by `now`: each occupies the port for
    /// its bytes at the rate, so the frames leave at the rate however late this is called
    /// (a late call sends those that should have left meanwhile back to back).
    pub fn release(&mut self, now: Instant, mut send: impl FnMut(&[u8])) {
        while self.free_at <= now {
            let Some(frame) = self.frames.pop_front() else {
                return;
            };
            let nanos =
                (frame.len() as u128 * 8 * 1_000_000_000).div_ceil(u128::from(self.rate_bps));
            self.free_at += Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
            self.bytes -= frame.len();
            send(&frame);
            if self.spare.len() < 64 {
                self.spare.push(frame);
            }
        }
    }

    /// When the next frame may leave, if one waits.
    pub fn next_departure(&self) -> Option<Instant> {
        (!self.frames.is_empty()).then_some(self.free_at)
    }
}

/// The fate of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Forward it.
    Pass,
    /// Drop it.
    Lose,
    /// Forward it twice.
    Duplicate,
    /// Hold it back, forward it later.
    Reorder,
}

/// A seeded random generator that draws each frame's [`Fate`].
#[derive(Debug)]
pub struct Dice {
    rng: StdRng,
    impairment: Impairment,
    /// In the bad state of the burst model (every frame lost).
    bad: bool,
    /// When the last frame was rolled for.
    last: Option<Instant>,
}

impl Dice {
    /// Dice for `impairment`, seeded with its seed.
    pub fn new(impairment: Impairment) -> Dice {
        Dice {
            rng: StdRng::seed_from_u64(impairment.seed),
            impairment,
            bad: false,
            last: None,
        }
    }

    /// The fate of the next frame, which arrived at `now` (times never go back).
    pub fn roll(&mut self, now: Instant) -> Fate {
        let i = self.impairment;
        // Three draws every time, whatever the outcome, so that one knob does not shift
        // the others' sequence.
        let (loss_draw, duplicate, reorder) = (
            self.rng.random::<f64>(),
            self.rng.random::<f64>() < i.duplicate,
            self.rng.random::<f64>() < i.reorder,
        );
        let lose = if i.loss_burst > 1.0 {
            // Gilbert: leave the bad state with r = 1/burst, enter it with p such that the
            // stationary share of the bad state, p / (p + r), is the loss fraction.
            let r = 1.0 / i.loss_burst;
            let p = i.loss * r / (1.0 - i.loss);
            let paused = !i.burst_idle.is_zero()
                && self
                    .last
                    .is_some_and(|last| now.saturating_duration_since(last) >= i.burst_idle);
            self.bad = if paused {
                loss_draw < i.loss
            } else if self.bad {
                loss_draw >= r
            } else {
                loss_draw < p
            };
            self.bad
        } else {
            loss_draw < i.loss
        };
        self.last = Some(now);
        if lose {
            Fate::Lose
        } else if duplicate {
            Fate::Duplicate
        } else if reorder {
            Fate::Reorder
        } else {
            Fate::Pass
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bottleneck_sends_at_its_rate_and_drops_what_its_queue_cannot_take() {
        let t0 = Instant::now();
        // 8 Mbit/s: a 1000-byte frame takes 1 ms. The queue holds three of them.
        let mut b = Bottleneck::new(8_000_000, 3000, t0);
        for i in 0..4u8 {
            let queued = b.offer(&[i; 1000], t0);
            assert_eq!(queued, i < 3, "frame {i}");
        }
        assert_eq!((b.dropped, b.max_bytes, b.queued_bytes()), (1, 3000, 3000));
        let mut sent = Vec::new();
        // The first leaves at once, the second 1 ms later, the third 2 ms later.
        b.release(t0, |f| sent.push((0, f[0])));
        b.release(t0 + Duration::from_micros(999), |f| sent.push((999, f[0])));
        b.release(t0 + Duration::from_millis(1), |f| sent.push((1000, f[0])));
        assert_eq!(sent, [(0, 0), (1000, 1)]);
        assert_eq!(b.next_departure(), Some(t0 + Duration::from_millis(2)));
        // Called late: what should have left meanwhile leaves now, and the port is
        // busy for its bytes from when it should have started.
        b.release(t0 + Duration::from_millis(10), |f| {
            sent.push((10_000, f[0]))
        });
        assert_eq!(sent.last(), Some(&(10_000, 2)));
        assert!(b.is_empty() && b.next_departure().is_none());
        // An idle port starts a new frame at once, not at its old free time.
        let later = t0 + Duration::from_millis(50);
        assert!(b.offer(&[9; 500], later));
        let mut n = 0;
        b.release(later, |_| n += 1);
        assert_eq!(n, 1);
        // Over many frames queued at once the rate holds: the 100th frame of 1000 bytes
        // leaves 99 ms after the first.
        let mut b = Bottleneck::new(8_000_000, 1 << 20, t0);
        for _ in 0..100 {
            b.offer(&[0; 1000], t0);
        }
        let mut left = 0;
        let mut t = t0;
        while left < 100 {
            t += Duration::from_micros(100);
            b.release(t, |_| left += 1);
        }
        assert_eq!(t - t0, Duration::from_millis(99));
    }

    #[test]
    fn a_bottleneck_needs_a_queue_for_a_jumbo_frame() {
        let small = Impairment {
            rate_bps: 1_000_000,
            queue_bytes: 4096,
            ..Impairment::default()
        };
        assert!(small.check().is_err());
        let fine = Impairment {
            rate_bps: 1_000_000,
            ..Impairment::default()
        };
        assert_eq!(fine.check(), Ok(()));
        // ECN marking needs a bottleneck and a sane curve.
        let marking = crate::switch::Marking {
            kmin: 16 << 10,
            kmax: 64 << 10,
            pmax_percent: 20,
        };
        let marked = Impairment {
            ecn: Some(marking),
            ..fine
        };
        assert_eq!(marked.check(), Ok(()));
        let no_port = Impairment {
            ecn: Some(marking),
            ..Impairment::default()
        };
        assert!(no_port.check().is_err());
        let inverted = Impairment {
            ecn: Some(crate::switch::Marking {
                kmin: 64 << 10,
                kmax: 16 << 10,
                ..marking
            }),
            ..fine
        };
        assert!(inverted.check().is_err());
    }

    /// Bursty loss keeps the long-run fraction and makes runs of the asked mean length.
    #[test]
    fn bursts_of_loss_have_their_mean_length_and_rate() {
        let impairment = Impairment {
            loss: 0.02,
            loss_burst: 8.0,
            seed: 11,
            ..Impairment::default()
        };
        assert_eq!(impairment.check(), Ok(()));
        let mut dice = Dice::new(impairment);
        let n = 2_000_000;
        let (mut lost, mut runs, mut previous) = (0u64, 0u64, false);
        // Frames a microsecond apart: a path that never pauses.
        let t0 = Instant::now();
        for k in 0..n {
            let l = dice.roll(t0 + Duration::from_micros(k)) == Fate::Lose;
            lost += u64::from(l);
            runs += u64::from(l && !previous);
            previous = l;
        }
        let rate = lost as f64 / n as f64;
        let mean_run = lost as f64 / runs as f64;
        assert!((rate - 0.02).abs() < 0.003, "loss rate {rate}");
        assert!((mean_run - 8.0).abs() < 0.8, "mean burst {mean_run}");
        let bad = Impairment {
            loss_burst: 0.5,
            ..Impairment::default()
        };
        assert!(bad.check().is_err());
    }
    use xroce_wire::{
        BthRepr, EtherType, EthernetAddress, EthernetRepr, Frame, FrameRepr, IbRepr, IpRepr,
        Opcode, Psn, Qpn, VlanTag,
    };

    const OWN: [u8; 6] = [2, 0, 0, 0, 1, 1];
    const NEXT: [u8; 6] = [2, 0, 0, 0, 2, 2];

    fn roce(envelope: FrameRepr) -> Vec<u8> {
        let ib = IbRepr::new(BthRepr::new(
            Opcode::RC_SEND_ONLY,
            Qpn::new(0x11),
            Psn::new(7),
        ));
        let mut buf = vec![0u8; 256];
        let len = envelope
            .emit_packet(&mut buf, &ib, b"payload bytes")
            .unwrap();
        buf.truncate(len);
        buf
    }

    fn ipv4(ttl: u8) -> FrameRepr {
        let mut f = FrameRepr::ipv4(
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            EthernetAddress([2, 0, 0, 0, 0, 2]),
            [10, 77, 1, 1].into(),
            [10, 77, 2, 1].into(),
            0xc000,
        );
        if let IpRepr::Ipv4(ref mut r) = f.ip {
            r.ttl = ttl;
        }
        f
    }

    #[test]
    fn ipv4_is_routed_and_stays_valid() {
        let mut frame = roce(ipv4(64));
        assert_eq!(route(&mut frame, OWN, NEXT), Routed::Forward);
        assert_eq!(&frame[0..6], &NEXT);
        assert_eq!(&frame[6..12], &OWN);
        assert_eq!(frame[14 + 8], 63);
        // The header checksum verifies (the sum over the header is all ones)...
        assert_eq!(ipv4_checksum(&frame[14..34]), 0);
        // ...and the wire crate accepts the frame, ICRC included.
        let parsed = Frame::parse(&frame).expect("a routed frame parses");
        assert_eq!(parsed.payload, b"payload bytes");
    }

    #[test]
    fn ipv6_hop_limit_goes_down() {
        let mut envelope = FrameRepr::ipv6(
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            EthernetAddress([2, 0, 0, 0, 0, 2]),
            "fd00:77:1::1".parse().unwrap(),
            "fd00:77:2::1".parse().unwrap(),
            0xc000,
        );
        if let IpRepr::Ipv6(ref mut r) = envelope.ip {
            r.hop_limit = 9;
        }
        let mut frame = roce(envelope);
        assert_eq!(route(&mut frame, OWN, NEXT), Routed::Forward);
        assert_eq!(frame[14 + 7], 8);
        assert!(Frame::parse(&frame).is_ok());
    }

    #[test]
    fn a_vlan_tag_is_kept() {
        let mut envelope = ipv4(5);
        envelope.ethernet = EthernetRepr {
            vlan: Some(VlanTag {
                pcp: 0,
                dei: false,
                vid: 42,
            }),
            ethertype: EtherType::IPV4,
            ..envelope.ethernet
        };
        let mut frame = roce(envelope);
        let tag = frame[12..16].to_vec();
        assert_eq!(route(&mut frame, OWN, NEXT), Routed::Forward);
        assert_eq!(&frame[12..16], &tag[..]);
        assert_eq!(frame[18 + 8], 4);
        assert!(Frame::parse(&frame).is_ok());
    }

    #[test]
    fn the_last_hop_expires_and_junk_is_malformed() {
        let mut frame = roce(ipv4(1));
        let before = frame.clone();
        assert_eq!(route(&mut frame, OWN, NEXT), Routed::TtlExpired);
        assert_eq!(frame, before, "an expired frame is left alone");
        assert_eq!(route(&mut [0u8; 10], OWN, NEXT), Routed::Malformed);
        let mut arp = [0u8; 60];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(route(&mut arp, OWN, NEXT), Routed::Malformed);
        let mut short = roce(ipv4(64));
        short.truncate(14 + 12);
        assert_eq!(route(&mut short, OWN, NEXT), Routed::Malformed);
    }

    /// A pause of the path ends a burst: frames that come further apart than `burst_idle`
    /// are each lost with the long-run chance, on their own; with `burst_idle` zero the
    /// same frames still come in the model's runs.
    #[test]
    fn a_pause_of_the_path_ends_a_burst_of_loss() {
        let sparse = |burst_idle: Duration| {
            let mut dice = Dice::new(Impairment {
                loss: 0.02,
                loss_burst: 8.0,
                burst_idle,
                seed: 5,
                ..Impairment::default()
            });
            let n = 400_000u32;
            let t0 = Instant::now();
            let (mut lost, mut run, mut longest) = (0u32, 0u32, 0u32);
            for k in 0..n {
                // One frame a millisecond: a queue pair that sends only its resends.
                if dice.roll(t0 + Duration::from_millis(u64::from(k))) == Fate::Lose {
                    lost += 1;
                    run += 1;
                    longest = longest.max(run);
                } else {
                    run = 0;
                }
            }
            (f64::from(lost) / f64::from(n), longest)
        };
        let (rate, longest) = sparse(BURST_IDLE);
        assert!((rate - 0.02).abs() < 0.002, "loss rate {rate}");
        assert!(longest <= 4, "a run of {longest} frames lost across pauses");
        let (rate, longest) = sparse(Duration::ZERO);
        assert!((rate - 0.02).abs() < 0.004, "loss rate {rate}");
        assert!(longest >= 30, "frame-counted bursts: longest run {longest}");
    }

    #[test]
    fn dice_follow_the_probabilities_and_the_seed() {
        let impairment = Impairment {
            loss: 0.01,
            duplicate: 0.005,
            reorder: 0.005,
            reorder_gap: 3,
            seed: 42,
            ..Impairment::default()
        };
        let mut dice = Dice::new(impairment);
        let n = 1_000_000;
        let t0 = Instant::now();
        let fates: Vec<Fate> = (0..n).map(|_| dice.roll(t0)).collect();
        let share = |f: Fate| fates.iter().filter(|&&x| x == f).count() as f64 / n as f64;
        assert!(
            (share(Fate::Lose) - 0.01).abs() < 0.001,
            "{}",
            share(Fate::Lose)
        );
        assert!((share(Fate::Duplicate) - 0.005).abs() < 0.0007);
        assert!((share(Fate::Reorder) - 0.005).abs() < 0.0007);
        let mut again = Dice::new(impairment);
        assert!(fates.iter().take(10_000).all(|&f| f == again.roll(t0)));
        let mut perfect = Dice::new(Impairment::default());
        assert!((0..10_000).all(|_| perfect.roll(t0) == Fate::Pass));
    }

    #[test]
    fn counters_read_back_what_they_print() {
        let c = crate::ImpairCounters {
            a_to_b: crate::DirectionCounters {
                received: 10,
                forwarded: 9,
                dropped: 2,
                duplicated: 1,
                reordered: 3,
                ttl_expired: 4,
                malformed: 5,
                tx_full: 6,
                queue_dropped: 8,
                queue_max_bytes: 131_072,
                queue_marked: 11,
            },
            b_to_a: crate::DirectionCounters {
                received: 7,
                ..Default::default()
            },
        };
        let text = format!("noise\n{c}\n");
        assert_eq!(text.parse::<crate::ImpairCounters>(), Ok(c));
        assert!(
            "a -> b: received x"
                .parse::<crate::ImpairCounters>()
                .is_err()
        );
    }

    #[test]
    fn impossible_impairments_are_refused() {
        let bad = Impairment {
            loss: 1.5,
            ..Impairment::default()
        };
        assert!(bad.check().is_err());
        let gapless = Impairment {
            reorder_gap: 0,
            ..Impairment::default()
        };
        assert!(gapless.check().is_err());
        assert!(Impairment::default().check().is_ok());
    }
}
