//! The receive side of a port: the RX ring, the fill ring, and batches of received frames
//! lent out as `&[u8]` views until they go back to the fill ring.

use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use xsk_rs::{FillQueue, FrameDesc, RxQueue};

use super::RxCounters;

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
    pub(super) counters: RxCounters,
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
        RxBatch {
            receiver: self,
            len,
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

/// Frames received by one [`Receiver::poll`], in arrival order. Dropping the batch returns
/// the frames to the fill ring.
pub struct RxBatch<'a> {
    receiver: &'a mut Receiver,
    len: usize,
}

impl fmt::Debug for RxBatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RxBatch").field("len", &self.len).finish()
    }
}

impl RxBatch<'_> {
    /// Frames in the batch.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Frame `index` (Ethernet header onwards), or `None` past the end.
    #[inline]
    pub fn frame(&self, index: usize) -> Option<&[u8]> {
        let desc = self.receiver.batch[..self.len].get(index)?;
        // Safety: `desc` came off this UMEM's RX ring; the kernel does not touch the frame
        // until it is back on the fill ring, which happens only when this batch is dropped,
        // and the batch holds the receiver exclusively until then.
        let data = unsafe { self.receiver.umem.data(desc) };
        Some(data.contents())
    }

    /// The frames, in arrival order.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.len).filter_map(|i| self.frame(i))
    }
}

impl Drop for RxBatch<'_> {
    fn drop(&mut self) {
        self.receiver.refill(self.len);
    }
}
