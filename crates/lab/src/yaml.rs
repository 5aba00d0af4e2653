//! The little YAML the containerlab export needs, written by hand: the structure is fixed
//! (maps, lists, scalars), so every scalar that is text is written double-quoted by
//! [`quote`], and numbers by [`crate::netem::decimal`].
//!
//! Contract: [`quote`] returns a YAML 1.1/1.2 double-quoted scalar that reads back as exactly
//! its input — `\` and `"` are escaped, and every character YAML would not keep as it is
//! (C0 controls, DEL, C1 controls including NEL, the line and paragraph separators, the
//! byte-order mark) is written as a `\uXXXX` escape. [`unquote`] is its inverse (tests and
//! checks use it).

/// `s` as a double-quoted YAML scalar.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if (c as u32) < 0x20
                || ('\u{7f}'..='\u{9f}').contains(&c)
                || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') =>
            {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The text of a scalar written by [`quote`]; `None` if it is not one.
pub fn unquote(q: &str) -> Option<String> {
    let inner = q.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::new();
    let mut it = inner.chars();
    while let Some(c) = it.next() {
        match c {
            '\\' => match it.next()? {
                '\\' => out.push('\\'),
                '"' => out.push('"'),
                'u' => {
                    let hex: String = it.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                _ => return None,
            },
            '"' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_reads_back() {
        assert_eq!(quote("a:eth1"), "\"a:eth1\"");
        assert_eq!(quote("say \"hi\" \\ now"), r#""say \"hi\" \\ now""#);
        assert_eq!(quote("a\nb\tc"), "\"a\\u000ab\\u0009c\"");
        assert_eq!(quote("\u{85}\u{2028}x"), "\"\\u0085\\u2028x\"");
        for s in [
            "",
            "plain",
            "yes",
            "null",
            "- item",
            "# comment",
            "key: value",
            "'single'",
            "sh -c \"until ip -4 addr show dev lo | grep -q 'inet 198.18.0.1/32'; do sleep 0.2; done\"",
            "ünïcödé ✓",
            "\u{0}\u{1b}[0m\u{7f}\u{feff}",
        ] {
            let q = quote(s);
            assert_eq!(unquote(&q).as_deref(), Some(s), "{q}");
            assert!(!q.contains('\n'));
        }
        assert_eq!(unquote("plain"), None);
        assert_eq!(unquote("\"a\"b\""), None);
    }
}
