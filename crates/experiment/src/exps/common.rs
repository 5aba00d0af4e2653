//! Pieces several experiments share: the namespace line with anode nodes at chosen hosts,
//! capsule pings through it, and the size arithmetic of anode's ping capsule.

use std::time::Duration;

use crate::harness::netns::Line;
use crate::harness::procs::{self, Node};
use crate::{Ctx, ExpError, stats};

pub use crate::harness::netns::PORT;

/// IP (20) + UDP (8) + ANEP (8) + transit (72) + capsule header (56) + ping header (20):
/// the bytes of an `anode ping` capsule on the wire (IPv4) before its extra payload.
pub const PING_OVERHEAD: usize = 184;

/// What the routers of a line do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routers {
    /// The kernel forwards (ip_forward = 1); the end nodes are each other's neighbors.
    Kernel,
    /// An anode node runs in every router; each node's neighbors are the adjacent hosts.
    Anode,
}

/// A line of namespaces with an anode node at both ends (and in the routers with
/// [`Routers::Anode`]). Field order matters: the nodes stop before the namespaces go.
#[derive(Debug)]
pub struct NodeLine {
    /// The nodes, source first.
    pub nodes: Vec<Node>,
    /// The namespaces (kept until the nodes are gone).
    line: Line,
}

impl NodeLine {
    /// Builds the line (`routers` routers) and starts the nodes; `extra(i)` is appended to
    /// host i's node config. Waits until the source's capsule ping reaches the destination.
    pub fn up(
        ctx: &Ctx<'_>,
        tag: &str,
        routers: usize,
        mode: Routers,
        extra: &dyn Fn(usize) -> String,
    ) -> Result<NodeLine, ExpError> {
        let nl = NodeLine::cold(ctx, tag, routers, mode, extra)?;
        nl.src()
            .await_ping(ctx, &nl.dst().addr, Duration::from_secs(20))?;
        Ok(nl)
    }

    /// [`NodeLine::up`] without the warm-up ping: waits only until the source and the
    /// destination have routes to each other, so no node has the ping code yet.
    pub fn cold(
        ctx: &Ctx<'_>,
        tag: &str,
        routers: usize,
        mode: Routers,
        extra: &dyn Fn(usize) -> String,
    ) -> Result<NodeLine, ExpError> {
        let line = Line::up(tag, routers)?;
        line.forwarding(mode == Routers::Kernel)?;
        let n = line.len();
        let addr = |i: usize| format!("{}:{PORT}", line.addr(i));
        let mut nodes = Vec::new();
        for i in 0..n {
            let is_end = i == 0 || i + 1 == n;
            if !is_end && mode == Routers::Kernel {
                continue;
            }
            let peers: Vec<String> = match mode {
                Routers::Kernel => vec![addr(if i == 0 { n - 1 } else { 0 })],
                Routers::Anode => [i.checked_sub(1), (i + 1 < n).then_some(i + 1)]
                    .into_iter()
                    .flatten()
                    .map(addr)
                    .collect(),
            };
            let peers: Vec<&str> = peers.iter().map(String::as_str).collect();
            let name = format!("{tag}{i}");
            let cfg = procs::node_config(ctx, &name, &addr(i), &peers, &extra(i));
            nodes.push(procs::start_node(
                ctx,
                Some(line.ns(i)),
                &name,
                &addr(i),
                &cfg,
            )?);
        }
        let nl = NodeLine { nodes, line };
        let (src, dst) = (nl.src(), nl.dst());
        let routed = procs::wait_until(Duration::from_secs(20), || {
            src.has_route(ctx, &dst.addr) && dst.has_route(ctx, &src.addr)
        });
        if !routed {
            return Err(ExpError::Measure {
                what: format!("route {} -> {}", src.addr, dst.addr),
                why: format!("none within 20 s; node log:\n{}", src.child.log_tail()),
            });
        }
        Ok(nl)
    }

    /// The namespaces.
    pub fn line(&self) -> &Line {
        &self.line
    }

    /// The source's node.
    pub fn src(&self) -> &Node {
        &self.nodes[0]
    }

    /// The destination's node.
    pub fn dst(&self) -> &Node {
        &self.nodes[self.nodes.len() - 1]
    }
}

/// One run of `anode ping --json` from `from` to `dest`: `count` capsules of `size` wire
/// bytes, one every `interval` seconds, each waited for at most `timeout` seconds, the whole
/// command at most `limit`. Returns the summary object and the round trips (ms) of the
/// capsules that came back, in order.
pub fn ping_summary(
    ctx: &Ctx<'_>,
    from: &Node,
    dest: &str,
    (size, count, interval, timeout): (usize, u32, f64, f64),
    limit: Duration,
) -> Result<(serde_json::Value, Vec<f64>), ExpError> {
    let extra = size.saturating_sub(PING_OVERHEAD).to_string();
    let (c, i, t) = (count.to_string(), interval.to_string(), timeout.to_string());
    let out = from.json(
        ctx,
        &[
            "ping",
            dest,
            "-c",
            &c,
            "-i",
            &i,
            "-s",
            &extra,
            "--timeout",
            &t,
        ],
        limit,
    )?;
    let sum = out.last().cloned().ok_or_else(|| ExpError::Measure {
        what: format!("ping {dest}"),
        why: "no summary".into(),
    })?;
    let rtts = sum["rtt_ms"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
        .unwrap_or_default();
    Ok((sum, rtts))
}

/// Round-trip times (us) of `count` capsule pings of `size` wire bytes from `from` to
/// `dest`, one every `interval` seconds; the lost ones left out (an error if all were lost).
pub fn ping_rtts(
    ctx: &Ctx<'_>,
    from: &Node,
    dest: &str,
    size: usize,
    count: u32,
    interval: f64,
) -> Result<Vec<f64>, ExpError> {
    let limit = Duration::from_secs_f64(10.0 + f64::from(count) * (interval + 0.01));
    let (_, ms) = ping_summary(ctx, from, dest, (size, count, interval, 1.0), limit)?;
    let rtts: Vec<f64> = ms.iter().map(|ms| ms * 1000.0).collect();
    if rtts.is_empty() {
        return Err(ExpError::Measure {
            what: format!("ping {dest} at {size} B"),
            why: "every ping was lost".into(),
        });
    }
    Ok(rtts)
}

/// The median round trip (us) of [`ping_rtts`].
pub fn ping_median(
    ctx: &Ctx<'_>,
    from: &Node,
    dest: &str,
    size: usize,
    count: u32,
) -> Result<f64, ExpError> {
    let r = ping_rtts(ctx, from, dest, size, count, 0.002)?;
    stats::median(&r).ok_or_else(|| ExpError::Measure {
        what: format!("ping {dest}"),
        why: "no round trip".into(),
    })
}
