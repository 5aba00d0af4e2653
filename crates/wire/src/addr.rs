//! Node addresses: the underlay IPv4 or IPv6 address and UDP port a node is reached at.
//!
//! On the wire inside anode headers a node address is always 18 bytes, so header offsets stay
//! fixed and the fast path can rewrite fields in place:
//!
//! ```text
//! 0               16      18
//! +---------------+-------+
//! | IPv6 address  | port  |   IPv4 is carried IPv4-mapped (::ffff:a.b.c.d)
//! +---------------+-------+
//! ```
//!
//! The unspecified address `[::]:0` means "none" where a field is optional (e.g. a capsule's
//! code source, which then defaults to the previous hop).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use crate::{DEFAULT_PORT, WireError, util};

/// Encoded length of a [`NodeAddr`] in anode headers.
pub const NODE_ADDR_LEN: usize = 18;

/// The underlay address of an anode node: IP address (v4 or v6) plus UDP port.
///
/// Held as the 16 address bytes (IPv4 mapped, as on the wire) and the port: 18 bytes where a
/// `SocketAddr` takes 32, which matters because every node keeps one per destination in its
/// routes and forwarding table (an emulated 3,815-node network holds 14.5 million of them).
/// Ordered by address bytes, then port (IPv4 addresses sort as their mapped form).
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(into = "String", try_from = "String")]
pub struct NodeAddr {
    ip: [u8; 16],
    port: u16,
}

impl NodeAddr {
    /// `[::]:0`, meaning "no address".
    pub const UNSPECIFIED: NodeAddr = NodeAddr {
        ip: [0; 16],
        port: 0,
    };

    /// A node address from an IP address and port (an IPv4-mapped IPv6 address is the same
    /// node as its IPv4 address).
    pub const fn new(ip: IpAddr, port: u16) -> Self {
        let v6 = match ip {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        NodeAddr {
            ip: v6.octets(),
            port,
        }
    }

    /// The socket address.
    pub const fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip(), self.port)
    }

    /// The IP address.
    pub const fn ip(&self) -> IpAddr {
        let v6 = Ipv6Addr::from_octets(self.ip);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }

    /// The UDP port.
    pub const fn port(&self) -> u16 {
        self.port
    }

    /// True for `[::]:0` / `0.0.0.0:0`.
    pub fn is_unspecified(&self) -> bool {
        self.ip().is_unspecified() && self.port == 0
    }

    /// The 18-byte header encoding.
    pub fn to_bytes(&self) -> [u8; NODE_ADDR_LEN] {
        let mut out = [0u8; NODE_ADDR_LEN];
        let (a, p) = out.split_at_mut(16);
        a.copy_from_slice(&self.ip);
        p.copy_from_slice(&self.port.to_be_bytes());
        out
    }

    /// Decodes the 18-byte header encoding at `at` in `buf`.
    pub fn read(buf: &[u8], at: usize) -> Result<Self, WireError> {
        let b = util::get(buf, at, NODE_ADDR_LEN, "node address")?;
        let mut ip = [0u8; 16];
        ip.copy_from_slice(b.get(..16).unwrap_or(&[0; 16]));
        let port = util::u16_at(b, 16, "node address")?;
        Ok(NodeAddr { ip, port })
    }

    /// Writes the 18-byte encoding at `at`.
    pub fn write(&self, buf: &mut [u8], at: usize) -> Result<(), WireError> {
        util::put(buf, at, &self.to_bytes())
    }
}

impl From<SocketAddr> for NodeAddr {
    fn from(s: SocketAddr) -> Self {
        // IPv4-mapped IPv6 is the same node as its IPv4 address (one identity).
        NodeAddr::new(s.ip(), s.port())
    }
}

impl From<NodeAddr> for SocketAddr {
    fn from(a: NodeAddr) -> Self {
        a.socket_addr()
    }
}

impl From<NodeAddr> for String {
    fn from(a: NodeAddr) -> Self {
        a.to_string()
    }
}

impl TryFrom<String> for NodeAddr {
    type Error = AddrParseError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.socket_addr(), f)
    }
}

impl fmt::Debug for NodeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.socket_addr(), f)
    }
}

/// A node address string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{0}' is not a node address: write IPv4 as 198.18.0.1 or 198.18.0.1:3322, IPv6 as 2001:2::1 or [2001:2::1]:3322"
)]
pub struct AddrParseError(pub String);

impl FromStr for NodeAddr {
    type Err = AddrParseError;

    /// Accepts `ip:port`, `[ipv6]:port`, or a bare IP (port defaults to 3322).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if let Ok(sa) = s.parse::<SocketAddr>() {
            return Ok(sa.into());
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(SocketAddr::new(ip, DEFAULT_PORT).into());
        }
        if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']'))
            && let Ok(ip) = inner.parse::<Ipv6Addr>()
        {
            return Ok(SocketAddr::new(IpAddr::V6(ip), DEFAULT_PORT).into());
        }
        Err(AddrParseError(s.to_string()))
    }
}

impl Default for NodeAddr {
    fn default() -> Self {
        NodeAddr::UNSPECIFIED
    }
}

/// Convenience: an IPv4 node address.
pub fn v4(a: u8, b: u8, c: u8, d: u8, port: u16) -> NodeAddr {
    NodeAddr::new(IpAddr::V4(Ipv4Addr::new(a, b, c, d)), port)
}

/// A proptest strategy over IPv4 and IPv6 node addresses.
#[cfg(test)]
pub(crate) fn arb_addr() -> impl proptest::strategy::Strategy<Value = NodeAddr> {
    use proptest::prelude::*;
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(o, p)| NodeAddr::new(IpAddr::V4(Ipv4Addr::from(o)), p)),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(o, p)| NodeAddr::from(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(o)), p))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn compact_and_one_identity_for_mapped_addresses() {
        assert_eq!(std::mem::size_of::<NodeAddr>(), 18);
        let mapped: NodeAddr = "[::ffff:198.18.0.1]:3322".parse().unwrap();
        assert_eq!(mapped, v4(198, 18, 0, 1, 3322));
        assert_eq!(mapped.to_string(), "198.18.0.1:3322");
        assert!(NodeAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0).is_unspecified());
        assert!(
            v4(198, 18, 0, 1, 9) < v4(198, 18, 0, 2, 1),
            "address before port"
        );
    }

    #[test]
    fn v4_fixture() {
        let a = v4(198, 18, 0, 1, 3322);
        let b = a.to_bytes();
        assert_eq!(
            b,
            [
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1, 0x0c, 0xfa
            ]
        );
        assert_eq!(NodeAddr::read(&b, 0).unwrap(), a);
    }

    #[test]
    fn v6_fixture_and_parse_forms() {
        let a: NodeAddr = "[2001:2::7]:4000".parse().unwrap();
        let b = a.to_bytes();
        assert_eq!(&b[..4], &[0x20, 0x01, 0x00, 0x02]);
        assert_eq!(b[15], 7);
        assert_eq!(&b[16..], &[0x0f, 0xa0]);
        assert_eq!(NodeAddr::read(&b, 0).unwrap(), a);
        assert_eq!(
            "2001:2::7".parse::<NodeAddr>().unwrap().port(),
            DEFAULT_PORT
        );
        assert_eq!(
            "[2001:2::7]".parse::<NodeAddr>().unwrap().port(),
            DEFAULT_PORT
        );
        assert_eq!(
            "198.18.0.1".parse::<NodeAddr>().unwrap(),
            v4(198, 18, 0, 1, 3322)
        );
        let err = "node-a".parse::<NodeAddr>().unwrap_err();
        assert!(err.to_string().contains("198.18.0.1:3322"));
    }

    #[test]
    fn mapped_socket_addr_normalises() {
        let sa: SocketAddr = "[::ffff:198.18.0.1]:3322".parse().unwrap();
        assert_eq!(NodeAddr::from(sa), v4(198, 18, 0, 1, 3322));
    }

    #[test]
    fn truncated() {
        assert!(matches!(
            NodeAddr::read(&[0u8; 17], 0),
            Err(WireError::Truncated { .. })
        ));
    }

    proptest! {
        #[test]
        fn roundtrip(a in arb_addr()) {
            prop_assert_eq!(NodeAddr::read(&a.to_bytes(), 0).unwrap(), a);
            prop_assert_eq!(a.to_string().parse::<NodeAddr>().unwrap(), a);
        }
    }
}
