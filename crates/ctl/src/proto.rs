//! The protocol's messages: what a client sends ([`RequestFrame`]) and what a node sends back
//! ([`ServerMessage`]).
//!
//! ## Contract
//! - One JSON object per line (UTF-8, `\n`-terminated), both ways.
//! - Every request carries a client-chosen `id`; the node answers it with exactly one
//!   [`ServerMessage::Reply`] or [`ServerMessage::Error`] carrying the same `id`, in request
//!   order.
//! - The first request on a connection must be [`Request::Hello`]; the node checks the major
//!   protocol version and refuses anything else until then.
//! - Stream messages ([`ServerMessage::Delivery`], [`ServerMessage::Event`]) have no `id`
//!   and may arrive between replies once the connection asked for them with
//!   [`Request::Bind`] or [`Request::Subscribe`].
//! - New requests, responses, events and error codes are added as new variants; a client must
//!   ignore stream messages it does not know (they parse as [`ServerMessage`] errors and the
//!   [`crate::Client`] skips them) and treat unknown error codes as [`ErrorCode::Other`].

use std::collections::BTreeMap;

use anode_wire::NodeAddr;
use serde::{Deserialize, Serialize};

use crate::Payload;
use crate::app::{CodeEntry, StateEntry};
use crate::module::{ModuleConfig, ModuleEntry};

/// The protocol version this crate speaks. A node refuses a hello with another version.
pub const PROTOCOL_VERSION: u32 = 1;

/// One request line: `{"id": 7, "op": "status"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFrame {
    /// Chosen by the client; echoed in the reply.
    pub id: u64,
    /// The request, tagged by `op`.
    #[serde(flatten)]
    pub request: Request,
}

fn default_count() -> u32 {
    1
}

fn default_metric() -> u16 {
    1
}

fn default_true() -> bool {
    true
}

/// What a client asks of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Must come first: the protocol version the client speaks and a name for logs.
    Hello {
        /// [`PROTOCOL_VERSION`] of the client.
        protocol: u32,
        /// A name for the node's logs ("anode-cli 0.1.0", "my-app").
        #[serde(default)]
        client: String,
    },
    /// Address, uptime, links, neighbors, route count and counters.
    Status,
    /// The routing table.
    Routes,
    /// The up neighbors.
    Neighbors,
    /// The links and their state.
    Links,
    /// Node counters, driver statistics and control-server statistics.
    Stats,
    /// The NodeOS domains of the EEs that keep them, with their counters.
    Domains,
    /// The node's open NodeOS channels (cut-through channels EEs opened), with counters.
    Channels,
    /// Sends a datagram from this node to `port` at `dst`.
    Send {
        /// Destination node.
        dst: NodeAddr,
        /// Destination application port.
        port: u16,
        /// Application bytes.
        payload: Payload,
        /// Resource bound (hop budget); the node's `default_rb` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rb: Option<u16>,
        /// Flow id.
        #[serde(default)]
        flow: u64,
        /// Send under this ANEP Type ID (an EE module's, e.g. 0x0A10) instead of as a plain
        /// datagram; nodes without that EE forward it toward `dst`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ee_type: Option<u16>,
        /// With `ee_type`: ask for evaluation at every hop.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        every_hop: bool,
    },
    /// Claims a datagram port: deliveries for it stream to this connection until it unbinds
    /// or closes. A port has one owner at a time.
    Bind {
        /// The port.
        port: u16,
    },
    /// Gives a port back.
    Unbind {
        /// The port.
        port: u16,
    },
    /// Streams node events (neighbors, route changes, EE logs) to this connection.
    Subscribe,
    /// Adds (or replaces) a static route to `dest` through the neighbor `via`.
    AddRoute {
        /// Destination node.
        dest: NodeAddr,
        /// Next hop: must be the peer of one of the node's links.
        via: NodeAddr,
        /// Metric (default 1).
        #[serde(default = "default_metric")]
        metric: u16,
    },
    /// Streams copies of the datagrams the node's socket receives and sends
    /// ([`ServerMessage::Packet`]) until `count` packets or `millis` passed (either ends
    /// it; neither: until the connection closes), then one [`ServerMessage::CaptureEnd`].
    Capture {
        /// Only this link's datagrams: its name, index or peer address (`None`: all).
        #[serde(default)]
        link: Option<String>,
        /// Stop after this many packets.
        #[serde(default)]
        count: Option<u64>,
        /// Stop after this many milliseconds.
        #[serde(default)]
        millis: Option<u64>,
    },
    /// Takes a link administratively up or down.
    SetLink {
        /// The link's name, or its index (`"0"`).
        link: String,
        /// Up (true) or down.
        up: bool,
    },
    /// Injects a whole ANEP packet built by the client (a PLAN packet, a capsule) at this
    /// node, as if a local application originated it. With `logs`, the EEs' log events
    /// (PLAN `print`, errors) stream to this connection afterwards.
    Inject {
        /// The ANEP packet.
        packet: Payload,
        /// Stream EE log events to this connection.
        #[serde(default)]
        logs: bool,
        /// Inject this many copies (1 to 10000; default 1), e.g. a flood's data capsules.
        #[serde(default = "default_count")]
        count: u32,
        /// When the node drops a copy: answer [`Response::InjectedPart`] with how many went
        /// before it, instead of an error (a flood paces itself by it).
        #[serde(default)]
        partial: bool,
    },
    /// Claims application `port` for deliveries under ANEP Type ID `type_id` (PLAN, capsule,
    /// datagram). For capsules this registers the port with the capsule EE: the capability
    /// code objects deliver to. Deliveries stream as with [`Request::Bind`].
    BindApp {
        /// ANEP Type ID (`anode_wire::anep::TYPE_*`).
        type_id: u16,
        /// The port.
        port: u16,
    },
    /// The capsule code cache.
    CodeList,
    /// One code object, by name (64 hex digits).
    CodeShow {
        /// Its SHA-256, hex.
        hash: String,
    },
    /// Installs a WebAssembly module in the code cache (compiled, checked against the ABI).
    CodePut {
        /// The module bytes.
        wasm: Payload,
    },
    /// The soft state a code object keeps at this node (its live entries).
    CodeState {
        /// Its SHA-256, hex.
        hash: String,
    },
    /// Removes a code object from memory and disk.
    CodeEvict {
        /// Its SHA-256, hex.
        hash: String,
    },
    /// Installs a signed service module (see [`crate::module`]); the node verifies it against
    /// the publisher keys it trusts. With `start` (default true) it is started once resolved.
    ModuleInstall {
        /// The bytes of the `.amod` package.
        package: Payload,
        /// Configuration values (checked against the module's schema).
        #[serde(default)]
        config: ModuleConfig,
        /// Start it once resolved.
        #[serde(default = "default_true")]
        start: bool,
    },
    /// Replaces an installed module by another version, handing over its state.
    ModuleUpgrade {
        /// The bytes of the new version's `.amod` package.
        package: Payload,
        /// Configuration values for the new version.
        #[serde(default)]
        config: ModuleConfig,
    },
    /// Every installed module.
    ModuleList,
    /// The node's execution environments as services (kind `ee`; answered with
    /// [`Response::Modules`]); `ModuleInfo`, `ModuleStart` and `ModuleStop` take an EE's name.
    ModuleEes,
    /// The service interfaces installed modules provide (the service hierarchy's lookup):
    /// every provider, or with `interface` the one a module of `category` (default user)
    /// would be given for `version` (a semver range, default any).
    ModuleServices {
        /// The interface to look up.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interface: Option<String>,
        /// The version range wanted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<String>,
        /// The category of the module that would use it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        category: Option<String>,
    },
    /// Keeps a package (the bytes of a `.amod` file) at this node's deployment service, so
    /// the first hop of a deployment along a path can fetch it from here; `anode module
    /// deploy` sends it, then injects the signed request (local only).
    ModuleStage {
        /// The package.
        package: Payload,
    },
    /// The modules deployed here along a path (soft state) and the deployment service's
    /// counters.
    ModuleDeployments,
    /// One installed module.
    ModuleInfo {
        /// Its name.
        name: String,
    },
    /// Starts an installed module.
    ModuleStart {
        /// Its name.
        name: String,
    },
    /// Stops an active module.
    ModuleStop {
        /// Its name.
        name: String,
    },
    /// Removes a module.
    ModuleRemove {
        /// Its name.
        name: String,
    },
    /// Puts the queue-discipline module `name` (installed at the node; started if needed) on
    /// `link` with a transmit rate, moving the packets waiting in the old discipline to it;
    /// without `name`, removes the link's discipline (packets go straight to the link again).
    ModuleQdisc {
        /// The qdisc module, or none to remove.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The link's name, or its index (`"0"`).
        link: String,
        /// Transmit rate, bits per second.
        #[serde(default)]
        rate_bps: u64,
    },
    /// Calls `operation` of an active module's service export with `arg` (e.g. reads a
    /// flow count from `flowcount`).
    ModuleCall {
        /// The module's name.
        name: String,
        /// The operation.
        operation: i32,
        /// Its argument.
        #[serde(default)]
        arg: i64,
    },
    /// Stops the node (it answers first).
    Shutdown,
    /// Replaces the node's process by a new one of `binary` (default: the running
    /// executable) that takes over its sockets and state without losing a packet it accepted
    /// (`anode upgrade`); answered once the new process runs, or with why it did not (the
    /// old one then goes on). Local only.
    Upgrade {
        /// The new `anode` executable (absolute, or relative to the node's directory).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binary: Option<String>,
        /// Seconds the new process may take to start and take over (default 30).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_s: Option<u32>,
    },
}

/// One message from the node, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(
    clippy::large_enum_variant,
    reason = "one control-socket message at a time, built to be serialised at once; boxing the reply would only add an allocation"
)]
pub enum ServerMessage {
    /// The answer to request `id`.
    Reply {
        /// The request's id.
        id: u64,
        /// The answer, tagged by `kind`.
        result: Response,
    },
    /// Request `id` failed (no id when the line could not be read as a request at all).
    Error {
        /// The request's id, when it could be read.
        id: Option<u64>,
        /// What went wrong.
        error: ErrorInfo,
    },
    /// A datagram for a port this connection bound.
    Delivery(DeliveryInfo),
    /// A node event, for connections that subscribed.
    Event(NodeEvent),
    /// A captured datagram (after [`Request::Capture`]).
    Packet(PacketInfo),
    /// The capture ended (after [`Request::Capture`]); nothing more is captured.
    CaptureEnd(CaptureEndInfo),
}

/// A successful answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    /// Answer to [`Request::Hello`].
    Hello(HelloInfo),
    /// Answer to [`Request::Status`].
    Status(StatusInfo),
    /// Answer to [`Request::Upgrade`].
    Upgraded(UpgradeInfo),
    /// Answer to [`Request::Routes`].
    Routes {
        /// Sorted by destination, unreachable ones included.
        routes: Vec<RouteInfo>,
    },
    /// Answer to [`Request::Neighbors`].
    Neighbors {
        /// The up neighbors.
        neighbors: Vec<NeighborEntry>,
    },
    /// Answer to [`Request::Links`].
    Links {
        /// In link-id order.
        links: Vec<LinkEntry>,
    },
    /// Answer to [`Request::Stats`].
    Stats(StatsInfo),
    /// Answer to [`Request::Domains`].
    Domains {
        /// One report per EE that keeps domains.
        ees: Vec<DomainsInfo>,
    },
    /// Answer to [`Request::Channels`].
    Channels {
        /// Whether the node has a cut-through table (`[nodeos] enabled`).
        cut_through: bool,
        /// The open channels, oldest first.
        channels: Vec<ChannelEntry>,
    },
    /// The datagram left the node's hands (queued for a link or delivered locally).
    Sent,
    /// The port is now this connection's.
    Bound {
        /// The port.
        port: u16,
    },
    /// The port is free again.
    Unbound {
        /// The port.
        port: u16,
    },
    /// Events will stream to this connection.
    Subscribed,
    /// Answer to [`Request::Capture`]: packets will stream to this connection.
    Capturing {
        /// The node's own address (the local end of every captured datagram).
        node: NodeAddr,
        /// The peer the capture is limited to (`None`: every link).
        peer: Option<NodeAddr>,
    },
    /// The packet was handed to the node.
    Injected,
    /// Answer to a `partial` [`Request::Inject`] whose copy `injected + 1` the node dropped.
    InjectedPart {
        /// Copies handed to the node before the drop.
        injected: u32,
        /// Why the node dropped the next one (as an error would say it).
        reason: String,
        /// The drop's short name, "ee/reason" or the node's reason (e.g. "capsule+nodeos/bandwidth").
        drop: String,
    },
    /// Answer to [`Request::CodeList`].
    CodeList {
        /// Sorted by name.
        code: Vec<CodeEntry>,
    },
    /// Answer to [`Request::CodeShow`] and [`Request::CodePut`].
    Code(CodeEntry),
    /// Answer to [`Request::CodeState`].
    CodeState {
        /// The code object.
        hash: String,
        /// Its live entries, sorted by key.
        entries: Vec<StateEntry>,
    },
    /// Answer to [`Request::CodeEvict`].
    Evicted {
        /// The name.
        hash: String,
        /// Whether it was there.
        removed: bool,
    },
    /// Answer to [`Request::ModuleList`].
    Modules {
        /// In load order.
        modules: Vec<ModuleEntry>,
    },
    /// Answer to [`Request::ModuleStage`].
    ModuleStaged {
        /// The package's SHA-256 (what the deploy request names).
        sha256: String,
        /// Its length.
        bytes: u64,
    },
    /// Answer to [`Request::ModuleDeployments`].
    Deployments {
        /// The modules deployed here, by name.
        deployed: Vec<crate::module::DeployedEntry>,
        /// The service's counters: requests, outcome/NAME, refused/REASON, expired,
        /// fetched_bytes, served_bytes, repo_bytes, repo_failures, serve_refused, malformed,
        /// unanswered.
        counters: BTreeMap<String, u64>,
    },
    /// Answer to [`Request::ModuleServices`].
    Services {
        /// By interface, highest version first.
        services: Vec<crate::module::ServiceEntry>,
    },
    /// Answer to [`Request::ModuleQdisc`].
    QdiscSet {
        /// The link index.
        link: u32,
        /// The discipline now on it (none: removed).
        qdisc: Option<String>,
        /// The discipline it replaced.
        replaced: Option<String>,
    },
    /// Answer to [`Request::ModuleCall`].
    ModuleCalled {
        /// The module.
        name: String,
        /// The operation.
        op: i32,
        /// What it returned.
        result: i64,
    },
    /// Answer to the other module ops: the module as it is now (as it was, for remove).
    Module {
        /// The module.
        module: Box<ModuleEntry>,
    },
    /// Done (route added, link set, shutdown started).
    Done,
}

/// The node's side of the hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloInfo {
    /// The node's [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// The node's address.
    pub node: NodeAddr,
    /// Software name and version ("anode 0.1.0").
    pub software: String,
}

/// What [`Request::Upgrade`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeInfo {
    /// The process that ran the node until now (it exits).
    pub old_pid: u32,
    /// The process running the node now.
    pub new_pid: u32,
    /// The executable it runs.
    pub binary: String,
    /// The old and new software versions.
    pub old_version: String,
    /// The new one.
    pub new_version: String,
    /// Milliseconds from the request until the new process ran the node.
    pub total_ms: u64,
    /// Milliseconds the node read no packet (they waited in its socket buffer).
    pub paused_ms: u64,
    /// Code objects the new process built before the pause.
    pub code_objects: usize,
    /// Neighbors, routes and link-state entries carried over.
    pub neighbors: usize,
    /// Distance-vector routes carried over.
    pub routes: usize,
    /// Link-state database entries carried over.
    pub lsas: usize,
    /// Packets the EEs held (capsules waiting for code, packets queued for a domain) that
    /// went on in the new process.
    pub held: usize,
    /// Packets waiting to leave that were queued again in the new process.
    pub queued: usize,
    /// Records that did not fit the new process (another configuration) and are relearned.
    pub skipped: usize,
    /// Parts of the state the new process refused, with the reason.
    pub refused: Vec<String>,
}

/// A node's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusInfo {
    /// The node's address.
    pub address: NodeAddr,
    /// The UDP address the node's socket is bound to.
    pub bind: String,
    /// Software name and version.
    pub software: String,
    /// Milliseconds since the node started.
    pub uptime_ms: u64,
    /// The links.
    pub links: Vec<LinkEntry>,
    /// The up neighbors.
    pub neighbors: Vec<NeighborEntry>,
    /// Reachable routes (the node's own included).
    pub routes: usize,
    /// Route changes since start.
    pub route_changes: u64,
    /// Node counters.
    pub counters: CountersInfo,
}

/// One link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkEntry {
    /// Link index.
    pub id: u32,
    /// Its configured name ("" if none).
    pub name: String,
    /// The node at the other end.
    pub peer: NodeAddr,
    /// Largest ANEP packet it carries.
    pub mtu: usize,
    /// Routing cost.
    pub cost: u16,
    /// Neighbor configured as up without hellos.
    #[serde(rename = "static")]
    pub static_neighbor: bool,
    /// Administratively up.
    pub enabled: bool,
    /// The neighbor on it is up.
    pub neighbor_up: bool,
    /// Packets the node has sent on it.
    #[serde(default)]
    pub tx_packets: u64,
    /// Their bytes.
    #[serde(default)]
    pub tx_bytes: u64,
    /// Packets per second sent on it lately (the last 100-200 ms; `anode_core::load`).
    #[serde(default)]
    pub tx_pps: u64,
    /// Packets waiting in its queue discipline (0 without one).
    #[serde(default)]
    pub queued: usize,
}

/// One up neighbor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeighborEntry {
    /// Link index.
    pub link: u32,
    /// The link's name.
    pub link_name: String,
    /// The neighbor's address.
    pub addr: NodeAddr,
}

/// How a route was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteOrigin {
    /// The node itself.
    Local,
    /// From configuration or [`Request::AddRoute`].
    Static,
    /// Learned from a neighbor.
    Learned,
    /// A kind this client does not know.
    #[serde(other)]
    Other,
}

/// One routing-table entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteInfo {
    /// Destination node.
    pub dest: NodeAddr,
    /// Cost.
    pub metric: u16,
    /// Usable (metric below infinity).
    pub reachable: bool,
    /// Next hop (none for the node itself).
    pub next_hop: Option<NodeAddr>,
    /// Link index of the next hop.
    pub link: Option<u32>,
    /// How the route was made.
    pub origin: RouteOrigin,
}

/// Node counters (the core's `Counters`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CountersInfo {
    /// Packets received from links.
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Packets originated locally.
    pub local_packets: u64,
    /// Packets queued for transmission.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Packets forwarded by the fast path.
    pub fast_path: u64,
    /// Unknown-Type-ID packets forwarded.
    pub unknown_type_forwarded: u64,
    /// Packets forwarded on cut-through channels (their EE skipped).
    pub cut_through: u64,
    /// Packets handed to an execution environment.
    pub to_ee: u64,
    /// Deliveries to local applications.
    pub delivered: u64,
    /// Control messages received.
    pub control_rx: u64,
    /// Control messages sent.
    pub control_tx: u64,
    /// Non-zero drop counters by reason.
    pub drops: BTreeMap<String, u64>,
    /// The outcome of every packet handed to the node, exactly once each: their sum is
    /// `rx_packets + local_packets`.
    pub outcomes: OutcomesInfo,
}

/// The outcome ledger (the core's `Outcomes`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OutcomesInfo {
    /// Sent on toward a next hop.
    pub forwarded: u64,
    /// Delivered to a local application.
    pub delivered: u64,
    /// Taken without being sent on (control messages, capsules their code ended...).
    pub consumed: u64,
    /// Dropped, under one reason.
    pub dropped: u64,
    /// Held by an EE now (capsules waiting for code, packets queued for a domain).
    pub held: u64,
}

/// Control-server statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ControlStats {
    /// Open control connections.
    pub connections: u64,
    /// Ports bound by applications.
    pub bound_ports: u64,
    /// Deliveries for ports no application bound (dropped).
    pub unbound_port_drops: u64,
    /// Stream messages dropped because a client did not read fast enough.
    pub slow_client_drops: u64,
    /// Connections refused because the server had its maximum open.
    #[serde(default)]
    pub refused_connections: u64,
    /// Connections closed because they were idle (no request, no port, no subscription).
    #[serde(default)]
    pub idle_closed: u64,
    /// Remote management's counters; absent when it is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteStats>,
}

/// Remote management's counters (`[remote]` at the node).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteStats {
    /// Signed requests accepted.
    pub accepted: u64,
    /// Requests refused, by reason (`anode_ctl::remote::REFUSAL_REASONS`, every one listed).
    pub refused: std::collections::BTreeMap<String, u64>,
}

/// One domain's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainEntry {
    /// Its id within its EE.
    pub id: u32,
    /// For a capsule protocol's domain: the protocol's name, from its code's `anode.name`
    /// section ("" if unknown).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its parent (`None` for the root).
    pub parent: Option<u32>,
    /// Its principal.
    pub principal: String,
    /// Packets handled for it.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// CPU time charged, ns.
    pub cpu_ns: u64,
    /// Memory held, bytes.
    pub memory_bytes: u64,
    /// Its memory limit, bytes.
    pub memory_limit: u64,
    /// Drops by reason.
    pub drops: BTreeMap<String, u64>,
    /// Children terminated.
    pub child_terminations: u64,
    /// Whether its principal was authenticated (`Some(false)`: a PLAN source address, which
    /// anyone can claim; `Some(true)`: a verified signer; absent: not applicable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authenticated: Option<bool>,
}

/// A termination, as reported.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TerminationEntry {
    /// The domain.
    pub domain: u32,
    /// Its principal.
    pub principal: String,
    /// Why it ended.
    pub reason: String,
}

/// One open NodeOS channel (answer to [`Request::Channels`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChannelEntry {
    /// Its number.
    pub id: u64,
    /// `cut` (a cut-through channel: matching packets skip the EE).
    pub kind: String,
    /// The domain (principal) that opened it.
    pub domain: String,
    /// The protocol: the ANEP Type ID its packets carry.
    pub type_id: u16,
    /// Its demux keys besides the Type ID: `OFFSET:VALUE_HEX[/MASK_HEX]`, offsets from the
    /// start of the ANEP packet.
    pub keys: Vec<String>,
    /// The fixed next hop, if any (else the default route to the packet's destination).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<NodeAddr>,
    /// Packets it forwarded.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Packets it dropped (over its bandwidth).
    pub drops: u64,
    /// Milliseconds since it was opened.
    pub age_ms: u64,
    /// Milliseconds until it closes by itself (`None`: when its EE closes it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u64>,
}

/// One EE's domains (answer to [`Request::Domains`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainsInfo {
    /// The EE's name.
    pub ee: String,
    /// Memory charged to its domains, bytes.
    pub memory_used: u64,
    /// The bound on it, bytes.
    pub memory_limit: u64,
    /// Domains terminated so far.
    pub terminations: u64,
    /// The most recent terminations.
    pub recent_terminations: Vec<TerminationEntry>,
    /// Live domains.
    pub domains: Vec<DomainEntry>,
}

/// Answer to [`Request::Stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsInfo {
    /// Node counters.
    pub counters: CountersInfo,
    /// The UDP driver's statistics by name.
    pub driver: BTreeMap<String, u64>,
    /// The control server's statistics.
    pub control: ControlStats,
    /// The NodeOS domains of EEs that keep them (as [`Request::Domains`] answers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<DomainsInfo>,
    /// The routing protocol's counters by name (`protocol_dv` or `protocol_ls` = 1,
    /// `routes`, `route_changes`, then the protocol's own: digests, requests, LSAs, SPF
    /// runs; `anode_routing::RoutingStats`). Absent from an older node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub routing: BTreeMap<String, u64>,
}

/// A datagram delivered to a bound port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryInfo {
    /// The port.
    pub port: u16,
    /// The originating node.
    pub src: NodeAddr,
    /// Flow id.
    pub flow: u64,
    /// Resource bound left on arrival.
    pub rb: u16,
    /// ANEP Type ID it arrived under.
    pub type_id: u16,
    /// Application bytes.
    pub payload: Payload,
}

/// A datagram captured on the node's socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketInfo {
    /// When the data path saw it: nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// True if the node sent it, false if it received it.
    pub out: bool,
    /// The other end (source of a received datagram, destination of a sent one).
    pub peer: NodeAddr,
    /// The UDP payload: the ANEP packet.
    pub data: Payload,
}

/// How a capture ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureEndInfo {
    /// Packets streamed to the connection.
    pub packets: u64,
    /// Packets not captured because the capture fell behind (the node forwarded them).
    pub dropped: u64,
    /// Why it ended: "count", "time" or "node stopped".
    pub reason: String,
}

/// A node event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum NodeEvent {
    /// A neighbor came up.
    NeighborUp {
        /// Link index.
        link: u32,
        /// Link name.
        link_name: String,
        /// The neighbor.
        addr: NodeAddr,
    },
    /// A neighbor went down.
    NeighborDown {
        /// Link index.
        link: u32,
        /// Link name.
        link_name: String,
        /// The neighbor.
        addr: NodeAddr,
    },
    /// A route appeared, changed or became unreachable.
    RouteChanged {
        /// The route as it is now.
        route: RouteInfo,
    },
    /// A route was deleted (after its garbage-collection time).
    RouteRemoved {
        /// Its destination.
        dest: NodeAddr,
    },
    /// An execution environment logged a message.
    Log {
        /// The EE's name.
        ee: String,
        /// The message.
        message: String,
    },
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// Machine-readable reason.
    pub code: ErrorCode,
    /// What went wrong and what to do, for a person.
    pub message: String,
}

/// Machine-readable error reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not JSON, or not a known request, or a field is wrong.
    BadRequest,
    /// A request came before the hello.
    HelloFirst,
    /// The hello's protocol version is not spoken here.
    Version,
    /// Another connection owns the port.
    PortInUse,
    /// This connection does not own the port.
    NotBound,
    /// No link by that name or index.
    NoSuchLink,
    /// The route's `via` is not the peer of any link.
    NotNeighbor,
    /// The node dropped the datagram (the message names the drop reason).
    Dropped,
    /// The node's data path has stopped.
    NodeGone,
    /// No such code object, or no capsule EE on the node.
    NoCode,
    /// The module was refused (does not compile or breaks the ABI).
    BadCode,
    /// No service module by that name, or the node hosts no modules.
    NoModule,
    /// The service module was refused: unsigned, tampered, untrusted, bad package or
    /// configuration, or the operation does not fit its state (the message says which).
    ModuleRefused,
    /// The node is at a limit for this kind of request (e.g. captures running); retry later.
    Busy,
    /// This node cannot do that (e.g. capture on a driver without a socket).
    Unsupported,
    /// A remote request was refused: unsigned, untrusted or wrong key, expired, replayed,
    /// or not permitted (the message says which).
    Unauthorized,
    /// A code this client does not know.
    #[serde(other)]
    Other,
}

impl ErrorCode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::HelloFirst => "hello_first",
            ErrorCode::Version => "version",
            ErrorCode::PortInUse => "port_in_use",
            ErrorCode::NotBound => "not_bound",
            ErrorCode::NoSuchLink => "no_such_link",
            ErrorCode::NotNeighbor => "not_neighbor",
            ErrorCode::Dropped => "dropped",
            ErrorCode::NodeGone => "node_gone",
            ErrorCode::NoCode => "no_code",
            ErrorCode::BadCode => "bad_code",
            ErrorCode::NoModule => "no_module",
            ErrorCode::ModuleRefused => "module_refused",
            ErrorCode::Busy => "busy",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Other => "other",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ServerMessage {
    /// An error answer.
    pub fn error(id: Option<u64>, code: ErrorCode, message: impl Into<String>) -> Self {
        ServerMessage::Error {
            id,
            error: ErrorInfo {
                code,
                message: message.into(),
            },
        }
    }

    /// The message as one protocol line (JSON and a newline).
    pub fn to_line(&self) -> String {
        to_line(self)
    }
}

impl RequestFrame {
    /// The request as one protocol line (JSON and a newline).
    pub fn to_line(&self) -> String {
        to_line(self)
    }
}

fn to_line<T: Serialize>(v: &T) -> String {
    // Serializing these types cannot fail: every map key is a string and every value is
    // plain data. Fall back to an error line rather than panic if that ever changes.
    let mut s = serde_json::to_string(v).unwrap_or_else(|e| {
        format!(
            r#"{{"type":"error","id":null,"error":{{"code":"other","message":"cannot encode message: {e}"}}}}"#
        )
    });
    s.push('\n');
    s
}

/// Reads a request line. On failure returns the request id when one could be read, so the
/// error can be answered to it, and a message saying what is wrong.
pub fn parse_request(line: &str) -> Result<RequestFrame, (Option<u64>, String)> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
        (
            None,
            format!("not JSON ({e}); send one JSON object per line"),
        )
    })?;
    let id = v.get("id").and_then(serde_json::Value::as_u64);
    if let Err(key) = crate::dupkeys::check(line) {
        return Err((
            id,
            format!("duplicate key \"{key}\" in the request: give every key once"),
        ));
    }
    if id.is_none() {
        return Err((
            None,
            "every request needs a numeric \"id\", e.g. {\"id\":1,\"op\":\"status\"}".into(),
        ));
    }
    serde_json::from_value(v).map_err(|e| (id, format!("bad request: {e}")))
}
