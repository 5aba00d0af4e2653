//! The disk cache: a restarted node (new EE, same directory) runs cached code without
//! compiling and without asking its neighbors; damaged artifacts are recompiled, never loaded.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anode_capsule::{CapsuleConfig, CapsuleEe, capsule_packet, protocols};
use common::*;

const PORT: u16 = 7;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("anode-capsule-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

fn cfg(dir: &Path) -> CapsuleConfig {
    CapsuleConfig {
        cache_dir: Some(dir.to_path_buf()),
        ..CapsuleConfig::default()
    }
}

#[test]
fn a_restarted_node_runs_cached_code_without_recompiling() {
    let rt = runtime();
    let dirs: Vec<PathBuf> = (0..2).map(|i| temp_dir(&format!("restart{i}"))).collect();
    let mut net = Net::new(2, &[(0, 1)], &rt, |i| cfg(&dirs[i]));
    let h = net.ee(0).install(protocols::PING).unwrap();
    net.ee(0).register_port(PORT);
    let send = |net: &mut Net, flow| {
        let pkt = capsule_packet(h, addr(0), addr(1), 16, flow, &ping_payload(PORT)).unwrap();
        let now = net.now;
        net.nodes[0].inject(now, pkt).unwrap();
        net.wait_delivery(0, Duration::from_secs(5))
            .expect("reply")
            .1
    };
    let first = send(&mut net, 1);
    assert_eq!(net.ee(1).stats().compiled, 1);
    let hex = hex::encode(h);
    for ext in ["wasm", "cwasm", "meta"] {
        assert!(
            dirs[1].join(format!("{hex}.{ext}")).exists(),
            "{ext} written"
        );
    }

    let mtimes = |dir: &PathBuf| -> Vec<std::time::SystemTime> {
        ["cwasm", "meta"]
            .iter()
            .map(|ext| {
                fs::metadata(dir.join(format!("{hex}.{ext}")))
                    .unwrap()
                    .modified()
                    .unwrap()
            })
            .collect()
    };
    let written = mtimes(&dirs[1]);

    // Restart node 1's EE on the same directory.
    let ee = CapsuleEe::with_runtime(rt.clone(), cfg(&dirs[1])).unwrap();
    net.nodes[1].register_ee(Box::new(ee));
    assert_eq!(net.ee(1).code_list().len(), 1);
    assert!(!net.ee(1).code_list()[0].in_memory);
    let again = send(&mut net, 2);
    let s = net.ee(1).stats().clone();
    assert_eq!(s.compiled, 0, "no recompilation");
    assert_eq!(s.disk_loads, 1);
    assert_eq!(s.requests_sent, 0, "no demand load");
    assert_eq!(mtimes(&dirs[1]), written, "a disk load rewrites nothing");
    assert_eq!(again, Duration::from_millis(2));
    assert!(first > again);

    // A damaged artifact is detected by its hash and recompiled from the module bytes.
    let art = dirs[1].join(format!("{hex}.cwasm"));
    let mut b = fs::read(&art).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0xff;
    fs::write(&art, &b).unwrap();
    let ee = CapsuleEe::with_runtime(rt.clone(), cfg(&dirs[1])).unwrap();
    net.nodes[1].register_ee(Box::new(ee));
    send(&mut net, 3);
    let s = net.ee(1).stats().clone();
    assert_eq!((s.compiled, s.disk_loads, s.requests_sent), (1, 0, 0));
    // ... and rewritten, so the next restart deserializes again.
    let ee = CapsuleEe::with_runtime(rt.clone(), cfg(&dirs[1])).unwrap();
    net.nodes[1].register_ee(Box::new(ee));
    send(&mut net, 4);
    assert_eq!(net.ee(1).stats().disk_loads, 1);

    // Bytes damaged in place with the inode, length and modification time kept (silent
    // storage corruption, an in-place restore) are refused, counted, and the artifact
    // recompiled and rewritten: never mapped, never a crash ...
    let before = fs::metadata(&art).unwrap().modified().unwrap();
    let mut b = fs::read(&art).unwrap();
    b[mid] ^= 0xff;
    let f = fs::OpenOptions::new().write(true).open(&art).unwrap();
    std::io::Write::write_all(&mut &f, &b).unwrap();
    f.set_modified(before).unwrap();
    drop(f);
    assert_eq!(fs::metadata(&art).unwrap().modified().unwrap(), before);
    let mut ee = CapsuleEe::with_runtime(rt.clone(), cfg(&dirs[1])).unwrap();
    assert!(ee.has_code(&h));
    assert_eq!(
        (
            ee.stats().disk_loads,
            ee.stats().compiled,
            ee.stats().disk_rejected
        ),
        (0, 1, 1)
    );

    // ... and a copy of an intact artifact (new inode and time) is checked by its hash and
    // still loads without compiling.
    let copy = dirs[1].join("copy");
    fs::copy(&art, &copy).unwrap();
    fs::rename(&copy, &art).unwrap();
    let mut ee = CapsuleEe::with_runtime(rt.clone(), cfg(&dirs[1])).unwrap();
    assert!(ee.has_code(&h));
    assert_eq!((ee.stats().disk_loads, ee.stats().compiled), (1, 0));
    // Module bytes that do not hash to their name are never used.
    fs::write(dirs[1].join(format!("{hex}.wasm")), b"tampered").unwrap();
    let mut ee = CapsuleEe::with_runtime(rt.clone(), cfg(&dirs[1])).unwrap();
    assert!(!ee.has_code(&h));
    assert!(ee.code_bytes(&h).is_none());
    for d in dirs {
        let _ = fs::remove_dir_all(d);
    }
}

#[test]
fn memory_cache_evicts_least_recently_used_and_evicted_code_is_fetched_again() {
    let rt = runtime();
    // Room for about one module in node 1's memory cache.
    let budget = {
        let mut ee = CapsuleEe::with_runtime(rt.clone(), CapsuleConfig::default()).unwrap();
        ee.install(protocols::TRACEROUTE).unwrap();
        ee.mem_cache_bytes() + 100
    };
    let mut net = Net::new(2, &[(0, 1)], &rt, |i| CapsuleConfig {
        mem_cache_bytes: if i == 1 { budget } else { 64 << 20 },
        ..CapsuleConfig::default()
    });
    let fwd = net.ee(0).install(protocols::FORWARD).unwrap();
    let cnt = net.ee(0).install(protocols::COUNTER).unwrap();
    net.ee(1).register_port(PORT);
    let send = |net: &mut Net, code, payload: &[u8]| {
        let pkt = capsule_packet(code, addr(0), addr(1), 16, 5, payload).unwrap();
        let now = net.now;
        net.nodes[0].inject(now, pkt).unwrap();
        net.wait_delivery(1, Duration::from_secs(5))
            .expect("delivered");
    };
    let mut counter_payload = vec![0u8; 16];
    counter_payload[12..14].copy_from_slice(&PORT.to_be_bytes());
    send(&mut net, fwd, &PORT.to_be_bytes());
    send(&mut net, cnt, &counter_payload);
    assert!(net.ee(1).mem_cache_bytes() <= budget);
    let live: Vec<_> = net.ee(1).code_list().iter().map(|c| c.hash).collect();
    assert_eq!(live, vec![cnt], "forward was evicted for counter");
    send(&mut net, fwd, &PORT.to_be_bytes());
    assert_eq!(
        net.ee(1).stats().loads_completed,
        3,
        "evicted code is loaded again"
    );
    assert!(net.ee(0).evict(&fwd));
    assert!(!net.ee(0).has_code(&fwd));
}

#[test]
fn when_instance_slots_run_out_the_least_recently_used_instance_gives_way() {
    let rt = anode_capsule::Runtime::new(anode_capsule::RuntimeConfig {
        max_instances: 2,
        ..anode_capsule::RuntimeConfig::default()
    })
    .unwrap();
    let mut net = Net::new(2, &[(0, 1)], &rt, |_| CapsuleConfig::default());
    net.ee(1).register_port(PORT);
    let codes: Vec<_> = [protocols::FORWARD, protocols::PING, protocols::COUNTER]
        .iter()
        .map(|w| net.ee(0).install(w).unwrap())
        .collect();
    // Node 0 forwards, node 1 delivers: each capsule needs an instance at both nodes, and
    // four instances (two per node) exist at most. Only FORWARD delivers to PORT at node 1;
    // PING and COUNTER capsules are consumed or forwarded there, which is enough to run.
    for round in 0..3 {
        for (i, code) in codes.iter().enumerate() {
            let payload: Vec<u8> = if i == 0 {
                PORT.to_be_bytes().to_vec()
            } else {
                vec![0u8; 20]
            };
            let pkt = capsule_packet(*code, addr(0), addr(1), 16, round, &payload).unwrap();
            let now = net.now;
            net.nodes[0].inject(now, pkt).unwrap();
            net.run_for(Duration::from_millis(20));
        }
    }
    assert_eq!(net.drops(0, "instantiate_failed"), 0);
    assert_eq!(net.drops(1, "instantiate_failed"), 0);
    assert_eq!(net.ee(1).stats().runs, 9);
    assert_eq!(net.deliveries(1).len(), 3);
    let live = net.ee(1).code_list().iter().filter(|c| c.live).count();
    assert!(live <= 2);
}

#[test]
fn the_disk_cache_keeps_its_byte_bound_and_removes_orphans() {
    let dir = temp_dir("bound");
    fs::create_dir_all(&dir).unwrap();
    // A temporary file an interrupted write left behind.
    fs::write(dir.join("0000.wasm.tmp123-4"), b"half").unwrap();
    let rt = runtime();
    // Room for about two of the three protocols' files.
    let one = {
        let probe = temp_dir("bound-probe");
        let mut ee = CapsuleEe::with_runtime(rt.clone(), cfg(&probe)).unwrap();
        ee.install(protocols::PING).unwrap();
        let b = ee.disk_stats().unwrap().bytes;
        let _ = fs::remove_dir_all(&probe);
        b
    };
    let max = 2 * one + one / 2;
    let mut ee = CapsuleEe::with_runtime(
        rt.clone(),
        CapsuleConfig {
            cache_max_bytes: max,
            ..cfg(&dir)
        },
    )
    .unwrap();
    assert_eq!(ee.disk_stats().unwrap().orphans_removed, 1);
    assert!(!dir.join("0000.wasm.tmp123-4").exists());
    let p = ee.install(protocols::PING).unwrap();
    let t = ee.install(protocols::TRACEROUTE).unwrap();
    let f = ee.install(protocols::FLOOD).unwrap();
    let st = ee.disk_stats().unwrap();
    assert!(st.bytes <= max, "{st:?}");
    assert!(st.evictions >= 1, "{st:?}");
    // The least recently used (ping) went first; the newest is always kept.
    let on_disk: Vec<bool> = [p, t, f]
        .iter()
        .map(|h| dir.join(format!("{}.wasm", hex::encode(h))).exists())
        .collect();
    assert_eq!(on_disk, [false, true, true], "{st:?}");
    let _ = fs::remove_dir_all(&dir);
}
