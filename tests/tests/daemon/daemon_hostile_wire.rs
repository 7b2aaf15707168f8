//! Hostile frames on the wire: from an AF_PACKET socket in the peer's namespace, frames to
//! UDP 4791 aimed at live RC queue pairs of a daemon (their real QP numbers and PSNs, the
//! real addresses of the peer and the daemon), built with `xroce-wire` and then broken:
//! bad ICRC, truncated headers, unknown QPNs, wrong P_Key, wrong destination GID, PSNs
//! outside the window, RETH lengths beyond the region or beyond the packet, payloads
//! beyond the path MTU, forged rkeys (random ones, and the real rkey of another
//! application's region).
//!
//! Asserted: the daemon keeps running; each class lands in the counter it should, exactly
//! once per frame; the queue pairs a fatal error hit go to ERR and nothing else does; the
//! target region keeps its bytes where forged requests aimed; the bytes around it (the
//! rest of its pages, which the daemon maps too) never change; and afterwards the healthy
//! queue pair carries WRITE, READ and SEND with every byte checked.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use verbs_shm::client::{Access, Context, Mr, QpInit, QpType, RecvWr, SendOp, SendWr, Sge};
use xroce_lab::daemons::{TwoHosts, connect, counter, wait_completions};
use xroce_lab::{Family, Lab, Side, require_root};
use xroce_wire::{
    AtomicEthRepr, BthRepr, EthernetAddress, FrameRepr, IbRepr, Opcode, Pkey, Psn, Qpn, RethRepr,
    Rkey,
};

use crate::Network;

const PAGE: usize = 4096;
/// The application buffer on the target side: five pages.
const BUF_LEN: usize = 5 * PAGE;
/// The registered region inside it: 8 KiB starting half a page into its second page.
const MR_OFFSET: usize = PAGE + 512;
const MR_LEN: usize = 2 * PAGE;
/// PSNs the peer starts its queue pairs at.
const PSN_HEALTHY: u32 = 0x10_0000;
const PSN_VICTIM: u32 = 0x20_0000;

/// Memory the test owns, page-aligned, readable and writable (never unmapped).
struct Buffer {
    ptr: *mut u8,
}

impl Buffer {
    fn new() -> Buffer {
        // Safety: an anonymous private mapping at an address of the kernel's choice.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BUF_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap");
        Buffer { ptr: ptr.cast() }
    }

    /// A copy of the whole buffer, read as the daemon may have written it.
    fn snapshot(&self) -> Vec<u8> {
        (0..BUF_LEN)
            // Safety: `i` is within the mapping; volatile because another process (the
            // daemon) writes these pages.
            .map(|i| unsafe { std::ptr::read_volatile(self.ptr.wrapping_add(i)) })
            .collect()
    }

    fn fill(&self, bytes: &[u8]) {
        assert_eq!(bytes.len(), BUF_LEN);
        for (i, &b) in bytes.iter().enumerate() {
            // Safety: `i` is within the mapping.
            unsafe { std::ptr::write_volatile(self.ptr.wrapping_add(i), b) };
        }
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// An AF_PACKET socket bound to one interface, for frames exactly as given.
pub(crate) struct RawSocket {
    fd: std::os::fd::OwnedFd,
}

impl RawSocket {
    /// Opens it in the calling thread's network namespace.
    pub(crate) fn open(interface: &str) -> std::io::Result<RawSocket> {
        use std::os::fd::FromRawFd;
        let name = std::ffi::CString::new(interface).unwrap();
        // Safety: `name` is a valid C string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Safety: plain socket(2); the descriptor is owned below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Safety: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        // Safety: an all-zero sockaddr_ll is valid; the fields that matter are set below.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_ifindex = index as i32;
        use std::os::fd::AsRawFd;
        // Safety: `addr` is a sockaddr_ll and the length says so.
        let ret = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if ret != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(RawSocket { fd })
    }

    pub(crate) fn send(&self, frame: &[u8]) {
        use std::os::fd::AsRawFd;
        // Safety: `frame` is a live buffer of the given length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            n,
            frame.len() as isize,
            "{}",
            std::io::Error::last_os_error()
        );
    }
}

/// Builds frames from the peer (B) to the target daemon (A), as B's daemon would, between
/// their addresses of one family.
struct Forger {
    envelope: FrameRepr,
}

impl Forger {
    fn new(lab: &Lab, family: Family) -> Forger {
        let (b, a) = (lab.host(Side::B), lab.host(Side::A));
        let (from, to) = (EthernetAddress(b.mac), EthernetAddress(b.next_hop_mac));
        let envelope = match (b.address(family), a.address(family)) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => FrameRepr::ipv4(from, to, src, dst, 0xc123),
            (IpAddr::V6(src), IpAddr::V6(dst)) => FrameRepr::ipv6(from, to, src, dst, 0xc123),
            other => panic!("hosts of two families: {other:?}"),
        };
        Forger { envelope }
    }

    /// The length of its frames' IP header.
    fn ip_len(&self) -> usize {
        self.envelope.ip.header_len()
    }

    /// Where the IB headers of its frames start.
    fn ib_start(&self) -> usize {
        14 + self.ip_len() + 8
    }

    /// Cuts `frame` to `len` bytes and makes the IP and UDP lengths (and the IPv4 header
    /// checksum) agree, so that only the IB part is short.
    fn truncate_consistently(&self, mut frame: Vec<u8>, len: usize) -> Vec<u8> {
        frame.truncate(len);
        let udp_len = (len - 14 - self.ip_len()) as u16;
        frame[14 + self.ip_len() + 4..][..2].copy_from_slice(&udp_len.to_be_bytes());
        if self.ip_len() == 40 {
            // IPv6: the payload length (no header checksum).
            frame[14 + 4..14 + 6].copy_from_slice(&udp_len.to_be_bytes());
            return frame;
        }
        let ip_len = (len - 14) as u16;
        frame[14 + 2..14 + 4].copy_from_slice(&ip_len.to_be_bytes());
        frame[14 + 10..14 + 12].fill(0);
        let mut sum: u32 = frame[14..34]
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        frame[14 + 10..14 + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        frame
    }

    /// A whole, valid frame.
    fn frame(&self, ib: &IbRepr, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; 2048];
        let n = self
            .envelope
            .emit_packet(&mut buf, ib, payload)
            .expect("the frame builds");
        buf.truncate(n);
        buf
    }

    /// A valid RDMA WRITE ONLY.
    fn write(
        &self,
        qpn: u32,
        psn: u32,
        va: u64,
        rkey: u32,
        dma_len: u32,
        payload: &[u8],
    ) -> Vec<u8> {
        self.frame(&write_ib(qpn, psn, va, rkey, dma_len), payload)
    }
}

fn write_ib(qpn: u32, psn: u32, va: u64, rkey: u32, dma_len: u32) -> IbRepr {
    let mut bth = BthRepr::new(Opcode::RC_RDMA_WRITE_ONLY, Qpn::new(qpn), Psn::new(psn));
    bth.ack_request = true;
    let mut ib = IbRepr::new(bth);
    ib.reth = Some(RethRepr {
        va,
        rkey: Rkey(rkey),
        dma_len,
    });
    ib
}

fn qp_state(ctx: &Context, qpn: u32) -> String {
    ctx.qp_stats()
        .unwrap()
        .into_iter()
        .find(|q| q.qpn == qpn)
        .map(|q| q.state)
        .unwrap_or_else(|| "gone".into())
}

over_networks!(hostile_frames:
    hostile_frames_land_in_counters_and_touch_nothing => IPV4,
    hostile_ipv6_frames_land_in_counters_and_touch_nothing => IPV6,
);

fn hostile_frames(network: Network) {
    require_root();
    let family = network.family;
    let mut hosts = TwoHosts::start(&network.lab(), &[]).expect("lab");
    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());

    // The target: a region registered in the middle of a buffer whose other bytes (on the
    // same pages, which the daemon maps too) are the guards.
    let buf = Buffer::new();
    let initial = pattern(0x6a7d, BUF_LEN);
    buf.fill(&initial);
    let pa = ca.alloc_pd().unwrap();
    // Safety: the mapping is ours, mapped and writable, and nothing remaps it.
    let mr: Mr =
        unsafe { pa.register(buf.ptr.wrapping_add(MR_OFFSET), MR_LEN, Access::ALL) }.unwrap();
    let (va, rkey) = (mr.addr(), mr.rkey());
    let va_end = va + MR_LEN as u64;

    // The healthy pair, whose target QP lives in the region's protection domain.
    let cqa = ca.create_cq(64, None).unwrap();
    let healthy = pa.create_qp(&QpInit::new(QpType::Rc, &cqa, &cqa)).unwrap();
    let pb = cb.alloc_pd().unwrap();
    let cqb = cb.create_cq(64, None).unwrap();
    let peer = pb.create_qp(&QpInit::new(QpType::Rc, &cqb, &cqb)).unwrap();
    connect(
        &healthy,
        hosts.av_over(Side::A, family),
        peer.qpn(),
        0x777,
        PSN_HEALTHY,
    )
    .unwrap();
    connect(
        &peer,
        hosts.av_over(Side::B, family),
        healthy.qpn(),
        PSN_HEALTHY,
        0x777,
    )
    .unwrap();
    let mb = pb.alloc_mr(64 << 10, Access::ALL).unwrap();

    // The peer writes the whole region once: 8 packets, so the target expects PSN + 8.
    let first = pattern(0x1111, MR_LEN);
    assert!(mb.write(0, &first));
    let sge = |off: usize, len: usize| {
        [Sge {
            addr: mb.addr() + off as u64,
            length: len as u32,
            lkey: mb.lkey(),
        }]
    };
    let s = sge(0, MR_LEN);
    let write = SendOp::Write {
        remote_addr: va,
        rkey,
    };
    peer.post_send(&[SendWr::new(1, write, &s)]).unwrap();
    assert_eq!(wait_completions(&cqb, 1)[0].status, 0);
    let mut expected = initial.clone();
    expected[MR_OFFSET..MR_OFFSET + MR_LEN].copy_from_slice(&first);
    assert!(
        buf.snapshot() == expected,
        "the legitimate WRITE landed wrong"
    );
    let epsn = PSN_HEALTHY + (MR_LEN / 1024) as u32;

    // Victims: pairs whose target QPs expect PSN_VICTIM, in the region's PD, one per fatal
    // class (a request at the expected PSN that fails a check sends a NAK and moves the
    // responder to ERR, as IBTA 9.9.3 class C errors and rxe do).
    let mut victims = Vec::new();
    let mut keep = Vec::new();
    for _ in 0..7 {
        let cq = ca.create_cq(16, None).unwrap();
        let t = pa.create_qp(&QpInit::new(QpType::Rc, &cq, &cq)).unwrap();
        let (p, pcq) = {
            let pd = cb.alloc_pd().unwrap();
            let cq = cb.create_cq(16, None).unwrap();
            (
                pd.create_qp(&QpInit::new(QpType::Rc, &cq, &cq)).unwrap(),
                (pd, cq),
            )
        };
        connect(
            &t,
            hosts.av_over(Side::A, family),
            p.qpn(),
            0x777,
            PSN_VICTIM,
        )
        .unwrap();
        connect(
            &p,
            hosts.av_over(Side::B, family),
            t.qpn(),
            PSN_VICTIM,
            0x777,
        )
        .unwrap();
        victims.push(t.qpn());
        keep.push((t, p, cq, pcq));
    }
    // Another application on the target host, with a region of its own: its real rkey is
    // the most plausible forgery.
    let other = hosts.open(Side::A).unwrap();
    let other_pd = other.alloc_pd().unwrap();
    let other_mr = other_pd.alloc_mr(PAGE, Access::ALL).unwrap();
    let other_bytes = pattern(0x0e0e, PAGE);
    assert!(other_mr.write(0, &other_bytes));

    let forger = Forger::new(&hosts.lab, family);
    let ib_start = forger.ib_start();
    let evil = vec![0xeeu8; 64];
    let h = healthy.qpn();
    let mut frames: Vec<(&str, Vec<Vec<u8>>, &str)> = Vec::new();

    // Non-fatal classes, aimed at the healthy QP at its expected PSN (or around it).
    let good = forger.write(h, epsn, va, rkey, 64, &evil);
    let mut bad_icrc = good.clone();
    let n = bad_icrc.len();
    bad_icrc[n - 1] ^= 0x01;
    let mut flipped = good.clone();
    flipped[ib_start + 12 + 16 + 3] ^= 0x80; // a payload bit
    frames.push(("bad ICRC", vec![bad_icrc, flipped], "rcvd_icrc_err"));
    frames.push((
        "truncated headers",
        vec![
            // BTH cut in half.
            forger.truncate_consistently(good.clone(), ib_start + 8),
            // BTH whole, RETH cut.
            forger.truncate_consistently(good.clone(), ib_start + 12 + 8),
            // IP and UDP lengths claiming more than the frame holds.
            good[..ib_start + 20].to_vec(),
        ],
        "rcvd_malformed",
    ));
    frames.push((
        "unknown QPN",
        vec![
            forger.write(0xabcdef, epsn, va, rkey, 64, &evil),
            forger.write(h ^ 0x40_0000, epsn, va, rkey, 64, &evil),
        ],
        "rcvd_unknown_qpn",
    ));
    let mut wrong_pkey = write_ib(h, epsn, va, rkey, 64);
    wrong_pkey.bth.pkey = Pkey(0x8001);
    frames.push((
        "wrong P_Key",
        vec![forger.frame(&wrong_pkey, &evil)],
        "bad_pkey_cntr",
    ));
    let mut elsewhere = Forger::new(&hosts.lab, family);
    match elsewhere.envelope.ip {
        xroce_wire::IpRepr::Ipv4(ref mut ip) => ip.dst_addr = [10, 77, 0, 99].into(),
        xroce_wire::IpRepr::Ipv6(ref mut ip) => {
            ip.dst_addr = "fd00:77::99".parse().expect("an address");
        }
    }
    frames.push((
        "wrong destination GID",
        vec![elsewhere.write(h, epsn, va, rkey, 64, &evil)],
        "rcvd_wrong_dgid",
    ));
    // Ahead of the window: the first earns a PSN sequence error NAK, the rest of the gap
    // is dropped silently.
    frames.push((
        "PSN ahead of the window (first)",
        vec![forger.write(h, epsn + 0x1000, va, rkey, 64, &evil)],
        "out_of_seq_request",
    ));
    frames.push((
        "PSN ahead of the window (rest)",
        vec![
            forger.write(h, epsn + 0x1001, va, rkey, 64, &evil),
            forger.write(h, epsn + 0x7f_0000, va + 64, rkey, 64, &evil),
        ],
        "out_of_seq_dropped",
    ));
    // Behind: duplicates, acknowledged again and never executed.
    frames.push((
        "PSN behind the window",
        vec![
            forger.write(h, epsn - 1, va, rkey, 64, &evil),
            forger.write(h, epsn - 0x1000, va + 128, rkey, 64, &evil),
        ],
        "duplicate_request",
    ));

    // Fatal classes, one per victim, each at its victim's expected PSN.
    let v = |i: usize| victims[i];
    let other_va = other_mr.addr();
    frames.push((
        "forged rkey (random)",
        vec![forger.write(v(0), PSN_VICTIM, va, rkey ^ 0x5a5a_0001, 64, &evil)],
        "sent_nak_remote_access",
    ));
    frames.push((
        "forged rkey (another application's)",
        vec![forger.write(v(1), PSN_VICTIM, other_va, other_mr.rkey(), 64, &evil)],
        "sent_nak_remote_access",
    ));
    frames.push((
        "RETH length beyond the region",
        vec![forger.write(v(2), PSN_VICTIM, va_end - 16, rkey, 64, &evil)],
        "sent_nak_remote_access",
    ));
    let mut read = IbRepr::new(BthRepr::new(
        Opcode::RC_RDMA_READ_REQUEST,
        Qpn::new(v(3)),
        Psn::new(PSN_VICTIM),
    ));
    read.reth = Some(RethRepr {
        va: va - 64,
        rkey: Rkey(rkey),
        dma_len: 4096,
    });
    frames.push((
        "READ beyond the region",
        vec![forger.frame(&read, &[])],
        "sent_nak_remote_access",
    ));
    frames.push((
        "RETH length beyond the packet",
        vec![forger.write(v(4), PSN_VICTIM, va, rkey, 4096, &evil)],
        "sent_nak_invalid_request",
    ));
    frames.push((
        "payload beyond the path MTU",
        vec![forger.write(v(6), PSN_VICTIM, va, rkey, 1028, &[0xee; 1028])],
        "sent_nak_invalid_request",
    ));
    let mut atomic = IbRepr::new(BthRepr::new(
        Opcode::RC_FETCH_ADD,
        Qpn::new(v(5)),
        Psn::new(PSN_VICTIM),
    ));
    atomic.atomic_eth = Some(AtomicEthRepr {
        va: va_end,
        rkey: Rkey(rkey),
        swap_add: 1,
        compare: 0,
    });
    frames.push((
        "atomic just past the region",
        vec![forger.frame(&atomic, &[])],
        "sent_nak_remote_access",
    ));

    let watched: Vec<&str> = {
        let mut w: Vec<&str> = frames.iter().map(|(_, _, c)| *c).collect();
        w.dedup();
        w
    };
    let socket_ns = hosts.lab.host(Side::B).netns.clone();
    let interface = hosts.lab.host(Side::B).interface.clone();
    let socket = xroce_lab::netns::run_in(&socket_ns, || RawSocket::open(&interface))
        .unwrap()
        .expect("AF_PACKET socket in the peer's namespace");
    let pid = hosts.pid(Side::A).expect("the target daemon runs");
    for (class, list, name) in &frames {
        let before = ca.stats().unwrap();
        for f in list {
            socket.send(f);
        }
        let want = counter(&before, name) + list.len() as u64;
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut now = ca.stats().unwrap();
        while counter(&now, name) < want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            now = ca.stats().unwrap();
        }
        // A little longer, to see a frame counted twice or in a second counter.
        std::thread::sleep(Duration::from_millis(50));
        now = ca.stats().unwrap();
        let moved: Vec<String> = watched
            .iter()
            .chain(["rcvd_icrc_err", "rcvd_malformed", "rcvd_pkts"].iter())
            .filter(|c| *c != name)
            .filter(|c| counter(&now, c) != counter(&before, c))
            .map(|c| format!("{c} +{}", counter(&now, c) - counter(&before, c)))
            .collect();
        eprintln!(
            "{class}: {} frame(s) -> {name} +{} (also moved: {moved:?})",
            list.len(),
            counter(&now, name) - counter(&before, name)
        );
        assert_eq!(
            counter(&now, name) - counter(&before, name),
            list.len() as u64,
            "{class}: {name} should count each frame once"
        );
        let dropped_early = [
            "rcvd_icrc_err",
            "rcvd_malformed",
            "rcvd_unknown_qpn",
            "bad_pkey_cntr",
            "rcvd_wrong_dgid",
        ];
        for c in dropped_early.iter().filter(|c| *c != name) {
            assert_eq!(counter(&now, c), counter(&before, c), "{class} moved {c}");
        }
        assert!(
            std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "the daemon died after: {class}"
        );
    }

    // Nothing outside the region changed, and nothing inside it either.
    let after = buf.snapshot();
    for (i, (&got, &want)) in after.iter().zip(&expected).enumerate() {
        assert_eq!(
            got,
            want,
            "byte {i} of the buffer changed (region is {MR_OFFSET}..{})",
            MR_OFFSET + MR_LEN
        );
    }
    let mut other_now = vec![0u8; PAGE];
    assert!(other_mr.read(0, &mut other_now));
    assert!(
        other_now == other_bytes,
        "another application's region changed"
    );
    // The victims hit by a fatal class are in ERR, with the NAK in their own counters;
    // the healthy QP is not.
    let per_qp = ca.qp_stats().unwrap();
    let nak_of = [
        "sent_nak_remote_access",
        "sent_nak_remote_access",
        "sent_nak_remote_access",
        "sent_nak_remote_access",
        "sent_nak_invalid_request",
        "sent_nak_remote_access",
        "sent_nak_invalid_request",
    ];
    for (i, qpn) in victims.iter().enumerate() {
        assert_eq!(qp_state(&ca, *qpn), "ERR", "victim {i}");
        let q = per_qp
            .iter()
            .find(|q| q.qpn == *qpn)
            .expect("victim's stats");
        assert_eq!(counter(&q.counters, nak_of[i]), 1, "victim {i}: {q:?}");
    }
    assert_eq!(qp_state(&ca, h), "RTS");
    assert_eq!(
        hosts.pid(Side::A),
        Some(pid),
        "the target daemon still runs"
    );

    // The healthy QP carries on: WRITE the whole region anew, READ it back, SEND.
    let second = pattern(0x2222, MR_LEN);
    assert!(mb.write(0, &second));
    let s = sge(0, MR_LEN);
    peer.post_send(&[SendWr::new(2, write, &s)]).unwrap();
    let c = wait_completions(&cqb, 1)[0];
    assert_eq!((c.wr_id, c.status), (2, 0), "{c:?}");
    expected[MR_OFFSET..MR_OFFSET + MR_LEN].copy_from_slice(&second);
    assert!(
        buf.snapshot() == expected,
        "the WRITE after the attack landed wrong"
    );
    let back = sge(16 << 10, MR_LEN);
    let read_op = SendOp::Read {
        remote_addr: va,
        rkey,
    };
    peer.post_send(&[SendWr::new(3, read_op, &back)]).unwrap();
    let c = wait_completions(&cqb, 1)[0];
    assert_eq!((c.wr_id, c.status), (3, 0), "{c:?}");
    let mut got = vec![0u8; MR_LEN];
    assert!(mb.read(16 << 10, &mut got));
    assert!(got == second, "READ after the attack returned other bytes");
    let recv_mr = pa.alloc_mr(PAGE, Access::ALL).unwrap();
    let rs = [Sge {
        addr: recv_mr.addr(),
        length: PAGE as u32,
        lkey: recv_mr.lkey(),
    }];
    healthy
        .post_recv(&[RecvWr {
            wr_id: 9,
            sges: &rs,
        }])
        .unwrap();
    assert!(mb.write(32 << 10, b"still here"));
    let ss = sge(32 << 10, 10);
    peer.post_send(&[SendWr::new(4, SendOp::Send, &ss)])
        .unwrap();
    assert_eq!(wait_completions(&cqb, 1)[0].status, 0);
    let c = wait_completions(&cqa, 1)[0];
    assert_eq!((c.wr_id, c.status, c.byte_len), (9, 0, 10), "{c:?}");
    let mut msg = [0u8; 10];
    assert!(recv_mr.read(0, &mut msg));
    assert_eq!(&msg, b"still here");
    let after = buf.snapshot();
    assert!(after == expected, "the guards changed");
    drop(keep);
}
