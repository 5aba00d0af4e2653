//! The test kit's process helpers (`anode_testkit::process`) bound to the `anode` binary
//! under test.

#![allow(dead_code)] // each test binary uses its own part

use std::net::IpAddr;

pub use anode_testkit::process::*;

/// The `anode` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_anode");

/// The `anode` command under test.
pub fn anode() -> Anode {
    Anode::new(BIN)
}

/// An address as config files and the CLI write it.
pub fn addr(ip: IpAddr, port: u16) -> String {
    std::net::SocketAddr::new(ip, port).to_string()
}

/// A path as a string, for command lines.
pub fn path_str(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `anode ARGS`, killed after `limit`: (success, stdout, stderr).
pub fn run_cli(args: &[&str], limit: std::time::Duration) -> (bool, String, String) {
    let out = anode().run(args, limit);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A key pair from `anode keygen --out DIR/NAME`: (secret key file, public key hex).
pub fn keygen(dir: &TestDir, name: &str) -> (String, String) {
    let (good, out, err) = run_cli(
        &["keygen", "--json", "--out", &path_str(&dir.path(name))],
        std::time::Duration::from_secs(10),
    );
    assert!(good, "anode keygen: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    (
        v["secret_key_file"].as_str().unwrap().to_string(),
        v["public_key"].as_str().unwrap().to_string(),
    )
}

/// A line of `anode node` processes on 127.0.0.1, named `names`, each linked to the node
/// before and after it (sockets DIR/NAME.sock, the test kit's fast timers); node `i`'s config
/// gets `extra(i)` appended.
pub fn start_line(dir: &TestDir, names: &[&str], extra: impl Fn(usize) -> String) -> Vec<NodeProc> {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let addrs: Vec<String> = names.iter().map(|_| addr(ip, free_port(ip))).collect();
    (0..names.len())
        .map(|i| {
            let peers: Vec<(&str, &str)> = [i.checked_sub(1), Some(i + 1)]
                .into_iter()
                .flatten()
                .filter(|j| *j < names.len())
                .map(|j| (names[j], addrs[j].as_str()))
                .collect();
            let mut config =
                node_config(&addrs[i], &peers, &dir.path(&format!("{}.sock", names[i])));
            config.push_str(&extra(i));
            anode().start_node(dir, names[i], &addrs[i], &config)
        })
        .collect()
}
