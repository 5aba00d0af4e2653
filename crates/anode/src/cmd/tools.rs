//! `anode ping|traceroute|flood DEST`: the capsule protocols of `crates/capsule` (guest
//! `ping`, `traceroute`, `flood`) through the local node's control socket, with the output of
//! the tools people know (ping, traceroute, iperf3): a line per reply, hop or interval on
//! stdout as it comes, and a summary always (also on loss and Ctrl-C); `--json` prints one
//! JSON object instead. The protocol logic is `anode_ctl::tools`.

use std::time::Duration;

use anode_capsule::protocols;
use anode_ctl::CapsuleSession;
use anode_ctl::tools::{
    self, FloodInterval, FloodOptions, PingEvent, PingOptions, TraceHop, TraceOptions,
};
use anode_ether::signals;
use anode_wire::NodeAddr;
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
Example: anode ping --node-port 4001 127.0.0.1:4003 -c 5

The first capsule loads the ping code hop by hop wherever a node lacks it (each node asks
its previous hop), so its round trip includes the code loads; later ones run cached code.
Without -c it pings until Ctrl-C, then prints the summary.")]
pub struct PingArgs {
    #[command(flatten)]
    pub common: Common,
    /// Pings to send (default: until Ctrl-C).
    #[arg(long, short = 'c')]
    pub count: Option<u32>,
    /// Seconds between pings.
    #[arg(long, short = 'i', default_value_t = 1.0)]
    pub interval: f64,
    /// Extra payload bytes after the 20-byte ping header.
    #[arg(long, short = 's', default_value_t = 0)]
    pub size: usize,
}

/// `anode traceroute`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example: anode traceroute --node-port 4001 127.0.0.1:4003

Sends --queries probes per hop, each allowed one hop more than the last, as IP traceroute
does; the node where a probe's hops run out answers. `* * *` is a hop that did not answer
within --timeout. --record sends one route-recording capsule instead (every node it passes
adds its address).")]
pub struct TraceArgs {
    #[command(flatten)]
    pub common: Common,
    /// The most hops to probe.
    #[arg(long, short = 'm', default_value_t = 30)]
    pub max_hops: u8,
    /// Probes per hop.
    #[arg(long, short = 'q', default_value_t = 3)]
    pub queries: u8,
    /// One route-recording capsule instead of hop-limited probes.
    #[arg(long)]
    pub record: bool,
}

/// `anode flood`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example: anode flood --node-port 4001 127.0.0.1:4003 --size 512 --count 200

A start capsule opens the flow at the receiver, which counts data capsules in its soft state
and sends status capsules back every --status-ms; each prints an interval line (as iperf3)
and the summary reports what arrived. Without --count or --seconds it runs until Ctrl-C.")]
pub struct FloodArgs {
    #[command(flatten)]
    pub common: Common,
    /// Capsule payload size, bytes (at least 24).
    #[arg(long, default_value_t = 512)]
    pub size: usize,
    /// Data capsules to send.
    #[arg(long, conflicts_with = "seconds")]
    pub count: Option<u64>,
    /// Send for this many seconds.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Data capsules per second (default: as fast as the node takes them).
    #[arg(long)]
    pub rate: Option<u64>,
    /// Milliseconds between the receiver's status reports (interval lines).
    #[arg(long, default_value_t = 1000)]
    pub status_ms: u32,
    /// Ask every node on the way to cut the flow through (NodeOS cut-through channels):
    /// after its first capsules the flow passes them on the fast path without running the
    /// flood code; only the receiver runs every capsule. `anode channels` at a node on the
    /// way shows the channel and its count.
    #[arg(long)]
    pub cut_through: bool,
}

/// Opens a capsule session for `wasm` at the node `c` names; installs the Ctrl-C handler.
fn open(c: &Common, wasm: &[u8]) -> Result<(CapsuleSession, Duration), String> {
    if !(0.001..=3600.0).contains(&c.timeout) {
        return Err("--timeout must be between 0.001 and 3600 seconds".into());
    }
    super::install_signals()?;
    let s = CapsuleSession::open(connect_to(&c.conn)?, wasm)?;
    Ok((s, Duration::from_secs_f64(c.timeout)))
}

fn emit<T: Serialize>(json: bool, v: &T, text: &str) {
    if json {
        match serde_json::to_string(v) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("anode: cannot encode JSON: {e}"),
        }
    } else {
        print!("{text}");
    }
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

/// Runs `anode ping`.
pub fn ping(a: PingArgs) -> super::CmdResult {
    let c = &a.common;
    if !(0.0..=3600.0).contains(&a.interval) || a.size > 60_000 {
        return Err("-i must be 0..3600 seconds and -s at most 60000 bytes".into());
    }
    let (mut s, timeout) = open(c, protocols::PING)?;
    let json = c.conn.json();
    if !json {
        println!(
            "PING {} (capsule ping from {}): {} bytes of payload",
            c.dest,
            s.node(),
            20 + a.size
        );
    }
    let o = PingOptions {
        dest: c.dest,
        rb: c.rb,
        count: a.count,
        interval: Duration::from_secs_f64(a.interval),
        size: a.size,
        timeout,
    };
    let sum = tools::ping(&mut s, &o, &signals::stop_requested, &mut |e| {
        if json {
            return;
        }
        match e {
            PingEvent::Reply { seq, rtt_ms, bytes } => {
                println!(
                    "{bytes} bytes from {}: seq={seq} time={rtt_ms:.3} ms",
                    c.dest
                );
            }
            PingEvent::Lost { seq } => println!("no reply from {} for seq={seq}", c.dest),
        }
    })?;
    let mut text = format!(
        "--- {} capsule ping statistics ---\n{} capsules transmitted, {} received, {:.0}% loss\n",
        sum.dest, sum.sent, sum.received, sum.loss_pct
    );
    if sum.received > 0 {
        text.push_str(&format!(
            "rtt min/avg/max/mdev = {}/{}/{}/{} ms\n",
            opt_ms(sum.min_ms),
            opt_ms(sum.avg_ms),
            opt_ms(sum.max_ms),
            opt_ms(sum.mdev_ms)
        ));
    }
    if !sum.code_was_cached
        && let Some(Some(first)) = sum.rtt_ms.first()
    {
        text.push_str(&format!(
            "first reply {first:.3} ms: {} did not have the ping code, so it was loaded hop by hop\n",
            s.node()
        ));
    }
    emit(json, &sum, &text);
    if sum.received == 0 {
        return Err(format!("no reply from {}", c.dest));
    }
    Ok(())
}

/// Runs `anode traceroute`.
pub fn traceroute(a: TraceArgs) -> super::CmdResult {
    let c = &a.common;
    let (mut s, timeout) = open(c, protocols::TRACEROUTE)?;
    let json = c.conn.json();
    if a.record {
        let r = tools::record_route(&mut s, c.dest, c.rb, timeout)?;
        let mut text = format!("route record to {}\n", r.dest);
        for (i, h) in r.hops.iter().enumerate() {
            text.push_str(&format!("{i:>3}  {h}\n"));
        }
        text.push_str(&format!("round trip {:.3} ms\n", r.rtt_ms));
        emit(json, &r, &text);
        return Ok(());
    }
    if !json {
        println!(
            "traceroute to {} from {} ({} hops max, {} probes per hop)",
            c.dest,
            s.node(),
            a.max_hops,
            a.queries
        );
    }
    let o = TraceOptions {
        dest: c.dest,
        max_hops: a.max_hops.max(1),
        probes: a.queries.max(1),
        timeout,
        rb: c.rb,
    };
    let sum = tools::traceroute(&mut s, &o, &signals::stop_requested, &mut |h: &TraceHop| {
        if !json {
            println!("{}", hop_line(h));
        }
    })?;
    if json {
        emit(true, &sum, "");
    }
    if sum.reached {
        Ok(())
    } else {
        Err(format!("{} not reached within {} hops", c.dest, a.max_hops))
    }
}

/// `  2  127.0.0.1:4003  0.412 ms  0.380 ms  *` (or `  3  * * *`).
fn hop_line(h: &TraceHop) -> String {
    let times: Vec<String> = h
        .rtt_ms
        .iter()
        .map(|t| t.map_or("*".to_string(), |v| format!("{v:.3} ms")))
        .collect();
    match h.addr {
        Some(a) => format!("{:>3}  {a}  {}", h.hop, times.join("  ")),
        None => format!("{:>3}  {}", h.hop, times.join(" ")),
    }
}

/// Runs `anode flood`.
pub fn flood(a: FloodArgs) -> super::CmdResult {
    let c = &a.common;
    let (mut s, timeout) = open(c, protocols::FLOOD)?;
    let json = c.conn.json();
    let o = FloodOptions {
        dest: c.dest,
        rb: c.rb,
        size: a.size,
        count: a.count,
        duration: a
            .seconds
            .map(|x| Duration::from_secs_f64(x.clamp(0.0, 3600.0))),
        rate_pps: a.rate,
        status: Duration::from_millis(u64::from(a.status_ms.max(1))),
        timeout,
        cut_through: a.cut_through,
    };
    if !json {
        println!(
            "flood to {} from {}: capsules of {} bytes{}{}",
            c.dest,
            s.node(),
            a.size,
            a.rate
                .map_or(String::new(), |r| format!(" at {r} capsules/s")),
            if a.cut_through {
                ", cut through along the path"
            } else {
                ""
            }
        );
        println!("[ interval  ]     received      rate       bandwidth    sent so far");
    }
    let sum = tools::flood(
        &mut s,
        &o,
        &signals::stop_requested,
        &mut |iv: &FloodInterval| {
            if !json {
                println!(
                    "[{:5.2}-{:5.2} s] {:>8} caps  {:>8.0} caps/s  {:>8.2} Mbit/s  {:>9}",
                    iv.start_s, iv.end_s, iv.delivered, iv.pps, iv.mbps, iv.sent_total
                );
            }
        },
    )?;
    let text = format!(
        "--- flood to {} ---\n{} capsules of {} bytes sent, {} counted at the receiver ({:.1}% loss)\n{:.0} capsules/s, {:.2} Mbit/s (receiver's flow time {:.1} ms)\n",
        sum.dest,
        sum.sent,
        sum.size,
        sum.delivered,
        100.0 * sum.loss,
        sum.rate_pps,
        sum.rate_mbps,
        sum.elapsed_ms,
    );
    let text = if sum.held_back > 0 {
        format!(
            "{text}the sending node held the flood back {} times: its protocol is over its NodeOS share (raise channel_bandwidth in the node's [nodeos] policy for more)\n",
            sum.held_back
        )
    } else {
        text
    };
    emit(json, &sum, &text);
    Ok(())
}
