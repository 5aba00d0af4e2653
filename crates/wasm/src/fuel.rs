//! Fuel for work a host import does on a guest's behalf: copies cost one unit per 64 bytes,
//! so a guest cannot move unbounded data through cheap calls.

use wasmtime::{Caller, Trap};

/// Takes the fuel `bytes` of copying cost from the running guest (none for fewer than 64);
/// a guest without that much fuel left has none afterwards and traps (`OutOfFuel`). A
/// negative `bytes` (a hostile length) costs nothing: the copy itself will be refused.
pub fn charge_bytes<T>(caller: &mut Caller<'_, T>, bytes: i32) -> wasmtime::Result<()> {
    let cost = (usize::try_from(bytes).unwrap_or(0) / 64) as u64;
    if cost == 0 {
        return Ok(());
    }
    let f = caller.get_fuel()?;
    if f < cost {
        caller.set_fuel(0)?;
        return Err(Trap::OutOfFuel.into());
    }
    caller.set_fuel(f - cost)
}
