//! The ceiling: raw AF_XDP between two namespaces with `xsk-baseline` (no RoCEv2, no
//! transport), at the frame sizes of the xroce figures it is compared with.
//!
//! `xsk-baseline` builds its own two-namespace lab, configured like the bench's (veth, one
//! queue, the bench's MTU), attaches the same XDP program and pins its two ends to the cores it is
//! given. It prints one JSON line last, which is read here.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use super::report::{FloodPoint, PingPoint};

/// The largest frame `xsk-baseline` sends on a lab of MTU `mtu`: the MTU's frame, up to what
/// its ports take (one UMEM frame, or two with multi-buffer).
pub(crate) fn max_frame(mtu: u32) -> usize {
    let ports = if xroce_engine::daemon::needs_multi_buffer(mtu) {
        xroce_engine::umem::MULTI_BUFFER_CAPACITY
    } else {
        xroce_engine::umem::FRAME_CAPACITY
    };
    (mtu as usize + 14).min(ports)
}
/// The smallest: headers and its two-byte sequence number.
pub(crate) const MIN_FRAME: usize = 14 + 20 + 8 + 2;

/// A child process killed and reaped when dropped, whatever happened meanwhile.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SIGINT first: xsk-baseline then tears its lab down itself.
            // Safety: kill takes plain integers and touches no memory of ours.
            unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGINT) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.0.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Runs `xsk-baseline` with `args` and returns its JSON line.
fn run(bin: &Path, args: &[String], limit: Duration) -> Result<Value> {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let die_with_parent = || {
        // Safety: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT) };
        Ok(())
    };
    // Safety: the closure only makes one async-signal-safe system call.
    unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, die_with_parent) };
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut child = Reaped(child);
    let stdout = child.0.stdout.take().context("xsk-baseline's stdout")?;
    let stderr = child.0.stderr.take().context("xsk-baseline's stderr")?;
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.0.try_wait()? {
            break status;
        }
        if xroce_lab::signals::interrupted() {
            bail!("interrupted");
        }
        if Instant::now() > deadline {
            drop(child);
            bail!(
                "xsk-baseline {} took longer than {} s",
                args.join(" "),
                limit.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if !status.success() {
        bail!(
            "xsk-baseline {} failed ({status}):\n{}",
            args.join(" "),
            err.trim()
        );
    }
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("xsk-baseline printed no JSON line:\n{out}{err}"))?;
    serde_json::from_str(line).with_context(|| format!("xsk-baseline's JSON line: {line}"))
}

fn number(v: &Value, key: &str) -> Result<f64> {
    v.get(key)
        .and_then(Value::as_f64)
        .with_context(|| format!("xsk-baseline's JSON has no number {key:?}: {v}"))
}

fn common(a_core: Option<usize>, b_core: Option<usize>, frame: usize, mtu: u32) -> Vec<String> {
    let mut args = vec!["--mtu".to_owned(), mtu.to_string()];
    if let Some(c) = a_core {
        args.extend(["--a-core".into(), c.to_string()]);
    }
    if let Some(c) = b_core {
        args.extend(["--b-core".into(), c.to_string()]);
    }
    args.extend(["--size".into(), frame.to_string()]);
    args
}

/// Floods `frame`-byte frames for `secs`; the receiver's rate.
pub(crate) fn flood(
    bin: &Path,
    a_core: Option<usize>,
    b_core: Option<usize>,
    frame: usize,
    mtu: u32,
    secs: f64,
) -> Result<FloodPoint> {
    let mut args = common(a_core, b_core, frame, mtu);
    args.extend(["flood".into(), "--secs".into(), format!("{secs}")]);
    let v = run(bin, &args, Duration::from_secs_f64(secs + 60.0))?;
    let bps = number(&v, "rx_bps")?;
    Ok(FloodPoint {
        frame_bytes: frame,
        pps: number(&v, "rx_pps")?,
        bytes_per_sec: bps / 8.0,
        gbit_per_sec: bps / 1e9,
        secs: number(&v, "secs")?,
        sent: number(&v, "tx_frames")? as u64,
        received: number(&v, "rx_frames")? as u64,
    })
}

/// `count` one-frame round trips of `frame` bytes.
pub(crate) fn pingpong(
    bin: &Path,
    a_core: Option<usize>,
    b_core: Option<usize>,
    frame: usize,
    mtu: u32,
    count: usize,
) -> Result<PingPoint> {
    let mut args = common(a_core, b_core, frame, mtu);
    let warmup = (count / 10).clamp(1, 2000);
    args.extend([
        "pingpong".into(),
        "--count".into(),
        count.to_string(),
        "--warmup".into(),
        warmup.to_string(),
    ]);
    // A round trip takes microseconds, or milliseconds on a crowded machine.
    let limit = Duration::from_secs(60) + Duration::from_millis(count as u64);
    let v = run(bin, &args, limit)?;
    Ok(PingPoint {
        frame_bytes: frame,
        round_trips: number(&v, "round_trips")? as usize,
        min_us: number(&v, "rtt_min_us")?,
        median_us: number(&v, "rtt_median_us")?,
        p99_us: number(&v, "rtt_p99_us")?,
        p999_us: number(&v, "rtt_p999_us")?,
        max_us: number(&v, "rtt_max_us")?,
    })
}
