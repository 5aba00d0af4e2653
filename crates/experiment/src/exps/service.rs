//! Per-packet and per-byte service time of a forwarder from its throughput: the middle host
//! of `s - r - d` is flooded at full speed with small and with maximal packets, and the time
//! it spends per packet is one over the rate it delivers (PLANet derived its PLAN router's
//! 240 us per large packet the same way). For forwarders without a round-trip probe of their
//! own (the C forwarder, the anode fast path).

use super::fwd::{self, Fwd};
use crate::harness::netns::Line;
use crate::harness::traffic;
use crate::{Ctx, ExpError};

/// A forwarder's costs: (forwarder, us per packet at the small size, us per extra byte).
pub type Costs = Vec<(Fwd, f64, f64)>;

/// UDP payload sizes of the two floods (the capsule row starts at 136 B, its smallest).
const SMALL: usize = 84;
const LARGE: usize = 1472;

/// Measures `fwds` one after the other on one fresh line.
pub fn measure(ctx: &Ctx<'_>, fwds: &[Fwd]) -> Result<Costs, ExpError> {
    let secs = ctx.pick(2.0, 1.0);
    let line = Line::up("v", 1)?;
    let mut out = Vec::new();
    for &f in fwds {
        let small = if f == Fwd::AnodeCapsule { 136 } else { SMALL };
        let (_running, path) = fwd::start(ctx, &line, f, 60)?;
        let a = traffic::probe(ctx, &path, small, 0.0, secs)?;
        let b = traffic::probe(ctx, &path, LARGE, 0.0, secs)?;
        if a.delivered_pps <= 0.0 || b.delivered_pps <= 0.0 {
            return Err(ExpError::Measure {
                what: f.label().into(),
                why: "nothing delivered".into(),
            });
        }
        let (ta, tb) = (1e6 / a.delivered_pps, 1e6 / b.delivered_pps);
        let per_byte = ((tb - ta) / (LARGE - small) as f64).max(0.0);
        ctx.say(&format!(
            "{}: {ta:.2} us per packet, {per_byte:.4} us per byte (from {:.0} and {:.0} pps)",
            f.label(),
            a.delivered_pps,
            b.delivered_pps
        ));
        out.push((f, ta, per_byte));
    }
    Ok(out)
}
