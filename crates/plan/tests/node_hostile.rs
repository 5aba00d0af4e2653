//! Hostile PLAN on real anode nodes (virtual time): unbounded fan-out is stopped by the
//! resource bound, over-budget programs are stopped, ill-typed and malformed packets are
//! answered to their handler or dropped and counted, never a crash.

mod node_common;

use anode_core::LinkId;
use anode_core::wire::anep::TYPE_PLAN;
use anode_core::wire::routed_packet;
use anode_core::wire::transit::TransitRepr;
use anode_plan::ee::{FLOW_ROUTE, PacketSpec, PlanEeConfig, encode_packet, encode_packet_chunk};
use anode_plan::value::Code;
use anode_plan::{Chunk, Limits, Value};
use node_common::*;

const BOMB: &str = "
fun bomb(n : int) : unit =
  let
    fun share() = if getRB() > 1 then getRB() / 2 else 1
    fun send(u : unit, nb : host * dev) =
      try OnNeighbor(|bomb|(n + 1), fst nb, share(), snd nb) handle NotEnoughRB => ()
    fun again(u : unit, x : int) = foldl(send, (), getNeighbors())
  in
    foldl(again, (), [1; 2; 3; 4; 5; 6; 7; 8])
  end
";

fn mesh(n: usize) -> Vec<(usize, usize)> {
    let mut e = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            e.push((a, b));
        }
    }
    e
}

#[test]
fn unbounded_fan_out_is_stopped_by_the_resource_bound() {
    for rb in [20u16, 300] {
        let mut net = Net::new(5, &mesh(5));
        let s = addr(0);
        net.moved = 0;
        net.inject(0, BOMB, "bomb(0)", &PacketSpec::new(s, s, rb));
        // Every transmission spends one unit of the shared bound: no more than `rb` packets
        // cross a link, however hard the program tries.
        assert!(net.moved <= u64::from(rb), "rb {rb}: {} packets", net.moved);
        assert!(
            net.moved >= u64::from(rb) / 2,
            "rb {rb}: the bomb did fan out"
        );
        let evals: u64 = (0..5).map(|i| net.ee(i).stats().evaluations).sum();
        assert!(evals <= u64::from(rb) + 1, "rb {rb}: {evals} evaluations");
    }
}

#[test]
fn a_packet_sending_itself_to_its_own_node_is_bounded_too() {
    let mut net = Net::line(2);
    let s = addr(0);
    let text = "fun again() : unit = OnRemote(|again|(), hd(thisHost()), getRB(), defaultRoute)";
    net.inject(0, text, "again()", &PacketSpec::new(s, s, 50));
    let st = net.ee(0).stats().clone();
    assert!(st.evaluations <= 51 && st.evaluations >= 50, "{st:?}");
}

const SPIN: &str = "
fun inner(acc : int, x : int) : int = acc + x
fun outer(acc : int, x : int) : int = acc + foldl(inner, 0, [1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20])
fun spin() : unit = print(foldl(outer, 0, [1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20]))
";

#[test]
fn an_over_budget_program_is_stopped_counted_and_reported() {
    let cfg = PlanEeConfig {
        limits: Limits {
            steps: 500,
            ..Limits::default()
        },
        ..PlanEeConfig::default()
    };
    let mut net = Net::with_config(3, &[(0, 1), (1, 2)], cfg);
    let (s, d) = (addr(0), addr(2));
    let mut spec = PacketSpec::new(s, d, 8);
    spec.handler = "defHandler".into();
    net.inject(0, SPIN, "spin()", &spec);
    assert_eq!(
        net.ee(2)
            .stats()
            .dropped(anode_core::DropReason::BudgetExhausted),
        1
    );
    assert_eq!(
        net.nodes[2]
            .counters()
            .ee_drop_map()
            .get("plan/budget_exhausted"),
        Some(&1)
    );
    assert_eq!(net.output(2), "", "stopped before printing");
    let out = net.output(0);
    assert!(
        out.contains("budget_exhausted") && out.contains("|spin|"),
        "{out}"
    );
    // The default budget is plenty for it.
    let mut net = Net::line(2);
    net.inject(0, SPIN, "spin()", &PacketSpec::new(s, s, 1));
    assert_eq!(net.output(0), "4200");
}

#[test]
fn uncaught_exception_goes_to_the_programs_handler_at_the_source() {
    let text = "
fun oops(msg : string, at : host, c : unit chunk) : unit = print(\"handled: \" ^ msg)
fun fail() : unit = print(1 / 0)
";
    let mut net = Net::line(3);
    let (s, d) = (addr(0), addr(2));
    let mut spec = PacketSpec::new(s, d, 8);
    spec.handler = "oops".into();
    net.inject(0, text, "fail()", &spec);
    assert_eq!(
        net.ee(2)
            .stats()
            .dropped(anode_core::DropReason::UncaughtException),
        1
    );
    assert!(
        net.output(0).starts_with("handled: DivByZero"),
        "{}",
        net.output(0)
    );
    assert_eq!(net.ee(2).stats().error_reports, 1);
    // Without a handler: dropped and counted, nothing comes back.
    spec.handler.clear();
    net.clear_reports();
    net.inject(0, text, "fail()", &spec);
    assert_eq!(
        net.ee(2)
            .stats()
            .dropped(anode_core::DropReason::UncaughtException),
        2
    );
    assert_eq!(net.output(0), "");
    assert_eq!(net.report[2].errors.len(), 1);
}

#[test]
fn ill_typed_and_uncompilable_packets_are_answered_or_dropped() {
    let mut net = Net::line(3);
    let (s, d) = (addr(0), addr(2));
    let ping = program("ping/noeval.plan");
    let prog = net.ee(0).interp().compile(&ping).unwrap();
    // ping(int, int): the arguments do not match ping's type.
    let bad = prog
        .chunk("ping", vec![Value::Int(1), Value::Int(2)])
        .unwrap();
    let mut spec = PacketSpec::new(s, d, 8);
    spec.handler = "defHandler".into();
    net.inject_raw(0, encode_packet_chunk(&spec, &bad).unwrap());
    assert_eq!(
        net.ee(2)
            .stats()
            .dropped(anode_core::DropReason::BadArguments),
        1
    );
    assert!(net.output(0).contains("bad_arguments"), "{}", net.output(0));
    // Code that does not compile; no handler: dropped and counted only.
    let junk = Chunk::new(Some(Code::from_text("fun f( = ")), "f", vec![]).unwrap();
    net.inject_raw(
        0,
        encode_packet_chunk(&PacketSpec::new(s, d, 8), &junk).unwrap(),
    );
    assert_eq!(
        net.ee(2)
            .stats()
            .dropped(anode_core::DropReason::CompileError),
        1
    );
    // An entry the code does not define.
    let none = prog.chunk("nosuch", vec![]).unwrap();
    net.inject_raw(
        0,
        encode_packet_chunk(&PacketSpec::new(s, d, 8), &none).unwrap(),
    );
    assert_eq!(
        net.ee(2)
            .stats()
            .dropped(anode_core::DropReason::UnknownEntry),
        1
    );
    // Code sent as a hash the destination has never seen.
    let hashed = Chunk::new(Some(Code::Hash([7; 32])), "f", vec![]).unwrap();
    net.inject_raw(
        0,
        encode_packet_chunk(&PacketSpec::new(s, d, 8), &hashed).unwrap(),
    );
    assert_eq!(
        net.ee(2)
            .stats()
            .dropped(anode_core::DropReason::MissingCode),
        1
    );
}

#[test]
fn malformed_packets_are_dropped_and_counted() {
    let mut net = Net::line(3);
    let (s, d) = (addr(0), addr(2));
    // A chunk that does not unmarshal.
    net.inject_raw(
        0,
        encode_packet(&PacketSpec::new(s, d, 8), &[0xff, 0xff, 0x01]).unwrap(),
    );
    assert_eq!(
        net.ee(2)
            .stats()
            .dropped(anode_core::DropReason::MalformedChunk),
        1
    );
    // A body that is not a PLAN body at all.
    let t = TransitRepr {
        rb: 8,
        src: s,
        dst: d,
        prev_hop: s,
        ..Default::default()
    };
    let junk = routed_packet(TYPE_PLAN, &t, &[], b"not plan").unwrap();
    // Refused at the source, which reads the header to route it...
    net.inject_raw(0, junk.clone());
    assert_eq!(
        net.ee(0)
            .stats()
            .dropped(anode_core::DropReason::MalformedBody),
        1
    );
    // ...and at the destination when it arrives from elsewhere.
    let now = net.now;
    net.nodes[2].handle_packet(now, LinkId(0), junk);
    assert_eq!(
        net.ee(2)
            .stats()
            .dropped(anode_core::DropReason::MalformedBody),
        1
    );
    assert_eq!(
        net.nodes[2]
            .counters()
            .ee_drop_map()
            .get("plan/malformed_body"),
        Some(&1)
    );
}

#[test]
fn garbled_plan_packets_never_crash_a_node() {
    let mut net = Net::line(3);
    let (s, d) = (addr(0), addr(1));
    let ping = program("ping/eval.plan");
    let mut spec = PacketSpec::new(s, d, 8);
    spec.handler = "defHandler".into();
    let good = anode_plan::ee::build_packet(
        net.ee(0).interp(),
        &ping,
        &format!("ping({s}, {})", addr(2)),
        &spec,
    )
    .unwrap();
    spec.route_fun = FLOW_ROUTE.into();
    spec.eval_dest = addr(2);
    let routed =
        anode_plan::ee::build_packet(net.ee(0).interp(), &ping, "ping(1.2.3.4, 5.6.7.8)", &spec)
            .unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let now = net.now;
    for base in [&good, &routed] {
        for len in 0..base.len() {
            net.nodes[1].handle_packet(now, LinkId(0), base[..len].to_vec());
        }
        for _ in 0..3000 {
            let mut b = base.clone();
            for _ in 0..(rnd() % 4 + 1) {
                let i = (rnd() as usize) % b.len();
                b[i] = rnd() as u8;
            }
            net.nodes[1].handle_packet(now, LinkId(0), b);
        }
        net.pump();
    }
    // Still working afterwards.
    net.clear_reports();
    let s = addr(0);
    net.inject(
        0,
        &program("ping/noeval.plan"),
        &format!("ping({s}, {})", addr(2)),
        &PacketSpec::new(s, s, 8),
    );
    assert_eq!(net.output(0), "Success");
    assert!(net.ee(1).stats().total_drops() > 0);
}

#[test]
fn rb_running_out_on_a_routing_function_path_is_reported() {
    let mut net = Net::line(4);
    let (s, d) = (addr(0), addr(3));
    let mut spec = PacketSpec::new(s, d, 1);
    spec.route_fun = FLOW_ROUTE.into();
    spec.handler = "defHandler".into();
    net.inject(0, "fun arrive() = print(\"arrived\")", "arrive()", &spec);
    assert_eq!(net.output(3), "");
    assert_eq!(
        net.ee(1)
            .stats()
            .dropped(anode_core::DropReason::RbExhausted),
        1
    );
    assert!(net.output(0).contains("RBExhausted"), "{}", net.output(0));
    // An unknown routing function is refused where it is first looked up (the source).
    spec.route_fun = "noSuchRoute".into();
    spec.rb = 8;
    net.inject(0, "fun arrive() = print(\"arrived\")", "arrive()", &spec);
    assert_eq!(
        net.ee(0)
            .stats()
            .dropped(anode_core::DropReason::UnknownRouteFun),
        1
    );
}
