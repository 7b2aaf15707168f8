// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * xroce's XDP program: RoCEv2 frames (UDP destination port 4791, over IPv4 or IPv6, with at
 * most one 802.1Q/802.1ad tag) go to the AF_XDP socket of the queue they arrived on;
 * everything else (ARP, ND, ICMP, TCP, other UDP, IPv4 fragments, frames it cannot parse)
 * goes to the kernel untouched. It never drops, never rewrites a frame, and counts every
 * verdict in exactly one slot of the per-CPU `counters` array.
 *
 * It declares fragment support (section "xdp.frags", so the loader sets BPF_F_XDP_HAS_FRAGS):
 * a driver may then hand it a frame in several buffers, which is what lets native XDP attach
 * to a link whose MTU exceeds a page (veth refuses a program without it above 3504 bytes,
 * ERANGE) and generic XDP pass a jumbo frame unlinearised. Every header it reads lies in the
 * first buffer (ctx->data .. ctx->data_end), which holds at least the first few hundred bytes
 * of a frame; a frame whose headers do not is malformed to it and goes to the kernel. The
 * AF_XDP socket gets the whole frame, in as many descriptors as it takes (XDP_USE_SG).
 *
 * Built by ebpf/build.rs with `clang -target bpf -O2 -g`; loaded by the engine with aya.
 * Self-contained on purpose: it needs the kernel's UAPI headers and nothing from libbpf.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/types.h>
#include <linux/udp.h>

#include "xroce_xdp.h"

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name
#define xroce_inline inline __attribute__((always_inline))

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define xroce_htons(x) ((__be16)__builtin_bswap16(x))
#else
#define xroce_htons(x) ((__be16)(x))
#endif

/* Helpers, called by number (the UAPI enum), so that no libbpf header is needed. */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_redirect_map)(void *map, __u64 key, __u64 flags) = (void *)BPF_FUNC_redirect_map;

#define XROCE_ETH_P_8021Q 0x8100
#define XROCE_ETH_P_8021AD 0x88A8
/* RFC 791: the "more fragments" flag and the 13-bit fragment offset. */
#define XROCE_IP_MF 0x2000
#define XROCE_IP_OFFSET 0x1FFF

/* IEEE 802.1Q tag after the source MAC: TCI, then the encapsulated EtherType. */
struct xroce_vlan_hdr {
	__be16 tci;
	__be16 encapsulated_proto;
};

/* Receive queue index -> AF_XDP socket. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, XROCE_XSKS_DEFAULT_ENTRIES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

/* enum xroce_counter -> frames, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XROCE_CNT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static xroce_inline void count(__u32 counter)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &counter);

	if (value)
		*value += 1;
}

static xroce_inline int pass(__u32 counter)
{
	count(counter);
	return XDP_PASS;
}

SEC("xdp.frags")
int xroce_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct udphdr *udp;
	__be16 proto;
	void *l3;

	if ((void *)(eth + 1) > data_end)
		return pass(XROCE_CNT_PASS_MALFORMED);
	proto = eth->h_proto;
	l3 = eth + 1;

	if (proto == xroce_htons(XROCE_ETH_P_8021Q) || proto == xroce_htons(XROCE_ETH_P_8021AD)) {
		struct xroce_vlan_hdr *vlan = l3;

		if ((void *)(vlan + 1) > data_end)
			return pass(XROCE_CNT_PASS_MALFORMED);
		proto = vlan->encapsulated_proto;
		l3 = vlan + 1;
	}

	if (proto == xroce_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;

		if ((void *)(ip + 1) > data_end)
			return pass(XROCE_CNT_PASS_MALFORMED);
		if (ip->version != 4 || ip->ihl < 5)
			return pass(XROCE_CNT_PASS_MALFORMED);
		/* RoCEv2 never fragments (rxe sends DF); any fragment is the kernel's to reassemble. */
		if (ip->frag_off & xroce_htons(XROCE_IP_MF | XROCE_IP_OFFSET))
			return pass(XROCE_CNT_PASS_FRAGMENT);
		if (ip->protocol != IPPROTO_UDP)
			return pass(XROCE_CNT_PASS_NOT_UDP);
		/* IHL counts 32-bit words and covers the options. */
		udp = (void *)ip + ip->ihl * 4;
	} else if (proto == xroce_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;

		if ((void *)(ip6 + 1) > data_end)
			return pass(XROCE_CNT_PASS_MALFORMED);
		if (ip6->version != 6)
			return pass(XROCE_CNT_PASS_MALFORMED);
		/* RoCEv2 over IPv6 carries UDP right after the fixed header; extension headers
		 * (hop-by-hop, fragment, ...) are left to the kernel. */
		if (ip6->nexthdr != IPPROTO_UDP)
			return pass(XROCE_CNT_PASS_NOT_UDP);
		udp = (void *)(ip6 + 1);
	} else {
		return pass(XROCE_CNT_PASS_NOT_IP);
	}

	if ((void *)(udp + 1) > data_end)
		return pass(XROCE_CNT_PASS_MALFORMED);
	if (udp->dest != xroce_htons(XROCE_ROCEV2_UDP_PORT))
		return pass(XROCE_CNT_PASS_OTHER_PORT);

	/* The low bits of the flags are the action when the slot is empty: a queue the daemon
	 * does not serve hands its RoCEv2 frames to the kernel (which answers with ICMP
	 * port unreachable unless rxe is loaded) instead of dropping them. */
	long action = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);

	count(action == XDP_REDIRECT ? XROCE_CNT_REDIRECTED : XROCE_CNT_PASS_NO_SOCKET);
	return action;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
