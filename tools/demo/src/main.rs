//! `xroce-demo` (run as `cargo xtask demo`): the first command a newcomer runs.
//!
//! Builds the daemon, makes a lab of two network namespaces joined by veth, starts `xroced`
//! in each, and moves data between them with every RDMA operation — ping-pong, WRITE, READ,
//! SEND, atomics — checking every byte, then prints a table and tears everything down (also
//! on Ctrl-C).

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use verbs_shm::client::{
    Access, Context, Cq, Mr, Qp, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, WorkCompletion,
};
use xroce_lab::daemons::{TwoHosts, connect, counter, xroced_release};
use xroce_lab::{Family, LabConfig, Side};

#[derive(Debug, clap::Parser)]
#[command(
    name = "cargo xtask demo",
    about = "The first command to run: two namespaces, two daemons, RDMA between them, a table"
)]
struct Args {
    /// Ping-pong round trips.
    #[arg(long, default_value_t = 2000)]
    iterations: usize,
    /// Extra arguments for both daemons (for example `--daemon-args=--spin-us=0`).
    #[arg(long, allow_hyphen_values = true, value_delimiter = ' ')]
    daemon_args: Vec<String>,
    /// RoCEv2 over IPv6: the queue pairs use the hosts' global IPv6 addresses (GID 1)
    /// instead of their IPv4 ones (GID 0).
    #[arg(long)]
    ipv6: bool,
}

struct End {
    ctx: Context,
    mr: Mr,
    cq: Cq,
    qp: Qp,
}

fn end(h: &TwoHosts, side: Side, len: usize) -> Result<End> {
    let ctx = h.open(side).context("opening the device")?;
    let pd = ctx.alloc_pd()?;
    let mr = pd.alloc_mr(len, Access::ALL)?;
    let cq = ctx.create_cq(1024, None)?;
    let mut init = QpInit::new(QpType::Rc, &cq, &cq);
    init.caps.max_send_wr = 256;
    init.caps.max_recv_wr = 256;
    let qp = pd.create_qp(&init)?;
    Ok(End { ctx, mr, cq, qp })
}

fn wait(cq: &Cq, n: usize) -> Result<Vec<WorkCompletion>> {
    let mut got = Vec::with_capacity(n);
    let mut buf = [WorkCompletion::default(); 64];
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < n {
        let k = cq.poll(&mut buf)?;
        for c in &buf[..k] {
            ensure!(
                c.status == 0,
                "work request {} failed with status {}",
                c.wr_id,
                c.status
            );
        }
        got.extend_from_slice(&buf[..k]);
        if k == 0 {
            ensure!(Instant::now() < deadline, "no completion for 30 s");
            // Share the cores with the daemons: this machine may have only two.
            std::thread::yield_now();
        }
    }
    Ok(got)
}

struct Row {
    op: &'static str,
    size: String,
    count: usize,
    figure: String,
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    if let Err(e) = run(&args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<()> {
    if !xroce_lab::is_root() {
        bail!("the demo needs root (network namespaces, XDP, AF_XDP): run `sudo cargo xtask demo`");
    }
    xroce_lab::require_packages(&["iproute2"])?;
    xroce_lab::signals::install().context("installing the Ctrl-C handler")?;
    println!("xroce demo: two network namespaces, one xroced each, RDMA between them\n");
    print!("building xroced (release) ... ");
    std::io::Write::flush(&mut std::io::stdout())?;
    let bin = xroced_release().context("building xroced")?;
    println!("ok");
    let hosts =
        TwoHosts::start_with(&bin, &LabConfig::default(), &[]).context("starting the lab")?;
    let (a, b) = (
        hosts.lab.host(Side::A).clone(),
        hosts.lab.host(Side::B).clone(),
    );
    let family = if args.ipv6 {
        Family::Ipv6
    } else {
        Family::Ipv4
    };
    println!(
        "lab: {} {} ({}) <-> {} {} ({}), xroced running in both",
        a.netns,
        a.interface,
        a.address(family),
        b.netns,
        b.interface,
        b.address(family)
    );
    const LEN: usize = 64 << 20;
    let (ea, eb) = (end(&hosts, Side::A, LEN)?, end(&hosts, Side::B, LEN)?);
    connect(
        &ea.qp,
        hosts.av_over(Side::A, family),
        eb.qp.qpn(),
        0x10,
        0x20,
    )?;
    connect(
        &eb.qp,
        hosts.av_over(Side::B, family),
        ea.qp.qpn(),
        0x20,
        0x10,
    )?;
    println!(
        "RC queue pairs {:#x} <-> {:#x} connected over {} (GID {}), 64 MiB registered on \
         each side\n",
        ea.qp.qpn(),
        eb.qp.qpn(),
        if args.ipv6 { "IPv6" } else { "IPv4" },
        family.gid_index()
    );
    let mut rows = Vec::new();

    // Ping-pong: SEND 64 bytes A -> B, B answers.
    step("ping-pong")?;
    let n = args.iterations;
    let ssge_a = [Sge {
        addr: ea.mr.addr(),
        length: 64,
        lkey: ea.mr.lkey(),
    }];
    let rsge_a = [Sge {
        addr: ea.mr.addr() + 4096,
        length: 64,
        lkey: ea.mr.lkey(),
    }];
    let ssge_b = [Sge {
        addr: eb.mr.addr(),
        length: 64,
        lkey: eb.mr.lkey(),
    }];
    let rsge_b = [Sge {
        addr: eb.mr.addr() + 4096,
        length: 64,
        lkey: eb.mr.lkey(),
    }];
    let mut rtts = Vec::with_capacity(n);
    for i in 0..n {
        ea.qp
            .post_recv(&[RecvWr {
                wr_id: i as u64,
                sges: &rsge_a,
            }])
            .map_err(|(_, e)| e)?;
        eb.qp
            .post_recv(&[RecvWr {
                wr_id: i as u64,
                sges: &rsge_b,
            }])
            .map_err(|(_, e)| e)?;
        let t = Instant::now();
        ea.qp
            .post_send(&[SendWr::new(i as u64, SendOp::Send, &ssge_a)])
            .map_err(|(_, e)| e)?;
        wait_kind(&eb.cq, 1)?; // B received
        eb.qp
            .post_send(&[SendWr::new(i as u64, SendOp::Send, &ssge_b)])
            .map_err(|(_, e)| e)?;
        wait_kind(&ea.cq, 2)?; // A's send completed and A received
        rtts.push(t.elapsed());
        wait_kind(&eb.cq, 1)?; // B's send completed
    }
    rtts.sort();
    let med = rtts[n / 2];
    let p99 = rtts[(n * 99 / 100).min(n - 1)];
    rows.push(Row {
        op: "ping-pong (SEND/RECV)",
        size: "64 B".into(),
        count: n,
        figure: format!("RTT median {:.1} µs, p99 {:.1} µs", us(med), us(p99)),
    });
    done()?;

    // WRITE 32 MiB A -> B in 1 MiB messages.
    step("RDMA WRITE")?;
    let total = 32 << 20;
    let data = pattern(total, 7);
    ensure!(ea.mr.write(0, &data));
    let t = Instant::now();
    let chunk = 1 << 20;
    let mut posted = 0;
    while posted < total / chunk {
        let burst = (total / chunk - posted).min(16);
        for k in 0..burst {
            let off = ((posted + k) * chunk) as u64;
            let sge = [Sge {
                addr: ea.mr.addr() + off,
                length: chunk as u32,
                lkey: ea.mr.lkey(),
            }];
            let op = SendOp::Write {
                remote_addr: eb.mr.addr() + off,
                rkey: eb.mr.rkey(),
            };
            ea.qp
                .post_send(&[SendWr::new(k as u64, op, &sge)])
                .map_err(|(_, e)| e)?;
        }
        wait(&ea.cq, burst)?;
        posted += burst;
    }
    let el = t.elapsed();
    let mut got = vec![0u8; total];
    ensure!(eb.mr.read(0, &mut got));
    ensure!(got == data, "WRITE data differs at B");
    rows.push(Row {
        op: "RDMA WRITE",
        size: "1 MiB".into(),
        count: total / chunk,
        figure: format!("{:.2} Gbit/s, 32 MiB verified", gbps(total, el)),
    });
    done()?;

    // READ it back into A at 32 MiB.
    step("RDMA READ")?;
    let t = Instant::now();
    let mut posted = 0;
    while posted < total / chunk {
        let burst = (total / chunk - posted).min(16);
        for k in 0..burst {
            let off = ((posted + k) * chunk) as u64;
            let sge = [Sge {
                addr: ea.mr.addr() + (32 << 20) + off,
                length: chunk as u32,
                lkey: ea.mr.lkey(),
            }];
            let op = SendOp::Read {
                remote_addr: eb.mr.addr() + off,
                rkey: eb.mr.rkey(),
            };
            ea.qp
                .post_send(&[SendWr::new(k as u64, op, &sge)])
                .map_err(|(_, e)| e)?;
        }
        wait(&ea.cq, burst)?;
        posted += burst;
    }
    let el = t.elapsed();
    ensure!(ea.mr.read(32 << 20, &mut got));
    ensure!(got == data, "READ data differs at A");
    rows.push(Row {
        op: "RDMA READ",
        size: "1 MiB".into(),
        count: total / chunk,
        figure: format!("{:.2} Gbit/s, 32 MiB verified", gbps(total, el)),
    });
    done()?;

    // SEND 1000 x 4 KiB B -> A into posted receives.
    step("SEND")?;
    let msgs = 1000;
    let msg = 4096;
    let send_data = pattern(msgs * msg, 3);
    ensure!(eb.mr.write(0, &send_data));
    let t = Instant::now();
    for batch in 0..msgs / 100 {
        for k in 0..100 {
            let i = batch * 100 + k;
            let rs = [Sge {
                addr: ea.mr.addr() + (i * msg) as u64,
                length: msg as u32,
                lkey: ea.mr.lkey(),
            }];
            ea.qp
                .post_recv(&[RecvWr {
                    wr_id: i as u64,
                    sges: &rs,
                }])
                .map_err(|(_, e)| e)?;
        }
        for k in 0..100 {
            let i = batch * 100 + k;
            let ss = [Sge {
                addr: eb.mr.addr() + (i * msg) as u64,
                length: msg as u32,
                lkey: eb.mr.lkey(),
            }];
            eb.qp
                .post_send(&[SendWr::new(i as u64, SendOp::Send, &ss)])
                .map_err(|(_, e)| e)?;
        }
        wait(&eb.cq, 100)?;
        let c = wait(&ea.cq, 100)?;
        ensure!(
            c.iter()
                .all(|c| c.byte_len == msg as u32 && c.opcode == 128),
            "receive completions wrong"
        );
    }
    let el = t.elapsed();
    let mut got = vec![0u8; msgs * msg];
    ensure!(ea.mr.read(0, &mut got));
    ensure!(got == send_data, "SEND data differs at A");
    rows.push(Row {
        op: "SEND/RECV",
        size: "4 KiB".into(),
        count: msgs,
        figure: format!(
            "{:.2} Gbit/s, {:.0} k msg/s, verified",
            gbps(msgs * msg, el),
            msgs as f64 / el.as_secs_f64() / 1e3
        ),
    });
    done()?;

    // Atomics: fetch-and-add 1000 times on one word at B.
    step("atomics")?;
    ensure!(eb.mr.write(1 << 20, &0u64.to_le_bytes()));
    let t = Instant::now();
    let adds = 1000;
    for i in 0..adds {
        let r = [Sge {
            addr: ea.mr.addr() + (48 << 20),
            length: 8,
            lkey: ea.mr.lkey(),
        }];
        let op = SendOp::FetchAdd {
            remote_addr: eb.mr.addr() + (1 << 20),
            rkey: eb.mr.rkey(),
            add: 3,
        };
        ea.qp
            .post_send(&[SendWr::new(i as u64, op, &r)])
            .map_err(|(_, e)| e)?;
        wait(&ea.cq, 1)?;
        ensure!(
            ea.mr.load_u64(48 << 20) == Some(3 * i as u64),
            "fetch-and-add returned the wrong original value"
        );
    }
    let el = t.elapsed();
    ensure!(
        eb.mr.load_u64(1 << 20) == Some(3 * adds as u64),
        "the word at B is not 3 x {adds}"
    );
    rows.push(Row {
        op: "ATOMIC FETCH_ADD",
        size: "8 B".into(),
        count: adds,
        figure: format!("{:.1} µs each, final value verified", us(el) / adds as f64),
    });
    done()?;

    println!("\n{:<24} {:>8} {:>7}  result", "operation", "size", "count");
    println!("{}", "-".repeat(78));
    for r in &rows {
        println!("{:<24} {:>8} {:>7}  {}", r.op, r.size, r.count, r.figure);
    }
    let sa = ea.ctx.stats()?;
    let sb = eb.ctx.stats()?;
    println!(
        "\ndaemon A: {} packets sent, {} received, {} retransmissions, {} bad ICRC; daemon B: {} sent, {} received",
        counter(&sa, "sent_pkts"),
        counter(&sa, "rcvd_pkts"),
        counter(&sa, "completer_retry_err"),
        counter(&sa, "rcvd_icrc_err"),
        counter(&sb, "sent_pkts"),
        counter(&sb, "rcvd_pkts")
    );
    if std::env::var_os("XROCE_DEMO_COUNTERS").is_some() {
        for (side, stats) in [("A", &sa), ("B", &sb)] {
            let nonzero: Vec<String> = stats
                .iter()
                .filter(|(_, v)| *v != 0)
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            println!("daemon {side}: {}", nonzero.join(" "));
        }
    }
    drop((ea, eb));
    drop(hosts);
    println!(
        "lab torn down. Next: `cargo xtask bench` for the figures against raw AF_XDP and kernel UDP/TCP."
    );
    Ok(())
}

/// Waits for `n` completions of any kind on `cq`.
fn wait_kind(cq: &Cq, n: usize) -> Result<()> {
    wait(cq, n).map(|_| ())
}

fn step(name: &str) -> Result<()> {
    if xroce_lab::signals::interrupted() {
        bail!("interrupted");
    }
    print!("{name:<12} ... ");
    std::io::Write::flush(&mut std::io::stdout())?;
    Ok(())
}

fn done() -> Result<()> {
    println!("ok");
    Ok(())
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 * 8.0 / d.as_secs_f64() / 1e9
}
