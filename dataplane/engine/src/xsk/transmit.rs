//! The transmit side of a port: free frames lent out as `&mut [u8]`, staged, put on the
//! TX ring in batches, and taken back from the completion ring once sent.
//!
//! With multi-buffer on, a transmit frame is a pair of neighbouring UMEM frames, lent as one
//! buffer of [`MULTI_BUFFER_CAPACITY`] bytes that runs from the first frame's packet area into
//! the second frame. A packet that fits the first frame goes as one descriptor; a longer one
//! as two: the first frame whole, marked `XDP_PKT_CONTD`, then the rest, moved past the
//! second frame's headroom (a few hundred bytes for a 4096-byte payload). A pair goes back
//! to the free list once every descriptor it was sent in came off the completion ring (in
//! copy mode they make one skb and complete together; a zero-copy driver may complete them
//! in two steps).

use std::fmt;

use xsk_rs::{CompQueue, FrameDesc, TxQueue};

use super::{TX_BATCH, TxCounters, XDP_PKT_CONTD};
use crate::umem::{FRAME_CAPACITY, FRAME_SIZE, MULTI_BUFFER_CAPACITY, XDP_HEADROOM};

/// The transmit side of a [`Port`]: the TX ring, the completion ring and the free frames.
pub struct Transmitter {
    pub(super) ring: TxQueue,
    pub(super) completion: CompQueue,
    pub(super) umem: xsk_rs::Umem,
    /// Transmit frames nobody uses: popped by [`Transmitter::frame`].
    pub(super) free: Vec<FrameDesc>,
    /// Written frames not yet on the TX ring.
    pub(super) staged: Vec<FrameDesc>,
    /// Scratch for reaping the completion ring.
    pub(super) completed: Box<[FrameDesc]>,
    /// Frames (descriptors) on the TX ring or in the kernel, not yet completed.
    pub(super) in_flight: usize,
    /// With multi-buffer on: the second frame of each pair.
    pub(super) pairs: Option<Pairs>,
    pub(super) counters: TxCounters,
}

/// The transmit frames of a multi-buffer port, in UMEM order: pair `k` is frames `2k` (the
/// one on the free list) and `2k + 1`.
#[derive(Debug)]
pub(super) struct Pairs {
    frames: Box<[FrameDesc]>,
    /// The UMEM frame index of the first transmit frame.
    first: usize,
    /// Per pair: its descriptors sent and not completed yet.
    outstanding: Box<[u8]>,
}

impl Pairs {
    /// `frames`: the transmit frames, in UMEM order, starting at UMEM frame `first` (even).
    pub(super) fn new(frames: &[FrameDesc], first: usize) -> Pairs {
        debug_assert!(first.is_multiple_of(2) && frames.len().is_multiple_of(2));
        Pairs {
            frames: frames.into(),
            first,
            outstanding: vec![0; frames.len() / 2].into_boxed_slice(),
        }
    }

    /// The position among the transmit frames of the frame at `addr`.
    fn position(&self, addr: usize) -> usize {
        (addr / FRAME_SIZE as usize).wrapping_sub(self.first)
    }

    /// The second frame of the pair whose first frame is at `addr`.
    fn second(&self, addr: usize) -> Option<FrameDesc> {
        self.frames.get(self.position(addr) + 1).copied()
    }

    /// The pair whose first frame is at `addr` goes out in `parts` descriptors.
    fn on_sent(&mut self, addr: usize, parts: u8) {
        if let Some(n) = self.outstanding.get_mut(self.position(addr) / 2) {
            *n = parts;
        }
    }

    /// The frame at `addr` completed: the pair's first frame when that was the pair's last
    /// descriptor in flight.
    fn on_completed(&mut self, addr: usize) -> Option<FrameDesc> {
        let pair = self.position(addr) / 2;
        let n = self.outstanding.get_mut(pair)?;
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.frames.get(2 * pair).copied()
        } else {
            None
        }
    }
}

impl fmt::Debug for Transmitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transmitter")
            .field("free", &self.free.len())
            .field("staged", &self.staged.len())
            .field("in_flight", &self.in_flight)
            .field("counters", &self.counters)
            .finish()
    }
}

impl Transmitter {
    /// A free transmit frame to write a packet into, or `None` when every transmit frame is
    /// staged or in flight (counted as `ring_full`; reap with
    /// [`poll_completions`](Self::poll_completions) or wait). Reaps completions itself when
    /// the free list is empty.
    #[inline]
    pub fn frame(&mut self) -> Option<TxFrame<'_>> {
        // A full stage that could not be flushed must not grow (that would allocate).
        if self.staged.len() >= TX_BATCH && self.flush() == 0 {
            self.counters.ring_full += 1;
            return None;
        }
        if self.free.is_empty() {
            self.poll_completions();
        }
        let Some(mut desc) = self.free.pop() else {
            self.counters.ring_full += 1;
            return None;
        };
        // Safety: `desc` is a transmit frame of this UMEM that was on the free list: not on
        // any ring, and not lent to any other TxFrame.
        let mut data = unsafe { self.umem.data_mut(&mut desc) };
        let capacity = {
            let mut cursor = data.cursor();
            let capacity = cursor.buf_len();
            cursor.set_pos(capacity);
            capacity
        };
        debug_assert_eq!(capacity, FRAME_CAPACITY);
        // A pair's buffer runs on into its second frame, the next in the mapping.
        let capacity = if self.pairs.is_some() {
            MULTI_BUFFER_CAPACITY
        } else {
            capacity
        };
        let buf = data.contents_mut().as_mut_ptr();
        Some(TxFrame {
            transmitter: self,
            desc,
            buf,
            capacity,
            done: false,
        })
    }

    /// Copies `packet` into a free frame and submits it; `false` when no frame is free or the
    /// packet does not fit.
    pub fn send(&mut self, packet: &[u8]) -> bool {
        let Some(mut frame) = self.frame() else {
            return false;
        };
        let Some(dst) = frame.buf().get_mut(..packet.len()) else {
            frame.transmitter.counters.bad_length += 1;
            return false;
        };
        dst.copy_from_slice(packet);
        frame.submit(packet.len())
    }

    /// Puts every staged frame on the TX ring (one ring access) and kicks the kernel if it
    /// asked for a wakeup. Returns how many frames went on the ring.
    #[inline]
    pub fn flush(&mut self) -> usize {
        let len = self.staged.len();
        if len == 0 {
            return 0;
        }
        // Safety: staged descriptors are transmit frames of this UMEM, written and no longer
        // referenced by any TxFrame.
        let produced = unsafe { self.ring.produce(&self.staged) };
        if produced == 0 {
            // Cannot happen while the ring has a slot per transmit frame; keep them staged.
            self.counters.ring_full += 1;
            return 0;
        }
        for desc in &self.staged {
            self.counters.bytes += desc.lengths().data() as u64;
        }
        self.counters.frames += len as u64;
        self.in_flight += len;
        self.staged.clear();
        self.kick_if_asked();
        len
    }

    /// Moves sent frames from the completion ring back to the free list and returns how
    /// many. Kicks the kernel again while frames wait on the TX ring and it asks for it (in
    /// copy mode one kick sends at most 32 frames).
    #[inline]
    pub fn poll_completions(&mut self) -> usize {
        let mut total = 0;
        loop {
            // Safety: the completion ring of this UMEM only returns its own transmit frames.
            let n = unsafe { self.completion.consume(&mut self.completed) };
            match &mut self.pairs {
                None => self.free.extend_from_slice(&self.completed[..n]),
                // A pair is free again when all its descriptors completed.
                Some(pairs) => self.free.extend(
                    self.completed[..n]
                        .iter()
                        .filter_map(|d| pairs.on_completed(d.addr())),
                ),
            }
            total += n;
            if n < self.completed.len() {
                break;
            }
        }
        self.in_flight -= total.min(self.in_flight);
        self.counters.completed += total as u64;
        if self.in_flight > 0 {
            self.kick_if_asked();
        }
        total
    }

    /// Frames on the TX ring or in the kernel, not yet completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Frames submitted but not yet flushed to the TX ring.
    pub fn staged(&self) -> usize {
        self.staged.len()
    }

    /// Free transmit frames.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// The transmit counters.
    pub fn counters(&self) -> &TxCounters {
        &self.counters
    }

    #[inline]
    fn kick_if_asked(&mut self) {
        if self.ring.needs_wakeup() {
            self.counters.kicks += 1;
            // xsk-rs already treats EAGAIN/EBUSY/ENOBUFS/ENETDOWN as "try later".
            if self.ring.wakeup().is_err() {
                self.counters.kick_errors += 1;
            }
        }
    }

    fn stage(&mut self, mut desc: FrameDesc, buf: *mut u8, len: usize) -> bool {
        if len > FRAME_CAPACITY {
            let Some(pairs) = self.pairs.as_mut() else {
                self.counters.bad_length += 1;
                self.free.push(desc);
                return false;
            };
            let Some(mut second) = pairs.second(desc.addr()) else {
                self.counters.bad_length += 1;
                self.free.push(desc);
                return false;
            };
            let rest = len - FRAME_CAPACITY;
            let second_frame = buf.wrapping_add(FRAME_CAPACITY);
            let second_packet = second_frame.wrapping_add(XDP_HEADROOM as usize);
            // Safety: `buf` is the pair's buffer, MULTI_BUFFER_CAPACITY bytes from the first
            // frame's packet area into the second frame, lent to the TxFrame that is being
            // submitted; `rest + XDP_HEADROOM <= FRAME_SIZE` (len <= MULTI_BUFFER_CAPACITY),
            // so source and destination stay in the second frame (`copy` allows overlap).
            unsafe { std::ptr::copy(second_frame, second_packet, rest) };
            // Safety: both are the frames of the pair the finished TxFrame held; nothing
            // else refers to them.
            unsafe { self.umem.data_mut(&mut desc) }
                .cursor()
                .set_pos(FRAME_CAPACITY);
            desc.set_options(XDP_PKT_CONTD);
            // Safety: as above.
            unsafe { self.umem.data_mut(&mut second) }
                .cursor()
                .set_pos(rest);
            second.set_options(0);
            pairs.on_sent(desc.addr(), 2);
            self.staged.push(desc);
            self.staged.push(second);
            self.counters.multi_buffer_packets += 1;
        } else {
            // Safety: `desc` is the frame the finished TxFrame held; nothing else refers to
            // it.
            unsafe { self.umem.data_mut(&mut desc) }
                .cursor()
                .set_pos(len);
            desc.set_options(0);
            if let Some(pairs) = self.pairs.as_mut() {
                pairs.on_sent(desc.addr(), 1);
            }
            self.staged.push(desc);
        }
        if self.staged.len() >= TX_BATCH {
            self.flush();
        }
        true
    }
}

/// A free transmit frame lent by [`Transmitter::frame`]: write a packet into
/// [`buf`](Self::buf) and [`submit`](Self::submit) its length. Dropping it unsubmitted
/// returns the frame to the free list.
pub struct TxFrame<'a> {
    transmitter: &'a mut Transmitter,
    desc: FrameDesc,
    buf: *mut u8,
    capacity: usize,
    done: bool,
}

impl fmt::Debug for TxFrame<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TxFrame")
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl TxFrame<'_> {
    /// The frame's bytes: write the packet (Ethernet header first) at the start.
    #[inline]
    pub fn buf(&mut self) -> &mut [u8] {
        // Safety: `buf..buf+capacity` is this frame's packet area inside the UMEM mapping (with
        // multi-buffer, running on into the pair's second frame, the next in the mapping),
        // which the transmitter's UMEM handle keeps alive; the frame is on no ring and lent
        // only to this TxFrame, and `&mut self` keeps the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.buf, self.capacity) }
    }

    /// Bytes the frame holds: [`FRAME_CAPACITY`], or [`MULTI_BUFFER_CAPACITY`] with
    /// multi-buffer on.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Stages the first `len` bytes for transmission (they go on the TX ring at the next
    /// [`Transmitter::flush`], or at once when [`TX_BATCH`] frames are staged). A length of
    /// 0 or beyond the frame sends nothing, is counted as `bad_length` and returns `false`.
    #[inline]
    pub fn submit(mut self, len: usize) -> bool {
        self.done = true;
        if len == 0 || len > self.capacity {
            self.transmitter.counters.bad_length += 1;
            self.transmitter.free.push(self.desc);
            return false;
        }
        self.transmitter.stage(self.desc, self.buf, len)
    }
}

impl Drop for TxFrame<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.transmitter.free.push(self.desc);
        }
    }
}
