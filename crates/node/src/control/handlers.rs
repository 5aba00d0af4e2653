//! One request in, one reply out. Node work runs on the node's thread through
//! [`super::call`]; port ownership lives in [`Shared`].

use std::sync::atomic::Ordering;

use anode_core::DropReason;
use anode_ctl::{
    ErrorCode, HelloInfo, PROTOCOL_VERSION, Request, RequestFrame, Response, ServerMessage,
    StatsInfo, StatusInfo,
};

use super::modules::Op as ModOp;
use super::state::{ConnId, Shared};
use super::{NodeGone, call, convert};

/// The software name and version reported in hellos and status.
pub(super) const SOFTWARE: &str = concat!("anode ", env!("CARGO_PKG_VERSION"));

/// Work a request leaves for after its reply is queued (e.g. starting a capture's stream).
pub(super) type AfterReply = Box<dyn FnOnce() + Send>;

/// Per-connection state.
pub(super) struct ConnState {
    pub id: ConnId,
    pub hello: bool,
    pub client: String,
    /// Run by the worker right after it queued this request's reply.
    pub after_reply: Option<AfterReply>,
    /// For a remote connection: its peer and what the key of the request being answered may
    /// do (set per request: each is signed on its own).
    pub remote: Option<(std::net::SocketAddr, super::remote::Grant)>,
    /// Close the connection once this reply is written (a throttled remote peer).
    pub close_after_reply: bool,
}

impl std::fmt::Debug for ConnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnState")
            .field("id", &self.id)
            .field("hello", &self.hello)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl ConnState {
    pub fn new(id: ConnId) -> Self {
        ConnState {
            id,
            hello: false,
            client: String::new(),
            after_reply: None,
            remote: None,
            close_after_reply: false,
        }
    }
}

pub(super) type Failure = (ErrorCode, String);

impl From<NodeGone> for (ErrorCode, String) {
    fn from(e: NodeGone) -> Self {
        (ErrorCode::NodeGone, e.to_string())
    }
}

/// Answers one request.
pub(super) fn handle(shared: &Shared, st: &mut ConnState, f: RequestFrame) -> ServerMessage {
    match run(shared, st, f.request) {
        Ok(result) => ServerMessage::Reply { id: f.id, result },
        Err((code, msg)) => ServerMessage::error(Some(f.id), code, msg),
    }
}

/// `send`: a datagram, or a packet of an EE module's Type ID.
fn send(d: &dyn crate::control::Driver, req: Request) -> Result<Response, Failure> {
    let Request::Send {
        dst,
        port,
        payload,
        rb,
        flow,
        ee_type,
        every_hop,
    } = req
    else {
        return Err((ErrorCode::BadRequest, "not a send".into()));
    };
    if rb == Some(0) {
        return Err((ErrorCode::BadRequest, "rb must be at least 1".into()));
    }
    if every_hop && ee_type.is_none() {
        return Err((
            ErrorCode::BadRequest,
            "every_hop needs ee_type: plain datagrams are not evaluated on the way".into(),
        ));
    }
    let r = call(d, move |n, now| match ee_type {
        None => n.send_datagram(now, dst, port, flow, rb, payload.as_bytes()),
        Some(t) => n.send_ee_datagram(
            now,
            (t, every_hop),
            (dst, port),
            (flow, rb),
            payload.as_bytes(),
        ),
    })?;
    r.map(|()| Response::Sent)
        .map_err(|why| (ErrorCode::Dropped, dropped_message(why, dst)))
}

fn run(shared: &Shared, st: &mut ConnState, req: Request) -> Result<Response, Failure> {
    let req = match (st.hello, req) {
        (_, Request::Hello { protocol, client }) => return hello(shared, st, protocol, client),
        (false, _) => {
            return Err((
                ErrorCode::HelloFirst,
                format!(
                    "say hello first: {{\"id\":1,\"op\":\"hello\",\"protocol\":{PROTOCOL_VERSION}}}"
                ),
            ));
        }
        (true, r) => r,
    };
    let d = &*shared.driver;
    let who = super::modules::Caller {
        shared,
        remote: st.remote.as_ref(),
    };
    match req {
        Request::Hello { .. } => Err((ErrorCode::BadRequest, "hello already done".into())),
        Request::Status => status(shared),
        Request::Routes => Ok(Response::Routes {
            routes: call(d, |n, _| convert::routes(n))?,
        }),
        Request::Neighbors => Ok(Response::Neighbors {
            neighbors: call(d, |n, _| convert::neighbors(n))?,
        }),
        Request::Links => Ok(Response::Links {
            links: call(d, |n, _| convert::links(n))?,
        }),
        Request::Stats => Ok(Response::Stats(StatsInfo {
            counters: call(d, |n, _| convert::counters(n.counters()))?,
            driver: d.driver_stats(),
            control: shared.stats(),
            domains: call(d, |n, _| convert::domains(n))?,
            routing: call(d, |n, _| n.routing_stats().into_iter().collect())?,
        })),
        Request::Domains => Ok(Response::Domains {
            ees: call(d, |n, _| convert::domains(n))?,
        }),
        Request::Channels => {
            let (cut_through, channels) = call(d, convert::channels)?;
            Ok(Response::Channels {
                cut_through,
                channels,
            })
        }
        r @ Request::Send { .. } => send(d, r),
        Request::Bind { port } => {
            if shared.bind_port(st.id, port) {
                Ok(Response::Bound { port })
            } else {
                Err((
                    ErrorCode::PortInUse,
                    format!("port {port} is bound by another application; pick another port"),
                ))
            }
        }
        Request::Unbind { port } => {
            if shared.unbind_port(st.id, port) {
                Ok(Response::Unbound { port })
            } else {
                Err((
                    ErrorCode::NotBound,
                    format!("port {port} is not bound by this connection"),
                ))
            }
        }
        Request::Subscribe => {
            shared.set_subscribed(st.id);
            Ok(Response::Subscribed)
        }
        Request::AddRoute { dest, via, metric } => add_route(shared, dest, via, metric),
        Request::SetLink { link, up } => set_link(shared, link, up),
        Request::Capture {
            link,
            count,
            millis,
        } => super::capture::start(shared, st, link, count, millis),
        Request::Inject {
            packet,
            logs,
            count,
            partial,
        } => super::app::inject(shared, st, packet, logs, (count, partial)),
        Request::BindApp { type_id, port } => super::app::bind_app(shared, st, type_id, port),
        Request::CodeList => super::app::code_list(shared),
        Request::CodeShow { hash } => super::app::code_show(shared, &hash),
        Request::CodeState { hash } => super::app::code_state(shared, &hash),
        Request::CodePut { wasm } => super::app::code_put(shared, wasm),
        Request::CodeEvict { hash } => super::app::code_evict(shared, hash),
        Request::ModuleInstall {
            package,
            config,
            start,
        } => super::modules::install(who, &package, &config, start),
        Request::ModuleUpgrade { package, config } => {
            super::modules::upgrade(who, &package, &config)
        }
        Request::ModuleList => super::modules::list(shared),
        Request::ModuleEes => super::ees::list(shared),
        Request::ModuleStage { package } => super::deploy::stage(shared, package),
        Request::ModuleDeployments => super::deploy::deployments(shared),
        Request::ModuleServices {
            interface,
            version,
            category,
        } => super::modules::services(shared, interface, version, category),
        Request::ModuleInfo { name } => super::modules::by_name(who, ModOp::Info, name),
        Request::ModuleStart { name } => super::modules::by_name(who, ModOp::Start, name),
        Request::ModuleStop { name } => super::modules::by_name(who, ModOp::Stop, name),
        Request::ModuleRemove { name } => super::modules::by_name(who, ModOp::Remove, name),
        Request::ModuleQdisc {
            name,
            link,
            rate_bps,
        } => super::modules::qdisc(who, name, link, rate_bps),
        Request::ModuleCall {
            name,
            operation,
            arg,
        } => super::modules::call_op(who, name, operation, arg),
        Request::Upgrade { binary, timeout_s } => {
            tracing::info!(client = %st.client, "upgrade requested over the control socket");
            super::upgrade::upgrade(shared, binary, timeout_s)
        }
        Request::Shutdown => {
            tracing::info!(client = %st.client, "shutdown requested over the control socket");
            shared.shutdown.store(true, Ordering::Release);
            Ok(Response::Done)
        }
    }
}

fn hello(
    shared: &Shared,
    st: &mut ConnState,
    protocol: u32,
    client: String,
) -> Result<Response, Failure> {
    if protocol != PROTOCOL_VERSION {
        return Err((
            ErrorCode::Version,
            format!(
                "this node speaks control protocol {PROTOCOL_VERSION}, the client {protocol}; use matching anode versions"
            ),
        ));
    }
    let node = call(&*shared.driver, |n, _| n.address())?;
    st.hello = true;
    st.client = client;
    tracing::debug!(conn = st.id, client = %st.client, "control client connected");
    Ok(Response::Hello(HelloInfo {
        protocol: PROTOCOL_VERSION,
        node,
        software: SOFTWARE.into(),
    }))
}

fn status(shared: &Shared) -> Result<Response, Failure> {
    let bind = shared.driver.bound_addr();
    let uptime_ms = u64::try_from(shared.started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let s = call(&*shared.driver, move |n, _| {
        let routes = convert::routes(n);
        StatusInfo {
            address: n.address(),
            bind,
            software: SOFTWARE.into(),
            uptime_ms,
            links: convert::links(n),
            neighbors: convert::neighbors(n),
            routes: routes.iter().filter(|r| r.reachable).count(),
            route_changes: n.route_changes(),
            counters: convert::counters(n.counters()),
        }
    })?;
    Ok(Response::Status(s))
}

fn add_route(
    shared: &Shared,
    dest: anode_wire::NodeAddr,
    via: anode_wire::NodeAddr,
    metric: u16,
) -> Result<Response, Failure> {
    let r = call(&*shared.driver, move |n, now| {
        let inf = n.config().routing.infinity;
        if metric == 0 || metric >= inf {
            return Err((
                ErrorCode::BadRequest,
                format!("metric {metric} is outside 1..{inf}"),
            ));
        }
        if dest == n.address() {
            return Err((ErrorCode::BadRequest, "a node always reaches itself".into()));
        }
        if n.link_by_peer(&via).is_none() {
            return Err((
                ErrorCode::NotNeighbor,
                format!(
                    "{via} is not the peer of any link; route via a link peer (see `anode status`)"
                ),
            ));
        }
        n.add_static_route(dest, via, metric, now);
        Ok(())
    })?;
    r.map(|()| {
        tracing::info!(%dest, %via, metric, "static route added over the control socket");
        Response::Done
    })
}

fn set_link(shared: &Shared, link: String, up: bool) -> Result<Response, Failure> {
    let r = call(&*shared.driver, move |n, now| {
        match convert::link_named(n, &link) {
            Some(id) => {
                n.set_link_up(id, up, now);
                Ok(id)
            }
            None => Err(convert::no_such_link(n, &link)),
        }
    })?;
    r.map(|id| {
        tracing::info!(link = id.0, up, "link set over the control socket");
        Response::Done
    })
}

fn dropped_message(why: DropReason, dst: anode_wire::NodeAddr) -> String {
    let hint = match why {
        DropReason::NoRoute => format!("no route to {dst}; check `anode routes`"),
        DropReason::TooBig => "the datagram is larger than the link MTU; send less".into(),
        DropReason::LinkDown => "the next hop's link is down; see `anode status`".into(),
        DropReason::TxQueueFull => "the transmit queue is full; retry later".into(),
        DropReason::RbExhausted => "the resource bound is exhausted; raise --rb".into(),
        other => format!("see `anode stats` ({other})"),
    };
    format!("the node dropped the datagram: {why}: {hint}")
}
