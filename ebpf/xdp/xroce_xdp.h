/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Shared between the XDP program and the Rust side (`xroce_ebpf::Counter`): the order of
 * the counter indices is part of the contract and a unit test in `ebpf/src/lib.rs` checks
 * that both sides agree.
 */
#ifndef XROCE_XDP_H
#define XROCE_XDP_H

/* RoCEv2 destination UDP port (IBTA Annex A17, RoCEv2: IANA port 4791). */
#define XROCE_ROCEV2_UDP_PORT 4791

/* Default number of XSKMAP slots (one per receive queue); the loader may resize it. */
#define XROCE_XSKS_DEFAULT_ENTRIES 64

/* Verdict counters, one per outcome: every frame the program sees moves exactly one. */
enum xroce_counter {
	/* UDP 4791, redirected into the AF_XDP socket of the receiving queue. */
	XROCE_CNT_REDIRECTED = 0,
	/* UDP 4791, but no AF_XDP socket serves the receiving queue: passed to the kernel. */
	XROCE_CNT_PASS_NO_SOCKET = 1,
	/* Not IPv4 or IPv6 (ARP, LLDP, ...): passed. */
	XROCE_CNT_PASS_NOT_IP = 2,
	/* IPv4/IPv6 but not UDP (ICMP, ND, TCP, IPv6 extension headers): passed. */
	XROCE_CNT_PASS_NOT_UDP = 3,
	/* UDP to another port: passed. */
	XROCE_CNT_PASS_OTHER_PORT = 4,
	/* IPv4 fragment (MF set or a non-zero offset): passed for the kernel to reassemble. */
	XROCE_CNT_PASS_FRAGMENT = 5,
	/* Headers truncated or inconsistent (IHL < 5, version mismatch): passed. */
	XROCE_CNT_PASS_MALFORMED = 6,
	XROCE_CNT_COUNT = 7,
};

#endif
