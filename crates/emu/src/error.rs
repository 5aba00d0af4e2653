//! Errors of the emulator: a topology file that does not make sense (with file, line, column
//! and what to change) and failures to run one.

use std::ops::Range;

/// Why a topology file was rejected or a run could not happen. Every message says where and
/// what to change.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// The file could not be read.
    #[error(
        "{file}: cannot read the topology file: {source}\n  fix: check the path and that the file is readable"
    )]
    Read {
        /// The file as named by the caller.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file was read but something in it is wrong.
    #[error("{file}:{line}:{column}: {message}\n  fix: {fix}")]
    Invalid {
        /// The file as named by the caller.
        file: String,
        /// 1-based line of the offending text.
        line: usize,
        /// 1-based column (in characters) of the offending text.
        column: usize,
        /// What is wrong.
        message: String,
        /// What to change.
        fix: String,
    },
    /// A node refused its configuration (should not happen once the file validated).
    #[error("node '{node}' could not be created: {reason}")]
    Node {
        /// The node's name.
        node: String,
        /// What the node core said.
        reason: String,
    },
    /// The realtime driver failed (sockets, threads).
    #[error("realtime run failed: {0}")]
    Realtime(String),
}

/// A problem at a byte range of the source, before the file name is known to the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanError {
    /// Byte range in the source text (empty range: the start of the enclosing table).
    pub span: Range<usize>,
    /// What is wrong.
    pub message: String,
    /// What to change.
    pub fix: String,
}

impl SpanError {
    /// A problem at `span` with the fix.
    pub fn new(span: Range<usize>, message: impl Into<String>, fix: impl Into<String>) -> Self {
        SpanError {
            span,
            message: message.into(),
            fix: fix.into(),
        }
    }

    /// Turns it into an [`EmuError::Invalid`] naming `file`, with line and column from `src`.
    pub fn in_file(self, file: &str, src: &str) -> EmuError {
        let (line, column) = line_col(src, self.span.start);
        EmuError::Invalid {
            file: file.to_string(),
            line,
            column,
            message: self.message,
            fix: self.fix,
        }
    }
}

/// 1-based line and column (in characters) of byte `offset` in `src`.
pub fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let mut off = offset.min(src.len());
    while off > 0 && !src.is_char_boundary(off) {
        off -= 1;
    }
    let before = src.get(..off).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column() {
        let s = "a = 1\nbb = 2\n";
        assert_eq!(line_col(s, 0), (1, 1));
        assert_eq!(line_col(s, 6), (2, 1));
        assert_eq!(line_col(s, 8), (2, 3));
        assert_eq!(line_col(s, 999), (3, 1));
    }
}
