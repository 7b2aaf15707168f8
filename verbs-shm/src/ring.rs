//! Typed producer and consumer ends of the rings described in [`crate::contract`].
//!
//! Both ends keep the counter they own in private memory and publish it; they read the
//! other end's counter with `Acquire` and never trust it further than the ring's size.

use core::marker::PhantomData;
use core::mem::size_of;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::contract::{RING_HEADER_SIZE, RingHeader};
use crate::sys::Mapping;

const PRODUCER: usize = core::mem::offset_of!(RingHeader, producer);
const CONSUMER: usize = core::mem::offset_of!(RingHeader, consumer);
const ARM: usize = core::mem::offset_of!(RingHeader, arm);
const EVENTS: usize = core::mem::offset_of!(RingHeader, events);
const BROKEN: usize = core::mem::offset_of!(RingHeader, broken);

/// Why a ring cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The mapping is smaller than the ring it should hold, or the geometry is not a
    /// power of two.
    #[error("the ring mapping does not match its geometry")]
    Geometry,
    /// The other side's counter is impossible (more than the ring's size ahead): the ring
    /// was scribbled on.
    #[error("the ring's counters are corrupt")]
    Corrupt,
}

/// A ring inside a mapping: its geometry and typed slot access.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    map: Arc<Mapping>,
    offset: usize,
    entries: u32,
    _slot: PhantomData<fn() -> T>,
}

impl<T: FromBytes + IntoBytes + Immutable> Ring<T> {
    /// The ring of `entries` slots of `T` whose header starts at `offset` in `map`.
    pub fn new(map: Arc<Mapping>, offset: usize, entries: u32) -> Result<Ring<T>, RingError> {
        let bytes = crate::contract::ring_bytes(entries, size_of::<T>());
        let fits = offset
            .checked_add(bytes)
            .is_some_and(|end| end <= map.len());
        if !entries.is_power_of_two()
            || !fits
            || !offset.is_multiple_of(64)
            || !size_of::<T>().is_multiple_of(8)
        {
            return Err(RingError::Geometry);
        }
        Ok(Ring {
            map,
            offset,
            entries,
            _slot: PhantomData,
        })
    }

    /// The mapping the ring lives in.
    pub fn mapping(&self) -> &Arc<Mapping> {
        &self.map
    }

    /// The number of slots.
    pub fn entries(&self) -> u32 {
        self.entries
    }

    fn word(&self, at: usize) -> &AtomicU32 {
        // NOTE(unwrap): `new` checked that the header lies inside the mapping and is aligned.
        self.map
            .u32_at(self.offset + at)
            .expect("ring header inside the mapping")
    }

    fn slot_offset(&self, counter: u32) -> usize {
        self.offset + RING_HEADER_SIZE + (counter & (self.entries - 1)) as usize * size_of::<T>()
    }

    /// Reads slot `counter` (modulo the size).
    pub fn read(&self, counter: u32) -> T {
        let mut v = T::new_zeroed();
        let at = self.slot_offset(counter);
        let ok = self.map.load_words(at, v.as_mut_bytes());
        debug_assert!(ok, "slot inside the mapping");
        v
    }

    /// Writes slot `counter` (modulo the size).
    pub fn write(&self, counter: u32, value: &T) {
        let at = self.slot_offset(counter);
        let ok = self.map.store_words(at, value.as_bytes());
        debug_assert!(ok, "slot inside the mapping");
    }

    /// The producer counter, as published.
    pub fn producer(&self) -> u32 {
        self.word(PRODUCER).load(Ordering::Acquire)
    }

    /// Publishes the producer counter.
    pub fn publish_producer(&self, value: u32) {
        self.word(PRODUCER).store(value, Ordering::Release);
    }

    /// The consumer counter, as published.
    pub fn consumer(&self) -> u32 {
        self.word(CONSUMER).load(Ordering::Acquire)
    }

    /// Publishes the consumer counter.
    pub fn publish_consumer(&self, value: u32) {
        self.word(CONSUMER).store(value, Ordering::Release);
    }

    /// The notification word of a completion ring.
    pub fn arm(&self) -> &AtomicU32 {
        self.word(ARM)
    }

    /// The event counter of a completion ring.
    pub fn events(&self) -> &AtomicU32 {
        self.word(EVENTS)
    }

    /// The broken flag.
    pub fn broken(&self) -> &AtomicU32 {
        self.word(BROKEN)
    }
}

/// The producing end: owns the producer counter.
#[derive(Debug)]
pub struct Producer<T> {
    ring: Ring<T>,
    head: u32,
    /// The consumer counter last seen (so a full ring costs one load, not one per push).
    seen_consumer: u32,
}

impl<T: FromBytes + IntoBytes + Immutable> Producer<T> {
    /// The producing end of `ring`, starting from its published producer counter.
    pub fn new(ring: Ring<T>) -> Producer<T> {
        let head = ring.producer();
        let seen_consumer = ring.consumer();
        Producer {
            ring,
            head,
            seen_consumer,
        }
    }

    /// The ring.
    pub fn ring(&self) -> &Ring<T> {
        &self.ring
    }

    /// Free slots. A consumer counter that is ahead of the producer or more than the
    /// ring's size behind it is corrupt.
    pub fn free(&mut self) -> Result<u32, RingError> {
        let used = self.head.wrapping_sub(self.seen_consumer);
        if used < self.ring.entries {
            return Ok(self.ring.entries - used);
        }
        self.seen_consumer = self.ring.consumer();
        let used = self.head.wrapping_sub(self.seen_consumer);
        if used > self.ring.entries {
            return Err(RingError::Corrupt);
        }
        Ok(self.ring.entries - used)
    }

    /// Writes `value` into the next slot without publishing it. Returns `false` when full.
    pub fn stage(&mut self, value: &T) -> Result<bool, RingError> {
        if self.free()? == 0 {
            return Ok(false);
        }
        self.ring.write(self.head, value);
        self.head = self.head.wrapping_add(1);
        Ok(true)
    }

    /// Publishes every staged slot.
    pub fn publish(&self) {
        self.ring.publish_producer(self.head);
    }

    /// Forgets every slot staged since the last publish (the consumer never saw them).
    pub fn discard(&mut self) {
        self.head = self.ring.producer();
    }

    /// Stages and publishes one slot. Returns `false` when full.
    pub fn push(&mut self, value: &T) -> Result<bool, RingError> {
        let pushed = self.stage(value)?;
        if pushed {
            self.publish();
        }
        Ok(pushed)
    }
}

/// The consuming end: owns the consumer counter.
#[derive(Debug)]
pub struct Consumer<T> {
    ring: Ring<T>,
    tail: u32,
}

impl<T: FromBytes + IntoBytes + Immutable> Consumer<T> {
    /// The consuming end of `ring`, starting from its published consumer counter.
    pub fn new(ring: Ring<T>) -> Consumer<T> {
        let tail = ring.consumer();
        Consumer { ring, tail }
    }

    /// The ring.
    pub fn ring(&self) -> &Ring<T> {
        &self.ring
    }

    /// Slots ready to consume. A producer counter more than the ring's size ahead is
    /// corrupt.
    pub fn available(&self) -> Result<u32, RingError> {
        let n = self.ring.producer().wrapping_sub(self.tail);
        if n > self.ring.entries {
            return Err(RingError::Corrupt);
        }
        Ok(n)
    }

    /// Reads the `i`-th ready slot (`i < available()`), without consuming it.
    pub fn peek(&self, i: u32) -> T {
        self.ring.read(self.tail.wrapping_add(i))
    }

    /// Consumes `n` slots and publishes the consumer counter.
    pub fn release(&mut self, n: u32) {
        self.tail = self.tail.wrapping_add(n);
        self.ring.publish_consumer(self.tail);
    }

    /// Drops the ready slots `keep` refuses, keeping the others in order: they are moved
    /// toward the producer's end and the freed slots consumed. Only slots the producer
    /// already published (and will not touch again) are rewritten. Returns how many were
    /// dropped.
    pub fn retain(&mut self, keep: impl Fn(&T) -> bool) -> Result<u32, RingError> {
        let n = self.available()?;
        let mut to = self.tail.wrapping_add(n);
        let mut dropped = 0;
        for i in (0..n).rev() {
            let v = self.peek(i);
            if keep(&v) {
                to = to.wrapping_sub(1);
                if dropped > 0 {
                    self.ring.write(to, &v);
                }
            } else {
                dropped += 1;
            }
        }
        self.release(dropped);
        Ok(dropped)
    }

    /// Takes the next slot, if any.
    pub fn pop(&mut self) -> Result<Option<T>, RingError> {
        if self.available()? == 0 {
            return Ok(None);
        }
        let v = self.peek(0);
        self.release(1);
        Ok(Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Cqe;
    use crate::sys::{Mapping, memfd};
    use std::os::fd::AsFd;

    fn ring(entries: u32) -> (Ring<Cqe>, Ring<Cqe>) {
        let len = crate::contract::ring_bytes(entries, size_of::<Cqe>());
        let fd = memfd("test-ring", len, false).unwrap();
        let a = Arc::new(Mapping::map(fd.as_fd(), len, 0, true).unwrap());
        let b = Arc::new(Mapping::map(fd.as_fd(), len, 0, true).unwrap());
        (
            Ring::new(a, 0, entries).unwrap(),
            Ring::new(b, 0, entries).unwrap(),
        )
    }

    #[test]
    fn entries_cross_two_mappings_in_order_and_the_ring_fills() {
        let (a, b) = ring(4);
        let mut p = Producer::new(a);
        let mut c = Consumer::new(b);
        for round in 0..3u64 {
            for i in 0..4u64 {
                let cqe = Cqe {
                    wr_id: round * 10 + i,
                    ..Cqe::default()
                };
                assert_eq!(p.push(&cqe), Ok(true));
            }
            assert_eq!(p.push(&Cqe::default()), Ok(false), "full at 4");
            for i in 0..4u64 {
                assert_eq!(c.pop().unwrap().map(|e| e.wr_id), Some(round * 10 + i));
            }
            assert_eq!(c.pop(), Ok(None));
        }
    }

    #[test]
    fn corrupt_counters_are_detected() {
        let (a, b) = ring(4);
        let c = Consumer::new(b);
        a.publish_producer(100);
        assert_eq!(c.available(), Err(RingError::Corrupt));
        let mut p = Producer::new(ring(4).0);
        for _ in 0..4 {
            assert_eq!(p.push(&Cqe::default()), Ok(true));
        }
        // A consumer counter ahead of the producer is impossible.
        p.ring().publish_consumer(7);
        assert_eq!(p.free(), Err(RingError::Corrupt));
    }

    #[test]
    fn retain_drops_ready_slots_in_place_and_keeps_the_order() {
        let (a, b) = ring(8);
        let mut p = Producer::new(a);
        let mut c = Consumer::new(b);
        let cqe = |wr_id: u64, qp_num: u32| Cqe {
            wr_id,
            qp_num,
            ..Cqe::default()
        };
        // Wrap around once so the compaction crosses the end of the slots.
        for i in 0..6 {
            assert_eq!(p.push(&cqe(i, 0)), Ok(true));
        }
        for _ in 0..6 {
            c.pop().unwrap();
        }
        for (i, qp) in [(1, 7), (2, 9), (3, 7), (4, 7), (5, 9), (6, 7)] {
            assert_eq!(p.push(&cqe(i, qp)), Ok(true));
        }
        assert_eq!(c.retain(|e| e.qp_num != 9), Ok(2));
        assert_eq!(c.available(), Ok(4));
        // The producer sees the freed slots and keeps going after what it published.
        assert_eq!(p.push(&cqe(7, 9)), Ok(true));
        let order: Vec<u64> = std::iter::from_fn(|| c.pop().unwrap())
            .map(|e| e.wr_id)
            .collect();
        assert_eq!(order, [1, 3, 4, 6, 7]);
        assert_eq!(c.retain(|_| false), Ok(0), "nothing ready, nothing dropped");
    }

    #[test]
    fn discarded_slots_were_never_published() {
        let (a, b) = ring(4);
        let mut p = Producer::new(a);
        let mut c = Consumer::new(b);
        assert_eq!(p.push(&Cqe::default()), Ok(true));
        for _ in 0..3 {
            assert_eq!(p.stage(&Cqe::default()), Ok(true));
        }
        p.discard();
        assert_eq!(c.available(), Ok(1));
        assert_eq!(p.free(), Ok(3));
        c.pop().unwrap();
        p.publish();
        assert_eq!(
            c.available(),
            Ok(0),
            "publishing after a discard publishes nothing"
        );
    }

    #[test]
    fn geometry_is_checked() {
        let (a, _) = ring(4);
        let map = a.map.clone();
        assert!(Ring::<Cqe>::new(map.clone(), 0, 3).is_err());
        assert!(Ring::<Cqe>::new(map.clone(), 0, 8).is_err());
        assert!(Ring::<Cqe>::new(map, 8, 4).is_err());
    }
}
