//! Which applications' rings a poller reads on a pass.
//!
//! Reading a ring's `producer` is a cache miss on memory an application writes; a poller
//! serving a thousand QPs cannot afford two thousand of them on every pass. Applications
//! set their QP's or SRQ's bit in their post-bits page after posting
//! ([`verbs_shm::contract`], "Post bits"), and the poller reads the rings whose bits it
//! finds set, the rings it could not empty last time (the transport had no room), and the
//! rings of QPs and SRQs that have no bit. Everything is read anyway before the poller
//! sleeps and every [`FULL_SCAN_EVERY`], so an application that never sets its bits only
//! slows itself down.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use verbs_shm::contract::POST_BITS_PER_POLLER;
use verbs_shm::sys::Mapping;

/// How often every ring is read, bits or not.
pub(crate) const FULL_SCAN_EVERY: Duration = Duration::from_millis(10);

/// A QP's or SRQ's bit in its application's post-bits page.
#[derive(Clone, Debug)]
pub struct PostBit {
    /// The application's post-bits page.
    pub page: Arc<Mapping>,
    /// The bit's index in the page.
    pub bit: u32,
}

/// A ring owner to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Target {
    /// A QP's send and receive rings.
    Qp(u32),
    /// An SRQ's ring.
    Srq(u32),
}

/// Where a target's bit is: the page (by address) and the bit's index in this poller's
/// region of it.
pub(crate) type BellKey = (usize, u32);

#[derive(Debug)]
struct Page {
    page: Arc<Mapping>,
    /// This poller's first word in the page.
    first_word: usize,
    /// The target of each of this poller's bits.
    slots: Vec<Option<Target>>,
    /// Words of this poller's region that have ever had a target (the rest are not read).
    words: usize,
    /// Targets using the page.
    users: usize,
}

/// The post bits a poller watches.
#[derive(Debug, Default)]
pub(crate) struct Bells {
    pages: HashMap<usize, Page>,
    /// Targets without a bit: read on every pass.
    always: Vec<Target>,
    /// Targets whose rings still held work requests after the last read.
    pub(crate) again: Vec<Target>,
}

impl Bells {
    /// Starts watching `target`'s bit (poller `poller`'s region); with no usable bit, the
    /// target is read on every pass. Returns where the bit is.
    pub(crate) fn add(
        &mut self,
        poller: usize,
        bit: Option<&PostBit>,
        target: Target,
    ) -> Option<BellKey> {
        let base = poller as u64 * u64::from(POST_BITS_PER_POLLER);
        let usable = bit.and_then(|b| {
            let local = u64::from(b.bit).checked_sub(base)?;
            let word_end = (base + local) / 64 * 8 + 8;
            (local < u64::from(POST_BITS_PER_POLLER) && word_end <= b.page.len() as u64)
                .then_some((b, local as u32))
        });
        let Some((b, local)) = usable else {
            self.always.push(target);
            return None;
        };
        let key = Arc::as_ptr(&b.page) as usize;
        let page = self.pages.entry(key).or_insert_with(|| Page {
            page: b.page.clone(),
            first_word: (base / 64) as usize,
            slots: vec![None; POST_BITS_PER_POLLER as usize],
            words: 0,
            users: 0,
        });
        page.slots[local as usize] = Some(target);
        page.words = page.words.max(local as usize / 64 + 1);
        page.users += 1;
        Some((key, local))
    }

    /// Stops watching `target`.
    pub(crate) fn remove(&mut self, key: Option<BellKey>, target: Target) {
        match key {
            Some((page_key, local)) => {
                if let Some(page) = self.pages.get_mut(&page_key) {
                    page.slots[local as usize] = None;
                    page.users -= 1;
                    if page.users == 0 {
                        self.pages.remove(&page_key);
                    }
                }
            }
            None => self.always.retain(|&t| t != target),
        }
        self.again.retain(|&t| t != target);
    }

    /// The targets to read now: those whose bits are set (the bits are cleared), those
    /// left over from the last read, and those without bits. Sorted, no duplicates.
    pub(crate) fn due(&mut self, out: &mut Vec<Target>) {
        out.clear();
        out.append(&mut self.again);
        out.extend_from_slice(&self.always);
        for page in self.pages.values() {
            for w in 0..page.words {
                let Some(word) = page.page.u64_at((page.first_word + w) * 8) else {
                    break;
                };
                if word.load(Ordering::Relaxed) == 0 {
                    continue;
                }
                let mut bits = word.swap(0, Ordering::SeqCst);
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    // A bit with no target here (another poller's QP was never given one
                    // in this region, or the QP is gone) means nothing.
                    if let Some(t) = page.slots[w * 64 + b] {
                        out.push(t);
                    }
                }
            }
        }
        if out.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn page(bytes: usize) -> Arc<Mapping> {
        let fd = verbs_shm::sys::memfd("post-bits-test", bytes, false).expect("memfd");
        Arc::new(Mapping::map(fd.as_fd(), bytes, 0, true).expect("map"))
    }

    fn set(page: &Mapping, bit: u32) {
        page.u64_at(bit as usize / 64 * 8)
            .unwrap()
            .fetch_or(1 << (bit % 64), Ordering::SeqCst);
    }

    #[test]
    fn set_bits_name_their_targets_once_and_are_cleared() {
        let p = page(4096);
        let mut bells = Bells::default();
        let k1 = bells.add(
            0,
            Some(&PostBit {
                page: p.clone(),
                bit: 3,
            }),
            Target::Qp(10),
        );
        let k2 = bells.add(
            0,
            Some(&PostBit {
                page: p.clone(),
                bit: 70,
            }),
            Target::Srq(7),
        );
        assert!(k1.is_some() && k2.is_some());
        let mut due = Vec::new();
        bells.due(&mut due);
        assert!(due.is_empty());
        set(&p, 3);
        set(&p, 70);
        bells.again.push(Target::Qp(10));
        bells.due(&mut due);
        assert_eq!(due, vec![Target::Qp(10), Target::Srq(7)]);
        bells.due(&mut due);
        assert!(due.is_empty(), "bits are cleared once read");
        bells.remove(k1, Target::Qp(10));
        set(&p, 3);
        bells.due(&mut due);
        assert!(due.is_empty(), "a removed target's bit means nothing");
    }

    #[test]
    fn a_bit_outside_this_pollers_region_or_the_page_is_read_every_pass() {
        let p = page(4096);
        let mut bells = Bells::default();
        // A region is 4096 bits (512 bytes): poller 8's lies past a one-page mapping.
        assert!(
            bells
                .add(
                    8,
                    Some(&PostBit {
                        page: p.clone(),
                        bit: 8 * 4096
                    }),
                    Target::Qp(1)
                )
                .is_none()
        );
        assert!(
            bells
                .add(
                    1,
                    Some(&PostBit {
                        page: p.clone(),
                        bit: 5
                    }),
                    Target::Qp(2)
                )
                .is_none(),
            "bit 5 is poller 0's"
        );
        assert!(bells.add(0, None, Target::Qp(3)).is_none());
        let mut due = Vec::new();
        bells.due(&mut due);
        assert_eq!(due, vec![Target::Qp(1), Target::Qp(2), Target::Qp(3)]);
        bells.remove(None, Target::Qp(2));
        bells.due(&mut due);
        assert_eq!(due, vec![Target::Qp(1), Target::Qp(3)]);
    }
}
