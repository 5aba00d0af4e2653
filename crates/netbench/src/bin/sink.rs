//! anode-sink: counts ANEP datagrams and capsules on a bound address with `recvmmsg` until idle
//! or a time limit (idle counts only after `--min-secs`); prints
//! `rcvd= bytes= secs= pps= capsules= other=` (or one JSON object with `--json`).
//! `rcvd` is datagrams plus capsules (the traffic), `capsules` the capsules among them; `secs`
//! is first to last traffic packet, like the C `recv`; `other` counts other packets (hellos,
//! routing updates) which are not traffic.

use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anode_netbench::mmsg::{BatchReceiver, set_buffers};
use anode_netbench::{BenchError, packet};
use clap::Parser;

/// Counting sink for the anode forwarding benchmark.
#[derive(Debug, Parser)]
#[command(name = "anode-sink")]
struct Args {
    /// Address to receive on.
    #[arg(long)]
    bind: SocketAddr,
    /// Stop after this many seconds in all (at most 120).
    #[arg(long, default_value_t = 10.0)]
    max_secs: f64,
    /// Stop this long after the last datagram (once one arrived)...
    #[arg(long, default_value_t = 1.0)]
    idle: f64,
    /// ...but not before this many seconds since start (so a stall of a starved forwarder
    /// does not end the measurement early).
    #[arg(long, default_value_t = 0.0)]
    min_secs: f64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

fn run(a: &Args) -> Result<(), BenchError> {
    if !anode_netbench::positive_at_most(a.max_secs, 120.0)
        || !anode_netbench::positive_at_most(a.idle, 60.0)
    {
        return Err(BenchError::io("arguments")(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "need 0 < --max-secs <= 120 and 0 < --idle <= 60",
        )));
    }
    let sock = UdpSocket::bind(a.bind).map_err(BenchError::io(format!("bind {}", a.bind)))?;
    set_buffers(&sock, 4 << 20);
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(BenchError::io("read timeout"))?;
    let mut rx = BatchReceiver::new(64, 2048);
    println!("ready");
    let (mut n, mut bytes, mut other, mut capsules) = (0u64, 0u64, 0u64, 0u64);
    let start = Instant::now();
    let (mut first, mut last) = (None::<Instant>, start);
    let idle = Duration::from_secs_f64(a.idle);
    let max = Duration::from_secs_f64(a.max_secs);
    let min = Duration::from_secs_f64(a.min_secs.clamp(0.0, a.max_secs));
    loop {
        let r = rx.recv(&sock).unwrap_or(0);
        let t = Instant::now();
        let mut got = 0;
        for i in 0..r {
            let d = rx.datagram(i);
            if packet::is_anep_datagram(d) {
                got += 1;
                bytes += d.len() as u64;
            } else if packet::is_anep_capsule(d) {
                got += 1;
                capsules += 1;
                bytes += d.len() as u64;
            } else {
                other += 1;
            }
        }
        if got > 0 {
            first.get_or_insert(t);
            last = t;
            n += got;
        }
        let idle_out = first.is_some() && t - last > idle && t - start >= min;
        if t - start > max || idle_out {
            break;
        }
    }
    let secs = first.map_or(0.0, |f| (last - f).as_secs_f64());
    let pps = if secs > 0.0 { n as f64 / secs } else { 0.0 };
    if a.json {
        println!(
            "{}",
            serde_json::json!({"rcvd": n, "bytes": bytes, "secs": secs, "pps": pps.round(),
                "capsules": capsules, "other": other})
        );
    } else {
        println!(
            "rcvd={n} bytes={bytes} secs={secs:.3} pps={pps:.0} capsules={capsules} other={other}"
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let a = Args::parse();
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("anode-sink: {e}");
            ExitCode::FAILURE
        }
    }
}
