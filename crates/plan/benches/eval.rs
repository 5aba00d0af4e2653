//! Per-hop costs: evaluating a ping chunk (unmarshal, evaluate, remarshal
//! the child) and reading the header for passive routing.

use anode_plan::packet::{PlanHeader, encode_body, peek_header};
use anode_plan::testing::FakeServices;
use anode_plan::{EvalContext, Interpreter, Limits, Value, marshal};
use criterion::{Criterion, black_box, criterion_group, criterion_main};

const PING: &str = include_str!("../programs/ping/eval.plan");

fn bench(c: &mut Criterion) {
    let interp = Interpreter::with_core();
    let prog = interp.compile(PING).unwrap();
    let src: std::net::SocketAddr = "10.0.0.1:3322".parse().unwrap();
    let here: std::net::SocketAddr = "10.0.0.2:3322".parse().unwrap();
    let dst: std::net::SocketAddr = "10.0.0.9:3322".parse().unwrap();
    let next: std::net::SocketAddr = "10.0.0.3:3322".parse().unwrap();
    let chunk = prog
        .chunk("ping", vec![Value::Host(src), Value::Host(dst)])
        .unwrap();
    let header = PlanHeader {
        session: 1,
        route_fun: "defaultRoute".into(),
        handler: String::new(),
    };
    let body = encode_body(&header, &chunk);
    let mut node = FakeServices::at(here);
    node.neighbors.push((next, 1));
    node.routes.insert(dst, (next, 1));
    let ctx = EvalContext {
        source: src,
        src_dev: 0,
        implicit_port: 0,
        rb: 64,
    };

    c.bench_function("hop_eval_ping (unmarshal+eval+remarshal)", |b| {
        b.iter(|| {
            let (h, tail) = peek_header(black_box(&body)).unwrap();
            let chunk = marshal::decode_chunk(tail).unwrap();
            let ev = interp
                .eval_chunk(&chunk, &mut node, ctx.clone(), Limits::default())
                .unwrap();
            let out = node.sent.pop().unwrap();
            let child = encode_body(&h.to_owned(), &out.chunk);
            black_box((ev.steps, child));
        })
    });

    c.bench_function("passive_route_peek_header", |b| {
        b.iter(|| {
            let (h, tail) = peek_header(black_box(&body)).unwrap();
            black_box((h.route_fun.len(), tail.len()));
        })
    });

    c.bench_function("eval_only_ping (decoded chunk)", |b| {
        b.iter(|| {
            let ev = interp
                .eval_chunk(black_box(&chunk), &mut node, ctx.clone(), Limits::default())
                .unwrap();
            node.sent.clear();
            black_box(ev.steps);
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
