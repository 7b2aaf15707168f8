//! The sender's fast path: the headers of one path written once, then copied per frame.

use super::{FrameRepr, IpRepr, MAX_HEADER_LEN};
use crate::checksum;
use crate::error::EmitError;
use crate::ipv4;
use crate::udp;

/// The headers of a [`FrameRepr`] written once, for a sender that sends many frames along
/// one path: [`FrameTemplate::emit`] copies them and fills in the lengths, the IPv4
/// identification and header checksum, the pad and the ICRC. What it writes is byte for
/// byte what [`FrameRepr::emit`] writes for the same repr with that identification; it
/// only skips building every header field by field for every frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTemplate {
    repr: FrameRepr,
    bytes: [u8; MAX_HEADER_LEN],
    /// IPv4: the one's complement sum of the header with total length, identification and
    /// checksum zero.
    ip_sum: u64,
}

impl FrameTemplate {
    /// The template of `repr` (its IPv4 identification is ignored: each frame gives its
    /// own).
    pub fn new(repr: FrameRepr) -> FrameTemplate {
        let mut bytes = [0u8; MAX_HEADER_LEN];
        let mut repr0 = repr;
        if let IpRepr::Ipv4(r) = &mut repr0.ip {
            r.identification = 0;
        }
        let header_len = repr.header_len();
        repr0.write_headers(&mut bytes[..header_len], udp::HEADER_LEN);
        let ip_start = repr.ethernet.header_len();
        let mut ip_sum = 0;
        if let IpRepr::Ipv4(_) = repr.ip {
            let ip = &mut bytes[ip_start..ip_start + ipv4::HEADER_LEN];
            // Total length (2..4), identification (4..6), checksum (10..12): per frame.
            ip[2..6].fill(0);
            ip[10..12].fill(0);
            ip_sum = checksum::sum(0, ip);
        }
        FrameTemplate {
            repr,
            bytes,
            ip_sum,
        }
    }

    /// The envelope it was made from.
    pub const fn repr(&self) -> &FrameRepr {
        &self.repr
    }

    /// Completes a frame as [`FrameRepr::emit`] does, with `identification` as the IPv4
    /// identification (unused for IPv6).
    #[inline]
    pub fn emit(
        &self,
        frame: &mut [u8],
        ib_len: usize,
        identification: u16,
    ) -> Result<usize, EmitError> {
        let sizes = self.repr.sizes(frame, ib_len)?;
        let frame = &mut frame[..sizes.total];
        frame[..sizes.udp_start + udp::HEADER_LEN]
            .copy_from_slice(&self.bytes[..sizes.udp_start + udp::HEADER_LEN]);
        let ip = sizes.ip_start;
        match self.repr.ip {
            IpRepr::Ipv4(_) => {
                let total = (ipv4::HEADER_LEN + sizes.udp_len) as u16;
                frame[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
                frame[ip + 4..ip + 6].copy_from_slice(&identification.to_be_bytes());
                let sum = self.ip_sum + u64::from(total) + u64::from(identification);
                frame[ip + 10..ip + 12].copy_from_slice(&checksum::finish(sum).to_be_bytes());
            }
            IpRepr::Ipv6(_) => {
                frame[ip + 4..ip + 6].copy_from_slice(&(sizes.udp_len as u16).to_be_bytes());
            }
        }
        let udp = sizes.udp_start;
        frame[udp + 4..udp + 6].copy_from_slice(&(sizes.udp_len as u16).to_be_bytes());
        self.repr.finish(frame, &sizes);
        Ok(sizes.total)
    }
}
