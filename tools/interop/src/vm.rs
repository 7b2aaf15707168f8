//! The peer VM: qemu running the image in a network namespace, its serial console in a
//! file, and a job channel over a virtio-9p share (see `tools/interop/init.sh`).

use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How to boot the VM.
#[derive(Debug, Clone)]
pub(crate) struct VmConfig {
    /// The network namespace qemu runs in (its tap is there).
    pub(crate) netns: String,
    /// The tap device (existing, up, on the bridge).
    pub(crate) tap: String,
    /// The guest's eth0 address (/24).
    pub(crate) ip: Ipv4Addr,
    /// The guest's eth0 MAC.
    pub(crate) mac: [u8; 6],
    /// The kernel.
    pub(crate) kernel: PathBuf,
    /// The initramfs (with `/init`).
    pub(crate) initrd: PathBuf,
    /// State directory: share, console log, qemu log.
    pub(crate) dir: PathBuf,
    /// Memory in MiB.
    pub(crate) memory_mib: u32,
    /// `-accel …` and `-cpu …` arguments.
    pub(crate) accel: Vec<String>,
}

/// What the guest reported when it came up.
#[derive(Debug, Clone)]
pub(crate) struct Ready {
    /// Index of rxe0's IPv4-mapped GID.
    pub(crate) gid_index: u32,
    /// Index of rxe0's global IPv6 GID, if it has one.
    pub(crate) ipv6_gid_index: Option<u32>,
    /// Index of rxe0's link-local IPv6 GID, if it has one.
    pub(crate) link_local_gid_index: Option<u32>,
    /// Guest uptime when ready, in seconds.
    pub(crate) uptime: String,
}

/// A running VM; powered off (or killed) when dropped.
#[derive(Debug)]
pub(crate) struct Vm {
    child: Option<Child>,
    dir: PathBuf,
}

/// The accelerator: KVM when this host has hardware virtualisation, TCG otherwise (a
/// paravirtualised `/dev/kvm`, `kvm_pvm`, cannot run a stock kernel at a usable speed).
/// `XROCE_INTEROP_ACCEL=kvm|tcg` forces one.
pub(crate) fn accel() -> (Vec<String>, &'static str) {
    let kvm = || vec!["-accel".into(), "kvm".into(), "-cpu".into(), "host".into()];
    let tcg = || vec!["-accel".into(), "tcg".into(), "-cpu".into(), "max".into()];
    match std::env::var("XROCE_INTEROP_ACCEL").as_deref() {
        Ok("kvm") => return (kvm(), "KVM"),
        Ok("tcg") => return (tcg(), "TCG"),
        _ => {}
    }
    let hardware =
        Path::new("/sys/module/kvm_intel").exists() || Path::new("/sys/module/kvm_amd").exists();
    if hardware
        && fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")
            .is_ok()
    {
        (kvm(), "KVM")
    } else {
        (tcg(), "TCG (emulated CPU: slow)")
    }
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.map(|b| format!("{b:02x}")).join(":")
}

impl Vm {
    /// Starts qemu; returns at once (see [`Vm::wait_ready`]).
    pub(crate) fn boot(cfg: &VmConfig) -> Result<Vm> {
        let share = cfg.dir.join("share");
        let _ = fs::remove_dir_all(&share);
        fs::create_dir_all(share.join("jobs"))?;
        fs::create_dir_all(share.join("out"))?;
        let log = fs::File::create(cfg.dir.join("qemu.log"))?;
        let append = format!(
            "console=ttyS0 loglevel=4 panic=-1 xroce.ip={}/24 xroce.mtu=1500",
            cfg.ip
        );
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &cfg.netns, "qemu-system-x86_64"])
            .args(["-name", "xroce-interop-peer"])
            .args(&cfg.accel)
            .args(["-m", &cfg.memory_mib.to_string(), "-smp", "1"])
            .args([
                "-nodefaults",
                "-no-user-config",
                "-display",
                "none",
                "-no-reboot",
            ])
            .arg("-kernel")
            .arg(&cfg.kernel)
            .arg("-initrd")
            .arg(&cfg.initrd)
            .args(["-append", &append])
            .args([
                "-netdev",
                &format!("tap,id=n0,ifname={},script=no,downscript=no", cfg.tap),
                "-device",
                &format!("virtio-net-pci,netdev=n0,mac={}", mac_text(cfg.mac)),
                "-fsdev",
                &format!(
                    "local,id=fs0,path={},security_model=none",
                    share.to_string_lossy()
                ),
                "-device",
                "virtio-9p-pci,fsdev=fs0,mount_tag=xroce",
                "-serial",
                &format!("file:{}", cfg.dir.join("console.log").to_string_lossy()),
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = cmd
            .spawn()
            .context("starting qemu-system-x86_64 (apt-get install qemu-system-x86)")?;
        Ok(Vm {
            child: Some(child),
            dir: cfg.dir.clone(),
        })
    }

    fn share(&self) -> PathBuf {
        self.dir.join("share")
    }

    /// The last lines of the serial console.
    pub(crate) fn console_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(self.dir.join("console.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn exited(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "qemu exited ({status}): {}\n{}",
                fs::read_to_string(self.dir.join("qemu.log")).unwrap_or_default(),
                self.console_tail(20)
            )),
            _ => None,
        }
    }

    /// Waits until the guest has rxe0 up.
    pub(crate) fn wait_ready(&mut self, timeout: Duration) -> Result<Ready> {
        let deadline = Instant::now() + timeout;
        let path = self.share().join("ready");
        loop {
            if let Ok(text) = fs::read_to_string(&path) {
                let field = |k: &str| {
                    text.lines()
                        .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
                        .unwrap_or("")
                        .to_owned()
                };
                let gid_index = field("gid_index").parse().with_context(|| {
                    format!(
                        "the guest found no IPv4 GID on rxe0:\n{}",
                        self.console_tail(20)
                    )
                })?;
                return Ok(Ready {
                    gid_index,
                    ipv6_gid_index: field("gid6_index").parse().ok(),
                    link_local_gid_index: field("gidll_index").parse().ok(),
                    uptime: field("uptime"),
                });
            }
            if let Some(why) = self.exited() {
                bail!("the VM died while booting: {why}");
            }
            if Instant::now() > deadline {
                bail!(
                    "the VM was not ready after {timeout:?}; console:\n{}",
                    self.console_tail(20)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts `script` (busybox sh) in the guest.
    pub(crate) fn spawn(&self, script: &str) -> Result<Job> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = format!("j{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let jobs = self.share().join("jobs");
        let tmp = jobs.join(format!(".{id}.tmp"));
        fs::write(&tmp, format!("cd /tmp\n{script}\n"))?;
        fs::rename(&tmp, jobs.join(format!("{id}.sh")))?;
        Ok(Job {
            id,
            out: self.share().join("out"),
            script: script.to_owned(),
        })
    }

    /// Powers the guest off (then kills qemu if it lingers).
    pub(crate) fn shutdown(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = fs::write(self.share().join("poweroff"), b"");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A job started in the guest.
#[derive(Debug)]
pub(crate) struct Job {
    id: String,
    out: PathBuf,
    script: String,
}

/// A job that has exited.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Its exit status (`None`: it did not finish in time and was killed).
    pub status: Option<i32>,
    /// What it printed.
    pub output: String,
}

impl Finished {
    /// Exit status 0.
    pub fn ok(&self) -> bool {
        self.status == Some(0)
    }
}

impl Job {
    fn file(&self, ext: &str) -> PathBuf {
        self.out.join(format!("{}.{ext}", self.id))
    }

    /// What it printed so far.
    pub(crate) fn output(&self) -> String {
        fs::read_to_string(self.file("log")).unwrap_or_default()
    }

    /// Its exit status, if it has exited.
    pub(crate) fn status(&self) -> Option<i32> {
        fs::read_to_string(self.file("status"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Waits for it to exit; kills it after `timeout`.
    pub(crate) fn wait(&self, vm: &mut Vm, timeout: Duration) -> Result<Finished> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.status() {
                return Ok(Finished {
                    status: Some(status),
                    output: self.output(),
                });
            }
            if let Some(why) = vm.exited() {
                bail!("the VM died during `{}`: {why}", self.script);
            }
            if Instant::now() > deadline {
                self.kill(vm);
                return Ok(Finished {
                    status: None,
                    output: self.output(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills its process group (SIGKILL) and waits briefly for it to be reaped.
    pub(crate) fn kill(&self, vm: &mut Vm) {
        let Ok(pid) = fs::read_to_string(self.file("pid")) else {
            return;
        };
        let pid = pid.trim();
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            return;
        }
        if let Ok(killer) = vm.spawn(&format!("kill -9 -{pid} 2>/dev/null; true")) {
            let deadline = Instant::now() + Duration::from_secs(10);
            while killer.status().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
