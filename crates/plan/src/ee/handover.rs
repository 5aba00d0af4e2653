//! The PLAN EE's part of a node's handover to the process taking its place (`anode
//! upgrade`, `anode_core::handover`): what PLAN programs left on the node — flow routes
//! (`flowRoute`), soft state (scouting marks, the ARP table, the `RetransOnRemote` seen set,
//! so at-most-once holds across the upgrade), resident data (`put`), the counters behind
//! `newFlowId`, `generateKey` and retransmission ids and the key seed (ids and keys are not
//! issued twice), device loads and names added at run time. Values travel marshalled
//! (`crate::marshal`) with the time they had left.
//!
//! Not carried: fragments being reassembled and `RetransOnRemote` packets waiting for their
//! acknowledgement (their senders retransmit). Everything comes from another process and is
//! checked: values must unmarshal, namespaces must be known, flow routes must go through an
//! up neighbor; what does not fit is skipped and counted in the error.

use std::time::{Duration, Instant};

use anode_core::NodeContext;
use anode_core::handover::hex_bytes;
use anode_core::{LinkId, NextHop};
use anode_wire::NodeAddr;

use super::PlanEe;
use crate::marshal::{decode_value, encode_value};

/// One expiring entry: namespace or name, key, marshalled value, milliseconds left.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Entry {
    ns: String,
    #[serde(with = "hex_bytes")]
    key: Vec<u8>,
    #[serde(with = "hex_bytes")]
    value: Vec<u8>,
    ms: u64,
}

/// One flow route.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Flow {
    flow: u64,
    link: u32,
    via: NodeAddr,
    ms: u64,
}

/// The EE's state as handed over.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct State {
    flows: Vec<Flow>,
    soft: Vec<Entry>,
    resident: Vec<Entry>,
    next_flow: u64,
    next_key: u64,
    next_retrans: u64,
    #[serde(with = "hex_bytes")]
    key_seed: Vec<u8>,
    device_load: Vec<(u32, i64)>,
    names: Vec<(String, std::net::SocketAddr)>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The namespace constant a name stands for (only the EE's own namespaces are restored).
fn namespace(s: &str) -> Option<&'static str> {
    [
        super::services::RETRANS_SEEN,
        super::scout::MARKS,
        super::packages::ARP,
    ]
    .into_iter()
    .find(|n| *n == s)
}

impl PlanEe {
    /// See the module docs.
    pub(super) fn export(&self, now: Instant) -> serde_json::Value {
        let st = &self.state;
        let mut device_load: Vec<(u32, i64)> =
            st.device_load.iter().map(|(d, l)| (*d, *l)).collect();
        device_load.sort_unstable();
        let mut names: Vec<(String, std::net::SocketAddr)> =
            st.names.iter().map(|(n, a)| (n.clone(), *a)).collect();
        names.sort();
        let s = State {
            flows: st
                .flows
                .export(now)
                .into_iter()
                .map(|(flow, h, left)| Flow {
                    flow,
                    link: h.link.0,
                    via: h.addr,
                    ms: ms(left),
                })
                .collect(),
            soft: st
                .soft
                .export(now)
                .into_iter()
                .map(|(ns, key, v, left)| Entry {
                    ns: ns.to_string(),
                    key,
                    value: encode_value(&v),
                    ms: ms(left),
                })
                .collect(),
            resident: st
                .resident
                .export(now)
                .into_iter()
                .map(|(name, key, v, left)| Entry {
                    ns: hex::encode(name),
                    key,
                    value: encode_value(&v),
                    ms: ms(left),
                })
                .collect(),
            next_flow: st.next_flow,
            next_key: st.next_key,
            next_retrans: st.reliable.next_id,
            key_seed: st.key_seed.to_vec(),
            device_load,
            names,
        };
        serde_json::to_value(s).unwrap_or_default()
    }

    /// See the module docs.
    pub(super) fn import(
        &mut self,
        ctx: &mut NodeContext<'_>,
        v: &serde_json::Value,
    ) -> Result<(), String> {
        let s: State = serde_json::from_value(v.clone())
            .map_err(|e| format!("the PLAN EE's handed-over state does not parse: {e}"))?;
        let now = ctx.now();
        let up = ctx.neighbors();
        let left = |m: u64| Duration::from_millis(m.min(86_400_000));
        let mut skipped = 0usize;
        let st = &mut self.state;
        for f in s.flows {
            let hop = NextHop {
                link: LinkId(f.link),
                addr: f.via,
            };
            if !(up.contains(&hop) && st.flows.import(f.flow, hop, left(f.ms), now)) {
                skipped += 1;
            }
        }
        for e in s.soft {
            let ok = match (namespace(&e.ns), decode_value(&e.value)) {
                (Some(ns), Ok(v)) => st.soft.import(ns, e.key, v, left(e.ms), now),
                _ => false,
            };
            skipped += usize::from(!ok);
        }
        for e in s.resident {
            let ok = match (hex::decode(&e.ns), decode_value(&e.value)) {
                (Ok(name), Ok(v)) => st.resident.put(&name, &e.key, v, left(e.ms), now).is_ok(),
                _ => false,
            };
            skipped += usize::from(!ok);
        }
        st.next_flow = st.next_flow.max(s.next_flow);
        st.next_key = st.next_key.max(s.next_key);
        st.reliable.next_id = st.reliable.next_id.max(s.next_retrans);
        if let Ok(seed) = <[u8; 32]>::try_from(s.key_seed.as_slice()) {
            st.key_seed = seed;
        } else {
            skipped += 1;
        }
        st.device_load.extend(s.device_load);
        st.names.extend(s.names);
        match skipped {
            0 => Ok(()),
            n => Err(format!(
                "{n} PLAN EE entries skipped (malformed or over this node's bounds)"
            )),
        }
    }
}
