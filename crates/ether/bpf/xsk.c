// SPDX-License-Identifier: GPL-2.0
//
// anode's AF_XDP redirect: every frame that arrives on the interface goes to the AF_XDP
// socket bound to its receive queue (crates/ether/src/xsk: one copy of this object per
// interface, so the map holds only that interface's sockets, indexed by queue). A queue
// without a socket passes its frames to the stack (the flags argument of bpf_redirect_map
// is the action taken when the lookup fails).

#include <linux/bpf.h>

#define SEC(n) __attribute__((section(n), used))
#define __uint(n, v) int (*n)[v]
#define __type(n, t) t *n

static long (*bpf_redirect_map)(void *map, __u64 key, __u64 flags) = (void *)BPF_FUNC_redirect_map;

// Receive queue -> AF_XDP socket (the user-space side sets the entries; see XSKS_MAX in
// crates/ether/src/xsk/prog.rs).
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

SEC("xdp")
int anode_xsk_redirect(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
