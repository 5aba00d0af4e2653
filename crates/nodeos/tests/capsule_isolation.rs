//! Isolation with the real capsule EE (wasmtime) under the NodeOS (feature `capsule`):
//! hostile WebAssembly protocols (infinite loop, memory bomb, capsule storm, soft-state flood)
//! each beside a benign forwarding protocol, in virtual time, through one guarded router.
//!
//! Topology: 0 (source) - 1 (router: `DomainGuard<MeteredCapsule>`) - 2 (sink). Each
//! protocol is its own domain (`capsule/<code hash>`). Benign: 1,000 capsules/s; hostile:
//! 2,500/s; the router's EE gets 200 ms of CPU per second. Run with `--nocapture`.

mod common;

use std::time::Duration;

use anode_capsule::capsule_packet;
use anode_core::wire::anep::TYPE_CAPSULE;
use anode_nodeos::capsule::MeteredCapsule;
use anode_nodeos::guard::DomainGuard;
use common::wasm::*;
use common::*;

struct Outcome {
    benign: u64,
    reason: Option<String>,
    peak: u64,
    drops: std::collections::BTreeMap<String, u64>,
}

fn run(hostile: Option<(u8, Vec<u8>)>) -> Outcome {
    let good = benign();
    let mut code = vec![good.clone()];
    if let Some((_, h)) = &hostile {
        code.push(h.clone());
    }
    let mut line = Line::new(3);
    line.nodes[0].register_ee(Box::new(Sink::default()));
    line.nodes[1].register_ee(Box::new(guard(&code, 200_000_000)));
    line.nodes[2].register_ee(Box::new(Sink::default()));
    line.advance(Duration::from_secs(5));
    let gh = anode_capsule::code_hash(&good);
    let hh = hostile.as_ref().map(|(_, h)| anode_capsule::code_hash(h));
    let mut seq = 0u64;
    for k in 0..10_000u64 {
        let now = line.now;
        if k % 10 == 0 {
            seq += 1;
            let p = capsule_packet(gh, addr(0), addr(2), 16, seq, &[0; 32]).unwrap();
            line.nodes[0].inject(now, p).unwrap();
        }
        if let (Some((proto, _)), Some(hh)) = (&hostile, hh)
            && k % 4 == 0
        {
            seq += 1;
            let flow = u64::from(*proto) << 56 | seq;
            let p = capsule_packet(hh, addr(0), addr(2), 16, flow, &[0; 32]).unwrap();
            let _ = line.nodes[0].inject(now, p);
        }
        line.advance(Duration::from_micros(100));
    }
    line.advance(Duration::from_millis(200));
    let benign = line.nodes[2]
        .ee_mut(TYPE_CAPSULE)
        .and_then(|e| e.as_any_mut().downcast_mut::<Sink>())
        .and_then(|s| s.by_proto.get(&0).copied())
        .unwrap_or(0);
    let drops = line.nodes[1].counters().ee_drops.clone();
    let g = line.nodes[1]
        .ee_mut(TYPE_CAPSULE)
        .and_then(|e| e.as_any_mut().downcast_mut::<DomainGuard<MeteredCapsule>>())
        .unwrap();
    let peak = g.nodeos().pools().node_peak();
    let reason = line.logs.iter().find(|l| l.contains("terminated")).cloned();
    Outcome {
        benign,
        reason,
        peak,
        drops,
    }
}

#[test]
fn hostile_wasm_protocols_beside_a_benign_one() {
    let alone = run(None);
    println!("capsule benign alone: {} of 1000 delivered", alone.benign);
    assert!(alone.benign >= 990, "benign alone {}", alone.benign);
    for (proto, name, wasm) in [
        (LOOP, "infinite loop", infinite_loop()),
        (BOMB, "memory bomb", memory_bomb()),
        (STORM, "capsule storm", storm()),
        (FLOOD, "soft-state flood", flood()),
    ] {
        let o = run(Some((proto, wasm)));
        let ratio = o.benign as f64 / alone.benign as f64;
        println!(
            "capsule {name:16}: benign {} ({:.1}% of alone); NodeOS memory peak {} B (bound {NODE_MEMORY}); drops {:?}; {}",
            o.benign,
            ratio * 100.0,
            o.peak,
            o.drops,
            o.reason
                .clone()
                .unwrap_or_else(|| "not terminated (throttled)".into())
        );
        assert!(ratio >= 0.9, "{name}: benign kept {:.1}%", ratio * 100.0);
        assert!(o.peak <= NODE_MEMORY);
        if proto == LOOP || proto == BOMB || proto == FLOOD {
            assert!(o.reason.is_some(), "{name} not terminated");
        }
    }
}
