//! `anode topo import FILE` and `anode topo gen KIND`: topology files from real graphs
//! (Topology Zoo GML, topohub/networkx node-link JSON) and synthetic ones. The work is in
//! `anode_topo`; this module only reads the input file and writes the output.

use std::io::Write;
use std::path::PathBuf;

use anode_topo::{Kind, Options, Output};

/// `anode topo` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TopoCommand {
    /// Import a graph as a topology file: a Topology Zoo .gml, or a node-link .json (what the
    /// topohub package ships, networkx's node_link_data). Self-loops are dropped, parallel
    /// edges merged, only the largest connected part kept, names made valid; link delays
    /// come from lengths or coordinates at 200,000 km/s (1 ms per 200 km). The file ends with
    /// a check that every node reaches every other.
    #[command(after_help = "Examples:\n  \
        anode topo import Abilene.gml -o abilene.toml && anode emulate abilene.toml\n  \
        anode topo import \"$(python3 -c 'import topohub, os; print(os.path.dirname(topohub.__file__))')/data/topozoo/Abilene.json\" -o abilene.toml\n  \
        anode topo import Geant2012.gml --json -o geant.toml   # a summary for tools\n\n\
        See docs/topologies.md for the warnings and the delay model.")]
    Import {
        /// The graph: .gml or .json (any other name: JSON if it starts with '{').
        file: PathBuf,
        #[command(flatten)]
        out: OutArgs,
    },
    /// Generate a synthetic topology file (deterministic for --seed).
    #[command(subcommand)]
    Gen(GenKind),
}

/// What every import and generation writes, and where.
#[derive(Debug, clap::Args)]
pub struct OutArgs {
    /// Write the topology here (default: standard output).
    #[arg(long, short = 'o', value_name = "OUT.toml")]
    out: Option<PathBuf>,
    /// [network] duration_ms (default: 20 s + 20 ms per node + 100 ms per hop of diameter,
    /// long enough for routing to converge).
    #[arg(long, value_name = "N")]
    duration_ms: Option<u64>,
    /// Bandwidth of links whose speed the graph does not give, in Mbit/s (0: unlimited).
    #[arg(long, value_name = "B", default_value_t = anode_topo::DEFAULT_BANDWIDTH_MBPS)]
    bandwidth_mbps: f64,
    /// Delay of links whose length is unknown (import: no length and no coordinates;
    /// gen: every kind but waxman), in ms.
    #[arg(long, value_name = "MS", default_value_t = anode_topo::DEFAULT_DELAY_MS)]
    delay_ms: f64,
    /// Print a JSON summary (counts, warnings, the output file) instead of text; needs -o.
    #[arg(long, requires = "out")]
    json: bool,
    /// The routing protocol the topology runs: dv (distance vector, the default) or ls
    /// (link state; scales better on large graphs).
    #[arg(long, value_parser = ["dv", "ls"])]
    protocol: Option<String>,
}

/// The generator's seed, shared by every kind.
#[derive(Debug, clap::Args)]
pub struct GenArgs {
    /// Seed of the random draws (waxman, ba); the same seed gives the same file.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    out: OutArgs,
}

/// The synthetic graphs.
#[derive(Debug, clap::Subcommand)]
pub enum GenKind {
    /// A ring of N nodes n0..n(N-1).
    #[command(after_help = "Example: anode topo gen ring --nodes 20 -o ring20.toml")]
    Ring {
        /// How many nodes (at least 3).
        #[arg(long)]
        nodes: u64,
        #[command(flatten)]
        args: GenArgs,
    },
    /// A ROWS x COLS mesh, nodes n<row>_<col>.
    #[command(after_help = "Example: anode topo gen grid --rows 5 --cols 10 -o grid50.toml")]
    Grid {
        /// Rows.
        #[arg(long)]
        rows: u64,
        /// Columns.
        #[arg(long)]
        cols: u64,
        #[command(flatten)]
        args: GenArgs,
    },
    /// Waxman's random geometric graph: nodes uniform in a square, a link between u and v
    /// with probability BETA * exp(-d / (ALPHA * L)), L the square's diagonal (networkx's
    /// waxman_graph); delays from the distance. Smaller components are joined to their
    /// nearest node, so there are always N nodes.
    #[command(
        after_help = "Example: anode topo gen waxman --nodes 200 --alpha 0.1 --beta 0.4 --seed 7 -o wax.toml"
    )]
    Waxman {
        /// How many nodes (at least 2).
        #[arg(long)]
        nodes: u64,
        /// Distance decay (> 0; larger: more long links).
        #[arg(long, default_value_t = 0.1)]
        alpha: f64,
        /// Link probability scale (0 < BETA <= 1; larger: more links).
        #[arg(long, default_value_t = 0.4)]
        beta: f64,
        /// Side of the square the nodes are placed in, in km.
        #[arg(long, default_value_t = 4000.0)]
        region_km: f64,
        #[command(flatten)]
        args: GenArgs,
    },
    /// Barabási–Albert preferential attachment: a clique of M+1 nodes, then each new node
    /// links to M earlier ones chosen in proportion to their degree.
    #[command(after_help = "Example: anode topo gen ba --nodes 1000 --m 2 --seed 3 -o ba1000.toml")]
    Ba {
        /// How many nodes (more than M).
        #[arg(long)]
        nodes: u64,
        /// Links per new node.
        #[arg(long, default_value_t = 2)]
        m: u64,
        #[command(flatten)]
        args: GenArgs,
    },
    /// A k-ary fat tree: (k/2)^2 core switches, k pods of k/2 aggregation and k/2 edge
    /// switches; with --hosts, k/2 hosts under each edge switch (k^3/4 in all).
    #[command(after_help = "Example: anode topo gen fat-tree --k 4 --hosts -o fat4.toml")]
    FatTree {
        /// Ports per switch (even).
        #[arg(long)]
        k: u64,
        /// Add the hosts.
        #[arg(long)]
        hosts: bool,
        #[command(flatten)]
        args: GenArgs,
    },
}

impl GenKind {
    fn split(self) -> (Kind, GenArgs) {
        match self {
            GenKind::Ring { nodes, args } => (Kind::Ring { nodes }, args),
            GenKind::Grid { rows, cols, args } => (Kind::Grid { rows, cols }, args),
            GenKind::Waxman {
                nodes,
                alpha,
                beta,
                region_km,
                args,
            } => (
                Kind::Waxman {
                    nodes,
                    alpha,
                    beta,
                    region_km,
                },
                args,
            ),
            GenKind::Ba { nodes, m, args } => (Kind::Ba { nodes, m }, args),
            GenKind::FatTree { k, hosts, args } => (Kind::FatTree { k, hosts }, args),
        }
    }
}

impl OutArgs {
    fn options(&self) -> Options {
        Options {
            bandwidth_mbps: self.bandwidth_mbps,
            delay_ms: self.delay_ms,
            duration_ms: self.duration_ms,
            protocol: match self.protocol.as_deref() {
                Some("ls") => Some("ls"),
                Some("dv") => Some("dv"),
                _ => None,
            },
        }
    }

    /// The output file, `None` for standard output (no -o, or -o -).
    fn file(&self) -> Option<&PathBuf> {
        self.out.as_ref().filter(|p| p.as_os_str() != "-")
    }
}

/// Runs `anode topo ...`.
pub fn run(c: TopoCommand) -> super::CmdResult {
    match c {
        TopoCommand::Import { file, out } => {
            let bytes = std::fs::read(&file).map_err(|e| {
                format!(
                    "cannot read {}: {e} (give a .gml or node-link .json graph file)",
                    file.display()
                )
            })?;
            let name = file.display().to_string();
            let o = anode_topo::import(&bytes, &name, &out.options()).map_err(|e| e.to_string())?;
            finish(&o, &out)
        }
        TopoCommand::Gen(kind) => {
            let (kind, args) = kind.split();
            let o = anode_topo::generate(&kind, args.seed, &args.out.options())
                .map_err(|e| e.to_string())?;
            finish(&o, &args.out)
        }
    }
}

/// Writes the topology (file or stdout), then the summary: JSON, or a line and the warnings.
fn finish(o: &Output, args: &OutArgs) -> super::CmdResult {
    let file = args.file();
    if args.json && file.is_none() {
        return Err(
            "--json prints the summary on standard output: give -o FILE for the topology".into(),
        );
    }
    match file {
        Some(p) => {
            std::fs::write(p, &o.toml).map_err(|e| format!("cannot write {}: {e}", p.display()))?
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(o.toml.as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    return Err(format!("cannot write the topology: {e}"));
                }
                _ => {}
            }
        }
    }
    let shown = file.map(|p| p.display().to_string());
    if args.json {
        println!("{}", o.summary_json(shown.as_deref()));
        return Ok(());
    }
    for w in &o.warnings {
        eprintln!("warning: {w}");
    }
    let s = &o.summary;
    let line = format!(
        "{} nodes, {} links, {}{} hops across (routing infinity {}), a {} ms run",
        s.nodes,
        s.links,
        if s.diameter_exact { "" } else { "at most " },
        s.diameter_hops,
        s.infinity,
        s.duration_ms
    );
    match shown {
        Some(p) => println!("wrote {p}: {line}\nnext: anode emulate {p}"),
        None => eprintln!("{line}"),
    }
    Ok(())
}
