//! Helpers for the `node_*` tests: real `anode` processes, each killed on drop, every wait
//! bounded.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_anode");

/// `XDG_STATE_HOME` of every process these helpers start, so that nodes without a
/// `[capsule] cache_dir` keep their default code caches under the system's temporary
/// directory, not the user's home.
pub fn state_home() -> PathBuf {
    std::env::temp_dir().join("anode-test-state")
}

/// A scratch directory, removed on drop.
pub struct TestDir(pub PathBuf);

impl TestDir {
    pub fn new(tag: &str) -> TestDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "anode-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TestDir(p)
    }

    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A UDP port free on `ip` right now.
pub fn free_port(ip: IpAddr) -> u16 {
    UdpSocket::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// True if IPv6 loopback works here.
pub fn have_ipv6() -> bool {
    UdpSocket::bind("[::1]:0").is_ok()
}

/// An address as config files and the CLI write it.
pub fn addr(ip: IpAddr, port: u16) -> String {
    std::net::SocketAddr::new(ip, port).to_string()
}

/// A config with fast timers and links to `peers` (name, address).
pub fn config(me: &str, peers: &[(&str, &str)], socket: &Path) -> String {
    let mut s = format!(
        "[node]\naddress = \"{me}\"\n\n[routing]\nhello_interval_ms = 100\ndead_interval_ms = 400\n\
         update_interval_ms = 300\nroute_timeout_ms = 3000\ngc_interval_ms = 1000\n\
         triggered_delay_ms = 20\n\n[control]\nsocket = \"{}\"\n",
        socket.display()
    );
    for (name, peer) in peers {
        s.push_str(&format!(
            "\n[[link]]\nname = \"{name}\"\npeer = \"{peer}\"\n"
        ));
    }
    s
}

/// A child process, killed on drop unless taken out with [`Proc::finish`].
pub struct Proc(Option<Child>);

impl Proc {
    pub fn new(c: Child) -> Proc {
        Proc(Some(c))
    }

    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// True once the process has exited.
    pub fn exited(&mut self) -> bool {
        self.0
            .as_mut()
            .is_none_or(|c| c.try_wait().ok().flatten().is_some())
    }

    /// Waits (at most `limit`) for the process to exit and collects its output.
    pub fn finish(mut self, limit: Duration) -> Output {
        let ok = wait_until(limit, || self.exited());
        assert!(ok, "process did not exit within {limit:?}");
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A running `anode node`.
pub struct NodeProc {
    pub proc: Proc,
    pub addr: String,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl NodeProc {
    /// Starts `anode node` with `config` (written to DIR/NAME.toml) and waits for its socket.
    pub fn start(dir: &TestDir, name: &str, addr: &str, config: &str) -> NodeProc {
        Self::start_in(None, dir, name, addr, config)
    }

    /// [`NodeProc::start`] inside network namespace `netns` (`ip netns exec`, which execs
    /// the node: the child is the node itself).
    pub fn start_in(
        netns: Option<&str>,
        dir: &TestDir,
        name: &str,
        addr: &str,
        config: &str,
    ) -> NodeProc {
        let cfg = dir.file(&format!("{name}.toml"), config);
        let socket = dir.0.join(format!("{name}.sock"));
        let log = dir.0.join(format!("{name}.log"));
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, BIN]);
                c
            }
            None => Command::new(BIN),
        };
        let child = cmd
            .env("XDG_STATE_HOME", state_home())
            .args(["--log", "info", "node", "--config"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let n = NodeProc {
            proc: Proc::new(child),
            addr: addr.to_string(),
            socket,
            log,
        };
        let ok = wait_until(Duration::from_secs(10), || n.socket.exists());
        assert!(ok, "node {name} did not open its socket:\n{}", n.log_text());
        n
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs a client command against this node with `--socket` and `--json`, parses stdout.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a: Vec<&str> = args.to_vec();
        let s = self.socket.to_string_lossy().into_owned();
        a.extend(["--json", "--socket", &s]);
        let out = run(&a, Duration::from_secs(10));
        assert!(
            out.status.success(),
            "anode {a:?} failed: {}\nnode log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log_text()
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// True if this node has a reachable route to `dest`.
    pub fn has_route(&self, dest: &str) -> bool {
        self.json(&["routes"])
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["dest"] == dest && r["reachable"] == true && r["origin"] != "local")
    }
}

/// Runs `anode ARGS` to completion, killing it after `limit`.
pub fn run(args: &[&str], limit: Duration) -> Output {
    let child = Command::new(BIN)
        .args(args)
        .env("XDG_STATE_HOME", state_home())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Proc::new(child).finish(limit)
}

/// Polls `f` every 50 ms until it is true or `limit` passes.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if f() {
            return true;
        }
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `anode listen` on `node` and waits until it has bound its port.
pub fn listen(node: &NodeProc, port: u16, count: u32) -> Proc {
    let mut child = Command::new(BIN)
        .args(["listen", "--json", "--socket"])
        .arg(&node.socket)
        .args(["--port", &port.to_string(), "--count", &count.to_string()])
        .args(["--timeout", "15"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let p = Proc::new(child);
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).unwrap();
    assert!(line.contains("listening on port"), "listen said: {line}");
    p
}

/// Waits for a listener to exit (bounded) and returns its stdout lines as JSON.
pub fn listened(p: Proc) -> Vec<serde_json::Value> {
    let out = p.finish(Duration::from_secs(20));
    assert!(
        out.status.success(),
        "listen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Hex of `s`, as payloads are written in the protocol.
pub fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}
