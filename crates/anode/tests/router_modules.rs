//! Service modules in the IP path of `anode router`, on real interfaces: the line
//! `s -- r -- d` of scripts/netns-router.sh with anode routing in `r` and three signed
//! built-in WebAssembly modules loaded from packages: `counter` (continue), `flowcount` (a
//! service) and `ratelimit` (drop beyond the first `limit` packets of a flow; on an IP packet
//! its flow key is the bytes at offset 16: destination address and both ports). One
//! `[[ip_filter]]` diverts UDP to port 5001 to the modules; everything else stays on the IP
//! fast path. So: ping passes, all 10 datagrams to port 5002 arrive, and only the first 3
//! of 10 to port 5001 do; the router's exit report shows 10 diverted, 3 continued, 7
//! dropped.
//!
//! UDP is sent and received from threads that entered the namespaces (setns), so the
//! counts are exact. Every wait is bounded; the Drop guard runs `netns-router.sh down`.
//! Needs root: ignored by default; run as root with `--include-ignored`.

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use anode_testkit::netns;

const P: &str = "amo";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn require(test: &str) {
    netns::require(test, &["ip", "ping", "ethtool"], false);
}

fn anode(args: &[&str]) -> Output {
    let o = Command::new("timeout")
        .arg("30")
        .arg(env!("CARGO_BIN_EXE_anode"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "anode {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Packs and signs the built-in module `name` into DIR/NAME.amod.
fn package(dir: &Path, name: &str, key: &Path) -> PathBuf {
    let (_, manifest, code) = anode_modules::builtin::BUILTIN
        .iter()
        .find(|(n, _, _)| *n == name)
        .unwrap();
    let src = dir.join(format!("src-{name}"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("manifest.toml"), manifest).unwrap();
    std::fs::write(src.join("module.wasm"), code).unwrap();
    let out = dir.join(format!("{name}.amod"));
    anode(&["module", "pack", &s(&src), "--out", &s(&out)]);
    anode(&["module", "sign", &s(&out), "--key", &s(key)]);
    out
}

/// The namespaces and the router; dropping it tears everything down.
struct Topo {
    dir: PathBuf,
}

impl Topo {
    fn down(&self) {
        let _ = Command::new("timeout")
            .args(["20", "bash"])
            .arg(root().join("scripts/netns-router.sh"))
            .args(["down", P])
            .output();
    }

    fn log(&self) -> String {
        let state = std::env::temp_dir().join(format!("anode-netns-{P}"));
        std::fs::read_to_string(state.join("router.log")).unwrap_or_default()
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        self.down();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
#[ignore = "needs root and netns"]
fn modules_see_only_filtered_packets_and_drop_beyond_the_limit() {
    require("modules_see_only_filtered_packets_and_drop_beyond_the_limit");
    let dir = std::env::temp_dir().join(format!("anode-router-modules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = Topo { dir: dir.clone() };
    let key = dir.join("pub");
    anode(&["keygen", "--out", &s(&key)]);
    let pubhex = std::fs::read_to_string(dir.join("pub.pub")).unwrap();
    let secret = dir.join("pub.key");
    let pkgs: Vec<PathBuf> = ["counter", "flowcount", "ratelimit"]
        .iter()
        .map(|n| package(&dir, n, &secret))
        .collect();
    let extra = format!(
        "[modules]\ntrusted_keys = [\"{}\"]\n\n\
         [[module]]\npackage = \"{}\"\n\n\
         [[module]]\npackage = \"{}\"\n\n\
         [[module]]\npackage = \"{}\"\n[module.config]\nlimit = 3\n\n\
         [[ip_filter]]\nfamily = 4\nkeys = [{{ offset = 9, value = \"11\" }}, {{ offset = 22, value = \"1389\" }}]\n",
        pubhex.trim(),
        s(&pkgs[0]),
        s(&pkgs[1]),
        s(&pkgs[2])
    );
    let extra_file = dir.join("extra.toml");
    std::fs::write(&extra_file, extra).unwrap();
    let up = Command::new("timeout")
        .args(["60", "bash"])
        .arg(root().join("scripts/netns-router.sh"))
        .args(["up", P, "anode"])
        .env("ANODE_BIN", env!("CARGO_BIN_EXE_anode"))
        .env("ANODE_ROUTER_EXTRA", &extra_file)
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "netns-router.sh up: {}{}\n{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr),
        t.log()
    );
    // Ping is not diverted: it passes (the first try may wait for ARP).
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let o = Command::new("timeout")
            .args(["5", "ip", "netns", "exec", &format!("{P}s")])
            .args(["ping", "-c", "1", "-W", "1", "198.18.2.2"])
            .output()
            .unwrap();
        if o.status.success() {
            break;
        }
        assert!(
            Instant::now() < end,
            "no ping through the router\n{}",
            t.log()
        );
    }
    let rx = netns::in_ns(&format!("{P}d"), || {
        let socks: Vec<UdpSocket> = [5001u16, 5002]
            .iter()
            .map(|p| {
                let s = UdpSocket::bind(("198.18.2.2", *p)).unwrap();
                s.set_nonblocking(true).unwrap();
                s
            })
            .collect();
        socks
    });
    netns::in_ns(&format!("{P}s"), || {
        let s = UdpSocket::bind("198.18.1.1:0").unwrap();
        for i in 0..10u8 {
            for port in [5001u16, 5002] {
                s.send_to(&[i; 32], ("198.18.2.2", port)).unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    // Count what arrived (bounded wait for stragglers).
    let mut got = [0usize; 2];
    let end = Instant::now() + Duration::from_secs(3);
    let mut buf = [0u8; 64];
    while Instant::now() < end && got[1] < 10 {
        for (i, sock) in rx.iter().enumerate() {
            while let Ok((n, _)) = sock.recv_from(&mut buf) {
                assert_eq!(n, 32);
                got[i] += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    for (i, sock) in rx.iter().enumerate() {
        while sock.recv_from(&mut buf).is_ok() {
            got[i] += 1;
        }
    }
    t.down();
    let log = t.log();
    assert_eq!(
        got,
        [3, 10],
        "port 5001: 3 of 10 (ratelimit), port 5002: all\n{log}"
    );
    assert!(
        log.contains("modules: 10 packets diverted: 3 continued, 7 dropped"),
        "{log}"
    );
    assert!(
        log.contains("module counter@1.0.0 Active packets 10"),
        "{log}"
    );
    eprintln!("{log}");
}
