//! The data path: classify a routed packet, forward it in place, deliver it, or handle an
//! unknown Type ID.
//!
//! The fast path touches only the transit header: it reads the destination, flags and
//! resource bound, writes the decremented bound and the previous hop, fixes the ANEP checksum
//! incrementally if the packet carries one, and moves the same buffer to the transmit queue.

use anode_routing::{LinkId, NextHop};
use anode_wire::anep::{AnepPacket, BASIC_HEADER_LEN};
use anode_wire::transit::{FLAG_EE_ROUTE, FLAG_EVAL_EVERY_HOP, Transit};
use anode_wire::{NodeAddr, checksum};

use crate::node::Core;
use crate::{DropReason, Transmit};

/// What the transit header says about a packet here.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Class {
    pub for_me: bool,
    pub every_hop: bool,
    pub ee_route: bool,
    pub transit_len: usize,
}

impl Core {
    #[inline]
    pub(crate) fn drop(&mut self, r: DropReason) {
        self.counters.drop(r);
        self.last_drop = Some(r);
        self.settle(crate::ledger::Outcome::Dropped);
    }

    #[inline]
    pub(crate) fn classify(&self, buf: &[u8], anep_len: usize) -> Result<Class, DropReason> {
        let t = Transit::new_checked(buf.get(anep_len..).unwrap_or(&[]))
            .map_err(|_| DropReason::MalformedTransit)?;
        let f = t.flags();
        Ok(Class {
            for_me: t.dst_raw() == self.addr_raw,
            every_hop: f & FLAG_EVAL_EVERY_HOP != 0,
            ee_route: f & FLAG_EE_ROUTE != 0,
            transit_len: t.header_len(),
        })
    }

    /// Forwards a routed packet: spends one unit of resource bound, rewrites the previous hop,
    /// and queues the same buffer on the next hop's link (`via`, or the default route).
    /// Works on the raw header bytes: nothing is decoded, nothing copied. Returns the link it
    /// was queued on.
    #[inline]
    pub(crate) fn forward(
        &mut self,
        mut buf: Vec<u8>,
        anep_len: usize,
        via: Option<NextHop>,
    ) -> Result<LinkId, DropReason> {
        let me = self.addr_raw;
        let Some(Ok(mut t)) = buf.get_mut(anep_len..).map(Transit::new_checked) else {
            self.drop(DropReason::MalformedTransit);
            return Err(DropReason::MalformedTransit);
        };
        let dst = t.dst_raw();
        if dst == me && via.is_none() {
            // A packet routed to ourselves by an EE: nothing to forward to.
            self.drop(DropReason::Loop);
            return Err(DropReason::Loop);
        }
        let rb = t.rb();
        if rb == 0 {
            self.drop(DropReason::RbExhausted);
            return Err(DropReason::RbExhausted);
        }
        let Some(hop) = via.or_else(|| self.routing.lookup_raw(&dst)) else {
            self.drop(DropReason::NoRoute);
            return Err(DropReason::NoRoute);
        };
        let old_prev = (anep_len > BASIC_HEADER_LEN).then(|| t.prev_hop());
        t.set_rb(rb - 1);
        t.set_prev_hop_raw(&me);
        if let Some(old_prev) = old_prev {
            fix_checksum(&mut buf, rb, old_prev, self.addr);
        }
        let r = self.transmit(Transmit {
            link: hop.link,
            dst: hop.addr,
            buf,
        });
        if r.is_ok() {
            self.counters.fast_path += 1;
            self.settle(crate::ledger::Outcome::Forwarded);
        }
        r.map(|()| hop.link)
    }

    /// Verifies the ANEP integrity checksum if the packet carries one. A header without
    /// options (`anep_len` = 8) carries none, so the common case costs no re-parse.
    pub(crate) fn checksum_ok(&self, buf: &[u8], anep_len: usize) -> bool {
        if anep_len == BASIC_HEADER_LEN {
            return true;
        }
        match AnepPacket::new_checked(buf) {
            Ok(p) => p.verify_checksum() != Some(false),
            Err(_) => false,
        }
    }

    pub(crate) fn deliver_datagram(&mut self, buf: Vec<u8>, anep_len: usize, transit_len: usize) {
        if !self.checksum_ok(&buf, anep_len) {
            return self.drop(DropReason::BadChecksum);
        }
        self.deliver_body(anode_wire::anep::TYPE_DATAGRAM, buf, anep_len, transit_len);
    }

    /// ANEP's rule for a Type ID no EE here owns: discard if the flag says so, else forward
    /// toward the destination identifier option.
    pub(crate) fn unknown_type(&mut self, buf: Vec<u8>, discard: bool) {
        if discard {
            return self.drop(DropReason::UnknownTypeDiscarded);
        }
        let dst = AnepPacket::new_checked(&buf[..])
            .ok()
            .and_then(|p| p.destination());
        let Some(dst) = dst else {
            return self.drop(DropReason::UnknownTypeNoDestination);
        };
        if dst == self.addr {
            return self.drop(DropReason::UnknownTypeDiscarded);
        }
        let Some(hop) = self.routing.lookup(&dst) else {
            return self.drop(DropReason::NoRoute);
        };
        if self
            .transmit(Transmit {
                link: hop.link,
                dst: hop.addr,
                buf,
            })
            .is_ok()
        {
            self.counters.unknown_type_forwarded += 1;
            self.settle(crate::ledger::Outcome::Forwarded);
        }
    }
}

/// RFC 1624 incremental update of the ANEP checksum after the fast path rewrote the resource
/// bound and the previous hop.
fn fix_checksum(buf: &mut [u8], old_rb: u16, old_prev: NodeAddr, new_prev: NodeAddr) {
    let Some(off) = AnepPacket::new_checked(&buf[..])
        .ok()
        .and_then(|p| p.checksum_offset())
    else {
        return;
    };
    let Some(cb) = buf.get(off..off + 2) else {
        return;
    };
    let mut c = u16::from_be_bytes([
        cb.first().copied().unwrap_or(0),
        cb.get(1).copied().unwrap_or(0),
    ]);
    // The resource bound and the previous hop are 16-bit aligned within the packet because
    // the ANEP header is a whole number of 32-bit words and their offsets are even.
    c = checksum::update(c, old_rb, old_rb.wrapping_sub(1));
    let (o, n) = (old_prev.to_bytes(), new_prev.to_bytes());
    for (ow, nw) in o.chunks_exact(2).zip(n.chunks_exact(2)) {
        if let ([a, b], [x, y]) = (ow, nw) {
            c = checksum::update(
                c,
                u16::from_be_bytes([*a, *b]),
                u16::from_be_bytes([*x, *y]),
            );
        }
    }
    if let Some(cb) = buf.get_mut(off..off + 2) {
        cb.copy_from_slice(&c.to_be_bytes());
    }
}
