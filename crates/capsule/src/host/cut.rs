//! Host import `cut_through(lifetime_ms) -> i32` (ABI additions, `ABI.md`): the running code
//! asks the node to move the current capsule's flow onto the fast path here (NodeOS
//! cutChan). The flow is the capsule's source, flow id and code object: later capsules with
//! the same three, passing through this node, are forwarded by the node without running the
//! code, until the lifetime passes (then the next one runs the code again, which may ask
//! again). Capsules addressed to this node always run their code.
//!
//! Contract: a code object can cut only flows of its own code (the code hash is one of the
//! keys); the request is recorded as an [`Effect`] and the node's cut-through table decides
//! (its per-domain and per-type limits); a refusal is counted, never fatal. At most one
//! request per capsule counts against `max_actions` like a send.

use std::time::Duration;

use anode_core::{DemuxKey, Dispatch};
use anode_wire::transit::field;
use wasmtime::Linker;

use super::{C, Effect, HostState, Parts, with_env};
use crate::abi::{self, err};

/// Longest lifetime a capsule may ask for.
const MAX_LIFETIME: Duration = Duration::from_secs(600);

/// Offset of the code hash in the capsule header.
const CODE_AT: usize = 4;

fn cut_through(p: Parts<'_>, lifetime_ms: i32) -> i32 {
    let Ok(ms) = u64::try_from(lifetime_ms) else {
        return err::DENIED;
    };
    let lifetime = Duration::from_millis(ms);
    if lifetime.is_zero() || lifetime > MAX_LIFETIME {
        return err::DENIED;
    }
    if *p.actions >= p.env.max_actions {
        return err::LIMIT;
    }
    let Some(k) = p.cap.as_ref() else {
        return err::NO_CAPSULE;
    };
    if k.why == Dispatch::Destination {
        return err::DENIED;
    }
    let t = k.transit();
    let (src, flow) = (t.src(), t.flow());
    let mut src_bytes = [0u8; abi::ADDR_LEN];
    if src.write(&mut src_bytes, 0).is_err() {
        return err::REFUSED;
    }
    let at = k.anep_len;
    let keys = vec![
        DemuxKey::exact(at + field::SRC, &src_bytes),
        DemuxKey::exact(at + field::FLOW, &flow.to_be_bytes()),
        DemuxKey::exact(at + k.transit_len + CODE_AT, &p.code),
    ];
    *p.actions += 1;
    p.env.effects.push(Effect::OpenCut { keys, lifetime });
    0
}

pub(super) fn define(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    l.func_wrap(
        abi::IMPORT_MODULE,
        "cut_through",
        |mut c: C<'_>, lifetime_ms: i32| -> i32 {
            with_env(&mut c, |_, p| cut_through(p, lifetime_ms))
        },
    )?;
    Ok(())
}
