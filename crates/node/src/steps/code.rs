//! Emulator step `capsule`: capsules of any code object (your own protocol's .wasm) from
//! node `from` toward `to`, and what the code delivers to `port` anywhere in the network.
//!
//! Keys: from, to, code (a WebAssembly file, relative to the working directory), payload
//! (text) or payload_hex, count (1), interval_ms (100), rb (32), flow (0), port (9),
//! wait_ms (2000: after the last capsule), expect_delivered (at least this many deliveries
//! to `port`, at any node).
//!
//! Contract: the file is read and checked for the WebAssembly magic when the topology is
//! parsed (a wrong path is an error at its line). The code is installed at `from` only; every
//! other node demand-loads it from its previous hop. `port` is registered at every node, so
//! a delivery anywhere is seen and reported with the node and virtual time.

use std::time::Duration;

use anode_capsule::{capsule_packet, code_hash};
use anode_core::Event;
use anode_emu::{Action, Check, Next, ReportCtx, StepArgs, StepCtx, StepOutcome};
use anode_wire::anep::TYPE_CAPSULE;
use serde_json::json;

use crate::ees::capsule_ee;

/// The `capsule` step.
#[derive(Debug)]
struct SendCode {
    file: String,
    wasm: Vec<u8>,
    from: usize,
    to: usize,
    payload: Vec<u8>,
    count: u64,
    interval: Duration,
    rb: u16,
    flow: u64,
    port: u16,
    wait: Duration,
    expect: Option<u64>,
    // Run state.
    sent: u64,
    cursor: usize,
    last_sent: Duration,
    /// (virtual time, node, payload) of each delivery to `port`.
    deliveries: Vec<(Duration, usize, Vec<u8>)>,
}

/// Parses a `capsule` step.
pub fn parse(a: &mut StepArgs<'_>) -> Result<Box<dyn Action>, anode_emu::SpanError> {
    let from = a.node("from")?;
    let to = a.node("to")?;
    let file = a.str_req("code", "a WebAssembly file (your protocol's .wasm)")?;
    let wasm = std::fs::read(&file).map_err(|e| {
        a.err(
            "code",
            format!("cannot read {file}: {e}"),
            "give the path of a .wasm file, relative to the working directory",
        )
    })?;
    if !wasm.starts_with(b"\0asm") {
        return Err(a.err(
            "code",
            format!("{file} is not a WebAssembly module"),
            "build the protocol for wasm32-unknown-unknown (see docs/first-protocol.md)",
        ));
    }
    let payload = match (a.str_opt("payload")?, a.str_opt("payload_hex")?) {
        (Some(_), Some(_)) => {
            return Err(a.err(
                "payload",
                "give payload or payload_hex, not both",
                "e.g. payload = \"hello\"",
            ));
        }
        (Some(t), None) => t.into_bytes(),
        (None, Some(h)) => {
            anode_ctl::Payload::from_hex(&h)
                .map_err(|e| a.err("payload_hex", e, "e.g. payload_hex = \"00ff\""))?
                .0
        }
        (None, None) => Vec::new(),
    };
    Ok(Box::new(SendCode {
        file,
        wasm,
        from,
        to,
        payload,
        count: a.u64_in("count", 1..=1_000_000)?.unwrap_or(1),
        interval: a
            .ms_opt("interval_ms")?
            .unwrap_or(Duration::from_millis(100)),
        rb: a.u64_in("rb", 1..=65535)?.unwrap_or(32) as u16,
        flow: a.u64_opt("flow")?.unwrap_or(0),
        port: a.u64_in("port", 1..=65535)?.unwrap_or(9) as u16,
        wait: a.ms_opt("wait_ms")?.unwrap_or(Duration::from_secs(2)),
        expect: a.u64_opt("expect_delivered")?,
        sent: 0,
        cursor: 0,
        last_sent: Duration::ZERO,
        deliveries: Vec::new(),
    }))
}

impl SendCode {
    fn start(&mut self, ctx: &mut StepCtx<'_>) {
        self.cursor = ctx.ee_events(0).len();
        let wasm = self.wasm.clone();
        let (port, file) = (self.port, self.file.clone());
        ctx.with_node(
            self.from,
            Box::new(move |n, _| {
                if let Some(ee) = capsule_ee(n)
                    && let Err(e) = ee.install(&wasm)
                {
                    tracing::error!("capsule step: {file}: install failed: {e}");
                }
            }),
        );
        for node in 0..ctx.node_count() {
            ctx.with_node(
                node,
                Box::new(move |n, _| {
                    if let Some(ee) = capsule_ee(n) {
                        ee.register_port(port);
                    }
                }),
            );
        }
    }

    fn send_one(&mut self, ctx: &mut StepCtx<'_>) {
        let (Some(src), Some(dst)) = (ctx.node_addr(self.from), ctx.node_addr(self.to)) else {
            return;
        };
        let (code, rb, flow) = (code_hash(&self.wasm), self.rb, self.flow);
        let payload = self.payload.clone();
        ctx.with_node(
            self.from,
            Box::new(
                move |n, now| match capsule_packet(code, src, dst, rb, flow, &payload) {
                    Ok(p) => {
                        if let Err(e) = n.inject(now, p) {
                            tracing::debug!("capsule step: inject refused: {e}");
                        }
                    }
                    Err(e) => tracing::error!("capsule step: {e}"),
                },
            ),
        );
        self.sent += 1;
        self.last_sent = ctx.now();
    }

    fn collect(&mut self, ctx: &StepCtx<'_>) {
        let ev = ctx.ee_events(self.cursor);
        self.cursor += ev.len();
        for e in ev {
            if let Event::Delivered(d) = &e.event
                && d.type_id == TYPE_CAPSULE
                && d.port == self.port
            {
                self.deliveries.push((e.at, e.node, d.payload().to_vec()));
            }
        }
    }
}

impl Action for SendCode {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        if self.sent == 0 {
            self.start(ctx);
        }
        self.collect(ctx);
        if self.sent < self.count {
            self.send_one(ctx);
            return Next::After(self.interval.max(Duration::from_millis(1)));
        }
        if ctx.now().saturating_sub(self.last_sent) >= self.wait {
            Next::Done
        } else {
            Next::After(Duration::from_millis(1))
        }
    }

    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome {
        let (f, t) = (ctx.node_name(self.from), ctx.node_name(self.to));
        let hash: String = code_hash(&self.wasm)
            .iter()
            .take(4)
            .map(|b| format!("{b:02x}"))
            .collect();
        let n = self.deliveries.len() as u64;
        let summary = format!(
            "capsule {} (code {hash}...) {f} -> {t}: {} sent, {n} delivered to port {}",
            self.file, self.sent, self.port
        );
        let show = |p: &[u8]| match std::str::from_utf8(p) {
            Ok(s) if !s.chars().any(char::is_control) => format!("{s:?}"),
            _ => p.iter().map(|b| format!("{b:02x}")).collect(),
        };
        let details = self
            .deliveries
            .iter()
            .map(|(at, node, p)| {
                format!(
                    "at {:.3} ms at {}: {}",
                    at.as_secs_f64() * 1e3,
                    ctx.node_name(*node),
                    show(p)
                )
            })
            .collect();
        let check = self.expect.map(|want| Check {
            passed: n >= want,
            message: format!(
                "expected at least {want} deliveries to port {}, got {n}",
                self.port
            ),
        });
        StepOutcome {
            summary,
            details,
            check,
            data: json!({
                "from": f, "to": t, "code": self.file, "sent": self.sent, "port": self.port,
                "deliveries": self.deliveries.iter().map(|(at, node, p)| json!({
                    "at_us": at.as_micros() as u64, "node": ctx.node_name(*node),
                    "payload": show(p),
                })).collect::<Vec<_>>(),
                "expect": self.expect.map(|w| format!("at least {w} deliveries")),
            }),
        }
    }
}
