//! `xroce-lab` (run as `cargo xtask lab`): labs of network namespaces to experiment in by
//! hand.
//!
//! - `cargo xtask lab up` builds the lab `xroce-a` / `xroce-b` (and `xroce-r` with
//!   `--router`) with fixed addresses, prints them and how to start `xroced` in each, and
//!   exits, leaving the lab in place. A second `up` fails and names the lab that exists.
//! - `cargo xtask lab down` removes it: the namespaces, with the interfaces in them and the
//!   processes running there (daemons included). It also removes what an interrupted `up`
//!   left, and says so when there is nothing to remove.
//! - `cargo xtask lab` (no subcommand) builds a lab with per-process names and holds it
//!   until Ctrl-C.

use anyhow::{Context, Result};
use xroce_lab::{FIXED_PREFIX, Lab, LabConfig};

#[derive(Debug, clap::Parser)]
#[command(
    name = "cargo xtask lab",
    about = "Two-namespace veth labs to experiment in"
)]
struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    /// Put a router namespace between the two hosts.
    #[arg(long, global = true)]
    router: bool,
    /// MTU of the veth interfaces.
    #[arg(long, global = true, default_value_t = 1500)]
    mtu: u32,
    /// Queues per veth interface.
    #[arg(long, global = true, default_value_t = 1)]
    queues: u32,
    /// Only remove the namespaces that labs of dead processes left behind, then exit.
    #[arg(long)]
    cleanup: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Build the lab xroce-a/xroce-b (xroce-r with --router), print it, and leave it up.
    Up,
    /// Remove the lab `up` made (and the processes running in it).
    Down,
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
        anyhow::bail!("labs need root (network namespaces): run `sudo cargo xtask lab …`");
    }
    let config = LabConfig {
        mtu: args.mtu,
        router: args.router,
        queues: args.queues,
    };
    match args.action {
        Some(Action::Up) => return up(&config),
        Some(Action::Down) => return down(),
        None => {}
    }
    // First, before any thread exists: Ctrl-C and SIGTERM tear the lab down.
    xroce_lab::signals::install().context("installing the Ctrl-C handler")?;
    let removed = xroce_lab::cleanup_stale().context("removing stale labs")?;
    if !removed.is_empty() {
        eprintln!("removed stale lab namespaces: {}", removed.join(" "));
    }
    if args.cleanup {
        return Ok(());
    }
    let lab = Lab::new(&config).context("building the lab (needs root and iproute2)")?;
    describe(&lab);
    println!("try: ip netns exec {} ping {}", lab.a.netns, lab.b.ipv4);
    println!("press Ctrl-C to tear the lab down");
    while !xroce_lab::signals::interrupted() {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Ok(())
}

fn mac(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

fn describe(lab: &Lab) {
    for host in [&lab.a, &lab.b] {
        println!(
            "{}: {} {}/24 {}/64 {}",
            host.netns,
            host.interface,
            host.ipv4,
            host.ipv6,
            mac(host.mac)
        );
    }
    if let Some(router) = &lab.router {
        println!(
            "{}: router, {} 10.77.1.254/24 toward {}, {} 10.77.2.254/24 toward {}",
            router.netns, router.toward_a, lab.a.netns, router.toward_b, lab.b.netns
        );
    }
}

fn up(config: &LabConfig) -> Result<()> {
    // Ctrl-C half-way through deletes what was made so far.
    xroce_lab::signals::install().context("installing the Ctrl-C handler")?;
    let mut lab = Lab::new_named(FIXED_PREFIX, config)
        .context("building the lab (needs root and iproute2)")?;
    // Kept before anything is printed: the lab stays up even if stdout is gone.
    lab.keep();
    println!("lab up:");
    describe(&lab);
    let (a, b) = (&lab.a, &lab.b);
    println!();
    println!(
        "start a daemon on each host (as root, after cargo build --release -p xroce-engine -p xroce-pingpong):"
    );
    for h in [a, b] {
        println!(
            "  ip netns exec {} target/release/xroced --netdev {} &",
            h.netns, h.interface
        );
    }
    println!("then, for example:");
    println!("  ip netns exec {} ping -c 3 {}", a.netns, b.ipv4);
    println!(
        "  ip netns exec {} target/release/xroced stat xroce0 --qp",
        a.netns
    );
    println!(
        "  ip netns exec {} target/release/xroce-pingpong -g 0 &",
        b.netns
    );
    println!(
        "  ip netns exec {} target/release/xroce-pingpong -g 0 {}",
        a.netns, b.ipv4
    );
    println!("remove it (and the daemons in it) with: cargo xtask lab down");
    Ok(())
}

fn down() -> Result<()> {
    let removed = xroce_lab::remove_named(FIXED_PREFIX).context("removing the lab")?;
    if removed.is_empty() {
        println!("no lab to remove ({FIXED_PREFIX}-a, -b, -r do not exist)");
    } else {
        println!("removed {}", removed.join(" "));
    }
    Ok(())
}
