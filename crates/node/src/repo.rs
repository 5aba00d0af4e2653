//! Module repositories (`anode repo serve`): fetching a package by name and version over
//! plain HTTP. The package is not verified here: the node verifies its signature against its
//! own trusted keys before installing it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anode_modules::Package;

/// Fetches NAME VERSION from the repository at `url` (not verified: the node does that).
pub fn fetch(url: &str, name: &str, version: &str) -> Result<Vec<u8>, String> {
    let body = http_get(url, &format!("/{name}/{version}"))?;
    let p = Package::decode(&body).map_err(|e| format!("{url}: {e}"))?;
    if p.manifest.name != name || p.manifest.version.to_string() != version {
        return Err(format!(
            "the repository {url} answered with {} for {name}@{version}: refused",
            p.id()
        ));
    }
    Ok(body)
}

/// A minimal HTTP/1.0 GET (plain http only), at most 16 MiB of body.
pub fn http_get(url: &str, path: &str) -> Result<Vec<u8>, String> {
    let host = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("'{url}': only http:// repositories are supported"))?
        .trim_end_matches('/');
    let mut s = TcpStream::connect(host).map_err(|e| format!("cannot connect to {host}: {e}"))?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .map_err(|e| format!("{host}: {e}"))?;
    let mut resp = Vec::new();
    s.take(16 << 20)
        .read_to_end(&mut resp)
        .map_err(|e| format!("{host}: {e}"))?;
    let split = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("{host}: malformed HTTP response"))?;
    let head = String::from_utf8_lossy(resp.get(..split).unwrap_or(&[])).to_string();
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        return Err(format!(
            "{host}{path}: {}",
            head.lines().next().unwrap_or("no status")
        ));
    }
    Ok(resp.get(split + 4..).unwrap_or(&[]).to_vec())
}
