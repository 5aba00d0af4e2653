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

/// A source range: from `start` to `end` (exclusive; `end == start` means "the token at
/// `start`", whose extent a renderer finds by lexing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Span {
    /// First character.
    pub start: Pos,
    /// Just after the last character.
    pub end: Pos,
}

impl Span {
    /// The range from `start` to `end`.
    pub fn new(start: Pos, end: Pos) -> Span {
        Span { start, end }
    }

    /// The token at `p`.
    pub fn at(p: Pos) -> Span {
        Span { start: p, end: p }
    }
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

/// A type annotation with the position of its first token.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeAnn {
    /// The type as written.
    pub ty: TypeExpr,
    /// Where it is written.
    pub pos: Pos,
}

/// A formal parameter of a function.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Parameter name.
    pub name: String,
    /// Optional type annotation.
    pub ty: Option<TypeAnn>,
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
        ret: Option<TypeAnn>,
        /// Body.
        body: Expr,
    },
    /// `val x [: t] = e`
    Val {
        /// Bound name.
        name: String,
        /// Optional annotation.
        ty: Option<TypeAnn>,
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
        /// Where the name is written.
        name_pos: Pos,
        /// Declared type.
        ty: TypeAnn,
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

/// An expression with its source range.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// Position of the first token.
    pub pos: Pos,
    /// Position just after the last token.
    pub end: Pos,
    /// The expression.
    pub kind: ExprKind,
}

impl Expr {
    /// The source range of the whole expression.
    pub fn span(&self) -> Span {
        Span::new(self.pos, self.end)
    }
}

/// A name as written, with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Name {
    /// The identifier.
    pub name: String,
    /// Where it is written.
    pub pos: Pos,
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
    /// Host literal (only in entry calls and other tool input: the PLAN 3.1 grammar has no
    /// host literals, see [`crate::parser::Dialect`]).
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
    /// `raise E` (an exception name, or a variable of type `exn`)
    Raise(Name),
    /// `try e handle E => h`: `E` names a declared exception, or else is a variable bound to
    /// any exception raised by `e` (a catch-all handler)
    Try(Box<Expr>, Name, Box<Expr>),
    /// `let defs in body end`
    Let(Vec<Def>, Box<Expr>),
    /// `|f|(args)`
    Chunk(Name, Vec<Expr>),
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
        func: Name,
        /// Second argument (init for foldl, list for foldr).
        a: Box<Expr>,
        /// Third argument (list for foldl, init for foldr).
        b: Box<Expr>,
    },
}
