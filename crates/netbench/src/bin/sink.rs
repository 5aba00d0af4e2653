//! anode-sink: counts ANEP datagrams and capsules on a bound address with `recvmmsg` until idle
//! or a time limit (idle counts only after `--min-secs`); prints
//! `rcvd= bytes= secs= pps= capsules= other=` (or one JSON object with `--json`).
//! `rcvd` is datagrams plus capsules (the traffic), `capsules` the capsules among them; `secs`
//! is first to last traffic packet, like the C `recv`; `other` counts other packets (hellos,
//! routing updates) which are not traffic. With `--latency` it reads the send stamps of
//! `anode-blast --stamp` and adds `lat_n= lat_p50_us= lat_p99_us= lat_max_us=`.

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
    /// Read the send stamps of `anode-blast --stamp` and report the one-way latency (p50,
    /// p99, max; sender and sink on one host share `CLOCK_MONOTONIC`).
    #[arg(long)]
    latency: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Most latency samples kept (the rest are not sampled; at the tools' rates a latency run
/// stays far below it).
const MAX_SAMPLES: usize = 4_000_000;

/// The `q` quantile (0..=1) of sorted `v`, in microseconds.
fn quantile_us(v: &[u64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v.get(i).copied().unwrap_or(0) as f64 / 1e3
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
    let mut lat: Vec<u64> = Vec::new();
    let start = Instant::now();
    let (mut first, mut last) = (None::<Instant>, start);
    let idle = Duration::from_secs_f64(a.idle);
    let max = Duration::from_secs_f64(a.max_secs);
    let min = Duration::from_secs_f64(a.min_secs.clamp(0.0, a.max_secs));
    loop {
        let r = rx.recv(&sock).unwrap_or(0);
        let t = Instant::now();
        let now_ns = if a.latency {
            anode_netbench::mono_ns()
        } else {
            0
        };
        let mut got = 0;
        for i in 0..r {
            let d = rx.datagram(i);
            let capsule = packet::is_anep_capsule(d);
            if packet::is_anep_datagram(d) || capsule {
                got += 1;
                capsules += u64::from(capsule);
                bytes += d.len() as u64;
                if a.latency
                    && lat.len() < MAX_SAMPLES
                    && let Some(s) = packet::stamp_of(d, capsule)
                {
                    lat.push(now_ns.saturating_sub(s));
                }
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
    lat.sort_unstable();
    let (p50, p99, pmax) = (
        quantile_us(&lat, 0.5),
        quantile_us(&lat, 0.99),
        quantile_us(&lat, 1.0),
    );
    if a.json {
        let mut v = serde_json::json!({"rcvd": n, "bytes": bytes, "secs": secs, "pps": pps.round(),
            "capsules": capsules, "other": other});
        if a.latency
            && let Some(o) = v.as_object_mut()
        {
            o.insert(
                "latency_us".into(),
                serde_json::json!({"samples": lat.len(), "p50": p50, "p99": p99, "max": pmax}),
            );
        }
        println!("{v}");
    } else {
        let l = if a.latency {
            format!(
                " lat_n={} lat_p50_us={p50:.1} lat_p99_us={p99:.1} lat_max_us={pmax:.1}",
                lat.len()
            )
        } else {
            String::new()
        };
        println!(
            "rcvd={n} bytes={bytes} secs={secs:.3} pps={pps:.0} capsules={capsules} other={other}{l}"
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
