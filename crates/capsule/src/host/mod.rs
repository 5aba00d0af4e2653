//! The node interface (PAN's PNI) as host imports of module `"anode"` (see `ABI.md`).
//!
//! Contracts:
//! - Every guest pointer/length pair is checked against the guest's linear memory and every
//!   payload offset against the current payload (`anode_wasm::mem`); a bad range returns
//!   `err::BOUNDS`, never traps and never touches memory outside the range.
//! - No ambient authority: a code object reads and changes only the capsule it runs on, its
//!   own soft state (namespaced by its hash), and node facts (address, time, neighbors,
//!   routes, the routing functions the node registered for `forward_by`). It sends only
//!   capsules of its own code, delivers only to ports an application registered, and does at
//!   most `max_actions` sends/copies per capsule; a child capsule's resource bound is taken
//!   from the parent's.
//! - Host work proportional to a guest-chosen length (copies, hashes) is charged to fuel.
//!
//! ## The environment lives in the store
//! Everything a guest call may reach is owned by the store's [`HostState`] for exactly the
//! duration of one call: the EE moves a [`CallEnv`] in before the call (its soft state,
//! ports and routing functions, and a [`NodeView`] of the node) and takes it back after. No
//! host function touches the node itself: what the guest does to the node (sends, deliveries,
//! log lines) is recorded as [`Effect`]s, in order, which the EE applies with the node's
//! context once the guest has returned. A send's return code is what the node's own checks
//! answer from the view (resource bound, route, link, MTU); a drop only the transmit queue
//! can decide is counted by the node when the send is applied.
//!
//! Layout: `capsule.rs` (reading and changing the current capsule), `send.rs` (forwarding,
//! copies, new capsules, deliveries), `cut.rs` (cut-through channels for the capsule's
//! flow), `state.rs` (soft state), `node.rs` (node facts, log, hashing).

mod capsule;
mod cut;
mod files;
mod node;
mod send;
mod state;

use std::time::Instant;

use anode_core::{Delivery, Dispatch, NextHop, NodeView};
use anode_wasm::Limits;
use anode_wasm::mem::slice;
use anode_wasm::mem::slice_mut;
use anode_wire::NodeAddr;
use anode_wire::anep::AnepPacket;
use anode_wire::capsule::CapsuleRepr;
use anode_wire::checksum;
use anode_wire::transit::Transit;
use wasmtime::{Caller, Instance, Linker, Memory, Val};

use crate::abi;
use crate::route::RouteTable;
use crate::softstate::SoftState;
use crate::{CodeHash, PortTable};

/// The capsule a guest call runs on: its bytes and its headers, checked and parsed once by
/// the node.
#[derive(Debug)]
pub(crate) struct CurCapsule {
    /// The whole ANEP packet (truncated to its packet length).
    pub buf: Vec<u8>,
    pub anep_len: usize,
    /// Where the payload starts in `buf`.
    pub payload_at: usize,
    pub why: Dispatch,
    /// Length of the transit header (checked by the node; views of it check nothing again).
    pub transit_len: usize,
    /// The capsule header.
    pub header: CapsuleRepr,
    /// The payload or header changed: fix the ANEP length and checksum before sending.
    pub dirty: bool,
}

impl CurCapsule {
    fn payload_len(&self) -> usize {
        self.buf.len().saturating_sub(self.payload_at)
    }

    /// The transit header.
    fn transit(&self) -> Transit<&[u8]> {
        Transit::new_unchecked(
            self.buf.get(self.anep_len..).unwrap_or(&[]),
            self.transit_len,
        )
    }

    /// The transit header, to change it.
    fn transit_mut(&mut self) -> Transit<&mut [u8]> {
        let len = self.transit_len;
        Transit::new_unchecked(self.buf.get_mut(self.anep_len..).unwrap_or(&mut []), len)
    }

    /// Makes the ANEP packet length and integrity checksum match the (changed) bytes.
    pub fn fix_up(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        let len = u16::try_from(self.buf.len()).unwrap_or(u16::MAX);
        if let Some(b) = self.buf.get_mut(ANEP_PACKET_LEN_AT..ANEP_PACKET_LEN_AT + 2) {
            b.copy_from_slice(&len.to_be_bytes());
        }
        let off = AnepPacket::new_checked(&self.buf[..])
            .ok()
            .and_then(|p| p.checksum_offset());
        if let Some(off) = off {
            if let Some(b) = self.buf.get_mut(off..off + 2) {
                b.copy_from_slice(&[0, 0]);
            }
            let c = checksum::checksum(&self.buf);
            if let Some(b) = self.buf.get_mut(off..off + 2) {
                b.copy_from_slice(&c.to_be_bytes());
            }
        }
    }
}

/// What a guest did to the node, applied by the EE after the call, in order.
#[derive(Debug)]
pub(crate) enum Effect {
    /// Forward an ANEP packet (transit header at `anep_len`) by the default route or `via`;
    /// `new`: a packet the guest made (a copy, a packet it built), not the capsule itself.
    Send {
        buf: Vec<u8>,
        anep_len: usize,
        via: Option<NextHop>,
        new: bool,
    },
    /// Deliver to a local application.
    Deliver(Delivery),
    /// A log line.
    Log(String),
    /// Open a cut-through channel for these keys (the current capsule's flow) for this long.
    OpenCut {
        keys: Vec<anode_core::DemuxKey>,
        lifetime: std::time::Duration,
    },
}

/// The EE's state guest calls may reach: soft state, application ports, routing functions.
/// Boxed, so that lending it to a call moves a pointer.
#[derive(Debug)]
pub(crate) struct Reach {
    pub soft: SoftState,
    pub ports: PortTable,
    /// The routing functions `forward_by` may name.
    pub routes: RouteTable,
    /// The code objects' files (ABI v2).
    pub files: crate::files::FileStore,
}

impl Reach {
    /// A reach holding nothing (what the EE swaps with its own).
    pub fn empty() -> Reach {
        Reach {
            soft: SoftState::new(0, 0),
            ports: PortTable::default(),
            routes: RouteTable::default(),
            files: crate::files::FileStore::new(crate::files::FileLimits::default()),
        }
    }
}

/// Where a call environment's [`Reach`] is: owned for the call (the node thread runs
/// one guest call at a time and lends the EE's own), or shared by the calls of a batch
/// running on worker threads at once (`ee/batch.rs`), each host call locking it briefly.
#[derive(Debug)]
pub(crate) enum ReachSlot {
    Own(Box<Reach>),
    Shared(std::sync::Arc<std::sync::Mutex<Box<Reach>>>),
}

/// A [`Reach`] borrowed for one host call.
pub(crate) enum ReachRef<'a> {
    Own(&'a mut Reach),
    Locked(std::sync::MutexGuard<'a, Box<Reach>>),
}

impl ReachSlot {
    /// The reach, locked if shared. A lock poisoned by a panicking worker is still taken:
    /// its data was only ever changed through the bounded operations of `Reach`'s parts.
    pub fn get(&mut self) -> ReachRef<'_> {
        match self {
            ReachSlot::Own(r) => ReachRef::Own(r),
            ReachSlot::Shared(m) => {
                ReachRef::Locked(m.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
            }
        }
    }
}

impl std::ops::Deref for ReachRef<'_> {
    type Target = Reach;
    fn deref(&self) -> &Reach {
        match self {
            ReachRef::Own(r) => r,
            ReachRef::Locked(g) => g,
        }
    }
}

impl std::ops::DerefMut for ReachRef<'_> {
    fn deref_mut(&mut self) -> &mut Reach {
        match self {
            ReachRef::Own(r) => r,
            ReachRef::Locked(g) => g,
        }
    }
}

/// What a guest call may reach: lent to the store by the EE for one call and taken back
/// (boxed, so that lending it moves a pointer; the box is kept for the next call).
#[derive(Debug)]
pub(crate) struct CallEnv {
    /// The node as it is at the start of the call.
    pub view: NodeView,
    /// The node's view generation `view` was taken at (`NodeContext::view_generation`).
    pub view_gen: (u64, u64),
    /// The EE's soft state, ports and routing functions.
    pub reach: ReachSlot,
    /// The time `now_ns` counts from.
    pub epoch: Instant,
    pub max_actions: u32,
    /// `forward_by` calls naming no registered routing function.
    pub route_misses: u64,
    /// What the guest did to the node, in order.
    pub effects: Vec<Effect>,
}

/// A dependency's instance in a dependent's store.
pub(crate) struct DepInstance {
    pub hash: CodeHash,
    pub instance: Instance,
    pub mem: Memory,
}

/// The data of one code object's store.
pub(crate) struct HostState {
    pub limits: Limits,
    /// The code object this store runs (its soft-state namespace and `send`'s code).
    pub code: CodeHash,
    pub mem: Option<Memory>,
    pub cap: Option<CurCapsule>,
    /// The call environment, present exactly while the EE runs a guest call.
    pub env: Option<Box<CallEnv>>,
    /// Sends and copies this capsule made.
    pub actions: u32,
    /// The dependencies instantiated in this store.
    pub deps: Vec<DepInstance>,
}

impl HostState {
    pub fn new(code: CodeHash, limits: Limits) -> Self {
        HostState {
            limits,
            code,
            mem: None,
            cap: None,
            env: None,
            actions: 0,
            deps: Vec::new(),
        }
    }
}

type C<'a> = Caller<'a, HostState>;

/// Offset of the packet-length field in the ANEP basic header.
const ANEP_PACKET_LEN_AT: usize = 6;

/// Runs `f` with the guest memory and the host state.
fn with<R>(caller: &mut C<'_>, f: impl FnOnce(&mut [u8], &mut HostState) -> R) -> Option<R> {
    let mem = caller.data().mem?;
    let (data, st) = mem.data_and_store_mut(caller);
    Some(f(data, st))
}

/// Runs `f` with the guest memory, the host state's parts and the call environment; a call
/// outside a capsule run (no environment) answers `NO_CAPSULE`, a missing memory `BOUNDS`.
fn with_env(caller: &mut C<'_>, f: impl FnOnce(&mut [u8], Parts<'_>) -> i32) -> i32 {
    with(caller, |mem, st| {
        let HostState {
            code,
            cap,
            env,
            actions,
            ..
        } = st;
        match env.as_mut() {
            Some(env) => f(
                mem,
                Parts {
                    code: *code,
                    cap,
                    env,
                    actions,
                },
            ),
            None => abi::err::NO_CAPSULE,
        }
    })
    .unwrap_or(abi::err::BOUNDS)
}

/// The host state split for a host function: the running code, the capsule, the
/// environment and the action count.
struct Parts<'a> {
    code: CodeHash,
    cap: &'a mut Option<CurCapsule>,
    env: &'a mut CallEnv,
    actions: &'a mut u32,
}

fn read_addr(mem: &[u8], ptr: i32) -> Option<NodeAddr> {
    NodeAddr::read(slice(mem, ptr, abi::ADDR_LEN as i32)?, 0).ok()
}

fn write_bytes(mem: &mut [u8], ptr: i32, bytes: &[u8]) -> bool {
    match slice_mut(mem, ptr, bytes.len() as i32) {
        Some(d) => {
            d.copy_from_slice(bytes);
            true
        }
        None => false,
    }
}

/// Charges `bytes / 64` fuel for host work proportional to a guest-chosen length.
fn charge(caller: &mut C<'_>, bytes: i32) -> wasmtime::Result<()> {
    anode_wasm::fuel::charge_bytes(caller, bytes)
}

/// Calls export `name` of dependency `dep` (PAN's guardians). While it runs, host calls act for
/// the dependency: its memory, its soft-state namespace, its code for `send`. The current
/// capsule stays reachable (the dependency acts on the capsule it is called for).
pub(crate) fn call_dep(
    caller: &mut C<'_>,
    dep: &CodeHash,
    name: &str,
    params: &[Val],
    results: &mut [Val],
) -> wasmtime::Result<()> {
    let Some((inst, mem)) = caller
        .data()
        .deps
        .iter()
        .find(|d| d.hash == *dep)
        .map(|d| (d.instance, d.mem))
    else {
        return Err(wasmtime::format_err!(
            "dependency {} is not instantiated",
            hex::encode(dep)
        ));
    };
    let f = inst
        .get_func(&mut *caller, name)
        .ok_or_else(|| wasmtime::format_err!("dependency exports no function `{name}`"))?;
    let saved = (caller.data().code, caller.data().mem);
    caller.data_mut().code = *dep;
    caller.data_mut().mem = Some(mem);
    let r = f.call(&mut *caller, params, results);
    caller.data_mut().code = saved.0;
    caller.data_mut().mem = saved.1;
    r
}

/// Defines every host import on `linker`.
pub(crate) fn define_imports(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    capsule::define(l)?;
    send::define(l)?;
    cut::define(l)?;
    state::define(l)?;
    files::define(l)?;
    node::define(l)
}
