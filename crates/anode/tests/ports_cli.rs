//! `anode ports register|send`: an application on b holds service 80; a capsule sent from a
//! to service 80 at b reaches it; a second holder of the same service at b is refused.

mod node_util;

use std::process::Stdio;
use std::time::Duration;

use node_util::*;

#[test]
fn a_service_is_held_reached_and_not_taken_twice() {
    let dir = TestDir::new("ports");
    let (na, nb) = anode().start_pair(&dir);
    let b = nb.addr.clone();
    let bs = nb.socket.to_string_lossy().into_owned();
    let mut c = anode().command(&["ports", "register", "80", "-c", "1", "--timeout", "15"]);
    c.args(["--socket", &bs])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut holder = Proc::spawn(&mut c);
    // Wait for the acknowledged registration.
    let mut err = std::io::BufReader::new(holder.child().stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    assert!(line.contains("is held by port"), "{line}");

    let out = anode().run(
        &["ports", "register", "80", "--timeout", "1", "--socket", &bs],
        Duration::from_secs(10),
    );
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("held by another application"),
        "{e}"
    );

    let asock = na.socket.to_string_lossy().into_owned();
    let out = anode().run(
        &[
            "ports",
            "send",
            &b,
            "80",
            "hello service",
            "--socket",
            &asock,
        ],
        Duration::from_secs(10),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = holder.finish(Duration::from_secs(20));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("service 80: hello service"),
        "{text}"
    );
}
