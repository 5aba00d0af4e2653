//! Per-domain metrics in the Prometheus text format, and a minimal loopback-only HTTP
//! endpoint serving them.
//!
//! [`render`] is pure (a snapshot in, text out). [`MetricsConfig`] is the node
//! configuration's `[metrics]` table: off by default; `listen` must be a loopback address
//! (refused otherwise, with a message saying so). [`serve`] is the only I/O here: a std
//! `TcpListener` on its own thread answering every request with the current text; it reads
//! at most 8 KiB of a request and times out slow clients after 2 s.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use anode_core::{DomainReport, DomainStat};

/// `[metrics]` in the node configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Where to listen, e.g. `127.0.0.1:9464`; `None` (the default) means off.
    pub listen: Option<String>,
}

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// Not an `ip:port`.
    #[error("[metrics] listen = {0:?} is not an ip:port such as \"127.0.0.1:9464\"")]
    BadAddress(String),
    /// Not loopback.
    #[error(
        "[metrics] listen = {0:?} is not a loopback address; metrics are served on 127.0.0.1 or [::1] only (put a proxy in front to export them)"
    )]
    NotLoopback(String),
    /// Bind failed.
    #[error("cannot listen on {addr}: {err}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        err: std::io::Error,
    },
}

impl MetricsConfig {
    /// The checked listen address (`None`: metrics off).
    pub fn listen_addr(&self) -> Result<Option<SocketAddr>, MetricsError> {
        let Some(s) = &self.listen else {
            return Ok(None);
        };
        let a: SocketAddr = s.parse().map_err(|_| MetricsError::BadAddress(s.clone()))?;
        if !a.ip().is_loopback() {
            return Err(MetricsError::NotLoopback(s.clone()));
        }
        Ok(Some(a))
    }
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text for the nodes' domain reports (`Node::domain_reports`).
pub fn render(reports: &[DomainReport]) -> String {
    let mut o = String::new();
    let head = |o: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(
            o,
            "# HELP anode_domain_{name} {help}\n# TYPE anode_domain_{name} {kind}"
        );
    };
    type Get = fn(&DomainStat) -> u64;
    let series: [(&str, &str, &str, Get); 6] = [
        (
            "packets_total",
            "counter",
            "Packets handled for the domain.",
            |d| d.packets,
        ),
        (
            "bytes_total",
            "counter",
            "Bytes handled for the domain.",
            |d| d.bytes,
        ),
        (
            "cpu_ns_total",
            "counter",
            "CPU time charged to the domain, ns.",
            |d| d.cpu_ns,
        ),
        ("memory_bytes", "gauge", "Memory held by the domain.", |d| {
            d.memory_bytes
        }),
        (
            "memory_limit_bytes",
            "gauge",
            "The domain's memory limit.",
            |d| d.memory_limit,
        ),
        (
            "child_terminations_total",
            "counter",
            "Child domains terminated.",
            |d| d.child_terminations,
        ),
    ];
    let label = |r: &DomainReport, d: &DomainStat| {
        format!(
            "ee=\"{}\",domain=\"{}\",principal=\"{}\"",
            esc(&r.ee),
            d.id,
            esc(&d.principal)
        )
    };
    for (name, kind, help, get) in series {
        head(&mut o, name, kind, help);
        for r in reports {
            for d in &r.domains {
                let _ = writeln!(o, "anode_domain_{name}{{{}}} {}", label(r, d), get(d));
            }
        }
    }
    head(&mut o, "drops_total", "counter", "Drops by reason.");
    for r in reports {
        for d in &r.domains {
            for (why, n) in &d.drops {
                let _ = writeln!(
                    o,
                    "anode_domain_drops_total{{{},reason=\"{}\"}} {n}",
                    label(r, d),
                    esc(why)
                );
            }
        }
    }
    type GetR = fn(&DomainReport) -> u64;
    let totals: [(&str, &str, &str, GetR); 3] = [
        (
            "memory_bytes",
            "gauge",
            "Memory charged to all of the EE's domains.",
            |r| r.memory_used,
        ),
        (
            "memory_limit_bytes",
            "gauge",
            "The bound on the EE's domains' memory.",
            |r| r.memory_limit,
        ),
        (
            "terminations_total",
            "counter",
            "Domains terminated.",
            |r| r.terminations,
        ),
    ];
    for (name, kind, help, get) in totals {
        let _ = writeln!(
            o,
            "# HELP anode_nodeos_{name} {help}\n# TYPE anode_nodeos_{name} {kind}"
        );
        for r in reports {
            let _ = writeln!(o, "anode_nodeos_{name}{{ee=\"{}\"}} {}", esc(&r.ee), get(r));
        }
    }
    o
}

/// Serves `text()` on `cfg`'s loopback address from a background thread. `Ok(None)` when
/// metrics are off. Returns the bound address (port 0 picks one).
pub fn serve(
    cfg: &MetricsConfig,
    text: Arc<dyn Fn() -> String + Send + Sync>,
) -> Result<Option<SocketAddr>, MetricsError> {
    let Some(addr) = cfg.listen_addr()? else {
        return Ok(None);
    };
    let l = TcpListener::bind(addr).map_err(|err| MetricsError::Bind { addr, err })?;
    let bound = l
        .local_addr()
        .map_err(|err| MetricsError::Bind { addr, err })?;
    std::thread::Builder::new()
        .name("anode-metrics".into())
        .spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 8192];
                let mut n = 0;
                while n < buf.len() {
                    match s.read(buf.get_mut(n..).unwrap_or(&mut [])) {
                        Ok(0) | Err(_) => break,
                        Ok(k) => {
                            n += k;
                            if buf.get(..n).is_some_and(|b| b.windows(4).any(|w| w == b"\r\n\r\n")) {
                                break;
                            }
                        }
                    }
                }
                let body = text();
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        })
        .map_err(|err| MetricsError::Bind { addr, err })?;
    Ok(Some(bound))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Credentials, DomainId, NodeOs, NodeOsConfig, Policy};
    use std::net::TcpStream;

    #[test]
    fn loopback_only_and_off_by_default() {
        assert_eq!(MetricsConfig::default().listen_addr().unwrap(), None);
        let c = MetricsConfig {
            listen: Some("0.0.0.0:9464".into()),
        };
        let e = c.listen_addr().unwrap_err();
        assert!(e.to_string().contains("not a loopback address"), "{e}");
        let c = MetricsConfig {
            listen: Some("localhost".into()),
        };
        assert!(matches!(c.listen_addr(), Err(MetricsError::BadAddress(_))));
        let c: MetricsConfig = toml::from_str("listen = \"[::1]:9464\"").unwrap();
        assert!(c.listen_addr().unwrap().is_some());
    }

    #[test]
    fn serves_prometheus_text_over_http() {
        let mut cfg = NodeOsConfig::default();
        cfg.policies.insert("p\"q", Policy::default());
        let mut os = NodeOs::new(cfg);
        let d = os
            .create_domain(DomainId::ROOT, &Credentials::new("p\"q"), None)
            .unwrap();
        os.count_packet(d, 100);
        os.count_drop(d, "bandwidth");
        let text = render(&[os.report("capsule")]);
        assert!(
            text.contains(
                "anode_domain_packets_total{ee=\"capsule\",domain=\"1\",principal=\"p\\\"q\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("anode_nodeos_terminations_total{ee=\"capsule\"} 0"));
        assert!(text.contains("reason=\"bandwidth\"} 1"));
        let shared = Arc::new(text);
        let t2 = shared.clone();
        let addr = serve(
            &MetricsConfig {
                listen: Some("127.0.0.1:0".into()),
            },
            Arc::new(move || (*t2).clone()),
        )
        .unwrap()
        .unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        assert!(resp.starts_with("HTTP/1.1 200 OK"));
        assert!(resp.ends_with(shared.as_str()));
    }
}
