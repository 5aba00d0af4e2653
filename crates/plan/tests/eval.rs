//! Evaluator semantics, limits and error reporting.

use anode_plan::testing::FakeServices;
use anode_plan::{EvalContext, EvalError, Interpreter, Limits, SendKind, Value};

fn me() -> std::net::SocketAddr {
    "10.0.0.1:3322".parse().unwrap()
}

fn ctx(rb: u32) -> EvalContext {
    EvalContext {
        source: me(),
        src_dev: 0,
        implicit_port: 0,
        rb,
    }
}

fn run_with(
    src: &str,
    f: &str,
    args: Vec<Value>,
    limits: Limits,
) -> (Result<Result<Value, String>, EvalError>, FakeServices) {
    let interp = Interpreter::with_core();
    let prog = interp.compile(src).unwrap_or_else(|e| panic!("{e}"));
    let mut node = FakeServices::at(me());
    node.neighbors.push(("10.0.0.2:3322".parse().unwrap(), 1));
    let r = interp
        .eval_chunk(&prog.chunk(f, args).unwrap(), &mut node, ctx(10), limits)
        .map(|ev| ev.result.map_err(|e| e.to_string()));
    (r, node)
}

fn run(src: &str, f: &str, args: Vec<Value>) -> Result<Value, String> {
    run_with(src, f, args, Limits::default()).0.unwrap()
}

fn ints(v: &[i64]) -> Value {
    Value::list(v.iter().map(|i| Value::Int(*i)).collect()).unwrap()
}

#[test]
fn arithmetic_and_operators() {
    assert_eq!(
        run("fun f() = 1 + 2 * 3 -- 4 / 2", "f", vec![]),
        Ok(Value::Int(5))
    );
    assert_eq!(run("fun f() = ~7 % 3", "f", vec![]), Ok(Value::Int(-1)));
    assert_eq!(
        run("fun f() = (1 << 4) ori 1 xori 3", "f", vec![]),
        Ok(Value::Int(18))
    );
    assert_eq!(
        run("fun f() = 6 andi noti 2", "f", vec![]),
        Ok(Value::Int(4))
    );
    assert_eq!(
        run("fun f() = \"ab\" ^ \"cd\" = \"abcd\"", "f", vec![]),
        Ok(Value::Bool(true))
    );
    assert_eq!(
        run("fun f() = ord('a') + ord(chr(1))", "f", vec![]),
        Ok(Value::Int(98))
    );
    assert_eq!(
        run("fun f() = implode(rev(explode(\"abc\")))", "f", vec![]),
        Ok(Value::str("cba"))
    );
    assert_eq!(
        run("fun f() = #3 (1, true, \"x\")", "f", vec![]),
        Ok(Value::str("x"))
    );
    assert_eq!(
        run("fun f() = fst (1, 2) + snd (3, 4)", "f", vec![]),
        Ok(Value::Int(5))
    );
    assert_eq!(
        run("fun f() = hd [1; 2] :: tl [3; 4]", "f", vec![]),
        Ok(ints(&[1, 4]))
    );
    assert_eq!(
        run("fun f() = 1 <> 2 and not (2 <= 1) or false", "f", vec![]),
        Ok(Value::Bool(true))
    );
    assert_eq!(run("fun f() = (1; 2; 3)", "f", vec![]), Ok(Value::Int(3)));
}

#[test]
fn folds_lets_and_local_functions() {
    let src = "
        fun sub(a, x) = a -- x
        fun cons(x, acc) = x :: acc
        fun l() = foldl(sub, 100, [1; 2; 3])
        fun r() = foldr(cons, [1; 2; 3], [])
        fun scale(k, l) =
          let val base = 10
              fun add(acc, x) = acc + k * x + base
          in foldl(add, 0, l) end";
    assert_eq!(run(src, "l", vec![]), Ok(Value::Int(94)));
    assert_eq!(run(src, "r", vec![]), Ok(ints(&[1, 2, 3])));
    assert_eq!(
        run(src, "scale", vec![Value::Int(2), ints(&[1, 2])]),
        Ok(Value::Int(26))
    );
    assert_eq!(
        run(
            "fun f() = let val x = 1 in let val x = x + 1 in x * 10 end + x end",
            "f",
            vec![]
        ),
        Ok(Value::Int(21))
    );
    // A local function sees the variable visible at its definition even if
    // a later binding shadows the name.
    assert_eq!(
        run(
            "fun f() = let val x = 1 fun g() = x val x = 5 in g() + x end",
            "f",
            vec![]
        ),
        Ok(Value::Int(6))
    );
    // Top-level vals are evaluated in order before the entry.
    assert_eq!(
        run("val a = 2 val b = a * 3 fun f() = a + b", "f", vec![]),
        Ok(Value::Int(8))
    );
}

#[test]
fn exceptions() {
    assert_eq!(
        run("fun f() = 1 / 0", "f", vec![]),
        Err("DivByZero: division by zero".into())
    );
    assert_eq!(
        run("fun f() = hd []", "f", vec![]).unwrap_err(),
        "EmptyList: hd of an empty list"
    );
    assert_eq!(
        run("fun f() = chr(300)", "f", vec![]).unwrap_err(),
        "BadChr: chr: 300 is not in 0..255"
    );
    assert_eq!(
        run(
            "exception E fun f() = try (raise E; 1) handle E => 2",
            "f",
            vec![]
        ),
        Ok(Value::Int(2))
    );
    // A handler for a different exception does not catch.
    assert_eq!(
        run(
            "exception E exception F fun f() = try raise E handle F => 2",
            "f",
            vec![]
        ),
        Err("E".into())
    );
    // Service errors become exceptions PLAN code can handle.
    assert_eq!(
        run(
            "fun f() = try (defaultRoute(getHostByName(\"9.9.9.9\")); 1) handle NoRoute => 0",
            "f",
            vec![]
        ),
        Ok(Value::Int(0))
    );
    // A catch-all handler binds any exception, which it may re-raise.
    assert_eq!(
        run(
            "exception E fun f() = try raise E handle e => (print(e); 2)",
            "f",
            vec![]
        ),
        Ok(Value::Int(2))
    );
    assert_eq!(
        run("fun f() = try 1 / 0 handle e => raise e", "f", vec![]),
        Err("DivByZero".into())
    );
    assert_eq!(
        run("svc fancy : int -> int\nfun f() = fancy(1)", "f", vec![]).unwrap_err(),
        "UnknownService: service `fancy` is not available on this node"
    );
}

#[test]
fn network_primitives_and_resource_bound() {
    let src = "fun go(h) = (OnRemote(|print|(\"x\"), h, 4, defaultRoute); getRB())
               fun greedy(h) = OnRemote(|print|(1), h, 11, defaultRoute)
               fun nb(h) = OnNeighbor(|print|(2), h, 1)";
    let h = Value::Host("10.0.0.2:3322".parse().unwrap());
    let (r, node) = run_with(src, "go", vec![h.clone()], Limits::default());
    assert_eq!(r.unwrap(), Ok(Value::Int(6)));
    assert_eq!(node.sent.len(), 1);
    assert_eq!(node.sent[0].rb, 4);
    assert_eq!(node.sent[0].chunk.func.as_ref(), "print");
    assert!(
        matches!(&node.sent[0].kind, SendKind::Remote { route_fun } if route_fun.as_ref() == "defaultRoute")
    );
    let (r, node) = run_with(src, "greedy", vec![h.clone()], Limits::default());
    assert!(r.unwrap().unwrap_err().starts_with("NotEnoughRB"));
    assert!(node.sent.is_empty());
    let (r, _) = run_with(
        src,
        "nb",
        vec![Value::Host("10.0.0.9:1".parse().unwrap())],
        Limits::default(),
    );
    assert!(r.unwrap().unwrap_err().starts_with("NotANeighbor"));
}

#[test]
fn budget_is_enforced_and_counted() {
    // Nested folds make a lot of work without recursion.
    let src = "
        fun inner(a, x) = a + x
        fun outer(a, l) = a + foldl(inner, 0, l)
        fun burn(l) = foldl(outer, 0, [l; l; l; l; l; l; l; l; l; l])";
    let l = ints(&(0..1000).collect::<Vec<_>>());
    let (r, _) = run_with(
        src,
        "burn",
        vec![l.clone()],
        Limits {
            steps: 5_000,
            max_depth: 200,
        },
    );
    assert_eq!(r.unwrap_err(), EvalError::BudgetExhausted { budget: 5_000 });
    let (r, _) = run_with(
        src,
        "burn",
        vec![l],
        Limits {
            steps: 1_000_000,
            max_depth: 200,
        },
    );
    assert_eq!(r.unwrap(), Ok(Value::Int(4_995_000)));
    // Budget exhaustion cannot be caught by PLAN code.
    let src2 = format!("{src}\nexception X fun safe(l) = try burn(l) handle X => 0");
    let (r, _) = run_with(
        &src2,
        "safe",
        vec![ints(&[1; 500])],
        Limits {
            steps: 2_000,
            max_depth: 200,
        },
    );
    assert_eq!(r.unwrap_err(), EvalError::BudgetExhausted { budget: 2_000 });
    // A fold may only name functions defined before it (no recursion).
    let e = Interpreter::with_core()
        .compile("fun f(l) = foldl(f2, 0, l) fun f2(a, x) = a")
        .unwrap_err();
    assert!(e.to_string().contains("no recursion"), "{e}");
}

#[test]
fn string_growth_is_bounded() {
    let src = "fun dbl(s, x) = s ^ s
               fun grow() = foldl(dbl, \"ab\", [1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1])";
    let (r, _) = run_with(
        src,
        "grow",
        vec![],
        Limits {
            steps: u64::MAX,
            max_depth: 200,
        },
    );
    assert!(matches!(r, Err(EvalError::TooLarge(_))));
}

#[test]
fn entry_arguments_are_checked() {
    let interp = Interpreter::with_core();
    let prog = interp.compile("fun f(x) = x + 1").unwrap();
    let mut node = FakeServices::at(me());
    let bad = prog.chunk("f", vec![Value::str("no")]).unwrap();
    assert!(matches!(
        interp.eval_chunk(&bad, &mut node, ctx(1), Limits::default()),
        Err(EvalError::BadArguments { .. })
    ));
    let missing = prog.chunk("nope", vec![]).unwrap();
    assert!(matches!(
        interp.eval_chunk(&missing, &mut node, ctx(1), Limits::default()),
        Err(EvalError::UnknownEntry(_))
    ));
    let arity = prog.chunk("f", vec![]).unwrap();
    assert!(matches!(
        interp.eval_chunk(&arity, &mut node, ctx(1), Limits::default()),
        Err(EvalError::BadArguments { .. })
    ));
}

#[test]
fn chunks_are_first_class() {
    let src = "fun add(a, b) = a + b
               fun mk(x) = |add|(x, 1)
               fun go(x) = eval(mk(x)) * 2
               fun svcchunk() = eval(|length|([1; 2; 3]))";
    assert_eq!(run(src, "go", vec![Value::Int(4)]), Ok(Value::Int(10)));
    assert_eq!(run(src, "svcchunk", vec![]), Ok(Value::Int(3)));
}

#[test]
fn fragment_and_reassemble() {
    let src = "fun big(s) = print(s)
               fun split(s) = fragment(|big|(s), 16)
               fun deliverAll(l) = foldl(ev, (), l)
               fun ev(u, c) = eval(c)";
    // `ev` is defined after deliverAll, so use a version that respects order.
    assert!(Interpreter::with_core().compile(src).is_err());
    let src = "fun big(s) = print(s)
               fun split(s) = fragment(|big|(s), 16)
               fun ev(u, c) = eval(c)
               fun deliverAll(l) = foldl(ev, (), rev(l))";
    let interp = Interpreter::with_core();
    let prog = interp.compile(src).unwrap();
    let mut node = FakeServices::at(me());
    let text = "a fairly long string that does not fit in one fragment";
    let ev = interp
        .eval_chunk(
            &prog.chunk("split", vec![Value::str(text)]).unwrap(),
            &mut node,
            ctx(1),
            Limits::default(),
        )
        .unwrap();
    let pieces = ev.result.unwrap();
    let Value::List(l) = &pieces else { panic!() };
    assert!(l.len() > 3);
    let ev = interp
        .eval_chunk(
            &prog.chunk("deliverAll", vec![pieces]).unwrap(),
            &mut node,
            ctx(1),
            Limits::default(),
        )
        .unwrap();
    assert_eq!(ev.result, Ok(Value::Unit));
    assert_eq!(node.output(), text);
}

#[test]
fn extension_services() {
    let mut interp = Interpreter::with_core();
    let id = interp
        .registry_mut()
        .register("note", "(string, int) -> unit")
        .unwrap();
    let prog = interp.compile("fun f() = note(\"x\", 3)").unwrap();
    let mut node = FakeServices::at(me());
    interp
        .eval_chunk(
            &prog.chunk("f", vec![]).unwrap(),
            &mut node,
            ctx(1),
            Limits::default(),
        )
        .unwrap();
    assert_eq!(
        node.calls,
        vec![(id, "note".to_string(), vec![Value::str("x"), Value::Int(3)])]
    );
}

#[test]
fn program_cache_avoids_recompiling() {
    let interp = Interpreter::with_core();
    let text = "fun f() = 1";
    let p = interp.compile(text).unwrap();
    let c = anode_plan::marshal::encode_chunk(&p.chunk("f", vec![]).unwrap());
    let mut node = FakeServices::at(me());
    for _ in 0..3 {
        let chunk = anode_plan::marshal::decode_chunk(&c).unwrap();
        interp
            .eval_chunk(&chunk, &mut node, ctx(1), Limits::default())
            .unwrap();
    }
    let (hits, misses) = interp.cache().stats();
    assert_eq!(misses, 1);
    assert!(hits >= 3);
    // Hash-only chunks work once the text is cached.
    let h = anode_plan::marshal::encode_chunk_hash_only(&p.chunk("f", vec![]).unwrap());
    let chunk = anode_plan::marshal::decode_chunk(&h).unwrap();
    let ev = interp
        .eval_chunk(&chunk, &mut node, ctx(1), Limits::default())
        .unwrap();
    assert_eq!(ev.result, Ok(Value::Int(1)));
    let other = Interpreter::with_core();
    assert!(matches!(
        other.eval_chunk(&chunk, &mut node, ctx(1), Limits::default()),
        Err(EvalError::MissingCode(_))
    ));
}

#[test]
fn compile_errors_have_positions_and_reasons() {
    let interp = Interpreter::with_core();
    let e = interp
        .compile("fun f(x) =\n  if x then 1 else \"one\"")
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "type error at 2:20: `else` branch (both branches of `if` must have the same type): expected int but found string"
    );
    let e = interp.compile("fun f() = \"open").unwrap_err();
    assert_eq!(e.pos().line, 1);
    assert!(e.to_string().contains("unterminated string"));
}
