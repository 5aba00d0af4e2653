//! [`exchange`]: one raw HTTP request to a local server and its whole response, for tests of
//! the metrics endpoint and the live view (the response is checked as text, status line and
//! headers included).

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
