//! A flow-based routing function (like the flow table route scouting installs): the packets of
//! flow `flow` leave on link `link`, every other flow takes the default route. PLAN packets
//! naming `flowpin` as their routing function are routed by it at intermediate nodes.

#![no_std]

use anode_msdk as _;

/// `route(flow)`: the link for a packet of `flow` (its destination, 18 bytes, is readable
/// with `pkt_read`), or `ROUTE_DEFAULT`.
#[unsafe(no_mangle)]
pub extern "C" fn route(flow: i64) -> i32 {
    if flow == anode_msdk::config_int("flow") {
        anode_msdk::config_int("link") as i32
    } else {
        anode_msdk::ROUTE_DEFAULT
    }
}
