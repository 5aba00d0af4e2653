//! # anode control protocol and client
//!
//! Contract: The control protocol, its client, and the application library (capsule sessions,
//! ping/traceroute/flood): a request gets exactly one reply or a typed error; every wait is
//! bounded by the caller's deadline.
//!
//! A running `anode node` listens on a Unix-domain socket (mode 0600, see [`path`]) that
//! tools and applications attach to. This crate holds the protocol's types and a blocking
//! [`Client`]; the application library (ports, capsule injection, PLAN, tools like `ping`)
//! builds on it.
//!
//! ## Protocol (version [`PROTOCOL_VERSION`])
//! Line-delimited JSON: one object per `\n`-terminated line each way. A client sends
//! [`RequestFrame`]s — an `id` it chooses and an `op` naming the [`Request`] — and the node
//! answers each, in order, with a `reply` carrying a [`Response`] tagged by `kind`, or an
//! `error` with an [`ErrorCode`] and a message for a person. The first request must be a
//! hello. After `bind` (a datagram port) or `subscribe` (node events) the node also streams
//! `delivery` and `event` messages, which carry no id and may come between replies.
//!
//! ```text
//! > {"id":1,"op":"hello","protocol":1,"client":"my-app"}
//! < {"type":"reply","id":1,"result":{"kind":"hello","protocol":1,"node":"127.0.0.1:4001","software":"anode 0.1.0"}}
//! > {"id":2,"op":"bind","port":7}
//! < {"type":"reply","id":2,"result":{"kind":"bound","port":7}}
//! > {"id":3,"op":"send","dst":"127.0.0.1:4002","port":7,"payload":"6869"}
//! < {"type":"reply","id":3,"result":{"kind":"sent"}}
//! < {"type":"delivery","port":7,"src":"127.0.0.1:4002","flow":0,"rb":31,"type_id":1,"payload":"6f6b"}
//! > {"id":4,"op":"bind_app","type_id":2563,"port":40001}
//! < {"type":"reply","id":4,"result":{"kind":"bound","port":40001}}
//! > {"id":5,"op":"inject","packet":"<an ANEP capsule, hex>","logs":true}
//! < {"type":"reply","id":5,"result":{"kind":"injected"}}
//! < {"type":"delivery","port":40001,"src":"127.0.0.1:4003","flow":0,"rb":28,"type_id":2563,"payload":"01..."}
//! > {"id":4,"op":"frobnicate"}
//! < {"type":"error","id":4,"error":{"code":"bad_request","message":"bad request: unknown variant `frobnicate`, ..."}}
//! ```
//!
//! Payloads are hex strings ([`Payload`]); node addresses are strings (`"127.0.0.1:4001"`,
//! `"[::1]:4001"`).
//!
//! The application library ops ([`app`]): `inject` (a whole ANEP packet built by the client;
//! `logs` streams EE log events such as PLAN `print` to the connection), `bind_app` (an
//! application port under a Type ID; for capsules, the capability code objects deliver to),
//! and the capsule code cache: `code_list`, `code_show`, `code_state` (a code object's soft state), `code_put`, `code_evict`.
//! Service modules ([`module`]): `module_install`, `module_upgrade`, `module_list`,
//! `module_info`, `module_start`, `module_stop`, `module_remove`, `module_call`,
//! `module_qdisc`.
//!
//! ## Client
//! ```no_run
//! use anode_ctl::{Client, SendOptions, StreamItem, path};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut c = Client::connect(path::default_socket_path(4001), "example")?;
//! c.bind(7)?;
//! c.send("127.0.0.1:4002".parse()?, 7, "hi", SendOptions::default())?;
//! for item in c.subscription(None) {
//!     if let StreamItem::Delivery(d) = item? {
//!         println!("{} says {:?}", d.src, d.payload.as_text());
//!         break;
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! ## Extending
//! New operations are new [`Request`] / [`Response`] variants, new streams new
//! [`ServerMessage`] or [`NodeEvent`] variants. Additive changes keep the version; a change
//! that alters the meaning of an existing message bumps [`PROTOCOL_VERSION`].

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod app;
pub mod capsule;
pub mod capture;
mod client;
mod dupkeys;
pub mod module;
pub mod multicast;
pub mod path;
mod payload;
pub mod ports;
mod proto;
pub mod remote;
pub mod send;
pub mod store;
pub mod tools;

pub use app::{CodeEntry, StateEntry};
pub use capsule::{CapsuleSession, SessionCode};
pub use client::{Client, ClientError, SendOptions, StreamItem, Subscription};
pub use module::{DeployedEntry, ModuleConfig, ModuleConfigValue, ModuleEntry, ServiceEntry};
pub use payload::{Payload, PayloadError};
pub use proto::{
    CaptureEndInfo, ChannelEntry, ControlStats, CountersInfo, DeliveryInfo, DomainEntry,
    DomainsInfo, ErrorCode, ErrorInfo, HelloInfo, LinkEntry, NeighborEntry, NodeEvent,
    OutcomesInfo, PROTOCOL_VERSION, PacketInfo, RemoteStats, Request, RequestFrame, Response,
    RouteInfo, RouteOrigin, ServerMessage, StatsInfo, StatusInfo, TerminationEntry, UpgradeInfo,
    parse_request,
};

#[cfg(test)]
mod tests;
