//! `anode router` between real Linux hosts: three network namespaces `s -- r -- d` on veth
//! pairs (scripts/netns-router.sh), anode routing in `r` with kernel forwarding off, and
//! unmodified tools on the end hosts: ping (IPv4 and IPv6), a TCP transfer, iperf3 UDP and
//! TCP, traceroute / TTL expiry. Every command is bounded in time; a Drop guard tears the
//! namespaces and the router down even when an assertion fails.
//!
//! Needs root. Not root: fails under CI (env CI set), else prints SKIPPED and passes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

/// One topology at a time: the tests share two CPUs and measure throughput.
static SERIAL: Mutex<()> = Mutex::new(());

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let missing: Vec<&str> = ["ip", "ping", "traceroute", "iperf3", "ethtool"]
        .into_iter()
        .filter(|t| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    if euid == 0 && missing.is_empty() {
        return true;
    }
    let why = if euid != 0 {
        "needs root".to_string()
    } else {
        format!(
            "missing tools: {} (scripts/setup.sh installs them)",
            missing.join(", ")
        )
    };
    if std::env::var_os("CI").is_some() {
        panic!("{test}: cannot run under CI: {why}");
    }
    eprintln!("\n*** {test}: SKIPPED ({why}) ***\n");
    false
}

/// The topology; dropping it runs `netns-router.sh down`.
struct Topo {
    p: String,
}

impl Topo {
    fn up(p: &str) -> Topo {
        let t = Topo { p: p.to_string() };
        let out = Command::new(root().join("scripts/netns-router.sh"))
            .args(["up", p, "anode"])
            .env("ANODE_BIN", env!("CARGO_BIN_EXE_anode"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "netns-router.sh up failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        t
    }

    /// Runs a command in host `h` (s, r or d) with a time bound.
    fn run(&self, h: &str, secs: u32, args: &[&str]) -> Output {
        Command::new("timeout")
            .arg(secs.to_string())
            .args(["ip", "netns", "exec", &format!("{}{h}", self.p)])
            .args(args)
            .output()
            .unwrap()
    }

    fn ok(&self, h: &str, secs: u32, args: &[&str]) -> String {
        let o = self.run(h, secs, args);
        let s = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            o.status.success(),
            "{args:?} in {h} failed:\n{s}\nrouter log:\n{}",
            self.log()
        );
        s
    }

    fn log(&self) -> String {
        std::fs::read_to_string(
            std::env::temp_dir().join(format!("anode-netns-{}/router.log", self.p)),
        )
        .unwrap_or_default()
    }

    /// Enters host `h`'s network namespace on the calling thread.
    fn enter(&self, h: &str) {
        let f = std::fs::File::open(format!("/var/run/netns/{}{h}", self.p)).unwrap();
        // SAFETY: `f` is an open namespace file; setns only changes this thread's namespace.
        let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        let _ = Command::new(root().join("scripts/netns-router.sh"))
            .args(["down", &self.p])
            .output();
    }
}

#[test]
fn router_ping_v4_v6() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("router_ping_v4_v6") {
        return;
    }
    let t = Topo::up("arp");
    let out = t.ok(
        "s",
        10,
        &["ping", "-c", "5", "-i", "0.2", "-W", "2", "198.18.2.2"],
    );
    assert!(out.contains("5 received"), "{out}");
    assert!(out.contains("ttl=63"), "one hop decremented the TTL: {out}");
    let out = t.ok(
        "s",
        10,
        &[
            "ping",
            "-6",
            "-c",
            "5",
            "-i",
            "0.2",
            "-W",
            "2",
            "2001:2:0:2::2",
        ],
    );
    assert!(out.contains("5 received"), "{out}");
    assert!(out.contains("ttl=63"), "{out}");
    // The router answers ping to its own addresses, both sides, both families.
    for a in ["198.18.1.2", "198.18.2.1", "2001:2:0:1::2", "2001:2:0:2::1"] {
        let out = t.ok("s", 10, &["ping", "-c", "2", "-i", "0.2", "-W", "2", a]);
        assert!(out.contains("2 received"), "{a}: {out}");
    }
    // Large packets (1472-byte payload: a full 1500-byte IP packet).
    let out = t.ok(
        "d",
        10,
        &[
            "ping",
            "-c",
            "2",
            "-s",
            "1472",
            "-M",
            "do",
            "-W",
            "2",
            "198.18.1.1",
        ],
    );
    assert!(out.contains("2 received"), "{out}");
}

#[test]
fn router_tcp_transfer() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("router_tcp_transfer") {
        return;
    }
    let t = Topo::up("art");
    let data: Vec<u8> = (0..4_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let want = data.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let p = t.p.clone();
    let server = std::thread::spawn(move || {
        Topo { p: p.clone() }.enter_no_drop("d");
        let l = TcpListener::bind("198.18.2.2:5001").unwrap();
        tx.send(()).unwrap();
        let (mut c, from) = l.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        (got, from)
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let p = t.p.clone();
    let client = std::thread::spawn(move || {
        Topo { p }.enter_no_drop("s");
        let mut c =
            TcpStream::connect_timeout(&"198.18.2.2:5001".parse().unwrap(), Duration::from_secs(5))
                .unwrap();
        c.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(&data).unwrap();
    });
    client.join().unwrap();
    let (got, from) = server.join().unwrap();
    assert_eq!(from.ip().to_string(), "198.18.1.1");
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the bytes arrived intact");
}

impl Topo {
    /// `enter` for a helper thread's copy (no teardown when it is dropped).
    fn enter_no_drop(self, h: &str) {
        self.enter(h);
        std::mem::forget(self);
    }
}

fn json_num(out: &str, key: &str) -> f64 {
    // The last occurrence: iperf3 -J puts the totals at the end.
    let i = out
        .rfind(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} in {out}"));
    let rest = &out[i + key.len() + 3..];
    let end = rest.find([',', '\n', '}']).unwrap();
    rest[..end].trim().parse().unwrap()
}

#[test]
fn router_iperf3_tcp_udp() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("router_iperf3_tcp_udp") {
        return;
    }
    let t = Topo::up("ari");
    // The UDP run gets one retry: on the shared two-CPU machine a burst of other work can
    // deschedule the (debug-build) router for long enough to lose 10 % once.
    for (proto, extra, tries) in [
        ("tcp", vec![], 1),
        ("udp", vec!["-u", "-b", "100M", "-l", "1400"], 2),
    ] {
        for attempt in 1..=tries {
            t.ok(
                "d",
                10,
                &["iperf3", "-s", "-1", "-D", "-B", "198.18.2.2", "-p", "5201"],
            );
            std::thread::sleep(Duration::from_millis(300));
            let mut args = vec!["iperf3", "-J", "-c", "198.18.2.2", "-p", "5201", "-t", "2"];
            args.extend(extra.iter().copied());
            let out = t.ok("s", 20, &args);
            let bytes = json_num(&out, "bytes");
            eprintln!("iperf3 {proto}: {bytes} bytes received in 2 s");
            assert!(bytes > 1_000_000.0, "{proto}: {out}");
            if proto == "udp" {
                let lost = json_num(&out, "lost_percent");
                if lost >= 10.0 && attempt < tries {
                    eprintln!("udp loss {lost}% at 100 Mbit/s, retrying once");
                    continue;
                }
                assert!(lost < 10.0, "udp loss {lost}% at 100 Mbit/s: {out}");
            }
            break;
        }
    }
}

#[test]
fn router_ttl_and_traceroute() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("router_ttl_and_traceroute") {
        return;
    }
    let t = Topo::up("arx");
    let out = t.ok(
        "s",
        15,
        &[
            "traceroute",
            "-n",
            "-w",
            "1",
            "-q",
            "1",
            "-m",
            "4",
            "198.18.2.2",
        ],
    );
    let hops: Vec<&str> = out.lines().skip(1).collect();
    assert!(
        hops[0].contains("198.18.1.2"),
        "first hop is the anode router: {out}"
    );
    assert!(hops[1].contains("198.18.2.2"), "{out}");
    let out = t.ok(
        "s",
        15,
        &[
            "traceroute",
            "-6",
            "-n",
            "-w",
            "1",
            "-q",
            "1",
            "-m",
            "4",
            "2001:2:0:2::2",
        ],
    );
    let hops: Vec<&str> = out.lines().skip(1).collect();
    assert!(hops[0].contains("2001:2:0:1::2"), "{out}");
    // ping with TTL 1: time exceeded from the router.
    let o = t.run(
        "s",
        10,
        &["ping", "-c", "1", "-t", "1", "-W", "2", "198.18.2.2"],
    );
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("198.18.1.2") && s.contains("Time to live exceeded"),
        "{s}"
    );
}
