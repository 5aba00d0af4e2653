//! Runs the fuzz entry points over a few thousand deterministic
//! pseudo-random, truncated and garbled inputs, so CI exercises them
//! without cargo-fuzz.

use anode_plan::{fuzz_parse, fuzz_unmarshal, marshal, packet};

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn seeds() -> Vec<String> {
    let dir = format!("{}/programs", env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![
        "fun f(x) = if x then 1 else 2".to_string(),
        "fun g(l) = foldl(h, 0, l) fun h(a, b) = a".to_string(),
        "val x = [1; 2] fun f() = let val y = x in hd y :: y end".to_string(),
        "fun c() = 1 fun d(h : host) = OnRemote(|c|(), h, 1, defaultRoute)".to_string(),
        "exception E fun f() = try raise E handle E => (\"a\\n\" ^ \"b\", #2 (1, 'c'))".to_string(),
    ];
    for p in [
        "hello.plan",
        "ping/noeval.plan",
        "ping/eval.plan",
        "traceroute.plan",
        "scout.plan",
    ] {
        out.push(std::fs::read_to_string(format!("{dir}/{p}")).unwrap());
    }
    out
}

/// The conformance programs (`tests/conformance/*/*.plan`): every construct of the PLAN
/// documents, well- and ill-formed.
fn conformance_seeds() -> Vec<String> {
    let root = format!("{}/tests/conformance", env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for d in std::fs::read_dir(&root).unwrap() {
        let d = d.unwrap().path();
        if d.is_dir() {
            for f in std::fs::read_dir(&d).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "plan") {
                    files.push(f);
                }
            }
        }
    }
    files.sort();
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect()
}

const TOKENS: &[&str] = &[
    "(", ")", "[", "]", "|", ",", ";", "fun", "val", "let", "in", "end", "if", "then", "else",
    "::", "^", "#1", "~", "foldl", "foldr", "OnRemote", "'a", "\"", "(*", "*)", "x", "1", "=",
    "->", "int list", "try", "handle", "raise", "[::1]:3", "1.2.3.4",
];

#[test]
fn parse_never_panics() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let seeds = seeds();
    let shipped = seeds.len();
    let seeds: Vec<String> = seeds.into_iter().chain(conformance_seeds()).collect();
    assert!(seeds.len() > shipped + 200, "{} seeds", seeds.len());
    let mut compiled = 0;
    for i in 0..6000 {
        let base = seeds[i % seeds.len()].as_bytes().to_vec();
        let mut input = base.clone();
        match rng.below(4) {
            0 => input.truncate(rng.below(base.len() + 1)),
            1 => {
                for _ in 0..1 + rng.below(4) {
                    let at = rng.below(input.len() + 1);
                    let tok = TOKENS[rng.below(TOKENS.len())];
                    input.splice(at..at, tok.bytes().chain([b' ']));
                }
            }
            2 => {
                for _ in 0..1 + rng.below(4) {
                    if !input.is_empty() {
                        let at = rng.below(input.len());
                        input[at] = rng.next() as u8;
                    }
                }
            }
            _ => {
                input = (0..rng.below(64)).map(|_| rng.next() as u8).collect();
            }
        }
        if fuzz_parse(&input) {
            compiled += 1;
        }
    }
    for s in &seeds[..shipped] {
        assert!(fuzz_parse(s.as_bytes()) || s.contains("foldl(h"), "{s}");
    }
    for s in &seeds[shipped..] {
        let _ = fuzz_parse(s.as_bytes());
    }
    assert!(compiled > 0);
    // Deep nesting is rejected, not a stack overflow.
    assert!(!fuzz_parse(
        format!("fun f() = {}1{}", "(".repeat(100_000), ")".repeat(100_000)).as_bytes()
    ));
    assert!(!fuzz_parse(
        format!("fun f() = {}[]", "[".repeat(100_000)).as_bytes()
    ));
    assert!(!fuzz_parse(
        format!("fun f() = {}1", "if true then 1 else ".repeat(10_000)).as_bytes()
    ));
}

#[test]
fn unmarshal_never_panics() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    let interp = anode_plan::Interpreter::with_core();
    let prog = interp.compile(&seeds()[5]).unwrap();
    let host = anode_plan::Value::Host("10.0.0.1:3322".parse().unwrap());
    let chunk = prog.chunk("ping", vec![host.clone(), host]).unwrap();
    let header = packet::PlanHeader {
        session: 1,
        route_fun: "defaultRoute".into(),
        handler: "h".into(),
    };
    let valid = [
        packet::encode_body(&header, &chunk),
        marshal::encode_chunk(&chunk),
        marshal::encode_value(&anode_plan::Value::Chunk(chunk.clone().into())),
    ];
    for v in &valid {
        assert!(fuzz_unmarshal(v));
    }
    let mut accepted = 0;
    for i in 0..5000 {
        let base = &valid[i % valid.len()];
        let mut input = base.clone();
        match rng.below(3) {
            0 => input.truncate(rng.below(base.len() + 1)),
            1 => {
                for _ in 0..1 + rng.below(3) {
                    let at = rng.below(input.len());
                    input[at] = rng.next() as u8;
                }
            }
            _ => input = (0..rng.below(48)).map(|_| rng.next() as u8).collect(),
        }
        if fuzz_unmarshal(&input) {
            accepted += 1;
        }
    }
    assert!(accepted > 0);
}
