//! Module manifests are untrusted input (inside packages from a repository). Parsing,
//! validating, compiling the demux filters and applying a configuration must never panic.
#![no_main]

use anode_modules::Manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(m) = Manifest::parse(text) else {
        return;
    };
    let _ = m.validate();
    let _ = m.hook_point();
    let _ = m.demux_filters();
    let _ = m.configure(&toml::Table::new());
    // A configuration naming every schema key with a value of the wrong type or range.
    let mut given = toml::Table::new();
    for (i, k) in m.config.keys().enumerate() {
        let v = match i % 3 {
            0 => toml::Value::Integer(i64::MAX),
            1 => toml::Value::String("x".repeat(i)),
            _ => toml::Value::Boolean(true),
        };
        given.insert(k.clone(), v);
    }
    let _ = m.configure(&given);
});
