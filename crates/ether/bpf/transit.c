// SPDX-License-Identifier: GPL-2.0
//
// anode's kernel fast path for passive ANEP transit: an `anode node` running over UDP gets
// packets that are only passing through it forwarded here, at TC ingress, without a trip
// through its socket.
//
// Contract (crates/core/src/fastpath.rs and node.rs, `route_datagram` / `route_ee` /
// `Core::forward`, mirrored by crates/ether/src/transit/mod.rs): a packet is forwarded only
// when every one of these holds; every other packet goes on to the stack (TC_ACT_OK)
// byte for byte unchanged, where the node's UDP socket gets it and the node decides:
//   - untagged Ethernet II to this host's MAC (not PACKET_OTHERHOST: the stack drops those),
//     IPv4 without options, not a fragment and with a right header checksum, or IPv6 whose
//     next header is UDP; to the node's own address and UDP port (config.me);
//   - the UDP source (address, port) is a peer of one of the node's links, and that link is
//     enabled (peers map, flag PEER_UP);
//   - ANEP version 1 with no options (header length 2 words; a packet with options may
//     carry an integrity checksum the node verifies or updates), 8 + 72 <= packet length
//     <= UDP payload;
//   - Type ID datagram, or the Type ID of an EE the node runs (config.ee_types) when no
//     cut-through channel exists (config.punt_ee = 0);
//   - the node runs no hook of a service module and captures nothing (config.punt_all = 0);
//   - transit header version 1, its length >= 72 and within the UDP payload, neither
//     evaluate-every-hop nor EE-route flag, destination not the node, resource bound > 0;
//   - a route to the destination (routes map, the node's forwarding table), to a next hop
//     of the packet's address family whose link is enabled, carries no impairment or
//     queueing discipline (PEER_UP and not PEER_PUNT) and whose MTU takes the packet;
//   - the driver found how the kernel reaches the next hop (peer_val: the interface of its
//     route, the interface's MTU, which the IP packet fits, and a valid neighbor entry).
//     bpf_fib_lookup is not used: it refuses interfaces without IP forwarding, and a
//     node's host keeps forwarding off.
// Then, as the node would: the resource bound is decremented, the previous hop set to the
// node's address, the packet leaves from the node's address and port to the next hop's
// (IP and UDP headers rewritten, the IPv4 header and UDP checksums updated incrementally,
// so a CHECKSUM_PARTIAL skb from a local socket stays valid) with the neighbor's MAC, and is
// redirected to the interface the kernel's route names (over a veth, to its other end's
// ingress, bpf_redirect_peer: the packet skips this end's transmit path and the backlog
// queue, and enters the neighbor's namespace as if received there). The UDP checksum is not verified
// (a CHECKSUM_PARTIAL skb carries only the pseudo-header's): a wrong one leaves wrong by
// the same amount, and the next hop's stack drops the packet where this one's would have.
//
// Every packet is counted once in stats (forwarded, or the reason it was passed on).
// Nothing is read outside the packet; the headers are pulled into the linear part first.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>

#include "anode_bpf.h"

static long (*bpf_l3_csum_replace)(struct __sk_buff *skb, __u32 offset, __u64 from, __u64 to,
				   __u64 size) = (void *)BPF_FUNC_l3_csum_replace;
static long (*bpf_l4_csum_replace)(struct __sk_buff *skb, __u32 offset, __u64 from, __u64 to,
				   __u64 flags) = (void *)BPF_FUNC_l4_csum_replace;
static long (*bpf_redirect_peer)(__u32 ifindex, __u64 flags) = (void *)BPF_FUNC_redirect_peer;

// ---- wire layout (crates/wire: anep.rs, transit.rs, addr.rs) ----

#define ADDR_LEN 18 // 16 address bytes (IPv4 as ::ffff:a.b.c.d), port (big endian)
#define ANEP_VERSION 1
#define ANEP_LEN 8
#define TYPE_DATAGRAM 0x0A02
#define TRANSIT_VERSION 1
#define TRANSIT_LEN 72
#define T_FLAGS 1
#define T_HLEN 2
#define T_RB 4
#define T_DST 34
#define T_PREV 52
#define FLAG_EVAL_EVERY_HOP 0x01
#define FLAG_EE_ROUTE 0x02

// ---- maps (the layouts are mirrored by crates/ether/src/transit/maps.rs) ----

#define MAX_EE_TYPES 4
#define ROUTES_MAX 65536
#define PEERS_MAX 4096

struct addr_key {
	__u8 b[ADDR_LEN];
	__u8 pad[2]; // zero
};

struct tconfig {
	__u8 me[ADDR_LEN];  // the node's address
	__u8 family;        // 4 or 6: the family of the node's socket (0: program off)
	__u8 punt_all;      // hooks, capture, or the node says so: everything to the socket
	__u8 punt_ee;       // a cut-through channel exists: EE Type IDs to the socket
	__u8 n_ee;          // <= MAX_EE_TYPES
	__u16 ee_types[MAX_EE_TYPES]; // host order
};

#define PEER_UP 1   // the link is enabled
#define PEER_PUNT 2 // the link has an impairment or a queueing discipline: the node sends
#define PEER_VETH 4 // the interface toward the peer is a veth: hand the packet to its other
                    // end's ingress (bpf_redirect_peer), skipping this end's transmit path

struct peer_val {
	__u32 mtu; // the link's MTU (ANEP bytes)
	__u32 flags;
	// How the kernel reaches the peer (the driver asks its route and neighbor tables at
	// every sync): the interface (0: unknown: pass), its MTU and MAC, the next hop's MAC.
	__u32 oif;
	__u32 oif_mtu;
	__u8 smac[6];
	__u8 dmac[6];
};

// A route carries its next hop's link state (copied from `peers` by the driver), so
// forwarding needs one lookup for the source peer and one for the route.
struct route_val {
	__u8 hop[ADDR_LEN];
	__u8 pad[2];
	struct peer_val nh;
};

enum stat {
	ST_FWD,
	ST_FWD_BYTES,
	ST_NOT_NODE,    // not UDP to the node's address and port (or VLAN, IPv4 options/fragment,
	                // another host's MAC)
	ST_MALFORMED,   // ANEP or transit header the node would refuse, or too short, or a bad
	                // IPv4 header checksum
	ST_OPTIONS,     // ANEP options present
	ST_TYPE,        // control, an unknown Type ID, or an EE Type ID while punt_ee
	ST_PEER,        // source is no enabled link's peer
	ST_ACTIVE,      // evaluate-every-hop or EE-route flag
	ST_FOR_NODE,    // destination is the node
	ST_RB,          // resource bound 0
	ST_NO_ROUTE,    // no route in the node's table
	ST_HOP,         // next hop's link down, impaired, queued, other family, or MTU too small
	ST_NO_NEIGHBOR, // the driver found no kernel route or neighbor entry for the next hop
	ST_PUNT_ALL,    // hooks or capture: all to the socket
	ST_ERROR,       // a helper failed: passed on (the packet may have been modified: counted)
	ST_COUNT = 16,
};

struct stats {
	__u64 c[ST_COUNT];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tconfig);
} tconfig SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PEERS_MAX);
	__type(key, struct addr_key);
	__type(value, struct peer_val);
} peers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ROUTES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct addr_key);
	__type(value, struct route_val);
} troutes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stats);
} tstats SEC(".maps");

INLINE void count(int reason, __u64 bytes)
{
	__u32 zero = 0;
	struct stats *s = bpf_map_lookup_elem(&tstats, &zero);
	if (!s)
		return;
	if (reason >= 0 && reason < ST_COUNT)
		s->c[reason] += 1;
	if (reason == ST_FWD)
		s->c[ST_FWD_BYTES] += bytes;
}

INLINE __u16 be16(const __u8 *p)
{
	return ((__u16)p[0] << 8) | p[1];
}

INLINE int addr_eq_n(const __u8 *a, const __u8 *b, int n)
{
#pragma unroll
	for (int i = 0; i < ADDR_LEN; i++)
		if (i < n && a[i] != b[i])
			return 0;
	return 1;
}

#define addr_eq(a, b) addr_eq_n(a, b, ADDR_LEN)
#define addr_eq_16(a, b) addr_eq_n(a, b, 16)

// The room the checks need: Ethernet, IPv6 (the longer header), UDP, ANEP, transit.
#define PULL_LEN (14 + 40 + 8 + ANEP_LEN + TRANSIT_LEN)

// Where the headers are, once the IP layer checked out.
struct at {
	__u32 l3;    // IP header offset (14)
	__u32 udp;   // UDP header offset
	__u32 check; // UDP checksum offset
	__u32 anep;  // ANEP header offset
	__u32 ip_len; // IP packet length (for the MTU check of the FIB lookup)
	__u32 payload; // UDP payload length (the ANEP buffer the node would get)
	int v6;
};

// Checks Ethernet/IP/UDP against the node's address; fills `at` and the source key.
INLINE int ip_layer(struct __sk_buff *skb, const struct tconfig *cfg, struct at *at,
		    struct addr_key *src)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end || skb->vlan_present || skb->pkt_type == PACKET_OTHERHOST)
		return ST_NOT_NODE;
	at->l3 = sizeof(*eth);
	struct udphdr *udp;
	if (eth->h_proto == __builtin_bswap16(ETH_P_IP) && cfg->family == 4) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl != 5 ||
		    ip->protocol != IPPROTO_UDP)
			return ST_NOT_NODE;
		if (ip->frag_off & __builtin_bswap16(0x3fff))
			return ST_NOT_NODE;
		const __u8 *me4 = cfg->me + 12;
		const __u8 *d = (const __u8 *)&ip->daddr;
		if (d[0] != me4[0] || d[1] != me4[1] || d[2] != me4[2] || d[3] != me4[3])
			return ST_NOT_NODE;
		// The stack drops a header whose checksum is wrong; the incremental update
		// below would carry the error on to the next hop.
		const __u16 *w = (const __u16 *)ip;
		__u32 sum = 0;
#pragma unroll
		for (int i = 0; i < 10; i++)
			sum += w[i];
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		if (sum != 0xffff)
			return ST_MALFORMED;
		__u32 tot = __builtin_bswap16(ip->tot_len);
		if (tot < sizeof(*ip) + sizeof(*udp) || at->l3 + tot > skb->len)
			return ST_MALFORMED;
		at->ip_len = tot;
		at->v6 = 0;
		udp = (void *)(ip + 1);
		__builtin_memset(src->b, 0, 10);
		src->b[10] = 0xff;
		src->b[11] = 0xff;
		__builtin_memcpy(src->b + 12, &ip->saddr, 4);
	} else if (eth->h_proto == __builtin_bswap16(ETH_P_IPV6) && cfg->family == 6) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end || ip6->version != 6 || ip6->nexthdr != IPPROTO_UDP)
			return ST_NOT_NODE;
		if (!addr_eq_16((const __u8 *)&ip6->daddr, cfg->me))
			return ST_NOT_NODE;
		__u32 plen = __builtin_bswap16(ip6->payload_len);
		if (plen < sizeof(*udp) || at->l3 + sizeof(*ip6) + plen > skb->len)
			return ST_MALFORMED;
		at->ip_len = sizeof(*ip6) + plen;
		at->v6 = 1;
		udp = (void *)(ip6 + 1);
		__builtin_memcpy(src->b, &ip6->saddr, 16);
	} else {
		return ST_NOT_NODE;
	}
	if ((void *)(udp + 1) > end)
		return ST_NOT_NODE;
	const __u8 *port = cfg->me + 16;
	const __u8 *dp = (const __u8 *)&udp->dest;
	if (dp[0] != port[0] || dp[1] != port[1])
		return ST_NOT_NODE;
	__u32 ulen = __builtin_bswap16(udp->len);
	if (ulen < sizeof(*udp) || ulen > at->ip_len - ((void *)udp - (void *)eth - at->l3))
		return ST_MALFORMED;
	__builtin_memcpy(src->b + 16, &udp->source, 2);
	src->pad[0] = 0;
	src->pad[1] = 0;
	// Constants, not pointer differences: the verifier keeps their bounds.
	at->udp = at->v6 ? 14 + 40 : 14 + 20;
	at->check = at->udp + 6;
	at->anep = at->udp + 8;
	at->payload = ulen - sizeof(*udp);
	return -1;
}

// What the ANEP and transit headers say; fills the destination key and the resource bound.
INLINE int anep_layer(struct __sk_buff *skb, const struct tconfig *cfg, const struct at *at,
		      struct addr_key *dst, __u16 *rb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u8 *a = data + at->anep;
	if (at->payload < ANEP_LEN + TRANSIT_LEN || (void *)(a + ANEP_LEN + TRANSIT_LEN) > end)
		return ST_MALFORMED;
	__u16 hlen = be16(a + 4), plen = be16(a + 6), type = be16(a + 2);
	if (a[0] != ANEP_VERSION || hlen * 4 < ANEP_LEN || plen < hlen * 4 || plen > at->payload)
		return ST_MALFORMED;
	if (hlen != ANEP_LEN / 4)
		return ST_OPTIONS;
	if (type != TYPE_DATAGRAM) {
		int ee = 0;
#pragma unroll
		for (int i = 0; i < MAX_EE_TYPES; i++)
			if (i < cfg->n_ee && cfg->ee_types[i] == type)
				ee = 1;
		if (!ee || cfg->punt_ee)
			return ST_TYPE;
	}
	__u8 *t = a + ANEP_LEN;
	__u16 thlen = be16(t + T_HLEN);
	if (t[0] != TRANSIT_VERSION || thlen < TRANSIT_LEN || thlen > at->payload - ANEP_LEN)
		return ST_MALFORMED;
	if (t[T_FLAGS] & (FLAG_EVAL_EVERY_HOP | FLAG_EE_ROUTE))
		return ST_ACTIVE;
	if (addr_eq(t + T_DST, cfg->me))
		return ST_FOR_NODE;
	*rb = be16(t + T_RB);
	if (*rb == 0)
		return ST_RB;
	__builtin_memcpy(dst->b, t + T_DST, ADDR_LEN);
	dst->pad[0] = 0;
	dst->pad[1] = 0;
	return -1;
}

// The bytes the rewrite changes outside the IP header, in packet order (all at even
// offsets from the UDP header, so their checksum difference is position-independent).
struct l4_fields {
	__u8 ports[4]; // UDP source, destination
	__u8 rb[2];
	__u8 prev[ADDR_LEN];
};

struct ip_addrs {
	__u8 src[16];
	__u8 dst[16];
};

static __s64 (*bpf_csum_diff)(__be32 *from, __u32 from_size, __be32 *to, __u32 to_size,
			     __wsum seed) = (void *)BPF_FUNC_csum_diff;

// Rewrites the packet toward `hop`, whose link-layer path is `nh`.
INLINE int rewrite(struct __sk_buff *skb, const struct tconfig *cfg, const struct at *at,
		   const struct route_val *hop, __u16 rb, const struct peer_val *nh)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u8 *a = data + at->anep;
	if ((void *)(a + ANEP_LEN + TRANSIT_LEN) > end)
		return ST_ERROR;
	__u8 *u = data + at->udp;
	struct l4_fields o, n;
	__builtin_memcpy(o.ports, u, 4);
	__builtin_memcpy(o.rb, a + ANEP_LEN + T_RB, 2);
	__builtin_memcpy(o.prev, a + ANEP_LEN + T_PREV, ADDR_LEN);
	n.ports[0] = cfg->me[16];
	n.ports[1] = cfg->me[17];
	n.ports[2] = hop->hop[16];
	n.ports[3] = hop->hop[17];
	n.rb[0] = (rb - 1) >> 8;
	n.rb[1] = (rb - 1) & 0xff;
	__builtin_memcpy(n.prev, cfg->me, ADDR_LEN);

	struct ip_addrs oi = {}, ni = {};
	__u32 ip_bytes = at->v6 ? 32 : 8;
	if (at->v6) {
		struct ipv6hdr *ip6 = data + 14;
		if ((void *)(ip6 + 1) > end)
			return ST_ERROR;
		__builtin_memcpy(oi.src, &ip6->saddr, 16);
		__builtin_memcpy(oi.dst, &ip6->daddr, 16);
		__builtin_memcpy(ni.src, cfg->me, 16);
		__builtin_memcpy(ni.dst, hop->hop, 16);
	} else {
		struct iphdr *ip = data + 14;
		if ((void *)(ip + 1) > end)
			return ST_ERROR;
		__builtin_memcpy(oi.src, &ip->saddr, 4);
		__builtin_memcpy(oi.src + 4, &ip->daddr, 4);
		__builtin_memcpy(ni.src, cfg->me + 12, 4);
		__builtin_memcpy(ni.src + 4, hop->hop + 12, 4);
	}
	__s64 d_ip = bpf_csum_diff((__be32 *)&oi, ip_bytes, (__be32 *)&ni, ip_bytes, 0);
	__s64 d_l4 = bpf_csum_diff((__be32 *)&o, sizeof(o), (__be32 *)&n, sizeof(n), 0);
	if (d_ip < 0 || d_l4 < 0)
		return ST_ERROR;
	// From here on the packet changes. Direct writes first (the checksum helpers below
	// invalidate packet pointers), all inside the range checked above.
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return ST_ERROR;
	__builtin_memcpy(eth->h_dest, nh->dmac, 6);
	__builtin_memcpy(eth->h_source, nh->smac, 6);
	if (at->v6) {
		struct ipv6hdr *ip6 = data + 14;
		if ((void *)(ip6 + 1) > end)
			return ST_ERROR;
		__builtin_memcpy(&ip6->saddr, ni.src, 16);
		__builtin_memcpy(&ip6->daddr, ni.dst, 16);
	} else {
		struct iphdr *ip = data + 14;
		if ((void *)(ip + 1) > end)
			return ST_ERROR;
		__builtin_memcpy(&ip->saddr, ni.src, 4);
		__builtin_memcpy(&ip->daddr, ni.src + 4, 4);
	}
	if ((void *)(u + 4) > end)
		return ST_ERROR;
	__builtin_memcpy(u, n.ports, 4);
	__builtin_memcpy(a + ANEP_LEN + T_RB, n.rb, 2);
	__builtin_memcpy(a + ANEP_LEN + T_PREV, n.prev, ADDR_LEN);
	// The checksums, by difference (a CHECKSUM_PARTIAL skb gets only the pseudo-header's).
	// A UDP checksum that comes out 0 is sent as 0xffff (0 means none); over IPv4 a packet
	// without one keeps none, over IPv6 (where 0 is never valid) it is updated regardless.
	__u64 mangled0 = BPF_F_MARK_MANGLED_0 | (at->v6 ? BPF_F_MARK_ENFORCE : 0);
	if (!at->v6 && bpf_l3_csum_replace(skb, 14 + 10, 0, d_ip, 0) < 0)
		return ST_ERROR;
	if (bpf_l4_csum_replace(skb, at->check, 0, d_ip, BPF_F_PSEUDO_HDR | mangled0) < 0 ||
	    bpf_l4_csum_replace(skb, at->check, 0, d_l4, mangled0) < 0)
		return ST_ERROR;
	return -1;
}

INLINE int is_v4_mapped(const __u8 *a)
{
	for (int i = 0; i < 10; i++)
		if (a[i])
			return 0;
	return a[10] == 0xff && a[11] == 0xff;
}

// The decision and the rewrite: -1 forwarded (redirect to `*out`), else a pass reason.
INLINE int decide(struct __sk_buff *skb, __u32 *out, __u32 *bytes, __u32 *flags)
{
	__u32 zero = 0;
	const struct tconfig *cfg = bpf_map_lookup_elem(&tconfig, &zero);
	if (!cfg || cfg->family == 0)
		return ST_NOT_NODE;
	__u32 linear = (long)skb->data_end - (long)skb->data;
	if (linear < PULL_LEN && linear < skb->len)
		bpf_skb_pull_data(skb, skb->len < PULL_LEN ? skb->len : PULL_LEN);
	struct at at;
	struct addr_key src, dst;
	int r = ip_layer(skb, cfg, &at, &src);
	if (r >= 0)
		return r;
	if (cfg->punt_all)
		return ST_PUNT_ALL;
	const struct peer_val *in = bpf_map_lookup_elem(&peers, &src);
	if (!in || !(in->flags & PEER_UP))
		return ST_PEER;
	__u16 rb = 0;
	r = anep_layer(skb, cfg, &at, &dst, &rb);
	if (r >= 0)
		return r;
	const struct route_val *hop = bpf_map_lookup_elem(&troutes, &dst);
	if (!hop)
		return ST_NO_ROUTE;
	const struct peer_val *nh = &hop->nh;
	if ((nh->flags & (PEER_UP | PEER_PUNT)) != PEER_UP || at.payload > nh->mtu ||
	    is_v4_mapped(hop->hop) == at.v6)
		return ST_HOP;
	if (nh->oif == 0)
		return ST_NO_NEIGHBOR;
	if (at.ip_len > nh->oif_mtu)
		return ST_HOP;
	r = rewrite(skb, cfg, &at, hop, rb, nh);
	if (r >= 0)
		return r;
	*out = nh->oif;
	*bytes = at.payload;
	*flags = nh->flags;
	return -1;
}

SEC("classifier")
int anode_transit_tc(struct __sk_buff *skb)
{
	__u32 out = 0, bytes = 0, flags = 0;
	int r = decide(skb, &out, &bytes, &flags);
	if (r >= 0) {
		count(r, 0);
		return TC_ACT_OK;
	}
	count(ST_FWD, bytes);
	// Over a veth the packet goes straight to the other end's ingress (in the neighbor's
	// namespace), as if that end had received it: no transmit queue, no backlog on the way.
	if (flags & PEER_VETH)
		return bpf_redirect_peer(out, 0);
	return bpf_redirect(out, 0);
}

char _license[] SEC("license") = "GPL";
