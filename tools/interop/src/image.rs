//! The peer's boot image: Debian's stock kernel and an initramfs with busybox, rdma-core
//! (libibverbs with the rxe provider, librdmacm), ibverbs-utils, rdmacm-utils, perftest and
//! iproute2's `rdma`, built from Debian packages alone.
//!
//! The packages come from `apt-get download`; the shared libraries the programs need are
//! found by reading their `DT_NEEDED` entries, and the packages that hold missing ones are
//! taken from the needing package's `Depends` (those in Debian's `libs` section). Kernel
//! modules and their dependencies come from each module's `.modinfo`. The result,
//! `vmlinuz` and `base.cpio` (uncompressed: the emulated CPU would spend seconds inflating
//! a compressed one), is cached; the guest's `/init` is appended at every boot, so editing
//! it needs no rebuild.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::io::{BufWriter, Write as _};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{cpio, elf};

/// Bump when the image's recipe changes, so that cached images are rebuilt.
const RECIPE: &str = "xroce-interop-image 2";

const MULTIARCH: &str = "x86_64-linux-gnu";

/// The packages the image is made of (the kernel is added: what `linux-image-amd64`
/// depends on).
const PACKAGES: &[&str] = &[
    "busybox-static",
    "libc6",
    "libgcc-s1",
    "libibverbs1",
    "ibverbs-providers",
    "librdmacm1",
    "ibverbs-utils",
    "rdmacm-utils",
    "perftest",
    "iproute2",
    "ucx-utils",
    "libucx0",
];

/// Kernel modules to load, in this order (their dependencies first). `virtio_pci` and
/// `virtio_net` for the network, the 9p ones for the host share, `rdma_rxe` for Soft-RoCE
/// (it finds its CRC32 through the crypto API, hence `crc32_generic`), `rdma_ucm` for
/// librdmacm.
const MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_net",
    "9pnet_virtio",
    "9p",
    "crc32_generic",
    "rdma_rxe",
    "rdma_ucm",
];

/// Libraries loaded with `dlopen` rather than linked: glibc loads `libgcc_s` to unwind
/// threads on exit and cancellation.
const DLOPENED: &[&str] = &["libgcc_s.so.1"];

/// A built image.
#[derive(Debug, Clone)]
pub(crate) struct Image {
    /// The kernel.
    pub(crate) kernel: PathBuf,
    /// The initramfs without `/init`.
    pub(crate) base: PathBuf,
    /// Kernel release (`6.1.0-…-amd64`).
    pub(crate) release: String,
    /// One line per package: name and version.
    pub(crate) packages: Vec<String>,
}

fn log(msg: &str) {
    eprintln!("[interop] {msg}");
}

fn command_output(cmd: &mut Command) -> Result<String> {
    let text = format!("{cmd:?}").replace('"', "");
    let out = cmd.output().with_context(|| format!("running {text}"))?;
    if !out.status.success() {
        bail!(
            "{text} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Returns the cached image in `cache`, building it first if it is missing or `rebuild`.
pub(crate) fn ensure(cache: &Path, rebuild: bool) -> Result<Image> {
    // Two runs at once share the cache: one builds, the other waits for it.
    fs::create_dir_all(cache)?;
    let _lock = Lock::take(&cache.join("image.lock"))?;
    let dir = cache.join("image");
    let image = Image {
        kernel: dir.join("vmlinuz"),
        base: dir.join("base.cpio"),
        release: String::new(),
        packages: Vec::new(),
    };
    let recipe = dir.join("recipe");
    let manifest = dir.join("manifest.txt");
    let cached = !rebuild
        && image.kernel.is_file()
        && image.base.is_file()
        && fs::read_to_string(&recipe).is_ok_and(|r| r == RECIPE);
    if !cached {
        build(cache, &dir)?;
        fs::write(&recipe, RECIPE)?;
    }
    let text =
        fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let release = text
        .lines()
        .find_map(|l| l.strip_prefix("kernel release: "))
        .unwrap_or("?")
        .to_owned();
    let packages = text
        .lines()
        .filter_map(|l| l.strip_prefix("package: "))
        .map(str::to_owned)
        .collect();
    Ok(Image {
        release,
        packages,
        ..image
    })
}

/// An exclusive `flock` on a file, released when dropped (or when the process dies).
#[derive(Debug)]
struct Lock {
    /// Closing it releases the lock.
    _file: fs::File,
}

impl Lock {
    fn take(path: &Path) -> Result<Lock> {
        use std::os::fd::AsRawFd as _;
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        // Safety: flock takes a descriptor we own and an integer; it touches no memory.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("locking {}", path.display()));
        }
        Ok(Lock { _file: file })
    }
}

/// The packages of Debian's stock kernel image.
fn kernel_package() -> Result<String> {
    let out = command_output(Command::new("apt-cache").args(["depends", "linux-image-amd64"]))?;
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-"))
        .map(str::to_owned)
        .context("apt-cache: linux-image-amd64 depends on no linux-image-* package")
}

fn apt_update() -> Result<()> {
    log("apt-get update");
    command_output(
        Command::new("apt-get")
            .args(["update", "-qq"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
    .map(drop)
}

/// The downloaded `.deb` of `pkg` in `debs`, if any.
fn deb_of(debs: &Path, pkg: &str) -> Option<PathBuf> {
    let prefix = format!("{pkg}_");
    let mut found: Vec<PathBuf> = fs::read_dir(debs)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
        })
        .collect();
    found.sort();
    found.pop()
}

/// Downloads the packages of `pkgs` not yet in `debs`.
fn download(debs: &Path, pkgs: &[String]) -> Result<()> {
    let missing: Vec<&String> = pkgs.iter().filter(|p| deb_of(debs, p).is_none()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
    log(&format!("apt-get download {}", names.join(" ")));
    let attempt = || {
        command_output(
            Command::new("apt-get")
                // Downloading as root into a directory the _apt user cannot write is fine.
                .args(["-o", "APT::Sandbox::User=root", "download", "-qq"])
                .args(&names)
                .current_dir(debs),
        )
    };
    if attempt().is_err() {
        // Stale or empty package lists: refresh them once.
        apt_update()?;
        attempt()?;
    }
    Ok(())
}

/// A `/`-rooted path with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// The extracted packages: one directory per package under `stage`.
struct Stage {
    roots: Vec<(String, PathBuf)>,
}

impl Stage {
    /// Finds `path` (absolute, in the image's terms) in the packages, following symbolic
    /// links (absolute ones across packages); returns the package and the host file.
    fn find(&self, path: &Path) -> Option<(String, PathBuf)> {
        let mut path = normalize(path);
        'follow: for _ in 0..16 {
            for (pkg, root) in &self.roots {
                let host = root.join(path.strip_prefix("/").ok()?);
                let Ok(meta) = fs::symlink_metadata(&host) else {
                    continue;
                };
                if meta.file_type().is_symlink() {
                    let target = fs::read_link(&host).ok()?;
                    path = if target.is_absolute() {
                        normalize(&target)
                    } else {
                        normalize(&path.parent()?.join(target))
                    };
                    continue 'follow;
                }
                return meta.is_file().then(|| (pkg.clone(), host));
            }
            return None;
        }
        None
    }

    /// Finds a shared library by soname in the library directories.
    fn library(&self, soname: &str) -> Option<(String, PathBuf)> {
        [
            format!("/lib/{MULTIARCH}"),
            format!("/usr/lib/{MULTIARCH}"),
            "/lib64".into(),
            "/usr/lib64".into(),
            "/lib".into(),
            "/usr/lib".into(),
        ]
        .iter()
        .find_map(|d| self.find(&Path::new(d).join(soname)))
    }

    /// Files (not directories) directly in `dir` of package `pkg`, by name.
    fn list(&self, pkg: &str, dir: &str) -> Vec<String> {
        let Some((_, root)) = self.roots.iter().find(|(p, _)| p == pkg) else {
            return Vec::new();
        };
        let mut names: Vec<String> = fs::read_dir(root.join(dir.trim_start_matches('/')))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

fn extract(debs: &Path, stage: &Path, pkg: &str) -> Result<PathBuf> {
    let root = stage.join(pkg);
    if root.is_dir() {
        return Ok(root);
    }
    let deb = deb_of(debs, pkg).with_context(|| format!("{pkg}: not downloaded"))?;
    let tmp = stage.join(format!(".{pkg}.tmp"));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    command_output(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tmp))?;
    fs::rename(&tmp, &root)?;
    Ok(root)
}

/// Shared-library packages that `pkg` depends on directly (Debian section `libs`).
fn library_dependencies(pkg: &str) -> Result<Vec<String>> {
    let out = command_output(Command::new("apt-cache").args(["depends", "--important", pkg]))?;
    let deps: BTreeSet<String> = out
        .lines()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches('|');
            l.strip_prefix("Depends: ")
                .or_else(|| l.strip_prefix("PreDepends: "))
        })
        .filter(|d| !d.starts_with('<'))
        .map(|d| d.trim().to_owned())
        .collect();
    let mut libs = Vec::new();
    for d in deps {
        let show =
            command_output(Command::new("apt-cache").args(["show", "--no-all-versions", &d]))
                .unwrap_or_default();
        if show
            .lines()
            .any(|l| l == "Section: libs" || l == "Section: oldlibs")
        {
            libs.push(d);
        }
    }
    Ok(libs)
}

fn build(cache: &Path, out_dir: &Path) -> Result<()> {
    for tool in ["apt-get", "apt-cache", "dpkg-deb"] {
        if Command::new(tool).arg("--version").output().is_err() {
            bail!(
                "{tool} is missing: the peer image is built from Debian packages (Debian host needed)"
            );
        }
    }
    let debs = cache.join("debs");
    let stage_dir = cache.join("stage");
    fs::create_dir_all(&debs)?;
    let _ = fs::remove_dir_all(&stage_dir);
    fs::create_dir_all(&stage_dir)?;
    if Command::new("apt-cache")
        .args(["show", "linux-image-amd64"])
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        apt_update()?;
    }
    let kpkg = kernel_package()?;
    log(&format!(
        "building the rxe peer image from {kpkg} and Debian's rdma-core"
    ));
    let mut pkgs: Vec<String> = PACKAGES.iter().map(|s| s.to_string()).collect();
    pkgs.push(kpkg.clone());
    download(&debs, &pkgs)?;
    let mut stage = Stage { roots: Vec::new() };
    for p in &pkgs {
        stage
            .roots
            .push((p.clone(), extract(&debs, &stage_dir, p)?));
    }

    // Programs and plugins wanted in the image, as image paths.
    let mut wanted: Vec<(String, String)> = Vec::new(); // (image dir, name)
    for name in stage.list("ibverbs-utils", "/usr/bin") {
        wanted.push(("/usr/bin".into(), name));
    }
    for name in stage.list("perftest", "/usr/bin") {
        if name.starts_with("ib_") {
            wanted.push(("/usr/bin".into(), name));
        }
    }
    for name in stage.list("rdmacm-utils", "/usr/bin") {
        wanted.push(("/usr/bin".into(), name));
    }
    wanted.push(("/usr/bin".into(), "rdma".into()));
    for name in ["ucx_perftest", "ucx_info"] {
        wanted.push(("/usr/bin".into(), name.into()));
    }
    // UCX loads its transports (`libuct_ib`, `libuct_rdmacm`, …) from `ucx/` beside
    // `libucs`, by the soname's version suffix.
    let ucx_modules = format!("/usr/lib/{MULTIARCH}/ucx");
    for name in stage.list("libucx0", &ucx_modules) {
        if name.ends_with(".so.0") {
            wanted.push((ucx_modules.clone(), name));
        }
    }
    let providers = format!("/usr/lib/{MULTIARCH}/libibverbs");
    for name in stage.list("ibverbs-providers", &providers) {
        if name.starts_with("librxe-") {
            wanted.push((providers.clone(), name));
        }
    }

    // The library closure, fetching packages for what is missing.
    let mut libs: BTreeMap<String, PathBuf> = BTreeMap::new();
    for round in 0.. {
        libs.clear();
        let mut missing: BTreeMap<String, String> = BTreeMap::new(); // soname -> needing pkg
        let mut queue: VecDeque<(String, PathBuf)> = VecDeque::new();
        for (dir, name) in &wanted {
            let found = stage
                .find(&Path::new(dir).join(name))
                .with_context(|| format!("{dir}/{name} is in no package"))?;
            queue.push_back(found);
        }
        for so in DLOPENED {
            let found = stage
                .library(so)
                .with_context(|| format!("{so} is in no package"))?;
            libs.insert(so.to_string(), found.1.clone());
            queue.push_back(found);
        }
        let mut seen = BTreeSet::new();
        while let Some((pkg, file)) = queue.pop_front() {
            if !seen.insert(file.clone()) {
                continue;
            }
            let bytes = fs::read(&file)?;
            let needed =
                elf::needed(&bytes).with_context(|| format!("reading {}", file.display()))?;
            for so in needed {
                // A library the image installs by name elsewhere (UCX's modules need
                // each other from their own directory).
                if libs.contains_key(&so) || wanted.iter().any(|(_, name)| *name == so) {
                    continue;
                }
                match stage.library(&so) {
                    Some(found) => {
                        libs.insert(so, found.1.clone());
                        queue.push_back(found);
                    }
                    None => {
                        missing.entry(so).or_insert_with(|| pkg.clone());
                    }
                }
            }
        }
        if missing.is_empty() {
            break;
        }
        if round >= 8 {
            bail!("shared libraries not found in any package: {missing:?}");
        }
        let needers: BTreeSet<&String> = missing.values().collect();
        let mut new = Vec::new();
        for p in needers {
            for d in library_dependencies(p)? {
                if !stage.roots.iter().any(|(q, _)| *q == d) && !new.contains(&d) {
                    new.push(d);
                }
            }
        }
        if new.is_empty() {
            bail!("shared libraries not found, and no package provides them: {missing:?}");
        }
        download(&debs, &new)?;
        for p in new {
            let root = extract(&debs, &stage_dir, &p)?;
            stage.roots.push((p, root));
        }
    }

    // Kernel modules.
    let (kernel_root, release) = {
        let (_, root) = stage
            .roots
            .iter()
            .find(|(p, _)| *p == kpkg)
            .context("kernel package not extracted")?;
        let modules = root.join("lib/modules");
        let release = fs::read_dir(&modules)?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .next()
            .with_context(|| format!("no kernel release in {}", modules.display()))?;
        (root.clone(), release)
    };
    let moddir = kernel_root.join("lib/modules").join(&release);
    let modules = module_order(&moddir)?;

    // Write the archive.
    fs::create_dir_all(out_dir)?;
    let tmp = out_dir.join("base.cpio.tmp");
    let file = fs::File::create(&tmp)?;
    let mut w = cpio::Writer::new(BufWriter::new(file));
    for d in [
        "/dev",
        "/proc",
        "/sys",
        "/tmp",
        "/run",
        "/root",
        "/share",
        "/etc",
        "/etc/libibverbs.d",
        "/etc/xroce",
        "/usr",
        "/usr/bin",
        "/usr/lib",
        "/usr/lib64",
    ] {
        w.dir(d)?;
    }
    w.dir(&format!("/usr/lib/{MULTIARCH}"))?;
    w.dir(&providers)?;
    w.dir(&format!("/usr/lib/{MULTIARCH}/ucx"))?;
    for (link, target) in [
        ("/bin", "usr/bin"),
        ("/sbin", "usr/bin"),
        ("/usr/sbin", "bin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
    ] {
        w.symlink(link, target)?;
    }
    w.char_device("/dev/console", 0o600, 5, 1)?;
    w.char_device("/dev/null", 0o666, 1, 3)?;
    let mut in_bin = BTreeSet::new();
    for (dir, name) in &wanted {
        let (_, host) = stage
            .find(&Path::new(dir).join(name))
            .context("a wanted file vanished")?;
        let to = if dir == "/usr/bin" {
            in_bin.insert(name.clone());
            format!("/usr/bin/{name}")
        } else {
            format!("{dir}/{name}")
        };
        w.file(&to, 0o755, &fs::read(&host)?)?;
    }
    for (so, host) in &libs {
        w.file(
            &format!("/usr/lib/{MULTIARCH}/{so}"),
            0o755,
            &fs::read(host)?,
        )?;
    }
    let (_, loader) = stage
        .find(Path::new("/lib64/ld-linux-x86-64.so.2"))
        .context("the dynamic loader is in no package")?;
    w.file("/usr/lib64/ld-linux-x86-64.so.2", 0o755, &fs::read(loader)?)?;
    let (_, rxe_driver) = stage
        .find(Path::new("/etc/libibverbs.d/rxe.driver"))
        .context("ibverbs-providers has no rxe.driver")?;
    w.file(
        "/etc/libibverbs.d/rxe.driver",
        0o644,
        &fs::read(rxe_driver)?,
    )?;
    // busybox and its applets (real programs of the same name win).
    let (_, busybox) = stage
        .find(Path::new("/bin/busybox"))
        .context("busybox-static has no /bin/busybox")?;
    w.file("/usr/bin/busybox", 0o755, &fs::read(&busybox)?)?;
    let applets = command_output(Command::new(&busybox).arg("--list"))?;
    for a in applets.lines().map(str::trim).filter(|a| !a.is_empty()) {
        if !in_bin.contains(a) && a != "busybox" {
            w.symlink(&format!("/usr/bin/{a}"), "busybox")?;
        }
    }
    // Modules, in load order.
    let mut dirs = BTreeSet::new();
    let mut order = String::new();
    for rel in &modules {
        let image_path = format!("/usr/lib/modules/{release}/{rel}");
        let mut d = Path::new(&image_path).parent();
        let mut chain = Vec::new();
        while let Some(p) = d {
            if p == Path::new("/usr/lib") {
                break;
            }
            chain.push(p.to_path_buf());
            d = p.parent();
        }
        for p in chain.into_iter().rev() {
            if dirs.insert(p.clone()) {
                w.dir(&p.to_string_lossy())?;
            }
        }
        w.file(&image_path, 0o644, &fs::read(moddir.join(rel))?)?;
        order.push_str(&image_path);
        order.push('\n');
    }
    w.file("/etc/xroce/modules", 0o644, order.as_bytes())?;
    w.file("/etc/passwd", 0o644, b"root:x:0:0:root:/root:/bin/sh\n")?;
    w.file("/etc/group", 0o644, b"root:x:0:\n")?;
    w.file("/etc/hosts", 0o644, b"127.0.0.1 localhost\n")?;
    w.finish()?;
    fs::copy(
        kernel_root.join(format!("boot/vmlinuz-{release}")),
        out_dir.join("vmlinuz"),
    )
    .with_context(|| format!("{kpkg} has no boot/vmlinuz-{release}"))?;
    fs::rename(&tmp, out_dir.join("base.cpio"))?;

    let mut manifest = String::new();
    manifest.push_str(&format!("kernel release: {release}\n"));
    for (p, _) in &stage.roots {
        let deb = deb_of(&debs, p).context("package without .deb")?;
        let version = command_output(
            Command::new("dpkg-deb")
                .args(["-f"])
                .arg(&deb)
                .arg("Version"),
        )?;
        manifest.push_str(&format!("package: {p} {}\n", version.trim()));
    }
    for m in &modules {
        manifest.push_str(&format!("module: {m}\n"));
    }
    for so in libs.keys() {
        manifest.push_str(&format!("library: {so}\n"));
    }
    fs::write(out_dir.join("manifest.txt"), manifest)?;
    let size = fs::metadata(out_dir.join("base.cpio"))?.len();
    log(&format!(
        "image ready: kernel {release}, initramfs {} MiB, {} libraries, {} modules",
        size >> 20,
        libs.len(),
        modules.len()
    ));
    // The extracted packages (mostly the kernel's 4000 modules) are not needed any more.
    let _ = fs::remove_dir_all(&stage_dir);
    Ok(())
}

/// The `.ko` files (relative to `moddir`) to load for [`MODULES`], dependencies first.
/// Modules built into the kernel are skipped.
fn module_order(moddir: &Path) -> Result<Vec<String>> {
    let mut by_name: BTreeMap<String, String> = BTreeMap::new();
    let mut stack = vec![moddir.join("kernel")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let e = e?;
            let p = e.path();
            if e.file_type()?.is_dir() {
                stack.push(p);
            } else if let Some(n) = p.file_name().and_then(|n| n.to_str())
                && let Some(stem) = n.strip_suffix(".ko")
            {
                let rel = p.strip_prefix(moddir)?.to_string_lossy().into_owned();
                by_name.insert(stem.replace('-', "_"), rel);
            }
        }
    }
    let builtin: BTreeSet<String> = fs::read_to_string(moddir.join("modules.builtin"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            Path::new(l)
                .file_name()?
                .to_str()?
                .strip_suffix(".ko")
                .map(str::to_owned)
        })
        .map(|n| n.replace('-', "_"))
        .collect();
    let mut order = Vec::new();
    let mut done = BTreeSet::new();
    fn visit(
        name: &str,
        moddir: &Path,
        by_name: &BTreeMap<String, String>,
        builtin: &BTreeSet<String>,
        done: &mut BTreeSet<String>,
        order: &mut Vec<String>,
        depth: usize,
    ) -> Result<()> {
        let name = name.replace('-', "_");
        if depth > 32 || !done.insert(name.clone()) {
            return Ok(());
        }
        let Some(rel) = by_name.get(&name) else {
            if builtin.contains(&name) {
                return Ok(());
            }
            bail!("kernel module {name} is neither a module nor built in");
        };
        let info = elf::modinfo(&fs::read(moddir.join(rel))?)
            .with_context(|| format!("reading the .modinfo of {rel}"))?;
        for (k, v) in &info {
            if k == "depends" {
                for dep in v.split(',').filter(|d| !d.is_empty()) {
                    visit(dep, moddir, by_name, builtin, done, order, depth + 1)?;
                }
            }
        }
        order.push(rel.clone());
        Ok(())
    }
    for m in MODULES {
        visit(m, moddir, &by_name, &builtin, &mut done, &mut order, 0)?;
    }
    Ok(order)
}

/// Writes the initramfs to boot: the cached base plus `/init`.
pub(crate) fn initrd(image: &Image, init: &[u8], to: &Path) -> Result<()> {
    let mut out = BufWriter::new(fs::File::create(to)?);
    let mut base = fs::File::open(&image.base)?;
    std::io::copy(&mut base, &mut out)?;
    let mut w = cpio::Writer::new(out);
    w.file("/init", 0o755, init)?;
    let mut out = w.finish()?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_resolves_dots() {
        assert_eq!(
            normalize(Path::new("/lib/x86_64-linux-gnu/../../usr/./lib/a.so")),
            PathBuf::from("/usr/lib/a.so")
        );
        assert_eq!(normalize(Path::new("/../..")), PathBuf::from("/"));
    }
}
