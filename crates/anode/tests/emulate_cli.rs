//! `anode emulate` and `anode demo` as a user runs them.

use std::path::PathBuf;
use std::process::Command;

fn anode() -> Command {
    Command::new(env!("CARGO_BIN_EXE_anode"))
}

fn topo(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../topologies")
        .join(name)
}

#[test]
fn demo_exits_0_and_tells_the_story() {
    let t0 = std::time::Instant::now();
    let out = anode().arg("demo").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    for want in [
        "capsule ping a -> c: 4/4 replies; first",
        "(code loaded hop by hop), cached",
        "capsule flood a -> c: 302 capsules of 512 B sent, 302 counted at c (0.0% loss)",
        "print   a: Success",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    for want in [
        "routing has converged",
        "hello from a",
        "sent 4, delivered 4, lost 0",
        "the link b-c fails",
        "routing repaired after",
        "traffic resumed",
        "link comes back",
        "All 9 expectations held.",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("FAIL"));
}

#[test]
fn demo_json_is_deterministic() {
    let a = anode().args(["demo", "--json"]).output().unwrap();
    let b = anode().args(["demo", "--json"]).output().unwrap();
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(v["checks"]["failed"], 0);
    assert_eq!(v["mode"], "virtual-time");
}

#[test]
fn emulate_runs_the_example_files() {
    for f in [
        "ring5.toml",
        "line4.toml",
        "demo.toml",
        "capsule-ping.toml",
        "plan-ping.toml",
    ] {
        // plan-ping.toml names its PLAN files relative to the repository root.
        let out = anode()
            .current_dir(topo(".").join(".."))
            .arg("emulate")
            .arg(topo(f))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{f}: {text}");
        assert!(text.contains("Checks: all"), "{f}: {text}");
        let j1 = anode()
            .current_dir(topo(".").join(".."))
            .arg("emulate")
            .arg(topo(f))
            .arg("--json")
            .output()
            .unwrap();
        let j2 = anode()
            .current_dir(topo(".").join(".."))
            .arg("emulate")
            .arg(topo(f))
            .arg("--json")
            .output()
            .unwrap();
        assert_eq!(j1.stdout, j2.stdout, "{f}: --json not byte-identical");
    }
}

#[test]
fn failed_check_exits_1() {
    let dir = std::env::temp_dir().join(format!("anode-emu-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("fails.toml");
    std::fs::write(
        &f,
        "[network]\nduration_ms = 3000\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\n[[step]]\nat_ms = 2000\naction = \"expect\"\ncheck = \"unreachable\"\nfrom = \"a\"\nto = \"b\"\n",
    )
    .unwrap();
    let out = anode().arg("emulate").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("FAIL"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 of 1 expect checks failed"));
    // A bad file: file, line and fix on stderr, exit 1.
    std::fs::write(&f, "[network]\nduration_ms = 3000\nspeed = 3\n").unwrap();
    let out = anode().arg("emulate").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fails.toml:3:1: unknown field `speed`"),
        "{err}"
    );
    assert!(err.contains("fix:"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The data of step `n` of a JSON report.
fn step_data(v: &serde_json::Value, n: u64) -> serde_json::Value {
    v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["number"] == n)
        .unwrap_or_else(|| panic!("no step {n}"))["data"]
        .clone()
}

fn emulate_json(f: &str) -> serde_json::Value {
    let out = anode()
        .current_dir(topo(".").join(".."))
        .arg("emulate")
        .arg(topo(f))
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{f}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn capsule_ping_loads_code_hop_by_hop_then_runs_cached() {
    let v = emulate_json("capsule-ping.toml");
    assert_eq!(v["checks"]["failed"], 0);
    let p = step_data(&v, 2);
    assert_eq!(p["received"], 5);
    let first = p["first_us"].as_u64().unwrap();
    let cached = p["cached_avg_us"].as_u64().unwrap();
    // a-b-c with 5 ms links: a cached round trip is four link crossings (20 ms); the first
    // also waits for b and c to fetch the code from their previous hops.
    assert!((20_000..21_000).contains(&cached), "cached {cached} us");
    assert!(
        first >= cached + 20_000,
        "first {first} us vs cached {cached} us"
    );
    let f = step_data(&v, 3);
    assert_eq!(f["sent"], 502);
    assert_eq!(f["delivered"], 502);
    let rate = f["rate_pps"].as_u64().unwrap();
    assert!(
        (900..=1100).contains(&rate),
        "rate {rate} pps at 1000 pps offered"
    );
}

#[test]
fn plan_pings_print_success_at_the_source() {
    let v = emulate_json("plan-ping.toml");
    assert_eq!(v["checks"]["failed"], 0);
    for n in [1, 2] {
        let d = step_data(&v, n);
        assert_eq!(d["prints"], serde_json::json!(["a: Success"]), "step {n}");
        assert_eq!(d["errors"], serde_json::json!([]), "step {n}");
    }
}

#[test]
fn ee_steps_reject_bad_keys_with_positions() {
    let dir = std::env::temp_dir().join(format!("anode-emu-ee-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.toml");
    let head = "[network]\nduration_ms = 3000\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\n[[step]]\nat_ms = 2000\n";
    for (body, want) in [
        (
            "action = \"flood\"\nfrom = \"a\"\nto = \"b\"\n",
            "give exactly one of count and duration_ms",
        ),
        (
            "action = \"ping\"\nfrom = \"a\"\nto = \"a\"\n",
            "cannot ping itself",
        ),
        (
            "action = \"inject-plan\"\nnode = \"a\"\nentry = \"f()\"\nprogram = \"fun f() = 1 + true\"\n",
            "inline program",
        ),
    ] {
        std::fs::write(&f, format!("{head}{body}")).unwrap();
        let out = anode().arg("emulate").arg(&f).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("bad.toml:1"), "{err}");
        assert!(err.contains(want), "{want}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `capsule` step: capsules of a .wasm file (here the ping protocol, which the step
/// knows nothing about) through three nodes; its replies delivered at the source are
/// reported; a wrong path is an error at its line.
#[test]
fn capsule_step_runs_any_code_file() {
    let dir = std::env::temp_dir().join(format!("anode-capsule-step-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wasm = dir.join("my-proto.wasm");
    std::fs::write(&wasm, anode_capsule::protocols::PING).unwrap();
    let request = format!("0000{:04x}{}", 9, "00".repeat(16));
    let file = |code: &str| {
        format!(
            "[network]\nduration_ms = 8000\n\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[node]]\nname = \"c\"\n\n\
             [[link]]\na = \"a\"\nb = \"b\"\ndelay_ms = 2\n[[link]]\na = \"b\"\nb = \"c\"\ndelay_ms = 2\n\n\
             [[step]]\nat_ms = 3000\naction = \"capsule\"\nfrom = \"a\"\nto = \"c\"\ncode = \"{code}\"\n\
             payload_hex = \"{request}\"\ncount = 3\nport = 9\nexpect_delivered = 3\n"
        )
    };
    let t = dir.join("t.toml");
    std::fs::write(&t, file(&wasm.to_string_lossy())).unwrap();
    let out = anode().arg("emulate").arg(&t).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("3 sent, 3 delivered to port 9"), "{text}");
    assert!(
        text.contains("at a: "),
        "the replies arrive at the source: {text}"
    );
    std::fs::write(&t, file("no/such.wasm")).unwrap();
    let out = anode().arg("emulate").arg(&t).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("cannot read no/such.wasm"),
        "{err}"
    );
    assert!(
        err.contains("t.toml:"),
        "the error names the file and line: {err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `emulate --realtime`: every node gets a control socket for the run, tools reach a node by
/// its name (`--node NAME`), progress goes to stderr, and the sockets are gone afterwards.
#[test]
fn realtime_nodes_are_reachable_by_name() {
    let dir = std::env::temp_dir().join(format!("anode-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = dir.join("rt.toml");
    // Unusual names, so no other run's nodes are found by them.
    let (x, y) = (
        format!("rtx{}", std::process::id()),
        format!("rty{}", std::process::id()),
    );
    std::fs::write(
        &t,
        format!(
            "[network]\nduration_ms = 4000\n\n[[node]]\nname = \"{x}\"\n[[node]]\nname = \"{y}\"\n\n\
             [[link]]\na = \"{x}\"\nb = \"{y}\"\ndelay_ms = 1\n"
        ),
    )
    .unwrap();
    let run = anode()
        .args(["emulate", "--realtime"])
        .arg(&t)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let status = anode()
        .args(["status", "--json", "--node", &y])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let st: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let y_addr = st["address"].as_str().unwrap().to_string();
    let ping = anode()
        .args([
            "ping", "--json", "--node", &x, &y_addr, "-c", "2", "-i", "0.1",
        ])
        .output()
        .unwrap();
    let p: serde_json::Value = serde_json::from_slice(&ping.stdout).unwrap();
    assert_eq!(p["received"], 2, "{p}");
    let out = run.wait_with_output_bounded();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("control sockets in") && err.contains("of 4 s"),
        "{err}"
    );
    let gone = anode().args(["status", "--node", &x]).output().unwrap();
    assert!(
        !gone.status.success(),
        "the sockets are removed after the run"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

trait Bounded {
    fn wait_with_output_bounded(self) -> std::process::Output;
}

impl Bounded for std::process::Child {
    /// Waits at most 30 s (then kills the child and fails).
    fn wait_with_output_bounded(mut self) -> std::process::Output {
        let t0 = std::time::Instant::now();
        while self.try_wait().unwrap().is_none() {
            if t0.elapsed() > std::time::Duration::from_secs(30) {
                let _ = self.kill();
                panic!("emulate --realtime did not end within 30 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        self.wait_with_output().unwrap()
    }
}
