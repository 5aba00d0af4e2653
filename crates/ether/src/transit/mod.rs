//! The kernel fast path for passive ANEP transit (`bpf/transit.c`, compiled by `build.rs`):
//! an `anode node` on UDP has the packets that only pass through it forwarded at TC ingress,
//! with the node's own forwarding table, without a trip through its socket.
//!
//! ## Contract
//! The program forwards a packet only when the node would forward it on its fast path
//! (`anode_core`: `route_datagram`/`route_ee` -> `Core::forward`) with nothing else to do:
//! see the list at the top of `bpf/transit.c`. It then produces the ANEP bytes the node
//! would send (resource bound minus one, previous hop = the node) from the node's address
//! and port to the next hop's, and redirects the packet out of the interface the kernel
//! routes the next hop by, to the MAC its neighbor table has for it ([`l2_path`], resolved
//! by the driver at every sync; `bpf_fib_lookup` is not used because it refuses to work on
//! interfaces without IP forwarding, which a node's router keeps off). Everything else goes
//! on to the socket unchanged, where the node decides as before: an empty table sends
//! everything to the socket. The driver rewrites the maps on the next pass of its loop after
//! the node's state changes, so a stale entry lives no longer than that (and 2 s for changes
//! in the kernel's own route and neighbor tables).
//!
//! ## Updates
//! The driver (`anode_io`) builds a [`TransitTable`] from the node after any change of the
//! forwarding table, the links, hooks or captures, and [`TransitPath::sync`] writes only the
//! differences: configuration first when it punts (so the program never forwards on a half
//! written table), then peers, routes (new before removed), and the configuration last
//! otherwise.
//!
//! ## What it does not do
//! - XDP: the incremental UDP checksum helpers exist only for TC, and on veth TC ingress
//!   measured faster than XDP for the IP fast path (see `crate::fastpath`).
//! - Packets with ANEP options (they may carry an integrity checksum) and IPv4 options or
//!   fragments go to the socket.
//! - Forwarded packets do not count toward the node's link load (`Node::link_load`); they
//!   are counted in [`TransitStats`].

mod maps;

use std::collections::BTreeMap;
use std::fmt;

use aya::Ebpf;
use aya::maps::{Array, HashMap, MapData, PerCpuArray};
use aya::programs::{SchedClassifier, TestRun, TestRunOptions};

use crate::fastpath::{
    Attached, FastPathError, Hook, attach, detach, load_object, map_err, remove_ok, sum_per_cpu,
    take,
};
/// The reasons the program passes a packet on to the socket, by counter index, as reports
/// name them.
pub use maps::stat::PASS as PASS_REASONS;
pub use maps::{
    ADDR_LEN, Desired, MAX_EE_TYPES, PEERS_MAX, ROUTES_MAX, TransitPeer, TransitTable, desired,
};
use maps::{AddrKey, ConfigC, PeerVal, RouteVal, StatsC, stat};

pub use crate::fastpath::sys::{L2Path, l2_path};

/// The compiled program (see `build.rs`).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/transit.o"));
const PROGRAM: &str = "anode_transit_tc";

/// The program's counters, summed over CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransitStats {
    /// Packets forwarded in the kernel.
    pub forwarded: u64,
    /// Their ANEP bytes.
    pub forwarded_bytes: u64,
    /// Packets passed on to the socket, by reason (see `stat::PASS`).
    pub passed: BTreeMap<&'static str, u64>,
}

impl TransitStats {
    fn from_counters(c: &[u64; stat::COUNT]) -> Self {
        let get = |i: usize| c.get(i).copied().unwrap_or(0);
        TransitStats {
            forwarded: get(stat::FWD),
            forwarded_bytes: get(stat::FWD_BYTES),
            passed: stat::PASS.iter().map(|&(i, n)| (n, get(i))).collect(),
        }
    }

    /// Packets passed on, all reasons.
    pub fn passed_total(&self) -> u64 {
        self.passed.values().sum()
    }
}

/// A loaded and attached transit fast path; see the module docs. Dropping it detaches the
/// program and removes the clsact qdiscs it added.
pub struct TransitPath {
    ebpf: Option<Ebpf>,
    attached: Vec<Attached>,
    config: Array<MapData, ConfigC>,
    peers: HashMap<MapData, AddrKey, PeerVal>,
    routes: HashMap<MapData, AddrKey, RouteVal>,
    stats: PerCpuArray<MapData, StatsC>,
    shadow: Desired,
}

impl fmt::Debug for TransitPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransitPath")
            .field("attached", &self.attached)
            .field("routes", &self.shadow.routes.len())
            .finish_non_exhaustive()
    }
}

impl TransitPath {
    /// Loads the program and attaches it at TC ingress of every interface in `ifindexes`
    /// (in the calling thread's network namespace). It forwards nothing until
    /// [`TransitPath::sync`] gives it a table.
    pub fn load(ifindexes: &[u32]) -> Result<TransitPath, FastPathError> {
        let mut ebpf = load_object(OBJECT, Hook::Tc, PROGRAM)?;
        let mut tp = TransitPath {
            config: take(&mut ebpf, "tconfig")?,
            peers: take(&mut ebpf, "peers")?,
            routes: take(&mut ebpf, "troutes")?,
            stats: take(&mut ebpf, "tstats")?,
            ebpf: Some(ebpf),
            attached: Vec::new(),
            shadow: Desired::default(),
        };
        for &i in ifindexes {
            let ebpf = tp.ebpf.as_mut().ok_or(FastPathError::Object {
                reason: "program released".into(),
            })?;
            attach(ebpf, Hook::Tc, PROGRAM, i, &mut tp.attached)?;
        }
        Ok(tp)
    }

    /// The interfaces it is attached to.
    pub fn ifindexes(&self) -> Vec<u32> {
        self.attached.iter().map(|a| a.ifindex).collect()
    }

    /// Writes the differences between what the maps hold and `t`; returns the notes about
    /// what did not fit (empty when all fits).
    pub fn sync(&mut self, t: &TransitTable) -> Result<Vec<String>, FastPathError> {
        let want = desired(t);
        let punting = want.config.punt_all != 0 || want.config.family != self.shadow.config.family;
        if punting && want.config != self.shadow.config {
            // Punt first: the program never forwards on a half-written table.
            let mut c = want.config;
            c.punt_all = 1;
            self.config
                .set(0, c, 0)
                .map_err(map_err("tconfig", "write"))?;
        }
        for (k, v) in &want.peers {
            if self.shadow.peers.get(k) != Some(v) {
                self.peers
                    .insert(k, v, 0)
                    .map_err(map_err("peers", "write"))?;
            }
        }
        for (k, v) in &want.routes {
            if self.shadow.routes.get(k) != Some(v) {
                self.routes
                    .insert(k, v, 0)
                    .map_err(map_err("troutes", "write"))?;
            }
        }
        for k in self.shadow.routes.keys() {
            if !want.routes.contains_key(k) {
                remove_ok(self.routes.remove(k)).map_err(map_err("troutes", "delete"))?;
            }
        }
        for k in self.shadow.peers.keys() {
            if !want.peers.contains_key(k) {
                remove_ok(self.peers.remove(k)).map_err(map_err("peers", "delete"))?;
            }
        }
        if want.config != self.shadow.config || punting {
            self.config
                .set(0, want.config, 0)
                .map_err(map_err("tconfig", "write"))?;
        }
        let notes = want.notes.clone();
        self.shadow = want;
        Ok(notes)
    }

    /// The program's counters summed over CPUs.
    pub fn stats(&self) -> Result<TransitStats, FastPathError> {
        let per_cpu = self.stats.get(&0, 0).map_err(map_err("tstats", "read"))?;
        Ok(TransitStats::from_counters(&sum_per_cpu(
            per_cpu.iter().map(|s| &s.c),
        )))
    }

    /// Runs the loaded program once on `frame`, a whole Ethernet frame, as if it had arrived
    /// on `ingress_ifindex` (`BPF_PROG_TEST_RUN` through aya's [`TestRun`]; 0 or 1: the
    /// calling thread's loopback device, else an interface of its network namespace; the
    /// program does not look at it). Nothing is sent: a redirect shows only in the return
    /// value (`TC_ACT_REDIRECT`, its target is not checked). Returns the program's return
    /// value and the frame as it left it. The maps and counters are the ones
    /// [`TransitPath::sync`] and [`TransitPath::stats`] use. For tests (load with no
    /// interfaces to run it detached).
    #[doc(hidden)]
    pub fn test_run(
        &self,
        frame: &[u8],
        ingress_ifindex: u32,
    ) -> Result<(u32, Vec<u8>), FastPathError> {
        let fail = |reason: String| FastPathError::TestRun { reason };
        let prog: &SchedClassifier = self
            .ebpf
            .as_ref()
            .and_then(|e| e.program(PROGRAM))
            .ok_or_else(|| fail("program released".into()))?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| fail(e.to_string()))?;
        // struct __sk_buff up to ifindex (offset 40); the kernel zeroes the rest.
        let mut ctx = [0u8; 44];
        if let Some(b) = ctx.get_mut(40..44) {
            b.copy_from_slice(&ingress_ifindex.to_ne_bytes());
        }
        let mut out = vec![0u8; frame.len() + 256];
        let r = prog
            .test_run(TestRunOptions {
                data_in: Some(frame),
                data_out: Some(&mut out),
                ctx_in: Some(&ctx),
                ..TestRunOptions::new()
            })
            .map_err(|e| fail(e.to_string()))?;
        out.truncate(r.data_size_out as usize);
        Ok((r.return_value, out))
    }
}

impl Drop for TransitPath {
    fn drop(&mut self) {
        detach(self.ebpf.take(), &self.attached, "transit fast path");
    }
}

// The UDP driver owns it on its data-path thread.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<TransitPath>();
};
