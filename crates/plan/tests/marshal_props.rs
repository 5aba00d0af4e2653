//! Property tests: marshalling round-trips, and canonical encodings.

use anode_plan::marshal::{decode_chunk, decode_value, encode_chunk, encode_value};
use anode_plan::packet::{decode_body, encode_body, peek_header};
use anode_plan::{Chunk, Code, PlanHeader, Value};
use proptest::prelude::*;
use std::net::SocketAddr;
use std::sync::Arc;

fn ident() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_']{0,12}"
}

fn host() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(a, p)| SocketAddr::from((a, p))),
        (any::<[u8; 16]>(), any::<u16>()).prop_map(|(a, p)| SocketAddr::from((a, p))),
    ]
}

fn code() -> impl Strategy<Value = Option<Code>> {
    prop_oneof![
        Just(None),
        "fun [a-z]{1,5}\\(\\) = [0-9]{1,3}".prop_map(|t| Some(Code::from_text(&t))),
        any::<[u8; 32]>().prop_map(|h| Some(Code::Hash(h))),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Unit),
        any::<i64>().prop_map(Value::Int),
        any::<bool>().prop_map(Value::Bool),
        any::<u8>().prop_map(Value::Char),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(|b| Value::Str(Arc::from(b))),
        host().prop_map(Value::Host),
        any::<u32>().prop_map(Value::Port),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(|b| Value::Key(Arc::from(b))),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(|b| Value::Blob(Arc::from(b))),
        ident().prop_map(|s| Value::Exn(Arc::from(s.as_str()))),
        any::<u32>().prop_map(Value::Dev),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(|v| Value::list(v).unwrap()),
            proptest::collection::vec(inner.clone(), 2..5).prop_map(|v| Value::tuple(v).unwrap()),
            (code(), ident(), proptest::collection::vec(inner, 0..4))
                .prop_map(|(c, f, a)| Value::Chunk(Arc::new(Chunk::new(c, f, a).unwrap()))),
        ]
    })
}

proptest! {
    #[test]
    fn value_roundtrip(v in value()) {
        let bytes = encode_value(&v);
        prop_assert_eq!(decode_value(&bytes).unwrap(), v);
    }

    #[test]
    fn chunk_roundtrip(c in code(), f in ident(), args in proptest::collection::vec(value(), 0..4)) {
        let chunk = Chunk::new(c, f, args).unwrap();
        let bytes = encode_chunk(&chunk);
        prop_assert_eq!(decode_chunk(&bytes).unwrap(), chunk);
    }

    #[test]
    fn body_roundtrip(session in any::<u32>(), rf in ident(), h in prop_oneof![Just(String::new()), ident()],
                      f in ident(), args in proptest::collection::vec(value(), 0..3)) {
        let header = PlanHeader { session, route_fun: rf, handler: h };
        let chunk = Chunk::new(None, f, args).unwrap();
        let bytes = encode_body(&header, &chunk);
        let (hr, tail) = peek_header(&bytes).unwrap();
        prop_assert_eq!(hr.to_owned(), header.clone());
        let enc = encode_chunk(&chunk);
        prop_assert_eq!(tail, enc.as_slice());
        prop_assert_eq!(decode_body(&bytes).unwrap(), (header, chunk));
    }

    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = anode_plan::fuzz_unmarshal(&bytes);
    }
}
