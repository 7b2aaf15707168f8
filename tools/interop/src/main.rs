//! `xroce-interop` (run as `cargo xtask interop`): xroce against Linux rxe, both directions.

fn main() {
    let args = <xroce_interop::Args as clap::Parser>::parse();
    if let Err(e) = xroce_interop::run(&args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
