//! Scenario steps: what happens at which time in a run, and how new kinds of step plug in.
//!
//! A `[[step]]` table has `at_ms` (when), `action` (which kind) and the action's own keys.
//! Each action kind is a [`StepParser`] registered by name in a [`Registry`]; the parser reads
//! its keys through [`StepArgs`] (typed getters that resolve node and link names and report
//! errors with the key's position) and returns a boxed [`Action`]. The runner (virtual time or
//! realtime) calls [`Action::run`] at the step's time with a [`StepCtx`], and again whenever
//! the action asks to be called later ([`Next::After`]); at the end it asks every action for
//! its [`StepOutcome`] with a [`ReportCtx`].
//!
//! An execution-environment crate adds its own steps (install a module, inject a program)
//! without touching the runner: build `Registry::builtin()`, call [`Registry::register`] for
//! each new action and [`Registry::on_node`] to register its EE on every node, and hand the
//! registry to `Topology::parse_with` and the runner.
//!
//! Contracts: a parser never panics on any TOML value; [`StepArgs::finish`] (called by the
//! registry) rejects keys the action did not read, so every action gets `deny_unknown_fields`
//! behaviour. Actions see the network only through [`StepCtx`], which works the same in
//! virtual time and in realtime.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anode_core::{DropReason, Node};
use toml::Spanned;

use crate::error::SpanError;
use crate::report::FailureReport;
use crate::topology::{LinkSpec, NodeSpec, resolve_node};
use crate::track::{FlowRec, Tracker};

/// A parsed step.
#[derive(Debug)]
pub struct Step {
    /// Position in the file (0-based); steps are reported as `index + 1`.
    pub index: usize,
    /// When it runs (virtual time since the start).
    pub at: Duration,
    /// The action name (`send`, `fail-link`, ...).
    pub action_name: String,
    /// The action.
    pub action: Box<dyn Action>,
}

/// What an action wants after running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Finished.
    Done,
    /// Call [`Action::run`] again after this long.
    After(Duration),
}

/// An expectation's verdict.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// Whether it held.
    pub passed: bool,
    /// What was expected and what was found.
    pub message: String,
}

/// What a step did, for the report.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepOutcome {
    /// One line describing the step.
    pub summary: String,
    /// Further lines of text for people.
    pub details: Vec<String>,
    /// For expectations: the verdict.
    pub check: Option<Check>,
    /// Machine-readable results (deterministic: objects have sorted keys, no floats from
    /// wall-clock time).
    pub data: serde_json::Value,
}

/// One kind of scenario step.
pub trait Action: fmt::Debug + Send {
    /// Runs at the step's time, and again after each [`Next::After`].
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next;

    /// The step's results, once the run is over.
    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome;
}

/// Builds an action from a `[[step]]` table.
pub type StepParser = fn(&mut StepArgs<'_>) -> Result<Box<dyn Action>, SpanError>;

/// Runs on every node right after it is created, before any link is added (e.g. to register
/// an execution environment). Gets the node's index in the topology.
pub type NodeHook = Arc<dyn Fn(usize, &mut Node) + Send + Sync>;

/// The step actions a run understands, and hooks that set up every node.
#[derive(Clone)]
pub struct Registry {
    parsers: BTreeMap<String, (StepParser, &'static str)>,
    node_hooks: Vec<NodeHook>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("actions", &self.parsers.keys().collect::<Vec<_>>())
            .field("node_hooks", &self.node_hooks.len())
            .finish()
    }
}

impl Registry {
    /// No actions at all.
    pub fn empty() -> Self {
        Registry {
            parsers: BTreeMap::new(),
            node_hooks: Vec::new(),
        }
    }

    /// The built-in actions: `send`, `fail-link`, `restore-link`, `expect`.
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        crate::actions::register_builtin(&mut r);
        r
    }

    /// Adds (or replaces) an action kind. `help` is one line listing its keys, shown when a
    /// file names an unknown action.
    pub fn register(&mut self, name: &str, help: &'static str, parser: StepParser) {
        self.parsers.insert(name.to_string(), (parser, help));
    }

    /// Adds a hook run on every node after it is created.
    pub fn on_node(&mut self, hook: NodeHook) {
        self.node_hooks.push(hook);
    }

    /// Runs the node hooks on node `index`.
    pub fn setup_node(&self, index: usize, node: &mut Node) {
        for h in &self.node_hooks {
            h(index, node);
        }
    }

    /// The action names and their help lines.
    pub fn actions(&self) -> impl Iterator<Item = (&str, &'static str)> {
        self.parsers.iter().map(|(k, (_, h))| (k.as_str(), *h))
    }

    /// Parses one step: `at_ms`, `action`, then the action's keys.
    pub(crate) fn parse(&self, args: &mut StepArgs<'_>) -> Result<Step, SpanError> {
        let at_ms = args.f64_req("at_ms", "the time of the step in ms, e.g. at_ms = 3000")?;
        if !(0.0..=1e12).contains(&at_ms) {
            return Err(args.err(
                "at_ms",
                format!("at_ms = {at_ms} is out of range"),
                "give a time of 0 or more ms from the start of the run",
            ));
        }
        let name = args.str_req("action", "the kind of step, e.g. action = \"send\"")?;
        let Some((parser, _)) = self.parsers.get(&name) else {
            let list: Vec<String> = self
                .parsers
                .iter()
                .map(|(k, (_, h))| format!("\n       {k}: {h}"))
                .collect();
            return Err(args.err(
                "action",
                format!("unknown action '{name}'"),
                format!("use one of these actions:{}", list.concat()),
            ));
        };
        args.action = name.clone();
        let action = parser(args)?;
        args.finish()?;
        Ok(Step {
            index: args.index,
            at: Duration::from_nanos((at_ms * 1e6).round() as u64),
            action_name: name,
            action,
        })
    }
}

/// Who a step addresses: one node or every node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Every node (`"*"` in the file).
    All,
    /// One node, by index.
    Node(usize),
}

impl Target {
    /// The node indices meant, excluding `except`.
    pub fn nodes(self, n: usize, except: Option<usize>) -> Vec<usize> {
        match self {
            Target::All => (0..n).filter(|i| Some(*i) != except).collect(),
            Target::Node(i) => vec![i],
        }
    }
}

/// The keys of one `[[step]]` table, with typed getters that report errors at the key.
#[derive(Debug)]
pub struct StepArgs<'a> {
    index: usize,
    span: Range<usize>,
    table: &'a BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    nodes: &'a [NodeSpec],
    links: &'a [LinkSpec],
    asked: Vec<&'static str>,
    action: String,
}

impl<'a> StepArgs<'a> {
    pub(crate) fn new(
        index: usize,
        span: Range<usize>,
        table: &'a BTreeMap<Spanned<String>, Spanned<toml::Value>>,
        nodes: &'a [NodeSpec],
        links: &'a [LinkSpec],
    ) -> Self {
        StepArgs {
            index,
            span,
            table,
            nodes,
            links,
            asked: Vec::new(),
            action: String::new(),
        }
    }

    /// The nodes of the topology.
    pub fn nodes(&self) -> &[NodeSpec] {
        self.nodes
    }

    fn lookup(&mut self, key: &'static str) -> Option<&'a Spanned<toml::Value>> {
        if !self.asked.contains(&key) {
            self.asked.push(key);
        }
        self.table
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|(_, v)| v)
    }

    /// The span of `key`'s value, or of the whole step if absent.
    pub fn span_of(&self, key: &str) -> Range<usize> {
        self.table
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map_or(self.span.clone(), |(_, v)| v.span())
    }

    fn prefix(&self) -> String {
        if self.action.is_empty() {
            format!("step {}", self.index + 1)
        } else {
            format!("step {} (action \"{}\")", self.index + 1, self.action)
        }
    }

    /// An error at `key` (or the step if absent).
    pub fn err(&self, key: &str, message: impl fmt::Display, fix: impl Into<String>) -> SpanError {
        SpanError::new(
            self.span_of(key),
            format!("{}: {message}", self.prefix()),
            fix,
        )
    }

    fn missing(&self, key: &str, what: &str) -> SpanError {
        SpanError::new(
            self.span.clone(),
            format!("{}: the key `{key}` is missing", self.prefix()),
            format!("add `{key}`: {what}"),
        )
    }

    fn wrong_type(&self, key: &str, want: &str, v: &toml::Value) -> SpanError {
        self.err(
            key,
            format!("`{key}` is a {}, not {want}", v.type_str()),
            format!("give {want}, e.g. {}", example(want, key)),
        )
    }

    /// An optional non-negative integer.
    pub fn u64_opt(&mut self, key: &'static str) -> Result<Option<u64>, SpanError> {
        match self.lookup(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                toml::Value::Integer(i) if *i >= 0 => Ok(Some(*i as u64)),
                toml::Value::Integer(i) => {
                    Err(self.err(key, format!("`{key}` = {i} is negative"), "give 0 or more"))
                }
                other => Err(self.wrong_type(key, "an integer", other)),
            },
        }
    }

    /// An optional integer within `range`.
    pub fn u64_in(
        &mut self,
        key: &'static str,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<Option<u64>, SpanError> {
        match self.u64_opt(key)? {
            Some(v) if !range.contains(&v) => Err(self.err(
                key,
                format!("`{key}` = {v} is out of range"),
                format!("give a value from {} to {}", range.start(), range.end()),
            )),
            v => Ok(v),
        }
    }

    /// An optional number (integer or float).
    pub fn f64_opt(&mut self, key: &'static str) -> Result<Option<f64>, SpanError> {
        match self.lookup(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                toml::Value::Integer(i) => Ok(Some(*i as f64)),
                toml::Value::Float(f) if f.is_finite() => Ok(Some(*f)),
                other => Err(self.wrong_type(key, "a number", other)),
            },
        }
    }

    /// A required number.
    pub fn f64_req(&mut self, key: &'static str, what: &str) -> Result<f64, SpanError> {
        self.f64_opt(key)?.ok_or_else(|| self.missing(key, what))
    }

    /// An optional string.
    pub fn str_opt(&mut self, key: &'static str) -> Result<Option<String>, SpanError> {
        match self.lookup(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                toml::Value::String(s) => Ok(Some(s.clone())),
                other => Err(self.wrong_type(key, "a string", other)),
            },
        }
    }

    /// A required string.
    pub fn str_req(&mut self, key: &'static str, what: &str) -> Result<String, SpanError> {
        self.str_opt(key)?.ok_or_else(|| self.missing(key, what))
    }

    /// An optional boolean.
    pub fn bool_opt(&mut self, key: &'static str) -> Result<Option<bool>, SpanError> {
        match self.lookup(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                toml::Value::Boolean(b) => Ok(Some(*b)),
                other => Err(self.wrong_type(key, "true or false", other)),
            },
        }
    }

    /// An optional duration in ms (integer or float).
    pub fn ms_opt(&mut self, key: &'static str) -> Result<Option<Duration>, SpanError> {
        match self.f64_opt(key)? {
            None => Ok(None),
            Some(v) if (0.0..=1e12).contains(&v) => {
                Ok(Some(Duration::from_nanos((v * 1e6).round() as u64)))
            }
            Some(v) => Err(self.err(
                key,
                format!("`{key}` = {v} is out of range"),
                "give 0 or more milliseconds",
            )),
        }
    }

    /// A required node name, resolved to its index.
    pub fn node(&mut self, key: &'static str) -> Result<usize, SpanError> {
        let name = self.str_req(key, "a node name, e.g. \"a\"")?;
        resolve_node(self.nodes, &name, self.span_of(key))
            .map_err(|e| SpanError::new(e.span, format!("{}: {}", self.prefix(), e.message), e.fix))
    }

    /// A required node name or `"*"` (every node).
    pub fn target(&mut self, key: &'static str) -> Result<Target, SpanError> {
        let name = self.str_req(key, "a node name, or \"*\" for every node")?;
        if name == "*" {
            return Ok(Target::All);
        }
        resolve_node(self.nodes, &name, self.span_of(key))
            .map(Target::Node)
            .map_err(|e| {
                SpanError::new(
                    e.span,
                    format!("{}: {}", self.prefix(), e.message),
                    format!("{} or \"*\" for every node", e.fix),
                )
            })
    }

    /// The link between the nodes named by keys `a` and `b`, resolved to its index.
    pub fn link(&mut self, a: &'static str, b: &'static str) -> Result<usize, SpanError> {
        let x = self.node(a)?;
        let y = self.node(b)?;
        self.links
            .iter()
            .position(|l| (l.a == x && l.b == y) || (l.a == y && l.b == x))
            .ok_or_else(|| {
                let name = |i: usize| self.nodes.get(i).map_or("?", |n| n.name.as_str());
                let have: Vec<String> = self
                    .links
                    .iter()
                    .filter(|l| l.a == x || l.b == x)
                    .map(|l| format!("{}-{}", name(l.a), name(l.b)))
                    .collect();
                self.err(
                    b,
                    format!("there is no link between '{}' and '{}'", name(x), name(y)),
                    format!(
                        "name the two ends of a [[link]]; the links of '{}' are: {}",
                        name(x),
                        if have.is_empty() {
                            "none".to_string()
                        } else {
                            have.join(", ")
                        }
                    ),
                )
            })
    }

    /// Rejects keys the action did not read.
    pub(crate) fn finish(&self) -> Result<(), SpanError> {
        for (k, _) in self.table.iter() {
            if !self.asked.iter().any(|a| a == k.get_ref()) {
                let accepted: Vec<String> = self.asked.iter().map(|a| format!("`{a}`")).collect();
                return Err(SpanError::new(
                    k.span(),
                    format!("{}: unknown key `{}`", self.prefix(), k.get_ref()),
                    format!(
                        "remove or rename it; this action accepts {}",
                        accepted.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn example(want: &str, key: &str) -> String {
    match want {
        "an integer" => format!("{key} = 10"),
        "a number" => format!("{key} = 2.5"),
        "a string" => format!("{key} = \"a\""),
        _ => format!("{key} = true"),
    }
}

/// Work to run on one node (see [`Net::with_node`]).
pub type NodeFn = Box<dyn FnOnce(&mut Node, Instant) + Send + 'static>;

/// What a runner offers the actions. Implemented by the virtual-time simulator and by the
/// realtime runner; actions use it through [`StepCtx`].
pub trait Net {
    /// Time since the start of the run.
    fn now(&self) -> Duration;
    /// The nodes (with the addresses they have in this run).
    fn nodes(&self) -> &[NodeSpec];
    /// The links.
    fn links(&self) -> &[LinkSpec];
    /// Runs `f` on node `node` with the current time; the runner then sends what it queued.
    /// (`'static + Send` because in realtime it runs on the node's driver thread; return
    /// results through a channel or an `Arc<Mutex<_>>`.)
    fn with_node(&mut self, node: usize, f: NodeFn);
    /// Sends a datagram from a local application on `from` to `to`, tracked for the report
    /// under `step`.
    fn send_tracked(
        &mut self,
        step: usize,
        from: usize,
        to: usize,
        port: u16,
        rb: Option<u16>,
        payload: &[u8],
    ) -> Result<(), DropReason>;
    /// Fails (`false`) or restores (`true`) a link.
    fn set_link_up(&mut self, link: usize, up: bool);
    /// Whether a link is up.
    fn link_up(&self, link: usize) -> bool;
    /// The node that `from`'s routing table names as next hop toward `to`.
    fn next_hop(&mut self, from: usize, to: usize) -> Option<usize>;
    /// Every node's next hop toward every destination over a link that is up, in one
    /// destination-major table: `table[to * n + from]`, [`NO_HOP`] where there is none.
    /// The default asks [`Net::next_hop`] and [`Net::link_between`] per pair; runners that
    /// can read whole forwarding tables override it.
    fn next_hop_table(&mut self) -> Vec<u32> {
        let n = self.nodes().len();
        let mut t = vec![NO_HOP; n * n];
        for u in 0..n {
            for d in 0..n {
                let hop = hop_over_up_link(self, u, d).and_then(|v| u32::try_from(v).ok());
                if let (Some(v), Some(slot)) = (hop, t.get_mut(d * n + u)) {
                    *slot = v;
                }
            }
        }
        t
    }
    /// Datagrams delivered at `node` so far (to `port`, or to any port).
    fn delivered(&self, node: usize, port: Option<u16>) -> u64;
    /// The EE events of the run so far, in order (see [`EeEvent`]). Runners that do not
    /// record them return none.
    fn ee_events(&self) -> &[EeEvent] {
        &[]
    }
    /// The link between nodes `a` and `b`, if there is one (runners with many links keep an
    /// index; the default scans).
    fn link_between(&self, a: usize, b: usize) -> Option<usize> {
        self.links()
            .iter()
            .position(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a))
    }
    /// Whether the links that are up connect every node.
    fn connected(&self) -> bool {
        let n = self.nodes().len();
        let mut seen = vec![false; n];
        let mut stack = vec![0usize];
        if let Some(s) = seen.first_mut() {
            *s = true;
        }
        while let Some(x) = stack.pop() {
            for (i, l) in self.links().iter().enumerate() {
                if !self.link_up(i) {
                    continue;
                }
                let y = if l.a == x {
                    l.b
                } else if l.b == x {
                    l.a
                } else {
                    continue;
                };
                if let Some(s) = seen.get_mut(y)
                    && !*s
                {
                    *s = true;
                    stack.push(y);
                }
            }
        }
        seen.iter().all(|s| *s)
    }
}

/// A node event that is not a tracked datagram delivery: deliveries under other Type IDs
/// (PLAN, capsules) and EE log messages (PLAN `print`, errors). Runners keep at most
/// [`MAX_EE_EVENTS`] of them; actions read them by position ([`StepCtx::ee_events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EeEvent {
    /// When the runner collected it.
    pub at: Duration,
    /// The node.
    pub node: usize,
    /// The event.
    pub event: anode_core::Event,
}

/// Most EE events a run keeps (later ones are not recorded).
pub const MAX_EE_EVENTS: usize = 1 << 20;

/// Records `e` in `log` if it is an EE event and there is room.
pub fn record_ee_event(log: &mut Vec<EeEvent>, at: Duration, node: usize, e: &anode_core::Event) {
    use anode_core::Event;
    let keep = match e {
        Event::Delivered(d) => d.type_id != anode_wire::anep::TYPE_DATAGRAM,
        Event::Log { .. } => true,
        _ => false,
    };
    if keep && log.len() < MAX_EE_EVENTS {
        log.push(EeEvent {
            at,
            node,
            event: e.clone(),
        });
    }
}

/// Why `from` cannot reach `to` right now.
pub(crate) fn walk(net: &mut dyn Net, from: usize, to: usize) -> Result<Vec<usize>, String> {
    let n = net.nodes().len();
    let name = |net: &dyn Net, i: usize| {
        net.nodes()
            .get(i)
            .map_or("?", |s| s.name.as_str())
            .to_string()
    };
    let mut path = vec![from];
    let mut at = from;
    while at != to {
        let Some(next) = net.next_hop(at, to) else {
            return Err(format!(
                "{} has no route to {}",
                name(net, at),
                name(net, to)
            ));
        };
        match net.link_between(at, next) {
            Some(l) if net.link_up(l) => {}
            _ => {
                return Err(format!(
                    "{} routes to {} via {} but link {}-{} is down",
                    name(net, at),
                    name(net, to),
                    name(net, next),
                    name(net, at),
                    name(net, next)
                ));
            }
        }
        path.push(next);
        at = next;
        if path.len() > n {
            let p: Vec<String> = path.iter().map(|i| name(net, *i)).collect();
            return Err(format!("routing loop {}", p.join(">")));
        }
    }
    Ok(path)
}

/// "No next hop" in a [`Net::next_hop_table`].
pub const NO_HOP: u32 = u32::MAX;

/// Which nodes reach `to` by the routing tables over up links (`walk` succeeds from them),
/// in O(n) next-hop lookups: each node's answer is remembered, so a walk stops at the first
/// node already decided (a path through a node that reaches `to` reaches it too; one through
/// a node that does not, or back onto itself, does not).
pub(crate) fn reachers(net: &mut dyn Net, to: usize) -> Vec<bool> {
    let n = net.nodes().len();
    reach_by(n, to, |at| hop_over_up_link(net, at, to))
}

/// The next hop `at`'s table names toward `to`, if the link to it is up (what [`walk`]
/// follows, without its reasons).
fn hop_over_up_link<N: Net + ?Sized>(net: &mut N, at: usize, to: usize) -> Option<usize> {
    let next = net.next_hop(at, to)?;
    let l = net.link_between(at, next)?;
    net.link_up(l).then_some(next)
}

/// [`reachers`] from a [`Net::next_hop_table`] (no lookups at all).
pub(crate) fn reachers_in(table: &[u32], n: usize, to: usize) -> Vec<bool> {
    let row = table.get(to * n..(to + 1) * n).unwrap_or(&[]);
    reach_by(n, to, |at| match row.get(at) {
        Some(&v) if v != NO_HOP => Some(v as usize),
        _ => None,
    })
}

/// The memoised walk of [`reachers`] over any next-hop function (over up links).
fn reach_by(n: usize, to: usize, mut hop: impl FnMut(usize) -> Option<usize>) -> Vec<bool> {
    #[derive(Clone, Copy, PartialEq)]
    enum S {
        Unknown,
        OnPath,
        Good,
        Bad,
    }
    let mut st = vec![S::Unknown; n];
    if let Some(s) = st.get_mut(to) {
        *s = S::Good;
    }
    let mut path = Vec::new();
    for x in 0..n {
        let mut at = x;
        let verdict = loop {
            match st.get(at).copied() {
                Some(S::Unknown) => {}
                Some(S::Good) => break S::Good,
                _ => break S::Bad,
            }
            if let Some(s) = st.get_mut(at) {
                *s = S::OnPath;
            }
            path.push(at);
            match hop(at) {
                Some(next) => at = next,
                None => break S::Bad,
            }
        };
        for u in path.drain(..) {
            if let Some(s) = st.get_mut(u) {
                *s = verdict;
            }
        }
    }
    st.into_iter().map(|s| s == S::Good).collect()
}

/// Whether every node reaches every other by the routing tables over up links.
pub fn all_pairs_reachable(net: &mut dyn Net) -> bool {
    let n = net.nodes().len();
    let table = net.next_hop_table();
    (0..n).all(|b| reachers_in(&table, n, b).into_iter().all(|ok| ok))
}

/// What an action may do while it runs.
pub struct StepCtx<'a> {
    pub(crate) net: &'a mut dyn Net,
    pub(crate) step: usize,
}

impl fmt::Debug for StepCtx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepCtx")
            .field("step", &self.step)
            .field("now", &self.net.now())
            .finish()
    }
}

impl<'a> StepCtx<'a> {
    /// The context of step `step` (its index in the file) running on `net`; for runners
    /// outside this crate (`anode_node::realtime`).
    pub fn new(net: &'a mut dyn Net, step: usize) -> StepCtx<'a> {
        StepCtx { net, step }
    }

    /// Time since the start of the run.
    pub fn now(&self) -> Duration {
        self.net.now()
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.net.nodes().len()
    }

    /// A node's name.
    pub fn node_name(&self, i: usize) -> &str {
        self.net.nodes().get(i).map_or("?", |n| n.name.as_str())
    }

    /// A node's address in this run.
    pub fn node_addr(&self, i: usize) -> Option<anode_wire::NodeAddr> {
        self.net.nodes().get(i).map(|n| n.address)
    }

    /// Runs `f` on a node (e.g. to inject a packet or install a module).
    pub fn with_node(&mut self, node: usize, f: NodeFn) {
        self.net.with_node(node, f);
    }

    /// Sends a datagram tracked under this step (delivery, latency and path in the report).
    pub fn send_datagram(
        &mut self,
        from: usize,
        to: usize,
        port: u16,
        rb: Option<u16>,
        payload: &[u8],
    ) -> Result<(), DropReason> {
        self.net
            .send_tracked(self.step, from, to, port, rb, payload)
    }

    /// Fails or restores a link.
    pub fn set_link_up(&mut self, link: usize, up: bool) {
        self.net.set_link_up(link, up);
    }

    /// The path `from` -> `to` by the routing tables over up links, or why there is none.
    pub fn path(&mut self, from: usize, to: usize) -> Result<Vec<usize>, String> {
        walk(self.net, from, to)
    }

    /// For every node, whether its path to `to` arrives (what [`StepCtx::path`] says, for all
    /// sources at once in O(n)).
    pub fn reachers(&mut self, to: usize) -> Vec<bool> {
        reachers(self.net, to)
    }

    /// Every node's next hop toward every destination (see [`Net::next_hop_table`]).
    pub fn next_hop_table(&mut self) -> Vec<u32> {
        self.net.next_hop_table()
    }

    /// [`StepCtx::reachers`] read from a [`StepCtx::next_hop_table`].
    pub fn reachers_in(&self, table: &[u32], to: usize) -> Vec<bool> {
        reachers_in(table, self.net.nodes().len(), to)
    }

    /// The next hop `from`'s routing table names toward `to`.
    pub fn next_hop(&mut self, from: usize, to: usize) -> Option<usize> {
        self.net.next_hop(from, to)
    }

    /// Datagrams delivered at `node` so far.
    pub fn delivered(&self, node: usize, port: Option<u16>) -> u64 {
        self.net.delivered(node, port)
    }

    /// The run's EE events (non-datagram deliveries, EE logs) from position `from` on; an
    /// action remembers how far it read.
    pub fn ee_events(&self, from: usize) -> &[EeEvent] {
        self.net.ee_events().get(from..).unwrap_or(&[])
    }
}

/// What an action may read when it reports.
#[derive(Debug)]
pub struct ReportCtx<'a> {
    pub(crate) step: usize,
    pub(crate) at: Duration,
    pub(crate) nodes: &'a [NodeSpec],
    pub(crate) links: &'a [LinkSpec],
    pub(crate) tracker: &'a Tracker,
    pub(crate) failures: &'a [FailureReport],
}

impl ReportCtx<'_> {
    /// The step's time.
    pub fn at(&self) -> Duration {
        self.at
    }

    /// A node's name.
    pub fn node_name(&self, i: usize) -> &str {
        self.nodes.get(i).map_or("?", |n| n.name.as_str())
    }

    /// "a-b" for link `i`.
    pub fn link_name(&self, i: usize) -> String {
        match self.links.get(i) {
            Some(l) => format!("{}-{}", self.node_name(l.a), self.node_name(l.b)),
            None => format!("link{i}"),
        }
    }

    /// The datagrams this step sent, in send order.
    pub fn flows(&self) -> impl Iterator<Item = &FlowRec> {
        self.tracker.of_step(self.step)
    }

    /// The analysis of the first failure of `link` at or after this step's time (in
    /// realtime the failure happens a little after the step's nominal time).
    pub fn failure(&self, link: usize) -> Option<&FailureReport> {
        let at = self.at.as_micros() as u64;
        self.failures
            .iter()
            .find(|f| f.link_index == link && f.failed_at_us >= at)
    }
}
