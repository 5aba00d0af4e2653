//! Deployment along a path in the emulator: the scenario of `topologies/deploy-path.toml`
//! (deploy, refresh, refusals, soft-state expiry, undeploy on a 5-hop line) with its timing
//! goals in virtual time, the policy's refusals (a system module, a lifetime too long, a
//! package too large), and hostile requests injected at a node (tampered signatures until
//! the neighbor is throttled, garbage, a result nobody asked for, a package asked for without
//! a request), each counted by reason.

use std::sync::Mutex;
use std::time::Duration;

use anode_emu::{Action, Next, ReportCtx, StepCtx, StepOutcome};
use anode_modules::deploy::{DeployEe, DeployStats, NewRequest};
use anode_modules::emu_deploy::deployer;
use anode_wire::anep::TYPE_DEPLOY;
use anode_wire::deploy::Op;

fn run(src: &str, reg: &anode_emu::Registry) -> anode_emu::Report {
    let topo = anode_emu::Topology::parse_with(src, "deploy.toml", reg).unwrap();
    anode_emu::run_with(topo, reg).unwrap()
}

#[test]
fn the_path_scenario_passes_within_the_goals() {
    let src = include_str!("../../../topologies/deploy-path.toml");
    let r = run(src, &anode_modules::emu::registry());
    for s in &r.steps {
        eprintln!("{} {}", s.action, s.outcome.summary);
    }
    assert!(r.passed(), "every check holds");
    let deploys: Vec<&serde_json::Value> = r
        .steps
        .iter()
        .filter(|s| s.action == "deploy-module")
        .map(|s| &s.outcome.data)
        .collect();
    // Five hops of 2 ms: a path RTT of 20 ms. Every node fetching: one more round trip per
    // hop (goal 200 ms); the package cached everywhere: the RTT plus the 1 ms polling of
    // the step (goal 50 ms plus the RTT).
    let fetch = deploys[0]["last_ms"].as_f64().unwrap();
    let cached = deploys[1]["last_ms"].as_f64().unwrap();
    assert!(fetch <= 200.0, "{fetch}");
    assert!(cached <= 50.0 + 20.0, "{cached}");
    assert_eq!(deploys[0]["hops"].as_array().unwrap().len(), 6);
}

const LINE: &str = r#"
[network]
seed = 1
duration_ms = 4000
[routing]
hello_interval_ms = 250
dead_interval_ms = 800
triggered_delay_ms = 20
[[node]]
name = "a"
[[node]]
name = "b"
[[node]]
name = "c"
[[link]]
a = "a"
b = "b"
[[link]]
a = "b"
b = "c"
"#;

#[test]
fn the_policy_refuses_system_modules_and_long_lifetimes() {
    let steps = r#"
[[step]]
at_ms = 2000
action = "deploy-module"
node = "a"
to = "c"
module = "fcfs"
expect = "refused"
[[step]]
at_ms = 2200
action = "deploy-module"
node = "a"
to = "c"
module = "counter"
ttl_s = 7200
expect = "refused"
[[step]]
at_ms = 2400
action = "undeploy-module"
node = "a"
to = "c"
module = "counter"
expect = "absent"
"#;
    let r = run(&format!("{LINE}{steps}"), &anode_modules::emu::registry());
    for s in &r.steps {
        eprintln!("{}: {:?}", s.outcome.summary, s.outcome.details);
    }
    assert!(r.passed());
    let d = &r.steps[0].outcome.details;
    assert!(
        d.iter()
            .all(|l| l.contains("not_permitted") && l.contains("system")),
        "{d:?}"
    );
    assert!(
        r.steps[1]
            .outcome
            .details
            .iter()
            .all(|l| l.contains("bad_ttl")),
        "{:?}",
        r.steps[1].outcome.details
    );
}

/// b's deployment counters after the hostile traffic.
static STATS: Mutex<Option<DeployStats>> = Mutex::new(None);

/// Injects hostile deploy traffic at node b and records b's deployment counters.
#[derive(Debug)]
struct Hostile;

impl Action for Hostile {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        let (a, c) = (ctx.node_addr(0).unwrap(), ctx.node_addr(2).unwrap());
        ctx.with_node(
            1,
            Box::new(move |node, now| {
                let b = node.address();
                let unix = node
                    .with_ee(now, TYPE_DEPLOY, |ee, _| {
                        ee.as_any_mut()
                            .downcast_mut::<DeployEe>()
                            .unwrap()
                            .unix_ms(now)
                    })
                    .unwrap();
                // 60 requests from b with a tampered field: 40 bad signatures, then throttled.
                for i in 0..60u8 {
                    let (_, mut pkt) = NewRequest {
                        op: Op::Undeploy,
                        origin: b,
                        target: c,
                        package: None,
                        name: "x".into(),
                        ttl_s: 0,
                        reply_port: 0,
                        unix_ms: unix,
                        valid: Duration::from_secs(30),
                        nonce: [i; 16],
                        rb: 8,
                        repo: String::new(),
                    }
                    .build(&deployer())
                    .unwrap();
                    // The low byte of the signed ttl (after the ANEP header, the transit
                    // header, and 8 bytes of the request).
                    let hl = anode_wire::anep::AnepPacket::new_checked(&pkt[..])
                        .unwrap()
                        .header_len();
                    pkt[hl + 72 + 8 + 3] ^= 1;
                    let _ = node.inject(now, pkt);
                }
                // Garbage under the deploy type, and a result nobody asked for.
                let t = anode_wire::transit::TransitRepr {
                    rb: 8,
                    src: a,
                    dst: b,
                    ..Default::default()
                };
                let junk = anode_wire::routed_packet(TYPE_DEPLOY, &t, &[1, 9, 9], &[]).unwrap();
                let _ = node.inject(now, junk);
                let stray = anode_wire::deploy::Message::Result(anode_wire::deploy::HopResult {
                    outcome: anode_wire::deploy::Outcome::Installed,
                    hop: 1,
                    elapsed_us: 0,
                    last: true,
                    nonce: [0xee; 16],
                    node: a,
                    reason: String::new(),
                })
                .to_packet(&t)
                .unwrap();
                node.handle_packet(now, anode_core::LinkId(0), stray);
                // A request for a package for a deploy request b never forwarded.
                let want = anode_wire::deploy::Message::Transfer(
                    [0x77; 16],
                    anode_wire::deploy::Transfer::Want {
                        hash: [1; 32],
                        offset: 0,
                        max: 65_536,
                    },
                )
                .to_packet(&t)
                .unwrap();
                node.handle_packet(now, anode_core::LinkId(0), want);
                let s = node
                    .with_ee(now, TYPE_DEPLOY, |ee, _| {
                        ee.as_any_mut()
                            .downcast_mut::<DeployEe>()
                            .unwrap()
                            .stats()
                            .clone()
                    })
                    .unwrap();
                *STATS.lock().unwrap() = Some(s);
            }),
        );
        Next::Done
    }

    fn report(&self, _: &ReportCtx<'_>) -> StepOutcome {
        StepOutcome {
            summary: "hostile".into(),
            details: Vec::new(),
            check: None,
            data: serde_json::Value::Null,
        }
    }
}

#[test]
fn hostile_requests_are_refused_and_counted_by_reason() {
    let mut reg = anode_modules::emu::registry();
    reg.register("hostile", "", |_| Ok(Box::new(Hostile)));
    let steps = "[[step]]\nat_ms = 2000\naction = \"hostile\"\n";
    let r = run(&format!("{LINE}{steps}"), &reg);
    let s = STATS.lock().unwrap().clone().unwrap();
    eprintln!("{s:?}");
    assert_eq!(s.refused.get("bad_signature"), Some(&40), "{s:?}");
    assert_eq!(s.refused.get("throttled"), Some(&20), "{s:?}");
    assert_eq!(s.malformed, 2, "the garbage and the stray result: {s:?}");
    assert_eq!((s.serve_refused, s.served_bytes), (1, 0), "{s:?}");
    let b = &r.nodes[1];
    let drops = serde_json::to_string(&b.counters).unwrap();
    assert!(drops.contains("deploy/malformed"), "{drops}");
    assert!(drops.contains("deploy/stray_result"), "{drops}");
}

#[test]
fn a_module_the_operator_removed_is_installed_again_by_the_next_refresh() {
    let steps = r#"
[[step]]
at_ms = 2000
action = "deploy-module"
node = "a"
to = "c"
module = "counter"
[[step]]
at_ms = 2500
action = "remove-module"
node = "b"
module = "counter"
[[step]]
at_ms = 3000
action = "deploy-module"
node = "a"
to = "c"
module = "counter"
expect = "present"
"#;
    let r = run(&format!("{LINE}{steps}"), &anode_modules::emu::registry());
    let refresh = &r.steps[2].outcome;
    assert_eq!(
        refresh
            .details
            .iter()
            .filter(|l| l.contains("present"))
            .count(),
        2,
        "{:?}",
        refresh.details
    );
    assert!(
        refresh.details.iter().any(|l| l.contains(" b: installed")),
        "{:?}",
        refresh.details
    );
}
