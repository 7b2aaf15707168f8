//! UD multicast end to end: queue pairs of two applications on one host and one on the
//! sending host attached to a group, a SEND to the multicast QP from the other host, the
//! interface's IP membership while the group has members, and what detaching, destroying
//! and a departing application leave behind.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use verbs_shm::client::{
    Access, Context, Cq, Mr, Pd, Qp, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, UdTarget,
    WorkCompletion,
};
use xroce_lab::daemons::{TwoHosts, counter, ud_ready, wait_completions};
use xroce_lab::{Side, require_root};

use crate::Network;

const QKEY: u32 = 0x0123_4567;
const GROUP: Ipv4Addr = Ipv4Addr::new(230, 77, 0, 9);
const LEN: u32 = 512;

fn group_gid() -> [u8; 16] {
    xroce_wire::Gid::from_ipv4(GROUP).0
}

/// One receiving application: a UD QP with a receive posted.
struct Receiver {
    _pd: Pd,
    cq: Cq,
    mr: Mr,
    qp: Qp,
}

impl Receiver {
    fn new(ctx: &Context) -> Receiver {
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(16, None).unwrap();
        let mr = pd.alloc_mr(65536, Access::ALL).unwrap();
        let qp = pd.create_qp(&QpInit::new(QpType::Ud, &cq, &cq)).unwrap();
        ud_ready(&qp, QKEY, 7).unwrap();
        Receiver {
            _pd: pd,
            cq,
            mr,
            qp,
        }
    }

    fn post_recv(&self, wr_id: u64) {
        let sge = [Sge {
            addr: self.mr.addr(),
            length: 40 + LEN,
            lkey: self.mr.lkey(),
        }];
        self.qp.post_recv(&[RecvWr { wr_id, sges: &sge }]).unwrap();
    }

    /// The completions that arrive within `wait`.
    fn completions_within(&self, wait: Duration) -> Vec<WorkCompletion> {
        let deadline = Instant::now() + wait;
        let mut got = Vec::new();
        let mut buf = [WorkCompletion::default(); 4];
        while Instant::now() < deadline {
            let n = self.cq.poll(&mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
            std::thread::sleep(Duration::from_millis(5));
        }
        got
    }
}

/// The IPv4 groups the interface of `side` is a member of (`ip maddr`).
fn memberships(h: &TwoHosts, side: Side) -> String {
    let host = h.lab.host(side);
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &host.netns,
            "ip",
            "-4",
            "maddr",
            "show",
            "dev",
        ])
        .arg(&host.interface)
        .output()
        .expect("ip maddr");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_multicast_send_reaches_every_attached_qp_of_both_hosts() {
    require_root();
    let h = TwoHosts::start(&Network::IPV4.lab(), &[]).expect("lab with two daemons");
    let (ca, cb1, cb2) = (
        h.open(Side::A).unwrap(),
        h.open(Side::B).unwrap(),
        h.open(Side::B).unwrap(),
    );
    // Two applications on B attached, one QP on B not attached, and one QP on A, the
    // sender's host, attached: it takes its copy from its own daemon.
    let (b1, b2, b3, a_local) = (
        Receiver::new(&cb1),
        Receiver::new(&cb2),
        Receiver::new(&cb1),
        Receiver::new(&ca),
    );
    assert!(!memberships(&h, Side::B).contains(&GROUP.to_string()));
    for r in [&b1, &b2, &a_local] {
        r.qp.attach_mcast(group_gid()).unwrap();
    }
    // Attaching again is no error.
    b1.qp.attach_mcast(group_gid()).unwrap();
    assert!(
        memberships(&h, Side::B).contains(&GROUP.to_string()),
        "B's interface joined {GROUP}: {}",
        memberships(&h, Side::B)
    );
    for r in [&b1, &b2, &b3, &a_local] {
        r.post_recv(1);
    }

    // The sender: a UD QP on A, to the group's address and the multicast QP.
    let pa = ca.alloc_pd().unwrap();
    let cqa = ca.create_cq(16, None).unwrap();
    let ma = pa.alloc_mr(65536, Access::ALL).unwrap();
    let qa = pa.create_qp(&QpInit::new(QpType::Ud, &cqa, &cqa)).unwrap();
    ud_ready(&qa, QKEY, 1).unwrap();
    let mut av = h.av(Side::A);
    av.dgid = group_gid();
    let ah = pa.create_ah(&av).unwrap();
    let payload: Vec<u8> = (0..LEN).map(|i| (i * 7) as u8).collect();
    assert!(ma.write(0, &payload));
    let send = || {
        let sge = [Sge {
            addr: ma.addr(),
            length: LEN,
            lkey: ma.lkey(),
        }];
        let mut wr = SendWr::new(1, SendOp::Send, &sge);
        wr.ud = Some(UdTarget {
            ah: &ah,
            qpn: 0xff_ffff,
            qkey: QKEY,
        });
        qa.post_send(&[wr]).unwrap();
        assert_eq!(wait_completions(&cqa, 1)[0].status, 0);
    };
    send();
    for (name, r) in [("b1", &b1), ("b2", &b2), ("a_local", &a_local)] {
        let c = wait_completions(&r.cq, 1)[0];
        assert_eq!(
            (c.status, c.byte_len, c.src_qp, c.qp_num),
            (0, 40 + LEN, qa.qpn(), r.qp.qpn()),
            "{name}"
        );
        let mut got = vec![0u8; 40 + LEN as usize];
        assert!(r.mr.read(0, &mut got));
        // IPv4 in the GRH area: the header's destination address is the group's.
        assert_eq!(got[36..40], GROUP.octets(), "{name}");
        assert_eq!(got[40..], payload[..], "{name}");
    }
    assert!(
        b3.completions_within(Duration::from_millis(300)).is_empty(),
        "a QP not attached receives nothing"
    );

    // b1 detaches: the next SEND reaches b2 alone on B.
    b1.qp.detach_mcast(group_gid()).unwrap();
    let e = b1.qp.detach_mcast(group_gid()).unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL, "{e}");
    for r in [&b1, &b2, &a_local] {
        r.post_recv(2);
    }
    send();
    assert_eq!(wait_completions(&b2.cq, 1)[0].status, 0);
    assert_eq!(wait_completions(&a_local.cq, 1)[0].status, 0);
    assert!(b1.completions_within(Duration::from_millis(300)).is_empty());

    // b2's application goes away: B has no member left, and its interface leaves.
    drop(b2);
    drop(cb2);
    let deadline = Instant::now() + Duration::from_secs(5);
    while memberships(&h, Side::B).contains(&GROUP.to_string()) {
        assert!(Instant::now() < deadline, "B's interface still in {GROUP}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = counter(&cb1.stats().unwrap(), "rcvd_mcast_unjoined");
    send();
    let deadline = Instant::now() + Duration::from_secs(5);
    while counter(&cb1.stats().unwrap(), "rcvd_mcast_unjoined") == before {
        assert!(Instant::now() < deadline, "no rcvd_mcast_unjoined on B");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Only UD QPs join, and only multicast groups.
    let rc = pa.create_qp(&QpInit::new(QpType::Rc, &cqa, &cqa)).unwrap();
    assert_eq!(
        rc.attach_mcast(group_gid()).unwrap_err().errno(),
        libc::EINVAL
    );
    let unicast = xroce_wire::Gid::from_ipv4(Ipv4Addr::new(10, 77, 0, 2)).0;
    assert_eq!(qa.attach_mcast(unicast).unwrap_err().errno(), libc::EINVAL);
}
