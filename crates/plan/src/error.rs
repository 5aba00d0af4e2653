//! Front-end error types: syntax errors, type errors and the combined
//! [`CompileError`]. Every error carries the source position it refers to
//! and a message that says what was expected and what was found.

use crate::ast::Pos;
use thiserror::Error;

/// A lexical or syntactic error.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("syntax error at {pos}: {msg}")]
pub struct SyntaxError {
    /// Where.
    pub pos: Pos,
    /// What went wrong, phrased so the programmer can act on it.
    pub msg: String,
}

impl SyntaxError {
    /// Builds an error.
    pub fn new(pos: Pos, msg: impl Into<String>) -> Self {
        SyntaxError {
            pos,
            msg: msg.into(),
        }
    }
}

/// A static (type or scoping) error found by the checker.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("type error at {pos}: {msg}")]
pub struct TypeError {
    /// Where.
    pub pos: Pos,
    /// What was expected and what was found.
    pub msg: String,
}

impl TypeError {
    /// Builds an error.
    pub fn new(pos: Pos, msg: impl Into<String>) -> Self {
        TypeError {
            pos,
            msg: msg.into(),
        }
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
}
