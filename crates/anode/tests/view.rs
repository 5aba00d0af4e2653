//! The live view in headless Chromium (Debian's chromium, driven over the DevTools protocol
//! by tools/browser/check-view.mjs): `anode emulate topologies/grid50.toml --view --speed 1`
//! shows the 50-node grid and its numbers advance update after update (at speed 1 the 30 s
//! run leaves the browser 30 s to start and see its updates; Ctrl-C then finishes the run at
//! full speed, so the test takes only as long as the browser does); `anode view` on a
//! running node shows the node and its neighbor, with its domains and code cache in
//! /state.json; other paths answer 404; a non-loopback address is refused.
//!
//! Needs chromium and Node.js >= 20.10 (scripts/setup.sh installs chromium).

mod node_util;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use node_util::*;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `node`, with `--experimental-websocket` where that is how this Node gets a WebSocket
/// (20.10 to 21; newer ones have it, older ones use the `ws` package setup.sh installs).
fn node() -> Command {
    let has = |flag: Option<&str>| {
        let mut c = Command::new("node");
        c.args(flag).args([
            "-e",
            "process.exit(typeof WebSocket === 'function' ? 0 : 1)",
        ]);
        c.output().is_ok_and(|o| o.status.success())
    };
    let mut c = Command::new("node");
    if !has(None) && has(Some("--experimental-websocket")) {
        c.arg("--experimental-websocket");
    }
    c
}

/// One browser test at a time (each holds this from before its viewer starts): two
/// Chromiums starting at once on a loaded 2-core machine once kept the emulation's page
/// from its updates until the run was over.
fn one_browser() -> std::sync::MutexGuard<'static, ()> {
    static BROWSER: std::sync::Mutex<()> = std::sync::Mutex::new(());
    BROWSER.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the page shows after `updates` updates (see check-view.mjs).
fn browser(url: &str, updates: u32) -> serde_json::Value {
    let out = node()
        .arg(repo().join("tools/browser/check-view.mjs"))
        .args([url, "--updates", &updates.to_string()])
        .output()
        .expect("node (Node.js >= 20.10) runs the browser check");
    assert!(
        out.status.success(),
        "the browser check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn get(url_base: &str, path: &str) -> (u16, String) {
    let hostport = url_base.trim_start_matches("http://").trim_end_matches('/');
    // HTTP/1.0: a plain body, never chunked.
    let resp =
        anode_testkit::http::exchange(hostport, &format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n"));
    let code = resp[9..12].parse().unwrap();
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (code, body)
}

/// Starts `anode ARGS` and returns it with the view's URL from its "view: URL" line.
fn start_viewer(args: &[&str]) -> (Proc, String) {
    let mut c = anode().command(args);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut p = Proc::spawn(&mut c);
    let mut r = BufReader::new(p.child().stderr.take().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    std::thread::spawn(move || std::io::copy(&mut r, &mut std::io::sink()));
    (p, url)
}

#[test]
fn emulation_view_shows_the_grid_and_updates() {
    let _one = one_browser();
    let topo = repo().join("topologies/grid50.toml");
    let topo = topo.to_string_lossy();
    let (p, url) = start_viewer(&["emulate", &topo, "--view", "127.0.0.1:0", "--speed", "1"]);
    let page = browser(&url, 4);
    assert_eq!(page["nodes"], 50, "{page}");
    assert_eq!(page["circles"], 50, "every node drawn: {page}");
    assert_eq!(page["links"], 85, "{page}");
    assert_eq!(page["conn"], "live", "{page}");
    let times: Vec<f64> = page["times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().parse().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[1] > w[0]),
        "virtual time advances from update to update: {times:?}"
    );
    let (code, body) = get(&url, "/state.json");
    assert_eq!(code, 200);
    let st: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(st["source"], "emulation");
    assert_eq!(get(&url, "/nope").0, 404);
    p.signal(libc::SIGINT);
    let out = p.finish(Duration::from_secs(30));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("Checks: all 2 passed"), "{report}");
}

#[test]
fn node_view_shows_the_node_and_its_neighbor() {
    let _one = one_browser();
    let dir = TestDir::new("view");
    let (a, _b) = anode().start_pair(&dir);
    let (a_addr, b_addr) = (a.addr.clone(), _b.addr.clone());
    assert_eq!(
        a.json(&["ping", &b_addr, "-c", "2", "-i", "0.05"])["received"],
        2
    );
    let sock = a.socket.to_string_lossy().into_owned();
    let (p, url) = start_viewer(&[
        "view",
        "--socket",
        &sock,
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "0.2",
    ]);
    let page = browser(&url, 3);
    assert_eq!(page["nodes"], 2, "{page}");
    assert_eq!(page["circles"], 2, "{page}");
    let (_, body) = get(&url, "/state.json");
    let st: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(st["nodes"][0]["address"], a_addr.as_str());
    assert_eq!(st["nodes"][1]["address"], b_addr.as_str());
    assert_eq!(st["links"][0]["up"], true);
    assert!(
        !st["code"].as_array().unwrap().is_empty(),
        "the ping code is in the cache: {st}"
    );
    assert!(!st["domains"].as_array().unwrap().is_empty(), "{st}");
    p.signal(libc::SIGINT);
    assert!(p.finish(Duration::from_secs(10)).status.success());

    let out = anode().run(
        &["view", "--socket", &sock, "--listen", "0.0.0.0:0"],
        Duration::from_secs(10),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("loopback"), "{err}");
}
