//! A line of hosts, each its own network namespace, joined by veth pairs:
//! `h0 -- h1 -- ... -- h(k+1)`: a source, k routers and a destination (k = 0: the source and
//! the destination directly connected, PAN's "none" configuration).
//!
//! Addresses come from the benchmarking range 198.18.0.0/15 and exist only inside these
//! namespaces: segment j (between hosts j and j+1) is 198.18.(j+1).0/24, host j is .1 on it
//! and host j+1 is .2. Every host has routes to every segment, so with `ip_forward` on the
//! routers the kernel forwards end to end (the passive baseline).
//!
//! Namespaces are named `ax<pid><tag>-<host>` (the pid of this process, modulo 10,000), so
//! lines of concurrent runs do not collide.
//!
//! Contract: [`Line::up`] either builds the whole line or removes what it built and fails;
//! dropping a [`Line`] deletes its namespaces (and with them the veths and any process
//! left inside them has no network). At most 200 routers.

use std::time::Duration;

use anode_lab::sys;

use crate::ExpError;

/// The namespaces of one line, deleted on drop.
#[derive(Debug)]
pub struct Line {
    names: Vec<String>,
}

const LIMIT: Duration = Duration::from_secs(10);

/// The UDP port every host of a line uses (nodes, the blaster's source, the sink).
pub const PORT: u16 = 3322;

fn ip(args: &[&str]) -> Result<String, ExpError> {
    Ok(sys::run("ip", args, None, "namespace set-up", LIMIT)?)
}

impl Line {
    /// Builds the line with `routers` routers under names `ax<pid><tag>-0` ...; IP
    /// forwarding off.
    pub fn up(tag: &str, routers: usize) -> Result<Line, ExpError> {
        let prefix = format!("ax{}{tag}", std::process::id() % 10_000);
        if !sys::privileged() {
            return Err(ExpError::NotRoot(format!("the namespace line {prefix}")));
        }
        let n = routers.min(200) + 2;
        let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
        for name in &names {
            let _ = ip(&["netns", "del", name]);
        }
        let line = Line { names };
        line.build()?;
        Ok(line)
    }

    fn build(&self) -> Result<(), ExpError> {
        let n = self.names.len();
        for name in &self.names {
            ip(&["netns", "add", name])?;
            ip(&["-n", name, "link", "set", "lo", "up"])?;
        }
        for j in 0..n - 1 {
            let (a, b) = (&self.names[j], &self.names[j + 1]);
            let (ea, eb) = (format!("e{j}r"), format!("e{}l", j + 1));
            ip(&[
                "link", "add", &ea, "netns", a, "type", "veth", "peer", "name", &eb, "netns", b,
            ])?;
            ip(&[
                "-n",
                a,
                "addr",
                "add",
                &format!("198.18.{}.1/24", j + 1),
                "dev",
                &ea,
            ])?;
            ip(&[
                "-n",
                b,
                "addr",
                "add",
                &format!("198.18.{}.2/24", j + 1),
                "dev",
                &eb,
            ])?;
            ip(&["-n", a, "link", "set", &ea, "up"])?;
            ip(&["-n", b, "link", "set", &eb, "up"])?;
        }
        for h in 0..n {
            for seg in 0..n - 1 {
                // Segments h-1 and h are connected; the others go left or right.
                let via = if seg + 1 < h {
                    format!("198.18.{h}.1")
                } else if seg > h {
                    format!("198.18.{}.2", h + 1)
                } else {
                    continue;
                };
                ip(&[
                    "-n",
                    &self.names[h],
                    "route",
                    "add",
                    &format!("198.18.{}.0/24", seg + 1),
                    "via",
                    &via,
                ])?;
            }
        }
        Ok(())
    }

    /// Number of hosts (routers + 2).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Always false: a line has at least its two ends.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The namespace of host `i`.
    pub fn ns(&self, i: usize) -> &str {
        self.names.get(i).map_or("", String::as_str)
    }

    /// Host `i`'s address toward the destination (on segment i), or toward the source for
    /// the last host.
    pub fn addr(&self, i: usize) -> String {
        if i + 1 < self.names.len() {
            format!("198.18.{}.1", i + 1)
        } else {
            format!("198.18.{i}.2")
        }
    }

    /// Host `i`'s address toward the source (on segment i-1; host 0: its only address).
    pub fn addr_left(&self, i: usize) -> String {
        if i == 0 {
            self.addr(0)
        } else {
            format!("198.18.{i}.2")
        }
    }

    /// Turns kernel IP forwarding on or off in every router.
    pub fn forwarding(&self, on: bool) -> Result<(), ExpError> {
        let v = format!("net.ipv4.ip_forward={}", u8::from(on));
        for name in self
            .names
            .iter()
            .skip(1)
            .take(self.names.len().saturating_sub(2))
        {
            ip(&["netns", "exec", name, "sysctl", "-qw", &v])?;
        }
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = ip(&["netns", "del", name]);
        }
    }
}
