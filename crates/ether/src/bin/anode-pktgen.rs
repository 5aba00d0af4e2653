//! anode-pktgen: raw Ethernet IPv4/UDP traffic for the router benchmarks (see
//! `anode_ether::pktgen`). Several sender threads, each with its own socket, paced or at full
//! speed, for a bounded time; prints `sent=N secs=S pps=P` like the C `blast`.
//!
//! ```text
//! anode-pktgen --iface s0 --dst-mac 02:.. --src 198.18.1.1 --dst 198.18.2.2
//!              [--dport 9000] [--size 64] [--secs 3] [--rate PPS (0 = full speed)]
//!              [--threads 1] [--batch 64] [--mode sendmmsg|txring]
//! ```

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anode_ether::pktgen::{FrameSpec, Sender, TxMode, build_frame};
use anode_ip::wire::MacAddr;

const USAGE: &str = "usage: anode-pktgen --iface IF --dst-mac MAC --src IPV4 --dst IPV4 [--dport 9000] [--size 64] [--secs 3] [--rate PPS] [--threads 1] [--batch 64] [--mode sendmmsg|txring]";

struct Args {
    iface: String,
    dst_mac: MacAddr,
    src: std::net::Ipv4Addr,
    dst: std::net::Ipv4Addr,
    dport: u16,
    size: usize,
    secs: f64,
    rate: u64,
    threads: usize,
    batch: usize,
    mode: TxMode,
}

fn parse() -> Result<Args, String> {
    let mut a = std::env::args().skip(1);
    let (mut iface, mut dst_mac, mut src, mut dst) = (None, None, None, None);
    let (mut dport, mut size, mut secs, mut rate) = (9000u16, 64usize, 3.0f64, 0u64);
    let (mut threads, mut batch, mut mode) = (1usize, 64usize, TxMode::Sendmmsg);
    while let Some(k) = a.next() {
        let v = a.next().ok_or(format!("{k} needs a value; {USAGE}"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{k} {v}: {e}; {USAGE}");
        match k.as_str() {
            "--iface" => iface = Some(v),
            "--dst-mac" => dst_mac = Some(v.parse::<MacAddr>().map_err(|e| bad(&e))?),
            "--src" => src = Some(v.parse().map_err(|e| bad(&e))?),
            "--dst" => dst = Some(v.parse().map_err(|e| bad(&e))?),
            "--dport" => dport = v.parse().map_err(|e| bad(&e))?,
            "--size" => size = v.parse().map_err(|e| bad(&e))?,
            "--secs" => secs = v.parse().map_err(|e| bad(&e))?,
            "--rate" => rate = v.parse().map_err(|e| bad(&e))?,
            "--threads" => threads = v.parse().map_err(|e| bad(&e))?,
            "--batch" => batch = v.parse().map_err(|e| bad(&e))?,
            "--mode" => mode = v.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown option {k}; {USAGE}")),
        }
    }
    if !(0.0..=60.0).contains(&secs) {
        return Err(format!("--secs {secs}: give 0..60 seconds"));
    }
    if !(1..=16).contains(&threads) || !(1..=1024).contains(&batch) {
        return Err("--threads must be 1..16 and --batch 1..1024".into());
    }
    Ok(Args {
        iface: iface.ok_or(format!("--iface missing; {USAGE}"))?,
        dst_mac: dst_mac.ok_or(format!("--dst-mac missing; {USAGE}"))?,
        src: src.ok_or(format!("--src missing; {USAGE}"))?,
        dst: dst.ok_or(format!("--dst missing; {USAGE}"))?,
        dport,
        size,
        secs,
        rate,
        threads,
        batch,
        mode,
    })
}

fn main() -> ExitCode {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("anode-pktgen: {e}");
            return ExitCode::from(2);
        }
    };
    let src_mac = std::fs::read_to_string(format!("/sys/class/net/{}/address", a.iface))
        .ok()
        .and_then(|s| s.trim().parse::<MacAddr>().ok());
    let Some(src_mac) = src_mac else {
        eprintln!("anode-pktgen: no interface {} (or no MAC address)", a.iface);
        return ExitCode::from(2);
    };
    let total = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let dur = Duration::from_secs_f64(a.secs);
    let per_thread = a.rate / a.threads as u64;
    let mut handles = Vec::new();
    for t in 0..a.threads {
        let spec = FrameSpec {
            src_mac,
            dst_mac: a.dst_mac,
            src: a.src,
            dst: a.dst,
            src_port: 10000 + t as u16,
            dst_port: a.dport,
            payload: a.size,
        };
        let sender = build_frame(&spec).and_then(|f| Sender::open(&a.iface, f, a.mode, a.batch));
        let mut sender = match sender {
            Ok(s) => s,
            Err(e) => {
                eprintln!("anode-pktgen: {}: {e}", a.iface);
                return ExitCode::FAILURE;
            }
        };
        let total = Arc::clone(&total);
        let batch = a.batch;
        handles.push(std::thread::spawn(move || {
            let mut sent = 0u64;
            loop {
                let el = start.elapsed();
                if el >= dur {
                    break;
                }
                let want = if per_thread == 0 {
                    batch as u64
                } else {
                    let due = (per_thread as f64 * el.as_secs_f64()) as u64;
                    due.saturating_sub(sent).min(batch as u64)
                };
                if want == 0 {
                    std::thread::sleep(Duration::from_micros(50));
                    continue;
                }
                sent += sender.send_batch(want as usize) as u64;
            }
            total.fetch_add(sent, Ordering::Relaxed);
        }));
    }
    for h in handles {
        let _ = h.join();
    }
    let secs = start.elapsed().as_secs_f64();
    let n = total.load(Ordering::Relaxed);
    println!(
        "sent={n} secs={secs:.3} pps={:.0} threads={} mode={:?}",
        n as f64 / secs,
        a.threads,
        a.mode
    );
    ExitCode::SUCCESS
}
