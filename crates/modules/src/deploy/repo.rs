//! Packages from a module repository: a request may name one (`anode module deploy --repo
//! URL`, signed with the rest), and then each node of the path fetches the package from it
//! (`GET URL/NAME/VERSION`) instead of from the previous node, all nodes at once rather than
//! hop by hop. The fetch runs on a thread of its own ([`spawn_fetcher`]; HTTP is the node
//! runtime's, given as a function), never on the node's thread. What comes back must have
//! the SHA-256 the request signed; if the repository fails, or sends other bytes, the node
//! fetches from the previous node of the path as without a repository. Without a fetcher
//! (the emulator, whose virtual time must not wait for a network) the path is used.

use std::sync::mpsc::{Sender, channel};
use std::time::Instant;

use anode_core::{Node, NodeContext};
use anode_wire::anep::TYPE_DEPLOY;
use sha2::{Digest, Sha256};

use super::fetch::Fetch;
use super::transfer::send_transfer;
use super::worker::NodeCall;
use super::{DeployEe, Pending};

/// A package to fetch from a repository.
#[derive(Debug, Clone)]
pub struct FetchJob {
    /// The SHA-256 the request signed.
    pub hash: [u8; 32],
    /// The repository.
    pub url: String,
    /// The module's name.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// Fetches `name` `version` from the repository at `url` (the node runtime's HTTP client).
pub type RepoGet = Box<dyn Fn(&str, &str, &str) -> Result<Vec<u8>, String> + Send>;

/// Starts the fetcher thread; `call` runs a closure on the node's thread, `get` fetches.
pub fn spawn_fetcher(call: NodeCall, get: RepoGet) -> std::io::Result<Sender<FetchJob>> {
    let (tx, rx) = channel::<FetchJob>();
    std::thread::Builder::new()
        .name("anode-deploy-fetch".into())
        .spawn(move || {
            for job in rx {
                let r = get(&job.url, &job.name, &job.version);
                let back = Box::new(move |node: &mut Node, now: Instant| {
                    node.with_ee(now, TYPE_DEPLOY, |ee, ctx| {
                        if let Some(d) = ee.as_any_mut().downcast_mut::<DeployEe>() {
                            d.repo_fetched(ctx, &job, r);
                        }
                    });
                });
                if !call(back) {
                    break;
                }
            }
        })?;
    Ok(tx)
}

/// Gives `node`'s deployment service the fetcher `tx`; false if it has none.
pub fn set_fetcher(node: &mut Node, tx: Sender<FetchJob>) -> bool {
    node.ee_mut(TYPE_DEPLOY)
        .and_then(|ee| ee.as_any_mut().downcast_mut::<DeployEe>())
        .map(|d| d.fetcher = Some(tx))
        .is_some()
}

impl DeployEe {
    /// If the request names a repository and this node can fetch from one: asks for the
    /// package (once per package) and says the request waits for it.
    pub(super) fn try_repo(&mut self, p: &Pending) -> bool {
        let hash = p.req.pkg_hash;
        if p.req.repo.is_empty() || self.fetches.contains_key(&hash) {
            return false;
        }
        if self.repo_fetching.contains(&hash) {
            return true;
        }
        let Some(tx) = &self.fetcher else {
            return false;
        };
        let job = FetchJob {
            hash,
            url: p.req.repo.clone(),
            name: p.req.name.clone(),
            version: p.req.version.clone(),
        };
        if tx.send(job).is_err() {
            self.fetcher = None;
            return false;
        }
        self.repo_fetching.insert(hash);
        true
    }

    /// The repository answered for `job`: on success the waiting requests go on; otherwise
    /// they fetch from the previous node of their path, or fail where there is none.
    pub fn repo_fetched(
        &mut self,
        ctx: &mut NodeContext<'_>,
        job: &FetchJob,
        r: Result<Vec<u8>, String>,
    ) {
        if !self.repo_fetching.remove(&job.hash) {
            return;
        }
        let r = r.and_then(|b| {
            if <[u8; 32]>::from(Sha256::digest(&b)) == job.hash {
                Ok(b)
            } else {
                Err("its package is not the one the request signed (SHA-256 differs)".into())
            }
        });
        match r {
            Ok(bytes) => {
                self.stats.repo_bytes += bytes.len() as u64;
                self.fetched(ctx, job.hash, bytes);
            }
            Err(why) => {
                self.stats.repo_failures += 1;
                ctx.log("deploy", format!("repository {}: {why}", job.url));
                let me = ctx.address();
                let from = self
                    .waiting
                    .iter()
                    .find(|p| p.req.pkg_hash == job.hash && p.req.via != me)
                    .map(|p| (p.req.via, p.req.nonce, p.req.pkg_len));
                match from {
                    Some((via, nonce, len)) if len > 0 => {
                        let (f, want) = Fetch::start(job.hash, len, (via, nonce), ctx.now());
                        self.fetches.insert(job.hash, f);
                        send_transfer(ctx, via, nonce, &want);
                    }
                    _ => self.fail_waiting(
                        ctx,
                        &job.hash,
                        &format!("the repository {} failed: {why}", job.url),
                    ),
                }
            }
        }
    }
}
