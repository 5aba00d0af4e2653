//! The programs shipped in `programs/`: they compile, and run on a
//! simulated network with fake services.

use anode_plan::testing::{Event, LineNet};
use anode_plan::{ServiceError, Value};
use std::collections::HashMap;

fn src(name: &str) -> String {
    std::fs::read_to_string(format!("{}/programs/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn scout_services(net: &mut LineNet) {
    let reg = net.interp.registry_mut();
    reg.register("queueLength", "dev -> int").unwrap();
    reg.register("getMark", "(int, host) -> int").unwrap();
    reg.register("setMark", "(int, host, int) -> unit").unwrap();
    reg.register("newFlowId", "void -> int").unwrap();
    reg.register("installFlow", "(int, host, dev) -> unit")
        .unwrap();
    fn queue_length(st: &mut HashMap<String, Value>, a: &[Value]) -> Result<Value, ServiceError> {
        let Value::Dev(d) = a[0] else { unreachable!() };
        Ok(st
            .get(&format!("queue{d}"))
            .cloned()
            .unwrap_or(Value::Int(0)))
    }
    fn get_mark(st: &mut HashMap<String, Value>, a: &[Value]) -> Result<Value, ServiceError> {
        Ok(st
            .get(&format!("mark{}{}", a[0], a[1]))
            .cloned()
            .unwrap_or(Value::Int(-1)))
    }
    fn set_mark(st: &mut HashMap<String, Value>, a: &[Value]) -> Result<Value, ServiceError> {
        st.insert(format!("mark{}{}", a[0], a[1]), a[2].clone());
        Ok(Value::Unit)
    }
    fn new_flow(st: &mut HashMap<String, Value>, _: &[Value]) -> Result<Value, ServiceError> {
        let n = match st.get("flows") {
            Some(Value::Int(n)) => n + 1,
            _ => 100,
        };
        st.insert("flows".into(), Value::Int(n));
        Ok(Value::Int(n))
    }
    fn install(st: &mut HashMap<String, Value>, a: &[Value]) -> Result<Value, ServiceError> {
        st.insert(format!("flow{}", a[0]), a[1].clone());
        Ok(Value::Unit)
    }
    for n in &mut net.nodes {
        n.ext.insert("queueLength".into(), queue_length);
        n.ext.insert("getMark".into(), get_mark);
        n.ext.insert("setMark".into(), set_mark);
        n.ext.insert("newFlowId".into(), new_flow);
        n.ext.insert("installFlow".into(), install);
    }
}

#[test]
fn all_programs_compile() {
    let mut net = LineNet::new(1);
    scout_services(&mut net);
    for p in [
        "hello.plan",
        "ping/noeval.plan",
        "ping/eval.plan",
        "traceroute.plan",
        "scout.plan",
    ] {
        net.interp
            .compile(&src(p))
            .unwrap_or_else(|e| panic!("{p}: {e}"));
    }
}

#[test]
fn hello() {
    let mut net = LineNet::new(1);
    let prog = net.interp.compile(&src("hello.plan")).unwrap();
    let h = net.hosts[0];
    net.inject(0, h, 1, prog.chunk("hello", vec![]).unwrap())
        .unwrap();
    assert_eq!(net.output(0), "[(10.0.0.1,3322)] says : Hello world!\n");
}

fn eval_nodes(net: &LineNet) -> Vec<usize> {
    net.events
        .iter()
        .filter_map(|e| match e {
            Event::Eval { node, .. } => Some(*node),
            _ => None,
        })
        .collect()
}

#[test]
fn ping_noeval_and_eval() {
    let mut net = LineNet::new(4);
    let prog = net.interp.compile(&src("ping/noeval.plan")).unwrap();
    let (s, d) = (net.hosts[0], net.hosts[3]);
    net.inject(
        0,
        s,
        10,
        prog.chunk("ping", vec![Value::Host(s), Value::Host(d)])
            .unwrap(),
    )
    .unwrap();
    assert_eq!(net.output(0), "Success");
    assert_eq!(eval_nodes(&net), vec![0, 3, 0]);

    let mut net = LineNet::new(4);
    let prog = net.interp.compile(&src("ping/eval.plan")).unwrap();
    net.inject(
        0,
        s,
        10,
        prog.chunk("ping", vec![Value::Host(s), Value::Host(d)])
            .unwrap(),
    )
    .unwrap();
    assert_eq!(net.output(0), "Success");
    assert_eq!(eval_nodes(&net), vec![0, 1, 2, 3, 2, 1, 0]);
    assert!(
        !net.events
            .iter()
            .any(|e| matches!(e, Event::Forward { .. }))
    );
}

#[test]
fn traceroute_reports_every_hop() {
    let mut net = LineNet::new(4);
    let prog = net.interp.compile(&src("traceroute.plan")).unwrap();
    let (s, d) = (net.hosts[0], net.hosts[3]);
    net.inject(
        0,
        s,
        30,
        prog.chunk("trace", vec![Value::Host(s), Value::Host(d), Value::Int(0)])
            .unwrap(),
    )
    .unwrap();
    let mut lines: Vec<String> = net.nodes[0].printed.clone();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "1 10.0.0.2:3322\n",
            "2 10.0.0.3:3322\n",
            "3 10.0.0.4:3322\n"
        ]
    );
}

#[test]
fn scout_finds_the_uncongested_route_and_installs_flows() {
    // 0 - 1 - 3 and 0 - 2 - 3; the link out of node 1 towards 3 is congested.
    let mut net = LineNet::with_edges(4, &[(0, 1), (1, 3), (0, 2), (2, 3)]);
    scout_services(&mut net);
    // Node 1's device towards node 3 is its second neighbor (dev 1).
    net.nodes[1].state.insert("queue1".into(), Value::Int(50));
    let prog = net.interp.compile(&src("scout.plan")).unwrap();
    let (s, d) = (net.hosts[0], net.hosts[3]);
    let path = Value::list(vec![Value::Host(s)]).unwrap();
    let chunk = prog
        .chunk(
            "scout",
            vec![
                Value::Host(s),
                Value::Host(d),
                Value::Int(1),
                Value::Int(0),
                path,
            ],
        )
        .unwrap();
    net.inject(0, s, 40, chunk).unwrap();
    // Scouts may come back over both routes (the application keeps the
    // best one after a hysteresis interval); each delivers (flow, metric) to
    // the source application. The best has metric 2 (two hops, empty queues)
    // and goes through node 2.
    let found: Vec<(i64, i64)> = net.nodes[0]
        .delivered
        .iter()
        .filter_map(|(_, v)| match v {
            Value::Tuple(t) => match t.items() {
                [Value::Int(f), Value::Int(m)] => Some((*m, *f)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let best = found.iter().copied().min().unwrap();
    assert_eq!(best.0, 2, "{found:?}");
    let key = format!("flow{}", best.1);
    assert_eq!(
        net.nodes[0].state.get(&key),
        Some(&Value::Host(net.hosts[2]))
    );
    assert_eq!(
        net.nodes[2].state.get(&key),
        Some(&Value::Host(net.hosts[3]))
    );
    assert_eq!(net.nodes[1].state.get(&key), None);
    assert_eq!(net.nodes[0].delivered.len(), found.len());
}
