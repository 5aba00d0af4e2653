//! Building a signed deploy or undeploy request and its packet (for `anode module deploy`,
//! the emulator's steps and tests).

use std::time::Duration;

use anode_wire::NodeAddr;
use anode_wire::deploy::{Message, Op, Request};
use anode_wire::transit::TransitRepr;
use sha2::{Digest, Sha256};

use super::sign;
use crate::{ModuleError, Package};

/// A deploy (or undeploy) request from `origin` to `target`, signed with `key`, valid for
/// `valid` from `unix_ms`, and the ANEP packet that carries it (evaluated at every hop).
#[derive(Debug, Clone)]
pub struct NewRequest {
    /// What to do.
    pub op: Op,
    /// The node that sends it.
    pub origin: NodeAddr,
    /// The last node of the path.
    pub target: NodeAddr,
    /// The package (deploy) or `None` (undeploy, then `name` says which module).
    pub package: Option<Vec<u8>>,
    /// The module's name (undeploy; a deploy takes it from the package).
    pub name: String,
    /// Soft-state lifetime in seconds.
    pub ttl_s: u32,
    /// The origin's application port results go to (0: kept by the origin).
    pub reply_port: u16,
    /// Unix time now (ms), by the origin's clock.
    pub unix_ms: u64,
    /// How long the request stays valid.
    pub valid: Duration,
    /// A fresh nonce.
    pub nonce: [u8; 16],
    /// Resource bound (hops) of the packet.
    pub rb: u16,
    /// A module repository the nodes fetch the package from (empty: from the path).
    pub repo: String,
}

impl NewRequest {
    /// The signed request and its packet.
    pub fn build(
        &self,
        key: &ed25519_dalek::SigningKey,
    ) -> Result<(Request, Vec<u8>), ModuleError> {
        let (name, version, hash, len) = match &self.package {
            Some(bytes) => {
                let p = Package::decode(bytes)?;
                (
                    p.manifest.name.clone(),
                    p.manifest.version.to_string(),
                    Sha256::digest(bytes).into(),
                    u32::try_from(bytes.len())
                        .map_err(|_| ModuleError::Io("package larger than 4 GiB".into()))?,
                )
            }
            None => (self.name.clone(), String::new(), [0; 32], 0),
        };
        let mut req = Request {
            op: self.op,
            hop: 0,
            reply_port: self.reply_port,
            ttl_s: self.ttl_s,
            pkg_len: len,
            expires_unix_ms: self.unix_ms + self.valid.as_millis() as u64,
            nonce: self.nonce,
            origin: self.origin,
            target: self.target,
            pkg_hash: hash,
            signer: [0; 32],
            signature: [0; 64],
            via: self.origin,
            name,
            version,
            repo: self.repo.clone(),
        };
        let wire = |e: anode_wire::WireError| ModuleError::Io(e.to_string());
        sign(&mut req, key).map_err(wire)?;
        let t = TransitRepr {
            flags: anode_wire::transit::FLAG_EVAL_EVERY_HOP,
            rb: self.rb,
            flow: u64::from_be_bytes(self.nonce[..8].try_into().unwrap_or_default()),
            src: self.origin,
            dst: self.target,
            prev_hop: self.origin,
        };
        let pkt = Message::Request(req.clone()).to_packet(&t).map_err(wire)?;
        Ok((req, pkt))
    }
}
