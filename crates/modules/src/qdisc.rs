//! [`WasmQdisc`]: a queue discipline whose scheduling a module decides.
//!
//! The host keeps the packets (the node's buffers, never copied) in up to
//! [`MAX_CLASSES`] FIFO classes, each bounded by the module's `limit` configuration value;
//! the module's `enqueue` picks the class of each arriving packet (or refuses it) and its
//! `dequeue` picks the class to send from next, seeing the classes' lengths and head-packet
//! sizes through host calls. If the module faults (trap, fuel), the discipline stops calling
//! it and serves the classes in index order, so no packet is stranded; the fault is recorded.

use std::collections::VecDeque;

use anode_core::{LinkId, QueueDiscipline, Transmit};
use anode_wire::anep::AnepPacket;

use crate::runtime::{Instance, MAX_CLASSES};

/// A queue discipline run by a module.
#[derive(Debug)]
pub struct WasmQdisc {
    name: String,
    inst: Box<Instance>,
    classes: Vec<VecDeque<Transmit>>,
    limit: usize,
    total: usize,
    /// The fault that stopped the module, if any.
    pub fault: Option<String>,
}

impl WasmQdisc {
    /// A discipline run by `inst`, holding at most `limit` packets per class.
    pub(crate) fn new(name: String, inst: Box<Instance>, limit: usize) -> Self {
        WasmQdisc {
            name,
            inst,
            classes: (0..MAX_CLASSES).map(|_| VecDeque::new()).collect(),
            limit: limit.max(1),
            total: 0,
            fault: None,
        }
    }

    fn view(&self) -> [(u32, u32); MAX_CLASSES] {
        let mut v = [(0u32, 0u32); MAX_CLASSES];
        for (slot, q) in v.iter_mut().zip(&self.classes) {
            *slot = (q.len() as u32, q.front().map_or(0, |t| t.buf.len() as u32));
        }
        v
    }
}

/// Priority of a packet: the low 3 bits of its transit flow id (0 if it has none).
fn prio_of(buf: &[u8]) -> i32 {
    let Ok(p) = AnepPacket::new_checked(buf) else {
        return 0;
    };
    let at = p.header_len() + 15;
    buf.get(at).map_or(0, |b| i32::from(b & 7))
}

impl QueueDiscipline for WasmQdisc {
    fn name(&self) -> &str {
        &self.name
    }

    fn enqueue(&mut self, input: Option<LinkId>, t: Transmit) -> Result<(), Transmit> {
        let class = if self.fault.is_some() {
            0
        } else {
            let input = input.map_or(-1, |l| i32::try_from(l.0).unwrap_or(-1));
            let len = i32::try_from(t.buf.len()).unwrap_or(i32::MAX);
            match self.inst.enqueue(self.view(), input, len, prio_of(&t.buf)) {
                Ok(c) => c,
                Err(e) => {
                    self.fault = Some(e.to_string());
                    0
                }
            }
        };
        let Some(q) = usize::try_from(class)
            .ok()
            .and_then(|c| self.classes.get_mut(c))
        else {
            return Err(t);
        };
        if q.len() >= self.limit {
            return Err(t);
        }
        q.push_back(t);
        self.total += 1;
        Ok(())
    }

    fn dequeue(&mut self) -> Option<Transmit> {
        if self.total == 0 {
            return None;
        }
        let chosen = if self.fault.is_some() {
            None
        } else {
            match self.inst.dequeue(self.view()) {
                Ok(c) => usize::try_from(c).ok(),
                Err(e) => {
                    self.fault = Some(e.to_string());
                    None
                }
            }
        };
        let t = match chosen
            .and_then(|c| self.classes.get_mut(c))
            .and_then(VecDeque::pop_front)
        {
            Some(t) => t,
            // The module named an empty class, or faulted: serve in class order.
            None => self.classes.iter_mut().find_map(VecDeque::pop_front)?,
        };
        self.total -= 1;
        Some(t)
    }

    fn len(&self) -> usize {
        self.total
    }
}
