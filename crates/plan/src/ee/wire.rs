//! PLAN packets on the anode wire: ANEP (Type ID [`TYPE_PLAN`]) + transit header + PLAN body.
//!
//! Contract:
//! * the transit header carries `evalDest` (its `dst`), the source, the resource bound, the
//!   flow id and the previous hop; [`FLAG_EE_ROUTE`] is set iff the routing function is not
//!   `defaultRoute` or the packet names a handler, so intermediate nodes forward
//!   `defaultRoute` packets without a handler on the core's fast path without entering the EE;
//! * the PLAN body ([`crate::packet`]) follows: session, routFun, handler, marshalled chunk;
//! * [`build_packet`] turns program text and an entry call `f(args)` into such a packet,
//!   type-checking the call against the program; nothing here panics on any input.

use std::net::SocketAddr;

use anode_core::wire::anep::TYPE_PLAN;
use anode_core::wire::transit::{FLAG_EE_ROUTE, TransitRepr};
use anode_core::wire::{NodeAddr, routed_packet};
use thiserror::Error;

use crate::packet::{PlanHeader, encode_body_raw};
use crate::parser::Dialect;
use crate::testing::FakeServices;
use crate::value::Chunk;
use crate::{CompileError, EvalContext, Interpreter, Limits, Program, Value, marshal};
use std::sync::Arc;

/// Name of the built-in default routing function.
pub const DEFAULT_ROUTE: &str = "defaultRoute";

/// Everything of a PLAN packet except its chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketSpec {
    /// Source (where the handler runs; `getSource`).
    pub src: NodeAddr,
    /// Evaluation destination.
    pub eval_dest: NodeAddr,
    /// Resource bound (hops the packet and its children may travel in total).
    pub rb: u16,
    /// Flow id (flow-based routing functions key on it).
    pub flow: u64,
    /// Session: the application port at the source (`getImplicitPort`).
    pub session: u32,
    /// Routing function name (`defaultRoute` or one registered on the nodes).
    pub route_fun: String,
    /// Error handler function at the source (empty: none).
    pub handler: String,
}

impl PacketSpec {
    /// A packet from `src` to `eval_dest` with resource bound `rb`, routed by `defaultRoute`,
    /// session 0, flow 0, no handler.
    pub fn new(src: NodeAddr, eval_dest: NodeAddr, rb: u16) -> Self {
        PacketSpec {
            src,
            eval_dest,
            rb,
            flow: 0,
            session: 0,
            route_fun: DEFAULT_ROUTE.to_string(),
            handler: String::new(),
        }
    }
}

/// Why a packet could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BuildError {
    /// The program does not compile.
    #[error("{0}")]
    Program(CompileError),
    /// The entry call is not of the form `f(args)`.
    #[error("entry `{0}` is not a call of the form f(arg, ...)")]
    EntrySyntax(String),
    /// The entry call does not compile against the program (unknown function, ill-typed
    /// arguments).
    #[error("entry `{entry}`: {reason}")]
    Entry {
        /// The entry text.
        entry: String,
        /// Why.
        reason: String,
    },
    /// The packet is larger than an ANEP packet can be.
    #[error("packet too large: {0}")]
    TooLarge(String),
    /// The routing function or handler name is not a PLAN identifier.
    #[error("{0} is not a valid PLAN identifier")]
    BadName(String),
}

/// Builds the whole ANEP packet for `spec` and already-marshalled chunk bytes.
pub fn encode_packet(spec: &PacketSpec, chunk_bytes: &[u8]) -> Result<Vec<u8>, BuildError> {
    for n in [&spec.route_fun, &spec.handler] {
        if n.len() > 255 || !(n.is_empty() || crate::packet::is_ident(n)) {
            return Err(BuildError::BadName(n.clone()));
        }
    }
    if spec.route_fun.is_empty() {
        return Err(BuildError::BadName("(empty routing function)".into()));
    }
    let body = encode_body_raw(
        &PlanHeader {
            session: spec.session,
            route_fun: spec.route_fun.clone(),
            handler: spec.handler.clone(),
        },
        chunk_bytes,
    );
    let t = TransitRepr {
        // Packets routed by another function, or naming a handler (which must hear of a
        // resource bound running out on the way), enter the EE at every hop.
        flags: if spec.route_fun == DEFAULT_ROUTE && spec.handler.is_empty() {
            0
        } else {
            FLAG_EE_ROUTE
        },
        rb: spec.rb,
        flow: spec.flow,
        src: spec.src,
        dst: spec.eval_dest,
        prev_hop: spec.src,
    };
    routed_packet(TYPE_PLAN, &t, &[], &body).map_err(|e| BuildError::TooLarge(e.to_string()))
}

/// Builds the packet for `spec` carrying `chunk`.
pub fn encode_packet_chunk(spec: &PacketSpec, chunk: &Chunk) -> Result<Vec<u8>, BuildError> {
    encode_packet(spec, &marshal::encode_chunk(chunk))
}

/// Removes comments (keeping the newlines inside them), indentation and runs of blanks
/// outside string and character literals, so that programs travel smaller; line numbers are
/// unchanged. Callers should fall back to the original text if the result does not compile
/// (only a pathological program could make that happen).
pub fn compact_source(text: &str) -> String {
    let cs: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut line_start = true;
    let at = |k: usize| cs.get(k).copied();
    while let Some(c) = at(i) {
        match c {
            '"' => {
                out.push(c);
                i += 1;
                while let Some(d) = at(i) {
                    out.push(d);
                    i += 1;
                    if d == '\\' {
                        if let Some(e) = at(i) {
                            out.push(e);
                            i += 1;
                        }
                    } else if d == '"' {
                        break;
                    }
                }
                line_start = false;
            }
            '\'' if at(i + 1) == Some('\\') || at(i + 2) == Some('\'') => {
                // A character literal: copy up to its closing quote.
                out.push(c);
                i += 1;
                let mut n = 0;
                while let Some(d) = at(i) {
                    out.push(d);
                    i += 1;
                    n += 1;
                    if (d == '\'' && n > 1) || n > 4 {
                        break;
                    }
                }
                line_start = false;
            }
            '(' if at(i + 1) == Some('*') => {
                let mut depth = 0u32;
                while let Some(d) = at(i) {
                    if d == '(' && at(i + 1) == Some('*') {
                        depth += 1;
                        i += 2;
                    } else if d == '*' && at(i + 1) == Some(')') {
                        depth = depth.saturating_sub(1);
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        if d == '\n' {
                            out.push('\n');
                            line_start = true;
                        }
                        i += 1;
                    }
                }
                if !line_start && !out.ends_with(' ') {
                    out.push(' ');
                }
            }
            '\n' => {
                while out.ends_with(' ') {
                    out.pop();
                }
                out.push('\n');
                line_start = true;
                i += 1;
            }
            c if c.is_whitespace() => {
                if !line_start && !out.ends_with(' ') {
                    out.push(' ');
                }
                i += 1;
            }
            c => {
                out.push(c);
                line_start = false;
                i += 1;
            }
        }
    }
    out
}

const ENTRY_FN: &str = "anode__entry__";

/// Compiles `program_text` and the entry call `entry` (e.g. `ping(10.0.0.1, 10.0.0.4)`)
/// into the chunk `|f|(args)` carrying the program. Argument expressions are type-checked
/// against `f` and evaluated at `src` (so `thisHost()` there means the source).
pub fn build_chunk(
    interp: &Interpreter,
    program_text: &str,
    entry: &str,
    src: SocketAddr,
) -> Result<Chunk, BuildError> {
    // Programs travel without their comments and indentation (line numbers are kept).
    let compact = compact_source(program_text);
    let program_text = match interp.compile(&compact) {
        Ok(_) => compact.as_str(),
        Err(_) => program_text,
    };
    let prog = interp.compile(program_text).map_err(BuildError::Program)?;
    let entry = entry.trim();
    let (name, rest) = entry
        .split_once('(')
        .ok_or_else(|| BuildError::EntrySyntax(entry.to_string()))?;
    let name = name.trim();
    if !crate::packet::is_ident(name) || !rest.trim_end().ends_with(')') {
        return Err(BuildError::EntrySyntax(entry.to_string()));
    }
    let wrapper = format!("{program_text}\nfun {ENTRY_FN}() = |{name}|({rest}\n");
    // Host literals are allowed in the entry call only (the program already compiled without).
    let wprog = Program::compile_in(&wrapper, interp.registry(), Dialect::Entry)
        .map(Arc::new)
        .map_err(|e| BuildError::Entry {
            entry: entry.to_string(),
            reason: match &e {
                CompileError::Syntax(s) => s.msg.clone(),
                CompileError::Type(t) => t.msg.clone(),
            },
        })?;
    let mut fake = FakeServices::at(src);
    let ctx = EvalContext {
        source: src,
        src_dev: 0,
        implicit_port: 0,
        rb: 0,
    };
    let ev = interp
        .eval_function(&wprog, ENTRY_FN, vec![], &mut fake, ctx, Limits::default())
        .map_err(|e| BuildError::Entry {
            entry: entry.to_string(),
            reason: e.to_string(),
        })?;
    let value = ev.result.map_err(|r| BuildError::Entry {
        entry: entry.to_string(),
        reason: format!("evaluating the arguments raised {r}"),
    })?;
    let Value::Chunk(c) = value else {
        return Err(BuildError::EntrySyntax(entry.to_string()));
    };
    let code = c.code.as_ref().map(|_| prog.code().clone());
    Chunk::new(code, c.func.clone(), c.args.clone())
        .map_err(|e| BuildError::TooLarge(e.to_string()))
}

/// The bytes `authEval` checks a signature against for the chunk `call` (e.g. `secret()`)
/// of `program_text`: the chunk marshalled with the program as it travels (compacted), its
/// arguments evaluated at `src`. Sign these to let a node that trusts the key run it.
pub fn chunk_signing_bytes(
    interp: &Interpreter,
    program_text: &str,
    call: &str,
    src: SocketAddr,
) -> Result<Vec<u8>, BuildError> {
    build_chunk(interp, program_text, call, src).map(|c| marshal::encode_chunk(&c))
}

/// Builds a PLAN packet: compiles `program_text`, evaluates the entry call's arguments at
/// `spec.src` and encodes everything for `spec`. Inject the result with `Node::inject` at
/// the source.
pub fn build_packet(
    interp: &Interpreter,
    program_text: &str,
    entry: &str,
    spec: &PacketSpec,
) -> Result<Vec<u8>, BuildError> {
    let chunk = build_chunk(interp, program_text, entry, spec.src.socket_addr())?;
    encode_packet_chunk(spec, &chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_keeps_lines_strings_and_chars() {
        let src = "(* a\n comment *)\nfun f() =\n    print(\"(* not   a comment *)\" ^ toString('('))  (* x *)\n";
        let c = compact_source(src);
        assert_eq!(
            c,
            "\n\nfun f() =\nprint(\"(* not   a comment *)\" ^ toString('('))\n"
        );
        let interp = Interpreter::with_core();
        assert!(interp.compile(&c).is_ok());
    }

    #[test]
    fn entry_calls_are_checked() {
        let interp = Interpreter::with_core();
        let src: SocketAddr = "10.0.0.1:3322".parse().unwrap();
        let text = "fun f(n : int) = print(n)";
        let c = build_chunk(&interp, text, "f(1 + 2)", src).unwrap();
        assert_eq!(c.args, vec![Value::Int(3)]);
        assert!(matches!(
            build_chunk(&interp, text, "f(\"x\")", src),
            Err(BuildError::Entry { .. })
        ));
        assert!(matches!(
            build_chunk(&interp, text, "f", src),
            Err(BuildError::EntrySyntax(_))
        ));
        assert!(matches!(
            build_chunk(&interp, "fun (", "f()", src),
            Err(BuildError::Program(_))
        ));
    }
}
