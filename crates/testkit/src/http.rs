//! [`exchange`]: one raw HTTP request to a local server and its whole response, for tests of
//! the metrics endpoint and the live view (the response is checked as text, status line and
//! headers included); [`openmetrics_families`]: what the Prometheus client library's reference
//! parser reads in a metrics page.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Sends `request` (a whole HTTP request, e.g. `"GET / HTTP/1.0\r\n\r\n"`) to `addr` and
/// reads the response until the server closes the connection (5 s read timeout).
pub fn exchange(addr: impl ToSocketAddrs, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    resp
}

/// `GET path` over HTTP/1.1 with `Connection: close`.
pub fn get(addr: impl ToSocketAddrs, path: &str) -> String {
    exchange(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    )
}

/// The families the Prometheus client library's reference parser (python3
/// `prometheus_client`, which `scripts/setup.sh` installs) finds in the OpenMetrics `text`,
/// one `name type samples` per line; panics with the parser's message if it refuses the text.
pub fn openmetrics_families(text: &str) -> String {
    let script = "import sys\nfrom prometheus_client.openmetrics.parser import text_string_to_metric_families as p\nfor f in p(sys.stdin.read()):\n    print(f.name, f.type, len(f.samples))\n";
    let mut child = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 (scripts/setup.sh installs python3-prometheus-client)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the reference parser refused the metrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
