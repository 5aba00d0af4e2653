//! The control protocol from both sides: a request line as the node parses it
//! (`parse_request`), a server line as the client reads it (`ServerMessage`), and a captured
//! packet as `anode capture` describes it, and a store reply (`anode store`). None may panic; what parses re-encodes and parses
//! to the same value.
#![no_main]
use anode_ctl::capture::describe;
use anode_ctl::{PacketInfo, Payload, ServerMessage, parse_request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(f) = parse_request(&text) {
        let line = serde_json::to_string(&f).expect("a parsed request re-encodes");
        assert_eq!(parse_request(&line).ok(), Some(f));
    }
    if let Ok(m) = serde_json::from_str::<ServerMessage>(&text) {
        let line = m.to_line();
        assert_eq!(serde_json::from_str::<ServerMessage>(&line).ok(), Some(m));
    }
    let node = "127.0.0.1:4001".parse().expect("an address");
    let p = PacketInfo {
        ts_ns: u64::from(data.first().copied().unwrap_or(0)) << 40,
        out: data.len() % 2 == 0,
        peer: "[::1]:4002".parse().expect("an address"),
        data: Payload(data.to_vec()),
    };
    let _ = describe(node, &p);
    // A store reply as `anode store` reads it, and a key as it checks it.
    let _ = anode_ctl::store::outcome(data, "k", node);
    let _ = anode_ctl::store::check_key(&text);
});
