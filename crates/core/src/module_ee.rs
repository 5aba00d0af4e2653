//! EE modules on the data path: a packet of a Type ID no built-in EE owns but an EE module
//! does (`PacketHooks::ee_owner`) is checked and routed like any EE's packet by the node
//! (`Node::route_ee`: transit header, cut-through channels, the dispatch reason, the checksum
//! at its destination, the stopped check); here its datagram header is checked, the module
//! runs, and its verdict is carried out.
//!
//! Contract: the module sees the packet only through the hooks (`anode-modules` gives it the
//! payload to change, never the headers), so whatever it returns, the node forwards a packet
//! whose headers it checked itself; every outcome is counted (`to_ee` on entry, a drop reason
//! or the forward/delivery counters after).

use anode_wire::datagram;

use crate::hooks::{EeCall, HookVerdict};
use crate::node::Core;
use crate::{Delivery, DropReason};

impl Core {
    /// Runs the EE module of `call.type_id` on `buf` (headers `anep_len` + `transit_len`
    /// bytes, checked) and carries out its verdict.
    pub(crate) fn run_module_ee(
        &mut self,
        mut call: EeCall,
        buf: Vec<u8>,
        (anep_len, transit_len): (usize, usize),
    ) {
        let body_at = anep_len + transit_len;
        if datagram::parse_body(buf.get(body_at..).unwrap_or(&[])).is_err() {
            return self.drop(DropReason::MalformedEe);
        }
        call.payload_at = body_at + datagram::LEN;
        let Some(mut h) = self.hooks.take() else {
            return self.drop(DropReason::EeDropped);
        };
        let mut emit = Vec::new();
        let v = h.run_ee(call, buf, &mut emit);
        self.hooks = Some(h);
        for t in emit {
            let _ = self.transmit_unhooked(t);
        }
        let for_me = call.why == crate::ee::Dispatch::Destination;
        match v {
            HookVerdict::Continue(b) if for_me => {
                self.deliver_body(call.type_id, b, anep_len, transit_len);
            }
            HookVerdict::Continue(b) => {
                let _ = self.forward(b, anep_len, None);
            }
            HookVerdict::Redirect(hop, b) => {
                let _ = self.forward(b, anep_len, Some(hop));
            }
            HookVerdict::Drop => self.drop(DropReason::EeDropped),
            HookVerdict::Consumed => self.counters.hook_consumed += 1,
        }
    }

    /// Delivers a packet with a datagram header after its transit header to the application
    /// on its port, under `type_id` (the checksum was checked).
    pub(crate) fn deliver_body(
        &mut self,
        type_id: u16,
        buf: Vec<u8>,
        anep_len: usize,
        transit_len: usize,
    ) {
        let Some(t) = buf
            .get(anep_len..)
            .and_then(|tb| anode_wire::transit::Transit::new_checked(tb).ok())
        else {
            return self.drop(DropReason::MalformedTransit);
        };
        let (src, flow, rb) = (t.src(), t.flow(), t.rb());
        let body_at = anep_len + transit_len;
        let Ok((port, _)) = datagram::parse_body(buf.get(body_at..).unwrap_or(&[])) else {
            return self.drop(DropReason::MalformedEe);
        };
        self.deliver(Delivery {
            type_id,
            port,
            src,
            flow,
            rb,
            buf,
            offset: body_at + datagram::LEN,
        });
    }
}
