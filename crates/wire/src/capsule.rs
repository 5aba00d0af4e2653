//! The capsule header: what a capsule of the capsule execution environment carries after its
//! transit header (source, destination, previous hop, resource bound and flow id live there).
//!
//! ```text
//!  0       8       16              32
//! +-------+-------+---------------+
//! |version| flags | header length |   header length: bytes (>= 56; later versions append)
//! +-------+-------+---------------+
//! |  code object name: SHA-256 of the WebAssembly module (32 bytes)
//! +-------------------------------+
//! |  code source (18 bytes)       |   node to demand-load the code from; [::]:0 = previous hop
//! +---------------+---------------+
//! |      pad      |  payload ...
//! ```

use crate::{NodeAddr, WireError, transit::TransitRepr, util};

/// Capsule header version.
pub const VERSION: u8 = 1;
/// Length of a version-1 capsule header.
pub const LEN: usize = 56;

/// A SHA-256 code object name.
pub type CodeHash = [u8; 32];

/// The parsed capsule header (the part after the transit header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapsuleRepr {
    /// Capsule flags (EE-defined).
    pub flags: u8,
    /// Name of the code object: SHA-256 of its bytes.
    pub code: CodeHash,
    /// Where to demand-load the code from; `None` means the previous hop.
    pub code_source: Option<NodeAddr>,
}

impl CapsuleRepr {
    /// Parses the header at the front of `buf` (the transit header's `rest()`); returns the
    /// header and the offset of the payload.
    pub fn parse(buf: &[u8]) -> Result<(Self, usize), WireError> {
        let version = util::u8_at(buf, 0, "capsule header")?;
        if version != VERSION {
            return Err(WireError::UnsupportedVersion {
                what: "capsule header",
                found: version,
                supported: VERSION,
            });
        }
        let flags = util::u8_at(buf, 1, "capsule header")?;
        let hl = usize::from(util::u16_at(buf, 2, "capsule header")?);
        if hl < LEN {
            return Err(WireError::BadLength {
                what: "capsule header length",
                detail: "shorter than the 56-byte version-1 header",
            });
        }
        util::get(buf, 0, hl, "capsule header")?;
        let mut code = [0u8; 32];
        code.copy_from_slice(util::get(buf, 4, 32, "capsule header")?);
        let src = NodeAddr::read(buf, 36)?;
        Ok((
            CapsuleRepr {
                flags,
                code,
                code_source: (!src.is_unspecified()).then_some(src),
            },
            hl,
        ))
    }

    /// Writes the 56-byte header at the front of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        util::put(buf, 0, &[0u8; LEN])?;
        util::put(buf, 0, &[VERSION, self.flags])?;
        util::put(buf, 2, &(LEN as u16).to_be_bytes())?;
        util::put(buf, 4, &self.code)?;
        self.code_source.unwrap_or_default().write(buf, 36)
    }

    /// The header as a 56-byte vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; LEN];
        let _ = self.emit(&mut v);
        v
    }
}

/// A whole capsule as its EE sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capsule {
    /// Routing fields.
    pub transit: TransitRepr,
    /// Capsule fields.
    pub header: CapsuleRepr,
    /// Application payload.
    pub payload: Vec<u8>,
}

impl Capsule {
    /// Builds the full ANEP packet.
    pub fn to_packet(&self) -> Result<Vec<u8>, WireError> {
        crate::routed_packet(
            crate::anep::TYPE_CAPSULE,
            &self.transit,
            &self.header.to_vec(),
            &self.payload,
        )
    }

    /// Parses an ANEP payload (transit header onward).
    pub fn parse(anep_payload: &[u8]) -> Result<Self, WireError> {
        let (transit, tl) = TransitRepr::parse(anep_payload)?;
        let rest = anep_payload.get(tl..).unwrap_or(&[]);
        let (header, hl) = CapsuleRepr::parse(rest)?;
        Ok(Capsule {
            transit,
            header,
            payload: rest.get(hl..).unwrap_or(&[]).to_vec(),
        })
    }
}

/// A whole ANEP capsule packet from `src` to `dst` running `code` at every hop
/// (`FLAG_EVAL_EVERY_HOP`), with resource bound `rb`, flow id `flow` and `payload`; the code
/// is demand-loaded from the previous hop (no code source).
pub fn capsule_packet(
    code: CodeHash,
    src: NodeAddr,
    dst: NodeAddr,
    rb: u16,
    flow: u64,
    payload: &[u8],
) -> Result<Vec<u8>, WireError> {
    Capsule {
        transit: crate::transit::TransitRepr {
            flags: crate::transit::FLAG_EVAL_EVERY_HOP,
            rb,
            flow,
            src,
            dst,
            prev_hop: src,
        },
        header: CapsuleRepr {
            flags: 0,
            code,
            code_source: None,
        },
        payload: payload.to_vec(),
    }
    .to_packet()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{arb_addr, v4};
    use proptest::prelude::*;

    #[test]
    fn fixture() {
        let r = CapsuleRepr {
            flags: 0,
            code: [0xab; 32],
            code_source: None,
        };
        let b = r.to_vec();
        assert_eq!(&b[..4], &[1, 0, 0, 56]);
        assert_eq!(&b[4..36], &[0xab; 32]);
        assert_eq!(&b[36..56], &[0u8; 20]);
        assert_eq!(CapsuleRepr::parse(&b).unwrap(), (r, 56));
        let r2 = CapsuleRepr {
            code_source: Some(v4(198, 18, 0, 5, 3322)),
            ..r
        };
        assert_eq!(CapsuleRepr::parse(&r2.to_vec()).unwrap().0, r2);
    }

    #[test]
    fn malformed() {
        let b = CapsuleRepr::default().to_vec();
        assert!(CapsuleRepr::parse(&b[..55]).is_err());
        let mut c = b.clone();
        c[0] = 0;
        assert!(CapsuleRepr::parse(&c).is_err());
        let mut c = b;
        c[3] = 10;
        assert!(CapsuleRepr::parse(&c).is_err());
    }

    proptest! {
        #[test]
        fn roundtrip(flags in any::<u8>(), code in any::<[u8; 32]>(), src in proptest::option::of(arb_addr()),
                     payload in proptest::collection::vec(any::<u8>(), 0..300), rb in any::<u16>()) {
            let c = Capsule {
                transit: TransitRepr { rb, ..Default::default() },
                header: CapsuleRepr { flags, code, code_source: src.filter(|a| !a.is_unspecified()) },
                payload,
            };
            let pkt = c.to_packet().unwrap();
            let p = crate::anep::AnepPacket::new_checked(&pkt[..]).unwrap();
            prop_assert_eq!(Capsule::parse(p.payload()).unwrap(), c);
        }
    }
}
