//! Prometheus metrics of a running node: `[metrics] listen = "127.0.0.1:9464"` serves
//! `GET /metrics` in the OpenMetrics text format (which Prometheus scrapes), written by
//! `prometheus-client`.
//!
//! A scrape takes one [`Snapshot`] on the node's thread (counters, domains, routes, links,
//! the capsule EE's and modules' statistics: copies of numbers, no formatting), then encodes
//! it on the metrics thread. Families (all prefixed `anode_`; counters end in `_total`):
//! packets and bytes received/sent, packets by path (fast path, EE, cut-through, module,
//! delivered, control), drops by reason, the UDP driver's datagrams and errors, per-domain
//! packets, bytes, CPU seconds, memory and terminations, capsules run and trapped, the code
//! cache (compiled, disk loads, demand loads and their latency as a histogram, disk artifacts
//! rejected), code serving limits and guest log lines dropped, per-module packets and state,
//! routes and route changes, links (enabled, neighbor up), control connections.
//!
//! The server ([`serve`]): `tiny_http` on a loopback address on its own thread; `/metrics`
//! answers 200, `/` a short page naming it, anything else 404, non-GET 405. It holds the
//! node weakly: a stopped node's endpoint answers 503.

use std::collections::BTreeMap;
use std::fmt::Error as FmtError;
use std::net::SocketAddr;
use std::sync::Arc;

use anode_capsule::CapsuleStats;
use anode_core::{Counters, DomainReport, Node};
use anode_ctl::{ControlStats, LinkEntry};
use std::fmt::Write as _;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// One module's numbers.
#[derive(Debug, Clone)]
pub struct ModuleSnap {
    /// Its name.
    pub name: String,
    /// Its state ("active", "resolved", ...).
    pub state: String,
    /// Packets it processed.
    pub packets: u64,
    /// Bytes its files hold.
    pub file_bytes: u64,
}

/// What one scrape reports; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The node's counters.
    pub counters: Counters,
    /// The UDP driver's statistics by name.
    pub driver: BTreeMap<String, u64>,
    /// The control server's statistics (absent without a control socket).
    pub control: Option<ControlStats>,
    /// NodeOS domains per EE.
    pub domains: Vec<DomainReport>,
    /// The capsule EE's statistics and its code-load latencies histogram.
    pub capsule: Option<CapsuleStats>,
    /// The capsule EE's files (ABI v2): refusals by reason, bytes held, disk write failures.
    pub capsule_files: Option<CapsuleFiles>,
    /// Service modules' file operations refused, by reason (`FileRefusal::ALL` order).
    pub module_files_refused: Option<[u64; 5]>,
    /// Reachable routes.
    pub routes: u64,
    /// Route changes since start.
    pub route_changes: u64,
    /// The routing protocol's own counters by name (`Node::routing_counters`; routes and
    /// route changes have families of their own).
    pub routing: Vec<(&'static str, u64)>,
    /// Links (as `anode links` shows them).
    pub links: Vec<LinkEntry>,
    /// Modules.
    pub modules: Vec<ModuleSnap>,
    /// Capsule principals -> the protocol names their code declares (a `protocol` label).
    pub code_names: std::collections::HashMap<String, String>,
    /// The deployment service's counters and how many modules are deployed here.
    pub deploy: Option<(anode_modules::deploy::DeployStats, usize)>,
}

/// What a snapshot keeps of the capsule EE's files.
#[derive(Debug, Clone, Default)]
pub struct CapsuleFiles {
    /// Refusals in `FileRefusal::ALL` order.
    pub refused: [u64; 5],
    /// Bytes held.
    pub bytes: u64,
    /// Disk writes that failed.
    pub write_failures: u64,
}

impl Snapshot {
    /// Takes the node's part of a snapshot (on the node's thread).
    pub fn of(n: &mut Node) -> Snapshot {
        let links = crate::control::convert::links(n);
        let routes = crate::control::convert::routes(n)
            .iter()
            .filter(|r| r.reachable)
            .count();
        let (modules, module_files_refused) = match anode_modules::host_mut(n) {
            Some(h) => {
                let list = h
                    .list()
                    .into_iter()
                    .map(|m| ModuleSnap {
                        name: m.name,
                        state: format!("{:?}", m.state).to_lowercase(),
                        packets: m.packets,
                        file_bytes: m.files.1,
                    })
                    .collect();
                (list, Some(anode_modules::files::lock(h.files()).refused()))
            }
            None => (Vec::new(), None),
        };
        let code_names = crate::ees::code_names(n);
        let deploy = n
            .ee_mut(anode_wire::anep::TYPE_DEPLOY)
            .and_then(|e| {
                e.as_any_mut()
                    .downcast_mut::<anode_modules::deploy::DeployEe>()
            })
            .map(|d| (d.stats().clone(), d.deployed().count()));
        Snapshot {
            code_names,
            deploy,
            counters: n.counters().clone(),
            domains: n.domain_reports(),
            capsule: crate::ees::capsule_ee(n).map(|c| c.stats().clone()),
            module_files_refused,
            capsule_files: crate::ees::capsule_ee(n).map(|c| {
                let f = c.files();
                CapsuleFiles {
                    refused: f.refused(),
                    bytes: f.bytes() as u64,
                    write_failures: f.persist().map_or(0, |p| p.failures()),
                }
            }),
            routes: routes as u64,
            route_changes: n.route_changes(),
            routing: n.routing_counters(),
            links,
            modules,
            ..Snapshot::default()
        }
    }

    /// The OpenMetrics text of this snapshot.
    pub fn render(self) -> String {
        let mut reg = Registry::default();
        reg.register_collector(Box::new(self));
        let mut out = String::new();
        // Writing to a String cannot fail; an encoding error would leave a partial page.
        let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
        out
    }
}

/// Writes one family.
struct Fam<'a, 'e> {
    enc: &'a mut DescriptorEncoder<'e>,
}

type Labels<'a> = Vec<(&'static str, &'a str)>;

impl Fam<'_, '_> {
    /// One family of `kind`: a row per label set, each value made a metric by `make` (a
    /// single row without labels is written without braces).
    fn rows<V: Copy, M: EncodeMetric>(
        &mut self,
        (name, help, unit): (&str, &str, Option<&Unit>),
        kind: MetricType,
        rows: &[(Labels<'_>, V)],
        make: fn(V) -> M,
    ) -> Result<(), FmtError> {
        let mut m = self.enc.encode_descriptor(name, help, unit, kind)?;
        if let [(l, v)] = rows
            && l.is_empty()
        {
            return make(*v).encode(m);
        }
        for (l, v) in rows {
            let l: Vec<(&str, Esc<'_>)> = l.iter().map(|(k, v)| (*k, Esc(v))).collect();
            make(*v).encode(m.encode_family(&l)?)?;
        }
        Ok(())
    }

    fn counter(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        rows: &[(Labels<'_>, u64)],
    ) -> Result<(), FmtError> {
        self.rows(
            (name, help, unit),
            MetricType::Counter,
            rows,
            ConstCounter::new,
        )
    }

    fn counter_f(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        rows: &[(Labels<'_>, f64)],
    ) -> Result<(), FmtError> {
        self.rows(
            (name, help, unit),
            MetricType::Counter,
            rows,
            ConstCounter::new,
        )
    }

    fn gauge(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        rows: &[(Labels<'_>, i64)],
    ) -> Result<(), FmtError> {
        self.rows((name, help, unit), MetricType::Gauge, rows, ConstGauge::new)
    }
}

/// A label value escaped as the text format requires (`\\`, `\"`, `\n`): prometheus-client
/// 0.23 writes `&str` label values as they are, so a principal named in a policy file with a
/// quote in it would break the page.
struct Esc<'a>(&'a str);

impl EncodeLabelValue for Esc<'_> {
    fn encode(&self, w: &mut LabelValueEncoder<'_>) -> Result<(), FmtError> {
        for c in self.0.chars() {
            match c {
                '\\' => w.write_str("\\\\")?,
                '"' => w.write_str("\\\"")?,
                '\n' => w.write_str("\\n")?,
                c => w.write_char(c)?,
            }
        }
        Ok(())
    }
}

fn g(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl prometheus_client::collector::Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), FmtError> {
        let mut f = Fam { enc: &mut enc };
        self.encode_packets(&mut f)?;
        self.encode_domains(&mut f)?;
        self.encode_capsule(&mut f)?;
        self.encode_files(&mut f)?;
        self.encode_deploy(&mut f)?;
        self.encode_routing(&mut f)
    }
}

impl Snapshot {
    fn encode_packets(&self, f: &mut Fam<'_, '_>) -> Result<(), FmtError> {
        let c = &self.counters;
        let b = Some(&Unit::Bytes);
        f.counter(
            "anode_received_packets",
            "Packets received on links.",
            None,
            &[(vec![], c.rx_packets)],
        )?;
        f.counter(
            "anode_received",
            "Bytes received on links.",
            b,
            &[(vec![], c.rx_bytes)],
        )?;
        f.counter(
            "anode_sent_packets",
            "Packets queued for transmission.",
            None,
            &[(vec![], c.tx_packets)],
        )?;
        f.counter(
            "anode_sent",
            "Bytes queued for transmission.",
            b,
            &[(vec![], c.tx_bytes)],
        )?;
        f.counter(
            "anode_local_packets",
            "Packets originated on this node.",
            None,
            &[(vec![], c.local_packets)],
        )?;
        let paths: [(&str, u64); 8] = [
            ("fast", c.fast_path),
            ("cut_through", c.cut_through),
            ("ee", c.to_ee),
            ("module", c.hook_consumed),
            ("delivered", c.delivered),
            ("control", c.control_rx),
            ("unknown_type_forwarded", c.unknown_type_forwarded),
            ("dropped", c.total_drops()),
        ];
        let rows: Vec<_> = paths
            .iter()
            .map(|(p, v)| (vec![("path", *p)], *v))
            .collect();
        f.counter("anode_packets_by_path", "Packets by what the node did with them (fast path, cut-through channel, an EE, a service module, local delivery, control, forwarded by option, dropped).", None, &rows)?;
        let o = c.outcomes;
        let outcomes: [(&str, u64); 4] = [
            ("forwarded", o.forwarded),
            ("delivered", o.delivered),
            ("consumed", o.consumed),
            ("dropped", o.dropped),
        ];
        let rows: Vec<_> = outcomes
            .iter()
            .map(|(p, v)| (vec![("outcome", *p)], *v))
            .collect();
        f.counter("anode_packet_outcomes", "Packets received or originated here by their one outcome (with anode_packets_held, they sum to anode_received_packets + anode_local_packets).", None, &rows)?;
        f.gauge(
            "anode_packets_held",
            "Packets an EE holds now (capsules waiting for code, packets queued for a NodeOS domain).",
            None,
            &[(vec![], i64::try_from(o.held).unwrap_or(i64::MAX))],
        )?;
        let drops = c.drop_map();
        let rows: Vec<_> = drops
            .iter()
            .map(|(r, v)| (vec![("reason", r.as_str())], *v))
            .collect();
        f.counter(
            "anode_drops",
            "Packets dropped, by reason (EE reasons as ee/reason).",
            None,
            &rows,
        )?;
        let rows: Vec<_> = self
            .driver
            .iter()
            .map(|(k, v)| (vec![("stat", k.as_str())], *v))
            .collect();
        f.counter(
            "anode_udp_driver",
            "The UDP driver's counters (datagrams, batches, syscalls, errors by errno).",
            None,
            &rows,
        )?;
        if let Some(cs) = &self.control {
            f.gauge(
                "anode_control_connections",
                "Open control-socket connections.",
                None,
                &[(vec![], g(cs.connections))],
            )?;
            f.counter(
                "anode_control_refused_connections",
                "Control connections refused over max_connections.",
                None,
                &[(vec![], cs.refused_connections)],
            )?;
            f.counter(
                "anode_control_idle_closed",
                "Idle control connections closed.",
                None,
                &[(vec![], cs.idle_closed)],
            )?;
            if let Some(r) = &cs.remote {
                let mut rows = vec![(vec![("result", "accepted")], r.accepted)];
                rows.extend(
                    r.refused
                        .iter()
                        .map(|(k, v)| (vec![("result", k.as_str())], *v)),
                );
                f.counter(
                    "anode_remote_requests",
                    "Signed remote-management requests: accepted, or refused by reason.",
                    None,
                    &rows,
                )?;
            }
        }
        Ok(())
    }

    fn encode_domains(&self, f: &mut Fam<'_, '_>) -> Result<(), FmtError> {
        let mut pk = Vec::new();
        let mut by = Vec::new();
        let mut cpu = Vec::new();
        let mut mem = Vec::new();
        let mut lim = Vec::new();
        let mut dr = Vec::new();
        let ids: Vec<Vec<String>> = self
            .domains
            .iter()
            .map(|r| r.domains.iter().map(|d| d.id.to_string()).collect())
            .collect();
        for (r, ids) in self.domains.iter().zip(&ids) {
            for (d, id) in r.domains.iter().zip(ids) {
                let mut l = vec![
                    ("ee", r.ee.as_str()),
                    ("domain", id.as_str()),
                    ("principal", d.principal.as_str()),
                ];
                if let Some(name) = self.code_names.get(&d.principal) {
                    l.push(("protocol", name.as_str()));
                }
                pk.push((l.clone(), d.packets));
                by.push((l.clone(), d.bytes));
                cpu.push((l.clone(), d.cpu_ns as f64 / 1e9));
                mem.push((l.clone(), g(d.memory_bytes)));
                lim.push((l.clone(), g(d.memory_limit)));
                for (why, n) in &d.drops {
                    let mut l = l.clone();
                    l.push(("reason", why.as_str()));
                    dr.push((l, *n));
                }
            }
        }
        f.counter(
            "anode_domain_packets",
            "Packets handled for a NodeOS domain.",
            None,
            &pk,
        )?;
        f.counter(
            "anode_domain",
            "Bytes handled for a NodeOS domain.",
            Some(&Unit::Bytes),
            &by,
        )?;
        f.counter_f(
            "anode_domain_cpu",
            "CPU time charged to a NodeOS domain.",
            Some(&Unit::Seconds),
            &cpu,
        )?;
        f.gauge(
            "anode_domain_memory",
            "Memory held by a NodeOS domain.",
            Some(&Unit::Bytes),
            &mem,
        )?;
        f.gauge(
            "anode_domain_memory_limit",
            "A NodeOS domain's memory limit.",
            Some(&Unit::Bytes),
            &lim,
        )?;
        f.counter(
            "anode_domain_drops",
            "Packets of a NodeOS domain dropped, by reason.",
            None,
            &dr,
        )?;
        let t: Vec<_> = self
            .domains
            .iter()
            .map(|r| (vec![("ee", r.ee.as_str())], r.terminations))
            .collect();
        f.counter(
            "anode_domain_terminations",
            "NodeOS domains terminated (CPU, memory or policy).",
            None,
            &t,
        )?;
        Ok(())
    }

    fn encode_files(&self, f: &mut Fam<'_, '_>) -> Result<(), FmtError> {
        let Some(c) = &self.capsule_files else {
            return Ok(());
        };
        let rows: Vec<(Labels<'_>, u64)> = anode_capsule::files::FileRefusal::ALL
            .iter()
            .zip(c.refused)
            .map(|(r, n)| (vec![("reason", r.name())], n))
            .collect();
        f.counter(
            "anode_capsule_files_refused",
            "File operations of capsule code refused (ABI v2 files), by reason.",
            None,
            &rows,
        )?;
        f.gauge(
            "anode_capsule_file_bytes",
            "Bytes held in capsule code objects' files.",
            None,
            &[(Vec::new(), g(c.bytes))],
        )?;
        f.counter(
            "anode_capsule_file_write_failures",
            "Writes of capsule files to disk that failed (the files in memory are unaffected).",
            None,
            &[(Vec::new(), c.write_failures)],
        )
    }

    fn encode_capsule(&self, f: &mut Fam<'_, '_>) -> Result<(), FmtError> {
        let Some(c) = &self.capsule else {
            return Ok(());
        };
        let one = |v: u64| [(Vec::new(), v)];
        f.counter(
            "anode_capsules",
            "Capsules the capsule EE handled.",
            None,
            &one(c.capsules),
        )?;
        f.counter(
            "anode_capsule_runs",
            "Capsule code runs.",
            None,
            &one(c.runs),
        )?;
        f.counter(
            "anode_capsule_traps",
            "Capsule runs that trapped.",
            None,
            &one(c.traps),
        )?;
        f.counter(
            "anode_code_compiled",
            "Code objects compiled.",
            None,
            &one(c.compiled),
        )?;
        f.counter(
            "anode_code_tier_ups",
            "Code objects recompiled by Cranelift off the node thread and swapped in.",
            None,
            &one(c.tier_ups),
        )?;
        f.counter(
            "anode_code_disk_loads",
            "Code objects loaded from the disk cache.",
            None,
            &one(c.disk_loads),
        )?;
        f.counter(
            "anode_code_disk_rejected",
            "Disk cache artifacts that failed verification (recompiled).",
            None,
            &one(c.disk_rejected),
        )?;
        f.counter(
            "anode_code_loads",
            "Demand loads from the previous hop completed.",
            None,
            &one(c.loads_completed),
        )?;
        f.counter(
            "anode_code_load_failures",
            "Demand loads that failed.",
            None,
            &one(c.load_failures),
        )?;
        f.counter(
            "anode_code_chunks_served",
            "Code chunks served to neighbors.",
            None,
            &one(c.chunks_served),
        )?;
        f.counter(
            "anode_code_serve_limited",
            "Code requests answered short by the serving budget.",
            None,
            &one(c.serve_limited),
        )?;
        f.counter(
            "anode_guest_log_dropped",
            "Guest log lines over the rate limit.",
            None,
            &one(c.log_dropped),
        )?;
        f.counter(
            "anode_capsule_batches",
            "Batches of capsules run with worker threads ([capsule] workers > 1).",
            None,
            &one(c.batches),
        )?;
        f.counter(
            "anode_capsule_worker_groups",
            "Groups of a batch (one per code object) run on the worker threads in parallel.",
            None,
            &one(c.worker_groups),
        )?;
        let (sum, count, buckets) = c.load_histogram();
        let mut m = f.enc.encode_descriptor(
            "anode_code_load",
            "Time to demand-load a code object from the previous hop.",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        m.encode_histogram::<prometheus_client::encoding::NoLabelSet>(sum, count, &buckets, None)
    }

    fn encode_deploy(&self, f: &mut Fam<'_, '_>) -> Result<(), FmtError> {
        let Some((s, deployed)) = &self.deploy else {
            return Ok(());
        };
        let rows: Vec<_> = s
            .outcomes
            .iter()
            .map(|(k, v)| (vec![("outcome", *k)], *v))
            .collect();
        f.counter(
            "anode_deploy_results",
            "Deploy and undeploy requests this node answered, by outcome.",
            None,
            &rows,
        )?;
        let rows: Vec<_> = s
            .refused
            .iter()
            .map(|(k, v)| (vec![("reason", *k)], *v))
            .collect();
        f.counter(
            "anode_deploy_refused",
            "Deploy and undeploy requests refused, by reason.",
            None,
            &rows,
        )?;
        f.counter(
            "anode_deploy_package_bytes",
            "Package bytes fetched from and served to other nodes of paths, and fetched from repositories.",
            None,
            &[
                (vec![("direction", "fetched")], s.fetched_bytes),
                (vec![("direction", "served")], s.served_bytes),
                (vec![("direction", "repository")], s.repo_bytes),
            ],
        )?;
        f.counter(
            "anode_deploy_expired",
            "Deployed modules removed because their lifetime passed without a refresh.",
            None,
            &[(vec![], s.expired)],
        )?;
        f.gauge(
            "anode_deployed_modules",
            "Modules deployed here along a path (soft state).",
            None,
            &[(vec![], g(*deployed as u64))],
        )
    }

    fn encode_routing(&self, f: &mut Fam<'_, '_>) -> Result<(), FmtError> {
        f.gauge(
            "anode_routes",
            "Reachable routes in the routing table.",
            None,
            &[(vec![], g(self.routes))],
        )?;
        f.counter(
            "anode_route_changes",
            "Routing table changes since start.",
            None,
            &[(vec![], self.route_changes)],
        )?;
        let rows: Vec<_> = self
            .routing
            .iter()
            .map(|(k, v)| (vec![("counter", *k)], *v))
            .collect();
        f.counter(
            "anode_routing_protocol",
            "The routing protocol's own work: distance vector updates, full tables, digests and requests sent and received; link state LSAs received, installed and originated, LSA messages, database digests and summaries sent, SPF runs.",
            None,
            &rows,
        )?;
        let up = |b: bool| i64::from(b);
        let en: Vec<_> = self
            .links
            .iter()
            .map(|l| (vec![("link", l.name.as_str())], up(l.enabled)))
            .collect();
        let nb: Vec<_> = self
            .links
            .iter()
            .map(|l| (vec![("link", l.name.as_str())], up(l.neighbor_up)))
            .collect();
        f.gauge("anode_link_enabled", "1 if the link is enabled.", None, &en)?;
        f.gauge(
            "anode_link_neighbor_up",
            "1 if a neighbor is up on the link (hellos both ways, or static).",
            None,
            &nb,
        )?;
        let mp: Vec<_> = self
            .modules
            .iter()
            .map(|m| {
                (
                    vec![("module", m.name.as_str()), ("state", m.state.as_str())],
                    m.packets,
                )
            })
            .collect();
        f.counter(
            "anode_module_packets",
            "Packets a service module processed.",
            None,
            &mp,
        )?;
        let Some(refused) = self.module_files_refused else {
            return Ok(());
        };
        let fb: Vec<_> = self
            .modules
            .iter()
            .map(|m| (vec![("module", m.name.as_str())], g(m.file_bytes)))
            .collect();
        f.gauge(
            "anode_module_file_bytes",
            "Bytes a service module's files hold.",
            None,
            &fb,
        )?;
        let rows: Vec<(Labels<'_>, u64)> = anode_capsule::files::FileRefusal::ALL
            .iter()
            .zip(refused)
            .map(|(r, n)| (vec![("reason", r.name())], n))
            .collect();
        f.counter(
            "anode_module_files_refused",
            "File operations of service modules refused, by reason.",
            None,
            &rows,
        )
    }
}

/// Serves `snapshot()` on `listener` (bound by the caller to a loopback address, or handed
/// over by the process this one took over from) from a background thread. `snapshot`
/// returns `None` once the node is gone (503).
pub fn serve(
    listener: std::net::TcpListener,
    snapshot: Arc<dyn Fn() -> Option<Snapshot> + Send + Sync>,
) -> Result<MetricsServer, std::io::Error> {
    let server =
        Arc::new(tiny_http::Server::from_listener(listener, None).map_err(std::io::Error::other)?);
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| std::io::Error::other("the metrics server is not on an IP address"))?;
    let srv = Arc::clone(&server);
    std::thread::Builder::new()
        .name("anode-metrics".into())
        .spawn(move || {
            for req in srv.incoming_requests() {
                let resp = answer(req.method(), req.url(), &*snapshot);
                let _ = req.respond(resp);
            }
        })?;
    Ok(MetricsServer { server, bound })
}

/// A running metrics endpoint ([`serve`]).
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    bound: SocketAddr,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("bound", &self.bound)
            .finish()
    }
}

impl MetricsServer {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.bound
    }

    /// Stops answering (the listening socket closes once nothing else holds it: a process
    /// taking over the node may hold a copy and serve it on).
    pub fn stop(self) {
        self.server.unblock();
    }
}

/// The response to one request.
fn answer(
    method: &tiny_http::Method,
    url: &str,
    snapshot: &dyn Fn() -> Option<Snapshot>,
) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let typed = |r: tiny_http::Response<std::io::Cursor<Vec<u8>>>, v: &str| {
        match tiny_http::Header::from_bytes(&b"Content-Type"[..], v.as_bytes()) {
            Ok(h) => r.with_header(h),
            Err(()) => r,
        }
    };
    let text = |code: u16, body: String| {
        typed(
            tiny_http::Response::from_string(body).with_status_code(code),
            "text/plain; charset=utf-8",
        )
    };
    if *method != tiny_http::Method::Get && *method != tiny_http::Method::Head {
        return text(405, "only GET\n".into());
    }
    match url.split('?').next().unwrap_or("") {
        "/metrics" => match snapshot() {
            Some(s) => typed(
                tiny_http::Response::from_string(s.render()),
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            ),
            None => text(503, "the node has stopped\n".into()),
        },
        "/" => typed(
            tiny_http::Response::from_string(
                "<html><body><h1>anode</h1><p><a href=\"/metrics\">/metrics</a></p></body></html>\n",
            ),
            "text/html; charset=utf-8",
        ),
        other => text(404, format!("no page {other}; metrics are at /metrics\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_nodeos::{Credentials, DomainId, NodeOs, NodeOsConfig, Policy};

    #[test]
    fn domains_are_rendered_escaped_and_served_over_http() {
        let mut cfg = NodeOsConfig::default();
        cfg.policies.insert("p\"q", Policy::default());
        let mut os = NodeOs::new(cfg);
        let d = os
            .create_domain(DomainId::ROOT, &Credentials::new("p\"q"), None)
            .unwrap();
        os.count_packet(d, 100);
        os.count_drop(d, anode_core::DropReason::Bandwidth);
        let snap = Snapshot {
            domains: vec![os.report("capsule")],
            ..Snapshot::default()
        };
        let text = snap.clone().render();
        assert!(
            text.contains(
                "anode_domain_packets_total{ee=\"capsule\",domain=\"1\",principal=\"p\\\"q\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("anode_domain_terminations_total{ee=\"capsule\"} 0"),
            "{text}"
        );
        assert!(text.contains("reason=\"bandwidth\"} 1"), "{text}");
        let server = serve(
            std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
            Arc::new(move || Some(snap.clone())),
        )
        .unwrap();
        let addr = server.addr();
        let get = |path: &str| anode_testkit::http::get(addr, path);
        let resp = get("/metrics");
        assert!(resp.starts_with("HTTP/1.1 200 OK"), "{resp}");
        assert!(resp.ends_with(text.as_str()), "{resp}");
        assert!(get("/other").starts_with("HTTP/1.1 404"));
    }
}
