//! The importers on the byte fixtures in `crates/topo/fixtures/`.

use super::*;

const ZOO: &[u8] = include_bytes!("../../fixtures/zoo-small.gml");
const NODE_LINK: &[u8] = include_bytes!("../../fixtures/nodelink-small.json");
const LINKS: &[u8] = include_bytes!("../../fixtures/nodelink-links.json");

fn opts() -> Options {
    Options::default()
}

/// The `[[link]]` tables as (a, b, delay_ms, bandwidth_mbps) text.
fn links(toml: &str) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for block in toml.split("[[link]]\n").skip(1) {
        let get = |k: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{k} = ")))
                .map(|v| {
                    v.split("  #")
                        .next()
                        .unwrap_or(v)
                        .trim_matches('"')
                        .to_string()
                })
                .unwrap()
        };
        out.push((get("a"), get("b"), get("delay_ms"), get("bandwidth_mbps")));
    }
    out
}

fn link<'a>(
    l: &'a [(String, String, String, String)],
    a: &str,
    b: &str,
) -> &'a (String, String, String, String) {
    l.iter()
        .find(|x| (x.0 == a && x.1 == b) || (x.0 == b && x.1 == a))
        .unwrap_or_else(|| panic!("no link {a}-{b} in {l:?}"))
}

#[test]
fn detects_by_extension_then_content() {
    assert_eq!(detect(b"{}", "x.GML"), Format::Gml);
    assert_eq!(detect(b"graph [", "x.json"), Format::NodeLinkJson);
    assert_eq!(detect(b"  \n{\"nodes\": []}", "x"), Format::NodeLinkJson);
    assert_eq!(detect(b"graph [ ]", "-"), Format::Gml);
}

#[test]
fn zoo_gml_cleans_names_delays_and_speeds() {
    let out = import(ZOO, "zoo-small.gml", &opts()).unwrap();
    let s = &out.summary;
    assert_eq!((s.input_nodes, s.input_edges), (6, 7));
    assert_eq!((s.nodes, s.links), (5, 5));
    assert_eq!((s.self_loops_dropped, s.duplicates_merged), (1, 1));
    assert_eq!((s.components, s.dropped_nodes), (2, 1));
    assert_eq!(
        (s.diameter_hops, s.diameter_exact, s.infinity),
        (3, true, 16)
    );
    assert_eq!(s.name.as_deref(), Some("Fixture"));
    assert_eq!(s.duration_ms, 20_000 + 5 * 20 + 3 * 100);
    assert_eq!(s.default_delay_links, 1);
    assert_eq!(s.default_bandwidth_links, 2);
    let kinds: Vec<&str> = out.warnings.iter().map(Warning::kind).collect();
    assert_eq!(
        kinds,
        [
            "unreadable_speed",
            "self_loops_dropped",
            "parallel_merged",
            "components_dropped",
            "renamed",
            "default_delay"
        ]
    );
    assert_eq!(
        out.warnings[3].to_string(),
        "the graph has 2 connected components: kept the largest (5 nodes), dropped 1 node(s) and 0 link(s) in the other 1"
    );
    assert!(
        out.warnings[5].to_string().contains("(Hobart)"),
        "{}",
        out.warnings[5]
    );
    let l = links(&out.toml);
    // Sydney-Melbourne: 713 km great circle; two 10G links merged.
    assert_eq!(link(&l, "Sydney", "Melbourne").2, "3.567");
    assert_eq!(link(&l, "Sydney", "Melbourne").3, "20000");
    assert_eq!(link(&l, "Sydney", "Canberra-ACT").3, "2500");
    assert_eq!(link(&l, "Canberra-ACT", "Melbourne").3, "1000");
    assert_eq!(link(&l, "Sydney", "Brisbane").3, "1000");
    assert_eq!(link(&l, "Melbourne", "Hobart").2, "1");
    assert_eq!(link(&l, "Melbourne", "Hobart").3, "622");
    assert!(
        out.toml
            .contains("name = \"Canberra-ACT\"  # \"Canberra (ACT)\"\n")
    );
    assert!(!out.toml.contains("Perth"));
    assert!(out.toml.ends_with(
        "[[step]]\nat_ms = 20400\naction = \"expect\"\ncheck = \"reachable\"\nfrom = \"*\"\nto = \"*\"\n"
    ));
    // Deterministic.
    assert_eq!(
        import(ZOO, "zoo-small.gml", &opts()).unwrap().toml,
        out.toml
    );
}

#[test]
fn node_link_json_uses_dist_then_coordinates() {
    let out = import(NODE_LINK, "nodelink-small.json", &opts()).unwrap();
    assert_eq!((out.summary.nodes, out.summary.links), (4, 4));
    assert_eq!(out.summary.name.as_deref(), Some("abilene-mini"));
    let l = links(&out.toml);
    assert_eq!(link(&l, "New-York", "Chicago").2, "5.731");
    assert_eq!(link(&l, "New-York", "Washington-DC").2, "1.643");
    // Chicago-Indianapolis has no dist: 263 km great circle.
    assert_eq!(link(&l, "Chicago", "Indianapolis").2, "1.315");
    assert_eq!(link(&l, "Washington-DC", "Indianapolis").3, "10000");
    assert_eq!(link(&l, "Washington-DC", "Indianapolis").2, "4");
    assert!(out.toml.contains("delay_ms = 5.731  # 1146.2 km\n"));
    let kinds: Vec<&str> = out.warnings.iter().map(Warning::kind).collect();
    assert_eq!(kinds, ["renamed"]);
}

#[test]
fn directed_links_and_unnamed_nodes() {
    let opts = Options {
        bandwidth_mbps: 100.0,
        delay_ms: 2.5,
        duration_ms: Some(9000),
        protocol: Some("ls"),
    };
    let out = import(LINKS, "links.json", &opts).unwrap();
    assert!(
        out.toml.contains("[routing]\nprotocol = \"ls\"\n"),
        "{}",
        out.toml
    );
    assert_eq!((out.summary.nodes, out.summary.links), (3, 2));
    let kinds: Vec<&str> = out.warnings.iter().map(Warning::kind).collect();
    assert_eq!(
        kinds,
        ["directed", "parallel_merged", "unnamed", "default_delay"]
    );
    let l = links(&out.toml);
    assert_eq!(link(&l, "n10", "n11").2, "2.5");
    // The two directions of n10-n11 are one link, not two in parallel.
    assert_eq!(link(&l, "n10", "n11").3, "100");
    assert!(out.toml.contains("duration_ms = 9000\n"));
    assert!(out.toml.contains("at_ms = 9000\n"));
    let w = out.warnings[3].to_string();
    assert!(
        w.contains("2 link(s)") && w.contains("(n10, n11, n12)"),
        "{w}"
    );
}

#[test]
fn malformed_inputs_say_file_line_col_and_why() {
    let cases: [(&str, &[u8], &str); 5] = [
        (
            "bad-unclosed.gml",
            include_bytes!("../../fixtures/bad-unclosed.gml"),
            "bad-unclosed.gml:5:3: the list 'node [' opened at 5:3 is never closed: add a ']'",
        ),
        (
            "bad-string.gml",
            include_bytes!("../../fixtures/bad-string.gml"),
            "bad-string.gml:2:21: this string is never closed: add the closing '\"'",
        ),
        (
            "bad-edge.gml",
            include_bytes!("../../fixtures/bad-edge.gml"),
            "bad-edge.gml: 4:19: edge target 7 is not the id of any node",
        ),
        (
            "bad-comma.json",
            include_bytes!("../../fixtures/bad-comma.json"),
            "bad-comma.json:3:1: not valid JSON: trailing comma",
        ),
        (
            "bad-edge.json",
            include_bytes!("../../fixtures/bad-edge.json"),
            "bad-edge.json: edges[1].target: edge target x is not the id of any node",
        ),
    ];
    for (name, bytes, want) in cases {
        let e = import(bytes, name, &opts()).unwrap_err();
        assert_eq!(e.to_string(), want);
    }
}

#[test]
fn graphs_that_are_not_networks_are_refused() {
    let e = import(b"Creator \"x\"", "a.gml", &opts()).unwrap_err();
    assert!(matches!(
        e,
        TopoError::Graph {
            reason: GraphError::NoGraph,
            ..
        }
    ));
    let e = import(b"graph [ node [ id 0 ] ]", "a.gml", &opts()).unwrap_err();
    assert!(matches!(
        e,
        TopoError::Graph {
            reason: GraphError::TooFewNodes { nodes: 1 },
            ..
        }
    ));
    let e = import(b"graph [ node [ id 0 ] node [ id 1 ] ]", "a.gml", &opts()).unwrap_err();
    assert!(matches!(
        e,
        TopoError::Graph {
            reason: GraphError::TooFewNodes { nodes: 1 },
            ..
        }
    ));
    let e = import(b"graph [ node [ id 0 ] node [ id 0 ] ]", "a.gml", &opts()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a.gml: 1:23: node id 0 is used twice: give every node its own id"
    );
    let e = import(b"graph [ node [ label \"x\" ] ]", "a.gml", &opts()).unwrap_err();
    assert_eq!(e.to_string(), "a.gml: 1:9: this node has no 'id'");
    let e = import(b"[1, 2]", "a.json", &opts()).unwrap_err();
    assert!(matches!(
        e,
        TopoError::Graph {
            reason: GraphError::NotNodeLink,
            ..
        }
    ));
    let e = import(br#"{"nodes": [{"id": [1]}]}"#, "a.json", &opts()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a.json: nodes[0].id: 'id' must be a number or a string"
    );
    let bad = Options {
        bandwidth_mbps: -1.0,
        ..Options::default()
    };
    assert!(matches!(
        import(ZOO, "z.gml", &bad),
        Err(TopoError::Param(_))
    ));
}

#[test]
fn long_graphs_raise_the_routing_infinity() {
    let mut gml = String::from("graph [\n");
    for i in 0..40 {
        gml.push_str(&format!("node [ id {i} ]\n"));
    }
    for i in 0..39 {
        gml.push_str(&format!("edge [ source {i} target {} ]\n", i + 1));
    }
    gml.push_str("]\n");
    let out = import(gml.as_bytes(), "line.gml", &opts()).unwrap();
    assert_eq!(out.summary.diameter_hops, 39);
    assert_eq!(out.summary.infinity, 41);
    assert!(out.toml.contains("[routing]\n"));
    assert!(out.toml.contains("\ninfinity = 41\n"));
}

#[test]
fn summary_json_has_the_counts_and_warnings() {
    let out = import(ZOO, "zoo-small.gml", &opts()).unwrap();
    let v = out.summary_json(Some("out.toml"));
    assert_eq!(v["nodes"], 5);
    assert_eq!(v["kept_nodes"], 5);
    assert_eq!(v["links"], 5);
    assert_eq!(v["self_loops_dropped"], 1);
    assert_eq!(v["duplicates_merged"], 1);
    assert_eq!(v["components"], 2);
    assert_eq!(v["out"], "out.toml");
    assert_eq!(v["warnings"][1]["kind"], "self_loops_dropped");
    assert_eq!(v["warnings"].as_array().unwrap().len(), 6);
}
