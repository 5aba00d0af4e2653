//! Processes an experiment starts: `anode node` (the real command, one per host), client
//! commands (`anode ping --json` ...) and the traffic tools beside the `anode` binary.
//!
//! Contract: a [`Child`] is stopped (SIGTERM, then SIGKILL after a second) when dropped, so
//! an experiment that fails half way leaves no process behind; [`client`] never waits longer
//! than its limit. Nodes get their control socket and code cache in the run's work
//! directory, never in the user's state directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Ctx, ExpError};

/// A running process, stopped when dropped.
#[derive(Debug)]
pub struct Child {
    child: std::process::Child,
    /// What it is, for messages.
    pub name: String,
    /// Its stderr (and stdout) file.
    pub log: PathBuf,
}

impl Child {
    /// What it wrote so far (the last 2,000 bytes).
    pub fn log_tail(&self) -> String {
        let t = std::fs::read_to_string(&self.log).unwrap_or_default();
        let cut = t.len().saturating_sub(2000);
        t.get(cut..).unwrap_or(&t).to_string()
    }

    /// Stops it (SIGTERM, SIGKILL after `grace`) and returns its log.
    pub fn stop(mut self, grace: Duration) -> String {
        self.terminate(grace);
        self.log_tail()
    }

    fn terminate(&mut self, grace: Duration) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill(2) on our own child's pid, not yet reaped (try_wait said it runs).
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let end = Instant::now() + grace;
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// True while it runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.terminate(Duration::from_secs(1));
    }
}

/// Starts `program args`, in network namespace `ns` if given (`ip netns exec` execs it, so
/// the child is the program itself), output to `work/NAME.log`.
pub fn spawn(
    ctx: &Ctx<'_>,
    ns: Option<&str>,
    name: &str,
    program: &Path,
    args: &[&str],
) -> Result<Child, ExpError> {
    let log = ctx.work.join(format!("{name}.log"));
    let file = std::fs::File::create(&log).map_err(|err| ExpError::Write {
        path: log.clone(),
        err,
    })?;
    let err_file = file.try_clone().map_err(|err| ExpError::Write {
        path: log.clone(),
        err,
    })?;
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(program);
            c
        }
        None => Command::new(program),
    };
    cmd.args(args)
        .env("XDG_STATE_HOME", ctx.work.join("state"))
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err_file);
    let child = cmd
        .spawn()
        .map_err(|e| ExpError::Command(format!("cannot start {}: {e}", program.display())))?;
    Ok(Child {
        child,
        name: name.to_string(),
        log,
    })
}

/// Waits until `f` holds, at most `limit`.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running `anode node`.
#[derive(Debug)]
pub struct Node {
    /// The process.
    pub child: Child,
    /// Its node address.
    pub addr: String,
    /// Its control socket.
    pub socket: PathBuf,
}

/// A node config: address, static links to `peers` (large MTU: capsules up to 60 KB pass,
/// the kernel fragments them), fast routing timers, socket and code cache in the work
/// directory, and `extra` TOML appended.
pub fn node_config(ctx: &Ctx<'_>, name: &str, addr: &str, peers: &[&str], extra: &str) -> String {
    let mut s = format!(
        "[node]\naddress = \"{addr}\"\n\n[routing]\nhello_interval_ms = 200\ndead_interval_ms = 1000\n\
         update_interval_ms = 500\ntriggered_delay_ms = 20\n\n[control]\nsocket = \"{}\"\n\n\
         [capsule]\ncache_dir = \"{}\"\n",
        ctx.work.join(format!("{name}.sock")).display(),
        ctx.work.join(format!("{name}-code")).display()
    );
    for (i, p) in peers.iter().enumerate() {
        s.push_str(&format!(
            "\n[[link]]\nname = \"l{i}\"\npeer = \"{p}\"\nstatic = true\nmtu = 65000\n"
        ));
    }
    s.push_str(extra);
    s
}

/// Starts `anode node --config WORK/NAME.toml` (in `ns`) and waits (10 s at most) for its
/// control socket.
pub fn start_node(
    ctx: &Ctx<'_>,
    ns: Option<&str>,
    name: &str,
    addr: &str,
    config: &str,
) -> Result<Node, ExpError> {
    let path = ctx.work.join(format!("{name}.toml"));
    std::fs::write(&path, config).map_err(|err| ExpError::Write {
        path: path.clone(),
        err,
    })?;
    let socket = ctx.work.join(format!("{name}.sock"));
    let _ = std::fs::remove_file(&socket);
    let p = path.to_string_lossy().into_owned();
    let mut child = spawn(ctx, ns, name, &ctx.anode, &["node", "--config", &p])?;
    if !wait_until(Duration::from_secs(10), || {
        socket.exists() || !child.running()
    }) || !socket.exists()
    {
        return Err(ExpError::Command(format!(
            "node {name} did not open its control socket:\n{}",
            child.log_tail()
        )));
    }
    Ok(Node {
        child,
        addr: addr.to_string(),
        socket,
    })
}

/// Runs `anode ARGS` (a client command) to completion, at most `limit`; its stdout.
pub fn client(ctx: &Ctx<'_>, args: &[&str], limit: Duration) -> Result<String, ExpError> {
    let a = ctx.anode.to_string_lossy().into_owned();
    anode_lab::sys::run(&a, args, None, "an anode client command", limit).map_err(Into::into)
}

impl Node {
    /// `anode ARGS --json --socket SOCK`, parsed: one JSON value per output line.
    pub fn json(
        &self,
        ctx: &Ctx<'_>,
        args: &[&str],
        limit: Duration,
    ) -> Result<Vec<serde_json::Value>, ExpError> {
        let sock = self.socket.to_string_lossy().into_owned();
        let mut a: Vec<&str> = args.to_vec();
        a.extend(["--json", "--socket", &sock]);
        let out = client(ctx, &a, limit)?;
        out.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).map_err(|e| ExpError::Measure {
                    what: format!("anode {}", args.join(" ")),
                    why: format!("output is not JSON ({e}): {l}"),
                })
            })
            .collect()
    }

    /// True if this node has a reachable route to `dest`.
    pub fn has_route(&self, ctx: &Ctx<'_>, dest: &str) -> bool {
        self.json(ctx, &["routes"], Duration::from_secs(5))
            .ok()
            .and_then(|v| v.first().cloned())
            .and_then(|v| v.as_array().cloned())
            .is_some_and(|routes| {
                routes
                    .iter()
                    .any(|r| r["dest"] == dest && r["reachable"] == true)
            })
    }

    /// Waits until this node answers an `anode ping` to `dest` (which also loads the ping
    /// code along the path), at most `limit`.
    pub fn await_ping(&self, ctx: &Ctx<'_>, dest: &str, limit: Duration) -> Result<(), ExpError> {
        let end = Instant::now() + limit;
        loop {
            let r = self.json(
                ctx,
                &["ping", dest, "-c", "1", "--timeout", "1"],
                Duration::from_secs(5),
            );
            match r {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= end => {
                    return Err(ExpError::Measure {
                        what: format!("ping {} -> {dest}", self.addr),
                        why: format!(
                            "no answer within {} s ({e}); node log:\n{}",
                            limit.as_secs(),
                            self.child.log_tail()
                        ),
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
}

/// A tool that is built beside `anode` (anode-blast, anode-sink): its path, or how to build
/// it.
pub fn tool(ctx: &Ctx<'_>, name: &str) -> Result<PathBuf, ExpError> {
    let dir = ctx.anode.parent().unwrap_or(Path::new("."));
    let p = dir.join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(ExpError::Missing {
            what: name.to_string(),
            path: p,
            hint: "build it beside anode: cargo build --release -p anode-netbench".into(),
        })
    }
}
