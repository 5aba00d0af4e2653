//! Realtime smoke test: a 3-node ring over loopback UDP converges, delivers, and reroutes.

use anode_emu::Topology;

const SRC: &str = r#"
[network]
seed = 5
duration_ms = 2500
[routing]
hello_interval_ms = 100
dead_interval_ms = 400
update_interval_ms = 300
route_timeout_ms = 2000
gc_interval_ms = 1000
triggered_delay_ms = 10
[[node]]
name = "a"
[[node]]
name = "b"
[[node]]
name = "c"
[[link]]
a = "a"
b = "b"
delay_ms = 1
[[link]]
a = "b"
b = "c"
delay_ms = 1
[[link]]
a = "c"
b = "a"
delay_ms = 1
[[step]]
at_ms = 1200
action = "expect"
check = "reachable"
from = "*"
to = "*"
[[step]]
at_ms = 1200
action = "send"
from = "a"
to = "*"
count = 5
interval_ms = 20
[[step]]
at_ms = 1600
action = "fail-link"
a = "a"
b = "b"
[[step]]
at_ms = 2300
action = "expect"
check = "route"
from = "a"
to = "b"
via = "c"
[[step]]
at_ms = 2300
action = "expect"
check = "delivered"
node = "b"
count = 5
"#;

#[test]
fn realtime_ring_converges_delivers_and_reroutes() {
    let t = Topology::parse(SRC, "rt.toml").unwrap();
    let r = anode_node::realtime::run(t, &anode_emu::Registry::builtin()).unwrap();
    let failed: Vec<_> = r
        .steps
        .iter()
        .filter(|s| s.outcome.check.as_ref().is_some_and(|c| !c.passed))
        .map(|s| s.outcome.summary.clone())
        .collect();
    assert!(r.passed(), "{failed:?}\n{}", r.to_text());
    assert!(!r.deterministic);
    assert_eq!(r.mode, "realtime");
    assert!(r.converged_at_us.is_some());
    assert!(r.nodes[0].address.starts_with("127.0.0.1:"));
    let send = r.steps.iter().find(|s| s.action == "send").unwrap();
    assert_eq!(send.outcome.data["total"]["delivered"], 10);
    let lat = send.outcome.data["total"]["latency_us"]["min"]
        .as_u64()
        .unwrap();
    assert!(lat >= 1000, "one 1 ms link at least: {lat}");
    assert!(r.to_text().contains("Real time over loopback UDP"));
}
