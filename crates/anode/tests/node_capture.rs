//! `anode capture` on a running node: a capsule ping between two `anode node` processes is
//! captured to a pcap file (ended by Ctrl-C, as a user ends it) and to stdout (`-w -`), and
//! tshark with the dissector (tools/wireshark/anode.lua) decodes both directions; text and
//! JSON modes stop at their count; an unknown link is refused with the links listed.
//!
//! tshark is required (scripts/setup.sh installs it).

mod node_util;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use node_util::*;

fn dissector() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/wireshark/anode.lua");
    format!("lua_script:{}", p.display())
}

/// `ip.src ip.dst anep.type anode.capsule.code` per frame of the pcap bytes `pcap`.
fn tshark_rows(pcap: &[u8]) -> Vec<Vec<String>> {
    let mut child = Command::new("tshark")
        .args(["-n", "-X", &dissector(), "-r", "-", "-T", "fields"])
        .args(["-e", "ip.src", "-e", "ip.dst", "-e", "anep.type"])
        .args(["-e", "anode.capsule.code", "-e", "_ws.expert.message"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tshark (scripts/setup.sh installs it)");
    child.stdin.take().unwrap().write_all(pcap).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("Lua"),
        "tshark: {err}"
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// Starts `anode capture ARGS` on `n` and waits for its "capturing on" line.
fn start_capture(n: &NodeProc, args: &[&str]) -> Proc {
    let mut c = anode().command(&["capture", "--socket"]);
    c.arg(&n.socket)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut p = Proc::spawn(&mut c);
    let stderr = p.child().stderr.take().unwrap();
    let mut r = BufReader::new(stderr);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("capturing on"), "capture said: {line}");
    // Keep reading stderr so the summary can be checked after exit.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut r, &mut rest);
        let _ = tx.send(rest);
    });
    STDERR.with(|s| s.borrow_mut().push(rx));
    p
}

thread_local! {
    static STDERR: std::cell::RefCell<Vec<std::sync::mpsc::Receiver<String>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The rest of the stderr of the `i`th capture started on this thread.
fn capture_stderr(i: usize) -> String {
    STDERR.with(|s| {
        s.borrow()[i]
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default()
    })
}

fn ping(n: &NodeProc, dest: &str) {
    let v = n.json(&["ping", dest, "-c", "3", "-i", "0.05"]);
    assert_eq!(v["received"], 3, "{v}");
}

#[test]
fn running_node_capture_decodes_in_tshark() {
    let dir = TestDir::new("capture");
    let (a, b) = anode().start_pair(&dir);
    let (a_addr, b_addr) = (a.addr.clone(), b.addr.clone());

    // To a file, limited to the link, ended by SIGINT.
    let file = dir.path("live.pcap");
    let f = file.to_string_lossy().into_owned();
    let cap = start_capture(&a, &["--link", "to-b", "-w", &f]);
    ping(&a, &b_addr);
    std::thread::sleep(Duration::from_millis(200));
    cap.signal(libc::SIGINT);
    let out = cap.finish(Duration::from_secs(10));
    assert!(out.status.success(), "{}", capture_stderr(0));
    let summary = capture_stderr(0);
    assert!(summary.contains("packets captured on"), "{summary}");
    let rows = tshark_rows(&std::fs::read(&file).unwrap());
    let capsules: Vec<_> = rows.iter().filter(|r| r[2] == "0x0a03").collect();
    assert!(capsules.len() >= 6, "3 pings and 3 replies: {rows:?}");
    let a_ip = a_addr.split(':').next().unwrap();
    assert!(capsules.iter().all(|r| r[0] == a_ip && r[1] == a_ip));
    assert!(
        capsules.iter().all(|r| r[3].len() == 64),
        "every capsule names its code: {capsules:?}"
    );
    assert!(
        rows.iter().all(|r| r[4].is_empty()),
        "no expert info on a clean capture: {rows:?}"
    );

    // To stdout as pcap, stopped by its count.
    let cap = start_capture(&a, &["-c", "8", "-w", "-"]);
    ping(&a, &b_addr);
    let out = cap.finish(Duration::from_secs(10));
    assert!(out.status.success());
    let rows = tshark_rows(&out.stdout);
    assert_eq!(rows.len(), 8, "{rows:?}");
    assert!(capture_stderr(1).contains("8 packets captured"));

    // Text lines and a JSON summary.
    let out = anode().run(
        &[
            "capture",
            "--socket",
            &a.socket.to_string_lossy(),
            "-c",
            "2",
        ],
        Duration::from_secs(10),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.contains(" > ") && text.contains("ANEP control"),
        "{text}"
    );
    let out = anode().run(
        &[
            "capture",
            "--socket",
            &a.socket.to_string_lossy(),
            "-c",
            "1",
            "--json",
        ],
        Duration::from_secs(10),
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "one packet, one summary: {lines:?}");
    assert_eq!(lines[1]["packets"], 1);
    assert_eq!(lines[1]["reason"], "count");

    // An unknown link: refused, naming the links.
    let out = anode().run(
        &[
            "capture",
            "--socket",
            &a.socket.to_string_lossy(),
            "--link",
            "nope",
        ],
        Duration::from_secs(10),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("to-b"), "{err}");
    drop(b);
}
