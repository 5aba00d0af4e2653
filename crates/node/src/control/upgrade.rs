//! `upgrade`: a client asks for the node's process to be replaced (`crate::upgrade`). The
//! request waits here for the thread that runs the node (`RunningNode::wait`), which carries
//! it out and answers; the worker thread answering the client waits for that answer.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use anode_ctl::{ErrorCode, Response, UpgradeInfo};

use super::handlers::Failure;
use super::state::Shared;
use crate::upgrade::UpgradeRequest;

/// The default time a new process has to take over.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// An upgrade waiting to be carried out.
#[derive(Debug)]
pub struct PendingUpgrade {
    /// What the client asked for.
    pub request: UpgradeRequest,
    reply: mpsc::SyncSender<Result<UpgradeInfo, String>>,
}

impl PendingUpgrade {
    /// Answers the client.
    pub fn answer(self, r: Result<UpgradeInfo, String>) {
        let _ = self.reply.send(r);
    }
}

/// The `upgrade` request.
pub(super) fn upgrade(
    shared: &Shared,
    binary: Option<String>,
    timeout_s: Option<u32>,
) -> Result<Response, Failure> {
    if !shared.upgradable.load(Ordering::Acquire) {
        return Err((
            ErrorCode::Unsupported,
            "this node cannot be upgraded in place: it was not started by `anode node`".into(),
        ));
    }
    let timeout = timeout_s.map_or(DEFAULT_TIMEOUT, |s| {
        Duration::from_secs(u64::from(s.clamp(1, 3600)))
    });
    let binary = binary.map(|b| {
        let p = std::path::PathBuf::from(b);
        if p.is_relative() {
            std::env::current_dir().map(|d| d.join(&p)).unwrap_or(p)
        } else {
            p
        }
    });
    let (tx, rx) = mpsc::sync_channel(1);
    {
        let mut slot = shared
            .upgrade
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_some() {
            return Err((ErrorCode::Busy, "an upgrade is already under way".into()));
        }
        *slot = Some(PendingUpgrade {
            request: UpgradeRequest { binary, timeout },
            reply: tx,
        });
    }
    match rx.recv_timeout(timeout + Duration::from_secs(10)) {
        Ok(Ok(info)) => Ok(Response::Upgraded(info)),
        Ok(Err(why)) => Err((ErrorCode::Other, why)),
        Err(_) => {
            shared
                .upgrade
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            Err((
                ErrorCode::Other,
                "the node did not carry out the upgrade in time".into(),
            ))
        }
    }
}
