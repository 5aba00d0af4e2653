//! Service modules' files (`files.rs`): the `tally` module's counts in its files, quotas from
//! its manifest, kept across stop, upgrade, restart and hand-over, deleted with the module;
//! hostile paths refused.

mod common;

use std::time::Instant;

use anode_core::PacketHooks;
use anode_modules::{Manifest, ModuleHost, Package, State, host};
use common::*;

fn dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("anode-mod-files-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A relay whose module host keeps files in `files` (if any) with `tally` installed and
/// started.
fn node_with_tally(files: Option<&std::path::Path>) -> anode_core::Node {
    let mut n = relay(&[1], Instant::now());
    let h = host(&mut n).unwrap();
    if let Some(d) = files {
        h.set_file_dir(d.to_path_buf());
    }
    h.install(signed("tally", None), &toml::Table::new())
        .unwrap();
    h.start("tally").unwrap();
    n
}

fn tally(h: &mut ModuleHost, op: i32, key: i64) -> i64 {
    h.call_service("tally", op, key).unwrap()
}

#[test]
fn counts_live_in_files_within_the_manifests_quotas() {
    let mut n = node_with_tally(None);
    let h = host(&mut n).unwrap();
    assert_eq!(tally(h, 0, 7), 1);
    assert_eq!(tally(h, 0, 7), 2);
    assert_eq!(tally(h, 0, -7), 1, "a negative key is a key of its own");
    assert_eq!(tally(h, 1, 7), 2);
    assert_eq!(tally(h, 1, 8), 0, "no count yet");
    let info = h.info("tally").unwrap();
    assert_eq!(info.file_quota, Some((65536, 1024)));
    assert_eq!(info.files, (2, 16));
    assert_eq!(tally(h, 2, -7), 0);
    assert_eq!(tally(h, 2, -7), -3, "deleted already: not found");
    // 1024 keys fill the file count: the next new key is refused (QUOTA) and changes
    // nothing; existing keys still count.
    for k in 1000..2023 {
        assert_eq!(tally(h, 0, k), 1, "key {k}");
    }
    assert_eq!(h.info("tally").unwrap().files, (1024, 8192));
    assert_eq!(tally(h, 0, 5000), -5);
    assert_eq!(tally(h, 1, 5000), 0);
    assert_eq!(tally(h, 0, 7), 3);
    // Stopped and started, upgraded: the files stay.
    h.stop("tally").unwrap();
    h.start("tally").unwrap();
    h.upgrade(signed("tally", Some("1.0.1")), &toml::Table::new())
        .unwrap();
    assert_eq!(tally(h, 1, 7), 3);
    // Removed: its files go with it; installed again, it starts from nothing.
    h.remove("tally").unwrap();
    h.install(signed("tally", None), &toml::Table::new())
        .unwrap();
    h.start("tally").unwrap();
    assert_eq!(tally(h, 1, 7), 0);
    assert_eq!(h.info("tally").unwrap().files, (0, 0));
}

#[test]
fn files_come_back_after_a_restart_and_a_removal_deletes_them_on_disk() {
    let d = dir("restart");
    {
        let mut n = node_with_tally(Some(&d));
        let h = host(&mut n).unwrap();
        for _ in 0..5 {
            tally(h, 0, 42);
        }
        tally(h, 0, 43);
    }
    // The node ended: its last changes were written as it went.
    assert_eq!(
        std::fs::read(d.join("tally/k/42")).unwrap(),
        5i64.to_le_bytes()
    );
    let mut n = node_with_tally(Some(&d));
    let h = host(&mut n).unwrap();
    assert_eq!(tally(h, 1, 42), 5);
    assert_eq!(tally(h, 0, 43), 2);
    h.remove("tally").unwrap();
    let f = h.files().clone();
    anode_modules::files::lock(&f).persist().unwrap().flush();
    assert!(!d.join("tally").exists(), "removed with the module");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_hand_over_carries_exactly_the_predecessors_files() {
    let d = dir("handover");
    let now = Instant::now();
    let mut old = node_with_tally(Some(&d));
    tally(host(&mut old).unwrap(), 0, 1);
    tally(host(&mut old).unwrap(), 0, 2);
    anode_modules::files::lock(host(&mut old).unwrap().files())
        .persist()
        .unwrap()
        .flush();
    // The successor starts (reading the disk) while the old process still runs, which then
    // counts key 1 again and deletes key 2 before it hands over.
    let mut new = node_with_tally(Some(&d));
    assert_eq!(tally(host(&mut new).unwrap(), 1, 2), 1, "read from disk");
    let h = host(&mut old).unwrap();
    tally(h, 0, 1);
    tally(h, 2, 2);
    let state = h.hand_over(now);
    let hn = host(&mut new).unwrap();
    hn.take_over(now, &state).unwrap();
    assert_eq!(tally(hn, 1, 1), 2, "the latest count");
    assert_eq!(tally(hn, 1, 2), 0, "deleted before the hand-over: not back");
    drop(old);
    drop(new);
    assert!(!d.join("tally/k/2").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

/// A module that tries paths out of its directory, and writes without a file quota.
const HOSTILE: &str = r#"(module
  (import "anode_mod" "file_write" (func $w (param i32 i32 i32 i32) (result i32)))
  (import "anode_mod" "file_read" (func $r (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "../x/etc/passwdok")
  (func (export "service") (param $op i32) (param $arg i64) (result i64)
    (i64.extend_i32_s
      (if (result i32) (i32.eq (local.get $op) (i32.const 0))
        (then (call $w (i32.const 0) (i32.const 4) (i32.const 0) (i32.const 1)))   ;; "../x"
        (else (if (result i32) (i32.eq (local.get $op) (i32.const 1))
          (then (call $w (i32.const 4) (i32.const 11) (i32.const 0) (i32.const 1))) ;; "/etc/passwd"
          (else (if (result i32) (i32.eq (local.get $op) (i32.const 2))
            (then (call $w (i32.const 15) (i32.const 2) (i32.const 0) (i32.const 70000))) ;; out of memory bounds
            (else (if (result i32) (i32.eq (local.get $op) (i32.const 3))
              (then (call $r (i32.const 15) (i32.const 2) (i32.const 0) (i32.const 65536) (i32.const 100)))
              (else (call $w (i32.const 15) (i32.const 2) (i32.const 0) (i32.const 1)))))))))))))
"#;

#[test]
fn escaping_paths_bad_buffers_and_writes_without_a_quota_are_refused() {
    let mut n = relay(&[1], Instant::now());
    let h = host(&mut n).unwrap();
    let manifest = |files: &str| {
        format!(
            "name = \"pathy\"\nversion = \"1.0.0\"\nsummary = \"Tries to leave its directory.\"\nkind = \"service\"\n{files}"
        )
    };
    let mut p = Package::new(manifest(""), wat::parse_str(HOSTILE).unwrap()).unwrap();
    p.sign(&key());
    h.install(p, &toml::Table::new()).unwrap();
    h.start("pathy").unwrap();
    assert_eq!(h.call_service("pathy", 0, 0).unwrap(), -2, "../x");
    assert_eq!(h.call_service("pathy", 1, 0).unwrap(), -2, "/etc/passwd");
    assert_eq!(h.call_service("pathy", 2, 0).unwrap(), -1, "out of bounds");
    assert_eq!(h.call_service("pathy", 4, 0).unwrap(), -5, "no file quota");
    assert_eq!(h.info("pathy").unwrap().files, (0, 0));
    assert_eq!(
        h.state("pathy"),
        Some(State::Active),
        "refusals are no faults"
    );
    // With a quota, the plain path is written; a read whose bytes would land past the memory's end
    // is refused.
    let mut p = Package::new(
        manifest("[resources]\nfile_bytes = 10\nfile_count = 1\n").replace("1.0.0", "1.1.0"),
        wat::parse_str(HOSTILE).unwrap(),
    )
    .unwrap();
    p.sign(&key());
    h.upgrade(p, &toml::Table::new()).unwrap();
    assert_eq!(h.call_service("pathy", 4, 0).unwrap(), 0);
    assert_eq!(h.call_service("pathy", 3, 0).unwrap(), -1);
    assert_eq!(h.info("pathy").unwrap().files, (1, 1));
    let refused = anode_modules::files::lock(h.files()).refused();
    assert_eq!(refused, [2, 0, 0, 0, 1], "2 bad paths, 1 over the count");
}

#[test]
fn manifests_ask_for_files_within_the_nodes_limits() {
    let base = "name = \"m\"\nversion = \"1.0.0\"\nsummary = \"A module.\"\nkind = \"service\"\n[resources]\n";
    for (res, why) in [
        ("file_bytes = 100\n", "go together"),
        ("file_count = 3\n", "go together"),
        (
            "file_bytes = 100000000\nfile_count = 3\n",
            "exceed the node's limits",
        ),
        (
            "file_bytes = 100\nfile_count = 100000\n",
            "exceed the node's limits",
        ),
    ] {
        let e = Manifest::parse(&format!("{base}{res}")).unwrap_err();
        assert!(e.to_string().contains(why), "{res}: {e}");
    }
    let m = Manifest::parse(&format!("{base}file_bytes = 100\nfile_count = 3\n")).unwrap();
    let l = m.resources.file_limits().unwrap();
    assert_eq!((l.max_bytes, l.max_files, l.max_file_bytes), (100, 3, 100));
}
