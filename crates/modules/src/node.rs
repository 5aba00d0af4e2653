//! Attaching a [`ModuleHost`] to a [`Node`] and the operations that need the node as well
//! (queue disciplines are set on the node's links).

use std::sync::Arc;
use std::time::Instant;

use anode_core::{LinkId, Node};

use crate::qdisc::WasmQdisc;
use crate::{ModRuntime, ModuleError, ModuleHost, Trust};

/// Installs an empty module host as the node's packet hooks (replacing any earlier hooks).
pub fn attach(node: &mut Node, rt: Arc<ModRuntime>, trust: Trust) {
    let mut h = ModuleHost::new(rt, trust);
    h.set_links(node.links().map(|(_, c, _)| c.peer).collect());
    node.set_packet_hooks(Some(Box::new(h)));
}

/// The node's module host, if attached.
pub fn host_mut(node: &mut Node) -> Option<&mut ModuleHost> {
    node.packet_hooks_mut()?
        .as_any_mut()
        .downcast_mut::<ModuleHost>()
}

/// The node's module host, or an error saying none is attached.
pub fn host(node: &mut Node) -> Result<&mut ModuleHost, ModuleError> {
    let peers: Vec<_> = node.links().map(|(_, c, _)| c.peer).collect();
    let h = host_mut(node).ok_or_else(|| {
        ModuleError::Io("this node has no module host (modules are not enabled)".into())
    })?;
    h.set_links(peers);
    Ok(h)
}

/// Puts the queue-discipline module `name` (installed here) on `link` with a rate, starting
/// it if needed; the packets waiting in the link's old discipline move to the new one.
/// Returns the name of the discipline replaced.
pub fn attach_qdisc(
    node: &mut Node,
    name: &str,
    link: LinkId,
    rate_bps: u64,
    now: Instant,
) -> Result<Option<String>, ModuleError> {
    if node.links().nth(link.0 as usize).is_none() {
        return Err(ModuleError::State {
            name: name.to_string(),
            reason: format!("the node has no link {}", link.0),
        });
    }
    let (inst, limit) = host(node)?.qdisc_instance(name)?;
    let q = WasmQdisc::new(name.to_string(), inst, limit);
    Ok(node.set_link_qdisc(link, Some((Box::new(q), rate_bps)), now))
}
