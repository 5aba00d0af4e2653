//! `anode store get|put|delete`: a key-value store in a node's files (capsule ABI v2). From a,
//! keys are put at b, read back, deleted; b's `[capsule] file_quota_count` refuses one key too
//! many; what b holds is there again after b restarts (stopped gracefully, or killed once its
//! files were written).

mod node_util;

use std::net::IpAddr;
use std::time::Duration;

use node_util::*;

fn store(a: &NodeProc, args: &[&str]) -> (bool, String, String) {
    let s = a.socket.to_string_lossy().into_owned();
    let mut v = vec!["store"];
    v.extend_from_slice(args);
    v.extend(["--socket", &s]);
    let out = anode().run(&v, Duration::from_secs(20));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn keys_are_put_read_deleted_bounded_and_kept_across_restarts() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let dir = TestDir::new("store");
    let (a, b) = (addr(ip, free_port(ip)), addr(ip, free_port(ip)));
    let na = anode().start_node(
        &dir,
        "a",
        &a,
        &node_config(&a, &[("to-b", &b)], &dir.path("a.sock")),
    );
    let b_cfg = format!(
        "{}\n[capsule]\ncache_dir = \"bcode\"\nfile_quota_count = 2\n",
        node_config(&b, &[("to-a", &a)], &dir.path("b.sock"))
    );
    let start_b = || anode().start_node(&dir, "b", &b, &b_cfg);
    let mut nb = start_b();
    assert!(
        wait_until(Duration::from_secs(10), || na.has_route(&b)
            && nb.has_route(&a)),
        "{}",
        na.log_text()
    );

    let (ok, out, err) = store(&na, &["put", &b, "greeting", "hello there"]);
    assert!(
        ok && out.contains("greeting = 11 bytes"),
        "{out}{err}\na:\n{}\nb:\n{}",
        na.log_text(),
        nb.log_text()
    );
    let (ok, out, err) = store(&na, &["get", &b, "greeting"]);
    assert!(ok && out.trim() == "hello there", "{out}{err}");
    let (ok, _, err) = store(&na, &["get", &b, "nothing"]);
    assert!(!ok && err.contains("no key \"nothing\""), "{err}");
    let (ok, _, err) = store(&na, &["get", &b, "../etc"]);
    assert!(!ok && err.contains("give 1-64 characters"), "{err}");

    // Two files at most for the store's code object at b.
    assert!(store(&na, &["put", &b, "second", "2"]).0);
    let (ok, _, err) = store(&na, &["put", &b, "third", "3"]);
    assert!(!ok && err.contains("over its file quotas"), "{err}");
    let (ok, out, _) = store(&na, &["delete", &b, "second"]);
    assert!(ok && out.contains("second deleted"), "{out}");
    let (ok, _, err) = store(&na, &["delete", &b, "second"]);
    assert!(!ok && err.contains("no key"), "{err}");
    assert!(store(&na, &["put", &b, "third", "3"]).0);

    // Killed once the files are on disk: they come back.
    let files = dir.0.join("bcode/files");
    let on_disk = |key: &str| {
        std::fs::read_dir(&files)
            .into_iter()
            .flatten()
            .flatten()
            .any(|d| d.path().join("kv").join(key).is_file())
    };
    assert!(
        wait_until(Duration::from_secs(10), || on_disk("greeting")
            && on_disk("third")),
        "files not written under {}",
        files.display()
    );
    nb.proc.signal(9); // SIGKILL
    drop(nb);
    nb = start_b();
    // a relearns its route to b (the first requests may find none).
    assert!(
        wait_until(Duration::from_secs(10), || store(&na, &["get", &b, "x"])
            .2
            .contains("no key")),
        "{}",
        nb.log_text()
    );
    let (ok, out, err) = store(&na, &["get", &b, "greeting"]);
    assert!(
        ok && out.trim() == "hello there",
        "{out}{err}\n{}",
        nb.log_text()
    );

    // Stopped gracefully right after a change: the change is written before b goes.
    assert!(store(&na, &["put", &b, "third", "changed"]).0);
    nb.proc.signal(15); // SIGTERM
    assert!(
        wait_until(Duration::from_secs(10), || nb.proc.exited()),
        "b did not stop"
    );
    drop(nb);
    let nb = start_b();
    assert!(
        wait_until(Duration::from_secs(10), || store(&na, &["get", &b, "x"])
            .2
            .contains("no key")),
        "{}",
        nb.log_text()
    );
    let (ok, out, err) = store(&na, &["get", &b, "third"]);
    assert!(
        ok && out.trim() == "changed",
        "{out}{err}\n{}",
        nb.log_text()
    );
}
