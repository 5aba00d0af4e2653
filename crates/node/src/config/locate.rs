//! Turning byte offsets, key names and TOML parser errors into `line:col` positions and
//! advice.

/// A 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pos {
    pub line: usize,
    pub col: usize,
}

/// The position of byte `offset` in `text` (clamped to the text).
pub(super) fn pos_of(text: &str, offset: usize) -> Pos {
    let mut off = offset.min(text.len());
    while !text.is_char_boundary(off) {
        off -= 1;
    }
    let before = text.get(..off).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    Pos { line, col }
}

/// Where `key = ...` is written inside the table `[section]` (a plain `[section]` header,
/// not an array of tables), if it is.
pub(super) fn key_pos(text: &str, section: &str, key: &str) -> Option<Pos> {
    let header = format!("[{section}]");
    let mut in_section = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with('[') {
            in_section = t.split('#').next().is_some_and(|h| h.trim() == header);
            continue;
        }
        if in_section
            && let Some(rest) = t.strip_prefix(key)
            && rest.trim_start().starts_with('=')
        {
            return Some(Pos {
                line: i + 1,
                col: line.len() - t.len() + 1,
            });
        }
    }
    None
}

/// Where the header `[section]` is, if written.
pub(super) fn section_pos(text: &str, section: &str) -> Option<Pos> {
    let header = format!("[{section}]");
    text.lines().enumerate().find_map(|(i, line)| {
        let t = line.trim_start();
        (t.split('#').next().is_some_and(|h| h.trim() == header)).then_some(Pos {
            line: i + 1,
            col: line.len() - t.len() + 1,
        })
    })
}

/// Splits a TOML parser or type error into "what is wrong" and "how to fix it".
pub(super) fn explain_toml_error(message: &str) -> (String, String) {
    let msg = message.trim().replace('\n', " ");
    if let Some((what, fix)) = msg.split_once(" is not a node address: ") {
        return (format!("{what} is not a node address"), fix.to_string());
    }
    let fix = if msg.starts_with("unknown field") {
        if msg.contains("`links`") || msg.contains("`routes`") {
            "links and routes are arrays of tables: write [[link]] and [[route]] (singular, double brackets)".to_string()
        } else {
            "remove the key or correct its spelling (the keys allowed here are listed)".to_string()
        }
    } else if let Some(field) = msg
        .strip_prefix("missing field `")
        .and_then(|r| r.split('`').next())
    {
        missing_field_fix(field)
    } else if msg.starts_with("duplicate key") {
        "keep only one of them".to_string()
    } else if msg.starts_with("invalid type") && msg.contains("expected a string") {
        "put addresses, names and paths in double quotes, e.g. peer = \"127.0.0.1:4002\""
            .to_string()
    } else if msg.starts_with("invalid type") && msg.contains("expected a boolean") {
        "write true or false without quotes".to_string()
    } else if msg.starts_with("invalid type") {
        "write numbers without quotes, e.g. mtu = 1472".to_string()
    } else if msg.starts_with("invalid value") {
        "use a whole number in the range the key allows (ports and costs are 0-65535)".to_string()
    } else {
        "check the TOML syntax: `key = value` lines, strings in double quotes, [section] headers; examples/node-a.toml is a working file".to_string()
    };
    (msg, fix)
}

fn missing_field_fix(field: &str) -> String {
    match field {
        "node" => {
            "add a [node] section with address = \"IP:PORT\" (this node's UDP address)".into()
        }
        "address" => {
            "add address = \"IP:PORT\" under [node], e.g. address = \"127.0.0.1:4001\"".into()
        }
        "peer" => "add peer = \"IP:PORT\" (the neighbor's [node] address) to this [[link]]".into(),
        "dest" => "add dest = \"IP:PORT\" (the node the route leads to) to this [[route]]".into(),
        "via" => {
            "add via = \"IP:PORT\" (the peer of one of the [[link]]s) to this [[route]]".into()
        }
        f => format!("add the key `{f}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions() {
        let t = "a = 1\n[node]\n  address = \"x\"\n[[link]]\naddress = 2\n";
        assert_eq!(pos_of(t, 0), Pos { line: 1, col: 1 });
        assert_eq!(pos_of(t, 6), Pos { line: 2, col: 1 });
        assert_eq!(pos_of(t, 1000).line, 6);
        assert_eq!(key_pos(t, "node", "address"), Some(Pos { line: 3, col: 3 }));
        assert_eq!(key_pos(t, "node", "addr"), None);
        assert_eq!(key_pos(t, "routing", "address"), None);
        assert_eq!(section_pos(t, "node"), Some(Pos { line: 2, col: 1 }));
    }

    #[test]
    fn advice() {
        let (w, f) = explain_toml_error("unknown field `adress`, expected one of `address`");
        assert!(w.contains("adress"));
        assert!(f.contains("spelling"));
        let (_, f) = explain_toml_error("missing field `peer`");
        assert!(f.contains("peer = "));
        let (w, f) = explain_toml_error(
            "'x' is not a node address: write IPv4 as 198.18.0.1 or 198.18.0.1:3322",
        );
        assert_eq!(w, "'x' is not a node address");
        assert!(f.starts_with("write IPv4"));
    }
}
