//! Abstract syntax of PLAN v3.1 programs, as produced by [`crate::parser`].
//!
//! Invariants: every node carries the source position ([`Pos`]) of its
//! first token; the tree depth is bounded by the parser
//! ([`crate::parser::MAX_NESTING`]), so recursive passes over it cannot
//! overflow the stack.

use std::fmt;
use std::net::SocketAddr;

/// A 1-based line/column position in the source text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Pos {
    /// Line, starting at 1.
    pub line: u32,
    /// Column (in characters), starting at 1.
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// The base (non-constructed) PLAN types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BaseType {
    /// `unit`
    Unit,
    /// `int`
    Int,
    /// `char`
    Char,
    /// `string`
    String,
    /// `bool`
    Bool,
    /// `host`
    Host,
    /// `port`
    Port,
    /// `key`
    Key,
    /// `blob`
    Blob,
    /// `exn`
    Exn,
    /// `dev`
    Dev,
}

impl BaseType {
    /// The keyword naming this type.
    pub fn name(self) -> &'static str {
        match self {
            BaseType::Unit => "unit",
            BaseType::Int => "int",
            BaseType::Char => "char",
            BaseType::String => "string",
            BaseType::Bool => "bool",
            BaseType::Host => "host",
            BaseType::Port => "port",
            BaseType::Key => "key",
            BaseType::Blob => "blob",
            BaseType::Exn => "exn",
            BaseType::Dev => "dev",
        }
    }

    /// Looks a base type up by its keyword.
    pub fn from_name(s: &str) -> Option<BaseType> {
        Some(match s {
            "unit" => BaseType::Unit,
            "int" => BaseType::Int,
            "char" => BaseType::Char,
            "string" => BaseType::String,
            "bool" => BaseType::Bool,
            "host" => BaseType::Host,
            "port" => BaseType::Port,
            "key" => BaseType::Key,
            "blob" => BaseType::Blob,
            "exn" => BaseType::Exn,
            "dev" => BaseType::Dev,
            _ => return None,
        })
    }
}

/// A type expression as written in the source.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeExpr {
    /// A base type.
    Base(BaseType),
    /// A type variable `'a` (name without the quote).
    Var(String),
    /// `t list`
    List(Box<TypeExpr>),
    /// `t chunk`
    Chunk(Box<TypeExpr>),
    /// `t1 * t2 * ...` (at least two components).
    Tuple(Vec<TypeExpr>),
    /// A function type: `void -> r`, `t -> r` or `(t1, t2, ...) -> r`.
    Fun(Vec<TypeExpr>, Box<TypeExpr>),
}

/// A top-level or `let`-local definition.
#[derive(Clone, Debug, PartialEq)]
pub struct Def {
    /// Position of the defining keyword.
    pub pos: Pos,
    /// What is defined.
    pub kind: DefKind,
}

/// A formal parameter of a function.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Parameter name.
    pub name: String,
    /// Optional type annotation.
    pub ty: Option<TypeExpr>,
    /// Position of the name.
    pub pos: Pos,
}

/// The kinds of definition.
#[derive(Clone, Debug, PartialEq)]
pub enum DefKind {
    /// `fun f(params) [: t] = body`
    Fun {
        /// Function name.
        name: String,
        /// Parameters.
        params: Vec<Param>,
        /// Optional result type annotation.
        ret: Option<TypeExpr>,
        /// Body.
        body: Expr,
    },
    /// `val x [: t] = e`
    Val {
        /// Bound name.
        name: String,
        /// Optional annotation.
        ty: Option<TypeExpr>,
        /// Bound expression.
        body: Expr,
    },
    /// `exception E`
    Exception {
        /// Exception name.
        name: String,
    },
    /// `svc s : t`
    Svc {
        /// Service name.
        name: String,
        /// Declared type.
        ty: TypeExpr,
    },
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `~` integer negation
    Neg,
    /// `not`
    Not,
    /// `hd`
    Hd,
    /// `tl`
    Tl,
    /// `fst`
    Fst,
    /// `snd`
    Snd,
    /// `#n` (1-based tuple projection)
    Nth(u32),
    /// `noti` bitwise negation
    Noti,
    /// `explode`
    Explode,
    /// `implode`
    Implode,
    /// `ord`
    Ord,
    /// `chr`
    Chr,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `/`
    Div,
    /// `%`
    Mod,
    /// `*`
    Mul,
    /// `+`
    Add,
    /// `--` (also `-`)
    Sub,
    /// `and` (short-circuit)
    And,
    /// `or` (short-circuit)
    Or,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `=`
    Eq,
    /// `<>`
    Ne,
    /// `::`
    Cons,
    /// `^`
    Concat,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `xori`
    Xori,
    /// `andi`
    Andi,
    /// `ori`
    Ori,
}

impl BinOp {
    /// Source spelling.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Mul => "*",
            BinOp::Add => "+",
            BinOp::Sub => "--",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "=",
            BinOp::Ne => "<>",
            BinOp::Cons => "::",
            BinOp::Concat => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Xori => "xori",
            BinOp::Andi => "andi",
            BinOp::Ori => "ori",
        }
    }
}

/// The network primitives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetPrim {
    /// `OnRemote(chunk, host, rb, routFun)`
    OnRemote,
    /// `OnNeighbor(chunk, host, rb [, dev])`
    OnNeighbor,
    /// `RetransOnRemote(chunk, host, rb, routFun, retries, timeout)`
    RetransOnRemote,
}

impl NetPrim {
    /// Source spelling.
    pub fn name(self) -> &'static str {
        match self {
            NetPrim::OnRemote => "OnRemote",
            NetPrim::OnNeighbor => "OnNeighbor",
            NetPrim::RetransOnRemote => "RetransOnRemote",
        }
    }
}

/// An expression with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// Position of the first token.
    pub pos: Pos,
    /// The expression.
    pub kind: ExprKind,
}

/// Expression forms.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// `()`
    Unit,
    /// `true` / `false`
    Bool(bool),
    /// Integer literal.
    Int(i64),
    /// Character literal.
    Char(u8),
    /// String literal (bytes).
    Str(Vec<u8>),
    /// Host literal.
    Host(SocketAddr),
    /// `[e1; e2; ...]` (possibly empty).
    List(Vec<Expr>),
    /// A variable reference.
    Var(String),
    /// `f(args)`: call of a function or service.
    Call(String, Vec<Expr>),
    /// `(e1, e2, ...)`, at least two components.
    Tuple(Vec<Expr>),
    /// `(e1; e2; ...)`, at least two components.
    Seq(Vec<Expr>),
    /// `if c then a else b`
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `raise E`
    Raise(String),
    /// `try e handle E => h`
    Try(Box<Expr>, String, Box<Expr>),
    /// `let defs in body end`
    Let(Vec<Def>, Box<Expr>),
    /// `|f|(args)`
    Chunk(String, Vec<Expr>),
    /// Unary operator application.
    Unop(UnOp, Box<Expr>),
    /// Binary operator application.
    Binop(BinOp, Box<Expr>, Box<Expr>),
    /// Network primitive application.
    Net(NetPrim, Vec<Expr>),
    /// `foldl(f, init, list)` (`left = true`) or `foldr(f, list, init)`.
    Fold {
        /// Left fold?
        left: bool,
        /// Name of the function folded.
        func: String,
        /// Second argument (init for foldl, list for foldr).
        a: Box<Expr>,
        /// Third argument (list for foldl, init for foldr).
        b: Box<Expr>,
    },
}
