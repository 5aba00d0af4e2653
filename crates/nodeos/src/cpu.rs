//! CPU accounting: EE work units (wasm fuel, interpreter steps, epochs) converted to
//! nanoseconds, so one scheduler can weigh work from different EEs.
//!
//! The conversion is calibrated per EE (e.g. by its benchmark: ns per fuel unit) and is
//! exact integer arithmetic in picoseconds per unit; it saturates instead of overflowing.

/// Converts an EE's work units to nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuMeter {
    ps_per_unit: u64,
}

impl CpuMeter {
    /// `ps_per_unit` picoseconds per unit (e.g. 500 for 0.5 ns per wasm fuel unit).
    pub fn new(ps_per_unit: u64) -> Self {
        CpuMeter { ps_per_unit }
    }

    /// Nanoseconds for `units`.
    pub fn to_ns(&self, units: u64) -> u64 {
        let ps = u128::from(units) * u128::from(self.ps_per_unit);
        u64::try_from(ps / 1000).unwrap_or(u64::MAX)
    }

    /// Units that fit in `ns` (the fuel to give one call for a maximum run time).
    pub fn units_for(&self, ns: u64) -> u64 {
        if self.ps_per_unit == 0 {
            return u64::MAX;
        }
        let u = u128::from(ns) * 1000 / u128::from(self.ps_per_unit);
        u64::try_from(u).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_both_ways_and_saturates() {
        let m = CpuMeter::new(500);
        assert_eq!(m.to_ns(1_000_000), 500_000);
        assert_eq!(m.units_for(500_000), 1_000_000);
        assert_eq!(CpuMeter::new(u64::MAX).to_ns(u64::MAX), u64::MAX);
        assert_eq!(CpuMeter::new(0).units_for(5), u64::MAX);
    }
}
