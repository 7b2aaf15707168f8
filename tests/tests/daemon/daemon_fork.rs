//! A forked child and its parent's connection to the daemon: the child's requests on it
//! are refused (a process's requests on another's socket would take its replies), the
//! parent's go on unharmed, and the child's own connection works.

use verbs_shm::client::{Context, Error};
use xroce_lab::daemons::{DEVICE, TwoHosts};
use xroce_lab::{LabConfig, Side, require_root};

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_child_cannot_use_its_parents_connection_and_opens_its_own() {
    require_root();
    let hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    let ctx = hosts.open(Side::A).unwrap();
    let _pd = ctx.alloc_pd().unwrap();
    hosts
        .lab
        .run_in(Side::A, || {
            // Safety: the child makes requests and leaves with _exit, touching nothing the
            // parent's other threads could hold (the test harness's are idle meanwhile).
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0);
            if pid == 0 {
                let code = match ctx.alloc_pd() {
                    Err(Error::OtherProcess(_)) => match Context::open(DEVICE) {
                        Ok(own) if own.alloc_pd().is_ok() => 0,
                        _ => 2,
                    },
                    _ => 1,
                };
                // Safety: leave at once.
                unsafe { libc::_exit(code) };
            }
            let mut status = 0;
            // Safety: our child.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            assert!(libc::WIFEXITED(status));
            assert_eq!(
                libc::WEXITSTATUS(status),
                0,
                "1: the child used the parent's connection; 2: it could not open its own"
            );
        })
        .unwrap();
    // The parent's connection still answers in order.
    for _ in 0..3 {
        ctx.alloc_pd().expect("the parent's connection works");
    }
}
