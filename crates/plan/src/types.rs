//! Types, type schemes and unification for PLAN's Hindley–Milner checker.
//!
//! Invariants: type variables are indices into a [`Subst`]; a [`Scheme`]
//! quantifies its variables as [`Ty::Gen`] indices `0..n`, which never
//! appear in types under inference. All recursive operations are bounded by
//! [`MAX_TYPE_DEPTH`] and report an error instead of overflowing the stack.

use crate::ast::BaseType;
use std::fmt;

/// Maximum depth of a type term.
pub const MAX_TYPE_DEPTH: usize = 64;

/// A (mono)type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    /// Unification variable.
    Var(u32),
    /// Quantified variable of a [`Scheme`].
    Gen(u32),
    /// Base type.
    Base(BaseType),
    /// `t list`
    List(Box<Ty>),
    /// `t chunk`
    Chunk(Box<Ty>),
    /// Tuple of two or more components.
    Tuple(Vec<Ty>),
}

impl Ty {
    /// Shorthand for a base type.
    pub const fn base(b: BaseType) -> Ty {
        Ty::Base(b)
    }
    /// `int`
    pub const INT: Ty = Ty::Base(BaseType::Int);
    /// `bool`
    pub const BOOL: Ty = Ty::Base(BaseType::Bool);
    /// `unit`
    pub const UNIT: Ty = Ty::Base(BaseType::Unit);
    /// `string`
    pub const STRING: Ty = Ty::Base(BaseType::String);
    /// `char`
    pub const CHAR: Ty = Ty::Base(BaseType::Char);
    /// `host`
    pub const HOST: Ty = Ty::Base(BaseType::Host);
    /// `dev`
    pub const DEV: Ty = Ty::Base(BaseType::Dev);
    /// `blob`
    pub const BLOB: Ty = Ty::Base(BaseType::Blob);
    /// `port`
    pub const PORT: Ty = Ty::Base(BaseType::Port);

    /// `t list`
    pub fn list(t: Ty) -> Ty {
        Ty::List(Box::new(t))
    }
    /// `t chunk`
    pub fn chunk(t: Ty) -> Ty {
        Ty::Chunk(Box::new(t))
    }
}

/// A function signature: parameter types and result type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunTy {
    /// Parameters (empty for `void -> t`).
    pub params: Vec<Ty>,
    /// Result.
    pub ret: Ty,
}

/// The shape of a scheme body: a function or a plain value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemeBody {
    /// A function (or service routine).
    Fun(FunTy),
    /// A value (for value services and top-level `val`s).
    Value(Ty),
}

/// A type scheme `forall Gen(0..n). body`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scheme {
    /// Number of quantified variables.
    pub nvars: u32,
    /// Body.
    pub body: SchemeBody,
}

/// Error raised by unification: the two (resolved) types that clashed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnifyError {
    /// Different type constructors.
    Mismatch(Ty, Ty),
    /// A variable would have to contain itself.
    Occurs(Ty, Ty),
    /// Types nested deeper than [`MAX_TYPE_DEPTH`].
    TooDeep,
}

/// The substitution of unification variables.
#[derive(Clone, Debug, Default)]
pub struct Subst {
    slots: Vec<Option<Ty>>,
}

impl Subst {
    /// A fresh variable.
    pub fn fresh(&mut self) -> Ty {
        let id = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
        self.slots.push(None);
        Ty::Var(id)
    }

    fn get(&self, v: u32) -> Option<&Ty> {
        self.slots.get(v as usize).and_then(Option::as_ref)
    }

    /// Fully resolves a type (variables replaced by their bindings).
    pub fn resolve(&self, t: &Ty) -> Result<Ty, UnifyError> {
        self.resolve_d(t, 0)
    }

    fn resolve_d(&self, t: &Ty, d: usize) -> Result<Ty, UnifyError> {
        if d > MAX_TYPE_DEPTH {
            return Err(UnifyError::TooDeep);
        }
        Ok(match t {
            Ty::Var(v) => match self.get(*v) {
                Some(b) => self.resolve_d(b, d + 1)?,
                None => t.clone(),
            },
            Ty::Gen(_) | Ty::Base(_) => t.clone(),
            Ty::List(a) => Ty::list(self.resolve_d(a, d + 1)?),
            Ty::Chunk(a) => Ty::chunk(self.resolve_d(a, d + 1)?),
            Ty::Tuple(ts) => Ty::Tuple(
                ts.iter()
                    .map(|x| self.resolve_d(x, d + 1))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    /// Shallow resolution: follows variable bindings at the top only.
    pub fn shallow(&self, t: &Ty) -> Ty {
        let mut cur = t.clone();
        let mut n = 0;
        while let Ty::Var(v) = cur {
            match self.get(v) {
                Some(b) if n < MAX_TYPE_DEPTH * 4 => {
                    cur = b.clone();
                    n += 1;
                }
                _ => break,
            }
        }
        cur
    }

    fn occurs(&self, v: u32, t: &Ty, d: usize) -> Result<bool, UnifyError> {
        if d > MAX_TYPE_DEPTH {
            return Err(UnifyError::TooDeep);
        }
        Ok(match self.shallow(t) {
            Ty::Var(w) => w == v,
            Ty::Gen(_) | Ty::Base(_) => false,
            Ty::List(a) | Ty::Chunk(a) => self.occurs(v, &a, d + 1)?,
            Ty::Tuple(ts) => {
                for x in &ts {
                    if self.occurs(v, x, d + 1)? {
                        return Ok(true);
                    }
                }
                false
            }
        })
    }

    /// Unifies two types, extending the substitution.
    pub fn unify(&mut self, a: &Ty, b: &Ty) -> Result<(), UnifyError> {
        let r = self.unify_d(a, b, 0);
        if let Err(UnifyError::Mismatch(..) | UnifyError::Occurs(..)) = &r {
            // Report the full types rather than the innermost clash.
            let ra = self.resolve(a)?;
            let rb = self.resolve(b)?;
            return match r {
                Err(UnifyError::Occurs(..)) => Err(UnifyError::Occurs(ra, rb)),
                _ => Err(UnifyError::Mismatch(ra, rb)),
            };
        }
        r
    }

    fn unify_d(&mut self, a: &Ty, b: &Ty, d: usize) -> Result<(), UnifyError> {
        if d > MAX_TYPE_DEPTH {
            return Err(UnifyError::TooDeep);
        }
        let a = self.shallow(a);
        let b = self.shallow(b);
        match (&a, &b) {
            (Ty::Var(x), Ty::Var(y)) if x == y => Ok(()),
            (Ty::Var(x), other) | (other, Ty::Var(x)) => {
                if self.occurs(*x, other, 0)? {
                    return Err(UnifyError::Occurs(a.clone(), b.clone()));
                }
                if let Some(slot) = self.slots.get_mut(*x as usize) {
                    *slot = Some(other.clone());
                }
                Ok(())
            }
            (Ty::Base(x), Ty::Base(y)) if x == y => Ok(()),
            (Ty::Gen(x), Ty::Gen(y)) if x == y => Ok(()),
            (Ty::List(x), Ty::List(y)) | (Ty::Chunk(x), Ty::Chunk(y)) => self.unify_d(x, y, d + 1),
            (Ty::Tuple(xs), Ty::Tuple(ys)) if xs.len() == ys.len() => {
                for (x, y) in xs.iter().zip(ys) {
                    self.unify_d(x, y, d + 1)?;
                }
                Ok(())
            }
            _ => Err(UnifyError::Mismatch(a.clone(), b.clone())),
        }
    }

    /// Free (unbound) variables of a type, appended to `out`.
    pub fn free_vars(&self, t: &Ty, out: &mut Vec<u32>) -> Result<(), UnifyError> {
        let r = self.resolve(t)?;
        collect_vars(&r, out);
        Ok(())
    }

    /// Instantiates a scheme with fresh variables.
    pub fn instantiate(&mut self, s: &Scheme) -> SchemeBody {
        let fresh: Vec<Ty> = (0..s.nvars).map(|_| self.fresh()).collect();
        match &s.body {
            SchemeBody::Fun(f) => SchemeBody::Fun(FunTy {
                params: f.params.iter().map(|p| subst_gen(p, &fresh)).collect(),
                ret: subst_gen(&f.ret, &fresh),
            }),
            SchemeBody::Value(t) => SchemeBody::Value(subst_gen(t, &fresh)),
        }
    }

    /// Generalizes a body over all its free variables except `keep`.
    pub fn generalize(&self, body: &SchemeBody, keep: &[u32]) -> Result<Scheme, UnifyError> {
        let resolved = match body {
            SchemeBody::Fun(f) => SchemeBody::Fun(FunTy {
                params: f
                    .params
                    .iter()
                    .map(|p| self.resolve(p))
                    .collect::<Result<_, _>>()?,
                ret: self.resolve(&f.ret)?,
            }),
            SchemeBody::Value(t) => SchemeBody::Value(self.resolve(t)?),
        };
        let mut vars = Vec::new();
        match &resolved {
            SchemeBody::Fun(f) => {
                for p in &f.params {
                    collect_vars(p, &mut vars);
                }
                collect_vars(&f.ret, &mut vars);
            }
            SchemeBody::Value(t) => collect_vars(t, &mut vars),
        }
        vars.retain(|v| !keep.contains(v));
        let mut order: Vec<u32> = Vec::new();
        for v in vars {
            if !order.contains(&v) {
                order.push(v);
            }
        }
        let map = |t: &Ty| var_to_gen(t, &order);
        let body = match resolved {
            SchemeBody::Fun(f) => SchemeBody::Fun(FunTy {
                params: f.params.iter().map(map).collect(),
                ret: map(&f.ret),
            }),
            SchemeBody::Value(t) => SchemeBody::Value(map(&t)),
        };
        Ok(Scheme {
            nvars: u32::try_from(order.len()).unwrap_or(u32::MAX),
            body,
        })
    }
}

fn collect_vars(t: &Ty, out: &mut Vec<u32>) {
    match t {
        Ty::Var(v) => out.push(*v),
        Ty::Gen(_) | Ty::Base(_) => {}
        Ty::List(a) | Ty::Chunk(a) => collect_vars(a, out),
        Ty::Tuple(ts) => ts.iter().for_each(|x| collect_vars(x, out)),
    }
}

fn var_to_gen(t: &Ty, order: &[u32]) -> Ty {
    match t {
        Ty::Var(v) => match order.iter().position(|w| w == v) {
            Some(i) => Ty::Gen(u32::try_from(i).unwrap_or(u32::MAX)),
            None => t.clone(),
        },
        Ty::Gen(_) | Ty::Base(_) => t.clone(),
        Ty::List(a) => Ty::list(var_to_gen(a, order)),
        Ty::Chunk(a) => Ty::chunk(var_to_gen(a, order)),
        Ty::Tuple(ts) => Ty::Tuple(ts.iter().map(|x| var_to_gen(x, order)).collect()),
    }
}

impl Scheme {
    /// Whether the result type has a quantified variable the parameters do not fix (a
    /// service such as `get : (string, key) -> 'a`): its value's type is known only where
    /// it is called, so calls are checked at run time against the type needed there.
    pub fn free_result(&self) -> bool {
        fn gens(t: &Ty, out: &mut Vec<u32>) {
            match t {
                Ty::Gen(i) => out.push(*i),
                Ty::Var(_) | Ty::Base(_) => {}
                Ty::List(a) | Ty::Chunk(a) => gens(a, out),
                Ty::Tuple(ts) => ts.iter().for_each(|x| gens(x, out)),
            }
        }
        let (params, ret): (&[Ty], &Ty) = match &self.body {
            SchemeBody::Fun(f) => (&f.params, &f.ret),
            SchemeBody::Value(t) => (&[], t),
        };
        let mut bound = Vec::new();
        params.iter().for_each(|p| gens(p, &mut bound));
        let mut res = Vec::new();
        gens(ret, &mut res);
        res.iter().any(|g| !bound.contains(g))
    }
}

/// Replaces `Gen(i)` by `fresh[i]`.
pub fn subst_gen(t: &Ty, fresh: &[Ty]) -> Ty {
    match t {
        Ty::Gen(i) => fresh.get(*i as usize).cloned().unwrap_or_else(|| t.clone()),
        Ty::Var(_) | Ty::Base(_) => t.clone(),
        Ty::List(a) => Ty::list(subst_gen(a, fresh)),
        Ty::Chunk(a) => Ty::chunk(subst_gen(a, fresh)),
        Ty::Tuple(ts) => Ty::Tuple(ts.iter().map(|x| subst_gen(x, fresh)).collect()),
    }
}

fn var_name(i: u32) -> String {
    let letter = char::from(b'a' + u8::try_from(i % 26).unwrap_or(0));
    if i < 26 {
        format!("'{letter}")
    } else {
        format!("'{letter}{}", i / 26)
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Var(v) => write!(f, "'_{v}"),
            Ty::Gen(i) => write!(f, "{}", var_name(*i)),
            Ty::Base(b) => write!(f, "{}", b.name()),
            Ty::List(a) => match **a {
                Ty::Tuple(_) => write!(f, "({a}) list"),
                _ => write!(f, "{a} list"),
            },
            Ty::Chunk(a) => match **a {
                Ty::Tuple(_) => write!(f, "({a}) chunk"),
                _ => write!(f, "{a} chunk"),
            },
            Ty::Tuple(ts) => {
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        write!(f, " * ")?;
                    }
                    match t {
                        Ty::Tuple(_) => write!(f, "({t})")?,
                        _ => write!(f, "{t}")?,
                    }
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for FunTy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.params.as_slice() {
            [] => write!(f, "void -> {}", self.ret),
            [p] => write!(f, "{p} -> {}", self.ret),
            ps => {
                write!(f, "(")?;
                for (i, p) in ps.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{p}")?;
                }
                write!(f, ") -> {}", self.ret)
            }
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.body {
            SchemeBody::Fun(ft) => write!(f, "{ft}"),
            SchemeBody::Value(t) => write!(f, "{t}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unify_and_generalize() {
        let mut s = Subst::default();
        let a = s.fresh();
        let b = s.fresh();
        s.unify(&Ty::list(a.clone()), &Ty::list(Ty::INT)).unwrap();
        assert_eq!(s.resolve(&a).unwrap(), Ty::INT);
        assert!(matches!(
            s.unify(&a, &Ty::BOOL),
            Err(UnifyError::Mismatch(Ty::INT, Ty::BOOL))
        ));
        assert!(matches!(
            s.unify(&b, &Ty::list(b.clone())),
            Err(UnifyError::Occurs(..))
        ));
        let sc = s
            .generalize(
                &SchemeBody::Fun(FunTy {
                    params: vec![b.clone()],
                    ret: Ty::list(b),
                }),
                &[],
            )
            .unwrap();
        assert_eq!(sc.to_string(), "'a -> 'a list");
    }
}
