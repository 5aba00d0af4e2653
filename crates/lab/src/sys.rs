//! Small system helpers: privileges, bounded commands, processes by pid.
//!
//! Contract: [`run`] never waits longer than its limit (the command is killed and the error
//! says so); process helpers take a pid *and* the start time recorded with it, so a pid the
//! kernel has since given to another process is never signalled.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::error::LabError;

/// CAP_NET_ADMIN.
const CAP_NET_ADMIN: u32 = 12;
/// CAP_SYS_ADMIN (mounting the namespace files).
const CAP_SYS_ADMIN: u32 = 21;

/// True if this process has CAP_NET_ADMIN and CAP_SYS_ADMIN (as root has).
pub fn privileged() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    eff & (1 << CAP_NET_ADMIN) != 0 && eff & (1 << CAP_SYS_ADMIN) != 0
}

/// `Err(NotRoot)` unless [`privileged`].
pub fn require_privileges() -> Result<(), LabError> {
    if privileged() {
        Ok(())
    } else {
        Err(LabError::NotRoot)
    }
}

/// Runs `program args` with `stdin` fed in, at most `limit`; its stdout, or an error naming
/// `what`, the command and its stderr.
pub fn run(
    program: &str,
    args: &[&str],
    stdin: Option<&str>,
    what: &str,
    limit: Duration,
) -> Result<String, LabError> {
    let line = format!("{program} {}", args.join(" "));
    let fail = |output: String| LabError::Command {
        what: what.to_string(),
        cmd: line.clone(),
        output,
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("cannot start it ({e})")))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A command that fails early closes its stdin; its stderr says why.
        let _ = pipe.write_all(text.as_bytes());
    }
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return Err(fail(format!("cannot wait for it ({e})"))),
        Err(_) => {
            // SAFETY: kill(2) on the pid of our own child, not yet reaped (the waiting thread
            // reaps it after this signal).
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            return Err(fail(format!("no answer within {} s", limit.as_secs())));
        }
    };
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(fail(format!("{} ({})", err.trim(), out.status)))
    }
}

/// The fields of `/proc/PID/stat` after the command name.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The start time of process `pid` (clock ticks after boot), if it exists.
pub fn start_time(pid: u32) -> Option<u64> {
    // Field 22 of stat; the 20th after the command name.
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// True if `pid` runs (not a zombie) and started at `start` (when known).
pub fn alive(pid: u32, start: Option<u64>) -> bool {
    let Some(f) = stat_fields(pid) else {
        return false;
    };
    let running = f.first().is_some_and(|s| s != "Z" && s != "X");
    let same = match start {
        Some(t) => f.get(19).and_then(|v| v.parse::<u64>().ok()) == Some(t),
        None => true,
    };
    running && same
}

/// Sends `sig` to `pid` if it is still the process that started at `start`.
pub fn signal(pid: u32, start: Option<u64>, sig: i32) {
    if pid > 1 && alive(pid, start) {
        // SAFETY: kill(2) with a checked pid (not 0, 1 or negative, so never a group).
        unsafe {
            libc::kill(pid as libc::pid_t, sig);
        }
    }
}

/// The last `n` lines of the file at `path` (empty if unreadable).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    lines.get(from..).unwrap_or_default().join("\n")
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_processes() {
        let out = run("cat", &[], Some("hello"), "echo", Duration::from_secs(5)).unwrap();
        assert_eq!(out, "hello");
        let e = run(
            "sh",
            &["-c", "echo bad >&2; exit 3"],
            None,
            "a test",
            Duration::from_secs(5),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("a test failed") && e.contains("bad"), "{e}");
        let e = run(
            "sleep",
            &["5"],
            None,
            "sleeping",
            Duration::from_millis(200),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no answer"), "{e}");
        let me = std::process::id();
        let t = start_time(me);
        assert!(t.is_some());
        assert!(alive(me, t));
        assert!(!alive(me, t.map(|t| t + 1)));
        assert!(!alive(u32::MAX - 1, None));
    }
}
