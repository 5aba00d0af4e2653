//! The pure part of a lab: a [`Topology`] becomes namespaces, veth pairs, addresses, netem
//! parameters, node config text and the `ip`/`tc` batch scripts that make them. Nothing here
//! touches the system; [`crate::apply`] runs the scripts.
//!
//! Addressing (IPv4 only, all from 198.18.0.0/15, existing only inside the lab's namespaces):
//! - each node has one node address, a /32 on its namespace's `lo`, which its `anode node`
//!   binds (UDP port 3322 unless the topology says otherwise): the topology's own addresses
//!   when every node has an IPv4 address in 198.18.0.0/17 and no two share an IP (the
//!   emulator's defaults, 198.18.0.N, do), else the emulator's default IPv4 address by index
//!   for every node;
//! - link `j` (in file order) is the /30 `198.18.128.0 + 4j`: `.1` on its `a` end, `.2` on its
//!   `b` end, each end an interface `ethK` in its node's namespace (`K` counts that node's
//!   links from 1 in file order, as containerlab names data interfaces);
//! - each namespace routes every neighbor's /32 via the neighbor's end of the shared /30, so
//!   one bound socket reaches every neighbor over the right veth, and a datagram's source is
//!   always the node address its peers know. IP forwarding stays off: traffic between
//!   non-neighbors crosses only through the anode nodes.
//!
//! Contract: [`plan`] returns a plan whose namespace names are unique and at most 15
//! characters, whose interface names are unique per namespace, whose addresses are unique, and
//! whose config text `anode_node::config::parse` accepts; or a [`PlanError`] (too many nodes
//! or links, a bad lab name). Same input, same plan, byte for byte.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use anode_emu::Topology;
use anode_wire::NodeAddr;
use serde::{Deserialize, Serialize};

use crate::config::{self, LinkConf, NodeConf};
use crate::error::PlanError;
use crate::names;
use crate::netem::{IP_UDP, Netem};

/// Most nodes in a lab (one process and one namespace each).
pub const MAX_NODES: usize = 1000;
/// Most links: /30s in 198.18.128.0/17.
pub const MAX_LINKS: usize = 8192;
/// The first link /30.
pub const LINK_BASE: Ipv4Addr = Ipv4Addr::new(198, 18, 128, 0);

/// How link properties (delay, rate, loss, queue) are emulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Impair {
    /// A `tc netem` qdisc on each veth end (the kernel; needs `sch_netem`).
    Netem,
    /// Each node's UDP driver, from `[[link]] impair` in its config.
    Node,
}

impl Impair {
    /// `netem` or `node`.
    pub fn as_str(self) -> &'static str {
        match self {
            Impair::Netem => "netem",
            Impair::Node => "node",
        }
    }
}

/// Where a lab keeps its files.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The lab's state directory (`.../labs/LAB`): state file, node configs, logs, caches.
    pub state_dir: PathBuf,
    /// The directory of the lab's control sockets (`$XDG_RUNTIME_DIR/anode/lab`).
    pub socket_dir: PathBuf,
}

/// One end of a link in a node's namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct Iface {
    /// Interface name, `ethK`.
    pub name: String,
    /// The link's index.
    pub link: usize,
    /// This end's address on the /30.
    pub ip: Ipv4Addr,
    /// The neighbor's node index.
    pub peer: usize,
    /// The neighbor's end of the /30 (the next hop to its node address).
    pub peer_link_ip: Ipv4Addr,
    /// The interface MTU (the link's ANEP MTU + 28).
    pub mtu: usize,
    /// What this end sends through.
    pub netem: Netem,
}

/// A link: a veth pair.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkPlan {
    /// Node index of end a.
    pub a: usize,
    /// Node index of end b.
    pub b: usize,
    /// Interface of end a.
    pub a_if: String,
    /// Interface of end b.
    pub b_if: String,
    /// Address of end a.
    pub a_ip: Ipv4Addr,
    /// Address of end b.
    pub b_ip: Ipv4Addr,
    /// The ANEP MTU.
    pub mtu: usize,
    /// Routing cost.
    pub cost: u16,
    /// Both directions' properties.
    pub netem: Netem,
}

/// Addresses, interfaces and links of a topology, before any path or process is chosen
/// (shared by labs and exports).
#[derive(Debug, Clone)]
pub struct Wiring {
    /// Node addresses, by node index.
    pub addresses: Vec<NodeAddr>,
    /// True if the topology's addresses were replaced by 198.18.0.N.
    pub assigned: bool,
    /// The links, in file order.
    pub links: Vec<LinkPlan>,
    /// Each node's interfaces, in its link order.
    pub ifaces: Vec<Vec<Iface>>,
    /// Each node's connected component (nodes only expect routes within theirs).
    pub components: Vec<usize>,
}

/// One node of a lab.
#[derive(Debug, Clone)]
pub struct NodePlan {
    /// Its topology name.
    pub name: String,
    /// Its namespace.
    pub netns: String,
    /// Its node address.
    pub address: NodeAddr,
    /// Its connected component.
    pub component: usize,
    /// Its interfaces.
    pub ifaces: Vec<Iface>,
    /// Its config file.
    pub config_path: PathBuf,
    /// Its log (stdout and stderr).
    pub log: PathBuf,
    /// Its state directory (code cache, modules).
    pub state_dir: PathBuf,
    /// `XDG_RUNTIME_DIR` of commands run in its namespace: its control socket is the only
    /// one under `DIR/anode`, so client commands find it without flags.
    pub runtime_dir: PathBuf,
    /// Its control socket.
    pub socket: PathBuf,
    /// Its config text.
    pub config: String,
}

/// A whole lab.
#[derive(Debug, Clone)]
pub struct LabPlan {
    /// The lab's name.
    pub lab: String,
    /// Its namespace prefix.
    pub prefix: String,
    /// How links are emulated.
    pub impair: Impair,
    /// True if the topology's addresses were replaced.
    pub assigned: bool,
    /// The nodes, in topology order.
    pub nodes: Vec<NodePlan>,
    /// The links, in topology order.
    pub links: Vec<LinkPlan>,
}

/// The /30 end addresses of link `j`.
pub fn link_ips(j: usize) -> (Ipv4Addr, Ipv4Addr) {
    let base = u32::from(LINK_BASE).wrapping_add((j as u32).wrapping_mul(4));
    (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2))
}

fn in_node_range(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            (o[0] == 198 && o[1] == 18 && o[2] < 128 && !(o[2] == 0 && o[3] == 0)).then_some(v4)
        }
        IpAddr::V6(_) => None,
    }
}

/// The node addresses: the topology's if all usable, else the default IPv4 ones.
pub fn addresses(topo: &Topology) -> (Vec<NodeAddr>, bool) {
    let given: Vec<NodeAddr> = topo.nodes.iter().map(|n| n.address).collect();
    let mut ips: Vec<Ipv4Addr> = given.iter().filter_map(|a| in_node_range(a.ip())).collect();
    ips.sort();
    ips.dedup();
    if ips.len() == given.len() {
        return (given, false);
    }
    let assigned = (0..given.len())
        .map(|i| anode_emu::topology::default_address(i, false))
        .collect();
    (assigned, true)
}

fn components(n: usize, links: &[LinkPlan]) -> Vec<usize> {
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(p: &[usize], mut x: usize) -> usize {
        while let Some(&up) = p.get(x) {
            if up == x {
                break;
            }
            x = up;
        }
        x
    }
    for l in links {
        let (ra, rb) = (root(&parent, l.a), root(&parent, l.b));
        if let Some(slot) = parent.get_mut(ra.max(rb)) {
            *slot = ra.min(rb);
        }
    }
    (0..n).map(|i| root(&parent, i)).collect()
}

/// Addresses, interfaces and links of `topo`.
pub fn wire(topo: &Topology) -> Result<Wiring, PlanError> {
    if topo.nodes.len() > MAX_NODES {
        return Err(PlanError::TooManyNodes {
            nodes: topo.nodes.len(),
            max: MAX_NODES,
        });
    }
    if topo.links.len() > MAX_LINKS {
        return Err(PlanError::TooManyLinks {
            links: topo.links.len(),
            max: MAX_LINKS,
        });
    }
    let (addresses, assigned) = addresses(topo);
    let mut ifaces: Vec<Vec<Iface>> = vec![Vec::new(); topo.nodes.len()];
    let mut links = Vec::with_capacity(topo.links.len());
    for (j, l) in topo.links.iter().enumerate() {
        let (a_ip, b_ip) = link_ips(j);
        let netem = Netem::from_link(l);
        let mut name_of = |me: usize, peer: usize, ip: Ipv4Addr, peer_ip: Ipv4Addr| {
            let list = ifaces.get_mut(me)?;
            let name = format!("eth{}", list.len() + 1);
            list.push(Iface {
                name: name.clone(),
                link: j,
                ip,
                peer,
                peer_link_ip: peer_ip,
                mtu: l.mtu + IP_UDP,
                netem,
            });
            Some(name)
        };
        let a_if = name_of(l.a, l.b, a_ip, b_ip).unwrap_or_default();
        let b_if = name_of(l.b, l.a, b_ip, a_ip).unwrap_or_default();
        links.push(LinkPlan {
            a: l.a,
            b: l.b,
            a_if,
            b_if,
            a_ip,
            b_ip,
            mtu: l.mtu,
            cost: l.cost,
            netem,
        });
    }
    let components = components(topo.nodes.len(), &links);
    Ok(Wiring {
        addresses,
        assigned,
        links,
        ifaces,
        components,
    })
}

/// How `[[link]]`s are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkNames {
    /// By interface, `ethK` (labs, containers: the name `tc` and `ip` use too).
    Iface,
    /// By neighbor, `to-NAME` (bare hosts, where links have no interface of their own).
    Peer,
}

/// The `[[link]]`s of node `me`, with peers at `addrs` (with `impair`: the node emulates them).
pub fn link_confs(
    w: &Wiring,
    topo: &Topology,
    me: usize,
    addrs: &[NodeAddr],
    impair: bool,
    naming: LinkNames,
) -> Vec<LinkConf> {
    let Some(ifaces) = w.ifaces.get(me) else {
        return Vec::new();
    };
    ifaces
        .iter()
        .filter_map(|i| {
            let link = w.links.get(i.link)?;
            let peer_name = topo.nodes.get(i.peer)?.name.clone();
            Some(LinkConf {
                name: match naming {
                    LinkNames::Iface => i.name.clone(),
                    LinkNames::Peer => format!("to-{peer_name}"),
                },
                peer: *addrs.get(i.peer)?,
                peer_name,
                mtu: link.mtu,
                cost: link.cost,
                impair: impair.then(|| i.netem.impair_toml()),
            })
        })
        .collect()
}

/// The lab for `topo` named `lab`, its files under `layout`, links emulated by `impair`.
pub fn plan(
    topo: &Topology,
    lab: &str,
    layout: &Layout,
    impair: Impair,
) -> Result<LabPlan, PlanError> {
    if !names::valid_lab_name(lab) {
        return Err(PlanError::LabName(lab.to_string()));
    }
    let w = wire(topo)?;
    let prefix = names::prefix(lab);
    let mut nodes = Vec::with_capacity(topo.nodes.len());
    for (i, spec) in topo.nodes.iter().enumerate() {
        let netns = names::netns_name(&prefix, &spec.name, i);
        let stem = names::file_stem(&spec.name, i);
        let address = *w.addresses.get(i).unwrap_or(&spec.address);
        let nodes_dir = layout.state_dir.join("nodes");
        let runtime_dir = layout.socket_dir.join(&netns);
        let socket = runtime_dir
            .join("anode")
            .join(format!("{}.sock", address.port()));
        let state_dir = nodes_dir.join(&stem);
        let conf = NodeConf {
            header: vec![
                format!(
                    "anode lab '{lab}': node '{}' in namespace {netns}",
                    spec.name
                ),
                "written by `anode lab up`, removed by `anode lab down`".into(),
            ],
            address,
            routing: &topo.routing,
            socket: Some(&socket),
            state_dir: Some(&state_dir),
            links: link_confs(
                &w,
                topo,
                i,
                &w.addresses,
                impair == Impair::Node,
                LinkNames::Iface,
            ),
        };
        let config = config::render(&conf)?;
        nodes.push(NodePlan {
            name: spec.name.clone(),
            netns,
            address,
            component: w.components.get(i).copied().unwrap_or(i),
            ifaces: w.ifaces.get(i).cloned().unwrap_or_default(),
            config_path: nodes_dir.join(format!("{stem}.toml")),
            log: nodes_dir.join(format!("{stem}.log")),
            state_dir,
            runtime_dir,
            socket,
            config,
        });
    }
    Ok(LabPlan {
        lab: lab.to_string(),
        prefix,
        impair,
        assigned: w.assigned,
        nodes,
        links: w.links,
    })
}

/// The IPv4 address of a node address (labs are IPv4 only).
pub fn node_ip(a: NodeAddr) -> Ipv4Addr {
    match a.ip() {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
    }
}

impl LabPlan {
    /// `ip -batch` lines that make every namespace.
    pub fn netns_batch(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("netns add {}\n", n.netns))
            .collect()
    }

    /// `ip -batch` lines that make every veth pair, each end created in its namespace.
    pub fn veth_batch(&self) -> String {
        let ns = |i: usize| self.nodes.get(i).map_or("", |n| n.netns.as_str());
        self.links
            .iter()
            .map(|l| {
                format!(
                    "link add {} netns {} type veth peer name {} netns {}\n",
                    l.a_if,
                    ns(l.a),
                    l.b_if,
                    ns(l.b)
                )
            })
            .collect()
    }

    /// `ip -n NETNS -batch` lines for node `i`: loopback with the node address, each
    /// interface's MTU, /30 and state, the /32 routes to the neighbors.
    pub fn ip_batch(&self, i: usize) -> String {
        let Some(n) = self.nodes.get(i) else {
            return String::new();
        };
        let mut s = format!(
            "link set lo up\naddr add {}/32 dev lo\n",
            node_ip(n.address)
        );
        for f in &n.ifaces {
            let peer = self
                .nodes
                .get(f.peer)
                .map_or(Ipv4Addr::UNSPECIFIED, |p| node_ip(p.address));
            s.push_str(&format!(
                "addr add {}/30 dev {}\nlink set {} mtu {} up\nroute add {peer}/32 via {} dev {}\n",
                f.ip, f.name, f.name, f.mtu, f.peer_link_ip, f.name
            ));
        }
        s
    }

    /// `tc -n NETNS -batch` lines for node `i` (netem mode; links without any property get
    /// no qdisc). Empty if there is nothing to add.
    pub fn tc_batch(&self, i: usize) -> String {
        let Some(n) = self.nodes.get(i) else {
            return String::new();
        };
        if self.impair != Impair::Netem {
            return String::new();
        }
        n.ifaces
            .iter()
            .filter(|f| !f.netem.is_noop())
            .map(|f| {
                format!(
                    "qdisc add dev {} root netem {}\n",
                    f.name,
                    f.netem.tc_options()
                )
            })
            .collect()
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodePlan> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

#[cfg(test)]
pub(crate) mod tests;
