//! `anode completions SHELL` and `anode man`: generated from the command line itself, so
//! every subcommand is in them; the bash script parses (`bash -n`), the man pages are roff.

use std::process::Command;

fn anode(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_anode"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn completions_and_man_pages_cover_every_subcommand() {
    let out = anode(&["completions", "bash"]);
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).unwrap();
    for sub in ["capture", "view", "capsule", "new", "emulate", "module"] {
        assert!(script.contains(sub), "bash completion lacks {sub}");
    }
    let dir = std::env::temp_dir().join(format!("anode-man-{}", std::process::id()));
    let f = dir.join("anode.bash");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&f, &script).unwrap();
    let check = Command::new("bash").arg("-n").arg(&f).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    for shell in ["zsh", "fish"] {
        assert!(anode(&["completions", shell]).status.success());
    }

    let out = anode(&["man", "--dir", &dir.to_string_lossy()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in [
        "anode.1",
        "anode-capture.1",
        "anode-capsule-send.1",
        "anode-module-install.1",
    ] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page}: {text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
