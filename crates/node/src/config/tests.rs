//! Config parsing: good files, and every kind of bad file naming its line and a fix.

use std::path::Path;
use std::time::Duration;

use super::*;

const GOOD: &str = r#"
[node]
address = "127.0.0.1:4001"
default_rb = 16

[routing]
hello_interval_ms = 100
dead_interval_ms = 400

[[link]]
name = "to-b"
peer = "127.0.0.1:4002"
cost = 2

[[link]]
peer = "127.0.0.1:4003"
static = true
mtu = 1200

[[route]]
dest = "127.0.0.1:4009"
via = "127.0.0.1:4002"
metric = 3

[control]
socket = "/tmp/x/a.sock"
"#;

fn err(text: &str) -> (usize, String) {
    match parse(Path::new("n.toml"), text) {
        Ok(f) => panic!("accepted: {f:?}"),
        Err(e @ ConfigFileError::Invalid { line, .. }) => (line, e.to_string()),
        Err(e) => panic!("{e}"),
    }
}

fn with(extra_node: &str, rest: &str) -> String {
    format!("[node]\naddress = \"127.0.0.1:4001\"\n{extra_node}\n{rest}")
}

#[test]
fn good_file() {
    let f = parse(Path::new("/etc/anode/a.toml"), GOOD).unwrap();
    assert_eq!(f.node.address, "127.0.0.1:4001".parse().unwrap());
    assert_eq!(f.node.default_rb, 16);
    assert_eq!(f.node.routing.hello_interval, Duration::from_millis(100));
    assert_eq!(f.node.routing.update_interval, Duration::from_secs(5));
    assert_eq!(f.bind, "127.0.0.1:4001".parse().unwrap());
    assert_eq!(f.links.len(), 2);
    assert_eq!(f.links[0].name, "to-b");
    assert_eq!(f.links[0].cost, 2);
    assert!(!f.links[0].static_neighbor);
    assert!(f.links[1].static_neighbor);
    assert_eq!(f.links[1].mtu, 1200);
    assert_eq!(
        f.routes,
        vec![StaticRoute {
            dest: "127.0.0.1:4009".parse().unwrap(),
            via: "127.0.0.1:4002".parse().unwrap(),
            metric: 3
        }]
    );
    assert_eq!(f.socket, Path::new("/tmp/x/a.sock"));
}

#[test]
fn defaults_bind_and_socket() {
    let f = parse(
        Path::new("/etc/anode/a.toml"),
        &with("bind = \"[::]:5000\"", "[control]\nsocket = \"run/a.sock\""),
    )
    .unwrap();
    assert_eq!(f.bind, "[::]:5000".parse().unwrap());
    assert_eq!(f.socket, Path::new("/etc/anode/run/a.sock"));
    let f = parse(Path::new("a.toml"), &with("bind = \"0.0.0.0\"", "")).unwrap();
    assert_eq!(f.bind, "0.0.0.0:4001".parse().unwrap());
    assert!(f.socket.ends_with("4001.sock"));
}

#[test]
fn ipv6_file() {
    let f = parse(
        Path::new("a.toml"),
        "[node]\naddress = \"[::1]:4001\"\n[[link]]\npeer = \"[::1]:4002\"\n",
    )
    .unwrap();
    assert_eq!(f.links[0].peer, "[::1]:4002".parse().unwrap());
}

#[test]
fn unknown_key_names_line_and_fix() {
    let (line, m) = err(&with("adress = \"x\"", ""));
    assert_eq!(line, 3, "{m}");
    assert!(m.starts_with("n.toml:3:"), "{m}");
    assert!(m.contains("adress") && m.contains("spelling"), "{m}");
    let (line, m) = err(&with("", "[[link]]\npeer = \"127.0.0.1:4002\"\nmut = 3"));
    assert_eq!(line, 6, "{m}");
    let (line, m) = err(&with("", "[routing]\nhello_ms = 3"));
    assert_eq!(line, 5, "{m}");
    let (_, m) = err(&with("", "[[links]]\npeer = \"127.0.0.1:4002\""));
    assert!(m.contains("[[link]]"), "{m}");
}

#[test]
fn bad_values_name_line_and_fix() {
    let (line, m) = err("[node]\n\naddress = \"node-a\"\n");
    assert_eq!(line, 3, "{m}");
    assert!(
        m.contains("not a node address") && m.contains("198.18.0.1:3322"),
        "{m}"
    );
    let (line, m) = err(&with(
        "",
        "[[link]]\npeer = \"127.0.0.1:4002\"\nmtu = \"big\"",
    ));
    assert_eq!(line, 6, "{m}");
    assert!(m.contains("without quotes"), "{m}");
    let (line, m) = err("[node]\naddress = \"127.0.0.1:4001\n");
    assert_eq!(line, 2, "{m}");
    assert!(m.contains("TOML syntax"), "{m}");
    let (_, m) = err("[node]\n");
    assert!(m.contains("address = "), "{m}");
    let (line, m) = err(&with("", "[[link]]\nname = \"x\""));
    assert_eq!(line, 4, "{m}");
    assert!(m.contains("peer = "), "{m}");
    let (line, m) = err(&with("bind = \"here\"", ""));
    assert_eq!(line, 3, "{m}");
    assert!(m.contains("bind 'here'"), "{m}");
    let (line, m) = err("[node]\naddress = \"0.0.0.0:4001\"\n");
    assert_eq!(line, 2, "{m}");
    assert!(m.contains("bind"), "{m}");
}

#[test]
fn link_to_self() {
    let (line, m) = err(&with(
        "",
        "[[link]]\nname = \"loop\"\npeer = \"127.0.0.1:4001\"",
    ));
    assert_eq!(line, 6, "{m}");
    assert!(m.contains("own address") && m.contains("neighbor's"), "{m}");
}

#[test]
fn link_problems() {
    let two = "[[link]]\npeer = \"127.0.0.1:4002\"\n[[link]]\npeer = \"127.0.0.1:4002\"";
    let (line, m) = err(&with("", two));
    assert_eq!(line, 7, "{m}");
    assert!(m.contains("one [[link]] per neighbor"), "{m}");
    let (line, m) = err(&with("", "[[link]]\npeer = \"[::1]:4002\""));
    assert_eq!(line, 5, "{m}");
    assert!(m.contains("IP versions"), "{m}");
    let (line, m) = err(&with("", "[[link]]\npeer = \"127.0.0.1:4002\"\ncost = 0"));
    assert_eq!(line, 6, "{m}");
    let (line, m) = err(&with("", "[[link]]\npeer = \"127.0.0.1:4002\"\nmtu = 20"));
    assert_eq!(line, 6, "{m}");
    assert!(m.contains("1472"), "{m}");
}

#[test]
fn route_via_non_neighbor() {
    let text = with(
        "",
        "[[link]]\npeer = \"127.0.0.1:4002\"\n[[route]]\ndest = \"127.0.0.1:4009\"\nvia = \"127.0.0.1:4003\"",
    );
    let (line, m) = err(&text);
    assert_eq!(line, 8, "{m}");
    assert!(m.contains("not the peer of any [[link]]"), "{m}");
    assert!(m.contains("\"127.0.0.1:4002\""), "{m}");
    let (line, m) = err(&with(
        "",
        "[[link]]\npeer = \"127.0.0.1:4002\"\n[[route]]\ndest = \"127.0.0.1:4001\"\nvia = \"127.0.0.1:4002\"",
    ));
    assert_eq!(line, 7, "{m}");
}

#[test]
fn timers_from_validate_point_at_the_key() {
    let (line, m) = err(&with(
        "",
        "[routing]\nhello_interval_ms = 1000\ndead_interval_ms = 500",
    ));
    assert_eq!(line, 6, "{m}");
    assert!(m.contains("must exceed hello_interval_ms"), "{m}");
    assert!(m.contains("; 3-4 times is usual"), "{m}");
    // Only the hello is set: the message points at it.
    let (line, m) = err(&with("", "[routing]\n\nhello_interval_ms = 9000"));
    assert_eq!(line, 6, "{m}");
    let (line, m) = err(&with("default_rb = 0", ""));
    assert_eq!(line, 3, "{m}");
}

#[test]
fn socket_path_too_long() {
    let long = "x".repeat(120);
    let (line, m) = err(&with("", &format!("[control]\nsocket = \"/{long}\"")));
    assert_eq!(line, 5, "{m}");
    assert!(m.contains("shorter"), "{m}");
}

#[test]
fn examples_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for name in ["node-a.toml", "node-b.toml"] {
        let f = load(&root.join(name)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.links.len(), 1, "{name}");
    }
}

#[test]
fn unreadable_file() {
    let e = load(Path::new("/nonexistent/n.toml")).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/n.toml: cannot read"));
}

#[test]
fn metrics_are_off_by_default_and_loopback_only() {
    let f = parse(Path::new("n.toml"), GOOD).unwrap();
    assert_eq!(f.metrics, None);
    let ok = format!("{GOOD}\n[metrics]\nlisten = \"127.0.0.1:9464\"\n");
    assert_eq!(
        parse(Path::new("n.toml"), &ok).unwrap().metrics,
        Some("127.0.0.1:9464".parse().unwrap())
    );
    let bad = format!("{GOOD}\n[metrics]\nlisten = \"0.0.0.0:9464\"\n");
    let (line, msg) = err(&bad);
    assert_eq!(line, bad.lines().count());
    assert!(msg.contains("not a loopback address"), "{msg}");
    assert!(msg.contains("127.0.0.1:9464"), "{msg}");
}

#[test]
fn capsule_cache_dir() {
    let f = parse(
        Path::new("/etc/anode/a.toml"),
        &with("", "[capsule]\ncache_dir = \"code\"\n"),
    )
    .unwrap();
    assert_eq!(f.code_cache, Path::new("/etc/anode/code"));
    let f = parse(Path::new("/etc/anode/a.toml"), &with("", "")).unwrap();
    assert!(f.code_cache.ends_with("code-4001"), "{:?}", f.code_cache);
    let (line, msg) = err(&with("", "[capsule]\ncache_dir = \" \"\n"));
    assert_eq!(line, 5, "{msg}");
    assert!(msg.contains("cache_dir is empty"), "{msg}");
    let (line, msg) = err(&with("", "[capsule]\ncache = \"x\"\n"));
    assert_eq!(line, 5, "{msg}");
    assert!(msg.contains("cache"), "{msg}");
}

#[test]
fn an_address_without_a_port_is_refused_not_defaulted() {
    let (line, msg) = err("[node]\naddress = \"127.0.0.1\"\n");
    assert_eq!(line, 2, "{msg}");
    assert!(
        msg.contains("has no port") && msg.contains("127.0.0.1:3322"),
        "{msg}"
    );
    let (line, msg) = err(&with("", "[[link]]\npeer = \"127.0.0.2\"\n"));
    assert_eq!(line, 5, "{msg}");
    assert!(
        msg.contains("[[link]] peer '127.0.0.2' has no port"),
        "{msg}"
    );
    let ok = parse(
        Path::new("n.toml"),
        &with("", "[[link]]\npeer = \"[::1]:4002\"\n"),
    );
    assert!(ok.is_err_and(|e| !e.to_string().contains("no port")));
}

#[test]
fn control_limits_and_cache_bound() {
    let f = parse(
        Path::new("n.toml"),
        &with(
            "",
            "[control]\nmax_connections = 8\nidle_timeout_s = 20\n[capsule]\ncache_max_bytes = 8388608\n",
        ),
    )
    .unwrap();
    assert_eq!(f.control.max_connections, 8);
    assert_eq!(f.control.idle, Duration::from_secs(20));
    assert_eq!(f.code_cache_max_bytes, 8 << 20);
    let (line, msg) = err(&with("", "[control]\nmax_connections = 0\n"));
    assert_eq!(line, 5, "{msg}");
    let (_, msg) = err(&with("", "[capsule]\ncache_max_bytes = 10\n"));
    assert!(msg.contains("below 1 MiB"), "{msg}");
}

#[test]
fn capsule_max_code_bytes_defaults_to_the_loader_bound_and_is_checked() {
    let ok = |t: &str| parse(Path::new("n.toml"), t).unwrap();
    let f = ok(&with("", ""));
    assert_eq!(f.code_max_bytes, 1 << 20);
    let f = ok(&with("", "[capsule]\nmax_code_bytes = 33554432\n"));
    assert_eq!(f.code_max_bytes, 32 << 20);
    for bad in ["100", "100000000"] {
        let (line, msg) = err(&with("", &format!("[capsule]\nmax_code_bytes = {bad}\n")));
        assert!(msg.contains("outside 1 KiB - 64 MiB"), "{msg}");
        assert!(line > 0, "{msg}");
    }
}

#[test]
fn plan_table_keys_and_hosts() {
    let key = "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29";
    let text = with(
        "",
        &format!(
            "[plan]\ntrusted_keys = [\"{key}\"]\n[plan.hosts]\nb = \"127.0.0.1:4002\"\n\
             far = \"[::1]:4009\"\n"
        ),
    );
    let f = parse(Path::new("n.toml"), &text).unwrap();
    assert_eq!(f.plan.trusted_keys.len(), 1);
    assert_eq!(hex::encode(f.plan.trusted_keys[0]), key);
    assert_eq!(
        f.plan.hosts,
        vec![
            ("b".to_string(), "127.0.0.1:4002".parse().unwrap()),
            ("far".to_string(), "[::1]:4009".parse().unwrap()),
        ]
    );
    let (line, msg) = err(&with("", "[plan]\ntrusted_keys = [\"00\"]\n"));
    assert_eq!(line, 5, "{msg}");
    assert!(msg.contains("not an ed25519 public key"), "{msg}");
    let (line, msg) = err(&with("", "[plan.hosts]\nb = \"127.0.0.1\"\n"));
    assert_eq!(line, 5, "{msg}");
    assert!(msg.contains("has no port"), "{msg}");
    let (_, msg) = err(&with("", "[plan]\nnames = {}\n"));
    assert!(msg.contains("names"), "{msg}");
}

#[test]
fn link_impairments() {
    let text = with(
        "",
        "[[link]]\npeer = \"127.0.0.1:4002\"\n\
         impair = { delay_ms = 5, loss = 0.01, rate_mbps = 100, queue_bytes = 65536 }\n\
         [[link]]\npeer = \"127.0.0.1:4003\"\n\
         [[link]]\npeer = \"127.0.0.1:4004\"\nimpair = {}\n",
    );
    let f = parse(Path::new("n.toml"), &text).unwrap();
    assert_eq!(f.impairments.len(), 2);
    let i = f.impairments[0];
    assert_eq!(i.peer, "127.0.0.1:4002".parse().unwrap());
    assert_eq!(i.delay, Duration::from_millis(5));
    assert_eq!(i.loss_ppb, 10_000_000);
    assert_eq!(i.rate_bps, Some(100_000_000));
    assert_eq!(i.queue_bytes, 65536);
    let d = i.to_driver();
    assert!((d.loss - 0.01).abs() < 1e-12);
    let j = f.impairments[1];
    assert_eq!(j.peer, "127.0.0.1:4004".parse().unwrap());
    assert_eq!((j.delay, j.loss_ppb, j.rate_bps), (Duration::ZERO, 0, None));
    let opts = crate::RunOptions::from_file(&f);
    assert_eq!(opts.driver.impairments.len(), 2);
    for (bad, what) in [
        ("loss = 1.5", "not a probability"),
        ("delay_ms = -1", "outside 0..=60000"),
        ("rate_mbps = 0", "rate_mbps"),
        ("queue_bytes = 0", "queue_bytes"),
    ] {
        let (line, msg) = err(&with(
            "",
            &format!("[[link]]\npeer = \"127.0.0.1:4002\"\nimpair = {{ {bad} }}\n"),
        ));
        assert_eq!(line, 6, "{msg}");
        assert!(msg.contains(what), "{bad}: {msg}");
    }
    let (_, msg) = err(&with(
        "",
        "[[link]]\npeer = \"127.0.0.1:4002\"\nimpair = { jitter_ms = 1 }\n",
    ));
    assert!(msg.contains("jitter_ms"), "{msg}");
}

#[test]
fn dataplane_mode() {
    use anode_io::KernelTransit;
    let f = parse(Path::new("a.toml"), &with("", "")).unwrap();
    assert_eq!(f.dataplane, KernelTransit::Auto, "auto by default");
    assert!(f.udp_offload, "UDP offload on by default");
    let off = with("", "[dataplane]\nudp_offload = false");
    assert!(!parse(Path::new("a.toml"), &off).unwrap().udp_offload);
    assert!(f.busy_poll.is_zero(), "no busy polling by default");
    let spin = with("", "[dataplane]\nbusy_poll_us = 200");
    assert_eq!(
        parse(Path::new("a.toml"), &spin).unwrap().busy_poll,
        std::time::Duration::from_micros(200)
    );
    let (_, msg) = err(&with("", "[dataplane]\nbusy_poll_us = 2000000"));
    assert!(
        msg.contains("busy_poll_us") && msg.contains("one second"),
        "{msg}"
    );
    let (_, msg) = err(&with("", "[dataplane]\nudp_offload = \"yes\""));
    assert!(
        msg.contains("udp_offload") || msg.contains("boolean"),
        "{msg}"
    );
    for (mode, want) in [
        ("auto", KernelTransit::Auto),
        ("tc", KernelTransit::Tc),
        ("socket", KernelTransit::Off),
    ] {
        let f = parse(
            Path::new("a.toml"),
            &with("", &format!("[dataplane]\nmode = \"{mode}\"")),
        )
        .unwrap();
        assert_eq!(f.dataplane, want, "{mode}");
    }
    let text = with("", "[dataplane]\nmode = \"xdp\"");
    let (line, msg) = err(&text);
    assert_eq!(text.lines().nth(line - 1), Some("mode = \"xdp\""), "{msg}");
    assert!(
        msg.contains("not available for ANEP transit") && msg.contains("\"tc\""),
        "{msg}"
    );
    let (_, msg) = err(&with("", "[dataplane]\nmode = \"fast\""));
    assert!(msg.contains("\"fast\" is not one anode knows"), "{msg}");
    let (_, msg) = err(&with("", "[dataplane]\nmod = \"tc\""));
    assert!(msg.contains("mod"), "{msg}");
}

#[test]
fn remote_management() {
    use anode_ctl::remote::RemoteClass;
    let f = parse(Path::new("a.toml"), &with("", "")).unwrap();
    assert_eq!(f.remote, None, "off by default");
    let key = hex::encode(anode_modules::generate_key().verifying_key().as_bytes());
    let text = with(
        "",
        &format!(
            "[remote]\nlisten = \"198.18.0.1:7100\"\nmax_ttl_s = 60\n\n[[remote.key]]\n\
             key = \"{key}\"\nmay = [\"read\", \"shutdown\"]\n"
        ),
    );
    let r = parse(Path::new("a.toml"), &text).unwrap().remote.unwrap();
    assert_eq!(r.listen, "198.18.0.1:7100".parse().unwrap());
    assert_eq!((r.max_ttl_s, r.max_connections), (60, 16));
    assert_eq!(r.keys.len(), 1);
    assert_eq!(r.keys[0].name, &key[..16], "named by the key by default");
    assert!(r.keys[0].may.contains(&RemoteClass::Shutdown));
    assert!(!r.keys[0].may.contains(&RemoteClass::Manage));
    for (bad, says, at) in [
        ("max_ttl_s = 60", "max_ttl_s = 0", "out of range"),
        (
            "listen = \"198.18.0.1:7100\"",
            "listen = \"x\"",
            "is not IP:PORT",
        ),
        (
            "listen = \"198.18.0.1:7100\"",
            "listen = \"198.18.0.1:0\"",
            "port 0",
        ),
        ("may = [\"read\", \"shutdown\"]", "may = []", "may is empty"),
    ] {
        let text = text.replace(bad, says);
        let (line, msg) = err(&text);
        assert_eq!(text.lines().nth(line - 1), Some(says), "{msg}");
        assert!(msg.contains(at), "{msg}");
    }
    let twice = format!("{text}\n[[remote.key]]\nkey = \"{key}\"\nmay = [\"read\"]\n");
    assert!(err(&twice).1.contains("listed twice"));
}

#[test]
fn deploy_policy() {
    use anode_modules::Category;
    let f = parse(Path::new("a.toml"), &with("", "")).unwrap();
    assert!(f.deploy.keys.is_empty(), "nobody may deploy by default");
    let key = hex::encode(anode_modules::generate_key().verifying_key().as_bytes());
    let text = with(
        "",
        &format!(
            "[deploy]\nmax_ttl_s = 600\n\n[[deploy.key]]\nkey = \"{key}\"\nname = \"ops\"\n\
             categories = [\"standard\", \"user\"]\n"
        ),
    );
    let d = parse(Path::new("a.toml"), &text).unwrap().deploy;
    assert_eq!((d.max_ttl_s, d.max_modules), (600, 32));
    assert_eq!(d.keys[0].name, "ops");
    assert_eq!(
        d.keys[0].categories,
        vec![Category::Standard, Category::User]
    );
    for (bad, says, at) in [
        ("max_ttl_s = 600", "max_ttl_s = 0", "out of range"),
        (
            "categories = [\"standard\", \"user\"]",
            "categories = [\"system\"]",
            "system modules are not deployed",
        ),
        (
            "categories = [\"standard\", \"user\"]",
            "categories = [\"admin\"]",
            "not a category",
        ),
        (
            "categories = [\"standard\", \"user\"]",
            "categories = []",
            "categories is empty",
        ),
    ] {
        let text = text.replace(bad, says);
        let (line, msg) = err(&text);
        assert_eq!(text.lines().nth(line - 1), Some(says), "{msg}");
        assert!(msg.contains(at), "{msg}");
    }
    let defaults = text.replace("categories = [\"standard\", \"user\"]\n", "");
    let d = parse(Path::new("a.toml"), &defaults).unwrap().deploy;
    assert_eq!(
        d.keys[0].categories,
        vec![Category::Function, Category::User]
    );
    let twice = format!("{text}\n[[deploy.key]]\nkey = \"{key}\"\n");
    assert!(err(&twice).1.contains("listed twice"));
}

#[test]
fn capsule_file_quotas_default_and_are_checked() {
    let ok = |t: &str| parse(Path::new("n.toml"), t).unwrap();
    let f = ok(&with("", ""));
    assert_eq!(f.capsule_files, anode_capsule::files::FileLimits::default());
    let f = ok(&with(
        "",
        "[capsule]\nfile_quota_bytes = 65536\nfile_quota_count = 0\n",
    ));
    assert_eq!(f.capsule_files.max_bytes, 65536);
    assert_eq!(f.capsule_files.max_files, 0);
    // One file never holds more than the quota.
    assert_eq!(f.capsule_files.max_file_bytes, 65536);
    let f = ok(&with(
        "",
        "[capsule]\nfile_quota_bytes = 8388608\nfile_max_bytes = 4194304\n",
    ));
    assert_eq!(f.capsule_files.max_file_bytes, 4 << 20);
    for (bad, want) in [
        ("file_quota_bytes = 100000000", "more than 67108864"),
        ("file_quota_count = 5000", "more than 4096"),
        ("file_max_bytes = 2097152", "more than 1048576"),
    ] {
        let (line, msg) = err(&with("", &format!("[capsule]\n{bad}\n")));
        assert!(msg.contains(want), "{msg}");
        assert!(line > 0, "{msg}");
    }
}

#[test]
fn capsule_workers_default_to_one_and_are_checked() {
    let ok = |t: &str| parse(Path::new("n.toml"), t).unwrap();
    assert_eq!(ok(&with("", "")).capsule_workers, 1);
    assert_eq!(ok(&with("", "[capsule]\nworkers = 2\n")).capsule_workers, 2);
    for bad in ["workers = 0", "workers = 65"] {
        let (line, msg) = err(&with("", &format!("[capsule]\n{bad}\n")));
        assert!(msg.contains("outside 1 - 64"), "{msg}");
        assert!(line > 0, "{msg}");
    }
}
