//! ACK Extended Transport Header (IBTA 9.3.5): syndrome and message sequence number of an
//! acknowledgement, a read response or an atomic acknowledgement.
//!
//! ```text
//! | Syndrome | MSN (3) |
//!   r tt vvvvv        r: reserved, tt: 00 ACK, 01 RNR NAK, 10 reserved, 11 NAK
//! ```

use core::fmt;
use core::time::Duration;

use crate::error::{Layer, ParseError};

/// Length of the AETH.
pub const HEADER_LEN: usize = 4;

/// Why a NAK was sent: the NAK codes of the AETH syndrome (IBTA 9.3.5, 9.7.5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// 0: the PSN was out of sequence; the requester resends from the expected PSN.
    PsnSequenceError,
    /// 1: the request was malformed or not allowed on this QP.
    InvalidRequest,
    /// 2: R_Key/address/length checks failed.
    RemoteAccessError,
    /// 3: the responder could not complete the request.
    RemoteOperationalError,
    /// 4: invalid RD request (RD only).
    InvalidRdRequest,
    /// 5..=31: reserved codes, kept as received.
    Reserved(u8),
}

impl NakCode {
    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(c) => c & 0x1f,
        }
    }

    /// The NAK code of a 5-bit value (higher bits ignored).
    pub const fn from_code(code: u8) -> NakCode {
        match code & 0x1f {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            c => NakCode::Reserved(c),
        }
    }
}

impl fmt::Display for NakCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NakCode::PsnSequenceError => f.write_str("PSN sequence error"),
            NakCode::InvalidRequest => f.write_str("invalid request"),
            NakCode::RemoteAccessError => f.write_str("remote access error"),
            NakCode::RemoteOperationalError => f.write_str("remote operational error"),
            NakCode::InvalidRdRequest => f.write_str("invalid RD request"),
            NakCode::Reserved(c) => write!(f, "reserved NAK code {c}"),
        }
    }
}

/// The 5-bit RNR NAK timer code: how long the requester waits before retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RnrTimer(u8);

/// Wait of each RNR timer code in units of 10 µs (the RNR NAK timer encoding, IBTA
/// 9.7.5.2): code 0 is the longest wait, 655.36 ms.
const RNR_TIMER_10US: [u32; 32] = [
    65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
];

impl RnrTimer {
    /// A timer from its 5-bit code (higher bits dropped).
    pub const fn new(code: u8) -> RnrTimer {
        RnrTimer(code & 0x1f)
    }

    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }

    /// How long the requester waits: 0 → 655.36 ms, 1 → 0.01 ms, …, 31 → 491.52 ms.
    pub const fn duration(self) -> Duration {
        Duration::from_micros(RNR_TIMER_10US[(self.0 & 0x1f) as usize] as u64 * 10)
    }
}

/// Credits advertised by each ACK credit-count code (end-to-end flow control, IBTA 9.7.7).
const CREDITS: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// The decoded AETH syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// A positive acknowledgement, with the 5-bit credit count code of end-to-end flow
    /// control. Code 31 means "no credit information": rxe always sends it
    /// (`AETH_ACK_UNLIMITED`), and so do we.
    Ack {
        /// The credit count code (see [`Syndrome::credits`]).
        credit_count: u8,
    },
    /// Receiver not ready: retry after the timer.
    RnrNak {
        /// How long to wait.
        timer: RnrTimer,
    },
    /// A negative acknowledgement.
    Nak(NakCode),
    /// Syndrome type 0b10, reserved; the 5-bit value is kept.
    Reserved(u8),
}

impl Syndrome {
    /// An ACK with "no credit information" (credit count 31), as rxe sends.
    pub const ACK_UNLIMITED: Syndrome = Syndrome::Ack { credit_count: 31 };

    /// The syndrome of an AETH byte (bit 7 is reserved and ignored).
    pub const fn from_byte(b: u8) -> Syndrome {
        let value = b & 0x1f;
        match (b >> 5) & 0x03 {
            0 => Syndrome::Ack {
                credit_count: value,
            },
            1 => Syndrome::RnrNak {
                timer: RnrTimer(value),
            },
            3 => Syndrome::Nak(NakCode::from_code(value)),
            _ => Syndrome::Reserved(value),
        }
    }

    /// The AETH byte (reserved bit 7 clear).
    pub const fn to_byte(self) -> u8 {
        match self {
            Syndrome::Ack { credit_count } => credit_count & 0x1f,
            Syndrome::RnrNak { timer } => 0x20 | timer.code(),
            Syndrome::Nak(code) => 0x60 | code.code(),
            Syndrome::Reserved(v) => 0x40 | (v & 0x1f),
        }
    }

    /// `true` for an ACK.
    pub const fn is_ack(self) -> bool {
        matches!(self, Syndrome::Ack { .. })
    }

    /// For an ACK, the credits its count code advertises; `None` for code 31 (no credit
    /// information) and for anything that is not an ACK.
    pub const fn credits(self) -> Option<u32> {
        match self {
            Syndrome::Ack { credit_count } if (credit_count as usize) < CREDITS.len() => {
                Some(CREDITS[credit_count as usize])
            }
            _ => None,
        }
    }
}

impl fmt::Display for Syndrome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Syndrome::Ack { credit_count } => write!(f, "ACK credits={credit_count}"),
            Syndrome::RnrNak { timer } => write!(f, "RNR-NAK timer={}", timer.code()),
            Syndrome::Nak(code) => write!(f, "NAK {code}"),
            Syndrome::Reserved(v) => write!(f, "reserved syndrome {:#04x}", 0x40 | v),
        }
    }
}

mod field {
    use core::ops::Range;

    pub(super) const SYNDROME: usize = 0;
    pub(super) const MSN: Range<usize> = 1..4;
}

/// A view of an AETH over a byte buffer.
#[derive(Debug, Clone)]
pub struct AethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AethPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> AethPacket<T> {
        AethPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds 4 bytes.
    pub fn new_checked(buffer: T) -> Result<AethPacket<T>, ParseError> {
        let available = buffer.as_ref().len();
        if available < HEADER_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::ExtHeaders,
                needed: HEADER_LEN,
                available,
            });
        }
        Ok(AethPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw syndrome byte.
    pub fn syndrome_byte(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }

    /// The decoded syndrome.
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from_byte(self.syndrome_byte())
    }

    /// The 24-bit message sequence number.
    pub fn msn(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::MSN];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AethPacket<T> {
    /// Sets the syndrome.
    pub fn set_syndrome(&mut self, syndrome: Syndrome) {
        self.buffer.as_mut()[field::SYNDROME] = syndrome.to_byte();
    }

    /// Sets the MSN (24 bits; higher bits dropped, MSNs are modular).
    pub fn set_msn(&mut self, msn: u32) {
        self.buffer.as_mut()[field::MSN].copy_from_slice(&msn.to_be_bytes()[1..]);
    }
}

/// The fields of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    /// What kind of acknowledgement this is.
    pub syndrome: Syndrome,
    /// The 24-bit message sequence number: messages completed by the responder.
    pub msn: u32,
}

impl AethRepr {
    /// Reads an AETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &AethPacket<T>) -> AethRepr {
        AethRepr {
            syndrome: packet.syndrome(),
            msn: packet.msn(),
        }
    }

    /// Writes the 4 bytes. The buffer must hold 4.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut AethPacket<T>) {
        packet.set_syndrome(self.syndrome);
        packet.set_msn(self.msn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AETH of rc_pingpong.pcap frame 19: ACK, credit count 31, MSN 1.
    static AETH: [u8; 4] = [0x1f, 0x00, 0x00, 0x01];

    fn repr() -> AethRepr {
        AethRepr {
            syndrome: Syndrome::ACK_UNLIMITED,
            msn: 1,
        }
    }

    #[test]
    fn deconstruct() {
        let p = AethPacket::new_checked(&AETH[..]).unwrap();
        assert_eq!(p.syndrome_byte(), 0x1f);
        assert_eq!(p.syndrome(), Syndrome::Ack { credit_count: 31 });
        assert_eq!(p.msn(), 1);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 4];
        let mut p = AethPacket::new_unchecked(&mut bytes[..]);
        p.set_syndrome(Syndrome::Ack { credit_count: 31 });
        p.set_msn(1);
        assert_eq!(bytes, AETH);
    }

    #[test]
    fn parse() {
        assert_eq!(
            AethRepr::parse(&AethPacket::new_checked(&AETH[..]).unwrap()),
            repr()
        );
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 4];
        repr().emit(&mut AethPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, AETH);
    }

    #[test]
    fn every_syndrome_byte_round_trips() {
        for b in 0..=0x7fu8 {
            let s = Syndrome::from_byte(b);
            assert_eq!(s.to_byte(), b, "{s:?}");
            // The reserved top bit is ignored.
            assert_eq!(Syndrome::from_byte(b | 0x80), s);
        }
    }

    #[test]
    fn syndromes_decode_as_the_spec_says() {
        assert_eq!(
            Syndrome::from_byte(0x60),
            Syndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            Syndrome::from_byte(0x61),
            Syndrome::Nak(NakCode::InvalidRequest)
        );
        assert_eq!(
            Syndrome::from_byte(0x62),
            Syndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(
            Syndrome::from_byte(0x63),
            Syndrome::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            Syndrome::from_byte(0x64),
            Syndrome::Nak(NakCode::InvalidRdRequest)
        );
        assert_eq!(
            Syndrome::from_byte(0x65),
            Syndrome::Nak(NakCode::Reserved(5))
        );
        assert_eq!(
            Syndrome::from_byte(0x3f),
            Syndrome::RnrNak {
                timer: RnrTimer::new(31)
            }
        );
        assert_eq!(Syndrome::from_byte(0x41), Syndrome::Reserved(1));
    }

    #[test]
    fn rnr_timer_durations() {
        assert_eq!(RnrTimer::new(0).duration(), Duration::from_micros(655_360));
        assert_eq!(RnrTimer::new(1).duration(), Duration::from_micros(10));
        assert_eq!(RnrTimer::new(14).duration(), Duration::from_micros(1_280));
        assert_eq!(RnrTimer::new(31).duration(), Duration::from_micros(491_520));
        // Codes 1..=31 wait longer and longer.
        for c in 1..31 {
            assert!(RnrTimer::new(c).duration() < RnrTimer::new(c + 1).duration());
        }
    }

    #[test]
    fn credit_counts() {
        assert_eq!(Syndrome::Ack { credit_count: 0 }.credits(), Some(0));
        assert_eq!(Syndrome::Ack { credit_count: 5 }.credits(), Some(6));
        assert_eq!(Syndrome::Ack { credit_count: 30 }.credits(), Some(32768));
        assert_eq!(Syndrome::ACK_UNLIMITED.credits(), None);
        assert_eq!(Syndrome::Nak(NakCode::InvalidRequest).credits(), None);
    }
}
