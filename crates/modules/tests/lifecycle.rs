//! Trust, lifecycle, dependencies, upgrade under a flood, faults.

mod common;

use std::time::{Duration, Instant};

use anode_core::{DropReason, LinkId};
use anode_modules::{ModuleError, Package, State, host};
use common::*;

#[test]
fn unsigned_tampered_and_untrusted_modules_are_refused() {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    let h = host(&mut n).unwrap();
    let empty = toml::Table::new();

    let unsigned = anode_modules::builtin::package("counter").unwrap();
    let e = h.install(unsigned, &empty).unwrap_err();
    assert!(matches!(e, ModuleError::Unsigned(_)), "{e}");
    assert!(e.to_string().contains("unsigned"), "{e}");

    // One byte of code changed after signing, through the package file.
    let good = signed("counter", None);
    let mut bytes = good.encode();
    let at = bytes.len() - 96 - 4 - 10;
    bytes[at] ^= 1;
    let tampered = Package::decode(&bytes).unwrap();
    let e = h.install(tampered, &empty).unwrap_err();
    assert!(matches!(e, ModuleError::Tampered(_)), "{e}");
    assert!(e.to_string().contains("tampered"), "{e}");

    // A changed summary in the manifest is caught the same way.
    let mut m = good.clone();
    m.manifest_text = m.manifest_text.replace("Counts", "Counted");
    let e = h.install(m, &empty).unwrap_err();
    assert!(matches!(e, ModuleError::Tampered(_)), "{e}");

    let mut other = anode_modules::builtin::package("counter").unwrap();
    other.sign(&ed25519_dalek::SigningKey::from_bytes(&[9u8; 32]));
    let e = h.install(other, &empty).unwrap_err();
    assert!(matches!(e, ModuleError::Untrusted { .. }), "{e}");
    assert!(e.to_string().contains("untrusted publisher key"), "{e}");

    // The intact, trusted package installs.
    assert_eq!(h.install(good, &empty).unwrap(), State::Resolved);
    assert!(h.list().iter().all(|m| m.name == "counter"));
}

#[test]
fn missing_dependency_leaves_the_module_unresolved_then_services_resolve_it() {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    let empty = toml::Table::new();
    let mut cfg = toml::Table::new();
    cfg.insert("limit".into(), toml::Value::Integer(5));
    {
        let h = host(&mut n).unwrap();
        assert_eq!(
            h.install(signed("ratelimit", None), &cfg).unwrap(),
            State::Installed
        );
        let info = h.info("ratelimit").unwrap();
        assert_eq!(info.state, State::Installed);
        assert!(
            info.missing.iter().any(|m| m.contains("flow-counter")),
            "{:?}",
            info.missing
        );
        let e = h.start("ratelimit").unwrap_err();
        assert!(e.to_string().contains("flow-counter"), "{e}");

        // A provider of the wrong major version (flow-counter 2.0.0) does not do.
        assert_eq!(
            h.install(signed("flowcount", Some("2.0.0")), &empty)
                .unwrap(),
            State::Resolved
        );
        let info = h.info("ratelimit").unwrap();
        assert_eq!(info.state, State::Installed);
        assert!(
            info.missing[0].contains("installed: 2.0.0, not usable"),
            "{:?}",
            info.missing
        );
        h.remove("flowcount").unwrap();
        // flow-counter 1.2.0 satisfies ^1.0.
        h.install(signed("flowcount", None), &empty).unwrap();
        assert_eq!(h.state("ratelimit"), Some(State::Resolved));
        h.start("ratelimit").unwrap();
        assert_eq!(
            h.state("flowcount"),
            Some(State::Active),
            "provider started first"
        );
        // The provider cannot be stopped under its active user.
        assert!(h.stop("flowcount").is_err());
    }
    // The rate limiter calls flow-counter through the host: flow 3 gets 5 packets through.
    for s in 0..8 {
        n.handle_packet(now, LinkId(0), datagram(1, 2, 3, s, 64));
    }
    let mut out = 0;
    while n.poll_transmit().is_some() {
        out += 1;
    }
    assert_eq!(out, 5);
    assert_eq!(n.counters().drops(DropReason::HookDropped), 3);
    let h = host(&mut n).unwrap();
    assert_eq!(h.call_service("flowcount", 1, 3).unwrap(), 8);
    // Upgrading the provider under its active user hands the per-flow counts over: flow 3
    // stays over its limit.
    h.upgrade(signed("flowcount", Some("1.3.0")), &toml::Table::new())
        .unwrap();
    assert_eq!(h.info("flowcount").unwrap().version, "1.3.0");
    assert_eq!(h.call_service("flowcount", 1, 3).unwrap(), 8);
    n.handle_packet(now, LinkId(0), datagram(1, 2, 3, 8, 64));
    assert!(n.poll_transmit().is_none());
    assert_eq!(n.counters().drops(DropReason::HookDropped), 4);
    let h = host(&mut n).unwrap();
    // Removing the provider sends the user back to installed, naming what it misses.
    h.remove("flowcount").unwrap();
    let info = h.info("ratelimit").unwrap();
    assert_eq!(info.state, State::Installed);
    assert!(info.missing.iter().any(|m| m.contains("flow-counter")));
}

/// Upgrades a counting processor 20 times in the middle of a flood: every packet is
/// forwarded, in order, and the count carries over from version to version.
#[test]
fn upgrade_under_flood_loses_and_reorders_nothing() {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    let empty = toml::Table::new();
    {
        let h = host(&mut n).unwrap();
        h.install(signed("counter", None), &empty).unwrap();
        h.start("counter").unwrap();
    }
    const TOTAL: u64 = 100_000;
    let mut next_expected = 0u64;
    let mut upgrades = 0;
    for s in 0..TOTAL {
        n.handle_packet(now, LinkId(0), datagram(1, 2, 1, s, 100));
        if s % 5_000 == 2_500 {
            upgrades += 1;
            let v = format!("1.0.{upgrades}");
            let h = host(&mut n).unwrap();
            h.upgrade(signed("counter", Some(&v)), &empty).unwrap();
            assert_eq!(h.info("counter").unwrap().version, v);
            assert_eq!(h.call_service("counter", 0, 0).unwrap() as u64, s + 1);
        }
        while let Some(t) = n.poll_transmit() {
            assert_eq!(t.link, LinkId(1));
            assert_eq!(seq_of(&t.buf), next_expected, "reordered or lost");
            next_expected += 1;
        }
    }
    assert_eq!(upgrades, 20);
    assert_eq!(next_expected, TOTAL, "every packet forwarded");
    assert_eq!(n.counters().total_drops(), 0);
    let h = host(&mut n).unwrap();
    assert_eq!(h.call_service("counter", 0, 0).unwrap() as u64, TOTAL);
    eprintln!(
        "upgrade under flood: {TOTAL} packets, {upgrades} upgrades, {next_expected} forwarded in order, 0 lost, count {}",
        TOTAL
    );
}

#[test]
fn a_faulting_module_is_stopped_and_the_node_goes_on() {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    let empty = toml::Table::new();
    {
        let h = host(&mut n).unwrap();
        h.install(signed("spin", None), &empty).unwrap();
        h.start("spin").unwrap();
        // Loaded after spin: still sees every packet, the first one included.
        h.install(signed("counter", None), &empty).unwrap();
        h.start("counter").unwrap();
    }
    let t0 = std::time::Instant::now();
    for s in 0..10 {
        n.handle_packet(now, LinkId(0), datagram(1, 2, 1, s, 64));
    }
    assert!(t0.elapsed() < Duration::from_secs(5));
    let mut out = 0;
    while n.poll_transmit().is_some() {
        out += 1;
    }
    assert_eq!(out, 10, "packets go on past the faulted module");
    let h = host(&mut n).unwrap();
    let info = h.info("spin").unwrap();
    assert_eq!(info.state, State::Stopped);
    assert!(info.last_error.unwrap().contains("fuel"));
    assert_eq!(h.call_service("counter", 0, 0).unwrap(), 10);
}

#[test]
fn processors_see_only_packets_matching_their_filter() {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    let empty = toml::Table::new();
    // Flow id at packet offset 16..24: match flow 5 only.
    let p = anode_modules::builtin::package("counter").unwrap();
    let text = format!(
        "{}\n[[filter]]\nkeys = [{{ offset = 16, value = \"0000000000000005\" }}]\n",
        p.manifest_text
    );
    let mut p = Package::new(text, p.code).unwrap();
    p.sign(&key());
    {
        let h = host(&mut n).unwrap();
        h.install(p, &empty).unwrap();
        h.start("counter").unwrap();
    }
    for s in 0..10 {
        n.handle_packet(
            now,
            LinkId(0),
            datagram(1, 2, if s % 2 == 0 { 5 } else { 6 }, s, 64),
        );
    }
    let h = host(&mut n).unwrap();
    assert_eq!(h.call_service("counter", 0, 0).unwrap(), 5);
}

/// A control service: operators turn its setting through service calls (the control socket's
/// `module call`); the setting survives an upgrade.
#[test]
fn a_control_service_keeps_its_setting_across_an_upgrade() {
    let now = Instant::now();
    let mut n = relay(&[1], now);
    let h = host(&mut n).unwrap();
    let mut cfg = toml::Table::new();
    cfg.insert("initial".into(), 3.into());
    assert_eq!(
        h.install(signed("knob", None), &cfg).unwrap(),
        State::Resolved
    );
    h.start("knob").unwrap();
    assert_eq!(h.info("knob").unwrap().kind, "control-service");
    assert_eq!(h.call_service("knob", 0, 0).unwrap(), 3);
    assert_eq!(h.call_service("knob", 1, 10).unwrap(), 3);
    h.upgrade(signed("knob", Some("1.1.0")), &toml::Table::new())
        .unwrap();
    assert_eq!(h.call_service("knob", 0, 0).unwrap(), 10);
}
