//! `anode topo import` and `anode topo gen` as a user runs them: the files they write run in
//! the emulator and pass their all-pairs reachability check; malformed input is refused
//! with file:line:col. And every Topology Zoo graph the topohub package ships imports into
//! a topology the emulator parses (topohub is installed by scripts/setup.sh).

mod node_util;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use node_util::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../topo/fixtures")
        .join(name)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `anode ARGS` to completion, its output read as it comes (an emulation report is larger
/// than a pipe holds).
fn run(args: &[&str]) -> std::process::Output {
    anode().command(args).output().unwrap()
}

/// `anode emulate FILE --json`: exits 0 and every check passed.
fn emulates_and_passes(file: &Path) -> serde_json::Value {
    let out = run(&["emulate", &file.to_string_lossy(), "--json"]);
    assert!(
        out.status.success(),
        "{}\n{}\n{}",
        std::fs::read_to_string(file).unwrap_or_default(),
        text(&out.stdout),
        text(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["checks"]["failed"], 0, "{v}");
    assert!(v["checks"]["passed"].as_u64().unwrap() >= 1, "{v}");
    v
}

#[test]
fn an_imported_zoo_gml_runs_and_every_node_reaches_every_other() {
    let dir = TestDir::new("topo-gml");
    let toml = dir.path("zoo.toml");
    let gml = fixture("zoo-small.gml");
    let out = run(&[
        "topo",
        "import",
        &gml.to_string_lossy(),
        "-o",
        &toml.to_string_lossy(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["nodes"], 5);
    assert_eq!(s["links"], 5);
    assert_eq!(s["self_loops_dropped"], 1);
    assert_eq!(s["duplicates_merged"], 1);
    assert_eq!(s["components"], 2);
    assert_eq!(s["kept_nodes"], 5);
    assert_eq!(s["out"], toml.to_string_lossy().as_ref());
    assert_eq!(s["warnings"].as_array().unwrap().len(), 6, "{s}");
    let report = emulates_and_passes(&toml);
    assert_eq!(report["checks"]["passed"], 1);
}

#[test]
fn an_imported_node_link_json_runs_and_the_text_output_says_what_was_done() {
    let dir = TestDir::new("topo-json");
    let toml = dir.path("mini.toml");
    let json = fixture("nodelink-small.json");
    let out = run(&[
        "topo",
        "import",
        &json.to_string_lossy(),
        "-o",
        &toml.to_string_lossy(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("4 nodes, 4 links, 2 hops across (routing infinity 16)"),
        "{stdout}"
    );
    assert!(stdout.contains("next: anode emulate"), "{stdout}");
    assert!(
        text(&out.stderr).contains("warning: renamed 2 node(s)"),
        "{}",
        text(&out.stderr)
    );
    emulates_and_passes(&toml);
    // Without -o the topology goes to standard output, byte for byte the file.
    let out = run(&["topo", "import", &json.to_string_lossy()]);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), std::fs::read_to_string(&toml).unwrap());
}

#[test]
fn generated_graphs_run_and_every_node_reaches_every_other() {
    let dir = TestDir::new("topo-gen");
    let kinds: [&[&str]; 5] = [
        &["ring", "--nodes", "6"],
        &["grid", "--rows", "3", "--cols", "4"],
        &["fat-tree", "--k", "4"],
        &["ba", "--nodes", "20", "--m", "2", "--seed", "5"],
        &[
            "waxman",
            "--nodes",
            "15",
            "--seed",
            "2",
            "--duration-ms",
            "15000",
        ],
    ];
    for (i, kind) in kinds.iter().enumerate() {
        let toml = dir.path(&format!("gen{i}.toml"));
        let mut args = vec!["topo", "gen"];
        args.extend_from_slice(kind);
        let t = toml.to_string_lossy().into_owned();
        args.extend(["-o", &t]);
        let out = run(&args);
        assert!(out.status.success(), "{kind:?}: {}", text(&out.stderr));
        emulates_and_passes(&toml);
        // Same seed, same file.
        let again = run(&[&["topo", "gen"], *kind].concat());
        assert_eq!(text(&again.stdout), std::fs::read_to_string(&toml).unwrap());
    }
}

#[test]
fn malformed_input_is_refused_with_file_line_col() {
    let bad = fixture("bad-string.gml");
    let out = run(&["topo", "import", &bad.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("bad-string.gml:2:21: this string is never closed"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let out = run(&["topo", "gen", "fat-tree", "--k", "3"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("k must be even"));
    let out = run(&[
        "topo",
        "import",
        &fixture("zoo-small.gml").to_string_lossy(),
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--json without -o is a usage error"
    );
}

/// The topohub package's data directory, from the Python that has it.
fn topohub_data() -> PathBuf {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import topohub, os; print(os.path.dirname(topohub.__file__))",
        ])
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => panic!(
            "the topohub Python package is missing ({}): run scripts/setup.sh, which installs topohub==1.5.1",
            text(&o.stderr).trim().lines().last().unwrap_or("")
        ),
        Err(e) => panic!("cannot run python3 ({e}): run scripts/setup.sh"),
    };
    PathBuf::from(text(&out.stdout).trim()).join("data")
}

#[test]
fn every_topohub_topology_zoo_graph_imports_and_parses() {
    let dir = topohub_data().join("topozoo");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 200,
        "{} has {} graphs; topohub 1.5.1 ships 203",
        dir.display(),
        files.len()
    );
    let mut largest = (0, String::new(), Duration::ZERO);
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(f).unwrap();
        let t0 = Instant::now();
        let out = anode_topo::import(&bytes, &name, &anode_topo::Options::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let took = t0.elapsed();
        let topo = anode_emu::Topology::parse(&out.toml, &name)
            .unwrap_or_else(|e| panic!("{name}: the imported topology does not parse: {e}"));
        assert_eq!(topo.nodes.len(), out.summary.nodes, "{name}");
        assert_eq!(topo.links.len(), out.summary.links, "{name}");
        assert_eq!(topo.steps.len(), 1, "{name}");
        assert_eq!(topo.routing.infinity, out.summary.infinity, "{name}");
        if out.summary.nodes > largest.0 {
            largest = (out.summary.nodes, name, took);
        }
    }
    println!(
        "imported {} Topology Zoo graphs; the largest, {} ({} nodes), in {:?}",
        files.len(),
        largest.1,
        largest.0,
        largest.2
    );
}

/// Every Topology Zoo and SNDlib graph, imported with link-state routing, runs in the
/// emulator and every node reaches every other by the end (8 s of virtual time each).
#[test]
fn every_topohub_zoo_and_sndlib_graph_converges_in_the_emulator() {
    let mut files: Vec<PathBuf> = Vec::new();
    for sub in ["topozoo", "sndlib"] {
        let dir = topohub_data().join(sub);
        files.extend(
            std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "json")),
        );
    }
    files.sort();
    assert!(files.len() >= 229, "{} graphs", files.len());
    let opts = anode_topo::Options {
        duration_ms: Some(8000),
        protocol: Some("ls"),
        ..anode_topo::Options::default()
    };
    let t0 = Instant::now();
    let mut slowest = (Duration::ZERO, String::new(), 0);
    let mut latest_convergence = (0, String::new());
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let out = anode_topo::import(&std::fs::read(f).unwrap(), &name, &opts)
            .unwrap_or_else(|e| panic!("{e}"));
        let topo = anode_emu::Topology::parse(&out.toml, &name).unwrap();
        let t = Instant::now();
        let r = anode_emu::run(topo).unwrap();
        let took = t.elapsed();
        assert!(
            r.passed(),
            "{name}: not every node reaches every other after 8 s"
        );
        let conv = r.converged_at_us.unwrap_or(u64::MAX);
        if conv > latest_convergence.0 {
            latest_convergence = (conv, name.clone());
        }
        if took > slowest.0 {
            slowest = (took, name, out.summary.nodes);
        }
    }
    println!(
        "emulated {} Topology Zoo and SNDlib graphs in {:?}; slowest {} ({} nodes) {:?}; latest convergence {} at {} us",
        files.len(),
        t0.elapsed(),
        slowest.1,
        slowest.2,
        slowest.0,
        latest_convergence.1,
        latest_convergence.0
    );
}

/// Output into a pipe that closes early (`| head -1`) ends the command quietly, as other
/// Unix tools do, not with a panic about a failed write.
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let mut child = anode()
        .command(&["topo", "gen", "ring", "--nodes", "3000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}
