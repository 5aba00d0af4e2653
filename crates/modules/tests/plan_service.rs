//! PLAN services as modules: while the `mix` module is active, PLAN code evaluated at the
//! node calls it as `mix : int -> int`; upgraded with another seed it answers with the new
//! configuration; stopped, a call raises instead of answering.

mod common;

use std::time::Instant;

use anode_core::{Event, Node};
use anode_modules::{host, sync_routes};
use anode_plan::ee::{PacketSpec, PlanEe, build_packet};
use common::*;

/// splitmix64's finalizer, as the guest computes it.
fn mix(arg: i64, seed: i64) -> i64 {
    let mut z = (arg as u64) ^ (seed as u64);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as i64
}

fn plan(n: &mut Node) -> &mut PlanEe {
    n.ee_mut(anode_wire::anep::TYPE_PLAN)
        .unwrap()
        .as_any_mut()
        .downcast_mut::<PlanEe>()
        .unwrap()
}

/// Evaluates `print(mix(arg))` at the node; returns its PLAN log lines.
fn eval(n: &mut Node, now: Instant, arg: i64) -> Vec<String> {
    let me = n.address();
    let spec = PacketSpec::new(me, me, 8);
    let prog = "fun f(n : int) = print(mix(n))";
    let pkt = build_packet(plan(n).interp(), prog, &format!("f({arg})"), &spec).unwrap();
    let _ = n.inject(now, pkt);
    let mut out = Vec::new();
    while let Some(e) = n.poll_event() {
        if let Event::Log { ee, message } = e
            && ee == "plan"
        {
            out.push(message);
        }
    }
    out
}

fn seed(s: i64) -> toml::Table {
    let mut t = toml::Table::new();
    t.insert("seed".into(), s.into());
    t
}

#[test]
fn plan_code_calls_a_module_service() {
    let now = Instant::now();
    let mut n = relay(&[1], now);
    n.register_ee(Box::new(PlanEe::with_defaults()));
    let h = host(&mut n).unwrap();
    h.install(signed("mix", None), &seed(0)).unwrap();
    h.start("mix").unwrap();
    sync_routes(&mut n).unwrap();
    assert_eq!(eval(&mut n, now, 5), [mix(5, 0).to_string()]);
    assert_eq!(
        eval(&mut n, now, 123_456_789),
        [mix(123_456_789, 0).to_string()]
    );

    host(&mut n)
        .unwrap()
        .upgrade(signed("mix", Some("1.1.0")), &seed(42))
        .unwrap();
    sync_routes(&mut n).unwrap();
    assert_ne!(mix(5, 42), mix(5, 0));
    assert_eq!(eval(&mut n, now, 5), [mix(5, 42).to_string()]);

    // Stopped: the name still type-checks, but the call raises and nothing is printed.
    host(&mut n).unwrap().stop("mix").unwrap();
    sync_routes(&mut n).unwrap();
    let out = eval(&mut n, now, 5);
    assert!(!out.contains(&mix(5, 42).to_string()), "{out:?}");
    // Started again: it answers again.
    host(&mut n).unwrap().start("mix").unwrap();
    sync_routes(&mut n).unwrap();
    assert_eq!(eval(&mut n, now, 7), [mix(7, 42).to_string()]);
}
