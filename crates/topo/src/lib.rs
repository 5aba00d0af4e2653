//! # anode topologies from graphs
//!
//! Turns real and synthetic graphs into anode topology files (the TOML that `anode emulate`
//! runs, documented in `anode_emu::topology`):
//!
//! - [`import`]: a Topology Zoo GML file (`graph [ node [ id 0 label "Sydney" Latitude ..
//!   Longitude .. ] edge [ source 0 target 1 LinkSpeedRaw 1e10 ] ]`) or a networkx node-link
//!   JSON graph (what the `topohub` package ships: `{"nodes": [{"id": .., "name": ..,
//!   "pos": [lon, lat]}], "edges": [{"source": .., "target": .., "dist": km}]}`);
//! - [`generate`]: ring, grid, Waxman, Barabási–Albert and k-ary fat-tree graphs,
//!   deterministic for a seed.
//!
//! Both go through the same pipeline (`build.rs`): self-loops are dropped, parallel edges
//! merged into one link, and only the largest connected component is kept, each with a
//! [`Warning`] that says what was done and how often. Node names are made valid for the
//! emulator (1-32 ASCII letters, digits, `-`, `_`, `.`; unique). Link delay is the edge's
//! length, or else the great-circle distance between its ends, at 200,000 km/s in fibre
//! ([`FIBRE_KM_PER_MS`]: 1 ms per 200 km), at least [`MIN_DELAY_MS`]; bandwidth is the edge's
//! speed or [`Options::bandwidth_mbps`]. The file ends with an `expect` step that checks every
//! node reaches every other, raises `[routing] infinity` above the hop diameter when the
//! default (16) would cut far nodes off, and runs long enough for routing to converge.
//!
//! ## Contract
//! - Sans-IO: functions take bytes or parameters and return an [`Output`] (the TOML text, a
//!   [`Summary`] and the warnings) or a [`TopoError`]; only the CLI reads and writes files.
//! - Never panics on any input; a malformed file is refused with `file:line:col` and the
//!   reason (GML and JSON syntax), or `file: where: reason` for a well-formed file that is
//!   not a usable graph (`where` is `line:col` in GML, a JSON path like `edges[3].source`).
//! - An [`Output`]'s TOML parses with `anode_emu::Topology::parse`: at least 2 and at most
//!   [`MAX_NODES`] nodes, valid unique names, no self or duplicate links, every value within
//!   the emulator's ranges.
//! - Deterministic: the same input (or kind, parameters and seed) gives byte-identical output.
//!
//! ## Example
//! ```
//! use anode_topo::{Kind, Options, generate, import};
//!
//! let ring = generate(&Kind::Ring { nodes: 5 }, 1, &Options::default()).unwrap();
//! assert_eq!((ring.summary.nodes, ring.summary.links), (5, 5));
//! assert!(ring.toml.contains("check = \"reachable\"\nfrom = \"*\"\nto = \"*\""));
//!
//! let gml = br#"graph [ node [ id 0 label "New York" Latitude 40.71 Longitude -74.01 ]
//!                       node [ id 1 label "Chicago" Latitude 41.85 Longitude -87.65 ]
//!                       edge [ source 0 target 1 LinkSpeedRaw 1e10 ] ]"#;
//! let out = import(gml, "two.gml", &Options::default()).unwrap();
//! assert!(out.toml.contains("delay_ms = 5.728"));     // 1146 km at 200,000 km/s
//! assert!(out.toml.contains("bandwidth_mbps = 10000"));
//! assert_eq!(out.warnings[0].kind(), "renamed");       // "New York" -> New-York
//!
//! let err = import(b"graph [ node [ id 0 ]", "bad.gml", &Options::default()).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "bad.gml:1:1: the list 'graph [' opened at 1:1 is never closed: add a ']'"
//! );
//! ```
//!
//! ## Layout
//! - `gml.rs`: the GML parser (a tree of keyed values with line:col positions);
//! - `import.rs`: GML and node-link JSON to the neutral graph;
//! - `generate.rs`: the synthetic graphs;
//! - `build.rs`: cleaning, naming, delays, diameter and the TOML text;
//! - `graph.rs`: the neutral graph and its algorithms (components, hop diameter);
//! - `error.rs`: errors; `warning.rs`: warnings.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
#![forbid(unsafe_code)]

mod build;
mod error;
pub mod generate;
pub mod gml;
mod graph;
mod import;
mod warning;

pub use build::{Output, Summary};
pub use error::{GraphError, ParamError, SyntaxError, TopoError};
pub use generate::{Kind, generate};
pub use import::{Format, detect, import};
pub use warning::Warning;

/// Light travels this many km per ms in fibre (200,000 km/s, two thirds of c).
pub const FIBRE_KM_PER_MS: f64 = 200.0;
/// The smallest link delay written (co-located nodes still get a little delay).
pub const MIN_DELAY_MS: f64 = 0.01;
/// The delay of a link whose length is unknown (no length, no coordinates).
pub const DEFAULT_DELAY_MS: f64 = 1.0;
/// The bandwidth of a link whose speed is unknown, unless [`Options`] says otherwise.
pub const DEFAULT_BANDWIDTH_MBPS: f64 = 1000.0;
/// The most nodes the emulator takes.
pub const MAX_NODES: usize = 60_000;
/// The emulator's default routing infinity (RIP's 16).
pub const DEFAULT_INFINITY: u16 = 16;
/// The largest routing infinity the emulator accepts.
pub const MAX_INFINITY: u16 = 1024;

/// What the caller chooses for every import and generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Bandwidth of links whose speed the graph does not give, in Mbit/s (0 = unlimited).
    pub bandwidth_mbps: f64,
    /// Delay of links whose length cannot be known (no length, no coordinates), in ms.
    pub delay_ms: f64,
    /// `[network] duration_ms`; `None`: long enough for routing to converge (see
    /// [`default_duration_ms`]).
    pub duration_ms: Option<u64>,
    /// `[routing] protocol` to write: `None` leaves the default (distance vector); `"ls"`
    /// for link state, which scales better on large graphs.
    pub protocol: Option<&'static str>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            bandwidth_mbps: DEFAULT_BANDWIDTH_MBPS,
            delay_ms: DEFAULT_DELAY_MS,
            duration_ms: None,
            protocol: None,
        }
    }
}

impl Options {
    /// Checks the values are within what the emulator accepts.
    pub fn validate(&self) -> Result<(), ParamError> {
        let bw = self.bandwidth_mbps;
        if !(bw == 0.0 || (0.001..=1_000_000.0).contains(&bw)) {
            return Err(ParamError::Range {
                param: "--bandwidth-mbps",
                value: bw.to_string(),
                want: "0.001 to 1000000 Mbit/s, or 0 for unlimited",
            });
        }
        if !(0.0..=3_600_000.0).contains(&self.delay_ms) {
            return Err(ParamError::Range {
                param: "--delay-ms",
                value: self.delay_ms.to_string(),
                want: "0 to 3600000 ms",
            });
        }
        if self.duration_ms == Some(0) {
            return Err(ParamError::Range {
                param: "--duration-ms",
                value: "0".into(),
                want: "at least 1 ms (the run must cover some time)",
            });
        }
        Ok(())
    }
}

/// The default run length: 20 s, plus 20 ms per node and 100 ms per hop of the diameter
/// (routing's triggered updates take about 50 ms per hop plus the link delays).
pub fn default_duration_ms(nodes: usize, diameter_hops: u32) -> u64 {
    20_000u64
        .saturating_add((nodes as u64).saturating_mul(20))
        .saturating_add(u64::from(diameter_hops).saturating_mul(100))
}

/// The link delay for a length in km: at 200,000 km/s, at least [`MIN_DELAY_MS`].
pub fn fibre_delay_ms(km: f64) -> f64 {
    (km / FIBRE_KM_PER_MS).max(MIN_DELAY_MS)
}

/// The great-circle distance in km between two points given in degrees (haversine, mean
/// Earth radius 6371 km).
pub fn haversine_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    const R: f64 = 6371.0;
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = (lat2 - lat1).to_radians();
    let dl = (lon2 - lon1).to_radians();
    let h = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * R * h.sqrt().min(1.0).asin()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn haversine_matches_known_distances() {
        // New York - Chicago, about 1145 km.
        let d = haversine_km(40.71, -74.01, 41.85, -87.65);
        assert!((d - 1145.0).abs() < 10.0, "{d}");
        // Antipodes: half the circumference.
        let d = haversine_km(0.0, 0.0, 0.0, 180.0);
        assert!((d - 20015.0).abs() < 1.0, "{d}");
        assert_eq!(haversine_km(10.0, 10.0, 10.0, 10.0), 0.0);
    }

    #[test]
    fn delay_is_one_ms_per_200_km_with_a_floor() {
        assert_eq!(fibre_delay_ms(200.0), 1.0);
        assert_eq!(fibre_delay_ms(0.0), MIN_DELAY_MS);
        assert_eq!(fibre_delay_ms(1146.16), 5.7308);
    }
}
