//! `anode ping|traceroute|flood DEST`: the capsule protocols of `crates/capsule` (guest
//! `ping`, `traceroute`, `flood`) driven from the application library over the local node's
//! control socket.
//!
//! Each tool installs its protocol's code object at the local node (`code_put`: the node is
//! the code source for the first hop; every later node demand-loads it from its previous
//! hop), binds a capsule application port (the capability the code delivers replies to),
//! injects capsules and reads the deliveries. Progress goes to stderr, the summary to stdout
//! (`--json`: one JSON object). Every wait is bounded by `--timeout`.
//! Payload formats: see each protocol's source in `guest/protocols/`.

use std::time::{Duration, Instant};

use anode_capsule::{capsule_packet, protocols};
use anode_ctl::{Client, ClientError, ErrorCode, StreamItem};
use anode_wire::NodeAddr;
use anode_wire::anep::TYPE_CAPSULE;
use serde::Serialize;

use super::client::{Conn, connect_to};

/// Arguments every tool shares.
#[derive(Debug, clap::Args)]
pub struct Common {
    /// The destination node (IP:PORT, its UDP address).
    pub dest: NodeAddr,
    /// Resource bound (hops) of each capsule.
    #[arg(long, default_value_t = 32)]
    pub rb: u16,
    /// Seconds to wait for each answer.
    #[arg(long, default_value_t = 5.0)]
    pub timeout: f64,
    #[command(flatten)]
    pub conn: Conn,
}

/// `anode ping`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example: anode ping --node-port 4001 127.0.0.1:4003 --count 5

The first capsule loads the ping code hop by hop (each node asks its previous hop), so its
round trip includes the code loads; later ones run cached code.")]
pub struct PingArgs {
    #[command(flatten)]
    pub common: Common,
    /// Pings to send.
    #[arg(long, short, default_value_t = 4)]
    pub count: u32,
    /// Milliseconds between pings.
    #[arg(long, default_value_t = 200)]
    pub interval_ms: u64,
}

/// `anode traceroute`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example: anode traceroute --node-port 4001 127.0.0.1:4003")]
pub struct TraceArgs {
    #[command(flatten)]
    pub common: Common,
}

/// `anode flood`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example: anode flood --node-port 4001 127.0.0.1:4003 --size 512 --count 200

A start capsule opens the flow at the receiver, which counts data capsules in its soft state
and sends status capsules back every --status-ms; the summary reports what arrived.")]
pub struct FloodArgs {
    #[command(flatten)]
    pub common: Common,
    /// Capsule payload size, bytes (at least 24).
    #[arg(long, default_value_t = 512)]
    pub size: usize,
    /// Data capsules to send.
    #[arg(long, conflicts_with = "seconds", required_unless_present = "seconds")]
    pub count: Option<u64>,
    /// Send for this many seconds.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Milliseconds between the receiver's status reports.
    #[arg(long, default_value_t = 200)]
    pub status_ms: u32,
}

/// Opens the connection, installs `wasm` at the node and binds a capsule port.
struct Session {
    client: Client,
    node: NodeAddr,
    code: [u8; 32],
    port: u16,
    timeout: Duration,
}

impl Session {
    fn open(c: &Common, wasm: &[u8]) -> Result<Session, String> {
        let mut client = connect_to(&c.conn)?;
        let node = client.node_info().node;
        let e = client.code_put(wasm.to_vec()).map_err(|e| e.to_string())?;
        let code = anode_ctl::app::parse_code_name(&e.hash).map_err(|e| e.to_string())?;
        let base = 40_000 + (std::process::id() % 20_000) as u16;
        let mut port = None;
        for i in 0..64u16 {
            let p = base.wrapping_add(i).max(1024);
            match client.bind_app(TYPE_CAPSULE, p) {
                Ok(()) => {
                    port = Some(p);
                    break;
                }
                Err(ClientError::Refused {
                    code: ErrorCode::PortInUse,
                    ..
                }) => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
        let port = port.ok_or("no free application port found (64 tried)")?;
        if !(0.001..=3600.0).contains(&c.timeout) {
            return Err("--timeout must be between 0.001 and 3600 seconds".into());
        }
        Ok(Session {
            client,
            node,
            code,
            port,
            timeout: Duration::from_secs_f64(c.timeout),
        })
    }

    fn inject(&mut self, dst: NodeAddr, rb: u16, flow: u64, payload: &[u8]) -> Result<(), String> {
        let pkt = capsule_packet(self.code, self.node, dst, rb, flow, payload)
            .map_err(|e| e.to_string())?;
        self.client.inject(pkt, false).map_err(|e| e.to_string())
    }

    /// A delivery that is already here, if any.
    fn poll(&mut self) -> Result<Option<Vec<u8>>, String> {
        self.next(Instant::now() + Duration::from_millis(1))
    }

    /// The next delivery to our port before `deadline` (`None`: timed out).
    fn next(&mut self, deadline: Instant) -> Result<Option<Vec<u8>>, String> {
        loop {
            match self.client.next_item(Some(deadline)) {
                Ok(StreamItem::Delivery(d)) if d.port == self.port => {
                    return Ok(Some(d.payload.as_bytes().to_vec()));
                }
                Ok(_) => {}
                Err(ClientError::Timeout) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// Data capsules injected per control request.
const BATCH: u64 = 64;

fn be64(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_be_bytes(a))
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn emit<T: Serialize>(json: bool, v: &T, text: String) {
    if json {
        match serde_json::to_string(v) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("anode: cannot encode JSON: {e}"),
        }
    } else {
        print!("{text}");
    }
}

/// The summary of `anode ping`.
#[derive(Debug, Serialize)]
pub struct PingSummary {
    /// Destination.
    pub dest: NodeAddr,
    /// Pings sent.
    pub sent: u32,
    /// Replies received.
    pub received: u32,
    /// Round-trip time of each reply, ms, in order (`null`: lost).
    pub rtt_ms: Vec<Option<f64>>,
    /// The first reply's RTT (includes the hop-by-hop code loads).
    pub first_ms: Option<f64>,
    /// Mean RTT of the later replies (cached code).
    pub cached_avg_ms: Option<f64>,
}

/// Runs `anode ping`.
pub fn ping(a: PingArgs) -> super::CmdResult {
    let c = &a.common;
    let mut s = Session::open(c, protocols::PING)?;
    let mut rtts = Vec::new();
    for seq in 0..a.count {
        let mut p = [0u8; 20];
        p[2..4].copy_from_slice(&s.port.to_be_bytes());
        s.inject(c.dest, c.rb, u64::from(seq), &p)?;
        let deadline = Instant::now() + s.timeout;
        let rtt = loop {
            match s.next(deadline)? {
                Some(r) if r.first() == Some(&1) => break be64(&r, 12),
                Some(_) => {}
                None => break None,
            }
        };
        match rtt {
            Some(ns) => eprintln!("reply from {}: seq={seq} rtt={:.3} ms", c.dest, ms(ns)),
            None => eprintln!("no reply from {} for seq={seq} (timeout)", c.dest),
        }
        rtts.push(rtt.map(ms));
        if seq + 1 < a.count {
            std::thread::sleep(Duration::from_millis(a.interval_ms));
        }
    }
    let received = rtts.iter().flatten().count() as u32;
    let cached: Vec<f64> = rtts.iter().skip(1).flatten().copied().collect();
    let sum = PingSummary {
        dest: c.dest,
        sent: a.count,
        received,
        first_ms: rtts.first().copied().flatten(),
        cached_avg_ms: (!cached.is_empty())
            .then(|| cached.iter().sum::<f64>() / cached.len() as f64),
        rtt_ms: rtts,
    };
    let text = format!(
        "--- {} capsule ping ---\n{} sent, {} received, {:.0}% loss\nfirst (code loaded hop by hop) {}; cached {}\n",
        sum.dest,
        sum.sent,
        sum.received,
        100.0 * f64::from(sum.sent - sum.received) / f64::from(sum.sent.max(1)),
        sum.first_ms.map_or("-".into(), |v| format!("{v:.3} ms")),
        sum.cached_avg_ms
            .map_or("-".into(), |v| format!("{v:.3} ms avg")),
    );
    emit(c.conn.json(), &sum, text);
    if received == 0 {
        return Err(format!("no reply from {}", c.dest));
    }
    Ok(())
}

/// The result of `anode traceroute`.
#[derive(Debug, Serialize)]
pub struct TraceSummary {
    /// Destination.
    pub dest: NodeAddr,
    /// Every node the probe passed, the source first and the destination last.
    pub hops: Vec<NodeAddr>,
    /// Round-trip time, ms.
    pub rtt_ms: f64,
}

/// Runs `anode traceroute`.
pub fn traceroute(a: TraceArgs) -> super::CmdResult {
    let c = &a.common;
    let mut s = Session::open(c, protocols::TRACEROUTE)?;
    let mut p = [0u8; 12];
    p[2..4].copy_from_slice(&s.port.to_be_bytes());
    s.inject(c.dest, c.rb, 1, &p)?;
    let deadline = Instant::now() + s.timeout;
    let r = loop {
        match s.next(deadline)? {
            Some(r) if r.first() == Some(&1) => break r,
            Some(_) => {}
            None => return Err(format!("no answer from {} within {:?}", c.dest, s.timeout)),
        }
    };
    let n = usize::from(r.get(1).copied().unwrap_or(0));
    let hops: Vec<NodeAddr> = (0..n)
        .map_while(|i| NodeAddr::read(&r, 12 + i * anode_wire::addr::NODE_ADDR_LEN).ok())
        .collect();
    let sum = TraceSummary {
        dest: c.dest,
        rtt_ms: ms(be64(&r, 4).unwrap_or(0)),
        hops,
    };
    let mut text = format!("traceroute to {} (capsule route record)\n", sum.dest);
    for (i, h) in sum.hops.iter().enumerate() {
        text.push_str(&format!("{:>3}  {h}\n", i));
    }
    text.push_str(&format!("round trip {:.3} ms\n", sum.rtt_ms));
    emit(c.conn.json(), &sum, text);
    Ok(())
}

/// The summary of `anode flood`.
#[derive(Debug, Serialize)]
pub struct FloodSummary {
    /// Destination.
    pub dest: NodeAddr,
    /// Capsule payload size, bytes.
    pub size: usize,
    /// Capsules sent (start, data, final probe).
    pub sent: u64,
    /// Capsules the receiver counted (its last status).
    pub delivered: u64,
    /// Lost fraction.
    pub loss: f64,
    /// Receiver's elapsed time of the flow, ms.
    pub elapsed_ms: f64,
    /// Delivered data capsules per second of the send window.
    pub rate_pps: f64,
    /// Delivered payload, Mbit/s.
    pub rate_mbps: f64,
    /// Status reports received.
    pub reports: u64,
}

/// Runs `anode flood`.
pub fn flood(a: FloodArgs) -> super::CmdResult {
    let c = &a.common;
    if !(24..=60_000).contains(&a.size) {
        return Err("--size must be between 24 and 60000 bytes".into());
    }
    let mut s = Session::open(c, protocols::FLOOD)?;
    let flow = u64::from(std::process::id()) << 16 | u64::from(s.port);
    let header = |kind: u8, port: u16| {
        let mut p = vec![0u8; a.size];
        p[0] = kind;
        p[2..4].copy_from_slice(&port.to_be_bytes());
        p[4..8].copy_from_slice(&a.status_ms.max(1).to_be_bytes());
        p
    };
    let (start, data) = (header(0, s.port), header(1, s.port));
    let mut last: Option<(u64, u64)> = None;
    let mut reports = 0u64;
    let mut note = |r: &[u8], last: &mut Option<(u64, u64)>| {
        if r.first() == Some(&2)
            && let (Some(el), Some(n)) = (be64(r, 8), be64(r, 16))
        {
            reports += 1;
            eprintln!("status: {n} capsules arrived in {:.1} ms", ms(el));
            *last = Some((el, n));
        }
    };
    s.inject(c.dest, c.rb, flow, &start)?;
    // The start capsule loads the code along the path; wait for its status first.
    let deadline = Instant::now() + s.timeout;
    match s.next(deadline)? {
        Some(r) => note(&r, &mut last),
        None => return Err(format!("no status from {} within {:?}", c.dest, s.timeout)),
    }
    let mut sent = 1u64;
    let t0 = Instant::now();
    let until = a
        .seconds
        .map(|x| t0 + Duration::from_secs_f64(x.clamp(0.0, 3600.0)));
    loop {
        let more = match (a.count, until) {
            (Some(n), _) => sent - 1 < n,
            (None, Some(u)) => Instant::now() < u,
            (None, None) => false,
        };
        if !more {
            break;
        }
        let batch = match a.count {
            Some(n) => (n - (sent - 1)).min(BATCH),
            None => BATCH,
        };
        let pkt =
            capsule_packet(s.code, s.node, c.dest, c.rb, flow, &data).map_err(|e| e.to_string())?;
        s.client
            .inject_many(pkt, false, batch as u32)
            .map_err(|e| e.to_string())?;
        sent += batch;
        // Take status reports as they come, without waiting.
        while let Some(r) = s.poll()? {
            note(&r, &mut last);
        }
    }
    let window = t0.elapsed().as_secs_f64().max(1e-9);
    // One more data capsule after a status interval makes the receiver report its count.
    std::thread::sleep(Duration::from_millis(u64::from(a.status_ms) + 20));
    while let Some(r) = s.poll()? {
        note(&r, &mut last);
    }
    s.inject(c.dest, c.rb, flow, &data)?;
    sent += 1;
    let deadline = Instant::now() + s.timeout;
    while let Some(r) = s.next(deadline)? {
        note(&r, &mut last);
        if last.is_some_and(|(_, n)| n >= sent) {
            break;
        }
    }
    let (el, delivered) = last.unwrap_or((0, 0));
    // Data capsules counted (less the start and the final probe) over the send window.
    let data = delivered.saturating_sub(2) as f64;
    let sum = FloodSummary {
        dest: c.dest,
        size: a.size,
        sent,
        delivered,
        loss: 1.0 - delivered as f64 / sent as f64,
        elapsed_ms: ms(el),
        rate_pps: data / window,
        rate_mbps: data * a.size as f64 * 8.0 / window / 1e6,
        reports,
    };
    let text = format!(
        "--- flood to {} ---\n{} capsules of {} bytes sent, {} counted at the receiver ({:.1}% loss)\n{:.0} capsules/s, {:.2} Mbit/s (receiver's flow time {:.1} ms, {} status reports)\n",
        sum.dest,
        sum.sent,
        sum.size,
        sum.delivered,
        100.0 * sum.loss,
        sum.rate_pps,
        sum.rate_mbps,
        sum.elapsed_ms,
        sum.reports
    );
    emit(c.conn.json(), &sum, text);
    Ok(())
}
