//! Plans of small topologies, byte for byte, and the properties every plan keeps.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::*;

pub(crate) const FIXTURE: &str = r#"
[network]
duration_ms = 1000

[routing]
hello_interval_ms = 250
dead_interval_ms = 800

[[node]]
name = "a"
[[node]]
name = "b"
[[node]]
name = "long-node-name"

[[link]]
a = "a"
b = "b"
delay_ms = 5

[[link]]
a = "b"
b = "long-node-name"
delay_ms = 0.5
bandwidth_mbps = 0
loss = 0.01
mtu = 1200
cost = 3
"#;

pub(crate) fn topo(text: &str) -> Topology {
    Topology::parse(text, "fixture.toml").unwrap()
}

fn layout() -> Layout {
    Layout {
        state_dir: PathBuf::from("/state/labs/fx"),
        socket_dir: PathBuf::from("/run/anode/lab"),
    }
}

#[test]
fn fixture_batches() {
    let p = plan(&topo(FIXTURE), "fx", &layout(), Impair::Netem).unwrap();
    assert_eq!(p.prefix, "al8a11-");
    assert!(!p.assigned);
    assert_eq!(
        p.netns_batch(),
        "netns add al8a11-a\nnetns add al8a11-b\nnetns add al8a11-long-n+2\n"
    );
    assert_eq!(
        p.veth_batch(),
        "link add eth1 netns al8a11-a type veth peer name eth1 netns al8a11-b\n\
         link add eth2 netns al8a11-b type veth peer name eth1 netns al8a11-long-n+2\n"
    );
    assert_eq!(
        p.ip_batch(1),
        "link set lo up\naddr add 198.18.0.2/32 dev lo\n\
         addr add 198.18.128.2/30 dev eth1\nlink set eth1 mtu 1500 up\n\
         route add 198.18.0.1/32 via 198.18.128.1 dev eth1\n\
         addr add 198.18.128.5/30 dev eth2\nlink set eth2 mtu 1228 up\n\
         route add 198.18.0.3/32 via 198.18.128.6 dev eth2\n"
    );
    assert_eq!(
        p.tc_batch(1),
        "qdisc add dev eth1 root netem delay 5000us rate 100000000bit limit 1021\n\
         qdisc add dev eth2 root netem delay 500us loss random 1% limit 100000\n"
    );
    assert_eq!(
        p.tc_batch(2),
        "qdisc add dev eth1 root netem delay 500us loss random 1% limit 100000\n"
    );
    assert_eq!(p.ip_batch(9), "");
    let n = plan(&topo(FIXTURE), "fx", &layout(), Impair::Node).unwrap();
    assert_eq!(n.tc_batch(1), "", "node mode adds no qdisc");
    assert_eq!(n.ip_batch(1), p.ip_batch(1));
}

const CONFIG_B: &str = r#"# anode lab 'fx': node 'b' in namespace al8a11-b
# written by `anode lab up`, removed by `anode lab down`

[node]
address = "198.18.0.2:3322"

[routing]
dead_interval_ms = 800
hello_interval_ms = 250

[control]
socket = "/run/anode/lab/al8a11-b/anode/3322.sock"

[capsule]
cache_dir = "/state/labs/fx/nodes/b/code"

[modules]
state_dir = "/state/labs/fx/nodes/b/modules"

[[link]]
name = "eth1"
peer = "198.18.0.1:3322"   # a
mtu = 1472
cost = 1

[[link]]
name = "eth2"
peer = "198.18.0.3:3322"   # long-node-name
mtu = 1200
cost = 3
"#;

#[test]
fn fixture_config() {
    let p = plan(&topo(FIXTURE), "fx", &layout(), Impair::Netem).unwrap();
    let b = p.node("b").unwrap();
    assert_eq!(b.config, CONFIG_B);
    assert_eq!(b.netns, "al8a11-b");
    assert_eq!(b.config_path, Path::new("/state/labs/fx/nodes/b.toml"));
    assert_eq!(b.log, Path::new("/state/labs/fx/nodes/b.log"));
    assert_eq!(b.runtime_dir, Path::new("/run/anode/lab/al8a11-b"));
    assert_eq!(
        b.socket,
        Path::new("/run/anode/lab/al8a11-b/anode/3322.sock")
    );
    let n = plan(&topo(FIXTURE), "fx", &layout(), Impair::Node).unwrap();
    let with_impair = CONFIG_B
        .replace(
            "mtu = 1472\ncost = 1\n",
            "mtu = 1472\ncost = 1\nimpair = { delay_ms = 5, loss = 0, rate_mbps = 100, queue_bytes = 65536 }\n",
        )
        .replace(
            "mtu = 1200\ncost = 3\n",
            "mtu = 1200\ncost = 3\nimpair = { delay_ms = 0.5, loss = 0.01, queue_bytes = 65536 }\n",
        );
    assert_eq!(n.node("b").unwrap().config, with_impair);
}

/// A ring of `n` nodes with long names, 2 ms links.
pub(crate) fn ring(n: usize) -> String {
    let mut s = String::from("[network]\nduration_ms = 1000\n");
    for i in 0..n {
        s.push_str(&format!("[[node]]\nname = \"ring-node-number-{i}\"\n"));
    }
    for i in 0..n {
        s.push_str(&format!(
            "[[link]]\na = \"ring-node-number-{i}\"\nb = \"ring-node-number-{}\"\ndelay_ms = 2\n",
            (i + 1) % n
        ));
    }
    s
}

#[test]
fn every_config_parses_with_the_node_loader() {
    for (text, impair) in [
        (FIXTURE.to_string(), Impair::Netem),
        (FIXTURE.to_string(), Impair::Node),
        (ring(7), Impair::Node),
    ] {
        let t = topo(&text);
        let p = plan(&t, "parse", &layout(), impair).unwrap();
        for n in &p.nodes {
            let f = anode_node::config::parse(&n.config_path, &n.config)
                .unwrap_or_else(|e| panic!("{e}\n{}", n.config));
            assert_eq!(f.node.address, n.address);
            assert_eq!(f.bind, n.address.socket_addr());
            assert_eq!(f.socket, n.socket);
            assert_eq!(f.node.routing, t.routing);
            assert_eq!(f.links.len(), n.ifaces.len());
            for (l, i) in f.links.iter().zip(&n.ifaces) {
                assert_eq!(l.name, i.name);
                assert_eq!(l.peer, p.nodes[i.peer].address);
                assert_eq!(l.mtu + 28, i.mtu);
            }
            let want = if impair == Impair::Node {
                n.ifaces.len()
            } else {
                0
            };
            assert_eq!(f.impairments.len(), want);
            for (imp, i) in f.impairments.iter().zip(&n.ifaces) {
                assert_eq!(imp.delay.as_micros() as u64, i.netem.delay_us);
                assert_eq!(imp.rate_bps, i.netem.rate_bps);
                assert_eq!(imp.queue_bytes as u64, i.netem.queue_bytes);
                assert!((imp.loss() - i.netem.loss).abs() < 1e-9);
            }
        }
    }
}

#[test]
fn names_are_unique_and_short() {
    let t = topo(&ring(60));
    let p = plan(
        &t,
        "a-rather-long-lab-name-of-32-ch",
        &layout(),
        Impair::Netem,
    )
    .unwrap();
    let ns: BTreeSet<&str> = p.nodes.iter().map(|n| n.netns.as_str()).collect();
    assert_eq!(ns.len(), 60);
    for n in &p.nodes {
        assert!(n.netns.len() <= 15, "{}", n.netns);
        assert!(n.netns.starts_with(&p.prefix));
        let ifs: BTreeSet<&str> = n.ifaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(ifs.len(), n.ifaces.len());
        assert_eq!(ifs, BTreeSet::from(["eth1", "eth2"]));
        assert!(n.ifaces.iter().all(|i| i.name.len() <= 15));
        assert!(n.socket.as_os_str().len() < 108);
    }
    let files: BTreeSet<&Path> = p.nodes.iter().map(|n| n.config_path.as_path()).collect();
    assert_eq!(files.len(), 60);
    assert!(plan(&t, "bad name", &layout(), Impair::Netem).is_err());
    assert_ne!(
        plan(&t, "other", &layout(), Impair::Netem).unwrap().prefix,
        p.prefix
    );
}

#[test]
fn address_scheme() {
    let p = plan(&topo(&ring(300)), "big", &layout(), Impair::Netem).unwrap();
    let mut seen = BTreeSet::new();
    for n in &p.nodes {
        let ip = node_ip(n.address);
        let o = ip.octets();
        assert!(o[0] == 198 && o[1] == 18 && o[2] < 128, "{ip}");
        assert_eq!(n.address.port(), 3322);
        assert!(seen.insert(ip));
    }
    for (j, l) in p.links.iter().enumerate() {
        let base = u32::from(LINK_BASE) + 4 * j as u32;
        assert_eq!(u32::from(l.a_ip), base + 1);
        assert_eq!(u32::from(l.b_ip), base + 2);
        assert!(l.a_ip.octets()[2] >= 128);
        assert!(seen.insert(l.a_ip) && seen.insert(l.b_ip));
        let a = &p.nodes[l.a];
        let f = a.ifaces.iter().find(|i| i.name == l.a_if).unwrap();
        assert_eq!((f.ip, f.peer_link_ip, f.peer), (l.a_ip, l.b_ip, l.b));
    }
    assert_eq!(
        link_ips(MAX_LINKS - 1).1,
        std::net::Ipv4Addr::new(198, 18, 255, 254)
    );
}

#[test]
fn topology_addresses_kept_or_replaced() {
    let given = "[network]\nduration_ms = 1000\n\
        [[node]]\nname = \"a\"\naddress = \"198.18.5.1:4000\"\n\
        [[node]]\nname = \"b\"\naddress = \"198.18.5.2:4001\"\n\
        [[link]]\na = \"a\"\nb = \"b\"\n";
    let p = plan(&topo(given), "k", &layout(), Impair::Netem).unwrap();
    assert!(!p.assigned);
    assert_eq!(p.nodes[0].address.to_string(), "198.18.5.1:4000");
    assert!(p.nodes[1].socket.ends_with("4001.sock"));
    for other in [
        given.replace("198.18.5.1:4000", "127.0.0.1:4000"),
        given.replace("198.18.5.2:4001", "198.18.5.1:4001"),
        given.replace("198.18.5.1:4000", "198.18.200.1:4000"),
        "[network]\nduration_ms = 1000\nipv6 = true\n[[node]]\nname = \"a\"\n\
         [[node]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\n"
            .to_string(),
    ] {
        let p = plan(&topo(&other), "k", &layout(), Impair::Netem).unwrap();
        assert!(p.assigned, "{other}");
        assert_eq!(p.nodes[0].address.to_string(), "198.18.0.1:3322");
        assert_eq!(p.nodes[1].address.to_string(), "198.18.0.2:3322");
    }
}

#[test]
fn components_of_a_split_topology() {
    let text = "[network]\nduration_ms = 1000\n\
        [[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[node]]\nname = \"c\"\n[[node]]\nname = \"d\"\n\
        [[link]]\na = \"a\"\nb = \"b\"\n[[link]]\na = \"d\"\nb = \"c\"\n";
    let p = plan(&topo(text), "split", &layout(), Impair::Netem).unwrap();
    let c: Vec<usize> = p.nodes.iter().map(|n| n.component).collect();
    assert_eq!(c[0], c[1]);
    assert_eq!(c[2], c[3]);
    assert_ne!(c[0], c[2]);
}

#[test]
fn too_many_nodes() {
    let mut s = String::from("[network]\nduration_ms = 1000\n");
    for i in 0..=MAX_NODES {
        s.push_str(&format!("[[node]]\nname = \"n{i}\"\n"));
    }
    s.push_str("[[link]]\na = \"n0\"\nb = \"n1\"\n");
    let e = plan(&topo(&s), "x", &layout(), Impair::Netem).unwrap_err();
    assert!(
        matches!(e, PlanError::TooManyNodes { nodes: 1001, .. }),
        "{e}"
    );
}
