//! `pan-ping-latency`: PAN Figs. 3-6. Capsule ping round trips through a middle host that is
//! absent (none), forwards in the kernel (passive) or runs an anode node that runs the ping
//! capsule's code (active), by capsule size; the per-capsule latency at the middle host is
//! half the difference to "none", and active's overhead over passive in us and percent.

use super::common::{NodeLine, PING_OVERHEAD, Routers, ping_rtts};
use crate::paper::PaperExperiment;
use crate::report::num;
use crate::{Ctx, ExpError, Outcome, Plot, Role, Row, Series, stats};

/// Medians (us) by configuration, in size order.
struct Rtts {
    none: Vec<f64>,
    passive: Vec<f64>,
    active: Vec<f64>,
}

/// Pings per round: the three configurations take turns in rounds of this many pings, so a
/// drift of the machine's load during the run falls on all three alike.
const ROUND: u32 = 50;

fn measure(ctx: &Ctx<'_>, sizes: &[usize], count: u32) -> Result<Rtts, ExpError> {
    ctx.say("building three lines (none, passive, active) and starting their nodes");
    let lines = [
        NodeLine::up(ctx, "pn", 0, Routers::Kernel, &|_| String::new())?,
        NodeLine::up(ctx, "pp", 1, Routers::Kernel, &|_| String::new())?,
        NodeLine::up(ctx, "pa", 1, Routers::Anode, &|_| String::new())?,
    ];
    let mut out: [Vec<f64>; 3] = Default::default();
    for &size in sizes {
        let mut rtts: [Vec<f64>; 3] = Default::default();
        for _ in 0..count.div_ceil(ROUND) {
            for (nl, v) in lines.iter().zip(rtts.iter_mut()) {
                v.extend(ping_rtts(
                    ctx,
                    nl.src(),
                    &nl.dst().addr,
                    size,
                    ROUND,
                    0.002,
                )?);
            }
        }
        let m: Vec<f64> = rtts
            .iter()
            .map(|v| stats::median(v).unwrap_or(f64::NAN))
            .collect();
        ctx.say(&format!(
            "{size} B: median round trips none {:.1} us, passive {:.1} us, active {:.1} us ({} pings each)",
            m[0], m[1], m[2], rtts[0].len()
        ));
        for (o, v) in out.iter_mut().zip(m) {
            o.push(v);
        }
    }
    let [none, passive, active] = out;
    Ok(Rtts {
        none,
        passive,
        active,
    })
}

/// Runs it.
pub fn run(ctx: &Ctx<'_>, p: &PaperExperiment) -> Result<Outcome, ExpError> {
    let nominal: Vec<usize> = ctx.pick(
        vec![128, 256, 512, 1024, 1500, 1504, 2048, 8192],
        vec![128, 1500, 8192],
    );
    let sizes: Vec<usize> = nominal.iter().map(|&s| s.max(PING_OVERHEAD)).collect();
    let count = ctx.pick(1000, 150);
    let r = measure(ctx, &sizes, count)?;
    let x = |i: usize| sizes[i] as f64;
    let lat = |v: &[f64], i: usize| ((v[i] - r.none[i]) / 2.0).max(0.0);
    let n = sizes.len();
    let passive: Vec<[f64; 2]> = (0..n).map(|i| [x(i), lat(&r.passive, i)]).collect();
    let active: Vec<[f64; 2]> = (0..n).map(|i| [x(i), lat(&r.active, i)]).collect();
    let over: Vec<[f64; 2]> = (0..n)
        .map(|i| [x(i), active[i][1] - passive[i][1]])
        .collect();
    let pct: Vec<[f64; 2]> = (0..n)
        .map(|i| [x(i), 100.0 * over[i][1] / passive[i][1].max(1e-9)])
        .collect();
    let rtt = |label: &str, v: &[f64], role| {
        Series::new(
            label,
            "us round trip",
            role,
            (0..n).map(|i| [x(i), v[i]]).collect(),
        )
    };
    let series = vec![
        Series::new(
            "anode/active: per-capsule latency at the middle node",
            "us",
            Role::Anode,
            active.clone(),
        ),
        Series::new(
            "kernel/passive: per-capsule latency at the middle host (IP forwarding)",
            "us",
            Role::Baseline,
            passive.clone(),
        ),
        Series::new(
            "anode/active overhead over kernel/passive",
            "us",
            Role::Anode,
            over.clone(),
        ),
        Series::new(
            "anode/active overhead over kernel/passive",
            "%",
            Role::Anode,
            pct.clone(),
        ),
        rtt(
            "none: round trip, ends directly connected",
            &r.none,
            Role::Baseline,
        ),
        rtt(
            "passive: round trip through kernel forwarding",
            &r.passive,
            Role::Baseline,
        ),
        rtt(
            "active: round trip through an anode node",
            &r.active,
            Role::Anode,
        ),
    ];
    let at = |s: &[[f64; 2]], nominal_size: usize| {
        nominal
            .iter()
            .position(|&v| v == nominal_size)
            .map(|i| s[i][1])
    };
    let rows = rows(p, &nominal, &passive, &over, &pct);
    let findings = findings(&nominal, &over, &pct, &passive);
    let (lo, hi) = over
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p[1]), b.max(p[1])));
    let o1500 = at(&over, 1500);
    let headline = format!(
        "per-capsule overhead of the active node over kernel forwarding: paper ~20 us flat (PAN kernel node, 13 % at 1500 B) -> anode {} us at 1500 B, {}-{} us over all sizes; {}; as a percentage it is {} % because this kernel forwards a packet in {} us, not the paper's 160",
        o1500.map_or("-".into(), num),
        num(lo),
        num(hi),
        if o1500.unwrap_or(f64::MAX) <= 20.0 {
            "better"
        } else {
            "worse: anode is a user-space node over UDP (a socket receive and send per capsule, the paper's user/active paid 130 us), PAN's was in the kernel"
        },
        at(&pct, 1500).map_or("-".into(), num),
        at(&passive, 1500).map_or("-".into(), num),
    );
    Ok(Outcome {
        headline,
        method: "line s - r - d of network namespaces on veth; anode node processes at s and d (and r when active); `anode ping` capsules".into(),
        setup: vec![
            "none: s and d directly connected (one veth); passive: s - r - d with ip_forward=1 in r, the nodes at s and d are each other's neighbors; active: an anode node in r (ip_forward=0) that runs the ping capsule's code (every ping capsule is evaluated at every hop)".into(),
            format!("{count} capsule pings per size and configuration, one every 2 ms, the three configurations taking turns in rounds of {ROUND} (so load drift falls on all alike), after one warm-up ping that loads the ping code; the median round trip is used (the paper averaged 10,000 and took the median of 3 runs)"),
            format!("sizes are whole IP packets as in the paper; anode's smallest ping capsule is {PING_OVERHEAD} B (IP 20 + UDP 8 + ANEP 8 + transit 72 + capsule 56 + ping 20), so the 128 B point runs at {PING_OVERHEAD} B; above 1500 B the kernel fragments the UDP datagram on the 1500 B veth MTU, as PAN's IP layer did"),
            "per-capsule latency at the middle = (round trip through it - round trip with ends directly connected) / 2, as Fig. 4".into(),
        ],
        series,
        rows,
        findings,
        plot: Plot {
            title: "PAN Figs. 4-5: per-capsule latency at the middle node".into(),
            x_label: "capsule size incl. IP and UDP headers (bytes)".into(),
            y_label: "microseconds".into(),
            unit: "us".into(),
            log_x: true,
            log_y: false,
            paper_series: vec!["*/passive".into(), "kernel/active overhead".into(), "user/active overhead".into()],
        },
    })
}

/// y of `s` at the paper's size `size` (by its position among the nominal sizes).
fn at(nominal: &[usize], s: &[[f64; 2]], size: usize) -> Option<f64> {
    nominal
        .iter()
        .position(|&v| v == size)
        .and_then(|i| s.get(i))
        .map(|p| p[1])
}

/// The table: Fig. 4's passive latency, Fig. 5's overhead in us, Fig. 6's in percent.
fn rows(
    p: &PaperExperiment,
    nominal: &[usize],
    passive: &[[f64; 2]],
    over: &[[f64; 2]],
    pct: &[[f64; 2]],
) -> Vec<Row> {
    let size_note = |s: usize| {
        if s < PING_OVERHEAD {
            format!("{s} B (anode: {PING_OVERHEAD} B, its smallest ping capsule)")
        } else {
            format!("{s} B")
        }
    };
    let at = |s: &[[f64; 2]], size: usize| at(nominal, s, size);
    let mut rows = Vec::new();
    for s in [128, 1500] {
        rows.push(Row {
            quantity: format!(
                "passive per-capsule latency at the middle (kernel IP forwarding, measured here), {}",
                size_note(s)
            ),
            unit: "us".into(),
            paper: p.point("*/passive", s as f64),
            paper_ref: "Fig. 4, IV.B".into(),
            anode: at(passive, s),
            baseline: "this row is the baseline".into(),
        });
        rows.push(Row {
            quantity: format!(
                "active overhead over passive, {} (paper: PAN kernel node; user-space node {} us)",
                size_note(s),
                p.point("user/active overhead", s as f64)
                    .map_or("-".into(), num)
            ),
            unit: "us".into(),
            paper: p
                .point(
                    "kernel/active overhead over kernel/passive (per capsule)",
                    s as f64,
                )
                .or(p.scalar("constant over all sizes").map(|v| v.value)),
            paper_ref: "Fig. 5, IV.B".into(),
            anode: at(over, s),
            baseline: at(passive, s)
                .map_or("-".into(), |v| format!("kernel {} us per packet", num(v))),
        });
    }
    for s in [128, 1500, 8192] {
        rows.push(Row {
            quantity: format!("active overhead relative to passive, {}", size_note(s)),
            unit: "%".into(),
            paper: p.point("percent", s as f64),
            paper_ref: "Fig. 6, IV.B".into(),
            anode: at(pct, s),
            baseline: "kernel forwarding = 0 %".into(),
        });
    }
    rows
}

fn findings(
    nominal: &[usize],
    over: &[[f64; 2]],
    pct: &[[f64; 2]],
    passive: &[[f64; 2]],
) -> Vec<String> {
    let mut f = Vec::new();
    let (first, last) = (
        over.first().map_or(0.0, |p| p[1]),
        over.last().map_or(0.0, |p| p[1]),
    );
    f.push(format!(
        "anode's active overhead over kernel forwarding is {} us at {} B and {} us at {} B: {} (the paper's kernel node: ~20 us flat, because it does not touch the payload)",
        num(first), nominal.first().unwrap_or(&0), num(last), nominal.last().unwrap_or(&0),
        if last <= 1.5 * first.max(1.0) {
            "roughly flat, as in the paper"
        } else {
            "growing with size: the user-space node copies each datagram from and to its socket, the copy PAN's activecopy configuration measured (+25 us at 1500 B)"
        }
    ));
    if let (Some(first), Some(last)) = (pct.first(), pct.last()) {
        f.push(format!(
            "the relative overhead falls from {} % to {} % with size as in Fig. 6 (paper 38 % -> 3 %), because the kernel's per-packet cost grows with size while the node's fixed cost does not",
            num(first[1]), num(last[1])
        ));
    }
    if let Some(p) = passive.first() {
        f.push(format!(
            "kernel forwarding here costs {} us per packet at the smallest size (paper: ~50 us at 128 B on a 200 MHz PentiumPro); the ratio, not the microseconds, is what carries over",
            num(p[1])
        ));
    }
    f.push("anode's node is the paper's user/active configuration (user space, UDP): the paper's user-space node paid 83 us at 128 B and 130 us at 1500 B over IP forwarding, 4-6x its kernel node; anode's kernel fast path (issue 14) is where the kernel/active comparison would move".into());
    f
}
