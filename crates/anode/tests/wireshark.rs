//! The Wireshark dissector (`tools/wireshark/anode.lua`) against what anode really sends: the
//! emulator's per-link captures (`anode emulate … --pcap DIR`) of a capsule ping, PLAN pings
//! and datagrams, decoded by tshark, and captures written here of crafted packets (every
//! control kind, ANEP options, a PLAN chunk with every value type, another UDP port) and of
//! truncated and garbled ones, which must be flagged malformed without a Lua error.
//!
//! Each capture is decoded by one tshark run that prints every field the checks look at.
//! tshark is required: without it the tests fail (scripts/setup.sh installs it).

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anode_capsule::{code_hash, protocols};
use anode_plan::ee::{PacketSpec, encode_packet_chunk};
use anode_plan::{Chunk, Code, Value};
use anode_wire::NodeAddr;
use anode_wire::anep::{AnepOption, AnepRepr, TYPE_DATAGRAM, TYPE_PLAN};
use anode_wire::capsule::{Capsule, CapsuleRepr};
use anode_wire::control::{Control, Hello, Routes};
use anode_wire::datagram::Datagram;
use anode_wire::transit::{FLAG_EVAL_EVERY_HOP, TransitRepr};

/// tshark's values of `_ws.expert.severity` for errors and warnings.
const SEV_ERROR: &str = "8388608";
const SEV_WARN: &str = "6291456";

/// Every field the checks read, printed by one tshark run per capture.
const FIELDS: &[&str] = &[
    "frame.number",
    "frame.protocols",
    "ip.src",
    "ip.dst",
    "udp.srcport",
    "udp.dstport",
    "_ws.col.Info",
    "_ws.expert.severity",
    "_ws.expert.message",
    "anep.type",
    "anep.flags",
    "anep.hdr_len",
    "anep.option.type",
    "anep.option.source",
    "anep.option.dest",
    "anep.option.checksum.status",
    "anep.option.auth.scheme",
    "anep.option.auth.data",
    "anep.option.value",
    "anode.transit.flow",
    "anode.transit.rb",
    "anode.transit.src",
    "anode.transit.dst",
    "anode.transit.prev_hop",
    "anode.transit.flags.eval_every_hop",
    "anode.transit.flags.ee_route",
    "anode.capsule.flags",
    "anode.capsule.code",
    "anode.capsule.source",
    "anode.capsule.payload",
    "anode.datagram.port",
    "anode.datagram.payload_len",
    "anode.datagram.payload",
    "anode.plan.source",
    "anode.plan.eval_dest",
    "anode.plan.rb",
    "anode.plan.session",
    "anode.plan.route_fun",
    "anode.plan.handler",
    "anode.plan.code_kind",
    "anode.plan.code_hash",
    "anode.plan.code_text",
    "anode.plan.entry",
    "anode.plan.argc",
    "anode.plan.arg",
    "anode.control.kind",
    "anode.control.hello.sender",
    "anode.control.hello.interval",
    "anode.control.hello.dead",
    "anode.control.hello.seq",
    "anode.control.hello.count",
    "anode.control.hello.seen",
    "anode.control.routes.sender",
    "anode.control.routes.seq",
    "anode.control.routes.flags",
    "anode.control.routes.dest",
    "anode.control.routes.metric",
    "anode.control.code.hash",
    "anode.control.code.offset",
    "anode.control.code.max",
    "anode.control.code.total",
    "anode.control.code.len",
    "anode.control.code.data",
    "anode.control.ee.type",
    "anode.control.ee.data",
    "anode.deploy.kind",
    "anode.deploy.op",
    "anode.deploy.hop",
    "anode.deploy.ttl",
    "anode.deploy.origin",
    "anode.deploy.target",
    "anode.deploy.via",
    "anode.deploy.module",
    "anode.deploy.module_version",
    "anode.deploy.repo",
    "anode.deploy.outcome",
    "anode.deploy.node",
    "anode.deploy.reason",
    "anode.deploy.target_answer",
    "anode.deploy.transfer",
    "anode.deploy.offset",
    "anode.deploy.count",
    "anode.deploy.data",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dissector() -> PathBuf {
    repo_root().join("tools/wireshark/anode.lua")
}

/// A fresh directory under the system temp dir, removed on drop.
#[derive(Debug)]
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = std::env::temp_dir().join(format!(
            "anode-wireshark-{tag}-{}-{nanos}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Fails (never skips) when tshark is missing.
fn require_tshark() {
    match Command::new("tshark").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "`tshark --version` failed ({}): the Wireshark dissector test needs a working tshark \
             (scripts/setup.sh installs it)\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!(
            "tshark is not installed ({e}): the Wireshark dissector test needs it to decode \
             captures with tools/wireshark/anode.lua; run scripts/setup.sh (or apt-get install \
             tshark)"
        ),
    }
    assert!(dissector().is_file(), "missing {}", dissector().display());
}

/// Runs tshark with the dissector on `pcap`; asserts it succeeded without a Lua error.
fn tshark(pcap: &Path, args: &[&str]) -> String {
    let lua = format!("lua_script:{}", dissector().display());
    let out = Command::new("tshark")
        .args(["-n", "-X", &lua, "-r"])
        .arg(pcap)
        .args(args)
        .output()
        .expect("run tshark");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tshark {args:?} on {} failed: {stderr}",
        pcap.display()
    );
    for text in [&stdout[..], &stderr[..]] {
        assert!(
            !text.contains("Lua Error") && !text.contains(".lua:"),
            "Lua error decoding {}:\n{stderr}\n{}",
            pcap.display(),
            &stdout[..stdout.len().min(4000)]
        );
    }
    stdout
}

/// One decoded frame: field name to its value(s), several occurrences joined with ';'.
#[derive(Debug, Clone)]
struct Frame(HashMap<&'static str, String>);

impl Frame {
    /// The field's value, empty if absent.
    fn get(&self, f: &str) -> &str {
        self.0.get(f).map_or("", String::as_str)
    }

    /// The field's occurrences.
    fn all(&self, f: &str) -> Vec<&str> {
        match self.get(f) {
            "" => Vec::new(),
            v => v.split(';').collect(),
        }
    }

    fn num(&self, f: &str) -> u64 {
        self.get(f)
            .parse()
            .unwrap_or_else(|_| panic!("{f} is not a number in {self:?}"))
    }

    fn is_anep(&self) -> bool {
        self.get("frame.protocols").split(':').any(|p| p == "anep")
    }

    fn has(&self, f: &str) -> bool {
        !self.get(f).is_empty()
    }

    fn sender_ip(&self) -> &str {
        self.get("ip.src")
    }
}

/// Every frame of `pcap`, decoded.
fn decode(pcap: &Path) -> Vec<Frame> {
    let mut args = vec![
        "-T",
        "fields",
        "-E",
        "separator=/t",
        "-E",
        "aggregator=;",
        "-E",
        "occurrence=a",
    ];
    for f in FIELDS {
        args.extend(["-e", f]);
    }
    let frames: Vec<Frame> = tshark(pcap, &args)
        .lines()
        .map(|l| {
            let vals: Vec<&str> = l.split('\t').collect();
            assert_eq!(vals.len(), FIELDS.len(), "tshark row {l:?}");
            Frame(
                FIELDS
                    .iter()
                    .zip(vals)
                    .map(|(f, v)| (*f, v.to_string()))
                    .collect(),
            )
        })
        .collect();
    assert!(!frames.is_empty(), "{} is empty", pcap.display());
    frames
}

/// Runs `anode emulate TOPOLOGY --pcap DIR` from the repository root.
fn emulate(topology: &str, dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_anode"))
        .current_dir(repo_root())
        .args(["emulate", topology, "--pcap"])
        .arg(dir)
        .output()
        .expect("run anode emulate");
    assert!(
        out.status.success(),
        "anode emulate {topology} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Decodes the captures of the links `names` in `dir`, and checks every frame is ANEP with
/// no expert info of warning or error level (nothing malformed).
fn decode_clean(dir: &TempDir, names: &[&str]) -> Vec<Vec<Frame>> {
    let n = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(
        n,
        names.len(),
        "one capture per link in {}",
        dir.0.display()
    );
    names
        .iter()
        .map(|name| {
            let frames = decode(&dir.file(&format!("{name}.pcap")));
            for f in &frames {
                assert!(f.is_anep(), "{name}: not decoded as ANEP: {f:?}");
                let sev = f.all("_ws.expert.severity");
                assert!(
                    sev.iter().all(|s| *s != SEV_ERROR && *s != SEV_WARN),
                    "{name}: frame flagged: {:?} {:?}",
                    f.get("frame.number"),
                    f.get("_ws.expert.message")
                );
            }
            frames
        })
        .collect()
}

/// The hello senders on a link (each must be the frame's own IP source and UDP port).
fn hello_senders(frames: &[Frame]) -> BTreeSet<String> {
    let mut senders = BTreeSet::new();
    for f in frames.iter().filter(|f| f.get("anode.control.kind") == "1") {
        let sender = f.get("anode.control.hello.sender");
        let own = format!("{}:{}", f.get("ip.src"), f.get("udp.srcport"));
        assert_eq!(sender, own, "hello sender {f:?}");
        assert_eq!(f.get("anode.control.hello.interval"), "250");
        assert_eq!(f.get("anode.control.hello.dead"), "800");
        assert_eq!(
            f.num("anode.control.hello.count") as usize,
            f.all("anode.control.hello.seen").len()
        );
        senders.insert(sender.to_string());
    }
    assert_eq!(
        senders.len(),
        2,
        "a link has two hello senders: {senders:?}"
    );
    senders
}

fn only(s: BTreeSet<&String>) -> String {
    assert_eq!(s.len(), 1, "{s:?}");
    s.into_iter().next().cloned().unwrap_or_default()
}

/// The nodes (a, b, c, ...) of a line topology from the hello senders of its links in order.
fn line_nodes(links: &[Vec<Frame>]) -> Vec<String> {
    let s: Vec<BTreeSet<String>> = links.iter().map(|l| hello_senders(l)).collect();
    let mut nodes = vec![only(s[0].difference(&s[1]).collect())];
    for w in s.windows(2) {
        nodes.push(only(w[0].intersection(&w[1]).collect()));
    }
    nodes.push(only(s[s.len() - 1].difference(&s[s.len() - 2]).collect()));
    nodes
}

fn ip_of(node: &str) -> &str {
    node.rsplit_once(':').map_or(node, |(ip, _)| ip)
}

/// Capsules from `src` to `dst` sent on a link by `from`.
fn capsules<'a>(frames: &'a [Frame], from: &str, src: &str, dst: &str) -> Vec<&'a Frame> {
    frames
        .iter()
        .filter(|f| {
            f.has("anode.capsule.code")
                && f.sender_ip() == ip_of(from)
                && f.get("anode.transit.src") == src
                && f.get("anode.transit.dst") == dst
        })
        .collect()
}

#[test]
fn capsule_ping_is_followed_hop_by_hop() {
    require_tshark();
    let t0 = Instant::now();
    let dir = TempDir::new("capsule");
    emulate("topologies/capsule-ping.toml", dir.path());
    let links = decode_clean(&dir, &["a-b", "b-c"]);
    let (ab, bc) = (&links[0], &links[1]);
    let n = line_nodes(&links);
    let (a, b, c) = (&n[0], &n[1], &n[2]);
    let ping = hex::encode(code_hash(protocols::PING));
    let flood = hex::encode(code_hash(protocols::FLOOD));

    // a -> c capsules as a sent them (a-b) and as b forwarded them (b-c): the same flow id,
    // code and payload, the resource bound one less, the previous hop rewritten.
    let first = capsules(ab, a, a, c);
    let second = capsules(bc, b, a, c);
    let pings: Vec<&&Frame> = second
        .iter()
        .filter(|f| f.get("anode.capsule.code") == ping)
        .collect();
    assert_eq!(pings.len(), 5, "five pings reach b-c");
    assert!(
        second.iter().any(|f| f.get("anode.capsule.code") == flood),
        "flood capsules on b-c"
    );
    let mut flows = BTreeSet::new();
    for k2 in &pings {
        let same = |f: &&Frame| {
            [
                "anode.transit.flow",
                "anode.capsule.code",
                "anode.capsule.payload",
            ]
            .iter()
            .all(|x| f.get(x) == k2.get(x))
        };
        let k1 = first
            .iter()
            .find(|f| same(f))
            .unwrap_or_else(|| panic!("ping {k2:?} on b-c was not seen on a-b"));
        assert_eq!(
            k1.num("anode.transit.rb"),
            k2.num("anode.transit.rb") + 1,
            "RB spends one per hop"
        );
        assert_eq!(k1.get("anode.transit.prev_hop"), a, "a-b previous hop");
        assert_eq!(
            k2.get("anode.transit.prev_hop"),
            b,
            "b-c previous hop (b rewrote it)"
        );
        flows.insert(k2.get("anode.transit.flow").to_string());
    }
    assert_eq!(flows.len(), 5, "each ping its own flow id: {flows:?}");
    // The replies come back c -> a through b.
    assert_eq!(capsules(bc, c, c, a).len(), capsules(ab, b, c, a).len());

    // The code was loaded hop by hop: b asked a, c asked b, for the ping code by its hash,
    // and the chunks carry the whole module.
    for (link, asker, holder) in [(ab, b, a), (bc, c, b)] {
        let kind = |f: &&Frame, k: &str, from: &str| {
            f.get("anode.control.kind") == k
                && f.sender_ip() == ip_of(from)
                && f.get("anode.control.code.hash") == ping
        };
        assert!(
            link.iter()
                .any(|f| kind(&f, "3", asker) && f.get("anode.control.code.offset") == "0"),
            "{asker} asks for the ping code"
        );
        let mut got = 0;
        for f in link.iter().filter(|f| kind(f, "4", holder)) {
            assert_eq!(
                f.num("anode.control.code.total") as usize,
                protocols::PING.len()
            );
            got += f.num("anode.control.code.len") as usize;
        }
        assert_eq!(got, protocols::PING.len(), "code chunks cover the module");
    }

    // Routes from b advertise c at metric 1 to a.
    assert!(
        ab.iter()
            .filter(|f| f.get("anode.control.routes.sender") == b)
            .any(|f| {
                f.all("anode.control.routes.dest")
                    .iter()
                    .zip(f.all("anode.control.routes.metric"))
                    .any(|(d, m)| d == c && m == "1")
            }),
        "b advertises c at metric 1"
    );
    // The Info column tells the story.
    let want = format!("Capsule code {}… {a} → {c} RB ", &ping[..8]);
    assert!(
        bc.iter().any(|f| f.get("_ws.col.Info").starts_with(&want)),
        "no Info {want:?}"
    );
    assert!(t0.elapsed().as_secs() < 20, "took {:?}", t0.elapsed());
}

#[test]
fn plan_pings_are_decoded() {
    require_tshark();
    let dir = TempDir::new("plan");
    emulate("topologies/plan-ping.toml", dir.path());
    let links = decode_clean(&dir, &["a-b", "b-c", "c-d"]);
    let n = line_nodes(&links);
    let (a, d) = (&n[0], &n[3]);
    let mut noeval_rb = Vec::new();
    for (i, link) in links.iter().enumerate() {
        let sent: Vec<&Frame> = link
            .iter()
            .filter(|f| f.has("anode.plan.entry") && f.sender_ip() == ip_of(&n[i]))
            .collect();
        // ping/noeval (its program has `ack`): evaluated only at d, so evalDest is d on
        // every link; the routers forward it on their fast path.
        let noeval: Vec<&&Frame> = sent
            .iter()
            .filter(|f| {
                f.get("anode.plan.entry") == "ping"
                    && f.get("anode.plan.code_text").contains("fun ack()")
            })
            .collect();
        assert_eq!(noeval.len(), 1, "ping/noeval on link {i}: {sent:?}");
        let f = noeval[0];
        assert_eq!(f.get("anode.plan.eval_dest"), d, "evalDest");
        assert_eq!(f.get("anode.plan.route_fun"), "defaultRoute");
        assert_eq!(f.get("anode.plan.handler"), "");
        assert_eq!(
            f.all("anode.plan.arg"),
            [&a[..], &d[..]],
            "ping's arguments"
        );
        assert_eq!(
            f.get("anode.plan.code_kind"),
            "1",
            "the program text travels"
        );
        assert!(
            f.get("anode.plan.code_text")
                .contains("fun ping(source : host, destination : host)")
        );
        assert_eq!(f.get("anode.plan.source"), a);
        assert_eq!(f.get("anode.transit.prev_hop"), n[i], "previous hop");
        assert_eq!(f.get("anode.transit.flags.ee_route"), "0");
        noeval_rb.push(f.num("anode.plan.rb"));
        // ping/eval (its program has `back`): evaluated at every hop, so evalDest is the
        // next node.
        assert!(
            sent.iter().any(|f| f.get("anode.plan.entry") == "ping"
                && f.get("anode.plan.code_text").contains("fun back(")
                && f.get("anode.plan.eval_dest") == n[i + 1]),
            "ping/eval to the next hop on link {i}: {sent:?}"
        );
    }
    assert_eq!(noeval_rb, [15, 14, 13], "RB spends one per hop");
    // The answers come back to a: |ack|() (noeval) and |back|(a) (eval).
    for entry in ["ack", "back"] {
        assert!(
            links[0].iter().any(|f| f.get("anode.plan.entry") == entry
                && f.get("ip.dst") == ip_of(a)
                && f.get("anode.plan.eval_dest") == a),
            "{entry} to a"
        );
    }
    let want = format!("PLAN ping({a}, {d}) {a} → {d} RB 14");
    assert!(
        links[1]
            .iter()
            .any(|f| f.get("_ws.col.Info").starts_with(&want)),
        "no Info {want:?}"
    );
}

#[test]
fn datagrams_and_control_of_line4_are_clean() {
    require_tshark();
    let dir = TempDir::new("line4");
    emulate("topologies/line4.toml", dir.path());
    let links = decode_clean(&dir, &["a-b", "b-c", "c-d"]);
    let n = line_nodes(&links);
    let dgrams: Vec<&Frame> = links[0]
        .iter()
        .filter(|f| f.has("anode.datagram.port"))
        .collect();
    assert!(dgrams.len() >= 140, "datagrams on a-b: {}", dgrams.len());
    for f in &dgrams {
        assert_eq!(f.get("anode.transit.src"), n[0]);
        assert_eq!(f.get("anode.transit.dst"), n[3]);
        assert_eq!(f.get("anode.datagram.payload_len"), "1000");
    }
    for port in ["7", "8"] {
        assert!(dgrams.iter().any(|f| f.get("anode.datagram.port") == port));
    }
}

// ------------------------------------------------------------------------------------------
// Crafted captures

/// Writes a pcap (LINKTYPE_RAW) of `(frame, captured length)` records.
fn write_pcap(path: &Path, frames: &[(Vec<u8>, usize)]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&101u32.to_le_bytes());
    for (i, (f, caplen)) in frames.iter().enumerate() {
        let caplen = (*caplen).min(f.len());
        for v in [i as u32, 0, caplen as u32, f.len() as u32] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&f[..caplen]);
    }
    std::fs::write(path, out).unwrap();
}

fn addr(s: &str) -> NodeAddr {
    s.parse().unwrap()
}

/// The IPv4/UDP frame carrying `payload` between the given ports.
fn frame_on(payload: &[u8], sport: u16, dport: u16) -> (Vec<u8>, usize) {
    let src = NodeAddr::new("198.18.0.1".parse().unwrap(), sport);
    let dst = NodeAddr::new("198.18.0.2".parse().unwrap(), dport);
    let f = anode_capture::ip_udp(src, dst, payload).unwrap();
    let n = f.len();
    (f, n)
}

fn frame(payload: &[u8]) -> (Vec<u8>, usize) {
    frame_on(payload, 3322, 3322)
}

fn transit(rb: u16, flow: u64) -> TransitRepr {
    TransitRepr {
        flags: FLAG_EVAL_EVERY_HOP,
        rb,
        flow,
        src: addr("198.18.0.1:3322"),
        dst: addr("[2001:db8::3]:4000"),
        prev_hop: addr("198.18.0.2:3322"),
    }
}

fn hello() -> Vec<u8> {
    Control::Hello(Hello {
        sender: addr("198.18.0.1:3322"),
        hello_ms: 250,
        dead_ms: 800,
        seq: 9,
        seen: vec![addr("198.18.0.2:3322"), addr("[2001:db8::2]:3322")],
    })
    .to_packet()
    .unwrap()
}

fn capsule() -> Vec<u8> {
    Capsule {
        transit: transit(12, 0x0102_0304_0506_0708),
        header: CapsuleRepr {
            flags: 5,
            code: [0xab; 32],
            code_source: Some(addr("198.18.0.9:3322")),
        },
        payload: b"capsule payload".to_vec(),
    }
    .to_packet()
    .unwrap()
}

fn plan_chunk() -> Chunk {
    let host: SocketAddr = "[2001:db8::7]:4000".parse().unwrap();
    let inner = Chunk::new(None, "inner", vec![Value::Int(5)]).unwrap();
    Chunk::new(
        Some(Code::Hash([0x11; 32])),
        "probe",
        vec![
            Value::Int(-300),
            Value::Int(i64::MIN),
            Value::Char(b'x'),
            Value::str("say \"hi\""),
            Value::Bool(true),
            Value::Host(host),
            Value::Port(7),
            Value::Blob(Arc::from(&[1u8, 2, 3][..])),
            Value::Exn(Arc::from("NotFound")),
            Value::Dev(3),
            Value::list(vec![Value::Int(1), Value::Int(2)]).unwrap(),
            Value::tuple(vec![Value::Unit, Value::Bool(false)]).unwrap(),
            Value::Chunk(Arc::new(inner)),
        ],
    )
    .unwrap()
}

fn plan() -> Vec<u8> {
    let spec = PacketSpec {
        src: addr("198.18.0.1:3322"),
        eval_dest: addr("[2001:db8::9]:3322"),
        rb: 9,
        flow: 0xabcdef,
        session: 77,
        route_fun: "myRoute".into(),
        handler: "onErr".into(),
    };
    encode_packet_chunk(&spec, &plan_chunk()).unwrap()
}

/// A datagram whose ANEP header carries every option kind (checksum first).
fn with_options() -> Vec<u8> {
    let repr = AnepRepr {
        flags: 0,
        type_id: TYPE_DATAGRAM,
        options: vec![
            AnepOption::Checksum(0),
            AnepOption::Source(addr("198.18.0.1:3322")),
            AnepOption::Destination(addr("[2001:db8::4]:3322")),
            AnepOption::Authentication {
                scheme: 9,
                data: vec![1, 2, 3],
            },
            AnepOption::Unknown {
                kind: 77,
                value: vec![0xaa; 4],
            },
        ],
    };
    let d = Datagram {
        transit: transit(3, 0),
        port: 7,
        payload: b"hi".to_vec(),
    }
    .to_packet()
    .unwrap();
    // The datagram's ANEP payload (after its 8-byte basic header) under these options.
    repr.emit_packet(&d[8..]).unwrap()
}

fn one<'a>(frames: &'a [Frame], what: &str, pick: impl Fn(&Frame) -> bool) -> &'a Frame {
    let m: Vec<&Frame> = frames.iter().filter(|f| pick(f)).collect();
    assert_eq!(m.len(), 1, "{what}: {m:?}");
    m[0]
}

/// `fields` of `f` in order.
fn values<'a>(f: &'a Frame, fields: &[&str]) -> Vec<&'a str> {
    fields.iter().map(|x| f.get(x)).collect()
}

#[test]
fn crafted_packets_decode_field_by_field() {
    require_tshark();
    let dir = TempDir::new("crafted");
    let controls = [
        Control::Routes(Routes {
            sender: addr("198.18.0.1:3322"),
            seq: 7,
            flags: Routes::FULL_FIRST | Routes::FULL_LAST,
            entries: vec![
                (addr("198.18.0.3:3322"), 2),
                (addr("[2001:db8::3]:3322"), 16),
            ],
        }),
        Control::CodeRequest {
            hash: [0x3f; 32],
            offset: 100,
            max: 32768,
        },
        Control::CodeChunk {
            hash: [0x3f; 32],
            total: 10,
            offset: 5,
            data: vec![1, 2, 3, 4, 5],
        },
        Control::CodeUnavailable { hash: [0x3f; 32] },
        Control::Ee {
            type_id: TYPE_PLAN,
            data: vec![9; 6],
        },
    ];
    let mut frames = vec![frame(&hello())];
    frames.extend(controls.iter().map(|c| frame(&c.to_packet().unwrap())));
    frames.push(frame(&capsule()));
    frames.push(frame(&plan()));
    frames.push(frame(&with_options()));
    // The heuristic dissector finds ANEP on other ports, and leaves other UDP alone.
    frames.push(frame_on(&hello(), 52000, 52001));
    frames.push(frame_on(b"not anep at all", 52002, 52003));
    let pcap = dir.file("crafted.pcap");
    write_pcap(&pcap, &frames);
    let fr = decode(&pcap);
    assert_eq!(fr.len(), frames.len());
    for f in &fr[..fr.len() - 1] {
        assert!(f.is_anep(), "{f:?}");
        let sev = f.all("_ws.expert.severity");
        assert!(
            !sev.contains(&SEV_ERROR) && !sev.contains(&SEV_WARN),
            "{f:?}"
        );
    }
    assert!(!fr[fr.len() - 1].is_anep(), "other UDP is left alone");

    control_fields(&fr);
    let k = one(&fr, "capsule", |f| f.get("anep.type") == "0x0a03");
    assert_eq!(
        values(
            k,
            &[
                "anode.transit.flow",
                "anode.transit.rb",
                "anode.transit.dst",
                "anode.transit.flags.eval_every_hop",
                "anode.capsule.flags",
                "anode.capsule.code",
                "anode.capsule.source",
                "anode.capsule.payload",
            ]
        ),
        [
            "0x0102030405060708",
            "12",
            "[2001:db8::3]:4000",
            "1",
            "0x05",
            &"ab".repeat(32)[..],
            "198.18.0.9:3322",
            &hex::encode(b"capsule payload")[..],
        ]
    );
    let o = one(&fr, "options", |f| f.has("anep.option.type"));
    assert_eq!(
        values(
            o,
            &[
                "anep.flags",
                "anep.hdr_len",
                "anep.option.type",
                "anep.option.source",
                "anep.option.dest",
                "anep.option.checksum.status",
                "anep.option.auth.scheme",
                "anep.option.auth.data",
                "anep.option.value",
                "anode.datagram.port",
                "anode.datagram.payload",
            ]
        ),
        [
            "0x00",
            "18",
            "3;1;2;4;77",
            "198.18.0.1:3322",
            "[2001:db8::4]:3322",
            "Good",
            "9",
            "010203",
            "aaaaaaaa",
            "7",
            "6869",
        ]
    );
    plan_fields(&pcap, one(&fr, "plan", |f| f.get("anep.type") == "0x0a04"));
}

/// The hellos (on 3322 and on another port) and the other control kinds of the crafted capture.
fn control_fields(fr: &[Frame]) {
    let hellos: Vec<&Frame> = fr
        .iter()
        .filter(|f| f.get("anode.control.kind") == "1")
        .collect();
    assert_eq!(hellos.len(), 2, "hello on 3322 and on 52000");
    for f in hellos {
        let hello = [
            "anode.control.hello.sender",
            "anode.control.hello.seq",
            "anode.control.hello.seen",
        ];
        assert_eq!(
            values(f, &hello),
            ["198.18.0.1:3322", "9", "198.18.0.2:3322;[2001:db8::2]:3322"]
        );
    }
    let kind = |k: &'static str| move |f: &Frame| f.get("anode.control.kind") == k;
    let r = one(fr, "routes", kind("2"));
    assert_eq!(
        values(
            r,
            &[
                "anode.control.routes.seq",
                "anode.control.routes.flags",
                "anode.control.routes.dest",
                "anode.control.routes.metric"
            ]
        ),
        ["7", "0x0003", "198.18.0.3:3322;[2001:db8::3]:3322", "2;16"]
    );
    assert!(
        r.get("_ws.col.Info")
            .contains("seq 7 [full table]: 2 entries"),
        "{}",
        r.get("_ws.col.Info")
    );
    let h = "3f".repeat(32);
    let code = [
        "anode.control.code.hash",
        "anode.control.code.offset",
        "anode.control.code.max",
        "anode.control.code.total",
        "anode.control.code.len",
        "anode.control.code.data",
    ];
    assert_eq!(
        values(one(fr, "code request", kind("3")), &code),
        [&h[..], "100", "32768", "", "", ""]
    );
    assert_eq!(
        values(one(fr, "code chunk", kind("4")), &code),
        [&h[..], "5", "", "10", "5", "0102030405"]
    );
    assert_eq!(
        values(one(fr, "code unavailable", kind("5")), &code),
        [&h[..], "", "", "", "", ""]
    );
    assert_eq!(
        values(
            one(fr, "ee", kind("6")),
            &["anode.control.ee.type", "anode.control.ee.data"]
        ),
        ["0x0a04", "090909090909"]
    );
}

fn plan_fields(pcap: &Path, p: &Frame) {
    assert_eq!(
        values(
            p,
            &[
                "anode.plan.source",
                "anode.plan.eval_dest",
                "anode.plan.rb",
                "anode.transit.flow",
                "anode.transit.flags.ee_route",
                "anode.plan.session",
                "anode.plan.route_fun",
                "anode.plan.handler",
                "anode.plan.code_kind",
                "anode.plan.code_hash",
                "anode.plan.entry",
                "anode.plan.argc",
            ]
        ),
        [
            "198.18.0.1:3322",
            "[2001:db8::9]:3322",
            "9",
            "0x0000000000abcdef",
            "1",
            "77",
            "myRoute",
            "onErr",
            "2",
            &"11".repeat(32)[..],
            "probe",
            "13",
        ]
    );
    // The arguments one by one, in the detail view (their text holds separators).
    let text = tshark(pcap, &["-Y", "anep.type == 0x0a04", "-O", "anode"]);
    for want in [
        "Argument: -300\n",
        "Argument: -9223372036854775808\n",
        "Argument: 'x'\n",
        "Argument: \"say \\\"hi\\\"\"\n",
        "Argument: true\n",
        "Argument: [2001:db8::7]:4000\n",
        "Argument: port 7\n",
        "Argument: blob (3 bytes) 010203\n",
        "Argument: exn NotFound\n",
        "Argument: dev 3\n",
        "Argument: [1, 2] (list, 2 items)\n",
        "Argument: ((), false) (tuple, 2 items)\n",
        "Argument: |inner|(5) (chunk)\n",
        "Function: inner\n",
        "Chunk: |probe|(-300, -9223372036854775808, 'x', \"say \\\"hi\\\"\", true, \
         [2001:db8::7]:4000, port 7, blob (3 bytes) 010203, …)",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

/// A deploy request, a hop's result and a package chunk, as the deployment service sends them.
fn deploy_messages() -> Vec<Vec<u8>> {
    use anode_wire::deploy::{HopResult, Message, Op, Outcome, Request, Transfer};
    let t = TransitRepr {
        flags: FLAG_EVAL_EVERY_HOP,
        rb: 30,
        flow: 7,
        src: addr("198.18.0.1:3322"),
        dst: addr("198.18.0.6:3322"),
        prev_hop: addr("198.18.0.2:3322"),
    };
    let req = Message::Request(Request {
        op: Op::Deploy,
        hop: 2,
        reply_port: 50_000,
        ttl_s: 300,
        pkg_len: 5000,
        expires_unix_ms: 1_800_000_000_000,
        nonce: [7; 16],
        origin: addr("198.18.0.1:3322"),
        target: addr("198.18.0.6:3322"),
        pkg_hash: [0xab; 32],
        signer: [0x11; 32],
        signature: [0x22; 64],
        via: addr("198.18.0.2:3322"),
        name: "counter".into(),
        version: "1.0.0".into(),
        repo: "http://198.18.0.9:8700".into(),
    });
    let result = Message::Result(HopResult {
        outcome: Outcome::Refused,
        hop: 3,
        elapsed_us: 1234,
        last: true,
        nonce: [7; 16],
        node: addr("198.18.0.6:3322"),
        reason: "unknown_key: not a deploy key here".into(),
    });
    let chunk = Message::Transfer(
        [7; 16],
        Transfer::Chunk {
            hash: [0xab; 32],
            total: 5000,
            offset: 1200,
            data: vec![9; 4],
        },
    );
    let back = TransitRepr {
        flags: 0,
        dst: addr("198.18.0.1:3322"),
        src: addr("198.18.0.6:3322"),
        ..t
    };
    vec![
        req.to_packet(&t).unwrap(),
        result.to_packet(&back).unwrap(),
        chunk.to_packet(&back).unwrap(),
    ]
}

#[test]
fn deploy_messages_decode_field_by_field() {
    require_tshark();
    let dir = TempDir::new("deploy");
    let mut msgs = deploy_messages();
    // A request cut inside its fixed part (the packet length says so): malformed, no Lua error.
    let mut cut = msgs[0][..200].to_vec();
    set_u16(&mut cut, 6, 200);
    msgs.push(cut);
    let frames: Vec<(Vec<u8>, usize)> = msgs.iter().map(|p| frame(p)).collect();
    let pcap = dir.file("deploy.pcap");
    write_pcap(&pcap, &frames);
    let fr = decode(&pcap);
    assert_eq!(fr.len(), 4);
    for f in &fr[..3] {
        assert_eq!(f.get("anep.type"), "0x0a05", "{f:?}");
        assert!(!f.all("_ws.expert.severity").contains(&SEV_ERROR), "{f:?}");
    }
    assert_eq!(
        values(
            &fr[0],
            &[
                "anode.deploy.kind",
                "anode.deploy.op",
                "anode.deploy.hop",
                "anode.deploy.ttl",
                "anode.deploy.origin",
                "anode.deploy.target",
                "anode.deploy.via",
                "anode.deploy.module",
                "anode.deploy.module_version",
                "anode.deploy.repo",
            ]
        ),
        [
            "1",
            "1",
            "2",
            "300",
            "198.18.0.1:3322",
            "198.18.0.6:3322",
            "198.18.0.2:3322",
            "counter",
            "1.0.0",
            "http://198.18.0.9:8700"
        ]
    );
    assert!(
        fr[0]
            .get("_ws.col.Info")
            .contains("Deploy deploy counter 1.0.0"),
        "{:?}",
        fr[0]
    );
    assert_eq!(
        values(
            &fr[1],
            &[
                "anode.deploy.kind",
                "anode.deploy.outcome",
                "anode.deploy.hop",
                "anode.deploy.node",
                "anode.deploy.reason",
                "anode.deploy.target_answer",
            ]
        ),
        [
            "2",
            "3",
            "3",
            "198.18.0.6:3322",
            "unknown_key: not a deploy key here",
            "1"
        ]
    );
    assert_eq!(
        values(
            &fr[2],
            &[
                "anode.deploy.kind",
                "anode.deploy.transfer",
                "anode.deploy.offset",
                "anode.deploy.count",
                "anode.deploy.data",
            ]
        ),
        ["3", "2", "1200", "5000", "09090909"]
    );
    let bad = &fr[3];
    assert!(
        bad.all("_ws.expert.severity").contains(&SEV_ERROR),
        "{bad:?}"
    );
    assert!(
        bad.all("_ws.expert.message")
            .iter()
            .any(|m| m.contains("deploy request truncated")),
        "{bad:?}"
    );
}

// ------------------------------------------------------------------------------------------
// Truncated and garbled packets

fn set_u16(p: &mut [u8], at: usize, v: u16) {
    p[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Byte offset of the PLAN body in `plan()` (basic header and transit header before it).
const PLAN_BODY: usize = 8 + 72;

/// Garbled packets, each with what its expert info must say.
fn garbled() -> Vec<(Vec<u8>, &'static str)> {
    let mut g: Vec<(Vec<u8>, &'static str)> = Vec::new();
    let mut push = |p: Vec<u8>, why: &'static str| g.push((p, why));
    push(vec![1, 0x80, 0x0a], "ANEP basic header truncated");
    let mut p = hello();
    p[0] = 2;
    push(p, "ANEP version 2 not supported");
    let mut p = hello();
    set_u16(&mut p, 4, 1);
    push(p, "shorter than the 8-byte basic header");
    let mut p = hello();
    set_u16(&mut p, 6, 4);
    push(p, "shorter than the header length");
    push(
        capsule()[..100].to_vec(),
        "ANEP packet truncated: needs 151 bytes, has 100",
    );
    let mut p = capsule()[..60].to_vec();
    set_u16(&mut p, 6, 60);
    push(p, "transit header truncated");
    let mut p = capsule();
    p[8] = 9;
    push(p, "transit header version 9 not supported");
    let mut p = capsule();
    set_u16(&mut p, 8 + 72 + 2, 10);
    push(p, "capsule header length 10 is shorter");
    let mut p = with_options();
    set_u16(&mut p, 10, 0); // the first option's length
    push(p, "option length below one word");
    let mut p = with_options();
    set_u16(&mut p, 20, 9); // the source identifier's address type
    push(p, "unknown address type 9");
    let mut p = with_options();
    let last = p.len() - 1;
    p[last] ^= 1;
    push(p, "Bad ANEP integrity checksum");
    let mut p = hello();
    p[8 + 37] = 3; // three neighbors heard, two listed
    push(p, "node address truncated");
    let mut p = Control::CodeChunk {
        hash: [1; 32],
        total: 4,
        offset: 0,
        data: vec![1, 2, 3, 4],
    }
    .to_packet()
    .unwrap();
    p[8 + 4 + 35] = 2; // total 2
    push(p, "chunk extends past the object's total size");
    let mut p = hello();
    p[8] = 9;
    push(p, "unknown control message kind 9");
    let mut p = hello();
    p[9] = 2;
    push(p, "control message version 2 not supported");
    let mut p = hello();
    set_u16(&mut p, 10, 200);
    push(p, "control body truncated");
    let mut p = plan();
    p[PLAN_BODY] = 0;
    push(p, "not a PLAN body (magic byte 0x00");
    let mut p = plan();
    p[PLAN_BODY + 7] = b'1';
    push(p, "routFun is not a valid PLAN identifier");
    // routFun "myRoute" (7 bytes) and handler "onErr" (5): the chunk length is at 6+1+7+1+5.
    let at = PLAN_BODY + 20;
    let mut p = plan();
    let cl = u32::from_be_bytes(p[at..at + 4].try_into().unwrap());
    p[at..at + 4].copy_from_slice(&(cl - 3).to_be_bytes());
    push(p, "3 bytes after the chunk");
    let mut p = plan();
    p[at + 4] = 7;
    push(p, "bad chunk: invalid code tag");
    let mut p = plan();
    let len = p.len();
    p[len - 2] = 99; // the last argument of the inner chunk: int 5 becomes tag 99
    push(p, "bad chunk: unknown value tag 99");
    g
}

#[test]
fn garbled_packets_are_flagged_malformed_without_lua_errors() {
    require_tshark();
    let dir = TempDir::new("garbled");
    let cases = garbled();
    let mut frames: Vec<(Vec<u8>, usize)> = cases.iter().map(|(p, _)| frame(p)).collect();
    // A capsule cut by the capture's snap length inside its transit header (not malformed on
    // the wire): a warning, no error.
    let (f, _) = frame(&capsule());
    frames.push((f, 20 + 8 + 48));
    let pcap = dir.file("garbled.pcap");
    write_pcap(&pcap, &frames);

    let fr = decode(&pcap);
    assert_eq!(fr.len(), frames.len());
    for (f, (_, why)) in fr.iter().zip(&cases) {
        assert!(f.is_anep(), "{why}: not decoded as ANEP: {f:?}");
        assert!(
            f.all("_ws.expert.severity").contains(&SEV_ERROR),
            "{why}: no error expert info: {f:?}"
        );
        assert!(
            f.get("_ws.expert.message").contains(why),
            "expected {why:?} in {:?}",
            f.get("_ws.expert.message")
        );
    }
    let snap = &fr[fr.len() - 1];
    assert!(
        snap.all("_ws.expert.severity") == [SEV_WARN]
            && snap
                .get("_ws.expert.message")
                .contains("Packet size limited during capture"),
        "snap-length cut: {snap:?}"
    );
    // The full detail view decodes every frame without a Lua error (tshark() checks).
    let text = tshark(&pcap, &["-V"]);
    assert_eq!(
        text.matches("\nActive Network Encapsulation Protocol")
            .count(),
        frames.len()
    );
}
