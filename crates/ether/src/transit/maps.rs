//! The transit program's map layouts (mirrors of the structs in `bpf/transit.c`) and what a
//! node's state means for them ([`TransitTable`] -> [`Desired`]), including what to do when
//! it does not fit the maps' bounds (everything to the socket: correct, only slower).
//!
//! Pure: no syscalls here, so it is unit-tested without root.

use std::collections::BTreeMap;

/// Bytes of a node address on the wire: 16 address bytes (IPv4 as `::ffff:a.b.c.d`) and
/// the port, big endian (`anode_wire::NodeAddr::to_bytes`).
pub const ADDR_LEN: usize = 18;
/// Routes the program holds (`ROUTES_MAX`); a larger table sends everything to the socket.
pub const ROUTES_MAX: usize = 65536;
/// Peers the program holds (`PEERS_MAX`).
pub const PEERS_MAX: usize = 4096;
/// EE Type IDs the program forwards besides datagrams (`MAX_EE_TYPES`).
pub const MAX_EE_TYPES: usize = 4;

/// Index of each counter in `struct stats` (`enum stat` in the C program), with its name in
/// reports.
pub mod stat {
    pub const FWD: usize = 0;
    pub const FWD_BYTES: usize = 1;
    pub const COUNT: usize = 16;
    /// The pass reasons, by index, as reports name them.
    pub const PASS: [(usize, &str); 13] = [
        (2, "not_node"),
        (3, "malformed"),
        (4, "anep_options"),
        (5, "type"),
        (6, "peer"),
        (7, "active"),
        (8, "for_node"),
        (9, "rb_exhausted"),
        (10, "no_route"),
        (11, "next_hop"),
        (12, "no_neighbor"),
        (13, "punt_all"),
        (14, "error"),
    ];
}

/// `struct addr_key`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddrKey {
    pub b: [u8; ADDR_LEN],
    pub pad: [u8; 2],
}

impl AddrKey {
    pub fn new(b: [u8; ADDR_LEN]) -> Self {
        AddrKey { b, pad: [0; 2] }
    }
}

/// `struct tconfig`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConfigC {
    pub me: [u8; ADDR_LEN],
    pub family: u8,
    pub punt_all: u8,
    pub punt_ee: u8,
    pub n_ee: u8,
    pub ee_types: [u16; MAX_EE_TYPES],
}

/// `PEER_UP`: the link is enabled.
pub const PEER_UP: u32 = 1;
/// `PEER_PUNT`: the node itself sends to this peer (impairment or queueing discipline).
pub const PEER_PUNT: u32 = 2;
/// `PEER_VETH`: the interface toward the peer is a veth: the program hands the packet to its
/// other end's ingress (`bpf_redirect_peer`), skipping this end's transmit path.
pub const PEER_VETH: u32 = 4;

/// `struct peer_val`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerVal {
    pub mtu: u32,
    pub flags: u32,
    /// The interface the kernel routes to the peer over (0: unknown: the program passes).
    pub oif: u32,
    /// That interface's MTU (IP bytes).
    pub oif_mtu: u32,
    pub smac: [u8; 6],
    pub dmac: [u8; 6],
}

/// `struct route_val`: the next hop and its link's state (a copy of its `peers` entry).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteVal {
    pub hop: [u8; ADDR_LEN],
    pub pad: [u8; 2],
    pub nh: PeerVal,
}

/// `struct stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct StatsC {
    pub c: [u64; stat::COUNT],
}

// SAFETY: plain `repr(C)` structs of integers and byte arrays, no padding the C side does
// not also have (checked by the size assertions below), valid for any bit pattern.
unsafe impl aya::Pod for AddrKey {}
// SAFETY: as above.
unsafe impl aya::Pod for ConfigC {}
// SAFETY: as above.
unsafe impl aya::Pod for PeerVal {}
// SAFETY: as above.
unsafe impl aya::Pod for RouteVal {}
// SAFETY: as above.
unsafe impl aya::Pod for StatsC {}

const _: () = {
    assert!(std::mem::size_of::<AddrKey>() == 20);
    assert!(std::mem::size_of::<ConfigC>() == 30);
    assert!(std::mem::size_of::<PeerVal>() == 28);
    assert!(std::mem::size_of::<RouteVal>() == 48);
};

/// One link of the node, by its peer's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransitPeer {
    /// The link's MTU in ANEP bytes.
    pub mtu: u32,
    /// The link is enabled.
    pub up: bool,
    /// The node must send to this peer itself (an impairment or a queueing discipline).
    pub punt: bool,
    /// How the kernel reaches the peer ([`crate::transit::l2_path`]); `None`: unknown (no
    /// route or neighbor entry yet), and the program leaves packets to this peer to the node.
    pub l2: Option<crate::transit::L2Path>,
}

/// What the node's state says about passive transit: what the program mirrors of
/// `Core::forward` (see `bpf/transit.c`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransitTable {
    /// The node's address.
    pub me: [u8; ADDR_LEN],
    /// Everything to the socket (packet hooks, a capture, or the node says so).
    pub punt_all: bool,
    /// EE Type IDs to the socket (a cut-through channel may own a flow).
    pub punt_ee: bool,
    /// Type IDs of the node's EEs (datagrams are always eligible).
    pub ee_types: Vec<u16>,
    /// Links by their peer's address.
    pub peers: BTreeMap<[u8; ADDR_LEN], TransitPeer>,
    /// The forwarding table: destination -> next hop (a peer).
    pub routes: BTreeMap<[u8; ADDR_LEN], [u8; ADDR_LEN]>,
}

/// The map contents for a table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    pub config: ConfigC,
    pub peers: BTreeMap<AddrKey, PeerVal>,
    pub routes: BTreeMap<AddrKey, RouteVal>,
    /// What did not fit, for the log.
    pub notes: Vec<String>,
}

fn is_v4_mapped(a: &[u8; ADDR_LEN]) -> bool {
    a.get(..10).is_some_and(|z| z.iter().all(|b| *b == 0))
        && a.get(10..12) == Some(&[0xff, 0xff][..])
}

/// The maps for `t`. Whatever does not fit sends everything to the socket.
pub fn desired(t: &TransitTable) -> Desired {
    let mut d = Desired::default();
    let mut punt_all = t.punt_all;
    if t.routes.len() > ROUTES_MAX {
        d.notes.push(format!(
            "{} routes are more than the kernel fast path holds ({ROUTES_MAX}): all to the socket",
            t.routes.len()
        ));
        punt_all = true;
    }
    if t.peers.len() > PEERS_MAX {
        d.notes.push(format!(
            "{} links are more than the kernel fast path holds ({PEERS_MAX}): all to the socket",
            t.peers.len()
        ));
        punt_all = true;
    }
    let mut ee_types = [0u16; MAX_EE_TYPES];
    let mut n_ee = 0u8;
    for (slot, ty) in ee_types.iter_mut().zip(&t.ee_types) {
        *slot = *ty;
        n_ee += 1;
    }
    if t.ee_types.len() > MAX_EE_TYPES {
        d.notes.push(format!(
            "{} EE Type IDs: only the first {MAX_EE_TYPES} take the kernel fast path",
            t.ee_types.len()
        ));
    }
    d.config = ConfigC {
        me: t.me,
        family: if is_v4_mapped(&t.me) { 4 } else { 6 },
        punt_all: u8::from(punt_all),
        punt_ee: u8::from(t.punt_ee),
        n_ee,
        ee_types,
    };
    if punt_all {
        return d;
    }
    for (a, p) in &t.peers {
        let mut flags = 0;
        if p.up {
            flags |= PEER_UP;
        }
        if p.punt {
            flags |= PEER_PUNT;
        }
        if p.l2.is_some_and(|l| l.veth) {
            flags |= PEER_VETH;
        }
        d.peers.insert(
            AddrKey::new(*a),
            PeerVal {
                mtu: p.mtu,
                flags,
                oif: p.l2.map_or(0, |l| l.oif),
                oif_mtu: p.l2.map_or(0, |l| l.mtu),
                smac: p.l2.map_or([0; 6], |l| l.smac),
                dmac: p.l2.map_or([0; 6], |l| l.dmac),
            },
        );
    }
    for (dst, hop) in &t.routes {
        // A next hop that is no link's peer gets flags 0: the program leaves it to the node.
        let nh = d
            .peers
            .get(&AddrKey::new(*hop))
            .copied()
            .unwrap_or_default();
        d.routes.insert(
            AddrKey::new(*dst),
            RouteVal {
                hop: *hop,
                pad: [0; 2],
                nh,
            },
        );
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(last: u8, port: u16) -> [u8; ADDR_LEN] {
        let mut a = [0u8; ADDR_LEN];
        a[10] = 0xff;
        a[11] = 0xff;
        a[12..16].copy_from_slice(&[198, 18, 0, last]);
        a[16..].copy_from_slice(&port.to_be_bytes());
        a
    }

    #[test]
    fn a_table_becomes_its_maps() {
        let mut t = TransitTable {
            me: v4(1, 3322),
            ee_types: vec![0x0A03, 0x0A04],
            ..TransitTable::default()
        };
        t.peers.insert(
            v4(2, 3322),
            TransitPeer {
                mtu: 1500,
                up: true,
                punt: false,
                l2: Some(crate::transit::L2Path {
                    oif: 7,
                    mtu: 1500,
                    smac: [2, 0, 0, 0, 0, 1],
                    dmac: [2, 0, 0, 0, 0, 2],
                    veth: true,
                }),
            },
        );
        t.peers.insert(
            v4(3, 3322),
            TransitPeer {
                mtu: 9000,
                up: false,
                punt: true,
                l2: None,
            },
        );
        t.routes.insert(v4(9, 3322), v4(2, 3322));
        let d = desired(&t);
        assert_eq!(d.config.family, 4);
        assert_eq!(d.config.n_ee, 2);
        assert_eq!(d.config.ee_types, [0x0A03, 0x0A04, 0, 0]);
        assert_eq!(d.config.punt_all, 0);
        assert_eq!(
            d.peers.get(&AddrKey::new(v4(2, 3322))),
            Some(&PeerVal {
                mtu: 1500,
                flags: PEER_UP | PEER_VETH,
                oif: 7,
                oif_mtu: 1500,
                smac: [2, 0, 0, 0, 0, 1],
                dmac: [2, 0, 0, 0, 0, 2],
            })
        );
        assert_eq!(
            d.peers.get(&AddrKey::new(v4(3, 3322))),
            Some(&PeerVal {
                mtu: 9000,
                flags: PEER_PUNT,
                ..PeerVal::default()
            })
        );
        let r = d.routes.get(&AddrKey::new(v4(9, 3322))).expect("route");
        assert_eq!(r.hop, v4(2, 3322));
        assert_eq!(
            r.nh,
            d.peers[&AddrKey::new(v4(2, 3322))],
            "the next hop's state rides along"
        );
        t.routes.insert(v4(8, 3322), v4(7, 3322));
        let d = desired(&t);
        assert_eq!(
            d.routes[&AddrKey::new(v4(8, 3322))].nh.flags,
            0,
            "a next hop that is no peer is not forwarded to"
        );
        assert!(d.notes.is_empty());
    }

    #[test]
    fn an_ipv6_node_and_what_does_not_fit() {
        let mut me = [0u8; ADDR_LEN];
        me[0] = 0x20;
        me[1] = 0x01;
        me[17] = 1;
        let mut t = TransitTable {
            me,
            punt_all: false,
            ..TransitTable::default()
        };
        assert_eq!(desired(&t).config.family, 6);
        for i in 0..=ROUTES_MAX as u32 {
            let mut k = [0u8; ADDR_LEN];
            k[..4].copy_from_slice(&i.to_be_bytes());
            t.routes.insert(k, me);
        }
        let d = desired(&t);
        assert_eq!(d.config.punt_all, 1);
        assert!(d.routes.is_empty());
        assert_eq!(d.notes.len(), 1, "{:?}", d.notes);
        t.ee_types = vec![1, 2, 3, 4, 5];
        t.routes.clear();
        let d = desired(&t);
        assert_eq!(d.config.n_ee, 4);
        assert!(d.notes[0].contains("first 4"), "{:?}", d.notes);
    }
}
