//! Scratch directories, ports, bounded child processes, and `anode` node processes.
//!
//! Every child a test starts is a [`Proc`], killed on drop (a failing test leaves no process
//! behind), and every wait is bounded ([`wait_until`], [`Proc::finish`]).

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// `XDG_STATE_HOME` for the processes tests start, so that nodes without a `[capsule]
/// cache_dir` keep their default code caches under the system's temporary directory, not
/// the user's home.
pub fn state_home() -> PathBuf {
    std::env::temp_dir().join("anode-test-state")
}

/// A scratch directory, removed on drop.
#[derive(Debug)]
pub struct TestDir(pub PathBuf);

impl TestDir {
    /// A new empty directory under the system's temporary directory.
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

    /// Writes `text` to `name` in the directory; returns its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The path of `name` in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port free for UDP and TCP on `ip` right now, never handed out twice by this process.
///
/// Ports come from 20000-32767, below Linux's default ephemeral range (32768-60999): a port
/// the kernel picked for some socket's `bind(0)` (a node's client socket, another test's
/// helper) can be taken again by the time a node binds it, which made tests fail with
/// "Address already in use". Outside the ephemeral range only an explicit bind takes a
/// port; a per-process counter keeps this process's own picks apart and the process id
/// spreads concurrent test processes over the range.
pub fn free_port(ip: IpAddr) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const BASE: u32 = 20_000;
    const SPAN: u32 = 12_768;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let offset = std::process::id().wrapping_mul(2_654_435_761) % SPAN;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(BASE + (offset + n) % SPAN).expect("port below 32768");
        let udp = UdpSocket::bind((ip, port)).is_ok();
        if udp && std::net::TcpListener::bind((ip, port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {BASE}..{} on {ip}", BASE + SPAN)
}

/// True if IPv6 loopback works here.
pub fn have_ipv6() -> bool {
    UdpSocket::bind("[::1]:0").is_ok()
}

/// Polls `f` every 20 ms until it is true or `limit` passes.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if f() {
            return true;
        }
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child process, killed on drop unless taken out with [`Proc::finish`].
#[derive(Debug)]
pub struct Proc(Option<Child>);

impl Proc {
    /// Takes charge of `c`.
    pub fn new(c: Child) -> Proc {
        Proc(Some(c))
    }

    /// Spawns `cmd`, panicking with the command if it cannot start.
    pub fn spawn(cmd: &mut Command) -> Proc {
        match cmd.spawn() {
            Ok(c) => Proc::new(c),
            Err(e) => panic!("cannot start {cmd:?}: {e}"),
        }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// The child, for its pipes.
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    /// True once the process has exited.
    pub fn exited(&mut self) -> bool {
        self.0
            .as_mut()
            .is_none_or(|c| c.try_wait().ok().flatten().is_some())
    }

    /// Sends `sig` (e.g. `libc::SIGINT`) to the process.
    pub fn signal(&self, sig: i32) {
        let pid = self.id() as libc::pid_t;
        if pid > 0 {
            // SAFETY: kill(2) on our own child's pid; no memory is touched.
            unsafe {
                libc::kill(pid, sig);
            }
        }
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

/// A node config with fast timers (hello 100 ms, dead 400 ms) and links to `peers` (name,
/// address), serving its control socket at `socket`.
pub fn node_config(me: &str, peers: &[(&str, &str)], socket: &Path) -> String {
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

/// The `anode` command at `bin` (a test's `env!("CARGO_BIN_EXE_anode")`).
#[derive(Debug, Clone)]
pub struct Anode {
    /// The binary.
    pub bin: PathBuf,
}

/// A running `anode node`, killed on drop.
#[derive(Debug)]
pub struct NodeProc {
    /// The process.
    pub proc: Proc,
    /// Its node address, as the config gives it.
    pub addr: String,
    /// Its control socket.
    pub socket: PathBuf,
    /// Its stderr.
    pub log: PathBuf,
    anode: Anode,
}

impl Anode {
    /// The command at `bin`.
    pub fn new(bin: impl Into<PathBuf>) -> Anode {
        Anode { bin: bin.into() }
    }

    /// A command for `anode ARGS` with the tests' state home.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args).env("XDG_STATE_HOME", state_home());
        c
    }

    /// Runs `anode ARGS` to completion, killing it after `limit`.
    pub fn run(&self, args: &[&str], limit: Duration) -> Output {
        let mut c = self.command(args);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        Proc::spawn(&mut c).finish(limit)
    }

    /// Two nodes "a" and "b" on 127.0.0.1, linked to each other (links "to-b" and "to-a",
    /// fast timers, sockets DIR/a.sock and DIR/b.sock), once a has a route to b (10 s at
    /// most).
    pub fn start_pair(&self, dir: &TestDir) -> (NodeProc, NodeProc) {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let (a, b) = (
            std::net::SocketAddr::new(ip, free_port(ip)).to_string(),
            std::net::SocketAddr::new(ip, free_port(ip)).to_string(),
        );
        let na = self.start_node(
            dir,
            "a",
            &a,
            &node_config(&a, &[("to-b", &b)], &dir.path("a.sock")),
        );
        let nb = self.start_node(
            dir,
            "b",
            &b,
            &node_config(&b, &[("to-a", &a)], &dir.path("b.sock")),
        );
        let up = wait_until(Duration::from_secs(10), || na.has_route(&b));
        assert!(up, "no route a -> b:\n{}", na.log_text());
        (na, nb)
    }

    /// Starts `anode node` with `config` (written to DIR/NAME.toml) and waits (10 s at
    /// most) for its control socket.
    pub fn start_node(&self, dir: &TestDir, name: &str, addr: &str, config: &str) -> NodeProc {
        self.start_node_in(None, dir, name, addr, config)
    }

    /// [`Anode::start_node`] inside network namespace `netns` (`ip netns exec`, which execs
    /// the node: the child is the node itself).
    pub fn start_node_in(
        &self,
        netns: Option<&str>,
        dir: &TestDir,
        name: &str,
        addr: &str,
        config: &str,
    ) -> NodeProc {
        let cfg = dir.file(&format!("{name}.toml"), config);
        let socket = dir.path(&format!("{name}.sock"));
        let log = dir.path(&format!("{name}.log"));
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&self.bin);
                c
            }
            None => Command::new(&self.bin),
        };
        cmd.env("XDG_STATE_HOME", state_home())
            .args(["--log", "info", "node", "--config"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let n = NodeProc {
            proc: Proc::spawn(&mut cmd),
            addr: addr.to_string(),
            socket,
            log,
            anode: self.clone(),
        };
        let ok = wait_until(Duration::from_secs(10), || n.socket.exists());
        assert!(ok, "node {name} did not open its socket:\n{}", n.log_text());
        n
    }
}

impl NodeProc {
    /// What the node wrote to stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs a client command against this node with `--socket` and `--json`, parses stdout.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a: Vec<&str> = args.to_vec();
        let s = self.socket.to_string_lossy().into_owned();
        a.extend(["--json", "--socket", &s]);
        let out = self.anode.run(&a, Duration::from_secs(10));
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

    /// Starts `anode listen` on this node's `port` for `count` datagrams and waits until it
    /// has bound the port.
    pub fn listen(&self, port: u16, count: u32) -> Proc {
        let mut c = self.anode.command(&["listen", "--json", "--socket"]);
        c.arg(&self.socket)
            .args(["--port", &port.to_string(), "--count", &count.to_string()])
            .args(["--timeout", "15"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut p = Proc::spawn(&mut c);
        let stderr = p.child().stderr.take().unwrap();
        let mut line = String::new();
        BufReader::new(stderr).read_line(&mut line).unwrap();
        assert!(line.contains("listening on port"), "listen said: {line}");
        p
    }
}

/// Waits for a listener from [`NodeProc::listen`] to exit (bounded) and returns its stdout
/// lines as JSON.
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

/// Hex of `s`, as payloads are written on the command line.
pub fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}
