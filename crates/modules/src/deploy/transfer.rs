//! Packages moving between the nodes of a path: the deployment service's answers to transfer
//! messages (serving what it may, taking chunks of its fetches) and its routed sends.

use std::sync::Arc;

use anode_core::NodeContext;
use anode_wire::NodeAddr;
use anode_wire::anep::AnepPacket;
use anode_wire::deploy::{Message, Outcome, Transfer};
use anode_wire::transit::TransitRepr;

use super::fetch::{self, Progress};
use super::{DeployEe, Pending};

impl DeployEe {
    pub(super) fn on_transfer(
        &mut self,
        ctx: &mut NodeContext<'_>,
        from: NodeAddr,
        nonce: [u8; 16],
        t: Transfer,
    ) {
        let now = ctx.now();
        match t {
            Transfer::Want { hash, offset, max } => {
                let bytes = self.cache.get(&hash);
                let chunks = bytes
                    .as_ref()
                    .map(|b| fetch::serve(hash, b, offset, max))
                    .unwrap_or_default();
                let n: u64 = chunks
                    .iter()
                    .map(|c| match c {
                        Transfer::Chunk { data, .. } => data.len() as u64,
                        _ => 0,
                    })
                    .sum();
                if bytes.is_none() || !self.serving.take(&nonce, &hash, n, now) {
                    self.stats.serve_refused += 1;
                    return send_transfer(ctx, from, nonce, &Transfer::Unavailable { hash });
                }
                self.stats.served_bytes += n;
                for c in &chunks {
                    send_transfer(ctx, from, nonce, c);
                }
            }
            Transfer::Chunk {
                hash,
                total,
                offset,
                data,
            } => {
                let Some(f) = self.fetches.get_mut(&hash).filter(|f| f.from.0 == from) else {
                    return;
                };
                match f.chunk(hash, (total, offset, &data), now) {
                    Progress::None => {}
                    Progress::Stored => self.stats.fetched_bytes += data.len() as u64,
                    Progress::NextWindow(w) => {
                        self.stats.fetched_bytes += data.len() as u64;
                        let (to, n) = f.from;
                        send_transfer(ctx, to, n, &w);
                    }
                    Progress::Done(bytes) => {
                        self.stats.fetched_bytes += data.len() as u64;
                        self.fetches.remove(&hash);
                        self.fetched(ctx, hash, bytes);
                    }
                }
            }
            Transfer::Unavailable { hash } => {
                if self.fetches.get(&hash).is_some_and(|f| f.from.0 == from) {
                    self.fetches.remove(&hash);
                    self.fail_waiting(
                        ctx,
                        &hash,
                        &format!(
                            "the previous node of the service ({from}) does not hold the package"
                        ),
                    );
                }
            }
        }
    }

    /// A fetch completed: cache the package and go on with the requests that waited for it.
    pub(super) fn fetched(&mut self, ctx: &mut NodeContext<'_>, hash: [u8; 32], bytes: Vec<u8>) {
        let bytes = Arc::new(bytes);
        if !self.cache.put(hash, Arc::clone(&bytes)) {
            return self.fail_waiting(
                ctx,
                &hash,
                "the fetched bytes do not match the package's SHA-256",
            );
        }
        let (ready, rest): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|p| p.req.pkg_hash == hash);
        self.waiting = rest;
        for p in ready {
            self.have_package(ctx, p, &bytes);
        }
    }

    pub(super) fn fail_waiting(&mut self, ctx: &mut NodeContext<'_>, hash: &[u8; 32], why: &str) {
        let (failed, rest): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|p| &p.req.pkg_hash == hash);
        self.waiting = rest;
        for mut p in failed {
            self.answer(ctx, &mut p, Outcome::Failed, why.to_string());
        }
    }
}

/// Sends a routed message from this node to `dst`.
pub(super) fn send_routed(ctx: &mut NodeContext<'_>, dst: NodeAddr, flow: [u8; 16], m: &Message) {
    let me = ctx.address();
    let t = TransitRepr {
        flags: 0,
        rb: ctx.default_rb(),
        flow: u64::from_be_bytes(flow[..8].try_into().unwrap_or_default()),
        src: me,
        dst,
        prev_hop: me,
    };
    if let Ok(pkt) = m.to_packet(&t)
        && let Ok(anep_len) = AnepPacket::new_checked(&pkt[..]).map(|a| a.header_len())
    {
        let _ = ctx.forward(pkt, anep_len);
    }
}

pub(super) fn send_transfer(
    ctx: &mut NodeContext<'_>,
    dst: NodeAddr,
    nonce: [u8; 16],
    t: &Transfer,
) {
    send_routed(ctx, dst, nonce, &Message::Transfer(nonce, t.clone()));
}
