//! The kernel fast path (`anode_ether::fastpath`) against its contract, without traffic:
//! the loaded TC (and XDP) program runs on crafted frames through `BPF_PROG_TEST_RUN`, inside
//! a network namespace the test thread makes for itself (a veth pair give the
//! ingress ifindexes; the namespace goes away with the thread).
//!
//! - byte fixtures: a forwarded IPv4 and IPv6 frame (new MACs, TTL-1, valid checksum,
//!   redirect), and one frame per pass reason (`TC_ACT_OK`, frame unchanged, counted);
//! - a differential property test against `anode_ip::IpRouter`: whatever the program
//!   redirects, the router forwards to the same interface with identical bytes, and whatever
//!   it passes on is unchanged;
//! - attach/detach on a veth pair in a namespace (`tc filter show` lists it, drop removes it
//!   and the clsact qdisc it added, and leaves one that was there; XDP likewise);
//! - real pings (IPv4, IPv6, 198.18.0.0/15 and 2001:2::/48) across three namespaces whose
//!   middle one has kernel forwarding off: they get through only through the program; a
//!   TTL-1 ping and an 802.1Q-tagged frame are passed on.
//!
//! Needs root: the tests are ignored by default; run them as root with `--include-ignored`.

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::Instant;

use anode_ether::fastpath::{FastPath, FastPathStats, Hook, verdict};
use anode_ip::{
    DemuxKey, Filter, IfaceId, InterfaceConfig, IpCidr, IpRouter, MacAddr, RouteOrigin,
    RouterConfig, Verdict,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

mod support;
use support::*;

use anode_testkit::netns::{self, Namespaces, in_ns, sh};

/// Root, `ip` and `tc` (panics with what is missing).
fn require(test: &str) {
    netns::require(test, &["ip", "tc"], false);
}

fn ifindex(name: &str) -> u32 {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert!(i != 0, "no interface {name}");
    i
}

/// Runs `f` on a thread in a fresh network namespace holding a veth pair; `f`
/// gets their ifindexes. Everything the thread made goes away with it.
fn in_netns<T: Send + 'static>(f: impl FnOnce([u32; 2]) -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: unshare only changes the calling thread's namespaces.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "unshare: {}", std::io::Error::last_os_error());
        // Children inherit the calling thread's namespace.
        sh("ip link add fpt0 type veth peer name fpt1 && ip link set fpt0 up && ip link set fpt1 up");
        f([ifindex("fpt0"), ifindex("fpt1")])
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

// The router under test and the frame builders: tests/support (shared with the fuzz target).

/// An IPv4 packet: `opts` option bytes (a multiple of 4), the given payload.
fn ipv4_packet(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ttl: u8,
    proto: u8,
    frag: u16,
    opts: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let hl = 20 + opts.len();
    let total = (hl + payload.len()) as u16;
    let mut h = vec![0x40 | (hl / 4) as u8, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34]);
    h.extend_from_slice(&frag.to_be_bytes());
    h.push(ttl);
    h.push(proto);
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(opts);
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

fn udp(dport: u16, len: usize) -> Vec<u8> {
    let mut u = vec![0x30, 0x39];
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + len) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend((0..len).map(|i| i as u8));
    u
}

fn frame4(dst_mac: [u8; 6], ip: Vec<u8>) -> Vec<u8> {
    let mut f = eth(dst_mac, HOST0, 0x0800);
    f.extend_from_slice(&ip);
    f
}

fn frame6(dst_mac: [u8; 6], ip: Vec<u8>) -> Vec<u8> {
    let mut f = eth(dst_mac, HOST0, 0x86dd);
    f.extend_from_slice(&ip);
    f
}

fn udp4(dst: &str, ttl: u8, dport: u16) -> Vec<u8> {
    frame4(
        MAC0,
        ipv4_packet(v4("198.18.1.5"), v4(dst), ttl, 17, 0, &[], &udp(dport, 18)),
    )
}

fn udp6(src: &str, dst: &str, hops: u8, dport: u16) -> Vec<u8> {
    let u = udp(dport, 18);
    let mut ip = ipv6_header(u.len() as u16, 17, hops, v6(src), v6(dst));
    ip.extend_from_slice(&u);
    frame6(MAC0, ip)
}

fn loaded(hook: Hook, idx: [u32; 2], r: &IpRouter) -> FastPath {
    let mut fp = FastPath::load_unattached(hook, &idx).unwrap_or_else(|e| panic!("{e}"));
    let rep = fp.sync(&r.fast_table()).unwrap();
    assert!(rep.notes.is_empty(), "{:?}", rep.notes);
    assert_eq!(rep.filters, 2);
    assert!(rep.written > 10, "{rep:?}");
    fp
}

// ---- fixtures ----

#[test]
#[ignore = "needs root and netns"]
fn forwards_ipv4_and_ipv6_like_the_router() {
    require("forwards_ipv4_and_ipv6_like_the_router");
    in_netns(|idx| {
        let now = Instant::now();
        let mut r = router(now, false);
        let fp = loaded(Hook::Tc, idx, &r);

        // IPv4 through the gateway, with 6 bytes of link padding.
        let mut f = udp4("198.19.7.7", 64, 53);
        let ip_len = f.len() - 14;
        f.extend_from_slice(&[0xee; 6]);
        let (v, out) = fp.test_run(&f, idx[0]).unwrap();
        assert_eq!(v, verdict::TC_ACT_REDIRECT);
        assert_eq!(out.len(), 14 + ip_len, "padding trimmed");
        assert_eq!(&out[0..6], &GW1, "neighbor's MAC");
        assert_eq!(&out[6..12], &MAC1, "outgoing interface's MAC");
        assert_eq!(out[14 + 8], 63, "TTL - 1");
        assert_eq!(csum(&out[14..34]), 0, "header checksum valid");
        assert_eq!(&out[34..], &f[34..14 + ip_len], "payload untouched");
        let mut g = f.clone();
        let rv = r.handle_frame(now, IfaceId(0), &mut g);
        assert_eq!(
            rv,
            Verdict::Forward {
                iface: IfaceId(1),
                start: 0,
                len: 14 + ip_len
            }
        );
        assert_eq!(&g[..14 + ip_len], &out[..]);

        // IPv4 on-link (connected prefix, resolved host), back out of interface 0.
        let f = frame4(
            MAC1,
            ipv4_packet(v4("198.18.2.2"), v4("198.18.1.5"), 2, 6, 0, &[], &[1; 40]),
        );
        let (v, out) = fp.test_run(&f, idx[1]).unwrap();
        assert_eq!(v, verdict::TC_ACT_REDIRECT);
        assert_eq!((&out[0..6], &out[6..12]), (&HOST0[..], &MAC0[..]));
        assert_eq!((out[22], csum(&out[14..34])), (1, 0));

        // IPv6 through the gateway.
        let f = udp6("2001:2:0:1::5", "2001:2:0:9::1", 64, 53);
        let (v, out) = fp.test_run(&f, idx[0]).unwrap();
        assert_eq!(v, verdict::TC_ACT_REDIRECT);
        assert_eq!((&out[0..6], &out[6..12]), (&GW1[..], &MAC1[..]));
        assert_eq!(out[14 + 7], 63, "hop limit - 1");
        assert_eq!(&out[14 + 8..], &f[14 + 8..]);
        let mut g = f.clone();
        assert!(matches!(
            r.handle_frame(now, IfaceId(0), &mut g),
            Verdict::Forward {
                iface: IfaceId(1),
                ..
            }
        ));
        assert_eq!(g, out);

        let s = fp.stats().unwrap();
        assert_eq!((s.forwarded_v4, s.forwarded_v6), (2, 1));
        assert_eq!(s.forwarded_bytes, (14 + ip_len + f.len() + 14 + 60) as u64);
        assert_eq!(s.passed(), 0);
        assert!(
            s.report()[0].contains("forwarded 2 IPv4 + 1 IPv6"),
            "{:?}",
            s.report()
        );
    });
}

type Field = fn(&FastPathStats) -> u64;

#[test]
#[ignore = "needs root and netns"]
#[expect(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn passes_everything_else_unchanged() {
    require("passes_everything_else_unchanged");
    in_netns(|idx| {
        let now = Instant::now();
        let r = router(now, false);
        let mut fp = loaded(Hook::Tc, idx, &r);
        let mut cases: Vec<(&str, Vec<u8>, Field)> = Vec::new();
        let ok = udp4("198.19.7.7", 64, 53);

        let mut f = ok.clone();
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        cases.push(("vlan tagged", f, |s| s.not_ip));
        let mut f = ok.clone();
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        cases.push(("arp", f, |s| s.not_ip));
        let mut f = ok.clone();
        f[0..6].copy_from_slice(&MAC1);
        cases.push(("other interface's MAC", f, |s| s.not_for_our_mac));
        let mut f = ok.clone();
        f[0..6].copy_from_slice(&[0xff; 6]);
        cases.push(("broadcast MAC", f, |s| s.not_for_our_mac));
        let mut f = ok.clone();
        f[14 + 11] ^= 1;
        cases.push(("bad checksum", f, |s| s.bad_header));
        let mut f = ok.clone();
        f[14] = 0x55;
        cases.push(("version 5", f, |s| s.bad_header));
        let mut f = ok.clone();
        f.truncate(f.len() - 1);
        cases.push(("total length past the frame", f, |s| s.bad_header));
        let udp_opts = |frag: u16, opts: &[u8]| {
            frame4(
                MAC0,
                ipv4_packet(
                    v4("198.18.1.5"),
                    v4("198.19.1.1"),
                    64,
                    17,
                    frag,
                    opts,
                    &udp(53, 4),
                ),
            )
        };
        cases.push(("options", udp_opts(0, &[1, 1, 1, 0]), |s| {
            s.options_or_fragment
        }));
        cases.push(("fragment", udp_opts(0x2000, &[]), |s| s.options_or_fragment));
        cases.push(("later fragment", udp_opts(0x0010, &[]), |s| {
            s.options_or_fragment
        }));
        for (src, dst) in [
            ("224.0.0.9", "198.19.1.1"),
            ("255.255.255.255", "198.19.1.1"),
            ("127.0.0.1", "198.19.1.1"),
            ("0.0.0.0", "198.19.1.1"),
            ("198.18.1.5", "239.1.1.1"),
            ("198.18.1.5", "255.255.255.255"),
            ("198.18.1.5", "127.0.0.2"),
            ("198.18.1.5", "0.0.0.0"),
        ] {
            cases.push((
                "special IPv4 address",
                frame4(
                    MAC0,
                    ipv4_packet(v4(src), v4(dst), 64, 17, 0, &[], &udp(53, 4)),
                ),
                |s| s.martian,
            ));
        }
        cases.push(("own address", udp4("198.18.2.1", 64, 53), |s| s.punted));
        cases.push(("directed broadcast", udp4("198.18.2.255", 64, 53), |s| {
            s.punted
        }));
        cases.push(("demux filter", udp4("198.19.7.7", 64, FILTER_PORT), |s| {
            s.filter
        }));
        cases.push(("ttl 1", udp4("198.19.7.7", 1, 53), |s| s.ttl));
        cases.push(("ttl 0", udp4("198.19.7.7", 0, 53), |s| s.ttl));
        cases.push(("no route", udp4("203.0.113.1", 64, 53), |s| s.no_route));
        cases.push((
            "too big",
            frame4(
                MAC0,
                ipv4_packet(
                    v4("198.18.1.5"),
                    v4("198.19.1.1"),
                    64,
                    17,
                    0,
                    &[],
                    &udp(53, 1500 - 28 + 1),
                ),
            ),
            |s| s.too_big,
        ));
        cases.push(("no neighbor", udp4("198.18.2.3", 64, 53), |s| s.no_neighbor));

        // IPv6.
        let mut f = udp6("2001:2:0:1::5", "2001:2:0:9::1", 64, 53);
        f[14 + 6] = 0;
        cases.push(("hop-by-hop", f, |s| s.options_or_fragment));
        let mut f = udp6("2001:2:0:1::5", "2001:2:0:9::1", 64, 53);
        f.truncate(f.len() - 1);
        cases.push(("v6 payload past the frame", f, |s| s.bad_header));
        for (src, dst) in [
            ("ff02::1", "2001:2:0:9::1"),
            ("::1", "2001:2:0:9::1"),
            ("::", "2001:2:0:9::1"),
            ("fe80::1", "2001:2:0:9::1"),
            ("2001:2:0:1::5", "ff05::2"),
            ("2001:2:0:1::5", "::1"),
            ("2001:2:0:1::5", "::"),
            ("2001:2:0:1::5", "febf::1"),
        ] {
            cases.push(("special IPv6 address", udp6(src, dst, 64, 53), |s| {
                s.martian
            }));
        }
        cases.push((
            "own v6 address",
            udp6("2001:2:0:1::5", "2001:2:0:2::1", 64, 53),
            |s| s.punted,
        ));
        cases.push((
            "v6 demux filter",
            udp6("2001:2:0:1::5", "2001:2:0:9::1", 64, FILTER_PORT),
            |s| s.filter,
        ));
        cases.push((
            "hop limit 1",
            udp6("2001:2:0:1::5", "2001:2:0:9::1", 1, 53),
            |s| s.ttl,
        ));
        cases.push((
            "v6 no route",
            udp6("2001:2:0:1::5", "2001:db8::1", 64, 53),
            |s| s.no_route,
        ));
        cases.push((
            "v6 no neighbor",
            udp6("2001:2:0:1::5", "2001:2:0:2::7", 64, 53),
            |s| s.no_neighbor,
        ));

        for (what, f, field) in &cases {
            let before = field(&fp.stats().unwrap());
            let (v, out) = fp.test_run(f, idx[0]).unwrap();
            assert_eq!(v, verdict::TC_ACT_OK, "{what}");
            assert_eq!(&out, f, "{what}: frame changed");
            assert_eq!(field(&fp.stats().unwrap()), before + 1, "{what}: counted");
        }
        let s = fp.stats().unwrap();
        assert_eq!(s.passed(), cases.len() as u64);
        assert_eq!(s.forwarded_v4 + s.forwarded_v6, 0);
        assert!(s.report()[1].contains("ttl 3"), "{:?}", s.report());
        // None of these used a neighbor entry.
        assert!(fp.take_used().is_empty());
    });
}

#[test]
#[ignore = "needs root and netns"]
fn used_neighbors_and_incremental_sync() {
    require("used_neighbors_and_incremental_sync");
    in_netns(|idx| {
        let now = Instant::now();
        let mut r = router(now, false);
        let mut fp = loaded(Hook::Tc, idx, &r);
        // Nothing changed: nothing written.
        let rep = fp.sync(&r.fast_table()).unwrap();
        assert_eq!((rep.written, rep.deleted), (0, 0));

        let (v, _) = fp.test_run(&udp4("198.19.7.7", 64, 53), idx[0]).unwrap();
        assert_eq!(v, verdict::TC_ACT_REDIRECT);
        assert_eq!(
            fp.take_used(),
            vec![(IfaceId(1), IpAddr::V4(v4("198.18.2.2")))]
        );
        assert!(fp.take_used().is_empty(), "flags cleared");
        // Still forwarding after the flag was cleared.
        let (v, _) = fp.test_run(&udp4("198.19.7.7", 64, 53), idx[0]).unwrap();
        assert_eq!(v, verdict::TC_ACT_REDIRECT);

        // The route goes: one delete, and the packet is passed on.
        r.remove_route("198.19.0.0/16".parse().unwrap(), RouteOrigin::Static);
        let rep = fp.sync(&r.fast_table()).unwrap();
        assert_eq!((rep.written, rep.deleted), (0, 1), "{rep:?}");
        let (v, _) = fp.test_run(&udp4("198.19.7.7", 64, 53), idx[0]).unwrap();
        assert_eq!(v, verdict::TC_ACT_OK);

        // An EtherType filter for IPv4 punts the family as a whole.
        let id = r.add_filter(Filter::EtherType(0x0800));
        let rep = fp.sync(&r.fast_table()).unwrap();
        assert!(rep.punt_all_v4 && !rep.punt_all_v6);
        let mut f = udp4("198.18.1.5", 64, 53);
        f[0..6].copy_from_slice(&MAC1);
        let (v, _) = fp.test_run(&f, idx[1]).unwrap();
        assert_eq!(v, verdict::TC_ACT_OK);
        r.remove_filter(id);
        fp.sync(&r.fast_table()).unwrap();
        let (v, _) = fp.test_run(&f, idx[1]).unwrap();
        assert_eq!(v, verdict::TC_ACT_REDIRECT);
    });
}

#[test]
#[ignore = "needs root and netns"]
fn xdp_program_decides_the_same() {
    require("xdp_program_decides_the_same");
    in_netns(|idx| {
        let now = Instant::now();
        let r = router(now, false);
        let fp = loaded(Hook::Xdp, idx, &r);
        let tc = loaded(Hook::Tc, idx, &r);
        for (hook, p) in [("xdp", &fp), ("tc", &tc)] {
            let (verified, size) = p.verifier_stats();
            eprintln!("{hook}: {size:?} instructions, verifier processed {verified:?}");
            assert!(size.is_some_and(|n| n > 100), "{hook}: {size:?}");
        }
        let mut f = udp4("198.19.7.7", 64, 53);
        f.extend_from_slice(&[0; 4]);
        let (v, out) = fp.test_run(&f, idx[0]).unwrap();
        assert_eq!(v, verdict::XDP_REDIRECT);
        assert_eq!(out.len(), f.len() - 4);
        assert_eq!((&out[0..6], out[22], csum(&out[14..34])), (&GW1[..], 63, 0));
        let f = udp4("198.19.7.7", 1, 53);
        let (v, out) = fp.test_run(&f, idx[0]).unwrap();
        assert_eq!((v, out), (verdict::XDP_PASS, f));
        assert_eq!(fp.stats().unwrap().ttl, 1);
    });
}

// ---- the differential property test ----

#[derive(Debug, Clone)]
struct Spec {
    ingress: usize,
    dst_mac: u8,
    v6: bool,
    src: u8,
    dst: u8,
    ttl: u8,
    proto: u8,
    dport_filter: bool,
    opts: bool,
    frag: u8,
    payload: usize,
    padding: usize,
    bad_csum: bool,
    len_delta: i8,
    mutate: Option<(usize, u8)>,
    ethertype: u8,
}

/// Half the frames are clean (forwardable but for routes/neighbors/filters), the other half
/// mutated in every field.
fn spec() -> impl Strategy<Value = Spec> {
    (any::<bool>(), raw_spec()).prop_map(|(clean, mut s)| {
        if clean {
            s.dst_mac = 0;
            s.src %= 3;
            s.dst %= 6;
            s.ttl = 4 + s.ttl % 2;
            s.opts = false;
            s.frag = 3 + s.frag % 3;
            s.bad_csum = false;
            s.len_delta = 0;
            s.mutate = None;
            s.ethertype = 3;
        }
        s
    })
}

fn raw_spec() -> impl Strategy<Value = Spec> {
    (
        (0usize..2, 0u8..8, any::<bool>(), 0u8..16, 0u8..16, 0u8..6),
        (0u8..4, 0u8..3, 0u8..8, 0u8..8, 0usize..80, 0usize..8),
        (
            0u8..8,
            0u8..10,
            proptest::option::weighted(0.15, (0usize..120, any::<u8>())),
            0u8..12,
            0u8..12,
        ),
    )
        .prop_map(
            |(
                (ingress, dst_mac, v6, src, dst, ttl),
                (proto, dport_filter, opts, frag, payload, padding),
                (bad, len_delta, mutate, ethertype, big),
            )| Spec {
                ingress,
                dst_mac,
                v6,
                src,
                dst,
                ttl,
                proto,
                dport_filter: dport_filter == 0,
                opts: opts == 0,
                frag,
                payload: if big == 0 {
                    1400 + payload * 2
                } else {
                    payload
                },
                padding: if padding >= 5 { padding } else { 0 },
                bad_csum: bad == 0,
                len_delta: match len_delta {
                    0 => -1,
                    1 => 1,
                    2 => -30,
                    _ => 0,
                },
                mutate,
                ethertype,
            },
        )
}

const SRC4: [&str; 16] = [
    "198.18.1.5",
    "198.18.1.5",
    "198.18.2.2",
    "198.18.1.9",
    "10.1.2.3",
    "198.19.3.3",
    "224.0.0.1",
    "255.255.255.255",
    "127.0.0.1",
    "0.0.0.0",
    "198.18.1.1",
    "198.18.1.255",
    "240.0.0.1",
    "198.18.1.5",
    "198.18.2.2",
    "169.254.1.1",
];
const DST4: [&str; 16] = [
    "198.19.7.7",
    "198.19.0.1",
    "198.18.1.5",
    "198.18.2.2",
    "198.18.2.3",
    "203.0.113.9",
    "198.18.1.1",
    "198.18.2.1",
    "198.18.2.255",
    "198.18.1.255",
    "239.255.0.1",
    "255.255.255.255",
    "127.0.0.1",
    "0.0.0.0",
    "198.19.255.255",
    "240.0.0.1",
];
const SRC6: [&str; 16] = [
    "2001:2:0:1::5",
    "2001:2:0:1::5",
    "2001:2:0:2::2",
    "2001:2:0:1::9",
    "2001:db8::1",
    "2001:2:0:9::3",
    "ff02::1",
    "::1",
    "::",
    "fe80::1",
    "2001:2:0:1::1",
    "::ffff:198.18.1.5",
    "fec0::1",
    "2001:2:0:1::5",
    "2001:2:0:2::2",
    "2001:2:0:9::3",
];
const DST6: [&str; 16] = [
    "2001:2:0:9::1",
    "2001:2:0:9::ffff",
    "2001:2:0:1::5",
    "2001:2:0:2::2",
    "2001:2:0:2::3",
    "2001:db8::9",
    "2001:2:0:1::1",
    "2001:2:0:2::1",
    "fe80::1",
    "ff02::1",
    "ff0e::1",
    "::1",
    "::",
    "::ffff:198.19.7.7",
    "fe80::ff:fe00:2",
    "2001:2:0:9::1",
];

fn build(s: &Spec) -> Vec<u8> {
    let dst_mac = match s.dst_mac {
        0..=4 => [MAC0, MAC1][s.ingress],
        5 => [MAC1, MAC0][s.ingress],
        6 => [0xff; 6],
        _ => [0x33, 0x33, 0, 0, 0, 1],
    };
    let ttl = [0, 1, 2, 3, 64, 255][usize::from(s.ttl)];
    let proto = [17u8, 6, 1, 58][usize::from(s.proto)];
    let dport = if s.dport_filter { FILTER_PORT } else { 53 };
    let payload = udp(dport, s.payload);
    let mut f = if s.v6 {
        let next = match s.frag {
            7 => 0,
            6 => 44,
            _ => proto,
        };
        let mut ip = ipv6_header(
            payload.len() as u16,
            next,
            ttl,
            v6(SRC6[usize::from(s.src)]),
            v6(DST6[usize::from(s.dst)]),
        );
        ip.extend_from_slice(&payload);
        let mut f = eth(dst_mac, HOST0, 0x86dd);
        f.extend_from_slice(&ip);
        f
    } else {
        let opts: &[u8] = if s.opts { &[1, 1, 1, 0] } else { &[] };
        let frag = match s.frag {
            0 => 0x2000,
            1 => 0x0001,
            2 => 0x4000,
            _ => 0,
        };
        let ip = ipv4_packet(
            v4(SRC4[usize::from(s.src)]),
            v4(DST4[usize::from(s.dst)]),
            ttl,
            proto,
            frag,
            opts,
            &payload,
        );
        let mut f = eth(dst_mac, HOST0, 0x0800);
        f.extend_from_slice(&ip);
        if s.bad_csum {
            f[24] ^= 0x40;
        }
        f
    };
    // Length fields that disagree with the frame.
    if s.len_delta != 0 {
        let at = if s.v6 { 14 + 4 } else { 14 + 2 };
        let l = u16::from_be_bytes([f[at], f[at + 1]]);
        let l = l.wrapping_add_signed(i16::from(s.len_delta));
        f[at..at + 2].copy_from_slice(&l.to_be_bytes());
        if !s.v6 && !s.bad_csum {
            f[24..26].copy_from_slice(&[0, 0]);
            let hl = 20 + if s.opts { 4 } else { 0 };
            let c = csum(&f[14..14 + hl]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
        }
    }
    f.extend(std::iter::repeat_n(0xa5, s.padding));
    match s.ethertype {
        0 => f[12..14].copy_from_slice(&[0x81, 0x00]),
        1 => f[12..14].copy_from_slice(&[0x86, 0xdd]),
        2 => f[12..14].copy_from_slice(&[0x08, 0x00]),
        _ => {}
    }
    if let Some((at, b)) = s.mutate {
        let n = f.len();
        f[at % n] = b;
    }
    f
}

#[test]
#[ignore = "needs root and netns"]
fn differential_against_the_router() {
    require("differential_against_the_router");
    in_netns(|idx| {
        let now = Instant::now();
        let mut r = router(now, false);
        // An IPv4 default route, so special IPv4 destinations have a route and only the
        // address checks stop them (IPv6 keeps no default: its unroutable ones are no_route).
        r.add_route(
            "0.0.0.0/0".parse::<IpCidr>().unwrap(),
            IpAddr::V4(v4("198.18.2.2")),
            1,
            RouteOrigin::Static,
        )
        .unwrap();
        let fp = loaded(Hook::Tc, idx, &r);
        let generation = r.fast_generation();
        let state = std::cell::RefCell::new((r, fp, generation, 0usize, 0usize));
        let macs = [MAC0, MAC1];
        let mut runner = TestRunner::new(Config {
            cases: 64,
            ..Config::default()
        });
        let res = runner.run(&proptest::collection::vec(spec(), 64), |specs| {
            let mut st = state.borrow_mut();
            let (r, fp, generation, redirected, total) = &mut *st;
            for s in &specs {
                let f = build(s);
                *total += 1;
                // BPF_PROG_TEST_RUN refuses (EINVAL) a frame whose EtherType claims a
                // network header it is too short for; such frames never get forwarded.
                let short = match (f[12], f[13]) {
                    (0x08, 0x00) => f.len() < 14 + 20,
                    (0x86, 0xdd) => f.len() < 14 + 40,
                    _ => false,
                };
                let (v, out) = match fp.test_run(&f, idx[s.ingress]) {
                    Ok(x) => x,
                    Err(_) if short => {
                        let mut g = f.clone();
                        let rv = r.handle_frame(now, IfaceId(s.ingress as u32), &mut g);
                        prop_assert!(!matches!(rv, Verdict::Forward { .. }), "{:?}", s);
                        *total -= 1;
                        continue;
                    }
                    Err(e) => panic!("{e}: {} bytes {s:?}", f.len()),
                };
                let mut g = f.clone();
                let rv = r.handle_frame(now, IfaceId(s.ingress as u32), &mut g);
                while let Some(t) = r.poll_transmit() {
                    r.recycle(t.frame);
                }
                if v == verdict::TC_ACT_REDIRECT {
                    *redirected += 1;
                    let out_iface = macs.iter().position(|m| out[6..12] == m[..]);
                    prop_assert!(out_iface.is_some(), "source MAC not ours: {:?}", s);
                    match rv {
                        Verdict::Forward { iface, start, len } => {
                            prop_assert_eq!(
                                iface,
                                IfaceId(out_iface.unwrap_or(9) as u32),
                                "{:?}",
                                s
                            );
                            prop_assert_eq!(&g[start..start + len], &out[..], "{:?}", s);
                        }
                        other => {
                            prop_assert!(false, "program forwarded, router {:?}: {:?}", other, s)
                        }
                    }
                } else {
                    prop_assert_eq!(v, verdict::TC_ACT_OK);
                    prop_assert_eq!(&out, &f, "passed frames are unchanged: {:?}", s);
                }
                if r.fast_generation() != *generation {
                    *generation = r.fast_generation();
                    fp.sync(&r.fast_table()).unwrap();
                }
            }
            Ok(())
        });
        if let Err(e) = res {
            panic!("{e}");
        }
        let (_, fp, _, redirected, total) = state.into_inner();
        // Not vacuous: a good share of the generated frames were forwarded.
        assert!(
            redirected * 20 > total,
            "only {redirected} of {total} frames forwarded"
        );
        let s = fp.stats().unwrap();
        assert_eq!(
            (s.forwarded_v4 + s.forwarded_v6 + s.passed()) as usize,
            total
        );
        eprintln!(
            "differential: {redirected} of {total} frames forwarded; {:?}",
            s.report()
        );
    });
}

// ---- a real attach ----

#[test]
#[ignore = "needs root and netns"]
fn attaches_and_detaches_on_a_veth() {
    require("attaches_and_detaches_on_a_veth");
    let name = format!("anfp{}", std::process::id());
    sh(&format!("ip netns add {name}"));
    let ns = Namespaces(vec![name.clone()]);
    sh(&format!(
        "ip -n {name} link add fpa0 type veth peer name fpa1 && ip -n {name} link set fpa0 up && ip -n {name} link set fpa1 up"
    ));
    in_ns(&name, || {
        let idx = [ifindex("fpa0"), ifindex("fpa1")];
        // fpa1 already has a clsact qdisc: it must stay after the drop.
        sh("tc qdisc add dev fpa1 clsact");
        let fp = FastPath::load(Hook::Tc, &idx).unwrap_or_else(|e| panic!("{e}"));
        for dev in ["fpa0", "fpa1"] {
            let shown = sh(&format!("tc filter show dev {dev} ingress"));
            assert!(
                shown.contains("anode_fastpath") && shown.contains("direct-action"),
                "{dev}: {shown}"
            );
        }
        drop(fp);
        for dev in ["fpa0", "fpa1"] {
            let shown = sh(&format!("tc filter show dev {dev} ingress"));
            assert!(!shown.contains("anode_fastpath"), "{dev}: {shown}");
        }
        let q0 = sh("tc qdisc show dev fpa0");
        let q1 = sh("tc qdisc show dev fpa1");
        assert!(!q0.contains("clsact"), "the qdisc we added is gone: {q0}");
        assert!(q1.contains("clsact"), "the one that was there stays: {q1}");

        // XDP: attached to both, gone after the drop.
        let fp = FastPath::load(Hook::Xdp, &idx).unwrap_or_else(|e| panic!("{e}"));
        for dev in ["fpa0", "fpa1"] {
            let shown = sh(&format!("ip -d link show dev {dev}"));
            assert!(shown.contains("prog/xdp"), "{dev}: {shown}");
        }
        drop(fp);
        for dev in ["fpa0", "fpa1"] {
            let shown = sh(&format!("ip -d link show dev {dev}"));
            assert!(!shown.contains("prog/xdp"), "{dev}: {shown}");
        }
    });
    drop(ns);
}

// ---- real traffic through the attached program ----

/// Sends one raw frame on `dev` of namespace `ns` through AF_PACKET (a frame of a page or
/// more becomes a non-linear skb: only the Ethernet header in the linear part).
fn send_raw(ns: &str, dev: &str, frame: &[u8]) {
    let (dev, frame) = (dev.to_string(), frame.to_vec());
    in_ns(ns, move || {
        // SAFETY: plain socket(2); checked below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid start.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = ifindex(&dev) as i32;
        sll.sll_halen = 6;
        // SAFETY: `frame` and `sll` are live for the call with the lengths passed.
        let n = unsafe {
            libc::sendto(
                fd,
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(
            n,
            frame.len() as isize,
            "{}",
            std::io::Error::last_os_error()
        );
        // SAFETY: `fd` is ours and not used after this.
        unsafe { libc::close(fd) };
    });
}

fn mac_of(ns: &str, dev: &str) -> [u8; 6] {
    let s = sh(&format!(
        "ip netns exec {ns} cat /sys/class/net/{dev}/address"
    ));
    let v: Vec<u8> = s
        .trim()
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    v.try_into().unwrap()
}

fn fmt_mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// sender ns `s` --veth-- router ns `r` --veth-- receiver ns `d`, every link with MTU `mtu`;
/// the router namespace has kernel forwarding off and no addresses on its interfaces, so
/// traffic crosses only if the attached program forwards it. `router` holds the tables the
/// program is synced from, with the end hosts' neighbors learned the way the router learns
/// them. The namespaces are deleted on drop.
struct Line {
    s: String,
    r: String,
    d: String,
    mac_s0: [u8; 6],
    mac_r0: [u8; 6],
    router: IpRouter,
    _guard: Namespaces,
}

impl Line {
    fn new(tag: &str, mtu: usize) -> Line {
        let (s, r, d, guard) = netns::line(tag, mtu);
        let (mac_s0, mac_r0, mac_r1, mac_d0) = (
            mac_of(&s, "s0"),
            mac_of(&r, "r0"),
            mac_of(&r, "r1"),
            mac_of(&d, "d0"),
        );
        // The router's neighbors are static: nothing in r answers ARP/ND.
        sh(&format!(
            "ip -n {s} neigh add 198.18.1.2 lladdr {r0} dev s0 && \
             ip -n {s} -6 neigh add 2001:2:0:1::2 lladdr {r0} dev s0 && \
             ip -n {d} neigh add 198.18.2.1 lladdr {r1} dev d0 && \
             ip -n {d} -6 neigh add 2001:2:0:2::1 lladdr {r1} dev d0",
            r0 = fmt_mac(mac_r0),
            r1 = fmt_mac(mac_r1),
        ));

        let now = Instant::now();
        let mut router = IpRouter::new(RouterConfig::default());
        for (name, mac, a4, a6) in [
            ("r0", mac_r0, "198.18.1.2/24", "2001:2:0:1::2/64"),
            ("r1", mac_r1, "198.18.2.1/24", "2001:2:0:2::1/64"),
        ] {
            router
                .add_interface(InterfaceConfig {
                    name: name.into(),
                    mac: MacAddr(mac),
                    mtu,
                    ipv4: vec![a4.parse().unwrap()],
                    ipv6: vec![a6.parse().unwrap()],
                })
                .unwrap();
        }
        let mut learn = |iface: u32, mut f: Vec<u8>| {
            assert_eq!(
                router.handle_frame(now, IfaceId(iface), &mut f),
                Verdict::Consumed
            );
        };
        learn(
            0,
            arp_reply(mac_r0, v4("198.18.1.2"), mac_s0, v4("198.18.1.1")),
        );
        learn(
            1,
            arp_reply(mac_r1, v4("198.18.2.1"), mac_d0, v4("198.18.2.2")),
        );
        learn(
            0,
            neighbor_solicit(mac_r0, v6("2001:2:0:1::2"), mac_s0, v6("2001:2:0:1::1")),
        );
        learn(
            1,
            neighbor_solicit(mac_r1, v6("2001:2:0:2::1"), mac_d0, v6("2001:2:0:2::2")),
        );
        Line {
            s,
            r,
            d,
            mac_s0,
            mac_r0,
            router,
            _guard: guard,
        }
    }

    /// Runs `f` in the router namespace with the TC program attached to r0 and r1 and synced
    /// from `self.router`'s table.
    fn with_fast_path<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut FastPath) -> T + Send + 'static,
    ) -> T {
        let table = self.router.fast_table();
        in_ns(&self.r, move || {
            let mut fp = FastPath::load(Hook::Tc, &[ifindex("r0"), ifindex("r1")])
                .unwrap_or_else(|e| panic!("{e}"));
            fp.sync(&table).unwrap();
            f(&mut fp)
        })
    }
}

/// Real pings (IPv4 both ways, IPv6) across a [`Line`]: they get through only through the
/// program; a TTL-1 ping and an 802.1Q-tagged frame are passed on (and die in the router
/// namespace's stack).
#[test]
#[ignore = "needs root and netns"]
fn forwards_real_pings_with_kernel_forwarding_off() {
    require("forwards_real_pings_with_kernel_forwarding_off");
    let mut line = Line::new("fp", 1500);
    // A host the program could forward to, were it not for the 802.1Q tag it arrives with.
    let mac_r1 = MacAddr(mac_of(&line.r, "r1"));
    let mac_d0 = mac_of(&line.d, "d0");
    let mut f = arp_reply(mac_r1.0, v4("198.18.2.1"), mac_d0, v4("198.18.2.130"));
    assert_eq!(
        line.router.handle_frame(Instant::now(), IfaceId(1), &mut f),
        Verdict::Consumed
    );
    assert_eq!(line.router.fast_table().neighbors.len(), 5);

    let (s2, d2) = (line.s.clone(), line.d.clone());
    let (mac_s0, mac_r0) = (line.mac_s0, line.mac_r0);
    line.with_fast_path(move |fp| {
        sh(&format!(
            "ip netns exec {s2} ping -c 3 -i 0.2 -W 2 -q 198.18.2.2"
        ));
        sh(&format!(
            "ip netns exec {s2} ping -6 -c 3 -i 0.2 -W 2 -q 2001:2:0:2::2"
        ));
        sh(&format!(
            "ip netns exec {d2} ping -c 2 -i 0.2 -W 2 -q 198.18.1.1"
        ));
        // TTL 1: the program passes it on; the router namespace's stack drops it.
        let lost = Command::new("ip")
            .args([
                "netns",
                "exec",
                &s2,
                "ping",
                "-c",
                "1",
                "-t",
                "1",
                "-W",
                "1",
                "-q",
                "198.18.2.2",
            ])
            .output()
            .unwrap();
        assert!(!lost.status.success(), "a TTL-1 ping cannot be answered");
        let before = fp.stats().unwrap();
        // Tagged: passed on (the stack had moved the tag out of the frame).
        let mut f = frame4(
            mac_r0,
            ipv4_packet(
                v4("198.18.1.1"),
                v4("198.18.2.130"),
                64,
                17,
                0,
                &[],
                &udp(9, 8),
            ),
        );
        f[6..12].copy_from_slice(&mac_s0);
        f.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        send_raw(&s2, "s0", &f);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let st = fp.stats().unwrap();
        assert_eq!(
            st.forwarded_v4, before.forwarded_v4,
            "tagged frames are not forwarded"
        );
        assert!(st.not_ip > before.not_ip, "{:?}", st.report());
        assert!(st.forwarded_v4 >= 10, "{:?}", st.report());
        assert!(st.forwarded_v6 >= 6, "{:?}", st.report());
        assert!(st.ttl >= 1, "{:?}", st.report());
        let mut used = fp.take_used();
        used.sort();
        assert_eq!(
            used.len(),
            4,
            "every neighbor but the tagged one's: {used:?}"
        );
        eprintln!("{:?}", st.report());
    });
}

/// A UDP socket bound in namespace `ns` on `addr`, receiving on its own thread until it has
/// `n` datagrams or 2 s pass; the handle yields what it got.
fn udp_receiver(
    ns: &str,
    addr: std::net::SocketAddr,
    n: usize,
) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let ns = ns.to_string();
    let h = std::thread::spawn(move || {
        in_ns(&ns, move || {
            let sock = std::net::UdpSocket::bind(addr).unwrap();
            sock.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                .unwrap();
            ready_tx.send(()).unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0u8; 65536];
            while got.len() < n {
                match sock.recv(&mut buf) {
                    Ok(k) => got.push(buf[..k].to_vec()),
                    Err(_) => break,
                }
            }
            got
        })
    });
    ready_rx
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("receiver bound");
    h
}

/// A UDP datagram of `len` payload bytes (a pattern) to port 9 of d, as a frame from s0 to
/// r0: IPv4 (checksum 0, allowed) or IPv6 (checksum computed).
fn jumbo_udp(line: &Line, v6dst: bool, len: usize) -> (Vec<u8>, Vec<u8>) {
    let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    let mut u = vec![0x30, 0x39, 0, 9];
    u.extend_from_slice(&((8 + len) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(&payload);
    let mut f = if v6dst {
        let (src, dst) = (v6("2001:2:0:1::1"), v6("2001:2:0:2::2"));
        let c = pseudo6_csum(src, dst, 17, &u);
        u[6..8].copy_from_slice(&c.to_be_bytes());
        let mut ip = ipv6_header(u.len() as u16, 17, 64, src, dst);
        ip.extend_from_slice(&u);
        frame6(line.mac_r0, ip)
    } else {
        frame4(
            line.mac_r0,
            ipv4_packet(v4("198.18.1.1"), v4("198.18.2.2"), 64, 17, 0, &[], &u),
        )
    };
    f[6..12].copy_from_slice(&line.mac_s0);
    (f, payload)
}

/// Jumbo frames (MTU 9000) sent through AF_PACKET arrive as non-linear skbs (only the
/// Ethernet header in the linear part): the program pulls just the headers (counted as
/// `pulled`), forwards them whole (the receiver gets every byte), and for a demux filter
/// whose key lies deep in the payload it pulls as far as the key and passes the matching
/// packet on.
#[test]
#[ignore = "needs root and netns"]
fn forwards_non_linear_jumbo_frames() {
    require("forwards_non_linear_jumbo_frames");
    let mut line = Line::new("jf", 9000);
    let (f4, p4) = jumbo_udp(&line, false, 8000);
    let (f6, p6) = jumbo_udp(&line, true, 6000);
    let (s, d) = (line.s.clone(), line.d.clone());

    let (s2, d2, f4b, f6b) = (s.clone(), d.clone(), f4.clone(), f6.clone());
    let (p4b, p6b) = (p4.clone(), p6.clone());
    line.with_fast_path(move |fp| {
        let rx4 = udp_receiver(&d2, "198.18.2.2:9".parse().unwrap(), 1);
        let rx6 = udp_receiver(&d2, "[2001:2:0:2::2]:9".parse().unwrap(), 1);
        send_raw(&s2, "s0", &f4b);
        send_raw(&s2, "s0", &f6b);
        assert_eq!(rx4.join().unwrap(), vec![p4b], "IPv4 jumbo datagram");
        assert_eq!(rx6.join().unwrap(), vec![p6b], "IPv6 jumbo datagram");
        let st = fp.stats().unwrap();
        assert_eq!(
            (st.forwarded_v4, st.forwarded_v6, st.error),
            (1, 1, 0),
            "{:?}",
            st.report()
        );
        assert_eq!(st.pulled, 2, "both arrived non-linear: {:?}", st.report());
    });

    // IPv4 filters keyed on payload bytes 1300 and 1400 bytes into the packet (offsets from
    // the IP header): the program pulls a non-linear skb up to the furthest key byte (were
    // it short, the frame would count as `error`), passes the IPv4 datagram the second
    // filter matches on (with no router and no kernel forwarding it is lost there), and
    // forwards IPv6, which no filter is for.
    let key_at = |off: usize, p: &[u8]| DemuxKey::exact(off, &p[off - 28..off - 28 + 4]);
    line.router.add_filter(Filter::Demux {
        ethertype: Some(0x0800),
        keys: vec![key_at(1400, &p4)],
    });
    let other: Vec<u8> = p4.iter().map(|b| b ^ 0xff).collect();
    line.router.add_filter(Filter::Demux {
        ethertype: Some(0x0800),
        keys: vec![key_at(1300, &other)],
    });
    line.with_fast_path(move |fp| {
        let rx = udp_receiver(&d, "198.18.2.2:9".parse().unwrap(), 1);
        send_raw(&s, "s0", &f4);
        assert!(
            rx.join().unwrap().is_empty(),
            "the filtered datagram is passed on"
        );
        let st = fp.stats().unwrap();
        assert_eq!(
            (st.filter, st.forwarded_v4, st.error),
            (1, 0, 0),
            "{:?}",
            st.report()
        );
        let rx = udp_receiver(&d, "[2001:2:0:2::2]:9".parse().unwrap(), 1);
        send_raw(&s, "s0", &f6);
        assert_eq!(rx.join().unwrap(), vec![p6], "IPv6 is not filtered");
        let st = fp.stats().unwrap();
        assert_eq!((st.forwarded_v6, st.pulled), (1, 2), "{:?}", st.report());
    });
}
