//! The compact, resolved intermediate form executed by [`crate::eval`].
//!
//! Invariants established by [`crate::check`]:
//! * every variable is a frame slot ([`Ir::Local`]) or a global slot
//!   ([`Ir::Global`]) — there are no names to look up at run time;
//! * local functions are lambda-lifted: a call passes the captured
//!   variables after the declared arguments;
//! * calls only go to functions defined earlier in the program text, so the
//!   call graph is acyclic and every evaluation terminates (folds iterate
//!   over finite lists; remote evaluation is bounded by the resource bound);
//! * the tree depth is bounded by the parser's nesting limit.

use crate::ast::{BinOp, NetPrim, UnOp};
use crate::builtins::Builtin;
use crate::value::Value;
use std::sync::Arc;

/// How a service call is dispatched.
#[derive(Clone, Debug, PartialEq)]
pub enum SvcTarget {
    /// Implemented by this crate (possibly via [`crate::Services`]).
    Builtin(Builtin),
    /// Registered at run time; dispatched to [`crate::Services::call`].
    Extension(u32),
    /// Declared with `svc` but not provided by this node: calling it raises
    /// `UnknownService`.
    Missing,
}

/// A resolved service reference.
#[derive(Clone, Debug, PartialEq)]
pub struct SvcRef {
    /// Service name.
    pub name: Arc<str>,
    /// Dispatch target.
    pub target: SvcTarget,
}

/// Callee of a fold.
#[derive(Clone, Debug, PartialEq)]
pub enum Callee {
    /// A PLAN function with the captured variables to pass.
    Fn(u32, Vec<Ir>),
    /// A service routine.
    Svc(SvcRef),
}

/// What a `try ... handle` catches.
#[derive(Clone, Debug, PartialEq)]
pub enum Catch {
    /// The declared exception of this name.
    Exn(Arc<str>),
    /// Any exception, bound (as an `exn` value) to this frame slot for the handler.
    Any(u32),
}

/// Target of a chunk expression.
#[derive(Clone, Debug, PartialEq)]
pub enum ChunkTarget {
    /// A top-level function of this program.
    Fn(Arc<str>),
    /// A service routine (the chunk carries no code).
    Svc(Arc<str>),
}

/// An IR node.
#[derive(Clone, Debug, PartialEq)]
pub enum Ir {
    /// A constant.
    Const(Value),
    /// Frame slot.
    Local(u32),
    /// Global slot (top-level `val`).
    Global(u32),
    /// Tuple construction.
    Tuple(Vec<Ir>),
    /// List construction.
    List(Vec<Ir>),
    /// Sequence; value of the last.
    Seq(Vec<Ir>),
    /// Conditional.
    If(Box<Ir>, Box<Ir>, Box<Ir>),
    /// `let`: evaluate each binding into its slot, then the body.
    Let(Vec<(u32, Ir)>, Box<Ir>),
    /// Store into a global slot (top-level initialisation), yields unit.
    SetGlobal(u32, Box<Ir>),
    /// Call of a PLAN function (arguments include captured variables).
    CallFn(u32, Vec<Ir>),
    /// Call of a service routine.
    CallSvc(SvcRef, Vec<Ir>),
    /// Unary operator.
    Unop(UnOp, Box<Ir>),
    /// Binary operator (`and`/`or` short-circuit).
    Binop(BinOp, Box<Ir>, Box<Ir>),
    /// `raise E`.
    Raise(Arc<str>),
    /// `raise e` for a variable `e : exn`.
    RaiseVal(Box<Ir>),
    /// A service call whose result type only the call site fixes, with the index of that
    /// type in the program's table of checked results: the value is checked against it.
    Check(Box<Ir>, u32),
    /// `try body handle E => handler`.
    Try(Box<Ir>, Catch, Box<Ir>),
    /// `|f|(args)`.
    Chunk(ChunkTarget, Vec<Ir>),
    /// Network primitive with its routing-function name (if any).
    Net(NetPrim, Vec<Ir>, Option<Arc<str>>),
    /// `foldl` / `foldr`.
    Fold {
        /// Left fold?
        left: bool,
        /// Function folded.
        callee: Callee,
        /// `init` for foldl, `list` for foldr.
        a: Box<Ir>,
        /// `list` for foldl, `init` for foldr.
        b: Box<Ir>,
    },
}

/// A compiled function.
#[derive(Clone, Debug, PartialEq)]
pub struct FnCode {
    /// Name (for diagnostics and chunk lookup).
    pub name: Arc<str>,
    /// Number of parameters including captured variables.
    pub nparams: u32,
    /// Frame size (parameters plus `let` slots).
    pub frame: u32,
    /// Body.
    pub body: Ir,
}
