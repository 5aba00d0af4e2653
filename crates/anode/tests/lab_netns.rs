//! `anode lab`: topologies run as real `anode node` processes in network namespaces.
//!
//! - `ring_up_ping_status_down`: a 5-node ring with 5 ms links comes up; every node pings
//!   every other from inside the lab (`anode lab exec`), the round trips show the link delay
//!   (>= 10 ms to a neighbor, >= 20 ms two hops away); `status` sees every node answering
//!   with all its routes; `down` leaves no namespace with the lab's prefix, no node process,
//!   no socket or state directory.
//! - `fifty_nodes_up_and_down_in_time`: a 5 x 10 grid comes up within 30 s (printed) and
//!   goes down cleanly (printed).
//! - `failed_up_leaves_nothing`: a bogus `--bin`, nodes that exit at once (`/bin/false`) and
//!   Ctrl-C while nodes never answer: each `up` fails with what failed and leaves nothing;
//!   an `up` killed outright leaves its lab, and `down` removes it from the state.
//!
//! Needs root: ignored by default; run as root with `--include-ignored`. Every wait is
//! bounded; a guard takes the lab down when an assertion fails. The tests run one at a time
//! (the 50-node timing should not share two cores with another lab).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anode_testkit::netns;
use anode_testkit::process::{Anode, Proc, TestDir, state_home, wait_until};
use serde_json::Value;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn anode() -> Anode {
    Anode::new(env!("CARGO_BIN_EXE_anode"))
}

fn require(test: &str) {
    netns::require(test, &["ip", "tc"], false);
}

/// Takes lab `name` down on drop (the test's own `down` makes this a no-op).
struct LabGuard(String);

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = anode().run(&["lab", "down", "--name", &self.0], Duration::from_secs(60));
    }
}

/// A ring of `n` nodes, `delay_ms` links, fast routing timers.
fn ring(n: usize, delay_ms: u32) -> String {
    let mut s = String::from(
        "[network]\nduration_ms = 10000\n\n[routing]\nhello_interval_ms = 200\n\
         dead_interval_ms = 800\nupdate_interval_ms = 1000\nroute_timeout_ms = 6000\n\
         gc_interval_ms = 4000\ntriggered_delay_ms = 20\n\n",
    );
    let name = |i: usize| char::from(b'a' + i as u8).to_string();
    for i in 0..n {
        s.push_str(&format!("[[node]]\nname = \"{}\"\n", name(i)));
    }
    for i in 0..n {
        s.push_str(&format!(
            "\n[[link]]\na = \"{}\"\nb = \"{}\"\ndelay_ms = {delay_ms}\n",
            name(i),
            name((i + 1) % n)
        ));
    }
    s
}

/// A `rows` x `cols` grid, 1 ms links, default routing timers.
fn grid(rows: usize, cols: usize) -> String {
    let mut s = String::from("[network]\nduration_ms = 10000\n\n");
    for r in 0..rows {
        for c in 0..cols {
            s.push_str(&format!("[[node]]\nname = \"n{r}_{c}\"\n"));
        }
    }
    for r in 0..rows {
        for c in 0..cols {
            if c + 1 < cols {
                s.push_str(&format!(
                    "[[link]]\na = \"n{r}_{c}\"\nb = \"n{r}_{}\"\ndelay_ms = 1\n",
                    c + 1
                ));
            }
            if r + 1 < rows {
                s.push_str(&format!(
                    "[[link]]\na = \"n{r}_{c}\"\nb = \"n{}_{c}\"\ndelay_ms = 1\n",
                    r + 1
                ));
            }
        }
    }
    s
}

/// `anode lab up FILE --name NAME --json ARGS`: the report, or the failed output.
fn up(file: &Path, name: &str, extra: &[&str]) -> Result<Value, String> {
    let f = file.to_string_lossy().into_owned();
    let mut args = vec!["lab", "up", f.as_str(), "--name", name, "--json"];
    args.extend_from_slice(extra);
    let out = anode().run(&args, Duration::from_secs(120));
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).expect("up --json prints JSON"))
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn down(name: &str) -> String {
    let out = anode().run(&["lab", "down", "--name", name], Duration::from_secs(60));
    assert!(
        out.status.success(),
        "down: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn namespaces_with(prefix: &str) -> Vec<String> {
    netns::sh("ip netns list")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// True if `pid` is a running (not zombie) process.
fn running(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

fn lab_dir(name: &str) -> PathBuf {
    state_home().join("anode").join("labs").join(name)
}

/// Asserts nothing of the lab is left: namespaces, processes, sockets, state.
fn assert_gone(name: &str, prefix: &str, pids: &[u64], sockets: &[PathBuf]) {
    assert_eq!(
        namespaces_with(prefix),
        Vec::<String>::new(),
        "namespaces left"
    );
    for p in pids {
        assert!(!running(*p), "node process {p} still runs");
    }
    for s in sockets {
        assert!(!s.exists(), "{} left", s.display());
    }
    assert!(!lab_dir(name).exists(), "state of {name} left");
}

fn report_parts(r: &Value) -> (String, Vec<u64>, Vec<PathBuf>) {
    let nodes = r["nodes"].as_array().unwrap();
    (
        r["prefix"].as_str().unwrap().to_string(),
        nodes.iter().map(|n| n["pid"].as_u64().unwrap()).collect(),
        nodes
            .iter()
            .map(|n| PathBuf::from(n["socket"].as_str().unwrap()))
            .collect(),
    )
}

/// `anode lab exec NAME NODE anode ping DEST -c COUNT --json`: the summary.
fn ping(lab: &str, from: &str, dest: &str, count: u32) -> Value {
    let c = count.to_string();
    let out = anode().run(
        &[
            "lab",
            "exec",
            "--name",
            lab,
            from,
            env!("CARGO_BIN_EXE_anode"),
            "ping",
            dest,
            "-c",
            &c,
            "-i",
            "0.1",
            "--timeout",
            "5",
            "--json",
        ],
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "ping {from} -> {dest}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
#[ignore = "needs root and netns"]
fn ring_up_ping_status_down() {
    require("ring_up_ping_status_down");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TestDir::new("lab-ring");
    let file = dir.file("ring5.toml", &ring(5, 5));
    let name = format!("ring{}", std::process::id());
    let _guard = LabGuard(name.clone());
    let r = up(&file, &name, &[]).unwrap_or_else(|e| panic!("up failed: {e}"));
    let (prefix, pids, sockets) = report_parts(&r);
    assert_eq!(namespaces_with(&prefix).len(), 5);
    let nodes = r["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    let addrs: Vec<&str> = nodes
        .iter()
        .map(|n| n["address"].as_str().unwrap())
        .collect();
    let t0 = Instant::now();
    let mut least = [f64::MAX; 3];
    for i in 0..5 {
        for j in 0..5 {
            if i == j {
                continue;
            }
            let hops = (j + 5 - i) % 5;
            let hops = hops.min(5 - hops) as f64;
            // The first ping loads the code; two more run it cached.
            let s = ping(&name, names[i], addrs[j], 3);
            assert_eq!(s["received"], 3, "{} -> {}: {s}", names[i], names[j]);
            let min = s["min_ms"].as_f64().unwrap();
            least[hops as usize] = least[hops as usize].min(min);
            // 5 ms each way per hop.
            assert!(
                min >= 10.0 * hops - 0.5,
                "{} -> {} ({hops} hops): rtt {min} ms below the links' delay",
                names[i],
                names[j]
            );
            assert!(
                min < 10.0 * hops + 200.0,
                "{} -> {}: rtt {min} ms",
                names[i],
                names[j]
            );
        }
    }
    println!(
        "20 pings of 3 in {:?}; smallest rtt 1 hop {:.2} ms, 2 hops {:.2} ms (links 5 ms)",
        t0.elapsed(),
        least[1],
        least[2]
    );
    let out = anode().run(
        &["lab", "status", "--name", &name, "--json"],
        Duration::from_secs(30),
    );
    assert!(out.status.success());
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    for n in st["nodes"].as_array().unwrap() {
        assert_eq!(n["running"], true, "{n}");
        assert_eq!(n["answering"], true, "{n}");
        assert_eq!(n["neighbors"], 2, "{n}");
        assert_eq!(n["routes"], 4, "{n}");
    }
    let said = down(&name);
    assert!(said.contains("5 namespaces deleted"), "{said}");
    assert_gone(&name, &prefix, &pids, &sockets);
    assert!(down(&name).contains("not up"), "down twice is fine");
}

#[test]
#[ignore = "needs root and netns"]
fn fifty_nodes_up_and_down_in_time() {
    require("fifty_nodes_up_and_down_in_time");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TestDir::new("lab-grid");
    let file = dir.file("grid50.toml", &grid(5, 10));
    let name = format!("grid{}", std::process::id());
    let _guard = LabGuard(name.clone());
    let t0 = Instant::now();
    let r = up(&file, &name, &[]).unwrap_or_else(|e| panic!("up failed: {e}"));
    let took = t0.elapsed();
    println!(
        "50 nodes, 85 links up in {took:?} (setup {} ms, nodes answering {} ms, routes converged {} ms; links emulated by {})",
        r["setup_ms"], r["start_ms"], r["converge_ms"], r["impair"]
    );
    assert!(took <= Duration::from_secs(30), "50-node lab took {took:?}");
    let (prefix, pids, sockets) = report_parts(&r);
    assert_eq!(pids.len(), 50);
    assert_eq!(namespaces_with(&prefix).len(), 50);
    assert_eq!(r["links"], 85);
    let t1 = Instant::now();
    let said = down(&name);
    println!("down in {:?}: {said}", t1.elapsed());
    assert!(said.contains("50 namespaces deleted"), "{said}");
    assert_gone(&name, &prefix, &pids, &sockets);
}

#[test]
#[ignore = "needs root and netns"]
fn failed_up_leaves_nothing() {
    require("failed_up_leaves_nothing");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TestDir::new("lab-fail");
    let file = dir.file("ring4.toml", &ring(4, 1));
    let name = format!("fail{}", std::process::id());
    let _guard = LabGuard(name.clone());
    let prefix = anode_lab::names::prefix(&name);

    let e = up(&file, &name, &["--bin", "/nonexistent/anode"]).unwrap_err();
    assert!(e.contains("--bin /nonexistent/anode"), "{e}");
    assert_gone(&name, &prefix, &[], &[]);

    let e = up(&file, &name, &["--bin", "/bin/false"]).unwrap_err();
    assert!(e.contains("exited during start-up"), "{e}");
    assert!(e.contains("removing what was made"), "{e}");
    assert_gone(&name, &prefix, &[], &[]);

    // Nodes that never answer; Ctrl-C while `up` waits for them.
    let sleeper = dir.file("sleeper.sh", "#!/bin/sh\nexec sleep 300\n");
    netns::sh(&format!("chmod +x {}", sleeper.display()));
    let (p, pids) = start_sleeping_lab(&file, &name, &sleeper);
    p.signal(libc::SIGINT);
    let out = p.finish(Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("interrupted"), "{err}");
    assert_gone(&name, &prefix, &pids, &[]);

    // `up` killed outright (no clean-up of its own): `down` removes what it left.
    let (p, pids) = start_sleeping_lab(&file, &name, &sleeper);
    p.signal(libc::SIGKILL);
    let out = p.finish(Duration::from_secs(10));
    assert!(!out.status.success());
    assert_eq!(namespaces_with(&prefix).len(), 4, "a crash leaves the lab");
    let st = anode().run(&["lab", "status", "--name", &name], Duration::from_secs(30));
    assert!(String::from_utf8_lossy(&st.stdout).contains("`up` died"));
    let said = down(&name);
    assert!(said.contains("4 namespaces deleted"), "{said}");
    assert_gone(&name, &prefix, &pids, &[]);
}

/// Starts `up` with nodes that never answer (`sleeper`); returns it once every node process
/// is recorded, with their pids.
fn start_sleeping_lab(file: &Path, name: &str, sleeper: &Path) -> (Proc, Vec<u64>) {
    let f = file.to_string_lossy().into_owned();
    let s = sleeper.to_string_lossy().into_owned();
    let mut c = anode().command(&["lab", "up", &f, "--name", name, "--bin", &s]);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let p = Proc::spawn(&mut c);
    let state = lab_dir(name).join("state.json");
    let pids = |v: &Value| -> Option<Vec<u64>> {
        v["nodes"]
            .as_array()?
            .iter()
            .map(|n| n["pid"].as_u64())
            .collect()
    };
    let started = wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&state)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| pids(&v))
            .is_some()
    });
    assert!(started, "the sleeping nodes never started");
    let st: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let pids = pids(&st).unwrap();
    assert!(pids.iter().all(|p| running(*p)));
    (p, pids)
}
