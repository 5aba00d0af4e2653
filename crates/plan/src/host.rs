//! Host addresses.
//!
//! A PLAN `host` is the underlay address of an anode node: an IPv4 or IPv6
//! address plus a UDP port, i.e. a [`SocketAddr`]. Textual forms accepted by
//! [`parse_host`] (and, as literals, by the lexer): `1.2.3.4`,
//! `1.2.3.4:3322`, `[2001:2::1]:3322`, `[2001:2::1]` and a bare `2001:2::1`;
//! a missing port means [`DEFAULT_PORT`].

use std::net::{IpAddr, SocketAddr};

/// Port used when a host is written without one.
pub const DEFAULT_PORT: u16 = 3322;

/// Parses a host in one of the accepted textual forms.
pub fn parse_host(s: &str) -> Option<SocketAddr> {
    let s = s.trim();
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(sa);
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, DEFAULT_PORT));
    }
    let inner = s.strip_prefix('[')?.strip_suffix(']')?;
    let ip = inner.parse::<IpAddr>().ok()?;
    Some(SocketAddr::new(ip, DEFAULT_PORT))
}

/// PLAN's printed form of a host: `(ip,port)`.
pub fn host_to_string(h: &SocketAddr) -> String {
    format!("({},{})", h.ip(), h.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(parse_host("1.2.3.4"), "1.2.3.4:3322".parse().ok());
        assert_eq!(parse_host("1.2.3.4:99"), "1.2.3.4:99".parse().ok());
        assert_eq!(parse_host("[2001:2::1]:7"), "[2001:2::1]:7".parse().ok());
        assert_eq!(parse_host("[2001:2::1]"), "[2001:2::1]:3322".parse().ok());
        assert_eq!(parse_host("2001:2::1"), "[2001:2::1]:3322".parse().ok());
        assert_eq!(parse_host("nonsense"), None);
        assert_eq!(parse_host("1.2.3.400"), None);
    }
}
