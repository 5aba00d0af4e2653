//! The service packages of the PLAN guide (§7.2) as anode provides them.
//!
//! Contract: [`install`] registers on a [`PlanEe`] every routine of every package anode
//! provides; `PlanEe::new` calls it, so every node, `anode plan run` and `anode plan check`
//! see the same services.

use super::PlanEe;
use super::scout;

/// Installs the packages anode provides on `ee`. Names already registered keep their first
/// registration (the core registry never defines these names, so this does not happen).
pub fn install(ee: &mut PlanEe) {
    let _ = scout::install(ee);
}
