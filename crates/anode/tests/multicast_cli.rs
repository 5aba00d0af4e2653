//! `anode multicast join|send` on a line of three `anode node` processes a - b - c: b and c
//! join group 7 toward the root a (c's join builds the tree through b), a sends twice, and
//! both members print both messages; sending again after the members' joins must not wipe
//! the tree (the root's `send` puts the same code again). `multicast members` shows the tree
//! at each node from the protocol's soft state, and `code state multicast` the raw entries.

mod node_util;

use std::net::IpAddr;
use std::process::Stdio;
use std::time::Duration;

use node_util::*;

fn join(n: &NodeProc, root: &str) -> Proc {
    let mut c = anode().command(&["multicast", "join", "7", "--root", root, "-c", "2"]);
    c.args(["--timeout", "15", "--socket"])
        .arg(&n.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Proc::spawn(&mut c)
}

#[test]
fn members_get_what_the_root_sends() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let dir = TestDir::new("multicast");
    let (a, b, c) = (
        addr(ip, free_port(ip)),
        addr(ip, free_port(ip)),
        addr(ip, free_port(ip)),
    );
    let na = anode().start_node(
        &dir,
        "a",
        &a,
        &node_config(&a, &[("b", &b)], &dir.0.join("a.sock")),
    );
    let nb = anode().start_node(
        &dir,
        "b",
        &b,
        &node_config(&b, &[("a", &a), ("c", &c)], &dir.0.join("b.sock")),
    );
    let nc = anode().start_node(
        &dir,
        "c",
        &c,
        &node_config(&c, &[("b", &b)], &dir.0.join("c.sock")),
    );
    assert!(wait_until(Duration::from_secs(10), || nc.has_route(&a)));
    let (jb, jc) = (join(&nb, &a), join(&nc, &a));
    std::thread::sleep(Duration::from_millis(1500));
    // The tree: a copies to b, b to c; b and c have members (port of the join session).
    let tree = na.json(&["multicast", "members"]);
    assert_eq!(tree[0]["group"], 7, "{tree}");
    assert_eq!(tree[0]["downstream"], serde_json::json!([b]), "{tree}");
    let at_b = nb.json(&["multicast", "members", "7"]);
    assert_eq!(at_b[0]["downstream"], serde_json::json!([c]), "{at_b}");
    assert!(at_b[0]["member_port"].as_u64().is_some(), "{at_b}");
    assert_eq!(
        nb.json(&["multicast", "members", "8"]),
        serde_json::json!([])
    );
    let raw = nb.json(&["code", "state", "multicast"]);
    assert_eq!(raw["entries"].as_array().map(Vec::len), Some(2), "{raw}");
    let text = anode().run(
        &[
            "multicast",
            "members",
            "--socket",
            &nb.socket.to_string_lossy(),
        ],
        Duration::from_secs(10),
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("GROUP") && text.contains(&c), "{text}");

    let sock = na.socket.to_string_lossy().into_owned();
    for msg in ["hello, group", "second"] {
        let out = anode().run(
            &["multicast", "send", "7", msg, "--socket", &sock],
            Duration::from_secs(10),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (name, j) in [("b", jb), ("c", jc)] {
        let out = j.finish(Duration::from_secs(20));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "member {name}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("group 7: hello, group") && text.contains("group 7: second"),
            "{name}: {text}"
        );
    }
}
