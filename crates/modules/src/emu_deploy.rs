//! Emulator steps for deploying modules along a path (`deploy/`), and the deployment service
//! on every emulated node.
//!
//! Every node runs the deployment service trusting the emulator's deploy key ([`deployer`])
//! for standard, function and user modules, with its clock at [`EPOCH_MS`] at virtual time
//! zero (when the node is made).
//! Steps:
//! - `deploy-module`: `node` (the origin), `to` (the target), `module` [`version`] or
//!   `package` (as `install-module` takes them), `ttl_s` (default 30), `key` (`"deployer"`,
//!   the default, or `"stranger"`, a key no node trusts), `valid_ms` (how long the request
//!   stays valid, default 60000; 0 sends one already expired), `expect` (the outcome every
//!   node on the path must report, default `installed`), `wait_ms` (how long to wait for the
//!   results, default 5000). The package is staged at the origin; the others fetch it from
//!   the node before them. The report lists each node's outcome, reason and the time its
//!   result reached the origin; the check holds when every node of the path answered
//!   `expect`.
//! - `undeploy-module`: `node`, `to`, `module`, `key`, `expect` (default `removed`),
//!   `wait_ms`.
//! - `expect-module`: `from`, `to`, `module`, `present` (default true): whether every node on
//!   the path from `from` to `to` has the module installed (soft state: it goes when its
//!   lifetime passes without a refresh).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anode_emu::{Action, Next, Registry, ReportCtx, SpanError, StepArgs, StepCtx, StepOutcome};
use anode_wire::anep::TYPE_DEPLOY;
use anode_wire::deploy::{HopResult, Op, Outcome};
use ed25519_dalek::SigningKey;
use sha2::{Digest, Sha256};

use crate::deploy::{DeployEe, DeployKey, DeployPolicy, NewRequest, UnixClock};

use crate::{Category, Package};

/// Unix time (ms) of an emulated node's clock when the deployment service first reads it:
/// 2026-01-01T00:00:00Z.
pub const EPOCH_MS: u64 = 1_767_225_600_000;
const POLL: Duration = Duration::from_millis(1);

/// The emulator's deploy key (derived from a fixed string: for emulation only).
pub fn deployer() -> SigningKey {
    SigningKey::from_bytes(&Sha256::digest(b"anode emulator module deployer").into())
}

fn stranger() -> SigningKey {
    SigningKey::from_bytes(&Sha256::digest(b"anode emulator stranger").into())
}

/// The deployment policy of emulated nodes.
pub fn policy() -> DeployPolicy {
    DeployPolicy {
        keys: vec![DeployKey {
            key: deployer().verifying_key().to_bytes(),
            name: "emulator".into(),
            categories: vec![Category::Standard, Category::Function, Category::User],
        }],
        ..DeployPolicy::default()
    }
}

/// Adds the deploy steps and the deployment service on every node.
pub fn add_to(r: &mut Registry) {
    r.register(
        "deploy-module",
        "node, to, module [version] or package, [ttl_s, key, valid_ms, expect, wait_ms]",
        |a| parse(a, Op::Deploy),
    );
    r.register(
        "undeploy-module",
        "node, to, module, [key, expect, wait_ms]",
        |a| parse(a, Op::Undeploy),
    );
    r.register("expect-module", "from, to, module, [present]", parse_expect);
    r.on_node(Arc::new(|_, node| {
        let clock = UnixClock::new(node.last_now(), EPOCH_MS);
        node.register_ee(Box::new(DeployEe::new(policy(), clock)));
    }));
}

#[derive(Debug, Default)]
struct Seen {
    path: Vec<String>,
    names: Vec<(anode_wire::NodeAddr, String)>,
    results: Vec<(HopResult, Duration)>,
    error: Option<String>,
}

#[derive(Debug)]
struct Deploy {
    op: Op,
    origin: usize,
    target: usize,
    package: Option<Vec<u8>>,
    name: String,
    ttl_s: u32,
    key: SigningKey,
    valid: Duration,
    expect: Outcome,
    wait: Duration,
    sent: Option<Duration>,
    nonce: [u8; 16],
    seen: Arc<Mutex<Seen>>,
}

fn outcome(a: &StepArgs<'_>, s: &str) -> Result<Outcome, SpanError> {
    Outcome::ALL
        .into_iter()
        .find(|o| o.name() == s)
        .ok_or_else(|| {
            a.err(
                "expect",
                format!("unknown outcome '{s}'"),
                "one of installed, present, refused, failed, removed, absent",
            )
        })
}

fn parse(a: &mut StepArgs<'_>, op: Op) -> Result<Box<dyn Action>, SpanError> {
    let origin = a.node("node")?;
    let target = a.node("to")?;
    let (package, name) = if op == Op::Deploy {
        let p: Package = match a.str_opt("package")? {
            Some(path) => crate::emu::read_package(a, &path)?,
            None => crate::emu::builtin_package(a)?,
        };
        let name = p.manifest.name.clone();
        (Some(p.encode()), name)
    } else {
        (
            None,
            a.str_req("module", "the module's name, e.g. module = \"counter\"")?,
        )
    };
    let ttl_s = if op == Op::Deploy {
        a.u64_in("ttl_s", 1..=86_400)?.unwrap_or(30) as u32
    } else {
        0
    };
    let key = match a.str_opt("key")?.as_deref() {
        None | Some("deployer") => deployer(),
        Some("stranger") => stranger(),
        Some(k) => {
            return Err(a.err(
                "key",
                format!("unknown key '{k}'"),
                "\"deployer\" (trusted by every node) or \"stranger\" (trusted by none)",
            ));
        }
    };
    let valid = a.ms_opt("valid_ms")?.unwrap_or(Duration::from_secs(60));
    let default = if op == Op::Deploy {
        "installed"
    } else {
        "removed"
    };
    let expect = match a.str_opt("expect")? {
        Some(s) => outcome(a, &s)?,
        None => outcome(a, default)?,
    };
    let wait = a.ms_opt("wait_ms")?.unwrap_or(Duration::from_secs(5));
    Ok(Box::new(Deploy {
        op,
        origin,
        target,
        package,
        name,
        ttl_s,
        key,
        valid,
        expect,
        wait,
        sent: None,
        nonce: [0; 16],
        seen: Arc::default(),
    }))
}

impl Deploy {
    fn send(&mut self, ctx: &mut StepCtx<'_>) {
        let now = ctx.now();
        let nonce: [u8; 32] = Sha256::digest(format!("{:?} {}", now, self.origin)).into();
        self.nonce.copy_from_slice(&nonce[..16]);
        match ctx.path(self.origin, self.target) {
            Ok(p) => {
                let names: Vec<String> = p.iter().map(|i| ctx.node_name(*i).to_string()).collect();
                let addrs = p
                    .iter()
                    .zip(&names)
                    .filter_map(|(i, n)| Some((ctx.node_addr(*i)?, n.clone())))
                    .collect();
                if let Ok(mut s) = self.seen.lock() {
                    s.path = names;
                    s.names = addrs;
                }
            }
            Err(e) => {
                if let Ok(mut s) = self.seen.lock() {
                    s.error = Some(format!("no path: {e}"));
                }
            }
        }
        let (Some(origin), Some(target)) = (ctx.node_addr(self.origin), ctx.node_addr(self.target))
        else {
            return;
        };
        let mut req = NewRequest {
            op: self.op,
            origin,
            target,
            package: self.package.clone(),
            name: self.name.clone(),
            ttl_s: self.ttl_s,
            reply_port: 0,
            unix_ms: 0,
            valid: self.valid,
            nonce: self.nonce,
            rb: 0,
            repo: String::new(),
        };
        let (key, seen) = (self.key.clone(), Arc::clone(&self.seen));
        ctx.with_node(
            self.origin,
            Box::new(move |node, at| {
                req.rb = node.config().default_rb;
                let r = node.with_ee(at, TYPE_DEPLOY, |ee, _| {
                    let d = ee
                        .as_any_mut()
                        .downcast_mut::<DeployEe>()
                        .ok_or("the node's deploy EE is not the deployment service")?;
                    req.unix_ms = d.unix_ms(at);
                    if let Some(p) = &req.package {
                        d.stage(p.clone())?;
                    }
                    req.build(&key).map_err(|e| e.to_string())
                });
                let r = match r {
                    Some(Ok((_, pkt))) => node
                        .inject(at, pkt)
                        .map_err(|e| format!("the origin dropped the request: {e:?}")),
                    Some(Err(e)) => Err(e.to_string()),
                    None => Err("the node runs no deployment service".into()),
                };
                if let (Err(e), Ok(mut s)) = (r, seen.lock()) {
                    s.error = Some(e);
                }
            }),
        );
    }

    fn collect(&self, ctx: &mut StepCtx<'_>) {
        let (nonce, seen) = (self.nonce, Arc::clone(&self.seen));
        let sent = self.sent.unwrap_or_default();
        let t = ctx.now().saturating_sub(sent);
        ctx.with_node(
            self.origin,
            Box::new(move |node, at| {
                let got = node
                    .with_ee(at, TYPE_DEPLOY, |ee, _| {
                        ee.as_any_mut()
                            .downcast_mut::<DeployEe>()
                            .map(|d| d.results_for(&nonce))
                    })
                    .flatten()
                    .unwrap_or_default();
                if let Ok(mut s) = seen.lock() {
                    for r in got.into_iter().skip(s.results.len()) {
                        s.results.push((r, t));
                    }
                }
            }),
        );
    }
}

impl Action for Deploy {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        let now = ctx.now();
        let Some(sent) = self.sent else {
            self.sent = Some(now);
            self.send(ctx);
            return Next::After(POLL);
        };
        self.collect(ctx);
        let done = self.seen.lock().is_ok_and(|s| {
            s.error.is_some() || (!s.path.is_empty() && s.results.len() >= s.path.len())
        });
        if done || now.saturating_sub(sent) >= self.wait {
            Next::Done
        } else {
            Next::After(POLL)
        }
    }

    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome {
        let s = self.seen.lock().map(|s| Seen {
            path: s.path.clone(),
            names: s.names.clone(),
            results: s.results.clone(),
            error: s.error.clone(),
        });
        let s = s.unwrap_or_default();
        let name_of = |a: anode_wire::NodeAddr| {
            s.names
                .iter()
                .find(|(x, _)| *x == a)
                .map_or_else(|| a.to_string(), |(_, n)| n.clone())
        };
        let mut sorted = s.results.clone();
        sorted.sort_by_key(|(r, _)| r.hop);
        let details: Vec<String> = sorted
            .iter()
            .map(|(r, t)| {
                format!(
                    "hop {} {}: {}{} (at {:.1} ms)",
                    r.hop,
                    name_of(r.node),
                    r.outcome.name(),
                    if r.reason.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", r.reason)
                    },
                    t.as_secs_f64() * 1e3
                )
            })
            .collect();
        let all = !s.path.is_empty()
            && sorted.len() == s.path.len()
            && sorted.iter().all(|(r, _)| r.outcome == self.expect);
        let last_ms = sorted
            .iter()
            .map(|(_, t)| t.as_secs_f64() * 1e3)
            .fold(0.0, f64::max);
        let message = match &s.error {
            Some(e) => format!("error: {e}"),
            None => format!(
                "{} of {} nodes on the path answered, {} of them {} (last result after {:.1} ms)",
                sorted.len(),
                s.path.len(),
                sorted
                    .iter()
                    .filter(|(r, _)| r.outcome == self.expect)
                    .count(),
                self.expect.name(),
                last_ms
            ),
        };
        let hops: Vec<serde_json::Value> = sorted
            .iter()
            .map(|(r, t)| {
                serde_json::json!({
                    "hop": r.hop, "node": name_of(r.node), "outcome": r.outcome.name(),
                    "reason": r.reason, "elapsed_us": r.elapsed_us,
                    "t_ms": (t.as_secs_f64() * 1e6).round() / 1e3,
                })
            })
            .collect();
        StepOutcome {
            summary: format!(
                "{}-module {} {} -> {}: {message}",
                self.op.name(),
                self.name,
                ctx.node_name(self.origin),
                ctx.node_name(self.target)
            ),
            details,
            check: Some(anode_emu::Check {
                passed: s.error.is_none() && all,
                message: message.clone(),
            }),
            data: serde_json::json!({
                "module": self.name, "path": s.path, "hops": hops, "last_ms": last_ms,
            }),
        }
    }
}

#[derive(Debug)]
struct ExpectModule {
    from: usize,
    to: usize,
    module: String,
    present: bool,
    found: Arc<Mutex<Vec<(String, bool)>>>,
    error: Option<String>,
}

fn parse_expect(a: &mut StepArgs<'_>) -> Result<Box<dyn Action>, SpanError> {
    Ok(Box::new(ExpectModule {
        from: a.node("from")?,
        to: a.node("to")?,
        module: a.str_req("module", "the module's name")?,
        present: a.bool_opt("present")?.unwrap_or(true),
        found: Arc::default(),
        error: None,
    }))
}

impl Action for ExpectModule {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        let path = match ctx.path(self.from, self.to) {
            Ok(p) => p,
            Err(e) => {
                self.error = Some(e);
                return Next::Done;
            }
        };
        for i in path {
            let (name, module, found) = (
                ctx.node_name(i).to_string(),
                self.module.clone(),
                Arc::clone(&self.found),
            );
            ctx.with_node(
                i,
                Box::new(move |node, _| {
                    let has = crate::host_mut(node).is_some_and(|h| h.state(&module).is_some());
                    if let Ok(mut f) = found.lock() {
                        f.push((name, has));
                    }
                }),
            );
        }
        Next::Done
    }

    fn report(&self, _ctx: &ReportCtx<'_>) -> StepOutcome {
        let found = self.found.lock().map(|f| f.clone()).unwrap_or_default();
        let wrong: Vec<&str> = found
            .iter()
            .filter(|(_, has)| *has != self.present)
            .map(|(n, _)| n.as_str())
            .collect();
        let ok = self.error.is_none() && !found.is_empty() && wrong.is_empty();
        let message = match &self.error {
            Some(e) => format!("no path: {e}"),
            None if wrong.is_empty() => format!(
                "{} {} at all {} nodes of the path",
                self.module,
                if self.present { "installed" } else { "absent" },
                found.len()
            ),
            None => format!(
                "{} {} at {}",
                self.module,
                if self.present {
                    "missing"
                } else {
                    "still installed"
                },
                wrong.join(", ")
            ),
        };
        StepOutcome {
            summary: format!("expect-module: {message}"),
            details: Vec::new(),
            check: Some(anode_emu::Check {
                passed: ok,
                message,
            }),
            data: serde_json::json!({ "module": self.module, "present": self.present, "nodes": found.len(), "wrong": wrong }),
        }
    }
}
