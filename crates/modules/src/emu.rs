//! Emulator steps for service modules, and the registry that enables them.
//!
//! [`registry`] is `anode_emu::Registry::builtin()` plus a module host on every node (trusting
//! the emulator's publisher key, [`emu_key`]) and these steps:
//! - `install-module`: `node`, and `module` (a module of `guest/modules/`, with an optional
//!   `version`) or `package` (your own: an `.amod` file, or a module directory with its
//!   `manifest.toml` and built code as `anode module pack` reads it, relative to the working
//!   directory, read when the topology is parsed); for a queue discipline also `toward` (the
//!   neighbor whose link gets it) and `rate_mbps` (the switching capacity on that link).
//!   Installs (signed with the emulator key), starts, and for a qdisc puts it on the link,
//!   moving the packets waiting there into it.
//! - `remove-module`: `node`, `module`, optional `toward` (a qdisc's link: the link then has
//!   no node queue). Stops and uninstalls it.
//! - `traffic`: `from`, `to`, `port`, `rate_mbps`, `size` (payload bytes), `duration_ms`:
//!   a constant-bit-rate datagram flow (not tracked per packet).
//! - `sample`: `node`, `port`, `interval_ms`, `duration_ms`: the delivered bandwidth at
//!   `node` on `port` per interval; the report's data holds the series (`t_ms`, `mbps`).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anode_core::LinkId;
use anode_emu::{Action, Next, Registry, ReportCtx, SpanError, StepArgs, StepCtx, StepOutcome};
use ed25519_dalek::SigningKey;
use sha2::{Digest, Sha256};

use crate::{ModRuntime, Package, Trust, builtin};

/// The emulator's publisher key (derived from a fixed string: for emulation only).
pub fn emu_key() -> SigningKey {
    SigningKey::from_bytes(&Sha256::digest(b"anode emulator module publisher").into())
}

fn runtime() -> Option<Arc<ModRuntime>> {
    static RT: OnceLock<Option<Arc<ModRuntime>>> = OnceLock::new();
    RT.get_or_init(|| ModRuntime::new(512).ok()).clone()
}

/// The built-in actions, the module steps, and a module host on every node.
pub fn registry() -> Registry {
    let mut r = Registry::builtin();
    add_to(&mut r);
    r
}

/// Adds the module steps and the per-node module host to a registry.
pub fn add_to(r: &mut Registry) {
    r.register(
        "install-module",
        "node, module [version] or package (.amod or module dir), [toward, rate_mbps] (qdisc)",
        parse_install,
    );
    r.register(
        "remove-module",
        "node, module, [toward] (qdisc)",
        parse_remove,
    );
    r.register(
        "traffic",
        "from, to, port, rate_mbps, size, duration_ms",
        parse_traffic,
    );
    r.register(
        "sample",
        "node, port, interval_ms, duration_ms",
        parse_sample,
    );
    crate::emu_deploy::add_to(r);
    r.on_node(Arc::new(|_, node| {
        if let Some(rt) = runtime() {
            crate::attach(node, rt, Trust::new(vec![emu_key().verifying_key()]));
        }
    }));
}

type Shared = Arc<Mutex<Vec<String>>>;

fn push(s: &Shared, line: String) {
    if let Ok(mut v) = s.lock() {
        v.push(line);
    }
}

#[derive(Debug)]
struct Install {
    node: usize,
    module: String,
    /// The package, signed with the emulator key.
    package: Package,
    toward: Option<usize>,
    rate_bps: u64,
    result: Shared,
}

fn parse_install(a: &mut StepArgs<'_>) -> Result<Box<dyn Action>, SpanError> {
    let node = a.node("node")?;
    let package = match a.str_opt("package")? {
        Some(path) => read_package(a, &path)?,
        None => builtin_package(a)?,
    };
    let toward = match a.str_opt("toward")? {
        Some(_) => Some(a.node("toward")?),
        None => None,
    };
    let rate = a.f64_opt("rate_mbps")?.unwrap_or(0.0);
    if toward.is_some() && !(rate > 0.0 && rate < 1e6) {
        return Err(a.err(
            "rate_mbps",
            "a queue discipline needs the link's rate",
            "give rate_mbps = 40 (more than 0)",
        ));
    }
    Ok(Box::new(Install {
        node,
        module: package.manifest.name.clone(),
        package,
        toward,
        rate_bps: (rate * 1e6) as u64,
        result: Shared::default(),
    }))
}

/// `package = PATH`: an `.amod` file or a module directory, signed with the emulator key.
pub(crate) fn read_package(a: &StepArgs<'_>, path: &str) -> Result<Package, SpanError> {
    let p = std::path::Path::new(path);
    let read = if p.is_dir() {
        Package::from_dir(p)
    } else {
        Package::read(p)
    };
    let mut pkg = read.map_err(|e| {
        a.err(
            "package",
            format!("cannot read the module package {path}: {e}"),
            "give an .amod file or a module directory (manifest.toml and the built code), relative to the working directory",
        )
    })?;
    pkg.sign(&emu_key());
    Ok(pkg)
}

/// The built-in module `module`, its manifest's version replaced by `version` if given, signed
/// with the emulator key.
fn signed_builtin(module: &str, version: Option<&str>) -> Option<Package> {
    let p = builtin::package(module)?;
    let mut text = p.manifest_text.clone();
    if let Some(v) = version {
        text = text.replacen(
            &format!("version = \"{}\"", p.manifest.version),
            &format!("version = \"{v}\""),
            1,
        );
    }
    let mut p = Package::new(text, p.code).ok()?;
    p.sign(&emu_key());
    Some(p)
}

/// `module = NAME [version = V]`: a built-in module, signed with the emulator key.
pub(crate) fn builtin_package(a: &mut StepArgs<'_>) -> Result<Package, SpanError> {
    let module = a.str_req(
        "module",
        "a module of guest/modules (module = \"rr\") or your own (package = \"path\")",
    )?;
    let version = a.str_opt("version")?;
    if builtin::package(&module).is_none() {
        let names: Vec<&str> = builtin::BUILTIN.iter().map(|(n, _, _)| *n).collect();
        return Err(a.err(
            "module",
            format!("unknown module '{module}'"),
            format!("use one of: {}", names.join(", ")),
        ));
    }
    signed_builtin(&module, version.as_deref()).ok_or_else(|| {
        a.err(
            "version",
            format!("'{}' is not a version", version.unwrap_or_default()),
            "give a semantic version, e.g. version = \"1.1.0\"",
        )
    })
}

impl Action for Install {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        let peer = self.toward.and_then(|t| ctx.node_addr(t));
        let (module, pkg, rate, out) = (
            self.module.clone(),
            self.package.clone(),
            self.rate_bps,
            self.result.clone(),
        );
        ctx.with_node(
            self.node,
            Box::new(move |node, now| {
                let r = (|| -> Result<String, crate::ModuleError> {
                    let h = crate::host(node)?;
                    if h.state(&module).is_none() {
                        h.install(pkg, &toml::Table::new())?;
                    }
                    h.start(&module)?;
                    crate::sync_routes(node)?;
                    let Some(peer) = peer else {
                        return Ok(format!("{module} active"));
                    };
                    let link = node.link_by_peer(&peer).unwrap_or(LinkId(u32::MAX));
                    let old = crate::attach_qdisc(node, &module, link, rate, now)?;
                    Ok(format!(
                        "{module} on link {} at {} Mbps (replaced {})",
                        link.0,
                        rate / 1_000_000,
                        old.unwrap_or_else(|| "no queue".into())
                    ))
                })();
                push(&out, r.unwrap_or_else(|e| format!("error: {e}")));
            }),
        );
        Next::Done
    }

    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome {
        let lines = self.result.lock().map(|v| v.clone()).unwrap_or_default();
        let ok = !lines.is_empty() && lines.iter().all(|l| !l.starts_with("error"));
        StepOutcome {
            summary: format!(
                "install-module {} at {}: {}",
                self.module,
                ctx.node_name(self.node),
                lines.join("; ")
            ),
            details: Vec::new(),
            check: Some(anode_emu::Check {
                passed: ok,
                message: lines.join("; "),
            }),
            data: serde_json::json!({ "module": self.module, "ok": ok }),
        }
    }
}

#[derive(Debug)]
struct Remove {
    node: usize,
    module: String,
    toward: Option<usize>,
    result: Shared,
}

fn parse_remove(a: &mut StepArgs<'_>) -> Result<Box<dyn Action>, SpanError> {
    let node = a.node("node")?;
    let module = a.str_req("module", "the module's name, e.g. module = \"rr\"")?;
    let toward = match a.str_opt("toward")? {
        Some(_) => Some(a.node("toward")?),
        None => None,
    };
    Ok(Box::new(Remove {
        node,
        module,
        toward,
        result: Shared::default(),
    }))
}

impl Action for Remove {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        let peer = self.toward.and_then(|t| ctx.node_addr(t));
        let (module, out) = (self.module.clone(), self.result.clone());
        ctx.with_node(
            self.node,
            Box::new(move |node, now| {
                if let Some(link) = peer.and_then(|p| node.link_by_peer(&p)) {
                    node.set_link_qdisc(link, None, now);
                }
                let r = crate::host(node)
                    .and_then(|h| h.remove(&module))
                    .and_then(|()| crate::sync_routes(node));
                push(
                    &out,
                    match r {
                        Ok(()) => format!("{module} removed"),
                        Err(e) => format!("error: {e}"),
                    },
                );
            }),
        );
        Next::Done
    }

    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome {
        let lines = self.result.lock().map(|v| v.clone()).unwrap_or_default();
        let ok = !lines.is_empty() && lines.iter().all(|l| !l.starts_with("error"));
        StepOutcome {
            summary: format!(
                "remove-module {} at {}: {}",
                self.module,
                ctx.node_name(self.node),
                lines.join("; ")
            ),
            details: Vec::new(),
            check: Some(anode_emu::Check {
                passed: ok,
                message: lines.join("; "),
            }),
            data: serde_json::json!({ "module": self.module, "ok": ok }),
        }
    }
}

#[derive(Debug)]
struct Traffic {
    from: usize,
    to: usize,
    port: u16,
    rate_bps: f64,
    size: usize,
    duration: Duration,
    start: Option<Duration>,
    sent_bits: f64,
    sent: u64,
}

const TICK: Duration = Duration::from_millis(1);

fn parse_traffic(a: &mut StepArgs<'_>) -> Result<Box<dyn Action>, SpanError> {
    let from = a.node("from")?;
    let to = a.node("to")?;
    let port = a.u64_in("port", 1..=65535)?.unwrap_or(7) as u16;
    let rate = a.f64_req("rate_mbps", "the sending rate, e.g. rate_mbps = 15")?;
    if !(rate > 0.0 && rate <= 10_000.0) {
        return Err(a.err("rate_mbps", "out of range", "give 0 < rate_mbps <= 10000"));
    }
    let size = a.u64_in("size", 16..=1400)?.unwrap_or(1000) as usize;
    let duration = a.ms_opt("duration_ms")?.unwrap_or(Duration::from_secs(10));
    Ok(Box::new(Traffic {
        from,
        to,
        port,
        rate_bps: rate * 1e6,
        size,
        duration,
        start: None,
        sent_bits: 0.0,
        sent: 0,
    }))
}

impl Action for Traffic {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        let now = ctx.now();
        let start = *self.start.get_or_insert(now);
        let Some(dst) = ctx.node_addr(self.to) else {
            return Next::Done;
        };
        let elapsed = now.saturating_sub(start).min(self.duration);
        // Bits due so far, counted on the wire size of the payload.
        let due = self.rate_bps * elapsed.as_secs_f64();
        let bits = (self.size * 8) as f64;
        let mut n = 0u64;
        while self.sent_bits + bits <= due + bits {
            self.sent_bits += bits;
            n += 1;
        }
        if n > 0 {
            let (port, size, flow) = (self.port, self.size, u64::from(self.port));
            self.sent += n;
            ctx.with_node(
                self.from,
                Box::new(move |node, at| {
                    let payload = vec![0u8; size];
                    for _ in 0..n {
                        let _ = node.send_datagram(at, dst, port, flow, None, &payload);
                    }
                }),
            );
        }
        if elapsed >= self.duration {
            Next::Done
        } else {
            Next::After(TICK)
        }
    }

    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome {
        StepOutcome {
            summary: format!(
                "traffic {} -> {} port {}: {} datagrams at {} Mbps",
                ctx.node_name(self.from),
                ctx.node_name(self.to),
                self.port,
                self.sent,
                self.rate_bps / 1e6
            ),
            details: Vec::new(),
            check: None,
            data: serde_json::json!({ "sent": self.sent, "port": self.port }),
        }
    }
}

#[derive(Debug)]
struct Sample {
    node: usize,
    port: u16,
    interval: Duration,
    duration: Duration,
    start: Option<Duration>,
    last: u64,
    bytes_per_pkt: f64,
    series: Vec<(u64, f64)>,
}

fn parse_sample(a: &mut StepArgs<'_>) -> Result<Box<dyn Action>, SpanError> {
    let node = a.node("node")?;
    let port = a.u64_in("port", 1..=65535)?.unwrap_or(7) as u16;
    let interval = a
        .ms_opt("interval_ms")?
        .unwrap_or(Duration::from_millis(500));
    let duration = a.ms_opt("duration_ms")?.unwrap_or(Duration::from_secs(10));
    let size = a.u64_opt("size")?.unwrap_or(1000);
    if interval.is_zero() {
        return Err(a.err("interval_ms", "must be more than 0", "interval_ms = 500"));
    }
    Ok(Box::new(Sample {
        node,
        port,
        interval,
        duration,
        start: None,
        last: 0,
        bytes_per_pkt: size as f64,
        series: Vec::new(),
    }))
}

impl Action for Sample {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        let now = ctx.now();
        let d = ctx.delivered(self.node, Some(self.port));
        if self.start.is_none() {
            self.start = Some(now);
        } else {
            let pkts = d.saturating_sub(self.last) as f64;
            let mbps = pkts * self.bytes_per_pkt * 8.0 / self.interval.as_secs_f64() / 1e6;
            self.series
                .push((now.as_millis() as u64, (mbps * 100.0).round() / 100.0));
        }
        self.last = d;
        if now.saturating_sub(self.start.unwrap_or(now)) >= self.duration {
            Next::Done
        } else {
            Next::After(self.interval)
        }
    }

    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome {
        let t: Vec<u64> = self.series.iter().map(|s| s.0).collect();
        let m: Vec<f64> = self.series.iter().map(|s| s.1).collect();
        StepOutcome {
            summary: format!(
                "sample {} port {}: {} points",
                ctx.node_name(self.node),
                self.port,
                self.series.len()
            ),
            details: Vec::new(),
            check: None,
            data: serde_json::json!({ "node": ctx.node_name(self.node), "port": self.port, "t_ms": t, "mbps": m }),
        }
    }
}
