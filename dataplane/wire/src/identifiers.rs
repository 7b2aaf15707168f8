//! Small identifiers of the InfiniBand transport: queue pair numbers and the keys.

use core::fmt;

/// A 24-bit queue pair number (IBTA 9.2: BTH DestQP, DETH SrcQP).
///
/// QP 0 is the subnet management QP, QP 1 the general services QP (where CM MADs go).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Qpn(u32);

impl Qpn {
    /// The largest queue pair number, 2^24 − 1.
    pub const MAX: Qpn = Qpn(0x00ff_ffff);
    /// The general services QP (QP1), the destination of CM MADs.
    pub const GSI: Qpn = Qpn(1);
    /// The destination QP of a multicast packet (IBTA 9.2: 0xFFFFFF): it reaches every
    /// queue pair attached to the group its destination GID names.
    pub const MULTICAST: Qpn = Qpn(0x00ff_ffff);

    /// A queue pair number from the low 24 bits of `value`; higher bits are dropped.
    pub const fn new(value: u32) -> Qpn {
        Qpn(value & 0x00ff_ffff)
    }

    /// A queue pair number, or `None` if `value` does not fit in 24 bits.
    pub const fn checked(value: u32) -> Option<Qpn> {
        if value > 0x00ff_ffff {
            None
        } else {
            Some(Qpn(value))
        }
    }

    /// The number as a `u32` (always below 2^24).
    pub const fn value(self) -> u32 {
        self.0
    }
}

impl From<Qpn> for u32 {
    fn from(qpn: Qpn) -> u32 {
        qpn.0
    }
}

impl fmt::Debug for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Qpn({:#08x})", self.0)
    }
}

impl fmt::Display for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

/// A 32-bit remote key (IBTA 9.3.3 RETH R_Key, 9.3.4 AtomicETH, 9.3.8 IETH).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Rkey(pub u32);

impl fmt::Debug for Rkey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Rkey({:#010x})", self.0)
    }
}

impl fmt::Display for Rkey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

/// A 32-bit queue key of a datagram (IBTA 9.3.2 DETH Q_Key).
///
/// Keys with the high bit set are controlled keys; CM MADs to QP1 use 0x8001_0000.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Qkey(pub u32);

impl Qkey {
    /// The well-known Q_Key of the general services QP (IBTA chapter 13, management datagrams).
    pub const GSI: Qkey = Qkey(0x8001_0000);
}

impl fmt::Debug for Qkey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Qkey({:#010x})", self.0)
    }
}

impl fmt::Display for Qkey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

/// A 16-bit partition key (IBTA 9.2 BTH P_Key). RoCEv2 peers use the default partition.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pkey(pub u16);

impl Pkey {
    /// The default partition key, full membership; rxe sends it, so we do too.
    pub const DEFAULT: Pkey = Pkey(0xffff);
}

impl Default for Pkey {
    fn default() -> Pkey {
        Pkey::DEFAULT
    }
}

impl fmt::Debug for Pkey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pkey({:#06x})", self.0)
    }
}

impl fmt::Display for Pkey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#06x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    #[test]
    fn qpn_is_24_bits() {
        assert_eq!(Qpn::new(0x1234_5678).value(), 0x34_5678);
        assert_eq!(Qpn::checked(0x0100_0000), None);
        assert_eq!(Qpn::checked(0x00ff_ffff), Some(Qpn::MAX));
        assert_eq!(format!("{}", Qpn::new(0x11)), "0x000011");
    }

    #[test]
    fn keys_format_as_hex() {
        assert_eq!(format!("{}", Rkey(0x9f5)), "0x000009f5");
        assert_eq!(format!("{}", Qkey::GSI), "0x80010000");
        assert_eq!(format!("{}", Pkey::default()), "0xffff");
    }
}
