//! [`MetricsConfig`]: the node configuration's `[metrics]` table: off by default; `listen`
//! must be a loopback address (refused otherwise, with a message saying so). The endpoint
//! itself, with the NodeOS domains among the node's other metrics, is `anode_node::metrics`.

use std::net::SocketAddr;

use serde::Deserialize;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
