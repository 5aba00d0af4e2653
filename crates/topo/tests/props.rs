//! Properties: the GML parser and both importers never panic, whatever the bytes; whatever
//! they accept comes out as a valid, connected network; every generator makes a connected
//! graph with the node count its kind states.

use std::collections::{HashMap, HashSet};

use anode_topo::{Kind, Options, Output, generate, gml, import};
use proptest::prelude::*;

/// The names and links of an output, read back from its text, checked against the
/// emulator's rules (valid unique names, known ends, no self or duplicate links) and for
/// connectivity.
fn check_network(o: &Output) {
    let mut names = Vec::new();
    let mut ends = Vec::new();
    let value = |l: &str, k: &str| {
        l.strip_prefix(k).map(|v| {
            v.split("  #")
                .next()
                .unwrap_or(v)
                .trim_matches('"')
                .to_string()
        })
    };
    for line in o.toml.lines() {
        if let Some(v) = value(line, "name = ") {
            names.push(v);
        } else if let Some(v) = value(line, "a = ") {
            ends.push((v, String::new()));
        } else if let Some(v) = value(line, "b = ") {
            ends.last_mut().unwrap().1 = v;
        }
    }
    assert_eq!(names.len(), o.summary.nodes);
    assert_eq!(ends.len(), o.summary.links);
    assert!(names.len() >= 2);
    let index: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    assert_eq!(index.len(), names.len(), "names are unique");
    for n in &names {
        assert!(
            !n.is_empty()
                && n.len() <= 32
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "{n:?}"
        );
    }
    let mut adj = vec![Vec::new(); names.len()];
    let mut pairs = HashSet::new();
    for (a, b) in &ends {
        let (x, y) = (index[a.as_str()], index[b.as_str()]);
        assert_ne!(x, y, "self link {a}");
        assert!(pairs.insert((x.min(y), x.max(y))), "duplicate link {a}-{b}");
        adj[x].push(y);
        adj[y].push(x);
    }
    let mut seen = vec![false; names.len()];
    let mut stack = vec![0];
    seen[0] = true;
    while let Some(v) = stack.pop() {
        for &w in &adj[v] {
            if !seen[w] {
                seen[w] = true;
                stack.push(w);
            }
        }
    }
    assert!(seen.iter().all(|&s| s), "connected");
    assert!(o.toml.ends_with("from = \"*\"\nto = \"*\"\n"));
}

/// GML-shaped text: the tokens Topology Zoo files use, in any order.
fn gml_soup() -> impl Strategy<Value = String> {
    let tok = prop::sample::select(vec![
        "graph",
        "node",
        "edge",
        "[",
        "]",
        "id",
        "label",
        "source",
        "target",
        "0",
        "1",
        "2",
        "3",
        "-1.5e3",
        "1e400",
        "\"a b\"",
        "\"x",
        "\"&#233;\"",
        "\"\\\"\"",
        "#c\n",
        "\n",
        "Latitude",
        "Longitude",
        "LinkSpeedRaw",
        "LinkSpeed",
        "LinkSpeedUnits",
        "\"G\"",
        "\"10\"",
        "NAN",
        "-INF",
        "directed",
        "@",
        "99999999999999999999",
        ".",
        "-",
    ]);
    prop::collection::vec(tok, 0..80).prop_map(|v| v.join(" "))
}

/// node-link JSON with ids, names, positions and edges drawn from small sets.
fn node_link() -> impl Strategy<Value = String> {
    let id = prop_oneof![
        (0u8..6).prop_map(|i| i.to_string()),
        (0u8..6).prop_map(|i| format!("\"{i}\"")),
        Just("null".to_string()),
    ];
    let node = (
        id.clone(),
        any::<bool>(),
        -200.0f64..200.0,
        -100.0f64..100.0,
    )
        .prop_map(|(id, named, lon, lat)| {
            if named {
                format!(r#"{{"id": {id}, "name": "N {id}", "pos": [{lon}, {lat}]}}"#)
            } else {
                format!(r#"{{"id": {id}}}"#)
            }
        });
    let edge = (id.clone(), id, prop::option::of(-10.0f64..5000.0)).prop_map(|(s, t, d)| {
        let dist = d.map(|d| format!(r#", "dist": {d}"#)).unwrap_or_default();
        format!(r#"{{"source": {s}, "target": {t}{dist}}}"#)
    });
    (
        prop::collection::vec(node, 0..8),
        prop::collection::vec(edge, 0..14),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(n, e, links, directed)| {
            format!(
                r#"{{"directed": {directed}, "graph": {{}}, "nodes": [{}], "{}": [{}]}}"#,
                n.join(","),
                if links { "links" } else { "edges" },
                e.join(",")
            )
        })
}

proptest! {
    #[test]
    fn gml_parser_and_importer_never_panic_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = gml::parse(&gml::decode(&bytes));
        if let Ok(o) = import(&bytes, "x.gml", &Options::default()) {
            check_network(&o);
        }
        if let Ok(o) = import(&bytes, "x.json", &Options::default()) {
            check_network(&o);
        }
    }

    #[test]
    fn gml_shaped_text_imports_or_is_refused_with_a_position(src in gml_soup()) {
        match import(src.as_bytes(), "x.gml", &Options::default()) {
            Ok(o) => check_network(&o),
            Err(e) => {
                let m = e.to_string();
                prop_assert!(m.starts_with("x.gml"), "{}", m);
            }
        }
    }

    #[test]
    fn node_link_json_imports_or_is_refused(src in node_link()) {
        match import(src.as_bytes(), "x.json", &Options::default()) {
            Ok(o) => check_network(&o),
            Err(e) => prop_assert!(e.to_string().starts_with("x.json"), "{}", e),
        }
    }

    #[test]
    fn generated_graphs_are_connected_with_the_stated_node_count(
        which in 0u8..5,
        a in 1u64..40,
        b in 1u64..12,
        alpha in 0.005f64..1.0,
        beta in 0.01f64..1.0,
        seed in any::<u64>(),
    ) {
        let kind = match which {
            0 => Kind::Ring { nodes: a + 2 },
            1 => Kind::Grid { rows: a, cols: b + 1 },
            2 => Kind::Waxman { nodes: a * 5 + 2, alpha, beta, region_km: 4000.0 },
            3 => Kind::Ba { nodes: a + b + 1, m: b },
            _ => Kind::FatTree { k: 2 * (b % 4 + 1), hosts: a % 2 == 0 },
        };
        let o = generate(&kind, seed, &Options::default()).unwrap();
        prop_assert_eq!(o.summary.nodes as u128, kind.node_count());
        check_network(&o);
        prop_assert_eq!(&generate(&kind, seed, &Options::default()).unwrap().toml, &o.toml);
    }
}

/// 10,000 nodes of each kind take milliseconds in a release build; a debug build gets a
/// generous bound, which still catches anything quadratic.
#[test]
fn ten_thousand_node_graphs_are_quick() {
    let limit = if cfg!(debug_assertions) { 20.0 } else { 1.0 };
    for kind in [
        Kind::Ring { nodes: 10_000 },
        Kind::Grid {
            rows: 100,
            cols: 100,
        },
        Kind::Ba {
            nodes: 10_000,
            m: 2,
        },
        Kind::Waxman {
            nodes: 10_000,
            alpha: 0.02,
            beta: 0.1,
            region_km: 4000.0,
        },
        Kind::FatTree { k: 28, hosts: true },
    ] {
        let t = std::time::Instant::now();
        let o = generate(&kind, 1, &Options::default()).unwrap();
        let took = t.elapsed().as_secs_f64();
        println!(
            "{}: {} nodes, {} links in {:.1} ms",
            kind.command(1),
            o.summary.nodes,
            o.summary.links,
            took * 1e3
        );
        assert!(took < limit, "{kind:?} took {took} s");
        check_network(&o);
    }
}
