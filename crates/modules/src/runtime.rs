//! The WebAssembly runtime of service modules, and the guest ABI (`anode_mod`).
//!
//! The engine settings and the store limiter are the ones the capsule EE uses too
//! (`anode-wasm`): Cranelift at speed, the pooling instance allocator, fuel metering always
//! on, and an [`anode_wasm::Limits`] on every store. What differs from the capsule EE stays
//! here: one tier only (wasmtime's default compiler settings), every instance's memory bounded
//! by its manifest (the pool by [`MAX_MEMORY`]), [`MAX_TABLE_ELEMENTS`] table elements, one
//! instance per store, and this host state and import set. One [`ModRuntime`] is shared by
//! every node of a process.
//!
//! ## Guest ABI (import module `anode_mod`)
//! Every module exports `memory`. Optional: `init() -> i32` (0 = ok), `alloc(len) -> ptr`,
//! `state_export() -> i64` (`ptr << 32 | len` of its state bytes), `state_import(ptr, len) ->
//! i32` (0 = ok), `service(op: i32, arg: i64) -> i64` (the services it provides).
//! - processors export `process(point: i32) -> i32`: 0 continue, 1 drop, 2 consume,
//!   3 redirect (to the link set with `set_redirect`); `point` is 0 ingress, 1 pre-routing,
//!   2 post-routing, 3 local delivery;
//! - EEs (kind `ee`) export `ee_packet(why: i32) -> i32` and get the packets of their ANEP
//!   Type ID where the node's own EEs get theirs: `why` is 0 the packet is for this node, 1 it
//!   asks for evaluation at every hop, 2 it names the EE's routing function, 3 a local
//!   application sent it. The verdicts are the processors': 0 continue (delivered to the
//!   application port at its destination, forwarded by the default route elsewhere), 1 drop,
//!   2 consumed, 3 forward to the neighbor on the link set with `set_redirect` (spending the
//!   resource bound). `ee_offset() -> i32` is where the payload starts (after the ANEP,
//!   transit and datagram headers, which the guest may read but not change: `pkt_write`
//!   refuses offsets before it); -1 outside an EE call;
//! - queue disciplines export `enqueue(input: i32, len: i32, prio: i32) -> i32` (the class
//!   0..15 to queue the packet in, or -1 to drop it; `input` is the arrival link or -1) and
//!   `dequeue() -> i32` (the class to send from next, or -1);
//! - PLAN services of type `int -> int` export `plan_call(arg: i64) -> i64`; those of any
//!   other type (manifest `plan_type`) export `plan_invoke(len: i32) -> i64`: the call's
//!   arguments are the "packet" (`pkt_len`/`pkt_read`: a varint count, then each argument in
//!   the PLAN marshalling of `anode_plan::marshal`, `len` bytes in all); the guest answers
//!   `ptr << 32 | len` of its marshalled result in its memory (at most [`MAX_PLAN_RESULT`]
//!   bytes), or a negative number to make the call raise `ServiceError` with the last line
//!   it logged as the message.
//!
//! Host imports: `pkt_len() -> i32`; `pkt_read(off, ptr, len) -> i32` and
//! `pkt_write(off, ptr, len) -> i32` (bytes copied, or -1 out of bounds) act on the node's
//! packet buffer in place; `in_link() -> i32`; `set_redirect(link) -> i32`;
//! `emit(ptr, len, link) -> i32` sends a new packet; `config(ptr, len) -> i64` reads a
//! configuration value by name (0 if absent); `q_len(class) -> i32`,
//! `q_head_len(class) -> i32` (qdiscs); `call(ptr, len, op, arg) -> i64` calls a service
//! another module provides (its name at `ptr`); `log(ptr, len)`; `file_read`, `file_write`,
//! `file_delete` on the module's own files (`files.rs`, for modules whose manifest asks for
//! `[resources] file_bytes` and `file_count`).
//!
//! Contract: guest code is hostile. Every host import checks its bounds and returns -1 rather
//! than failing; a trap, an exhausted fuel budget or a refused memory growth ends the call with
//! [`ModuleError::Fault`] and the caller stops the module.

use std::fmt;
use std::sync::Arc;

use anode_wasm::mem::{copy, slice};
use anode_wasm::{Limits, Pool};
use wasmtime::{Caller, Engine, Extern, Linker, Memory, Module, Store, TypedFunc};

use crate::manifest::{ConfigValues, MAX_MEMORY};
use crate::{Kind, Manifest, ModuleError};

/// Import module name.
pub const IMPORT_MODULE: &str = "anode_mod";
/// Most queue classes of a queue discipline.
pub const MAX_CLASSES: usize = 16;
/// Most packets one call may emit.
pub const MAX_EMITS: usize = 16;
/// Most bytes of state a module may hand over on upgrade.
pub const MAX_STATE: usize = 1 << 20;
/// Most elements of one table of a module instance.
pub const MAX_TABLE_ELEMENTS: usize = 10_000;
/// Most bytes of a PLAN service's marshalled result.
pub const MAX_PLAN_RESULT: usize = 64 << 10;

/// Process verdicts.
pub mod verdict {
    /// Go on.
    pub const CONTINUE: i32 = 0;
    /// Drop.
    pub const DROP: i32 = 1;
    /// Consumed.
    pub const CONSUME: i32 = 2;
    /// Redirect to the link set with `set_redirect`.
    pub const REDIRECT: i32 = 3;
}

/// The engine and linker shared by all module instances of a process.
pub struct ModRuntime {
    engine: Engine,
    linker: Linker<ModState>,
}

impl fmt::Debug for ModRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModRuntime").finish_non_exhaustive()
    }
}

/// What a module instance's host calls act on.
pub(crate) struct ModState {
    limits: Limits,
    /// The module's name (its files' owner).
    pub name: String,
    /// The node's module files (`files.rs`).
    pub files: crate::files::ModFiles,
    /// The packet being processed (the node's buffer, moved in for the call).
    pub pkt: Vec<u8>,
    /// The first byte `pkt_write` may change: 0 for processors, the payload for EEs (the
    /// node's headers are not the guest's to change).
    pub write_from: usize,
    pub in_link: i32,
    pub redirect: Option<u32>,
    pub emits: Vec<(u32, Vec<u8>)>,
    pub config: ConfigValues,
    /// Queue classes: (packets, bytes of the head packet).
    pub queues: [(u32, u32); MAX_CLASSES],
    pub logs: Vec<String>,
    /// Services this module may call: (name, provider instance) while a call runs.
    pub services: Vec<(String, Box<Instance>)>,
    memory: Option<Memory>,
}

/// A compiled module.
#[derive(Clone)]
pub struct Code {
    module: Module,
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Code").finish_non_exhaustive()
    }
}

/// What `process` returned: the verdict code, the buffer, the redirect link.
pub(crate) type Processed = (i32, Vec<u8>, Option<u32>);

/// One live module instance.
pub struct Instance {
    name: String,
    store: Store<ModState>,
    fuel: u64,
    process: Option<TypedFunc<i32, i32>>,
    ee_packet: Option<TypedFunc<i32, i32>>,
    enqueue: Option<TypedFunc<(i32, i32, i32), i32>>,
    dequeue: Option<TypedFunc<(), i32>>,
    service: Option<TypedFunc<(i32, i64), i64>>,
    route: Option<TypedFunc<i64, i32>>,
    plan_call: Option<TypedFunc<i64, i64>>,
    plan_invoke: Option<TypedFunc<i32, i64>>,
    export: Option<TypedFunc<(), i64>>,
    import: Option<TypedFunc<(i32, i32), i32>>,
    alloc: Option<TypedFunc<i32, i32>>,
}

impl fmt::Debug for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instance")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

type C<'a> = Caller<'a, ModState>;

impl ModState {
    /// The instance's `memory` export, once instantiated.
    pub(crate) fn memory(&self) -> Option<Memory> {
        self.memory
    }
}

pub(crate) fn mem_of(c: &mut C<'_>) -> Option<Memory> {
    match c.get_export("memory") {
        Some(Extern::Memory(m)) => Some(m),
        _ => c.data().memory,
    }
}

fn read_guest(c: &mut C<'_>, ptr: i32, len: i32) -> Option<Vec<u8>> {
    let m = mem_of(c)?;
    slice(m.data(&*c), ptr, len).map(<[u8]>::to_vec)
}

fn define_imports(l: &mut Linker<ModState>) -> wasmtime::Result<()> {
    let m = IMPORT_MODULE;
    l.func_wrap(m, "pkt_len", |c: C<'_>| -> i32 {
        i32::try_from(c.data().pkt.len()).unwrap_or(-1)
    })?;
    l.func_wrap(
        m,
        "pkt_read",
        |mut c: C<'_>, off: i32, ptr: i32, len: i32| -> i32 {
            let Some(mem) = mem_of(&mut c) else {
                return -1;
            };
            let (data, st) = mem.data_and_store_mut(&mut c);
            copy(&st.pkt, off, data, ptr, len).map_or(-1, |n| n as i32)
        },
    )?;
    l.func_wrap(
        m,
        "pkt_write",
        |mut c: C<'_>, off: i32, ptr: i32, len: i32| -> i32 {
            let Some(mem) = mem_of(&mut c) else {
                return -1;
            };
            let (data, st) = mem.data_and_store_mut(&mut c);
            if usize::try_from(off).map_or(true, |o| o < st.write_from) {
                return -1;
            }
            copy(data, ptr, &mut st.pkt, off, len).map_or(-1, |n| n as i32)
        },
    )?;
    l.func_wrap(m, "in_link", |c: C<'_>| -> i32 { c.data().in_link })?;
    l.func_wrap(m, "ee_offset", |c: C<'_>| -> i32 {
        match c.data().write_from {
            0 => -1,
            n => i32::try_from(n).unwrap_or(-1),
        }
    })?;
    l.func_wrap(m, "set_redirect", |mut c: C<'_>, link: i32| -> i32 {
        match u32::try_from(link) {
            Ok(l) => {
                c.data_mut().redirect = Some(l);
                0
            }
            Err(_) => -1,
        }
    })?;
    l.func_wrap(
        m,
        "emit",
        |mut c: C<'_>, ptr: i32, len: i32, link: i32| -> i32 {
            let Ok(link) = u32::try_from(link) else {
                return -1;
            };
            if c.data().emits.len() >= MAX_EMITS || !(1..=65535).contains(&len) {
                return -1;
            }
            let Some(b) = read_guest(&mut c, ptr, len) else {
                return -1;
            };
            c.data_mut().emits.push((link, b));
            0
        },
    )?;
    l.func_wrap(m, "config", |mut c: C<'_>, ptr: i32, len: i32| -> i64 {
        let Some(b) = read_guest(&mut c, ptr, len) else {
            return 0;
        };
        let Ok(k) = std::str::from_utf8(&b) else {
            return 0;
        };
        c.data().config.get(k).copied().unwrap_or(0)
    })?;
    l.func_wrap(m, "q_len", |c: C<'_>, class: i32| -> i32 {
        usize::try_from(class)
            .ok()
            .and_then(|i| c.data().queues.get(i))
            .map_or(-1, |q| q.0 as i32)
    })?;
    l.func_wrap(m, "q_head_len", |c: C<'_>, class: i32| -> i32 {
        usize::try_from(class)
            .ok()
            .and_then(|i| c.data().queues.get(i))
            .map_or(-1, |q| q.1 as i32)
    })?;
    l.func_wrap(m, "log", |mut c: C<'_>, ptr: i32, len: i32| {
        if c.data().logs.len() >= 16 || !(0..=256).contains(&len) {
            return;
        }
        if let Some(b) = read_guest(&mut c, ptr, len) {
            let s = String::from_utf8_lossy(&b).into_owned();
            c.data_mut().logs.push(s);
        }
    })?;
    l.func_wrap(
        m,
        "call",
        |mut c: C<'_>, ptr: i32, len: i32, op: i32, arg: i64| -> i64 {
            let Some(b) = read_guest(&mut c, ptr, len) else {
                return -1;
            };
            let Ok(name) = std::str::from_utf8(&b) else {
                return -1;
            };
            let st = c.data_mut();
            let Some((_, inst)) = st.services.iter_mut().find(|(n, _)| n == name) else {
                return -1;
            };
            inst.call_service(op, arg).unwrap_or(-1)
        },
    )?;
    crate::files::define(l)
}

impl ModRuntime {
    /// A runtime for up to `max_instances` live module instances.
    pub fn new(max_instances: u32) -> Result<Arc<ModRuntime>, ModuleError> {
        let e = |e: wasmtime::Error| ModuleError::Io(format!("wasm engine: {e:#}"));
        let c = anode_wasm::engine::config(&Pool {
            max_instances,
            max_memory_bytes: MAX_MEMORY,
            max_table_elements: MAX_TABLE_ELEMENTS,
        });
        let engine = Engine::new(&c).map_err(e)?;
        let mut linker = Linker::new(&engine);
        define_imports(&mut linker).map_err(e)?;
        Ok(Arc::new(ModRuntime { engine, linker }))
    }

    /// Compiles and checks a module's code against the exports its kind needs.
    pub fn compile(&self, m: &Manifest, wasm: &[u8]) -> Result<Code, ModuleError> {
        let err = |reason: String| ModuleError::Code {
            name: m.name.clone(),
            reason,
        };
        let module = Module::new(&self.engine, wasm).map_err(|e| err(format!("{e:#}")))?;
        for imp in module.imports() {
            if imp.module() != IMPORT_MODULE {
                return Err(err(format!(
                    "imports `{}` from `{}`; only `{IMPORT_MODULE}` exists",
                    imp.name(),
                    imp.module()
                )));
            }
        }
        let has = |n: &str| module.get_export(n).is_some();
        if !has("memory") {
            return Err(err("no exported `memory`".into()));
        }
        let need: &[&str] = match m.kind {
            Kind::Processor => &["process"],
            Kind::Qdisc => &["enqueue", "dequeue"],
            Kind::RoutingFunction => &["route"],
            Kind::PlanService if m.plan_type.is_some() => &["plan_invoke"],
            Kind::PlanService => &["plan_call"],
            Kind::Service | Kind::ControlService => &["service"],
            Kind::Ee => &["ee_packet"],
        };
        for n in need {
            if !has(n) {
                return Err(err(format!("a {} must export `{n}`", m.kind.name())));
            }
        }
        if !m.provides.is_empty() && !has("service") {
            return Err(err("provides services but exports no `service`".into()));
        }
        Ok(Code { module })
    }

    /// Instantiates code with its configuration and runs `init`; its `file_*` calls act on
    /// its files in `files`.
    pub fn instantiate(
        &self,
        m: &Manifest,
        code: &Code,
        config: ConfigValues,
        files: &crate::files::ModFiles,
    ) -> Result<Instance, ModuleError> {
        let fault = |reason: String| ModuleError::Fault {
            name: m.name.clone(),
            reason,
        };
        let st = ModState {
            // One instance per store: a module imports only host functions.
            limits: Limits::new(m.resources.memory_bytes, MAX_TABLE_ELEMENTS, 1),
            name: m.name.clone(),
            files: Arc::clone(files),
            pkt: Vec::new(),
            write_from: 0,
            in_link: -1,
            redirect: None,
            emits: Vec::new(),
            config,
            queues: [(0, 0); MAX_CLASSES],
            logs: Vec::new(),
            services: Vec::new(),
            memory: None,
        };
        let mut store = Store::new(&self.engine, st);
        store.limiter(|s| &mut s.limits);
        let fuel = m.resources.fuel_per_call;
        store.set_fuel(fuel).map_err(|e| fault(format!("{e:#}")))?;
        let inst = self
            .linker
            .instantiate(&mut store, &code.module)
            .map_err(|e| fault(format!("instantiate: {e:#}")))?;
        let memory = inst.get_memory(&mut store, "memory");
        store.data_mut().memory = memory;
        let mut me = Instance {
            name: m.name.clone(),
            process: inst.get_typed_func(&mut store, "process").ok(),
            ee_packet: inst.get_typed_func(&mut store, "ee_packet").ok(),
            enqueue: inst.get_typed_func(&mut store, "enqueue").ok(),
            dequeue: inst.get_typed_func(&mut store, "dequeue").ok(),
            service: inst.get_typed_func(&mut store, "service").ok(),
            route: inst.get_typed_func(&mut store, "route").ok(),
            plan_call: inst.get_typed_func(&mut store, "plan_call").ok(),
            plan_invoke: inst.get_typed_func(&mut store, "plan_invoke").ok(),
            export: inst.get_typed_func(&mut store, "state_export").ok(),
            import: inst.get_typed_func(&mut store, "state_import").ok(),
            alloc: inst.get_typed_func(&mut store, "alloc").ok(),
            store,
            fuel,
        };
        let ok = match m.kind {
            Kind::Processor => me.process.is_some(),
            Kind::Ee => me.ee_packet.is_some(),
            Kind::Qdisc => me.enqueue.is_some() && me.dequeue.is_some(),
            Kind::RoutingFunction => me.route.is_some(),
            Kind::PlanService if m.plan_type.is_some() => me.plan_invoke.is_some(),
            Kind::PlanService => me.plan_call.is_some(),
            _ => me.service.is_some(),
        };
        if !ok {
            return Err(fault("its entry points have the wrong signatures".into()));
        }
        if let Ok(init) = inst.get_typed_func::<(), i32>(&mut me.store, "init") {
            match init.call(&mut me.store, ()) {
                Ok(0) => {}
                Ok(r) => return Err(fault(format!("init returned {r}"))),
                Err(e) => return Err(fault(format!("init: {e:#}"))),
            }
        }
        Ok(me)
    }
}

impl Instance {
    fn refuel(&mut self) -> Result<(), ModuleError> {
        let fuel = self.fuel;
        self.store.set_fuel(fuel).map_err(|e| self.fault(e))
    }

    fn fault(&self, e: wasmtime::Error) -> ModuleError {
        let mut reason = format!("{e:#}");
        if self.store.data().limits.hit() {
            reason = format!("resource limit: {reason}");
        } else if self.store.get_fuel().is_ok_and(|f| f == 0) {
            reason = format!("fuel exhausted: {reason}");
        }
        ModuleError::Fault {
            name: self.name.clone(),
            reason,
        }
    }

    /// Runs `process` on a packet; the buffer comes back with the verdict code, possibly
    /// modified in place, plus the redirect link and the packets emitted.
    pub(crate) fn process(
        &mut self,
        point: i32,
        in_link: i32,
        pkt: Vec<u8>,
    ) -> Result<Processed, (ModuleError, Vec<u8>)> {
        let f = self.process.clone();
        self.call_packet(f, point, (in_link, 0), pkt)
    }

    /// Runs an EE's `ee_packet(why)` on a packet whose payload starts at `payload_at` (the
    /// guest may write from there on only); as [`Instance::process`] otherwise.
    pub(crate) fn ee_packet(
        &mut self,
        why: i32,
        in_link: i32,
        payload_at: usize,
        pkt: Vec<u8>,
    ) -> Result<Processed, (ModuleError, Vec<u8>)> {
        let f = self.ee_packet.clone();
        self.call_packet(f, why, (in_link, payload_at.max(1)), pkt)
    }

    fn call_packet(
        &mut self,
        f: Option<TypedFunc<i32, i32>>,
        arg: i32,
        (in_link, write_from): (i32, usize),
        pkt: Vec<u8>,
    ) -> Result<Processed, (ModuleError, Vec<u8>)> {
        let Some(f) = f else {
            return Err((
                ModuleError::State {
                    name: self.name.clone(),
                    reason: "does not handle packets this way (not a processor or an EE)".into(),
                },
                pkt,
            ));
        };
        if let Err(e) = self.refuel() {
            return Err((e, pkt));
        }
        let st = self.store.data_mut();
        st.pkt = pkt;
        st.in_link = in_link;
        st.write_from = write_from;
        st.redirect = None;
        let r = f.call(&mut self.store, arg);
        let st = self.store.data_mut();
        let pkt = std::mem::take(&mut st.pkt);
        let redirect = st.redirect.take();
        st.write_from = 0;
        match r {
            Ok(v) => Ok((v, pkt, redirect)),
            Err(e) => Err((self.fault(e), pkt)),
        }
    }

    /// Packets emitted by the last call, and log lines.
    pub(crate) fn take_outputs(&mut self) -> (Vec<(u32, Vec<u8>)>, Vec<String>) {
        let st = self.store.data_mut();
        (std::mem::take(&mut st.emits), std::mem::take(&mut st.logs))
    }

    /// Queue discipline: which class a packet goes to (-1 drop).
    pub(crate) fn enqueue(
        &mut self,
        queues: [(u32, u32); MAX_CLASSES],
        input: i32,
        len: i32,
        prio: i32,
    ) -> Result<i32, ModuleError> {
        let Some(f) = self.enqueue.clone() else {
            return Ok(0);
        };
        self.refuel()?;
        self.store.data_mut().queues = queues;
        f.call(&mut self.store, (input, len, prio))
            .map_err(|e| self.fault(e))
    }

    /// Queue discipline: which class to send from next (-1 none).
    pub(crate) fn dequeue(
        &mut self,
        queues: [(u32, u32); MAX_CLASSES],
    ) -> Result<i32, ModuleError> {
        let Some(f) = self.dequeue.clone() else {
            return Ok(-1);
        };
        self.refuel()?;
        self.store.data_mut().queues = queues;
        f.call(&mut self.store, ()).map_err(|e| self.fault(e))
    }

    /// Routing function: the link for a packet of `flow` toward `dst` (the guest reads the
    /// destination's 18 bytes with `pkt_read`); `ROUTE_NONE` (-1) or `ROUTE_DEFAULT` (-2).
    pub(crate) fn route(&mut self, dst: &[u8], flow: u64) -> Result<i32, ModuleError> {
        let Some(f) = self.route.clone() else {
            return Err(ModuleError::State {
                name: self.name.clone(),
                reason: "not a routing function".into(),
            });
        };
        self.refuel()?;
        let st = self.store.data_mut();
        st.pkt.clear();
        st.pkt.extend_from_slice(dst);
        st.in_link = -1;
        f.call(&mut self.store, flow as i64)
            .map_err(|e| self.fault(e))
    }

    /// PLAN service: the module's answer to a PLAN call with `arg`.
    pub(crate) fn plan_call(&mut self, arg: i64) -> Result<i64, ModuleError> {
        let Some(f) = self.plan_call.clone() else {
            return Err(ModuleError::State {
                name: self.name.clone(),
                reason: "not a PLAN service".into(),
            });
        };
        self.refuel()?;
        f.call(&mut self.store, arg).map_err(|e| self.fault(e))
    }

    /// PLAN service of any type: `args` (marshalled) in, the guest's marshalled result out;
    /// `Ok(Err(why))` when the guest refused the call (a negative answer; `why` is the last
    /// line it logged). A result outside its memory or too large is a fault.
    pub(crate) fn plan_invoke(
        &mut self,
        args: Vec<u8>,
    ) -> Result<Result<Vec<u8>, String>, ModuleError> {
        let Some(f) = self.plan_invoke.clone() else {
            return Err(ModuleError::State {
                name: self.name.clone(),
                reason: "not a typed PLAN service (no `plan_invoke`)".into(),
            });
        };
        self.refuel()?;
        let len = i32::try_from(args.len()).unwrap_or(i32::MAX);
        let st = self.store.data_mut();
        st.pkt = args;
        st.in_link = -1;
        st.logs.clear();
        let r = f.call(&mut self.store, len).map_err(|e| self.fault(e));
        let st = self.store.data_mut();
        st.pkt.clear();
        let logs = std::mem::take(&mut st.logs);
        let v = r?;
        if v < 0 {
            let why = logs
                .last()
                .cloned()
                .unwrap_or_else(|| format!("answered {v}"));
            return Ok(Err(why));
        }
        let (ptr, len) = ((v >> 32) as u32 as usize, v as u32 as usize);
        let fault = |reason: String| ModuleError::Fault {
            name: self.name.clone(),
            reason,
        };
        if len > MAX_PLAN_RESULT {
            return Err(fault(format!(
                "plan_invoke answered {len} bytes, at most {MAX_PLAN_RESULT}"
            )));
        }
        let mem = self.store.data().memory;
        mem.and_then(|m| {
            m.data(&self.store)
                .get(ptr..ptr.checked_add(len)?)
                .map(<[u8]>::to_vec)
        })
        .map(Ok)
        .ok_or_else(|| fault("plan_invoke answered a result outside its memory".into()))
    }

    /// Calls the module's `service` export.
    pub(crate) fn call_service(&mut self, op: i32, arg: i64) -> Result<i64, ModuleError> {
        let Some(f) = self.service.clone() else {
            return Err(ModuleError::State {
                name: self.name.clone(),
                reason: "provides no service".into(),
            });
        };
        self.refuel()?;
        f.call(&mut self.store, (op, arg))
            .map_err(|e| self.fault(e))
    }

    /// Lends service providers to this instance for its next calls.
    pub(crate) fn lend_services(&mut self, s: Vec<(String, Box<Instance>)>) {
        self.store.data_mut().services = s;
    }

    /// Takes back the providers lent.
    pub(crate) fn return_services(&mut self) -> Vec<(String, Box<Instance>)> {
        std::mem::take(&mut self.store.data_mut().services)
    }

    /// The state the module hands to its successor (empty if it exports none).
    pub(crate) fn export_state(&mut self) -> Result<Vec<u8>, ModuleError> {
        let Some(f) = self.export.clone() else {
            return Ok(Vec::new());
        };
        self.refuel()?;
        let v = f.call(&mut self.store, ()).map_err(|e| self.fault(e))?;
        let (ptr, len) = ((v >> 32) as u32 as usize, v as u32 as usize);
        if len > MAX_STATE {
            return Err(ModuleError::State {
                name: self.name.clone(),
                reason: format!("exported {len} bytes of state, at most {MAX_STATE}"),
            });
        }
        let mem = self.store.data().memory;
        let bytes = mem.and_then(|m| {
            m.data(&self.store)
                .get(ptr..ptr.checked_add(len)?)
                .map(<[u8]>::to_vec)
        });
        bytes.ok_or_else(|| ModuleError::State {
            name: self.name.clone(),
            reason: "exported state outside its memory".into(),
        })
    }

    /// Hands state from a predecessor to this instance.
    pub(crate) fn import_state(&mut self, state: &[u8]) -> Result<(), ModuleError> {
        if state.is_empty() {
            return Ok(());
        }
        let (Some(alloc), Some(import)) = (self.alloc.clone(), self.import.clone()) else {
            return Err(ModuleError::State {
                name: self.name.clone(),
                reason:
                    "its predecessor handed over state but it exports no `alloc`/`state_import`"
                        .into(),
            });
        };
        self.refuel()?;
        let len = i32::try_from(state.len()).unwrap_or(i32::MAX);
        let ptr = alloc
            .call(&mut self.store, len)
            .map_err(|e| self.fault(e))?;
        let mem = self.store.data().memory;
        let ok = mem.is_some_and(|m| {
            usize::try_from(ptr)
                .ok()
                .and_then(|p| {
                    m.data_mut(&mut self.store)
                        .get_mut(p..p.checked_add(state.len())?)
                })
                .map(|d| d.copy_from_slice(state))
                .is_some()
        });
        if !ok {
            return Err(ModuleError::State {
                name: self.name.clone(),
                reason: "alloc returned a buffer outside its memory".into(),
            });
        }
        match import.call(&mut self.store, (ptr, len)) {
            Ok(0) => Ok(()),
            Ok(r) => Err(ModuleError::State {
                name: self.name.clone(),
                reason: format!("state_import returned {r}"),
            }),
            Err(e) => Err(self.fault(e)),
        }
    }
}
