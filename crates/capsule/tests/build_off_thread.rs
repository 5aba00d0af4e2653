//! Code built off the node thread (`RuntimeConfig::build_off_thread`, what real nodes run):
//! fetched code and code read from the disk cache are built by the runtime's worker while
//! their capsules wait; the EE's own calls never compile. A disk copy that cannot be built is
//! forgotten and the code fetched instead.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anode_capsule::{
    CapsuleConfig, CapsuleEe, CodeHash, Runtime, RuntimeConfig, Tiering, capsule_packet, code_hash,
    protocols,
};
use anode_core::wire::anep::TYPE_CAPSULE;
use common::*;

const PORT: u16 = 7;

fn rt() -> Arc<Runtime> {
    Runtime::new(RuntimeConfig {
        max_instances: 32,
        tiering: Tiering::Tiered,
        build_off_thread: true,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

fn ee_of(net: &mut anode_testkit::Net, i: usize) -> &mut CapsuleEe {
    net.nodes[i]
        .ee_mut(TYPE_CAPSULE)
        .unwrap()
        .as_any_mut()
        .downcast_mut::<CapsuleEe>()
        .unwrap()
}

/// Injects `n` counter capsules from node 0 to node 1.
fn send(net: &mut Net, h: CodeHash, n: usize) {
    for _ in 0..n {
        let mut p = vec![0u8; 16];
        p[12..14].copy_from_slice(&PORT.to_be_bytes());
        let pkt = capsule_packet(h, addr(0), addr(1), 16, 9, &p).unwrap();
        net.inject(0, pkt).unwrap();
    }
}

/// Runs the network in steps of 1 ms (virtual and real) until node 1 has had `n` deliveries;
/// the counts they carried, in order. Bounded by 60 s of real time.
fn deliveries(net: &mut Net, n: usize) -> Vec<u64> {
    let end = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < n {
        assert!(
            Instant::now() < end,
            "only {} of {n} delivered in 60 s",
            got.len()
        );
        std::thread::sleep(Duration::from_millis(1));
        net.run_for(Duration::from_millis(1));
        while let Some(e) = net.nodes[1].poll_event() {
            if let anode_core::Event::Delivered(d) = e {
                got.push(u64::from_be_bytes(d.payload()[0..8].try_into().unwrap()));
            }
        }
    }
    got
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("anode-build-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn fetched_code_is_built_by_the_worker_while_its_capsules_wait() {
    let rt = rt();
    let mut net = Net::new(2, &[(0, 1)], &rt, |_| CapsuleConfig::default());
    let h = net.ee(0).install(protocols::COUNTER).unwrap();
    net.ee(1).register_port(PORT);
    send(&mut net, h, 3);
    // The moment node 1 has every byte, the build is the worker's: the capsules wait and the
    // node thread has compiled nothing.
    let end = net.now + Duration::from_secs(5);
    assert!(net.run_until(end, |n| ee_of(n, 1).builds_pending() == 1));
    let ee = net.ee(1);
    assert!(ee.fetching().is_empty());
    assert_eq!(ee.parked(), 3);
    assert_eq!(ee.stats().compiled, 0);
    assert_eq!(ee.stats().loads_completed, 0);
    // The worker's answer is taken at a later call; every capsule then runs, in order.
    assert_eq!(deliveries(&mut net, 3), vec![1, 2, 3]);
    let ee = net.ee(1);
    assert_eq!(
        (ee.builds_pending(), ee.parked(), ee.stats().compiled),
        (0, 0, 1)
    );
    assert_eq!(ee.stats().loads_completed, 1);
    // Later capsules find the code in memory.
    send(&mut net, h, 1);
    assert_eq!(deliveries(&mut net, 1), vec![4]);
    assert_eq!(net.ee(1).stats().compiled, 1);
}

#[test]
fn code_in_the_disk_cache_is_read_by_the_worker_not_fetched() {
    let rt = rt();
    let dir = temp_dir("disk");
    let h = {
        let mut ee = CapsuleEe::with_runtime(
            rt.clone(),
            CapsuleConfig {
                cache_dir: Some(dir.clone()),
                ..CapsuleConfig::default()
            },
        )
        .unwrap();
        ee.install(protocols::COUNTER).unwrap()
    };
    let disk = dir.clone();
    let mut net = Net::new(2, &[(0, 1)], &rt, move |i| CapsuleConfig {
        cache_dir: (i == 1).then(|| disk.clone()),
        ..CapsuleConfig::default()
    });
    net.ee(0).install(protocols::COUNTER).unwrap();
    net.ee(1).register_port(PORT);
    send(&mut net, h, 2);
    let end = net.now + Duration::from_secs(5);
    assert!(net.run_until(end, |n| ee_of(n, 1).builds_pending() == 1));
    assert_eq!(deliveries(&mut net, 2), vec![1, 2]);
    let s = net.ee(1).stats().clone();
    assert_eq!(s.requests_sent, 0, "read from disk, not fetched");
    assert_eq!(s.disk_loads + s.compiled, 1);
    drop(net);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_disk_copy_that_cannot_be_built_is_forgotten_and_the_code_fetched() {
    let rt = rt();
    let dir = temp_dir("bad");
    std::fs::create_dir_all(&dir).unwrap();
    // Module bytes named by their own SHA-256 (they pass the disk cache's check) that fail
    // the ABI check: no `accept`.
    let bad = wat::parse_str("(module (memory (export \"memory\") 1))").unwrap();
    let bad_hash = code_hash(&bad);
    std::fs::write(dir.join(format!("{}.wasm", hex::encode(bad_hash))), &bad).unwrap();
    let disk = dir.clone();
    let mut net = Net::new(2, &[(0, 1)], &rt, move |i| CapsuleConfig {
        cache_dir: (i == 1).then(|| disk.clone()),
        ..CapsuleConfig::default()
    });
    // A local application at node 1 sends a capsule of that code.
    let pkt = capsule_packet(bad_hash, addr(1), addr(0), 16, 9, &[0; 16]).unwrap();
    let _ = net.inject(1, pkt);
    let end = Instant::now() + Duration::from_secs(60);
    // The worker fails the build; the EE forgets the disk entry and looks for the code on
    // the network, where no neighbor has it: the capsule is dropped, nothing is run.
    let gone = |net: &Net| net.drops(1, "no_code_source") + net.drops(1, "code_unavailable");
    while gone(&net) == 0 {
        assert!(
            Instant::now() < end,
            "no fetch after the bad disk copy in 60 s"
        );
        std::thread::sleep(Duration::from_millis(1));
        net.run_for(Duration::from_millis(1));
    }
    assert_eq!(gone(&net), 1);
    let ee = net.ee(1);
    assert_eq!((ee.builds_pending(), ee.parked()), (0, 0));
    assert_eq!(ee.stats().runs, 0);
    assert!(!dir.join(format!("{}.wasm", hex::encode(bad_hash))).exists());
    drop(net);
    let _ = std::fs::remove_dir_all(&dir);
}
