//! The protocols of `guest/protocols`, compiled to WebAssembly by this crate's build script
//! (release profile, `wasm32-unknown-unknown`) and embedded. Payload formats are documented in
//! each protocol's source.

/// Active ping: timestamps at the sender, reply back to the source.
pub static PING: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest/ping.wasm"));
/// Traceroute by route recording.
pub static TRACEROUTE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest/traceroute.wasm"));
/// Flood with start-of-flow, per-flow counting in soft state, periodic status (PAN §IV-C).
pub static FLOOD: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest/flood.wasm"));
/// Multicast over a tree built by joins.
pub static MULTICAST: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest/multicast.wasm"));
/// Per-flow counting at every hop (state across capsules).
pub static COUNTER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest/counter.wasm"));
/// Forward at every hop, deliver at the destination (the EE's cost floor).
pub static FORWARD: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest/forward.wasm"));
/// Portmapper: service numbers to the application ports holding them (soft state); exports
/// `portmap_lookup` for dependents.
pub static PORTMAP: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest/portmap.wasm"));

/// Forwarding by a named routing function of the node (`forward_by`); payload
/// `port u16 | name_len u8 | name | data`.
pub static ROUTEFN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest/routefn.wasm"));

/// A key-value store in the destination's files (ABI v2): get, put, delete, with a reply
/// back to the requester (`anode store`).
pub static STORE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest/store.wasm"));

/// Every protocol by name.
pub static ALL: &[(&str, &[u8])] = &[
    ("ping", PING),
    ("traceroute", TRACEROUTE),
    ("flood", FLOOD),
    ("multicast", MULTICAST),
    ("counter", COUNTER),
    ("forward", FORWARD),
    ("portmap", PORTMAP),
    ("routefn", ROUTEFN),
    ("store", STORE),
];
