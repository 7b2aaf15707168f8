//! An idle daemon sleeps: with both daemons up, an application connected to each and an RC
//! queue pair connected between them, but no traffic, each daemon uses under 2 % of a core
//! over 10 s. The figure is CPU time (`utime + stime` of `/proc/PID/stat`, every thread of
//! the daemon), not a wall-clock measurement; it is printed (`--nocapture` shows it).

use std::time::{Duration, Instant};

use verbs_shm::client::{Access, QpInit, QpType, SendOp, SendWr, Sge};
use xroce_lab::daemons::{TwoHosts, connect, wait_completions};
use xroce_lab::{LabConfig, Side, require_root};

/// CPU time of process `pid` so far (user + system, all threads), from `/proc/PID/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("daemon's stat");
    // The command name (field 2) may hold spaces: count fields after its closing paren.
    let rest = &stat[stat.rfind(')').expect("stat has a command name") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the file (utime, stime) are 11 and 12 after the name.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // Safety: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_nanos(ticks * 1_000_000_000 / hz)
}

/// Nanoseconds every thread of `pid` has run (`/proc/PID/task/*/schedstat`): the same
/// figure at a finer grain than clock ticks.
fn run_time(pid: u32) -> Duration {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("daemon's tasks");
    let nanos = tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn idle_daemons_use_under_two_percent_of_a_core() {
    require_root();
    let mut hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    // An application on each side with a connected RC QP, to prove the daemons work and to
    // measure them as they idle in real use (with QPs, CQs and rings to watch).
    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let (ma, mb) = (
        pa.alloc_mr(1 << 16, Access::ALL).unwrap(),
        pb.alloc_mr(1 << 16, Access::ALL).unwrap(),
    );
    let (cqa, cqb) = (
        ca.create_cq(16, None).unwrap(),
        cb.create_cq(16, None).unwrap(),
    );
    let qa = pa.create_qp(&QpInit::new(QpType::Rc, &cqa, &cqa)).unwrap();
    let qb = pb.create_qp(&QpInit::new(QpType::Rc, &cqb, &cqb)).unwrap();
    connect(&qa, hosts.av(Side::A), qb.qpn(), 1, 2).unwrap();
    connect(&qb, hosts.av(Side::B), qa.qpn(), 2, 1).unwrap();
    assert!(ma.write(0, b"are you awake?"));
    let sge = [Sge {
        addr: ma.addr(),
        length: 14,
        lkey: ma.lkey(),
    }];
    let write = SendOp::Write {
        remote_addr: mb.addr(),
        rkey: mb.rkey(),
    };
    qa.post_send(&[SendWr::new(1, write, &sge)]).unwrap();
    assert_eq!(wait_completions(&cqa, 1)[0].status, 0);
    let mut got = [0u8; 14];
    assert!(mb.read(0, &mut got) && &got == b"are you awake?");

    // Let the pollers reach their deepest sleep, then measure 10 s of idleness.
    std::thread::sleep(Duration::from_secs(1));
    let pids = [Side::A, Side::B].map(|s| hosts.pid(s).expect("the daemon runs"));
    let before = pids.map(|p| (cpu_time(p), run_time(p)));
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(10));
    let wall = started.elapsed();
    let after = pids.map(|p| (cpu_time(p), run_time(p)));
    for (i, side) in ["a", "b"].iter().enumerate() {
        let cpu = after[i].0 - before[i].0;
        let run = after[i].1 - before[i].1;
        let share = |d: Duration| 100.0 * d.as_secs_f64() / wall.as_secs_f64();
        eprintln!(
            "idle daemon {side} (pid {}): {} ms of CPU in {:.1} s = {:.3} % of a core \
             (schedstat: {:.3} ms = {:.4} %)",
            pids[i],
            cpu.as_millis(),
            wall.as_secs_f64(),
            share(cpu),
            run.as_secs_f64() * 1e3,
            share(run)
        );
        assert!(
            share(cpu) < 2.0 && share(run) < 2.0,
            "idle daemon {side} used {:.3} % of a core (schedstat {:.3} %)",
            share(cpu),
            share(run)
        );
    }
    // Both still serve after the nap.
    qa.post_send(&[SendWr::new(2, write, &sge)]).unwrap();
    assert_eq!(wait_completions(&cqa, 1)[0].status, 0);
}
