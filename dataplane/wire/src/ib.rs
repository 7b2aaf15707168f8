//! The InfiniBand transport part of a RoCEv2 packet: the UDP payload, from the BTH to the
//! ICRC. This layer knows nothing of Ethernet, IP or UDP.
//!
//! ```text
//! | BTH (12) | extension headers the opcode names | payload | pad (0..3) | ICRC (4) |
//! ```

use core::fmt;

use crate::ICRC_LEN;
use crate::aeth::{AethPacket, AethRepr};
use crate::atomic_ack_eth::{AtomicAckEth, AtomicAckEthRepr};
use crate::atomic_eth::{AtomicEth, AtomicEthRepr};
use crate::bth::{self, BthPacket, BthRepr};
use crate::deth::{DethPacket, DethRepr};
use crate::error::{EmitError, Layer, ParseError};
use crate::ieth::{Ieth, IethRepr};
use crate::immdt::{ImmDt, ImmDtRepr};
use crate::opcode::{ExtHeader, OpcodeInfo};
use crate::rdeth::{RdethPacket, RdethRepr};
use crate::reth::{Reth, RethRepr};

/// The headers of the IB transport part of a RoCEv2 packet: the BTH and one `Option` per
/// extension header. Which extension headers are present is decided by the opcode
/// ([`crate::Opcode::info`]); [`IbRepr::parse`] fills exactly those, and [`IbRepr::emit`]
/// refuses a repr that has a header its opcode does not carry, or lacks one it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IbRepr {
    /// Base transport header.
    pub bth: BthRepr,
    /// RD: end-to-end context.
    pub rdeth: Option<RdethRepr>,
    /// UD/RD: Q_Key and source QP.
    pub deth: Option<DethRepr>,
    /// RDMA WRITE First/Only and READ requests: remote buffer.
    pub reth: Option<RethRepr>,
    /// CompareSwap/FetchAdd: target and operands.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// Acknowledges and read responses (first, last, only): syndrome and MSN.
    pub aeth: Option<AethRepr>,
    /// Atomic acknowledge: the original value.
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// "With immediate" operations: the immediate data.
    pub immdt: Option<ImmDtRepr>,
    /// "With invalidate" sends: the R_Key to invalidate.
    pub ieth: Option<IethRepr>,
}

impl IbRepr {
    /// A repr with this BTH and no extension header; set the ones the opcode carries.
    pub const fn new(bth: BthRepr) -> IbRepr {
        IbRepr {
            bth,
            rdeth: None,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
        }
    }

    /// What the opcode table says about this packet's opcode.
    pub fn info(&self) -> &'static OpcodeInfo {
        self.bth.opcode.info()
    }

    /// Length of the BTH and the extension headers: the payload's offset.
    pub fn header_len(&self) -> usize {
        self.info().header_len()
    }

    /// The pad that brings a payload of `payload_len` bytes to a 4-byte boundary.
    pub const fn pad_for(payload_len: usize) -> u8 {
        ((4 - payload_len % 4) % 4) as u8
    }

    /// Length of the whole IB part (headers, payload, pad, ICRC) for `payload_len` bytes of
    /// payload: the UDP payload length.
    pub fn ib_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len + usize::from(IbRepr::pad_for(payload_len)) + ICRC_LEN
    }

    /// Parses the IB part of a packet (the whole UDP payload, BTH to ICRC) into the headers
    /// and the payload, with pad and ICRC stripped. The ICRC is not checked here: it covers
    /// the IP and UDP headers too (see [`crate::Frame::parse`] and [`crate::icrc`]).
    ///
    /// Errors: truncated BTH or extension headers; TVer ≠ 0; a reserved or unsupported
    /// opcode; a length that is not a multiple of 4 (IBTA 9.2); a pad count larger than the
    /// bytes after the headers; bytes after the headers of an opcode that carries no
    /// payload.
    #[inline]
    pub fn parse(data: &[u8]) -> Result<(IbRepr, &[u8]), ParseError> {
        let bth = BthRepr::parse(&BthPacket::new_checked(data)?)?;
        let info = bth.opcode.info();
        if !info.is_supported() {
            return Err(ParseError::UnsupportedOpcode(bth.opcode.0));
        }
        let header_len = info.header_len();
        let needed = header_len + ICRC_LEN;
        if data.len() < needed {
            return Err(ParseError::Truncated {
                layer: Layer::ExtHeaders,
                needed,
                available: data.len(),
            });
        }
        if !data.len().is_multiple_of(4) {
            return Err(ParseError::Misaligned(data.len()));
        }
        // Payload and pad lie between the headers and the ICRC.
        let between = data.len() - needed;
        if between > 0 && !info.has_payload() {
            return Err(ParseError::UnexpectedPayload {
                opcode: bth.opcode,
                len: between,
            });
        }
        let pad = usize::from(bth.pad_count);
        if pad > between {
            return Err(ParseError::PadCount {
                pad: bth.pad_count,
                available: between,
            });
        }
        let mut repr = IbRepr::new(bth);
        for &header in info.headers() {
            // NOTE: `offset` is Some for every header in `headers()`, and the bytes up to
            // `header_len` were checked above; the views check again and cannot fail.
            let at = info.offset(header).unwrap_or(bth::HEADER_LEN);
            let bytes = &data[at..header_len];
            match header {
                ExtHeader::Rdeth => {
                    repr.rdeth = Some(RdethRepr::parse(&RdethPacket::new_checked(bytes)?));
                }
                ExtHeader::Deth => {
                    repr.deth = Some(DethRepr::parse(&DethPacket::new_checked(bytes)?));
                }
                ExtHeader::Reth => {
                    repr.reth = Some(RethRepr::parse(Reth::new_checked(bytes)?));
                }
                ExtHeader::AtomicEth => {
                    repr.atomic_eth = Some(AtomicEthRepr::parse(AtomicEth::new_checked(bytes)?));
                }
                ExtHeader::Aeth => {
                    repr.aeth = Some(AethRepr::parse(&AethPacket::new_checked(bytes)?));
                }
                ExtHeader::AtomicAckEth => {
                    repr.atomic_ack_eth =
                        Some(AtomicAckEthRepr::parse(AtomicAckEth::new_checked(bytes)?));
                }
                ExtHeader::ImmDt => {
                    repr.immdt = Some(ImmDtRepr::parse(ImmDt::new_checked(bytes)?));
                }
                ExtHeader::Ieth => {
                    repr.ieth = Some(IethRepr::parse(Ieth::new_checked(bytes)?));
                }
                // Reserved: ignored on receive (IBTA A17.9.3).
                ExtHeader::CnpReserved => {}
            }
        }
        let payload = &data[header_len..header_len + between - pad];
        Ok((repr, payload))
    }

    /// Checks that the repr has exactly the extension headers its opcode carries.
    fn check_headers(&self, info: &OpcodeInfo) -> Result<(), EmitError> {
        let present = [
            (ExtHeader::Rdeth, self.rdeth.is_some()),
            (ExtHeader::Deth, self.deth.is_some()),
            (ExtHeader::Reth, self.reth.is_some()),
            (ExtHeader::AtomicEth, self.atomic_eth.is_some()),
            (ExtHeader::Aeth, self.aeth.is_some()),
            (ExtHeader::AtomicAckEth, self.atomic_ack_eth.is_some()),
            (ExtHeader::ImmDt, self.immdt.is_some()),
            (ExtHeader::Ieth, self.ieth.is_some()),
        ];
        for (header, is_present) in present {
            match (info.carries(header), is_present) {
                (true, false) => {
                    return Err(EmitError::MissingHeader {
                        opcode: self.bth.opcode,
                        header,
                    });
                }
                (false, true) => {
                    return Err(EmitError::UnexpectedHeader {
                        opcode: self.bth.opcode,
                        header,
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Writes the BTH and the extension headers at the start of `buf` and returns their
    /// length; the caller writes the `payload_len` bytes of payload right behind them (for
    /// example straight from a memory region) and hands the frame to
    /// [`crate::FrameRepr::emit`], which adds pad and ICRC.
    ///
    /// The BTH pad count is derived from `payload_len`; `self.bth.pad_count` is ignored.
    /// Reserved fields are written as zero; so are the 16 reserved bytes of a CNP.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, EmitError> {
        let info = self.info();
        if !info.is_supported() {
            return Err(EmitError::UnsupportedOpcode(self.bth.opcode.0));
        }
        if payload_len > 0 && !info.has_payload() {
            return Err(EmitError::UnexpectedPayload {
                opcode: self.bth.opcode,
                len: payload_len,
            });
        }
        self.check_headers(info)?;
        let header_len = info.header_len();
        if buf.len() < header_len {
            return Err(EmitError::BufferTooSmall {
                needed: header_len,
                available: buf.len(),
            });
        }
        let buf = &mut buf[..header_len];
        let mut bth = self.bth;
        bth.pad_count = IbRepr::pad_for(payload_len);
        bth.emit(&mut BthPacket::new_unchecked(&mut buf[..bth::HEADER_LEN]));
        for &header in info.headers() {
            let at = info.offset(header).unwrap_or(bth::HEADER_LEN);
            let bytes = &mut buf[at..at + header.len()];
            // The views cannot fail: `bytes` has exactly the header's length.
            let short = |_| EmitError::BufferTooSmall {
                needed: header_len,
                available: header_len,
            };
            match header {
                ExtHeader::Rdeth => {
                    if let Some(r) = &self.rdeth {
                        r.emit(&mut RdethPacket::new_unchecked(bytes));
                    }
                }
                ExtHeader::Deth => {
                    if let Some(r) = &self.deth {
                        r.emit(&mut DethPacket::new_unchecked(bytes));
                    }
                }
                ExtHeader::Reth => {
                    if let Some(r) = &self.reth {
                        r.emit(Reth::new_checked_mut(bytes).map_err(short)?);
                    }
                }
                ExtHeader::AtomicEth => {
                    if let Some(r) = &self.atomic_eth {
                        r.emit(AtomicEth::new_checked_mut(bytes).map_err(short)?);
                    }
                }
                ExtHeader::Aeth => {
                    if let Some(r) = &self.aeth {
                        r.emit(&mut AethPacket::new_unchecked(bytes));
                    }
                }
                ExtHeader::AtomicAckEth => {
                    if let Some(r) = &self.atomic_ack_eth {
                        r.emit(AtomicAckEth::new_checked_mut(bytes).map_err(short)?);
                    }
                }
                ExtHeader::ImmDt => {
                    if let Some(r) = &self.immdt {
                        r.emit(ImmDt::new_checked_mut(bytes).map_err(short)?);
                    }
                }
                ExtHeader::Ieth => {
                    if let Some(r) = &self.ieth {
                        r.emit(Ieth::new_checked_mut(bytes).map_err(short)?);
                    }
                }
                ExtHeader::CnpReserved => bytes.fill(0),
            }
        }
        Ok(header_len)
    }
}

impl fmt::Display for IbRepr {
    /// One line: opcode, destination QP, PSN, ack request, then the key fields of each
    /// extension header, e.g.
    /// `RC_RDMA_READ_REQUEST qp=0x000016 psn=0xc21798 ack=1 reth(va=0x55ee3ce7b000 rkey=0x00000776 len=2050)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.bth;
        write!(
            f,
            "{} qp={} psn={} ack={}",
            b.opcode,
            b.dest_qp,
            b.psn,
            u8::from(b.ack_request)
        )?;
        if b.solicited_event {
            f.write_str(" se")?;
        }
        if b.fecn {
            f.write_str(" fecn")?;
        }
        if b.becn {
            f.write_str(" becn")?;
        }
        if b.pad_count != 0 {
            write!(f, " pad={}", b.pad_count)?;
        }
        if let Some(r) = &self.rdeth {
            write!(f, " rdeth(eec={:#08x})", r.ee_context)?;
        }
        if let Some(r) = &self.deth {
            write!(f, " deth(qkey={} src_qp={})", r.qkey, r.src_qp)?;
        }
        if let Some(r) = &self.reth {
            write!(f, " reth(va={:#x} rkey={} len={})", r.va, r.rkey, r.dma_len)?;
        }
        if let Some(r) = &self.atomic_eth {
            write!(
                f,
                " atomic(va={:#x} rkey={} swap_add={:#x} compare={:#x})",
                r.va, r.rkey, r.swap_add, r.compare
            )?;
        }
        if let Some(r) = &self.aeth {
            write!(f, " aeth({} msn={})", r.syndrome, r.msn)?;
        }
        if let Some(r) = &self.atomic_ack_eth {
            write!(f, " atomic_ack(orig={:#x})", r.orig_data)?;
        }
        if let Some(r) = &self.immdt {
            write!(f, " imm={:#010x}", r.data)?;
        }
        if let Some(r) = &self.ieth {
            write!(f, " ieth(rkey={})", r.rkey)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aeth::{NakCode, Syndrome};
    use crate::identifiers::{Qkey, Qpn, Rkey};
    use crate::opcode::{OPCODE_TABLE, Opcode};
    use crate::psn::Psn;
    use std::format;
    use std::vec;
    use std::vec::Vec;

    /// The IB part of read_bw_multipkt.pcap frame 22: RDMA READ Request with RETH.
    static READ_REQUEST: [u8; 32] = [
        0x0c, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x16, 0x80, 0xc2, 0x17, 0x98, // BTH
        0x00, 0x00, 0x55, 0xee, 0x3c, 0xe7, 0xb0, 0x00, 0x00, 0x00, 0x07, 0x76, 0x00, 0x00, 0x08,
        0x02, // RETH
        0xc0, 0x9d, 0x75, 0x54, // ICRC
    ];

    /// The IB part of write_bw_multipkt.pcap frame 24: RDMA WRITE Last, 2 payload bytes,
    /// pad 2.
    static WRITE_LAST: [u8; 20] = [
        0x08, 0x20, 0xff, 0xff, 0x00, 0x00, 0x00, 0x14, 0x80, 0x01, 0x73, 0x48, // BTH
        0xfb, 0x62, 0x00, 0x00, // payload + pad
        0xe0, 0x97, 0xa4, 0x03, // ICRC
    ];

    fn read_request() -> IbRepr {
        let mut bth = BthRepr::new(
            Opcode::RC_RDMA_READ_REQUEST,
            Qpn::new(0x16),
            Psn::new(0xc21798),
        );
        bth.ack_request = true;
        IbRepr {
            reth: Some(RethRepr {
                va: 0x0000_55ee_3ce7_b000,
                rkey: Rkey(0x776),
                dma_len: 2050,
            }),
            ..IbRepr::new(bth)
        }
    }

    #[test]
    fn parse_read_request() {
        let (repr, payload) = IbRepr::parse(&READ_REQUEST).unwrap();
        assert_eq!(repr, read_request());
        assert!(payload.is_empty());
    }

    #[test]
    fn parse_strips_pad_and_icrc() {
        let (repr, payload) = IbRepr::parse(&WRITE_LAST).unwrap();
        assert_eq!(repr.bth.opcode, Opcode::RC_RDMA_WRITE_LAST);
        assert_eq!(repr.bth.pad_count, 2);
        assert_eq!(payload, &[0xfb, 0x62]);
    }

    #[test]
    fn emit_read_request() {
        let mut buf = [0xa5u8; 32];
        assert_eq!(read_request().emit(&mut buf, 0), Ok(28));
        assert_eq!(buf[..28], READ_REQUEST[..28]);
        assert_eq!(buf[28..], [0xa5; 4], "emit writes headers only");
    }

    #[test]
    fn emit_derives_pad_count_from_payload_length() {
        let (repr, payload) = IbRepr::parse(&WRITE_LAST).unwrap();
        let mut buf = [0xa5u8; 12];
        let mut other = repr;
        other.bth.pad_count = 0; // ignored
        assert_eq!(other.emit(&mut buf, payload.len()), Ok(12));
        assert_eq!(buf, WRITE_LAST[..12]);
        assert_eq!(IbRepr::pad_for(0), 0);
        assert_eq!(IbRepr::pad_for(1), 3);
        assert_eq!(IbRepr::pad_for(2050), 2);
        assert_eq!(IbRepr::pad_for(1024), 0);
        assert_eq!(repr.ib_len(2), 20);
    }

    /// A repr for `opcode` with sample values in every header the opcode carries.
    fn sample(opcode: Opcode, seed: u32) -> IbRepr {
        let info = opcode.info();
        let mut bth = BthRepr::new(
            opcode,
            Qpn::new(0x00ab_cd00 ^ seed),
            Psn::new(0xfffffe + seed),
        );
        bth.ack_request = seed % 2 == 1;
        bth.solicited_event = seed % 3 == 1;
        bth.fecn = seed % 5 == 1;
        let mut r = IbRepr::new(bth);
        let s = u64::from(seed);
        for &h in info.headers() {
            match h {
                ExtHeader::Rdeth => {
                    r.rdeth = Some(RdethRepr {
                        ee_context: 0x12_3456 ^ seed,
                    })
                }
                ExtHeader::Deth => {
                    r.deth = Some(DethRepr {
                        qkey: Qkey(0x8001_0000 ^ seed),
                        src_qp: Qpn::new(seed),
                    })
                }
                ExtHeader::Reth => {
                    r.reth = Some(RethRepr {
                        va: 0x7fff_0000_1000 ^ s,
                        rkey: Rkey(0x1234 ^ seed),
                        dma_len: 4096 + seed,
                    })
                }
                ExtHeader::AtomicEth => {
                    r.atomic_eth = Some(AtomicEthRepr {
                        va: 0x7fff_0000_2000 ^ s,
                        rkey: Rkey(seed),
                        swap_add: u64::MAX - s,
                        compare: s << 32,
                    })
                }
                ExtHeader::Aeth => {
                    r.aeth = Some(AethRepr {
                        syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
                        msn: 0xff_fff0 + seed,
                    })
                }
                ExtHeader::AtomicAckEth => {
                    r.atomic_ack_eth = Some(AtomicAckEthRepr {
                        orig_data: 0x0102_0304_0506_0708 ^ s,
                    })
                }
                ExtHeader::ImmDt => {
                    r.immdt = Some(ImmDtRepr {
                        data: 0xdead_beef ^ seed,
                    })
                }
                ExtHeader::Ieth => {
                    r.ieth = Some(IethRepr {
                        rkey: Rkey(0xcafe ^ seed),
                    })
                }
                ExtHeader::CnpReserved => {}
            }
        }
        r
    }

    #[test]
    fn every_supported_opcode_round_trips_with_every_pad() {
        let mut checked = 0;
        for info in OPCODE_TABLE.iter().filter(|i| i.is_supported()) {
            let lens: &[usize] = if info.has_payload() {
                &[0, 1, 2, 3, 4, 5, 1024]
            } else {
                &[0]
            };
            for (seed, &len) in lens.iter().enumerate() {
                let repr = sample(info.opcode, seed as u32);
                let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
                let mut buf = vec![0xa5u8; repr.ib_len(len)];
                let hl = repr.emit(&mut buf, len).unwrap();
                assert_eq!(hl, info.header_len());
                buf[hl..hl + len].copy_from_slice(&payload);
                let pad = usize::from(IbRepr::pad_for(len));
                buf[hl + len..hl + len + pad].fill(0);
                let (parsed, parsed_payload) = IbRepr::parse(&buf).unwrap();
                let mut expected = repr;
                expected.bth.pad_count = pad as u8;
                assert_eq!(parsed, expected, "{}", info.name);
                assert_eq!(parsed_payload, &payload[..]);
                checked += 1;
            }
        }
        assert!(checked > 300);
    }

    #[test]
    fn malformed_input_is_an_error_never_a_panic() {
        // Every prefix of a valid packet fails cleanly.
        for n in 0..READ_REQUEST.len() {
            assert!(IbRepr::parse(&READ_REQUEST[..n]).is_err(), "{n}");
        }
        assert_eq!(
            IbRepr::parse(&READ_REQUEST[..11]),
            Err(ParseError::Truncated {
                layer: Layer::Bth,
                needed: 12,
                available: 11
            })
        );
        assert_eq!(
            IbRepr::parse(&READ_REQUEST[..28]),
            Err(ParseError::Truncated {
                layer: Layer::ExtHeaders,
                needed: 32,
                available: 28
            })
        );
        let mut b = WRITE_LAST;
        b[1] = 0x22; // TVer 2
        assert_eq!(IbRepr::parse(&b), Err(ParseError::TransportVersion(2)));
        let mut b = WRITE_LAST;
        b[0] = 0x15; // reserved RC opcode
        assert_eq!(IbRepr::parse(&b), Err(ParseError::UnsupportedOpcode(0x15)));
        b[0] = 0xa0; // XRC
        assert_eq!(IbRepr::parse(&b), Err(ParseError::UnsupportedOpcode(0xa0)));
        assert_eq!(
            IbRepr::parse(&WRITE_LAST[..19]),
            Err(ParseError::Misaligned(19))
        );
        // Pad count 3 but only... pad larger than the bytes between headers and ICRC.
        let mut b = READ_REQUEST;
        b[0] = Opcode::RC_SEND_ONLY.0;
        b[1] = 0x30;
        // SEND Only: 12-byte BTH, 16 bytes between it and the ICRC, pad 3: fine.
        assert_eq!(IbRepr::parse(&b).unwrap().1.len(), 13);
        let short = [0x04, 0x30, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 1, 1, 2, 3, 4];
        assert_eq!(
            IbRepr::parse(&short),
            Err(ParseError::PadCount {
                pad: 3,
                available: 0
            })
        );
        // An ACK with four stray bytes after the AETH.
        let ack = [
            0x11, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 1, 0x1f, 0, 0, 1, 9, 9, 9, 9, 1, 2, 3, 4,
        ];
        assert_eq!(
            IbRepr::parse(&ack),
            Err(ParseError::UnexpectedPayload {
                opcode: Opcode::RC_ACKNOWLEDGE,
                len: 4
            })
        );
        assert!(IbRepr::parse(&ack[..20]).is_ok());
    }

    #[test]
    fn emit_refuses_inconsistent_reprs() {
        let mut buf = [0u8; 64];
        let mut r = read_request();
        r.reth = None;
        assert_eq!(
            r.emit(&mut buf, 0),
            Err(EmitError::MissingHeader {
                opcode: Opcode::RC_RDMA_READ_REQUEST,
                header: ExtHeader::Reth
            })
        );
        let mut r = read_request();
        r.immdt = Some(ImmDtRepr { data: 1 });
        assert_eq!(
            r.emit(&mut buf, 0),
            Err(EmitError::UnexpectedHeader {
                opcode: Opcode::RC_RDMA_READ_REQUEST,
                header: ExtHeader::ImmDt
            })
        );
        assert_eq!(
            read_request().emit(&mut buf, 1),
            Err(EmitError::UnexpectedPayload {
                opcode: Opcode::RC_RDMA_READ_REQUEST,
                len: 1
            })
        );
        assert_eq!(
            read_request().emit(&mut buf[..27], 0),
            Err(EmitError::BufferTooSmall {
                needed: 28,
                available: 27
            })
        );
        let r = IbRepr::new(BthRepr::new(Opcode(0x15), Qpn::new(1), Psn::ZERO));
        assert_eq!(r.emit(&mut buf, 0), Err(EmitError::UnsupportedOpcode(0x15)));
    }

    #[test]
    fn display_shows_key_fields() {
        assert_eq!(
            format!("{}", read_request()),
            "RC_RDMA_READ_REQUEST qp=0x000016 psn=0xc21798 ack=1 \
             reth(va=0x55ee3ce7b000 rkey=0x00000776 len=2050)"
        );
        let (w, _) = IbRepr::parse(&WRITE_LAST).unwrap();
        assert_eq!(
            format!("{w}"),
            "RC_RDMA_WRITE_LAST qp=0x000014 psn=0x017348 ack=1 pad=2"
        );
        let s = format!("{}", sample(Opcode::RC_ATOMIC_ACKNOWLEDGE, 0));
        assert!(
            s.contains("aeth(NAK remote access error msn=16777200)"),
            "{s}"
        );
        assert!(s.contains("atomic_ack(orig=0x102030405060708)"), "{s}");
        let s = format!("{}", sample(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, 1));
        assert!(
            s.contains("deth(qkey=0x80010001 src_qp=0x000001) imm=0xdeadbeee"),
            "{s}"
        );
    }
}
