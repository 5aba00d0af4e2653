//! anode-blast: sends pre-built ANEP datagrams (or, with `--capsule`, capsules running
//! `protocols::FORWARD` at every hop) with `sendmmsg`, paced or at full speed, for a bounded time; prints `sent= secs= pps= errs=` (or one JSON object with `--json`).
//! `--stamp` puts the send time in each packet for `anode-sink --latency`.

use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anode_netbench::mmsg::{BatchSender, set_buffers};
use anode_netbench::pace::{Pacer, Step};
use anode_netbench::{BenchError, packet};
use anode_wire::NodeAddr;
use clap::Parser;

/// Traffic generator for the anode forwarding benchmark.
#[derive(Debug, Parser)]
#[command(name = "anode-blast")]
struct Args {
    /// UDP destination (the forwarder's address, or the sink's for kernel forwarding).
    #[arg(long)]
    dst: SocketAddr,
    /// Local address to send from (an anode node knows its peers by it).
    #[arg(long, default_value = "0.0.0.0:0")]
    bind: SocketAddr,
    /// Transit destination in the ANEP header (default: --dst).
    #[arg(long)]
    to: Option<NodeAddr>,
    /// Transit source in the ANEP header (default: --bind).
    #[arg(long)]
    from: Option<NodeAddr>,
    /// Total UDP payload bytes per packet (the whole ANEP datagram, 84..=65507; a capsule,
    /// 136..=65507).
    #[arg(long, default_value_t = 84)]
    size: usize,
    /// Send capsules (transit flag EVAL_EVERY_HOP, code = SHA-256 of `protocols::FORWARD`, no
    /// code source) instead of datagrams: the forwarder must hold that code.
    #[arg(long)]
    capsule: bool,
    /// With --capsule: capsules of this code object (a .wasm or .wat file; its SHA-256 goes
    /// in the capsule) instead of `protocols::FORWARD`, e.g. a hostile one for a storm.
    #[arg(
        long,
        value_name = "FILE",
        requires = "capsule",
        conflicts_with = "cut_through"
    )]
    code: Option<std::path::PathBuf>,
    /// With --capsule: flood data capsules (`protocols::FLOOD`, at least 160 bytes) with the
    /// protocol's cut-through flag, so the forwarder cuts each flow through after its first
    /// capsule (the forwarder must hold the flood code).
    #[arg(long, requires = "capsule")]
    cut_through: bool,
    /// Seconds to send (at most 60).
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// Packets per second; 0 = full speed.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Packets per sendmmsg.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Distinct flow ids cycled over the batch.
    #[arg(long, default_value_t = 1024)]
    flows: u64,
    /// Put the send time (`CLOCK_MONOTONIC`, ns) in each packet's last 8 bytes, for
    /// `anode-sink --latency` (needs --size >= 92, or 144 with --capsule).
    #[arg(long)]
    stamp: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

fn run(a: &Args) -> Result<(), BenchError> {
    if !anode_netbench::positive_at_most(a.secs, 60.0)
        || !(1..=1024).contains(&a.batch)
        || !(a.rate == 0.0 || anode_netbench::positive_at_most(a.rate, 1e9))
    {
        return Err(BenchError::io("arguments")(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "need 0 < --secs <= 60, 1 <= --batch <= 1024, 0 <= --rate <= 1e9",
        )));
    }
    let min_stamped = packet::min_stamped(a.capsule);
    if a.stamp && a.size < min_stamped {
        return Err(BenchError::io("arguments")(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("--stamp needs --size >= {min_stamped} (the stamp goes after the headers)"),
        )));
    }
    let sock = UdpSocket::bind(a.bind).map_err(BenchError::io(format!("bind {}", a.bind)))?;
    set_buffers(&sock, 4 << 20);
    sock.connect(a.dst)
        .map_err(BenchError::io(format!("connect {}", a.dst)))?;
    let local = sock.local_addr().map_err(BenchError::io("local address"))?;
    let src = a.from.unwrap_or(NodeAddr::from(local));
    let dst = a.to.unwrap_or(NodeAddr::from(a.dst));
    let code = match &a.code {
        Some(f) => Some(anode_capsule::read_code_file(f).map_err(|e| {
            BenchError::io("--code")(std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
        })?),
        None => None,
    };
    let packets = (0..a.batch as u64)
        .map(|i| {
            let flow = i % a.flows.max(1);
            if a.cut_through {
                packet::cut_capsule_of_size(a.size, src, dst, flow)
            } else if let Some(c) = &code {
                packet::code_capsule_of_size(a.size, (src, dst, flow), c, &[])
            } else if a.capsule {
                packet::capsule_of_size(a.size, src, dst, flow)
            } else {
                packet::datagram_of_size(a.size, src, dst, flow)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut tx = BatchSender::new(packets);
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack (1 ns, so
    // short pacing sleeps are precise).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let pacer = Pacer::new(a.rate, a.batch);
    let (mut sent, mut errs) = (0u64, 0u64);
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(a.secs);
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let n = match pacer.step((now - t0).as_secs_f64(), sent) {
            Step::Wait(d) => {
                if d > Duration::from_micros(2) {
                    std::thread::sleep(d.min(end - now));
                }
                continue;
            }
            Step::Send(n) => n,
        };
        if a.stamp {
            tx.stamp(n, anode_netbench::mono_ns());
        }
        match tx.send(&sock, n) {
            Ok(k) => sent += k as u64,
            // ECONNREFUSED (ICMP from a sink not yet up), ENOBUFS: count and carry on.
            Err(_) => errs += 1,
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let pps = sent as f64 / secs;
    if a.json {
        println!(
            "{}",
            serde_json::json!({"sent": sent, "secs": secs, "pps": pps.round(), "errs": errs,
                "size": a.size, "rate": a.rate, "batch": a.batch, "capsule": a.capsule, "cut_through": a.cut_through})
        );
    } else {
        println!("sent={sent} secs={secs:.3} pps={pps:.0} errs={errs}");
    }
    Ok(())
}

fn main() -> ExitCode {
    let a = Args::parse();
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("anode-blast: {e}");
            ExitCode::FAILURE
        }
    }
}
