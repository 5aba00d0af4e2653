//! The eBPF maps' key and value layouts (mirrors of the structs in `bpf/fastpath.c`) and the
//! translation of an [`anode_ip::FastTable`] into the map contents the program needs
//! ([`Desired`]), including what to do when the table does not fit the maps' fixed bounds
//! (punt the affected family as a whole: correct, only slower).
//!
//! Pure: no syscalls here, so it is unit-tested without root.

use std::collections::BTreeMap;
use std::net::IpAddr;

use anode_ip::router::NeighKey;
use anode_ip::{DemuxKey, FastTable, IpCidr};

/// `MAX_FILTERS` in the C program.
pub const MAX_FILTERS: usize = 8;
/// `MAX_KEYS` in the C program (keys per filter, after splitting long keys).
pub const MAX_KEYS: usize = 4;
/// `KEY_BYTES` in the C program.
pub const KEY_BYTES: usize = 16;
/// `MAX_KEY_OFFSET` in the C program.
pub const MAX_KEY_OFFSET: usize = 1500;

/// `IFINDEX_MAX` in the C program: the `ifaces` array's size; interfaces with a larger
/// ifindex are not on the fast path.
pub const IFINDEX_MAX: u32 = 4096;
/// Routes per family.
pub const ROUTES_MAX: usize = 65536;
/// Neighbor entries.
pub const NEIGH_MAX: usize = 16384;
/// Punted addresses per family (host routes marked `punt` in the LPM tries).
pub const PUNT_MAX: usize = 4096;

/// Index of each counter in `struct stats` (`enum stat` in the C program).
pub mod stat {
    pub const FWD_V4: usize = 0;
    pub const FWD_V6: usize = 1;
    pub const FWD_BYTES: usize = 2;
    pub const NOT_IP: usize = 3;
    pub const NOT_OUR_MAC: usize = 4;
    pub const BAD_HEADER: usize = 5;
    pub const OPTS_FRAG: usize = 6;
    pub const MARTIAN: usize = 7;
    pub const PUNTED: usize = 8;
    pub const FILTER: usize = 9;
    pub const TTL: usize = 10;
    pub const NO_ROUTE: usize = 11;
    pub const TOO_BIG: usize = 12;
    pub const NO_NEIGHBOR: usize = 13;
    pub const ERROR: usize = 14;
    /// Not a verdict: counted besides one for a non-linear skb whose headers were pulled.
    pub const PULLED: usize = 15;
    pub const COUNT: usize = 16;
}

/// `struct iface_val`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IfaceVal {
    pub mac: [u8; 6],
    /// 1 for an interface of the router's; 0 in an unused array slot.
    pub valid: u16,
    pub mtu: u32,
    pub id: u32,
}

/// `struct route_val`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RouteVal {
    pub ifindex: u32,
    pub gw_family: u8,
    /// 1: a host route for one of the router's own or broadcast addresses (passed on).
    pub punt: u8,
    pub pad: [u8; 2],
    pub gw: [u8; 16],
    /// The outgoing interface's MAC and MTU (the program needs no second interface lookup).
    pub mac: [u8; 6],
    pub pad2: u16,
    pub mtu: u32,
}

/// `struct neigh_key`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct NeighKeyC {
    pub ifindex: u32,
    pub family: u8,
    pub pad: [u8; 3],
    pub addr: [u8; 16],
}

/// `struct neigh_val`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NeighVal {
    pub mac: [u8; 6],
    pub used: u8,
    pub pad: u8,
}

/// `struct demux_key`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DemuxKeyC {
    pub offset: u16,
    pub len: u8,
    pub pad: u8,
    pub value: [u8; KEY_BYTES],
    pub mask: [u8; KEY_BYTES],
}

/// `struct demux_filter`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DemuxFilterC {
    pub ethertype: u16,
    pub nkeys: u8,
    pub pad: u8,
    pub keys: [DemuxKeyC; MAX_KEYS],
}

/// `struct config`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConfigC {
    pub punt_all_v4: u8,
    pub punt_all_v6: u8,
    pub nfilters: u8,
    pub pad: u8,
    /// The furthest byte from the IP header any key of `filters` reads (0 with none): how
    /// much of a non-linear skb the TC program pulls into the linear part beyond the headers.
    pub key_end: u16,
    pub pad2: u16,
    pub filters: [DemuxFilterC; MAX_FILTERS],
}

/// `struct stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatsC {
    pub c: [u64; stat::COUNT],
}

// The C layouts (clang, BPF target): checked here so a change on one side only fails loudly.
const _: () = assert!(size_of::<IfaceVal>() == 16);
const _: () = assert!(size_of::<RouteVal>() == 36);
const _: () = assert!(size_of::<NeighKeyC>() == 24);
const _: () = assert!(size_of::<NeighVal>() == 8);
const _: () = assert!(size_of::<DemuxKeyC>() == 36);
const _: () = assert!(size_of::<DemuxFilterC>() == 148);
const _: () = assert!(size_of::<ConfigC>() == 8 + 148 * MAX_FILTERS);
const _: () = assert!(size_of::<StatsC>() == 8 * stat::COUNT);

// SAFETY: all of these are `repr(C)`, `Copy`, made only of integers and integer arrays, with
// every padding byte an explicit field, so any byte pattern is a valid value and converting
// them to and from the kernel's bytes is sound.
unsafe impl aya::Pod for IfaceVal {}
// SAFETY: as above.
unsafe impl aya::Pod for RouteVal {}
// SAFETY: as above.
unsafe impl aya::Pod for NeighKeyC {}
// SAFETY: as above.
unsafe impl aya::Pod for NeighVal {}
// SAFETY: as above.
unsafe impl aya::Pod for DemuxKeyC {}
// SAFETY: as above.
unsafe impl aya::Pod for DemuxFilterC {}
// SAFETY: as above.
unsafe impl aya::Pod for ConfigC {}
// SAFETY: as above.
unsafe impl aya::Pod for StatsC {}

/// An address as the program keys it: family and 16 bytes (IPv4 as `::ffff:a.b.c.d`).
pub fn addr16(a: IpAddr) -> (u8, [u8; 16]) {
    match a {
        IpAddr::V4(v) => (4, v.to_ipv6_mapped().octets()),
        IpAddr::V6(v) => (6, v.octets()),
    }
}

/// Everything the maps must hold for one table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    /// ifindex -> interface.
    pub ifaces: BTreeMap<u32, IfaceVal>,
    /// (prefix length, network) -> route.
    pub routes_v4: BTreeMap<(u32, [u8; 4]), RouteVal>,
    /// (prefix length, network) -> route.
    pub routes_v6: BTreeMap<(u32, [u8; 16]), RouteVal>,
    /// Key -> (the router's key, MAC).
    pub neigh: BTreeMap<NeighKeyC, (NeighKey, [u8; 6])>,
    /// The config entry.
    pub config: ConfigC,
    /// What did not fit and what was done about it.
    pub notes: Vec<String>,
}

/// The map contents for `t`, with `ifindex[i]` the Linux ifindex of the router's `IfaceId(i)`.
/// Interfaces without an ifindex are not the fast path's: routes out of them are kept (so they
/// still shadow shorter prefixes) with ifindex 0, which the program passes on.
pub fn desired(t: &FastTable, ifindex: &[u32]) -> Desired {
    let mut d = Desired::default();
    let idx = |id: anode_ip::IfaceId| ifindex.get(id.0 as usize).copied().filter(|i| *i != 0);
    desired_ifaces(&mut d, t, &idx);
    let mut punt_all = (t.punt_all_v4, t.punt_all_v6);
    desired_routes(&mut d, t, &idx, &mut punt_all);
    desired_neighbors(&mut d, t, &idx);
    desired_filters(&mut d, t, &mut punt_all);
    d.config.punt_all_v4 = u8::from(punt_all.0);
    d.config.punt_all_v6 = u8::from(punt_all.1);
    d
}

/// The interfaces the fast path owns, by ifindex.
fn desired_ifaces(d: &mut Desired, t: &FastTable, idx: &dyn Fn(anode_ip::IfaceId) -> Option<u32>) {
    for f in &t.ifaces {
        if let Some(i) = idx(f.id) {
            d.ifaces.insert(
                i,
                IfaceVal {
                    mac: f.mac.0,
                    valid: 1,
                    mtu: u32::try_from(f.mtu).unwrap_or(u32::MAX),
                    id: f.id.0,
                },
            );
            if i >= IFINDEX_MAX {
                d.notes.push(format!(
                    "interface {} has ifindex {i} (the fast path indexes up to {IFINDEX_MAX}): frames arriving on it go to the router",
                    f.id.0
                ));
            }
        }
    }
}

/// The routes, the punted addresses as host routes, and what overflows (a family whose
/// table does not fit goes to the router whole: `punt_all` (v4, v6)).
fn desired_routes(
    d: &mut Desired,
    t: &FastTable,
    idx: &dyn Fn(anode_ip::IfaceId) -> Option<u32>,
    punt_all: &mut (bool, bool),
) {
    for r in &t.routes {
        let (gw_family, gw) = match r.gateway {
            Some(g) => addr16(g),
            None => (0, [0; 16]),
        };
        // A route out of an interface the fast path does not own (or does not know) is
        // kept with ifindex 0: the program passes such packets on.
        let out = idx(r.iface).and_then(|i| d.ifaces.get(&i).map(|v| (i, *v)));
        let v = RouteVal {
            ifindex: out.map_or(0, |(i, _)| i),
            gw_family,
            punt: 0,
            pad: [0; 2],
            gw,
            mac: out.map_or([0; 6], |(_, v)| v.mac),
            pad2: 0,
            mtu: out.map_or(0, |(_, v)| v.mtu),
        };
        match r.prefix.network() {
            IpCidr::V4(c) => {
                d.routes_v4
                    .insert((u32::from(c.prefix_len), c.addr.octets()), v);
            }
            IpCidr::V6(c) => {
                d.routes_v6
                    .insert((u32::from(c.prefix_len), c.addr.octets()), v);
            }
        }
    }
    // Punted addresses become host routes marked `punt`: the program's one LPM lookup then
    // tells both whether a destination is the router's and where else it goes.
    let punt = RouteVal {
        punt: 1,
        ..RouteVal::default()
    };
    if t.punt_v4.len() > PUNT_MAX {
        d.notes.push(format!(
            "{} own/broadcast IPv4 addresses exceed the fast path's {PUNT_MAX}: all IPv4 goes to the router",
            t.punt_v4.len()
        ));
        punt_all.0 = true;
    } else {
        for a in &t.punt_v4 {
            d.routes_v4.insert((32, a.octets()), punt);
        }
    }
    if t.punt_v6.len() > PUNT_MAX {
        d.notes.push(format!(
            "{} own IPv6 addresses exceed the fast path's {PUNT_MAX}: all IPv6 goes to the router",
            t.punt_v6.len()
        ));
        punt_all.1 = true;
    } else {
        for a in &t.punt_v6 {
            d.routes_v6.insert((128, a.octets()), punt);
        }
    }
    if d.routes_v4.len() > ROUTES_MAX {
        d.notes.push(format!(
            "{} IPv4 routes exceed the fast path's {ROUTES_MAX}: all IPv4 goes to the router",
            d.routes_v4.len()
        ));
        d.routes_v4.clear();
        punt_all.0 = true;
    }
    if d.routes_v6.len() > ROUTES_MAX {
        d.notes.push(format!(
            "{} IPv6 routes exceed the fast path's {ROUTES_MAX}: all IPv6 goes to the router",
            d.routes_v6.len()
        ));
        d.routes_v6.clear();
        punt_all.1 = true;
    }
}

/// The resolved neighbors on interfaces the fast path owns (up to its table size).
fn desired_neighbors(
    d: &mut Desired,
    t: &FastTable,
    idx: &dyn Fn(anode_ip::IfaceId) -> Option<u32>,
) {
    for (key, mac) in &t.neighbors {
        let Some(i) = idx(key.0) else { continue };
        if d.neigh.len() >= NEIGH_MAX {
            d.notes.push(format!(
                "{} resolved neighbors exceed the fast path's {NEIGH_MAX}: packets to the rest go to the router",
                t.neighbors.len()
            ));
            break;
        }
        let (family, addr) = addr16(key.1);
        d.neigh.insert(
            NeighKeyC {
                ifindex: i,
                family,
                pad: [0; 3],
                addr,
            },
            (*key, mac.0),
        );
    }
}

/// The demux filters. A packet the fast path forwards is at most the largest MTU long, so a
/// key reaching past that can never match one: such a filter is left out. A filter the
/// program cannot hold sends its family to the router whole.
fn desired_filters(d: &mut Desired, t: &FastTable, punt_all: &mut (bool, bool)) {
    let max_len = t.ifaces.iter().map(|f| f.mtu).max().unwrap_or(65535);
    let mut n = 0usize;
    for f in &t.demux {
        let (v4, v6) = match f.ethertype {
            None => (true, true),
            Some(0x0800) => (true, false),
            Some(0x86dd) => (false, true),
            // Another EtherType never matches an IP packet.
            Some(_) => continue,
        };
        match encode_filter(f.ethertype.unwrap_or(0), &f.keys, max_len) {
            Encoded::Never => {}
            Encoded::Fits(c) if n < MAX_FILTERS => {
                if let Some(slot) = d.config.filters.get_mut(n) {
                    *slot = c;
                }
                n += 1;
            }
            Encoded::Fits(_) | Encoded::TooBig => {
                let why = if n >= MAX_FILTERS {
                    format!("more than {MAX_FILTERS} demux filters")
                } else {
                    format!(
                        "a demux filter with keys beyond {MAX_KEYS} x {KEY_BYTES} bytes at offsets up to {MAX_KEY_OFFSET}"
                    )
                };
                if v4 && !punt_all.0 {
                    d.notes.push(format!("{why}: all IPv4 goes to the router"));
                    punt_all.0 = true;
                }
                if v6 && !punt_all.1 {
                    d.notes.push(format!("{why}: all IPv6 goes to the router"));
                    punt_all.1 = true;
                }
            }
        }
    }
    d.config.nfilters = n as u8;
    d.config.key_end = d
        .config
        .filters
        .iter()
        .take(n)
        .flat_map(|f| f.keys.iter().take(usize::from(f.nkeys)))
        .map(|k| k.offset + u16::from(k.len))
        .max()
        .unwrap_or(0);
}

/// A filter as the program can hold it, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encoded {
    /// It fits.
    Fits(DemuxFilterC),
    /// It can never match a packet the fast path would forward.
    Never,
    /// It does not fit the program's bounds.
    TooBig,
}

/// Encodes one demux filter: keys longer than [`KEY_BYTES`] are split into consecutive
/// keys (all must match either way, and the last piece reaches as far as the whole key), the
/// value is stored masked, missing mask bytes count as 0xff (like [`DemuxKey::matches`]).
pub fn encode_filter(ethertype: u16, keys: &[DemuxKey], max_len: usize) -> Encoded {
    let mut out = DemuxFilterC {
        ethertype,
        ..DemuxFilterC::default()
    };
    let mut pieces: Vec<DemuxKeyC> = Vec::new();
    for k in keys {
        let end = k.offset.saturating_add(k.value.len());
        if end > max_len {
            return Encoded::Never;
        }
        if k.value.is_empty() {
            // Matches iff the offset is within the packet.
            if k.offset > MAX_KEY_OFFSET {
                return Encoded::TooBig;
            }
            pieces.push(DemuxKeyC {
                offset: k.offset as u16,
                ..DemuxKeyC::default()
            });
            continue;
        }
        let mut start = 0usize;
        while start < k.value.len() {
            let len = (k.value.len() - start).min(KEY_BYTES);
            let off = k.offset + start;
            if off > MAX_KEY_OFFSET {
                return Encoded::TooBig;
            }
            let mut c = DemuxKeyC {
                offset: off as u16,
                len: len as u8,
                ..DemuxKeyC::default()
            };
            for i in 0..len {
                let v = k.value.get(start + i).copied().unwrap_or(0);
                let m = k.mask.get(start + i).copied().unwrap_or(0xff);
                if let (Some(cv), Some(cm)) = (c.value.get_mut(i), c.mask.get_mut(i)) {
                    *cv = v & m;
                    *cm = m;
                }
            }
            pieces.push(c);
            start += len;
        }
    }
    if pieces.len() > MAX_KEYS {
        return Encoded::TooBig;
    }
    out.nkeys = pieces.len() as u8;
    for (slot, p) in out.keys.iter_mut().zip(pieces) {
        *slot = p;
    }
    Encoded::Fits(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_ip::{FastDemux, FastIface, FastRoute, IfaceId, MacAddr};

    fn table() -> FastTable {
        FastTable {
            ifaces: vec![
                FastIface {
                    id: IfaceId(0),
                    mac: MacAddr([2, 0, 0, 0, 0, 1]),
                    mtu: 1500,
                },
                FastIface {
                    id: IfaceId(1),
                    mac: MacAddr([2, 0, 0, 0, 0, 2]),
                    mtu: 1500,
                },
            ],
            routes: vec![
                FastRoute {
                    prefix: "198.18.1.0/24".parse().unwrap(),
                    iface: IfaceId(0),
                    gateway: None,
                },
                FastRoute {
                    prefix: "198.19.0.0/16".parse().unwrap(),
                    iface: IfaceId(1),
                    gateway: Some("198.18.2.2".parse().unwrap()),
                },
                FastRoute {
                    prefix: "2001:2:0:9::/64".parse().unwrap(),
                    iface: IfaceId(2),
                    gateway: None,
                },
            ],
            neighbors: vec![
                (
                    (IfaceId(1), "198.18.2.2".parse().unwrap()),
                    MacAddr([2, 0, 0, 0, 9, 9]),
                ),
                (
                    (IfaceId(2), "2001:2:0:9::5".parse().unwrap()),
                    MacAddr([2, 0, 0, 0, 9, 8]),
                ),
            ],
            punt_v4: vec!["198.18.1.2".parse().unwrap()],
            punt_v6: vec!["2001:2:0:1::2".parse().unwrap()],
            punt_all_v4: false,
            punt_all_v6: false,
            demux: vec![],
        }
    }

    #[test]
    fn table_to_maps() {
        let d = desired(&table(), &[7, 9]);
        assert_eq!(d.ifaces.len(), 2);
        assert_eq!(d.ifaces[&9].mac, [2, 0, 0, 0, 0, 2]);
        assert_eq!(d.ifaces[&9].id, 1);
        let via = d.routes_v4[&(16, [198, 19, 0, 0])];
        assert_eq!(via.ifindex, 9);
        assert_eq!(via.gw_family, 4);
        assert_eq!(&via.gw[10..], &[0xff, 0xff, 198, 18, 2, 2]);
        // A route out of an interface the fast path does not own stays, with ifindex 0.
        let other = d.routes_v6.values().next().unwrap();
        assert_eq!(other.ifindex, 0);
        // Its neighbor is left out.
        assert_eq!(d.neigh.len(), 1);
        let (k, (rk, mac)) = d.neigh.iter().next().unwrap();
        assert_eq!((k.ifindex, k.family), (9, 4));
        assert_eq!(rk.0, IfaceId(1));
        assert_eq!(*mac, [2, 0, 0, 0, 9, 9]);
        // The router's own address is a host route marked punt.
        let own = d.routes_v4[&(32, [198, 18, 1, 2])];
        assert_eq!((own.punt, own.ifindex), (1, 0));
        assert_eq!((d.config.nfilters, d.config.key_end), (0, 0));
        assert!(d.notes.is_empty());
    }

    #[test]
    fn filters_fit_split_or_punt() {
        let mut t = table();
        // A 20-byte key becomes two pieces; masks default to 0xff; the value is stored masked.
        t.demux.push(FastDemux {
            ethertype: Some(0x0800),
            keys: vec![DemuxKey {
                offset: 12,
                value: vec![0xff; 20],
                mask: vec![0x0f],
            }],
        });
        // Never matches a forwardable packet (past every MTU): left out.
        t.demux.push(FastDemux {
            ethertype: None,
            keys: vec![DemuxKey::exact(1499, &[1, 2])],
        });
        // Not an IP EtherType: left out.
        t.demux.push(FastDemux {
            ethertype: Some(0x88b5),
            keys: vec![],
        });
        let d = desired(&t, &[7, 9]);
        assert_eq!(d.config.nfilters, 1);
        let f = d.config.filters[0];
        assert_eq!((f.ethertype, f.nkeys), (0x0800, 2));
        assert_eq!((f.keys[0].offset, f.keys[0].len), (12, 16));
        assert_eq!((f.keys[1].offset, f.keys[1].len), (28, 4));
        assert_eq!(f.keys[0].mask[0], 0x0f);
        assert_eq!(f.keys[0].value[0], 0x0f);
        assert_eq!(f.keys[0].mask[1], 0xff);
        assert_eq!(d.config.punt_all_v4, 0);
        // The TC program pulls a non-linear skb up to the furthest key byte (12 + 20).
        assert_eq!(d.config.key_end, 32);

        // Five keys do not fit: the family goes to the router as a whole.
        t.demux.push(FastDemux {
            ethertype: Some(0x86dd),
            keys: (0..5).map(|i| DemuxKey::exact(i, &[0])).collect(),
        });
        let d = desired(&t, &[7, 9]);
        assert_eq!((d.config.punt_all_v4, d.config.punt_all_v6), (0, 1));
        assert_eq!(d.notes.len(), 1, "{:?}", d.notes);

        // Nine filters: the ninth punts both families (it has no EtherType).
        let mut t = table();
        for i in 0..9 {
            t.demux.push(FastDemux {
                ethertype: None,
                keys: vec![DemuxKey::exact(i, &[0])],
            });
        }
        let d = desired(&t, &[7, 9]);
        assert_eq!(d.config.nfilters, 8);
        assert_eq!((d.config.punt_all_v4, d.config.punt_all_v6), (1, 1));
    }
}
