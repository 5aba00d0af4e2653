//! The forwarders an experiment puts in the middle host of a line `s - r - d` for
//! offered-load probes: the kernel, the C forwarder of `../shared/baselines`, and the real
//! `anode node` on its fast path, with the null service module in the packet path, or with
//! the capsule EE running `protocols::FORWARD` on every packet.

use std::time::Duration;

use super::common::PORT;
use crate::harness::netns::Line;
use crate::harness::procs::{self, Child, Node};
use crate::harness::traffic::{self, Path};
use crate::{Ctx, ExpError};

/// What forwards in r.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fwd {
    /// Kernel IP forwarding.
    Kernel,
    /// `fwd R D mmsg` (recvmmsg/sendmmsg in batches).
    Cfwd,
    /// `anode node`, no modules, its default data plane: passive transit on the kernel fast
    /// path (eBPF at TC ingress; the experiments run as root in namespaces, where it loads).
    Anode,
    /// `anode node` with the null module (a WebAssembly packet processor matching every
    /// packet) installed and started at startup.
    AnodeModule,
    /// `anode node` with `protocols::FORWARD` in its code cache; the blaster sends capsules
    /// evaluated at every hop.
    AnodeCapsule,
}

impl Fwd {
    /// Its label in tables and plots.
    pub fn label(self) -> &'static str {
        match self {
            Fwd::Kernel => "kernel IP forwarding",
            Fwd::Cfwd => "C forwarder (fwd mmsg)",
            Fwd::Anode => "anode node, fast path (no modules; default data plane: in the kernel)",
            Fwd::AnodeModule => "anode node + null module",
            Fwd::AnodeCapsule => "anode node, capsule EE (code run per packet)",
        }
    }
}

/// A forwarder running in r (stopped when dropped; nothing runs for the kernel).
#[derive(Debug, Default)]
pub struct Running {
    _process: Option<Child>,
    _node: Option<Node>,
}

/// Builds the C baselines into the work directory: the path of `fwd`.
fn cfwd_binary(ctx: &Ctx<'_>) -> Result<std::path::PathBuf, ExpError> {
    let dir = ctx.baselines.clone().ok_or_else(|| ExpError::Missing {
        what: "the C baselines (../shared/baselines)".into(),
        path: "../shared/baselines".into(),
        hint: "run from the repository (with ../shared beside it) or pass --baselines DIR".into(),
    })?;
    let out = ctx.work.join("c");
    let fwd = out.join("fwd");
    if !fwd.is_file() {
        std::fs::create_dir_all(&out).map_err(|err| ExpError::Write {
            path: out.clone(),
            err,
        })?;
        let (d, o) = (
            dir.to_string_lossy().into_owned(),
            format!("O={}", out.display()),
        );
        anode_lab::sys::run(
            "make",
            &["-s", "-C", &d, &o],
            None,
            "building the C baselines",
            Duration::from_secs(120),
        )?;
    }
    Ok(fwd)
}

/// The null module, signed with a fresh key: (config section for `[modules]`, package).
fn null_module(ctx: &Ctx<'_>) -> Result<String, ExpError> {
    let key = ctx.work.join("publisher");
    let pkg = ctx.work.join("null.amod");
    let (k, p) = (
        key.to_string_lossy().into_owned(),
        pkg.to_string_lossy().into_owned(),
    );
    let t = Duration::from_secs(30);
    procs::client(ctx, &["keygen", "--out", &k], t)?;
    procs::client(
        ctx,
        &["module", "pack", "--builtin", "null", "--out", &p],
        t,
    )?;
    procs::client(
        ctx,
        &["module", "sign", &p, "--key", &format!("{k}.key")],
        t,
    )?;
    let hex = std::fs::read_to_string(format!("{k}.pub")).map_err(|err| ExpError::Write {
        path: key.clone(),
        err,
    })?;
    Ok(format!(
        "\n[modules]\ntrusted_keys = [\"{}\"]\nstate_dir = \"{}\"\n\n[[module]]\npackage = \"{p}\"\n",
        hex.trim(),
        ctx.work.join("mods-state").display()
    ))
}

/// Output bandwidth a capsule protocol gets in the experiments: 10 Gbit/s, so the node's
/// speed is measured, not the default 2 MB/s per-protocol cap that holds a storm to a share
/// of the node (docs/security.md).
pub const CAPSULE_BANDWIDTH: u64 = 1_250_000_000;

/// A `[nodeos]` section whose policy file lifts the per-protocol bandwidth cap.
pub fn unthrottled_capsules(ctx: &Ctx<'_>) -> Result<String, ExpError> {
    let path = ctx.work.join("policy.toml");
    let text = format!(
        "[\"capsule/*\"]\nchannel_bandwidth = {CAPSULE_BANDWIDTH}\nmemory_bytes = 16777216\ncode_bytes = 4194304\n"
    );
    std::fs::write(&path, text).map_err(|err| ExpError::Write {
        path: path.clone(),
        err,
    })?;
    Ok(format!("\n[nodeos]\npolicy = \"{}\"\n", path.display()))
}

/// Puts `protocols::FORWARD` into `node`'s code cache (`anode code put forward`), so
/// capsules naming it run there without a code load.
pub fn put_forward(ctx: &Ctx<'_>, node: &Node) -> Result<(), ExpError> {
    let sock = node.socket.to_string_lossy().into_owned();
    procs::client(
        ctx,
        &["code", "put", "forward", "--socket", &sock],
        Duration::from_secs(10),
    )?;
    Ok(())
}

/// Starts `f` in host 1 of `line` (for at most `secs` seconds where the forwarder needs a
/// bound) and returns it with the path probes take through it.
pub fn start<'l>(
    ctx: &Ctx<'_>,
    line: &'l Line,
    f: Fwd,
    secs: u64,
) -> Result<(Running, Path<'l>), ExpError> {
    let (s, r, d) = (
        format!("{}:{PORT}", line.addr(0)),
        format!("{}:{PORT}", line.addr(1)),
        format!("{}:{PORT}", line.addr(2)),
    );
    line.forwarding(f == Fwd::Kernel)?;
    let path = |dst: &str| Path {
        line,
        dst: dst.to_string(),
        to: d.clone(),
        capsule: f == Fwd::AnodeCapsule,
    };
    match f {
        Fwd::Kernel => Ok((Running::default(), path(&d))),
        Fwd::Cfwd => {
            let bin = cfwd_binary(ctx)?;
            let c = procs::spawn(
                ctx,
                Some(line.ns(1)),
                "cfwd",
                &bin,
                &[&r, &d, "mmsg", &secs.to_string()],
            )?;
            std::thread::sleep(Duration::from_millis(200));
            Ok((
                Running {
                    _process: Some(c),
                    _node: None,
                },
                path(&r),
            ))
        }
        Fwd::Anode | Fwd::AnodeModule | Fwd::AnodeCapsule => {
            let extra = match f {
                Fwd::AnodeModule => null_module(ctx)?,
                Fwd::AnodeCapsule => unthrottled_capsules(ctx)?,
                _ => String::new(),
            };
            let cfg = procs::node_config(ctx, "r", &r, &[&s, &d], &extra);
            let node = procs::start_node(ctx, Some(line.ns(1)), "r", &r, &cfg)?;
            if f == Fwd::AnodeCapsule {
                put_forward(ctx, &node)?;
            }
            Ok((
                Running {
                    _process: None,
                    _node: Some(node),
                },
                path(&r),
            ))
        }
    }
}

/// MLFFR by forwarder: (forwarder, [(IP size, pps)]) in order.
pub type Rates = Vec<(Fwd, Vec<[f64; 2]>)>;

/// Forwarders whose full-speed probe was already loss-free, with the IP size (their MLFFR
/// is a lower bound: the sender was the limit).
pub type SenderLimited = Vec<(Fwd, usize)>;

/// The MLFFR of each forwarder in turn in the middle of one fresh line `s - r - d`, at the
/// UDP payload sizes `sizes(f)`.
pub fn mlffr_all(
    ctx: &Ctx<'_>,
    tag: &str,
    fwds: &[Fwd],
    sizes: &dyn Fn(Fwd) -> Vec<usize>,
) -> Result<(Rates, SenderLimited), ExpError> {
    let secs = ctx.pick(2.0, 1.0);
    let steps = ctx.pick(7, 5);
    let line = Line::up(tag, 1)?;
    let (mut out, mut limited) = (Vec::new(), Vec::new());
    for &f in fwds {
        let sz = sizes(f);
        let budget = (sz.len() as u64) * u64::from(steps + 1) * (secs as u64 + 8) + 10;
        let (_running, path) = start(ctx, &line, f, budget)?;
        let mut pts = Vec::new();
        for &size in &sz {
            ctx.say(&format!("{}: {size} B", f.label()));
            let (rate, probes) = traffic::mlffr(ctx, &path, size, secs, steps)?;
            if probes.len() == 1 {
                limited.push((f, size + 28));
            }
            ctx.say(&format!(
                "{}: {size} B loss-free up to {rate:.0} pps",
                f.label()
            ));
            pts.push([(size + 28) as f64, rate]);
        }
        out.push((f, pts));
    }
    Ok((out, limited))
}
