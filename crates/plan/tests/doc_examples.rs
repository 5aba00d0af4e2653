//! The example programs of the PLAN documentation (tutorial and
//! programmer's guide, OCaml/v3.1 docs), run with their documented results.

use anode_plan::testing::{Event, LineNet};
use anode_plan::{EvalContext, Interpreter, Limits, Value};

fn src(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/programs/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn all_doc_programs_compile() {
    let interp = Interpreter::with_core();
    for entry in
        std::fs::read_dir(format!("{}/tests/programs", env!("CARGO_MANIFEST_DIR"))).unwrap()
    {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        interp
            .compile(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

#[test]
fn hello_world_prints_host_list() {
    let mut net = LineNet::new(1);
    let prog = net
        .interp
        .compile(&src("tutorial_helloworld.plan"))
        .unwrap();
    let dest = net.hosts[0];
    net.inject(0, dest, 1, prog.chunk("doit", vec![]).unwrap())
        .unwrap();
    assert_eq!(net.output(0), "[(10.0.0.1,3322)] says : Hello world!\n");
    assert_eq!(
        net.events,
        vec![Event::Eval {
            node: 0,
            func: "doit".into(),
            outcome: "()".into()
        }]
    );
}

#[test]
fn ping_prints_success_at_source() {
    let mut net = LineNet::new(4);
    let prog = net.interp.compile(&src("tutorial_ping.plan")).unwrap();
    let (s, d) = (net.hosts[0], net.hosts[3]);
    let chunk = prog
        .chunk("ping", vec![Value::Host(s), Value::Host(d)])
        .unwrap();
    net.inject(0, s, 20, chunk).unwrap();
    assert_eq!(net.output(0), "Success");
    // Evaluated at the source (injection), the destination, and the source.
    let evals: Vec<usize> = net
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Eval { node, .. } => Some(*node),
            _ => None,
        })
        .collect();
    assert_eq!(evals, vec![0, 3, 0]);
    // Intermediate routers forward passively.
    assert!(net.events.contains(&Event::Forward { node: 1, dest: d }));
    assert!(net.events.contains(&Event::Forward { node: 2, dest: s }));
}

#[test]
fn ping_fails_without_enough_resource_bound() {
    let mut net = LineNet::new(4);
    let prog = net.interp.compile(&src("tutorial_ping.plan")).unwrap();
    let (s, d) = (net.hosts[0], net.hosts[3]);
    let chunk = prog
        .chunk("ping", vec![Value::Host(s), Value::Host(d)])
        .unwrap();
    net.inject(0, s, 4, chunk).unwrap();
    assert_eq!(net.output(0), "");
    assert!(net.events.iter().any(|e| matches!(e, Event::Drop { .. })));
}

#[test]
fn ping_pong_is_stopped_by_the_resource_bound() {
    let mut net = LineNet::new(2);
    let prog = net.interp.compile(&src("tutorial_ping_pong.plan")).unwrap();
    let (a, b) = (net.hosts[0], net.hosts[1]);
    net.inject(
        0,
        a,
        5,
        prog.chunk("ping_pong", vec![Value::Host(a), Value::Host(b)])
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        net.output(0),
        "Current RB is 5\nCurrent RB is 3\nCurrent RB is 1\n"
    );
    assert_eq!(
        net.output(1),
        "Current RB is 4\nCurrent RB is 2\nCurrent RB is 0\n"
    );
    // The last evaluation has nothing left to give: NotEnoughRB.
    assert!(matches!(
        net.events.last(),
        Some(Event::Eval { outcome, .. }) if outcome.starts_with("raise NotEnoughRB")
    ));
}

#[test]
fn guide_handler_examples() {
    let interp = Interpreter::with_core();
    let prog = interp.compile(&src("guide_handler.plan")).unwrap();
    let me = "10.0.0.1:3322".parse().unwrap();
    let run = |f: &str, args: Vec<Value>| {
        let mut node = anode_plan::testing::FakeServices::at(me);
        let ctx = EvalContext {
            source: me,
            src_dev: 0,
            implicit_port: 0,
            rb: 1,
        };
        let ev = interp
            .eval_chunk(
                &prog.chunk(f, args).unwrap(),
                &mut node,
                ctx,
                Limits::default(),
            )
            .unwrap();
        (ev.result, node.output())
    };
    assert_eq!(
        run("safeDiv", vec![Value::Int(7), Value::Int(0)]).0,
        Ok(Value::Int(0))
    );
    assert_eq!(
        run("safeDiv", vec![Value::Int(7), Value::Int(2)]).0,
        Ok(Value::Int(3))
    );
    assert_eq!(run("caught", vec![]).0, Ok(Value::Int(42)));
    assert_eq!(run("boom", vec![]).0.unwrap_err().exn.as_ref(), "Oops");
    let c = anode_plan::Chunk::new(None, "print", vec![Value::Unit]).unwrap();
    let (r, out) = run(
        "report",
        vec![
            Value::str("NoRoute"),
            Value::Host(me),
            Value::Chunk(c.into()),
        ],
    );
    assert_eq!(r, Ok(Value::Unit));
    assert_eq!(out, "error NoRoute at (10.0.0.1,3322)\n");
}

#[test]
fn guide_fragment_declaration() {
    let interp = Interpreter::with_core();
    let prog = interp.compile(&src("guide_service_decls.plan")).unwrap();
    assert_eq!(
        prog.function_type("split").unwrap().to_string(),
        "(int chunk, int) -> unit chunk list"
    );
}
