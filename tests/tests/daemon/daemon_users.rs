//! Users, not root: the daemon gives up its privileges once set up and keeps only the
//! documented capability (`CAP_NET_ADMIN`), whether root starts it or the shipped service
//! does, and applications of ordinary users (run with `setpriv`) use it, each out of the
//! others' reach.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Stdio};

use verbs_shm::client::{Access, Context, QpInit, QpType, SendOp, SendWr, Sge};
use verbs_shm::protocol::{QpAttr, QpCaps, Request};
use xroce_engine::privileges::{CapSet, KEPT};
use xroce_lab::daemons::{DEVICE, TwoHosts, connect, wait_completions, xroced};
use xroce_lab::{LabConfig, Side, require_root};

/// The daemon's own user in these tests, as the service's `xroce` is: no other process
/// runs as it.
const DAEMON: u32 = 64000;
/// An ordinary user.
const NOBODY: u32 = 65534;
/// Another ordinary user.
const OTHER: u32 = 64001;

/// What `/proc/<pid>/status` (or a thread's) says of a process's privileges.
#[derive(Debug, Default)]
struct Privileges {
    /// Real, effective, saved and filesystem uids.
    uids: Vec<u32>,
    gids: Vec<u32>,
    groups: Vec<u32>,
    effective: u64,
    permitted: u64,
    inheritable: u64,
    ambient: u64,
    bounding: u64,
    no_new_privs: bool,
}

fn privileges(status: &Path) -> Privileges {
    let text = std::fs::read_to_string(status)
        .unwrap_or_else(|e| panic!("reading {}: {e}", status.display()));
    let field = |key: &str| -> &str {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .unwrap_or_else(|| panic!("no {key} in {}", status.display()))
            .trim()
    };
    let ids = |key: &str| -> Vec<u32> {
        field(key)
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect()
    };
    let hex = |key: &str| u64::from_str_radix(field(key), 16).unwrap();
    Privileges {
        uids: ids("Uid"),
        gids: ids("Gid"),
        groups: ids("Groups"),
        effective: hex("CapEff"),
        permitted: hex("CapPrm"),
        inheritable: hex("CapInh"),
        ambient: hex("CapAmb"),
        bounding: hex("CapBnd"),
        no_new_privs: field("NoNewPrivs") == "1",
    }
}

/// Every thread's status file of process `pid`.
fn threads(pid: u32) -> Vec<PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| t.unwrap().path().join("status"))
        .collect()
}

/// The children of process `pid`.
fn children(pid: u32) -> Vec<u32> {
    threads(pid)
        .iter()
        .filter_map(|s| std::fs::read_to_string(s.with_file_name("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .map(|n| n.parse().unwrap())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Checks that the daemon of `side` and every thread of it run as `uid`:`gid` with no
/// supplementary group and no capability but [`KEPT`] (none inheritable or ambient, no new
/// privileges; a bounding set of `KEPT` alone when `bounded`, as root can make it), and
/// that its one child, the device node's keeper, holds `CAP_DAC_OVERRIDE` alone and no
/// descriptor but its standard ones and the node's.
fn check_daemon(hosts: &mut TwoHosts, side: Side, uid: u32, gid: u32, bounded: bool) {
    let pid = hosts.pid(side).expect("the daemon runs");
    let task_list = threads(pid);
    assert!(
        task_list.len() >= 2,
        "the control thread and a poller: {task_list:?}"
    );
    for status in task_list {
        let p = privileges(&status);
        let at = status.display();
        assert_eq!(p.uids, [uid; 4], "{at}: {p:?}");
        assert_eq!(p.gids, [gid; 4], "{at}: {p:?}");
        assert_eq!(p.groups, [0u32; 0], "{at}: {p:?}");
        assert_eq!(
            CapSet(p.effective),
            KEPT,
            "{at}: effective {} instead of {KEPT}",
            CapSet(p.effective)
        );
        assert_eq!(
            CapSet(p.permitted),
            KEPT,
            "{at}: permitted {} instead of {KEPT}",
            CapSet(p.permitted)
        );
        assert_eq!((p.inheritable, p.ambient), (0, 0), "{at}: {p:?}");
        assert!(p.no_new_privs, "{at}: {p:?}");
        if bounded {
            assert_eq!(CapSet(p.bounding), KEPT, "{at}: {p:?}");
        }
    }
    let kids = children(pid);
    assert_eq!(kids.len(), 1, "the keeper alone: {kids:?}");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", kids[0])).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("keep-device-node"),
        "{cmdline:?}"
    );
    let keeper = privileges(Path::new(&format!("/proc/{}/status", kids[0])));
    let dac = CapSet::of(&[CapSet::DAC_OVERRIDE]);
    assert_eq!(keeper.uids, [uid; 4], "{keeper:?}");
    assert_eq!(
        (CapSet(keeper.effective), CapSet(keeper.permitted)),
        (dac, dac)
    );
    assert_eq!((keeper.inheritable, keeper.ambient), (0, 0), "{keeper:?}");
    assert!(keeper.no_new_privs, "{keeper:?}");
    // And nothing of the daemon's but the node: no AF_XDP socket, BPF object or control
    // socket.
    for entry in std::fs::read_dir(format!("/proc/{}/fd", kids[0])).unwrap() {
        let entry = entry.unwrap();
        let fd: u32 = entry.file_name().to_string_lossy().parse().unwrap();
        let target = std::fs::read_link(entry.path()).unwrap();
        // The node, as the kernel names it from here: in a chroot whose /dev is the
        // host's, the host's path to it.
        let node = target
            .parent()
            .is_some_and(|d| d.ends_with("dev/infiniband"))
            && target
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("uverbs-"));
        assert!(
            fd <= 2 || node,
            "the keeper holds {fd} -> {}",
            target.display()
        );
    }
}

/// An RDMA WRITE from A to B: what the daemons still hold suffices to serve it (next-hop
/// resolution included: the lab's neighbour tables start empty).
fn write_across(hosts: &TwoHosts) {
    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let (ma, mb) = (
        pa.alloc_mr(4096, Access::ALL).unwrap(),
        pb.alloc_mr(4096, Access::ALL).unwrap(),
    );
    let (qa_cq, qb_cq) = (
        ca.create_cq(16, None).unwrap(),
        cb.create_cq(16, None).unwrap(),
    );
    let qa = pa
        .create_qp(&QpInit::new(QpType::Rc, &qa_cq, &qa_cq))
        .unwrap();
    let qb = pb
        .create_qp(&QpInit::new(QpType::Rc, &qb_cq, &qb_cq))
        .unwrap();
    connect(&qa, hosts.av(Side::A), qb.qpn(), 1, 2).unwrap();
    connect(&qb, hosts.av(Side::B), qa.qpn(), 2, 1).unwrap();
    assert!(ma.write(0, b"users"));
    let sge = [Sge {
        addr: ma.addr(),
        length: 5,
        lkey: ma.lkey(),
    }];
    let write = SendOp::Write {
        remote_addr: mb.addr(),
        rkey: mb.rkey(),
    };
    qa.post_send(&[SendWr::new(1, write, &sge)]).unwrap();
    assert_eq!(wait_completions(&qa_cq, 1)[0].status, 0);
    let mut got = [0u8; 5];
    assert!(mb.read(0, &mut got));
    assert_eq!(&got, b"users");
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_daemon_started_as_root_runs_as_its_user_with_cap_net_admin_alone() {
    require_root();
    // A with a user of its own; B with the default (`xroce`, else `nobody`).
    let user = format!("{DAEMON}:{DAEMON}");
    let mut hosts = TwoHosts::start_sides(
        &xroced().unwrap(),
        &LabConfig::default(),
        &["--user", &user],
        &[],
    )
    .expect("lab");
    check_daemon(&mut hosts, Side::A, DAEMON, DAEMON, true);
    let default = xroce_engine::privileges::User::default_for_daemon().unwrap();
    check_daemon(&mut hosts, Side::B, default.uid, default.gid, true);
    write_across(&hosts);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP, capsh (cargo xtask test runs it)"]
fn a_daemon_started_as_the_shipped_service_starts_it_keeps_cap_net_admin_alone() {
    require_root();
    // What dist/xroced@.service grants: its ambient capabilities, as a user that is not
    // root, with no new privileges (systemd's User=, AmbientCapabilities=), done by capsh.
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../dist/xroced@.service"),
    )
    .unwrap();
    let ambient: Vec<String> = unit
        .lines()
        .find_map(|l| l.strip_prefix("AmbientCapabilities="))
        .expect("the unit grants capabilities")
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    let caps = ambient.join(",");
    let dir = std::env::temp_dir().join(format!("xroce-service-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wrapper = dir.join("xroced-as-service");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec capsh --caps='{caps}+eip cap_setpcap,cap_setuid,cap_setgid+ep' \
             --keep=1 --gid={DAEMON} --groups= --uid={DAEMON} --caps='{caps}+eip' \
             --addamb={caps} --shell={} -- \"$@\"\n",
            xroced().unwrap().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let started = TwoHosts::start_with(&wrapper, &LabConfig::default(), &[]);
    let _ = std::fs::remove_dir_all(&dir);
    let mut hosts = started.expect("xroced starts with the unit's capabilities as its user");
    for side in [Side::A, Side::B] {
        // Not root, without CAP_SETPCAP: the bounding set is the service manager's to
        // narrow (CapabilityBoundingSet=).
        check_daemon(&mut hosts, side, DAEMON, DAEMON, false);
    }
    write_across(&hosts);
}

const OWNER: &str = "XROCE_USERS_OWNER";
const INTRUDER: &str = "XROCE_USERS_INTRUDER";

/// Waits for the line starting with `tag` on a child's output, and returns its numbers.
fn numbers(out: &mut BufReader<ChildStdout>, tag: &str) -> Vec<u64> {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child ended before printing {tag}"
        );
        if let Some(rest) = line.strip_prefix(tag) {
            return rest
                .split_whitespace()
                .map(|w| w.parse().unwrap())
                .collect();
        }
    }
}

/// Runs this test binary's `name` on host A as user `uid` (`setpriv`, no supplementary
/// groups), with `env`.
fn as_user(hosts: &TwoHosts, uid: u32, name: &str, env: (&str, String)) -> Child {
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_string_lossy().into_owned();
    let (reuid, regid) = (format!("--reuid={uid}"), format!("--regid={uid}"));
    hosts
        .lab
        .command(
            Side::A,
            &[
                "setpriv",
                &reuid,
                &regid,
                "--clear-groups",
                &exe,
                "--exact",
                name,
                "--nocapture",
                "--test-threads",
                "1",
            ],
        )
        .env(env.0, env.1)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Run as user nobody on host A by `one_users_objects_are_out_of_another_users_reach`:
/// makes a PD, a region holding "secret", a CQ and a QP, prints their handles and keys,
/// and once told (a line on standard input) checks that they are all still there.
#[test]
fn users_owner_child() {
    if std::env::var(OWNER).is_err() {
        return;
    }
    let ctx = Context::open(DEVICE).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(65536, Access::ALL).unwrap();
    assert!(mr.write(0, b"secret"));
    let cq = ctx.create_cq(16, None).unwrap();
    let qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq, &cq)).unwrap();
    println!(
        "\nXROCE-OWNER {} {} {} {} {} {} {} {}",
        pd.handle(),
        mr.handle(),
        mr.lkey(),
        mr.rkey(),
        mr.addr(),
        cq.handle(),
        qp.handle(),
        qp.qpn()
    );
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let mut got = [0u8; 6];
    let intact = mr.read(0, &mut got) && &got == b"secret";
    let qp_state = qp.query().map(|a| a.qp_state).unwrap_or(u32::MAX);
    let cq_polls = cq.poll(&mut [Default::default(); 4]).is_ok();
    println!(
        "\nXROCE-OWNER-CHECKED {} {qp_state} {} {}",
        u8::from(intact),
        u8::from(cq_polls),
        nix::unistd::getuid()
    );
}

/// Run as another user on host A by `one_users_objects_are_out_of_another_users_reach`,
/// given the owner's handles and keys and two QP numbers of host B: names the owner's
/// objects in requests of its own (each refused), then with objects of its own posts a
/// WRITE from the owner's region by its lkey (a local protection error), and connects a
/// QP to B for B to try the owner's rkey through it. Prints what it saw, then waits for
/// the end of its input.
#[test]
fn users_intruder_child() {
    let Ok(spec) = std::env::var(INTRUDER) else {
        return;
    };
    let v: Vec<u64> = spec.split(',').map(|x| x.parse().unwrap()).collect();
    let [
        pd,
        mr,
        lkey,
        _rkey,
        addr,
        cq,
        qp,
        _qpn,
        b_qpn1,
        b_qpn2,
        b_ip,
    ] = v[..]
    else {
        panic!("{spec}");
    };
    let (pd, mr, cq, qp) = (pd as u32, mr as u32, cq as u32, qp as u32);
    let ctx = Context::open(DEVICE).unwrap();
    // Before it has objects of its own, so no handle of its own can match.
    let attempts = [
        Request::QueryQp { qp },
        Request::ModifyQp {
            qp,
            attr: QpAttr {
                qp_state: 6,
                ..Default::default()
            },
            mask: verbs_shm::client::AttrMask::STATE.0,
        },
        Request::DestroyQp { qp },
        Request::DeregMr { mr },
        Request::DestroyCq { cq },
        Request::DeallocPd { pd },
        // A QP of its own in the owner's PD, on the owner's CQ.
        Request::CreateQp {
            pd,
            qp_type: 2,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            caps: QpCaps {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            sq_sig_all: false,
        },
    ];
    let refused = attempts.iter().filter(|r| ctx.request(r).is_err()).count();
    let own_pd = ctx.alloc_pd().unwrap();
    let own_mr = own_pd.alloc_mr(65536, Access::ALL).unwrap();
    let own_cq = ctx.create_cq(16, None).unwrap();
    let q1 = own_pd
        .create_qp(&QpInit::new(QpType::Rc, &own_cq, &own_cq))
        .unwrap();
    let q2 = own_pd
        .create_qp(&QpInit::new(QpType::Rc, &own_cq, &own_cq))
        .unwrap();
    let av = verbs_shm::client::AhAttr {
        dgid: xroce_wire::Gid::from_ipv4(std::net::Ipv4Addr::from(b_ip as u32)).0,
        hop_limit: 64,
        is_global: true,
        port_num: 1,
        ..Default::default()
    };
    connect(&q1, av, b_qpn1 as u32, 5, 6).unwrap();
    connect(&q2, av, b_qpn2 as u32, 7, 8).unwrap();
    let foreign = [Sge {
        addr,
        length: 6,
        lkey: lkey as u32,
    }];
    let write = SendOp::Write {
        remote_addr: own_mr.addr(),
        rkey: own_mr.rkey(),
    };
    q1.post_send(&[SendWr::new(1, write, &foreign)]).unwrap();
    let status = wait_completions(&own_cq, 1)[0].status;
    let mut copied = [0u8; 6];
    let leaked = own_mr.read(0, &mut copied) && &copied == b"secret";
    println!(
        "\nXROCE-INTRUDER {refused} {status} {} {} {}",
        u8::from(leaked),
        q2.qpn(),
        nix::unistd::getuid()
    );
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP, setpriv (cargo xtask test runs it)"]
fn one_users_objects_are_out_of_another_users_reach() {
    require_root();
    let user = format!("{DAEMON}:{DAEMON}");
    let hosts = TwoHosts::start(&LabConfig::default(), &["--user", &user]).expect("lab");
    let mut owner = as_user(
        &hosts,
        NOBODY,
        "daemon_users::users_owner_child",
        (OWNER, "1".into()),
    );
    let mut owner_out = BufReader::new(owner.stdout.take().unwrap());
    let o = numbers(&mut owner_out, "XROCE-OWNER ");
    let (rkey, addr) = (o[3] as u32, o[4]);
    // Two QPs on B (root's) for the intruder's to connect to.
    let cb = hosts.open(Side::B).unwrap();
    let pb = cb.alloc_pd().unwrap();
    let mb = pb.alloc_mr(4096, Access::ALL).unwrap();
    let cqb = cb.create_cq(16, None).unwrap();
    let b1 = pb.create_qp(&QpInit::new(QpType::Rc, &cqb, &cqb)).unwrap();
    let b2 = pb.create_qp(&QpInit::new(QpType::Rc, &cqb, &cqb)).unwrap();
    let b_ip = u32::from(hosts.lab.host(Side::B).ipv4);
    let spec = o
        .iter()
        .map(u64::to_string)
        .chain([b1.qpn(), b2.qpn(), b_ip].map(|n| n.to_string()))
        .collect::<Vec<_>>()
        .join(",");
    let mut intruder = as_user(
        &hosts,
        OTHER,
        "daemon_users::users_intruder_child",
        (INTRUDER, spec),
    );
    let mut intruder_out = BufReader::new(intruder.stdout.take().unwrap());
    let i = numbers(&mut intruder_out, "XROCE-INTRUDER ");
    assert_eq!(i[4], u64::from(OTHER), "the intruder runs as another user");
    assert_eq!(
        i[0], 7,
        "every request naming the owner's objects is refused"
    );
    assert_eq!(i[1], 4, "the owner's lkey: IBV_WC_LOC_PROT_ERR");
    assert_eq!(i[2], 0, "nothing of the owner's region was read");
    // B writes to the intruder's QP with the owner's rkey: the region is not in the
    // intruder's PD, so A's responder refuses.
    connect(&b2, hosts.av(Side::B), i[3] as u32, 8, 7).unwrap();
    let sge = [Sge {
        addr: mb.addr(),
        length: 6,
        lkey: mb.lkey(),
    }];
    assert!(mb.write(0, b"forged"));
    let write = SendOp::Write {
        remote_addr: addr,
        rkey,
    };
    b2.post_send(&[SendWr::new(9, write, &sge)]).unwrap();
    let c = wait_completions(&cqb, 1)[0];
    assert_eq!(
        (c.wr_id, c.status),
        (9, 10),
        "IBV_WC_REM_ACCESS_ERR through the intruder's QP: {c:?}"
    );
    // The owner's objects are all there, untouched.
    writeln!(owner.stdin.as_mut().unwrap(), "check").unwrap();
    let checked = numbers(&mut owner_out, "XROCE-OWNER-CHECKED ");
    assert_eq!(checked[3], u64::from(NOBODY), "the owner runs as nobody");
    assert_eq!(checked[0], 1, "the owner's region still holds its secret");
    assert_eq!(
        checked[1], 0,
        "the owner's QP is still RESET, not ERR or gone"
    );
    assert_eq!(checked[2], 1, "the owner's CQ still polls");
    drop(intruder.stdin.take());
    for mut child in [owner, intruder] {
        assert!(child.wait().unwrap().success());
    }
}
