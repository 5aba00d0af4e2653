//! A GML (Graph Modelling Language) parser: text to a tree of keyed values with positions.
//!
//! ```text
//! graph [                     # a comment
//!   label "Abilene"
//!   node [ id 0 label "New York" Latitude 40.71 Longitude -74.01 ]
//!   edge [ source 0 target 1 LinkSpeedRaw 10000000000.0 ]
//! ]
//! ```
//!
//! The grammar (GML as Topology Zoo, networkx and igraph write it): a file is a list; a list
//! is a sequence of `key value` pairs; a key is `[A-Za-z_][A-Za-z0-9_]*`; a value is an
//! integer (one that does not fit i64 is read as a real), a real (`1.5`, `-.5`, `1e10`,
//! `INF`, `NAN`), a `"string"` or a `[ list ]`. `#` starts a comment to the end of the line
//! (outside strings). Strings may span lines; `\"`, `\\`, `\n`, `\t`, `\r` are escapes (any
//! other backslash is kept as written), and HTML character references (`&#233;`, `&#xE9;`,
//! `&amp;`, `&quot;`, `&lt;`, `&gt;`, `&apos;`) are decoded, as GML's ISO-8859-1 files use
//! them for other characters.
//!
//! Contract: [`parse`] returns the entries in file order or an error with the 1-based line
//! and column (in characters) of the offending token and the reason; it never panics, and
//! nesting is limited to [`MAX_DEPTH`] lists (the parser uses no recursion). [`decode`] turns
//! bytes into text: UTF-8 if they are, else ISO-8859-1 (every byte one character).

use crate::error::SyntaxError;

/// How deeply lists may nest.
pub const MAX_DEPTH: usize = 128;

/// A 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub col: usize,
}

/// A GML value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An integer.
    Int(i64),
    /// A real (also integers too large for i64).
    Real(f64),
    /// A string, escapes and character references decoded.
    Str(String),
    /// A list of entries.
    List(Vec<Entry>),
}

/// One `key value` pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Value,
    /// Where the key is.
    pub pos: Pos,
}

/// Why GML text did not parse, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct GmlError {
    /// Where the problem is.
    pub pos: Pos,
    /// What it is.
    pub reason: SyntaxError,
}

impl Value {
    /// The entries, if a list.
    pub fn as_list(&self) -> Option<&[Entry]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    /// The number, if an integer or a real.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Int(i) => Some(i as f64),
            Value::Real(r) => Some(r),
            _ => None,
        }
    }

    /// A scalar as text (numbers as written by Rust; lists have none).
    pub fn as_text(&self) -> Option<String> {
        match self {
            Value::Int(i) => Some(i.to_string()),
            Value::Real(r) => Some(r.to_string()),
            Value::Str(s) => Some(s.clone()),
            Value::List(_) => None,
        }
    }
}

/// The first entry with `key` (GML keys are case-sensitive).
pub fn find<'a>(list: &'a [Entry], key: &str) -> Option<&'a Entry> {
    list.iter().find(|e| e.key == key)
}

/// Bytes as text: UTF-8 if valid, else ISO-8859-1.
pub fn decode(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => bytes.iter().map(|&b| char::from(b)).collect(),
    }
}

/// Parses GML text into its top-level entries.
pub fn parse(src: &str) -> Result<Vec<Entry>, GmlError> {
    let mut lex = Lexer::new(src);
    // Open lists: the parent's entries so far, and the open list's key and position.
    let mut stack: Vec<(Vec<Entry>, String, Pos)> = Vec::new();
    let mut current: Vec<Entry> = Vec::new();
    loop {
        let (tok, pos) = lex.next_token()?;
        match tok {
            Tok::Key(key) => {
                let (value, vpos) = lex.next_token()?;
                let value = match value {
                    Tok::Int(i) => Value::Int(i),
                    Tok::Real(r) => Value::Real(r),
                    Tok::Str(s) => Value::Str(s),
                    Tok::Key(w) if is_special_real(&w) => Value::Real(special_real(&w)),
                    Tok::Open => {
                        if stack.len() >= MAX_DEPTH {
                            return Err(GmlError {
                                pos: vpos,
                                reason: SyntaxError::TooDeep(MAX_DEPTH),
                            });
                        }
                        stack.push((std::mem::take(&mut current), key, pos));
                        continue;
                    }
                    other => {
                        return Err(GmlError {
                            pos: vpos,
                            reason: SyntaxError::ExpectedValue {
                                key,
                                found: other.describe(),
                            },
                        });
                    }
                };
                current.push(Entry { key, value, pos });
            }
            Tok::Close => {
                let Some((parent, key, kpos)) = stack.pop() else {
                    return Err(GmlError {
                        pos,
                        reason: SyntaxError::UnexpectedClose,
                    });
                };
                let list = std::mem::replace(&mut current, parent);
                current.push(Entry {
                    key,
                    value: Value::List(list),
                    pos: kpos,
                });
            }
            Tok::Eof => {
                return match stack.pop() {
                    None => Ok(current),
                    Some((_, key, kpos)) => Err(GmlError {
                        pos: kpos,
                        reason: SyntaxError::UnclosedList {
                            key,
                            line: kpos.line,
                            col: kpos.col,
                        },
                    }),
                };
            }
            other => {
                return Err(GmlError {
                    pos,
                    reason: SyntaxError::ExpectedKey {
                        found: other.describe(),
                    },
                });
            }
        }
    }
}

fn is_special_real(w: &str) -> bool {
    ["nan", "inf", "infinity"]
        .iter()
        .any(|s| w.eq_ignore_ascii_case(s))
}

fn special_real(w: &str) -> f64 {
    if w.eq_ignore_ascii_case("nan") {
        f64::NAN
    } else {
        f64::INFINITY
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Key(String),
    Int(i64),
    Real(f64),
    Str(String),
    Open,
    Close,
    Eof,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Key(k) => format!("the word '{k}'"),
            Tok::Int(i) => format!("the number {i}"),
            Tok::Real(r) => format!("the number {r}"),
            Tok::Str(_) => "a string".into(),
            Tok::Open => "'['".into(),
            Tok::Close => "']'".into(),
            Tok::Eof => "the end of the file".into(),
        }
    }
}

struct Lexer<'a> {
    it: std::str::Chars<'a>,
    pos: Pos,
}

impl<'a> Lexer<'a> {
    fn new(src: &'a str) -> Self {
        Lexer {
            it: src.chars(),
            pos: Pos { line: 1, col: 1 },
        }
    }

    fn peek(&self) -> Option<char> {
        self.it.clone().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.it.next()?;
        if c == '\n' {
            self.pos.line += 1;
            self.pos.col = 1;
        } else {
            self.pos.col += 1;
        }
        Some(c)
    }

    fn skip_blanks(&mut self) {
        while let Some(c) = self.peek() {
            if c == '#' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else if c.is_whitespace() {
                self.bump();
            } else {
                break;
            }
        }
    }

    fn next_token(&mut self) -> Result<(Tok, Pos), GmlError> {
        self.skip_blanks();
        let pos = self.pos;
        let Some(c) = self.peek() else {
            return Ok((Tok::Eof, pos));
        };
        let tok = match c {
            '[' => {
                self.bump();
                Tok::Open
            }
            ']' => {
                self.bump();
                Tok::Close
            }
            '"' => {
                self.bump();
                Tok::Str(self.string(pos)?)
            }
            c if c.is_ascii_digit() || c == '+' || c == '-' || c == '.' => self.number(pos)?,
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut w = String::new();
                while let Some(c) = self
                    .peek()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    w.push(c);
                    self.bump();
                }
                Tok::Key(w)
            }
            c => {
                return Err(GmlError {
                    pos,
                    reason: SyntaxError::UnexpectedChar(c),
                });
            }
        };
        Ok((tok, pos))
    }

    /// After the opening quote; `open` is its position.
    fn string(&mut self, open: Pos) -> Result<String, GmlError> {
        let mut s = String::new();
        loop {
            match self.bump() {
                None => {
                    return Err(GmlError {
                        pos: open,
                        reason: SyntaxError::UnterminatedString,
                    });
                }
                Some('"') => return Ok(decode_entities(&s)),
                Some('\\') => match self.peek() {
                    Some(e @ ('"' | '\\' | 'n' | 't' | 'r')) => {
                        self.bump();
                        s.push(match e {
                            'n' => '\n',
                            't' => '\t',
                            'r' => '\r',
                            other => other,
                        });
                    }
                    _ => s.push('\\'),
                },
                Some(c) => s.push(c),
            }
        }
    }

    fn number(&mut self, pos: Pos) -> Result<Tok, GmlError> {
        let mut w = String::new();
        while let Some(c) = self
            .peek()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.' | '_'))
        {
            w.push(c);
            self.bump();
        }
        let digits = w.strip_prefix(['+', '-']).unwrap_or(&w);
        if !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && let Ok(i) = w.parse::<i64>()
        {
            return Ok(Tok::Int(i));
        }
        // Rust's float syntax is GML's plus "inf"/"nan" words, which GML writers also use.
        match w.parse::<f64>() {
            Ok(r) if !w.contains('_') => Ok(Tok::Real(r)),
            _ => Err(GmlError {
                pos,
                reason: SyntaxError::BadNumber(w),
            }),
        }
    }
}

/// Decodes `&#NNN;`, `&#xHH;` and the XML named references; anything else stays as written.
fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        let (before, from_amp) = rest.split_at(amp);
        out.push_str(before);
        // A reference is at most a dozen characters up to ';'.
        let semi = from_amp.char_indices().take(12).find(|&(_, c)| c == ';');
        let decoded = semi.and_then(|(i, _)| {
            let name = from_amp.get(1..i)?;
            let c = match name {
                "amp" => Some('&'),
                "quot" => Some('"'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "apos" => Some('\''),
                "nbsp" => Some('\u{a0}'),
                _ => {
                    let n = if let Some(h) = name.strip_prefix("#x").or(name.strip_prefix("#X")) {
                        u32::from_str_radix(h, 16).ok()
                    } else {
                        name.strip_prefix('#').and_then(|d| d.parse::<u32>().ok())
                    };
                    n.and_then(char::from_u32).filter(|c| *c != '\0')
                }
            }?;
            Some((c, i + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = from_amp.get(len..).unwrap_or("");
            }
            None => {
                out.push('&');
                rest = from_amp.get(1..).unwrap_or("");
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(src: &str) -> (usize, usize, SyntaxError) {
        let e = parse(src).unwrap_err();
        (e.pos.line, e.pos.col, e.reason)
    }

    #[test]
    fn parses_nested_lists_numbers_strings_and_comments() {
        let src = "# header\nCreator \"x\"\ngraph [\n  directed 0 # undirected\n  node [ id 0 label \"A &amp; B\" Latitude -33.86 ]\n  edge [ source 0 target 1 LinkSpeedRaw 1.0E10 big 99999999999999999999 ]\n]\n";
        let top = parse(src).unwrap();
        assert_eq!(top.len(), 2);
        let g = find(&top, "graph").unwrap();
        assert_eq!(g.pos, Pos { line: 3, col: 1 });
        let g = g.value.as_list().unwrap();
        let node = find(g, "node").unwrap().value.as_list().unwrap();
        assert_eq!(
            find(node, "label").unwrap().value,
            Value::Str("A & B".into())
        );
        assert_eq!(find(node, "Latitude").unwrap().value, Value::Real(-33.86));
        let edge = find(g, "edge").unwrap();
        assert_eq!(edge.pos, Pos { line: 6, col: 3 });
        let edge = edge.value.as_list().unwrap();
        assert_eq!(
            find(edge, "LinkSpeedRaw").unwrap().value.as_f64(),
            Some(1e10)
        );
        assert_eq!(find(edge, "big").unwrap().value.as_f64(), Some(1e20));
    }

    #[test]
    fn strings_escapes_references_and_specials() {
        let top = parse(
            "a \"q\\\"x\\\\y\\z\" b \"S&#227;o &#xE9;&bogus; & &#0;\" c NAN d -INF e .5 f \"two\nlines\"",
        )
        .unwrap();
        assert_eq!(top[0].value, Value::Str("q\"x\\y\\z".into()));
        assert_eq!(top[1].value, Value::Str("São é&bogus; & &#0;".into()));
        assert!(matches!(top[2].value, Value::Real(r) if r.is_nan()));
        assert_eq!(top[3].value, Value::Real(f64::NEG_INFINITY));
        assert_eq!(top[4].value, Value::Real(0.5));
        assert_eq!(top[5].value, Value::Str("two\nlines".into()));
        assert_eq!(top[5].pos, Pos { line: 1, col: 67 });
    }

    #[test]
    fn errors_name_line_column_and_reason() {
        assert_eq!(
            err("graph [\n  node [ id 0 ]\n"),
            (
                1,
                1,
                SyntaxError::UnclosedList {
                    key: "graph".into(),
                    line: 1,
                    col: 1
                }
            )
        );
        assert_eq!(
            err("graph [\n  label \"oops\n]\n"),
            (2, 9, SyntaxError::UnterminatedString)
        );
        assert_eq!(
            err("graph [ id 1.2.3 ]"),
            (1, 12, SyntaxError::BadNumber("1.2.3".into()))
        );
        assert_eq!(err("graph [ ] ]"), (1, 11, SyntaxError::UnexpectedClose));
        assert_eq!(
            err("graph [ node ]"),
            (
                1,
                14,
                SyntaxError::ExpectedValue {
                    key: "node".into(),
                    found: "']'".into()
                }
            )
        );
        assert_eq!(
            err("graph [ 5 ]"),
            (
                1,
                9,
                SyntaxError::ExpectedKey {
                    found: "the number 5".into()
                }
            )
        );
        assert_eq!(
            err("graph [\n\tid @ ]"),
            (2, 5, SyntaxError::UnexpectedChar('@'))
        );
        assert_eq!(
            err("a b"),
            (
                1,
                3,
                SyntaxError::ExpectedValue {
                    key: "a".into(),
                    found: "the word 'b'".into()
                }
            )
        );
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let src = "a [ ".repeat(100_000);
        let e = parse(&src).unwrap_err();
        assert_eq!(e.reason, SyntaxError::TooDeep(MAX_DEPTH));
        let ok = format!("{}{}", "a [ ".repeat(MAX_DEPTH), "] ".repeat(MAX_DEPTH));
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn latin1_bytes_decode() {
        assert_eq!(decode(b"S\xe3o"), "São");
        assert_eq!(decode("São".as_bytes()), "São");
    }
}
