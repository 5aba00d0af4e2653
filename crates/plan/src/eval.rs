//! The evaluator: runs compiled programs with a step budget.
//!
//! Contract: [`Interpreter::eval_chunk`] evaluates a chunk (entry function
//! plus argument values) against node services and returns the result
//! value or the uncaught PLAN exception, together with the number of steps
//! used and the resource bound left. Every IR node, every fold iteration
//! and every unit of builtin work costs steps; exceeding the budget aborts
//! with [`EvalError::BudgetExhausted`], which PLAN code cannot catch. The
//! evaluation depth is bounded ([`Limits::max_depth`]), as are value depth
//! and string sizes, so no program can exhaust the node's stack or memory.
//! Malformed input never panics: type confusion (impossible for checked
//! code) is reported as [`EvalError::Internal`].

use crate::ast::{BinOp, NetPrim, UnOp};
use crate::builtins::{self, Builtin};
use crate::error::CompileError;
use crate::ir::{Callee, Catch, ChunkTarget, FnCode, Ir, SvcRef, SvcTarget};
use crate::program::{Program, ProgramCache};
use crate::services::{Outgoing, SendKind, ServiceError, ServiceRegistry, Services};
use crate::types::{SchemeBody, Subst, Ty};
use crate::value::{Chunk, Code, Dev, List, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use thiserror::Error;

/// Largest string or blob a program may build, in bytes.
pub const MAX_STRING_LEN: usize = 1 << 20;

/// Fatal evaluation errors (not catchable by PLAN `handle`).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EvalError {
    /// The step budget ran out.
    #[error("step budget of {budget} exhausted")]
    BudgetExhausted {
        /// The budget that was exceeded.
        budget: u64,
    },
    /// Evaluation nested deeper than the limit.
    #[error("evaluation nested deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: u32,
    },
    /// The chunk's code does not compile.
    #[error("chunk code does not compile: {0}")]
    Compile(#[from] CompileError),
    /// The chunk carries only a code hash that is not in the cache.
    #[error("chunk code with hash {0} is not cached here and was not sent")]
    MissingCode(String),
    /// The chunk names a function that neither its code nor the node defines.
    #[error("chunk entry `{0}` is neither a function of its code nor a service")]
    UnknownEntry(String),
    /// The chunk's argument values do not match the entry's type.
    #[error("bad arguments for `{func}`: {reason}")]
    BadArguments {
        /// Entry function.
        func: String,
        /// What does not match.
        reason: String,
    },
    /// A value exceeded a size or depth limit.
    #[error("value too large: {0}")]
    TooLarge(String),
    /// An invariant of checked code was violated (a bug, never expected).
    #[error("internal evaluator error: {0}")]
    Internal(String),
}

/// An uncaught PLAN exception.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Raised {
    /// Exception name.
    pub exn: Arc<str>,
    /// Detail (empty for `raise E` in PLAN code).
    pub msg: String,
}

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.msg.is_empty() {
            write!(f, "{}", self.exn)
        } else {
            write!(f, "{}: {}", self.exn, self.msg)
        }
    }
}

/// The packet context a chunk is evaluated in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalContext {
    /// Source of the packet (`getSource`).
    pub source: SocketAddr,
    /// Interface the packet arrived on (`getSrcDev`).
    pub src_dev: Dev,
    /// Port of the injecting application (`getImplicitPort`).
    pub implicit_port: u32,
    /// Resource bound of the packet (`getRB`); decreased by child packets.
    pub rb: u32,
}

/// Evaluation limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Step budget.
    pub steps: u64,
    /// Maximum evaluation depth.
    pub max_depth: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            steps: 100_000,
            max_depth: 200,
        }
    }
}

/// Result of an evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// The value, or the uncaught exception.
    pub result: Result<Value, Raised>,
    /// Steps used.
    pub steps: u64,
    /// Resource bound left in the packet.
    pub rb: u32,
    /// The chunk given to `abort`, if the evaluation ended by calling it (its `result` is
    /// then the exception `Abort`): the node sends it back to the packet's source, where it
    /// is evaluated as a handler would be.
    pub abort: Option<Arc<Chunk>>,
}

/// A PLAN interpreter for one node: its service registry and program cache.
#[derive(Debug, Default)]
pub struct Interpreter {
    registry: ServiceRegistry,
    cache: ProgramCache,
}

impl Interpreter {
    /// An interpreter with the given registry and a default-sized cache.
    pub fn new(registry: ServiceRegistry) -> Self {
        Interpreter {
            registry,
            cache: ProgramCache::default(),
        }
    }

    /// An interpreter with the core services.
    pub fn with_core() -> Self {
        Self::new(ServiceRegistry::with_core())
    }

    /// The registry.
    pub fn registry(&self) -> &ServiceRegistry {
        &self.registry
    }

    /// Mutable registry, for registering extension services.
    pub fn registry_mut(&mut self) -> &mut ServiceRegistry {
        &mut self.registry
    }

    /// The program cache.
    pub fn cache(&self) -> &ProgramCache {
        &self.cache
    }

    /// Compiles (or fetches from the cache) a program.
    pub fn compile(&self, text: &str) -> Result<Arc<Program>, CompileError> {
        self.cache.get_or_compile(text, &self.registry)
    }

    /// Evaluates `chunk` with `services`, context `ctx` and `limits`.
    pub fn eval_chunk(
        &self,
        chunk: &Chunk,
        services: &mut dyn Services,
        ctx: EvalContext,
        limits: Limits,
    ) -> Result<Evaluation, EvalError> {
        let mut m = Machine {
            services,
            cache: &self.cache,
            registry: &self.registry,
            ctx,
            steps: 0,
            budget: limits.steps,
            depth: 0,
            max_depth: limits.max_depth,
            stack: Vec::with_capacity(32),
        };
        let r = m.run_chunk(chunk, true);
        m.finish(r)
    }

    /// Evaluates the top-level function `func` of the already compiled `prog` with `args`
    /// (tools use it for programs compiled in another dialect, such as entry calls).
    pub fn eval_function(
        &self,
        prog: &Arc<Program>,
        func: &str,
        args: Vec<Value>,
        services: &mut dyn Services,
        ctx: EvalContext,
        limits: Limits,
    ) -> Result<Evaluation, EvalError> {
        let Some((idx, _)) = prog.exports.get(func) else {
            return Err(EvalError::UnknownEntry(func.to_string()));
        };
        let mut m = Machine {
            services,
            cache: &self.cache,
            registry: &self.registry,
            ctx,
            steps: 0,
            budget: limits.steps,
            depth: 0,
            max_depth: limits.max_depth,
            stack: Vec::with_capacity(32),
        };
        let r = m.run_program(prog, *idx, args);
        m.finish(r)
    }
}

impl Machine<'_> {
    fn finish(self, r: R) -> Result<Evaluation, EvalError> {
        let mut abort = None;
        let result = match r {
            Ok(v) => Ok(v),
            Err(Flow::Raise(e)) => Err(e),
            Err(Flow::Abort(c)) => {
                let msg = format!("abort(|{}|(...))", c.func);
                abort = Some(c);
                Err(Raised {
                    exn: Arc::from(ABORT),
                    msg,
                })
            }
            Err(Flow::Fatal(e)) => return Err(e),
        };
        Ok(Evaluation {
            result,
            steps: self.steps,
            rb: self.ctx.rb,
            abort,
        })
    }
}

enum Flow {
    Raise(Raised),
    /// `abort(c)`: ends the evaluation (no handler catches it).
    Abort(Arc<Chunk>),
    Fatal(EvalError),
}

/// The exception name an evaluation ended by `abort` reports.
pub const ABORT: &str = "Abort";

type R<T = Value> = Result<T, Flow>;

fn raise<T>(exn: &str, msg: impl Into<String>) -> R<T> {
    Err(Flow::Raise(Raised {
        exn: Arc::from(exn),
        msg: msg.into(),
    }))
}

fn internal<T>(msg: &str) -> R<T> {
    Err(Flow::Fatal(EvalError::Internal(msg.to_string())))
}

fn from_service(e: ServiceError) -> Flow {
    Flow::Raise(Raised {
        exn: Arc::from(e.exn.as_str()),
        msg: e.msg,
    })
}

fn depth_err(e: crate::value::DepthError) -> Flow {
    Flow::Fatal(EvalError::TooLarge(e.to_string()))
}

struct Machine<'a> {
    services: &'a mut dyn Services,
    cache: &'a ProgramCache,
    registry: &'a ServiceRegistry,
    ctx: EvalContext,
    steps: u64,
    budget: u64,
    depth: u32,
    max_depth: u32,
    stack: Vec<Value>,
}

/// Infers the type of a run-time value (for checking chunk arguments).
fn value_type(m: &Machine<'_>, v: &Value, s: &mut Subst) -> Result<Ty, String> {
    Ok(match v {
        Value::Unit => Ty::UNIT,
        Value::Int(_) => Ty::INT,
        Value::Bool(_) => Ty::BOOL,
        Value::Char(_) => Ty::CHAR,
        Value::Str(_) => Ty::STRING,
        Value::Host(_) => Ty::HOST,
        Value::Port(_) => Ty::PORT,
        Value::Key(_) => Ty::Base(crate::ast::BaseType::Key),
        Value::Blob(_) => Ty::BLOB,
        Value::Exn(_) => Ty::Base(crate::ast::BaseType::Exn),
        Value::Dev(_) => Ty::DEV,
        Value::List(l) => {
            let el = s.fresh();
            for x in l.iter() {
                let t = value_type(m, x, s)?;
                s.unify(&t, &el)
                    .map_err(|_| "list elements of different types".to_string())?;
            }
            Ty::list(el)
        }
        Value::Tuple(t) => Ty::Tuple(
            t.items()
                .iter()
                .map(|x| value_type(m, x, s))
                .collect::<Result<_, _>>()?,
        ),
        Value::Chunk(c) => {
            let scheme = match &c.code {
                Some(code) => match m.program_for(code) {
                    Ok(p) => p.function_type(&c.func).cloned(),
                    Err(_) => None,
                },
                None => m.registry.lookup(&c.func).map(|e| e.scheme.clone()),
            };
            match scheme.map(|sc| s.instantiate(&sc)) {
                Some(SchemeBody::Fun(ft)) if ft.params.len() == c.args.len() => {
                    for (p, a) in ft.params.iter().zip(&c.args) {
                        let t = value_type(m, a, s)?;
                        s.unify(&t, p).map_err(|_| {
                            format!("arguments of chunk |{}| do not match its type", c.func)
                        })?;
                    }
                    Ty::chunk(ft.ret)
                }
                // Unknown code (hash not cached): its type cannot be known
                // here; `eval` of it re-checks when it runs.
                _ => Ty::chunk(s.fresh()),
            }
        }
    })
}

impl Machine<'_> {
    #[inline]
    fn tick(&mut self, n: u64) -> R<()> {
        self.steps = self.steps.saturating_add(n);
        if self.steps > self.budget {
            return Err(Flow::Fatal(EvalError::BudgetExhausted {
                budget: self.budget,
            }));
        }
        Ok(())
    }

    fn program_for(&self, code: &Code) -> Result<Arc<Program>, EvalError> {
        match code {
            Code::Text { hash, text } => {
                Ok(self
                    .cache
                    .get_or_compile_hashed(text, *hash, self.registry)?)
            }
            Code::Hash(h) => self
                .cache
                .get(h)
                .ok_or_else(|| EvalError::MissingCode(hex::encode(h))),
        }
    }

    /// Runs a chunk; `top` distinguishes the packet's own chunk (errors are
    /// fatal) from `eval`/reassembly (errors raise `BadChunk`).
    fn run_chunk(&mut self, chunk: &Chunk, top: bool) -> R {
        let fail = |e: EvalError| -> Flow {
            if top {
                Flow::Fatal(e)
            } else {
                Flow::Raise(Raised {
                    exn: Arc::from("BadChunk"),
                    msg: e.to_string(),
                })
            }
        };
        self.tick(1)?;
        let prog = match &chunk.code {
            Some(code) => Some(self.program_for(code).map_err(fail)?),
            None => None,
        };
        // Check the argument values against the entry's type.
        let scheme = match &prog {
            Some(p) => p.function_type(&chunk.func).cloned(),
            None => None,
        }
        .or_else(|| self.registry.lookup(&chunk.func).map(|e| e.scheme.clone()))
        .ok_or_else(|| fail(EvalError::UnknownEntry(chunk.func.to_string())))?;
        let mut s = Subst::default();
        let SchemeBody::Fun(ft) = s.instantiate(&scheme) else {
            return Err(fail(EvalError::UnknownEntry(chunk.func.to_string())));
        };
        let bad = |reason: String| {
            fail(EvalError::BadArguments {
                func: chunk.func.to_string(),
                reason,
            })
        };
        if ft.params.len() != chunk.args.len() {
            return Err(bad(format!(
                "expects {} arguments, chunk has {}",
                ft.params.len(),
                chunk.args.len()
            )));
        }
        for (i, (p, a)) in ft.params.iter().zip(&chunk.args).enumerate() {
            self.tick(1)?;
            let t = value_type(self, a, &mut s).map_err(&bad)?;
            if let Err(e) = s.unify(&t, p) {
                let _ = e;
                let want = s.resolve(p).map(|t| t.to_string()).unwrap_or_default();
                return Err(bad(format!("argument {} does not have type {want}", i + 1)));
            }
        }
        match prog.and_then(|p| p.exports.get(&chunk.func).map(|(idx, _)| (p.clone(), *idx))) {
            Some((p, idx)) => self.run_program(&p, idx, chunk.args.clone()),
            None => {
                let svc = self
                    .registry
                    .lookup(&chunk.func)
                    .map(|e| SvcRef {
                        name: e.name.clone(),
                        target: e.target.clone(),
                    })
                    .ok_or_else(|| fail(EvalError::UnknownEntry(chunk.func.to_string())))?;
                self.call_service(None, &svc, chunk.args.clone())
            }
        }
    }

    fn run_program(&mut self, prog: &Arc<Program>, idx: u32, args: Vec<Value>) -> R {
        let mut globals = vec![Value::Unit; prog.nglobals as usize];
        self.call_code(prog, &mut globals, &prog.init, Vec::new())?;
        let f = prog
            .fns
            .get(idx as usize)
            .ok_or_else(|| Flow::Fatal(EvalError::Internal("bad function index".into())))?;
        self.call_code(prog, &mut globals, f, args)
    }

    fn call_code(
        &mut self,
        prog: &Arc<Program>,
        globals: &mut [Value],
        f: &FnCode,
        args: Vec<Value>,
    ) -> R {
        self.tick(1)?;
        if args.len() != f.nparams as usize {
            return internal("arity mismatch");
        }
        let bp = self.stack.len();
        self.stack.extend(args);
        self.stack
            .resize(bp + f.frame.max(f.nparams) as usize, Value::Unit);
        let r = self.eval(prog, globals, &f.body, bp);
        self.stack.truncate(bp);
        r
    }

    fn eval(&mut self, prog: &Arc<Program>, g: &mut [Value], ir: &Ir, bp: usize) -> R {
        self.depth += 1;
        if self.depth > self.max_depth {
            self.depth -= 1;
            return Err(Flow::Fatal(EvalError::TooDeep {
                limit: self.max_depth,
            }));
        }
        let r = self.eval_inner(prog, g, ir, bp);
        self.depth -= 1;
        r
    }

    fn eval_all(
        &mut self,
        prog: &Arc<Program>,
        g: &mut [Value],
        irs: &[Ir],
        bp: usize,
    ) -> R<Vec<Value>> {
        let mut out = Vec::with_capacity(irs.len());
        for x in irs {
            out.push(self.eval(prog, g, x, bp)?);
        }
        Ok(out)
    }

    #[allow(clippy::too_many_lines)]
    fn eval_inner(&mut self, prog: &Arc<Program>, g: &mut [Value], ir: &Ir, bp: usize) -> R {
        self.tick(1)?;
        match ir {
            Ir::Const(v) => Ok(v.clone()),
            Ir::Local(i) => match self.stack.get(bp + *i as usize) {
                Some(v) => Ok(v.clone()),
                None => internal("local slot out of range"),
            },
            Ir::Global(i) => match g.get(*i as usize) {
                Some(v) => Ok(v.clone()),
                None => internal("global slot out of range"),
            },
            Ir::Tuple(items) => {
                let vs = self.eval_all(prog, g, items, bp)?;
                Value::tuple(vs).map_err(depth_err)
            }
            Ir::List(items) => {
                let vs = self.eval_all(prog, g, items, bp)?;
                Value::list(vs).map_err(depth_err)
            }
            Ir::Seq(items) => {
                let mut last = Value::Unit;
                for x in items {
                    last = self.eval(prog, g, x, bp)?;
                }
                Ok(last)
            }
            Ir::If(c, a, b) => match self.eval(prog, g, c, bp)? {
                Value::Bool(true) => self.eval(prog, g, a, bp),
                Value::Bool(false) => self.eval(prog, g, b, bp),
                _ => internal("if on a non-bool"),
            },
            Ir::Let(items, body) => {
                for (slot, x) in items {
                    let v = self.eval(prog, g, x, bp)?;
                    match self.stack.get_mut(bp + *slot as usize) {
                        Some(s) => *s = v,
                        None => return internal("let slot out of range"),
                    }
                }
                self.eval(prog, g, body, bp)
            }
            Ir::SetGlobal(i, x) => {
                let v = self.eval(prog, g, x, bp)?;
                match g.get_mut(*i as usize) {
                    Some(s) => *s = v,
                    None => return internal("global slot out of range"),
                }
                Ok(Value::Unit)
            }
            Ir::CallFn(idx, args) => {
                let vs = self.eval_all(prog, g, args, bp)?;
                let p = prog.clone();
                let f = p
                    .fns
                    .get(*idx as usize)
                    .ok_or_else(|| Flow::Fatal(EvalError::Internal("bad function index".into())))?;
                self.depth += 1;
                let r = self.call_code(prog, g, f, vs);
                self.depth -= 1;
                r
            }
            Ir::CallSvc(svc, args) => {
                let vs = self.eval_all(prog, g, args, bp)?;
                self.call_service(Some(prog), svc, vs)
            }
            Ir::Unop(op, a) => {
                let v = self.eval(prog, g, a, bp)?;
                self.unop(*op, v)
            }
            Ir::Binop(BinOp::And, a, b) => match self.eval(prog, g, a, bp)? {
                Value::Bool(false) => Ok(Value::Bool(false)),
                Value::Bool(true) => self.eval(prog, g, b, bp),
                _ => internal("and on a non-bool"),
            },
            Ir::Binop(BinOp::Or, a, b) => match self.eval(prog, g, a, bp)? {
                Value::Bool(true) => Ok(Value::Bool(true)),
                Value::Bool(false) => self.eval(prog, g, b, bp),
                _ => internal("or on a non-bool"),
            },
            Ir::Binop(op, a, b) => {
                let x = self.eval(prog, g, a, bp)?;
                let y = self.eval(prog, g, b, bp)?;
                self.binop(*op, x, y)
            }
            Ir::Raise(name) => Err(Flow::Raise(Raised {
                exn: name.clone(),
                msg: String::new(),
            })),
            Ir::Check(e, idx) => {
                let v = self.eval(prog, g, e, bp)?;
                let Some((want, name)) = prog.checks.get(*idx as usize) else {
                    return internal("checked call out of range");
                };
                self.check_result(name, &v, want, &mut Subst::default())?;
                Ok(v)
            }
            Ir::RaiseVal(e) => match self.eval(prog, g, e, bp)? {
                Value::Exn(name) => Err(Flow::Raise(Raised {
                    exn: name,
                    msg: String::new(),
                })),
                _ => internal("raise of a non-exception"),
            },
            Ir::Try(body, catch, handler) => match (self.eval(prog, g, body, bp), catch) {
                (Err(Flow::Raise(r)), Catch::Exn(name)) if r.exn == *name => {
                    self.eval(prog, g, handler, bp)
                }
                (Err(Flow::Raise(r)), Catch::Any(slot)) => {
                    match self.stack.get_mut(bp + *slot as usize) {
                        Some(s) => *s = Value::Exn(r.exn),
                        None => return internal("handler slot out of range"),
                    }
                    self.eval(prog, g, handler, bp)
                }
                (other, _) => other,
            },
            Ir::Chunk(target, args) => {
                let vs = self.eval_all(prog, g, args, bp)?;
                let (code, func) = match target {
                    ChunkTarget::Fn(f) => (Some(prog.code.clone()), f.clone()),
                    ChunkTarget::Svc(f) => (None, f.clone()),
                };
                Chunk::new(code, func, vs)
                    .map(|c| Value::Chunk(Arc::new(c)))
                    .map_err(depth_err)
            }
            Ir::Net(prim, args, route) => {
                let vs = self.eval_all(prog, g, args, bp)?;
                self.net(*prim, vs, route.clone())
            }
            Ir::Fold { left, callee, a, b } => {
                let av = self.eval(prog, g, a, bp)?;
                let bv = self.eval(prog, g, b, bp)?;
                let (mut acc, list) = if *left { (av, bv) } else { (bv, av) };
                let Value::List(list) = list else {
                    return internal("fold over a non-list");
                };
                let extra = match callee {
                    Callee::Fn(_, caps) => self.eval_all(prog, g, caps, bp)?,
                    Callee::Svc(_) => Vec::new(),
                };
                let items: Vec<Value> = if *left {
                    list.iter().cloned().collect()
                } else {
                    let mut v: Vec<Value> = list.iter().cloned().collect();
                    v.reverse();
                    v
                };
                for x in items {
                    self.tick(1)?;
                    let mut args = if *left { vec![acc, x] } else { vec![x, acc] };
                    args.extend(extra.iter().cloned());
                    acc = match callee {
                        Callee::Fn(idx, _) => {
                            let p = prog.clone();
                            let f = p.fns.get(*idx as usize).ok_or_else(|| {
                                Flow::Fatal(EvalError::Internal("bad function index".into()))
                            })?;
                            self.depth += 1;
                            let r = self.call_code(prog, g, f, args);
                            self.depth -= 1;
                            r?
                        }
                        Callee::Svc(svc) => self.call_service(Some(prog), svc, args)?,
                    };
                }
                Ok(acc)
            }
        }
    }

    /// Node services are code outside this crate (modules among them): their results are
    /// checked against their registered type, instantiated by the arguments' types, so an
    /// ill-typed answer is a PLAN exception and never reaches the evaluator. Results whose
    /// type only the call site fixes are checked there ([`Ir::Check`]).
    fn check_extension_result(&mut self, name: &str, args: &[Value], v: &Value) -> R<()> {
        let Some(entry) = self.registry.lookup(name) else {
            return Ok(());
        };
        if entry.scheme.free_result() {
            return Ok(());
        }
        let scheme = entry.scheme.clone();
        self.tick(1)?;
        let mut s = Subst::default();
        let want = match s.instantiate(&scheme) {
            SchemeBody::Fun(ft) => {
                for (p, a) in ft.params.iter().zip(args) {
                    if let Ok(t) = value_type(self, a, &mut s) {
                        let _ = s.unify(&t, p);
                    }
                }
                ft.ret
            }
            SchemeBody::Value(t) => t,
        };
        self.check_result(name, v, &want, &mut s)
    }

    /// Raises `ServiceError` unless `v` (returned by service `name`) has type `want`.
    /// `want` is a type of substitution `s`.
    fn check_result(&mut self, name: &str, v: &Value, want: &Ty, s: &mut Subst) -> R<()> {
        self.tick(1)?;
        let ok = value_type(self, v, s).is_ok_and(|t| s.unify(&t, want).is_ok());
        if ok {
            return Ok(());
        }
        let mut fresh = Subst::default();
        let found = value_type(self, v, &mut fresh)
            .ok()
            .and_then(|t| fresh.generalize(&SchemeBody::Value(t), &[]).ok())
            .map_or_else(|| "value of another type".to_string(), |sc| sc.to_string());
        let want = s
            .generalize(&SchemeBody::Value(want.clone()), &[])
            .map_or_else(|_| want.to_string(), |sc| sc.to_string());
        raise(
            "ServiceError",
            format!("`{name}` returned a {found} where a {want} is needed"),
        )
    }

    fn unop(&mut self, op: UnOp, v: Value) -> R {
        Ok(match (op, v) {
            (UnOp::Neg, Value::Int(i)) => Value::Int(i.wrapping_neg()),
            (UnOp::Noti, Value::Int(i)) => Value::Int(!i),
            (UnOp::Not, Value::Bool(b)) => Value::Bool(!b),
            (UnOp::Ord, Value::Char(c)) => Value::Int(i64::from(c)),
            (UnOp::Chr, Value::Int(i)) => match u8::try_from(i) {
                Ok(c) => Value::Char(c),
                Err(_) => return raise("BadChr", format!("chr: {i} is not in 0..255")),
            },
            (UnOp::Hd, Value::List(l)) => match l.uncons() {
                Some((h, _)) => h.clone(),
                None => return raise("EmptyList", "hd of an empty list"),
            },
            (UnOp::Tl, Value::List(l)) => match l.uncons() {
                Some((_, t)) => Value::List(t.clone()),
                None => return raise("EmptyList", "tl of an empty list"),
            },
            (UnOp::Fst, Value::Tuple(t)) => t.items().first().cloned().unwrap_or(Value::Unit),
            (UnOp::Snd, Value::Tuple(t)) => t.items().get(1).cloned().unwrap_or(Value::Unit),
            (UnOp::Nth(n), Value::Tuple(t)) => {
                match (n as usize).checked_sub(1).and_then(|i| t.items().get(i)) {
                    Some(v) => v.clone(),
                    None => return internal("tuple index out of range"),
                }
            }
            (UnOp::Explode, Value::Str(s)) => {
                self.tick(s.len() as u64)?;
                let mut l = List::nil();
                for c in s.iter().rev() {
                    l = List::cons(Value::Char(*c), &l).map_err(depth_err)?;
                }
                Value::List(l)
            }
            (UnOp::Implode, Value::List(l)) => {
                self.tick(l.len() as u64)?;
                let mut out = Vec::with_capacity(l.len());
                for c in l.iter() {
                    match c {
                        Value::Char(c) => out.push(*c),
                        _ => return internal("implode of a non-char"),
                    }
                }
                if out.len() > MAX_STRING_LEN {
                    return Err(Flow::Fatal(EvalError::TooLarge(
                        "string longer than 1 MiB".into(),
                    )));
                }
                Value::Str(Arc::from(out))
            }
            _ => return internal("ill-typed unary operation"),
        })
    }

    fn binop(&mut self, op: BinOp, x: Value, y: Value) -> R {
        if let BinOp::Eq | BinOp::Ne = op {
            return Ok(Value::Bool((x == y) == (op == BinOp::Eq)));
        }
        if op == BinOp::Cons {
            let Value::List(l) = y else {
                return internal("cons onto a non-list");
            };
            return List::cons(x, &l).map(Value::List).map_err(depth_err);
        }
        if op == BinOp::Concat {
            let (Value::Str(a), Value::Str(b)) = (x, y) else {
                return internal("^ on non-strings");
            };
            let len = a.len() + b.len();
            if len > MAX_STRING_LEN {
                return Err(Flow::Fatal(EvalError::TooLarge(
                    "string longer than 1 MiB".into(),
                )));
            }
            self.tick(len as u64 / 16)?;
            let mut v = Vec::with_capacity(len);
            v.extend_from_slice(&a);
            v.extend_from_slice(&b);
            return Ok(Value::Str(Arc::from(v)));
        }
        let (Value::Int(a), Value::Int(b)) = (x, y) else {
            return internal("ill-typed integer operation");
        };
        let shift = |a: i64, b: i64, left: bool| -> i64 {
            match u32::try_from(b) {
                Ok(s) if s < 64 => {
                    if left {
                        a.wrapping_shl(s)
                    } else {
                        a >> s
                    }
                }
                _ => {
                    if left || a >= 0 {
                        0
                    } else {
                        -1
                    }
                }
            }
        };
        Ok(match op {
            BinOp::Add => Value::Int(a.wrapping_add(b)),
            BinOp::Sub => Value::Int(a.wrapping_sub(b)),
            BinOp::Mul => Value::Int(a.wrapping_mul(b)),
            BinOp::Div | BinOp::Mod if b == 0 => return raise("DivByZero", "division by zero"),
            BinOp::Div => Value::Int(a.wrapping_div(b)),
            BinOp::Mod => Value::Int(a.wrapping_rem(b)),
            BinOp::Lt => Value::Bool(a < b),
            BinOp::Le => Value::Bool(a <= b),
            BinOp::Gt => Value::Bool(a > b),
            BinOp::Ge => Value::Bool(a >= b),
            BinOp::Shl => Value::Int(shift(a, b, true)),
            BinOp::Shr => Value::Int(shift(a, b, false)),
            BinOp::Xori => Value::Int(a ^ b),
            BinOp::Andi => Value::Int(a & b),
            BinOp::Ori => Value::Int(a | b),
            _ => return internal("unexpected operator"),
        })
    }

    fn net(&mut self, prim: NetPrim, vs: Vec<Value>, route: Option<Arc<str>>) -> R {
        let mut it = vs.into_iter();
        let (Some(Value::Chunk(chunk)), Some(Value::Host(dest)), Some(Value::Int(rb))) =
            (it.next(), it.next(), it.next())
        else {
            return internal("ill-typed network primitive");
        };
        let kind = match prim {
            NetPrim::OnRemote => SendKind::Remote {
                route_fun: route.unwrap_or_else(|| Arc::from("defaultRoute")),
            },
            NetPrim::OnNeighbor => SendKind::Neighbor {
                dev: match it.next() {
                    Some(Value::Dev(d)) => Some(d),
                    _ => None,
                },
            },
            NetPrim::RetransOnRemote => {
                let (Some(Value::Int(retries)), Some(Value::Int(timeout_ms))) =
                    (it.next(), it.next())
                else {
                    return internal("ill-typed RetransOnRemote");
                };
                SendKind::Retrans {
                    route_fun: route.unwrap_or_else(|| Arc::from("defaultRoute")),
                    retries,
                    timeout_ms,
                }
            }
        };
        let amount = match u32::try_from(rb) {
            Ok(a) if a >= 1 && a <= self.ctx.rb => a,
            _ => {
                return raise(
                    "NotEnoughRB",
                    format!(
                        "{} asked for a resource bound of {rb}, but the packet has {} (at least 1 is needed)",
                        prim.name(),
                        self.ctx.rb
                    ),
                );
            }
        };
        self.tick(4)?;
        self.ctx.rb -= amount;
        self.services
            .send(Outgoing {
                kind,
                dest,
                rb: amount,
                chunk,
            })
            .map_err(from_service)?;
        Ok(Value::Unit)
    }

    #[allow(clippy::too_many_lines)]
    fn call_service(&mut self, _prog: Option<&Arc<Program>>, svc: &SvcRef, args: Vec<Value>) -> R {
        let b = match &svc.target {
            SvcTarget::Builtin(b) => *b,
            SvcTarget::Extension(id) => {
                self.tick(1)?;
                let v = self
                    .services
                    .call(*id, &svc.name, &args)
                    .map_err(from_service)?;
                self.check_extension_result(&svc.name, &args, &v)?;
                return Ok(v);
            }
            SvcTarget::Missing => {
                return raise(
                    "UnknownService",
                    format!("service `{}` is not available on this node", svc.name),
                );
            }
        };
        self.tick(builtins::cost(b, &args))?;
        if let Some(r) = builtins::call_pure(b, &args) {
            return r.or_else(|(exn, msg)| raise(exn, msg));
        }
        Ok(match (b, args.as_slice()) {
            (Builtin::ThisHost, []) => {
                let hosts = self.services.this_host();
                Value::list(hosts.into_iter().map(Value::Host).collect()).map_err(depth_err)?
            }
            (Builtin::ThisHostIs, [Value::Host(h)]) => Value::Bool(self.services.this_host_is(h)),
            (Builtin::GetRb, []) => Value::Int(i64::from(self.ctx.rb)),
            (Builtin::GetSource, []) => Value::Host(self.ctx.source),
            (Builtin::GetSrcDev, []) => Value::Dev(self.ctx.src_dev),
            (Builtin::GetImplicitPort, []) => Value::Port(self.ctx.implicit_port),
            (Builtin::GetNeighbors, []) => {
                let ns = self.services.get_neighbors();
                self.tick(ns.len() as u64)?;
                let mut items = Vec::with_capacity(ns.len());
                for (h, d) in ns {
                    items.push(
                        Value::tuple(vec![Value::Host(h), Value::Dev(d)]).map_err(depth_err)?,
                    );
                }
                Value::list(items).map_err(depth_err)?
            }
            (Builtin::DefaultRoute, [Value::Host(h)]) => {
                let (next, dev) = self.services.default_route(h).map_err(from_service)?;
                Value::tuple(vec![Value::Host(next), Value::Dev(dev)]).map_err(depth_err)?
            }
            (Builtin::Print, [v]) => {
                self.services.print(&v.to_display_string());
                Value::Unit
            }
            (Builtin::Deliver, [Value::Port(p), v]) => {
                self.services.deliver(*p, v).map_err(from_service)?;
                Value::Unit
            }
            (Builtin::GetHostByName, [Value::Str(s)]) => {
                let name = String::from_utf8_lossy(s).into_owned();
                Value::Host(
                    self.services
                        .get_host_by_name(&name)
                        .map_err(from_service)?,
                )
            }
            (Builtin::Fragment, [Value::Chunk(c), Value::Int(mtu)]) => self.fragment(c, *mtu)?,
            (
                Builtin::FragPiece,
                [
                    Value::Int(id),
                    Value::Int(idx),
                    Value::Int(total),
                    Value::Blob(data),
                ],
            ) => {
                match self
                    .services
                    .reassemble(*id, *idx, *total, data)
                    .map_err(from_service)?
                {
                    None => Value::Unit,
                    Some(bytes) => {
                        self.tick(bytes.len() as u64 / 16)?;
                        let chunk = match crate::marshal::decode_chunk(&bytes) {
                            Ok(c) => c,
                            Err(e) => return raise("BadChunk", format!("reassembled chunk: {e}")),
                        };
                        self.run_chunk(&chunk, false)?;
                        Value::Unit
                    }
                }
            }
            (Builtin::Abort, [Value::Chunk(c)]) => return Err(Flow::Abort(c.clone())),
            (Builtin::RetransDeliver, [Value::Host(sender), Value::Int(id), Value::Chunk(c)]) => {
                if self
                    .services
                    .retrans_deliver(sender, *id)
                    .map_err(from_service)?
                {
                    let c = c.clone();
                    self.run_chunk(&c, false)?;
                }
                Value::Unit
            }
            (Builtin::RetransAck, [Value::Int(id)]) => {
                self.services.retrans_acked(*id);
                Value::Unit
            }
            (Builtin::AuthEval, [Value::Chunk(c), Value::Key(k), Value::Blob(sig)]) => {
                let bytes = crate::marshal::encode_chunk(c);
                self.services
                    .authenticate(k, sig, &bytes)
                    .map_err(from_service)?;
                let c = c.clone();
                self.run_chunk(&c, false)?
            }
            (Builtin::Eval, [Value::Chunk(c)]) => {
                let c = c.clone();
                self.run_chunk(&c, false)?
            }
            _ => return internal("ill-typed service call"),
        })
    }

    fn fragment(&mut self, c: &Arc<Chunk>, mtu: i64) -> R {
        let bytes = crate::marshal::encode_chunk(c);
        self.tick(bytes.len() as u64 / 16)?;
        let size = match usize::try_from(mtu) {
            Ok(s) if s >= 1 => s,
            _ => {
                return raise(
                    "FragmentError",
                    format!("fragment size {mtu} must be positive"),
                );
            }
        };
        let pieces: Vec<&[u8]> = bytes.chunks(size).collect();
        if pieces.len() > crate::services::Reassembler::MAX_PIECES as usize {
            return raise(
                "FragmentError",
                format!("{} fragments is too many", pieces.len()),
            );
        }
        let hash = crate::program::sha256(&bytes);
        let mut idb = [0u8; 8];
        idb.copy_from_slice(hash.get(..8).unwrap_or(&[0; 8]));
        let id = i64::from_be_bytes(idb) & i64::MAX;
        let total = pieces.len() as i64;
        let mut out = Vec::with_capacity(pieces.len());
        for (i, p) in pieces.into_iter().enumerate() {
            let ch = Chunk::new(
                None,
                "fragPiece",
                vec![
                    Value::Int(id),
                    Value::Int(i as i64),
                    Value::Int(total),
                    Value::Blob(Arc::from(p)),
                ],
            )
            .map_err(depth_err)?;
            out.push(Value::Chunk(Arc::new(ch)));
        }
        Value::list(out).map_err(depth_err)
    }
}
