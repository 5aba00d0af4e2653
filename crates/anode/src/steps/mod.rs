//! The emulator registry `anode emulate` and `anode demo` use: the built-in steps, both
//! execution environments on every node (`crate::ees`), and the EE steps.
//!
//! Contract: [`registry`] is the one registry for parsing a topology and running it, so a file
//! that parses also runs with the same actions.

use anode_emu::Registry;

/// The built-in steps plus the EEs on every node and their steps.
pub fn registry() -> Result<Registry, String> {
    let mut r = Registry::builtin();
    crate::ees::emu_hook(&mut r).map_err(|e| e.to_string())?;
    anode_modules::emu::add_to(&mut r);
    Ok(r)
}
