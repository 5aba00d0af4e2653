//! Service modules in the IP path of `anode router` (NetServ / Openet style): packets that
//! match an `[[ip_filter]]` leave the IP fast path (`anode_ip::Filter::Demux`) and go through
//! the packet processors of the modules in `[[module]]` (the `anode-modules` host, the same
//! one `anode node` runs); packets that match no filter stay on the fast path.
//!
//! ```toml
//! [modules]
//! trusted_keys = ["HEX"]          # publisher keys (`anode keygen`); packages must be signed
//!
//! [[module]]                      # installed, then started, in this order
//! package = "ratelimit-1.0.0.amod"   # relative to the config file
//! start = true                    # default
//! [module.config]                 # values for the module's configuration schema
//! limit = 3
//!
//! [[ip_filter]]                   # which IP packets the modules see
//! family = 4                      # optional: 4 or 6
//! keys = [{ offset = 9, value = "11" }, { offset = 22, value = "1389" }]   # UDP to port 5001
//! ```
//!
//! Key offsets count from the start of the IP header (a module's own manifest filters
//! apply to the same bytes, so a processor may see fewer packets than the router diverts);
//! values and masks are hex.
//!
//! A diverted packet runs the `ingress` processors, then the `pre-routing` ones, with the
//! interface index as the input link. Verdicts: *continue* (the buffer possibly modified:
//! the IPv4 header checksum is recomputed here, a transport checksum is the module's
//! business) sends the packet on through `IpRouter::reinject`, which routes it with the
//! filters skipped; *drop* and *consume* end it; *redirect* and packets a processor emits
//! name anode links, which the IP path does not have: they are dropped and counted. The
//! counts are printed on exit.

use std::path::Path;
use std::time::Instant;

use anode_core::{HookInfo, HookPoint, HookVerdict, LinkId, PacketHooks};
use anode_ip::wire::{Ipv4Packet, Ipv6Packet, checksum};
use anode_ip::{DemuxKey, Filter, FilterId, IfaceId, IpRouter};
use anode_modules::{ModRuntime, ModuleHost, Package, Trust};
use serde::Deserialize;

/// Most module instances of the router's runtime.
const MAX_INSTANCES: u32 = 64;

/// `[modules]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModulesSection {
    #[serde(default)]
    trusted_keys: Vec<String>,
}

/// One `[[module]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModuleSection {
    package: String,
    #[serde(default = "yes")]
    start: bool,
    #[serde(default)]
    config: toml::Table,
}

fn yes() -> bool {
    true
}

/// One `[[ip_filter]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct IpFilterSection {
    family: Option<u8>,
    keys: Vec<KeySection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeySection {
    offset: usize,
    value: String,
    mask: Option<String>,
}

/// What the processors did with the diverted packets.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ModuleCounts {
    pub seen: u64,
    pub continued: u64,
    pub dropped: u64,
    pub consumed: u64,
    pub redirect_dropped: u64,
    pub emits_dropped: u64,
    pub malformed: u64,
}

/// The module host in the IP path and the router filters that feed it.
pub(super) struct IpModules {
    host: ModuleHost,
    filters: Vec<FilterId>,
    counts: ModuleCounts,
}

fn hex_bytes(s: &str, what: &str) -> Result<Vec<u8>, String> {
    hex::decode(s).map_err(|e| {
        format!(
            "[[ip_filter]] key {what} \"{s}\": {e}; write bytes as hex, e.g. \"11\" or \"1389\""
        )
    })
}

impl IpModules {
    /// Loads, verifies and starts the modules and installs the filters into `router`.
    /// `None` when the file configures no modules.
    pub(super) fn load(
        path: &Path,
        keys: &ModulesSection,
        modules: &[ModuleSection],
        filters: &[IpFilterSection],
        router: &mut IpRouter,
    ) -> Result<Option<IpModules>, String> {
        let cfg = path.display();
        if modules.is_empty() && filters.is_empty() {
            return Ok(None);
        }
        if modules.is_empty() {
            return Err(format!(
                "{cfg}: [[ip_filter]] without [[module]]: the diverted packets would go nowhere; add the modules that process them, or remove the filters"
            ));
        }
        if filters.is_empty() {
            return Err(format!(
                "{cfg}: [[module]] without [[ip_filter]]: the modules would see no IP packets; add an [[ip_filter]] with the demux keys of the packets they should process"
            ));
        }
        if keys.trusted_keys.is_empty() {
            return Err(format!(
                "{cfg}: [[module]] entries need trusted publisher keys, and [modules] trusted_keys is empty; add the hex public key (`anode keygen` writes BASE.pub) that signed the packages"
            ));
        }
        let trust =
            Trust::from_hex(&keys.trusted_keys).map_err(|e| format!("{cfg}: [modules]: {e}"))?;
        let rt = ModRuntime::new(MAX_INSTANCES)
            .map_err(|e| format!("cannot start the module runtime: {e}"))?;
        let mut host = ModuleHost::new(rt, trust);
        host.set_links(Vec::new());
        let base = path.parent().unwrap_or(Path::new("."));
        let mut to_start = Vec::new();
        for m in modules {
            let file = base.join(&m.package);
            let pkg = Package::read(&file).map_err(|e| {
                format!(
                    "{cfg}: [[module]] {}: {e}; check the path (relative to the config file) or make the package with `anode module pack` and `sign`",
                    m.package
                )
            })?;
            let name = pkg.manifest.name.clone();
            host.install(pkg, &m.config).map_err(|e| {
                format!(
                    "{cfg}: [[module]] {}: {e}; sign the package with a key listed in [modules] trusted_keys, or fix [module.config]",
                    m.package
                )
            })?;
            if m.start {
                to_start.push((m, name));
            }
        }
        for (m, name) in to_start {
            host.start(&name).map_err(|e| {
                format!(
                    "{cfg}: [[module]] {}: did not start: {e}; add a [[module]] that provides what it misses, or set start = false",
                    m.package
                )
            })?;
        }
        let mut ids = Vec::new();
        for f in filters {
            let ethertype = match f.family {
                None => None,
                Some(4) => Some(anode_ip::wire::EtherType::IPV4),
                Some(6) => Some(anode_ip::wire::EtherType::IPV6),
                Some(x) => {
                    return Err(format!(
                        "{cfg}: [[ip_filter]] family {x}: write 4 or 6, or leave it out for both"
                    ));
                }
            };
            if f.keys.is_empty() {
                return Err(format!(
                    "{cfg}: [[ip_filter]] with no keys would divert every IP packet off the fast path; give at least one key"
                ));
            }
            let mut keys = Vec::new();
            for k in &f.keys {
                let value = hex_bytes(&k.value, "value")?;
                let mask = match &k.mask {
                    Some(m) => hex_bytes(m, "mask")?,
                    None => vec![0xff; value.len()],
                };
                if value.is_empty() || mask.len() != value.len() {
                    return Err(format!(
                        "{cfg}: [[ip_filter]] key at offset {}: value and mask must be non-empty and of the same length",
                        k.offset
                    ));
                }
                keys.push(DemuxKey {
                    offset: k.offset,
                    value,
                    mask,
                });
            }
            ids.push(router.add_filter(Filter::Demux { ethertype, keys }));
        }
        Ok(Some(IpModules {
            host,
            filters: ids,
            counts: ModuleCounts::default(),
        }))
    }

    /// True if `f` is one of this host's filters.
    pub(super) fn owns(&self, f: FilterId) -> bool {
        self.filters.contains(&f)
    }

    /// Counters.
    pub(super) fn counts(&self) -> ModuleCounts {
        self.counts
    }

    /// The modules' names, states and packet counts, for the exit report.
    pub(super) fn report(&self) -> Vec<String> {
        self.host
            .list()
            .into_iter()
            .map(|i| {
                format!(
                    "{}@{} {:?} packets {}{}",
                    i.name,
                    i.version,
                    i.state,
                    i.packets,
                    i.last_error
                        .map(|e| format!(" (last error: {e})"))
                        .unwrap_or_default()
                )
            })
            .collect()
    }

    /// Runs a diverted frame through the processors (see the module docs).
    pub(super) fn divert(
        &mut self,
        now: Instant,
        router: &mut IpRouter,
        iface: IfaceId,
        frame: &[u8],
        l3: usize,
    ) {
        self.counts.seen += 1;
        let Some(len) = ip_len(frame.get(l3..).unwrap_or(&[])) else {
            self.counts.malformed += 1;
            return;
        };
        let (Some(head), Some(pkt)) = (frame.get(..l3), frame.get(l3..l3 + len)) else {
            self.counts.malformed += 1;
            return;
        };
        let mut buf = pkt.to_vec();
        let mut emit = Vec::new();
        for point in [HookPoint::Ingress, HookPoint::PreRouting] {
            if !self.host.wants(point) {
                continue;
            }
            let info = HookInfo {
                point,
                now,
                in_link: Some(LinkId(iface.0)),
                out_link: None,
            };
            buf = match self.host.run(info, buf, &mut emit) {
                HookVerdict::Continue(b) => b,
                HookVerdict::Drop => {
                    self.counts.dropped += 1;
                    return self.drop_emits(&mut emit);
                }
                HookVerdict::Consumed => {
                    self.counts.consumed += 1;
                    return self.drop_emits(&mut emit);
                }
                HookVerdict::Redirect(..) => {
                    self.counts.redirect_dropped += 1;
                    return self.drop_emits(&mut emit);
                }
            };
        }
        self.drop_emits(&mut emit);
        self.counts.continued += 1;
        fix_ipv4_header_checksum(&mut buf);
        let mut out = Vec::with_capacity(head.len() + buf.len());
        out.extend_from_slice(head);
        out.extend_from_slice(&buf);
        router.reinject(now, iface, out);
    }

    fn drop_emits(&mut self, emit: &mut Vec<anode_core::Transmit>) {
        self.counts.emits_dropped += emit.len() as u64;
        emit.clear();
    }
}

/// The length of the IP packet at the start of `b` (link padding excluded), if it parses.
fn ip_len(b: &[u8]) -> Option<usize> {
    match b.first()? >> 4 {
        4 => Ipv4Packet::new_checked(b)
            .ok()
            .map(|p| usize::from(p.total_len())),
        6 => Ipv6Packet::new_checked(b)
            .ok()
            .map(|p| 40 + usize::from(p.payload_len())),
        _ => None,
    }
}

/// Recomputes an IPv4 header checksum (a processor may have changed header bytes).
fn fix_ipv4_header_checksum(b: &mut [u8]) {
    let Some(&v) = b.first() else {
        return;
    };
    if v >> 4 != 4 {
        return;
    }
    let hl = usize::from(v & 0x0f) * 4;
    if hl < 20 || b.get(..hl).is_none() {
        return;
    }
    if let Some(c) = b.get_mut(10..12) {
        c.copy_from_slice(&[0, 0]);
    }
    let sum = checksum::finish(checksum::sum(b.get(..hl).unwrap_or(&[])));
    if let Some(c) = b.get_mut(10..12) {
        c.copy_from_slice(&sum.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_checksum_is_recomputed() {
        let mut h = [
            0x45u8, 0, 0, 28, 0, 1, 0x40, 0, 64, 17, 0, 0, 198, 18, 1, 1, 198, 18, 3, 2, 0, 0, 0,
            0, 0, 0, 0, 0,
        ];
        fix_ipv4_header_checksum(&mut h);
        assert!(Ipv4Packet::new_checked(&h[..]).unwrap().verify_checksum());
        h[1] = 0xb8; // a processor marks DSCP EF
        fix_ipv4_header_checksum(&mut h);
        assert!(Ipv4Packet::new_checked(&h[..]).unwrap().verify_checksum());
        assert_eq!(ip_len(&h), Some(28));
        // Garbage is left alone and has no length.
        let mut g = [0x4fu8, 1, 2];
        fix_ipv4_header_checksum(&mut g);
        assert_eq!(g, [0x4f, 1, 2]);
        assert_eq!(ip_len(&g), None);
    }
}
