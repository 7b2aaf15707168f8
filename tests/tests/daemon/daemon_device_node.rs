//! `/dev/infiniband/uverbs-<device>`: there, read-write for every user, while a daemon of
//! that name runs in any namespace; gone when the last one stops.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use xroce_lab::daemons::{serving, xroced};
use xroce_lab::{Lab, LabConfig, Side, require_root};

/// Starts `xroced --name name` on `side` and waits until it serves.
fn start(lab: &Lab, side: Side, name: &str) -> Child {
    let bin = xroced().unwrap().to_string_lossy().into_owned();
    let iface = lab.host(side).interface.clone();
    let child = lab
        .command(side, &[&bin, "--netdev", &iface, "--name", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !lab.run_in(side, || serving(name)).unwrap() {
        assert!(Instant::now() < deadline, "xroced {name} did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn stop(mut child: Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn the_device_node_lives_as_long_as_a_daemon_of_its_name() {
    require_root();
    // A name no other test uses, so that no other daemon holds its node.
    let name = format!("xrnode{}", std::process::id() % 100_000);
    let node = Path::new("/dev/infiniband").join(format!("uverbs-{name}"));
    let lab = Lab::new(&LabConfig::default()).unwrap();
    let first = start(&lab, Side::A, &name);
    // The daemon makes it right after it claims its name (which `start` waits for).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !node.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let meta = std::fs::metadata(&node).expect("the node exists while the daemon runs");
    assert!(meta.file_type().is_char_device(), "{meta:?}");
    assert_eq!(meta.permissions().mode() & 0o777, 0o666);
    assert_eq!(meta.rdev(), libc::makedev(1, 3), "/dev/null's numbers");
    // The same name in the other namespace shares it.
    let second = start(&lab, Side::B, &name);
    stop(first);
    assert!(node.exists(), "still used by the other namespace's daemon");
    stop(second);
    assert!(!node.exists(), "the last daemon of the name removed it");
}
