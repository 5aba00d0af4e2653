//! The network-namespace harness for tests that run real kernels and real tools.
//!
//! Such a test is `#[ignore = "needs root and netns"]` and starts with [`require`], which
//! panics with what is missing (root, a tool, AF_XDP sockets): run with `--include-ignored`
//! (as `.ci/run` does, as root) it either runs for real or fails; it never passes by
//! skipping. Namespaces are deleted on drop ([`Namespaces`]), also when the test panics;
//! processes started inside them are [`crate::process::Proc`]s, killed on drop. Addresses
//! come from 198.18.0.0/15 and 2001:2::/48 and exist only inside the namespaces.

use std::process::Command;

/// Panics unless `test` can run here: root, the shell `tools`, and AF_XDP sockets if
/// `af_xdp`. The message names what is missing and how to get it.
pub fn require(test: &str, tools: &[&str], af_xdp: bool) {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert!(
        euid == 0,
        "{test}: needs root (it makes network namespaces); run as root, e.g. `sudo -E cargo test -- --include-ignored`"
    );
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{test}: missing tools: {} (scripts/setup.sh installs them)",
        missing.join(", ")
    );
    if af_xdp {
        // SAFETY: plain socket(2); closed at once if it succeeded.
        let ok = unsafe {
            let fd = libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0);
            if fd >= 0 {
                libc::close(fd);
            }
            fd >= 0
        };
        assert!(
            ok,
            "{test}: the kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)"
        );
    }
}

/// Runs `cmd` with `sh -c`; panics with its output unless it succeeds; returns its stdout.
pub fn sh(cmd: &str) -> String {
    let o = Command::new("sh").args(["-c", cmd]).output().unwrap();
    assert!(
        o.status.success(),
        "{cmd}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Deletes the namespaces on drop (also when the test fails).
#[derive(Debug)]
pub struct Namespaces(pub Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Moves the calling thread into the named network namespace (`ip netns add`).
pub fn enter(ns: &str) {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
    // SAFETY: setns on an open namespace file changes only this thread's namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
}

/// Runs `f` on a thread that has entered the named network namespace.
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        enter(&ns);
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// Three namespaces `<tag>s<pid>`, `<tag>r<pid>`, `<tag>d<pid>` in a line, s0 --veth-- r0,
/// r1 --veth-- d0, every link up with MTU `mtu`; kernel forwarding off in r and no addresses
/// on r0/r1, so traffic crosses only through what the test runs there; the end hosts
/// addressed (s0 198.18.1.1/24, 2001:2:0:1::1/64; d0 198.18.2.2/24, 2001:2:0:2::2/64) and
/// routed by default via r (198.18.1.2 / 2001:2:0:1::2 and 198.18.2.1 / 2001:2:0:2::1), as
/// scripts/netns-router.sh does. Returns (s, r, d) and the guard that deletes them.
pub fn line(tag: &str, mtu: usize) -> (String, String, String, Namespaces) {
    let id = std::process::id();
    let (s, r, d) = (
        format!("{tag}s{id}"),
        format!("{tag}r{id}"),
        format!("{tag}d{id}"),
    );
    let guard = Namespaces(vec![s.clone(), r.clone(), d.clone()]);
    for n in [&s, &r, &d] {
        sh(&format!("ip netns add {n} && ip -n {n} link set lo up"));
    }
    sh(&format!(
        "ip -n {s} link add s0 type veth peer name r0 netns {r} && \
         ip -n {r} link add r1 type veth peer name d0 netns {d} && \
         ip -n {s} link set s0 mtu {mtu} up && ip -n {r} link set r0 mtu {mtu} up && \
         ip -n {r} link set r1 mtu {mtu} up && ip -n {d} link set d0 mtu {mtu} up && \
         ip netns exec {r} sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0 && \
         ip -n {s} addr add 198.18.1.1/24 dev s0 && ip -n {s} route add default via 198.18.1.2 && \
         ip -n {s} -6 addr add 2001:2:0:1::1/64 dev s0 nodad && \
         ip -n {s} -6 route add default via 2001:2:0:1::2 && \
         ip -n {d} addr add 198.18.2.2/24 dev d0 && ip -n {d} route add default via 198.18.2.1 && \
         ip -n {d} -6 addr add 2001:2:0:2::2/64 dev d0 nodad && \
         ip -n {d} -6 route add default via 2001:2:0:2::1"
    ));
    (s, r, d, guard)
}
