//! The C API as a C program sees it, on a host without devices: a program compiled against
//! Debian's `<rdma/rdma_cma.h>` calls the library and prints what it answers.
//!
//! `shared` calls are answered the same by Debian's librdmacm and by ours (the program runs
//! on both, and the outputs must be equal): event names, and `ENODEV` from everything that
//! needs a device (cma.c's `ucma_init` finds none). `ours` calls are those Debian's library
//! crashes on or does not answer as this one does by design: NULL and foreign pointers are
//! `EINVAL` (`ENODEV` first where cma.c looks for a device first; a multicast join of a
//! foreign id too), rsocket is `ENOSYS`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Libraries;

const HEADER: &str = "/usr/include/rdma/rdma_cma.h";

const PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

static void shared(void)
{
	struct rdma_addrinfo hints, *res = NULL;
	struct rdma_event_channel *channel;
	struct ibv_context **devices;
	struct rdma_cm_id *id = NULL;
	int i, n = -1, ret;

	for (i = -1; i <= 16; i++)
		printf("event_str %d %s\n", i, rdma_event_str(i));
	errno = 0;
	channel = rdma_create_event_channel();
	printf("create_event_channel %s errno %d\n", channel ? "channel" : "NULL", errno);
	errno = 0;
	ret = rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP);
	printf("create_id %d errno %d\n", ret, errno);
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_port_space = RDMA_PS_TCP;
	errno = 0;
	ret = rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res);
	printf("getaddrinfo %d errno %d\n", ret, errno);
	errno = 0;
	devices = rdma_get_devices(&n);
	printf("get_devices %s count %d errno %d\n", devices ? "list" : "NULL", n, errno);
	errno = 0;
	ret = rdma_ack_cm_event(NULL);
	printf("ack_cm_event(NULL) %d errno %d\n", ret, errno);
	rdma_freeaddrinfo(NULL);
	printf("freeaddrinfo(NULL) returns\n");
}

static void ours(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7471) };
	struct rdma_cm_join_mc_attr_ex mc = { 0 };
	struct rdma_cm_event *event = NULL;
	long junk[64] = { 0 };
	int ret;

	errno = 0;
	ret = rdma_destroy_id(NULL);
	printf("destroy_id(NULL) %d errno %d\n", ret, errno);
	errno = 0;
	ret = rdma_destroy_id((struct rdma_cm_id *) junk);
	printf("destroy_id(foreign) %d errno %d\n", ret, errno);
	errno = 0;
	ret = rdma_bind_addr((struct rdma_cm_id *) junk, (struct sockaddr *) &sin);
	printf("bind_addr(foreign) %d errno %d\n", ret, errno);
	errno = 0;
	ret = rdma_get_cm_event((struct rdma_event_channel *) junk, &event);
	printf("get_cm_event(foreign) %d errno %d\n", ret, errno);
	errno = 0;
	ret = rdma_ack_cm_event((struct rdma_cm_event *) junk);
	printf("ack_cm_event(foreign) %d errno %d\n", ret, errno);
	printf("get_src_port(NULL) %u\n", rdma_get_src_port(NULL));
	rdma_destroy_event_channel((struct rdma_event_channel *) junk);
	rdma_destroy_ep(NULL);
	rdma_free_devices((struct ibv_context **) junk);
	printf("destroy_event_channel, destroy_ep, free_devices of foreign pointers return\n");
	errno = 0;
	ret = rdma_join_multicast_ex((struct rdma_cm_id *) junk, &mc, NULL);
	printf("join_multicast_ex(foreign) %d errno %d\n", ret, errno);
	errno = 0;
	ret = rsocket(AF_INET, SOCK_STREAM, 0);
	printf("rsocket %d errno %d\n", ret, errno);
	errno = 0;
	ret = rpoll(NULL, 0, 0);
	printf("rpoll %d errno %d\n", ret, errno);
	errno = 0;
	ret = (int) (ssize_t) riowrite(3, junk, 8, 0, 0);
	printf("riowrite %d errno %d\n", ret, errno);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "ours"))
		ours();
	else
		shared();
	return 0;
}
"#;

/// The program, compiled against the system's headers and librdmacm.
fn compile(dir: &Path) -> PathBuf {
    let source = dir.join("c_api.c");
    let binary = dir.join("c_api");
    std::fs::write(&source, PROGRAM).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let compiled = Command::new(&cc)
        .arg("-o")
        .arg(&binary)
        .arg(&source)
        .arg("-lrdmacm")
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(
        compiled.status.success(),
        "the program did not compile against {HEADER}:\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    binary
}

/// Runs the program in `mode` on `libraries` (ours) or on the system's (None).
fn run(binary: &Path, mode: &str, libraries: Option<&Libraries>) -> String {
    let mut command = Command::new(binary);
    command
        .arg(mode)
        .env("LD_BIND_NOW", "1")
        .env_remove("LD_PRELOAD");
    match libraries {
        Some(l) => command.env("LD_LIBRARY_PATH", &l.dir),
        None => command.env_remove("LD_LIBRARY_PATH"),
    };
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{mode} on {}: {output:?}",
        if libraries.is_some() {
            "ours"
        } else {
            "Debian's"
        }
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
#[ignore = "needs Debian's librdmacm-dev and a C compiler (cargo xtask test installs and runs them)"]
fn without_a_device_ours_answers_as_debians() {
    assert!(
        Path::new(HEADER).exists(),
        "{HEADER} is missing: install librdmacm-dev (cargo xtask deps)"
    );
    let libraries = Libraries::build();
    let binary = compile(&libraries.dir);
    let debians = run(&binary, "shared", None);
    let ours = run(&binary, "shared", Some(&libraries));
    assert_eq!(ours, debians, "ours, then Debian's");
    let enodev = libc::ENODEV;
    for line in [
        "event_str -1 UNKNOWN EVENT".to_string(),
        "event_str 9 RDMA_CM_EVENT_ESTABLISHED".to_string(),
        "event_str 16 UNKNOWN EVENT".to_string(),
        format!("create_event_channel NULL errno {enodev}"),
        format!("create_id -1 errno {enodev}"),
        format!("getaddrinfo -1 errno {enodev}"),
        format!("get_devices NULL count 0 errno {enodev}"),
        format!("ack_cm_event(NULL) -1 errno {}", libc::EINVAL),
    ] {
        assert!(ours.lines().any(|l| l == line), "`{line}` in:\n{ours}");
    }
}

#[test]
#[ignore = "needs Debian's librdmacm-dev and a C compiler (cargo xtask test installs and runs them)"]
fn bad_pointers_are_einval_and_what_xroce_lacks_says_so() {
    let libraries = Libraries::build();
    let binary = compile(&libraries.dir);
    let ours = run(&binary, "ours", Some(&libraries));
    let (einval, enosys) = (libc::EINVAL, libc::ENOSYS);
    let expected = [
        format!("destroy_id(NULL) -1 errno {einval}"),
        format!("destroy_id(foreign) -1 errno {einval}"),
        format!("bind_addr(foreign) -1 errno {einval}"),
        // cma.c looks for a device before it looks at the arguments.
        format!("get_cm_event(foreign) -1 errno {}", libc::ENODEV),
        format!("ack_cm_event(foreign) -1 errno {einval}"),
        "get_src_port(NULL) 0".to_string(),
        "destroy_event_channel, destroy_ep, free_devices of foreign pointers return".to_string(),
        format!("join_multicast_ex(foreign) -1 errno {einval}"),
        format!("rsocket -1 errno {enosys}"),
        format!("rpoll -1 errno {enosys}"),
        format!("riowrite -1 errno {enosys}"),
    ];
    let lines: Vec<&str> = ours.lines().collect();
    assert_eq!(lines, expected, "the program's output on ours");
}
