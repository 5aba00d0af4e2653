//! # The PLAN execution environment on an anode node
//!
//! [`PlanEe`] implements `anode_core::ExecutionEnvironment` for ANEP Type ID `TYPE_PLAN`.
//! A PLAN packet is ANEP + transit header (see [`wire`]) + the PLAN body of
//! [`crate::packet`].
//!
//! ## What happens where
//! * **Intermediate node, `defaultRoute`**: the transit header has no EE flag, so the core's
//!   fast path forwards it; this EE never runs.
//! * **Intermediate node, another routing function** (`Dispatch::Route`): the EE reads the
//!   PLAN header only ([`crate::packet::peek_header`]; the chunk stays marshalled), resolves
//!   the routing function among the registered ones ([`route`]) and forwards with
//!   `NodeContext::forward_via`. A packet that arrives with resource bound 0, names an
//!   unknown routing function or has no route is reported to its handler (below) and dropped.
//! * **Source** (`Dispatch::Local`, injected by an application): routed as above (the default
//!   route with `NodeContext::forward`).
//! * **Evaluation destination** (`Dispatch::Destination`): the chunk is unmarshalled and
//!   evaluated with the [`Services`](crate::Services) of [`services`], under the configured
//!   step budget ([`PlanEeConfig::limits`]). Children leave as they are sent.
//!
//! ## Failures
//! Every failure is counted in [`PlanStats::drops`] and in the node's counters as
//! `plan/<reason>`, and logged at the node as an `Event::Log` from EE `plan:error`. When the
//! packet names a handler, the PLAN docs' rule applies: the handler function of the packet's
//! code is invoked back on the source as `handler(message, host_where_it_failed, |f|())`
//! (signature `string * host * 'a chunk -> unit`), in a packet with resource bound
//! [`PlanEeConfig::error_rb`] and no handler of its own (errors of error reports are never
//! reported), at most [`PlanEeConfig::max_reports_per_sec`] per second per node. The built-in
//! service `defHandler` prints the error at the source. Malformed headers (no handler known)
//! are only dropped and counted. Reasons: `malformed_transit`, `malformed_body`,
//! `malformed_chunk`, `rb_exhausted`, `unknown_route_fun`, `no_route`, `uncaught_exception`,
//! `budget_exhausted`, `too_deep`, `compile_error`, `missing_code`, `unknown_entry`,
//! `bad_arguments`, `too_large`, `internal`, `local_overflow`, `aborted`.
//!
//! A packet that names a handler carries `FLAG_EE_ROUTE` even with `defaultRoute`, so every
//! node on its way enters the EE (header only) and a resource bound that runs out in transit
//! is reported to the handler, as the guide (§4.2) requires; packets without a handler stay
//! on the core's fast path, where running out is only counted (`rb_exhausted`).
//!
//! `abort(c)` ends an evaluation like an uncaught exception (`Abort`, counted as `aborted`)
//! and sends `c` back to the source, where it is evaluated as a handler would be.

mod handover;
pub mod packages;
pub mod reliable;
mod report;
pub mod route;
pub mod scout;
pub mod services;
pub mod sim;
mod soft;
mod stats;
pub mod wire;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use anode_core::wire::NodeAddr;
use anode_core::wire::anep::{AnepPacket, BASIC_HEADER_LEN, TYPE_PLAN};
use anode_core::wire::transit::Transit;
use anode_core::{Dispatch, DropReason, EePacket, ExecutionEnvironment, LinkId, NodeContext};

pub use report::{EvalReport, PlanDelivery, ReportError, decode_delivery};
pub use route::{FlowRoute, FlowTable, RouteFn, RouteQuery, RouteRegistry};
pub use services::{NodeService, NodeState, PacketInfo, ServiceEnv};
pub use soft::SoftState;
pub use stats::PlanStats;
pub use wire::{
    BuildError, DEFAULT_ROUTE, PacketSpec, build_chunk, build_packet, chunk_signing_bytes,
    compact_source, encode_packet, encode_packet_chunk,
};

use crate::packet::peek_header;
use crate::services::RegistryError;
use crate::value::Chunk;
use crate::{EvalContext, EvalError, Interpreter, Limits, Value, marshal};
use services::{NodeServices, ServiceTable, def_handler, truncated};

/// Name of the built-in flow-table routing function.
pub const FLOW_ROUTE: &str = "flowRoute";

/// Configuration of a [`PlanEe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanEeConfig {
    /// Step budget and depth limit of one evaluation.
    pub limits: Limits,
    /// Resource bound of error reports sent to handlers.
    pub error_rb: u16,
    /// Most error reports sent per second.
    pub max_reports_per_sec: u32,
    /// Lifetime of flow-table entries.
    pub flow_ttl: Duration,
    /// Most flow-table entries.
    pub max_flows: usize,
    /// Lifetime of scouting marks and other soft state.
    pub mark_ttl: Duration,
    /// Most soft-state entries.
    pub max_soft: usize,
    /// Most packets for this node itself evaluated after one arriving packet.
    pub max_local: usize,
    /// Packets per second a link sends that count as one packet of device load in
    /// `queueLength` (route scouting's metric, [`scout`]).
    pub load_unit_pps: u64,
}

impl Default for PlanEeConfig {
    fn default() -> Self {
        PlanEeConfig {
            limits: Limits::default(),
            error_rb: 32,
            max_reports_per_sec: 100,
            flow_ttl: Duration::from_secs(60),
            max_flows: 4096,
            mark_ttl: Duration::from_secs(5),
            max_soft: 4096,
            max_local: 4096,
            load_unit_pps: 100,
        }
    }
}

/// The PLAN execution environment. See the module docs.
pub struct PlanEe {
    interp: Interpreter,
    cfg: PlanEeConfig,
    routes: RouteRegistry,
    ext: ServiceTable,
    state: NodeState,
    stats: PlanStats,
    local: VecDeque<Vec<u8>>,
    reports: (Option<Instant>, u32),
    results: Option<Vec<EvalResult>>,
}

/// The outcome of one evaluation at this node, kept when [`PlanEe::record_results`] is on
/// (tools that run a program locally print the entry's value).
#[derive(Debug, Clone, PartialEq)]
pub struct EvalResult {
    /// The chunk's function.
    pub func: String,
    /// Its value, or the uncaught exception.
    pub result: Result<Value, crate::Raised>,
}

impl std::fmt::Debug for PlanEe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanEe")
            .field("cfg", &self.cfg)
            .field("routes", &self.routes)
            .field("stats", &self.stats)
            .finish()
    }
}

/// Where an error report goes.
struct Origin {
    source: NodeAddr,
    flow: u64,
    session: u32,
    handler: String,
}

impl PlanEe {
    /// A PLAN EE with the core services, `flowRoute`, `defHandler` and the service packages
    /// anode provides ([`packages`]).
    pub fn new(cfg: PlanEeConfig) -> Self {
        let mut ee = PlanEe {
            interp: Interpreter::with_core(),
            cfg,
            routes: RouteRegistry::default(),
            ext: HashMap::new(),
            state: NodeState::new(&cfg),
            stats: PlanStats::default(),
            local: VecDeque::new(),
            reports: (None, 0),
            results: None,
        };
        // Both names are fresh in a core registry; an error here would only mean the core
        // registry already defines them, in which case the core's definition stands.
        let _ = ee.register_route(FLOW_ROUTE, Box::new(FlowRoute));
        let _ = ee.register_service(
            "defHandler",
            "(string, host, 'a chunk) -> unit",
            Box::new(def_handler),
        );
        packages::install(&mut ee);
        ee
    }

    /// A PLAN EE with the default configuration.
    pub fn with_defaults() -> Self {
        Self::new(PlanEeConfig::default())
    }

    /// Records that routine `name` of PLAN package `package` is not provided on this node, and
    /// why: programs naming it are refused with that reason.
    pub fn refuse(&mut self, name: &str, package: &str, reason: &str) {
        self.interp.registry_mut().refuse(name, package, reason);
    }

    /// The secret `generateKey` derives resident-data keys from; nodes set it from the
    /// operating system's randomness (the EE has none of its own).
    pub fn set_key_seed(&mut self, seed: [u8; 32]) {
        self.state.key_seed = seed;
    }

    /// The ed25519 public keys whose signatures `authEval` accepts (`[plan] trusted_keys`).
    /// Without any, `authEval` raises `AuthFailed`.
    pub fn set_trusted_keys(&mut self, keys: Vec<[u8; 32]>) {
        self.state.trusted_keys = keys;
    }

    /// Keeps the outcome of every evaluation from now on ([`PlanEe::take_results`]).
    pub fn record_results(&mut self) {
        self.results.get_or_insert_with(Vec::new);
    }

    /// The outcomes recorded since the last call.
    pub fn take_results(&mut self) -> Vec<EvalResult> {
        self.results
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The interpreter (registry and program cache).
    pub fn interp(&self) -> &Interpreter {
        &self.interp
    }

    /// The configuration.
    pub fn config(&self) -> &PlanEeConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &PlanStats {
        &self.stats
    }

    /// Node-resident state (flow table, soft state, device loads, names).
    pub fn state(&self) -> &NodeState {
        &self.state
    }

    /// Mutable node-resident state, e.g. to add names or report device loads.
    pub fn state_mut(&mut self) -> &mut NodeState {
        &mut self.state
    }

    /// The registered routing functions.
    pub fn routes(&self) -> &RouteRegistry {
        &self.routes
    }

    /// Registers an extension service `name : signature` implemented by `svc`.
    pub fn register_service(
        &mut self,
        name: &str,
        signature: &str,
        svc: Box<dyn NodeService>,
    ) -> Result<u32, RegistryError> {
        let id = self.interp.registry_mut().register(name, signature)?;
        self.ext.insert(id, svc);
        Ok(id)
    }

    /// Registers a routing function under `name`: packets naming it are routed by it at
    /// intermediate nodes, and PLAN code may call it as a service `host -> host * dev`.
    pub fn register_route(&mut self, name: &str, f: Box<dyn RouteFn>) -> Result<(), RegistryError> {
        let id = self
            .interp
            .registry_mut()
            .register(name, "host -> host * dev")?;
        self.routes.insert(name, id, f);
        Ok(())
    }

    /// Registers the extension service `name : signature`, or replaces its implementation if
    /// `name` was registered before as an extension with the same type (a module providing
    /// it upgraded or started again). A name taken by a built-in, or registered with another
    /// type, is refused.
    pub fn set_service(
        &mut self,
        name: &str,
        signature: &str,
        svc: Box<dyn NodeService>,
    ) -> Result<u32, RegistryError> {
        let existing = self.interp.registry().lookup(name).map(|e| {
            let same = crate::check::scheme_of_type_text(signature)
                .is_ok_and(|s| s.to_string() == e.scheme.to_string());
            (e.target.clone(), same)
        });
        match existing {
            Some((crate::ir::SvcTarget::Extension(id), true)) => {
                self.ext.insert(id, svc);
                Ok(id)
            }
            Some(_) => Err(RegistryError::Duplicate(name.to_string())),
            None => self.register_service(name, signature, svc),
        }
    }

    /// Removes the implementation of extension service `name`: PLAN code calling it gets
    /// `UnknownService` (its name and type stay known, so programs naming it still check).
    /// Whether it had one.
    pub fn remove_service(&mut self, name: &str) -> bool {
        match self
            .interp
            .registry()
            .lookup(name)
            .map(|e| e.target.clone())
        {
            Some(crate::ir::SvcTarget::Extension(id)) => self.ext.remove(&id).is_some(),
            _ => false,
        }
    }

    /// Registers the routing function `name`, or replaces it if it was registered before
    /// (a routing-function module upgraded or started again).
    pub fn set_route(&mut self, name: &str, f: Box<dyn RouteFn>) -> Result<(), RegistryError> {
        match self.routes.service_id(name) {
            Some(id) => {
                self.routes.insert(name, id, f);
                Ok(())
            }
            None => self.register_route(name, f),
        }
    }

    /// Removes the routing function `name` (a routing-function module stopped or removed):
    /// packets naming it are dropped as `unknown_route_fun` again and PLAN code calling it
    /// gets `NoRoute`. Whether it was registered.
    pub fn remove_route(&mut self, name: &str) -> bool {
        self.routes.remove(name)
    }

    fn drop(&mut self, ctx: &mut NodeContext<'_>, reason: DropReason) {
        *self.stats.drops.entry(reason).or_default() += 1;
        ctx.count_drop("plan", reason);
    }

    fn report_allowed(&mut self, now: Instant) -> bool {
        match self.reports.0 {
            Some(start) if now.saturating_duration_since(start) < Duration::from_secs(1) => {}
            _ => self.reports = (Some(now), 0),
        }
        if self.reports.1 >= self.cfg.max_reports_per_sec {
            return false;
        }
        self.reports.1 += 1;
        true
    }

    /// Logs a failure and, if the packet names a handler, sends the report to the source.
    fn report(
        &mut self,
        ctx: &mut NodeContext<'_>,
        origin: &Origin,
        chunk: Option<&Chunk>,
        text: String,
    ) {
        let me = ctx.address();
        let func = chunk.map_or("?", |c| &*c.func);
        ctx.log("plan:error", format!("|{func}| at {me}: {text}"));
        if origin.handler.is_empty() {
            return;
        }
        let code = if origin.handler == "defHandler" {
            None
        } else {
            match chunk.and_then(|c| c.code.clone()) {
                Some(c) => Some(c),
                None => return self.drop(ctx, DropReason::ReportImpossible),
            }
        };
        let args = vec![
            Value::str(&text),
            Value::Host(me.socket_addr()),
            truncated(func),
        ];
        let Ok(c) = Chunk::new(code, origin.handler.as_str(), args) else {
            return self.drop(ctx, DropReason::ReportImpossible);
        };
        self.send_home(ctx, origin, &c);
    }

    /// Sends `c` to the packet's source for evaluation there (error reports and `abort`), in a
    /// packet with resource bound [`PlanEeConfig::error_rb`] and no handler; rate-limited.
    fn send_home(&mut self, ctx: &mut NodeContext<'_>, origin: &Origin, c: &Chunk) {
        let me = ctx.address();
        if !self.report_allowed(ctx.now()) {
            return self.drop(ctx, DropReason::ReportSuppressed);
        }
        let spec = PacketSpec {
            src: origin.source,
            eval_dest: origin.source,
            rb: self.cfg.error_rb,
            flow: origin.flow,
            session: origin.session,
            route_fun: DEFAULT_ROUTE.to_string(),
            handler: String::new(),
        };
        let Ok(buf) = encode_packet_chunk(&spec, c) else {
            return self.drop(ctx, DropReason::ReportImpossible);
        };
        self.stats.error_reports += 1;
        if origin.source == me {
            self.local.push_back(buf);
        } else {
            // A report is a new packet, not the failed one's outcome (the ledger).
            let _ = ctx.originate(|ctx| ctx.forward(buf, BASIC_HEADER_LEN));
        }
    }

    /// Header-only routing (intermediate nodes with a routing function, and local injection).
    fn route(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        let t = pkt.transit();
        let (dst, flow, rb, src) = (t.dst(), t.flow(), t.rb(), t.src());
        let body = pkt.ee_bytes();
        let Ok((hdr, chunk_bytes)) = peek_header(body) else {
            return self.drop(ctx, DropReason::MalformedBody);
        };
        if hdr.route_fun == DEFAULT_ROUTE && (rb > 0 || hdr.handler.is_empty()) {
            // Local injection, or a packet with a handler on its way: the default route,
            // counted by the core if it fails.
            let _ = ctx.forward(pkt.buf, pkt.anep_len);
            return;
        }
        self.stats.routed += 1;
        let failure = if rb == 0 {
            Some((
                DropReason::RbExhausted,
                format!("RBExhausted: no resource bound left on the way to {dst}"),
            ))
        } else {
            match self.routes.get_mut(hdr.route_fun) {
                None => Some((
                    DropReason::UnknownRouteFun,
                    format!(
                        "NoRoute: routing function `{}` is not installed here",
                        hdr.route_fun
                    ),
                )),
                Some(f) => {
                    let q = RouteQuery {
                        ctx: &*ctx,
                        flows: &self.state.flows,
                        dst,
                        flow,
                    };
                    match f.next_hop(&q) {
                        Some(hop) => {
                            let _ = ctx.forward_via(hop, pkt.buf, pkt.anep_len);
                            return;
                        }
                        None => Some((
                            DropReason::NoRoute,
                            format!("NoRoute: {}: no route to {dst}", hdr.route_fun),
                        )),
                    }
                }
            }
        };
        if let Some((reason, text)) = failure {
            let origin = Origin {
                source: src,
                flow,
                session: hdr.session,
                handler: hdr.handler.to_string(),
            };
            // The chunk is decoded only on this error path, for the handler's code.
            let chunk = if origin.handler.is_empty() {
                None
            } else {
                marshal::decode_chunk(chunk_bytes).ok()
            };
            self.report(ctx, &origin, chunk.as_ref(), text);
            self.drop(ctx, reason);
        }
    }

    /// Evaluation at the evaluation destination.
    fn evaluate(
        &mut self,
        ctx: &mut NodeContext<'_>,
        buf: &[u8],
        anep_len: usize,
        link: Option<LinkId>,
    ) {
        let Some(Ok(t)) = buf.get(anep_len..).map(Transit::new_checked) else {
            return self.drop(ctx, DropReason::MalformedTransit);
        };
        let (src, flow, rb) = (t.src(), t.flow(), t.rb());
        let Ok((hdr, chunk_bytes)) = peek_header(t.rest()) else {
            return self.drop(ctx, DropReason::MalformedBody);
        };
        let origin = Origin {
            source: src,
            flow,
            session: hdr.session,
            handler: hdr.handler.to_string(),
        };
        let chunk = match marshal::decode_chunk(chunk_bytes) {
            Ok(c) => c,
            Err(e) => {
                self.report(ctx, &origin, None, format!("BadChunk: {e}"));
                return self.drop(ctx, DropReason::MalformedChunk);
            }
        };
        self.stats.evaluations += 1;
        let info = PacketInfo {
            source: src,
            flow,
            session: hdr.session,
            handler: origin.handler.clone(),
            rb,
            src_dev: link.map_or(0, |l| l.0),
        };
        let ectx = EvalContext {
            source: src.socket_addr(),
            src_dev: info.src_dev,
            implicit_port: hdr.session,
            rb: u32::from(rb),
        };
        let result = {
            let mut svc = NodeServices {
                ctx: &mut *ctx,
                routes: &mut self.routes,
                ext: &mut self.ext,
                state: &mut self.state,
                pkt: &info,
                local: &mut self.local,
                stats: &mut self.stats,
            };
            self.interp
                .eval_chunk(&chunk, &mut svc, ectx, self.cfg.limits)
        };
        match result {
            Ok(ev) => {
                self.stats.steps += ev.steps;
                if let Some(record) = &mut self.results {
                    record.push(EvalResult {
                        func: chunk.func.to_string(),
                        result: ev.result.clone(),
                    });
                }
                match (ev.result, ev.abort) {
                    (Ok(_), _) => self.stats.completed += 1,
                    (Err(raised), Some(home)) => {
                        ctx.log(
                            "plan:error",
                            format!("|{}| at {}: {raised}", chunk.func, ctx.address()),
                        );
                        self.send_home(ctx, &origin, &home);
                        self.drop(ctx, DropReason::Aborted);
                    }
                    (Err(raised), None) => {
                        self.report(ctx, &origin, Some(&chunk), raised.to_string());
                        self.drop(ctx, DropReason::UncaughtException);
                    }
                }
            }
            Err(e) => {
                let reason = eval_error_reason(&e);
                self.report(ctx, &origin, Some(&chunk), format!("{reason}: {e}"));
                self.drop(ctx, reason);
            }
        }
    }

    /// Sends again the `RetransOnRemote` packets whose acknowledgement is overdue; gives up on
    /// those out of retransmissions ([`reliable`]).
    fn retransmit(&mut self, ctx: &mut NodeContext<'_>) {
        let (again, gave_up) = self.state.reliable.due(ctx.now());
        let me = ctx.address();
        for p in again {
            self.stats.retransmissions += 1;
            if p.dest == me {
                self.local.push_back(p.buf);
                continue;
            }
            let hop = if p.route_fun == DEFAULT_ROUTE {
                None
            } else {
                let q = RouteQuery {
                    ctx: &*ctx,
                    flows: &self.state.flows,
                    dst: p.dest,
                    flow: 0,
                };
                self.routes
                    .get_mut(&p.route_fun)
                    .and_then(|f| f.next_hop(&q))
            };
            let anep_len = BASIC_HEADER_LEN;
            let _ = match hop {
                Some(h) => ctx.forward_via(h, p.buf, anep_len),
                None => ctx.forward(p.buf, anep_len),
            };
        }
        for p in gave_up {
            ctx.log(
                "plan:error",
                format!(
                    "RetransOnRemote to {}: no acknowledgement after {} transmissions",
                    p.dest, p.sent
                ),
            );
            self.drop(ctx, DropReason::RetransUnacked);
        }
    }

    /// Evaluates the packets this node sent to itself, bounded.
    fn drain_local(&mut self, ctx: &mut NodeContext<'_>) {
        let mut n = 0usize;
        while let Some(buf) = self.local.pop_front() {
            n += 1;
            if n > self.cfg.max_local {
                let left = self.local.len() + 1;
                self.local.clear();
                for _ in 0..left {
                    self.drop(ctx, DropReason::LocalOverflow);
                }
                return;
            }
            self.stats.packets += 1;
            let anep_len = match AnepPacket::new_checked(&buf[..]) {
                Ok(p) if p.type_id() == TYPE_PLAN => p.header_len(),
                _ => {
                    self.drop(ctx, DropReason::MalformedTransit);
                    continue;
                }
            };
            self.evaluate(ctx, &buf, anep_len, None);
        }
    }
}

/// The counter name of a fatal evaluation error.
pub fn eval_error_reason(e: &EvalError) -> DropReason {
    match e {
        EvalError::BudgetExhausted { .. } => DropReason::BudgetExhausted,
        EvalError::TooDeep { .. } => DropReason::TooDeep,
        EvalError::Compile(_) => DropReason::CompileError,
        EvalError::MissingCode(_) => DropReason::MissingCode,
        EvalError::UnknownEntry(_) => DropReason::UnknownEntry,
        EvalError::BadArguments { .. } => DropReason::BadArguments,
        EvalError::TooLarge(_) => DropReason::TooLarge,
        EvalError::Internal(_) => DropReason::Internal,
    }
}

impl ExecutionEnvironment for PlanEe {
    fn type_id(&self) -> u16 {
        TYPE_PLAN
    }

    fn name(&self) -> &str {
        "plan"
    }

    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        self.stats.packets += 1;
        match pkt.why {
            Dispatch::Destination => self.evaluate(ctx, &pkt.buf, pkt.anep_len, pkt.link),
            Dispatch::Route | Dispatch::EveryHop | Dispatch::Local => self.route(ctx, pkt),
        }
        self.drain_local(ctx);
    }

    fn handle_timeout(&mut self, ctx: &mut NodeContext<'_>) {
        self.retransmit(ctx);
        self.drain_local(ctx);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.state.reliable.next_deadline()
    }

    fn hand_over(&mut self, now: Instant, out: &mut anode_core::handover::EeHandover) {
        out.state = self.export(now);
    }

    fn take_over(
        &mut self,
        ctx: &mut NodeContext<'_>,
        state: &serde_json::Value,
    ) -> Result<(), String> {
        self.import(ctx, state)
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
