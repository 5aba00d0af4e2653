//! Static checking: name resolution, Hindley–Milner type inference and
//! lowering to the resolved [`crate::ir`] form, in one pass.
//!
//! Contract: [`check_program`] accepts a parsed program and a service
//! registry and either returns compiled functions whose every variable is a
//! slot, or the first [`TypeError`] with its line:column and a message
//! stating what was expected and what was found.
//!
//! Scoping follows PLAN: definitions are sequential. A function may call
//! only functions defined *before* it — there is no recursion, which is how
//! PLAN guarantees that every evaluation terminates. A chunk `|f|(...)` is
//! not resolved locally: it may name any top-level function of the program
//! (including the enclosing one, as in the tutorial's `ping`) or a service.
//! Top-level functions, local functions and services are polymorphic; `val`
//! bindings and parameters are monomorphic. `svc` declarations (anywhere at
//! top level) give service types; a declaration must agree with the type
//! the node registered, and declared services the node lacks raise
//! `UnknownService` when called. Core services need no declaration.

use crate::ast::*;
use crate::error::TypeError;
use crate::ir::{Callee, Catch, ChunkTarget, FnCode, Ir, SvcRef, SvcTarget};
use crate::parser::parse_type;
use crate::services::ServiceRegistry;
use crate::types::{FunTy, Scheme, SchemeBody, Subst, Ty, UnifyError};
use crate::value::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

type CResult<T> = Result<T, TypeError>;

/// Result of checking a program.
#[derive(Debug)]
pub(crate) struct Checked {
    pub fns: Vec<FnCode>,
    pub init: FnCode,
    pub nglobals: u32,
    pub exports: HashMap<Arc<str>, (u32, Scheme)>,
    pub checks: Vec<(Ty, Arc<str>)>,
}

/// A call whose result type is checked at run time (see [`Scheme::free_result`]).
#[derive(Debug)]
struct ResultCheck {
    ty: Ty,
    name: Arc<str>,
    span: Span,
    resolved: bool,
}

/// A hint for a call written as another PLAN version or implementation has it (docs/plan.md):
/// the program is refused, and the message says what anode provides instead.
fn other_version_form(what: &str, nargs: usize) -> Option<&'static str> {
    match (what, nargs) {
        ("service `openPort`", 2) => Some(
            "anode's openPort takes the number of a PLAN port that applications bind on this \
             node; the PLAN 2.x (Java) openPort(host, port), which connects out to a host \
             application, is not provided (docs/plan.md)",
        ),
        _ => None,
    }
}

/// Parses a service signature such as `"(host, int) -> unit"` into a scheme.
pub fn scheme_of_type_text(sig: &str) -> Result<Scheme, String> {
    let te = parse_type(sig).map_err(|e| e.to_string())?;
    let mut s = Subst::default();
    let body = lower_sig(&te, &mut s, &mut Vec::new())?;
    s.generalize(&body, &[]).map_err(|e| format!("{e:?}"))
}

fn lower_type(te: &TypeExpr, s: &mut Subst, vars: &mut Vec<(String, Ty)>) -> Result<Ty, String> {
    Ok(match te {
        TypeExpr::Base(b) => Ty::Base(*b),
        TypeExpr::Var(v) => {
            if let Some((_, t)) = vars.iter().find(|(n, _)| n == v) {
                t.clone()
            } else {
                let t = s.fresh();
                vars.push((v.clone(), t.clone()));
                t
            }
        }
        TypeExpr::List(a) => Ty::list(lower_type(a, s, vars)?),
        TypeExpr::Chunk(a) => Ty::chunk(lower_type(a, s, vars)?),
        TypeExpr::Tuple(ts) => Ty::Tuple(
            ts.iter()
                .map(|t| lower_type(t, s, vars))
                .collect::<Result<_, _>>()?,
        ),
        TypeExpr::Fun(..) => {
            return Err(
                "function types may only appear as the whole type of a `svc` declaration (PLAN has no function values)"
                    .to_string(),
            );
        }
    })
}

fn lower_sig(
    te: &TypeExpr,
    s: &mut Subst,
    vars: &mut Vec<(String, Ty)>,
) -> Result<SchemeBody, String> {
    Ok(match te {
        TypeExpr::Fun(params, ret) => SchemeBody::Fun(FunTy {
            params: params
                .iter()
                .map(|p| lower_type(p, s, vars))
                .collect::<Result<_, _>>()?,
            ret: lower_type(ret, s, vars)?,
        }),
        other => SchemeBody::Value(lower_type(other, s, vars)?),
    })
}

#[derive(Clone, Debug)]
enum Binding {
    Local {
        id: u32,
        ty: Ty,
    },
    Global {
        slot: u32,
        ty: Ty,
    },
    Fun {
        idx: u32,
        scheme: Scheme,
        captures: Vec<u32>,
    },
}

#[derive(Clone, Debug)]
enum TopState {
    Pending(FunTy),
    Done(Scheme),
}

#[derive(Debug, Default)]
struct FnCtx {
    slots: HashMap<u32, u32>,
    next: u32,
    max: u32,
}

impl FnCtx {
    fn alloc(&mut self, id: u32) -> u32 {
        let s = self.next;
        self.next += 1;
        self.max = self.max.max(self.next);
        self.slots.insert(id, s);
        s
    }
}

struct Checker<'r> {
    reg: &'r ServiceRegistry,
    s: Subst,
    scopes: Vec<(String, Binding)>,
    fns: Vec<FnCode>,
    top: HashMap<String, TopState>,
    exns: HashSet<String>,
    svcs: HashMap<String, (Scheme, SvcTarget)>,
    ctx: FnCtx,
    next_id: u32,
    nglobals: u32,
    current_top: Option<String>,
    checks: Vec<ResultCheck>,
}

/// Checks and lowers a whole program.
pub(crate) fn check_program(defs: &[Def], reg: &ServiceRegistry) -> CResult<Checked> {
    let mut c = Checker {
        reg,
        s: Subst::default(),
        scopes: Vec::new(),
        fns: Vec::new(),
        top: HashMap::new(),
        exns: HashSet::new(),
        svcs: HashMap::new(),
        ctx: FnCtx::default(),
        next_id: 0,
        nglobals: 0,
        current_top: None,
        checks: Vec::new(),
    };
    // Pre-pass: service and exception declarations, and provisional types
    // for every top-level function (so chunks may name later functions).
    for d in defs {
        match &d.kind {
            DefKind::Svc { name, name_pos, ty } => {
                c.declare_svc(name, *name_pos, &ty.ty, ty.pos)?
            }
            DefKind::Exception { name } => {
                c.exns.insert(name.clone());
            }
            DefKind::Fun {
                name, params, ret, ..
            } => {
                if c.top.contains_key(name) {
                    return Err(TypeError::new(
                        d.pos,
                        format!("function `{name}` is defined twice at top level"),
                    ));
                }
                let ft = c.provisional(params, ret.as_ref())?;
                c.top.insert(name.clone(), TopState::Pending(ft));
            }
            DefKind::Val { .. } => {}
        }
    }
    let mut exports = HashMap::new();
    let mut init_items = Vec::new();
    for d in defs {
        match &d.kind {
            DefKind::Fun {
                name,
                params,
                ret,
                body,
            } => {
                let prov = match c.top.get(name) {
                    Some(TopState::Pending(ft)) => Some(ft.clone()),
                    _ => None,
                };
                c.current_top = Some(name.clone());
                let r = c.fun_def(name, params, ret.as_ref(), body, prov);
                c.current_top = None;
                let (idx, scheme, caps) = r?;
                c.resolve_checks()?;
                c.top.insert(name.clone(), TopState::Done(scheme.clone()));
                exports.insert(Arc::from(name.as_str()), (idx, scheme.clone()));
                c.scopes.push((
                    name.clone(),
                    Binding::Fun {
                        idx,
                        scheme,
                        captures: caps,
                    },
                ));
            }
            DefKind::Val { name, ty, body } => {
                let (ir, t) = c.expr(body)?;
                if let Some(te) = ty {
                    let want = c.annotation(&te.ty, &mut Vec::new(), te.pos)?;
                    c.unify_at(body.span(), &t, &want, || format!("value of `{name}`"))?;
                }
                c.resolve_checks()?;
                let slot = c.nglobals;
                c.nglobals += 1;
                init_items.push(Ir::SetGlobal(slot, Box::new(ir)));
                c.scopes
                    .push((name.clone(), Binding::Global { slot, ty: t }));
            }
            DefKind::Exception { .. } | DefKind::Svc { .. } => {}
        }
    }
    init_items.push(Ir::Const(Value::Unit));
    let init = FnCode {
        name: Arc::from("<init>"),
        nparams: 0,
        frame: c.ctx.max,
        body: Ir::Seq(init_items),
    };
    let checks = c.checks.into_iter().map(|k| (k.ty, k.name)).collect();
    Ok(Checked {
        fns: c.fns,
        init,
        nglobals: c.nglobals,
        exports,
        checks,
    })
}

/// The error for a routine of a package this node does not provide.
fn refused(name: &str, r: &crate::services::Refusal, pos: Pos) -> TypeError {
    TypeError::new(
        pos,
        format!(
            "`{name}` (PLAN package `{}`) is not provided by anode",
            r.package
        ),
    )
    .with_hint(r.reason.clone())
}

/// A type as the programmer reads it (type variables renamed `'a`, `'b`, ...).
fn pretty(s: &Subst, t: &Ty) -> String {
    match s.generalize(&SchemeBody::Value(t.clone()), &[]) {
        Ok(sc) => sc.to_string(),
        Err(_) => t.to_string(),
    }
}

/// The error for a failed unification of the expression at `span`.
fn unify_error(span: Span, e: UnifyError, s: &Subst, what: String) -> TypeError {
    let types = match &e {
        UnifyError::Mismatch(found, expected) => Some((pretty(s, expected), pretty(s, found))),
        _ => None,
    };
    let err = TypeError::spanned(span, unify_msg(e, s, what));
    match types {
        Some((expected, found)) => {
            let hint = mismatch_hint(&expected, &found);
            let err = err.with_types(expected, found);
            match hint {
                Some(h) => err.with_hint(h),
                None => err,
            }
        }
        None => err,
    }
}

/// A hint for common mismatches.
fn mismatch_hint(expected: &str, found: &str) -> Option<String> {
    Some(match (expected, found) {
        ("string", "int") => "convert with intToString(n) or toString(n)".to_string(),
        ("string", "char") => "a char is not a string: use implode([c]) or toString(c)".to_string(),
        ("string", "host") => "convert with hostToString(h)".to_string(),
        ("int", "string") => "convert with stringToInt(s)".to_string(),
        ("int", "char") => "convert with ord(c)".to_string(),
        ("char", "int") => "convert with chr(n)".to_string(),
        ("host", "host list") => {
            "thisHost() returns every address of the node: take one with hd(thisHost())".to_string()
        }
        ("bool", "int") => "PLAN has no truthiness: compare explicitly, e.g. n <> 0".to_string(),
        (e, f) if f.ends_with(" chunk") && !e.ends_with(" chunk") => {
            "a chunk runs where it is sent or with eval(c); it is not a value of its result type"
                .to_string()
        }
        _ => return None,
    })
}

fn unify_msg(e: UnifyError, s: &Subst, what: String) -> String {
    let pretty = |t: &Ty| pretty(s, t);
    match e {
        UnifyError::Mismatch(found, expected) => format!(
            "{what}: expected {} but found {}",
            pretty(&expected),
            pretty(&found)
        ),
        UnifyError::Occurs(a, b) => format!(
            "{what}: {} and {} would make an infinite type",
            pretty(&a),
            pretty(&b)
        ),
        UnifyError::TooDeep => format!("{what}: type is nested too deeply"),
    }
}

impl Checker<'_> {
    /// `ir`, a call of service `name` of `scheme` at `span` with result type `ret`, wrapped
    /// in a run-time check of its value if the scheme leaves the result type to the call
    /// site (and the service is not one of this crate's builtins, which are trusted).
    fn checked_call(
        &mut self,
        ir: Ir,
        name: &str,
        target: &SvcTarget,
        scheme: &Scheme,
        ret: &Ty,
        span: Span,
    ) -> Ir {
        if matches!(target, SvcTarget::Builtin(_)) || !scheme.free_result() {
            return ir;
        }
        let idx = u32::try_from(self.checks.len()).unwrap_or(u32::MAX);
        self.checks.push(ResultCheck {
            ty: ret.clone(),
            name: Arc::from(name),
            span,
            resolved: false,
        });
        Ir::Check(Box::new(ir), idx)
    }

    /// At the end of a top-level definition: the result types of its checked calls must be
    /// known by now (no type variable left).
    fn resolve_checks(&mut self) -> CResult<()> {
        for k in self.checks.iter_mut().filter(|k| !k.resolved) {
            let t = self
                .s
                .resolve(&k.ty)
                .map_err(|e| unify_error(k.span, e, &self.s, format!("result of `{}`", k.name)))?;
            let mut vars = Vec::new();
            self.s
                .free_vars(&t, &mut vars)
                .map_err(|e| unify_error(k.span, e, &self.s, format!("result of `{}`", k.name)))?;
            if !vars.is_empty() {
                return Err(TypeError::spanned(
                    k.span,
                    format!(
                        "the type of the value `{}` returns must be known where it is called",
                        k.name
                    ),
                )
                .with_hint(format!(
                    "`{}` can return a value of any type; use it where the type is fixed or annotate it, e.g. `val v : int = {}(...)`",
                    k.name, k.name
                )));
            }
            k.ty = t;
            k.resolved = true;
        }
        Ok(())
    }

    fn unify_at(
        &mut self,
        span: Span,
        found: &Ty,
        expected: &Ty,
        what: impl FnOnce() -> String,
    ) -> CResult<()> {
        self.s
            .unify(found, expected)
            .map_err(|e| unify_error(span, e, &self.s, what()))
    }

    fn annotation(&mut self, te: &TypeExpr, vars: &mut Vec<(String, Ty)>, pos: Pos) -> CResult<Ty> {
        lower_type(te, &mut self.s, vars).map_err(|m| TypeError::new(pos, m))
    }

    fn provisional(&mut self, params: &[Param], ret: Option<&TypeAnn>) -> CResult<FunTy> {
        let mut vars = Vec::new();
        let mut ps = Vec::new();
        for p in params {
            ps.push(match &p.ty {
                Some(te) => self.annotation(&te.ty, &mut vars, te.pos)?,
                None => self.s.fresh(),
            });
        }
        let ret = match ret {
            Some(te) => self.annotation(&te.ty, &mut vars, te.pos)?,
            None => self.s.fresh(),
        };
        Ok(FunTy { params: ps, ret })
    }

    fn declare_svc(&mut self, name: &str, name_pos: Pos, te: &TypeExpr, pos: Pos) -> CResult<()> {
        if let Some(r) = self.reg.refusal(name) {
            return Err(refused(name, r, name_pos));
        }
        let mut vars = Vec::new();
        let body = lower_sig(te, &mut self.s, &mut vars).map_err(|m| TypeError::new(pos, m))?;
        let declared = self
            .s
            .generalize(&body, &[])
            .map_err(|e| TypeError::new(pos, format!("{e:?}")))?;
        let target = match self.reg.lookup(name) {
            Some(entry) => {
                // The declaration must agree with what the node provides.
                let a = self.s.instantiate(&declared);
                let b = self.s.instantiate(&entry.scheme);
                let ok = match (&a, &b) {
                    (SchemeBody::Fun(x), SchemeBody::Fun(y)) => {
                        x.params.len() == y.params.len()
                            && x.params
                                .iter()
                                .zip(&y.params)
                                .all(|(p, q)| self.s.unify(p, q).is_ok())
                            && self.s.unify(&x.ret, &y.ret).is_ok()
                    }
                    (SchemeBody::Value(x), SchemeBody::Value(y)) => self.s.unify(x, y).is_ok(),
                    _ => false,
                };
                if !ok {
                    return Err(TypeError::new(
                        pos,
                        format!(
                            "service `{name}` is declared as {declared} but this node provides it as {}",
                            entry.scheme
                        ),
                    ));
                }
                entry.target.clone()
            }
            None => SvcTarget::Missing,
        };
        if let Some((prev, _)) = self.svcs.get(name)
            && *prev != declared
        {
            return Err(TypeError::new(
                pos,
                format!(
                    "service `{name}` is declared twice with different types ({prev} and {declared})"
                ),
            ));
        }
        self.svcs.insert(name.to_string(), (declared, target));
        Ok(())
    }

    fn service(&self, name: &str) -> Option<(Scheme, SvcTarget)> {
        if let Some((s, t)) = self.svcs.get(name) {
            return Some((s.clone(), t.clone()));
        }
        self.reg
            .lookup(name)
            .map(|e| (e.scheme.clone(), e.target.clone()))
    }

    fn is_exn(&self, name: &str) -> bool {
        self.exns.contains(name) || self.reg.is_exception(name)
    }

    fn lookup(&self, name: &str) -> Option<&Binding> {
        self.scopes
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b)
    }

    fn slot_of(&self, id: u32, pos: Pos) -> CResult<u32> {
        self.ctx
            .slots
            .get(&id)
            .copied()
            .ok_or_else(|| TypeError::new(pos, "internal error: variable slot not found"))
    }

    fn fresh_id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    /// Free type variables that must not be generalized: those of every
    /// visible variable and of pending top-level functions.
    fn env_vars(&self) -> CResult<Vec<u32>> {
        let mut out = Vec::new();
        let err = |_| TypeError::new(Pos::default(), "type is nested too deeply");
        for (_, b) in &self.scopes {
            if let Binding::Local { ty, .. } | Binding::Global { ty, .. } = b {
                self.s.free_vars(ty, &mut out).map_err(err)?;
            }
        }
        for (name, st) in &self.top {
            if self.current_top.as_deref() == Some(name.as_str()) {
                continue;
            }
            if let TopState::Pending(ft) = st {
                for p in &ft.params {
                    self.s.free_vars(p, &mut out).map_err(err)?;
                }
                self.s.free_vars(&ft.ret, &mut out).map_err(err)?;
            }
        }
        Ok(out)
    }

    fn fun_def(
        &mut self,
        name: &str,
        params: &[Param],
        ret: Option<&TypeAnn>,
        body: &Expr,
        provisional: Option<FunTy>,
    ) -> CResult<(u32, Scheme, Vec<u32>)> {
        for (i, p) in params.iter().enumerate() {
            if params.iter().take(i).any(|q| q.name == p.name) {
                return Err(TypeError::new(
                    p.pos,
                    format!("parameter `{}` of `{name}` is declared twice", p.name),
                ));
            }
        }
        let ft = match provisional {
            Some(ft) => ft,
            None => self.provisional(params, ret)?,
        };
        // Captures: every visible local variable (lambda lifting).
        let mut seen: HashSet<&str> = HashSet::new();
        let mut caps = Vec::new();
        for (n, b) in self.scopes.iter().rev() {
            if seen.insert(n.as_str())
                && let Binding::Local { id, .. } = b
            {
                caps.push(*id);
            }
        }
        let saved_ctx = std::mem::take(&mut self.ctx);
        let saved_scopes = self.scopes.len();
        let mut param_ids = Vec::new();
        for (p, t) in params.iter().zip(&ft.params) {
            let id = self.fresh_id();
            self.ctx.alloc(id);
            param_ids.push((p.name.clone(), id, t.clone()));
        }
        for cap in &caps {
            self.ctx.alloc(*cap);
        }
        for (n, id, t) in param_ids {
            self.scopes.push((n, Binding::Local { id, ty: t }));
        }
        let r = self.expr(body);
        self.scopes.truncate(saved_scopes);
        let frame = self.ctx.max;
        self.ctx = saved_ctx;
        let (body_ir, body_ty) = r?;
        self.unify_at(body.span(), &body_ty, &ft.ret, || {
            format!("result of function `{name}`")
        })?;
        let keep = self.env_vars()?;
        let scheme = self
            .s
            .generalize(&SchemeBody::Fun(ft), &keep)
            .map_err(|e| {
                TypeError::new(
                    body.pos,
                    unify_msg(e, &self.s, format!("function `{name}`")),
                )
            })?;
        let idx = u32::try_from(self.fns.len()).unwrap_or(u32::MAX);
        self.fns.push(FnCode {
            name: Arc::from(name),
            nparams: u32::try_from(params.len() + caps.len()).unwrap_or(u32::MAX),
            frame,
            body: body_ir,
        });
        Ok((idx, scheme, caps))
    }

    fn fun_of(&mut self, scheme: &Scheme) -> Option<FunTy> {
        match self.s.instantiate(scheme) {
            SchemeBody::Fun(f) => Some(f),
            SchemeBody::Value(_) => None,
        }
    }

    fn check_args(
        &mut self,
        pos: Pos,
        what: &str,
        params: &[Ty],
        args: &[Expr],
    ) -> CResult<Vec<Ir>> {
        if params.len() != args.len() {
            let e = TypeError::new(
                pos,
                format!(
                    "{what} expects {} argument{} but is given {}",
                    params.len(),
                    if params.len() == 1 { "" } else { "s" },
                    args.len()
                ),
            );
            return Err(match other_version_form(what, args.len()) {
                Some(h) => e.with_hint(h),
                None => e,
            });
        }
        let mut out = Vec::with_capacity(args.len());
        for (i, (p, a)) in params.iter().zip(args).enumerate() {
            let (ir, t) = self.expr(a)?;
            self.unify_at(a.span(), &t, p, || format!("argument {} of {what}", i + 1))?;
            out.push(ir);
        }
        Ok(out)
    }

    fn capture_irs(&self, caps: &[u32], pos: Pos) -> CResult<Vec<Ir>> {
        caps.iter()
            .map(|id| self.slot_of(*id, pos).map(Ir::Local))
            .collect()
    }

    fn svc_ref(name: &str, target: SvcTarget) -> SvcRef {
        SvcRef {
            name: Arc::from(name),
            target,
        }
    }

    fn not_defined(&self, name: &str, pos: Pos) -> TypeError {
        if let Some(r) = self.reg.refusal(name) {
            return refused(name, r, pos);
        }
        if self.top.contains_key(name) {
            TypeError::new(
                pos,
                format!(
                    "function `{name}` is not defined at this point: PLAN functions may only call functions defined before them (no recursion); to run `{name}` on another node use a chunk |{name}|(...)"
                ),
            )
        } else {
            TypeError::new(pos, format!("unknown function or service `{name}`")).with_hint(format!(
                "a service this node provides is declared with `svc {name} : type`"
            ))
        }
    }

    /// Resolves the function named in a fold.
    fn callee(&mut self, name: &str, pos: Pos) -> CResult<(Callee, FunTy)> {
        match self.lookup(name).cloned() {
            Some(Binding::Fun {
                idx,
                scheme,
                captures,
            }) => {
                let ft = self
                    .fun_of(&scheme)
                    .ok_or_else(|| TypeError::new(pos, "internal error: function scheme"))?;
                Ok((Callee::Fn(idx, self.capture_irs(&captures, pos)?), ft))
            }
            Some(_) => Err(TypeError::new(
                pos,
                format!(
                    "`{name}` is a variable; the first argument of a fold must name a function"
                ),
            )),
            None => match self.service(name) {
                Some((scheme, target)) => match self.fun_of(&scheme) {
                    Some(ft) => Ok((Callee::Svc(Self::svc_ref(name, target)), ft)),
                    None => Err(TypeError::new(
                        pos,
                        format!("service `{name}` is a value, not a function"),
                    )),
                },
                None => Err(self.not_defined(name, pos)),
            },
        }
    }

    fn route_fun(&mut self, e: &Expr, prim: NetPrim) -> CResult<Arc<str>> {
        let ExprKind::Var(name) = &e.kind else {
            return Err(TypeError::new(
                e.pos,
                format!(
                    "the routing function of {} must be the name of a routing service such as defaultRoute",
                    prim.name()
                ),
            ));
        };
        let Some((scheme, _)) = self.service(name) else {
            return Err(TypeError::new(
                e.pos,
                format!(
                    "routing function `{name}` of {} must be a service routine of type host -> host * dev (routers look it up by name)",
                    prim.name()
                ),
            ));
        };
        let Some(ft) = self.fun_of(&scheme) else {
            return Err(TypeError::new(e.pos, format!("`{name}` is not a function")));
        };
        let [p] = ft.params.as_slice() else {
            return Err(TypeError::new(
                e.pos,
                format!("routing function `{name}` must take exactly one host argument"),
            ));
        };
        let p = p.clone();
        self.unify_at(e.span(), &p, &Ty::HOST, || {
            format!("parameter of routing function `{name}`")
        })?;
        let want = Ty::Tuple(vec![Ty::HOST, Ty::DEV]);
        self.unify_at(e.span(), &ft.ret, &want, || {
            format!("result of routing function `{name}`")
        })?;
        Ok(Arc::from(name.as_str()))
    }

    fn typed(&mut self, e: &Expr, want: &Ty, what: impl FnOnce() -> String) -> CResult<Ir> {
        let (ir, t) = self.expr(e)?;
        self.unify_at(e.span(), &t, want, what)?;
        Ok(ir)
    }

    #[allow(clippy::too_many_lines)]
    fn expr(&mut self, e: &Expr) -> CResult<(Ir, Ty)> {
        let pos = e.pos;
        Ok(match &e.kind {
            ExprKind::Unit => (Ir::Const(Value::Unit), Ty::UNIT),
            ExprKind::Bool(b) => (Ir::Const(Value::Bool(*b)), Ty::BOOL),
            ExprKind::Int(i) => (Ir::Const(Value::Int(*i)), Ty::INT),
            ExprKind::Char(c) => (Ir::Const(Value::Char(*c)), Ty::CHAR),
            ExprKind::Str(s) => (Ir::Const(Value::Str(Arc::from(s.as_slice()))), Ty::STRING),
            ExprKind::Host(h) => (Ir::Const(Value::Host(*h)), Ty::HOST),
            ExprKind::List(items) => self.list_expr(items)?,
            ExprKind::Var(name) => self.var_expr(name, pos)?,
            ExprKind::Call(name, args) => self.call_expr(name, args, pos)?,
            ExprKind::Tuple(items) => {
                let mut irs = Vec::new();
                let mut tys = Vec::new();
                for it in items {
                    let (ir, t) = self.expr(it)?;
                    irs.push(ir);
                    tys.push(t);
                }
                (Ir::Tuple(irs), Ty::Tuple(tys))
            }
            ExprKind::Seq(items) => {
                let mut irs = Vec::new();
                let mut last = Ty::UNIT;
                for it in items {
                    let (ir, t) = self.expr(it)?;
                    irs.push(ir);
                    last = t;
                }
                (Ir::Seq(irs), last)
            }
            ExprKind::If(c, a, b) => {
                let ci = self.typed(c, &Ty::BOOL, || "condition of `if`".to_string())?;
                let (ai, at) = self.expr(a)?;
                let bi = self.typed(b, &at, || {
                    "`else` branch (both branches of `if` must have the same type)".to_string()
                })?;
                (Ir::If(Box::new(ci), Box::new(ai), Box::new(bi)), at)
            }
            ExprKind::Raise(name) => self.raise_expr(name)?,
            ExprKind::Try(body, name, handler) => self.try_expr(body, name, handler)?,
            ExprKind::Let(defs, body) => self.let_expr(defs, body)?,
            ExprKind::Chunk(name, args) => self.chunk_expr(name, args, pos)?,
            ExprKind::Unop(op, a) => self.unop(*op, a, pos)?,
            ExprKind::Binop(op, a, b) => self.binop(*op, a, b)?,
            ExprKind::Net(prim, args) => self.net(*prim, args, pos)?,
            ExprKind::Fold { left, func, a, b } => self.fold_expr(*left, func, (a, b))?,
        })
    }

    /// `raise E` for a declared exception `E`, or `raise e` for a variable `e : exn` (such
    /// as the one a catch-all handler binds).
    fn raise_expr(&mut self, name: &Name) -> CResult<(Ir, Ty)> {
        let n = name.name.as_str();
        if self.is_exn(n) {
            return Ok((Ir::Raise(Arc::from(n)), self.s.fresh()));
        }
        if let Some(Binding::Local { .. } | Binding::Global { .. }) = self.lookup(n) {
            let (ir, t) = self.var_expr(n, name.pos)?;
            self.unify_at(Span::at(name.pos), &t, &Ty::Base(BaseType::Exn), || {
                format!("`raise {n}` (a variable raised must hold an exception)")
            })?;
            return Ok((Ir::RaiseVal(Box::new(ir)), self.s.fresh()));
        }
        Err(TypeError::new(name.pos, format!("unknown exception `{n}`"))
            .with_hint(format!("declare it with `exception {n}`")))
    }

    /// `try body handle E => handler`: `E` a declared exception catches that exception; any
    /// other name is a variable of type `exn` bound to whatever exception `body` raised (the
    /// catch-all handler of the PLAN guide).
    fn try_expr(&mut self, body: &Expr, name: &Name, handler: &Expr) -> CResult<(Ir, Ty)> {
        let (bi, bt) = self.expr(body)?;
        let what = || "handler of `try` (it must have the same type as the body)".to_string();
        if self.is_exn(&name.name) {
            let hi = self.typed(handler, &bt, what)?;
            let catch = Catch::Exn(Arc::from(name.name.as_str()));
            return Ok((Ir::Try(Box::new(bi), catch, Box::new(hi)), bt));
        }
        let saved_scopes = self.scopes.len();
        let saved_next = self.ctx.next;
        let id = self.fresh_id();
        let slot = self.ctx.alloc(id);
        self.scopes.push((
            name.name.clone(),
            Binding::Local {
                id,
                ty: Ty::Base(BaseType::Exn),
            },
        ));
        let hi = self.typed(handler, &bt, what);
        self.scopes.truncate(saved_scopes);
        self.ctx.next = saved_next;
        Ok((Ir::Try(Box::new(bi), Catch::Any(slot), Box::new(hi?)), bt))
    }

    /// A list literal: every element of one type.
    fn list_expr(&mut self, items: &[Expr]) -> CResult<(Ir, Ty)> {
        let elem = self.s.fresh();
        let mut irs = Vec::with_capacity(items.len());
        for (i, it) in items.iter().enumerate() {
            irs.push(self.typed(it, &elem, || format!("list element {}", i + 1))?);
        }
        Ok(if irs.is_empty() {
            (
                Ir::Const(Value::List(crate::value::List::nil())),
                Ty::list(elem),
            )
        } else {
            (Ir::List(irs), Ty::list(elem))
        })
    }

    /// A variable: a local, a global, a service value or an exception name.
    fn var_expr(&mut self, name: &str, pos: Pos) -> CResult<(Ir, Ty)> {
        Ok(match self.lookup(name).cloned() {
            Some(Binding::Local { id, ty }) => (Ir::Local(self.slot_of(id, pos)?), ty),
            Some(Binding::Global { slot, ty }) => (Ir::Global(slot), ty),
            Some(Binding::Fun { .. }) => {
                return Err(TypeError::new(
                    pos,
                    format!(
                        "`{name}` is a function; call it as {name}(...) (PLAN functions are not values)"
                    ),
                ));
            }
            None => {
                if let Some((scheme, target)) = self.service(name) {
                    match self.s.instantiate(&scheme) {
                        SchemeBody::Value(t) => {
                            let call = Ir::CallSvc(Self::svc_ref(name, target.clone()), Vec::new());
                            let ir =
                                self.checked_call(call, name, &target, &scheme, &t, Span::at(pos));
                            (ir, t)
                        }
                        SchemeBody::Fun(ft) => {
                            return Err(TypeError::new(
                                pos,
                                format!(
                                    "`{name}` is a service routine of type {ft}; call it as {name}(...)"
                                ),
                            ));
                        }
                    }
                } else if self.is_exn(name) {
                    (
                        Ir::Const(Value::Exn(Arc::from(name))),
                        Ty::Base(BaseType::Exn),
                    )
                } else if self.top.contains_key(name) {
                    return Err(self.not_defined(name, pos));
                } else {
                    return Err(TypeError::new(pos, format!("unbound variable `{name}`")));
                }
            }
        })
    }

    /// A call of a function or a service routine.
    fn call_expr(&mut self, name: &str, args: &[Expr], pos: Pos) -> CResult<(Ir, Ty)> {
        Ok(match self.lookup(name).cloned() {
            Some(Binding::Fun {
                idx,
                scheme,
                captures,
            }) => {
                let ft = self
                    .fun_of(&scheme)
                    .ok_or_else(|| TypeError::new(pos, "internal error: function scheme"))?;
                let mut irs =
                    self.check_args(pos, &format!("function `{name}`"), &ft.params, args)?;
                irs.extend(self.capture_irs(&captures, pos)?);
                (Ir::CallFn(idx, irs), ft.ret)
            }
            Some(Binding::Local { ty, .. } | Binding::Global { ty, .. }) => {
                let t = self.s.resolve(&ty).unwrap_or(ty);
                return Err(TypeError::new(
                    pos,
                    format!("`{name}` is a variable of type {t}, not a function"),
                ));
            }
            None => match self.service(name) {
                Some((scheme, target)) => match self.fun_of(&scheme) {
                    Some(ft) => {
                        let irs =
                            self.check_args(pos, &format!("service `{name}`"), &ft.params, args)?;
                        let call = Ir::CallSvc(Self::svc_ref(name, target.clone()), irs);
                        let span = Span::new(pos, args.last().map_or(pos, |a| a.end));
                        let ir = self.checked_call(call, name, &target, &scheme, &ft.ret, span);
                        (ir, ft.ret)
                    }
                    None => {
                        return Err(TypeError::new(
                            pos,
                            format!("service `{name}` is a value; use it without parentheses"),
                        ));
                    }
                },
                None => return Err(self.not_defined(name, pos)),
            },
        })
    }

    /// `foldl(f, init, list)` / `foldr(f, list, init)`.
    fn fold_expr(&mut self, left: bool, func: &Name, (a, b): (&Expr, &Expr)) -> CResult<(Ir, Ty)> {
        let (pos, fname) = (func.pos, func.name.as_str());
        let (callee, ft) = self.callee(fname, pos)?;
        let which = if left { "foldl" } else { "foldr" };
        let [p0, p1] = ft.params.as_slice() else {
            return Err(TypeError::new(
                pos,
                format!(
                    "the function `{fname}` given to {which} must take 2 arguments ({}), but it takes {}",
                    if left {
                        "accumulator, element"
                    } else {
                        "element, accumulator"
                    },
                    ft.params.len()
                ),
            ));
        };
        // The folded function fixes the accumulator and element types; the arguments are
        // checked against them, so a mismatch is reported where the argument is.
        let (acc, elem) = if left {
            (p0.clone(), p1.clone())
        } else {
            (p1.clone(), p0.clone())
        };
        self.unify_at(Span::at(pos), &ft.ret, &acc, || {
            format!("result of `{fname}` in {which} (it must have the accumulator's type)")
        })?;
        let (ai, at) = self.expr(a)?;
        let (bi, bt) = self.expr(b)?;
        let ((init, init_t), (list, list_t)) = if left {
            ((a, &at), (b, &bt))
        } else {
            ((b, &bt), (a, &at))
        };
        let (init_t, list_t) = (init_t.clone(), list_t.clone());
        self.unify_at(init.span(), &init_t, &acc, || {
            format!("initial value of {which} (the accumulator of `{fname}`)")
        })?;
        self.unify_at(list.span(), &list_t, &Ty::list(elem), || {
            format!("list argument of {which} (a list of the elements `{fname}` takes)")
        })?;
        Ok((
            Ir::Fold {
                left,
                callee,
                a: Box::new(ai),
                b: Box::new(bi),
            },
            acc,
        ))
    }

    fn let_expr(&mut self, defs: &[Def], body: &Expr) -> CResult<(Ir, Ty)> {
        let saved_scopes = self.scopes.len();
        let saved_next = self.ctx.next;
        let r = self.let_inner(defs, body);
        self.scopes.truncate(saved_scopes);
        self.ctx.next = saved_next;
        r
    }

    fn let_inner(&mut self, defs: &[Def], body: &Expr) -> CResult<(Ir, Ty)> {
        let mut items = Vec::new();
        for d in defs {
            match &d.kind {
                DefKind::Val { name, ty, body } => {
                    let (ir, t) = self.expr(body)?;
                    if let Some(te) = ty {
                        let want = self.annotation(&te.ty, &mut Vec::new(), te.pos)?;
                        self.unify_at(body.span(), &t, &want, || format!("value of `{name}`"))?;
                    }
                    let id = self.fresh_id();
                    let slot = self.ctx.alloc(id);
                    items.push((slot, ir));
                    self.scopes
                        .push((name.clone(), Binding::Local { id, ty: t }));
                }
                DefKind::Fun {
                    name,
                    params,
                    ret,
                    body,
                } => {
                    let (idx, scheme, captures) =
                        self.fun_def(name, params, ret.as_ref(), body, None)?;
                    self.scopes.push((
                        name.clone(),
                        Binding::Fun {
                            idx,
                            scheme,
                            captures,
                        },
                    ));
                }
                DefKind::Exception { name } => {
                    self.exns.insert(name.clone());
                }
                DefKind::Svc { name, name_pos, ty } => {
                    self.declare_svc(name, *name_pos, &ty.ty, ty.pos)?;
                }
            }
        }
        let (bi, bt) = self.expr(body)?;
        Ok((Ir::Let(items, Box::new(bi)), bt))
    }

    fn chunk_expr(&mut self, chunk: &Name, args: &[Expr], pos: Pos) -> CResult<(Ir, Ty)> {
        let (name, name_pos) = (chunk.name.as_str(), chunk.pos);
        if let Some(st) = self.top.get(name).cloned() {
            let ft = match st {
                TopState::Pending(ft) => ft,
                TopState::Done(s) => self
                    .fun_of(&s)
                    .ok_or_else(|| TypeError::new(pos, "internal error: function scheme"))?,
            };
            let irs = self.check_args(pos, &format!("chunk |{name}|"), &ft.params, args)?;
            return Ok((
                Ir::Chunk(ChunkTarget::Fn(Arc::from(name)), irs),
                Ty::chunk(ft.ret),
            ));
        }
        if let Some(Binding::Fun { .. }) = self.lookup(name) {
            return Err(TypeError::new(
                name_pos,
                format!(
                    "chunk |{name}| names a local function; chunks may only name top-level functions or services"
                ),
            ));
        }
        match self.service(name) {
            Some((scheme, target)) => {
                if !matches!(target, SvcTarget::Builtin(_)) && scheme.free_result() {
                    return Err(TypeError::new(
                        name_pos,
                        format!(
                            "chunk |{name}| names a service whose result type is fixed only where it is called ({scheme})"
                        ),
                    )
                    .with_hint(format!("call {name}(...) directly, where its result type is known")));
                }
                let Some(ft) = self.fun_of(&scheme) else {
                    return Err(TypeError::new(
                        name_pos,
                        format!("service `{name}` is not a function"),
                    ));
                };
                let irs = self.check_args(pos, &format!("chunk |{name}|"), &ft.params, args)?;
                Ok((
                    Ir::Chunk(ChunkTarget::Svc(Arc::from(name)), irs),
                    Ty::chunk(ft.ret),
                ))
            }
            None => Err(TypeError::new(
                name_pos,
                format!("chunk |{name}| names no top-level function or service"),
            )),
        }
    }

    fn unop(&mut self, op: UnOp, a: &Expr, pos: Pos) -> CResult<(Ir, Ty)> {
        let (ai, at) = self.expr(a)?;
        let want = |c: &mut Self, arg: Ty, res: Ty, name: &str| -> CResult<Ty> {
            c.unify_at(a.span(), &at, &arg, || format!("operand of `{name}`"))?;
            Ok(res)
        };
        let res = match op {
            UnOp::Neg => want(self, Ty::INT, Ty::INT, "~")?,
            UnOp::Noti => want(self, Ty::INT, Ty::INT, "noti")?,
            UnOp::Not => want(self, Ty::BOOL, Ty::BOOL, "not")?,
            UnOp::Ord => want(self, Ty::CHAR, Ty::INT, "ord")?,
            UnOp::Chr => want(self, Ty::INT, Ty::CHAR, "chr")?,
            UnOp::Explode => want(self, Ty::STRING, Ty::list(Ty::CHAR), "explode")?,
            UnOp::Implode => want(self, Ty::list(Ty::CHAR), Ty::STRING, "implode")?,
            UnOp::Hd => {
                let el = self.s.fresh();
                want(self, Ty::list(el.clone()), el, "hd")?
            }
            UnOp::Tl => {
                let el = self.s.fresh();
                want(self, Ty::list(el.clone()), Ty::list(el), "tl")?
            }
            UnOp::Fst | UnOp::Snd | UnOp::Nth(_) => {
                let n = match op {
                    UnOp::Fst => 1,
                    UnOp::Snd => 2,
                    UnOp::Nth(n) => n,
                    _ => 1,
                };
                let name = match op {
                    UnOp::Fst => "fst".to_string(),
                    UnOp::Snd => "snd".to_string(),
                    _ => format!("#{n}"),
                };
                match self.s.shallow(&at) {
                    Ty::Tuple(ts) => match (n as usize).checked_sub(1).and_then(|i| ts.get(i)) {
                        Some(t) => t.clone(),
                        _ => {
                            return Err(TypeError::new(
                                pos,
                                format!(
                                    "`{name}` needs a tuple with at least {n} components, but the operand has {}",
                                    ts.len()
                                ),
                            ));
                        }
                    },
                    Ty::Var(_) if n <= 2 => {
                        let x = self.s.fresh();
                        let y = self.s.fresh();
                        want(
                            self,
                            Ty::Tuple(vec![x.clone(), y.clone()]),
                            if n == 1 { x } else { y },
                            &name,
                        )?
                    }
                    Ty::Var(_) => {
                        return Err(TypeError::new(
                            pos,
                            format!(
                                "cannot tell which tuple type `{name}` is applied to here; add a type annotation to the variable (e.g. x : int * int * int)"
                            ),
                        ));
                    }
                    other => {
                        let t = self.s.resolve(&other).unwrap_or(other);
                        return Err(TypeError::new(
                            pos,
                            format!("`{name}` expects a tuple but found {t}"),
                        ));
                    }
                }
            }
        };
        Ok((Ir::Unop(op, Box::new(ai)), res))
    }

    fn binop(&mut self, op: BinOp, a: &Expr, b: &Expr) -> CResult<(Ir, Ty)> {
        let sym = op.symbol();
        let (ai, at) = self.expr(a)?;
        let (bi, bt) = self.expr(b)?;
        let res = match op {
            BinOp::Div
            | BinOp::Mod
            | BinOp::Mul
            | BinOp::Add
            | BinOp::Sub
            | BinOp::Shl
            | BinOp::Shr
            | BinOp::Xori
            | BinOp::Andi
            | BinOp::Ori => {
                self.unify_at(a.span(), &at, &Ty::INT, || {
                    format!("left operand of `{sym}`")
                })?;
                self.unify_at(b.span(), &bt, &Ty::INT, || {
                    format!("right operand of `{sym}`")
                })?;
                Ty::INT
            }
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                self.unify_at(a.span(), &at, &Ty::INT, || {
                    format!("left operand of `{sym}`")
                })?;
                self.unify_at(b.span(), &bt, &Ty::INT, || {
                    format!("right operand of `{sym}`")
                })?;
                Ty::BOOL
            }
            BinOp::And | BinOp::Or => {
                self.unify_at(a.span(), &at, &Ty::BOOL, || {
                    format!("left operand of `{sym}`")
                })?;
                self.unify_at(b.span(), &bt, &Ty::BOOL, || {
                    format!("right operand of `{sym}`")
                })?;
                Ty::BOOL
            }
            BinOp::Eq | BinOp::Ne => {
                self.unify_at(b.span(), &bt, &at, || {
                    format!("right operand of `{sym}` (both sides must have the same type)")
                })?;
                Ty::BOOL
            }
            BinOp::Cons => {
                self.unify_at(b.span(), &bt, &Ty::list(at.clone()), || {
                    "right operand of `::` (a list of the left operand's type)".to_string()
                })?;
                bt
            }
            BinOp::Concat => {
                self.unify_at(a.span(), &at, &Ty::STRING, || {
                    "left operand of `^`".to_string()
                })?;
                self.unify_at(b.span(), &bt, &Ty::STRING, || {
                    "right operand of `^`".to_string()
                })?;
                Ty::STRING
            }
        };
        Ok((Ir::Binop(op, Box::new(ai), Box::new(bi)), res))
    }

    fn net(&mut self, prim: NetPrim, args: &[Expr], pos: Pos) -> CResult<(Ir, Ty)> {
        let name = prim.name();
        let arity_ok = match prim {
            NetPrim::OnRemote => args.len() == 4,
            NetPrim::OnNeighbor => args.len() == 3 || args.len() == 4,
            NetPrim::RetransOnRemote => args.len() == 6,
        };
        if !arity_ok {
            let want = match prim {
                NetPrim::OnRemote => "4 arguments (chunk, host, resource bound, routing function)",
                NetPrim::OnNeighbor => {
                    "3 arguments (chunk, host, resource bound) and optionally a dev"
                }
                NetPrim::RetransOnRemote => {
                    "6 arguments (chunk, host, resource bound, routing function, retries, timeout)"
                }
            };
            return Err(TypeError::new(
                pos,
                format!("{name} takes {want}, but is given {}", args.len()),
            ));
        }
        let mut irs = Vec::new();
        let mut route = None;
        for (i, a) in args.iter().enumerate() {
            let want = match (prim, i) {
                (_, 0) => Ty::chunk(self.s.fresh()),
                (_, 1) => Ty::HOST,
                (_, 2) => Ty::INT,
                (NetPrim::OnNeighbor, 3) => Ty::DEV,
                (_, 3) => {
                    route = Some(self.route_fun(a, prim)?);
                    continue;
                }
                _ => Ty::INT,
            };
            let what = match i {
                0 => "chunk",
                1 => "destination host",
                2 => "resource bound",
                3 => "device",
                4 => "retry count",
                _ => "timeout",
            };
            irs.push(self.typed(a, &want, || format!("{what} argument of {name}"))?);
        }
        Ok((Ir::Net(prim, irs, route), Ty::UNIT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse_program;

    fn check(src: &str) -> CResult<Checked> {
        let defs = parse_program(src).map_err(|e| TypeError::new(e.pos, e.msg))?;
        check_program(&defs, &ServiceRegistry::with_core())
    }

    fn scheme(src: &str, f: &str) -> String {
        let c = check(src).unwrap();
        c.exports.get(f).unwrap().1.to_string()
    }

    #[test]
    fn inference() {
        assert_eq!(scheme("fun f(x, y) = x + y", "f"), "(int, int) -> int");
        assert_eq!(scheme("fun id(x) = x", "id"), "'a -> 'a");
        assert_eq!(scheme("fun p(x) = (x, [x])", "p"), "'a -> 'a * 'a list");
        assert_eq!(
            scheme("fun add(a, x) = a + x fun sum(l) = foldl(add, 0, l)", "sum"),
            "int list -> int"
        );
        assert_eq!(
            scheme(
                "fun k(x, acc) = x :: acc fun copy(l) = foldr(k, l, [])",
                "copy"
            ),
            "'a list -> 'a list"
        );
        assert_eq!(
            scheme("fun f(x) = let fun g(y) = (x, y) in g(1) end", "f"),
            "'a -> 'a * int"
        );
        assert_eq!(
            scheme("fun c(x) = let val k = |c|(x) in 1 end", "c"),
            "'a -> int"
        );
    }

    #[test]
    fn errors() {
        let e = check("fun f() = 1 + \"a\"").unwrap_err();
        assert_eq!(e.pos, Pos { line: 1, col: 15 });
        assert!(e.msg.contains("expected int but found string"), "{}", e.msg);
        let e = check("fun f(x) = f(x)").unwrap_err();
        assert!(e.msg.contains("no recursion"), "{}", e.msg);
        let e = check("fun f() = g() fun g() = 1").unwrap_err();
        assert!(e.msg.contains("defined before"), "{}", e.msg);
        let e = check("fun f() = if 1 then 2 else 3").unwrap_err();
        assert!(
            e.msg
                .contains("condition of `if`: expected bool but found int"),
            "{}",
            e.msg
        );
        let e = check("fun f() = raise Nope").unwrap_err();
        assert!(e.msg.contains("unknown exception"), "{}", e.msg);
        let e = check("svc getRB : void -> string\nfun f() = 1").unwrap_err();
        assert!(
            e.msg.contains("this node provides it as void -> int"),
            "{}",
            e.msg
        );
        let e = check("fun f(l) = #3 l").unwrap_err();
        assert!(e.msg.contains("annotation"), "{}", e.msg);
        let e = check("fun f(x) = x\nfun g() = f(1, 2)").unwrap_err();
        assert!(
            e.msg.contains("expects 1 argument but is given 2"),
            "{}",
            e.msg
        );
        let e = check("fun f(h : host) = OnRemote(|f|(h), h, 1, print)").unwrap_err();
        assert!(e.msg.contains("routing function"), "{}", e.msg);
    }
}
