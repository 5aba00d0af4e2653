//! Control messages: hellos and routing updates go to the routing state machines; code
//! transfer and EE messages go to the execution environments.

use std::time::Instant;

use anode_routing::LinkId;
use anode_wire::control::Control;

use crate::ee::NodeContext;
use crate::{DropReason, Node};

impl Node {
    pub(crate) fn handle_control(
        &mut self,
        now: Instant,
        link: LinkId,
        buf: &[u8],
        anep_len: usize,
    ) {
        let Ok(msg) = Control::parse(buf.get(anep_len..).unwrap_or(&[])) else {
            return self.core.drop(DropReason::MalformedControl);
        };
        self.core.counters.control_rx += 1;
        match &msg {
            Control::Hello(h) => {
                if let Some(ev) = self.core.neighbors.on_hello(now, link, h) {
                    self.core.neighbor_event(now, ev);
                }
            }
            Control::Routes(_)
            | Control::Lsas(_)
            | Control::LsaSummary(_)
            | Control::LsaDigest(_) => {
                let ours = self.core.routing.speaks(&msg);
                if !ours {
                    self.core.drop(DropReason::RoutingMismatch);
                } else if !self.core.routing.on_message(now, link, &msg) {
                    self.core.drop(DropReason::NotNeighbor);
                }
            }
            Control::Ee { type_id, .. } if self.stopped.contains(type_id) => {
                self.core.drop(DropReason::EeStopped);
            }
            Control::Ee { type_id, .. } => {
                let t = *type_id;
                match self.ees.iter_mut().find(|e| e.type_id() == t) {
                    Some(ee) => {
                        let mut ctx = NodeContext {
                            core: &mut self.core,
                            now,
                        };
                        ee.handle_control(&mut ctx, link, &msg);
                    }
                    None => self.core.drop(DropReason::UnhandledControl),
                }
            }
            Control::CodeRequest { .. }
            | Control::CodeChunk { .. }
            | Control::CodeUnavailable { .. } => {
                if self.ees.is_empty() {
                    self.core.drop(DropReason::UnhandledControl);
                }
                let stopped = &self.stopped;
                for ee in self
                    .ees
                    .iter_mut()
                    .filter(|e| !stopped.contains(&e.type_id()))
                {
                    let mut ctx = NodeContext {
                        core: &mut self.core,
                        now,
                    };
                    ee.handle_control(&mut ctx, link, &msg);
                }
            }
        }
        self.core.flush_control(now);
    }
}
