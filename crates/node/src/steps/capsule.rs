//! Emulator steps `ping` and `flood`: the capsule protocols `ping` and `flood` of
//! `crates/capsule`, started at node `from` toward `to`.
//!
//! Both install their protocol's code object at `from` only (and register the reply port
//! there); every other node demand-loads it from its previous hop, so the first capsule's
//! round trip includes the code loads and the report gives first-capsule vs cached latency
//! (Openet measured 462 ms vs 11 ms). Times are the nodes' clocks (virtual time in the
//! simulator). Every wait is bounded by `timeout_ms`.
//!
//! Keys: `ping`: from, to, count (4), interval_ms (100), rb (32), port (7), timeout_ms (5000),
//! expect_received. `flood`: from, to, size (512), count | duration_ms, rate_pps (1000),
//! status_ms (100), rb (32), port (8), timeout_ms (5000), expect_delivered (fraction 0..1).

use std::time::Duration;

use anode_capsule::{capsule_packet, code_hash, protocols};
use anode_core::Event;
use anode_emu::{Action, Check, Next, ReportCtx, StepArgs, StepCtx, StepOutcome};
use anode_wire::anep::TYPE_CAPSULE;
use serde_json::json;

use crate::ees::capsule_ee;

/// Installs `wasm` at `node` and registers `port` there.
fn setup(ctx: &mut StepCtx<'_>, node: usize, wasm: &'static [u8], port: u16) {
    ctx.with_node(
        node,
        Box::new(move |n, _| {
            if let Some(ee) = capsule_ee(n) {
                if let Err(e) = ee.install(wasm) {
                    tracing::error!("capsule step: install failed: {e}");
                }
                ee.register_port(port);
            }
        }),
    );
}

/// Injects a capsule of `code` from `from` to `to`.
fn inject(
    ctx: &mut StepCtx<'_>,
    code: [u8; 32],
    (from, to): (usize, usize),
    rb: u16,
    flow: u64,
    payload: Vec<u8>,
    copies: u64,
) {
    let (Some(src), Some(dst)) = (ctx.node_addr(from), ctx.node_addr(to)) else {
        return;
    };
    ctx.with_node(
        from,
        Box::new(move |n, now| {
            for _ in 0..copies {
                match capsule_packet(code, src, dst, rb, flow, &payload) {
                    Ok(p) => {
                        if let Err(e) = n.inject(now, p) {
                            tracing::debug!("capsule step: inject refused: {e}");
                        }
                    }
                    Err(e) => tracing::error!("capsule step: {e}"),
                }
            }
        }),
    );
}

/// New capsule deliveries to `port` at `node` since `cursor` (advanced).
fn replies(
    ctx: &StepCtx<'_>,
    cursor: &mut usize,
    node: usize,
    port: u16,
) -> Vec<(Duration, Vec<u8>)> {
    let ev = ctx.ee_events(*cursor);
    *cursor += ev.len();
    ev.iter()
        .filter_map(|e| match &e.event {
            Event::Delivered(d)
                if e.node == node && d.type_id == TYPE_CAPSULE && d.port == port =>
            {
                Some((e.at, d.payload().to_vec()))
            }
            _ => None,
        })
        .collect()
}

fn be64(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_be_bytes(a))
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

const POLL: Duration = Duration::from_millis(1);

/// The `ping` step.
#[derive(Debug)]
struct Ping {
    from: usize,
    to: usize,
    count: u32,
    interval: Duration,
    rb: u16,
    port: u16,
    timeout: Duration,
    expect: Option<u32>,
    // Run state.
    cursor: usize,
    started: bool,
    waiting: Option<(u32, Duration)>,
    rtts: Vec<Option<Duration>>,
}

/// Parses a `ping` step.
pub fn parse_ping(a: &mut StepArgs<'_>) -> Result<Box<dyn Action>, anode_emu::SpanError> {
    let from = a.node("from")?;
    let to = a.node("to")?;
    if from == to {
        return Err(a.err("to", "a node cannot ping itself", "name another node"));
    }
    let count = a.u64_in("count", 1..=10_000)?.unwrap_or(4) as u32;
    Ok(Box::new(Ping {
        from,
        to,
        count,
        interval: a
            .ms_opt("interval_ms")?
            .unwrap_or(Duration::from_millis(100)),
        rb: a.u64_in("rb", 1..=65535)?.unwrap_or(32) as u16,
        port: a.u64_in("port", 1..=65535)?.unwrap_or(7) as u16,
        timeout: a.ms_opt("timeout_ms")?.unwrap_or(Duration::from_secs(5)),
        expect: a.u64_in("expect_received", 0..=10_000)?.map(|v| v as u32),
        cursor: 0,
        started: false,
        waiting: None,
        rtts: Vec::new(),
    }))
}

impl Ping {
    fn send(&mut self, ctx: &mut StepCtx<'_>, seq: u32) {
        let mut p = vec![0u8; 2];
        p.extend_from_slice(&self.port.to_be_bytes());
        p.resize(20, 0);
        let code = code_hash(protocols::PING);
        inject(
            ctx,
            code,
            (self.from, self.to),
            self.rb,
            u64::from(seq),
            p,
            1,
        );
        self.waiting = Some((seq, ctx.now()));
    }
}

impl Action for Ping {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        if !self.started {
            self.started = true;
            self.cursor = ctx.ee_events(0).len();
            setup(ctx, self.from, protocols::PING, self.port);
            self.send(ctx, 0);
            return Next::After(POLL);
        }
        let Some((seq, sent)) = self.waiting else {
            // Between pings: send the next one.
            let seq = self.rtts.len() as u32;
            self.send(ctx, seq);
            return Next::After(POLL);
        };
        let got = replies(ctx, &mut self.cursor, self.from, self.port)
            .into_iter()
            .find(|(_, p)| p.first() == Some(&1) && be64(p, 12).is_some())
            .map(|(at, p)| be64(&p, 12).map_or(at.saturating_sub(sent), Duration::from_nanos));
        let timed_out = ctx.now().saturating_sub(sent) >= self.timeout;
        if got.is_none() && !timed_out {
            return Next::After(POLL);
        }
        self.rtts.push(got);
        self.waiting = None;
        if seq + 1 >= self.count {
            Next::Done
        } else {
            Next::After(self.interval.max(POLL))
        }
    }

    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome {
        let received = self.rtts.iter().flatten().count() as u32;
        let first = self.rtts.first().copied().flatten();
        let cached: Vec<Duration> = self.rtts.iter().skip(1).flatten().copied().collect();
        let avg =
            (!cached.is_empty()).then(|| cached.iter().sum::<Duration>() / cached.len() as u32);
        let (f, t) = (ctx.node_name(self.from), ctx.node_name(self.to));
        let summary = format!(
            "capsule ping {f} -> {t}: {received}/{} replies; first {} (code loaded hop by hop), cached {}",
            self.count,
            first.map_or("lost".into(), ms),
            avg.map_or("-".into(), |d| format!("{} avg", ms(d))),
        );
        let details = self
            .rtts
            .iter()
            .enumerate()
            .map(|(i, r)| match r {
                Some(d) => format!("seq {i}: rtt {}", ms(*d)),
                None => format!("seq {i}: no reply"),
            })
            .collect();
        let check = self.expect.map(|want| Check {
            passed: received >= want,
            message: format!("expected at least {want} replies, got {received}"),
        });
        StepOutcome {
            summary,
            details,
            check,
            data: json!({
                "from": f, "to": t, "sent": self.count, "received": received,
                "rtt_us": self.rtts.iter().map(|r| r.map(|d| d.as_micros() as u64)).collect::<Vec<_>>(),
                "first_us": first.map(|d| d.as_micros() as u64),
                "cached_avg_us": avg.map(|d| d.as_micros() as u64),
                "expect": self.expect.map(|w| format!("at least {w} ping replies")),
            }),
        }
    }
}

/// The `flood` step.
#[derive(Debug)]
struct Flood {
    from: usize,
    to: usize,
    size: usize,
    count: Option<u64>,
    duration: Option<Duration>,
    rate: u64,
    status_ms: u32,
    rb: u16,
    port: u16,
    timeout: Duration,
    expect: Option<f64>,
    // Run state.
    cursor: usize,
    phase: Phase,
    flow: u64,
    sent: u64,
    began: Duration,
    /// How long data capsules were being sent.
    window: Duration,
    /// Receiver's (elapsed, count) from its last status.
    last: Option<(u64, u64)>,
    reports: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    AwaitStart(Duration),
    Sending,
    Final(Duration),
    AwaitFinal(Duration),
    Over,
}

/// Parses a `flood` step.
pub fn parse_flood(a: &mut StepArgs<'_>) -> Result<Box<dyn Action>, anode_emu::SpanError> {
    let from = a.node("from")?;
    let to = a.node("to")?;
    if from == to {
        return Err(a.err("to", "a node cannot flood itself", "name another node"));
    }
    let size = a.u64_in("size", 24..=60_000)?.unwrap_or(512) as usize;
    let count = a.u64_in("count", 1..=10_000_000)?;
    let duration = a.ms_opt("duration_ms")?;
    if count.is_some() == duration.is_some() {
        return Err(a.err(
            "count",
            "give exactly one of count and duration_ms",
            "e.g. count = 1000, or duration_ms = 500",
        ));
    }
    Ok(Box::new(Flood {
        from,
        to,
        size,
        count,
        duration,
        rate: a.u64_in("rate_pps", 1..=1_000_000)?.unwrap_or(1000),
        status_ms: a.u64_in("status_ms", 1..=60_000)?.unwrap_or(100) as u32,
        rb: a.u64_in("rb", 1..=65535)?.unwrap_or(32) as u16,
        port: a.u64_in("port", 1..=65535)?.unwrap_or(8) as u16,
        timeout: a.ms_opt("timeout_ms")?.unwrap_or(Duration::from_secs(5)),
        expect: a.f64_opt("expect_delivered")?,
        cursor: 0,
        phase: Phase::Start,
        flow: 0,
        sent: 0,
        began: Duration::ZERO,
        window: Duration::ZERO,
        last: None,
        reports: 0,
    }))
}

impl Flood {
    fn payload(&self, kind: u8) -> Vec<u8> {
        // kind, reserved, port, status interval; then zeros up to the size (at least 8).
        let mut p = vec![kind, 0];
        p.extend_from_slice(&self.port.to_be_bytes());
        p.extend_from_slice(&self.status_ms.to_be_bytes());
        p.resize(self.size.max(p.len()), 0);
        p
    }

    fn send(&mut self, ctx: &mut StepCtx<'_>, kind: u8, copies: u64) {
        let code = code_hash(protocols::FLOOD);
        let p = self.payload(kind);
        inject(
            ctx,
            code,
            (self.from, self.to),
            self.rb,
            self.flow,
            p,
            copies,
        );
        self.sent += copies;
    }

    /// Takes new status reports; whether one arrived.
    fn take(&mut self, ctx: &StepCtx<'_>) -> bool {
        let mut any = false;
        for (_, p) in replies(ctx, &mut self.cursor, self.from, self.port) {
            if p.first() == Some(&2)
                && let (Some(el), Some(n)) = (be64(&p, 8), be64(&p, 16))
            {
                self.reports += 1;
                self.last = Some((el, n));
                any = true;
            }
        }
        any
    }
}

impl Action for Flood {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        let now = ctx.now();
        match self.phase {
            Phase::Start => {
                self.cursor = ctx.ee_events(0).len();
                self.flow = 0x000f_100d_0000 + ctx.now().as_millis() as u64;
                setup(ctx, self.from, protocols::FLOOD, self.port);
                self.send(ctx, 0, 1);
                self.phase = Phase::AwaitStart(now);
                Next::After(POLL)
            }
            Phase::AwaitStart(t) => {
                if self.take(ctx) {
                    self.phase = Phase::Sending;
                    self.began = now;
                    Next::After(POLL)
                } else if now.saturating_sub(t) >= self.timeout {
                    self.phase = Phase::Over;
                    Next::Done
                } else {
                    Next::After(POLL)
                }
            }
            Phase::Sending => {
                self.take(ctx);
                // Send what the rate allows up to now (one tick's worth at least).
                let due = (now.saturating_sub(self.began).as_micros() as u64 * self.rate
                    / 1_000_000)
                    .max(self.sent);
                let data_sent = self.sent - 1;
                let (want, over) = match (self.count, self.duration) {
                    (Some(n), _) => (due.min(n + 1), data_sent >= n),
                    (None, Some(d)) => (due, now.saturating_sub(self.began) >= d),
                    (None, None) => (due, true),
                };
                if over {
                    self.window = now.saturating_sub(self.began);
                    self.phase = Phase::Final(now);
                    return Next::After(Duration::from_millis(u64::from(self.status_ms) + 5));
                }
                let n = want.saturating_sub(self.sent).max(1);
                self.send(ctx, 1, n);
                Next::After(POLL)
            }
            Phase::Final(_) => {
                self.take(ctx);
                // One more data capsule after a status interval makes the receiver report.
                self.send(ctx, 1, 1);
                self.phase = Phase::AwaitFinal(now);
                Next::After(POLL)
            }
            Phase::AwaitFinal(t) => {
                self.take(ctx);
                let done = self.last.is_some_and(|(_, n)| n >= self.sent);
                if done || now.saturating_sub(t) >= self.timeout {
                    self.phase = Phase::Over;
                    Next::Done
                } else {
                    Next::After(POLL)
                }
            }
            Phase::Over => Next::Done,
        }
    }

    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome {
        let (el, got) = self.last.unwrap_or((0, 0));
        // Data capsules delivered (less the start and the final probe) over the window
        // they were sent in.
        let secs = self.window.as_secs_f64().max(1e-9);
        let data = got.saturating_sub(2);
        let frac = if self.sent == 0 {
            0.0
        } else {
            got as f64 / self.sent as f64
        };
        let pps = data as f64 / secs;
        let mbps = pps * self.size as f64 * 8.0 / 1e6;
        let (f, t) = (ctx.node_name(self.from), ctx.node_name(self.to));
        let summary = format!(
            "capsule flood {f} -> {t}: {} capsules of {} B sent, {got} counted at {t} ({:.1}% loss); {:.0} capsules/s, {:.2} Mbit/s",
            self.sent,
            self.size,
            100.0 * (1.0 - frac),
            pps,
            mbps
        );
        let details = vec![format!(
            "{} status reports; receiver's flow time {}; rate over the {} send window",
            self.reports,
            ms(Duration::from_nanos(el)),
            ms(self.window)
        )];
        let check = self.expect.map(|want| Check {
            passed: frac >= want,
            message: format!(
                "expected at least {:.1}% delivered, got {:.1}%",
                want * 100.0,
                frac * 100.0
            ),
        });
        StepOutcome {
            summary,
            details,
            check,
            data: json!({
                "from": f, "to": t, "size": self.size, "sent": self.sent, "delivered": got,
                "elapsed_us": el / 1000, "rate_pps": pps.round() as u64, "status_reports": self.reports,
                "expect": self.expect.map(|w| format!("at least {:.1}% delivered", w * 100.0)),
            }),
        }
    }
}
