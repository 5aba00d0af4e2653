//! Front-end error types: syntax errors, type errors and the combined
//! [`CompileError`]. Every error carries the source range it refers to
//! ([`Span`]; an empty span means "the token at `pos`"), a one-line message that says what
//! was expected and what was found, and, where the checker knows them, the expected and
//! found types and a hint. [`crate::diagnostic`] renders them with the source line and a
//! caret under the span.

use crate::ast::{Pos, Span};
use thiserror::Error;

/// A lexical or syntactic error.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("syntax error at {pos}: {msg}")]
pub struct SyntaxError {
    /// Where (the first character of the offending token).
    pub pos: Pos,
    /// Just after the offending text (`pos`: the token at `pos`).
    pub end: Pos,
    /// What went wrong, phrased so the programmer can act on it.
    pub msg: String,
    /// How to fix it, where one helps.
    pub hint: Option<String>,
}

impl SyntaxError {
    /// Builds an error about the token at `pos`.
    pub fn new(pos: Pos, msg: impl Into<String>) -> Self {
        SyntaxError {
            pos,
            end: pos,
            msg: msg.into(),
            hint: None,
        }
    }

    /// The same error with a hint.
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The source range.
    pub fn span(&self) -> Span {
        Span::new(self.pos, self.end)
    }
}

/// A static (type or scoping) error found by the checker.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("type error at {pos}: {msg}")]
pub struct TypeError {
    /// Where (the first character of the offending expression).
    pub pos: Pos,
    /// Just after the offending expression (`pos`: the token at `pos`).
    pub end: Pos,
    /// What was expected and what was found.
    pub msg: String,
    /// The type the context expected, for type mismatches.
    pub expected: Option<String>,
    /// The type the expression has, for type mismatches.
    pub found: Option<String>,
    /// How to fix it, where one helps.
    pub hint: Option<String>,
}

impl TypeError {
    /// Builds an error about the token at `pos`.
    pub fn new(pos: Pos, msg: impl Into<String>) -> Self {
        TypeError::spanned(Span::at(pos), msg)
    }

    /// Builds an error about the source range `span`.
    pub fn spanned(span: Span, msg: impl Into<String>) -> Self {
        TypeError {
            pos: span.start,
            end: span.end,
            msg: msg.into(),
            expected: None,
            found: None,
            hint: None,
        }
    }

    /// The same error with the expected and found types.
    #[must_use]
    pub fn with_types(mut self, expected: String, found: String) -> Self {
        self.expected = Some(expected);
        self.found = Some(found);
        self
    }

    /// The same error with a hint.
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The source range.
    pub fn span(&self) -> Span {
        Span::new(self.pos, self.end)
    }
}

/// Any error that prevents a program from being compiled.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CompileError {
    /// The text does not parse.
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    /// The program does not type-check.
    #[error(transparent)]
    Type(#[from] TypeError),
}

impl CompileError {
    /// Position the error refers to.
    pub fn pos(&self) -> Pos {
        match self {
            CompileError::Syntax(e) => e.pos,
            CompileError::Type(e) => e.pos,
        }
    }

    /// The source range the error refers to.
    pub fn span(&self) -> Span {
        match self {
            CompileError::Syntax(e) => e.span(),
            CompileError::Type(e) => e.span(),
        }
    }

    /// The one-line message (without position).
    pub fn message(&self) -> &str {
        match self {
            CompileError::Syntax(e) => &e.msg,
            CompileError::Type(e) => &e.msg,
        }
    }

    /// The hint, if any.
    pub fn hint(&self) -> Option<&str> {
        match self {
            CompileError::Syntax(e) => e.hint.as_deref(),
            CompileError::Type(e) => e.hint.as_deref(),
        }
    }
}
