//! Parse every layer of an arbitrary frame: Ethernet (with VLAN), ARP, IPv4 (options,
//! checksum), IPv6 (extension-header walk), ICMPv4, ICMPv6 (with NDP), UDP. Never panics;
//! whatever parses re-emits to bytes that parse to the same representation.
#![no_main]

use anode_ip::wire::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(e) = EthernetFrame::new_checked(data) else {
        return;
    };
    let _ = EthernetRepr::parse(&e);
    let l3 = e.payload();
    match e.ethertype() {
        EtherType::ARP => {
            if let Ok(p) = ArpPacket::new_checked(l3)
                && let Ok(r) = ArpRepr::parse(&p)
            {
                let mut b = [0u8; 28];
                r.emit(&mut b).unwrap();
                assert_eq!(
                    ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()).unwrap(),
                    r
                );
            }
        }
        EtherType::IPV4 => {
            let Ok(p) = Ipv4Packet::new_checked(l3) else {
                return;
            };
            let _ = ipv4::check_options(p.options());
            let mut out = [0u8; 40];
            let _ = ipv4::copy_copied_options(p.options(), &mut out);
            if let Ok(r) = Ipv4Repr::parse(&p) {
                let mut b = vec![0u8; 20 + r.payload_len];
                r.emit(&mut b).unwrap();
                assert_eq!(
                    Ipv4Repr::parse(&Ipv4Packet::new_checked(&b[..]).unwrap()).unwrap(),
                    r
                );
            }
            match p.protocol() {
                1 => {
                    if let Ok(i) = Icmpv4Packet::new_checked(p.payload())
                        && let Ok(r) = Icmpv4Repr::parse(&i)
                    {
                        let mut b = vec![0u8; r.buffer_len()];
                        r.emit(&mut b).unwrap();
                        let i2 = Icmpv4Packet::new_checked(&b[..]).unwrap();
                        assert_eq!(Icmpv4Repr::parse(&i2).unwrap(), r);
                    }
                }
                17 => {
                    if let Ok(u) = UdpPacket::new_checked(p.payload()) {
                        let _ = UdpRepr::parse(&u, p.src().into(), p.dst().into());
                    }
                }
                _ => {}
            }
        }
        EtherType::IPV6 => {
            let Ok(p) = Ipv6Packet::new_checked(l3) else {
                return;
            };
            let _ = Ipv6Repr::parse(&p);
            let Ok(u) = p.upper_layer() else {
                return;
            };
            assert!(u.offset <= p.packet().len());
            let body = p.packet().get(u.offset..).unwrap_or(&[]);
            match u.protocol {
                58 => {
                    if let Ok(i) = Icmpv6Packet::new_checked(body)
                        && let Ok(r) = Icmpv6Repr::parse(&i, p.src(), p.dst())
                    {
                        let mut b = vec![0u8; r.buffer_len()];
                        r.emit(&mut b, p.src(), p.dst()).unwrap();
                        let i2 = Icmpv6Packet::new_checked(&b[..]).unwrap();
                        assert_eq!(Icmpv6Repr::parse(&i2, p.src(), p.dst()).unwrap(), r);
                    }
                }
                17 => {
                    if let Ok(x) = UdpPacket::new_checked(body) {
                        let _ = UdpRepr::parse(&x, p.src().into(), p.dst().into());
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
});
