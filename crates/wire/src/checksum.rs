//! The Internet checksum (RFC 1071) used by ANEP's integrity-checksum option, and the
//! incremental update (RFC 1624) the fast path uses after rewriting header fields.

/// One's-complement sum of `data` as big-endian 16-bit words (odd length padded with zero),
/// folded to 16 bits, not inverted.
pub fn sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        if let [a, b] = c {
            acc += u64::from(u16::from_be_bytes([*a, *b]));
        }
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(u16::from_be_bytes([*last, 0]));
    }
    fold(acc)
}

/// The checksum to store: the inverted one's-complement sum.
pub fn checksum(data: &[u8]) -> u16 {
    !sum(data)
}

/// RFC 1624 eqn. 3: the new checksum after one 16-bit word changed from `old` to `new`.
pub fn update(check: u16, old: u16, new: u16) -> u16 {
    let acc = u64::from(!check) + u64::from(!old) + u64::from(new);
    !fold(acc)
}

fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&data), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn incremental_matches_full() {
        let mut data = vec![0x45, 0x00, 0x12, 0x34, 0xab, 0xcd, 0x00, 0x40];
        let c0 = checksum(&data);
        data[6] = 0x00;
        data[7] = 0x3f;
        assert_eq!(update(c0, 0x0040, 0x003f), checksum(&data));
    }
}
