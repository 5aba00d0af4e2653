//! The emulator end to end: the shipped topology files, convergence, reroute within the
//! routing timers, determinism, and the effect of the seed.

use std::path::PathBuf;
use std::time::Duration;

use anode_emu::{Report, Topology};

fn topo_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../topologies")
        .join(name)
}

fn run_file(name: &str) -> Report {
    let t = Topology::load(&topo_path(name)).unwrap();
    anode_emu::run(t).unwrap()
}

fn run_src(src: &str) -> Report {
    anode_emu::run(Topology::parse(src, "test.toml").unwrap()).unwrap()
}

fn failed_checks(r: &Report) -> Vec<String> {
    r.steps
        .iter()
        .filter(|s| s.outcome.check.as_ref().is_some_and(|c| !c.passed))
        .map(|s| s.outcome.summary.clone())
        .collect()
}

/// A ring of `n` nodes n0..n(n-1) with the given routing timers and extra steps.
fn ring(n: usize, seed: u64, loss: f64, steps: &str) -> String {
    let mut s = format!(
        "[network]\nseed = {seed}\nduration_ms = 20000\n[routing]\nhello_interval_ms = 250\ndead_interval_ms = 800\nupdate_interval_ms = 1000\nroute_timeout_ms = 6000\ngc_interval_ms = 4000\ntriggered_delay_ms = 20\n"
    );
    for i in 0..n {
        s += &format!("[[node]]\nname = \"n{i}\"\n");
    }
    for i in 0..n {
        s += &format!(
            "[[link]]\na = \"n{i}\"\nb = \"n{}\"\ndelay_ms = 1.5\nloss = {loss}\n",
            (i + 1) % n
        );
    }
    s + steps
}

#[test]
fn ring5_file_converges_reroutes_and_passes_its_checks() {
    let r = run_file("ring5.toml");
    assert!(r.passed(), "failed: {:?}", failed_checks(&r));
    assert_eq!(r.checks.passed, 7);
    assert!(r.converged_at_us.is_some_and(|t| t < 3_000_000));
    // Every node reached every other: 5 senders x 4 destinations, all delivered.
    for s in r
        .steps
        .iter()
        .filter(|s| s.action == "send" && s.at_us == 3_000_000)
    {
        assert_eq!(
            s.outcome.data["total"]["delivered"], 4,
            "{}",
            s.outcome.summary
        );
        assert_eq!(s.outcome.data["total"]["lost"], 0);
    }
    // The failure: repaired within dead_interval + update_interval (RIP semantics), traffic
    // resumed, and the stream used both paths.
    let f = &r.failures[0];
    assert_eq!(f.link, "b-c");
    let bound = (r.routing.dead_interval + r.routing.update_interval).as_micros() as u64;
    let repaired = f.routes_repaired_after_us.unwrap();
    assert!(repaired >= r.routing.dead_interval.as_micros() as u64 - 300_000);
    assert!(repaired <= bound, "repaired after {repaired} us > {bound}");
    let t = f.traffic.as_ref().unwrap();
    assert!(t.lost > 0 && t.lost < t.sent);
    assert!(t.resumed_after_us.unwrap() <= bound + 50_000);
    let stream = r.steps.iter().find(|s| s.number == 9).unwrap();
    let paths = stream.outcome.data["per_destination"][0]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_array().unwrap().len())
        .collect::<Vec<_>>();
    assert!(paths.contains(&2) && paths.contains(&5), "{paths:?}");
    // Final tables: the direct route is back.
    let b = r.nodes.iter().find(|n| n.name == "b").unwrap();
    let to_c = b.routes.iter().find(|x| x.dest == "c").unwrap();
    assert_eq!((to_c.metric, to_c.next_hop.as_deref()), (1, Some("c")));
}

#[test]
fn every_node_reaches_every_other_in_a_generated_ring() {
    let mut steps = String::new();
    for i in 0..5 {
        steps += &format!(
            "[[step]]\nat_ms = 3000\naction = \"send\"\nfrom = \"n{i}\"\nto = \"*\"\ncount = 3\n"
        );
    }
    steps += "[[step]]\nat_ms = 3000\naction = \"expect\"\ncheck = \"reachable\"\nfrom = \"*\"\nto = \"*\"\n";
    let r = run_src(&ring(5, 1, 0.0, &steps));
    assert!(r.passed(), "{:?}", failed_checks(&r));
    let mut delivered = 0;
    for s in r.steps.iter().filter(|s| s.action == "send") {
        delivered += s.outcome.data["total"]["delivered"].as_u64().unwrap();
        // In a 5-ring the farthest node is 2 hops away.
        assert!(s.outcome.data["total"]["hops"]["max"].as_u64().unwrap() <= 2);
    }
    assert_eq!(delivered, 5 * 4 * 3);
    for n in &r.nodes {
        assert_eq!(n.counters.delivered, 12, "{}", n.name);
        assert_eq!(n.routes.len(), 5);
        assert!(n.routes.iter().all(|x| x.metric <= 2));
    }
}

#[test]
fn failed_link_reroutes_within_the_configured_timers() {
    // Fail n0-n1 at 5 s; check the route and reachability one RIP bound later.
    let steps = "
[[step]]
at_ms = 5000
action = \"fail-link\"
a = \"n0\"
b = \"n1\"
[[step]]
at_ms = 4000
action = \"send\"
from = \"n0\"
to = \"n1\"
count = 200
interval_ms = 20
[[step]]
at_ms = 6800
action = \"expect\"
check = \"route\"
from = \"n0\"
to = \"n1\"
via = \"n4\"
[[step]]
at_ms = 6800
action = \"expect\"
check = \"reachable\"
from = \"*\"
to = \"*\"
";
    let r = run_src(&ring(5, 3, 0.0, steps));
    assert!(r.passed(), "{:?}", failed_checks(&r));
    let f = &r.failures[0];
    assert!(!f.partitions);
    assert!(f.routes_repaired_after_us.unwrap() <= 1_800_000);
    let t = f.traffic.as_ref().unwrap();
    assert!(t.resumed_at_us.is_some());
    assert!(t.lost >= 1);
    // Traffic flows again over the detour: the last datagrams took 4 hops.
    let send = r.steps.iter().find(|s| s.action == "send").unwrap();
    assert_eq!(send.outcome.data["total"]["hops"]["max"], 4);
}

#[test]
fn same_seed_gives_byte_identical_json_and_text() {
    let src = ring(
        5,
        11,
        0.1,
        "[[step]]\nat_ms = 3000\naction = \"send\"\nfrom = \"n0\"\nto = \"*\"\ncount = 50\ninterval_ms = 5\n",
    );
    let a = run_src(&src);
    let b = run_src(&src);
    assert_eq!(a.to_json(), b.to_json());
    assert_eq!(a.to_text(), b.to_text());
    let f1 = run_file("ring5.toml").to_json();
    let f2 = run_file("ring5.toml").to_json();
    assert_eq!(f1, f2);
    assert!(!f1.contains("NaN"));
}

#[test]
fn a_different_seed_with_loss_gives_a_different_result() {
    let steps = "[[step]]\nat_ms = 3000\naction = \"send\"\nfrom = \"n0\"\nto = \"*\"\ncount = 100\ninterval_ms = 5\n";
    let a = run_src(&ring(5, 1, 0.05, steps));
    let b = run_src(&ring(5, 2, 0.05, steps));
    assert_ne!(a.to_json(), b.to_json());
    let lost = |r: &Report| {
        r.links
            .iter()
            .map(|l| l.a_to_b.unwrap().lost + l.b_to_a.unwrap().lost)
            .sum::<u64>()
    };
    assert!(lost(&a) > 0 && lost(&b) > 0);
    // Without loss the seed does not matter (nothing random is drawn).
    let c = run_src(&ring(5, 1, 0.0, steps)).to_json();
    let d = run_src(&ring(5, 2, 0.0, steps)).to_json();
    let strip = |s: &str| s.replace("\"seed\": 1,", "").replace("\"seed\": 2,", "");
    assert_eq!(strip(&c), strip(&d));
}

#[test]
fn line4_file_shows_queueing_loss_mtu_and_partition() {
    let r = run_file("line4.toml");
    assert!(r.passed(), "{:?}", failed_checks(&r));
    let bc = r.links.iter().find(|l| l.name == "b-c").unwrap();
    let st = bc.a_to_b.unwrap();
    assert!(st.queue_drops > 0, "burst overflows the queue");
    assert!(st.lost > 0, "5% loss");
    // Serialization: 1000 bytes at 1 Mbit/s take 8 ms, plus 10 ms propagation.
    let s2 = r.steps.iter().find(|s| s.number == 2).unwrap();
    assert!(
        s2.outcome.data["total"]["latency_us"]["min"]
            .as_u64()
            .unwrap()
            > 18_000
    );
    let too_big = r.steps.iter().find(|s| s.number == 4).unwrap();
    assert_eq!(too_big.outcome.data["total"]["refused"]["too_big"], 1);
    assert!(r.failures[0].partitions);
}

#[test]
fn demo_file_passes_and_is_fast() {
    let t0 = std::time::Instant::now();
    // The routing story; the active-code steps after the marker need the anode crate's
    // execution environments and steps (tested there, crates/anode/tests/emulate_cli.rs).
    let text = std::fs::read_to_string(topo_path("demo.toml")).unwrap();
    let routing = text
        .split("# --- Active code")
        .next()
        .unwrap()
        .replace("duration_ms = 12000", "duration_ms = 10000");
    let r = run_src(&routing);
    assert!(r.passed(), "{:?}", failed_checks(&r));
    assert!(t0.elapsed() < Duration::from_secs(2));
}

#[test]
fn a_failing_expectation_is_reported_as_failed() {
    let steps = "[[step]]\nat_ms = 3000\naction = \"expect\"\ncheck = \"route\"\nfrom = \"n0\"\nto = \"n1\"\nvia = \"n4\"\n[[step]]\nat_ms = 3000\naction = \"expect\"\ncheck = \"delivered\"\nnode = \"n1\"\nat_least = 1\n";
    let r = run_src(&ring(5, 1, 0.0, steps));
    assert_eq!(r.checks.failed, 2);
    assert!(!r.passed());
    assert!(r.to_text().contains("FAIL"));
}

#[test]
fn ipv6_default_addresses_work() {
    let src = ring(3, 1, 0.0, "[[step]]\nat_ms = 3000\naction = \"expect\"\ncheck = \"reachable\"\nfrom = \"*\"\nto = \"*\"\n")
        .replace("duration_ms = 20000\n", "duration_ms = 4000\nipv6 = true\n");
    let r = run_src(&src);
    assert!(r.passed());
    assert_eq!(r.nodes[0].address, "[2001:2::1]:3322");
}

/// A ring of `n` nodes running link state (`[routing] protocol = "ls"`).
fn ring_ls(n: usize, steps: &str) -> String {
    ring(n, 1, 0.0, steps).replace("[routing]\n", "[routing]\nprotocol = \"ls\"\n")
}

#[test]
fn link_state_converges_reroutes_after_a_failure_and_notices_a_partition() {
    let steps = "\
[[step]]\nat_ms = 2000\naction = \"expect\"\ncheck = \"reachable\"\nfrom = \"*\"\nto = \"*\"\n\
[[step]]\nat_ms = 2500\naction = \"expect\"\ncheck = \"route\"\nfrom = \"n0\"\nto = \"n2\"\nvia = \"n1\"\n\
[[step]]\nat_ms = 3000\naction = \"fail-link\"\na = \"n0\"\nb = \"n1\"\n\
[[step]]\nat_ms = 5000\naction = \"expect\"\ncheck = \"route\"\nfrom = \"n0\"\nto = \"n1\"\nvia = \"n5\"\n\
[[step]]\nat_ms = 5100\naction = \"expect\"\ncheck = \"reachable\"\nfrom = \"*\"\nto = \"*\"\n\
[[step]]\nat_ms = 6000\naction = \"fail-link\"\na = \"n3\"\nb = \"n4\"\n\
[[step]]\nat_ms = 8000\naction = \"expect\"\ncheck = \"unreachable\"\nfrom = \"n0\"\nto = \"n2\"\n\
[[step]]\nat_ms = 9000\naction = \"restore-link\"\na = \"n0\"\nb = \"n1\"\n\
[[step]]\nat_ms = 11000\naction = \"expect\"\ncheck = \"reachable\"\nfrom = \"*\"\nto = \"*\"\n";
    let r = run_src(&ring_ls(6, steps));
    assert!(r.passed(), "failed: {:?}", failed_checks(&r));
    assert_eq!(r.checks.passed, 6);
    assert!(
        r.converged_at_us.is_some_and(|t| t < 1_000_000),
        "{:?}",
        r.converged_at_us
    );
    // Repair within the dead interval plus SPF and flooding delays (no periodic wait).
    let f = &r.failures[0];
    let repaired = f.routes_repaired_after_us.unwrap();
    let bound = (r.routing.dead_interval + Duration::from_millis(300)).as_micros() as u64;
    assert!(repaired <= bound, "repaired after {repaired} us > {bound}");
    assert!(r.failures[1].partitions);
    // Deterministic like the distance vector.
    assert_eq!(r.to_json(), run_src(&ring_ls(6, steps)).to_json());
}

#[test]
fn a_partition_fails_all_pairs_checks_with_the_first_wrong_pairs_explained() {
    // Cut the ring of 5 into {n1, n2} and {n3, n4, n0}: 12 of the 20 ordered pairs cross.
    // Right after the cut the tables still name the dead links; once the neighbors are
    // declared dead, the far side has no route.
    let steps = "
[[step]]
at_ms = 5000
action = \"fail-link\"
a = \"n0\"
b = \"n1\"
[[step]]
at_ms = 5000
action = \"fail-link\"
a = \"n2\"
b = \"n3\"
[[step]]
at_ms = 5001
action = \"expect\"
check = \"reachable\"
from = \"*\"
to = \"*\"
[[step]]
at_ms = 5001
action = \"expect\"
check = \"reachable\"
from = \"*\"
to = \"n1\"
[[step]]
at_ms = 12000
action = \"expect\"
check = \"reachable\"
from = \"*\"
to = \"*\"
[[step]]
at_ms = 12000
action = \"expect\"
check = \"unreachable\"
from = \"n1\"
to = \"*\"
[[step]]
at_ms = 12000
action = \"expect\"
check = \"reachable\"
from = \"n3\"
to = \"n0\"
";
    let r = run_src(&ring(5, 3, 0.0, steps));
    let summaries: Vec<&str> = r
        .steps
        .iter()
        .filter(|s| s.action == "expect")
        .map(|s| s.outcome.summary.as_str())
        .collect();
    let early = summaries[0];
    assert!(early.contains("12 of 20 pairs wrong"), "{early}");
    assert!(early.contains("(and 8 more)"), "{early}");
    // The first wrong pair in (from, to) order is n0 -> n1, over the dead n0-n1 link.
    assert!(
        early.contains("n0 routes to n1 via n1 but link n0-n1 is down"),
        "{early}"
    );
    // One destination (walks from every source, no table): only n2, beside n1, still
    // reaches it; n0, n3 and n4 route over a cut link.
    let to_n1 = summaries[1];
    assert!(to_n1.contains("3 of 4 pairs wrong"), "{to_n1}");
    let late = summaries[2];
    assert!(late.contains("12 of 20 pairs wrong"), "{late}");
    assert!(late.contains("n0 has no route to n1"), "{late}");
    // n1 still reaches n2 (its side of the cut): 1 of 4 wrong, and it says the path.
    let n1 = summaries[3];
    assert!(
        n1.contains("1 of 4 pairs wrong: n1 reaches n2 via n1>n2"),
        "{n1}"
    );
    assert!(summaries[4].contains("path n3>n4>n0"), "{}", summaries[4]);
}

/// Bytes delivered over every link, both directions.
fn link_bytes(r: &Report) -> u64 {
    r.links
        .iter()
        .flat_map(|l| [l.a_to_b, l.b_to_a])
        .flatten()
        .map(|d| d.delivered_bytes)
        .sum()
}

#[test]
fn distance_vector_periodic_traffic_per_link_does_not_grow_with_the_network() {
    // Once converged, a distance-vector link carries hellos and one digest per update
    // interval, whatever the table size (RIP's full tables would carry n entries).
    let reachable = "[[step]]\nat_ms = 39500\naction = \"expect\"\ncheck = \"reachable\"\nfrom = \"*\"\nto = \"*\"\n";
    let steady = |n: usize| {
        let short = run_src(&ring(n, 1, 0.0, ""));
        let long = run_src(
            &ring(n, 1, 0.0, reachable).replace("duration_ms = 20000", "duration_ms = 40000"),
        );
        assert!(long.passed(), "{n} nodes: {:?}", failed_checks(&long));
        assert!(short.converged_at_us.is_some_and(|t| t < 2_000_000));
        // The routing counters tell the same story: between 20 and 40 s every node sent
        // its two neighbors one digest per second and nothing else, and no digest found
        // its receiver out of step (nothing is lost on these links).
        let delta = |k: &str| {
            long.routing_totals.get(k).copied().unwrap_or(0)
                - short.routing_totals.get(k).copied().unwrap_or(0)
        };
        assert_eq!(delta("digests_sent"), (20 * 2 * n) as u64, "{n} nodes");
        assert_eq!(delta("updates_sent"), 0, "{:?}", long.routing_totals);
        assert_eq!(long.routing_totals.get("digests_out_of_step"), Some(&0));
        assert_eq!(long.routing_totals.get("protocol_dv"), Some(&(n as u64)));
        // Per link direction per second, over the last 20 s.
        (link_bytes(&long) - link_bytes(&short)) as f64 / 20.0 / (2 * n) as f64
    };
    let (small, large) = (steady(10), steady(30)); // 30: 15 hops across, inside infinity 16
    assert!(
        (large - small).abs() <= small * 0.05,
        "10 nodes: {small:.0} B/s a link direction, 30 nodes: {large:.0} B/s"
    );
    // Four hellos a second and a digest: less than one full table of 30 routes (600 B) alone.
    assert!(large < 400.0, "{large:.0} B/s");
}
