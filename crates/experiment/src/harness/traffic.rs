//! Offered-load probes on a namespace line: `anode-blast` in the first host sends ANEP
//! datagrams (or capsules) of one size at one rate for a while, `anode-sink` in the last
//! host counts what arrives; and the maximum loss-free forwarding rate found by bisection
//! over such probes (RFC 2544's throughput, as NetServ measured it).
//!
//! Contract: a probe is bounded in time (its seconds plus a few) and leaves no process
//! behind; the sink is ready before the blaster starts.

use std::time::Duration;

use serde_json::Value;

use super::netns::Line;
use super::procs::{self, Child};
use crate::{Ctx, ExpError};

/// What one probe measured.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Probe {
    /// The rate asked for (0: full speed).
    pub rate: f64,
    /// Packets per second the blaster achieved.
    pub offered_pps: f64,
    /// Packets sent.
    pub sent: u64,
    /// Packets the sink counted.
    pub rcvd: u64,
    /// Loss in percent.
    pub loss_pct: f64,
    /// Packets per second at the sink.
    pub delivered_pps: f64,
}

/// Where a probe's packets go.
#[derive(Debug, Clone)]
pub struct Path<'a> {
    /// The line.
    pub line: &'a Line,
    /// The UDP destination the blaster sends to (the forwarder, or the sink itself).
    pub dst: String,
    /// The transit destination in the ANEP header (the sink's address).
    pub to: String,
    /// Send capsules naming `protocols::FORWARD` instead of datagrams.
    pub capsule: bool,
}

fn json_line(text: &str) -> Option<Value> {
    text.lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
}

/// One probe of `secs` seconds at `rate` packets/s (0: full speed) and `size` bytes.
pub fn probe(
    ctx: &Ctx<'_>,
    p: &Path<'_>,
    size: usize,
    rate: f64,
    secs: f64,
) -> Result<Probe, ExpError> {
    let (blast, sink) = (
        procs::tool(ctx, "anode-blast")?,
        procs::tool(ctx, "anode-sink")?,
    );
    let last = p.line.len() - 1;
    let bind = p.to.clone();
    let mut s: Child = procs::spawn(
        ctx,
        Some(p.line.ns(last)),
        "sink",
        &sink,
        &[
            "--bind",
            &bind,
            "--max-secs",
            &format!("{}", secs + 4.0),
            "--idle",
            "0.5",
            "--min-secs",
            &format!("{}", secs + 0.3),
            "--json",
        ],
    )?;
    let ready = procs::wait_until(Duration::from_secs(5), || s.log_tail().contains("ready"));
    if !ready {
        return Err(ExpError::Command(format!(
            "anode-sink did not start: {}",
            s.log_tail()
        )));
    }
    let src = format!("{}:{}", p.line.addr(0), super::netns::PORT);
    let size_s = size.to_string();
    let rate_s = format!("{rate}");
    let secs_s = format!("{secs}");
    let b = blast.to_string_lossy().into_owned();
    let mut args = vec![
        "netns",
        "exec",
        p.line.ns(0),
        &b,
        "--dst",
        &p.dst,
        "--bind",
        &src,
        "--to",
        &p.to,
        "--size",
        &size_s,
        "--secs",
        &secs_s,
        "--rate",
        &rate_s,
        "--batch",
        "32",
        "--json",
    ];
    if p.capsule {
        args.push("--capsule");
    }
    let out = anode_lab::sys::run(
        "ip",
        &args,
        None,
        "anode-blast",
        Duration::from_secs_f64(secs + 10.0),
    )?;
    procs::wait_until(Duration::from_secs_f64(secs + 6.0), || !s.running());
    let b = json_line(&out).ok_or_else(|| ExpError::Measure {
        what: "anode-blast".into(),
        why: format!("no report: {out}"),
    })?;
    let k = json_line(&s.stop(Duration::from_secs(1))).ok_or_else(|| ExpError::Measure {
        what: "anode-sink".into(),
        why: "no report".into(),
    })?;
    let sent = b["sent"].as_u64().unwrap_or(0);
    let bsecs = b["secs"].as_f64().unwrap_or(0.0);
    let rcvd = k["rcvd"].as_u64().unwrap_or(0);
    Ok(Probe {
        rate,
        offered_pps: if bsecs > 0.0 {
            sent as f64 / bsecs
        } else {
            0.0
        },
        sent,
        rcvd,
        loss_pct: if sent > 0 {
            100.0 * sent.saturating_sub(rcvd) as f64 / sent as f64
        } else {
            100.0
        },
        delivered_pps: k["pps"].as_f64().unwrap_or(0.0),
    })
}

/// Loss below which a rate counts as loss-free (RFC 2544 asks for zero; 0.1 % allows for the
/// odd packet a veth drops while a namespace is busy).
pub const LOSS_FREE_PCT: f64 = 0.1;

/// The maximum loss-free forwarding rate: a full-speed probe, then `steps` bisection probes
/// between 0 and what full speed offered. Returns the rate and every probe; a single probe
/// means full speed was loss-free: the sender, not the forwarder, was the limit.
pub fn mlffr(
    ctx: &Ctx<'_>,
    p: &Path<'_>,
    size: usize,
    secs: f64,
    steps: u32,
) -> Result<(f64, Vec<Probe>), ExpError> {
    let full = probe(ctx, p, size, 0.0, secs)?;
    let mut probes = vec![full];
    if full.loss_pct < LOSS_FREE_PCT {
        return Ok((full.offered_pps, probes));
    }
    let (mut lo, mut hi, mut best) = (0.0_f64, full.offered_pps, 0.0_f64);
    for _ in 0..steps {
        let mid = (lo + hi) / 2.0;
        let r = probe(ctx, p, size, mid.round(), secs)?;
        ctx.say(&format!(
            "  {size} B at {:.0} pps: {:.0} offered, {:.3} % loss",
            mid, r.offered_pps, r.loss_pct
        ));
        probes.push(r);
        if r.loss_pct < LOSS_FREE_PCT {
            best = best.max(r.offered_pps);
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((best, probes))
}
