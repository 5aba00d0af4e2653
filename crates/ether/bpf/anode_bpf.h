// SPDX-License-Identifier: GPL-2.0
//
// What anode's TC programs (fastpath.c, transit.c) share: the section and map-definition
// macros libbpf's headers would give, and the helpers both call. Included by file name from
// the same directory (build.rs passes no include path for it).

#ifndef ANODE_BPF_H
#define ANODE_BPF_H

#include <linux/bpf.h>

#define SEC(n) __attribute__((section(n), used))
#define __uint(n, v) int (*n)[v]
#define __type(n, t) t *n
#define INLINE static __attribute__((always_inline)) inline

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_redirect)(__u32 ifindex, __u64 flags) = (void *)BPF_FUNC_redirect;
static long (*bpf_skb_pull_data)(struct __sk_buff *skb, __u32 len) = (void *)BPF_FUNC_skb_pull_data;

#endif
