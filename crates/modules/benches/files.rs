//! What a module's files cost per service call, no I/O on the calling thread, in one run:
//! `flowcount_read` (`flowcount` op 1: a table lookup in the guest's memory, the baseline
//! of a service call) against `tally_read` (`tally` op 1: the count read from its file) and
//! `tally_add` (`tally` op 0: read, add one, write the file back; the store persists to a
//! directory, so each write also wakes the store's writer thread, which writes off this
//! thread).

use std::hint::black_box;

use anode_modules::{ModRuntime, ModuleHost, Package, Trust, builtin};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ed25519_dalek::SigningKey;

fn signed(name: &str, key: &SigningKey) -> Package {
    let mut p = builtin::package(name).expect("a built-in module");
    p.sign(key);
    p
}

fn bench_files(c: &mut Criterion) {
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let rt = ModRuntime::new(8).expect("runtime");
    let mut h = ModuleHost::new(rt, Trust::new(vec![key.verifying_key()]));
    let dir = std::env::temp_dir().join(format!("anode-mod-files-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    h.set_file_dir(dir.clone());
    for m in ["flowcount", "tally"] {
        h.install(signed(m, &key), &toml::Table::new())
            .expect("installs");
        h.start(m).expect("starts");
    }
    assert_eq!(h.call_service("tally", 0, 7).expect("a call"), 1);
    let mut g = c.benchmark_group("module_files");
    g.throughput(Throughput::Elements(1));
    for (name, module, op) in [
        ("flowcount_read", "flowcount", 1),
        ("tally_read", "tally", 1),
        ("tally_add", "tally", 0),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| black_box(h.call_service(module, op, 7).expect("a call")));
        });
    }
    g.finish();
    assert!(h.call_service("tally", 1, 7).expect("a call") > 1);
    let refused = anode_modules::files::lock(h.files()).refused();
    assert_eq!(
        refused,
        [0, 1, 0, 0, 0],
        "none refused but the first add's read (no count yet)"
    );
    drop(h);
    let _ = std::fs::remove_dir_all(dir);
}

criterion_group!(benches, bench_files);
criterion_main!(benches);
