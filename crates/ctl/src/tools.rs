//! The tools people know, over the shipped capsule protocols (`guest/protocols/`): [`ping`]
//! (PAN/ANTS active ping), [`traceroute`] (hop-limited probes, or one route-recording
//! capsule) and [`flood`] (PAN's flood: rate and loss at the receiver). Each runs on a
//! [`CapsuleSession`] opened with the protocol's code, reports every reply or interval
//! through a callback as it happens, stops early when `stop()` says so (Ctrl-C), and returns
//! a summary in any case. Every wait is bounded.
//!
//! Payload formats are those of each protocol's source (big-endian fields).

use std::time::{Duration, Instant};

use anode_wire::NodeAddr;
use anode_wire::addr::NODE_ADDR_LEN;
use serde::Serialize;

use crate::CapsuleSession;

/// How often a wait checks `stop()`.
const TICK: Duration = Duration::from_millis(10);

fn be64(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_be_bytes(a))
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Waits for the next delivery whose first byte is `kind`, until `deadline` or `stop()`.
fn next_kind(
    s: &mut CapsuleSession,
    kind: u8,
    deadline: Instant,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Vec<u8>>, String> {
    loop {
        if stop() {
            return Ok(None);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        match s.next(deadline.min(now + TICK))? {
            Some(r) if r.first() == Some(&kind) => return Ok(Some(r)),
            _ => {}
        }
    }
}

/// Sleeps `d`, waking early when `stop()` says so.
fn pause(d: Duration, stop: &dyn Fn() -> bool) {
    let end = Instant::now() + d;
    while !stop() {
        let now = Instant::now();
        if now >= end {
            return;
        }
        std::thread::sleep((end - now).min(TICK));
    }
}

/// `anode ping` options.
#[derive(Debug, Clone)]
pub struct PingOptions {
    /// Destination node.
    pub dest: NodeAddr,
    /// Resource bound of each capsule.
    pub rb: u16,
    /// Pings to send (`None`: until stopped).
    pub count: Option<u32>,
    /// Time between pings.
    pub interval: Duration,
    /// Extra payload bytes after the 20-byte ping header.
    pub size: usize,
    /// How long to wait for each reply.
    pub timeout: Duration,
}

/// One ping's outcome, reported as it happens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PingEvent {
    /// A reply: sequence number, round-trip time (ms), capsule payload bytes.
    Reply {
        /// Sequence number.
        seq: u32,
        /// Round-trip time, ms.
        rtt_ms: f64,
        /// Payload bytes.
        bytes: usize,
    },
    /// No reply within the timeout.
    Lost {
        /// Sequence number.
        seq: u32,
    },
}

/// The summary of a ping run.
#[derive(Debug, Clone, Serialize)]
pub struct PingSummary {
    /// Destination.
    pub dest: NodeAddr,
    /// Pings sent.
    pub sent: u32,
    /// Replies received.
    pub received: u32,
    /// Lost fraction, percent.
    pub loss_pct: f64,
    /// Round-trip time of each ping, ms, in order (`null`: lost).
    pub rtt_ms: Vec<Option<f64>>,
    /// Smallest RTT, ms.
    pub min_ms: Option<f64>,
    /// Mean RTT, ms.
    pub avg_ms: Option<f64>,
    /// Largest RTT, ms.
    pub max_ms: Option<f64>,
    /// Mean deviation of the RTTs (as ping's mdev), ms.
    pub mdev_ms: Option<f64>,
    /// Whether the source node had the ping code before this run (if not, the first reply's
    /// RTT includes loading it hop by hop along the path).
    pub code_was_cached: bool,
}

impl PingSummary {
    fn new(dest: NodeAddr, rtts: Vec<Option<f64>>, code_was_cached: bool) -> PingSummary {
        let got: Vec<f64> = rtts.iter().flatten().copied().collect();
        let sent = rtts.len() as u32;
        let received = got.len() as u32;
        let n = got.len() as f64;
        let avg = (!got.is_empty()).then(|| got.iter().sum::<f64>() / n);
        let mdev = avg.map(|a| {
            let sq = got.iter().map(|x| x * x).sum::<f64>() / n;
            (sq - a * a).max(0.0).sqrt()
        });
        PingSummary {
            dest,
            sent,
            received,
            loss_pct: 100.0 * f64::from(sent - received) / f64::from(sent.max(1)),
            min_ms: got.iter().copied().reduce(f64::min),
            max_ms: got.iter().copied().reduce(f64::max),
            avg_ms: avg,
            mdev_ms: mdev,
            rtt_ms: rtts,
            code_was_cached,
        }
    }
}

/// Pings `o.dest` with the ping protocol's capsules; see the module docs.
pub fn ping(
    s: &mut CapsuleSession,
    o: &PingOptions,
    stop: &dyn Fn() -> bool,
    on: &mut dyn FnMut(&PingEvent),
) -> Result<PingSummary, String> {
    let mut payload = vec![0u8; 20 + o.size];
    if let Some(p) = payload.get_mut(2..4) {
        p.copy_from_slice(&s.port().to_be_bytes());
    }
    let mut rtts = Vec::new();
    let mut seq = 0u32;
    while o.count.is_none_or(|c| seq < c) && !stop() {
        s.inject(o.dest, o.rb, u64::from(seq), &payload)?;
        let reply = next_kind(s, 1, Instant::now() + o.timeout, stop)?;
        let rtt = reply.as_deref().and_then(|r| be64(r, 12)).map(ms);
        match rtt {
            Some(rtt_ms) => on(&PingEvent::Reply {
                seq,
                rtt_ms,
                bytes: payload.len(),
            }),
            None if stop() => break,
            None => on(&PingEvent::Lost { seq }),
        }
        rtts.push(rtt);
        seq += 1;
        if o.count.is_none_or(|c| seq < c) {
            pause(o.interval, stop);
        }
    }
    Ok(PingSummary::new(o.dest, rtts, s.code_was_cached()))
}

/// `anode traceroute` options.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// Destination node.
    pub dest: NodeAddr,
    /// The most hops probed.
    pub max_hops: u8,
    /// Probes per hop.
    pub probes: u8,
    /// How long to wait for each probe's answer.
    pub timeout: Duration,
    /// Resource bound of each probe.
    pub rb: u16,
}

/// One hop of a traceroute.
#[derive(Debug, Clone, Serialize)]
pub struct TraceHop {
    /// Hops from the source (1 is the first node after it).
    pub hop: u8,
    /// The node that answered (`null`: no probe was answered).
    pub addr: Option<NodeAddr>,
    /// Each probe's round-trip time, ms (`null`: no answer).
    pub rtt_ms: Vec<Option<f64>>,
}

/// The result of a traceroute.
#[derive(Debug, Clone, Serialize)]
pub struct TraceSummary {
    /// Destination.
    pub dest: NodeAddr,
    /// The hops, in order.
    pub hops: Vec<TraceHop>,
    /// Whether the destination answered.
    pub reached: bool,
}

/// Traces the path to `o.dest` with hop-limited probes of the traceroute protocol, reporting
/// every hop as it completes.
pub fn traceroute(
    s: &mut CapsuleSession,
    o: &TraceOptions,
    stop: &dyn Fn() -> bool,
    on: &mut dyn FnMut(&TraceHop),
) -> Result<TraceSummary, String> {
    let mut hops = Vec::new();
    let mut reached = false;
    let mut flow = 0u64;
    for ttl in 1..=o.max_hops {
        let mut hop = TraceHop {
            hop: ttl,
            addr: None,
            rtt_ms: Vec::new(),
        };
        for _ in 0..o.probes.max(1) {
            if stop() {
                break;
            }
            flow += 1;
            let mut p = [0u8; 12];
            p[0] = 2;
            p[1] = ttl;
            p[2..4].copy_from_slice(&s.port().to_be_bytes());
            s.inject(o.dest, o.rb, flow, &p)?;
            let r = next_kind(s, 3, Instant::now() + o.timeout, stop)?;
            let answer = r.as_deref().and_then(|r| {
                let addr = NodeAddr::read(r, 12).ok()?;
                Some((addr, ms(be64(r, 4)?), r.get(1) == Some(&1)))
            });
            match answer {
                Some((addr, rtt, at_dest)) => {
                    hop.addr = Some(addr);
                    hop.rtt_ms.push(Some(rtt));
                    reached |= at_dest;
                }
                None => hop.rtt_ms.push(None),
            }
        }
        on(&hop);
        hops.push(hop);
        if reached || stop() {
            break;
        }
    }
    Ok(TraceSummary {
        dest: o.dest,
        hops,
        reached,
    })
}

/// The route one recording capsule took (the traceroute protocol's route record).
#[derive(Debug, Clone, Serialize)]
pub struct RouteRecord {
    /// Destination.
    pub dest: NodeAddr,
    /// Every node the probe passed, the source first and the destination last.
    pub hops: Vec<NodeAddr>,
    /// Round-trip time, ms.
    pub rtt_ms: f64,
}

/// Sends one route-recording capsule to `dest` and returns the route it took.
pub fn record_route(
    s: &mut CapsuleSession,
    dest: NodeAddr,
    rb: u16,
    timeout: Duration,
) -> Result<RouteRecord, String> {
    let mut p = [0u8; 12];
    p[2..4].copy_from_slice(&s.port().to_be_bytes());
    s.inject(dest, rb, 1, &p)?;
    let r = next_kind(s, 1, Instant::now() + timeout, &|| false)?
        .ok_or_else(|| format!("no answer from {dest} within {timeout:?}"))?;
    let n = usize::from(r.get(1).copied().unwrap_or(0));
    Ok(RouteRecord {
        dest,
        hops: (0..n)
            .map_while(|i| NodeAddr::read(&r, 12 + i * NODE_ADDR_LEN).ok())
            .collect(),
        rtt_ms: ms(be64(&r, 4).unwrap_or(0)),
    })
}

/// `anode flood` options.
#[derive(Debug, Clone)]
pub struct FloodOptions {
    /// Destination node.
    pub dest: NodeAddr,
    /// Resource bound of each capsule.
    pub rb: u16,
    /// Capsule payload size, bytes (at least 24).
    pub size: usize,
    /// Data capsules to send (`None`: for `duration`, or until stopped).
    pub count: Option<u64>,
    /// How long to send (`None` with no count: until stopped).
    pub duration: Option<Duration>,
    /// Data capsules per second (`None`: as fast as the node takes them).
    pub rate_pps: Option<u64>,
    /// The receiver's status interval (one interval line each).
    pub status: Duration,
    /// How long to wait for the first and the last status.
    pub timeout: Duration,
    /// Ask every node on the way to cut the flow through (the protocol's flag 1): after the
    /// first capsules, the flow passes them on the fast path without running the code.
    pub cut_through: bool,
}

/// One interval as the receiver reported it (as iperf3's interval lines).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FloodInterval {
    /// Interval start, seconds since the flow started at the receiver.
    pub start_s: f64,
    /// Interval end, seconds.
    pub end_s: f64,
    /// Capsules the receiver counted in the interval.
    pub delivered: u64,
    /// Capsules sent by the end of the interval (as the sender knew when the report came).
    pub sent_total: u64,
    /// Received capsules per second in the interval.
    pub pps: f64,
    /// Received payload in the interval, Mbit/s.
    pub mbps: f64,
}

/// The summary of a flood.
#[derive(Debug, Clone, Serialize)]
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
    /// The receiver's interval reports.
    pub intervals: Vec<FloodInterval>,
    /// Times the sending node held the flood back because its protocol was over its NodeOS
    /// share (`channel_bandwidth`, CPU): the flood then went on at the rate the node allows.
    pub held_back: u64,
}

/// Data capsules injected per control request.
const BATCH: u64 = 64;

/// The receiver's status reports folded into interval lines.
struct Status {
    size: usize,
    last: (u64, u64),
    intervals: Vec<FloodInterval>,
    /// Times the local node held the flood back (its protocol over its NodeOS share).
    held_back: u64,
}

impl Status {
    /// Takes a status capsule (kind 2: elapsed ns at 8, count at 16), if `r` is one.
    fn note(&mut self, r: &[u8], sent: u64, on: &mut dyn FnMut(&FloodInterval)) {
        let (Some(el), Some(n)) = (be64(r, 8), be64(r, 16)) else {
            return;
        };
        if r.first() != Some(&2) || el < self.last.0 {
            return;
        }
        let (el0, n0) = self.last;
        let secs = (el - el0) as f64 / 1e9;
        let got = n.saturating_sub(n0);
        let iv = FloodInterval {
            start_s: el0 as f64 / 1e9,
            end_s: el as f64 / 1e9,
            delivered: got,
            sent_total: sent,
            pps: if secs > 0.0 { got as f64 / secs } else { 0.0 },
            mbps: if secs > 0.0 {
                got as f64 * self.size as f64 * 8.0 / secs / 1e6
            } else {
                0.0
            },
        };
        self.last = (el, n);
        if el > el0 {
            on(&iv);
            self.intervals.push(iv);
        }
    }
}

/// Floods `o.dest` with capsules of the flood protocol; see the module docs.
pub fn flood(
    s: &mut CapsuleSession,
    o: &FloodOptions,
    stop: &dyn Fn() -> bool,
    on: &mut dyn FnMut(&FloodInterval),
) -> Result<FloodSummary, String> {
    if !(24..=60_000).contains(&o.size) {
        return Err("the capsule size must be between 24 and 60000 bytes".into());
    }
    let flow = u64::from(std::process::id()) << 16 | u64::from(s.port());
    let status_ms = u32::try_from(o.status.as_millis())
        .unwrap_or(u32::MAX)
        .max(1);
    let header = |kind: u8| {
        let mut p = vec![0u8; o.size];
        p[0] = kind;
        p[1] = u8::from(o.cut_through);
        p[2..4].copy_from_slice(&s.port().to_be_bytes());
        p[4..8].copy_from_slice(&status_ms.to_be_bytes());
        p
    };
    let (start, data) = (header(0), header(1));
    let mut st = Status {
        size: o.size,
        last: (0, 0),
        intervals: Vec::new(),
        held_back: 0,
    };
    // The start capsule loads the code along the path; wait for its status first, sending
    // it again every second in case it was lost (a start repeated before any data only
    // restarts the count at the destination).
    let deadline = Instant::now() + o.timeout;
    let first = loop {
        s.inject(o.dest, o.rb, flow, &start)?;
        let retry = (Instant::now() + Duration::from_secs(1)).min(deadline);
        if let Some(r) = next_kind(s, 2, retry, stop)? {
            break r;
        }
        if stop() || Instant::now() >= deadline {
            return Err(format!("no status from {} within {:?}", o.dest, o.timeout));
        }
    };
    st.note(&first, 1, on);
    let mut sent = 1u64;
    let t0 = Instant::now();
    send_data(s, o, (flow, &data), &mut sent, &mut st, stop, on)?;
    let window = t0.elapsed().as_secs_f64().max(1e-9);
    // One more data capsule after a status interval makes the receiver report its count.
    pause(o.status + Duration::from_millis(20), &|| false);
    while let Some(r) = s.poll()? {
        st.note(&r, sent, on);
    }
    s.inject(o.dest, o.rb, flow, &data)?;
    sent += 1;
    let deadline = Instant::now() + o.timeout;
    while let Some(r) = s.next(deadline)? {
        st.note(&r, sent, on);
        if st.last.1 >= sent {
            break;
        }
    }
    let (el, delivered) = st.last;
    // Data capsules counted (less the start and the final probe) over the send window.
    let counted = delivered.saturating_sub(2) as f64;
    Ok(FloodSummary {
        dest: o.dest,
        size: o.size,
        sent,
        delivered,
        loss: 1.0 - delivered as f64 / sent as f64,
        elapsed_ms: ms(el),
        rate_pps: counted / window,
        rate_mbps: counted * o.size as f64 * 8.0 / window / 1e6,
        intervals: st.intervals,
        held_back: st.held_back,
    })
}

/// Sends the data capsules (paced at `o.rate_pps` if given) until the count, the duration
/// or `stop()`, taking status reports as they come.
fn send_data(
    s: &mut CapsuleSession,
    o: &FloodOptions,
    (flow, data): (u64, &[u8]),
    sent: &mut u64,
    st: &mut Status,
    stop: &dyn Fn() -> bool,
    on: &mut dyn FnMut(&FloodInterval),
) -> Result<(), String> {
    let t0 = Instant::now();
    let until = o.duration.map(|d| t0 + d);
    loop {
        let done = *sent - 1;
        let more = match (o.count, until) {
            (Some(n), _) => done < n,
            (None, Some(u)) => Instant::now() < u,
            (None, None) => true,
        };
        if !more || stop() {
            return Ok(());
        }
        let mut batch = o.count.map_or(BATCH, |n| (n - done).min(BATCH));
        if let Some(rate) = o.rate_pps {
            // Paced: what the rate allows by now, at most a batch.
            let due = (t0.elapsed().as_secs_f64() * rate as f64) as u64;
            batch = batch.min(due.saturating_sub(done));
            if batch == 0 {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
        }
        let (went, dropped) = s.inject_upto(o.dest, (o.rb, flow), data, batch as u32)?;
        *sent += u64::from(went);
        if let Some((drop, reason)) = dropped {
            // The local node holds the flood to its protocol's share (NodeOS bandwidth or
            // CPU): back off and go on at the rate it allows; any other drop is an error.
            if !(drop.ends_with("/bandwidth") || drop.ends_with("/queue_full")) {
                return Err(reason);
            }
            st.held_back += 1;
            std::thread::sleep(Duration::from_millis(2));
        }
        // Take status reports as they come, without waiting.
        while let Some(r) = s.poll()? {
            st.note(&r, *sent, on);
        }
    }
}
