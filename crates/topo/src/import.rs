//! Topology Zoo GML and networkx node-link JSON to the neutral graph, then to a topology.
//!
//! What is read (everything else is ignored):
//!
//! | | GML (Topology Zoo) | node-link JSON (topohub, networkx) |
//! |---|---|---|
//! | graph name | `graph [ label ".." ]` (or `Network`, `name`) | `"graph": {"name": ..}` |
//! | directed | `directed 1` | `"directed": true` |
//! | node id | `id` (integer or string) | `"id"` (number or string) |
//! | node name | `label` | `"name"` or `"label"` |
//! | position | `Latitude`, `Longitude` (degrees) | `"pos": [lon, lat]`, or `Latitude`/`Longitude` |
//! | edge ends | `source`, `target` | `"source"`, `"target"` (under `"edges"` or `"links"`) |
//! | length | - | `"dist"` (km) |
//! | speed | `LinkSpeedRaw` (bit/s), else `LinkSpeed` + `LinkSpeedUnits` (K, M, G, T) | `LinkSpeedRaw` (bit/s) |
//!
//! Ids are compared as text: `0` and `"0"` are the same node.

use std::collections::HashMap;

use serde_json::Value as Json;

use crate::build::{Source, build};
use crate::error::{GraphError, SyntaxError, TopoError};
use crate::gml::{self, Entry, Value};
use crate::graph::{Edge, Geo, Graph, Node};
use crate::warning::Warning;
use crate::{Options, Output};

/// An input format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// GML, as Topology Zoo's `.gml` files.
    Gml,
    /// networkx node-link JSON, as topohub's `.json` files.
    NodeLinkJson,
}

impl Format {
    /// The name the summary and the file header use.
    pub fn name(self) -> &'static str {
        match self {
            Format::Gml => "gml",
            Format::NodeLinkJson => "node-link-json",
        }
    }
}

/// The format of `bytes`: by the file's extension (`.gml`, `.json`), else JSON if the first
/// non-blank byte is `{`, else GML.
pub fn detect(bytes: &[u8], file: &str) -> Format {
    let lower = file.to_ascii_lowercase();
    if lower.ends_with(".gml") {
        return Format::Gml;
    }
    if lower.ends_with(".json") {
        return Format::NodeLinkJson;
    }
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Format::NodeLinkJson,
        _ => Format::Gml,
    }
}

/// Imports a graph file (format from [`detect`]); `file` names it in messages and the header.
pub fn import(bytes: &[u8], file: &str, opts: &Options) -> Result<Output, TopoError> {
    opts.validate()?;
    let (graph, source) = match detect(bytes, file) {
        Format::Gml => read_gml(bytes, file)?,
        Format::NodeLinkJson => read_json(bytes, file)?,
    };
    build(graph, source, opts)
}

/// What the readers collect besides the graph.
#[derive(Default)]
struct Notes {
    bad_coordinates: usize,
    bad_lengths: usize,
    unreadable_speeds: Vec<String>,
}

impl Notes {
    fn warnings(self) -> Vec<Warning> {
        let mut w = Vec::new();
        if self.bad_coordinates > 0 {
            w.push(Warning::BadCoordinates {
                nodes: self.bad_coordinates,
            });
        }
        if self.bad_lengths > 0 {
            w.push(Warning::BadLength {
                links: self.bad_lengths,
            });
        }
        if !self.unreadable_speeds.is_empty() {
            w.push(Warning::UnreadableSpeed {
                links: self.unreadable_speeds.len(),
                examples: self.unreadable_speeds.into_iter().take(5).collect(),
            });
        }
        w
    }

    fn geo(&mut self, lat: Option<f64>, lon: Option<f64>) -> Option<Geo> {
        let (lat, lon) = (lat?, lon?);
        let g = Geo::new(lat, lon);
        if g.is_none() {
            self.bad_coordinates += 1;
        }
        g
    }

    fn length(&mut self, km: Option<f64>) -> Option<f64> {
        let km = km?;
        // Longer than 3,600,000 ms of fibre is not a length, it is a mistake.
        if km.is_finite() && (0.0..=7.2e8).contains(&km) {
            Some(km)
        } else {
            self.bad_lengths += 1;
            None
        }
    }
}

/// A speed in bit/s if usable (positive and finite).
fn speed(bps: Option<f64>) -> Option<f64> {
    bps.filter(|b| b.is_finite() && *b > 0.0)
}

// ---------------------------------------------------------------------------------------
// GML

fn gml_err(file: &str, pos: gml::Pos, reason: GraphError) -> TopoError {
    TopoError::Graph {
        file: file.to_string(),
        at: format!("{}:{}: ", pos.line, pos.col),
        reason,
    }
}

fn read_gml(bytes: &[u8], file: &str) -> Result<(Graph, Source), TopoError> {
    let text = gml::decode(bytes);
    let top = gml::parse(&text).map_err(|e| TopoError::Syntax {
        file: file.to_string(),
        line: e.pos.line,
        col: e.pos.col,
        reason: e.reason,
    })?;
    let Some(g) = gml::find(&top, "graph") else {
        return Err(TopoError::Graph {
            file: file.to_string(),
            at: String::new(),
            reason: GraphError::NoGraph,
        });
    };
    let Some(list) = g.value.as_list() else {
        return Err(gml_err(
            file,
            g.pos,
            GraphError::WrongType {
                key: "graph".into(),
                want: "a [ list ]",
            },
        ));
    };
    let mut notes = Notes::default();
    let mut graph = Graph::default();
    let mut ids: HashMap<String, usize> = HashMap::new();
    for e in list.iter().filter(|e| e.key == "node") {
        let node = gml_node(file, e, &mut notes)?;
        if ids.insert(node.id.clone(), graph.nodes.len()).is_some() {
            return Err(gml_err(file, e.pos, GraphError::DuplicateId(node.id)));
        }
        graph.nodes.push(node);
    }
    for e in list.iter().filter(|e| e.key == "edge") {
        graph.edges.push(gml_edge(file, e, &ids, &mut notes)?);
    }
    let name = ["label", "Network", "name"]
        .iter()
        .find_map(|k| gml::find(list, k).and_then(|e| e.value.as_text()))
        .filter(|s| !s.trim().is_empty());
    let directed = gml::find(list, "directed").and_then(|e| e.value.as_f64()) == Some(1.0);
    let source = Source {
        origin: format!("imported by `anode topo import` from {file} (GML)"),
        source: file.to_string(),
        format: Format::Gml.name(),
        name,
        directed,
        warnings: notes.warnings(),
        known_diameter: None,
        delay_model: None,
    };
    Ok((graph, source))
}

fn gml_id(
    file: &str,
    list: &[Entry],
    key: &'static str,
    at: gml::Pos,
) -> Result<String, TopoError> {
    let what = if key == "id" { "node" } else { "edge" };
    let Some(e) = gml::find(list, key) else {
        return Err(gml_err(file, at, GraphError::MissingKey { what, key }));
    };
    match &e.value {
        Value::Int(i) => Ok(i.to_string()),
        Value::Str(s) => Ok(s.clone()),
        Value::Real(r) if r.fract() == 0.0 && r.abs() < 9e15 => Ok((*r as i64).to_string()),
        _ => Err(gml_err(
            file,
            e.pos,
            GraphError::WrongType {
                key: key.into(),
                want: "an integer or a string",
            },
        )),
    }
}

fn gml_list<'a>(file: &str, e: &'a Entry) -> Result<&'a [Entry], TopoError> {
    e.value.as_list().ok_or_else(|| {
        gml_err(
            file,
            e.pos,
            GraphError::WrongType {
                key: e.key.clone(),
                want: "a [ list ]",
            },
        )
    })
}

fn gml_node(file: &str, e: &Entry, notes: &mut Notes) -> Result<Node, TopoError> {
    let list = gml_list(file, e)?;
    let id = gml_id(file, list, "id", e.pos)?;
    let label = gml::find(list, "label")
        .and_then(|l| l.value.as_text())
        .filter(|s| !s.is_empty());
    let num = |k: &str| gml::find(list, k).and_then(|x| x.value.as_f64());
    let geo = notes.geo(num("Latitude"), num("Longitude"));
    Ok(Node { id, label, geo })
}

fn gml_edge(
    file: &str,
    e: &Entry,
    ids: &HashMap<String, usize>,
    notes: &mut Notes,
) -> Result<Edge, TopoError> {
    let list = gml_list(file, e)?;
    let mut ends = [0usize; 2];
    for (slot, end) in ends.iter_mut().zip(["source", "target"]) {
        let id = gml_id(file, list, end, e.pos)?;
        *slot = *ids.get(&id).ok_or_else(|| {
            let pos = gml::find(list, end).map_or(e.pos, |x| x.pos);
            gml_err(file, pos, GraphError::UnknownNode { end, id })
        })?;
    }
    let raw = speed(gml::find(list, "LinkSpeedRaw").and_then(|x| x.value.as_f64()));
    let bandwidth_bps = raw.or_else(|| {
        let text = gml::find(list, "LinkSpeed")?.value.as_text()?;
        let units = gml::find(list, "LinkSpeedUnits")
            .and_then(|x| x.value.as_text())
            .unwrap_or_default();
        let bps = speed_with_units(&text, &units);
        if bps.is_none() {
            notes
                .unreadable_speeds
                .push(format!("{:?}", format!("{text} {units}").trim()));
        }
        bps
    });
    let [a, b] = ends;
    Ok(Edge {
        a,
        b,
        bandwidth_bps,
        unknown_bandwidth: u32::from(bandwidth_bps.is_none()),
        parallel: 1,
        ..Edge::default()
    })
}

/// `LinkSpeed "2.5"` with `LinkSpeedUnits "G"` in bit/s (units K, M, G, T; a trailing
/// "bps" or "bit/s" is allowed).
fn speed_with_units(text: &str, units: &str) -> Option<f64> {
    let v: f64 = text.trim().parse().ok()?;
    let mult = match units.trim().chars().next()?.to_ascii_uppercase() {
        'K' => 1e3,
        'M' => 1e6,
        'G' => 1e9,
        'T' => 1e12,
        _ => return None,
    };
    speed(Some(v * mult))
}

// ---------------------------------------------------------------------------------------
// node-link JSON

fn json_err(file: &str, at: String, reason: GraphError) -> TopoError {
    TopoError::Graph {
        file: file.to_string(),
        at: if at.is_empty() { at } else { format!("{at}: ") },
        reason,
    }
}

fn read_json(bytes: &[u8], file: &str) -> Result<(Graph, Source), TopoError> {
    let v: Json = serde_json::from_slice(bytes).map_err(|e| {
        let (line, col) = (e.line().max(1), e.column().max(1));
        let full = e.to_string();
        let reason = full
            .strip_suffix(&format!(" at line {} column {}", e.line(), e.column()))
            .unwrap_or(&full)
            .to_string();
        TopoError::Syntax {
            file: file.to_string(),
            line,
            col,
            reason: SyntaxError::Json(reason),
        }
    })?;
    let not_node_link = || json_err(file, String::new(), GraphError::NotNodeLink);
    let obj = v.as_object().ok_or_else(not_node_link)?;
    let nodes = obj
        .get("nodes")
        .and_then(Json::as_array)
        .ok_or_else(not_node_link)?;
    let (edge_key, edges) = match (obj.get("edges"), obj.get("links")) {
        (Some(e), _) => ("edges", Some(e)),
        (None, l) => ("links", l),
    };
    let edges: &[Json] = match edges {
        None => &[],
        Some(e) => e.as_array().ok_or_else(|| {
            json_err(
                file,
                edge_key.into(),
                GraphError::WrongType {
                    key: edge_key.into(),
                    want: "an array",
                },
            )
        })?,
    };
    let mut notes = Notes::default();
    let mut graph = Graph::default();
    let mut ids: HashMap<String, usize> = HashMap::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let node = json_node(file, i, n, &mut notes)?;
        if ids.insert(node.id.clone(), graph.nodes.len()).is_some() {
            return Err(json_err(
                file,
                format!("nodes[{i}].id"),
                GraphError::DuplicateId(node.id),
            ));
        }
        graph.nodes.push(node);
    }
    for (i, e) in edges.iter().enumerate() {
        graph
            .edges
            .push(json_edge(file, (edge_key, i), e, &ids, &mut notes)?);
    }
    let name = obj
        .get("graph")
        .and_then(|g| g.get("name"))
        .and_then(json_text)
        .filter(|s| !s.trim().is_empty());
    let source = Source {
        origin: format!("imported by `anode topo import` from {file} (node-link JSON)"),
        source: file.to_string(),
        format: Format::NodeLinkJson.name(),
        name,
        directed: obj.get("directed").and_then(Json::as_bool) == Some(true),
        warnings: notes.warnings(),
        known_diameter: None,
        delay_model: None,
    };
    Ok((graph, source))
}

/// A JSON id or name as text: strings as they are, numbers as written.
fn json_text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn json_node(file: &str, i: usize, n: &Json, notes: &mut Notes) -> Result<Node, TopoError> {
    let Some(o) = n.as_object() else {
        return Err(json_err(
            file,
            format!("nodes[{i}]"),
            GraphError::WrongType {
                key: "node".into(),
                want: "an object",
            },
        ));
    };
    let id = match o.get("id") {
        None => {
            return Err(json_err(
                file,
                format!("nodes[{i}]"),
                GraphError::MissingKey {
                    what: "node",
                    key: "id",
                },
            ));
        }
        Some(v) => json_text(v).ok_or_else(|| {
            json_err(
                file,
                format!("nodes[{i}].id"),
                GraphError::WrongType {
                    key: "id".into(),
                    want: "a number or a string",
                },
            )
        })?,
    };
    let label = ["name", "label"]
        .iter()
        .find_map(|k| o.get(*k).and_then(json_text))
        .filter(|s| !s.is_empty());
    let (lat, lon) = match o.get("pos").and_then(Json::as_array).map(Vec::as_slice) {
        Some([lon, lat, ..]) => (lat.as_f64(), lon.as_f64()),
        _ => (
            o.get("Latitude").and_then(Json::as_f64),
            o.get("Longitude").and_then(Json::as_f64),
        ),
    };
    let geo = notes.geo(lat, lon);
    Ok(Node { id, label, geo })
}

fn json_edge(
    file: &str,
    (key, i): (&str, usize),
    e: &Json,
    ids: &HashMap<String, usize>,
    notes: &mut Notes,
) -> Result<Edge, TopoError> {
    let Some(o) = e.as_object() else {
        return Err(json_err(
            file,
            format!("{key}[{i}]"),
            GraphError::WrongType {
                key: "edge".into(),
                want: "an object",
            },
        ));
    };
    let mut ends = [0usize; 2];
    for (slot, end) in ends.iter_mut().zip(["source", "target"]) {
        let at = format!("{key}[{i}].{end}");
        let Some(v) = o.get(end) else {
            return Err(json_err(
                file,
                format!("{key}[{i}]"),
                GraphError::MissingKey {
                    what: "edge",
                    key: end,
                },
            ));
        };
        let Some(id) = json_text(v) else {
            return Err(json_err(
                file,
                at,
                GraphError::WrongType {
                    key: end.into(),
                    want: "a number or a string",
                },
            ));
        };
        *slot = *ids
            .get(&id)
            .ok_or_else(|| json_err(file, at, GraphError::UnknownNode { end, id }))?;
    }
    let length_km = notes.length(o.get("dist").and_then(Json::as_f64));
    let bandwidth_bps = speed(o.get("LinkSpeedRaw").and_then(Json::as_f64));
    let [a, b] = ends;
    Ok(Edge {
        a,
        b,
        length_km,
        bandwidth_bps,
        unknown_bandwidth: u32::from(bandwidth_bps.is_none()),
        parallel: 1,
        ..Edge::default()
    })
}

#[cfg(test)]
mod tests;
