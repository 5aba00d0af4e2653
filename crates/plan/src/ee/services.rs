//! The [`Services`] implementation backed by the node ([`NodeContext`]), and the interface of
//! node-side extension services ([`NodeService`]).
//!
//! Contract:
//! * `thisHost` is the node's address; `getNeighbors` its up neighbors, a neighbor's `dev`
//!   being the id of the link to it; `defaultRoute` is the distance-vector route
//!   (`NodeContext::lookup`);
//! * `OnRemote` / `RetransOnRemote` / `OnNeighbor` build a child packet carrying the parent's
//!   source, flow, session and handler, with the resource bound the program gave it, and send
//!   it with `forward` (default route), `forward_via` (another routing function, or the named
//!   neighbor), which spends one unit of it like any hop. A child for this node itself is
//!   queued and evaluated after the current evaluation, also spending one unit, so a program
//!   cannot loop on one node. Failures raise `NoRoute`, `NotANeighbor` or `ServiceError`;
//! * `deliver(port, v)` hands the marshalled value to the application bound to that PLAN port
//!   (a `Delivery` with Type ID `TYPE_PLAN`; decode with [`crate::ee::decode_delivery`]);
//!   `print` becomes an `Event::Log` from EE `plan`;
//! * extension services run with a [`ServiceEnv`]: the node, the EE's node-resident state and
//!   the current packet. They must not block.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anode_core::wire::NodeAddr;
use anode_core::wire::anep::TYPE_PLAN;
use anode_core::{Delivery, DropReason, NextHop, NodeContext};

use super::route::{FlowTable, RouteQuery, RouteRegistry};
use super::soft::SoftState;
use super::stats::PlanStats;
use super::wire::{DEFAULT_ROUTE, PacketSpec, encode_packet};
use crate::host::parse_host;
use crate::marshal::{encode_chunk, encode_value};
use crate::services::{Outgoing, Reassembler, SendKind, ServiceError, Services};
use crate::value::{Dev, Value};

/// The packet being evaluated, as services see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketInfo {
    /// Its source (`getSource`).
    pub source: NodeAddr,
    /// Its flow id.
    pub flow: u64,
    /// Its session (the application port at the source).
    pub session: u32,
    /// Its handler name.
    pub handler: String,
    /// Resource bound it arrived with.
    pub rb: u16,
    /// The link it arrived on (`getSrcDev`; 0 when it originated here).
    pub src_dev: Dev,
}

/// Node-resident state of the PLAN EE that services may use.
#[derive(Debug)]
pub struct NodeState {
    /// Flow-based routes (read by `flowRoute`).
    pub flows: FlowTable,
    /// Short-lived state (scouting marks, ...).
    pub soft: SoftState,
    /// Time-to-live of soft state set by the scouting services.
    pub mark_ttl: Duration,
    /// Load of each device reported by the node's owner, added to the load measured on the
    /// link (`queueLength`, [`super::scout`]).
    pub device_load: HashMap<Dev, i64>,
    /// Packets per second on a link that count as one unit of device load.
    pub load_unit_pps: u64,
    /// The small name service of `getHostByName` (literal addresses always resolve).
    pub names: HashMap<String, SocketAddr>,
    /// Fragment reassembly for `fragPiece`.
    pub reassembler: Reassembler,
    /// Counter behind `newFlowId`.
    pub next_flow: u64,
    /// Resident data (`put`, `get`, `delete`).
    pub resident: super::packages::ResidentStore,
    /// The secret `generateKey` derives keys from ([`super::PlanEe::set_key_seed`]).
    pub key_seed: [u8; 32],
    /// Counter behind `generateKey`.
    pub next_key: u64,
    /// Public keys (ed25519) whose signatures `authEval` accepts.
    pub trusted_keys: Vec<[u8; 32]>,
    /// `RetransOnRemote` packets waiting for acknowledgement.
    pub reliable: super::reliable::Reliable,
    /// Resource bound of the packets this node sends on its own (acknowledgements).
    pub own_rb: u16,
}

impl NodeState {
    /// Empty state for an EE configured by `cfg`.
    pub fn new(cfg: &super::PlanEeConfig) -> NodeState {
        NodeState {
            flows: FlowTable::new(cfg.flow_ttl, cfg.max_flows),
            soft: SoftState::new(cfg.max_soft),
            mark_ttl: cfg.mark_ttl,
            device_load: HashMap::new(),
            load_unit_pps: cfg.load_unit_pps.max(1),
            names: HashMap::new(),
            reassembler: Reassembler::default(),
            next_flow: 0,
            resident: super::packages::ResidentStore::default(),
            key_seed: [0; 32],
            next_key: 0,
            trusted_keys: Vec::new(),
            reliable: super::reliable::Reliable::default(),
            own_rb: cfg.error_rb,
        }
    }
}

/// What a node-side extension service may touch.
#[derive(Debug)]
pub struct ServiceEnv<'e, 'a> {
    /// The node.
    pub ctx: &'e mut NodeContext<'a>,
    /// The EE's node-resident state.
    pub state: &'e mut NodeState,
    /// The packet being evaluated.
    pub packet: &'e PacketInfo,
}

/// A node-side implementation of an extension service (registered with
/// [`crate::ee::PlanEe::register_service`] together with its PLAN type). Arguments have the
/// registered types; failures are PLAN exceptions.
pub trait NodeService: Send {
    /// Runs the service.
    fn call(&mut self, env: &mut ServiceEnv<'_, '_>, args: &[Value])
    -> Result<Value, ServiceError>;
}

impl<F> NodeService for F
where
    F: FnMut(&mut ServiceEnv<'_, '_>, &[Value]) -> Result<Value, ServiceError> + Send,
{
    fn call(
        &mut self,
        env: &mut ServiceEnv<'_, '_>,
        args: &[Value],
    ) -> Result<Value, ServiceError> {
        self(env, args)
    }
}

/// The extension services by PLAN service id.
pub(crate) type ServiceTable = HashMap<u32, Box<dyn NodeService>>;

/// [`Services`] for one evaluation on one node.
pub(crate) struct NodeServices<'s, 'c, 'a> {
    pub ctx: &'c mut NodeContext<'a>,
    pub routes: &'s mut RouteRegistry,
    pub ext: &'s mut ServiceTable,
    pub state: &'s mut NodeState,
    pub pkt: &'s PacketInfo,
    pub local: &'s mut VecDeque<Vec<u8>>,
    pub stats: &'s mut PlanStats,
}

fn hop_value(h: NextHop) -> (SocketAddr, Dev) {
    (h.addr.socket_addr(), h.link.0)
}

fn drop_error(r: DropReason, dest: SocketAddr) -> ServiceError {
    match r {
        DropReason::NoRoute => ServiceError::new("NoRoute", format!("no route to {dest}")),
        r => ServiceError::new(
            "ServiceError",
            format!("the node could not send the packet to {dest}: {r}"),
        ),
    }
}

impl NodeServices<'_, '_, '_> {
    fn route_fn_hop(&mut self, name: &str, dst: NodeAddr) -> Result<NextHop, ServiceError> {
        let q = RouteQuery {
            ctx: &*self.ctx,
            flows: &self.state.flows,
            dst,
            flow: self.pkt.flow,
        };
        let f = self.routes.get_mut(name).ok_or_else(|| {
            ServiceError::new(
                "NoRoute",
                format!("routing function `{name}` is not installed on this node"),
            )
        })?;
        f.next_hop(&q)
            .ok_or_else(|| ServiceError::new("NoRoute", format!("{name}: no route to {dst}")))
    }
}

impl Services for NodeServices<'_, '_, '_> {
    fn this_host(&mut self) -> Vec<SocketAddr> {
        vec![self.ctx.address().socket_addr()]
    }

    fn this_host_is(&mut self, h: &SocketAddr) -> bool {
        NodeAddr::from(*h) == self.ctx.address()
    }

    fn get_neighbors(&mut self) -> Vec<(SocketAddr, Dev)> {
        self.ctx.neighbors().into_iter().map(hop_value).collect()
    }

    fn default_route(&mut self, dest: &SocketAddr) -> Result<(SocketAddr, Dev), ServiceError> {
        self.ctx
            .lookup(&NodeAddr::from(*dest))
            .map(hop_value)
            .ok_or_else(|| ServiceError::new("NoRoute", format!("no route to {dest}")))
    }

    fn send(&mut self, mut out: Outgoing) -> Result<(), ServiceError> {
        let me = self.ctx.address();
        let dest = NodeAddr::from(out.dest);
        // The reliable package: the child carries |retransDeliver|(me, id, chunk).
        let mut track = None;
        if let SendKind::Retrans {
            route_fun,
            retries,
            timeout_ms,
        } = &out.kind
        {
            let id = self.state.reliable.next_id(me);
            let wrapped = crate::value::Chunk::new(
                None,
                "retransDeliver",
                vec![
                    Value::Host(me.socket_addr()),
                    Value::Int(id),
                    Value::Chunk(out.chunk.clone()),
                ],
            )
            .map_err(|e| ServiceError::new("ServiceError", e.to_string()))?;
            out.chunk = Arc::new(wrapped);
            track = Some((
                id,
                route_fun.to_string(),
                u32::try_from(*retries).unwrap_or(if *retries < 0 { 0 } else { u32::MAX }),
                super::reliable::interval(*timeout_ms),
            ));
        }
        let route_fun: &str = match &out.kind {
            SendKind::Remote { route_fun } | SendKind::Retrans { route_fun, .. } => route_fun,
            SendKind::Neighbor { .. } => DEFAULT_ROUTE,
        };
        let via = match &out.kind {
            SendKind::Neighbor { dev } => {
                let hop = self
                    .ctx
                    .neighbors()
                    .into_iter()
                    .find(|h| h.addr == dest && dev.is_none_or(|d| d == h.link.0))
                    .ok_or_else(|| {
                        ServiceError::new(
                            "NotANeighbor",
                            format!("{} is not an up neighbor of {me}", out.dest),
                        )
                    })?;
                Some(hop)
            }
            _ if dest == me || route_fun == DEFAULT_ROUTE => None,
            _ => Some(self.route_fn_hop(route_fun, dest)?),
        };
        let spec = PacketSpec {
            src: self.pkt.source,
            eval_dest: dest,
            rb: u16::try_from(out.rb).unwrap_or(u16::MAX),
            flow: self.pkt.flow,
            session: self.pkt.session,
            route_fun: route_fun.to_string(),
            handler: self.pkt.handler.clone(),
        };
        let buf = encode_packet(&spec, &encode_chunk(&out.chunk))
            .map_err(|e| ServiceError::new("ServiceError", e.to_string()))?;
        self.stats.children += 1;
        let anep_len = anode_core::wire::anep::BASIC_HEADER_LEN;
        if let Some((id, route_fun, left, interval)) = track
            && left > 0
        {
            let p = super::reliable::Pending {
                buf: buf.clone(),
                dest,
                route_fun,
                left,
                interval,
                next: self.ctx.now() + interval,
                sent: 1,
            };
            if !self.state.reliable.track(id, p) {
                self.ctx.count_drop("plan", DropReason::RetransUntracked);
            }
        }
        if dest == me {
            // Evaluated here after the current evaluation; the "hop" costs one unit too.
            let mut buf = buf;
            if let Some(Ok(mut t)) = buf
                .get_mut(anep_len..)
                .map(anode_core::wire::transit::Transit::new_checked)
            {
                t.set_rb(spec.rb.saturating_sub(1));
            }
            self.local.push_back(buf);
            return Ok(());
        }
        // A packet the program sends is not the evaluated packet's outcome (the ledger).
        let r = self.ctx.originate(|ctx| match via {
            Some(hop) => ctx.forward_via(hop, buf, anep_len),
            None => ctx.forward(buf, anep_len),
        });
        r.map(|_| ()).map_err(|e| drop_error(e, out.dest))
    }

    fn print(&mut self, text: &str) {
        self.ctx.log("plan", text.to_string());
    }

    fn deliver(&mut self, port: u32, value: &Value) -> Result<(), ServiceError> {
        let port = u16::try_from(port).map_err(|_| {
            ServiceError::new(
                "ServiceError",
                format!("deliver: port {port} is not a port of this node (0..=65535)"),
            )
        })?;
        self.ctx.deliver(Delivery {
            type_id: TYPE_PLAN,
            port,
            src: self.pkt.source,
            flow: self.pkt.flow,
            rb: self.pkt.rb,
            buf: encode_value(value),
            offset: 0,
        });
        Ok(())
    }

    fn get_host_by_name(&mut self, name: &str) -> Result<SocketAddr, ServiceError> {
        if let Some(h) = self.state.names.get(name) {
            return Ok(*h);
        }
        parse_host(name).ok_or_else(|| {
            ServiceError::new(
                "UnknownHost",
                format!("getHostByName: {name:?} is neither a known name nor an address"),
            )
        })
    }

    fn reassemble(
        &mut self,
        id: i64,
        index: i64,
        total: i64,
        data: &[u8],
    ) -> Result<Option<Vec<u8>>, ServiceError> {
        self.state.reassembler.add(id, index, total, data)
    }

    fn retrans_deliver(&mut self, sender: &SocketAddr, id: i64) -> Result<bool, ServiceError> {
        let key = Value::tuple(vec![Value::Host(*sender), Value::Int(id)])
            .map_err(|e| ServiceError::new("ServiceError", e.to_string()))?;
        let now = self.ctx.now();
        let first = self.state.soft.get(RETRANS_SEEN, &key, now).is_none();
        if first {
            // If soft state is full the copy is still evaluated; a duplicate may then run too.
            let _ = self.state.soft.set(
                RETRANS_SEEN,
                &key,
                Value::Unit,
                super::reliable::DEDUP_TTL,
                now,
            );
        }
        self.send_ack(NodeAddr::from(*sender), id)?;
        Ok(first)
    }

    fn retrans_acked(&mut self, id: i64) {
        self.state.reliable.acked(id);
    }

    fn authenticate(&mut self, key: &[u8], sig: &[u8], msg: &[u8]) -> Result<(), ServiceError> {
        let fail = |why: String| ServiceError::new("AuthFailed", format!("authEval: {why}"));
        if self.state.trusted_keys.is_empty() {
            return Err(fail(
                "this node trusts no PLAN keys ([plan] trusted_keys)".into(),
            ));
        }
        let k: [u8; 32] = key
            .try_into()
            .map_err(|_| fail(format!("a key is 32 bytes, not {}", key.len())))?;
        if !self.state.trusted_keys.contains(&k) {
            return Err(fail(format!(
                "key {} is not trusted by this node",
                hex::encode(k)
            )));
        }
        let vk = ed25519_dalek::VerifyingKey::from_bytes(&k)
            .map_err(|e| fail(format!("bad key: {e}")))?;
        let sig = ed25519_dalek::Signature::from_slice(sig)
            .map_err(|e| fail(format!("bad signature: {e}")))?;
        vk.verify_strict(msg, &sig)
            .map_err(|_| fail("the signature does not match the chunk".into()))
    }

    fn call(&mut self, id: u32, name: &str, args: &[Value]) -> Result<Value, ServiceError> {
        if self.routes.is_service(id) {
            let Some(Value::Host(h)) = args.first() else {
                return Err(ServiceError::new(
                    "ServiceError",
                    format!("{name} takes one host"),
                ));
            };
            let hop = self.route_fn_hop(name, NodeAddr::from(*h))?;
            let (a, d) = hop_value(hop);
            return Value::tuple(vec![Value::Host(a), Value::Dev(d)])
                .map_err(|e| ServiceError::new("ServiceError", e.to_string()));
        }
        let Some(svc) = self.ext.get_mut(&id) else {
            return Err(ServiceError::new(
                "UnknownService",
                format!("service `{name}` is not implemented on this node"),
            ));
        };
        let mut env = ServiceEnv {
            ctx: self.ctx,
            state: self.state,
            packet: self.pkt,
        };
        svc.call(&mut env, args)
    }
}

/// Soft-state namespace of the (sender, id) pairs `retransDeliver` has evaluated.
pub(crate) const RETRANS_SEEN: &str = "reliable.seen";

impl NodeServices<'_, '_, '_> {
    /// Sends `|retransAck|(id)` to `sender`.
    fn send_ack(&mut self, sender: NodeAddr, id: i64) -> Result<(), ServiceError> {
        let me = self.ctx.address();
        let chunk = crate::value::Chunk::new(None, "retransAck", vec![Value::Int(id)])
            .map_err(|e| ServiceError::new("ServiceError", e.to_string()))?;
        let spec = PacketSpec {
            src: me,
            eval_dest: sender,
            rb: self.state.own_rb,
            flow: self.pkt.flow,
            session: 0,
            route_fun: DEFAULT_ROUTE.to_string(),
            handler: String::new(),
        };
        let buf = encode_packet(&spec, &encode_chunk(&chunk))
            .map_err(|e| ServiceError::new("ServiceError", e.to_string()))?;
        if sender == me {
            self.local.push_back(buf);
            return Ok(());
        }
        // A lost acknowledgement is repaired by the sender's retransmission.
        let _ = self
            .ctx
            .forward(buf, anode_core::wire::anep::BASIC_HEADER_LEN);
        Ok(())
    }
}

/// `defHandler(msg, host, chunk)`: the default error handler; prints the error at the source.
pub(crate) fn def_handler(
    env: &mut ServiceEnv<'_, '_>,
    args: &[Value],
) -> Result<Value, ServiceError> {
    let (Some(Value::Str(msg)), Some(Value::Host(h))) = (args.first(), args.get(1)) else {
        return Err(ServiceError::new(
            "ServiceError",
            "defHandler: bad arguments",
        ));
    };
    let func = match args.get(2) {
        Some(Value::Chunk(c)) => c.func.to_string(),
        _ => String::new(),
    };
    env.ctx.log(
        "plan",
        format!(
            "error at {h} evaluating |{func}|: {}\n",
            String::from_utf8_lossy(msg)
        ),
    );
    Ok(Value::Unit)
}

/// Shared by reports: a chunk value for handlers.
pub(crate) fn truncated(func: &str) -> Value {
    match crate::value::Chunk::new(None, func, vec![]) {
        Ok(c) => Value::Chunk(Arc::new(c)),
        Err(_) => Value::Unit,
    }
}
