//! The receive side of a port: the RX ring, the fill ring, and batches of received frames
//! lent out as `&[u8]` views until they go back to the fill ring.
//!
//! With multi-buffer on, the kernel hands a packet longer than a frame over in several
//! descriptors, every one but the last marked `XDP_PKT_CONTD`; it puts all of them on the RX
//! ring at once, but a batch may end between them. The parts of such a packet are copied, in
//! order, into the receiver's [`Assembly`] arena and the batch lends the whole packet from
//! there; a packet whose first parts came in one batch is finished in the next, and is only
//! ever lent out whole. A packet longer than [`MULTI_BUFFER_CAPACITY`] is dropped and counted
//! (`oversized`). Every descriptor goes back to the fill ring with its batch, finished packet
//! or not: its bytes were copied.

use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use xsk_rs::{FillQueue, FrameDesc, RxQueue};

use super::{RX_BATCH, RxCounters, XDP_PKT_CONTD};
use crate::umem::MULTI_BUFFER_CAPACITY;

/// The receive side of a [`Port`]: the RX ring and the fill ring.
pub struct Receiver {
    pub(super) ring: RxQueue,
    pub(super) fill: FillQueue,
    pub(super) fd: RawFd,
    pub(super) umem: xsk_rs::Umem,
    /// The descriptors of the frames lent out by the current [`RxBatch`].
    pub(super) batch: Box<[FrameDesc]>,
    pub(super) fill_size: u32,
    /// Received frames that found no room in the fill ring, for the next poll.
    pub(super) deferred: Vec<FrameDesc>,
    /// With multi-buffer on: where the packets of the current batch are.
    pub(super) assembly: Option<Box<Assembly>>,
    pub(super) counters: RxCounters,
}

/// Where a packet of a batch is.
#[derive(Clone, Copy, Debug)]
enum Packet {
    /// In one frame: this descriptor of the batch.
    Frame(usize),
    /// Put together from several frames: these bytes of the arena.
    Assembled { start: usize, len: usize },
}

/// The packets of a batch on a multi-buffer port, and the parts of the one still arriving.
#[derive(Debug)]
pub(super) struct Assembly {
    /// The packets of the current batch, in arrival order.
    packets: Vec<Packet>,
    /// The bytes of this batch's multi-frame packets, one after another; the unfinished
    /// packet, if any, last.
    arena: Vec<u8>,
    /// Where the unfinished packet starts in the arena: its first parts came and its last
    /// has not.
    open: Option<usize>,
    /// The unfinished packet is already too long: its remaining parts are skipped.
    discarding: bool,
}

impl Assembly {
    pub(super) fn new() -> Assembly {
        // At most one packet finished from an earlier batch plus one per two descriptors,
        // and the unfinished one: the arena never grows.
        let most = RX_BATCH / 2 + 2;
        Assembly {
            packets: Vec::with_capacity(RX_BATCH),
            arena: Vec::with_capacity(most * MULTI_BUFFER_CAPACITY),
            open: None,
            discarding: false,
        }
    }

    /// Sorts the descriptors of a batch into packets. `part(i)` is the bytes of descriptor
    /// `i`; `options[i]` its options.
    fn sort<'a>(
        &mut self,
        options: impl Iterator<Item = u32>,
        part: impl Fn(usize) -> &'a [u8],
        counters: &mut RxCounters,
    ) {
        self.packets.clear();
        match self.open {
            // The unfinished packet moves to the front; the rest was the last batch's.
            Some(start) => {
                self.arena.copy_within(start.., 0);
                self.arena.truncate(self.arena.len() - start);
                self.open = Some(0);
            }
            None => self.arena.clear(),
        }
        for (i, options) in options.enumerate() {
            let more = options & XDP_PKT_CONTD != 0;
            let start = match self.open {
                None if !more => {
                    self.packets.push(Packet::Frame(i));
                    continue;
                }
                None => *self.open.insert(self.arena.len()),
                Some(start) => start,
            };
            if !self.discarding {
                let bytes = part(i);
                if self.arena.len() - start + bytes.len() > MULTI_BUFFER_CAPACITY {
                    self.discarding = true;
                    self.arena.truncate(start);
                } else {
                    self.arena.extend_from_slice(bytes);
                }
            }
            if !more {
                self.open = None;
                if self.discarding {
                    self.discarding = false;
                    counters.oversized += 1;
                } else {
                    counters.multi_buffer_packets += 1;
                    self.packets.push(Packet::Assembled {
                        start,
                        len: self.arena.len() - start,
                    });
                }
            }
        }
    }

    fn packet(&self, index: usize) -> Option<Packet> {
        self.packets.get(index).copied()
    }
}

impl fmt::Debug for Receiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("counters", &self.counters)
            .finish()
    }
}

impl Receiver {
    /// Takes up to [`RX_BATCH`] received frames off the RX ring (one ring access). The
    /// frames go back to the fill ring when the returned batch is dropped. When the ring is
    /// empty and the kernel asked for a wakeup on the fill ring, kicks it.
    #[inline]
    pub fn poll(&mut self) -> RxBatch<'_> {
        // Safety: `batch` only ever holds descriptors of this UMEM, written by the RX ring of
        // a socket bound to it.
        let len = unsafe { self.ring.consume(&mut self.batch) };
        if len == 0 {
            self.counters.empty_polls += 1;
            if self.fill.needs_wakeup() {
                self.counters.fill_kicks += 1;
                let mut pollfd = libc::pollfd {
                    fd: self.fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // Safety: one valid pollfd, zero timeout: this only prods the driver.
                unsafe { libc::poll(&mut pollfd, 1, 0) };
            }
        } else {
            self.counters.frames += len as u64;
            for desc in &self.batch[..len] {
                self.counters.bytes += desc.lengths().data() as u64;
            }
            if self.fill.nb_free(self.fill_size) == self.fill_size {
                self.counters.fill_ring_empty += 1;
            }
        }
        let packets = match self.assembly.as_deref_mut() {
            None => len,
            Some(assembly) => {
                let batch = &self.batch[..len];
                let umem = &self.umem;
                assembly.sort(
                    batch.iter().map(|d| d.options()),
                    // Safety: these descriptors came off this UMEM's RX ring; the kernel does
                    // not touch their frames until they are back on the fill ring, after
                    // this batch.
                    |i| unsafe { umem.data(&batch[i]) }.contents(),
                    &mut self.counters,
                );
                assembly.packets.len()
            }
        };
        RxBatch {
            receiver: self,
            descriptors: len,
            len: packets,
        }
    }

    /// The receive counters.
    pub fn counters(&self) -> &RxCounters {
        &self.counters
    }

    /// Sleeps in `poll(2)` until the RX ring has frames or `timeout` passes; returns whether
    /// it has frames. For an idle poller ([`Backoff`] calls it).
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let mut pollfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // Safety: one valid pollfd, the count says one.
        let ret = unsafe { libc::poll(&mut pollfd, 1, millis) };
        if ret < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        Ok(ret > 0 && pollfd.revents & libc::POLLIN != 0)
    }

    fn refill(&mut self, len: usize) {
        if !self.deferred.is_empty() {
            // Safety: deferred descriptors came off this UMEM's RX ring in earlier batches
            // and nothing refers to their frames any more.
            if unsafe { self.fill.produce(&self.deferred) } == self.deferred.len() {
                self.deferred.clear();
            }
        }
        if len == 0 {
            return;
        }
        // Safety: these descriptors came off this UMEM's RX ring and nothing refers to their
        // frames any more (the batch that lent them is being dropped).
        let produced = unsafe { self.fill.produce(&self.batch[..len]) };
        if produced != len {
            // Keep them (at most `rx_frames` ever: no allocation) rather than lose them.
            self.counters.fill_deferred += 1;
            self.deferred.extend_from_slice(&self.batch[..len]);
        }
    }
}

/// Packets received by one [`Receiver::poll`], in arrival order, each whole. Dropping the
/// batch returns the frames to the fill ring.
pub struct RxBatch<'a> {
    receiver: &'a mut Receiver,
    /// Descriptors taken off the RX ring.
    descriptors: usize,
    /// Whole packets.
    len: usize,
}

impl fmt::Debug for RxBatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RxBatch").field("len", &self.len).finish()
    }
}

impl RxBatch<'_> {
    /// Packets in the batch (frames, unless multi-buffer put some together).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Packet `index` (Ethernet header onwards), or `None` past the end.
    #[inline]
    pub fn frame(&self, index: usize) -> Option<&[u8]> {
        let desc = match self.receiver.assembly.as_deref() {
            None => self.receiver.batch[..self.len].get(index)?,
            Some(assembly) => match assembly.packet(index)? {
                Packet::Frame(i) => self.receiver.batch[..self.descriptors].get(i)?,
                Packet::Assembled { start, len } => {
                    return assembly.arena.get(start..start + len);
                }
            },
        };
        // Safety: `desc` came off this UMEM's RX ring; the kernel does not touch the frame
        // until it is back on the fill ring, which happens only when this batch is dropped,
        // and the batch holds the receiver exclusively until then.
        let data = unsafe { self.receiver.umem.data(desc) };
        Some(data.contents())
    }

    /// The packets, in arrival order.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.len).filter_map(|i| self.frame(i))
    }
}

impl Drop for RxBatch<'_> {
    fn drop(&mut self) {
        self.receiver.refill(self.descriptors);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::umem::FRAME_CAPACITY;

    /// Sorts one batch of `(options, bytes)` parts and returns its packets' bytes.
    fn sort(
        assembly: &mut Assembly,
        counters: &mut RxCounters,
        parts: &[(u32, Vec<u8>)],
    ) -> Vec<Vec<u8>> {
        assembly.sort(parts.iter().map(|p| p.0), |i| &parts[i].1, counters);
        (0..assembly.packets.len())
            .map(|i| match assembly.packet(i).unwrap() {
                Packet::Frame(j) => parts[j].1.clone(),
                Packet::Assembled { start, len } => assembly.arena[start..start + len].to_vec(),
            })
            .collect()
    }

    fn part(byte: u8, len: usize, more: bool) -> (u32, Vec<u8>) {
        (if more { XDP_PKT_CONTD } else { 0 }, vec![byte; len])
    }

    #[test]
    fn single_frames_pass_as_they_are() {
        let mut a = Assembly::new();
        let mut c = RxCounters::default();
        let got = sort(&mut a, &mut c, &[part(1, 60, false), part(2, 1500, false)]);
        assert_eq!(got, vec![vec![1; 60], vec![2; 1500]]);
        assert_eq!((c.multi_buffer_packets, c.oversized), (0, 0));
    }

    #[test]
    fn parts_in_one_batch_make_one_packet() {
        let mut a = Assembly::new();
        let mut c = RxCounters::default();
        let got = sort(
            &mut a,
            &mut c,
            &[
                part(1, 60, false),
                part(2, FRAME_CAPACITY, true),
                part(3, 300, false),
                part(4, 70, false),
            ],
        );
        let mut whole = vec![2; FRAME_CAPACITY];
        whole.extend([3; 300]);
        assert_eq!(got, vec![vec![1; 60], whole, vec![4; 70]]);
        assert_eq!(c.multi_buffer_packets, 1);
    }

    #[test]
    fn a_packet_split_between_batches_is_only_lent_whole() {
        let mut a = Assembly::new();
        let mut c = RxCounters::default();
        // The batch ends after the first part: the packet is not in it.
        let got = sort(
            &mut a,
            &mut c,
            &[part(1, 60, false), part(2, FRAME_CAPACITY, true)],
        );
        assert_eq!(got, vec![vec![1; 60]]);
        assert_eq!(c.multi_buffer_packets, 0);
        // Its last part opens the next batch.
        let got = sort(&mut a, &mut c, &[part(3, 100, false), part(4, 80, false)]);
        let mut whole = vec![2; FRAME_CAPACITY];
        whole.extend([3; 100]);
        assert_eq!(got, vec![whole, vec![4; 80]]);
        assert_eq!(c.multi_buffer_packets, 1);
        // And nothing of it is left for the batch after.
        let got = sort(&mut a, &mut c, &[part(5, 90, false)]);
        assert_eq!(got, vec![vec![5; 90]]);
    }

    #[test]
    fn a_packet_longer_than_the_port_takes_is_dropped_and_counted() {
        let mut a = Assembly::new();
        let mut c = RxCounters::default();
        let got = sort(
            &mut a,
            &mut c,
            &[
                part(1, FRAME_CAPACITY, true),
                part(2, FRAME_CAPACITY, true),
                // Its third part comes in the next batch.
            ],
        );
        assert!(got.is_empty());
        let got = sort(&mut a, &mut c, &[part(3, 10, false), part(4, 50, false)]);
        assert_eq!(got, vec![vec![4; 50]]);
        assert_eq!((c.multi_buffer_packets, c.oversized), (0, 1));
    }

    #[test]
    fn a_full_batch_of_two_part_packets_never_grows_the_arena() {
        let mut a = Assembly::new();
        let capacity = a.arena.capacity();
        let mut c = RxCounters::default();
        // A packet left open by the previous batch, then RX_BATCH more parts.
        sort(&mut a, &mut c, &[part(9, FRAME_CAPACITY, true)]);
        let mut parts = vec![part(9, FRAME_CAPACITY, false)];
        for i in 0..(RX_BATCH - 1) {
            parts.push(part(i as u8, FRAME_CAPACITY, i % 2 == 0));
        }
        let got = sort(&mut a, &mut c, &parts);
        assert_eq!(got.len(), 1 + (RX_BATCH - 1) / 2);
        assert!(got.iter().all(|p| p.len() == 2 * FRAME_CAPACITY));
        assert_eq!(a.arena.capacity(), capacity);
    }
}
