//! Internet checksum helpers (RFC 1071) for IP, ICMP and UDP, on top of `anode_wire`'s
//! one's-complement sum and RFC 1624 incremental update, plus the IPv4/IPv6 pseudo-headers.
//!
//! Contract: [`combine`] adds folded one's-complement sums; a checksum field verifies when
//! the sum over the covered bytes (pseudo-header included) is `0xffff`.

use std::net::{Ipv4Addr, Ipv6Addr};

pub use anode_wire::checksum::{sum, update};

/// One's-complement addition of folded 16-bit sums.
#[inline]
pub fn combine(sums: &[u16]) -> u16 {
    let mut acc: u32 = 0;
    for s in sums {
        acc += u32::from(*s);
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Sum of the IPv4 pseudo-header (RFC 768 / RFC 793).
pub fn pseudo_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: u16) -> u16 {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&src.octets());
    b[4..8].copy_from_slice(&dst.octets());
    b[9] = proto;
    b[10..12].copy_from_slice(&len.to_be_bytes());
    sum(&b)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 §8.1).
pub fn pseudo_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, len: u32) -> u16 {
    let mut b = [0u8; 40];
    b[..16].copy_from_slice(&src.octets());
    b[16..32].copy_from_slice(&dst.octets());
    b[32..36].copy_from_slice(&len.to_be_bytes());
    b[39] = next_header;
    sum(&b)
}

/// The value to store in a checksum field given the sum over everything it covers (with
/// the field itself zero).
#[inline]
pub fn finish(s: u16) -> u16 {
    !s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_matches_sum_of_concatenation() {
        let a = [0x12u8, 0x34, 0xff, 0xff, 0x00, 0x01];
        let b = [0xab, 0xcd, 0x80, 0x00];
        let mut ab = a.to_vec();
        ab.extend_from_slice(&b);
        assert_eq!(combine(&[sum(&a), sum(&b)]), sum(&ab));
    }
}
