//! `anode plan check` and `anode plan run` as a user runs them: local evaluation of an
//! entry call, the JSON forms, and compile errors shown with the source line and a caret.

use std::process::{Command, Output};

use anode_testkit::process::TestDir;

fn anode(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_anode"))
        .args(args)
        .output()
        .expect("the anode binary runs")
}

/// A PLAN file in a fresh temporary directory.
fn file(name: &str, text: &str) -> (TestDir, String) {
    let dir = TestDir::new("plan-cli");
    let s = dir.file(name, text).to_string_lossy().into_owned();
    (dir, s)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const SQUARES: &str = "\
fun sq(n : int) : int = n * n
fun show(n : int) : unit = (print(\"square \"); print(sq(n)); print(\"\\n\"))
exception Negative
fun root(n : int) : int = if n < 0 then raise Negative else n
";

#[test]
fn run_evaluates_the_entry_locally_and_prints_output_and_value() {
    let (_d, f) = file("sq.plan", SQUARES);
    let out = anode(&["plan", "run", &f, "--entry", "show(7)"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "square 49\n");
    let out = anode(&["plan", "run", &f, "--entry", "sq(12)"]);
    assert_eq!(text(&out.stdout), "=> 144\n");
    let out = anode(&["plan", "run", &f, "--entry", "root(~1)"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stdout).contains("Negative"),
        "{}",
        text(&out.stdout)
    );
    let out = anode(&["plan", "run", &f, "--entry", "sq(3)", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["entry"]["value"], "9", "{v}");
    assert_eq!(v["nodes"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["packets_moved"], 0, "no network: {v}");
}

#[test]
fn run_with_hops_runs_the_packet_on_a_line() {
    let ping = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../plan/programs/ping/noeval.plan"
    );
    let out = anode(&[
        "plan",
        "run",
        ping,
        "--hops",
        "3",
        "--entry",
        "ping(198.18.0.1, 198.18.0.4)",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("line of 4 nodes"), "{s}");
    assert!(s.contains("node 0 print: Success"), "{s}");
}

#[test]
fn check_shows_the_line_a_caret_the_types_and_a_hint() {
    let (_d, f) = file("bad.plan", "fun f(x : int) : int =\n  x + \"two\"\n");
    let out = anode(&["plan", "check", &f]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    for want in [
        "type error: right operand of `+`: expected int but found string",
        "bad.plan:2:7",
        "x + \"two\"",
        "^^^^^",
        "expected type: int",
        "found type: string",
        "hint: convert with stringToInt(s)",
    ] {
        assert!(err.contains(want), "lacks {want:?}:\n{err}");
    }
    let out = anode(&["plan", "check", "--json", &f]);
    assert!(!out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["ok"], false);
    let e = &v["errors"][0];
    assert_eq!(
        (e["line"].as_u64(), e["column"].as_u64()),
        (Some(2), Some(7))
    );
    assert_eq!(e["end_column"], 12);
    assert_eq!(
        (e["expected"].as_str(), e["found"].as_str()),
        (Some("int"), Some("string"))
    );
    assert_eq!(e["phase"], "type");
}

#[test]
fn check_json_lists_functions_and_types() {
    let (_d, f) = file("sq.plan", SQUARES);
    let out = anode(&["plan", "check", "--json", &f]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["ok"], true);
    let fns = v["functions"].as_array().expect("functions");
    assert!(
        fns.iter()
            .any(|f| f["name"] == "sq" && f["type"] == "int -> int"),
        "{v}"
    );
    // A syntax error: the grammar has no `-`, and the hint says what to write.
    let (_d, f) = file("minus.plan", "fun f(a : int) : int = a - 1\n");
    let out = anode(&["plan", "check", "--json", &f]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["errors"][0]["phase"], "syntax", "{v}");
    assert!(
        v["errors"][0]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("--")),
        "{v}"
    );
}
