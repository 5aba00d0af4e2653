//! The kernel fast path: an eBPF program (`bpf/fastpath.c`, compiled by `build.rs`) that
//! forwards plain IPv4/IPv6 with the router's own tables, in front of the user-space router.
//!
//! Why: on veth the user-space data path reaches 36-56% of kernel forwarding; the same
//! MAC/TTL rewrite plus `bpf_redirect` on **TC ingress** (clsact, direct action) measured
//! 107% (64 B) and 102% (1472 B) of it, while native XDP on veth measured 55% / 44% (veth
//! copies skbs into xdp_buffs). So [`Hook::Tc`](crate::fastpath::Hook::Tc) is the default; [`Hook::Xdp`](crate::fastpath::Hook::Xdp) runs the same
//! decision for NICs whose native XDP is fast.
//!
//! ## Contract
//! The program forwards a packet only when every condition of the contract in
//! `anode_ip::router` (`fast.rs`: [`anode_ip::FastTable`]) holds, with the tables
//! [`FastPath::sync`](crate::fastpath::FastPath::sync) wrote from the router's [`anode_ip::FastTable`], and then produces the
//! same bytes `IpRouter::handle_frame` would (trailing link padding trimmed, TTL and RFC 1624
//! checksum or hop limit, MACs); every other frame goes on (`TC_ACT_OK` / `XDP_PASS`) to the
//! stack unchanged, where the user-space router's packet sockets get it. The crate's
//! `tests/fastpath.rs` checks this differentially against `IpRouter` on generated frames.
//!
//! ## Maps and their bounds
//! - `ifaces`: an array indexed by ifindex (4096 slots: one inlined load, no hash probe;
//!   an interface with a larger ifindex is not on the fast path) -> MAC, MTU, router id.
//! - `routes_v4` / `routes_v6`: LPM tries, 65536 each. A route carries its outgoing
//!   interface's MAC and MTU (no second interface lookup), and the router's own addresses and
//!   directed broadcasts (up to 4096 per family) are host routes marked `punt`, so one
//!   longest-prefix lookup says both "is it the router's?" and "where to".
//! - `neigh`: (ifindex, family, address) -> MAC and a `used` flag; 16384.
//! - `config`: punt-all flags, up to 8 demux filters of up to 4 keys of 16 bytes at offsets
//!   up to 1500 (longer keys are split).
//! - `stats`: per-CPU counters.
//!
//! These choices took the program's cost per forwarded frame from 160 ns (four hash probes
//! and the LPM) to about 97 ns (benches/fastpath.rs; a frame passed on at the first check:
//! 30 ns). What does not fit is handled conservatively by
//! [`FastPath::sync`](crate::fastpath::FastPath::sync): the family it affects is punted as a
//! whole, or (for neighbors) the rest goes to the router;
//! [`SyncReport::notes`](crate::fastpath::SyncReport::notes) says which.
//!
//! ## Updates
//! [`FastPath::sync`](crate::fastpath::FastPath::sync) keeps a shadow copy of what it wrote
//! and writes only the differences. Order: the config first (a change of filters goes
//! through a punt-everything step so the program never sees half a filter table), then
//! interfaces, routes (new entries, punt host routes included, before removals) and
//! neighbors.
//!
//! ## Attaching
//! TC: a clsact qdisc is added where there is none (and deleted again on drop only if we
//! added it) and a direct-action ingress filter through netlink (so `tc filter show dev IF
//! ingress` lists it). XDP: the kernel picks native or generic mode. Drop detaches; the
//! netlink requests of attach and detach go to the calling thread's network namespace, so
//! load and drop a `FastPath` in the namespace of its interfaces.
//!
//! ## Limits
//! - VLANs: the stack moves an 802.1Q tag into skb metadata before TC ingress; the TC
//!   program checks `vlan_present` and passes such frames on. At XDP a tag stripped by the
//!   NIC (rx VLAN offload) is invisible: use [`Hook::Xdp`](crate::fastpath::Hook::Xdp) only
//!   with that offload off or without VLANs.
//! - GRO: a merged packet is longer than the MTU and goes to the router (as it does without
//!   the fast path); keep GRO off on routed interfaces (the veth default).
//! - A frame the program redirected had its link padding trimmed and was rewritten; a
//!   helper failing after the trim (cannot happen for a frame that passed the checks) would
//!   hand on the trimmed frame, counted as `error`.

mod maps;
pub(crate) mod sys;

use std::collections::BTreeMap;
use std::fmt;
use std::os::fd::{AsFd, AsRawFd};

use anode_ip::FastTable;
use anode_ip::router::NeighKey;
use aya::maps::lpm_trie::Key as LpmKey;
use aya::maps::{Array, HashMap, LpmTrie, MapData, MapError, PerCpuArray};
use aya::programs::tc::{NlOptions, TcAttachOptions, TcError};
use aya::programs::{ProgramError, SchedClassifier, TcAttachType, Xdp, XdpMode};
use aya::{Ebpf, EbpfError, EbpfLoader};

use maps::{ConfigC, Desired, IfaceVal, NeighKeyC, NeighVal, RouteVal, StatsC, desired, stat};
pub use maps::{
    IFINDEX_MAX, KEY_BYTES, MAX_FILTERS, MAX_KEY_OFFSET, MAX_KEYS, NEIGH_MAX, PUNT_MAX, ROUTES_MAX,
};

/// The compiled program (see `build.rs`).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/fastpath.o"));

/// Where the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// TC ingress (clsact, direct action): the measured, default one.
    Tc,
    /// XDP (native where the driver has it, else generic).
    Xdp,
}

impl Hook {
    fn program(self) -> &'static str {
        match self {
            Hook::Tc => "anode_fastpath_tc",
            Hook::Xdp => "anode_fastpath_xdp",
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hook::Tc => "tc",
            Hook::Xdp => "xdp",
        })
    }
}

/// The verdicts the program returns.
pub mod verdict {
    /// `TC_ACT_OK`: go on to the stack.
    pub const TC_ACT_OK: u32 = 0;
    /// `TC_ACT_REDIRECT`: forwarded.
    pub const TC_ACT_REDIRECT: u32 = 7;
    /// `XDP_PASS`.
    pub const XDP_PASS: u32 = 2;
    /// `XDP_REDIRECT`.
    pub const XDP_REDIRECT: u32 = 4;
}

/// What went wrong loading, attaching or updating the fast path.
#[derive(Debug, thiserror::Error)]
pub enum FastPathError {
    /// The process may not load eBPF programs or create maps.
    #[error(
        "loading the eBPF fast path: not permitted ({reason}); it needs CAP_BPF and CAP_NET_ADMIN (run as root)"
    )]
    Permission {
        /// The kernel's answer.
        reason: String,
    },
    /// The embedded object could not be loaded (maps, BTF, relocations).
    #[error("loading the eBPF fast path object: {reason}")]
    Object {
        /// What aya reported.
        reason: String,
    },
    /// The verifier rejected the program.
    #[error("the kernel verifier rejected the {hook} fast path program: {reason}\n{log}")]
    Verifier {
        /// Which program.
        hook: Hook,
        /// The load error.
        reason: String,
        /// The verifier log.
        log: String,
    },
    /// Attaching to an interface failed.
    #[error("attaching the {hook} fast path to interface {ifindex} ({name}): {reason}")]
    Attach {
        /// Hook.
        hook: Hook,
        /// Linux ifindex.
        ifindex: u32,
        /// Its name, if it has one.
        name: String,
        /// Why.
        reason: String,
    },
    /// A map operation failed.
    #[error("fast path map {map}: {op}: {reason}")]
    Map {
        /// Map name.
        map: &'static str,
        /// Operation.
        op: &'static str,
        /// Why.
        reason: String,
    },
    /// A test run (`BPF_PROG_TEST_RUN`) failed.
    #[error("running the fast path program on a test frame: {reason}")]
    TestRun {
        /// Why.
        reason: String,
    },
}

pub(crate) fn map_err(map: &'static str, op: &'static str) -> impl Fn(MapError) -> FastPathError {
    move |e| FastPathError::Map {
        map,
        op,
        reason: e.to_string(),
    }
}

/// What a [`FastPath::sync`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Map entries written (inserted or changed).
    pub written: usize,
    /// Map entries deleted.
    pub deleted: usize,
    /// All IPv4 goes to the router (the table says so, or something did not fit).
    pub punt_all_v4: bool,
    /// All IPv6 goes to the router.
    pub punt_all_v6: bool,
    /// Demux filters the program holds.
    pub filters: usize,
    /// What did not fit the program's bounds and what was done instead (empty: everything fit).
    pub notes: Vec<String>,
}

/// The program's counters, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FastPathStats {
    /// IPv4 packets forwarded.
    pub forwarded_v4: u64,
    /// IPv6 packets forwarded.
    pub forwarded_v6: u64,
    /// Bytes forwarded (Ethernet header included).
    pub forwarded_bytes: u64,
    /// Passed on: not IPv4/IPv6, or VLAN-tagged.
    pub not_ip: u64,
    /// Passed on: not to the receiving interface's unicast MAC (or an interface not ours).
    pub not_for_our_mac: u64,
    /// Passed on: bad version, length or IPv4 header checksum.
    pub bad_header: u64,
    /// Passed on: IPv4 options or a fragment, IPv6 hop-by-hop options.
    pub options_or_fragment: u64,
    /// Passed on: special (multicast, broadcast, loopback, unspecified, link-local) address.
    pub martian: u64,
    /// Passed on: to the router itself, a directed broadcast, or the family punted whole.
    pub punted: u64,
    /// Passed on: a demux filter matched.
    pub filter: u64,
    /// Passed on: TTL / hop limit would expire.
    pub ttl: u64,
    /// Passed on: no route (or one out of an interface the fast path does not own).
    pub no_route: u64,
    /// Passed on: bigger than the outgoing MTU.
    pub too_big: u64,
    /// Passed on: next hop not resolved.
    pub no_neighbor: u64,
    /// Passed on: a kernel helper failed (pulling the headers, trimming), or a demux key's
    /// bytes were not in the pulled part (cannot happen with tables from [`FastPath::sync`]).
    pub error: u64,
    /// Not a verdict (counted besides one): non-linear skbs (payload in page fragments) whose
    /// headers and demux-key bytes the TC program pulled into the linear part; the payload
    /// itself is never copied.
    pub pulled: u64,
}

impl FastPathStats {
    fn from_counters(c: &[u64; stat::COUNT]) -> Self {
        let g = |i: usize| c.get(i).copied().unwrap_or(0);
        FastPathStats {
            forwarded_v4: g(stat::FWD_V4),
            forwarded_v6: g(stat::FWD_V6),
            forwarded_bytes: g(stat::FWD_BYTES),
            not_ip: g(stat::NOT_IP),
            not_for_our_mac: g(stat::NOT_OUR_MAC),
            bad_header: g(stat::BAD_HEADER),
            options_or_fragment: g(stat::OPTS_FRAG),
            martian: g(stat::MARTIAN),
            punted: g(stat::PUNTED),
            filter: g(stat::FILTER),
            ttl: g(stat::TTL),
            no_route: g(stat::NO_ROUTE),
            too_big: g(stat::TOO_BIG),
            no_neighbor: g(stat::NO_NEIGHBOR),
            error: g(stat::ERROR),
            pulled: g(stat::PULLED),
        }
    }

    /// Frames passed on to the router, all reasons.
    pub fn passed(&self) -> u64 {
        self.not_ip
            + self.not_for_our_mac
            + self.bad_header
            + self.options_or_fragment
            + self.martian
            + self.punted
            + self.filter
            + self.ttl
            + self.no_route
            + self.too_big
            + self.no_neighbor
            + self.error
    }

    /// One-line human summaries, for exit reports.
    pub fn report(&self) -> Vec<String> {
        let mut v = vec![format!(
            "kernel fast path: forwarded {} IPv4 + {} IPv6 packets, {} bytes ({} non-linear frames had their headers pulled)",
            self.forwarded_v4, self.forwarded_v6, self.forwarded_bytes, self.pulled
        )];
        let reasons = [
            ("not IP or tagged", self.not_ip),
            ("not for our MAC", self.not_for_our_mac),
            ("bad header", self.bad_header),
            ("options/fragment/hop-by-hop", self.options_or_fragment),
            ("special address", self.martian),
            ("for the router/broadcast/punted", self.punted),
            ("filter", self.filter),
            ("ttl", self.ttl),
            ("no route", self.no_route),
            ("too big", self.too_big),
            ("no neighbor", self.no_neighbor),
            ("helper error", self.error),
        ];
        let parts: Vec<String> = reasons
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        v.push(if parts.is_empty() {
            "kernel fast path: passed 0 frames to the router".to_string()
        } else {
            format!(
                "kernel fast path: passed {} frames to the router: {}",
                self.passed(),
                parts.join(", ")
            )
        });
        v
    }
}

/// One interface the program is attached to.
#[derive(Debug)]
pub(crate) struct Attached {
    pub(crate) ifindex: u32,
    /// We added its clsact qdisc (so we delete it on drop).
    added_clsact: bool,
}

/// A loaded (and usually attached) fast path; see the module docs.
pub struct FastPath {
    hook: Hook,
    /// The program and its links; dropped first on drop (detaches).
    ebpf: Option<Ebpf>,
    ifindex: Vec<u32>,
    attached: Vec<Attached>,
    ifaces: Array<MapData, IfaceVal>,
    routes_v4: LpmTrie<MapData, [u8; 4], RouteVal>,
    routes_v6: LpmTrie<MapData, [u8; 16], RouteVal>,
    neigh: HashMap<MapData, NeighKeyC, NeighVal>,
    config: Array<MapData, ConfigC>,
    stats: PerCpuArray<MapData, StatsC>,
    /// What the maps hold (as written by `sync`).
    shadow: Desired,
}

impl fmt::Debug for FastPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FastPath")
            .field("hook", &self.hook)
            .field("ifindex", &self.ifindex)
            .field("attached", &self.attached)
            .finish_non_exhaustive()
    }
}

fn is_eperm(s: &str) -> bool {
    s.contains("Operation not permitted") || s.contains("os error 1)")
}

/// Takes map `name` out of a loaded object as a `T` (shared with [`crate::transit`]).
pub(crate) fn take<T>(ebpf: &mut Ebpf, name: &'static str) -> Result<T, FastPathError>
where
    T: TryFrom<aya::maps::Map, Error = MapError>,
{
    let m = ebpf.take_map(name).ok_or(FastPathError::Object {
        reason: format!("map {name} missing from the object"),
    })?;
    T::try_from(m).map_err(map_err(name, "open"))
}

impl FastPath {
    /// Loads the program and its maps and attaches it to every interface: `ifaces[i]` is the
    /// Linux ifindex of the router's `IfaceId(i)` (0: not the fast path's; frames routed out
    /// of it go to the router). TC: adds a clsact qdisc if there is none
    /// (and removes it on drop only then) and a direct-action ingress filter. The maps start
    /// empty (everything is passed on) until [`FastPath::sync`].
    pub fn load(hook: Hook, ifaces: &[u32]) -> Result<FastPath, FastPathError> {
        let mut fp = Self::load_unattached(hook, ifaces)?;
        // 0: an interface of the router the fast path does not own (left alone).
        for &ifindex in ifaces.iter().filter(|i| **i != 0) {
            fp.attach(ifindex)?;
        }
        Ok(fp)
    }

    /// Instructions the verifier processed for the loaded program and the program's size in
    /// instructions (for reports; `None` where the kernel does not say).
    pub fn verifier_stats(&self) -> (Option<u32>, Option<u32>) {
        let info = self
            .ebpf
            .as_ref()
            .and_then(|e| e.program(self.hook.program()))
            .and_then(|p| p.info().ok());
        match info {
            Some(i) => (
                i.verified_instruction_count(),
                i.size_translated().map(|b| b / 8),
            ),
            None => (None, None),
        }
    }

    /// Loads the program and its maps without attaching it anywhere (tests run it with
    /// [`FastPath::test_run`]).
    #[doc(hidden)]
    pub fn load_unattached(hook: Hook, ifaces: &[u32]) -> Result<FastPath, FastPathError> {
        let mut ebpf = load_object(OBJECT, hook, hook.program())?;
        Ok(FastPath {
            hook,
            ifindex: ifaces.to_vec(),
            attached: Vec::new(),
            ifaces: take(&mut ebpf, "ifaces")?,
            routes_v4: take(&mut ebpf, "routes_v4")?,
            routes_v6: take(&mut ebpf, "routes_v6")?,
            neigh: take(&mut ebpf, "neigh")?,
            config: take(&mut ebpf, "config")?,
            stats: take(&mut ebpf, "stats")?,
            ebpf: Some(ebpf),
            shadow: Desired::default(),
        })
    }

    fn attach(&mut self, ifindex: u32) -> Result<(), FastPathError> {
        let Some(ebpf) = self.ebpf.as_mut() else {
            return Err(FastPathError::Attach {
                hook: self.hook,
                ifindex,
                name: String::new(),
                reason: "program already released".into(),
            });
        };
        attach(
            ebpf,
            self.hook,
            self.hook.program(),
            ifindex,
            &mut self.attached,
        )
    }

    /// The hook it runs on.
    pub fn hook(&self) -> Hook {
        self.hook
    }

    /// Makes the maps equal to the table: writes only what changed, deletes what is gone.
    pub fn sync(&mut self, t: &FastTable) -> Result<SyncReport, FastPathError> {
        let want = desired(t, &self.ifindex);
        let mut rep = SyncReport {
            punt_all_v4: want.config.punt_all_v4 != 0,
            punt_all_v6: want.config.punt_all_v6 != 0,
            filters: usize::from(want.config.nfilters),
            notes: want.notes.clone(),
            ..SyncReport::default()
        };
        let old = std::mem::take(&mut self.shadow);
        // On an error part-way the maps are in between: the next sync rewrites everything.
        let r = self.apply(&old, &want, &mut rep);
        if r.is_ok() {
            self.shadow = want;
        } else {
            self.shadow = Desired {
                // Unknown contents: force every entry to be written again next time.
                config: ConfigC {
                    nfilters: u8::MAX,
                    ..ConfigC::default()
                },
                ..old_keys_only(&old)
            };
        }
        r.map(|()| rep)
    }

    fn apply(
        &mut self,
        old: &Desired,
        want: &Desired,
        rep: &mut SyncReport,
    ) -> Result<(), FastPathError> {
        // 1. The config; a filter change goes through "punt everything" so the program never
        //    runs on a half-written filter table.
        if want.config != old.config {
            let filters_changed = want.config.nfilters != old.config.nfilters
                || want.config.filters != old.config.filters;
            if filters_changed {
                let mut all = old.config;
                all.punt_all_v4 = 1;
                all.punt_all_v6 = 1;
                self.config
                    .set(0, all, 0)
                    .map_err(map_err("config", "set"))?;
            }
            self.config
                .set(0, want.config, 0)
                .map_err(map_err("config", "set"))?;
            rep.written += 1;
        }
        // 2. Interfaces (array slots by ifindex; a slot no longer used is zeroed), routes
        //    (punted addresses are host routes there; new entries are written before old ones
        //    are removed), neighbors.
        for (i, v) in want.ifaces.iter().filter(|(i, _)| **i < IFINDEX_MAX) {
            if old.ifaces.get(i) != Some(v) {
                self.ifaces
                    .set(*i, *v, 0)
                    .map_err(map_err("ifaces", "set"))?;
                rep.written += 1;
            }
        }
        for i in old.ifaces.keys().filter(|i| **i < IFINDEX_MAX) {
            if !want.ifaces.contains_key(i) {
                self.ifaces
                    .set(*i, IfaceVal::default(), 0)
                    .map_err(map_err("ifaces", "set"))?;
                rep.deleted += 1;
            }
        }
        sync_lpm(
            &mut self.routes_v4,
            &old.routes_v4,
            &want.routes_v4,
            "routes_v4",
            rep,
        )?;
        sync_lpm(
            &mut self.routes_v6,
            &old.routes_v6,
            &want.routes_v6,
            "routes_v6",
            rep,
        )?;
        sync_map(
            &mut self.neigh,
            &old.neigh,
            &want.neigh,
            |k| *k,
            |(_, mac)| NeighVal {
                mac: *mac,
                used: 0,
                pad: 0,
            },
            "neigh",
            rep,
        )?;
        Ok(())
    }

    /// Neighbor entries the program used since the last call (their flags are cleared), as
    /// the router's keys: hand each to `IpRouter::touch_neighbor`.
    pub fn take_used(&mut self) -> Vec<NeighKey> {
        let mut used = Vec::new();
        for (k, (rk, mac)) in &self.shadow.neigh {
            let Ok(v) = self.neigh.get(k, 0) else {
                continue;
            };
            if v.used != 0 {
                used.push(*rk);
                let cleared = NeighVal {
                    mac: *mac,
                    used: 0,
                    pad: 0,
                };
                // BPF_EXIST: never re-create an entry deleted meanwhile.
                let _ = self.neigh.insert(k, cleared, 2);
            }
        }
        used
    }

    /// The program's counters summed over CPUs.
    pub fn stats(&self) -> Result<FastPathStats, FastPathError> {
        let per_cpu = self.stats.get(&0, 0).map_err(map_err("stats", "read"))?;
        Ok(FastPathStats::from_counters(&sum_per_cpu(
            per_cpu.iter().map(|s| &s.c),
        )))
    }

    /// Runs the loaded program once on `frame` as if it had arrived on `ingress_ifindex`
    /// (`BPF_PROG_TEST_RUN`; nothing is sent: a redirect only shows in the verdict).
    /// Returns the verdict (see [`verdict`]) and the frame as the program left it. The
    /// ifindex must name an interface in the calling thread's network namespace.
    #[doc(hidden)]
    pub fn test_run(
        &self,
        frame: &[u8],
        ingress_ifindex: u32,
    ) -> Result<(u32, Vec<u8>), FastPathError> {
        self.time_run(frame, ingress_ifindex, 1)
            .map(|(v, out, _)| (v, out))
    }

    /// [`FastPath::test_run`] `repeat` times on the same packet (each run sees the rewrites
    /// of the one before: a forwarded IPv4 frame loses one TTL per run), returning the last
    /// verdict, the frame, and the kernel's mean time per run (benches/fastpath.rs).
    #[doc(hidden)]
    pub fn time_run(
        &self,
        frame: &[u8],
        ingress_ifindex: u32,
        repeat: u32,
    ) -> Result<(u32, Vec<u8>, std::time::Duration), FastPathError> {
        let fail = |reason: String| FastPathError::TestRun { reason };
        let ebpf = self
            .ebpf
            .as_ref()
            .ok_or_else(|| fail("program released".into()))?;
        let prog = ebpf
            .program(self.hook.program())
            .ok_or_else(|| fail("program missing".into()))?;
        let fd = prog.fd().map_err(|e| fail(e.to_string()))?;
        let raw = fd.as_fd().as_raw_fd();
        let ctx: Vec<u8> = match self.hook {
            // struct __sk_buff up to ifindex (offset 40); the kernel zeroes the rest.
            Hook::Tc => {
                let mut c = vec![0u8; 44];
                if let Some(b) = c.get_mut(40..44) {
                    b.copy_from_slice(&ingress_ifindex.to_ne_bytes());
                }
                c
            }
            // struct xdp_md: data, data_end (= frame length), data_meta, ingress_ifindex.
            Hook::Xdp => {
                let mut c = vec![0u8; 24];
                let len = u32::try_from(frame.len()).map_err(|_| fail("frame too long".into()))?;
                if let Some(b) = c.get_mut(4..8) {
                    b.copy_from_slice(&len.to_ne_bytes());
                }
                if let Some(b) = c.get_mut(12..16) {
                    b.copy_from_slice(&ingress_ifindex.to_ne_bytes());
                }
                c
            }
        };
        let (v, out, ns) =
            sys::test_run_repeat(raw, frame, &ctx, repeat).map_err(|e| fail(e.to_string()))?;
        Ok((v, out, std::time::Duration::from_nanos(u64::from(ns))))
    }
}

impl Drop for FastPath {
    fn drop(&mut self) {
        // Detach (aya's links detach when the program goes), then our qdiscs.
        detach(self.ebpf.take(), &self.attached, "fast path");
    }
}

/// A map delete that found nothing is fine (the shadow is only a belief after an error).
pub(crate) fn remove_ok(r: Result<(), MapError>) -> Result<(), MapError> {
    match r {
        Err(MapError::KeyNotFound) => Ok(()),
        Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        other => other,
    }
}

fn sync_map<K, V, SK, SV>(
    map: &mut HashMap<MapData, K, V>,
    old: &BTreeMap<SK, SV>,
    want: &BTreeMap<SK, SV>,
    key: impl Fn(&SK) -> K,
    val: impl Fn(&SV) -> V,
    name: &'static str,
    rep: &mut SyncReport,
) -> Result<(), FastPathError>
where
    K: aya::Pod,
    V: aya::Pod,
    SK: Ord,
    SV: PartialEq,
{
    for (k, v) in want {
        if old.get(k) != Some(v) {
            map.insert(key(k), val(v), 0)
                .map_err(map_err(name, "insert"))?;
            rep.written += 1;
        }
    }
    for k in old.keys() {
        if !want.contains_key(k) {
            remove_ok(map.remove(&key(k))).map_err(map_err(name, "remove"))?;
            rep.deleted += 1;
        }
    }
    Ok(())
}

fn sync_lpm<const N: usize>(
    map: &mut LpmTrie<MapData, [u8; N], RouteVal>,
    old: &BTreeMap<(u32, [u8; N]), RouteVal>,
    want: &BTreeMap<(u32, [u8; N]), RouteVal>,
    name: &'static str,
    rep: &mut SyncReport,
) -> Result<(), FastPathError> {
    for ((len, addr), v) in want {
        if old.get(&(*len, *addr)) != Some(v) {
            map.insert(&LpmKey::new(*len, *addr), v, 0)
                .map_err(map_err(name, "insert"))?;
            rep.written += 1;
        }
    }
    for (len, addr) in old.keys() {
        if !want.contains_key(&(*len, *addr)) {
            remove_ok(map.remove(&LpmKey::new(*len, *addr))).map_err(map_err(name, "remove"))?;
            rep.deleted += 1;
        }
    }
    Ok(())
}

/// After a failed sync: keep only the keys (so the next sync still deletes what may be
/// there) with values no table produces (so it rewrites everything it wants).
fn old_keys_only(old: &Desired) -> Desired {
    let poison_route = RouteVal {
        gw_family: u8::MAX,
        ..RouteVal::default()
    };
    Desired {
        ifaces: old
            .ifaces
            .keys()
            .map(|k| {
                (
                    *k,
                    IfaceVal {
                        valid: u16::MAX,
                        ..IfaceVal::default()
                    },
                )
            })
            .collect(),
        routes_v4: old.routes_v4.keys().map(|k| (*k, poison_route)).collect(),
        routes_v6: old.routes_v6.keys().map(|k| (*k, poison_route)).collect(),
        neigh: old
            .neigh
            .iter()
            .map(|(k, (rk, _))| (*k, (*rk, [0xff; 6])))
            .collect(),
        config: ConfigC::default(),
        notes: Vec::new(),
    }
}

/// Loads an embedded eBPF object and its program `name` for `hook` (shared with
/// [`crate::transit`]).
pub(crate) fn load_object(object: &[u8], hook: Hook, name: &str) -> Result<Ebpf, FastPathError> {
    let mut ebpf = EbpfLoader::new().load(object).map_err(|e| {
        let reason = match &e {
            EbpfError::MapError(m) => format!("{m}: {}", source_chain(m)),
            other => format!("{other}: {}", source_chain(other)),
        };
        if is_eperm(&reason) {
            FastPathError::Permission { reason }
        } else {
            FastPathError::Object { reason }
        }
    })?;
    let prog = ebpf.program_mut(name).ok_or(FastPathError::Object {
        reason: format!("program {name} missing from the object"),
    })?;
    let loaded = match hook {
        Hook::Tc => <&mut SchedClassifier>::try_from(prog)
            .map_err(|e| FastPathError::Object {
                reason: e.to_string(),
            })?
            .load(),
        Hook::Xdp => <&mut Xdp>::try_from(prog)
            .map_err(|e| FastPathError::Object {
                reason: e.to_string(),
            })?
            .load(),
    };
    if let Err(e) = loaded {
        return Err(match e {
            ProgramError::LoadError {
                io_error,
                verifier_log,
            } => {
                if io_error.raw_os_error() == Some(libc::EPERM) {
                    FastPathError::Permission {
                        reason: io_error.to_string(),
                    }
                } else {
                    FastPathError::Verifier {
                        hook,
                        reason: io_error.to_string(),
                        log: verifier_log.to_string(),
                    }
                }
            }
            other => FastPathError::Object {
                reason: other.to_string(),
            },
        });
    }
    Ok(ebpf)
}

/// Attaches the loaded program `name` to `ifindex` at `hook` and records it in `attached`
/// (TC: a clsact qdisc is added where there is none, recorded before the filter so a failed
/// attach still removes it).
pub(crate) fn attach(
    ebpf: &mut Ebpf,
    hook: Hook,
    name: &str,
    ifindex: u32,
    attached: &mut Vec<Attached>,
) -> Result<(), FastPathError> {
    let if_name = sys::if_name(ifindex).unwrap_or_default();
    let fail = |reason: String| FastPathError::Attach {
        hook,
        ifindex,
        name: if_name.clone(),
        reason,
    };
    let prog = ebpf
        .program_mut(name)
        .ok_or_else(|| fail("program missing".into()))?;
    match hook {
        Hook::Tc => {
            if if_name.is_empty() {
                return Err(fail("no such interface".into()));
            }
            let added = match aya::programs::tc::qdisc_add_clsact(&if_name) {
                Ok(()) => true,
                Err(TcError::NetlinkError(e)) if e.raw_os_error() == Some(libc::EEXIST) => false,
                Err(e) => return Err(fail(format!("adding the clsact qdisc: {e}"))),
            };
            attached.push(Attached {
                ifindex,
                added_clsact: added,
            });
            let p = <&mut SchedClassifier>::try_from(prog).map_err(|e| fail(e.to_string()))?;
            p.attach_with_options(
                &if_name,
                TcAttachType::Ingress,
                TcAttachOptions::Netlink(NlOptions::default()),
            )
            .map_err(|e| fail(format!("{e}: {}", source_chain(&e))))?;
        }
        Hook::Xdp => {
            let p = <&mut Xdp>::try_from(prog).map_err(|e| fail(e.to_string()))?;
            p.attach_to_if_index(ifindex, XdpMode::Default)
                .map_err(|e| fail(format!("{e}: {}", source_chain(&e))))?;
            attached.push(Attached {
                ifindex,
                added_clsact: false,
            });
        }
    }
    Ok(())
}

/// Detaches (drops the object, which detaches its links), then removes the clsact qdiscs
/// we added.
pub(crate) fn detach(ebpf: Option<Ebpf>, attached: &[Attached], what: &str) {
    drop(ebpf);
    for a in attached {
        if a.added_clsact
            && let Err(e) = sys::del_clsact(a.ifindex)
        {
            tracing::warn!(ifindex = a.ifindex, error = %e, "{what}: removing the clsact qdisc we added");
        }
    }
}

/// Per-CPU counter rows summed (wrapping, like the counters themselves); shared with
/// [`crate::transit`].
pub(crate) fn sum_per_cpu<'a, const N: usize>(
    rows: impl Iterator<Item = &'a [u64; N]>,
) -> [u64; N] {
    let mut sum = [0u64; N];
    for row in rows {
        for (acc, v) in sum.iter_mut().zip(row) {
            *acc = acc.wrapping_add(*v);
        }
    }
    sum
}

/// An error's sources, joined.
pub(crate) fn source_chain(e: &dyn std::error::Error) -> String {
    let mut parts = Vec::new();
    let mut cur = e.source();
    while let Some(s) = cur {
        parts.push(s.to_string());
        cur = s.source();
    }
    parts.join(": ")
}

// The data path owns the fast path on its own thread (`crate::FastPathSync: Send`).
const _: fn() = || {
    fn send<T: Send>() {}
    send::<FastPath>();
};
