//! [`Payload`]: application bytes, carried in JSON as a lowercase hex string
//! (`"payload": "68690a"` is `hi\n`). Hex keeps every byte value representable and the lines
//! plain ASCII; decoding accepts upper case too.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Application bytes (hex in JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Payload(pub Vec<u8>);

/// A payload string that is not hex.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// Hex needs two digits per byte.
    #[error("payload hex has an odd number of digits ({0}); write two hex digits per byte")]
    OddLength(usize),
    /// A character that is not a hex digit.
    #[error("payload has a non-hex character {0:?} at {1}; write bytes as hex digits 0-9a-f")]
    NotHex(char, usize),
}

impl Payload {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The bytes as text if they are UTF-8.
    pub fn as_text(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        const D: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(self.0.len() * 2);
        for b in &self.0 {
            s.push(char::from(D[usize::from(b >> 4)]));
            s.push(char::from(D[usize::from(b & 15)]));
        }
        s
    }

    /// Parses hex (either case).
    pub fn from_hex(s: &str) -> Result<Self, PayloadError> {
        if !s.len().is_multiple_of(2) {
            return Err(PayloadError::OddLength(s.len()));
        }
        let mut out = Vec::with_capacity(s.len() / 2);
        let mut hi = 0u8;
        for (i, c) in s.chars().enumerate() {
            let v = c.to_digit(16).ok_or(PayloadError::NotHex(c, i))? as u8;
            if i.is_multiple_of(2) {
                hi = v << 4;
            } else {
                out.push(hi | v);
            }
        }
        Ok(Payload(out))
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Self {
        Payload(v)
    }
}

impl From<&[u8]> for Payload {
    fn from(v: &[u8]) -> Self {
        Payload(v.to_vec())
    }
}

impl From<&str> for Payload {
    fn from(v: &str) -> Self {
        Payload(v.as_bytes().to_vec())
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Payload::from_hex(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_all_bytes() {
        let p = Payload((0..=255u8).collect());
        let h = p.to_hex();
        assert_eq!(&h[..6], "000102");
        assert_eq!(Payload::from_hex(&h).unwrap(), p);
        assert_eq!(Payload::from_hex("FFfe").unwrap().0, vec![0xff, 0xfe]);
    }

    #[test]
    fn bad_hex() {
        assert_eq!(Payload::from_hex("abc"), Err(PayloadError::OddLength(3)));
        assert_eq!(Payload::from_hex("zz"), Err(PayloadError::NotHex('z', 0)));
        assert!(serde_json::from_str::<Payload>("\"0g\"").is_err());
        assert_eq!(
            serde_json::to_string(&Payload::from("hi")).unwrap(),
            "\"6869\""
        );
    }
}
