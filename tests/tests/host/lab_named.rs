//! Named labs, as `cargo xtask lab up` and `down` use them: fixed names, an error naming the
//! lab that exists, a lab that outlives its value when kept, and a removal that also clears
//! what an interrupted build left. (The test uses its own prefix, never `xroce`, so that it
//! cannot touch a lab someone is using.)

use std::process::Command;

use xroce_lab::{Lab, LabConfig, LabError, netns, remove_named, require_root};

/// Removes the test's named lab on every exit path.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = remove_named(&self.0);
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn named_labs_are_kept_refused_twice_and_removed() {
    require_root();
    let prefix = format!("xrnamed{}", std::process::id());
    let _cleanup = Cleanup(prefix.clone());
    let (a, b, r) = (
        format!("{prefix}-a"),
        format!("{prefix}-b"),
        format!("{prefix}-r"),
    );

    // Up, kept: it outlives its value.
    let config = LabConfig {
        router: true,
        ..LabConfig::default()
    };
    let mut lab = Lab::new_named(&prefix, &config).expect("named lab");
    assert_eq!(lab.namespaces(), [a.clone(), b.clone(), r.clone()]);
    let peer = lab.b.ipv4.to_string();
    lab.keep();
    drop(lab);
    assert!(netns::exists(&a) && netns::exists(&b) && netns::exists(&r));
    let ping = netns::command(&a, &["ping", "-c", "1", "-W", "2", &peer])
        .output()
        .unwrap();
    assert!(ping.status.success(), "the kept lab routes: {ping:?}");

    // Up again: refused, naming the lab.
    match Lab::new_named(&prefix, &LabConfig::default()) {
        Err(LabError::Exists(ns)) => assert_eq!(ns, a),
        other => panic!("a second lab with the same names: {other:?}"),
    }
    assert!(netns::exists(&a), "the refusal removed nothing");

    // Down: everything goes; down again finds nothing.
    let mut removed = remove_named(&prefix).unwrap();
    removed.sort();
    assert_eq!(removed, [a.clone(), b.clone(), r.clone()]);
    assert!(!netns::exists(&a) && !netns::exists(&b) && !netns::exists(&r));
    assert!(remove_named(&prefix).unwrap().is_empty());

    // A leftover of an interrupted build blocks the next one until down clears it.
    let status = Command::new("ip")
        .args(["netns", "add", &b])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(matches!(
        Lab::new_named(&prefix, &LabConfig::default()),
        Err(LabError::Exists(ns)) if ns == b
    ));
    assert_eq!(remove_named(&prefix).unwrap(), std::slice::from_ref(&b));

    // Not kept: dropped like any lab.
    let lab = Lab::new_named(&prefix, &LabConfig::default()).expect("named lab");
    drop(lab);
    assert!(!netns::exists(&a) && !netns::exists(&b));
}
