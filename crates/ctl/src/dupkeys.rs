//! Refusing JSON objects that name a key twice: serde_json keeps the last value silently, so
//! a request with `"op"` twice would do whichever came last. [`check`] walks the document with
//! a visitor that keeps each object's keys and fails on the first repeat.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Walks any JSON value, failing on a repeated key.
struct Walk;

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Walk)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(DupKey(key)));
            }
            map.next_value_seed(Walk)?;
        }
        Ok(())
    }
}

/// The repeated key, carried through serde's error as its message.
struct DupKey(String);

impl fmt::Display for DupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\u{0}dup\u{0}{}", self.0)
    }
}

/// `Err(key)` if some object in the JSON text `text` names `key` twice; `Ok` otherwise (also
/// for text that is not JSON: the parser reports that).
pub fn check(text: &str) -> Result<(), String> {
    let mut d = serde_json::Deserializer::from_str(text);
    match Walk.deserialize(&mut d) {
        Ok(()) => Ok(()),
        Err(e) => {
            let m = e.to_string();
            match m.split_once("\u{0}dup\u{0}") {
                Some((_, rest)) => {
                    // serde_json appends " at line L column C".
                    let key = rest.rsplit_once(" at line ").map_or(rest, |(k, _)| k);
                    Err(key.to_string())
                }
                None => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_found_at_any_depth() {
        assert_eq!(check(r#"{"id":1,"op":"status"}"#), Ok(()));
        assert_eq!(
            check(r#"{"id":1,"op":"status","op":"stop"}"#),
            Err("op".into())
        );
        assert_eq!(
            check(r#"{"id":1,"op":"send","payload":{"hex":"00","hex":"ff"}}"#),
            Err("hex".into())
        );
        assert_eq!(check(r#"[{"a":1},{"a":2}]"#), Ok(()));
        assert_eq!(check("not json"), Ok(()));
    }

    #[test]
    fn a_request_with_a_repeated_key_is_refused() {
        let e = crate::parse_request(r#"{"id":7,"op":"status","op":"shutdown"}"#).unwrap_err();
        assert_eq!(e.0, Some(7));
        assert!(e.1.contains("duplicate key \"op\""), "{}", e.1);
    }
}
