//! The exports' structure: the containerlab YAML read back (with a reader of the block-YAML
//! subset the export writes), every node and link present with its netem values, the
//! configs accepted by the node's loader; the bare-hosts layout and README.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::plan::tests::{FIXTURE, ring, topo};

/// A scalar as the export writes it: a quoted string or a number.
fn scalar(s: &str) -> Value {
    let s = s.trim();
    if s.starts_with('"') {
        return Value::String(crate::yaml::unquote(s).unwrap_or_else(|| panic!("bad scalar {s}")));
    }
    if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        // Flow sequences hold quoted strings without ", " inside them.
        return Value::Array(inner.split(", ").map(scalar).collect());
    }
    serde_json::from_str::<Value>(s).unwrap_or_else(|_| panic!("not a number or quoted: {s}"))
}

/// Reads the block YAML the export writes (maps, `- ` lists, scalars) into JSON.
fn read_yaml(text: &str) -> Value {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| (l.len() - l.trim_start().len(), l.trim_start()))
        .collect();
    let mut at = 0;
    let v = block(&lines, &mut at, 0);
    assert_eq!(at, lines.len(), "unread lines from {:?}", lines.get(at));
    v
}

fn block(lines: &[(usize, &str)], at: &mut usize, indent: usize) -> Value {
    let is_list = lines.get(*at).is_some_and(|(_, t)| t.starts_with("- "));
    if is_list {
        let mut items = Vec::new();
        while let Some(&(ind, t)) = lines.get(*at) {
            if ind != indent || !t.starts_with("- ") {
                break;
            }
            let rest = &t[2..];
            if rest.contains(": ") && !rest.starts_with('"') {
                // A map item: its first key on the dash line, the others indented by 2.
                let mut sub: Vec<(usize, &str)> = vec![(indent + 2, rest)];
                let mut j = *at + 1;
                while let Some(&(i2, t2)) = lines.get(j) {
                    if i2 <= indent {
                        break;
                    }
                    sub.push((i2, t2));
                    j += 1;
                }
                let mut k = 0;
                items.push(block(&sub, &mut k, indent + 2));
                *at = j;
            } else {
                items.push(scalar(rest));
                *at += 1;
            }
        }
        return Value::Array(items);
    }
    let mut map = serde_json::Map::new();
    while let Some(&(ind, t)) = lines.get(*at) {
        if ind != indent {
            assert!(ind < indent, "bad indent at {t}");
            break;
        }
        let (key, rest) = t.split_once(':').unwrap_or_else(|| panic!("no key: {t}"));
        let key = if key.starts_with('"') {
            crate::yaml::unquote(key).unwrap()
        } else {
            key.to_string()
        };
        *at += 1;
        let value = if rest.trim().is_empty() {
            let next = lines.get(*at).map_or(0, |(i, _)| *i);
            assert!(next > indent, "{key}: no nested value");
            block(lines, at, next)
        } else {
            scalar(rest)
        };
        assert!(map.insert(key.clone(), value).is_none(), "{key} twice");
    }
    Value::Object(map)
}

fn files_map(files: &[ExportFile]) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|f| (f.path.display().to_string(), f.text.clone()))
        .collect()
}

#[test]
fn containerlab_structure() {
    let t = topo(FIXTURE);
    let files = files_map(&containerlab(&t, "fx", "anode:latest").unwrap());
    let y = read_yaml(&files["fx.clab.yml"]);
    assert_eq!(y["name"], "fx");
    let nodes = y["topology"]["nodes"].as_object().unwrap();
    assert_eq!(nodes.len(), 3);
    for (i, n) in t.nodes.iter().enumerate() {
        let node = &nodes[&n.name];
        assert_eq!(node["kind"], "linux");
        assert_eq!(node["image"], "anode:latest");
        assert_eq!(
            node["binds"],
            json!([format!("configs/{}.toml:/etc/anode/node.toml:ro", n.name)])
        );
        let cmd = node["cmd"].as_str().unwrap();
        assert!(cmd.contains("anode --log info node --config /etc/anode/node.toml"));
        assert!(cmd.contains(&format!("inet 198.18.0.{}/32", i + 1)));
        let exec: Vec<&str> = node["exec"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            exec.last().copied(),
            Some(format!("ip addr add 198.18.0.{}/32 dev lo", i + 1).as_str())
        );
        let config = &files[&format!("configs/{}.toml", n.name)];
        let f = anode_node::config::parse(Path::new("/etc/anode/node.toml"), config)
            .unwrap_or_else(|e| panic!("{e}\n{config}"));
        assert_eq!(
            f.node.address.to_string(),
            format!("198.18.0.{}:3322", i + 1)
        );
        assert_eq!(
            f.links.len(),
            exec.iter().filter(|c| c.starts_with("ip route")).count()
        );
    }
    let b_exec = nodes["b"]["exec"].to_string();
    assert!(b_exec.contains(
        "tc qdisc replace dev eth1 root netem delay 5000us rate 100000000bit limit 1021"
    ));
    assert!(
        b_exec.contains(
            "tc qdisc replace dev eth2 root netem delay 500us loss random 1% limit 100000"
        )
    );
    assert!(b_exec.contains("ip link set eth2 mtu 1228 up"));
    assert!(b_exec.contains("ip route replace 198.18.0.3/32 via 198.18.128.6 dev eth2"));
    let links = y["topology"]["links"].as_array().unwrap();
    assert_eq!(links.len(), 2);
    assert_eq!(links[0]["endpoints"], json!(["a:eth1", "b:eth1"]));
    assert_eq!(
        links[1]["endpoints"],
        json!(["b:eth2", "long-node-name:eth1"])
    );
    assert_eq!(
        links[1]["vars"],
        json!({"delay_ms": 0.5, "bandwidth_mbps": 0, "loss": 0.01, "mtu": 1200,
               "queue_bytes": 65536, "cost": 3})
    );
    let docker = &files["Dockerfile"];
    assert_eq!(docker.matches("\nFROM ").count(), 2, "two stages");
    assert!(docker.contains("cargo build --release --locked -p anode"));
    assert!(docker.contains("iproute2"));
    assert!(docker.contains("COPY --from=build /src/target/release/anode /usr/local/bin/anode"));
    assert!(
        files["Dockerfile.dockerignore"]
            .lines()
            .any(|l| l == "target")
    );
    assert_eq!(files.len(), 3 + 3);
}

#[test]
fn containerlab_of_a_ring_has_every_node_and_link() {
    let t = topo(&ring(12));
    let files = files_map(&containerlab(&t, "ring12", "img:1").unwrap());
    let y = read_yaml(&files["ring12.clab.yml"]);
    assert_eq!(y["topology"]["nodes"].as_object().unwrap().len(), 12);
    let links = y["topology"]["links"].as_array().unwrap();
    assert_eq!(links.len(), 12);
    for (j, l) in links.iter().enumerate() {
        let a = format!("ring-node-number-{j}");
        let b = format!("ring-node-number-{}", (j + 1) % 12);
        let ends: Vec<&str> = l["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert!(ends[0].starts_with(&format!("{a}:eth")), "{ends:?}");
        assert!(ends[1].starts_with(&format!("{b}:eth")), "{ends:?}");
        assert_eq!(l["vars"]["delay_ms"], 2);
    }
    for n in y["topology"]["nodes"].as_object().unwrap().values() {
        assert_eq!(n["image"], "img:1");
        let netem = n["exec"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c.as_str().unwrap().contains("netem delay 2000us"))
            .count();
        assert_eq!(netem, 2);
    }
    assert!(containerlab(&t, "bad name", "x").is_err());
}

#[test]
fn hosts_round_robin() {
    let t = topo(&ring(5));
    let hs = parse_hosts(&["10.0.0.1".into(), "10.0.0.2".into(), "[10.0.0.3]".into()]).unwrap();
    let files = files_map(&hosts(&t, &hs, false).unwrap());
    assert_eq!(files.len(), 6);
    let readme = &files["README.txt"];
    let placed = [
        ("10.0.0.1", 0, 3322),
        ("10.0.0.2", 1, 3322),
        ("10.0.0.3", 2, 3322),
        ("10.0.0.1", 3, 3323),
        ("10.0.0.2", 4, 3323),
    ];
    for (h, i, port) in placed {
        let rel = format!("hosts/{h}/ring-node-number-{i}.toml");
        assert!(
            readme.contains(&format!("anode node --config {rel} &")),
            "{readme}"
        );
        let f = anode_node::config::parse(Path::new(&rel), &files[&rel]).unwrap();
        assert_eq!(f.node.address.to_string(), format!("{h}:{port}"));
        assert!(f.impairments.is_empty());
        let peers: Vec<String> = f.links.iter().map(|l| l.peer.to_string()).collect();
        let (prev, next) = ((i + 4) % 5, (i + 1) % 5);
        for p in [prev, next] {
            let (ph, _, pp) = placed[p];
            assert!(peers.contains(&format!("{ph}:{pp}")), "{peers:?}");
        }
        assert!(
            f.links
                .iter()
                .all(|l| l.name.starts_with("to-ring-node-number-"))
        );
    }
    let with = files_map(&hosts(&t, &hs, true).unwrap());
    let f = anode_node::config::parse(
        Path::new("x.toml"),
        &with["hosts/10.0.0.1/ring-node-number-0.toml"],
    )
    .unwrap();
    assert_eq!(f.impairments.len(), 2);
    assert_eq!(f.impairments[0].delay, std::time::Duration::from_millis(2));
    let v6 = parse_hosts(&["2001:db8::1".into()]).unwrap();
    let files = files_map(&hosts(&t, &v6, false).unwrap());
    assert!(files.contains_key("hosts/2001_db8__1/ring-node-number-4.toml"));
    let mixed = parse_hosts(&["10.0.0.1".into(), "2001:db8::1".into()]).unwrap();
    assert_eq!(hosts(&t, &mixed, false).unwrap_err(), PlanError::MixedHosts);
    assert_eq!(hosts(&t, &[], false).unwrap_err(), PlanError::NoHosts);
    assert_eq!(
        parse_hosts(&["example.com".into()]).unwrap_err(),
        PlanError::Host("example.com".into())
    );
}

#[test]
fn written_files() {
    let dir = std::env::temp_dir().join(format!("anode-lab-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = containerlab(&topo(FIXTURE), "fx", "anode:latest").unwrap();
    write(&dir, &files).unwrap();
    for f in &files {
        assert_eq!(std::fs::read_to_string(dir.join(&f.path)).unwrap(), f.text);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
