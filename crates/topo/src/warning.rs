//! What the builder changed or assumed, as typed values (tests and tools match on them; the
//! CLI prints their text). Each says what was done and how many times.

use std::fmt;

/// Something an import or generation changed or assumed.
#[derive(Debug, Clone, PartialEq)]
pub enum Warning {
    /// The input says it is directed; every edge became a two-way link (the directions of
    /// a pair merged into one, with the larger bandwidth).
    Directed,
    /// Edges from a node to itself were dropped.
    SelfLoopsDropped {
        /// How many.
        count: usize,
    },
    /// Parallel edges (or both directions of a directed pair) were merged into one link
    /// each: bandwidths add up, the shortest length wins.
    ParallelMerged {
        /// Edges folded into another.
        edges: usize,
        /// Node pairs that had them.
        pairs: usize,
        /// In a directed graph: the larger bandwidth is kept instead of the sum.
        directed: bool,
    },
    /// The graph was not connected; only its largest component was kept.
    ComponentsDropped {
        /// Components in the input.
        components: usize,
        /// Nodes kept.
        kept_nodes: usize,
        /// Nodes dropped.
        dropped_nodes: usize,
        /// Links dropped with them.
        dropped_links: usize,
    },
    /// A generated graph was not connected; links were added to join its components.
    ComponentsJoined {
        /// Components before joining.
        components: usize,
        /// Links added (one per component but the largest).
        links_added: usize,
    },
    /// Links whose length could not be known (no length, an end without coordinates) got
    /// the default delay.
    DefaultDelay {
        /// How many links.
        links: usize,
        /// The delay they got.
        delay_ms: f64,
        /// Nodes at their ends without coordinates (the first few).
        nodes: Vec<String>,
        /// How many more such nodes there are.
        more: usize,
    },
    /// Names were changed to be valid and unique.
    Renamed {
        /// How many.
        count: usize,
        /// The first few, as (from, to).
        examples: Vec<(String, String)>,
    },
    /// Nodes without a name were named `n<id>`.
    Unnamed {
        /// How many.
        count: usize,
    },
    /// Link speeds that could not be read; those links got the default bandwidth.
    UnreadableSpeed {
        /// How many links.
        links: usize,
        /// The first few speeds as written.
        examples: Vec<String>,
    },
    /// Bandwidths above 1 Tbit/s were lowered to it (the emulator's largest).
    BandwidthClamped {
        /// How many links.
        links: usize,
    },
    /// Lengths that were negative or not numbers were ignored (coordinates or the default
    /// delay used instead).
    BadLength {
        /// How many links.
        links: usize,
    },
    /// Coordinates out of range (|latitude| > 90, |longitude| > 180) were ignored.
    BadCoordinates {
        /// How many nodes.
        nodes: usize,
    },
    /// The hop diameter is beyond the largest routing infinity: distance-vector routing
    /// cannot reach the farthest pairs, and the expect step will fail.
    DiameterBeyondInfinity {
        /// The hop diameter (or an upper bound of it).
        diameter: u32,
        /// The infinity written.
        infinity: u16,
    },
}

impl Warning {
    /// A short stable name (the `kind` of the JSON summary).
    pub fn kind(&self) -> &'static str {
        match self {
            Warning::Directed => "directed",
            Warning::SelfLoopsDropped { .. } => "self_loops_dropped",
            Warning::ParallelMerged { .. } => "parallel_merged",
            Warning::ComponentsDropped { .. } => "components_dropped",
            Warning::ComponentsJoined { .. } => "components_joined",
            Warning::DefaultDelay { .. } => "default_delay",
            Warning::Renamed { .. } => "renamed",
            Warning::Unnamed { .. } => "unnamed",
            Warning::UnreadableSpeed { .. } => "unreadable_speed",
            Warning::BandwidthClamped { .. } => "bandwidth_clamped",
            Warning::BadLength { .. } => "bad_length",
            Warning::BadCoordinates { .. } => "bad_coordinates",
            Warning::DiameterBeyondInfinity { .. } => "diameter_beyond_infinity",
        }
    }
}

fn list(items: &[String], more: usize) -> String {
    let mut s = items.join(", ");
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    s
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Directed => write!(
                f,
                "the graph is directed: every edge became a two-way link (the two directions of a pair merged, the faster one's bandwidth kept)"
            ),
            Warning::SelfLoopsDropped { count } => {
                write!(
                    f,
                    "dropped {count} self-loop(s) (edges from a node to itself)"
                )
            }
            Warning::ParallelMerged {
                edges,
                pairs,
                directed,
            } => write!(
                f,
                "merged {edges} parallel edge(s) between {pairs} node pair(s) into one link each ({}, shortest length kept)",
                if *directed {
                    "the largest bandwidth"
                } else {
                    "bandwidths added"
                }
            ),
            Warning::ComponentsDropped {
                components,
                kept_nodes,
                dropped_nodes,
                dropped_links,
            } => write!(
                f,
                "the graph has {components} connected components: kept the largest ({kept_nodes} nodes), dropped {dropped_nodes} node(s) and {dropped_links} link(s) in the other {}",
                components - 1
            ),
            Warning::ComponentsJoined {
                components,
                links_added,
            } => write!(
                f,
                "the graph had {components} connected components: added {links_added} link(s), each from a smaller component to the nearest node of those already joined"
            ),
            Warning::DefaultDelay {
                links,
                delay_ms,
                nodes,
                more,
            } => write!(
                f,
                "{links} link(s) have no length and an end without coordinates ({}): they got the default delay of {delay_ms} ms",
                list(nodes, *more)
            ),
            Warning::Renamed { count, examples } => {
                let ex: Vec<String> = examples
                    .iter()
                    .map(|(a, b)| format!("{a:?} -> {b}"))
                    .collect();
                write!(
                    f,
                    "renamed {count} node(s) to valid, unique names (1-32 of A-Z a-z 0-9 - _ .): {}",
                    list(&ex, count.saturating_sub(ex.len()))
                )
            }
            Warning::Unnamed { count } => {
                write!(
                    f,
                    "{count} node(s) have no name: named n<id> after their id"
                )
            }
            Warning::UnreadableSpeed { links, examples } => write!(
                f,
                "could not read the speed of {links} link(s) ({}): they got the default bandwidth",
                list(examples, links.saturating_sub(examples.len()))
            ),
            Warning::BandwidthClamped { links } => write!(
                f,
                "{links} link(s) are faster than 1 Tbit/s: lowered to 1000000 Mbit/s, the emulator's largest"
            ),
            Warning::BadLength { links } => write!(
                f,
                "ignored the length of {links} link(s) (negative or not a number): delay from coordinates or the default instead"
            ),
            Warning::BadCoordinates { nodes } => write!(
                f,
                "ignored the coordinates of {nodes} node(s) (latitude beyond +-90 or longitude beyond +-180)"
            ),
            Warning::DiameterBeyondInfinity { diameter, infinity } => write!(
                f,
                "the graph is {diameter} hops across, more than distance-vector routing reaches (infinity {infinity}, the most the emulator takes): the farthest pairs stay unreachable and the expect step will fail"
            ),
        }
    }
}
