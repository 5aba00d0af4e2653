//! The control socket: mode 0600, one node per socket, removed on SIGTERM; clients without a
//! node say how to start one.

mod node_util;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use node_util::*;

#[test]
fn socket_is_private_exclusive_and_cleaned_up() {
    let dir = TestDir::new("sock");
    let ip = "127.0.0.1".parse().unwrap();
    let a_addr = addr(ip, free_port(ip));
    let cfg = node_config(&a_addr, &[], &dir.0.join("a.sock"));
    let mut a = anode().start_node(&dir, "a", &a_addr, &cfg);
    let mode = std::fs::metadata(&a.socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");
    assert_eq!(a.json(&["status"])["address"], a_addr.as_str());

    // A second node on the same socket is refused and leaves the first one alone.
    let other = addr(ip, free_port(ip));
    let p2 = dir.file("b.toml", &node_config(&other, &[], &a.socket));
    let out = anode().run(
        &["node", "--config", &p2.to_string_lossy()],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another node is already running"), "{err}");
    assert_eq!(a.json(&["status"])["address"], a_addr.as_str());

    // SIGTERM: a clean stop that removes the socket.
    let st = Command::new("kill")
        .args(["-TERM", &a.proc.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    assert!(
        wait_until(Duration::from_secs(10), || a.proc.exited()),
        "node ignored SIGTERM"
    );
    assert!(!a.socket.exists(), "socket left behind");
    assert!(
        a.log_text().contains("stopped (signal)"),
        "{}",
        a.log_text()
    );
}

#[test]
fn socket_directory_is_created_private() {
    let dir = TestDir::new("sockdir");
    let ip = "127.0.0.1".parse().unwrap();
    let a_addr = addr(ip, free_port(ip));
    let sock = dir.0.join("deep/run/a.sock");
    let cfgp = dir.file("a.toml", &node_config(&a_addr, &[], &sock));
    let mut p = Proc::new(
        Command::new(BIN)
            .args(["node", "--config"])
            .arg(&cfgp)
            .env("XDG_STATE_HOME", state_home())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(wait_until(Duration::from_secs(10), || sock.exists()));
    let m = std::fs::metadata(dir.0.join("deep/run"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(m & 0o777, 0o700);
    // `anode stop` stops it and the socket goes away.
    let out = anode().run(
        &["stop", "--socket", &sock.to_string_lossy()],
        Duration::from_secs(10),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(wait_until(Duration::from_secs(10), || p.exited()));
    assert!(!sock.exists());
}

#[test]
fn clients_without_a_node_say_how_to_start_one() {
    let out = anode().run(
        &["status", "--socket", "/nonexistent/anode.sock"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no node is running at /nonexistent/anode.sock"),
        "{err}"
    );
    assert!(err.contains("anode node --config"), "{err}");
}
