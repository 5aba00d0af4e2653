//! Bad topology files: every message names the file, the line and the fix.

use anode_emu::{EmuError, Topology};

const GOOD: &str = "[network]
seed = 1
duration_ms = 5000

[[node]]
name = \"a\"
[[node]]
name = \"b\"

[[link]]
a = \"a\"
b = \"b\"
";

fn err(src: &str) -> (usize, String) {
    match Topology::parse(src, "bad.toml") {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(EmuError::Invalid {
            file, line, fix, ..
        }) => {
            assert_eq!(file, "bad.toml");
            assert!(!fix.is_empty());
            let msg = Topology::parse(src, "bad.toml").unwrap_err().to_string();
            assert!(msg.starts_with(&format!("bad.toml:{line}:")), "{msg}");
            assert!(msg.contains("fix: "), "{msg}");
            (line, msg)
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[test]
fn good_file_parses() {
    let t = Topology::parse(GOOD, "good.toml").unwrap();
    assert_eq!(t.nodes.len(), 2);
    assert_eq!(t.links[0].loss, 0.0);
}

#[test]
fn unknown_key_names_line_and_accepted_keys() {
    let src = GOOD.replace("b = \"b\"\n", "b = \"b\"\ndelay = 3\n");
    let (line, msg) = err(&src);
    assert_eq!(line, 13);
    assert!(msg.contains("unknown field `delay`"), "{msg}");
    assert!(msg.contains("delay_ms"), "lists accepted keys: {msg}");
}

#[test]
fn link_to_unknown_node() {
    let src = GOOD.replace("b = \"b\"\n", "b = \"c\"\n");
    let (line, msg) = err(&src);
    assert_eq!(line, 12);
    assert!(msg.contains("no node named 'c'"), "{msg}");
    assert!(msg.contains("use one of the [[node]] names: a, b"), "{msg}");
}

#[test]
fn loss_above_one() {
    let src = GOOD.replace("b = \"b\"\n", "b = \"b\"\nloss = 1.5\n");
    let (line, msg) = err(&src);
    assert_eq!(line, 13);
    assert!(msg.contains("loss = 1.5 is not a probability"), "{msg}");
    assert!(msg.contains("between 0 and 1"), "{msg}");
}

#[test]
fn step_problems() {
    let step = |body: &str| format!("{GOOD}\n[[step]]\nat_ms = 100\n{body}");
    // Unknown action lists the actions.
    let (line, msg) = err(&step("action = \"explode\"\n"));
    assert_eq!(line, 16);
    assert!(
        msg.contains("unknown action 'explode'") && msg.contains("fail-link"),
        "{msg}"
    );
    // Unknown key of a known action, at the key's line.
    let (line, msg) = err(&step(
        "action = \"send\"\nfrom = \"a\"\nto = \"b\"\ncolour = 1\n",
    ));
    assert_eq!(line, 19);
    assert!(
        msg.contains("unknown key `colour`") && msg.contains("`count`"),
        "{msg}"
    );
    // Unknown node in a step.
    let (line, msg) = err(&step("action = \"send\"\nfrom = \"z\"\nto = \"b\"\n"));
    assert_eq!(line, 17);
    assert!(msg.contains("no node named 'z'"), "{msg}");
    // Wrong type.
    let (_, msg) = err(&step(
        "action = \"send\"\nfrom = \"a\"\nto = \"b\"\ncount = \"ten\"\n",
    ));
    assert!(
        msg.contains("`count` is a string") && msg.contains("count = 10"),
        "{msg}"
    );
    // Missing key.
    let (line, msg) = err(&step("action = \"fail-link\"\na = \"a\"\n"));
    assert_eq!(line, 14);
    assert!(msg.contains("`b` is missing"), "{msg}");
    // No such link.
    let three = GOOD.replace("[[link]]", "[[node]]\nname = \"c\"\n[[link]]");
    let (_, msg) = err(&format!(
        "{three}\n[[step]]\nat_ms = 1\naction = \"fail-link\"\na = \"a\"\nb = \"c\"\n"
    ));
    assert!(
        msg.contains("no link between 'a' and 'c'") && msg.contains("a-b"),
        "{msg}"
    );
    // After the end of the run.
    let (_, msg) = err(&format!(
        "{GOOD}\n[[step]]\nat_ms = 9000\naction = \"fail-link\"\na = \"a\"\nb = \"b\"\n"
    ));
    assert!(
        msg.contains("after the end of the run") && msg.contains("duration_ms"),
        "{msg}"
    );
}

#[test]
fn structural_problems() {
    let (_, msg) = err("[[node]]\nname = \"a\"\n");
    assert!(
        msg.contains("missing field `network`") && msg.contains("[network]"),
        "{msg}"
    );
    let (_, msg) = err("[network]\nduration_ms = 10\n[[node]]\nname = \"a\"\n");
    assert!(msg.contains("at least 2"), "{msg}");
    let (line, msg) = err(&GOOD.replace("name = \"b\"", "name = \"a\""));
    assert_eq!(line, 8);
    assert!(msg.contains("used twice"), "{msg}");
    let (_, msg) = err(&GOOD.replace("b = \"b\"\n", "b = \"a\"\n"));
    assert!(msg.contains("to itself"), "{msg}");
    let (line, _) = err(&GOOD.replace("seed = 1", "seed = = 1"));
    assert_eq!(line, 2);
    let (_, msg) = err(&format!(
        "{GOOD}[routing]\nhello_interval_ms = 1000\ndead_interval_ms = 500\n"
    ));
    assert!(msg.contains("dead_interval_ms (500) must exceed"), "{msg}");
    let (_, msg) = err(&GOOD.replace("name = \"a\"", "name = \"a\"\naddress = \"nowhere\""));
    assert!(
        msg.contains("not a node address") && msg.contains("198.18.0.1:3322"),
        "{msg}"
    );
}

#[test]
fn missing_file_names_it() {
    let e = Topology::load(std::path::Path::new("/nonexistent/x.toml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/x.toml: cannot read"),
        "{e}"
    );
}
