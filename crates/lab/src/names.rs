//! Lab names, the per-lab namespace prefix, namespace names and file names.
//!
//! Contract: a valid lab name is 1..=32 characters of `A-Z a-z 0-9 _ -` starting with a letter
//! or digit. Its prefix is `al` + 4 hex digits of a hash of the name + `-` (7 characters), so
//! every namespace of the lab starts with it and `ip netns list | grep ^al1f2e-` finds them.
//! A node's namespace is the prefix + its name when the name has at most 8 characters, else
//! the prefix + the name's first characters + `+` + its index (`+` never occurs in a node
//! name, so the two forms cannot meet): unique within the lab and at most 15 characters, the
//! kernel's limit for interface names (namespace names have no such limit; the bound keeps
//! them short to type).

/// Longest lab name.
pub const MAX_LAB_NAME: usize = 32;
/// Longest namespace name.
pub const MAX_NETNS: usize = 15;
/// Characters of a node name kept whole in its namespace name.
const NODE_PART: usize = MAX_NETNS - 7;

/// True if `name` is a valid lab name.
pub fn valid_lab_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_LAB_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The default lab name for a topology file: its stem with other characters as `_`, cut to
/// 32 characters (`lab` if nothing is left).
pub fn default_lab_name(path: &std::path::Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem.is_empty() {
        return "lab".into();
    }
    let mut name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_LAB_NAME)
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        name = format!("l{name}").chars().take(MAX_LAB_NAME).collect();
    }
    if valid_lab_name(&name) {
        name
    } else {
        "lab".into()
    }
}

/// FNV-1a, 32 bits: small, stable across versions and platforms.
fn fnv1a(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The namespace prefix of lab `name`: `al` + 4 hex digits + `-`.
pub fn prefix(name: &str) -> String {
    let h = fnv1a(name);
    format!("al{:04x}-", (h >> 16) ^ (h & 0xffff))
}

/// The namespace of node `index` named `node` in the lab with `prefix`.
pub fn netns_name(prefix: &str, node: &str, index: usize) -> String {
    if node.chars().count() <= NODE_PART {
        return format!("{prefix}{node}");
    }
    let tag = format!("+{index}");
    let keep = NODE_PART.saturating_sub(tag.len());
    let head: String = node.chars().take(keep).collect();
    format!("{prefix}{head}{tag}")
}

/// The file stem of node `index` named `node` (`NAME.toml`, `NAME.log`): the name itself,
/// or `~INDEX` for a name starting with `.` (so no file is hidden or means `..`).
pub fn file_stem(node: &str, index: usize) -> String {
    if node.starts_with('.') {
        format!("~{index}")
    } else {
        node.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn lab_names() {
        assert!(valid_lab_name("line4"));
        assert!(valid_lab_name("a-b_c9"));
        assert!(!valid_lab_name(""));
        assert!(!valid_lab_name("-x"));
        assert!(!valid_lab_name("a.b"));
        assert!(!valid_lab_name(&"x".repeat(33)));
        let p = std::path::Path::new;
        assert_eq!(default_lab_name(p("topologies/line4.toml")), "line4");
        assert_eq!(default_lab_name(p("/x/my.net.toml")), "my_net");
        assert_eq!(default_lab_name(p("/x/_x.toml")), "l_x");
        assert_eq!(default_lab_name(p("/")), "lab");
        assert_eq!(default_lab_name(p(&"y".repeat(40))).len(), 32);
    }

    #[test]
    fn prefixes_are_short_and_stable() {
        assert_eq!(prefix("line4"), prefix("line4"));
        assert_ne!(prefix("line4"), prefix("line5"));
        let p = prefix("anything");
        assert_eq!(p.len(), 7);
        assert!(p.starts_with("al") && p.ends_with('-'));
        assert!(p[2..6].chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn netns_names_fit_and_are_unique() {
        let p = prefix("lab");
        let names = [
            "a",
            "abcdefgh",
            "abcdefghi",
            "abcdefghij",
            "abcdef+1",
            "n0_0",
            "router-number-12",
            &"z".repeat(32),
        ];
        let mut seen = BTreeSet::new();
        for (i, n) in names.iter().enumerate() {
            let ns = netns_name(&p, n, i);
            assert!(ns.len() <= MAX_NETNS, "{ns}");
            assert!(ns.starts_with(&p));
            assert!(seen.insert(ns.clone()), "{ns} twice");
        }
        assert_eq!(netns_name(&p, "abcdefgh", 1), format!("{p}abcdefgh"));
        assert_eq!(netns_name(&p, "abcdefghi", 2), format!("{p}abcdef+2"));
        assert_eq!(netns_name(&p, "abcdefghi", 123), format!("{p}abcd+123"));
        for i in 0..5000 {
            assert!(netns_name(&p, &"q".repeat(20), i).len() <= MAX_NETNS);
        }
    }

    #[test]
    fn file_stems() {
        assert_eq!(file_stem("a", 0), "a");
        assert_eq!(file_stem("..", 3), "~3");
        assert_eq!(file_stem(".x", 4), "~4");
    }
}
