//! Ethernet II header with at most one IEEE 802.1Q tag.
//!
//! ```text
//!  0      6      12             14 (or 18 with a tag)
//! | dst  | src  | [8100 TCI]   | ethertype | payload …
//! ```

use core::fmt;

use crate::error::{Layer, ParseError};

/// A 48-bit Ethernet MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// The six bytes.
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EthernetAddress({self})")
    }
}

/// An Ethertype (IEEE 802.3).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// IPv6.
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// ARP.
    pub const ARP: EtherType = EtherType(0x0806);
    /// An IEEE 802.1Q customer VLAN tag (the TPID).
    pub const VLAN: EtherType = EtherType(0x8100);
}

impl fmt::Debug for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EtherType({:#06x})", self.0)
    }
}

/// The tag control information of an IEEE 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Priority code point, 3 bits (802.1p). RoCE deployments map it to a lossless class.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 12 bits.
    pub vid: u16,
}

impl VlanTag {
    /// The 16-bit TCI; fields wider than their bits are truncated.
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }

    /// The tag of a 16-bit TCI.
    pub const fn from_tci(tci: u16) -> VlanTag {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }
}

mod field {
    use core::ops::Range;

    pub(super) const DESTINATION: Range<usize> = 0..6;
    pub(super) const SOURCE: Range<usize> = 6..12;
    pub(super) const ETHERTYPE: Range<usize> = 12..14;
    /// With a tag, the TPID sits where the Ethertype would be.
    pub(super) const VLAN_TCI: Range<usize> = 14..16;
    pub(super) const INNER_ETHERTYPE: Range<usize> = 16..18;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = 14;
/// Length of a tagged Ethernet II header.
pub const TAGGED_HEADER_LEN: usize = 18;

/// A view of an Ethernet frame over a byte buffer.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// Wraps `buffer` after checking that it holds the whole header (and the tag, if any).
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>, ParseError> {
        let frame = EthernetFrame::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Checks that the buffer holds the whole header, including a tag if the frame has one.
    pub fn check_len(&self) -> Result<(), ParseError> {
        let available = self.buffer.as_ref().len();
        if available < HEADER_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::Ethernet,
                needed: HEADER_LEN,
                available,
            });
        }
        if self.is_tagged() && available < TAGGED_HEADER_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::Vlan,
                needed: TAGGED_HEADER_LEN,
                available,
            });
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC address.
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        EthernetAddress(a)
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        EthernetAddress(a)
    }

    fn outer_ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// `true` if an 802.1Q tag follows the source address.
    pub fn is_tagged(&self) -> bool {
        self.outer_ethertype() == EtherType::VLAN.0
    }

    /// The 802.1Q tag, if the frame has one.
    pub fn vlan(&self) -> Option<VlanTag> {
        if !self.is_tagged() {
            return None;
        }
        let b = &self.buffer.as_ref()[field::VLAN_TCI];
        Some(VlanTag::from_tci(u16::from_be_bytes([b[0], b[1]])))
    }

    /// The Ethertype of the payload (behind the tag, if there is one).
    pub fn ethertype(&self) -> EtherType {
        if self.is_tagged() {
            let b = &self.buffer.as_ref()[field::INNER_ETHERTYPE];
            EtherType(u16::from_be_bytes([b[0], b[1]]))
        } else {
            EtherType(self.outer_ethertype())
        }
    }

    /// Length of the header: 14 bytes, or 18 with a tag.
    pub fn header_len(&self) -> usize {
        if self.is_tagged() {
            TAGGED_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// The bytes behind the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Sets the source MAC address.
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Writes the tag (or none) and the payload Ethertype. The buffer must hold 18 bytes
    /// when a tag is given.
    pub fn set_vlan_and_ethertype(&mut self, vlan: Option<VlanTag>, ethertype: EtherType) {
        let b = self.buffer.as_mut();
        match vlan {
            Some(tag) => {
                b[field::ETHERTYPE].copy_from_slice(&EtherType::VLAN.0.to_be_bytes());
                b[field::VLAN_TCI].copy_from_slice(&tag.tci().to_be_bytes());
                b[field::INNER_ETHERTYPE].copy_from_slice(&ethertype.0.to_be_bytes());
            }
            None => b[field::ETHERTYPE].copy_from_slice(&ethertype.0.to_be_bytes()),
        }
    }

    /// The bytes behind the header, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

/// The fields of an Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source MAC address.
    pub src_addr: EthernetAddress,
    /// Destination MAC address.
    pub dst_addr: EthernetAddress,
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// The Ethertype of the payload.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr, ParseError> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            vlan: frame.vlan(),
            ethertype: frame.ethertype(),
        })
    }

    /// Length of the header this repr emits.
    pub const fn header_len(&self) -> usize {
        if self.vlan.is_some() {
            TAGGED_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Writes the header. The frame's buffer must hold [`EthernetRepr::header_len`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_vlan_and_ethertype(self.vlan, self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Ethernet header of rc_pingpong.pcap frame 19, then the first IPv4 bytes.
    static FRAME: [u8; 16] = [
        0x52, 0x54, 0x00, 0x77, 0x00, 0x03, 0x52, 0x54, 0x00, 0x77, 0x00, 0x02, 0x08, 0x00, 0x45,
        0x00,
    ];

    /// The same header with an 802.1Q tag: PCP 3, DEI 0, VID 100.
    static TAGGED: [u8; 20] = [
        0x52, 0x54, 0x00, 0x77, 0x00, 0x03, 0x52, 0x54, 0x00, 0x77, 0x00, 0x02, 0x81, 0x00, 0x60,
        0x64, 0x08, 0x00, 0x45, 0x00,
    ];

    const DST: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x77, 0x00, 0x03]);
    const SRC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x77, 0x00, 0x02]);

    fn repr(vlan: Option<VlanTag>) -> EthernetRepr {
        EthernetRepr {
            src_addr: SRC,
            dst_addr: DST,
            vlan,
            ethertype: EtherType::IPV4,
        }
    }

    const TAG: VlanTag = VlanTag {
        pcp: 3,
        dei: false,
        vid: 100,
    };

    #[test]
    fn deconstruct() {
        let frame = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(frame.dst_addr(), DST);
        assert_eq!(frame.src_addr(), SRC);
        assert_eq!(frame.vlan(), None);
        assert_eq!(frame.ethertype(), EtherType::IPV4);
        assert_eq!(frame.payload(), &[0x45, 0x00]);

        let tagged = EthernetFrame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(tagged.vlan(), Some(TAG));
        assert_eq!(tagged.ethertype(), EtherType::IPV4);
        assert_eq!(tagged.header_len(), 18);
        assert_eq!(tagged.payload(), &[0x45, 0x00]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 16];
        let mut frame = EthernetFrame::new_unchecked(&mut bytes[..]);
        frame.set_dst_addr(DST);
        frame.set_src_addr(SRC);
        frame.set_vlan_and_ethertype(None, EtherType::IPV4);
        frame.payload_mut().copy_from_slice(&[0x45, 0x00]);
        assert_eq!(bytes, FRAME);

        let mut bytes = [0xa5u8; 20];
        let mut frame = EthernetFrame::new_unchecked(&mut bytes[..]);
        frame.set_dst_addr(DST);
        frame.set_src_addr(SRC);
        frame.set_vlan_and_ethertype(Some(TAG), EtherType::IPV4);
        frame.payload_mut().copy_from_slice(&[0x45, 0x00]);
        assert_eq!(bytes, TAGGED);
    }

    #[test]
    fn parse() {
        let frame = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&frame), Ok(repr(None)));
        let frame = EthernetFrame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&frame), Ok(repr(Some(TAG))));
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 14];
        repr(None).emit(&mut EthernetFrame::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, FRAME[..14]);
        let mut bytes = [0xa5u8; 18];
        repr(Some(TAG)).emit(&mut EthernetFrame::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, TAGGED[..18]);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            EthernetFrame::new_checked(&FRAME[..13]).unwrap_err(),
            ParseError::Truncated {
                layer: Layer::Ethernet,
                needed: 14,
                available: 13
            }
        );
        assert_eq!(
            EthernetFrame::new_checked(&TAGGED[..17]).unwrap_err(),
            ParseError::Truncated {
                layer: Layer::Vlan,
                needed: 18,
                available: 17
            }
        );
    }

    #[test]
    fn tci_round_trips() {
        for tci in [0u16, 0xffff, 0x6064, 0x1001] {
            assert_eq!(VlanTag::from_tci(tci).tci(), tci);
        }
    }
}
