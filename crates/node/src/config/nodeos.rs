//! `[nodeos]`: how the node's execution environments run under the NodeOS layer
//! (`anode-nodeos`): domains per protocol, deficit round robin over them, memory bounds,
//! termination of hostile domains.
//!
//! ```toml
//! [nodeos]
//! # enabled = true            # false: the EEs run bare (no domains, nothing enforced)
//! # policy = "policies.toml"  # principal policies (relative to this file); see below
//! # memory_bytes = 268435456  # total memory of all domains of both EEs (256 MiB)
//! # terminate = true          # false: hostile domains are only throttled
//! # cpu_percent = 50          # CPU each EE may use, % of one core (of each of the
//! #                            # [capsule] workers cores for the capsule EE)
//! # trusted_keys = ["HEX"]    # keys whose signed policies this node accepts (`anode keygen`)
//! # signed = ["p.signed"]     # signed policy files (`anode policy sign`)
//! # cut_channels = 4096       # cut-through channels open at once, per EE
//! # cut_channels_per_domain = 256  # ... per domain (one capsule protocol, one PLAN source)
//! ```
//!
//! The policy file is TOML, one table per principal (`anode_nodeos::PolicyStore`):
//! `[capsule]` and `[plan]` are the EEs' own domains (their `memory_bytes` together must fit
//! in `[nodeos] memory_bytes`; by default the capsule EE gets 3/4, PLAN 1/4);
//! `["capsule/<sha256 hex of the code>"]` is one capsule protocol and `["capsule/*"]` every
//! capsule protocol without a table of its own; `["plan/<source address>"]` and `["plan/*"]`
//! the same for PLAN packets by source node (unauthenticated: the address is the packet's
//! claim), `["plan/unauthenticated"]` all of them together (their group: one CPU share, one
//! memory pool, one output bandwidth, `max_children` sources at once; by default the PLAN
//! EE's limits with a CPU share of 1); `["plan/key/<hex of an ed25519 public key>"]` names a
//! signer, whose signed PLAN packets run in its domain (`anode_nodeos::plan`). A protocol's policy must fit within its EE's.
//! A signed policy (`anode_nodeos::SignedPolicy`) is accepted only if signed, intact and
//! signed by one of `trusted_keys`; the refusal names which of the three failed.
//!
//! Contract: [`check`] returns settings that build guards without error, or a problem placed
//! at the `[nodeos]` key at fault; a policy file's own errors are named with the policy
//! file's path, line and column inside the message.

use std::path::{Path, PathBuf};

use anode_nodeos::{Policy, PolicyStore, Principal};
use serde::Deserialize;
use toml::Spanned;

use super::check::Problem;
use super::locate::{Pos, key_pos, pos_of, section_pos};

/// The capsule EE's own principal.
pub const CAPSULE_EE: &str = "capsule";
/// The PLAN EE's own principal.
pub const PLAN_EE: &str = "plan";
/// The policy of capsule protocols without one of their own.
pub const CAPSULE_DEFAULT: &str = "capsule/*";
/// The policy of PLAN sources without one of their own.
pub const PLAN_DEFAULT: &str = "plan/*";

/// Smallest total memory bound (enough for a few protocols' code).
const MIN_MEMORY: u64 = 4 << 20;
/// Default total memory bound.
const DEFAULT_MEMORY: u64 = 256 << 20;
/// Cut-through channels per EE by default.
const DEFAULT_CUT_CHANNELS: usize = 4096;
/// Cut-through channels per domain by default.
const DEFAULT_CUT_PER_DOMAIN: usize = 256;
/// Most cut-through channels per EE a config may ask for.
const MAX_CUT_CHANNELS: u32 = 1 << 20;
/// Child domains an EE's default policy allows (protocols / sources at once).
const DEFAULT_CHILDREN: u32 = 4096;
/// Output bandwidth of a protocol or PLAN source without a policy of its own, bytes per
/// second: 2 MB/s (16 Mbit/s, about 7,800 capsules of 256 B a second), a burst of 200 KB.
/// This is what holds a storm (a capsule copying itself to every neighbor, each copy with
/// half the resource bound left) to a share of the node: at the former 125 MB/s a storm took
/// a benign flow through the node to 0%, at 4 MB/s to 0-36% (storm injected at 3,000
/// capsules/s on the 2-core test machine), at 2 MB/s it keeps 100% (tests/hostile.rs).
/// `Policy::default()`'s 1 MB/s cut `anode flood` off after its first 100 KB burst. A node
/// that carries faster protocols names them, or raises `["capsule/*"]`, in its policy file.
pub const DEFAULT_PROTOCOL_BANDWIDTH: u64 = 2_000_000;

/// The policy of a protocol (or PLAN source) the policy file does not name.
pub fn protocol_default() -> Policy {
    Policy {
        channel_bandwidth: DEFAULT_PROTOCOL_BANDWIDTH,
        ..Policy::default()
    }
}

/// `[nodeos]` as written (also the router's `[node.nodeos]`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNodeOs {
    pub enabled: Option<bool>,
    pub policy: Option<Spanned<String>>,
    pub memory_bytes: Option<Spanned<u64>>,
    pub terminate: Option<bool>,
    pub cpu_percent: Option<Spanned<u32>>,
    pub trusted_keys: Option<Spanned<Vec<String>>>,
    pub signed: Option<Spanned<Vec<String>>>,
    pub cut_channels: Option<Spanned<u32>>,
    pub cut_channels_per_domain: Option<Spanned<u32>>,
}

/// The checked `[nodeos]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOsFile {
    /// Whether the EEs run under the NodeOS.
    pub enabled: bool,
    /// The policy file, if one is given.
    pub policy_file: Option<PathBuf>,
    /// Every principal's policy, the EEs' own and the protocol defaults filled in.
    pub policies: PolicyStore,
    /// Total memory of all domains, bytes.
    pub memory_bytes: u64,
    /// Whether hostile domains are terminated (else only throttled).
    pub terminate: bool,
    /// CPU capacity of each EE, ns per second.
    pub cpu_ns_per_sec: u64,
    /// The signed policy files accepted (principal, file).
    pub signed: Vec<(String, PathBuf)>,
    /// Cut-through channels open at once, per EE (NodeOS cutChan; `anode channels`).
    pub cut_channels: usize,
    /// Cut-through channels one domain may hold open at once.
    pub cut_channels_per_domain: usize,
}

impl NodeOsFile {
    /// The policy of `principal` (every principal [`check`] returns has one).
    pub fn policy(&self, principal: &str) -> Policy {
        self.policies
            .get(&Principal(principal.to_string()))
            .cloned()
            .unwrap_or_default()
    }
}

impl Default for NodeOsFile {
    fn default() -> Self {
        let mut policies = PolicyStore::new();
        fill_defaults(&mut policies, DEFAULT_MEMORY);
        NodeOsFile {
            enabled: true,
            policy_file: None,
            policies,
            memory_bytes: DEFAULT_MEMORY,
            terminate: true,
            cpu_ns_per_sec: 500_000_000,
            signed: Vec::new(),
            cut_channels: DEFAULT_CUT_CHANNELS,
            cut_channels_per_domain: DEFAULT_CUT_PER_DOMAIN,
        }
    }
}

/// An EE's own policy when the file has none: `memory` bytes, many children, any channel.
fn ee_policy(memory: u64) -> Policy {
    Policy {
        cpu_share: 1024,
        memory_bytes: memory,
        soft_state_bytes: memory,
        code_bytes: memory,
        channel_bandwidth: u64::MAX,
        max_children: DEFAULT_CHILDREN,
        max_channels: 1024,
        channels: vec!["*".into()],
    }
}

fn fill_defaults(p: &mut PolicyStore, total: u64) {
    let capsule = total / 4 * 3;
    for (name, pol) in [
        (CAPSULE_EE, ee_policy(capsule)),
        (PLAN_EE, ee_policy(total - capsule)),
    ] {
        if p.get(&Principal(name.into())).is_none() {
            p.insert(name, pol);
        }
    }
    // A protocol default never asks for more bandwidth than its EE's policy gives.
    for (name, ee) in [(CAPSULE_DEFAULT, CAPSULE_EE), (PLAN_DEFAULT, PLAN_EE)] {
        if p.get(&Principal(name.into())).is_none() {
            let mut pol = protocol_default();
            if let Some(parent) = p.get(&Principal(ee.into())) {
                pol.channel_bandwidth = pol.channel_bandwidth.min(parent.channel_bandwidth);
            }
            p.insert(name, pol);
        }
    }
}

/// Where `principal`'s table header is in a policy file, if written.
fn table_pos(text: &str, principal: &str) -> Pos {
    section_pos(text, principal)
        .or_else(|| section_pos(text, &format!("\"{principal}\"")))
        .unwrap_or(Pos { line: 1, col: 1 })
}

/// Checks `[nodeos]` of the node file at `path` (text `text`).
pub(super) fn check(path: &Path, text: &str, raw: &RawNodeOs) -> Result<NodeOsFile, Problem> {
    let at = |s: usize, what: String, fix: &str| Problem {
        pos: pos_of(text, s),
        what,
        fix: fix.to_string(),
    };
    let memory_bytes = match &raw.memory_bytes {
        Some(m) if *m.get_ref() < MIN_MEMORY => {
            return Err(at(
                m.span().start,
                format!(
                    "[nodeos] memory_bytes {} is below the smallest bound, {MIN_MEMORY}",
                    m.get_ref()
                ),
                "give at least 4194304 (4 MiB), or leave memory_bytes out for 256 MiB",
            ));
        }
        Some(m) => *m.get_ref(),
        None => DEFAULT_MEMORY,
    };
    let cpu_ns_per_sec = match &raw.cpu_percent {
        Some(c) if !(1..=100).contains(c.get_ref()) => {
            return Err(at(
                c.span().start,
                format!("[nodeos] cpu_percent {} is outside 1..=100", c.get_ref()),
                "give the share of one core each EE may use, e.g. cpu_percent = 50",
            ));
        }
        Some(c) => u64::from(*c.get_ref()) * 10_000_000,
        None => 500_000_000,
    };
    let (policy_file, ptext, mut policies) = match &raw.policy {
        None => (None, String::new(), PolicyStore::new()),
        Some(p) => {
            let file = resolve(path, p.get_ref());
            let (ptext, store) =
                read_policies(&file).map_err(|(what, fix)| at(p.span().start, what, &fix))?;
            (Some(file), ptext, store)
        }
    };
    let written: Vec<String> = policies.iter().map(|(n, _)| n.clone()).collect();
    let signed = check_signed(path, text, raw, &mut policies)?;
    fill_defaults(&mut policies, memory_bytes);
    check_principals(policy_file.as_deref(), &ptext, &written, &signed, &policies).map_err(
        |(what, fix)| {
            let s = raw.policy.as_ref().map_or(0, |p| p.span().start);
            at(s, what, &fix)
        },
    )?;
    check_shares(&policies, memory_bytes, policy_file.as_deref()).map_err(|(what, fix)| {
        let pos = raw
            .memory_bytes
            .as_ref()
            .map(|m| pos_of(text, m.span().start))
            .or_else(|| raw.policy.as_ref().map(|p| pos_of(text, p.span().start)))
            .or_else(|| key_pos(text, "nodeos", "memory_bytes"))
            .unwrap_or(Pos { line: 1, col: 1 });
        Problem { pos, what, fix }
    })?;
    let count = |v: &Option<Spanned<u32>>, key: &str, default: usize| match v {
        Some(c) if !(1..=MAX_CUT_CHANNELS).contains(c.get_ref()) => Err(at(
            c.span().start,
            format!(
                "[nodeos] {key} {} is outside 1..={MAX_CUT_CHANNELS}",
                c.get_ref()
            ),
            "give how many cut-through channels may be open at once, e.g. 4096",
        )),
        Some(c) => Ok(*c.get_ref() as usize),
        None => Ok(default),
    };
    let cut_channels = count(&raw.cut_channels, "cut_channels", DEFAULT_CUT_CHANNELS)?;
    let cut_channels_per_domain = count(
        &raw.cut_channels_per_domain,
        "cut_channels_per_domain",
        DEFAULT_CUT_PER_DOMAIN,
    )?;
    Ok(NodeOsFile {
        cut_channels,
        cut_channels_per_domain,
        enabled: raw.enabled.unwrap_or(true),
        policy_file,
        policies,
        memory_bytes,
        terminate: raw.terminate.unwrap_or(true),
        cpu_ns_per_sec,
        signed,
    })
}

/// `trusted_keys` and `signed`: every signed policy file must verify under a trusted key; its
/// policy joins `policies` (a principal may have only one policy).
fn check_signed(
    path: &Path,
    text: &str,
    raw: &RawNodeOs,
    policies: &mut PolicyStore,
) -> Result<Vec<(String, PathBuf)>, Problem> {
    let at = |s: usize, what: String, fix: &str| Problem {
        pos: pos_of(text, s),
        what,
        fix: fix.to_string(),
    };
    let mut keys = Vec::new();
    if let Some(k) = &raw.trusted_keys {
        for hexkey in k.get_ref() {
            keys.push(anode_modules::parse_public(hexkey).map_err(|e| {
                at(
                    k.span().start,
                    format!("[nodeos] trusted_keys: {e}"),
                    "give the 64 hex digits of a public key (the BASE.pub file `anode keygen` writes)",
                )
            })?);
        }
    }
    let Some(files) = &raw.signed else {
        return Ok(Vec::new());
    };
    let s = files.span().start;
    if keys.is_empty() && !files.get_ref().is_empty() {
        return Err(at(
            s,
            "[nodeos] signed lists signed policies but trusted_keys names no key to check them with".into(),
            "add trusted_keys = [\"HEX\"] with the signers' public keys (BASE.pub of `anode keygen`)",
        ));
    }
    let mut out = Vec::new();
    for f in files.get_ref() {
        let file = resolve(path, f);
        let body = std::fs::read_to_string(&file).map_err(|e| {
            at(
                s,
                format!("cannot read the signed policy {} ({e})", file.display()),
                "check the path (relative paths start at this config file's directory)",
            )
        })?;
        let sp = anode_nodeos::SignedPolicy::from_toml(&body)
            .and_then(|sp| sp.verify(&keys).map(|()| sp))
            .map_err(|e| {
                use anode_nodeos::SignedPolicyError as E;
                let fix = match &e {
                    E::Malformed(_) => "make it with `anode policy sign`",
                    E::Unsigned { .. } => "sign it with `anode policy sign --key BASE.key`",
                    E::Tampered { .. } => {
                        "restore the file as signed, or sign the changed policy again"
                    }
                    E::Untrusted { .. } => {
                        "add the signer's key to [nodeos] trusted_keys if you trust it, or have a trusted key sign it"
                    }
                };
                at(s, format!("signed policy {}: {e}", file.display()), fix)
            })?;
        let p = Principal(sp.principal.clone());
        if policies.get(&p).is_some() {
            return Err(at(
                s,
                format!(
                    "signed policy {} is for {:?}, which already has a policy",
                    file.display(),
                    sp.principal
                ),
                "keep one policy per principal: remove it from the policy file or from signed",
            ));
        }
        policies.insert(&sp.principal, sp.policy);
        out.push((sp.principal, file));
    }
    Ok(out)
}

fn resolve(path: &Path, given: &str) -> PathBuf {
    let p = Path::new(given.trim());
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        path.parent().unwrap_or(Path::new(".")).join(p)
    }
}

type Why = (String, String);

fn read_policies(file: &Path) -> Result<(String, PolicyStore), Why> {
    let ptext = std::fs::read_to_string(file).map_err(|e| {
        (
            format!("cannot read the policy file {} ({e})", file.display()),
            "check the path (relative paths start at this config file's directory), or remove policy to use the defaults".to_string(),
        )
    })?;
    let store: PolicyStore = toml::from_str(&ptext).map_err(|e| {
        let pos = pos_of(&ptext, e.span().map_or(0, |s| s.start));
        (
            format!(
                "policy file {}:{}:{}: {}",
                file.display(),
                pos.line,
                pos.col,
                e.message().trim().replace('\n', " ")
            ),
            "write one [principal] table per principal with the keys cpu_share, memory_bytes, soft_state_bytes, code_bytes, channel_bandwidth, max_children, max_channels, channels".to_string(),
        )
    })?;
    Ok((ptext, store))
}

pub use anode_nodeos::plan::UNAUTHENTICATED;

/// Whether `name` is an unauthenticated PLAN source's principal (`plan/<address>`, `plan/*`).
fn is_plan_source(name: &str) -> bool {
    name.strip_prefix("plan/")
        .is_some_and(|r| r == "*" || r.parse::<anode_wire::NodeAddr>().is_ok())
}

/// The one rule for principal names, shared by node config files and `anode policy sign`:
/// the EEs `capsule` and `plan`; a capsule protocol `capsule/<64 hex digits of its code's
/// SHA-256>` or `capsule/*`; a PLAN source `plan/<IP:PORT>` or `plan/*` (unauthenticated)
/// or a PLAN signer `plan/key/<64 hex digits of an ed25519 public key>`. `None` when `name`
/// is one, else why not (a name that cannot match any domain would silently never apply).
pub fn principal_problem(name: &str) -> Option<String> {
    let hex64 = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    let ok = match name.split_once('/') {
        None => name == CAPSULE_EE || name == PLAN_EE,
        Some((CAPSULE_EE, rest)) => rest == "*" || hex64(rest),
        Some((PLAN_EE, rest)) => match rest.strip_prefix("key/") {
            Some(k) if hex64(k) => {
                return anode_modules::parse_public(k).err().map(|e| {
                    format!("principal {name:?}: {e} (a signer is named by its public key, the BASE.pub file `anode keygen` writes)")
                });
            }
            Some(_) => false,
            None => name == UNAUTHENTICATED || is_plan_source(name),
        },
        Some(_) => false,
    };
    (!ok).then(|| {
        format!(
            "principal {name:?} names no principal a node knows: use \"capsule\" or \"plan\" (the EEs), \"capsule/<sha256 hex of the code>\" or \"capsule/*\" (capsule protocols), \"plan/<IP:PORT>\" or \"plan/*\" (unauthenticated PLAN sources), \"plan/unauthenticated\" (all of them together), \"plan/key/<ed25519 public key hex>\" (PLAN packets signed by that key)"
        )
    })
}

/// Every principal is an EE or a protocol of one, and fits within its EE's policy.
/// `written`: the principals the policy file names (the others are defaults).
fn check_principals(
    file: Option<&Path>,
    ptext: &str,
    written: &[String],
    signed: &[(String, PathBuf)],
    store: &PolicyStore,
) -> Result<(), Why> {
    for (name, pol) in store.iter() {
        let signed_in = signed.iter().find(|(p, _)| p == name).map(|(_, f)| f);
        let here = |what: String, fix: &str| match file.filter(|_| written.contains(name)) {
            _ if signed_in.is_some() => (
                format!(
                    "signed policy {}: {what}",
                    signed_in.map_or(String::new(), |f| f.display().to_string())
                ),
                format!("{fix} (and sign it again)"),
            ),
            Some(f) => {
                let pos = table_pos(ptext, name);
                (
                    format!(
                        "policy file {}:{}:{}: {what}",
                        f.display(),
                        pos.line,
                        pos.col
                    ),
                    fix.to_string(),
                )
            }
            None => (
                format!("the default policy of {name:?}: {what}"),
                format!("{fix}; or write a [\"{name}\"] table in the policy file"),
            ),
        };
        if let Some(why) = principal_problem(name) {
            return Err(here(
                why,
                "name the EEs \"capsule\" and \"plan\", capsule protocols \"capsule/<sha256 hex>\" (or \"capsule/*\"), PLAN sources \"plan/<address>\" (or \"plan/*\"), PLAN signers \"plan/key/<public key hex>\"",
            ));
        }
        let Some((ee, _)) = name.split_once('/') else {
            if pol.max_children == 0 {
                return Err(here(
                    format!("[{name}] allows no child domains, so no protocol could run"),
                    "set max_children to the number of protocols (or sources) it may run at once, e.g. 4096",
                ));
            }
            continue;
        };
        if name == UNAUTHENTICATED && pol.max_children == 0 {
            return Err(here(
                format!(
                    "[\"{name}\"] allows no child domains, so no unsigned PLAN packet could run"
                ),
                "set max_children to the number of sources it may run at once, e.g. 4096",
            ));
        }
        // Unauthenticated PLAN sources live in the group's domain when it has a table.
        let parent_name = match store.get(&Principal(UNAUTHENTICATED.into())) {
            Some(_) if is_plan_source(name) => UNAUTHENTICATED,
            _ => ee,
        };
        let parent = store
            .get(&Principal(parent_name.to_string()))
            .cloned()
            .unwrap_or_default();
        if let Err(e) = pol.within(&parent) {
            let whose = if parent_name == ee {
                format!("the {ee} EE")
            } else {
                format!("[\"{parent_name}\"] (all unauthenticated PLAN sources together)")
            };
            return Err(here(
                format!("[\"{name}\"] asks for more than {whose} has: {e}"),
                &format!("lower it, or raise the [\"{parent_name}\"] table's limits"),
            ));
        }
    }
    Ok(())
}

/// The EEs' own memory fits the node's total.
fn check_shares(p: &PolicyStore, total: u64, file: Option<&Path>) -> Result<(), Why> {
    let mem = |n: &str| p.get(&Principal(n.into())).map_or(0, |x| x.memory_bytes);
    let (c, pl) = (mem(CAPSULE_EE), mem(PLAN_EE));
    if c.saturating_add(pl) > total {
        let src = file.map_or("the defaults".to_string(), |f| f.display().to_string());
        return Err((
            format!(
                "the EEs' policies ({src}) give capsule {c} and plan {pl} bytes, more than [nodeos] memory_bytes {total} together"
            ),
            "raise [nodeos] memory_bytes, or lower memory_bytes in the policy file's [capsule] and [plan] tables".to_string(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{ConfigFileError, parse};
    use super::*;

    /// A capsule protocol's principal (its code hash).
    const AB: &str = "capsule/abababababababababababababababababababababababababababababababab";

    #[test]
    fn principal_names() {
        for good in [
            "capsule",
            "plan",
            "capsule/*",
            "plan/*",
            AB,
            "plan/198.18.0.1:3322",
            "plan/unauthenticated",
        ] {
            assert_eq!(principal_problem(good), None, "{good}");
        }
        let key = ed25519_dalek::SigningKey::from_bytes(&[1; 32]).verifying_key();
        let signer = format!("plan/key/{}", hex::encode(key.to_bytes()));
        assert_eq!(principal_problem(&signer), None);
        for bad in [
            "capsul/*",
            "capsule/ab",
            "plan/nowhere",
            "plan/key/ab",
            "plan/key/*",
            "ee",
            "capsule/",
            "x/y",
        ] {
            assert!(principal_problem(bad).is_some(), "{bad}");
        }
    }

    const NODE: &str = "[node]\naddress = \"127.0.0.1:4001\"\n";

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("anode-cfg-nodeos-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn err(path: &Path, text: &str) -> (usize, String) {
        match parse(path, text) {
            Ok(f) => panic!("accepted: {f:?}"),
            Err(e @ ConfigFileError::Invalid { line, .. }) => (line, e.to_string()),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn defaults_split_the_memory_and_fill_protocol_policies() {
        let f = parse(Path::new("n.toml"), NODE).unwrap();
        let n = &f.nodeos;
        assert!(n.enabled && n.terminate);
        assert_eq!(n.memory_bytes, 256 << 20);
        assert_eq!(
            n.policy(CAPSULE_EE).memory_bytes + n.policy(PLAN_EE).memory_bytes,
            256 << 20
        );
        assert_eq!(n.policy(CAPSULE_DEFAULT), protocol_default());
        assert_eq!(
            n.policy(PLAN_DEFAULT).channel_bandwidth,
            DEFAULT_PROTOCOL_BANDWIDTH
        );
        let t = format!(
            "{NODE}[nodeos]\nenabled = false\nterminate = false\nmemory_bytes = 8388608\ncpu_percent = 20\n"
        );
        let n = parse(Path::new("n.toml"), &t).unwrap().nodeos;
        assert!(!n.enabled && !n.terminate);
        assert_eq!(n.memory_bytes, 8 << 20);
        assert_eq!(n.cpu_ns_per_sec, 200_000_000);
    }

    #[test]
    fn a_policy_file_sets_protocols_and_its_errors_name_its_line() {
        let d = dir("file");
        let node = d.join("n.toml");
        std::fs::write(
            d.join("p.toml"),
            "[capsule]\nmemory_bytes = 1048576\nmax_children = 8\nchannels = [\"*\"]\n\n[\"capsule/*\"]\nmemory_bytes = 65536\ncpu_share = 1\n",
        )
        .unwrap();
        let t = format!("{NODE}[nodeos]\npolicy = \"p.toml\"\n");
        let n = parse(&node, &t).unwrap().nodeos;
        assert_eq!(n.policy(CAPSULE_EE).max_children, 8);
        assert_eq!(n.policy(CAPSULE_DEFAULT).memory_bytes, 65536);
        assert_eq!(n.policy_file.as_deref(), Some(d.join("p.toml").as_path()));

        // Syntax / unknown key in the policy file: its path, line and column.
        std::fs::write(d.join("bad.toml"), "[capsule]\nmax_children = 8\ncpu = 3\n").unwrap();
        let (line, msg) = err(&node, &format!("{NODE}[nodeos]\npolicy = \"bad.toml\"\n"));
        assert_eq!(line, 4, "{msg}");
        assert!(msg.contains("bad.toml:3:1"), "{msg}");
        assert!(msg.contains("unknown field `cpu`"), "{msg}");

        // A protocol asking for more than its EE.
        std::fs::write(
            d.join("big.toml"),
            "[capsule]\nmemory_bytes = 1048576\nmax_children = 8\n\n[\"capsule/abababababababababababababababababababababababababababababababab\"]\nmemory_bytes = 2097152\n",
        )
        .unwrap();
        let (_, msg) = err(&node, &format!("{NODE}[nodeos]\npolicy = \"big.toml\"\n"));
        assert!(msg.contains("big.toml:5:1"), "{msg}");
        assert!(
            msg.contains("memory_bytes 2097152 > parent's 1048576"),
            "{msg}"
        );

        // An unknown principal; an EE without children; a missing file.
        std::fs::write(d.join("who.toml"), "[proto-a]\ncpu_share = 2\n").unwrap();
        let (_, msg) = err(&node, &format!("{NODE}[nodeos]\npolicy = \"who.toml\"\n"));
        assert!(msg.contains("names no principal a node knows"), "{msg}");
        std::fs::write(d.join("typo.toml"), "[\"capsule/ab\"]\ncpu_share = 2\n").unwrap();
        let (_, msg) = err(&node, &format!("{NODE}[nodeos]\npolicy = \"typo.toml\"\n"));
        assert!(
            msg.contains("typo.toml:1:1") && msg.contains("\"capsule/ab\""),
            "{msg}"
        );
        std::fs::write(d.join("none.toml"), "[plan]\nmax_children = 0\n").unwrap();
        let (_, msg) = err(&node, &format!("{NODE}[nodeos]\npolicy = \"none.toml\"\n"));
        assert!(msg.contains("no child domains"), "{msg}");
        let (line, msg) = err(&node, &format!("{NODE}[nodeos]\npolicy = \"nope.toml\"\n"));
        assert_eq!(line, 4);
        assert!(msg.contains("cannot read the policy file"), "{msg}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn bad_values_are_placed() {
        let (line, msg) = err(
            Path::new("n.toml"),
            &format!("{NODE}[nodeos]\nmemory_bytes = 1000\n"),
        );
        assert_eq!(line, 4);
        assert!(msg.contains("below the smallest bound"), "{msg}");
        let (line, msg) = err(
            Path::new("n.toml"),
            &format!("{NODE}[nodeos]\ncpu_percent = 0\n"),
        );
        assert_eq!(line, 4);
        assert!(msg.contains("outside 1..=100"), "{msg}");
        let (line, msg) = err(
            Path::new("n.toml"),
            &format!("{NODE}[nodeos]\nterminat = true\n"),
        );
        assert_eq!(line, 4);
        assert!(msg.contains("unknown field"), "{msg}");
        // The EEs' shares must fit the total.
        let d = dir("shares");
        std::fs::write(
            d.join("p.toml"),
            "[capsule]\nmemory_bytes = 8388608\nmax_children = 8\n",
        )
        .unwrap();
        let (line, msg) = err(
            &d.join("n.toml"),
            &format!("{NODE}[nodeos]\npolicy = \"p.toml\"\nmemory_bytes = 8388608\n"),
        );
        assert_eq!(line, 5, "{msg}");
        assert!(msg.contains("more than [nodeos] memory_bytes"), "{msg}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn signed_policies_need_a_trusted_intact_signature() {
        use anode_nodeos::SignedPolicy;
        let d = dir("signed");
        let node = d.join("n.toml");
        let k = anode_modules::generate_key();
        let other = anode_modules::generate_key();
        let pubhex = hex::encode(k.verifying_key().to_bytes());
        let pol = Policy {
            memory_bytes: 2 << 20,
            cpu_share: 4,
            ..Policy::default()
        };
        let good = SignedPolicy::sign(AB, pol.clone(), &k).to_toml();
        std::fs::write(d.join("good.signed"), &good).unwrap();
        let cfg = |file: &str| {
            format!("{NODE}[nodeos]\ntrusted_keys = [\"{pubhex}\"]\nsigned = [\"{file}\"]\n")
        };
        let n = parse(&node, &cfg("good.signed")).unwrap().nodeos;
        assert_eq!(n.policy(AB), pol);
        assert_eq!(n.signed, [(AB.to_string(), d.join("good.signed"))]);

        let tampered = good.replace("cpu_share = 4", "cpu_share = 40");
        std::fs::write(d.join("tampered.signed"), tampered).unwrap();
        let unsigned = SignedPolicy {
            signature: None,
            ..SignedPolicy::sign(AB, pol.clone(), &k)
        };
        std::fs::write(d.join("unsigned.signed"), unsigned.to_toml()).unwrap();
        std::fs::write(
            d.join("untrusted.signed"),
            SignedPolicy::sign(AB, pol.clone(), &other).to_toml(),
        )
        .unwrap();
        for (file, want) in [
            ("tampered.signed", "tampered with"),
            ("unsigned.signed", "is unsigned"),
            ("untrusted.signed", "does not trust"),
        ] {
            let (line, msg) = err(&node, &cfg(file));
            assert_eq!(line, 5, "{msg}");
            assert!(msg.contains(file) && msg.contains(want), "{file}: {msg}");
        }
        // Signed policies need trusted keys; a bad key is named.
        let (line, msg) = err(
            &node,
            &format!("{NODE}[nodeos]\nsigned = [\"good.signed\"]\n"),
        );
        assert_eq!(line, 4);
        assert!(msg.contains("trusted_keys names no key"), "{msg}");
        let (line, msg) = err(&node, &format!("{NODE}[nodeos]\ntrusted_keys = [\"xy\"]\n"));
        assert_eq!(line, 4);
        assert!(msg.contains("not a hex ed25519 public key"), "{msg}");
        // A signed policy must still fit within its EE's.
        let big = Policy {
            memory_bytes: 1 << 40,
            ..Policy::default()
        };
        std::fs::write(
            d.join("big.signed"),
            SignedPolicy::sign(AB, big, &k).to_toml(),
        )
        .unwrap();
        let (_, msg) = err(&node, &cfg("big.signed"));
        assert!(
            msg.contains("signed policy") && msg.contains("big.signed"),
            "{msg}"
        );
        assert!(
            msg.contains("asks for more than the capsule EE has"),
            "{msg}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
