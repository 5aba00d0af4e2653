//! Differential test of the kernel fast path for passive ANEP transit (`bpf/transit.c`), run
//! on crafted frames through `BPF_PROG_TEST_RUN` ([`TransitPath::test_run`]), against the
//! user-space path it stands in for: the kernel's receive path up to the node's UDP socket
//! (modelled here: the Ethernet destination, the IPv4 header checksum, fragments, the
//! node's address and port, the IP and UDP lengths, the UDP checksum), the driver's
//! source-to-link lookup, and a sans-IO [`anode_core::Node`] with the links, routes and EE
//! the program's maps were synced from (built as `anode_io`'s `kernel.rs` builds them).
//!
//! One corpus per address family (an IPv4 node, then an IPv6 node): valid datagrams and
//! capsules; every reason to leave a packet to the node (evaluate-every-hop and EE-route
//! flags, resource bound 0, for the node, no route, the next link's MTU and the next hop
//! interface's MTU, next hops that are impaired, of the other family, on a link that is
//! down or without a neighbor entry, sources that are no enabled peer, ANEP options, Type
//! IDs of no EE, control); truncations at several lengths; bad IPv4 header and UDP
//! checksums; IPv4 fragments and options; IPv6 extension headers; VLAN tags; IP and UDP
//! length games; then a few hundred seeded random mutations of the valid frames. For
//! every frame:
//! - the program returns `TC_ACT_OK` (0) with the frame unchanged byte for byte (it goes on
//!   to the node's socket), or `TC_ACT_REDIRECT` (7): it never drops;
//! - it redirects only a frame the user-space path forwards on the node's fast path
//!   (`Counters::fast_path`), and the frame it wrote is the input with the node's ANEP bytes
//!   (resource bound minus one, previous hop the node), the IP and UDP addresses and ports
//!   from the node to the node's next hop, a valid IPv4 header checksum and UDP checksum
//!   (computed here), and the MACs of that next hop's map entry; everything else as it came
//!   (TTL, IP id, Ethernet padding, bytes after the UDP datagram);
//! - one exception, stated by the program's contract (checksums updated incrementally, so
//!   that a `CHECKSUM_PARTIAL` skb from a local socket stays valid): the program cannot
//!   verify a UDP checksum, so a frame that is valid but for its UDP checksum may be
//!   forwarded with the checksum's error carried over exactly (the ones'-complement sum
//!   over pseudo-header and datagram unchanged), so that the next hop's kernel drops it
//!   where this node's would have; it is counted and reported separately;
//! - the program counts it once: forwarded (with its ANEP bytes) or exactly one pass reason
//!   (`tstats`, [`TransitPath::stats`]); each handcrafted frame names the outcome it must
//!   have (forwarded, or passed for a given reason), so the valid IPv4 and IPv6 transit
//!   packets are shown to be forwarded.
//!
//! The program does not look at the ingress device (it knows a link by the UDP source), so
//! the test runs it on the test run's default device, the loopback device, without a
//! network namespace; frames are addressed to that device's MAC (all zeros). Where it
//! redirects to is not visible in a test run; the next hop's MACs name the map entry.
//!
//! Needs root (loading BPF): ignored by default; run as root with `--include-ignored`.

use std::any::Any;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use anode_core::wire::anep::{
    AnepOptionT, AnepRepr, TYPE_CAPSULE, TYPE_CONTROL, TYPE_DATAGRAM, TYPE_PLAN,
};
use anode_core::wire::capsule::{Capsule, CapsuleRepr};
use anode_core::wire::datagram::Datagram;
use anode_core::wire::transit::{FLAG_EE_ROUTE, FLAG_EVAL_EVERY_HOP, TransitRepr};
use anode_core::wire::{NodeAddr, routed_packet};
use anode_core::{
    DropReason, EePacket, ExecutionEnvironment, LinkConfig, Node, NodeConfig, NodeContext,
};
use anode_ether::transit::{L2Path, TransitPath, TransitPeer, TransitStats, TransitTable};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const TC_ACT_OK: u32 = 0;
const TC_ACT_REDIRECT: u32 = 7;
/// The test run's ingress device: 0 is the loopback device.
const INGRESS: u32 = 0;
/// The ingress device's MAC (the loopback device's): frames for this host go to it.
const DEV_MAC: [u8; 6] = [0; 6];
/// The sending peer's MAC.
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0xaa, 1];
/// Another host's MAC (what a promiscuous interface also sees).
const OTHER_MAC: [u8; 6] = [2, 0, 0, 0, 0xbb, 1];
/// Seed of the mutations.
const SEED: u64 = 0x7a4e_5101;
/// Random mutations per address family.
const MUTATIONS: usize = 300;
/// The node's UDP port (and most peers').
const PORT: u16 = 3322;

// ---- checksums ----

/// Adds `b` to a ones'-complement sum as big-endian 16-bit words (an odd last byte padded
/// with zero). The sum stays folded: 0 only if every word was 0.
fn sum(mut acc: u32, b: &[u8]) -> u32 {
    for w in b.chunks(2) {
        acc += u32::from(u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)]));
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc
}

fn be16(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[at], f[at + 1]])
}

fn put16(f: &mut [u8], at: usize, v: u16) {
    f[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Where the UDP datagram of a frame is (when the headers before it are all there).
#[derive(Debug, Clone, Copy)]
struct Ip {
    v6: bool,
    /// UDP header offset.
    l4: usize,
    /// UDP length field.
    ulen: usize,
}

impl Ip {
    fn of(f: &[u8]) -> Option<Ip> {
        let (v6, l4) = match be16(f.get(..14)?, 12) {
            0x0800 => (false, 14 + usize::from(f.get(14)? & 0xf) * 4),
            0x86dd => (true, 54),
            _ => return None,
        };
        let ulen = usize::from(be16(f.get(l4..l4 + 8)?, 4));
        Some(Ip { v6, l4, ulen })
    }

    /// The source and destination address bytes.
    fn addrs(self, f: &[u8]) -> (&[u8], &[u8]) {
        if self.v6 {
            (&f[22..38], &f[38..54])
        } else {
            (&f[26..30], &f[30..34])
        }
    }

    /// The ones'-complement sum over pseudo-header and datagram, checksum field as it is
    /// (0xffff: valid); `None` if the datagram is not all there.
    fn udp_sum(self, f: &[u8]) -> Option<u16> {
        let udp = f.get(self.l4..self.l4 + self.ulen)?;
        let (src, dst) = self.addrs(f);
        let mut s = sum(sum(0, src), dst);
        s = sum(s, &[0, 17]);
        s = sum(s, &u16::try_from(self.ulen).ok()?.to_be_bytes());
        Some(sum(s, udp) as u16)
    }

    /// The UDP checksum the datagram should carry (0 sent as 0xffff).
    fn udp_checksum(self, f: &[u8]) -> Option<u16> {
        let mut z = f.to_vec();
        put16(&mut z, self.l4 + 6, 0);
        match !self.udp_sum(&z)? {
            0 => Some(0xffff),
            c => Some(c),
        }
    }
}

/// Recomputes the IPv4 header checksum and the UDP checksum, where the headers are there.
fn fix_sums(f: &mut [u8]) {
    let Some(ip) = Ip::of(f) else { return };
    if !ip.v6 && f.len() >= ip.l4 {
        put16(f, 24, 0);
        let c = !(sum(0, &f[14..ip.l4]) as u16);
        put16(f, 24, c);
    }
    if let Some(c) = ip.udp_checksum(f) {
        put16(f, ip.l4 + 6, c);
    }
}

/// Sets the IP and UDP lengths to what the frame holds.
fn fix_lengths(f: &mut [u8]) {
    let Some(ip) = Ip::of(f) else { return };
    let Some(ulen) = f.len().checked_sub(ip.l4) else {
        return;
    };
    if ip.v6 {
        put16(f, 18, (f.len() - 54) as u16);
    } else {
        put16(f, 16, (f.len() - 14) as u16);
    }
    put16(f, ip.l4 + 4, ulen as u16);
}

// ---- the test network ----

/// The node's peers, by index in [`Net::peers`]; `far(P)` is the destination routed via P.
const P_A: usize = 0; // up: the usual source and next hop
const P_PORT: usize = 1; // up, on another UDP port
const P_SMALL: usize = 2; // its link's MTU is 300 bytes
const P_NARROW: usize = 3; // the interface toward it has an MTU of 600 IP bytes
const P_NO_NEIGH: usize = 4; // no neighbor entry in the kernel (yet)
const P_IMPAIRED: usize = 5; // its link has an impairment: the node sends
const P_DOWN: usize = 6; // its link is down
const P_OTHER: usize = 7; // of the other address family

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Up,
    Down,
    Impaired,
}

#[derive(Debug, Clone, Copy)]
struct PeerSpec {
    addr: NodeAddr,
    mtu: usize,
    state: State,
    l2: Option<L2Path>,
}

/// A node and its peers: 198.18.0.0/24 or 2001:2::/64; the destinations beyond the peers
/// in 198.19.0.0/24 or 2001:2:0:1::/64.
#[derive(Debug)]
struct Net {
    v6: bool,
    me: NodeAddr,
    peers: Vec<PeerSpec>,
}

fn host(v6: bool, net: u8, host: u8, port: u16) -> NodeAddr {
    let ip = if v6 {
        IpAddr::V6(Ipv6Addr::new(
            0x2001,
            2,
            0,
            u16::from(net),
            0,
            0,
            0,
            u16::from(host),
        ))
    } else {
        IpAddr::V4(Ipv4Addr::new(198, 18 + net, 0, host))
    };
    NodeAddr::new(ip, port)
}

fn l2(oif: u8, mtu: u32) -> Option<L2Path> {
    Some(L2Path {
        oif: u32::from(oif),
        mtu,
        smac: [2, 0, 0, 0, oif, 1],
        dmac: [2, 0, 0, 0, oif, 2],
        veth: false,
    })
}

impl Net {
    fn new(v6: bool) -> Net {
        let peer = |h: u8, port: u16, mtu: usize, state: State, l2: Option<L2Path>| PeerSpec {
            addr: host(v6, 0, h, port),
            mtu,
            state,
            l2,
        };
        let mut peers = vec![
            peer(2, PORT, 1472, State::Up, l2(11, 1500)),
            peer(3, PORT + 1, 1472, State::Up, l2(12, 1500)),
            peer(4, PORT, 300, State::Up, l2(13, 1500)),
            peer(5, PORT, 1472, State::Up, l2(14, 600)),
            peer(6, PORT, 1472, State::Up, None),
            peer(7, PORT, 1472, State::Impaired, l2(16, 1500)),
            peer(8, PORT, 1472, State::Down, l2(17, 1500)),
        ];
        peers.push(PeerSpec {
            addr: host(!v6, 0, 9, PORT),
            ..peer(9, PORT, 1472, State::Up, l2(18, 1500))
        });
        Net {
            v6,
            me: host(v6, 0, 1, PORT),
            peers,
        }
    }

    fn family(&self) -> &'static str {
        if self.v6 { "IPv6" } else { "IPv4" }
    }

    fn peer(&self, p: usize) -> NodeAddr {
        self.peers[p].addr
    }

    /// The destination routed via peer `p`.
    fn far(&self, p: usize) -> NodeAddr {
        host(self.v6, 1, 10 + p as u8, PORT)
    }

    fn spec(&self, a: NodeAddr) -> Option<&PeerSpec> {
        self.peers.iter().find(|p| p.addr == a)
    }
}

/// An EE for capsules that keeps what it is given (the node's fast path forwards the
/// capsules that do not ask for it).
#[derive(Debug)]
struct Sink;

impl ExecutionEnvironment for Sink {
    fn type_id(&self) -> u16 {
        TYPE_CAPSULE
    }
    fn name(&self) -> &str {
        "sink"
    }
    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, _pkt: EePacket) {
        ctx.count_drop("sink", DropReason::GuestDrop);
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The node of `net`: static-neighbor links to its peers (one down), a static route to
/// `far(P)` via each peer P, the capsule EE; nothing queued.
fn build_node(net: &Net, now: Instant) -> Node {
    let mut node = Node::new(NodeConfig::new(net.me), now).expect("node config");
    node.register_ee(Box::new(Sink));
    for p in &net.peers {
        let link = node.add_link(
            LinkConfig {
                mtu: p.mtu,
                static_neighbor: true,
                ..LinkConfig::new(p.addr)
            },
            now,
        );
        if p.state == State::Down {
            node.set_link_up(link, false, now);
        }
    }
    for (i, p) in net.peers.iter().enumerate() {
        node.add_static_route(net.far(i), p.addr, 1, now);
    }
    while node.poll_transmit().is_some() {}
    while node.poll_event().is_some() {}
    node
}

/// The program's table for `node`, as `anode_io`'s `kernel.rs` builds it (the kernel's
/// route and neighbor answers and the impairments from `net`).
fn table(node: &Node, net: &Net) -> TransitTable {
    let v = node.transit_view();
    let mut t = TransitTable {
        me: node.address().to_bytes(),
        punt_all: v.hooks,
        punt_ee: v.cut_through,
        ee_types: v.ee_types.clone(),
        ..TransitTable::default()
    };
    for (id, c, up) in node.links() {
        let spec = net.spec(c.peer).expect("a peer of the test network");
        t.peers.insert(
            c.peer.to_bytes(),
            TransitPeer {
                mtu: u32::try_from(c.mtu).expect("mtu"),
                up,
                punt: v.qdisc_links.contains(&id) || spec.state == State::Impaired,
                l2: spec.l2,
            },
        );
    }
    for (dst, e) in node.fib().entries() {
        t.routes.insert(dst, e.hop.addr.to_bytes());
    }
    t
}

// ---- the user-space path ----

/// What the node's UDP socket gets from a frame.
#[derive(Debug)]
struct Rx {
    src: NodeAddr,
    payload: Vec<u8>,
    /// The UDP checksum is right (or absent, over IPv4); if not, the kernel drops the frame.
    udp_ok: bool,
}

/// The IP layer of Linux's receive path for a host at `me`: the source address, the UDP
/// header offset and the end of the IP packet, or why the frame never reaches UDP.
fn ip_rx(f: &[u8], me: NodeAddr) -> Result<(IpAddr, usize, usize), &'static str> {
    if f[0] & 1 == 0 && f[..6] != DEV_MAC {
        return Err("another host's MAC (PACKET_OTHERHOST)");
    }
    let (src, dst, l4, end) = match be16(f, 12) {
        0x0800 => {
            let h = f.get(14..34).ok_or("IPv4 header truncated")?;
            let hl = usize::from(h[0] & 0xf) * 4;
            let tot = usize::from(be16(h, 2));
            if h[0] >> 4 != 4 || hl < 20 || f.len() < 14 + hl {
                return Err("bad IPv4 header");
            }
            if sum(0, &f[14..14 + hl]) != 0xffff {
                return Err("IPv4 header checksum");
            }
            if tot < hl || 14 + tot > f.len() {
                return Err("IPv4 total length");
            }
            if be16(h, 6) & 0x3fff != 0 {
                return Err("a fragment: reassembly waits for the others");
            }
            if h[9] != 17 {
                return Err("not UDP");
            }
            let s: [u8; 4] = h[12..16].try_into().expect("4 bytes");
            let d: [u8; 4] = h[16..20].try_into().expect("4 bytes");
            (IpAddr::from(s), IpAddr::from(d), 14 + hl, 14 + tot)
        }
        0x86dd => {
            let h = f.get(14..54).ok_or("IPv6 header truncated")?;
            let plen = usize::from(be16(h, 4));
            if h[0] >> 4 != 6 || 54 + plen > f.len() {
                return Err("bad IPv6 header or payload length");
            }
            if h[6] != 17 {
                return Err("extension headers or not UDP (not modelled)");
            }
            let s: [u8; 16] = h[8..24].try_into().expect("16 bytes");
            let d: [u8; 16] = h[24..40].try_into().expect("16 bytes");
            (IpAddr::from(s), IpAddr::from(d), 54, 54 + plen)
        }
        _ => return Err("not IP (or VLAN-tagged)"),
    };
    if dst != me.ip() {
        return Err("to another address");
    }
    Ok((src, l4, end))
}

/// What the node's socket gets from `f` (a model of Linux's receive path for a host at
/// `me`), or why the kernel drops it before.
fn socket_rx(f: &[u8], me: NodeAddr) -> Result<Rx, &'static str> {
    if f.len() < 14 {
        return Err("shorter than an Ethernet header");
    }
    let (src, l4, end) = ip_rx(f, me)?;
    let u = f.get(l4..l4 + 8).ok_or("UDP header truncated")?;
    let ulen = usize::from(be16(u, 4));
    if ulen < 8 || l4 + ulen > end {
        return Err("UDP length");
    }
    if be16(u, 2) != me.port() {
        return Err("to another port");
    }
    let ip = Ip {
        v6: src.is_ipv6(),
        l4,
        ulen,
    };
    let udp_ok = match be16(u, 6) {
        0 => !ip.v6,
        _ => ip.udp_sum(f) == Some(0xffff),
    };
    Ok(Rx {
        src: NodeAddr::new(src, be16(u, 0)),
        payload: f[l4 + 8..l4 + ulen].to_vec(),
        udp_ok,
    })
}

/// What the driver and the node do with `rx`: the next hop and the ANEP bytes sent to it
/// if the node forwards it on its fast path, else what happens instead.
fn node_forwards(net: &Net, now: Instant, rx: &Rx) -> Result<(NodeAddr, Vec<u8>), String> {
    let mut node = build_node(net, now);
    let Some(link) = node.link_by_peer(&rx.src) else {
        return Err(format!("{} is no link's peer: the driver drops it", rx.src));
    };
    let before = node.counters().fast_path;
    node.handle_packet(now, link, rx.payload.clone());
    let tx: Vec<_> = std::iter::from_fn(|| node.poll_transmit()).collect();
    match tx.as_slice() {
        [t] if node.counters().fast_path == before + 1 => Ok((t.dst, t.buf.clone())),
        _ => Err(format!(
            "the node does not forward it on its fast path ({} transmits, {} drops)",
            tx.len(),
            node.counters().total_drops()
        )),
    }
}

/// The frame standing for what the node sends: `input` from the node to `hop` through
/// `l2`, carrying `anep`; the UDP checksum kept 0 if an IPv4 input had none.
fn expected_frame(
    input: &[u8],
    me: NodeAddr,
    hop: NodeAddr,
    l2: L2Path,
    anep: &[u8],
) -> Result<Vec<u8>, String> {
    let ip = Ip::of(input).ok_or("no UDP header")?;
    let mut f = input.to_vec();
    f[..6].copy_from_slice(&l2.dmac);
    f[6..12].copy_from_slice(&l2.smac);
    match (ip.v6, me.ip(), hop.ip()) {
        (false, IpAddr::V4(s), IpAddr::V4(d)) => {
            f[26..30].copy_from_slice(&s.octets());
            f[30..34].copy_from_slice(&d.octets());
        }
        (true, IpAddr::V6(s), IpAddr::V6(d)) => {
            f[22..38].copy_from_slice(&s.octets());
            f[38..54].copy_from_slice(&d.octets());
        }
        _ => return Err(format!("the node's next hop {hop} is of another family")),
    }
    put16(&mut f, ip.l4, me.port());
    put16(&mut f, ip.l4 + 2, hop.port());
    let body = f
        .get_mut(ip.l4 + 8..ip.l4 + ip.ulen)
        .filter(|b| b.len() == anep.len())
        .ok_or("the node sends another length")?;
    body.copy_from_slice(anep);
    let no_sum = !ip.v6 && be16(input, ip.l4 + 6) == 0;
    fix_sums(&mut f);
    if no_sum {
        put16(&mut f, ip.l4 + 6, 0);
    }
    Ok(f)
}

/// Where two frames differ (the first few offsets).
fn diff(want: &[u8], got: &[u8]) -> String {
    let at: Vec<String> = (0..want.len().max(got.len()))
        .filter(|&i| want.get(i) != got.get(i))
        .take(8)
        .map(|i| format!("@{i}: want {:02x?} got {:02x?}", want.get(i), got.get(i)))
        .collect();
    format!("lengths {} / {}; {}", want.len(), got.len(), at.join(", "))
}

/// The program redirected `input` as `out`, counting `bytes`: the user-space path must
/// forward it the same way. Returns true if it carried a bad UDP checksum (module docs).
fn check_forward(
    net: &Net,
    now: Instant,
    input: &[u8],
    out: &[u8],
    bytes: u64,
) -> Result<bool, String> {
    let rx = socket_rx(input, net.me)
        .map_err(|why| format!("redirected a frame the kernel drops before the socket: {why}"))?;
    let (hop, anep) = node_forwards(net, now, &rx).map_err(|e| format!("redirected, but {e}"))?;
    if bytes != anep.len() as u64 {
        return Err(format!(
            "counted {bytes} bytes, the node sends {}",
            anep.len()
        ));
    }
    let l2 = net
        .spec(hop)
        .and_then(|p| p.l2)
        .ok_or_else(|| format!("redirected, but the node's next hop {hop} has no neighbor"))?;
    let want = expected_frame(input, net.me, hop, l2, &anep)?;
    let ip = Ip::of(&want).ok_or("no UDP header")?;
    let c = ip.l4 + 6..ip.l4 + 8;
    let blank = |f: &[u8]| {
        let mut f = f.to_vec();
        if let Some(b) = f.get_mut(c.clone()) {
            b.fill(0);
        }
        f
    };
    if blank(&want) != blank(out) {
        return Err(format!(
            "redirected to {hop}, not as the node sends it (UDP checksum aside): {}",
            diff(&want, out)
        ));
    }
    if rx.udp_ok {
        if want.get(c.clone()) != out.get(c.clone()) {
            return Err(format!(
                "redirected to {hop} with UDP checksum {:02x?}, want {:02x?}",
                out.get(c.clone()),
                want.get(c)
            ));
        }
        return Ok(false);
    }
    let (s_in, s_out) = (
        Ip::of(input).and_then(|i| i.udp_sum(input)),
        ip.udp_sum(out),
    );
    if s_in != s_out || s_out == Some(0xffff) {
        return Err(format!(
            "redirected a frame with a bad UDP checksum to {hop} without carrying its error \
             over (sums {s_in:04x?} -> {s_out:04x?})"
        ));
    }
    Ok(true)
}

// ---- one frame through the program ----

/// The outcome a handcrafted frame must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Redirected (with a valid checksum).
    Forward,
    /// Passed on, counted under this reason.
    Pass(&'static str),
    /// Passed on, for any reason.
    PassAny,
    /// Whatever the differential check allows.
    Free,
}

use Expect::{Forward, Free, Pass, PassAny};

#[derive(Debug)]
struct Case {
    name: String,
    frame: Vec<u8>,
    expect: Expect,
}

/// What the program did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Forwarded { carried_bad_udp: bool },
    Passed(&'static str),
}

/// Which one counter grew between two readings (by exactly one), and the bytes counted.
fn counted(a: &TransitStats, b: &TransitStats) -> Result<(Option<&'static str>, u64), String> {
    let mut grew: Vec<(&'static str, u64)> = b
        .passed
        .iter()
        .map(|(n, v)| (*n, v - a.passed.get(n).copied().unwrap_or(0)))
        .filter(|(_, d)| *d != 0)
        .collect();
    if b.forwarded != a.forwarded {
        grew.push(("forwarded", b.forwarded - a.forwarded));
    }
    match grew.as_slice() {
        [("forwarded", 1)] => Ok((None, b.forwarded_bytes - a.forwarded_bytes)),
        [(why, 1)] => Ok((Some(*why), 0)),
        _ => Err(format!(
            "counted as {grew:?}: want exactly one counter, once"
        )),
    }
}

/// Runs `c` through the program and checks it against the user-space path.
fn check(tp: &TransitPath, net: &Net, now: Instant, c: &Case) -> Result<Outcome, String> {
    let before = tp.stats().map_err(|e| e.to_string())?;
    let (rv, out) = tp
        .test_run(&c.frame, INGRESS)
        .map_err(|e| format!("test run: {e}"))?;
    let after = tp.stats().map_err(|e| e.to_string())?;
    let (reason, bytes) = counted(&before, &after)?;
    let outcome = match (rv, reason) {
        (TC_ACT_OK, Some(why)) => {
            if out != c.frame {
                return Err(format!(
                    "passed on ({why}) but changed: {}",
                    diff(&c.frame, &out)
                ));
            }
            Outcome::Passed(why)
        }
        (TC_ACT_REDIRECT, None) => Outcome::Forwarded {
            carried_bad_udp: check_forward(net, now, &c.frame, &out, bytes)?,
        },
        (rv, reason) => {
            return Err(format!(
                "returned {rv} counted as {reason:?}: only TC_ACT_OK (passed) or \
                 TC_ACT_REDIRECT (forwarded)"
            ));
        }
    };
    let ok = match (c.expect, outcome) {
        (Free, _) => true,
        (Forward, o) => {
            o == Outcome::Forwarded {
                carried_bad_udp: false,
            }
        }
        (PassAny, o) => matches!(o, Outcome::Passed(_)),
        (Pass(want), o) => o == Outcome::Passed(want),
    };
    if !ok {
        return Err(format!("{outcome:?}, want {:?}", c.expect));
    }
    Ok(outcome)
}

// ---- the corpus ----

/// A transit header from a node beyond the peers, arrived from peer A.
fn transit(net: &Net, dst: NodeAddr, rb: u16, flags: u8) -> TransitRepr {
    TransitRepr {
        flags,
        rb,
        flow: 0x0102_0304_0506_0708,
        src: host(net.v6, 1, 200, PORT),
        dst,
        prev_hop: net.peer(P_A),
    }
}

/// A datagram with `len` payload bytes (its ANEP packet is 84 + `len` bytes).
fn datagram(t: TransitRepr, len: usize) -> Vec<u8> {
    Datagram {
        transit: t,
        port: 7,
        payload: (0..len).map(|i| (i * 7 + 1) as u8).collect(),
    }
    .to_packet()
    .expect("datagram")
}

fn capsule(t: TransitRepr) -> Vec<u8> {
    Capsule {
        transit: t,
        header: CapsuleRepr {
            flags: 0,
            code: [0x5a; 32],
            code_source: None,
        },
        payload: b"capsule payload".to_vec(),
    }
    .to_packet()
    .expect("capsule")
}

/// An Ethernet frame from `src` to `dst` carrying `anep` over UDP, checksums right.
fn frame(src: NodeAddr, dst: NodeAddr, anep: &[u8]) -> Vec<u8> {
    let ulen = 8 + anep.len();
    let mut f = DEV_MAC.to_vec();
    f.extend(PEER_MAC);
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend([0x08, 0x00, 0x45, 0]);
            f.extend(((20 + ulen) as u16).to_be_bytes());
            f.extend([0x12, 0x34, 0x40, 0, 64, 17, 0, 0]);
            f.extend(s.octets());
            f.extend(d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend([0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend((ulen as u16).to_be_bytes());
            f.extend([17, 64]);
            f.extend(s.octets());
            f.extend(d.octets());
        }
        _ => panic!("{src} and {dst} are of different families"),
    }
    f.extend(src.port().to_be_bytes());
    f.extend(dst.port().to_be_bytes());
    f.extend((ulen as u16).to_be_bytes());
    f.extend([0, 0]);
    f.extend(anep);
    fix_sums(&mut f);
    f
}

/// `f` padded with zeros to the shortest Ethernet frame (60 bytes without FCS), as a NIC
/// delivers a short one (`BPF_PROG_TEST_RUN` refuses frames shorter than the IP header their
/// EtherType announces).
fn ethernet_min(mut f: Vec<u8>) -> Vec<u8> {
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// `f` changed by `edit`, then lengths and checksums fixed (so only the edit differs).
fn edited(f: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut f = f.to_vec();
    edit(&mut f);
    fix_lengths(&mut f);
    fix_sums(&mut f);
    f
}

/// The ANEP offset of frame `f` built by [`frame`].
fn anep_at(f: &[u8]) -> usize {
    Ip::of(f).expect("UDP").l4 + 8
}

/// The frames of a corpus and the outcome each must have.
#[derive(Debug, Default)]
struct Corpus(Vec<Case>);

impl Corpus {
    fn add(&mut self, name: impl Into<String>, frame: Vec<u8>, expect: Expect) {
        self.0.push(Case {
            name: name.into(),
            frame,
            expect,
        });
    }
}

/// Valid transit packets, and the resource bound, flags, destination and Type ID cases.
fn header_cases(net: &Net, c: &mut Corpus) {
    let (a, me, far) = (net.peer(P_A), net.me, net.far(P_A));
    let dg = |dst, rb, flags| frame(a, me, &datagram(transit(net, dst, rb, flags), 100));
    c.add("datagram to a farther node", dg(far, 16, 0), Forward);
    c.add(
        "datagram via a peer on another port",
        dg(net.far(P_PORT), 16, 0),
        Forward,
    );
    c.add(
        "datagram to a peer itself",
        dg(net.peer(P_PORT), 16, 0),
        Forward,
    );
    c.add("resource bound 1", dg(far, 1, 0), Forward);
    c.add("resource bound 65535", dg(far, 0xffff, 0), Forward);
    c.add("resource bound 0", dg(far, 0, 0), Pass("rb_exhausted"));
    c.add("for the node", dg(me, 16, 0), Pass("for_node"));
    c.add(
        "unknown destination",
        dg(host(net.v6, 1, 99, PORT), 16, 0),
        Pass("no_route"),
    );
    let unrouted_port = NodeAddr::new(far.ip(), 9);
    c.add(
        "destination on an unrouted port",
        dg(unrouted_port, 16, 0),
        Pass("no_route"),
    );
    let (every, ee) = (FLAG_EVAL_EVERY_HOP, FLAG_EE_ROUTE);
    c.add("datagram, EE-route flag", dg(far, 16, ee), Pass("active"));
    c.add(
        "datagram, evaluate-every-hop flag",
        dg(far, 16, every),
        Pass("active"),
    );
    let cap = |flags| frame(a, me, &capsule(transit(net, far, 16, flags)));
    c.add("capsule without evaluate-every-hop", cap(0), Forward);
    c.add(
        "capsule with evaluate-every-hop",
        cap(every),
        Pass("active"),
    );
    let t = transit(net, far, 16, 0);
    let typed = |ty| {
        frame(
            a,
            me,
            &routed_packet(ty, &t, &[0, 7, 0, 0], b"body").unwrap(),
        )
    };
    c.add("PLAN Type ID, no PLAN EE", typed(TYPE_PLAN), Pass("type"));
    c.add("unknown Type ID", typed(0x0A77), Pass("type"));
    c.add("control Type ID", typed(TYPE_CONTROL), Pass("type"));
    let d = Datagram {
        transit: t,
        port: 7,
        payload: b"options".to_vec(),
    };
    let passable = frame(a, me, &d.to_packet_as(0x0A77).unwrap());
    c.add(
        "unknown Type ID, destination option",
        passable,
        Pass("anep_options"),
    );
    let with = |o| {
        let mut body = t.to_vec();
        body.extend([0, 7, 0, 0]);
        body.extend(b"options");
        let r = AnepRepr {
            options: vec![o],
            ..AnepRepr::new(TYPE_DATAGRAM)
        };
        frame(a, me, &r.emit_packet(&body).unwrap())
    };
    let sum_opt = with(AnepOptionT::Checksum(0));
    c.add(
        "datagram, ANEP checksum option",
        sum_opt,
        Pass("anep_options"),
    );
    let src_opt = with(AnepOptionT::Source(a));
    c.add(
        "datagram, ANEP source option",
        src_opt,
        Pass("anep_options"),
    );
}

/// Next hops and sources: MTUs, link state, neighbors, families, peers.
fn path_cases(net: &Net, c: &mut Corpus) {
    let (a, me) = (net.peer(P_A), net.me);
    let dg = |p, len| frame(a, me, &datagram(transit(net, net.far(p), 16, 0), len));
    // A datagram's ANEP packet is 84 bytes and its payload; IP and UDP add 28 or 48.
    c.add(
        "exactly the next link's MTU",
        dg(P_SMALL, 300 - 84),
        Forward,
    );
    c.add(
        "larger than the next link's MTU",
        dg(P_SMALL, 301 - 84),
        Pass("next_hop"),
    );
    let ip = if net.v6 { 48 } else { 28 };
    c.add(
        "exactly the interface's MTU",
        dg(P_NARROW, 600 - ip - 84),
        Forward,
    );
    let over = dg(P_NARROW, 601 - ip - 84);
    c.add("larger than the interface's MTU", over, Pass("next_hop"));
    c.add(
        "next hop without neighbor",
        dg(P_NO_NEIGH, 100),
        Pass("no_neighbor"),
    );
    c.add(
        "next hop behind an impairment",
        dg(P_IMPAIRED, 100),
        Pass("next_hop"),
    );
    c.add("next hop's link down", dg(P_DOWN, 100), Pass("no_route"));
    c.add(
        "next hop of the other family",
        dg(P_OTHER, 100),
        Pass("next_hop"),
    );
    let anep = datagram(transit(net, net.far(P_A), 16, 0), 100);
    let from = |src| frame(src, me, &anep);
    c.add(
        "from a peer on another port",
        from(net.peer(P_PORT)),
        Forward,
    );
    let wrong_port = from(NodeAddr::new(a.ip(), 9999));
    c.add("source port that is no peer's", wrong_port, Pass("peer"));
    c.add(
        "from a peer whose link is down",
        from(net.peer(P_DOWN)),
        Pass("peer"),
    );
    let stranger = from(host(net.v6, 0, 77, PORT));
    c.add("from a host that is no peer", stranger, Pass("peer"));
}

/// The usual valid frame: a datagram from peer A to `far(P_A)`, via A.
fn usual(net: &Net) -> Vec<u8> {
    let anep = datagram(transit(net, net.far(P_A), 16, 0), 100);
    frame(net.peer(P_A), net.me, &anep)
}

/// Truncations, with the IP and UDP lengths as they were and adjusted.
fn truncated_cases(net: &Net, c: &mut Corpus) {
    let full = usual(net);
    let at = anep_at(&full);
    let mut cuts = vec![14, 15, 20, 33, 34, 41, 42, 53, 54, 61, 62];
    cuts.extend([at + 7, at + 8, at + 79, at + 80, at + 83, full.len() - 1]);
    for n in cuts.into_iter().filter(|n| *n < full.len()) {
        let f = ethernet_min(full[..n].to_vec());
        c.add(format!("truncated to {n} bytes"), f, PassAny);
    }
    for n in [at + 8, at + 40, at + 79, at + 80, at + 84, full.len() - 1] {
        let f = edited(&full, |f| f.truncate(n));
        let name = format!("ANEP cut at {} bytes, lengths adjusted", n - at);
        c.add(name, f, Pass("malformed"));
    }
}

/// IP and UDP level cases: checksums, tags, lengths, addresses.
fn ip_cases(net: &Net, c: &mut Corpus) {
    let good = usual(net);
    let ip = Ip::of(&good).expect("UDP");
    let with = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut f = good.clone();
        edit(&mut f);
        f
    };
    // The kernel drops these at the socket; the program may forward them with the error
    // carried over (module docs), which `check_forward` holds it to.
    c.add("bad UDP checksum", with(&|f| f[ip.l4 + 6] ^= 0x5a), Free);
    let changed = with(&|f| *f.last_mut().unwrap() ^= 1);
    c.add("payload changed after the UDP checksum", changed, Free);
    // Over IPv4: no checksum, valid (and it stays 0); over IPv6: invalid.
    let zero = with(&|f| put16(f, ip.l4 + 6, 0));
    c.add("UDP checksum 0", zero, if net.v6 { Free } else { Forward });
    c.add(
        "forwarded UDP checksum computes to 0",
        zero_sum_frame(net),
        Forward,
    );
    let other_mac = with(&|f| f[..6].copy_from_slice(&OTHER_MAC));
    c.add("to another host's MAC", other_mac, Pass("not_node"));
    let padded = with(&|f| f.extend([0; 20]));
    c.add("Ethernet padding after the IP packet", padded, Forward);
    let short_udp = with(&|f| {
        f.extend([0xee; 6]);
        fix_lengths(f);
        put16(f, ip.l4 + 4, ip.ulen as u16);
        fix_sums(f);
    });
    c.add("UDP length short of the IP payload", short_udp, Forward);
    let long_udp = with(&|f| put16(f, ip.l4 + 4, ip.ulen as u16 + 2));
    c.add(
        "UDP length past the IP payload",
        long_udp,
        Pass("malformed"),
    );
    let trailing = edited(&good, |f| f.extend([0xee; 8]));
    c.add("UDP payload longer than the ANEP packet", trailing, Forward);
    let last = if net.v6 { 53 } else { 33 };
    let other_dst = edited(&good, |f| f[last] ^= 0x40);
    c.add("to another IP address", other_dst, Pass("not_node"));
    let other_port = edited(&good, |f| put16(f, ip.l4 + 2, PORT + 7));
    c.add("to another UDP port", other_port, Pass("not_node"));
    let tagged = with(&|f| drop(f.splice(12..12, [0x81, 0x00, 0x00, 0x05])));
    c.add("802.1Q tagged", tagged, Pass("not_node"));
    let (v6, anep) = (!net.v6, &good[ip.l4 + 8..]);
    let cross = frame(host(v6, 0, 2, PORT), host(v6, 0, 1, PORT), anep);
    c.add("the other family's frame", cross, Pass("not_node"));
}

/// IPv4 fragments, options, header checksum and TTL.
fn ipv4_cases(net: &Net, c: &mut Corpus) {
    let good = usual(net);
    let mut bad_hdr = good.clone();
    bad_hdr[24] ^= 0x11;
    c.add("bad IPv4 header checksum", bad_hdr, Pass("malformed"));
    let frag = |v: u16| edited(&good, |f| put16(f, 20, v));
    c.add(
        "IPv4 fragment, more fragments",
        frag(0x2000),
        Pass("not_node"),
    );
    c.add("IPv4 fragment, offset 8", frag(0x0001), Pass("not_node"));
    c.add("IPv4 without DF", frag(0), Forward);
    let options = edited(&good, |f| {
        f[14] = 0x46;
        f.splice(34..34, [1, 1, 1, 0]);
    });
    c.add("IPv4 with options", options, Pass("not_node"));
    c.add("IPv4 TTL 1", edited(&good, |f| f[22] = 1), Forward);
}

/// An IPv6 extension header and hop limit.
fn ipv6_cases(net: &Net, c: &mut Corpus) {
    let good = usual(net);
    // The UDP checksum stays right: same addresses, same upper-layer length.
    let mut hop_by_hop = good.clone();
    hop_by_hop[20] = 0;
    hop_by_hop.splice(54..54, [17, 0, 1, 4, 0, 0, 0, 0]);
    let plen = be16(&hop_by_hop, 18) + 8;
    put16(&mut hop_by_hop, 18, plen);
    c.add("IPv6 hop-by-hop header", hop_by_hop, Pass("not_node"));
    c.add("IPv6 hop limit 1", edited(&good, |f| f[21] = 1), Forward);
}

/// ANEP and transit header fields the program checks.
fn anep_cases(net: &Net, c: &mut Corpus) {
    let good = usual(net);
    let at = anep_at(&good);
    let set = |off: usize, v: &[u8]| edited(&good, |f| f[at + off..][..v.len()].copy_from_slice(v));
    c.add("ANEP version 2", set(0, &[2]), Pass("malformed"));
    c.add("ANEP discard flag clear", set(1, &[0]), Forward);
    c.add(
        "ANEP header length 1 word",
        set(4, &[0, 1]),
        Pass("malformed"),
    );
    c.add("ANEP header length 3 words", set(4, &[0, 3]), Free);
    let long = (good.len() - at + 1) as u16;
    c.add(
        "ANEP packet longer than UDP",
        set(6, &long.to_be_bytes()),
        Pass("malformed"),
    );
    c.add("ANEP packet length 80", set(6, &[0, 80]), Forward);
    c.add("ANEP packet length 79", set(6, &[0, 79]), Free);
    c.add("transit version 2", set(8, &[2]), Pass("malformed"));
    c.add(
        "transit header 71 bytes",
        set(10, &[0, 71]),
        Pass("malformed"),
    );
    c.add(
        "transit header past the packet",
        set(10, &[0x10, 0]),
        Pass("malformed"),
    );
    let longer = edited(&good, |f| {
        f.splice(at + 80..at + 80, [0xab; 4]);
        put16(f, at + 10, 76);
        let plen = be16(f, at + 6) + 4;
        put16(f, at + 6, plen);
    });
    c.add("transit header of 76 bytes", longer, Forward);
}

/// A valid frame whose forwarded UDP checksum computes to 0 (sent as 0xffff): two payload
/// bytes chosen so that the rewritten datagram sums to 0xffff.
fn zero_sum_frame(net: &Net) -> Vec<u8> {
    let hop = net.peer(P_A);
    let mut f = frame(
        hop,
        net.me,
        &datagram(transit(net, net.far(P_A), 16, 0), 100),
    );
    let ip = Ip::of(&f).expect("UDP");
    let at = ip.l4 + 8;
    // What the node will send: resource bound - 1, previous hop the node.
    let mut anep = f[at..].to_vec();
    put16(&mut anep, 8 + 4, 15);
    anep[8 + 52..8 + 70].copy_from_slice(&net.me.to_bytes());
    let mut want = expected_frame(&f, net.me, hop, net.peers[P_A].l2.unwrap(), &anep).unwrap();
    put16(&mut want, ip.l4 + 6, 0);
    let s = ip.udp_sum(&want).unwrap();
    // A word of the datagram payload, at an even offset in the UDP datagram.
    let w = f.len() - 2;
    assert_eq!((w - ip.l4) % 2, 0);
    let v = sum(u32::from(be16(&f, w)), &(!s).to_be_bytes()) as u16;
    put16(&mut f, w, v);
    fix_sums(&mut f);
    f
}

/// The handcrafted corpus of a family.
fn handmade(net: &Net) -> Vec<Case> {
    let mut c = Corpus::default();
    header_cases(net, &mut c);
    path_cases(net, &mut c);
    anep_cases(net, &mut c);
    ip_cases(net, &mut c);
    if net.v6 {
        ipv6_cases(net, &mut c);
    } else {
        ipv4_cases(net, &mut c);
    }
    truncated_cases(net, &mut c);
    c.0
}

/// `base` with one to three random changes, then its lengths and checksums maybe fixed
/// (so that most mutations get past the IP layer to the ANEP checks).
fn mutate(rng: &mut ChaCha8Rng, net: &Net, base: &[u8]) -> Vec<u8> {
    let mut f = base.to_vec();
    let at = anep_at(base);
    for _ in 0..rng.gen_range(1..=3) {
        let n = f.len();
        match rng.gen_range(0..8) {
            0 => f[rng.gen_range(0..n)] ^= 1 << rng.gen_range(0..8),
            1 => f[rng.gen_range(0..n.min(at + 80))] = rng.r#gen(),
            2 => {
                let off = [0, 2, 4, 6, 8, 10, 12, 50, 68][rng.gen_range(0..9)];
                let v = [
                    0,
                    1,
                    2,
                    3,
                    0x0A02,
                    0x0A03,
                    0x0A04,
                    72,
                    80,
                    0xffff,
                    rng.r#gen(),
                ];
                if at + off + 2 <= n {
                    put16(&mut f, at + off, v[rng.gen_range(0..v.len())]);
                }
            }
            3 if n > 14 => f.truncate(rng.gen_range(14..n)),
            3 => {}
            4 => f.extend((0..rng.gen_range(1..64)).map(|_| rng.r#gen::<u8>())),
            5 => {
                let dst = match rng.gen_range(0..4) {
                    0 => net.me,
                    1 => net.peers[rng.gen_range(0..net.peers.len())].addr,
                    2 => net.far(rng.gen_range(0..net.peers.len())),
                    _ => host(net.v6, 1, rng.r#gen(), rng.gen_range(3320..3325)),
                };
                if at + 8 + 52 <= n {
                    f[at + 8 + 34..at + 8 + 52].copy_from_slice(&dst.to_bytes());
                }
            }
            6 => {
                let p = net.peers[rng.gen_range(0..net.peers.len())].addr;
                let src = if rng.gen_bool(0.2) {
                    NodeAddr::new(p.ip(), rng.r#gen())
                } else {
                    p
                };
                if at <= n && src.ip().is_ipv6() == net.v6 {
                    let o = src.to_bytes();
                    let (a, len) = if net.v6 { (22, 16) } else { (26, 4) };
                    f[a..a + len].copy_from_slice(&o[16 - len..16]);
                    f[at - 8..at - 6].copy_from_slice(&o[16..]);
                }
            }
            _ => {
                if at + 14 <= n {
                    put16(&mut f, at + 12, [0, 1, 2, rng.r#gen()][rng.gen_range(0..4)]);
                }
            }
        }
    }
    match rng.gen_range(0..4) {
        0 => {}
        1 => fix_sums(&mut f),
        _ => {
            fix_lengths(&mut f);
            fix_sums(&mut f);
        }
    }
    ethernet_min(f)
}

// ---- the test ----

/// What the program did with a family's corpus.
#[derive(Debug, Default)]
struct Tally {
    frames: usize,
    forwarded: usize,
    carried_bad_udp: usize,
    passed: BTreeMap<&'static str, usize>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Runs a family's corpus: the handcrafted frames, then `MUTATIONS` mutations of the
/// valid ones. Failures go to `failures`.
fn run_family(
    tp: &mut TransitPath,
    v6: bool,
    rng: &mut ChaCha8Rng,
    failures: &mut Vec<String>,
) -> Tally {
    let now = Instant::now();
    let net = Net::new(v6);
    let node = build_node(&net, now);
    let t = table(&node, &net);
    assert!(tp.sync(&t).expect("sync").is_empty());
    let mut corpus = Corpus(handmade(&net));
    let bases: Vec<Vec<u8>> = corpus
        .0
        .iter()
        .filter(|c| c.expect == Forward)
        .map(|c| c.frame.clone())
        .collect();
    for i in 0..MUTATIONS {
        let base = &bases[rng.gen_range(0..bases.len())];
        let f = mutate(rng, &net, base);
        corpus.add(format!("mutation {i}"), f, Free);
    }
    let mut tally = Tally::default();
    for c in &corpus.0 {
        tally.frames += 1;
        match check(tp, &net, now, c) {
            Ok(Outcome::Forwarded { carried_bad_udp }) => {
                tally.forwarded += 1;
                tally.carried_bad_udp += usize::from(carried_bad_udp);
            }
            Ok(Outcome::Passed(why)) => *tally.passed.entry(why).or_default() += 1,
            Err(e) => failures.push(format!(
                "{} {}: {e}\n    frame {}",
                net.family(),
                c.name,
                hex(&c.frame)
            )),
        }
    }
    tally
}

#[test]
#[ignore = "needs root and netns"]
fn transit_program_agrees_with_the_node() {
    anode_testkit::netns::require("transit_program_agrees_with_the_node", &[], false);
    let mut tp = TransitPath::load(&[]).expect("the verifier accepts the transit program");
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut failures = Vec::new();
    let mut must_forward = 0;
    for v6 in [false, true] {
        must_forward += handmade(&Net::new(v6))
            .iter()
            .filter(|c| c.expect == Forward)
            .count();
        let t = run_family(&mut tp, v6, &mut rng, &mut failures);
        println!(
            "{}: {} frames, {} forwarded ({} carrying a bad UDP checksum), passed {:?}",
            Net::new(v6).family(),
            t.frames,
            t.forwarded,
            t.carried_bad_udp,
            t.passed
        );
    }
    assert!(must_forward >= 20, "{must_forward} valid transit frames");
    assert!(
        failures.is_empty(),
        "{} of the frames disagree (seed {SEED:#x}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
