//! `anode capsule send`: capsules of code given as a file (here the ping protocol's
//! WebAssembly, which the command knows nothing about) go from one `anode node` to another,
//! the code loads hop by hop, and what it delivers back to the chosen port is printed; the
//! same code named by its hash once the node has it; an unknown hash and a bad --code are
//! refused with what to do.

mod node_util;

use std::time::Duration;

use anode_capsule::{code_hash, protocols};
use node_util::*;

#[test]
fn capsules_of_a_code_file_and_of_a_cached_hash() {
    let dir = TestDir::new("capsule-send");
    let (a, b) = anode().start_pair(&dir);
    let b_addr = b.addr.clone();
    let wasm = dir.path("my-proto.wasm");
    std::fs::write(&wasm, protocols::PING).unwrap();
    // The ping protocol's request: kind 0, pad, reply port 47001, t0, rtt.
    let request = format!("0000{:04x}{}", 47001, "00".repeat(16));
    let sock = a.socket.to_string_lossy().into_owned();
    let w = wasm.to_string_lossy().into_owned();
    let run = |code: &str, json: bool| {
        let mut args = vec![
            "capsule", "send", &b_addr, "--code", code, "--hex", &request, "-c", "3", "--rate",
            "20", "--port", "47001", "--wait", "2", "--socket", &sock,
        ];
        if json {
            args.push("--json");
        }
        anode().run(&args, Duration::from_secs(20))
    };
    let out = run(&w, false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.matches("delivery at").count(), 3, "{text}");
    assert!(
        text.contains("3 sent, 0 dropped, 3 delivered back"),
        "{text}"
    );
    // b loaded the code from a (its previous hop) on demand.
    let code = b.json(&["code", "list"]);
    let hash: String = code_hash(protocols::PING)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    assert!(code.to_string().contains(&hash), "{code}");

    // The same code by its hash, now that a has it; JSON lines.
    let out = run(&hash, true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sum = lines.last().unwrap();
    assert_eq!(sum["sent"], 3, "{lines:?}");
    assert_eq!(sum["deliveries"], 3, "{lines:?}");
    assert_eq!(sum["code_was_cached"], true);
    assert_eq!(lines.iter().filter(|l| l["event"] == "delivery").count(), 3);

    // Code the node does not have, and a --code that is neither file nor hash.
    let out = run(&"ab".repeat(32), false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("anode code put"),
        "{err}"
    );
    let out = run("no-such-file.wasm", false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("neither a file"),
        "{err}"
    );
}
