//! Lexer for PLAN v3.1 source text.
//!
//! Contract: [`lex`] turns source text into a vector of [`Token`]s ending
//! with [`Tok::Eof`], or fails with a [`SyntaxError`] carrying the line and
//! column of the offending character. It never panics on any input.
//!
//! Lexical conventions (PLAN grammar v3.1, ML style):
//! * comments are `(* ... *)` and nest;
//! * identifiers are `[A-Za-z_][A-Za-z0-9_']*`; keywords are reserved;
//! * integer literals are decimal digits (negation is the `~` operator);
//! * character literals `'c'`, string literals `"..."`, with escapes
//!   `\n \t \r \\ \" \'` and `\ddd` (three decimal digits);
//! * `'a` (quote followed by an identifier, not closed by a quote) is a
//!   type variable;
//! * host literals: `a.b.c.d` or `a.b.c.d:port`, and `[v6addr]:port`
//!   (also `[v6addr]` when the text contains a single `:` separator, so
//!   that it cannot be a list like `[a::b]`). The default port is
//!   [`crate::host::DEFAULT_PORT`].

use crate::ast::Pos;
use crate::error::SyntaxError;
use crate::host::DEFAULT_PORT;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Reserved words.
pub const KEYWORDS: &[&str] = &[
    "fun",
    "val",
    "exception",
    "svc",
    "if",
    "then",
    "else",
    "let",
    "in",
    "end",
    "raise",
    "try",
    "handle",
    "true",
    "false",
    "not",
    "hd",
    "tl",
    "fst",
    "snd",
    "noti",
    "explode",
    "implode",
    "ord",
    "chr",
    "and",
    "or",
    "xori",
    "andi",
    "ori",
    "OnRemote",
    "OnNeighbor",
    "RetransOnRemote",
    "foldl",
    "foldr",
    "list",
    "chunk",
    "unit",
    "int",
    "char",
    "string",
    "bool",
    "host",
    "port",
    "key",
    "blob",
    "exn",
    "dev",
    "void",
];

/// Symbols, longest first so that maximal munch works.
const SYMBOLS: &[&str] = &[
    "=>", "->", "::", "<=", ">=", "<>", "<<", ">>", "--", "(", ")", "[", "]", ",", ";", ":", "=",
    "|", "~", "#", "/", "%", "*", "+", "-", "<", ">", "^",
];

/// A token kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// Identifier.
    Ident(String),
    /// Type variable (name without the quote).
    TyVar(String),
    /// Integer literal.
    Int(i64),
    /// Character literal.
    Char(u8),
    /// String literal.
    Str(Vec<u8>),
    /// Host literal.
    Host(SocketAddr),
    /// Keyword.
    Kw(&'static str),
    /// Symbol.
    Sym(&'static str),
    /// End of input.
    Eof,
}

impl Tok {
    /// Human-readable description for error messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("identifier `{s}`"),
            Tok::TyVar(s) => format!("type variable `'{s}`"),
            Tok::Int(i) => format!("integer `{i}`"),
            Tok::Char(_) => "a character literal".to_string(),
            Tok::Str(_) => "a string literal".to_string(),
            Tok::Host(h) => format!("host literal `{h}`"),
            Tok::Kw(k) => format!("keyword `{k}`"),
            Tok::Sym(s) => format!("`{s}`"),
            Tok::Eof => "end of input".to_string(),
        }
    }
}

/// A token with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// Kind.
    pub tok: Tok,
    /// Position of the first character.
    pub pos: Pos,
    /// Position just after the last character.
    pub end: Pos,
}

struct Lexer<'a> {
    chars: Vec<char>,
    i: usize,
    line: u32,
    col: u32,
    _src: &'a str,
}

/// Maximum source length accepted (bytes).
pub const MAX_SOURCE_LEN: usize = 1 << 20;

/// Lexes a whole source text.
pub fn lex(src: &str) -> Result<Vec<Token>, SyntaxError> {
    if src.len() > MAX_SOURCE_LEN {
        return Err(SyntaxError::new(
            Pos { line: 1, col: 1 },
            format!(
                "program text is {} bytes; the limit is {MAX_SOURCE_LEN}",
                src.len()
            ),
        ));
    }
    let mut lx = Lexer {
        chars: src.chars().collect(),
        i: 0,
        line: 1,
        col: 1,
        _src: src,
    };
    let mut out = Vec::new();
    loop {
        lx.skip_ws_and_comments()?;
        let pos = lx.pos();
        let Some(c) = lx.peek(0) else {
            out.push(Token {
                tok: Tok::Eof,
                pos,
                end: pos,
            });
            return Ok(out);
        };
        let tok = lx.token(c, pos)?;
        out.push(Token {
            tok,
            pos,
            end: lx.pos(),
        });
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '\''
}

impl Lexer<'_> {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }

    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.i += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn skip_ws_and_comments(&mut self) -> Result<(), SyntaxError> {
        loop {
            match (self.peek(0), self.peek(1)) {
                (Some(c), _) if c.is_whitespace() => {
                    self.bump();
                }
                (Some('('), Some('*')) => {
                    let start = self.pos();
                    self.bump();
                    self.bump();
                    let mut depth = 1u32;
                    while depth > 0 {
                        match (self.peek(0), self.peek(1)) {
                            (None, _) => {
                                return Err(SyntaxError::new(
                                    start,
                                    "unterminated comment: `(*` has no matching `*)`",
                                ));
                            }
                            (Some('('), Some('*')) => {
                                self.bump();
                                self.bump();
                                depth += 1;
                            }
                            (Some('*'), Some(')')) => {
                                self.bump();
                                self.bump();
                                depth -= 1;
                            }
                            _ => {
                                self.bump();
                            }
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn token(&mut self, c: char, pos: Pos) -> Result<Tok, SyntaxError> {
        if is_ident_start(c) {
            let mut s = String::new();
            while let Some(c) = self.peek(0).filter(|c| is_ident_char(*c)) {
                s.push(c);
                self.bump();
            }
            if let Some(kw) = KEYWORDS.iter().find(|k| **k == s) {
                return Ok(Tok::Kw(kw));
            }
            return Ok(Tok::Ident(s));
        }
        if c.is_ascii_digit() {
            return self.number(pos);
        }
        if c == '"' {
            return self.string(pos);
        }
        if c == '\'' {
            return self.quote(pos);
        }
        if c == '['
            && let Some(h) = self.try_v6_host()
        {
            return Ok(Tok::Host(h));
        }
        for sym in SYMBOLS {
            let matches = sym
                .chars()
                .enumerate()
                .all(|(k, sc)| self.peek(k) == Some(sc));
            if matches {
                for _ in 0..sym.chars().count() {
                    self.bump();
                }
                return Ok(Tok::Sym(sym));
            }
        }
        Err(SyntaxError::new(
            pos,
            format!("unexpected character {c:?} in program text"),
        ))
    }

    fn digits(&mut self) -> String {
        let mut s = String::new();
        while let Some(c) = self.peek(0).filter(char::is_ascii_digit) {
            s.push(c);
            self.bump();
        }
        s
    }

    fn number(&mut self, pos: Pos) -> Result<Tok, SyntaxError> {
        // Dotted quad host literal?
        let mut k = 0;
        let mut dots = 0;
        while let Some(c) = self.peek(k) {
            if c.is_ascii_digit() {
                k += 1;
            } else if c == '.' && self.peek(k + 1).is_some_and(|d| d.is_ascii_digit()) {
                dots += 1;
                k += 1;
            } else {
                break;
            }
        }
        if dots > 0 {
            let text: String = self
                .chars
                .get(self.i..self.i + k)
                .unwrap_or(&[])
                .iter()
                .collect();
            for _ in 0..k {
                self.bump();
            }
            let ip: Ipv4Addr = text.parse().map_err(|_| {
                SyntaxError::new(
                    pos,
                    format!("`{text}` is not a valid IPv4 host literal (expected a.b.c.d with each part 0-255)"),
                )
            })?;
            let port = self.opt_port(pos)?;
            return Ok(Tok::Host(SocketAddr::new(IpAddr::V4(ip), port)));
        }
        let s = self.digits();
        s.parse::<i64>().map(Tok::Int).map_err(|_| {
            SyntaxError::new(
                pos,
                format!("integer literal `{s}` does not fit in 64 bits"),
            )
        })
    }

    fn opt_port(&mut self, pos: Pos) -> Result<u16, SyntaxError> {
        if self.peek(0) == Some(':') && self.peek(1).is_some_and(|d| d.is_ascii_digit()) {
            self.bump();
            let p = self.digits();
            return p.parse::<u16>().map_err(|_| {
                SyntaxError::new(
                    pos,
                    format!("port `{p}` in host literal is not in 0..=65535"),
                )
            });
        }
        Ok(DEFAULT_PORT)
    }

    fn try_v6_host(&mut self) -> Option<SocketAddr> {
        // `[` hex/colon/dot chars `]`
        let mut k = 1;
        let mut text = String::new();
        while let Some(c) = self.peek(k) {
            if c.is_ascii_hexdigit() || c == ':' || c == '.' {
                text.push(c);
                k += 1;
            } else {
                break;
            }
        }
        if self.peek(k) != Some(']') || !text.contains(':') {
            return None;
        }
        let ip: Ipv6Addr = text.parse().ok()?;
        let has_port =
            self.peek(k + 1) == Some(':') && self.peek(k + 2).is_some_and(|d| d.is_ascii_digit());
        let single_colon = text.split("::").any(|part| part.contains(':'));
        if !has_port && !single_colon {
            return None;
        }
        for _ in 0..=k {
            self.bump();
        }
        let port = if has_port {
            self.bump();
            let p = self.digits();
            p.parse::<u16>().ok()?
        } else {
            DEFAULT_PORT
        };
        Some(SocketAddr::new(IpAddr::V6(ip), port))
    }

    fn escape(&mut self, pos: Pos) -> Result<u8, SyntaxError> {
        let Some(c) = self.bump() else {
            return Err(SyntaxError::new(pos, "unterminated escape sequence"));
        };
        Ok(match c {
            'n' => b'\n',
            't' => b'\t',
            'r' => b'\r',
            '\\' => b'\\',
            '"' => b'"',
            '\'' => b'\'',
            d if d.is_ascii_digit() => {
                let mut v = u32::from(d as u8 - b'0');
                for _ in 0..2 {
                    match self.peek(0).filter(char::is_ascii_digit) {
                        Some(d) => {
                            self.bump();
                            v = v * 10 + u32::from(d as u8 - b'0');
                        }
                        None => {
                            return Err(SyntaxError::new(
                                pos,
                                "numeric escape must have exactly three digits, like \\065",
                            ));
                        }
                    }
                }
                u8::try_from(v).map_err(|_| {
                    SyntaxError::new(pos, format!("numeric escape \\{v:03} is larger than 255"))
                })?
            }
            other => {
                return Err(SyntaxError::new(
                    pos,
                    format!("unknown escape sequence `\\{other}`"),
                ));
            }
        })
    }

    fn string(&mut self, pos: Pos) -> Result<Tok, SyntaxError> {
        self.bump();
        let mut out = Vec::new();
        loop {
            match self.bump() {
                None => {
                    return Err(SyntaxError::new(
                        pos,
                        "unterminated string literal: missing closing `\"`",
                    ));
                }
                Some('"') => return Ok(Tok::Str(out)),
                Some('\\') => {
                    let epos = self.pos();
                    out.push(self.escape(epos)?);
                }
                Some(c) => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
    }

    fn quote(&mut self, pos: Pos) -> Result<Tok, SyntaxError> {
        // 'c' char literal, '\n' escaped char, or 'a type variable.
        match (self.peek(1), self.peek(2)) {
            (Some('\\'), _) => {
                self.bump();
                self.bump();
                let b = self.escape(pos)?;
                if self.bump() != Some('\'') {
                    return Err(SyntaxError::new(
                        pos,
                        "character literal must be closed by `'`",
                    ));
                }
                Ok(Tok::Char(b))
            }
            (Some(c), Some('\'')) => {
                self.bump();
                self.bump();
                self.bump();
                if !c.is_ascii() {
                    return Err(SyntaxError::new(
                        pos,
                        format!(
                            "character literal {c:?} is not a single byte (PLAN chars are 8-bit)"
                        ),
                    ));
                }
                Ok(Tok::Char(c as u8))
            }
            (Some(c), _) if is_ident_start(c) => {
                self.bump();
                let mut s = String::new();
                while let Some(c) = self
                    .peek(0)
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    s.push(c);
                    self.bump();
                }
                Ok(Tok::TyVar(s))
            }
            _ => Err(SyntaxError::new(
                pos,
                "stray `'`: expected a character literal like 'a' or a type variable like 'a",
            )),
        }
    }
}
