//! The emulator registry `anode emulate` and `anode demo` use: the built-in steps, both
//! execution environments on every node (`crate::ees`), and the EE steps: `ping` and `flood`
//! (capsules, `capsule.rs`), `capsule` (capsules of any code file, `code.rs`) and
//! `inject-plan` (PLAN, `plan.rs`).
//!
//! Contract: [`registry`] is the one registry for parsing a topology and running it, so a file
//! that parses also runs with the same actions.

use anode_emu::Registry;

mod capsule;
mod code;
mod plan;

/// The built-in steps plus the EEs on every node and their steps.
pub fn registry() -> Result<Registry, String> {
    let mut r = Registry::builtin();
    crate::ees::emu_hook(&mut r).map_err(|e| e.to_string())?;
    r.register(
        "ping",
        "from, to, count, interval_ms, rb, port, timeout_ms, expect_received",
        capsule::parse_ping,
    );
    r.register(
        "flood",
        "from, to, size, count | duration_ms, rate_pps, status_ms, rb, port, timeout_ms, expect_delivered",
        capsule::parse_flood,
    );
    r.register(
        "capsule",
        "from, to, code (a .wasm file), payload | payload_hex, count, interval_ms, rb, flow, port, wait_ms, expect_delivered",
        code::parse,
    );
    r.register(
        "inject-plan",
        "node, file | program, entry ({name} = a node's address), rb, eval_at, handler, wait_ms, expect_print",
        plan::parse,
    );
    anode_modules::emu::add_to(&mut r);
    Ok(r)
}
