//! The CM's clock arithmetic, as the Linux CM does it (`cm.c`), and its table of
//! deadlines.
//!
//! IBTA times are 5-bit codes: 4.096 µs × 2^code. The Linux CM converts them to
//! milliseconds as `1 << (code - 8)` (`cm_convert_to_ms`: 4.096 µs × 256 ≈ 1.05 ms taken
//! as 1 ms), and every CM timeout and the TimeWait period are computed with it, so we do
//! too: a REQ waits 2 × 2^(18-8) + 2^(20-8) = 6144 ms for its answer, a REP 4096 ms, and
//! TimeWait lasts 2^(19-8) = 2048 ms.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use xroce_transport::Instant;
use xroce_wire::CommId;

/// `cm_convert_to_ms`: an IBTA time code as the Linux CM rounds it, `1 << max(code-8, 0)`
/// milliseconds.
pub const fn cm_convert_to_ms(iba_time: u8) -> Duration {
    let shift = iba_time.saturating_sub(8);
    // Codes are 5 bits; anything wider is cut so the shift stays in range.
    Duration::from_millis(1u64 << (shift & 0x1f))
}

/// `cm_ack_timeout`: the local ACK timeout for a CA ACK delay and a packet life time.
///
/// 4.096 µs × 2^timeout should be 4.096 µs × 2^ack_delay + 2 × 4.096 µs × 2^life_time;
/// the Linux CM takes the larger of `ack_delay` and `life_time + 1`, rounded up by one
/// when the other is within 50 % of it, and never above 31. With rxe's ACK delay 15 and
/// rdma_cm's RoCE life time 18 this is 19 (2.1 s), what the captured REQs carry.
pub const fn cm_ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let mut t = packet_life_time as u16 + 1;
    let d = ca_ack_delay as u16;
    if t >= d {
        t += (d + 1 >= t) as u16;
    } else {
        t = d + (t + 1 >= d) as u16;
    }
    if t > 31 { 31 } else { t as u8 }
}

/// The deadlines of the CM's connections: a min-heap of `(deadline, connection)`.
///
/// Each connection keeps its own deadline (a retransmission or the end of TimeWait);
/// setting one pushes it here, and entries whose connection no longer has that deadline
/// are skipped when they come up. So nothing is ever removed from the middle.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, CommId)>>,
}

impl Timers {
    pub(crate) fn push(&mut self, when: Instant, id: CommId) {
        self.heap.push(Reverse((when, id)));
    }

    /// The earliest entry, live or not.
    pub(crate) fn peek(&self) -> Option<(Instant, CommId)> {
        self.heap.peek().map(|Reverse(e)| *e)
    }

    pub(crate) fn pop(&mut self) -> Option<(Instant, CommId)> {
        self.heap.pop().map(|Reverse(e)| e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_match_the_linux_cm() {
        assert_eq!(cm_convert_to_ms(0), Duration::from_millis(1));
        assert_eq!(cm_convert_to_ms(8), Duration::from_millis(1));
        assert_eq!(cm_convert_to_ms(18), Duration::from_millis(1024));
        assert_eq!(cm_convert_to_ms(19), Duration::from_millis(2048));
        assert_eq!(cm_convert_to_ms(20), Duration::from_millis(4096));
        assert_eq!(cm_convert_to_ms(24), Duration::from_millis(65536));
        // REQ retransmission: 2 × life time 18 + remote CM response timeout 20.
        assert_eq!(
            cm_convert_to_ms(18) * 2 + cm_convert_to_ms(20),
            Duration::from_millis(6144)
        );
    }

    #[test]
    fn ack_timeout_matches_the_captures_and_newer_kernels() {
        // Debian 6.1 rdma_cm (life time 18) with rxe's ACK delay 15: 19, as captured.
        assert_eq!(cm_ack_timeout(15, 18), 19);
        // Linux 6.2+ (life time 16): 17.
        assert_eq!(cm_ack_timeout(15, 16), 17);
        // pyverbs' ACK_TIMEOUT option 21 becomes life time 20.
        assert_eq!(cm_ack_timeout(15, 20), 21);
        // Within 50 %: rounded up.
        assert_eq!(cm_ack_timeout(15, 14), 16);
        assert_eq!(cm_ack_timeout(15, 13), 16);
        assert_eq!(cm_ack_timeout(15, 12), 15);
        assert_eq!(cm_ack_timeout(0, 30), 31);
        assert_eq!(cm_ack_timeout(31, 31), 31);
    }

    #[test]
    fn timers_come_out_earliest_first() {
        let mut t = Timers::default();
        t.push(Instant::from_nanos(30), CommId(1));
        t.push(Instant::from_nanos(10), CommId(2));
        t.push(Instant::from_nanos(20), CommId(3));
        assert_eq!(t.peek(), Some((Instant::from_nanos(10), CommId(2))));
        assert_eq!(t.pop(), Some((Instant::from_nanos(10), CommId(2))));
        assert_eq!(t.pop(), Some((Instant::from_nanos(20), CommId(3))));
    }
}
