//! The filter hook: packets that match an installed filter leave the fast path and go to
//! whoever installed it (the local anode node, the service-module hooks, an EE).
//!
//! Where each kind is checked (so an empty filter list costs the fast path nothing):
//! - [`Filter::EtherType`]: on every frame, before the IP/ARP dispatch (e.g. 0x88B5: ANEP
//!   directly over Ethernet);
//! - [`Filter::Demux`]: on every IPv4/IPv6 packet the router would forward or consume, after
//!   header validation and before the TTL check;
//! - [`Filter::LocalUdp`]: on UDP packets addressed to one of the router's own addresses
//!   (e.g. port 3322: ANEP over UDP for the local node), after the UDP checksum verified.
//!
//! A diverted frame is counted as `diverted` and returned as [`crate::Verdict::Divert`]; the
//! router does not touch it (no TTL decrement, no rewrite).

/// One byte-pattern key: `packet[offset..offset+value.len()] & mask == value & mask`, with
/// `offset` counted from the start of the IP header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemuxKey {
    /// Offset from the start of the network-layer header.
    pub offset: usize,
    /// Bytes to compare.
    pub value: Vec<u8>,
    /// Mask (same length as `value`; missing bytes count as 0xff).
    pub mask: Vec<u8>,
}

impl DemuxKey {
    /// An exact-match key.
    pub fn exact(offset: usize, value: &[u8]) -> Self {
        DemuxKey {
            offset,
            value: value.to_vec(),
            mask: vec![0xff; value.len()],
        }
    }

    /// True if the key matches `l3` (a key reaching past the packet does not match).
    #[inline]
    pub fn matches(&self, l3: &[u8]) -> bool {
        let Some(b) = l3.get(self.offset..self.offset + self.value.len()) else {
            return false;
        };
        b.iter().zip(&self.value).enumerate().all(|(i, (x, v))| {
            let m = self.mask.get(i).copied().unwrap_or(0xff);
            x & m == v & m
        })
    }
}

/// A filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// UDP to `port` at one of the router's addresses.
    LocalUdp {
        /// Destination port.
        port: u16,
    },
    /// Every frame of this EtherType.
    EtherType(u16),
    /// IP packets (of `ethertype` if given: 0x0800 or 0x86DD) matching every key.
    Demux {
        /// Restrict to one family.
        ethertype: Option<u16>,
        /// Keys, all of which must match.
        keys: Vec<DemuxKey>,
    },
}

/// Handle of an installed filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FilterId(pub u32);

/// The installed filters.
#[derive(Debug, Default, Clone)]
pub(crate) struct Filters {
    next: u32,
    list: Vec<(FilterId, Filter)>,
    pub(crate) any_ethertype: bool,
    pub(crate) any_demux: bool,
    pub(crate) any_udp: bool,
}

impl Filters {
    pub(crate) fn add(&mut self, f: Filter) -> FilterId {
        let id = FilterId(self.next);
        self.next += 1;
        self.list.push((id, f));
        self.refresh();
        id
    }

    pub(crate) fn remove(&mut self, id: FilterId) -> bool {
        let n = self.list.len();
        self.list.retain(|(i, _)| *i != id);
        self.refresh();
        n != self.list.len()
    }

    fn refresh(&mut self) {
        self.any_ethertype = self
            .list
            .iter()
            .any(|(_, f)| matches!(f, Filter::EtherType(_)));
        self.any_demux = self
            .list
            .iter()
            .any(|(_, f)| matches!(f, Filter::Demux { .. }));
        self.any_udp = self
            .list
            .iter()
            .any(|(_, f)| matches!(f, Filter::LocalUdp { .. }));
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Filter> {
        self.list.iter().map(|(_, f)| f)
    }

    pub(crate) fn match_ethertype(&self, t: u16) -> Option<FilterId> {
        self.list.iter().find_map(|(id, f)| match f {
            Filter::EtherType(x) if *x == t => Some(*id),
            _ => None,
        })
    }

    pub(crate) fn match_demux(&self, ethertype: u16, l3: &[u8]) -> Option<FilterId> {
        self.list.iter().find_map(|(id, f)| match f {
            Filter::Demux { ethertype: e, keys }
                if e.is_none_or(|e| e == ethertype) && keys.iter().all(|k| k.matches(l3)) =>
            {
                Some(*id)
            }
            _ => None,
        })
    }

    pub(crate) fn match_udp(&self, port: u16) -> Option<FilterId> {
        self.list.iter().find_map(|(id, f)| match f {
            Filter::LocalUdp { port: p } if *p == port => Some(*id),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demux_keys() {
        let k = DemuxKey {
            offset: 9,
            value: vec![17],
            mask: vec![0xff],
        };
        let mut pkt = [0u8; 20];
        assert!(!k.matches(&pkt));
        pkt[9] = 17;
        assert!(k.matches(&pkt));
        assert!(!k.matches(&pkt[..9]));
        let masked = DemuxKey {
            offset: 0,
            value: vec![0x40],
            mask: vec![0xf0],
        };
        pkt[0] = 0x45;
        assert!(masked.matches(&pkt));
        let mut fs = Filters::default();
        let id = fs.add(Filter::Demux {
            ethertype: Some(0x0800),
            keys: vec![k, masked],
        });
        assert!(fs.any_demux);
        assert_eq!(fs.match_demux(0x0800, &pkt), Some(id));
        assert_eq!(fs.match_demux(0x86dd, &pkt), None);
        assert!(fs.remove(id));
        assert!(!fs.any_demux);
    }
}
