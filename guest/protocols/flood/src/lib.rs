//! Flood (PAN §IV-C). Payload (big-endian):
//! `kind u8 (0 start, 1 data, 2 status) | flags u8 | reply port u16 | interval ms u32 |
//!  elapsed ns u64 | count u64 | data...`.
//! Flag 1 (cut-through): at every node on the way a capsule of the flow that runs this code
//! asks the node to cut the flow through for a minute (NodeOS cutChan, `cut_through`), so
//! the flow's later capsules pass those nodes on the fast path without running it; only the
//! receiver runs every one.
//! The start capsule creates the flow's entry in soft state at the receiver, keyed by the
//! source address and flow id, holding the start time; data capsules increment the count;
//! every `interval` (from the start capsule) the receiver sends a status capsule back to the
//! source carrying the elapsed time and the count, which is delivered to the reply port.
//! Entry (little-endian): `start ns u64 | count u64 | last report ns u64 | interval ms u32 |
//! port u16 | pad u16`.

#![no_std]

use anode_sdk::{ADDR_LEN, Capsule, Verdict, Why, be16, be32, now_ns, state};

const HDR: usize = 24;
const ENTRY: usize = 32;
const TTL_MS: u32 = 60_000;
const FLAG_CUT_THROUGH: u8 = 1;

fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn accept(cap: &mut Capsule, why: Why) -> Verdict {
    let mut h = [0u8; HDR];
    if cap.read(0, &mut h) != Ok(HDR) {
        return Verdict::Drop;
    }
    if why != Why::Destination {
        if h[1] & FLAG_CUT_THROUGH != 0 {
            // Refused or not: the capsule goes on either way.
            let _ = cap.cut_through(TTL_MS);
        }
        return Verdict::Forward;
    }
    let Ok(info) = cap.info() else {
        return Verdict::Drop;
    };
    if h[0] == 2 {
        return match cap.deliver(be16(&h, 2)) {
            Ok(()) => Verdict::Done,
            Err(_) => Verdict::Drop,
        };
    }
    let mut key = [0u8; ADDR_LEN + 8];
    key[..ADDR_LEN].copy_from_slice(&info.src.0);
    key[ADDR_LEN..].copy_from_slice(&info.flow.to_le_bytes());
    let now = now_ns();
    let mut e = [0u8; ENTRY];
    let have = state::get(&key, &mut e) == Ok(ENTRY);
    if h[0] == 0 || !have {
        e = [0u8; ENTRY];
        e[0..8].copy_from_slice(&now.to_le_bytes());
        e[16..24].copy_from_slice(&now.to_le_bytes());
        e[24..28].copy_from_slice(&be32(&h, 4).to_le_bytes());
        e[28..30].copy_from_slice(&be16(&h, 2).to_le_bytes());
    }
    let count = le64(&e, 8) + 1;
    e[8..16].copy_from_slice(&count.to_le_bytes());
    let interval_ns = u64::from(u32::from_le_bytes([e[24], e[25], e[26], e[27]])) * 1_000_000;
    let last = le64(&e, 16);
    let report = h[0] == 0 || now.saturating_sub(last) >= interval_ns;
    if report {
        e[16..24].copy_from_slice(&now.to_le_bytes());
    }
    if state::put(&key, &e, TTL_MS).is_err() {
        return Verdict::Drop;
    }
    if report {
        let mut s = [0u8; HDR];
        s[0] = 2;
        s[2..4].copy_from_slice(&u16::from_le_bytes([e[28], e[29]]).to_be_bytes());
        s[4..8].copy_from_slice(&h[4..8]);
        s[8..16].copy_from_slice(&now.saturating_sub(le64(&e, 0)).to_be_bytes());
        s[16..24].copy_from_slice(&count.to_be_bytes());
        let _ = cap.send(&info.src, None, info.rb, info.flow, &s);
    }
    Verdict::Done
}

anode_sdk::export_accept!(accept);

anode_sdk::protocol_name!(b"flood");
