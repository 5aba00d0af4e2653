//! Isolation with the real capsule EE over real UDP (feature `capsule`): three nodes on
//! 127.0.0.1, each in an `anode_io` driver — source, router running `DomainGuard<MeteredCapsule>`
//! (the WebAssembly protocols installed, 200 ms of EE CPU per second), sink. A benign
//! forwarding protocol (1,000 capsules/s for 1 s) runs alone, then beside each hostile
//! WebAssembly protocol (infinite loop, memory.grow bomb, copy_via storm, soft-state flood;
//! 2,000 capsules/s): the hostile domain is terminated or throttled with a logged reason, the
//! benign flow keeps ≥ 90% of its alone throughput, and the router's NodeOS memory stays
//! within its bound. Each run takes about 1.5 s. Run with `--nocapture` for the figures.

mod common;

use std::time::{Duration, Instant};

use anode_capsule::{capsule_packet, code_hash};
use anode_core::Event;
use anode_core::wire::NodeAddr;
use anode_core::wire::anep::TYPE_CAPSULE;
use anode_io::DriverConfig;
use anode_nodeos::capsule::MeteredCapsule;
use anode_nodeos::guard::DomainGuard;
use common::udp::*;
use common::wasm::*;
use common::*;

struct Outcome {
    benign: u64,
    reason: Option<String>,
    peak: u64,
    drops: std::collections::BTreeMap<String, u64>,
    /// At the router: datagrams received and sent, node tx-queue drops.
    router: (u64, u64, u64),
}

fn run(hostile: Option<(u8, Vec<u8>)>) -> Outcome {
    let good = benign();
    let mut code = vec![good.clone()];
    if let Some((_, h)) = &hostile {
        code.push(h.clone());
    }
    let [a, b, c] = [free_addr(), free_addr(), free_addr()];
    let mut na = node(a, &[b]);
    na.register_ee(Box::new(Sink::default()));
    let mut nb = node(b, &[a, c]);
    nb.register_ee(Box::new(guard(&code, 200_000_000)));
    let mut nc = node(c, &[b]);
    nc.register_ee(Box::new(Sink::default()));
    let ha = anode_io::spawn(na, DriverConfig::new(a)).unwrap();
    let hb = anode_io::spawn(nb, DriverConfig::new(b)).unwrap();
    let hc = anode_io::spawn(nc, DriverConfig::new(c)).unwrap();
    let events = hb.take_events().unwrap();
    assert!(wait_route(&ha, c), "no route a -> c");
    let (sa, sc) = (NodeAddr::from(a), NodeAddr::from(c));
    let gh = code_hash(&good);
    let hh = hostile.as_ref().map(|(p, h)| (*p, code_hash(h)));
    // 1 s: every 10 ms, 10 benign capsules and (if any) 20 hostile ones.
    let start = Instant::now();
    let mut seq = 0u64;
    for tick in 0..100u32 {
        let mut batch = Vec::new();
        for _ in 0..10 {
            seq += 1;
            batch.push(capsule_packet(gh, sa, sc, 16, seq, &[0; 32]).unwrap());
        }
        if let Some((proto, h)) = hh {
            for _ in 0..20 {
                seq += 1;
                let flow = u64::from(proto) << 56 | seq;
                batch.push(capsule_packet(h, sa, sc, 16, flow, &[0; 32]).unwrap());
            }
        }
        inject_tick(&ha, batch, start, tick);
    }
    std::thread::sleep(Duration::from_millis(300));
    let benign = hc
        .call(|n, _| {
            n.ee_mut(TYPE_CAPSULE)
                .and_then(|e| e.as_any_mut().downcast_mut::<Sink>())
                .and_then(|s| s.by_proto.get(&0).copied())
                .unwrap_or(0)
        })
        .unwrap();
    let (peak, drops) = hb
        .call(|n, _| {
            let drops = n.counters().ee_drop_map();
            let peak = n
                .ee_mut(TYPE_CAPSULE)
                .and_then(|e| e.as_any_mut().downcast_mut::<DomainGuard<MeteredCapsule>>())
                .map(|g| g.nodeos().pools().node_peak())
                .unwrap_or(u64::MAX);
            (peak, drops)
        })
        .unwrap();
    let st = hb.stats();
    let qdrops = hb.call(|n, _| n.counters().total_drops()).unwrap();
    let router = (st.rx_datagrams, st.tx_datagrams, qdrops);
    let mut reason = None;
    while let Ok(e) = events.try_recv() {
        if let Event::Log { ee, message } = e
            && ee == "nodeos"
        {
            reason = Some(message);
        }
    }
    drop((ha.shutdown(), hb.shutdown(), hc.shutdown()));
    Outcome {
        benign,
        reason,
        peak,
        drops,
        router,
    }
}

#[test]
fn hostile_wasm_protocols_beside_a_benign_one_over_udp() {
    let alone = run(None);
    println!(
        "udp capsule benign alone: {} of 1000 delivered",
        alone.benign
    );
    assert!(alone.benign >= 900, "benign alone {}", alone.benign);
    for (proto, name, wasm) in [
        (LOOP, "infinite loop", infinite_loop()),
        (BOMB, "memory bomb", memory_bomb()),
        (STORM, "capsule storm", storm()),
        (FLOOD, "soft-state flood", flood()),
    ] {
        let o = run(Some((proto, wasm)));
        let ratio = o.benign as f64 / alone.benign as f64;
        println!(
            "udp capsule {name:16}: benign {} ({:.1}% of alone); router rx/tx/node drops {:?}; NodeOS memory peak {} B (bound {NODE_MEMORY}); drops {:?}; {}",
            o.benign,
            ratio * 100.0,
            o.router,
            o.peak,
            o.drops,
            o.reason
                .clone()
                .unwrap_or_else(|| "not terminated (throttled)".into())
        );
        assert!(ratio >= 0.9, "{name}: benign kept {:.1}%", ratio * 100.0);
        assert!(o.peak <= NODE_MEMORY);
        if proto == STORM {
            let throttled: u64 = o
                .drops
                .iter()
                .filter(|(k, _)| k.ends_with("queue_full") || k.ends_with("bandwidth"))
                .map(|(_, v)| v)
                .sum();
            assert!(
                o.reason.is_some() || throttled > 0,
                "storm neither throttled nor terminated: {:?}",
                o.drops
            );
        } else {
            let r = o
                .reason
                .expect("hostile domain terminated with a logged reason");
            assert!(r.contains("terminated"), "{r}");
        }
    }
}
