//! Recursive-descent parser for PLAN grammar v3.1.
//!
//! Contract: [`parse_program`] returns the list of top-level definitions or
//! the first [`SyntaxError`] (with line:column). [`parse_type`] parses a
//! standalone type expression (used for service signatures). Neither
//! panics, and nesting is bounded by [`MAX_NESTING`] (also for long
//! left-associative operator chains), so later recursive passes over the
//! AST are stack-safe.
//!
//! Precedence, loosest first (all binary operators are left-associative
//! except `::`, which is right-associative):
//! 1. `if`/`let`/`try`/`raise` (extend as far right as possible)
//! 2. `or`
//! 3. `and`
//! 4. `=` `<>` `<` `<=` `>` `>=`
//! 5. `::`
//! 6. `+` `--` (also `-`) `^` `ori` `xori`
//! 7. `*` `/` `%` `andi` `<<` `>>`
//! 8. prefix `~` `not` `hd` `tl` `fst` `snd` `#n` `noti` `explode`
//!    `implode` `ord` `chr`
//! 9. calls `f(...)`, chunks `|f|(...)`, literals, parenthesised forms
//!
//! Sequencing `(e1; e2)` is only available inside parentheses, lists are written
//! `[e1; e2]`, tuples `(e1, e2)`, integer subtraction `--` — as the grammar has them. Text the
//! grammar does not allow is refused with a hint naming the PLAN form (`-`, `[a, b]`,
//! `let ... in e1; e2 end`, the PLAN 3.0 chunk `|f(x)|`, host literals in programs).
//!
//! Host literals (`10.0.0.1`, `10.0.0.1:3322`, `[::1]:3322`) are not part of the PLAN 3.1
//! grammar; they are accepted only in tool input such as entry calls ([`Dialect::Entry`]).

use crate::ast::*;
use crate::error::SyntaxError;
use crate::lexer::{Tok, Token, lex};

/// Maximum nesting depth of expressions and types.
pub const MAX_NESTING: u32 = 64;

/// Operator, precedence (higher binds tighter) and right-associativity.
fn binop_info(t: &Tok) -> Option<(BinOp, u8, bool)> {
    Some(match t {
        Tok::Kw("or") => (BinOp::Or, 1, false),
        Tok::Kw("and") => (BinOp::And, 2, false),
        Tok::Sym("=") => (BinOp::Eq, 3, false),
        Tok::Sym("<>") => (BinOp::Ne, 3, false),
        Tok::Sym("<") => (BinOp::Lt, 3, false),
        Tok::Sym("<=") => (BinOp::Le, 3, false),
        Tok::Sym(">") => (BinOp::Gt, 3, false),
        Tok::Sym(">=") => (BinOp::Ge, 3, false),
        Tok::Sym("::") => (BinOp::Cons, 4, true),
        Tok::Sym("+") => (BinOp::Add, 5, false),
        Tok::Sym("--") => (BinOp::Sub, 5, false),
        Tok::Sym("^") => (BinOp::Concat, 5, false),
        Tok::Kw("ori") => (BinOp::Ori, 5, false),
        Tok::Kw("xori") => (BinOp::Xori, 5, false),
        Tok::Sym("*") => (BinOp::Mul, 6, false),
        Tok::Sym("/") => (BinOp::Div, 6, false),
        Tok::Sym("%") => (BinOp::Mod, 6, false),
        Tok::Kw("andi") => (BinOp::Andi, 6, false),
        Tok::Sym("<<") => (BinOp::Shl, 6, false),
        Tok::Sym(">>") => (BinOp::Shr, 6, false),
        _ => return None,
    })
}

/// Which text the parser accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Dialect {
    /// The PLAN 3.1 grammar: the text of programs.
    #[default]
    Program,
    /// The grammar plus host literals: entry calls and other tool input.
    Entry,
}

struct Parser {
    toks: Vec<Token>,
    i: usize,
    depth: u32,
    prev_end: Pos,
    dialect: Dialect,
}

type PResult<T> = Result<T, SyntaxError>;

impl Parser {
    fn new(src: &str, dialect: Dialect) -> PResult<Parser> {
        Ok(Parser {
            toks: lex(src)?,
            i: 0,
            depth: 0,
            prev_end: Pos { line: 1, col: 1 },
            dialect,
        })
    }
}

/// Parses a whole program (the PLAN 3.1 grammar).
pub fn parse_program(src: &str) -> PResult<Vec<Def>> {
    parse_program_in(src, Dialect::Program)
}

/// Parses a whole program in `dialect`.
pub fn parse_program_in(src: &str, dialect: Dialect) -> PResult<Vec<Def>> {
    let mut p = Parser::new(src, dialect)?;
    let mut defs = Vec::new();
    while !p.at_eof() {
        defs.push(p.def()?);
    }
    if defs.is_empty() {
        return Err(SyntaxError::new(
            p.pos(),
            "empty program: expected at least one `fun`, `val`, `exception` or `svc` definition",
        ));
    }
    Ok(defs)
}

/// Parses a standalone type expression such as `(host, int) -> unit`.
pub fn parse_type(src: &str) -> PResult<TypeExpr> {
    let mut p = Parser::new(src, Dialect::Program)?;
    let t = p.ty()?;
    if !p.at_eof() {
        return Err(p.unexpected("end of the type"));
    }
    Ok(t)
}

/// Parses a standalone expression (tool input: host literals allowed).
pub fn parse_expr(src: &str) -> PResult<Expr> {
    let mut p = Parser::new(src, Dialect::Entry)?;
    let e = p.expr()?;
    if !p.at_eof() {
        return Err(p.unexpected("end of the expression"));
    }
    Ok(e)
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.toks.get(self.i).map_or(&Tok::Eof, |t| &t.tok)
    }

    fn peek_at(&self, k: usize) -> &Tok {
        self.toks.get(self.i + k).map_or(&Tok::Eof, |t| &t.tok)
    }

    fn pos(&self) -> Pos {
        self.toks
            .get(self.i)
            .or_else(|| self.toks.last())
            .map_or(Pos { line: 1, col: 1 }, |t| t.pos)
    }

    fn at_eof(&self) -> bool {
        matches!(self.peek(), Tok::Eof)
    }

    fn advance(&mut self) -> Tok {
        let t = self.peek().clone();
        if let Some(tok) = self.toks.get(self.i) {
            self.prev_end = tok.end;
            self.i += 1;
        }
        t
    }

    /// An expression node from `pos` to the end of the last token consumed.
    fn node(&self, pos: Pos, kind: ExprKind) -> PResult<Expr> {
        Ok(Expr {
            pos,
            end: self.prev_end,
            kind,
        })
    }

    /// A name (identifier) with its position.
    fn name(&mut self, what: &str) -> PResult<Name> {
        let (name, pos) = self.ident(what)?;
        Ok(Name { name, pos })
    }

    /// An optional `: type` annotation.
    fn opt_ann(&mut self) -> PResult<Option<TypeAnn>> {
        if !self.eat_sym(":") {
            return Ok(None);
        }
        let pos = self.pos();
        Ok(Some(TypeAnn {
            ty: self.ty()?,
            pos,
        }))
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    fn is_kw(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Kw(x) if *x == s)
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        if self.is_sym(s) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn eat_kw(&mut self, s: &str) -> bool {
        if self.is_kw(s) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn unexpected(&self, expected: &str) -> SyntaxError {
        SyntaxError::new(
            self.pos(),
            format!("expected {expected}, found {}", self.peek().describe()),
        )
    }

    fn expect_sym(&mut self, s: &str, ctx: &str) -> PResult<()> {
        if self.eat_sym(s) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{s}` {ctx}")))
        }
    }

    fn expect_kw(&mut self, s: &str, ctx: &str) -> PResult<()> {
        if self.eat_kw(s) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{s}` {ctx}")))
        }
    }

    fn ident(&mut self, what: &str) -> PResult<(String, Pos)> {
        let pos = self.pos();
        match self.peek().clone() {
            Tok::Ident(s) => {
                self.advance();
                Ok((s, pos))
            }
            Tok::Kw(k) => Err(SyntaxError::new(
                pos,
                format!("expected {what}, found keyword `{k}` (keywords cannot be used as names)"),
            )),
            _ => Err(self.unexpected(what)),
        }
    }

    fn enter(&mut self, extra: u32) -> PResult<()> {
        self.depth += 1;
        if self.depth + extra > MAX_NESTING {
            return Err(SyntaxError::new(
                self.pos(),
                format!(
                    "program is nested too deeply (limit {MAX_NESTING} levels); split it into smaller functions"
                ),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    // ---------------------------------------------------------------- defs

    fn def(&mut self) -> PResult<Def> {
        let pos = self.pos();
        let kind = match self.peek() {
            Tok::Kw("fun") => {
                self.advance();
                let (name, _) = self.ident("a function name after `fun`")?;
                self.expect_sym("(", "to open the parameter list")?;
                let mut params = Vec::new();
                if !self.eat_sym(")") {
                    loop {
                        let (pname, ppos) = self.ident("a parameter name")?;
                        let ty = self.opt_ann()?;
                        params.push(Param {
                            name: pname,
                            ty,
                            pos: ppos,
                        });
                        if self.eat_sym(")") {
                            break;
                        }
                        if !self.eat_sym(",") && !matches!(self.peek(), Tok::Ident(_)) {
                            return Err(self.unexpected("`,` or `)` in the parameter list"));
                        }
                    }
                }
                let ret = self.opt_ann()?;
                self.expect_sym("=", "before the function body")?;
                let body = self.expr()?;
                DefKind::Fun {
                    name,
                    params,
                    ret,
                    body,
                }
            }
            Tok::Kw("val") => {
                self.advance();
                let (name, _) = self.ident("a name after `val`")?;
                let ty = self.opt_ann()?;
                self.expect_sym("=", "after the name in a `val` definition")?;
                let body = self.expr()?;
                DefKind::Val { name, ty, body }
            }
            Tok::Kw("exception") => {
                self.advance();
                let (name, _) = self.ident("an exception name after `exception`")?;
                DefKind::Exception { name }
            }
            Tok::Kw("svc") => {
                self.advance();
                let (name, name_pos) = self.ident("a service name after `svc`")?;
                self.expect_sym(":", "between the service name and its type")?;
                let pos = self.pos();
                let ty = TypeAnn {
                    ty: self.ty()?,
                    pos,
                };
                DefKind::Svc { name, name_pos, ty }
            }
            _ => {
                return Err(self.unexpected("a definition (`fun`, `val`, `exception` or `svc`)"));
            }
        };
        Ok(Def { pos, kind })
    }

    // --------------------------------------------------------------- types

    fn ty(&mut self) -> PResult<TypeExpr> {
        self.enter(0)?;
        let r = self.ty_inner();
        self.leave();
        r
    }

    fn ty_inner(&mut self) -> PResult<TypeExpr> {
        if self.eat_kw("void") {
            self.expect_sym("->", "after `void` (void only introduces a function type)")?;
            let r = self.ty()?;
            return Ok(TypeExpr::Fun(Vec::new(), Box::new(r)));
        }
        // `(t1, t2, ...) -> r`
        if self.is_sym("(") && self.paren_has_top_comma() {
            self.advance();
            let mut params = vec![self.ty()?];
            while self.eat_sym(",") {
                params.push(self.ty()?);
            }
            self.expect_sym(")", "to close the parameter types")?;
            self.expect_sym("->", "after a parenthesised list of parameter types")?;
            let r = self.ty()?;
            return Ok(TypeExpr::Fun(params, Box::new(r)));
        }
        let t = self.tuple_ty()?;
        if self.eat_sym("->") {
            let r = self.ty()?;
            return Ok(TypeExpr::Fun(vec![t], Box::new(r)));
        }
        Ok(t)
    }

    /// Whether the parenthesis at the cursor contains a comma at its own
    /// nesting level (so it is a parameter-type list).
    fn paren_has_top_comma(&self) -> bool {
        let mut depth = 0i32;
        let mut k = 0;
        loop {
            match self.peek_at(k) {
                Tok::Sym("(") => depth += 1,
                Tok::Sym(")") => {
                    depth -= 1;
                    if depth == 0 {
                        return false;
                    }
                }
                Tok::Sym(",") if depth == 1 => return true,
                Tok::Eof => return false,
                _ => {}
            }
            k += 1;
        }
    }

    fn tuple_ty(&mut self) -> PResult<TypeExpr> {
        let first = self.postfix_ty()?;
        if !self.is_sym("*") {
            return Ok(first);
        }
        let mut parts = vec![first];
        while self.eat_sym("*") {
            parts.push(self.postfix_ty()?);
        }
        Ok(TypeExpr::Tuple(parts))
    }

    fn postfix_ty(&mut self) -> PResult<TypeExpr> {
        let mut t = self.atom_ty()?;
        let mut n = 0;
        loop {
            if self.eat_kw("list") {
                t = TypeExpr::List(Box::new(t));
            } else if self.eat_kw("chunk") {
                t = TypeExpr::Chunk(Box::new(t));
            } else {
                return Ok(t);
            }
            n += 1;
            if self.depth + n > MAX_NESTING {
                return Err(SyntaxError::new(self.pos(), "type is nested too deeply"));
            }
        }
    }

    fn atom_ty(&mut self) -> PResult<TypeExpr> {
        let pos = self.pos();
        match self.advance() {
            Tok::Kw(k) => match BaseType::from_name(k) {
                Some(b) => Ok(TypeExpr::Base(b)),
                None => Err(SyntaxError::new(
                    pos,
                    format!("expected a type, found keyword `{k}`"),
                )),
            },
            Tok::TyVar(v) => Ok(TypeExpr::Var(v)),
            Tok::Sym("(") => {
                let t = self.ty()?;
                self.expect_sym(")", "to close the parenthesised type")?;
                Ok(t)
            }
            other => Err(SyntaxError::new(
                pos,
                format!(
                    "expected a type (like int, host list or 'a chunk), found {}",
                    other.describe()
                ),
            )),
        }
    }

    // --------------------------------------------------------- expressions

    fn expr(&mut self) -> PResult<Expr> {
        self.enter(0)?;
        let r = self.binary(1);
        self.leave();
        r
    }

    /// Precedence climbing over the binary operators.
    fn binary(&mut self, min: u8) -> PResult<Expr> {
        let mut lhs = self.unary_expr()?;
        let mut chain = 0;
        if self.is_sym("-") {
            return Err(SyntaxError::new(
                self.pos(),
                "`-` is not a PLAN operator: integer subtraction is written `--`",
            )
            .with_hint("write `a -- b` (and `~a` for the negation of `a`)"));
        }
        while let Some((op, prec, right)) = binop_info(self.peek()) {
            if prec < min {
                break;
            }
            let pos = self.pos();
            self.advance();
            chain += 1;
            if self.depth + chain > MAX_NESTING {
                return Err(SyntaxError::new(
                    pos,
                    format!(
                        "operator chain is too long (limit {MAX_NESTING}); use intermediate `val`s"
                    ),
                ));
            }
            self.enter(chain)?;
            let rhs = self.binary(if right { prec } else { prec + 1 });
            self.leave();
            let rhs = rhs?;
            if self.is_sym("-") {
                return Err(SyntaxError::new(
                    self.pos(),
                    "`-` is not a PLAN operator: integer subtraction is written `--`",
                )
                .with_hint("write `a -- b` (and `~a` for the negation of `a`)"));
            }
            lhs = Expr {
                pos: lhs.pos,
                end: rhs.end,
                kind: ExprKind::Binop(op, Box::new(lhs), Box::new(rhs)),
            };
        }
        Ok(lhs)
    }

    fn unary_expr(&mut self) -> PResult<Expr> {
        let pos = self.pos();
        let op = match self.peek() {
            Tok::Sym("~") => Some(UnOp::Neg),
            Tok::Kw("not") => Some(UnOp::Not),
            Tok::Kw("hd") => Some(UnOp::Hd),
            Tok::Kw("tl") => Some(UnOp::Tl),
            Tok::Kw("fst") => Some(UnOp::Fst),
            Tok::Kw("snd") => Some(UnOp::Snd),
            Tok::Kw("noti") => Some(UnOp::Noti),
            Tok::Kw("explode") => Some(UnOp::Explode),
            Tok::Kw("implode") => Some(UnOp::Implode),
            Tok::Kw("ord") => Some(UnOp::Ord),
            Tok::Kw("chr") => Some(UnOp::Chr),
            Tok::Sym("#") => {
                self.advance();
                match self.advance() {
                    Tok::Int(n) if (1..=i64::from(u16::MAX)).contains(&n) => {
                        Some(UnOp::Nth(u32::try_from(n).unwrap_or(1)))
                    }
                    other => {
                        return Err(SyntaxError::new(
                            pos,
                            format!(
                                "`#` must be followed by a positive tuple index like #2, found {}",
                                other.describe()
                            ),
                        ));
                    }
                }
            }
            _ => None,
        };
        let Some(op) = op else {
            return self.primary();
        };
        if !matches!(op, UnOp::Nth(_)) {
            self.advance();
        }
        self.enter(0)?;
        let operand = self.unary_expr();
        self.leave();
        let operand = operand?;
        Ok(Expr {
            pos,
            end: operand.end,
            kind: ExprKind::Unop(op, Box::new(operand)),
        })
    }

    fn args(&mut self, ctx: &str) -> PResult<Vec<Expr>> {
        self.expect_sym("(", &format!("to open the arguments of {ctx}"))?;
        let mut args = Vec::new();
        if self.eat_sym(")") {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if self.eat_sym(")") {
                return Ok(args);
            }
            if !self.eat_sym(",") {
                return Err(self.unexpected(&format!("`,` or `)` in the arguments of {ctx}")));
            }
        }
    }

    fn primary(&mut self) -> PResult<Expr> {
        let pos = self.pos();
        let lit = match self.peek().clone() {
            Tok::Int(i) => Some(ExprKind::Int(i)),
            Tok::Char(c) => Some(ExprKind::Char(c)),
            Tok::Str(s) => Some(ExprKind::Str(s)),
            Tok::Host(h) if self.dialect == Dialect::Entry => Some(ExprKind::Host(h)),
            Tok::Host(h) => {
                return Err(SyntaxError::new(
                    pos,
                    format!("`{h}` is a host literal, which PLAN programs cannot contain"),
                )
                .with_hint(
                    "obtain hosts from parameters, thisHost(), getNeighbors(), defaultRoute() \
                     or getHostByName(\"10.0.0.1:3322\")",
                ));
            }
            Tok::Kw("true") => Some(ExprKind::Bool(true)),
            Tok::Kw("false") => Some(ExprKind::Bool(false)),
            _ => None,
        };
        if let Some(kind) = lit {
            self.advance();
            return self.node(pos, kind);
        }
        match self.peek().clone() {
            Tok::Ident(name) => {
                self.advance();
                if self.is_sym("(") {
                    let args = self.args(&format!("`{name}`"))?;
                    self.node(pos, ExprKind::Call(name, args))
                } else {
                    self.node(pos, ExprKind::Var(name))
                }
            }
            Tok::Kw("if") => {
                self.advance();
                let c = self.expr()?;
                self.expect_kw("then", "after the condition of `if`")?;
                let a = self.expr()?;
                self.expect_kw("else", "(every `if` needs an `else` branch)")?;
                let b = self.expr()?;
                self.node(pos, ExprKind::If(Box::new(c), Box::new(a), Box::new(b)))
            }
            Tok::Kw("let") => self.let_expr(pos),
            Tok::Kw("try") => {
                self.advance();
                let body = self.expr()?;
                self.expect_kw("handle", "after the body of `try`")?;
                let exn = self.name("an exception name or a variable after `handle`")?;
                self.expect_sym("=>", "after the exception name in `handle`")?;
                let h = self.expr()?;
                self.node(pos, ExprKind::Try(Box::new(body), exn, Box::new(h)))
            }
            Tok::Kw("raise") => {
                self.advance();
                let exn = self.name("an exception name after `raise`")?;
                self.node(pos, ExprKind::Raise(exn))
            }
            Tok::Sym("(") => self.paren(pos),
            Tok::Sym("[") => self.list(pos),
            Tok::Sym("|") => self.chunk(pos),
            Tok::Kw(k @ ("OnRemote" | "OnNeighbor" | "RetransOnRemote")) => {
                self.advance();
                let prim = match k {
                    "OnRemote" => NetPrim::OnRemote,
                    "OnNeighbor" => NetPrim::OnNeighbor,
                    _ => NetPrim::RetransOnRemote,
                };
                let args = self.args(k)?;
                self.node(pos, ExprKind::Net(prim, args))
            }
            Tok::Kw(k @ ("foldl" | "foldr")) => self.fold(pos, k),
            _ => Err(self.unexpected("an expression")),
        }
    }

    /// `|f|(args)` (at the first `|`).
    fn chunk(&mut self, pos: Pos) -> PResult<Expr> {
        self.advance();
        let name = self.name("a function name inside `|...|` (chunk syntax is |f|(args))")?;
        if self.is_sym("(") {
            return Err(SyntaxError::new(
                self.pos(),
                format!(
                    "expected `|` after the chunk's function name, found `(`: `|{}(...)|` is the PLAN 3.0 chunk syntax",
                    name.name
                ),
            )
            .with_hint(format!(
                "PLAN 3.1 writes chunks as |{}|(args)",
                name.name
            )));
        }
        self.expect_sym("|", "after the chunk's function name")?;
        let args = self.args(&format!("chunk |{}|", name.name))?;
        self.node(pos, ExprKind::Chunk(name, args))
    }

    /// `let DEFS in BODY end` (at `let`).
    fn let_expr(&mut self, pos: Pos) -> PResult<Expr> {
        self.advance();
        let mut defs = Vec::new();
        while !self.is_kw("in") {
            if self.at_eof() {
                return Err(self.unexpected("`in` to finish the `let` definitions"));
            }
            defs.push(self.def()?);
        }
        self.advance();
        if defs.is_empty() {
            return Err(SyntaxError::new(
                pos,
                "`let` needs at least one definition before `in`",
            ));
        }
        let body = self.expr()?;
        if self.is_sym(";") {
            return Err(SyntaxError::new(
                self.pos(),
                "the body of `let` is a single expression, so `;` cannot follow it here",
            )
            .with_hint("to evaluate several expressions in sequence write `in (e1; e2) end`"));
        }
        self.expect_kw("end", "to close `let`")?;
        self.node(pos, ExprKind::Let(defs, Box::new(body)))
    }

    /// `()`, `(e)`, a tuple `(e1, e2, ...)` or a sequence `(e1; e2; ...)` (at `(`).
    fn paren(&mut self, pos: Pos) -> PResult<Expr> {
        self.advance();
        if self.eat_sym(")") {
            return self.node(pos, ExprKind::Unit);
        }
        let first = self.expr()?;
        if self.eat_sym(")") {
            // Parentheses only group: the expression keeps its own range.
            return Ok(first);
        }
        for (sep, close, make) in [
            (
                ",",
                "to close the tuple",
                ExprKind::Tuple as fn(Vec<Expr>) -> ExprKind,
            ),
            (";", "to close the sequence", ExprKind::Seq),
        ] {
            if self.is_sym(sep) {
                let mut items = vec![first];
                while self.eat_sym(sep) {
                    items.push(self.expr()?);
                }
                self.expect_sym(")", close)?;
                return self.node(pos, make(items));
            }
        }
        Err(self.unexpected("`)`, `,` or `;` after the expression"))
    }

    /// A list literal `[e1; e2; ...]` (at `[`).
    fn list(&mut self, pos: Pos) -> PResult<Expr> {
        self.advance();
        let mut items = Vec::new();
        if !self.eat_sym("]") {
            loop {
                items.push(self.expr()?);
                if self.eat_sym("]") {
                    break;
                }
                if self.is_sym(",") {
                    return Err(SyntaxError::new(
                        self.pos(),
                        "list elements are separated by `;`, not `,`",
                    )
                    .with_hint("write [a; b; c]; a list holding one tuple is [(a, b)]"));
                }
                if !self.eat_sym(";") {
                    return Err(self.unexpected("`;` or `]` in the list"));
                }
            }
        }
        self.node(pos, ExprKind::List(items))
    }

    /// `foldl(f, a, l)` / `foldr(f, l, b)` (at the keyword `k`).
    fn fold(&mut self, pos: Pos, k: &str) -> PResult<Expr> {
        self.advance();
        self.expect_sym("(", &format!("after `{k}`"))?;
        let func = self.name(&format!(
            "the name of the function to fold as the first argument of `{k}`"
        ))?;
        self.expect_sym(",", &format!("after the function name in `{k}`"))?;
        let a = self.expr()?;
        self.expect_sym(",", &format!("between the arguments of `{k}`"))?;
        let b = self.expr()?;
        self.expect_sym(
            ")",
            &format!("to close `{k}` (it takes exactly 3 arguments)"),
        )?;
        self.node(
            pos,
            ExprKind::Fold {
                left: k == "foldl",
                func,
                a: Box::new(a),
                b: Box::new(b),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence() {
        let e = parse_expr("1 + 2 * 3 = 7 and not false").unwrap();
        let ExprKind::Binop(BinOp::And, l, _) = e.kind else {
            panic!("and at top")
        };
        assert!(matches!(l.kind, ExprKind::Binop(BinOp::Eq, _, _)));
        let e = parse_expr("1 :: 2 :: []").unwrap();
        let ExprKind::Binop(BinOp::Cons, _, r) = e.kind else {
            panic!("cons")
        };
        assert!(matches!(r.kind, ExprKind::Binop(BinOp::Cons, _, _)));
    }

    #[test]
    fn types() {
        assert_eq!(
            parse_type("host -> host * dev").unwrap(),
            TypeExpr::Fun(
                vec![TypeExpr::Base(BaseType::Host)],
                Box::new(TypeExpr::Tuple(vec![
                    TypeExpr::Base(BaseType::Host),
                    TypeExpr::Base(BaseType::Dev)
                ]))
            )
        );
        assert!(matches!(
            parse_type("('a chunk, int) -> unit chunk list").unwrap(),
            TypeExpr::Fun(p, _) if p.len() == 2
        ));
        assert!(matches!(parse_type("void -> int").unwrap(), TypeExpr::Fun(p, _) if p.is_empty()));
    }

    #[test]
    fn errors_have_positions() {
        let e = parse_program("fun f() =\n  (1 +)").unwrap_err();
        assert_eq!(e.pos, Pos { line: 2, col: 7 });
        assert!(e.msg.contains("expected an expression"), "{}", e.msg);
    }

    #[test]
    fn deep_nesting_is_an_error() {
        let src = format!("fun f() = {}1{}", "(".repeat(5000), ")".repeat(5000));
        assert!(
            parse_program(&src)
                .unwrap_err()
                .msg
                .contains("nested too deeply")
        );
        let src = format!("fun f() = 1{}", " + 1".repeat(5000));
        assert!(parse_program(&src).is_err());
        let src = format!("fun f() = {}0", "~".repeat(5000));
        assert!(parse_program(&src).is_err());
        let src = format!("fun f() = {}[]", "1 :: ".repeat(5000));
        assert!(parse_program(&src).is_err());
    }
}
