//! `anode demo`: the built-in topology (`topologies/demo.toml`, a 5-node ring) run in virtual
//! time, and the story of what happened told from its report: convergence, a greeting to
//! every node, a link failure and the reroute, the repair; then active code (a capsule ping
//! loading its code hop by hop, a flood, PLAN pings); the final counters.
//!
//! Contract: [`story`] reads the steps by their numbers in `demo.toml`; a step that is
//! missing is named as missing, never a panic.

use std::fmt::Write as _;

use anode_emu::{Report, StepReport, Topology, fmt_time};

/// The demo's topology, built in.
pub const DEMO_TOML: &str = include_str!("../../../topologies/demo.toml");

/// Runs the demo topology with both EEs on every node.
pub fn run() -> Result<Report, String> {
    let registry = crate::steps::registry()?;
    let topo = Topology::parse_with(DEMO_TOML, "demo.toml (built in)", &registry)
        .map_err(|e| format!("the built-in demo topology does not parse (a bug): {e}"))?;
    anode_emu::run_with(topo, &registry).map_err(|e| e.to_string())
}

fn summary(r: &Report, n: usize) -> String {
    step(r, n).map_or_else(
        || format!("(step {n} is missing)"),
        |s| s.outcome.summary.clone(),
    )
}

fn step(r: &Report, n: usize) -> Option<&StepReport> {
    r.steps.iter().find(|s| s.number == n)
}

fn check_line(r: &Report, n: usize) -> String {
    match step(r, n) {
        Some(s) => match &s.outcome.check {
            Some(c) => format!(
                "   [{}] expected at {}: {} ({})",
                if c.passed { "PASS" } else { "FAIL" },
                fmt_time(std::time::Duration::from_micros(s.at_us)),
                s.outcome
                    .data
                    .get("expect")
                    .and_then(|v| v.as_str())
                    .unwrap_or("?"),
                c.message
            ),
            None => String::new(),
        },
        None => format!("   (step {n} is missing from the report)"),
    }
}

fn details(r: &Report, n: usize) -> String {
    step(r, n)
        .map(|s| {
            s.outcome
                .details
                .iter()
                .map(|d| format!("   {d}\n"))
                .collect::<String>()
        })
        .unwrap_or_default()
}

/// The demo's story, from its report.
pub fn story(r: &Report) -> String {
    let mut o = String::new();
    let ms = |v: std::time::Duration| v.as_millis();
    let routing = r.routing;
    let _ = writeln!(
        o,
        "anode demo: five anode nodes in a ring, emulated in virtual time (seed {}).\n",
        r.seed
    );
    let _ = writeln!(o, "      a ----- b");
    let _ = writeln!(o, "     /         \\");
    let _ = writeln!(o, "    e           c");
    let _ = writeln!(o, "     \\         /");
    let _ = writeln!(o, "      `-- d --'\n");
    let _ = writeln!(
        o,
        "Links: 2 ms one way, 100 Mbit/s. Every node finds its neighbors with hellos (every {} ms)\nand learns routes from them with a RIP-like distance vector (full update every {} ms).\n",
        ms(routing.hello_interval),
        ms(routing.update_interval)
    );
    let conv = r.converged_at_us.map_or("never".to_string(), |t| {
        fmt_time(std::time::Duration::from_micros(t))
    });
    let _ = writeln!(
        o,
        "1. The nodes start knowing only themselves. Hellos make neighbors, route updates spread,\n   and at {conv} every node has a working route to every other: routing has converged."
    );
    let _ = writeln!(o, "{}\n", check_line(r, 1));
    let _ = writeln!(
        o,
        "2. a sends \"hello from a\" to each of the other four nodes:"
    );
    let _ = write!(o, "{}", details(r, 2));
    let _ = writeln!(o, "{}\n", check_line(r, 9));
    let _ = writeln!(
        o,
        "3. From 3.000 s a sends c a datagram every 50 ms; they go the short way, a>b>c.\n   At 4.000 s the link b-c fails, and nobody tells the nodes: b and c notice only when\n   hellos stop (dead interval {} ms). Then the distance vector finds the way round the\n   other side, a>e>d>c.",
        ms(routing.dead_interval)
    );
    if let Some(f) = r.failures.first() {
        for l in f.text_lines() {
            let _ = writeln!(o, "   {l}");
        }
    }
    let _ = writeln!(o, "{}\n", check_line(r, 5));
    let _ = writeln!(
        o,
        "4. At 7.000 s the link comes back. Hellos flow again, b and c are neighbors again, and the\n   shorter route returns."
    );
    let _ = writeln!(o, "{}", check_line(r, 7));
    let _ = writeln!(o, "{}", check_line(r, 8));
    let _ = writeln!(o, "   The whole stream from a to c:");
    let _ = writeln!(o, "{}", details(r, 3).trim_end());
    let _ = writeln!(
        o,
        "\n5. Active code. a pings c with capsules: WebAssembly code named by its SHA-256. Only a\n   has the ping code; b and c lack it, park the capsule and load the code hop by hop from\n   their previous hop, so the first round trip includes the loads; later pings run cached code."
    );
    let _ = writeln!(o, "   {}", summary(r, 10));
    let _ = writeln!(o, "{}", check_line(r, 10));
    let _ = writeln!(
        o,
        "   Then a floods c; c counts the flow in the flood code's soft state and reports back:"
    );
    let _ = writeln!(o, "   {}", summary(r, 11));
    let _ = writeln!(o, "{}", check_line(r, 11));
    let _ = writeln!(
        o,
        "   And PLAN: packets that are programs. ping/noeval is evaluated only at c and back at a\n   (b routes it passively); ping/eval is evaluated at every hop. Both print at a:"
    );
    for n in [12, 13] {
        let _ = write!(o, "{}", details(r, n));
        let _ = writeln!(o, "{}", check_line(r, n));
    }
    let _ = writeln!(
        o,
        "\n6. After {} of virtual time ({} simulator events), the nodes' counters:",
        fmt_time(std::time::Duration::from_micros(r.duration_us)),
        r.events
    );
    let _ = writeln!(
        o,
        "   {:<5} {:>8} {:>8} {:>10} {:>10} {:>10}  drops",
        "node", "rx", "tx", "fast-path", "delivered", "control"
    );
    for n in &r.nodes {
        let c = &n.counters;
        let _ = writeln!(
            o,
            "   {:<5} {:>8} {:>8} {:>10} {:>10} {:>10}  {}",
            n.name,
            c.rx_packets,
            c.tx_packets,
            c.fast_path,
            c.delivered,
            c.control_rx,
            c.drop_summary(", ")
        );
    }
    let total = r.checks.passed + r.checks.failed;
    let _ = writeln!(o);
    if r.passed() {
        let _ = writeln!(o, "All {total} expectations held.");
    } else {
        let _ = writeln!(
            o,
            "{} of {total} expectations FAILED (marked FAIL above).",
            r.checks.failed
        );
    }
    let _ = writeln!(
        o,
        "Next: `anode emulate topologies/ring5.toml` runs a scenario file of your own; `anode demo --full`\nadds the full report, `anode demo --json` gives it as JSON."
    );
    o
}
