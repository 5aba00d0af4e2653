//! What the fast path's tests and its fuzz target (`crates/ether/fuzz`, which includes this
//! file by path) share: the router the program is checked against and the frame builders it
//! needs. Each user takes a part, hence `allow(dead_code)`.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use anode_ip::wire::{Ipv4Cidr, Ipv6Cidr};
use anode_ip::{
    DemuxKey, Filter, IfaceId, InterfaceConfig, IpCidr, IpRouter, MacAddr, RouteOrigin,
    RouterConfig, Verdict,
};

/// The router's interface MACs (interface 0 and 1).
pub const MACS: [[u8; 6]; 2] = [MAC0, MAC1];
pub const MAC0: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const MAC1: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// The host behind interface 0 (198.18.1.5, 2001:2:0:1::5).
pub const HOST0: [u8; 6] = [2, 0, 0, 0, 9, 1];
/// The gateway behind interface 1 (198.18.2.2, 2001:2:0:2::2).
pub const GW1: [u8; 6] = [2, 0, 0, 0, 9, 2];
/// UDP destination port the demux filters claim (both families).
pub const FILTER_PORT: u16 = 7777;

pub fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

pub fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// Interfaces 198.18.1.1/24 + 2001:2:0:1::1/64 and 198.18.2.1/24 + 2001:2:0:2::1/64;
/// 198.19.0.0/16 and 2001:2:0:9::/64 via the gateway (and 0.0.0.0/0 with `default_route`,
/// so that special IPv4 destinations have a route and only the address checks stop them);
/// four neighbors resolved through `handle_frame` as they would arrive (ARP replies,
/// neighbor solicitations with a source link-layer option); demux filters for UDP port 7777.
pub fn router(now: Instant, default_route: bool) -> IpRouter {
    let mut r = IpRouter::new(RouterConfig::default());
    for (i, (mac, a4, a6)) in [
        (MAC0, "198.18.1.1/24", "2001:2:0:1::1/64"),
        (MAC1, "198.18.2.1/24", "2001:2:0:2::1/64"),
    ]
    .into_iter()
    .enumerate()
    {
        r.add_interface(InterfaceConfig {
            name: format!("r{i}"),
            mac: MacAddr(mac),
            mtu: 1500,
            ipv4: vec![a4.parse::<Ipv4Cidr>().unwrap()],
            ipv6: vec![a6.parse::<Ipv6Cidr>().unwrap()],
        })
        .unwrap();
    }
    let mut routes = vec![
        ("198.19.0.0/16", IpAddr::V4(v4("198.18.2.2"))),
        ("2001:2:0:9::/64", IpAddr::V6(v6("2001:2:0:2::2"))),
    ];
    if default_route {
        routes.push(("0.0.0.0/0", IpAddr::V4(v4("198.18.2.2"))));
    }
    for (prefix, via) in routes {
        r.add_route(
            prefix.parse::<IpCidr>().unwrap(),
            via,
            1,
            RouteOrigin::Static,
        )
        .unwrap();
    }
    for (iface, my_mac, my_ip, mac, ip) in [
        (0, MAC0, "198.18.1.1", HOST0, "198.18.1.5"),
        (1, MAC1, "198.18.2.1", GW1, "198.18.2.2"),
    ] {
        let mut f = arp_reply(my_mac, v4(my_ip), mac, v4(ip));
        let v = r.handle_frame(now, IfaceId(iface), &mut f);
        assert_eq!(v, Verdict::Consumed);
    }
    for (iface, my_mac, my_ip, mac, ip) in [
        (0, MAC0, "2001:2:0:1::1", HOST0, "2001:2:0:1::5"),
        (1, MAC1, "2001:2:0:2::1", GW1, "2001:2:0:2::2"),
    ] {
        let mut f = neighbor_solicit(my_mac, v6(my_ip), mac, v6(ip));
        let v = r.handle_frame(now, IfaceId(iface), &mut f);
        assert_eq!(v, Verdict::Consumed);
    }
    while r.poll_transmit().is_some() {}
    r.add_filter(Filter::Demux {
        ethertype: Some(0x0800),
        keys: vec![
            DemuxKey::exact(9, &[17]),
            DemuxKey::exact(22, &FILTER_PORT.to_be_bytes()),
        ],
    });
    r.add_filter(Filter::Demux {
        ethertype: Some(0x86dd),
        keys: vec![
            DemuxKey::exact(6, &[17]),
            DemuxKey::exact(42, &FILTER_PORT.to_be_bytes()),
        ],
    });
    let t = r.fast_table();
    assert_eq!(t.neighbors.len(), 4, "{:?}", t.neighbors);
    r
}

/// The Internet checksum of `data`.
pub fn csum(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for c in data.chunks(2) {
        let hi = c.first().copied().unwrap_or(0);
        let lo = c.get(1).copied().unwrap_or(0);
        acc += u32::from(u16::from_be_bytes([hi, lo]));
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

pub fn eth(dst: [u8; 6], src: [u8; 6], ty: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(1600);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ty.to_be_bytes());
    f
}

pub fn arp_reply(my_mac: [u8; 6], my_ip: Ipv4Addr, mac: [u8; 6], ip: Ipv4Addr) -> Vec<u8> {
    let mut f = eth(my_mac, mac, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ip.octets());
    f.extend_from_slice(&my_mac);
    f.extend_from_slice(&my_ip.octets());
    f
}

pub fn neighbor_solicit(my_mac: [u8; 6], my_ip: Ipv6Addr, mac: [u8; 6], ip: Ipv6Addr) -> Vec<u8> {
    let mut icmp = vec![135, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&my_ip.octets());
    icmp.extend_from_slice(&[1, 1]);
    icmp.extend_from_slice(&mac);
    let c = icmp6_csum(ip, my_ip, &icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = eth(my_mac, mac, 0x86dd);
    f.extend_from_slice(&ipv6_header(icmp.len() as u16, 58, 255, ip, my_ip));
    f.extend_from_slice(&icmp);
    f
}

pub fn icmp6_csum(src: Ipv6Addr, dst: Ipv6Addr, body: &[u8]) -> u16 {
    pseudo6_csum(src, dst, 58, body)
}

/// The checksum of an upper-layer `body` (its checksum field zero) with the IPv6 pseudo-header.
pub fn pseudo6_csum(src: Ipv6Addr, dst: Ipv6Addr, next: u8, body: &[u8]) -> u16 {
    let mut p = Vec::new();
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&(body.len() as u32).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, next]);
    p.extend_from_slice(body);
    csum(&p)
}

pub fn ipv6_header(payload: u16, next: u8, hops: u8, src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&payload.to_be_bytes());
    h.push(next);
    h.push(hops);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    h
}
