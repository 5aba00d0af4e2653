//! PLAN services as modules: while the `mix` module is active, PLAN code evaluated at the
//! node calls it as `mix : int -> int`; upgraded with another seed it answers with the new
//! configuration; stopped, a call raises instead of answering. `liststats` has another type,
//! `(string, int list) -> string * int * int`: PLAN code passes it a string and a list and
//! gets a tuple back, and its refusals are PLAN exceptions with its reason.

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
    run(
        n,
        now,
        "fun f(n : int) = print(mix(n))",
        &format!("f({arg})"),
        "plan",
    )
}

/// Evaluates `entry` of `prog` at the node; returns its log lines from EE `ee` (`plan`:
/// prints, `plan:error`: errors).
fn run(n: &mut Node, now: Instant, prog: &str, entry: &str, ee_name: &str) -> Vec<String> {
    let me = n.address();
    let spec = PacketSpec::new(me, me, 8);
    let pkt = build_packet(plan(n).interp(), prog, entry, &spec).unwrap();
    let _ = n.inject(now, pkt);
    let mut out = Vec::new();
    while let Some(e) = n.poll_event() {
        if let Event::Log { ee, message } = e
            && ee == ee_name
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

#[test]
fn a_module_service_of_any_plan_type() {
    let now = Instant::now();
    let mut n = relay(&[1], now);
    n.register_ee(Box::new(PlanEe::with_defaults()));
    let h = host(&mut n).unwrap();
    h.install(signed("liststats", None), &toml::Table::new())
        .unwrap();
    h.start("liststats").unwrap();
    sync_routes(&mut n).unwrap();
    let scheme = plan(&mut n)
        .interp()
        .registry()
        .lookup("liststats")
        .map(|e| e.scheme.to_string());
    assert_eq!(
        scheme.as_deref(),
        Some("(string, int list) -> string * int * int")
    );
    let prog = "svc liststats : (string, int list) -> string * int * int\n\
        fun f(l : string, xs : int list) =\n\
          let val r = liststats(l, xs) in\n\
            print(#1 r ^ \" \" ^ toString(#2 r) ^ \" \" ^ toString(#3 r)) end\n\
        fun g(xs : int list) = try (liststats(\"x\", xs); ()) handle ServiceError => print(\"refused\")";
    assert_eq!(
        run(&mut n, now, prog, "f(\"load\", [3; ~9; 40; 2])", "plan"),
        ["LOAD 36 40"]
    );
    // The module refuses an empty list: PLAN code can handle it, and uncaught it names why.
    assert_eq!(run(&mut n, now, prog, "g([])", "plan"), ["refused"]);
    let errs = run(&mut n, now, prog, "f(\"x\", [])", "plan:error");
    assert!(
        errs.iter()
            .any(|e| e.contains("liststats: the list is empty")),
        "{errs:?}"
    );
    // Ill-typed calls never reach the module: the checker refuses them.
    let bad = "fun f() = liststats(1, [2])";
    assert!(plan(&mut n).interp().compile(bad).is_err());
    assert_eq!(
        host(&mut n).unwrap().info("liststats").unwrap().state,
        anode_modules::State::Active
    );
}
