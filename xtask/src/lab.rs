//! `cargo xtask lab`: a two-namespace lab to experiment in by hand, held until Ctrl-C.

use anyhow::{Context, Result};
use xroce_lab::{Lab, LabConfig};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Put a router namespace between the two hosts.
    #[arg(long)]
    router: bool,
    /// MTU of the veth interfaces.
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// Queues per veth interface.
    #[arg(long, default_value_t = 1)]
    queues: u32,
    /// Only remove the namespaces that labs of dead processes left behind, then exit.
    #[arg(long)]
    cleanup: bool,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    // First, before any thread exists: Ctrl-C and SIGTERM tear the lab down.
    xroce_lab::signals::install().context("installing the Ctrl-C handler")?;
    let removed = xroce_lab::cleanup_stale().context("removing stale labs")?;
    if !removed.is_empty() {
        eprintln!("removed stale lab namespaces: {}", removed.join(" "));
    }
    if args.cleanup {
        return Ok(());
    }
    let config = LabConfig {
        mtu: args.mtu,
        router: args.router,
        queues: args.queues,
    };
    let lab = Lab::new(&config).context("building the lab (needs root and iproute2)")?;
    let mac = |m: [u8; 6]| m.map(|b| format!("{b:02x}")).join(":");
    for host in [&lab.a, &lab.b] {
        println!(
            "{}: {} {} {} {}",
            host.netns,
            host.interface,
            host.ipv4,
            host.ipv6,
            mac(host.mac)
        );
    }
    if let Some(router) = &lab.router {
        println!(
            "{}: router ({} <-> {})",
            router.netns, router.toward_a, router.toward_b
        );
    }
    println!("try: ip netns exec {} ping {}", lab.a.netns, lab.b.ipv4);
    println!("press Ctrl-C to tear the lab down");
    while !xroce_lab::signals::interrupted() {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Ok(())
}
