//! Compile errors as a modern compiler shows them: the source line, a caret under the
//! offending range, the expected and found types, and a hint ([`Diagnostic::render`], on
//! `codespan-reporting`); the same facts as plain data for tools ([`Diagnostic`]'s fields,
//! which `anode plan check --json` prints).
//!
//! Contract: [`Diagnostic::new`] never panics, whatever the source and the error's position
//! (a position past the end of the text is clamped to it); `end` is always at or after
//! `start`. An error whose span is empty (`end == pos`: "the token at `pos`") is widened to
//! that token by lexing the source.

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::termcolor::Buffer;
use codespan_reporting::term::{self, Config};

use crate::ast::Pos;
use crate::error::CompileError;
use crate::lexer::lex;

/// Which phase refused the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Lexing or parsing.
    Syntax,
    /// Type checking or name resolution.
    Type,
}

impl Phase {
    /// `"syntax"` or `"type"`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Syntax => "syntax",
            Phase::Type => "type",
        }
    }
}

/// One compile error, resolved against its source text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Which phase refused the program.
    pub phase: Phase,
    /// The one-line message.
    pub message: String,
    /// First character of the offending range (1-based line and column).
    pub start: Pos,
    /// Just after its last character.
    pub end: Pos,
    /// The type the context expected, for type mismatches.
    pub expected: Option<String>,
    /// The type found, for type mismatches.
    pub found: Option<String>,
    /// How to fix it, where one helps.
    pub hint: Option<String>,
}

impl Diagnostic {
    /// The diagnostic for `err` in `source`.
    pub fn new(source: &str, err: &CompileError) -> Diagnostic {
        let span = err.span();
        let start = clamp(source, span.start);
        let end = if span.end == span.start {
            token_end(source, start)
        } else {
            clamp(source, span.end)
        };
        let end = if (end.line, end.col) < (start.line, start.col) {
            start
        } else {
            end
        };
        let (phase, expected, found) = match err {
            CompileError::Syntax(_) => (Phase::Syntax, None, None),
            CompileError::Type(t) => (Phase::Type, t.expected.clone(), t.found.clone()),
        };
        Diagnostic {
            phase,
            message: err.message().to_string(),
            start,
            end,
            expected,
            found,
            hint: err.hint().map(str::to_string),
        }
    }

    /// `FILE:LINE:COL: syntax|type error: message` — one line, for logs and terse output.
    pub fn one_line(&self, file: &str) -> String {
        format!(
            "{file}:{}:{}: {} error: {}",
            self.start.line,
            self.start.col,
            self.phase.name(),
            self.message
        )
    }

    /// The diagnostic as a compiler prints it: header, the source line with a caret under
    /// the range, the expected and found types and the hint; ANSI colors if `color`.
    pub fn render(&self, file: &str, source: &str, color: bool) -> String {
        let files = SimpleFile::new(file, source);
        let from = byte_offset(source, self.start);
        let to = byte_offset(source, self.end).max(from);
        let label = match (&self.expected, &self.found) {
            (Some(e), Some(f)) => format!("expected {e}, found {f}"),
            _ => String::new(),
        };
        let mut notes = Vec::new();
        if let (Some(e), Some(f)) = (&self.expected, &self.found) {
            notes.push(format!("expected type: {e}\n   found type: {f}"));
        }
        if let Some(h) = &self.hint {
            notes.push(format!("hint: {h}"));
        }
        let diag = CsDiagnostic::error()
            .with_message(format!("{} error: {}", self.phase.name(), self.message))
            .with_labels(vec![Label::primary((), from..to).with_message(label)])
            .with_notes(notes);
        let mut buf = if color {
            Buffer::ansi()
        } else {
            Buffer::no_color()
        };
        match term::emit_to_write_style(&mut buf, &Config::default(), &files, &diag) {
            Ok(()) => String::from_utf8_lossy(buf.as_slice()).into_owned(),
            // The range is clamped to the text, so this is not expected; fall back to the
            // one-line form rather than lose the error.
            Err(_) => format!("{}\n", self.one_line(file)),
        }
    }
}

/// The byte offset of `p` in `source` (clamped to the text).
fn byte_offset(source: &str, p: Pos) -> usize {
    let mut line = 1u32;
    let mut line_start = 0usize;
    if p.line > 1 {
        for (i, c) in source.char_indices() {
            if c == '\n' {
                line += 1;
                line_start = i + 1;
                if line == p.line {
                    break;
                }
            }
        }
        if line < p.line {
            return source.len();
        }
    }
    let rest = source.get(line_start..).unwrap_or("");
    for (col, (i, c)) in (1u32..).zip(rest.char_indices()) {
        if col == p.col || c == '\n' {
            return line_start + i;
        }
    }
    source.len()
}

/// The position of byte offset `off` of `source`.
fn pos_of(source: &str, off: usize) -> Pos {
    let mut p = Pos { line: 1, col: 1 };
    for (i, c) in source.char_indices() {
        if i >= off {
            break;
        }
        if c == '\n' {
            p.line += 1;
            p.col = 1;
        } else {
            p.col += 1;
        }
    }
    p
}

/// `p` moved onto the text if it points past it.
fn clamp(source: &str, p: Pos) -> Pos {
    pos_of(source, byte_offset(source, p))
}

/// The end of the token starting at `p` (one character if the text does not lex there).
fn token_end(source: &str, p: Pos) -> Pos {
    if let Ok(toks) = lex(source)
        && let Some(t) = toks.iter().find(|t| t.pos == p)
        && t.end != t.pos
    {
        return t.end;
    }
    let off = byte_offset(source, p);
    let next = source
        .get(off..)
        .and_then(|r| r.chars().next())
        .filter(|c| *c != '\n')
        .map_or(off, |c| off + c.len_utf8());
    pos_of(source, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Interpreter;

    fn diag(src: &str) -> Diagnostic {
        let e = Interpreter::with_core().compile(src).unwrap_err();
        Diagnostic::new(src, &e)
    }

    #[test]
    fn caret_under_the_expression_with_types() {
        let src = "fun f() : int =\n  1 + \"two\"\n";
        let d = diag(src);
        assert_eq!(
            (d.start, d.end),
            (Pos { line: 2, col: 7 }, Pos { line: 2, col: 12 })
        );
        assert_eq!(d.expected.as_deref(), Some("int"));
        assert_eq!(d.found.as_deref(), Some("string"));
        let out = d.render("f.plan", src, false);
        assert!(out.contains("f.plan:2:7"), "{out}");
        assert!(out.contains("1 + \"two\""), "{out}");
        assert!(out.contains("^^^^^"), "{out}");
        assert!(out.contains("hint: convert with stringToInt(s)"), "{out}");
    }

    #[test]
    fn syntax_errors_underline_the_token_and_hint() {
        let src = "fun f() : int = 5 - 3";
        let d = diag(src);
        assert_eq!((d.start.col, d.end.col), (19, 20));
        assert!(d.hint.as_deref().is_some_and(|h| h.contains("--")));
        let src = "fun f() = (* open";
        let d = diag(src);
        assert_eq!(d.phase, Phase::Syntax);
        assert!(d.render("x", src, true).contains("unterminated comment"));
    }

    #[test]
    fn positions_past_the_text_are_clamped() {
        let src = "fun f() =";
        let e = CompileError::Syntax(crate::SyntaxError::new(Pos { line: 9, col: 99 }, "x"));
        let d = Diagnostic::new(src, &e);
        assert_eq!(d.start, Pos { line: 1, col: 10 });
        assert!(d.render("x", src, false).contains("syntax error: x"));
        let d = Diagnostic::new("", &e);
        assert_eq!(d.start, Pos { line: 1, col: 1 });
        assert!(!d.render("x", "", false).is_empty());
    }
}
