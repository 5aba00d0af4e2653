//! # anode-plan — the PLAN language for anode
//!
//! Contract: The PLAN language and EE: a program is type-checked before it runs, evaluated only
//! at its evaluation destination, and bounded in steps, memory and resource bound.
//!
//! An implementation of PLAN (the Packet Language for Active Networks,
//! grammar v3.1, as documented by its authors at UPenn) for the anode
//! active network node:
//!
//! * [`parser`] / [`lexer`]: source text to [`ast`], errors with line:column;
//! * [`diagnostic`]: compile errors rendered with the source line, a caret under the
//!   offending range, expected and found types and a hint;
//! * [`check`]: Hindley–Milner type inference with polymorphic functions
//!   and services, lowering to the slot-resolved [`ir`];
//! * [`eval`]: a budgeted evaluator ([`Interpreter::eval_chunk`]) —
//!   PLAN functions cannot recurse, folds run over finite lists, every
//!   step is counted and nesting is bounded, so every evaluation
//!   terminates quickly;
//! * [`program`]: compiled programs and the SHA-256-keyed [`ProgramCache`];
//! * [`value`] / [`marshal`]: values and their standard binary marshalling;
//! * [`packet`]: the PLAN packet body (header readable without
//!   unmarshalling the chunk);
//! * [`services`]: the [`Services`] trait the node implements and the
//!   [`ServiceRegistry`] of service names and types;
//! * [`testing`]: a recording fake node and a simulated line network.
//!
//! Typical use by a node:
//!
//! ```
//! use anode_plan::{Interpreter, EvalContext, Limits, testing::FakeServices, marshal, Value};
//! let interp = Interpreter::with_core();
//! let prog = interp.compile("fun hello(n) = print(\"hi \" ^ intToString(n))").unwrap();
//! let bytes = marshal::encode_chunk(&prog.chunk("hello", vec![Value::Int(3)]).unwrap());
//! // ... on the evaluating node:
//! let chunk = marshal::decode_chunk(&bytes).unwrap();
//! let me = "10.0.0.1:3322".parse().unwrap();
//! let mut node = FakeServices::at(me);
//! let ctx = EvalContext { source: me, src_dev: 0, implicit_port: 0, rb: 10 };
//! let ev = interp.eval_chunk(&chunk, &mut node, ctx, Limits::default()).unwrap();
//! assert_eq!(ev.result, Ok(Value::Unit));
//! assert_eq!(node.output(), "hi 3");
//! ```

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod ast;
pub mod builtins;
pub mod check;
pub mod diagnostic;
pub mod ee;
pub mod error;
pub mod eval;
pub mod host;
pub mod ir;
pub mod lexer;
pub mod marshal;
pub mod packet;
pub mod parser;
pub mod program;
pub mod services;
pub mod testing;
pub mod types;
pub mod value;

pub use error::{CompileError, SyntaxError, TypeError};
pub use eval::{EvalContext, EvalError, Evaluation, Interpreter, Limits, Raised};
pub use host::{DEFAULT_PORT, parse_host};
pub use marshal::DecodeError;
pub use packet::{PacketError, PlanHeader, PlanHeaderRef};
pub use program::{Program, ProgramCache, code_hash};
pub use services::{
    Outgoing, Reassembler, RegistryError, SendKind, ServiceError, ServiceRegistry, Services,
};
pub use value::{Chunk, Code, Dev, List, Value};

/// Entry point for fuzzing: parse and type-check arbitrary bytes.
/// Never panics; returns whether the input compiled.
pub fn fuzz_parse(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    Program::compile(text, &ServiceRegistry::with_core()).is_ok()
}

/// Entry point for fuzzing: decode arbitrary bytes as a packet body, a
/// chunk and a value; re-encode what decodes and check it round-trips.
/// Never panics; returns whether any decoder accepted the input.
pub fn fuzz_unmarshal(data: &[u8]) -> bool {
    let mut ok = false;
    if let Ok((h, c)) = packet::decode_body(data) {
        ok = true;
        let again = packet::encode_body(&h, &c);
        assert_eq!(
            packet::decode_body(&again).ok(),
            Some((h, c)),
            "body round-trip"
        );
    }
    if let Ok(c) = marshal::decode_chunk(data) {
        ok = true;
        assert_eq!(
            marshal::encode_chunk(&c),
            data,
            "chunk encoding is canonical"
        );
    }
    if let Ok(v) = marshal::decode_value(data) {
        ok = true;
        assert_eq!(
            marshal::encode_value(&v),
            data,
            "value encoding is canonical"
        );
    }
    ok
}
