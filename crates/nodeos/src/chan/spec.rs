//! Protocol specs (`if0/ip/udp/anep`, `udp/anep`, `anep`) and address specs.
//!
//! Grammar: `[iface "/"] layer ("/" layer)*`, where `iface` is a name that is not a protocol
//! (e.g. `if0`, `eth1`) and the layers, bottom up, each sit on the one below as the table
//! in [`Layer::may_follow`] says. The canonical text ([`ProtocolSpec::canonical`]) is what
//! policies list. On anode nodes input channels must end in `anep`: anode links carry ANEP
//! over UDP, so `udp/anep` and `anep` name the same packets.

use serde::Serialize;

/// One protocol layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Layer {
    /// Ethernet.
    Eth,
    /// IPv4.
    Ip,
    /// IPv6.
    Ip6,
    /// UDP.
    Udp,
    /// ANEP.
    Anep,
}

impl Layer {
    fn parse(s: &str) -> Option<Layer> {
        Some(match s {
            "eth" => Layer::Eth,
            "ip" | "ip4" => Layer::Ip,
            "ip6" => Layer::Ip6,
            "udp" => Layer::Udp,
            "anep" => Layer::Anep,
            _ => return None,
        })
    }

    /// Its name in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Eth => "eth",
            Layer::Ip => "ip",
            Layer::Ip6 => "ip6",
            Layer::Udp => "udp",
            Layer::Anep => "anep",
        }
    }

    /// Whether `self` may sit directly on `lower`.
    pub fn may_follow(self, lower: Layer) -> bool {
        matches!(
            (lower, self),
            (Layer::Eth, Layer::Ip | Layer::Ip6)
                | (Layer::Ip | Layer::Ip6, Layer::Udp)
                | (Layer::Udp, Layer::Anep)
        )
    }
}

/// Why a protocol spec did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Nothing to parse.
    #[error("empty protocol spec (expected e.g. \"udp/anep\")")]
    Empty,
    /// An empty component (`udp//anep`).
    #[error("empty component at position {0} (expected e.g. \"udp/anep\")")]
    EmptyComponent(usize),
    /// An interface name in a position other than the first.
    #[error("unknown protocol {name:?} at position {pos} (known: eth, ip, ip6, udp, anep)")]
    UnknownProtocol {
        /// The component.
        name: String,
        /// Its position, from 0.
        pos: usize,
    },
    /// Two layers that do not stack.
    #[error("{upper} cannot run directly over {lower}")]
    BadOrder {
        /// The lower layer.
        lower: &'static str,
        /// The upper layer.
        upper: &'static str,
    },
    /// A spec with an interface and no protocol.
    #[error("interface {0:?} with no protocol (expected e.g. \"{0}/ip/udp/anep\")")]
    NoProtocol(String),
    /// A spec anode cannot receive on.
    #[error("unsupported on anode nodes: {0}")]
    Unsupported(String),
}

/// A parsed protocol spec.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ProtocolSpec {
    /// The interface, if named.
    pub iface: Option<String>,
    /// Layers, bottom up.
    pub layers: Vec<Layer>,
}

impl ProtocolSpec {
    /// Parses a spec such as `if0/ip/udp/anep`.
    pub fn parse(s: &str) -> Result<ProtocolSpec, SpecError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(SpecError::Empty);
        }
        let mut iface = None;
        let mut layers: Vec<Layer> = Vec::new();
        for (pos, comp) in s.split('/').enumerate() {
            if comp.is_empty() {
                return Err(SpecError::EmptyComponent(pos));
            }
            match Layer::parse(comp) {
                Some(l) => {
                    if let Some(&lower) = layers.last()
                        && !l.may_follow(lower)
                    {
                        return Err(SpecError::BadOrder {
                            lower: lower.as_str(),
                            upper: l.as_str(),
                        });
                    }
                    layers.push(l);
                }
                None if pos == 0 && is_iface_name(comp) => iface = Some(comp.to_string()),
                None => {
                    return Err(SpecError::UnknownProtocol {
                        name: comp.to_string(),
                        pos,
                    });
                }
            }
        }
        if layers.is_empty() {
            return Err(SpecError::NoProtocol(iface.unwrap_or_default()));
        }
        Ok(ProtocolSpec { iface, layers })
    }

    /// Checks that anode can receive on it (its top layer is ANEP).
    pub fn check_anode(&self) -> Result<(), SpecError> {
        if self.layers.last() == Some(&Layer::Anep) {
            Ok(())
        } else {
            Err(SpecError::Unsupported(format!(
                "{}: anode channels carry ANEP; end the spec with /anep",
                self.canonical()
            )))
        }
    }

    /// The canonical text (`ip4` written `ip`).
    pub fn canonical(&self) -> String {
        let mut parts: Vec<&str> = Vec::new();
        if let Some(i) = &self.iface {
            parts.push(i);
        }
        parts.extend(self.layers.iter().map(|l| l.as_str()));
        parts.join("/")
    }
}

fn is_iface_name(s: &str) -> bool {
    s.len() <= 15
        && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_papers_specs() {
        let s = ProtocolSpec::parse("if0/ip/udp/anep").unwrap();
        assert_eq!(s.iface.as_deref(), Some("if0"));
        assert_eq!(s.layers, vec![Layer::Ip, Layer::Udp, Layer::Anep]);
        assert_eq!(s.canonical(), "if0/ip/udp/anep");
        let s = ProtocolSpec::parse("udp/anep").unwrap();
        assert_eq!(s.iface, None);
        assert!(s.check_anode().is_ok());
        assert_eq!(
            ProtocolSpec::parse("ip4/udp").unwrap().canonical(),
            "ip/udp"
        );
    }

    proptest::proptest! {
        /// Any text parses or fails with a reason, never panics; the canonical form of a
        /// parsed spec parses back to the same spec.
        #[test]
        fn any_text_parses_or_fails_and_canonical_round_trips(s in "[a-z0-9/ .]{0,30}") {
            if let Ok(p) = ProtocolSpec::parse(&s) {
                let again = ProtocolSpec::parse(&p.canonical());
                proptest::prop_assert_eq!(again, Ok(p));
            }
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(ProtocolSpec::parse(" "), Err(SpecError::Empty));
        assert_eq!(
            ProtocolSpec::parse("udp//anep"),
            Err(SpecError::EmptyComponent(1))
        );
        assert_eq!(
            ProtocolSpec::parse("anep/udp"),
            Err(SpecError::BadOrder {
                lower: "anep",
                upper: "udp"
            })
        );
        let e = ProtocolSpec::parse("if0/ip/tcp").unwrap_err();
        assert!(e.to_string().contains("\"tcp\" at position 2"), "{e}");
        assert!(matches!(
            ProtocolSpec::parse("if0"),
            Err(SpecError::NoProtocol(_))
        ));
        let e = ProtocolSpec::parse("if0/ip")
            .unwrap()
            .check_anode()
            .unwrap_err();
        assert!(e.to_string().contains("end the spec with /anep"));
    }
}
