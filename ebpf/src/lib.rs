//! The XDP program that steers RoCEv2 frames (UDP destination port 4791) into AF_XDP
//! sockets, compiled from C (`xdp/xroce_xdp.c`) with `clang -target bpf` at build time and
//! embedded here as an ELF object, together with the names and indices the loader needs.
//!
//! This crate never loads, attaches or talks to the kernel: it is bytes and names. The
//! engine (`xroce_engine::xdp`) loads the object with aya, attaches it and reads its maps.
//!
//! What the program does, per frame: Ethernet, at most one 802.1Q/802.1ad tag, IPv4 (any
//! IHL) or IPv6 (fixed header only), UDP; destination port 4791 goes to
//! `bpf_redirect_map(&xsks, rx_queue_index, XDP_PASS)`, so a queue with no AF_XDP socket
//! passes the frame to the kernel; everything else passes. It counts every verdict in
//! exactly one [`Counter`] of a per-CPU array.

/// Name of the XDP program (the C function) inside [`object`].
pub const PROGRAM: &str = "xroce_xdp";
/// Name of the `BPF_MAP_TYPE_XSKMAP` that maps a receive queue index to an AF_XDP socket.
pub const XSKS_MAP: &str = "xsks";
/// Name of the `BPF_MAP_TYPE_PERCPU_ARRAY` of `u64` verdict counters, indexed by [`Counter`].
pub const COUNTERS_MAP: &str = "counters";
/// Slots in [`XSKS_MAP`] unless the loader resizes it: queue ids `0..64`.
pub const XSKS_DEFAULT_ENTRIES: u32 = 64;
/// RoCEv2's UDP destination port (IBTA Annex A17).
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// The object bytes with the alignment of an ELF64 header, whatever `include_bytes!` gives.
#[repr(C, align(8))]
struct Aligned<B: ?Sized> {
    bytes: B,
}

static OBJECT: &Aligned<[u8]> = &Aligned {
    bytes: *include_bytes!(concat!(env!("OUT_DIR"), "/xroce_xdp.o")),
};

/// The compiled XDP program: a BPF ELF object with BTF, holding the program [`PROGRAM`] and
/// the maps [`XSKS_MAP`] and [`COUNTERS_MAP`]. 8-byte aligned.
pub fn object() -> &'static [u8] {
    &OBJECT.bytes
}

/// The program's verdict counters: every frame it sees moves exactly one of them.
///
/// The discriminant is the index in [`COUNTERS_MAP`]; it matches `enum xroce_counter` in
/// `xdp/xroce_xdp.h` (a unit test checks that).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Counter {
    /// UDP 4791, redirected into the AF_XDP socket of the receiving queue.
    Redirected = 0,
    /// UDP 4791, but no AF_XDP socket serves the receiving queue: passed to the kernel.
    PassNoSocket = 1,
    /// Not IPv4 or IPv6 (ARP, LLDP, ...): passed.
    PassNotIp = 2,
    /// IPv4/IPv6 but not UDP (ICMP, ND, TCP, IPv6 extension headers): passed.
    PassNotUdp = 3,
    /// UDP to another port: passed.
    PassOtherPort = 4,
    /// IPv4 fragment: passed for the kernel to reassemble.
    PassFragment = 5,
    /// Headers truncated or inconsistent (IHL below 5, IP version mismatch): passed.
    PassMalformed = 6,
}

impl Counter {
    /// Every counter, in index order.
    pub const ALL: [Counter; 7] = [
        Counter::Redirected,
        Counter::PassNoSocket,
        Counter::PassNotIp,
        Counter::PassNotUdp,
        Counter::PassOtherPort,
        Counter::PassFragment,
        Counter::PassMalformed,
    ];

    /// Number of counters (the size of [`COUNTERS_MAP`]).
    pub const COUNT: usize = Self::ALL.len();

    /// Index of this counter in [`COUNTERS_MAP`].
    pub const fn index(self) -> u32 {
        self as u32
    }

    /// A stable snake_case name for reports and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Counter::Redirected => "redirected",
            Counter::PassNoSocket => "pass_no_socket",
            Counter::PassNotIp => "pass_not_ip",
            Counter::PassNotUdp => "pass_not_udp",
            Counter::PassOtherPort => "pass_other_port",
            Counter::PassFragment => "pass_fragment",
            Counter::PassMalformed => "pass_malformed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_is_a_bpf_elf_with_the_program_and_maps() {
        let obj = object();
        assert_eq!(&obj[..4], b"\x7fELF", "not an ELF object");
        assert_eq!(obj[4], 2, "not ELF64");
        // e_machine at offset 18: EM_BPF = 247, in the object's byte order.
        let machine = if obj[5] == 1 {
            u16::from_le_bytes([obj[18], obj[19]])
        } else {
            u16::from_be_bytes([obj[18], obj[19]])
        };
        assert_eq!(machine, 247, "not a BPF object");
        assert_eq!(obj.as_ptr() as usize % 8, 0, "object is not 8-byte aligned");
        for name in [PROGRAM, XSKS_MAP, COUNTERS_MAP, "license", ".BTF"] {
            assert!(
                obj.windows(name.len() + 1)
                    .any(|w| &w[..name.len()] == name.as_bytes() && w[name.len()] == 0),
                "{name} missing from the object's string tables"
            );
        }
    }

    #[test]
    fn counter_indices_match_the_c_header() {
        let header = include_str!("../xdp/xroce_xdp.h");
        let mut from_c = Vec::new();
        for line in header.lines() {
            let line = line.trim();
            let Some(rest) = line.strip_prefix("XROCE_CNT_") else {
                continue;
            };
            let Some((name, value)) = rest.split_once('=') else {
                continue;
            };
            let value: u32 = value
                .trim()
                .trim_end_matches(',')
                .parse()
                .expect("a number");
            from_c.push((name.trim().to_ascii_lowercase(), value));
        }
        let count = from_c.pop().expect("XROCE_CNT_COUNT comes last");
        assert_eq!(count, ("count".to_owned(), Counter::COUNT as u32));
        let from_rust: Vec<(String, u32)> = Counter::ALL
            .iter()
            .map(|c| (c.name().to_owned(), c.index()))
            .collect();
        assert_eq!(from_c, from_rust);
    }
}
