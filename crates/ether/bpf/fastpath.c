// SPDX-License-Identifier: GPL-2.0
//
// anode's kernel fast path: plain IPv4/IPv6 forwarding with anode's own tables.
//
// Contract (crates/ip/src/router/fast.rs, which mirrors IpRouter::handle_frame): a frame is
// forwarded only when every one of these holds, and every other frame is handed on to the
// stack (TC_ACT_OK / XDP_PASS) byte for byte unchanged, where anode's user-space router gets it:
//   - untagged Ethernet II (EtherType 0x0800 / 0x86DD) to the receiving interface's own MAC;
//   - IPv4: version 4, IHL 5 (no options), valid header checksum, 20 <= total length <= the
//     frame, not a fragment; source not multicast / 255.255.255.255 / loopback / 0.0.0.0;
//     destination not multicast / 255.255.255.255 / loopback / 0.0.0.0 and not punted (a
//     punt host route in routes_v4: own addresses, directed broadcasts);
//   - IPv6: version 6, 40 + payload length <= the frame, next header not hop-by-hop (0);
//     source not multicast / ::1 / :: / fe80::/10; destination not multicast / ::1 / :: /
//     fe80::/10 and not punted (a punt host route in routes_v6);
//   - the family is not punted as a whole (config.punt_all_v4 / punt_all_v6) and no demux
//     filter in config matches the IP packet;
//   - TTL / hop limit > 1, a route exists (longest prefix), its interface is known, the packet
//     fits that interface's MTU, and the next hop (gateway or destination) is in neigh.
// Then: link padding past the IP packet is trimmed (the router sends 14 + total length
// bytes), the TTL is decremented with the RFC 1624 eqn. 3 checksum update (the same
// arithmetic as anode_wire::checksum::update, so the bytes are identical) or the hop limit
// is decremented, the MACs are rewritten (neighbor's as destination, the outgoing
// interface's as source), and the frame is redirected to the outgoing interface.
//
// Every frame is counted once in stats (forwarded, or the reason it was passed on).
// Parsing is by explicit data_end checks; nothing is read outside the packet. Of a
// non-linear skb only the headers and the bytes the demux keys read are pulled into the
// linear part (config.key_end); the payload stays in its page fragments (no copy).

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>

#include "anode_bpf.h"

static long (*bpf_skb_change_tail)(struct __sk_buff *skb, __u32 len, __u64 flags) =
	(void *)BPF_FUNC_skb_change_tail;
static long (*bpf_xdp_adjust_tail)(struct xdp_md *ctx, int delta) = (void *)BPF_FUNC_xdp_adjust_tail;

// ---- maps (the layouts are mirrored by crates/ether/src/fastpath/maps.rs) ----

#define MAX_FILTERS 8
#define MAX_KEYS 4
#define KEY_BYTES 16
#define MAX_KEY_OFFSET 1500

// Interfaces are indexed by ifindex in an array (one inlined load instead of a hash
// probe); ifindexes from IFINDEX_MAX up are not on the fast path (their frames pass on).
#define IFINDEX_MAX 4096

struct iface_val {
	__u8 mac[6];
	__u16 valid; // 1: an interface of the router's (0: unused slot)
	__u32 mtu;
	__u32 id; // the router's IfaceId
};

struct lpm_v4_key {
	__u32 prefixlen;
	__u8 addr[4];
};

struct lpm_v6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

struct route_val {
	__u32 ifindex;  // outgoing interface (0: one the fast path does not own: pass)
	__u8 gw_family; // 0: no gateway (the destination is the next hop), 4 or 6
	__u8 punt;      // 1: a host route for one of the router's own or broadcast addresses
	__u8 pad[2];
	__u8 gw[16]; // IPv4 as ::ffff:a.b.c.d
	// The outgoing interface's MAC and MTU (copied from `ifaces`, so forwarding needs no
	// second interface lookup).
	__u8 mac[6];
	__u16 pad2;
	__u32 mtu;
};

struct neigh_key {
	__u32 ifindex;
	__u8 family; // 4 or 6: the router keys IPv4 and IPv6 addresses apart
	__u8 pad[3];
	__u8 addr[16]; // IPv4 as ::ffff:a.b.c.d
};

struct neigh_val {
	__u8 mac[6];
	__u8 used; // set by the program when 0; cleared by FastPath::take_used
	__u8 pad;
};

struct demux_key {
	__u16 offset; // from the IP header, <= MAX_KEY_OFFSET
	__u8 len;     // <= KEY_BYTES
	__u8 pad;
	__u8 value[KEY_BYTES]; // already masked
	__u8 mask[KEY_BYTES];
};

struct demux_filter {
	__u16 ethertype; // host order; 0: both families
	__u8 nkeys;      // <= MAX_KEYS
	__u8 pad;
	struct demux_key keys[MAX_KEYS];
};

struct config {
	__u8 punt_all_v4;
	__u8 punt_all_v6;
	__u8 nfilters; // <= MAX_FILTERS
	__u8 pad;
	// The furthest byte (from the IP header) any key of the filters reads, 0 with none: the
	// TC program makes that much of a non-linear skb directly readable, and no more.
	__u16 key_end;
	__u16 pad2;
	struct demux_filter filters[MAX_FILTERS];
};

enum stat {
	ST_FWD_V4,
	ST_FWD_V6,
	ST_FWD_BYTES,
	ST_NOT_IP,       // not IPv4/IPv6 or VLAN-tagged
	ST_NOT_OUR_MAC,  // not to the ingress interface's unicast MAC (or interface unknown)
	ST_BAD_HEADER,   // version, length, checksum
	ST_OPTS_FRAG,    // IPv4 options or fragment, IPv6 hop-by-hop
	ST_MARTIAN,      // special source or destination address
	ST_PUNTED,       // own address, directed broadcast, family punted as a whole
	ST_FILTER,       // a demux filter matched
	ST_TTL,          // TTL / hop limit <= 1
	ST_NO_ROUTE,     // no route, or its interface is not one the fast path owns
	ST_TOO_BIG,      // bigger than the outgoing MTU
	ST_NO_NEIGHBOR,  // next hop not resolved
	ST_ERROR,        // a helper failed (pull, trim) or a key's bytes were not pulled: passed
	ST_PULLED,       // not a verdict: a non-linear skb whose headers were pulled (counted besides one)
	ST_COUNT = 16,
};

struct stats {
	__u64 c[ST_COUNT];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IFINDEX_MAX);
	__type(key, __u32);
	__type(value, struct iface_val);
} ifaces SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_v4_key);
	__type(value, struct route_val);
} routes_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_v6_key);
	__type(value, struct route_val);
} routes_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct neigh_key);
	__type(value, struct neigh_val);
} neigh SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stats);
} stats SEC(".maps");

// ---- the decision ----

#define PASS_OK (-1)

// What a forwarding decision hands to the rewrite.
struct fwd {
	__u32 out_ifindex;
	__u32 frame_len; // 14 + IP total length: the bytes to send
	__u8 dst_mac[6];
	__u8 src_mac[6];
	__u8 v4;
};

INLINE int mac_eq(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] &&
	       a[5] == b[5];
}

#define DEMUX_NONE 0
#define DEMUX_MATCH 1
#define DEMUX_UNREADABLE 2

// Whether a demux filter of `cfg` matches the IP packet at l3 (`total` bytes): DEMUX_MATCH if
// every key's bytes (masked) equal its value and the filter's EtherType is unset or equal (a
// key reaching past the packet does not match), DEMUX_NONE if no filter does, and
// DEMUX_UNREADABLE if a key's bytes are in the packet but not before data_end (a non-linear
// skb not pulled far enough; the caller passes the frame on rather than guess).
INLINE int demux_match(const struct config *cfg, __u16 ethertype, const __u8 *l3, const void *data_end,
		       __u32 total)
{
	__u32 n = cfg->nfilters;
	for (__u32 f = 0; f < MAX_FILTERS; f++) {
		if (f >= n)
			break;
		const struct demux_filter *flt = &cfg->filters[f];
		if (flt->ethertype && flt->ethertype != ethertype)
			continue;
		__u32 nk = flt->nkeys;
		int all = 1;
		for (__u32 k = 0; k < MAX_KEYS; k++) {
			if (k >= nk)
				break;
			const struct demux_key *key = &flt->keys[k];
			__u32 off = key->offset;
			__u32 len = key->len;
			if (off > MAX_KEY_OFFSET || len > KEY_BYTES || off + len > total) {
				all = 0;
				break;
			}
			const __u8 *p = l3 + off;
			int ok = 1;
			for (__u32 i = 0; i < KEY_BYTES; i++) {
				if (i >= len)
					break;
				if ((const void *)(p + i + 1) > data_end)
					return DEMUX_UNREADABLE;
				if ((p[i] & key->mask[i]) != key->value[i]) {
					ok = 0;
					break;
				}
			}
			if (!ok) {
				all = 0;
				break;
			}
		}
		if (all)
			return DEMUX_MATCH;
	}
	return DEMUX_NONE;
}

// The pass reason for a demux result, or PASS_OK to go on.
INLINE int demux_verdict(int m)
{
	if (m == DEMUX_MATCH)
		return ST_FILTER;
	if (m == DEMUX_UNREADABLE)
		return ST_ERROR;
	return PASS_OK;
}

// Next hop, route and neighbor: fills `out` or returns the pass reason.
INLINE int next_hop(const struct route_val *rt, __u8 dst_family, const __u8 *dst16, __u32 total,
		    struct fwd *out)
{
	if (!rt || rt->ifindex == 0)
		return ST_NO_ROUTE;
	__u32 oif = rt->ifindex;
	if (total > rt->mtu)
		return ST_TOO_BIG;
	struct neigh_key nk = {};
	nk.ifindex = oif;
	if (rt->gw_family) {
		nk.family = rt->gw_family;
		__builtin_memcpy(nk.addr, rt->gw, 16);
	} else {
		nk.family = dst_family;
		__builtin_memcpy(nk.addr, dst16, 16);
	}
	struct neigh_val *n = bpf_map_lookup_elem(&neigh, &nk);
	if (!n)
		return ST_NO_NEIGHBOR;
	if (!n->used)
		n->used = 1;
	out->out_ifindex = oif;
	__builtin_memcpy(out->dst_mac, n->mac, 6);
	__builtin_memcpy(out->src_mac, rt->mac, 6);
	return PASS_OK;
}

INLINE int decide_v4(const struct config *cfg, __u8 *l3, void *data_end, __u32 avail, struct fwd *out)
{
	struct iphdr *ip = (struct iphdr *)l3;
	if ((void *)(ip + 1) > data_end)
		return ST_BAD_HEADER;
	if (ip->version != 4 || ip->ihl < 5)
		return ST_BAD_HEADER;
	__u32 total = __builtin_bswap16(ip->tot_len);
	if (total < (__u32)ip->ihl * 4 || total > avail)
		return ST_BAD_HEADER;
	if (ip->ihl != 5)
		return ST_OPTS_FRAG;
	// Header checksum: the one's-complement sum of the 10 words must be 0xffff.
	const __u16 *w = (const __u16 *)ip;
	__u32 sum = 0;
#pragma clang loop unroll(full)
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	if (sum != 0xffff)
		return ST_BAD_HEADER;
	if (ip->frag_off & __builtin_bswap16(0x3fff)) // MF or a fragment offset
		return ST_OPTS_FRAG;
	__u8 *s = (__u8 *)&ip->saddr;
	__u8 *d = (__u8 *)&ip->daddr;
	// 224/4 multicast, 255.255.255.255, 127/8 loopback, 0.0.0.0.
	if ((s[0] & 0xf0) == 0xe0 || ip->saddr == 0xffffffff || s[0] == 127 || ip->saddr == 0)
		return ST_MARTIAN;
	if ((d[0] & 0xf0) == 0xe0 || ip->daddr == 0xffffffff || d[0] == 127 || ip->daddr == 0)
		return ST_MARTIAN;
	__u32 daddr = ip->daddr;
	if (cfg->punt_all_v4)
		return ST_PUNTED;
	// One longest-prefix lookup answers both "is it ours?" (punt host routes) and the route.
	struct lpm_v4_key k = {.prefixlen = 32};
	__builtin_memcpy(k.addr, d, 4);
	struct route_val *rt = bpf_map_lookup_elem(&routes_v4, &k);
	if (rt && rt->punt)
		return ST_PUNTED;
	if (cfg->nfilters) {
		int m = demux_verdict(demux_match(cfg, ETH_P_IP, l3, data_end, total));
		if (m != PASS_OK)
			return m;
	}
	if (ip->ttl <= 1)
		return ST_TTL;
	__u32 dst16[4];
	dst16[0] = 0;
	dst16[1] = 0;
	dst16[2] = __builtin_bswap32(0x0000ffff);
	dst16[3] = daddr; // ::ffff:a.b.c.d
	out->frame_len = ETH_HLEN + total;
	out->v4 = 1;
	return next_hop(rt, 4, (const __u8 *)dst16, total, out);
}

INLINE int v6_special(const __u8 *a)
{
	__u64 hi, lo;
	__builtin_memcpy(&hi, a, 8);
	__builtin_memcpy(&lo, a + 8, 8);
	if (a[0] == 0xff) // multicast
		return 1;
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) // link-local fe80::/10
		return 1;
	if (hi == 0 && (lo == 0 || lo == __builtin_bswap64(1))) // :: and ::1
		return 1;
	return 0;
}

INLINE int decide_v6(const struct config *cfg, __u8 *l3, void *data_end, __u32 avail, struct fwd *out)
{
	struct ipv6hdr *ip = (struct ipv6hdr *)l3;
	if ((void *)(ip + 1) > data_end)
		return ST_BAD_HEADER;
	if (ip->version != 6)
		return ST_BAD_HEADER;
	__u32 total = sizeof(struct ipv6hdr) + __builtin_bswap16(ip->payload_len);
	if (total > avail)
		return ST_BAD_HEADER;
	if (ip->nexthdr == 0)
		return ST_OPTS_FRAG;
	if (v6_special(ip->saddr.in6_u.u6_addr8) || v6_special(ip->daddr.in6_u.u6_addr8))
		return ST_MARTIAN;
	struct in6_addr daddr;
	__builtin_memcpy(&daddr, &ip->daddr, 16);
	if (cfg->punt_all_v6)
		return ST_PUNTED;
	struct lpm_v6_key k = {.prefixlen = 128};
	__builtin_memcpy(k.addr, &daddr, 16);
	struct route_val *rt = bpf_map_lookup_elem(&routes_v6, &k);
	if (rt && rt->punt)
		return ST_PUNTED;
	if (cfg->nfilters) {
		int m = demux_verdict(demux_match(cfg, ETH_P_IPV6, l3, data_end, total));
		if (m != PASS_OK)
			return m;
	}
	if (ip->hop_limit <= 1)
		return ST_TTL;
	out->frame_len = ETH_HLEN + total;
	out->v4 = 0;
	return next_hop(rt, 6, (const __u8 *)&daddr, total, out);
}

// The whole decision for the frame of `len` bytes that arrived on in_ifindex, of which
// [data, data_end) is directly readable (all of it, or at least the Ethernet and IP headers
// and every byte a demux key reads): PASS_OK (forward as `out` says) or the stat index of
// the reason to pass it on.
INLINE int decide(const struct config *cfg, void *data, void *data_end, __u32 len, __u32 in_ifindex,
		  struct fwd *out)
{
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end || len < ETH_HLEN)
		return ST_NOT_IP;
	__u16 proto = __builtin_bswap16(eth->h_proto);
	if (proto != ETH_P_IP && proto != ETH_P_IPV6)
		return ST_NOT_IP;
	struct iface_val *in = bpf_map_lookup_elem(&ifaces, &in_ifindex);
	if (!in || !in->valid || !mac_eq(eth->h_dest, in->mac))
		return ST_NOT_OUR_MAC;
	__u8 *l3 = (__u8 *)(eth + 1);
	__u32 avail = len - ETH_HLEN;
	if (proto == ETH_P_IP)
		return decide_v4(cfg, l3, data_end, avail, out);
	return decide_v6(cfg, l3, data_end, avail, out);
}

// The rewrite, on a frame already trimmed to out->frame_len: TTL (RFC 1624 eqn. 3) or hop
// limit, then the MACs. Returns 0, or -1 if the headers are not there (cannot happen after
// decide; the verifier wants the checks).
INLINE int rewrite(void *data, void *data_end, const struct fwd *out)
{
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return -1;
	if (out->v4) {
		struct iphdr *ip = (struct iphdr *)(eth + 1);
		if ((void *)(ip + 1) > data_end)
			return -1;
		// The word [ttl, protocol] goes from m to m - 0x0100 (ttl > 1: no borrow), so
		// ~m + m' = 0xfeff; HC' = ~(~HC + 0xfeff), folded.
		__u32 acc = (__u16)~__builtin_bswap16(ip->check);
		acc += 0xfeff;
		acc = (acc & 0xffff) + (acc >> 16);
		acc = (acc & 0xffff) + (acc >> 16);
		ip->check = __builtin_bswap16((__u16)~acc);
		ip->ttl -= 1;
	} else {
		struct ipv6hdr *ip = (struct ipv6hdr *)(eth + 1);
		if ((void *)(ip + 1) > data_end)
			return -1;
		ip->hop_limit -= 1;
	}
	__builtin_memcpy(eth->h_dest, out->dst_mac, 6);
	__builtin_memcpy(eth->h_source, out->src_mac, 6);
	return 0;
}

INLINE void count(int reason)
{
	__u32 zero = 0;
	struct stats *s = bpf_map_lookup_elem(&stats, &zero);
	if (!s)
		return;
	if (reason >= 0 && reason < ST_COUNT)
		s->c[reason] += 1;
}

INLINE void count_fwd(int v4, __u32 bytes)
{
	__u32 zero = 0;
	struct stats *s = bpf_map_lookup_elem(&stats, &zero);
	if (!s)
		return;
	if (v4)
		s->c[ST_FWD_V4] += 1;
	else
		s->c[ST_FWD_V6] += 1;
	s->c[ST_FWD_BYTES] += bytes;
}

// The bytes a decision reads directly besides the demux keys: Ethernet and the IPv6 header
// (an IPv4 header the fast path forwards is 20 bytes; one with options is passed on).
#define HEADERS (ETH_HLEN + 40)

SEC("classifier") // TC (aya names the section "classifier")
int anode_fastpath_tc(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	// The stack moves an 802.1Q tag out of the frame (skb->vlan_tci) before TC ingress: a
	// frame that had one is not untagged Ethernet II.
	if (skb->vlan_present)
		goto pass_not_ip;
	// Not IPv4/IPv6: passed on before any map lookup (the linear part holds at least the
	// Ethernet header for any frame a driver builds; decide() checks again either way).
	if (data + ETH_HLEN <= data_end) {
		__u16 proto = __builtin_bswap16(((struct ethhdr *)data)->h_proto);
		if (proto != ETH_P_IP && proto != ETH_P_IPV6)
			goto pass_not_ip;
	}
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg) {
		count(ST_ERROR);
		return TC_ACT_OK;
	}
	__u32 len = skb->len;
	// A non-linear skb (payload in page fragments, as AF_PACKET, GRO and many NIC drivers
	// build them): make the headers and the bytes the demux keys read directly readable and
	// leave the payload where it is, so forwarding copies no payload. The bytes do not change.
	__u32 need = HEADERS;
	if (cfg->nfilters && ETH_HLEN + (__u32)cfg->key_end > need)
		need = ETH_HLEN + (__u32)cfg->key_end;
	if (need > len)
		need = len;
	if ((long)data_end - (long)data < (long)need) {
		if (bpf_skb_pull_data(skb, need)) {
			count(ST_ERROR);
			return TC_ACT_OK;
		}
		count(ST_PULLED);
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
	}
	struct fwd out = {};
	int r = decide(cfg, data, data_end, len, skb->ifindex, &out);
	if (r != PASS_OK) {
		count(r);
		return TC_ACT_OK;
	}
	if (len > out.frame_len) {
		if (bpf_skb_change_tail(skb, out.frame_len, 0)) {
			count(ST_ERROR);
			return TC_ACT_OK;
		}
	}
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if (rewrite(data, data_end, &out)) {
		count(ST_ERROR);
		return TC_ACT_OK;
	}
	count_fwd(out.v4, out.frame_len);
	return bpf_redirect(out.out_ifindex, 0);
pass_not_ip:
	count(ST_NOT_IP);
	return TC_ACT_OK;
}

SEC("xdp")
int anode_fastpath_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg) {
		count(ST_ERROR);
		return XDP_PASS;
	}
	// Loaded without BPF_F_XDP_HAS_FRAGS: the whole frame is in [data, data_end).
	long have = (long)data_end - (long)data;
	struct fwd out = {};
	int r = decide(cfg, data, data_end, (__u32)have, ctx->ingress_ifindex, &out);
	if (r != PASS_OK) {
		count(r);
		return XDP_PASS;
	}
	if (have > (long)out.frame_len) {
		if (bpf_xdp_adjust_tail(ctx, (int)((long)out.frame_len - have))) {
			count(ST_ERROR);
			return XDP_PASS;
		}
	}
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (rewrite(data, data_end, &out)) {
		count(ST_ERROR);
		return XDP_PASS;
	}
	count_fwd(out.v4, out.frame_len);
	return bpf_redirect(out.out_ifindex, 0);
}

char _license[] SEC("license") = "GPL";
