//! Files for capsules (ABI v2): a code object writes, reads and deletes files of its own
//! through `file_write`, `file_read` and `file_delete`; paths that could escape and writes
//! over a quota are refused with an error code and counted; another code object sees none of
//! them; with a disk cache the files are written off the node thread and come back in a new
//! EE; a code object marked only `anode_abi_v2` loads.

mod common;

use std::time::Duration;

use anode_capsule::files::{FileLimits, FileRefusal};
use anode_capsule::{CapsuleConfig, CodeHash, capsule_packet};
use common::*;

/// A code object whose capsule payload is `op u8 | path_len u8 | path | data`: op 0 writes
/// `data` to `path`, 1 reads `path` (the result is its length), 2 deletes it; the host's
/// result goes to soft-state key "r" (4 bytes, little-endian).
fn files_code(marker: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
            (import "anode" "cap_read" (func $cap_read (param i32 i32 i32) (result i32)))
            (import "anode" "state_put" (func $state_put (param i32 i32 i32 i32 i32) (result i32)))
            (import "anode" "file_write" (func $fw (param i32 i32 i32 i32) (result i32)))
            (import "anode" "file_read" (func $fr (param i32 i32 i32 i32 i32) (result i32)))
            (import "anode" "file_delete" (func $fd (param i32 i32) (result i32)))
            (memory (export "memory") 2)
            (data (i32.const 0) "r")
            (func (export "{marker}"))
            (func (export "accept") (param $len i32) (param $why i32) (result i32)
              (local $op i32) (local $pl i32) (local $res i32)
              (drop (call $cap_read (i32.const 0) (i32.const 16) (local.get $len)))
              (local.set $op (i32.load8_u (i32.const 16)))
              (local.set $pl (i32.load8_u (i32.const 17)))
              (if (i32.eqz (local.get $op))
                (then (local.set $res (call $fw (i32.const 18) (local.get $pl)
                  (i32.add (i32.const 18) (local.get $pl))
                  (i32.sub (i32.sub (local.get $len) (i32.const 2)) (local.get $pl))))))
              (if (i32.eq (local.get $op) (i32.const 1))
                (then (local.set $res (call $fr (i32.const 18) (local.get $pl)
                  (i32.const 0) (i32.const 60000) (i32.const 1000)))))
              (if (i32.eq (local.get $op) (i32.const 2))
                (then (local.set $res (call $fd (i32.const 18) (local.get $pl)))))
              (i32.store (i32.const 8) (local.get $res))
              (drop (call $state_put (i32.const 0) (i32.const 1) (i32.const 8) (i32.const 4)
                (i32.const 60000)))
              (i32.const 0)))"#
    ))
    .unwrap()
}

fn limits() -> FileLimits {
    FileLimits {
        max_bytes: 300,
        max_files: 3,
        max_file_bytes: 200,
        ..FileLimits::default()
    }
}

/// Runs one file operation at node 0 (a capsule to itself) and returns the host's result.
fn op(net: &mut Net, code: CodeHash, op: u8, path: &str, data: &[u8]) -> i32 {
    let mut p = vec![op, path.len() as u8];
    p.extend_from_slice(path.as_bytes());
    p.extend_from_slice(data);
    let pkt = capsule_packet(code, addr(0), addr(0), 4, 1, &p).unwrap();
    let now = net.now;
    let _ = net.nodes[0].inject(now, pkt);
    net.run_for(Duration::from_millis(5));
    let now = net.now;
    let e = net.ee(0).soft_state().entries(&code, now);
    let r = e.iter().find(|e| e.key == b"r").expect("a result");
    i32::from_le_bytes(r.value[..4].try_into().unwrap())
}

#[test]
fn a_code_object_keeps_files_of_its_own_within_its_quotas() {
    let rt = runtime();
    let mut net = Net::new(1, &[], &rt, |_| CapsuleConfig {
        files: limits(),
        ..CapsuleConfig::default()
    });
    let code = net
        .ee(0)
        .install(&files_code("anode_abi_v2"))
        .expect("a v2 code object loads");
    let other = net
        .ee(0)
        .install(&files_code("anode_abi_v1"))
        .expect("and a v1 one");

    assert_eq!(op(&mut net, code, 0, "notes/a", b"hello"), 0);
    assert_eq!(
        op(&mut net, code, 1, "notes/a", b""),
        5,
        "read: the file's length"
    );
    assert_eq!(
        net.ee(0).files_mut().read(&code, b"notes/a").unwrap(),
        b"hello"
    );
    assert_eq!(
        op(&mut net, other, 1, "notes/a", b""),
        -1,
        "another code object's: NOT_FOUND"
    );

    // Refused, with the ABI's error codes, and counted by reason.
    assert_eq!(op(&mut net, code, 0, "../escape", b"x"), -6, "DENIED");
    assert_eq!(op(&mut net, code, 0, "/etc/passwd", b"x"), -6);
    assert_eq!(op(&mut net, code, 0, "a/b/c/d/e", b"x"), -6, "too deep");
    assert_eq!(
        op(&mut net, code, 0, &"n".repeat(129), b"x"),
        -6,
        "too long"
    );
    assert_eq!(op(&mut net, code, 0, "big", &[7; 201]), -7, "TOO_BIG");
    assert_eq!(op(&mut net, code, 0, "b", &[7; 200]), 0);
    assert_eq!(
        op(&mut net, code, 0, "c", &[7; 100]),
        -8,
        "over the byte quota: BUDGET"
    );
    assert_eq!(op(&mut net, code, 0, "c", &[7; 10]), 0);
    assert_eq!(
        op(&mut net, code, 0, "d", b"x"),
        -8,
        "a fourth file: BUDGET"
    );
    assert_eq!(net.ee(0).files().bytes_of(&code), 215);
    assert_eq!(op(&mut net, code, 2, "b", b""), 0);
    assert_eq!(op(&mut net, code, 2, "b", b""), -1);
    assert_eq!(net.ee(0).files().bytes_of(&code), 15);
    let refused = net.ee(0).files().refused();
    let n = |r: FileRefusal| refused[FileRefusal::ALL.iter().position(|x| *x == r).unwrap()];
    assert_eq!(n(FileRefusal::BadPath), 4);
    assert_eq!(n(FileRefusal::TooBig), 1);
    assert_eq!(n(FileRefusal::Quota), 1);
    assert_eq!(n(FileRefusal::Count), 1);
    assert_eq!(n(FileRefusal::NotFound), 2);
}

#[test]
fn files_persist_in_the_disk_cache_and_come_back() {
    let dir = std::env::temp_dir().join(format!("anode-capsule-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let rt = runtime();
    let cfg = || CapsuleConfig {
        files: limits(),
        cache_dir: Some(dir.clone()),
        ..CapsuleConfig::default()
    };
    let mut net = Net::new(1, &[], &rt, |_| cfg());
    let code = net.ee(0).install(&files_code("anode_abi_v2")).unwrap();
    assert_eq!(op(&mut net, code, 0, "kept", b"across restarts"), 0);
    assert_eq!(op(&mut net, code, 0, "gone", b"soon"), 0);
    assert_eq!(op(&mut net, code, 2, "gone", b""), 0);
    // The store's writer thread may not have run yet: a flush on this thread waits for
    // one in progress and writes the rest, after which nothing is pending.
    let persist = net.ee(0).files().persist().cloned().expect("persists");
    persist.flush();
    assert!(!persist.pending());
    assert_eq!(persist.failures(), 0);
    drop(net);
    let mut again = Net::new(1, &[], &rt, |_| cfg());
    assert_eq!(
        again.ee(0).files_mut().read(&code, b"kept").unwrap(),
        b"across restarts"
    );
    assert!(again.ee(0).files_mut().read(&code, b"gone").is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
