//! One run of the deterministic two-host simulation, chosen by the environment: `SEED`,
//! `LOSS` (0.0–1.0) and `OPS`, for reproducing or exploring a case of `tests/sim`:
//!
//! ```sh
//! SEED=7 LOSS=0.2 OPS=20000 cargo run --release -p xroce-transport --example sim_run
//! ```

#[path = "../tests/sim/simulation/mod.rs"]
#[allow(dead_code, reason = "shared with the sim tests")]
mod simulation;

use simulation::{SimConfig, run};

fn main() {
    let env = |k: &str| std::env::var(k).ok();
    let seed = env("SEED").and_then(|s| s.parse().ok()).unwrap_or(0);
    let loss = env("LOSS").and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let ops = env("OPS").and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let cfg = SimConfig::lossy(seed, ops, loss);
    match run(cfg) {
        Ok(report) => println!("{report:?}"),
        Err(e) => {
            eprintln!("{cfg:?}: {e}");
            std::process::exit(1);
        }
    }
}
