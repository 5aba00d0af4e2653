//! The README's quick tour, every line as written (scripts/tour.sh), with the `anode` binary
//! cargo built for the tests in place of the tour's release build. Uses the README's fixed
//! loopback ports (4001-4003, 8470, 8471, 9464), which no other test uses.

use std::path::Path;
use std::process::Command;

#[test]
fn every_line_of_the_readme_tour_works() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(repo.join("scripts/tour.sh"))
        .env("ANODE_TOUR_BIN", env!("CARGO_BIN_EXE_anode"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("lines of the README's quick tour worked"),
        "{stdout}"
    );
}
