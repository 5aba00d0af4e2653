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

/// Raw Ethernet IPv4/UDP traffic for the router benchmarks.
#[derive(Debug, clap::Parser)]
#[command(name = "anode-pktgen", version)]
struct Args {
    /// The interface to send on.
    #[arg(long)]
    iface: String,
    /// Destination MAC address.
    #[arg(long)]
    dst_mac: MacAddr,
    /// Source IPv4 address.
    #[arg(long)]
    src: std::net::Ipv4Addr,
    /// Destination IPv4 address.
    #[arg(long)]
    dst: std::net::Ipv4Addr,
    /// Destination UDP port.
    #[arg(long, default_value_t = 9000)]
    dport: u16,
    /// Frame size in bytes.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Seconds to send (0..60).
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Packets per second over all threads (0: full speed).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Sender threads (1..16), each with its own socket.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Frames per system call (1..1024).
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// How frames leave: sendmmsg or txring.
    #[arg(long, default_value = "sendmmsg")]
    mode: TxMode,
}

fn parse() -> Result<Args, String> {
    let a = <Args as clap::Parser>::parse();
    if !(0.0..=60.0).contains(&a.secs) {
        return Err(format!("--secs {}: give 0..60 seconds", a.secs));
    }
    if !(1..=16).contains(&a.threads) || !(1..=1024).contains(&a.batch) {
        return Err("--threads must be 1..16 and --batch 1..1024".into());
    }
    Ok(a)
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
