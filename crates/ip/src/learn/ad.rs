//! The prefix advertisement: what one anode router tells the other anode nodes about the IP
//! prefixes it reaches, carried as an anode datagram to port [`PREFIX_AD_PORT`] (so it is
//! routed by the distance-vector service like any datagram, and the receiver knows the
//! origin node from the datagram's source address).
//!
//! ```text
//! 0       1       2               4                               8
//! +-------+-------+---------------+-------------------------------+
//! |version| flags |     count     |          sequence             |
//! +-------+-------+---------------+-------------------------------+
//! |           hold ms             |  count entries of 24 bytes:
//! +-------------------------------+
//!   +-------+-------+-------+-------+-------------------------------+
//!   | kind  |family |  len  |  pad  |            metric             |
//!   +-------+-------+-------+-------+-------------------------------+
//!   |                 address (16; IPv4 in the first 4)             |
//!   +---------------------------------------------------------------+
//! ```
//!
//! Kinds: 1 = an address of the sender's interfaces (`len` is its prefix length; receivers
//! use it as the gateway when the sender is their next hop), 2 = a prefix the sender routes
//! to, at `metric`. Families: 4 or 6. All fields big-endian.
//!
//! Contract of [`PrefixAd::parse`]: never panics; rejects a version other than
//! [`AD_VERSION`], a count above [`MAX_AD_ENTRIES`] or past the buffer, an unknown family,
//! a prefix length beyond the family's width and IPv4 entries with bytes set after the
//! first four. Entries of an unknown kind are skipped and bytes after the entries are
//! ignored (later versions may append).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::router::IpCidr;
use crate::wire::{Ipv4Cidr, Ipv6Cidr};

/// The anode datagram port prefix advertisements go to (and come from).
pub const PREFIX_AD_PORT: u16 = 520;
/// The version this code writes and reads.
pub const AD_VERSION: u8 = 1;
/// Most entries in one advertisement (keeps it inside one 1280-byte packet).
pub const MAX_AD_ENTRIES: usize = 48;

const HEADER: usize = 12;
const ENTRY: usize = 24;
const KIND_ADDR: u8 = 1;
const KIND_PREFIX: u8 = 2;

/// Why an advertisement did not parse or emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AdError {
    /// Fewer bytes than the header or the declared entries need.
    #[error("prefix advertisement truncated: {len} bytes, need {need}")]
    Truncated {
        /// Bytes available.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// A version this code does not read.
    #[error("prefix advertisement version {0} not supported (this node reads {AD_VERSION})")]
    BadVersion(u8),
    /// More entries than [`MAX_AD_ENTRIES`].
    #[error("prefix advertisement with {0} entries (at most {MAX_AD_ENTRIES})")]
    TooMany(usize),
    /// An entry's family is neither 4 nor 6.
    #[error("prefix advertisement entry {index}: family {family} is not 4 or 6")]
    BadFamily {
        /// Entry index.
        index: usize,
        /// The family byte.
        family: u8,
    },
    /// An entry's prefix length exceeds its family's width, or an IPv4 entry has bytes set
    /// after its first four.
    #[error("prefix advertisement entry {index}: bad prefix length {len} or address padding")]
    BadPrefix {
        /// Entry index.
        index: usize,
        /// The prefix length byte.
        len: u8,
    },
}

/// An advertisement.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PrefixAd {
    /// The sender's sequence number (increases with every advertisement it sends).
    pub seq: u32,
    /// How long the receiver keeps the contents without a newer advertisement.
    pub hold_ms: u32,
    /// The sender's interface addresses (with their prefix lengths).
    pub addrs: Vec<IpCidr>,
    /// The prefixes the sender routes to, with its metric to each.
    pub prefixes: Vec<(IpCidr, u32)>,
}

fn cidr_bytes(c: &IpCidr) -> (u8, u8, [u8; 16]) {
    let mut a = [0u8; 16];
    match c {
        IpCidr::V4(c) => {
            if let Some(d) = a.get_mut(..4) {
                d.copy_from_slice(&c.addr.octets());
            }
            (4, c.prefix_len, a)
        }
        IpCidr::V6(c) => (6, c.prefix_len, c.addr.octets()),
    }
}

impl PrefixAd {
    /// Bytes [`PrefixAd::to_bytes`] writes.
    pub fn buffer_len(&self) -> usize {
        HEADER + ENTRY * (self.addrs.len() + self.prefixes.len())
    }

    /// The advertisement as bytes; fails if it has more than [`MAX_AD_ENTRIES`] entries.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AdError> {
        let n = self.addrs.len() + self.prefixes.len();
        if n > MAX_AD_ENTRIES {
            return Err(AdError::TooMany(n));
        }
        let mut b = Vec::with_capacity(self.buffer_len());
        b.push(AD_VERSION);
        b.push(0);
        b.extend_from_slice(&(n as u16).to_be_bytes());
        b.extend_from_slice(&self.seq.to_be_bytes());
        b.extend_from_slice(&self.hold_ms.to_be_bytes());
        let entries = self
            .addrs
            .iter()
            .map(|a| (KIND_ADDR, a, 0u32))
            .chain(self.prefixes.iter().map(|(p, m)| (KIND_PREFIX, p, *m)));
        for (kind, c, metric) in entries {
            let (family, len, addr) = cidr_bytes(c);
            b.extend_from_slice(&[kind, family, len, 0]);
            b.extend_from_slice(&metric.to_be_bytes());
            b.extend_from_slice(&addr);
        }
        Ok(b)
    }

    /// Parses an advertisement (see the module docs for what is rejected).
    pub fn parse(b: &[u8]) -> Result<PrefixAd, AdError> {
        let be16 = |o: usize| {
            b.get(o..o + 2)
                .and_then(|s| s.try_into().ok())
                .map(u16::from_be_bytes)
        };
        let be32 = |o: usize| {
            b.get(o..o + 4)
                .and_then(|s| s.try_into().ok())
                .map(u32::from_be_bytes)
        };
        let (Some(&version), Some(count), Some(seq), Some(hold_ms)) =
            (b.first(), be16(2), be32(4), be32(8))
        else {
            return Err(AdError::Truncated {
                len: b.len(),
                need: HEADER,
            });
        };
        if version != AD_VERSION {
            return Err(AdError::BadVersion(version));
        }
        let count = usize::from(count);
        if count > MAX_AD_ENTRIES {
            return Err(AdError::TooMany(count));
        }
        let need = HEADER + ENTRY * count;
        let Some(body) = b.get(HEADER..need) else {
            return Err(AdError::Truncated { len: b.len(), need });
        };
        let mut ad = PrefixAd {
            seq,
            hold_ms,
            ..PrefixAd::default()
        };
        for (index, e) in body.chunks_exact(ENTRY).enumerate() {
            let &[kind, family, len, _, m0, m1, m2, m3, ref addr @ ..] = e else {
                continue;
            };
            let Ok(addr) = <[u8; 16]>::try_from(addr) else {
                continue;
            };
            let metric = u32::from_be_bytes([m0, m1, m2, m3]);
            let cidr = match family {
                4 => {
                    let [a0, a1, a2, a3, rest @ ..] = addr;
                    let a = Ipv4Addr::new(a0, a1, a2, a3);
                    if rest.iter().any(|x| *x != 0) {
                        return Err(AdError::BadPrefix { index, len });
                    }
                    Ipv4Cidr::new(a, len)
                        .map(IpCidr::V4)
                        .ok_or(AdError::BadPrefix { index, len })?
                }
                6 => Ipv6Cidr::new(Ipv6Addr::from(addr), len)
                    .map(IpCidr::V6)
                    .ok_or(AdError::BadPrefix { index, len })?,
                _ => return Err(AdError::BadFamily { index, family }),
            };
            match kind {
                KIND_ADDR => ad.addrs.push(cidr),
                KIND_PREFIX => ad.prefixes.push((cidr.network(), metric)),
                _ => {}
            }
        }
        Ok(ad)
    }
}

/// The address of a prefix entry (for a gateway choice).
pub(crate) fn cidr_addr(c: &IpCidr) -> IpAddr {
    match c {
        IpCidr::V4(c) => IpAddr::V4(c.addr),
        IpCidr::V6(c) => IpAddr::V6(c.addr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PrefixAd {
        PrefixAd {
            seq: 7,
            hold_ms: 3000,
            addrs: vec![
                "198.18.2.2/24".parse().unwrap(),
                "2001:2:0:2::2/64".parse().unwrap(),
            ],
            prefixes: vec![
                ("198.18.3.0/24".parse().unwrap(), 0),
                ("2001:2:0:3::/64".parse().unwrap(), 5),
            ],
        }
    }

    #[test]
    fn round_trip() {
        let ad = sample();
        let b = ad.to_bytes().unwrap();
        assert_eq!(b.len(), ad.buffer_len());
        assert_eq!(PrefixAd::parse(&b).unwrap(), ad);
        // Appended bytes (a later version's fields) are ignored.
        let mut longer = b.clone();
        longer.extend_from_slice(&[1, 2, 3]);
        assert_eq!(PrefixAd::parse(&longer).unwrap(), ad);
    }

    #[test]
    fn rejects_malformed() {
        let b = sample().to_bytes().unwrap();
        for n in 0..b.len() {
            assert!(PrefixAd::parse(&b[..n]).is_err(), "prefix of {n} bytes");
        }
        let mut v = b.clone();
        v[0] = 2;
        assert_eq!(PrefixAd::parse(&v), Err(AdError::BadVersion(2)));
        let mut v = b.clone();
        v[2..4].copy_from_slice(&(MAX_AD_ENTRIES as u16 + 1).to_be_bytes());
        assert_eq!(
            PrefixAd::parse(&v),
            Err(AdError::TooMany(MAX_AD_ENTRIES + 1))
        );
        let mut v = b.clone();
        v[HEADER + 1] = 5;
        assert_eq!(
            PrefixAd::parse(&v),
            Err(AdError::BadFamily {
                index: 0,
                family: 5
            })
        );
        let mut v = b.clone();
        v[HEADER + 2] = 33;
        assert_eq!(
            PrefixAd::parse(&v),
            Err(AdError::BadPrefix { index: 0, len: 33 })
        );
        let mut v = b.clone();
        v[HEADER + 8 + 5] = 1; // IPv4 padding byte
        assert!(matches!(
            PrefixAd::parse(&v),
            Err(AdError::BadPrefix { index: 0, .. })
        ));
        // An unknown kind is skipped.
        let mut v = b.clone();
        v[HEADER] = 9;
        assert_eq!(PrefixAd::parse(&v).unwrap().addrs.len(), 1);
        let too_many = PrefixAd {
            prefixes: vec![("198.18.0.0/15".parse().unwrap(), 1); MAX_AD_ENTRIES + 1],
            ..PrefixAd::default()
        };
        assert!(too_many.to_bytes().is_err());
    }
}
