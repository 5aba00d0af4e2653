//! The transit program loads (the kernel's verifier accepts it), syncs a table and reads its
//! counters. What it forwards is tested end to end with real nodes in
//! `crates/anode/tests/kernel_transit.rs`.

use anode_ether::transit::{ADDR_LEN, TransitPath, TransitPeer, TransitTable};

fn v4(last: u8) -> [u8; ADDR_LEN] {
    let mut a = [0u8; ADDR_LEN];
    a[10] = 0xff;
    a[11] = 0xff;
    a[12..16].copy_from_slice(&[198, 18, 0, last]);
    a[16..].copy_from_slice(&3322u16.to_be_bytes());
    a
}

#[test]
#[ignore = "needs root and netns"]
fn loads_syncs_and_counts() {
    anode_testkit::netns::require("loads_syncs_and_counts", &[], false);
    let mut tp = TransitPath::load(&[]).expect("the verifier accepts the transit program");
    let mut t = TransitTable {
        me: v4(1),
        ee_types: vec![0x0A03],
        ..TransitTable::default()
    };
    t.peers.insert(
        v4(2),
        TransitPeer {
            mtu: 1500,
            up: true,
            punt: false,
            l2: None,
        },
    );
    t.routes.insert(v4(9), v4(2));
    assert!(tp.sync(&t).expect("sync").is_empty());
    t.routes.clear();
    t.punt_all = true;
    assert!(tp.sync(&t).expect("sync again").is_empty());
    let s = tp.stats().expect("stats");
    assert_eq!(s.forwarded, 0);
    assert_eq!(s.passed_total(), 0);
    assert_eq!(s.passed.len(), 13);
}
