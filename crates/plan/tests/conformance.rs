//! The PLAN conformance suite: every program under `tests/conformance/` (format in its
//! `README.md`) is checked against its header — refused where the header says `error`, at
//! the stated line:column with a message containing every `error-contains` text; otherwise
//! type-checked (with the stated `type`s), and, with an `entry`, run as a packet on a line of
//! anode nodes (the network of `anode plan run`) to the stated output and outcome.
//!
//! Every case states what it expects: a refusal at a line:column with the rule broken and
//! the words the message must contain; or, for a program that must be accepted, the types of
//! its functions (check-only cases) or the entry's value or output (cases that run). A case
//! that states less is itself a failure. Every case runs; none is skipped. The summary (cases
//! per directory and verdict) is printed with `--nocapture`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anode_plan::Program;
use anode_plan::ee::PlanEe;
use anode_plan::ee::sim::{LineRun, LineSpec, SimLine, run_line};

/// The header of a case.
#[derive(Debug, Default)]
struct Header {
    keys: BTreeMap<String, Vec<String>>,
    /// Lines the header takes (the program starts after them).
    lines: usize,
}

impl Header {
    fn parse(text: &str) -> Header {
        let mut h = Header::default();
        for line in text.lines() {
            let Some(kv) = line
                .strip_prefix("(* ")
                .and_then(|l| l.strip_suffix(" *)"))
                .and_then(|l| l.split_once(": "))
                .filter(|(k, _)| {
                    !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                })
            else {
                break;
            };
            h.keys
                .entry(kv.0.to_string())
                .or_default()
                .push(kv.1.to_string());
            h.lines += 1;
        }
        h
    }

    fn one(&self, k: &str) -> Option<&str> {
        self.keys.get(k).and_then(|v| v.first()).map(String::as_str)
    }

    fn all(&self, k: &str) -> &[String] {
        self.keys.get(k).map_or(&[], Vec::as_slice)
    }
}

/// `\n`, `\t`, `\\` in header values.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(o) => out.push(o),
            None => out.push('\\'),
        }
    }
    out
}

/// `@i` stands for the address of node `i`.
fn with_hosts(entry: &str) -> String {
    let mut out = String::new();
    let mut it = entry.chars().peekable();
    while let Some(c) = it.next() {
        if c != '@' {
            out.push(c);
            continue;
        }
        let mut n = String::new();
        while let Some(d) = it.peek().filter(|d| d.is_ascii_digit()) {
            n.push(*d);
            it.next();
        }
        let i: usize = n.parse().expect("`@` is followed by a node index");
        out.push_str(&SimLine::addr(i).to_string());
    }
    out
}

/// What a case expects.
#[derive(Debug, PartialEq)]
enum Expect {
    Ok,
    Raise(Option<String>),
    Error { at: (u32, u32), rule: String },
}

fn expectation(v: &str) -> Result<Expect, String> {
    if v == "ok" {
        return Ok(Expect::Ok);
    }
    if let Some(rest) = v.strip_prefix("raise") {
        let name = rest.trim();
        return Ok(Expect::Raise((!name.is_empty()).then(|| name.to_string())));
    }
    let rest = v
        .strip_prefix("error ")
        .ok_or_else(|| format!("bad expect `{v}`"))?;
    let (at, rule) = match rest.split_once(' ') {
        Some((lc, rule)) if lc.contains(':') && !lc.starts_with('"') => {
            let (l, c) = lc.split_once(':').ok_or("bad position")?;
            let at = (
                l.parse().map_err(|_| format!("bad line in `{v}`"))?,
                c.parse().map_err(|_| format!("bad column in `{v}`"))?,
            );
            (at, rule)
        }
        _ => return Err(format!("`{v}` must give the line:column of the refusal")),
    };
    let rule = rule
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .ok_or_else(|| format!("the rule in `{v}` must be quoted"))?;
    Ok(Expect::Error {
        at,
        rule: rule.to_string(),
    })
}

/// Checks one case; `Err` says what is wrong.
fn check_case(path: &Path) -> Result<&'static str, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let h = Header::parse(&text);
    for k in ["section", "source", "expect", "services"] {
        if h.one(k).is_none() {
            return Err(format!("header lacks `{k}`"));
        }
    }
    let section = h.one("section").unwrap_or_default();
    if !section.contains("(http") {
        return Err(format!("section `{section}` does not cite a document URL"));
    }
    let expect = expectation(h.one("expect").unwrap_or_default())?;
    let ee = PlanEe::with_defaults();
    let compiled = Program::compile(&text, ee.interp().registry());
    if let Expect::Error { at, rule } = &expect {
        let e = match compiled {
            Ok(_) => return Err(format!("accepted, but must be refused: {rule}")),
            Err(e) => e,
        };
        let got = (e.pos().line, e.pos().col);
        if *at != got {
            return Err(format!(
                "refused at {}:{} instead of {}:{}: {e}",
                got.0, got.1, at.0, at.1
            ));
        }
        let contains = h.all("error-contains");
        if contains.is_empty() {
            return Err(format!(
                "an error case needs at least one `error-contains` line (message: {})",
                e.message()
            ));
        }
        for c in contains {
            if !e.message().contains(c.as_str()) {
                return Err(format!("message `{}` lacks `{c}`", e.message()));
            }
        }
        for c in h.all("hint-contains") {
            if !e.hint().is_some_and(|hint| hint.contains(c.as_str())) {
                return Err(format!("hint {:?} lacks `{c}`", e.hint()));
            }
        }
        return Ok("refused");
    }
    let prog = compiled.map_err(|e| format!("refused: {e}"))?;
    for t in h.all("type") {
        let (name, want) = t
            .split_once(" : ")
            .ok_or_else(|| format!("bad type line `{t}`"))?;
        let got = prog
            .function_type(name)
            .map(ToString::to_string)
            .ok_or_else(|| format!("no function `{name}`"))?;
        if got != want {
            return Err(format!("`{name}` has type {got}, not {want}"));
        }
    }
    let Some(entry) = h.one("entry") else {
        if h.all("type").is_empty() {
            return Err("a check-only case must state the `type` of at least one function".into());
        }
        return Ok("checked");
    };
    let states = ["output", "output-contains", "value", "delivered"];
    if expect == Expect::Ok && !states.iter().any(|k| h.one(k).is_some()) {
        return Err(
            "a case that runs must state its `output`, `output-contains`, `value` or `delivered`"
                .into(),
        );
    }
    let run = run_case(&h, &text, entry)?;
    verdict(&h, &expect, &run)
}

fn number<T: std::str::FromStr>(h: &Header, k: &str, default: T) -> Result<T, String> {
    h.one(k).map_or(Ok(default), |v| {
        v.parse().map_err(|_| format!("bad `{k}`: {v}"))
    })
}

fn run_case(h: &Header, text: &str, entry: &str) -> Result<LineRun, String> {
    let nodes: usize = number(h, "nodes", 3)?;
    let spec = LineSpec {
        hops: nodes.saturating_sub(1),
        eval_at: number(h, "eval-at", 0)?,
        rb: number(h, "rb", 32)?,
        flow: 0,
        session: 0,
        route_fun: "defaultRoute".into(),
        handler: h.one("handler").unwrap_or_default().to_string(),
        steps: anode_plan::Limits::default().steps,
        mtu: 9000,
    };
    run_line(text, &with_hosts(entry), &spec).map_err(|e| format!("cannot run: {e}"))
}

fn verdict(h: &Header, expect: &Expect, run: &LineRun) -> Result<&'static str, String> {
    let out: String = run.report.prints.iter().map(|(_, s)| s.as_str()).collect();
    let errors: Vec<&str> = run.report.errors.iter().map(|(_, s)| s.as_str()).collect();
    if let Some(want) = h.one("output").map(unescape)
        && out != want
    {
        return Err(format!(
            "output {out:?}, expected {want:?}; errors {errors:?}"
        ));
    }
    if let Some(want) = h.one("value") {
        let got = run.entry_result().map(|r| match &r.result {
            Ok(v) => v.to_display_string(),
            Err(e) => format!("raised {}", e.exn),
        });
        if got.as_deref() != Some(want) {
            return Err(format!(
                "the entry's value is {got:?}, expected {want:?}; errors {errors:?}"
            ));
        }
    }
    for want in h.all("delivered") {
        let got: Vec<String> = run
            .report
            .deliveries
            .iter()
            .map(|(_, d)| d.value.to_display_string())
            .collect();
        if !got.iter().any(|g| g == want) {
            return Err(format!("no delivery of {want}; delivered {got:?}"));
        }
    }
    for c in h.all("output-contains") {
        let c = unescape(c);
        if !out.contains(&c) {
            return Err(format!("output {out:?} lacks {c:?}; errors {errors:?}"));
        }
    }
    if run.injected.is_err() && errors.is_empty() {
        return Err(format!("the source refused the packet: {:?}", run.injected));
    }
    match expect {
        Expect::Ok if errors.is_empty() => Ok("ran"),
        Expect::Ok => Err(format!("failed: {errors:?}")),
        Expect::Raise(_) if errors.is_empty() => Err("ran without an uncaught exception".into()),
        Expect::Raise(Some(name)) => {
            let named = errors.iter().any(|e| {
                e.split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|w| w == name)
            });
            if named {
                Ok("raised")
            } else {
                Err(format!("raised something other than {name}: {errors:?}"))
            }
        }
        Expect::Raise(None) => Ok("raised"),
        Expect::Error { .. } => Err("unreachable: error cases are decided by the checker".into()),
    }
}

fn cases(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the corpus directory is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            cases(&p, out);
        } else if p.extension().is_some_and(|e| e == "plan") {
            out.push(p);
        }
    }
}

#[test]
fn conformance_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let mut files = Vec::new();
    cases(&root, &mut files);
    assert!(files.len() >= 190, "only {} cases found", files.len());
    let mut failures = Vec::new();
    let mut summary: BTreeMap<String, BTreeMap<&'static str, usize>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        let dir = rel.split('/').next().unwrap_or_default().to_string();
        let v = match check_case(f) {
            Ok(v) => v,
            Err(why) => {
                failures.push(format!("{rel}: {why}"));
                "FAILED"
            }
        };
        *summary.entry(dir).or_default().entry(v).or_default() += 1;
    }
    for (dir, counts) in &summary {
        println!("{dir:28} {counts:?}");
    }
    println!("{} cases, {} failed", files.len(), failures.len());
    assert!(
        failures.is_empty(),
        "{} of {} conformance cases failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn headers_parse() {
    let h =
        Header::parse("(* section: S (http://x) *)\n(* expect: ok *)\n(* Grammar *)\nfun f() = 1");
    assert_eq!(h.lines, 2);
    assert_eq!(h.one("expect"), Some("ok"));
    assert_eq!(
        expectation("error 3:4 \"rule\"").unwrap(),
        Expect::Error {
            at: (3, 4),
            rule: "rule".into()
        }
    );
    assert!(expectation("error \"no position\"").is_err());
    assert_eq!(
        expectation("raise Oops").unwrap(),
        Expect::Raise(Some("Oops".into()))
    );
    assert_eq!(
        with_hosts("f(@0, \"@2\")"),
        "f(198.18.0.1:3322, \"198.18.0.3:3322\")"
    );
    assert_eq!(unescape("a\\nb\\\\"), "a\nb\\");
}
