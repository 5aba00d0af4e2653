//! `anode lab export`: the same topology for other runners, as files.
//!
//! - [`containerlab`]: `NAME.clab.yml` (one `kind: linux` node per topology node running
//!   `anode node` from the image, one link per topology link with `endpoints: ["a:ethK",
//!   "b:ethK"]`), `configs/NODE.toml` (bound into each container at `/etc/anode/node.toml`),
//!   a `Dockerfile` that builds the image from the anode repository and its
//!   `Dockerfile.dockerignore`. Inside each container the addressing is the lab's (node
//!   address on `lo`, a /30 per link, /32 routes to the neighbors) and the link properties
//!   are a `tc netem` qdisc per interface; the node's `exec` commands set them up after
//!   containerlab has wired the links, and its `cmd` waits for the node address before it
//!   starts `anode node`. The link's values are also in its `vars`, for reference.
//! - [`hosts`]: nodes spread over bare hosts round-robin, `hosts/HOST/NODE.toml` with every
//!   node at `HOST:PORT` (ports from 3322 up per host) and its peers at theirs, and a
//!   `README.txt` that says what to start where. Link properties come from the real network
//!   unless `impair` asks the nodes to emulate them (`[[link]] impair`).
//!
//! Contract: every function here is pure (no file is written; [`write`] writes) and returns
//! the same bytes for the same input; every topology node and link appears in the output.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anode_emu::Topology;
use anode_wire::NodeAddr;

use crate::config::{self, NodeConf};
use crate::error::{LabError, PlanError};
use crate::names;
use crate::netem::decimal;
use crate::plan::{self, LinkNames, Wiring, node_ip};
use crate::yaml::quote;

/// A file to write, relative to the export directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportFile {
    /// Its path under the export directory.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
}

/// The first port of nodes on a host.
pub const BASE_PORT: u16 = 3322;
/// Where the node config is inside a container.
pub const CONTAINER_CONFIG: &str = "/etc/anode/node.toml";

/// The image's build recipe.
pub const DOCKERFILE: &str = r#"# syntax=docker/dockerfile:1
# The image the containerlab topology runs (`image: anode:latest`): anode built from its
# repository. Build it from the root of the anode repository (the build context):
#     docker build -f EXPORT_DIR/Dockerfile -t anode:latest .
# (EXPORT_DIR/Dockerfile.dockerignore keeps target/ and .git out of the context.)

FROM rust:1.95-bookworm AS build
# clang compiles the eBPF programs of the kernel fast path; every build needs it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends clang linux-libc-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# rust-toolchain.toml pins the toolchain and the wasm32 target the guest code is built for.
RUN rustup show active-toolchain >/dev/null 2>&1 || rustup toolchain install
RUN cargo build --release --locked -p anode

FROM debian:bookworm-slim
# iproute2: ip and tc, which the topology's exec commands run.
RUN apt-get update \
 && apt-get install -y --no-install-recommends iproute2 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/anode /usr/local/bin/anode
CMD ["anode", "--help"]
"#;

/// What the image build leaves out of the context.
pub const DOCKERIGNORE: &str =
    "target\n**/target\n.git\nbench-out\nfuzz/target\nfuzz/corpus\nfuzz/artifacts\n";

/// The node config of node `i` for a container (default socket and state inside it).
fn container_config(
    topo: &Topology,
    w: &Wiring,
    i: usize,
    name: &str,
) -> Result<String, PlanError> {
    let addr = w
        .addresses
        .get(i)
        .copied()
        .unwrap_or_else(|| anode_emu::topology::default_address(i, false));
    config::render(&NodeConf {
        header: vec![
            format!(
                "anode node '{name}' of the containerlab topology '{}'",
                topo_name(topo)
            ),
            format!(
                "mounted at {CONTAINER_CONFIG}; control socket: the default (`anode status` in the container)"
            ),
        ],
        address: addr,
        routing: &topo.routing,
        socket: None,
        state_dir: None,
        links: plan::link_confs(w, topo, i, &w.addresses, false, LinkNames::Iface),
    })
}

fn topo_name(topo: &Topology) -> String {
    names::default_lab_name(Path::new(&topo.file))
}

/// The `exec` commands of node `i`: interfaces, netem, routes, then the node address.
fn container_exec(w: &Wiring, i: usize) -> Vec<String> {
    let mut cmds = Vec::new();
    for f in w.ifaces.get(i).map(Vec::as_slice).unwrap_or_default() {
        let peer = w
            .addresses
            .get(f.peer)
            .map_or(std::net::Ipv4Addr::UNSPECIFIED, |a| node_ip(*a));
        cmds.push(format!("ip addr add {}/30 dev {}", f.ip, f.name));
        cmds.push(format!("ip link set {} mtu {} up", f.name, f.mtu));
        if !f.netem.is_noop() {
            cmds.push(format!(
                "tc qdisc replace dev {} root netem {}",
                f.name,
                f.netem.tc_options()
            ));
        }
        cmds.push(format!(
            "ip route replace {peer}/32 via {} dev {}",
            f.peer_link_ip, f.name
        ));
    }
    if let Some(a) = w.addresses.get(i) {
        cmds.push(format!("ip addr add {}/32 dev lo", node_ip(*a)));
    }
    cmds
}

/// The containerlab export of `topo` as lab `name`, nodes running `image`.
pub fn containerlab(
    topo: &Topology,
    name: &str,
    image: &str,
) -> Result<Vec<ExportFile>, PlanError> {
    if !names::valid_lab_name(name) {
        return Err(PlanError::LabName(name.to_string()));
    }
    let w = plan::wire(topo)?;
    let mut files = Vec::new();
    let mut y = format!(
        "# containerlab topology of anode nodes, from {} (`anode lab export --format containerlab`).\n\
         # Build the image from the anode repository's root:\n\
         #     docker build -f THIS_DIR/Dockerfile -t {image} .\n\
         # then: containerlab deploy -t {name}.clab.yml\n\
         name: {}\ntopology:\n  nodes:\n",
        topo.file,
        quote(name)
    );
    for (i, n) in topo.nodes.iter().enumerate() {
        let stem = names::file_stem(&n.name, i);
        let addr = w
            .addresses
            .get(i)
            .map(|a| node_ip(*a))
            .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
        files.push(ExportFile {
            path: PathBuf::from("configs").join(format!("{stem}.toml")),
            text: container_config(topo, &w, i, &n.name)?,
        });
        let cmd = format!(
            "sh -c \"until ip -4 addr show dev lo | grep -q 'inet {addr}/32'; do sleep 0.2; done; exec anode --log info node --config {CONTAINER_CONFIG}\""
        );
        y.push_str(&format!(
            "    {}:\n      kind: \"linux\"\n      image: {}\n      binds:\n        - {}\n      cmd: {}\n",
            quote(&n.name),
            quote(image),
            quote(&format!("configs/{stem}.toml:{CONTAINER_CONFIG}:ro")),
            quote(&cmd)
        ));
        let exec = container_exec(&w, i);
        if !exec.is_empty() {
            y.push_str("      exec:\n");
            for c in exec {
                y.push_str(&format!("        - {}\n", quote(&c)));
            }
        }
    }
    if !w.links.is_empty() {
        y.push_str("  links:\n");
    }
    for (l, spec) in w.links.iter().zip(&topo.links) {
        let (Some(a), Some(b)) = (topo.nodes.get(l.a), topo.nodes.get(l.b)) else {
            continue;
        };
        y.push_str(&format!(
            "    - endpoints: [{}, {}]\n      vars:\n        delay_ms: {}\n        bandwidth_mbps: {}\n        loss: {}\n        mtu: {}\n        queue_bytes: {}\n        cost: {}\n",
            quote(&format!("{}:{}", a.name, l.a_if)),
            quote(&format!("{}:{}", b.name, l.b_if)),
            decimal(spec.delay.as_secs_f64() * 1000.0),
            decimal(spec.bandwidth_bps.map_or(0.0, |b| b as f64 / 1e6)),
            decimal(spec.loss),
            spec.mtu,
            spec.queue_bytes,
            spec.cost
        ));
    }
    files.insert(
        0,
        ExportFile {
            path: PathBuf::from(format!("{name}.clab.yml")),
            text: y,
        },
    );
    files.push(ExportFile {
        path: PathBuf::from("Dockerfile"),
        text: DOCKERFILE.to_string(),
    });
    files.push(ExportFile {
        path: PathBuf::from("Dockerfile.dockerignore"),
        text: DOCKERIGNORE.to_string(),
    });
    Ok(files)
}

/// Host directory name: the host with `:` as `_` (IPv6).
fn host_dir(host: &IpAddr) -> String {
    host.to_string().replace(':', "_")
}

/// Node addresses on hosts: node `i` on host `i % H`, port 3322 + `i / H`.
pub fn host_addresses(n: usize, hosts: &[IpAddr]) -> Result<Vec<NodeAddr>, PlanError> {
    if hosts.is_empty() {
        return Err(PlanError::NoHosts);
    }
    if hosts.iter().any(IpAddr::is_ipv4) && hosts.iter().any(IpAddr::is_ipv6) {
        return Err(PlanError::MixedHosts);
    }
    let per_host = n.div_ceil(hosts.len());
    if per_host > usize::from(u16::MAX - BASE_PORT) {
        return Err(PlanError::Ports {
            host: hosts.first().map(ToString::to_string).unwrap_or_default(),
            nodes: per_host,
            base: BASE_PORT,
        });
    }
    Ok((0..n)
        .filter_map(|i| {
            let h = hosts.get(i % hosts.len())?;
            let port = BASE_PORT + u16::try_from(i / hosts.len()).ok()?;
            Some(NodeAddr::new(*h, port))
        })
        .collect())
}

/// Parses `--hosts` values (IP addresses).
pub fn parse_hosts(list: &[String]) -> Result<Vec<IpAddr>, PlanError> {
    list.iter()
        .map(|h| {
            let t = h.trim().trim_start_matches('[').trim_end_matches(']');
            t.parse::<IpAddr>().map_err(|_| PlanError::Host(h.clone()))
        })
        .collect()
}

/// The bare-hosts export of `topo`: configs per host and a README; with `impair` the nodes
/// emulate the links' properties themselves.
pub fn hosts(
    topo: &Topology,
    hosts: &[IpAddr],
    impair: bool,
) -> Result<Vec<ExportFile>, PlanError> {
    let w = plan::wire(topo)?;
    let addrs = host_addresses(topo.nodes.len(), hosts)?;
    let mut files = Vec::new();
    let mut readme = format!(
        "anode nodes of {} on {} hosts (`anode lab export --format hosts`).\n\n\
         Copy this directory to every host (or at least hosts/HOST/), then start each host's\n\
         nodes there. Every node is HOST:PORT; UDP ports {BASE_PORT}.. must be open between the\n\
         hosts. Link properties (delay, rate, loss) are {}.\n",
        topo.file,
        hosts.len(),
        if impair {
            "emulated by the nodes ([[link]] impair)"
        } else {
            "the real network's"
        }
    );
    for h in hosts {
        readme.push_str(&format!("\nOn {h}:\n"));
        for (i, n) in topo.nodes.iter().enumerate() {
            let Some(a) = addrs.get(i) else { continue };
            if a.ip() != *h {
                continue;
            }
            let stem = names::file_stem(&n.name, i);
            let rel = PathBuf::from("hosts")
                .join(host_dir(h))
                .join(format!("{stem}.toml"));
            readme.push_str(&format!(
                "    anode node --config {} &    # {} at {a}; then `anode status --node-port {}`\n",
                rel.display(),
                n.name,
                a.port()
            ));
            let text = config::render(&NodeConf {
                header: vec![format!(
                    "anode node '{}' of {} on host {h} (`anode lab export --format hosts`)",
                    n.name, topo.file
                )],
                address: *a,
                routing: &topo.routing,
                socket: None,
                state_dir: None,
                links: plan::link_confs(&w, topo, i, &addrs, impair, LinkNames::Peer),
            })?;
            files.push(ExportFile { path: rel, text });
        }
    }
    files.insert(
        0,
        ExportFile {
            path: PathBuf::from("README.txt"),
            text: readme,
        },
    );
    Ok(files)
}

/// Writes `files` under `dir` (creating directories; existing files are replaced).
pub fn write(dir: &Path, files: &[ExportFile]) -> Result<(), LabError> {
    for f in files {
        let p = dir.join(&f.path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| LabError::io(parent, "cannot create the directory", e))?;
        }
        std::fs::write(&p, &f.text).map_err(|e| LabError::io(&p, "cannot write", e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
