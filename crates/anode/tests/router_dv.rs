//! IP routes learned over anode's distance-vector service, end to end: four network
//! namespaces `h1 -- r1 -- r2 -- h2` on veth pairs, an `anode router` with a `[node]` in
//! each of r1 and r2 (their nodes are neighbors over ANEP/UDP on the shared segment), and
//! **no static route** for the far prefixes. Each router advertises its connected prefixes
//! to the other's node; the learned routes make `ping` (IPv4 and IPv6) from h1 to h2 work.
//! Then the r1-r2 link goes down: the neighbor dies, the learned routes are withdrawn and
//! ping fails; the link comes back: the routes are re-learned and ping works again.
//!
//! `failover_to_the_other_path`: a triangle of three routers (`h1 -- r1 -- r2 -- h2` plus
//! `r1 -- r3 -- r2`). Traffic takes the direct r1-r2 link (metric 1); when it goes down the
//! distance-vector service reroutes through r3 (metric 2), the learned IP routes follow and
//! ping works again; when it comes back the direct routes return.
//!
//! Addresses from 198.18.0.0/15 and 2001:2::/48, only inside the namespaces. Every wait is
//! bounded; a Drop guard stops the routers (by pid) and deletes the namespaces even when an
//! assertion fails. Needs root: ignored by default; run as root with `--include-ignored`.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anode_testkit::netns;

fn require(test: &str) {
    netns::require(test, &["ping", "ip", "traceroute"], false);
}

fn run(args: &[&str]) -> Output {
    Command::new("timeout")
        .arg("10")
        .args(args)
        .output()
        .unwrap()
}

fn sh(args: &[&str]) {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The namespaces and the routers; dropping it stops the routers and deletes the
/// namespaces.
struct Line {
    p: String,
    dir: PathBuf,
    routers: Vec<Child>,
    hosts: Vec<&'static str>,
}

/// Hosts h1 and h2 (net 198.18.1/24 and 198.18.3/24) and routers r1, r2 on 198.18.2/24.
const LINE: [(&str, &str, &str, &str); 3] = [
    ("h1", "e0", "r1", "a"),
    ("r1", "b", "r2", "b"),
    ("r2", "a", "h2", "e0"),
];

/// The line plus r3, with r1 -- r3 on 198.18.4/24 and r3 -- r2 on 198.18.5/24.
const TRIANGLE: [(&str, &str, &str, &str); 5] = [
    ("h1", "e0", "r1", "a"),
    ("r1", "b", "r2", "b"),
    ("r2", "a", "h2", "e0"),
    ("r1", "c", "r3", "c"),
    ("r2", "d", "r3", "d"),
];

impl Line {
    fn up(p: &str) -> Line {
        Self::build(p, &LINE)
    }

    /// The namespaces of `veths` (x, x's interface, y, y's interface), routers' interfaces
    /// owned by anode, hosts h1 and h2 addressed with a default route through their router.
    fn build(p: &str, veths: &[(&'static str, &'static str, &'static str, &'static str)]) -> Line {
        let mut hosts: Vec<&'static str> = Vec::new();
        for (x, _, y, _) in veths {
            for h in [*x, *y] {
                if !hosts.contains(&h) {
                    hosts.push(h);
                }
            }
        }
        let l = Line {
            p: p.into(),
            dir: std::env::temp_dir().join(format!("anode-dv-{p}")),
            routers: Vec::new(),
            hosts,
        };
        l.delete();
        std::fs::create_dir_all(&l.dir).unwrap();
        for h in &l.hosts {
            sh(&["ip", "netns", "add", &l.ns(h)]);
            sh(&["ip", "-n", &l.ns(h), "link", "set", "lo", "up"]);
        }
        for (x, xi, y, yi) in veths.iter().copied() {
            sh(&[
                "ip",
                "link",
                "add",
                "name",
                xi,
                "netns",
                &l.ns(x),
                "type",
                "veth",
                "peer",
                "name",
                yi,
                "netns",
                &l.ns(y),
            ]);
        }
        // Routers: anode owns the interfaces (no kernel addresses, no kernel IPv6).
        let router_ifs = veths
            .iter()
            .flat_map(|(x, xi, y, yi)| [(*x, *xi), (*y, *yi)])
            .filter(|(h, _)| h.starts_with('r'));
        for (r, i) in router_ifs {
            l.exec(
                r,
                &[
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{i}.disable_ipv6=1"),
                ],
            );
            sh(&["ip", "-n", &l.ns(r), "link", "set", "dev", i, "up"]);
        }
        // Hosts: kernel addresses and a default route through their router.
        for (h, net) in [("h1", 1), ("h2", 3)] {
            let gw = if h == "h1" { 2 } else { 1 };
            let ns = l.ns(h);
            sh(&["ip", "-n", &ns, "link", "set", "dev", "e0", "up"]);
            let me = if h == "h1" { 1 } else { 2 };
            sh(&[
                "ip",
                "-n",
                &ns,
                "addr",
                "add",
                &format!("198.18.{net}.{me}/24"),
                "dev",
                "e0",
            ]);
            sh(&[
                "ip",
                "-n",
                &ns,
                "addr",
                "add",
                &format!("2001:2:0:{net}::{me}/64"),
                "dev",
                "e0",
                "nodad",
            ]);
            sh(&[
                "ip",
                "-n",
                &ns,
                "route",
                "add",
                "default",
                "via",
                &format!("198.18.{net}.{gw}"),
            ]);
            sh(&[
                "ip",
                "-n",
                &ns,
                "-6",
                "route",
                "add",
                "default",
                "via",
                &format!("2001:2:0:{net}::{gw}"),
            ]);
        }
        l
    }

    fn ns(&self, h: &str) -> String {
        format!("{}{h}", self.p)
    }

    fn exec(&self, h: &str, args: &[&str]) -> Output {
        let ns = self.ns(h);
        let mut a = vec!["ip", "netns", "exec", &ns];
        a.extend_from_slice(args);
        run(&a)
    }

    /// Starts `anode router` in `r` (r1 or r2 of the line).
    fn router(&mut self, r: &str) {
        let (near, me, peer) = if r == "r1" { (1, 1, 2) } else { (3, 2, 1) };
        let near_addr = if r == "r1" { 2 } else { 1 };
        self.router_with(
            r,
            &[("a", near, near_addr), ("b", 2, me)],
            &format!("198.18.2.{me}:3322"),
            &[&format!("198.18.2.{peer}:3322")],
        );
    }

    /// Starts `anode router` in `r` owning `ifaces` (name, net N, host part H: 198.18.N.H/24
    /// and 2001:2:0:N::H/64), with a node at `node` linked to `peers` over UDP.
    fn router_with(&mut self, r: &str, ifaces: &[(&str, u8, u8)], node: &str, peers: &[&str]) {
        let mut cfg = String::new();
        for (name, net, h) in ifaces {
            cfg += &format!(
                "[[interface]]\nname = \"{name}\"\n\
                 ipv4 = [\"198.18.{net}.{h}/24\"]\nipv6 = [\"2001:2:0:{net}::{h}/64\"]\n"
            );
        }
        cfg += &format!(
            "\n[node]\naddress = \"{node}\"\nadvertise_ms = 300\n\
             [node.routing]\nhello_interval_ms = 200\ndead_interval_ms = 800\n\
             update_interval_ms = 1000\nroute_timeout_ms = 6000\ngc_interval_ms = 2000\n"
        );
        for p in peers {
            cfg += &format!("[[node.link]]\npeer = \"{p}\"\n");
        }
        let path = self.dir.join(format!("{r}.toml"));
        std::fs::write(&path, cfg).unwrap();
        let log = std::fs::File::create(self.dir.join(format!("{r}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(r)])
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

    fn log(&self, r: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{r}.log"))).unwrap_or_default()
    }

    fn logs(&self) -> String {
        self.hosts
            .iter()
            .filter(|h| h.starts_with('r'))
            .map(|r| format!("{r}:\n{}\n", self.log(r)))
            .collect()
    }

    /// Waits at most `secs` for `ok`; panics with `what` and the logs otherwise.
    fn wait(&mut self, secs: u64, what: &str, mut ok: impl FnMut(&Line) -> bool) {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            if ok(self) {
                return;
            }
            for c in &mut self.routers {
                if let Ok(Some(st)) = c.try_wait() {
                    panic!("a router exited ({st}) waiting for {what}\n{}", self.logs());
                }
            }
            if Instant::now() > end {
                panic!("not within {secs} s: {what}\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// One bounded ping from h1 to h2 (`-4` or `-6`); true if answered.
    fn ping(&self, family: &str) -> bool {
        let dst = if family == "-4" {
            "198.18.3.2"
        } else {
            "2001:2:0:3::2"
        };
        self.exec("h1", &["ping", family, "-c", "1", "-W", "1", dst])
            .status
            .success()
    }

    fn delete(&self) {
        for h in &self.hosts {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(h)])
                .output();
        }
    }
}

impl Drop for Line {
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

const R1_V4: &str = "198.18.3.0/24 via 198.18.2.2 metric 1";
const R1_V6: &str = "2001:2:0:3::/64 via 2001:2:0:2::2 metric 1";
const R2_V4: &str = "198.18.1.0/24 via 198.18.2.1 metric 1";

#[test]
#[ignore = "needs root and netns"]
fn learned_routes_carry_ping_and_follow_the_link() {
    require("learned_routes_carry_ping_and_follow_the_link");
    let mut l = Line::up("dvr");
    l.router("r1");
    l.router("r2");
    l.wait(20, "learned routes on both routers", |l| {
        let (a, b) = (l.log("r1"), l.log("r2"));
        a.contains(R1_V4) && a.contains(R1_V6) && b.contains(R2_V4)
    });
    // The first pings may go while ARP/NDP resolve; each try is bounded by -W 1.
    l.wait(15, "IPv4 ping h1 -> h2 over learned routes", |l| {
        l.ping("-4")
    });
    l.wait(15, "IPv6 ping h1 -> h2 over learned routes", |l| {
        l.ping("-6")
    });

    // The r1-r2 link goes down: the neighbor dies and the routes are withdrawn.
    sh(&["ip", "-n", &l.ns("r1"), "link", "set", "dev", "b", "down"]);
    l.wait(10, "learned routes withdrawn on r1", |l| {
        l.log("r1").contains("learned routes: none")
    });
    assert!(
        !l.ping("-4"),
        "ping must fail with the link down\n{}",
        l.logs()
    );

    // Back up: re-learned, and ping works again.
    sh(&["ip", "-n", &l.ns("r1"), "link", "set", "dev", "b", "up"]);
    l.wait(20, "routes re-learned on r1", |l| {
        l.log("r1").matches(R1_V4).count() >= 2
    });
    l.wait(15, "IPv4 ping h1 -> h2 after the link came back", |l| {
        l.ping("-4")
    });
    eprintln!("{}", l.logs());
}

#[test]
#[ignore = "needs root and netns"]
fn failover_to_the_other_path() {
    require("failover_to_the_other_path");
    let mut l = Line::build("dvf", &TRIANGLE);
    let (n1, n2, n3) = ("198.18.2.1:3322", "198.18.2.2:3322", "198.18.4.3:3322");
    l.router_with(
        "r1",
        &[("a", 1, 2), ("b", 2, 1), ("c", 4, 1)],
        n1,
        &[n2, "198.18.4.3:3322"],
    );
    l.router_with(
        "r2",
        &[("a", 3, 1), ("b", 2, 2), ("d", 5, 2)],
        n2,
        &[n1, "198.18.5.3:3322"],
    );
    l.router_with(
        "r3",
        &[("c", 4, 3), ("d", 5, 3)],
        n3,
        &["198.18.4.1:3322", "198.18.5.2:3322"],
    );
    let direct = [
        ("r1", "198.18.3.0/24 via 198.18.2.2 metric 1"),
        ("r2", "198.18.1.0/24 via 198.18.2.1 metric 1"),
    ];
    let around = [
        ("r1", "198.18.3.0/24 via 198.18.4.3 metric 2"),
        ("r1", "2001:2:0:3::/64 via 2001:2:0:4::3 metric 2"),
        ("r2", "198.18.1.0/24 via 198.18.5.3 metric 2"),
    ];
    l.wait(20, "direct learned routes on r1 and r2", |l| {
        direct.iter().all(|(r, want)| l.log(r).contains(want))
    });
    l.wait(15, "IPv4 ping h1 -> h2 over the direct link", |l| {
        l.ping("-4")
    });

    // The direct link goes down: both ends reroute through r3.
    sh(&["ip", "-n", &l.ns("r1"), "link", "set", "dev", "b", "down"]);
    l.wait(15, "routes around through r3", |l| {
        around.iter().all(|(r, want)| l.log(r).contains(want))
    });
    l.wait(15, "IPv4 ping h1 -> h2 through r3", |l| l.ping("-4"));
    l.wait(15, "IPv6 ping h1 -> h2 through r3", |l| l.ping("-6"));
    // traceroute shows the path: r1, then r3, then h2 (r2's hop answers from its r3 side).
    let out = l.exec(
        "h1",
        &[
            "traceroute",
            "-n",
            "-w",
            "1",
            "-q",
            "1",
            "-m",
            "5",
            "198.18.3.2",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let hops: Vec<&str> = text.lines().skip(1).collect();
    assert!(
        hops.len() >= 4
            && hops[0].contains("198.18.1.2")
            && hops[1].contains("198.18.4.3")
            && hops[3].contains("198.18.3.2"),
        "h1 -> r1 -> r3 -> r2 -> h2: {text}\n{}",
        l.logs()
    );

    // Back up: the direct routes return.
    sh(&["ip", "-n", &l.ns("r1"), "link", "set", "dev", "b", "up"]);
    l.wait(20, "direct routes again on r1", |l| {
        l.log("r1").matches(direct[0].1).count() >= 2
    });
    l.wait(15, "IPv4 ping h1 -> h2 over the direct link again", |l| {
        l.ping("-4")
    });
}
