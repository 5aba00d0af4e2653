//! The router the fast path is checked against: the same shape as the differential test's in
//! `crates/ether/tests/fastpath.rs` (two interfaces, static routes, resolved neighbors, demux
//! filters), with just the frame builders it needs to learn its neighbors.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use anode_ip::wire::{Ipv4Cidr, Ipv6Cidr};
use anode_ip::{
    DemuxKey, Filter, IfaceId, InterfaceConfig, IpCidr, IpRouter, MacAddr, RouteOrigin,
    RouterConfig, Verdict,
};

/// The router's interface MACs (interface 0 and 1).
pub const MACS: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]];
/// The host behind interface 0 (198.18.1.5, 2001:2:0:1::5).
pub const HOST0: [u8; 6] = [2, 0, 0, 0, 9, 1];
/// The gateway behind interface 1 (198.18.2.2, 2001:2:0:2::2).
pub const GW1: [u8; 6] = [2, 0, 0, 0, 9, 2];
/// UDP destination port the demux filters claim (both families).
pub const FILTER_PORT: u16 = 7777;

fn v4(s: &str) -> Ipv4Addr {
    s.parse().expect("literal")
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().expect("literal")
}

/// Interfaces 198.18.1.1/24 + 2001:2:0:1::1/64 and 198.18.2.1/24 + 2001:2:0:2::1/64;
/// 198.19.0.0/16, 0.0.0.0/0 and 2001:2:0:9::/64 via the gateway; four resolved neighbors
/// (learned through `handle_frame` as they would arrive); demux filters for UDP port 7777.
pub fn router(now: Instant) -> IpRouter {
    let mut r = IpRouter::new(RouterConfig::default());
    for (i, (a4, a6)) in [
        ("198.18.1.1/24", "2001:2:0:1::1/64"),
        ("198.18.2.1/24", "2001:2:0:2::1/64"),
    ]
    .into_iter()
    .enumerate()
    {
        r.add_interface(InterfaceConfig {
            name: format!("r{i}"),
            mac: MacAddr(MACS[i]),
            mtu: 1500,
            ipv4: vec![a4.parse::<Ipv4Cidr>().expect("literal")],
            ipv6: vec![a6.parse::<Ipv6Cidr>().expect("literal")],
        })
        .expect("interface");
    }
    for (prefix, via) in [
        ("198.19.0.0/16", IpAddr::V4(v4("198.18.2.2"))),
        // A default route, so special IPv4 destinations have one and only the address
        // checks stop them.
        ("0.0.0.0/0", IpAddr::V4(v4("198.18.2.2"))),
        ("2001:2:0:9::/64", IpAddr::V6(v6("2001:2:0:2::2"))),
    ] {
        r.add_route(
            prefix.parse::<IpCidr>().expect("literal"),
            via,
            1,
            RouteOrigin::Static,
        )
        .expect("route");
    }
    for (iface, ip_mine, mac, ip) in [
        (0, "198.18.1.1", HOST0, "198.18.1.5"),
        (1, "198.18.2.1", GW1, "198.18.2.2"),
    ] {
        let mut f = arp_reply(MACS[iface], v4(ip_mine), mac, v4(ip));
        let v = r.handle_frame(now, IfaceId(iface as u32), &mut f);
        assert_eq!(v, Verdict::Consumed);
    }
    for (iface, ip_mine, mac, ip) in [
        (0, "2001:2:0:1::1", HOST0, "2001:2:0:1::5"),
        (1, "2001:2:0:2::1", GW1, "2001:2:0:2::2"),
    ] {
        let mut f = neighbor_solicit(MACS[iface], v6(ip_mine), mac, v6(ip));
        let v = r.handle_frame(now, IfaceId(iface as u32), &mut f);
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
    assert_eq!(r.fast_table().neighbors.len(), 4);
    r
}

fn eth(dst: [u8; 6], src: [u8; 6], ty: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(128);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ty.to_be_bytes());
    f
}

fn arp_reply(my_mac: [u8; 6], my_ip: Ipv4Addr, mac: [u8; 6], ip: Ipv4Addr) -> Vec<u8> {
    let mut f = eth(my_mac, mac, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ip.octets());
    f.extend_from_slice(&my_mac);
    f.extend_from_slice(&my_ip.octets());
    f
}

/// A neighbor solicitation from `ip`/`mac` for `my_ip`, with a source link-layer option.
fn neighbor_solicit(my_mac: [u8; 6], my_ip: Ipv6Addr, mac: [u8; 6], ip: Ipv6Addr) -> Vec<u8> {
    let mut icmp = vec![135, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&my_ip.octets());
    icmp.extend_from_slice(&[1, 1]);
    icmp.extend_from_slice(&mac);
    let mut pseudo = Vec::with_capacity(40 + icmp.len());
    pseudo.extend_from_slice(&ip.octets());
    pseudo.extend_from_slice(&my_ip.octets());
    pseudo.extend_from_slice(&(icmp.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    pseudo.extend_from_slice(&icmp);
    let c = csum(&pseudo);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = eth(my_mac, mac, 0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    f.extend_from_slice(&[58, 255]);
    f.extend_from_slice(&ip.octets());
    f.extend_from_slice(&my_ip.octets());
    f.extend_from_slice(&icmp);
    f
}

/// The Internet checksum of `data`.
fn csum(data: &[u8]) -> u16 {
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
