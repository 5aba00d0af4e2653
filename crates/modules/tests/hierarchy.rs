//! ORE's service hierarchy as the module host enforces it: categories by kind or manifest,
//! qdiscs and routing functions only as system modules, a module served only by providers
//! of its own category or a lower one, and service lookup by interface picking the highest
//! matching version.

mod common;

use std::time::Instant;

use anode_modules::{Category, Manifest, Package, State, builtin, host};
use common::*;

/// The built-in `name` with `edit` applied to its manifest text, signed.
fn variant(name: &str, edit: impl Fn(String) -> String) -> Package {
    let p = builtin::package(name).unwrap();
    let mut p = Package::new(edit(p.manifest_text.clone()), p.code).unwrap();
    p.sign(&key());
    p
}

/// Adds `category = "..."` after the manifest's `kind` line.
fn with_category(text: String, c: &str) -> String {
    text.lines()
        .flat_map(|l| {
            let extra = l
                .starts_with("kind =")
                .then(|| format!("category = \"{c}\""));
            std::iter::once(l.to_string()).chain(extra)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_builtin_has_the_category_of_its_kind() {
    let want = [
        ("fcfs", Category::System),
        ("flowpin", Category::System),
        ("flowcount", Category::Function),
        ("knob", Category::Function),
        ("mix", Category::Function),
        ("ratelimit", Category::User),
        ("counter", Category::User),
    ];
    for (name, c) in want {
        let p = builtin::package(name).unwrap();
        assert_eq!(p.manifest.category(), c, "{name}");
    }
}

#[test]
fn a_qdisc_or_routing_function_is_a_system_module() {
    let p = builtin::package("drr").unwrap();
    let text = with_category(p.manifest_text.clone(), "user");
    let e = Manifest::parse(&text).unwrap_err();
    assert!(e.to_string().contains("its category is \"system\""), "{e}");
    assert!(Manifest::parse(&with_category(p.manifest_text, "system")).is_ok());
    let e = Manifest::parse(&with_category(
        builtin::package("counter").unwrap().manifest_text,
        "kernel",
    ))
    .unwrap_err();
    assert!(e.to_string().contains("category"), "{e}");
}

#[test]
fn a_module_is_served_only_by_its_own_category_or_a_lower_one() {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    let h = host(&mut n).unwrap();
    let empty = toml::Table::new();
    let mut cfg = toml::Table::new();
    cfg.insert("limit".into(), toml::Value::Integer(5));
    // ratelimit as a function module, flow-counter provided by a user module: not usable.
    let limiter = variant("ratelimit", |t| with_category(t, "function"));
    assert_eq!(h.install(limiter, &cfg).unwrap(), State::Installed);
    let user_counter = variant("flowcount", |t| with_category(t, "user"));
    h.install(user_counter, &empty).unwrap();
    let info = h.info("ratelimit").unwrap();
    assert_eq!(info.state, State::Installed);
    assert_eq!(info.category, Category::Function);
    assert!(
        info.missing[0].contains("a function module may use only its own or lower categories")
            && info.missing[0].contains("flowcount 1.2.0 is user"),
        "{:?}",
        info.missing
    );
    assert!(h.start("ratelimit").is_err());
    // The same provider as a function module (its default) resolves it.
    h.remove("flowcount").unwrap();
    h.install(signed("flowcount", None), &empty).unwrap();
    assert_eq!(h.state("ratelimit"), Some(State::Resolved));
    h.start("ratelimit").unwrap();
}

#[test]
fn lookup_gives_the_highest_matching_version_a_category_may_use() {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    let h = host(&mut n).unwrap();
    let empty = toml::Table::new();
    let renamed = |name: &'static str, version: &'static str, category: &'static str| {
        variant("flowcount", move |t| {
            with_category(
                t.replace("name = \"flowcount\"", &format!("name = \"{name}\""))
                    .replace("version = \"1.2.0\"", &format!("version = \"{version}\"")),
                category,
            )
        })
    };
    h.install(renamed("fc-old", "1.2.0", "function"), &empty)
        .unwrap();
    h.install(renamed("fc-new", "1.4.0", "function"), &empty)
        .unwrap();
    h.install(renamed("fc-two", "2.0.0", "function"), &empty)
        .unwrap();
    h.install(renamed("fc-user", "1.9.0", "user"), &empty)
        .unwrap();
    let req = |r: &str| semver::VersionReq::parse(r).unwrap();
    let got = h
        .lookup("flow-counter", &req("^1.0"), Category::Function)
        .unwrap();
    assert_eq!(
        (got.provider.as_str(), got.version.as_str()),
        ("fc-new", "1.4.0")
    );
    let got = h
        .lookup("flow-counter", &req("^1.0"), Category::User)
        .unwrap();
    assert_eq!(
        got.provider, "fc-user",
        "a user module may use a user provider"
    );
    assert!(
        h.lookup("flow-counter", &req("^1.0"), Category::System)
            .is_none(),
        "no system provider"
    );
    assert!(
        h.lookup("flow-counter", &req("^3"), Category::User)
            .is_none()
    );
    // ratelimit (user) is served 1.9.0 by fc-user; the listing names it as the user.
    let mut cfg = toml::Table::new();
    cfg.insert("limit".into(), toml::Value::Integer(5));
    h.install(signed("ratelimit", None), &cfg).unwrap();
    let all = h.services();
    assert_eq!(all.len(), 4);
    let versions: Vec<&str> = all.iter().map(|s| s.version.as_str()).collect();
    assert_eq!(
        versions,
        ["2.0.0", "1.9.0", "1.4.0", "1.2.0"],
        "highest first"
    );
    let served = all.iter().find(|s| s.provider == "fc-user").unwrap();
    assert_eq!(served.users, ["ratelimit"]);
}
