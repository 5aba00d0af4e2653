//! The built-in step actions.
//!
//! | action         | keys |
//! |----------------|------|
//! | `send`         | `from`, `to` (node or `"*"`), `port` (7), `payload` (text) or `size` (bytes, default 64), `count` (1), `interval_ms` (10), `rb` (node default) |
//! | `fail-link`    | `a`, `b`: the link's ends. Traffic in both directions is dropped; the nodes find out from missed hellos. |
//! | `restore-link` | `a`, `b` |
//! | `expect`       | `check` = `reachable` / `unreachable` (`from`, `to`, each a node or `"*"`), `route` (`from`, `to`, `via`), `delivered` (`node`, optional `port`, `count` or `at_least`) |
//!
//! An `expect` is evaluated at its time; `anode emulate` exits 1 if any fails.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::SpanError;
use crate::report::{fmt_ms, us};
use crate::scenario::{
    Action, Check, Next, Registry, ReportCtx, StepArgs, StepCtx, StepOutcome, Target,
};

/// Registers `send`, `fail-link`, `restore-link` and `expect`.
pub fn register_builtin(r: &mut Registry) {
    r.register(
        "send",
        "from, to (node or \"*\"), port, payload or size, count, interval_ms, rb",
        parse_send,
    );
    r.register("fail-link", "a, b (the link's two nodes)", |a| {
        parse_link_change(a, false)
    });
    r.register("restore-link", "a, b (the link's two nodes)", |a| {
        parse_link_change(a, true)
    });
    r.register(
        "expect",
        "check = \"reachable\" | \"unreachable\" (from, to), \"route\" (from, to, via), \"delivered\" (node, port, count or at_least)",
        parse_expect,
    );
}

fn target_name(ctx_name: impl Fn(usize) -> String, t: Target) -> String {
    match t {
        Target::All => "*".to_string(),
        Target::Node(i) => ctx_name(i),
    }
}

// ---------------------------------------------------------------------------------------
// send

#[derive(Debug)]
struct Send {
    from: usize,
    to: Target,
    dests: Vec<usize>,
    port: u16,
    payload: Vec<u8>,
    count: u64,
    interval: Duration,
    rb: Option<u16>,
    done: u64,
}

fn parse_send(a: &mut StepArgs<'_>) -> Result<Box<dyn crate::scenario::Action>, SpanError> {
    let from = a.node("from")?;
    let to = a.target("to")?;
    if to == Target::Node(from) {
        return Err(a.err(
            "to",
            "a node cannot send to itself",
            "name another node, or \"*\" for every other node",
        ));
    }
    let port = a.u64_in("port", 0..=65535)?.unwrap_or(7) as u16;
    let text = a.str_opt("payload")?;
    let size = a.u64_in("size", 0..=65000)?;
    let payload = match (text, size) {
        (Some(_), Some(_)) => {
            return Err(a.err(
                "size",
                "both payload and size are given",
                "keep one: payload = \"text\" or size = BYTES",
            ));
        }
        (Some(t), None) => t.into_bytes(),
        (None, Some(n)) => (0..n).map(|i| b'a' + (i % 26) as u8).collect(),
        (None, None) => (0..64u8).map(|i| b'a' + i % 26).collect(),
    };
    let count = a.u64_in("count", 1..=10_000_000)?.unwrap_or(1);
    let interval = a
        .ms_opt("interval_ms")?
        .unwrap_or(Duration::from_millis(10));
    if count > 1 && interval.is_zero() {
        return Err(a.err(
            "interval_ms",
            "interval_ms = 0 with count > 1",
            "give the time between datagrams, e.g. interval_ms = 10",
        ));
    }
    let rb = a.u64_in("rb", 1..=65535)?.map(|v| v as u16);
    let dests = to.nodes(a.nodes().len(), Some(from));
    Ok(Box::new(Send {
        from,
        to,
        dests,
        port,
        payload,
        count,
        interval,
        rb,
        done: 0,
    }))
}

#[derive(Debug, Default)]
struct Stats {
    sent: u64,
    delivered: u64,
    refused: BTreeMap<String, u64>,
    lat_min: Option<Duration>,
    lat_max: Duration,
    lat_sum: Duration,
    hop_min: Option<u16>,
    hop_max: u16,
    paths: BTreeMap<Vec<usize>, u64>,
}

impl Stats {
    fn add(&mut self, f: &crate::track::FlowRec) {
        self.sent += 1;
        if let Some(r) = f.refused {
            *self.refused.entry(r.as_str().to_string()).or_insert(0) += 1;
        }
        if let (Some(l), Some(h)) = (f.latency(), f.hops()) {
            self.delivered += 1;
            self.lat_min = Some(self.lat_min.map_or(l, |m| m.min(l)));
            self.lat_max = self.lat_max.max(l);
            self.lat_sum += l;
            self.hop_min = Some(self.hop_min.map_or(h, |m| m.min(h)));
            self.hop_max = self.hop_max.max(h);
            // Paths are traced in virtual time only.
            if !f.path.is_empty() {
                let mut p = f.path.clone();
                p.push(f.to);
                *self.paths.entry(p).or_insert(0) += 1;
            }
        }
    }

    fn refused_total(&self) -> u64 {
        self.refused.values().sum()
    }

    fn lost(&self) -> u64 {
        self.sent - self.delivered - self.refused_total()
    }

    fn avg(&self) -> Option<Duration> {
        (self.delivered > 0).then(|| self.lat_sum / self.delivered as u32)
    }

    fn latency_text(&self) -> String {
        match (self.lat_min, self.avg()) {
            (Some(min), Some(_)) if min == self.lat_max => format!("latency {}", fmt_ms(min)),
            (Some(min), Some(avg)) => format!(
                "latency min/avg/max {}/{}/{}",
                fmt_ms(min).trim_end_matches(" ms"),
                fmt_ms(avg).trim_end_matches(" ms"),
                fmt_ms(self.lat_max)
            ),
            _ => "no latency (nothing arrived)".to_string(),
        }
    }

    fn sorted_paths(&self) -> Vec<(&Vec<usize>, u64)> {
        let mut v: Vec<(&Vec<usize>, u64)> = self.paths.iter().map(|(p, c)| (p, *c)).collect();
        // Most used first; ties by path (BTreeMap order is already by path).
        v.sort_by_key(|x| std::cmp::Reverse(x.1));
        v
    }

    fn json(&self, name: &dyn Fn(usize) -> String) -> Value {
        json!({
            "sent": self.sent,
            "delivered": self.delivered,
            "lost": self.lost(),
            "refused": self.refused,
            "latency_us": match (self.lat_min, self.avg()) {
                (Some(min), Some(avg)) => json!({"min": us(min), "avg": us(avg), "max": us(self.lat_max)}),
                _ => Value::Null,
            },
            "hops": match self.hop_min {
                Some(min) => json!({"min": min, "max": self.hop_max}),
                None => Value::Null,
            },
            "paths": self.sorted_paths().iter().map(|(p, c)| json!({
                "path": p.iter().map(|i| name(*i)).collect::<Vec<_>>(),
                "count": c,
            })).collect::<Vec<_>>(),
        })
    }
}

impl Action for Send {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        for &d in &self.dests {
            // A refusal is tracked and reported; nothing else to do here.
            let _ = ctx.send_datagram(self.from, d, self.port, self.rb, &self.payload);
        }
        self.done += 1;
        if self.done < self.count {
            Next::After(self.interval)
        } else {
            Next::Done
        }
    }

    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome {
        let name = |i: usize| ctx.node_name(i).to_string();
        let mut total = Stats::default();
        let mut per: BTreeMap<usize, Stats> = BTreeMap::new();
        for f in ctx.flows() {
            total.add(f);
            per.entry(f.to).or_default().add(f);
        }
        let each = if self.dests.len() > 1 { " each" } else { "" };
        let summary = format!(
            "send {} -> {}, port {}, {} x {}-byte datagram{}{}{}",
            name(self.from),
            target_name(name, self.to),
            self.port,
            self.count,
            self.payload.len(),
            if self.count > 1 { "s" } else { "" },
            if self.count > 1 {
                format!(" every {}", fmt_ms(self.interval))
            } else {
                String::new()
            },
            each
        );
        let mut details = vec![format!(
            "sent {}, delivered {}, lost {}{}; {}",
            total.sent,
            total.delivered,
            total.lost(),
            if total.refused.is_empty() {
                String::new()
            } else {
                format!(
                    ", refused at the source {} ({})",
                    total.refused_total(),
                    total
                        .refused
                        .iter()
                        .map(|(k, v)| format!("{k}: {v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            total.latency_text()
        )];
        for (to, s) in &per {
            let paths: Vec<String> = s
                .sorted_paths()
                .iter()
                .take(3)
                .map(|(p, c)| {
                    let p: Vec<String> = p.iter().map(|i| name(*i)).collect();
                    if s.paths.len() > 1 {
                        format!("{} (x{c})", p.join(">"))
                    } else {
                        p.join(">")
                    }
                })
                .collect();
            details.push(format!(
                "to {}: {}/{} delivered, {}{}",
                name(*to),
                s.delivered,
                s.sent,
                s.latency_text(),
                if paths.is_empty() {
                    String::new()
                } else {
                    format!(", path {}", paths.join(", "))
                }
            ));
        }
        let data = json!({
            "from": name(self.from),
            "to": target_name(name, self.to),
            "port": self.port,
            "payload_bytes": self.payload.len(),
            "count": self.count,
            "interval_us": us(self.interval),
            "total": total.json(&name),
            "per_destination": per.iter().map(|(to, s)| {
                let mut v = s.json(&name);
                if let Value::Object(m) = &mut v {
                    m.insert("to".into(), Value::String(name(*to)));
                }
                v
            }).collect::<Vec<_>>(),
        });
        StepOutcome {
            summary,
            details,
            check: None,
            data,
        }
    }
}

// ---------------------------------------------------------------------------------------
// fail-link / restore-link

#[derive(Debug)]
struct LinkChange {
    link: usize,
    up: bool,
}

fn parse_link_change(
    a: &mut StepArgs<'_>,
    up: bool,
) -> Result<Box<dyn crate::scenario::Action>, SpanError> {
    let link = a.link("a", "b")?;
    Ok(Box::new(LinkChange { link, up }))
}

impl Action for LinkChange {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        ctx.set_link_up(self.link, self.up);
        Next::Done
    }

    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome {
        let name = ctx.link_name(self.link);
        if self.up {
            return StepOutcome {
                summary: format!("restore-link {name}"),
                details: vec![],
                check: None,
                data: json!({"link": name}),
            };
        }
        let details = ctx
            .failure(self.link)
            .map(|f| f.text_lines())
            .unwrap_or_default();
        StepOutcome {
            summary: format!("fail-link {name} (both directions drop everything)"),
            details,
            check: None,
            data: json!({"link": name}),
        }
    }
}

// ---------------------------------------------------------------------------------------
// expect

#[derive(Debug, Clone)]
enum Expectation {
    Reachable {
        from: Target,
        to: Target,
        want: bool,
    },
    Route {
        from: usize,
        to: usize,
        via: usize,
    },
    Delivered {
        node: usize,
        port: Option<u16>,
        count: Option<u64>,
        at_least: Option<u64>,
    },
}

#[derive(Debug)]
struct Expect {
    what: Expectation,
    verdict: Option<Check>,
    description: String,
}

fn parse_expect(a: &mut StepArgs<'_>) -> Result<Box<dyn crate::scenario::Action>, SpanError> {
    let check = a.str_req(
        "check",
        "what to check: \"reachable\", \"unreachable\", \"route\" or \"delivered\"",
    )?;
    let names: Vec<String> = a.nodes().iter().map(|n| n.name.clone()).collect();
    let name = |i: usize| names.get(i).cloned().unwrap_or_default();
    let (what, description) = match check.as_str() {
        "reachable" | "unreachable" => {
            let from = a.target("from")?;
            let to = a.target("to")?;
            if let (Target::Node(x), Target::Node(y)) = (from, to)
                && x == y
            {
                return Err(a.err(
                    "to",
                    "from and to are the same node",
                    "name two different nodes",
                ));
            }
            let d = format!(
                "{check} {} -> {}",
                target_name(name, from),
                target_name(name, to)
            );
            (
                Expectation::Reachable {
                    from,
                    to,
                    want: check == "reachable",
                },
                d,
            )
        }
        "route" => {
            let from = a.node("from")?;
            let to = a.node("to")?;
            let via = a.node("via")?;
            if from == to {
                return Err(a.err(
                    "to",
                    "from and to are the same node",
                    "name two different nodes",
                ));
            }
            (
                Expectation::Route { from, to, via },
                format!("route {} -> {} via {}", name(from), name(to), name(via)),
            )
        }
        "delivered" => {
            let node = a.node("node")?;
            let port = a.u64_in("port", 0..=65535)?.map(|p| p as u16);
            let count = a.u64_opt("count")?;
            let at_least = a.u64_opt("at_least")?;
            let want = match (count, at_least) {
                (Some(c), None) => format!("exactly {c}"),
                (None, Some(c)) => format!("at least {c}"),
                _ => {
                    return Err(a.err(
                        "count",
                        "give exactly one of count and at_least",
                        "e.g. count = 4 (exactly) or at_least = 4",
                    ));
                }
            };
            (
                Expectation::Delivered {
                    node,
                    port,
                    count,
                    at_least,
                },
                format!(
                    "delivered at {}{}: {want}",
                    name(node),
                    port.map(|p| format!(" port {p}")).unwrap_or_default()
                ),
            )
        }
        other => {
            return Err(a.err(
                "check",
                format!("unknown check '{other}'"),
                "use check = \"reachable\", \"unreachable\", \"route\" or \"delivered\"",
            ));
        }
    };
    Ok(Box::new(Expect {
        what,
        verdict: None,
        description,
    }))
}

fn evaluate(what: &Expectation, ctx: &mut StepCtx<'_>) -> Check {
    match *what {
        Expectation::Reachable { from, to, want } => {
            let n = ctx.node_count();
            let (sources, dests) = (from.nodes(n, None), to.nodes(n, None));
            let mut pairs = 0;
            // Wrong pairs in (from, to) order; only the first few are explained, by a walk.
            let mut wrong: Vec<(usize, usize)> = Vec::new();
            // Many destinations: read every forwarding table once (O(n²) memory for the
            // check's duration) rather than look up n² entries one by one.
            let table = (dests.len() > 1).then(|| ctx.next_hop_table());
            for &y in &dests {
                let ok = match &table {
                    Some(t) => ctx.reachers_in(t, y),
                    None => ctx.reachers(y),
                };
                for &x in &sources {
                    if x != y {
                        pairs += 1;
                        if ok.get(x).copied().unwrap_or(false) != want {
                            wrong.push((x, y));
                        }
                    }
                }
            }
            wrong.sort_unstable();
            let count = wrong.len();
            let mut bad = Vec::new();
            for &(x, y) in wrong.iter().take(4) {
                let r = ctx.path(x, y);
                let name = |i: usize| ctx.node_name(i).to_string();
                bad.push(match r {
                    Ok(p) => format!(
                        "{} reaches {} via {}",
                        name(x),
                        name(y),
                        p.iter().map(|i| name(*i)).collect::<Vec<_>>().join(">")
                    ),
                    Err(why) => why,
                });
            }
            let passed = count == 0;
            let message = if passed {
                match (sources.first(), dests.first()) {
                    (Some(&x), Some(&y)) if pairs == 1 && want => match ctx.path(x, y) {
                        Ok(p) => format!(
                            "path {}",
                            p.iter()
                                .map(|i| ctx.node_name(*i).to_string())
                                .collect::<Vec<_>>()
                                .join(">")
                        ),
                        Err(e) => e,
                    },
                    _ if pairs == 1 => "as expected".to_string(),
                    _ => format!("all {pairs} pairs"),
                }
            } else {
                let more = if count > 4 {
                    format!(" (and {} more)", count - 4)
                } else {
                    String::new()
                };
                format!("{count} of {pairs} pairs wrong: {}{more}", bad.join("; "))
            };
            Check { passed, message }
        }
        Expectation::Route { from, to, via } => {
            let hop = ctx.next_hop(from, to);
            let got = hop.map_or("no route".to_string(), |h| {
                format!("next hop {}", ctx.node_name(h))
            });
            Check {
                passed: hop == Some(via),
                message: got,
            }
        }
        Expectation::Delivered {
            node,
            port,
            count,
            at_least,
        } => {
            let got = ctx.delivered(node, port);
            let passed = count.is_none_or(|c| got == c) && at_least.is_none_or(|c| got >= c);
            Check {
                passed,
                message: format!("{got} delivered"),
            }
        }
    }
}

impl Action for Expect {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        self.verdict = Some(evaluate(&self.what, ctx));
        Next::Done
    }

    fn report(&self, _ctx: &ReportCtx<'_>) -> StepOutcome {
        let check = self.verdict.clone().unwrap_or(Check {
            passed: false,
            message: "never evaluated (the run ended first)".to_string(),
        });
        StepOutcome {
            summary: format!(
                "expect {}: {} ({})",
                self.description,
                if check.passed { "PASS" } else { "FAIL" },
                check.message
            ),
            details: vec![],
            check: Some(check),
            data: json!({"expect": self.description}),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn time_formats_are_stable() {
        use super::*;
        use crate::report::fmt_time;
        assert_eq!(fmt_ms(Duration::from_micros(1500)), "1.500 ms");
        assert_eq!(fmt_time(Duration::from_millis(12345)), "12.345 s");
    }
}
