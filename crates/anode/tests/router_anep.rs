//! ANEP end to end through `anode router`'s node hooks, on real interfaces: two network
//! namespaces `a` and `b` joined by one veth pair, an `anode router` with a `[node]` section
//! in each. The two nodes exchange hellos (neighbor up), learn each other's route, and each
//! sends the other a datagram that must be delivered:
//!
//! - `anep_over_ethernet`: the node link is ANEP directly under EtherType 0x88B5 to the
//!   peer's MAC (no IP in the frames);
//! - `anep_over_udp`: the node link is ANEP over UDP to the peer router's own address
//!   (198.18.5.x:3322, owned by anode, not the kernel: the peer router answers ARP for it and
//!   its UDP filter diverts the datagrams to its node).
//!
//! Addresses come from 198.18.0.0/15 and exist only inside the namespaces. Every wait is
//! bounded; a Drop guard stops both routers (by pid) and deletes the namespaces even when an
//! assertion fails. Needs root: ignored by default; run as root with `--include-ignored`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anode_testkit::netns;

/// One topology at a time (the tests share two CPUs with the other namespace tests).
static SERIAL: Mutex<()> = Mutex::new(());

const MAC_A: &str = "02:00:5e:18:05:01";
const MAC_B: &str = "02:00:5e:18:05:02";

fn require(test: &str) {
    netns::require(test, &[], false);
}

fn sh(args: &[&str]) {
    let o = Command::new("timeout")
        .arg("10")
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Two namespaces on one segment and the routers in them; dropping it stops the routers and
/// deletes the namespaces.
struct Segment {
    p: String,
    dir: PathBuf,
    routers: Vec<Child>,
}

impl Segment {
    fn up(p: &str) -> Segment {
        let dir = std::env::temp_dir().join(format!("anode-anep-{p}"));
        let s = Segment {
            p: p.into(),
            dir,
            routers: Vec::new(),
        };
        s.delete();
        std::fs::create_dir_all(&s.dir).unwrap();
        let (a, b) = (format!("{p}a"), format!("{p}b"));
        for n in [&a, &b] {
            sh(&["ip", "netns", "add", n]);
            sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
        }
        sh(&[
            "ip", "link", "add", "a0", "netns", &a, "address", MAC_A, "type", "veth", "peer",
            "name", "b0", "netns", &b, "address", MAC_B,
        ]);
        for (n, l) in [(&a, "a0"), (&b, "b0")] {
            // Complete frames on the wire, no kernel IPv6 (anode owns the interface).
            let _ = Command::new("timeout")
                .args(["10", "ip", "netns", "exec", n, "ethtool", "-K", l])
                .args(["tx", "off", "tso", "off", "gso", "off", "gro", "off"])
                .output();
            sh(&[
                "ip",
                "netns",
                "exec",
                n,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{l}.disable_ipv6=1"),
            ]);
            sh(&["ip", "-n", n, "link", "set", l, "up"]);
        }
        s
    }

    /// Starts `anode router` in host `h` (a or b) with `cfg`.
    fn router(&mut self, h: &str, cfg: &str) {
        let path = self.dir.join(format!("{h}.toml"));
        std::fs::write(&path, cfg).unwrap();
        let log = std::fs::File::create(self.dir.join(format!("{h}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &format!("{}{h}", self.p)])
            .arg(env!("CARGO_BIN_EXE_anode"))
            .args(["router", "--config"])
            .arg(&path)
            // The router node's default capsule cache goes under the test's directory.
            .env("XDG_STATE_HOME", &self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.routers.push(child);
    }

    fn log(&self, h: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{h}.log"))).unwrap_or_default()
    }

    /// Waits (at most `secs`) until every check holds on the logs.
    fn wait_for(&mut self, secs: u64, checks: &[(&str, &str)]) {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            if checks.iter().all(|(h, want)| self.log(h).contains(want)) {
                return;
            }
            for c in &mut self.routers {
                if let Ok(Some(st)) = c.try_wait() {
                    panic!(
                        "a router exited ({st}):\na:\n{}\nb:\n{}",
                        self.log("a"),
                        self.log("b")
                    );
                }
            }
            if Instant::now() > end {
                let missing: Vec<_> = checks
                    .iter()
                    .filter(|(h, want)| !self.log(h).contains(want))
                    .collect();
                panic!(
                    "not within {secs} s: {missing:?}\na:\n{}\nb:\n{}",
                    self.log("a"),
                    self.log("b")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn delete(&self) {
        for h in ["a", "b"] {
            let _ = Command::new("ip")
                .args(["netns", "del", &format!("{}{h}", self.p)])
                .output();
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        for c in &mut self.routers {
            // `ip netns exec` execs the router, so the child's pid is the router's.
            // SAFETY: plain kill(2) of a child we spawned and have not yet reaped.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        }
        for c in &mut self.routers {
            let end = Instant::now() + Duration::from_secs(5);
            while Instant::now() < end && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        self.delete();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The configuration of host `me` (1 = a, 2 = b) talking to the other one.
fn config(me: u8, ether: bool) -> String {
    let peer = 3 - me;
    let (ifname, peer_mac) = if me == 1 {
        ("a0", MAC_B)
    } else {
        ("b0", MAC_A)
    };
    let link = if ether {
        format!("interface = \"{ifname}\"\nmac = \"{peer_mac}\"\n")
    } else {
        String::new()
    };
    format!(
        "[[interface]]\nname = \"{ifname}\"\nipv4 = [\"198.18.5.{me}/24\"]\n\n\
         [node]\naddress = \"198.18.5.{me}:3322\"\n\
         [[node.link]]\npeer = \"198.18.5.{peer}:3322\"\n{link}\
         [[node.send]]\nto = \"198.18.5.{peer}:3322\"\nport = 7\npayload = \"hello from {me}\"\n\
         every_ms = 200\ncount = 100\n"
    )
}

fn exchange(test: &str, p: &str, ether: bool) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    require(test);
    let mut s = Segment::up(p);
    s.router("a", &config(1, ether));
    s.router("b", &config(2, ether));
    s.wait_for(
        20,
        &[
            ("a", "node neighbor up 198.18.5.2:3322"),
            ("b", "node neighbor up 198.18.5.1:3322"),
            ("a", "198.18.5.2:3322 via"),
            ("b", "198.18.5.1:3322 via"),
            ("a", "from 198.18.5.2:3322 to port 7: hello from 2"),
            ("b", "from 198.18.5.1:3322 to port 7: hello from 1"),
        ],
    );
}

#[test]
#[ignore = "needs root and netns"]
fn anep_over_ethernet() {
    exchange("anep_over_ethernet", "ane", true);
}

#[test]
#[ignore = "needs root and netns"]
fn anep_over_udp() {
    exchange("anep_over_udp", "anu", false);
}
