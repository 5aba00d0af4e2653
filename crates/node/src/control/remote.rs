//! Remote management: the gate every request line on a TCP control connection passes before
//! it is answered (the wire format and the checks are `anode_ctl::remote`'s).
//!
//! Contracts:
//! - Off unless the node config has `[remote] listen`; then only keys in `[[remote.key]]`
//!   act, each within the classes it is granted (`read`, `manage`, `shutdown`), and the
//!   application ops (ports, datagrams, captures, injected packets) stay local.
//! - Cheap checks first: an unknown key costs a hash lookup, not a signature verification.
//! - Signature checks are the costly part, so each peer address gets a budget of failed ones
//!   ([`FAILED_CHECKS_PER_S`], a burst of [`FAILED_CHECKS_BURST`]); past it, its requests are
//!   refused as `throttled` without a check until the budget refills. Peers are remembered
//!   in a bounded table ([`MAX_PEERS`], the longest idle one forgotten first).
//! - A nonce is accepted once. Nonces are remembered until their request's expiry, which is
//!   at most [`RemoteConfig::max_ttl_s`] ahead, and at most [`RemoteConfig::max_nonces`] at
//!   once (when full, a request is refused as busy rather than remembered beyond the bound):
//!   memory stays bounded under any flood, and only requests with valid signatures from
//!   trusted keys reach the nonce store at all.
//! - Every accepted request is logged (peer, key name, op); every refusal is counted by
//!   reason and logged, at most one line a second (the line says how many it stands for).
//! - A throttled peer's connection is closed after the refusal, and its new connections are
//!   refused while it stays over its budget.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use anode_ctl::remote::{NONCE_LEN, Opened, REFUSAL_REASONS, Refusal, RemoteClass, short_key};
use anode_ctl::{RequestFrame, parse_request};
use ed25519_dalek::VerifyingKey;

/// Default longest validity a signed request may claim.
pub const DEFAULT_MAX_TTL_S: u64 = 300;
/// Default bound on remembered nonces.
pub const DEFAULT_MAX_NONCES: usize = 65_536;
/// Default bound on open remote connections (apart from the local socket's).
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

/// Failed signature checks a peer address earns per second.
pub const FAILED_CHECKS_PER_S: f64 = 20.0;
/// Failed signature checks a peer address may make at once.
pub const FAILED_CHECKS_BURST: f64 = 40.0;
/// Peer addresses whose budgets are remembered.
pub const MAX_PEERS: usize = 4096;

/// A key allowed to manage the node remotely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteKey {
    /// Its name in logs (`[[remote.key]] name`, default: the key's first 16 hex digits).
    pub name: String,
    /// The public key.
    pub key: VerifyingKey,
    /// What it may do.
    pub may: BTreeSet<RemoteClass>,
}

/// `[remote]` of the node config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteConfig {
    /// The TCP address to listen on.
    pub listen: SocketAddr,
    /// The trusted keys.
    pub keys: Vec<RemoteKey>,
    /// Longest validity a request may claim, in seconds.
    pub max_ttl_s: u64,
    /// Most nonces remembered at once.
    pub max_nonces: usize,
    /// Most remote connections open at once.
    pub max_connections: usize,
}

/// Where a remote connection came from and arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RemotePeer {
    /// The client's address.
    pub peer: SocketAddr,
    /// The node's address the connection arrived on.
    pub here: SocketAddr,
}

/// The checked request and who sent it.
#[derive(Debug)]
pub(super) struct Admitted {
    /// The request frame.
    pub frame: RequestFrame,
    /// The key's name and classes.
    pub grant: Grant,
}

/// What the key that signed a remote request may do (the handlers check the module
/// categories against it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Grant {
    /// The key's name.
    pub key: String,
    /// Its classes.
    pub may: BTreeSet<RemoteClass>,
}

/// The remote gate: trusted keys, remembered nonces and counters.
#[derive(Debug)]
pub(super) struct Gate {
    cfg: RemoteConfig,
    by_key: HashMap<[u8; 32], usize>,
    nonces: Mutex<Nonces>,
    /// Per peer address: (failed-check tokens, when they were last counted).
    budgets: Mutex<HashMap<std::net::IpAddr, (f64, std::time::Instant)>>,
    /// When a refusal was last logged, and how many were not logged since.
    log: Mutex<(Option<std::time::Instant>, u64)>,
    accepted: AtomicU64,
    refused: [AtomicU64; REFUSAL_REASONS.len()],
}

/// Nonces seen, each until its request's expiry.
#[derive(Debug, Default)]
struct Nonces {
    seen: HashMap<[u8; NONCE_LEN], u64>,
    by_expiry: BTreeSet<(u64, [u8; NONCE_LEN])>,
}

impl Nonces {
    /// Forgets nonces whose requests expired before `now`.
    fn prune(&mut self, now: u64) {
        while let Some(&(exp, n)) = self.by_expiry.first() {
            if exp >= now {
                break;
            }
            self.by_expiry.pop_first();
            self.seen.remove(&n);
        }
    }
}

impl Gate {
    /// A gate for `cfg`.
    pub fn new(cfg: RemoteConfig) -> Gate {
        let by_key = cfg
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.key.to_bytes(), i))
            .collect();
        Gate {
            cfg,
            by_key,
            nonces: Mutex::new(Nonces::default()),
            budgets: Mutex::new(HashMap::new()),
            log: Mutex::new((None, 0)),
            accepted: AtomicU64::new(0),
            refused: Default::default(),
        }
    }

    /// The most remote connections open at once.
    pub fn max_connections(&self) -> usize {
        self.cfg.max_connections
    }

    /// Checks `line` from `from` at Unix time `now`: the request to answer, or why not.
    /// Counts and logs either way.
    pub fn admit(&self, line: &str, from: RemotePeer, now: u64) -> Result<Admitted, Refusal> {
        let r = self.check(line, from, now);
        match &r {
            Ok(a) => {
                self.accepted.fetch_add(1, Ordering::Relaxed);
                tracing::info!(peer = %from.peer, key = %a.grant.key, op = %a.frame.request.op_name(), "remote control request");
            }
            Err(e) => self.refused(from.peer, e),
        }
        r
    }

    /// Counts and logs a refusal (also one a handler makes after admission: a module of a
    /// category the key may not touch).
    pub fn refused(&self, peer: SocketAddr, e: &Refusal) {
        if let Some(i) = REFUSAL_REASONS.iter().position(|r| *r == e.reason())
            && let Some(c) = self.refused.get(i)
        {
            c.fetch_add(1, Ordering::Relaxed);
        }
        // One line a second at most: a flood must not become a flood of log lines.
        let mut l = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        if l.0
            .is_some_and(|t| now.duration_since(t) < std::time::Duration::from_secs(1))
        {
            l.1 += 1;
            return;
        }
        let more = std::mem::take(&mut l.1);
        l.0 = Some(now);
        drop(l);
        if more == 0 {
            tracing::warn!(%peer, reason = e.reason(), "remote control request refused: {e}");
        } else {
            tracing::warn!(%peer, reason = e.reason(), "remote control request refused: {e} (and {more} more refusals since the last line; `anode stats` counts them by reason)");
        }
    }

    fn check(&self, line: &str, from: RemotePeer, now: u64) -> Result<Admitted, Refusal> {
        let o = Opened::parse(line)?;
        let Some(k) = self
            .by_key
            .get(&o.key.to_bytes())
            .and_then(|i| self.cfg.keys.get(*i))
        else {
            return Err(Refusal::UnknownKey(short_key(&o.key)));
        };
        let ip = from.peer.ip().to_canonical();
        if !self.may_check(ip) {
            return Err(Refusal::Throttled(ip));
        }
        if let Err(e) = o.verify() {
            self.failed_check(ip);
            return Err(e);
        }
        let to_ok = o
            .env
            .to
            .parse::<SocketAddr>()
            .is_ok_and(|to| canonical(to) == canonical(from.here));
        if !to_ok {
            return Err(Refusal::WrongNode {
                to: o.env.to.clone(),
                here: from.here,
            });
        }
        if o.env.expires < now {
            return Err(Refusal::Expired {
                ago: now - o.env.expires,
            });
        }
        let ttl = o.env.expires - now;
        if ttl > self.cfg.max_ttl_s {
            return Err(Refusal::TooLong {
                ttl,
                max: self.cfg.max_ttl_s,
            });
        }
        let (frame, class) = match parse_request(&o.env.request) {
            Ok(f) => {
                let class = f.request.remote_class();
                (f, class)
            }
            Err((_, msg)) => return Err(Refusal::Malformed(format!("the request: {msg}"))),
        };
        let Some(class) = class else {
            return Err(Refusal::LocalOnly(frame.request.op_name()));
        };
        if !k.may.contains(&class) {
            return Err(Refusal::NotPermitted {
                key: k.name.clone(),
                op: frame.request.op_name(),
                class: class.name(),
            });
        }
        self.remember(o.nonce, o.env.expires, now)?;
        Ok(Admitted {
            frame,
            grant: Grant {
                key: k.name.clone(),
                may: k.may.clone(),
            },
        })
    }

    /// Whether `ip` has failed-check budget left (refilled for the time since last counted).
    fn may_check(&self, ip: std::net::IpAddr) -> bool {
        let mut b = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        let Some((tokens, at)) = b.get_mut(&ip) else {
            return true;
        };
        let now = std::time::Instant::now();
        let earned = now.duration_since(*at).as_secs_f64() * FAILED_CHECKS_PER_S;
        *tokens = (*tokens + earned).min(FAILED_CHECKS_BURST);
        *at = now;
        *tokens >= 1.0
    }

    /// Whether `ip` is out of failed-check budget now (its new connections are refused).
    pub fn throttled(&self, ip: std::net::IpAddr) -> bool {
        !self.may_check(ip)
    }

    /// Takes one failed check from `ip`'s budget.
    fn failed_check(&self, ip: std::net::IpAddr) {
        let mut b = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        if !b.contains_key(&ip) && b.len() >= MAX_PEERS {
            let oldest = b.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| *k);
            if let Some(k) = oldest {
                b.remove(&k);
            }
        }
        let e = b.entry(ip).or_insert((FAILED_CHECKS_BURST, now));
        e.0 = (e.0 - 1.0).max(0.0);
    }

    /// Records `nonce` until `expires`; refuses one seen before, or one more than the bound.
    fn remember(&self, nonce: [u8; NONCE_LEN], expires: u64, now: u64) -> Result<(), Refusal> {
        let mut n = self.nonces.lock().unwrap_or_else(|e| e.into_inner());
        n.prune(now);
        if n.seen.contains_key(&nonce) {
            return Err(Refusal::Replayed(hex::encode(nonce)));
        }
        if n.seen.len() >= self.cfg.max_nonces {
            return Err(Refusal::Busy(self.cfg.max_nonces));
        }
        n.seen.insert(nonce, expires);
        n.by_expiry.insert((expires, nonce));
        Ok(())
    }

    /// Accepted requests, and refusals by reason (every reason listed).
    pub fn counts(&self) -> (u64, BTreeMap<String, u64>) {
        let refused = REFUSAL_REASONS
            .iter()
            .zip(&self.refused)
            .map(|(r, c)| ((*r).to_string(), c.load(Ordering::Relaxed)))
            .collect();
        (self.accepted.load(Ordering::Relaxed), refused)
    }

    /// Nonces remembered now.
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.nonces.lock().map(|n| n.seen.len()).unwrap_or(0)
    }
}

/// `addr` with an IPv4-mapped IPv6 address as IPv4 (a dual-stack listener sees those).
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_ctl::remote::seal;
    use ed25519_dalek::SigningKey;

    const HERE: &str = "198.18.0.1:7100";
    const NOW: u64 = 1_800_000_000;

    fn key(b: u8) -> SigningKey {
        SigningKey::from_bytes(&[b; 32])
    }

    fn gate(may: &[RemoteClass], max_nonces: usize) -> Gate {
        Gate::new(RemoteConfig {
            listen: HERE.parse().unwrap(),
            keys: vec![RemoteKey {
                name: "ops".into(),
                key: key(1).verifying_key(),
                may: may.iter().copied().collect(),
            }],
            max_ttl_s: 300,
            max_nonces,
            max_connections: 4,
        })
    }

    fn from() -> RemotePeer {
        RemotePeer {
            peer: "198.18.0.2:50000".parse().unwrap(),
            here: HERE.parse().unwrap(),
        }
    }

    fn line(k: u8, op: &str, nonce: u8, expires: u64) -> String {
        seal(
            &key(k),
            HERE.parse().unwrap(),
            &format!(r#"{{"id":7,"op":"{op}"}}"#),
            [nonce; 16],
            expires,
        )
    }

    fn reason(g: &Gate, l: &str) -> &'static str {
        g.admit(l, from(), NOW).unwrap_err().reason()
    }

    #[test]
    fn a_signed_request_from_a_trusted_key_is_admitted_once() {
        let g = gate(&[RemoteClass::Read], 16);
        let l = line(1, "module_list", 1, NOW + 60);
        let a = g.admit(&l, from(), NOW).unwrap();
        assert_eq!(a.frame.id, 7);
        assert_eq!(a.grant.key, "ops");
        assert_eq!(reason(&g, &l), "replayed");
        let (ok, refused) = g.counts();
        assert_eq!((ok, refused["replayed"]), (1, 1));
    }

    #[test]
    fn each_bad_request_is_refused_with_its_reason() {
        let g = gate(&[RemoteClass::Read], 16);
        assert_eq!(reason(&g, "{}"), "malformed");
        assert_eq!(reason(&g, &line(2, "status", 1, NOW + 60)), "unknown_key");
        let mut env: serde_json::Value =
            serde_json::from_str(&line(1, "status", 2, NOW + 60)).unwrap();
        env["request"] = r#"{"id":7,"op":"shutdown"}"#.into();
        assert_eq!(reason(&g, &env.to_string()), "bad_signature");
        let elsewhere = seal(
            &key(1),
            "198.18.0.9:7100".parse().unwrap(),
            r#"{"id":7,"op":"status"}"#,
            [3; 16],
            NOW + 60,
        );
        assert_eq!(reason(&g, &elsewhere), "wrong_node");
        assert_eq!(reason(&g, &line(1, "status", 4, NOW - 1)), "expired");
        assert_eq!(reason(&g, &line(1, "status", 5, NOW + 301)), "too_long");
        assert_eq!(reason(&g, &line(1, "subscribe", 6, NOW + 60)), "local_only");
        assert_eq!(
            reason(&g, &line(1, "shutdown", 7, NOW + 60)),
            "not_permitted"
        );
        let (ok, refused) = g.counts();
        assert_eq!(ok, 0);
        assert_eq!(refused.len(), REFUSAL_REASONS.len());
        assert_eq!(refused.values().sum::<u64>(), 8);
        // Refused requests leave nothing behind.
        assert_eq!(g.remembered(), 0);
    }

    #[test]
    fn a_peer_sending_bad_signatures_is_throttled_and_others_are_not() {
        let g = gate(&[RemoteClass::Read], 1 << 16);
        let mut env: serde_json::Value =
            serde_json::from_str(&line(1, "status", 1, NOW + 60)).unwrap();
        env["request"] = r#"{"id":7,"op":"shutdown"}"#.into();
        let forged = env.to_string();
        // The burst goes to signature checks (a few more as the budget refills meanwhile:
        // a check takes milliseconds in a debug build), then the peer is throttled.
        let checked = (0..1000)
            .take_while(|_| reason(&g, &forged) == "bad_signature")
            .count();
        assert!(
            (FAILED_CHECKS_BURST as usize..1000).contains(&checked),
            "{checked} checked"
        );
        // A good request from the same address waits too; another address is not held.
        assert_eq!(reason(&g, &line(1, "status", 2, NOW + 60)), "throttled");
        let other = RemotePeer {
            peer: "198.18.0.3:50000".parse().unwrap(),
            here: HERE.parse().unwrap(),
        };
        g.admit(&line(1, "status", 3, NOW + 60), other, NOW)
            .unwrap();
        // The budget refills: after 1/FAILED_CHECKS_PER_S seconds one more check is allowed.
        std::thread::sleep(std::time::Duration::from_secs_f64(
            1.5 / FAILED_CHECKS_PER_S,
        ));
        g.admit(&line(1, "status", 4, NOW + 60), from(), NOW)
            .unwrap();
    }

    #[test]
    fn nonces_are_bounded_and_forgotten_after_their_expiry() {
        let g = gate(&[RemoteClass::Read], 2);
        g.admit(&line(1, "status", 1, NOW + 10), from(), NOW)
            .unwrap();
        g.admit(&line(1, "status", 2, NOW + 20), from(), NOW)
            .unwrap();
        assert_eq!(reason(&g, &line(1, "status", 3, NOW + 20)), "busy");
        // Ten seconds later the first has expired and is forgotten: room for one more.
        let later = NOW + 11;
        g.admit(&line(1, "status", 3, later + 20), from(), later)
            .unwrap();
        assert_eq!(g.remembered(), 2);
    }

    #[test]
    fn a_dual_stack_listener_matches_the_ipv4_address_signed_for() {
        let g = gate(&[RemoteClass::Read], 4);
        let mapped = RemotePeer {
            peer: from().peer,
            here: "[::ffff:198.18.0.1]:7100".parse().unwrap(),
        };
        g.admit(&line(1, "status", 1, NOW + 60), mapped, NOW)
            .unwrap();
    }
}
