//! Deploying modules along a path (NetServ's signaling, with NSIS-style soft state): the
//! deployment service every node with a module host runs, as the execution environment of
//! ANEP Type ID [`TYPE_DEPLOY`].
//!
//! A request ([`anode_wire::deploy::Request`], signed by a requester's key) travels from its
//! origin toward its target with the evaluate-at-every-hop flag. Each node on the path:
//! 1. checks it, cheapest first: a deploy key is configured at all (`disabled`), the signer is
//!    one of them (`unknown_key`), the previous hop is within its budget of failed signature
//!    checks (`throttled`), the signature (`bad_signature`), the expiry (`expired`,
//!    `too_long`), the nonce unseen (`replayed`), the lifetime (`bad_ttl`) and size
//!    (`too_large`) within the policy;
//! 2. for a deploy: if the same package is deployed here, extends its lifetime (`present`);
//!    otherwise takes the package from its cache or fetches it from the previous node of the
//!    service (the request's `via`: the last node that handled it, which has just taken the
//!    package itself; nodes without the service between them just route), forwards the request
//!    on, checks the package's manifest against the request and the key's categories, has it
//!    verified and compiled (off the node thread when the driver gives a preparer,
//!    [`worker`]), installs and starts it (`installed`), or upgrades the version deployed
//!    before; for an undeploy: removes the module if it was deployed here (`removed`,
//!    `absent`);
//! 3. sends its [`HopResult`] to the origin, which delivers it to the requesting application
//!    (the request's reply port) and keeps the last results.
//!
//! A refused request is still forwarded, so every node on the path answers. A module
//! deployed here is removed when its lifetime passes without a refresh (a new request for
//! the same package). Modules the operator installed are never replaced or removed by
//! deployments (`local_module`). Deployed modules are soft state: they are not kept across a
//! restart (the next refresh installs them again, fetching the package from the previous
//! hop).
//!
//! A refusal is answered within a budget (50 a second, 100 at once): the origin a refused
//! request names is not authenticated, so a flood of forged requests cannot make the nodes
//! of a path send a flood of results to a victim; past the budget refusals are only counted.
//!
//! Bounds: 64 requests pending (fetch or compile) at once, 65,536 remembered nonces (until
//! their expiry), 4,096 requests remembered at their origin, `max_modules` deployed modules,
//! the package cache's `cache_bytes`, and packages served only for requests this node
//! forwarded, a few copies each (`fetch.rs`).

pub mod fetch;
mod handover;
pub mod policy;
pub mod repo;
mod request;
mod transfer;
pub mod worker;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use anode_core::bucket::TokenBucket;
use anode_core::{
    Delivery, Dispatch, DropReason, EePacket, ExecutionEnvironment, LinkId, NodeContext,
};
use anode_wire::anep::TYPE_DEPLOY;
use anode_wire::deploy::{HopResult, Message, Op, Outcome, Request};
use sha2::{Digest, Sha256};

use crate::{Category, ModuleError, ModuleHost, Package, Prepared};
use fetch::{Cache, Fetch, Serving};
pub use policy::{DEFAULT_CATEGORIES, DeployKey, DeployPolicy, Refusal, UnixClock, sign, verify};
pub use repo::{FetchJob, RepoGet, set_fetcher, spawn_fetcher};
pub use request::NewRequest;
use transfer::{send_routed, send_transfer};
pub use worker::{PrepareJob, set_preparer, spawn_preparer};

/// Requests waiting for a package or its compilation at once.
pub const MAX_PENDING: usize = 64;
/// Nonces remembered at once.
pub const MAX_NONCES: usize = 65_536;
/// Results kept at the origin for requests without a reply port.
pub const KEPT_RESULTS: usize = 4096;
/// Failed signature checks a neighbor may cause per second (and at once).
const SIG_FAILS_PER_S: u64 = 20;
const SIG_FAILS_BURST: u64 = 40;
/// Refusals answered per second (and at once): a refused request's origin is not
/// authenticated, so answers to it are bounded (no reflection of a flood at a victim).
const REFUSALS_ANSWERED_PER_S: u64 = 50;
const REFUSALS_ANSWERED_BURST: u64 = 100;
/// Requests an origin remembers at once (past that, the results of new ones are dropped as
/// stray until older ones are forgotten).
const MAX_ORIGINATED: usize = 4096;
/// How long an origin remembers a request it sent, for its results.
const ORIGIN_MEMORY: Duration = Duration::from_secs(600);

/// A module deployed here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployed {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// SHA-256 of its package.
    pub package_sha256: [u8; 32],
    /// The deploy key's name.
    pub by: String,
    /// When it goes unless refreshed.
    pub expires: Instant,
    /// The lifetime each refresh gives.
    pub ttl_s: u32,
}

/// What the deployment service has done (for `anode module deployments`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeployStats {
    /// Requests handled.
    pub requests: u64,
    /// Results by outcome name.
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Refusals by reason name.
    pub refused: BTreeMap<&'static str, u64>,
    /// Modules removed because their lifetime passed.
    pub expired: u64,
    /// Package bytes fetched from the previous nodes of paths.
    pub fetched_bytes: u64,
    /// Package bytes served to the next nodes of paths.
    pub served_bytes: u64,
    /// Package requests refused: not for a request this node forwarded, or past its budget.
    pub serve_refused: u64,
    /// Package bytes fetched from repositories requests named.
    pub repo_bytes: u64,
    /// Repository fetches that failed (the path was used instead, where there was one).
    pub repo_failures: u64,
    /// Messages that did not parse.
    pub malformed: u64,
    /// Refusals not answered because the node's answer budget was spent (they are counted
    /// under `refused` all the same).
    pub unanswered: u64,
}

/// A request waiting for its package or its compilation.
#[derive(Debug)]
struct Pending {
    req: Request,
    /// The request packet, forwarded once the package is here.
    buf: Vec<u8>,
    anep_len: usize,
    ee_at: usize,
    arrived: Instant,
    key: DeployKey,
    forwarded: bool,
}

/// The deployment service (see the module docs).
#[derive(Debug)]
pub struct DeployEe {
    policy: DeployPolicy,
    clock: UnixClock,
    cache: Cache,
    deployed: BTreeMap<String, Deployed>,
    nonces: HashMap<[u8; 16], u64>,
    fetches: HashMap<[u8; 32], Fetch>,
    waiting: Vec<Pending>,
    preparing: HashMap<u64, Pending>,
    next_job: u64,
    preparer: Option<Sender<PrepareJob>>,
    /// Fetches packages from repositories (`repo.rs`); `None`: from the path only.
    fetcher: Option<Sender<repo::FetchJob>>,
    /// Packages being fetched from a repository.
    repo_fetching: std::collections::HashSet<[u8; 32]>,
    sig_budget: HashMap<Option<LinkId>, TokenBucket>,
    refusal_budget: TokenBucket,
    serving: Serving,
    originated: HashMap<[u8; 16], (u16, Instant)>,
    results: VecDeque<HopResult>,
    stats: DeployStats,
}

impl DeployEe {
    /// A deployment service with `policy`, reading request expiries against `clock`.
    pub fn new(policy: DeployPolicy, clock: UnixClock) -> DeployEe {
        DeployEe {
            cache: Cache::new(policy.cache_bytes),
            policy,
            clock,
            deployed: BTreeMap::new(),
            nonces: HashMap::new(),
            fetches: HashMap::new(),
            waiting: Vec::new(),
            preparing: HashMap::new(),
            next_job: 0,
            preparer: None,
            fetcher: None,
            repo_fetching: std::collections::HashSet::new(),
            sig_budget: HashMap::new(),
            refusal_budget: TokenBucket::new(REFUSALS_ANSWERED_PER_S, REFUSALS_ANSWERED_BURST),
            serving: Serving::default(),
            originated: HashMap::new(),
            results: VecDeque::new(),
            stats: DeployStats::default(),
        }
    }

    /// Has packages verified and compiled by `tx`'s worker instead of on the node thread.
    pub fn set_preparer(&mut self, tx: Sender<PrepareJob>) {
        self.preparer = Some(tx);
    }

    /// Unix time in ms at `now` by this node's clock (what requests' expiries compare to).
    pub fn unix_ms(&mut self, now: Instant) -> u64 {
        self.clock.unix_ms(now)
    }

    /// Keeps a package at the origin so the first hop can fetch it; returns its SHA-256.
    pub fn stage(&mut self, bytes: Vec<u8>) -> Result<[u8; 32], String> {
        if bytes.len() > self.policy.max_package_bytes as usize {
            return Err(format!(
                "the package is {} bytes; this node's [deploy] max_package_bytes is {}",
                bytes.len(),
                self.policy.max_package_bytes
            ));
        }
        Package::decode(&bytes).map_err(|e| format!("not a module package: {e}"))?;
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        if !self.cache.put(hash, Arc::new(bytes)) {
            return Err("the package does not fit in the deploy cache".into());
        }
        Ok(hash)
    }

    /// The modules deployed here.
    pub fn deployed(&self) -> impl Iterator<Item = &Deployed> {
        self.deployed.values()
    }

    /// Counters.
    pub fn stats(&self) -> &DeployStats {
        &self.stats
    }

    /// The results kept at this origin for `nonce`, in arrival order.
    pub fn results_for(&self, nonce: &[u8; 16]) -> Vec<HopResult> {
        self.results
            .iter()
            .filter(|r| &r.nonce == nonce)
            .cloned()
            .collect()
    }

    fn host<'a>(ctx: &'a mut NodeContext<'_>) -> Option<&'a mut ModuleHost> {
        ctx.packet_hooks_mut()?
            .as_any_mut()
            .downcast_mut::<ModuleHost>()
    }

    /// Checks a request against the policy (step 1 of the module docs).
    fn check(
        &mut self,
        req: &Request,
        link: Option<LinkId>,
        now: Instant,
    ) -> Result<DeployKey, Refusal> {
        if self.policy.keys.is_empty() {
            return Err(Refusal::Disabled);
        }
        let key = self
            .policy
            .key(&req.signer)
            .cloned()
            .ok_or(Refusal::UnknownKey)?;
        let budget = self
            .sig_budget
            .entry(link)
            .or_insert_with(|| TokenBucket::new(SIG_FAILS_PER_S, SIG_FAILS_BURST));
        if budget.available(now) < 1 {
            return Err(Refusal::Throttled);
        }
        if !verify(req) {
            budget.take(now, 1);
            return Err(Refusal::BadSignature);
        }
        let unix = self.clock.unix_ms(now);
        if req.expires_unix_ms <= unix {
            return Err(Refusal::Expired);
        }
        if req.expires_unix_ms > unix + policy::MAX_REQUEST_VALIDITY.as_millis() as u64 {
            return Err(Refusal::TooLong);
        }
        if self.nonces.contains_key(&req.nonce) {
            return Err(Refusal::Replayed);
        }
        if self.nonces.len() >= MAX_NONCES {
            self.nonces.retain(|_, exp| *exp > unix);
            if self.nonces.len() >= MAX_NONCES {
                return Err(Refusal::Busy);
            }
        }
        self.nonces.insert(req.nonce, req.expires_unix_ms);
        if req.op == Op::Deploy {
            if req.ttl_s == 0 || req.ttl_s > self.policy.max_ttl_s {
                return Err(Refusal::BadTtl);
            }
            if req.pkg_len > self.policy.max_package_bytes {
                return Err(Refusal::TooLarge);
            }
        }
        Ok(key)
    }

    fn on_request(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket, req: Request) {
        let now = ctx.now();
        let me = ctx.address();
        self.stats.requests += 1;
        if pkt.why == Dispatch::Local {
            if req.origin != me {
                self.stats.count_refusal(Refusal::WrongOrigin);
                ctx.count_drop("deploy", DropReason::WrongOrigin);
                return;
            }
            self.originated
                .retain(|_, (_, t)| now.duration_since(*t) < ORIGIN_MEMORY);
            if self.originated.len() < MAX_ORIGINATED {
                self.originated.insert(req.nonce, (req.reply_port, now));
            }
        }
        let ee_at = pkt.anep_len + pkt.transit_len;
        let mut p = Pending {
            buf: pkt.buf,
            anep_len: pkt.anep_len,
            ee_at,
            arrived: now,
            key: DeployKey {
                key: req.signer,
                name: String::new(),
                categories: Vec::new(),
            },
            forwarded: req.target == me,
            req: req.clone(),
        };
        let key = match self.check(&req, pkt.link, now) {
            Ok(k) => k,
            Err(r) => {
                self.stats.count_refusal(r);
                self.answer(ctx, &mut p, Outcome::Refused, refusal_text(r));
                return;
            }
        };
        p.key = key;
        match req.op {
            Op::Undeploy => self.undeploy(ctx, p),
            Op::Deploy => self.deploy(ctx, p, pkt.link),
        }
    }

    fn undeploy(&mut self, ctx: &mut NodeContext<'_>, mut p: Pending) {
        let name = p.req.name.clone();
        let (outcome, reason) = if self.deployed.remove(&name).is_some() {
            match Self::host(ctx).map(|h| h.remove(&name)) {
                Some(Ok(())) | None => (Outcome::Removed, String::new()),
                Some(Err(e)) => (Outcome::Failed, e.to_string()),
            }
        } else if Self::host(ctx).is_some_and(|h| h.state(&name).is_some()) {
            self.stats.count_refusal(Refusal::LocalModule);
            (Outcome::Refused, refusal_text(Refusal::LocalModule))
        } else {
            (Outcome::Absent, String::new())
        };
        self.answer(ctx, &mut p, outcome, reason);
    }

    fn deploy(&mut self, ctx: &mut NodeContext<'_>, mut p: Pending, link: Option<LinkId>) {
        let me = ctx.address();
        let now = ctx.now();
        let name = p.req.name.clone();
        // The operator may have removed or replaced a deployed module since: forget it.
        if let Some(d) = self.deployed.get(&name)
            && Self::host(ctx)
                .and_then(|h| h.info(&name).ok())
                .is_none_or(|i| i.version != d.version)
        {
            self.deployed.remove(&name);
        }
        if let Some(d) = self.deployed.get_mut(&name)
            && d.package_sha256 == p.req.pkg_hash
        {
            d.expires = now + Duration::from_secs(u64::from(p.req.ttl_s));
            d.ttl_s = p.req.ttl_s;
            let why = format!("refreshed: goes in {} s unless refreshed", p.req.ttl_s);
            return self.answer(ctx, &mut p, Outcome::Present, why);
        }
        if !self.deployed.contains_key(&name)
            && let Some(info) = Self::host(ctx).and_then(|h| h.info(&name).ok())
        {
            return if info.version == p.req.version {
                let why = "installed here by the operator; not under soft state".to_string();
                self.answer(ctx, &mut p, Outcome::Present, why)
            } else {
                self.stats.count_refusal(Refusal::LocalModule);
                self.answer(
                    ctx,
                    &mut p,
                    Outcome::Refused,
                    refusal_text(Refusal::LocalModule),
                )
            };
        }
        if (!self.deployed.contains_key(&name) && self.deployed.len() >= self.policy.max_modules)
            || self.waiting.len() + self.preparing.len() >= MAX_PENDING
        {
            self.stats.count_refusal(Refusal::Busy);
            return self.answer(ctx, &mut p, Outcome::Refused, refusal_text(Refusal::Busy));
        }
        let hash = p.req.pkg_hash;
        if let Some(bytes) = self.cache.get(&hash) {
            return self.have_package(ctx, p, &bytes);
        }
        if self.try_repo(&p) {
            self.waiting.push(p);
            return;
        }
        if link.is_none() || p.req.via == me {
            let why = "the package is not at the origin (`anode module deploy` stages it there)";
            return self.answer(ctx, &mut p, Outcome::Failed, why.into());
        }
        if p.req.pkg_len == 0 {
            return self.answer(ctx, &mut p, Outcome::Failed, "empty package".into());
        }
        if let std::collections::hash_map::Entry::Vacant(v) = self.fetches.entry(hash) {
            let (f, want) = Fetch::start(hash, p.req.pkg_len, (p.req.via, p.req.nonce), now);
            v.insert(f);
            send_transfer(ctx, p.req.via, p.req.nonce, &want);
        }
        self.waiting.push(p);
    }

    /// The package is here: forward the request on, then check, prepare and install it.
    fn have_package(&mut self, ctx: &mut NodeContext<'_>, mut p: Pending, bytes: &[u8]) {
        self.forward(ctx, &mut p);
        let pkg = match Package::decode(bytes) {
            Ok(pkg) => pkg,
            Err(e) => return self.answer(ctx, &mut p, Outcome::Failed, format!("{e}")),
        };
        let m = &pkg.manifest;
        if m.name != p.req.name || m.version.to_string() != p.req.version {
            let why = format!(
                "the package is {} {}, the request names {} {}",
                m.name, m.version, p.req.name, p.req.version
            );
            return self.answer(ctx, &mut p, Outcome::Failed, why);
        }
        let cat = m.category();
        if cat == Category::System || !p.key.categories.contains(&cat) {
            self.stats.count_refusal(Refusal::NotPermitted);
            let why = format!(
                "{}: {} is a {} module{}",
                Refusal::NotPermitted.name(),
                m.name,
                cat.name(),
                if cat == Category::System {
                    " (system modules are installed by the node's operator)"
                } else {
                    ""
                }
            );
            return self.answer(ctx, &mut p, Outcome::Refused, why);
        }
        let Some(host) = Self::host(ctx) else {
            let why = "this node hosts no modules ([modules] trusted_keys is empty)";
            return self.answer(ctx, &mut p, Outcome::Failed, why.into());
        };
        let (rt, trust) = (Arc::clone(host.runtime()), host.trust().clone());
        if let Some(tx) = &self.preparer {
            let id = self.next_job;
            self.next_job += 1;
            if tx.send(PrepareJob { id, rt, trust, pkg }).is_ok() {
                self.preparing.insert(id, p);
                return;
            }
            self.preparer = None;
            return self.answer(ctx, &mut p, Outcome::Failed, "the preparer stopped".into());
        }
        let prepared = Prepared::new(&rt, &trust, pkg, &toml::Table::new());
        self.install(ctx, p, prepared);
    }

    /// A package prepared by the worker (job `id`).
    pub fn prepared(
        &mut self,
        ctx: &mut NodeContext<'_>,
        id: u64,
        r: Result<Prepared, ModuleError>,
    ) {
        if let Some(p) = self.preparing.remove(&id) {
            self.install(ctx, p, r);
        }
    }

    fn install(
        &mut self,
        ctx: &mut NodeContext<'_>,
        mut p: Pending,
        r: Result<Prepared, ModuleError>,
    ) {
        let name = p.req.name.clone();
        let upgrade = self.deployed.contains_key(&name);
        let done = r.and_then(|prepared| {
            let host = Self::host(ctx)
                .ok_or_else(|| ModuleError::Io("this node has no module host any more".into()))?;
            if upgrade {
                host.upgrade_prepared(prepared)?;
            } else {
                host.install_prepared(prepared)?;
            }
            host.start(&name).inspect_err(|_| {
                if !upgrade {
                    let _ = host.remove(&name);
                }
            })
        });
        match done {
            Ok(()) => {
                let ttl = p.req.ttl_s;
                self.deployed.insert(
                    name.clone(),
                    Deployed {
                        name,
                        version: p.req.version.clone(),
                        package_sha256: p.req.pkg_hash,
                        by: p.key.name.clone(),
                        expires: ctx.now() + Duration::from_secs(u64::from(ttl)),
                        ttl_s: ttl,
                    },
                );
                let why = format!("goes in {ttl} s unless refreshed");
                self.answer(ctx, &mut p, Outcome::Installed, why);
            }
            Err(e) => self.answer(ctx, &mut p, Outcome::Failed, e.to_string()),
        }
    }

    /// Sends the request on toward its target (once). If this node holds the package it
    /// becomes the request's `via` and will serve the next node's fetch for this request;
    /// if not (it refused, or its fetch failed), the `via` stays the last node that has it.
    fn forward(&mut self, ctx: &mut NodeContext<'_>, p: &mut Pending) {
        if p.forwarded {
            return;
        }
        p.forwarded = true;
        if let Some(h) = p.buf.get_mut(p.ee_at + anode_wire::deploy::HOP_AT) {
            *h = h.saturating_add(1);
        }
        if p.req.op == Op::Deploy && self.cache.get(&p.req.pkg_hash).is_some() {
            let via = p.ee_at + anode_wire::deploy::VIA_AT;
            if let Some(v) = p.buf.get_mut(via..via + anode_wire::addr::NODE_ADDR_LEN) {
                v.copy_from_slice(&ctx.address().to_bytes());
            }
            self.serving
                .allow(p.req.nonce, p.req.pkg_hash, p.req.pkg_len, ctx.now());
        }
        let _ = ctx.forward(std::mem::take(&mut p.buf), p.anep_len);
    }

    /// Answers the origin (and forwards the request on if it was not yet).
    fn answer(&mut self, ctx: &mut NodeContext<'_>, p: &mut Pending, o: Outcome, reason: String) {
        self.forward(ctx, p);
        *self.stats.outcomes.entry(o.name()).or_insert(0) += 1;
        let me = ctx.address();
        let elapsed = ctx.now().saturating_duration_since(p.arrived);
        let r = HopResult {
            outcome: o,
            hop: p.req.hop,
            elapsed_us: elapsed.as_micros().min(u128::from(u32::MAX)) as u32,
            last: p.req.target == me,
            nonce: p.req.nonce,
            node: me,
            reason,
        };
        if p.req.origin == me {
            let bytes = r.to_bytes().unwrap_or_default();
            return self.take_result(ctx, r, bytes, 0);
        }
        if o == Outcome::Refused && !self.refusal_budget.take(ctx.now(), 1) {
            self.stats.unanswered += 1;
            return;
        }
        send_routed(ctx, p.req.origin, p.req.nonce, &Message::Result(r));
    }

    /// A result for a request this node originated: to the requester's port, and kept.
    fn take_result(
        &mut self,
        ctx: &mut NodeContext<'_>,
        r: HopResult,
        buf: Vec<u8>,
        offset: usize,
    ) {
        let Some(&(port, _)) = self.originated.get(&r.nonce) else {
            self.stats.malformed += 1;
            ctx.count_drop("deploy", DropReason::StrayResult);
            return;
        };
        if port != 0 {
            ctx.deliver(Delivery {
                type_id: TYPE_DEPLOY,
                port,
                src: r.node,
                flow: 0,
                rb: 0,
                buf,
                offset,
            });
        }
        if self.results.len() >= KEPT_RESULTS {
            self.results.pop_front();
        }
        self.results.push_back(r);
    }
}

impl DeployStats {
    fn count_refusal(&mut self, r: Refusal) {
        *self.refused.entry(r.name()).or_insert(0) += 1;
    }
}

fn refusal_text(r: Refusal) -> String {
    format!("{}: {}", r.name(), r.explain())
}

impl ExecutionEnvironment for DeployEe {
    fn type_id(&self) -> u16 {
        TYPE_DEPLOY
    }

    fn name(&self) -> &str {
        "deploy"
    }

    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        match Message::parse(pkt.ee_bytes()) {
            Ok(Message::Request(req)) => self.on_request(ctx, pkt, req),
            Ok(Message::Result(r)) if pkt.why == Dispatch::Destination => {
                let offset = pkt.anep_len + pkt.transit_len;
                self.take_result(ctx, r, pkt.buf, offset);
            }
            Ok(Message::Transfer(nonce, t)) if pkt.why == Dispatch::Destination => {
                let from = pkt.transit().src();
                self.on_transfer(ctx, from, nonce, t);
            }
            Ok(Message::Result(_) | Message::Transfer(..)) => {
                // A result asking for every-hop evaluation or injected here: not ours.
                self.stats.malformed += 1;
                ctx.count_drop("deploy", DropReason::StrayResult);
            }
            Err(_) => {
                self.stats.malformed += 1;
                ctx.count_drop("deploy", DropReason::Malformed);
            }
        }
    }

    fn handle_timeout(&mut self, ctx: &mut NodeContext<'_>) {
        let now = ctx.now();
        let gone: Vec<String> = self
            .deployed
            .values()
            .filter(|d| d.expires <= now)
            .map(|d| d.name.clone())
            .collect();
        for name in gone {
            self.deployed.remove(&name);
            self.stats.expired += 1;
            if let Some(h) = Self::host(ctx) {
                let _ = h.remove(&name);
            }
            ctx.log(
                "deploy",
                format!("{name}: lifetime passed without a refresh; removed"),
            );
        }
        let due: Vec<[u8; 32]> = self
            .fetches
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(h, _)| *h)
            .collect();
        for hash in due {
            let Some(f) = self.fetches.get_mut(&hash) else {
                continue;
            };
            let (to, nonce) = f.from;
            match f.retry(hash, now) {
                Some(want) => send_transfer(ctx, to, nonce, &want),
                None => {
                    self.fetches.remove(&hash);
                    self.fail_waiting(
                        ctx,
                        &hash,
                        "fetching the package from the previous node of the service timed out",
                    );
                }
            }
        }
    }

    fn hand_over(&mut self, now: Instant, out: &mut anode_core::handover::EeHandover) {
        out.state = self.export(now);
    }

    fn take_over(
        &mut self,
        ctx: &mut NodeContext<'_>,
        state: &serde_json::Value,
    ) -> Result<(), String> {
        self.import(ctx, state)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let d = self.deployed.values().map(|d| d.expires);
        let f = self.fetches.values().map(|f| f.deadline);
        d.chain(f).min()
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_checks_size_and_format() {
        let policy = DeployPolicy {
            max_package_bytes: 1024,
            ..DeployPolicy::default()
        };
        let mut d = DeployEe::new(policy, UnixClock::lazy(0));
        let big = d.stage(vec![0; 2000]).unwrap_err();
        assert!(big.contains("max_package_bytes is 1024"), "{big}");
        let junk = d.stage(vec![0; 100]).unwrap_err();
        assert!(junk.contains("not a module package"), "{junk}");
        let pkg = crate::builtin::package("null").unwrap().encode();
        let h = d.stage(pkg.clone()).unwrap();
        assert_eq!(h, <[u8; 32]>::from(Sha256::digest(&pkg)));
        assert!(d.cache.get(&h).is_some());
    }
}
