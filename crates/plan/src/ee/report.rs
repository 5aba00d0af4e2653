//! What came back from PLAN packets, for tools: decoding deliveries and collecting node
//! events (deliveries, `print` output, errors) into an [`EvalReport`].
//!
//! Contract: a PLAN delivery is an `anode_core::Delivery` with Type ID `TYPE_PLAN` whose
//! payload is one marshalled PLAN value ([`crate::marshal`]); `print` output is an
//! `Event::Log` from EE `plan`; failures are `Event::Log`s from EE `plan:error`.

use anode_core::wire::NodeAddr;
use anode_core::wire::anep::TYPE_PLAN;
use anode_core::{Delivery, Event};
use thiserror::Error;

use crate::Value;
use crate::marshal::{DecodeError, decode_value};

/// A decoded PLAN delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanDelivery {
    /// PLAN port it was delivered to.
    pub port: u16,
    /// Source of the packet that delivered it.
    pub src: NodeAddr,
    /// Its flow id.
    pub flow: u64,
    /// The value.
    pub value: Value,
}

/// Why a delivery is not a PLAN value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReportError {
    /// Delivered under another Type ID.
    #[error("delivery of Type ID {0:#06x} is not a PLAN delivery")]
    NotPlan(u16),
    /// The payload is not a marshalled value.
    #[error("PLAN delivery payload does not decode: {0}")]
    BadValue(#[from] DecodeError),
}

/// Decodes a PLAN delivery.
pub fn decode_delivery(d: &Delivery) -> Result<PlanDelivery, ReportError> {
    if d.type_id != TYPE_PLAN {
        return Err(ReportError::NotPlan(d.type_id));
    }
    Ok(PlanDelivery {
        port: d.port,
        src: d.src,
        flow: d.flow,
        value: decode_value(d.payload())?,
    })
}

/// Everything PLAN packets left at nodes, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalReport {
    /// Deliveries (node, delivery).
    pub deliveries: Vec<(NodeAddr, PlanDelivery)>,
    /// `print` output (node, text).
    pub prints: Vec<(NodeAddr, String)>,
    /// Failures (node, message).
    pub errors: Vec<(NodeAddr, String)>,
}

impl EvalReport {
    /// Records `e` observed at `node` if it is PLAN output; returns whether it was.
    /// Undecodable PLAN deliveries are recorded as errors.
    pub fn add_event(&mut self, node: NodeAddr, e: &Event) -> bool {
        match e {
            Event::Delivered(d) if d.type_id == TYPE_PLAN => {
                match decode_delivery(d) {
                    Ok(p) => self.deliveries.push((node, p)),
                    Err(err) => self.errors.push((node, err.to_string())),
                }
                true
            }
            Event::Log { ee, message } if ee == "plan" => {
                self.prints.push((node, message.clone()));
                true
            }
            Event::Log { ee, message } if ee == "plan:error" => {
                self.errors.push((node, message.clone()));
                true
            }
            _ => false,
        }
    }

    /// Everything printed at `node`, concatenated.
    pub fn output_at(&self, node: NodeAddr) -> String {
        self.prints
            .iter()
            .filter(|(n, _)| *n == node)
            .map(|(_, s)| s.as_str())
            .collect()
    }

    /// Whether nothing came back.
    pub fn is_empty(&self) -> bool {
        self.deliveries.is_empty() && self.prints.is_empty() && self.errors.is_empty()
    }
}
