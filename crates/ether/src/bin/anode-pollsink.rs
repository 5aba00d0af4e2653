//! anode-pollsink: a UDP counting receiver that polls instead of sleeping, for the router
//! benchmarks. It reads with non-blocking `recvmmsg` in a loop, so the sender never pays for
//! waking it (on a small VM a wake-up is an inter-processor interrupt through the hypervisor,
//! charged to the CPU that delivers the packet, which in a veth testbed is the sender's).
//! Same arguments and output as the C `recv` of ../shared/baselines:
//!
//! ```text
//! anode-pollsink BIND_IP:PORT MAX_SECONDS [IDLE_SECONDS]
//! ready
//! rcvd=N bytes=B secs=FIRST..LAST pps=P
//! ```
//!
//! It stops IDLE_SECONDS (default 1) after the last packet, or after MAX_SECONDS. It spins a
//! CPU while it runs: benchmarks only.

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const BATCH: usize = 64;
/// A UDP counting receiver that polls (benchmarks only: it spins a CPU).
#[derive(Debug, clap::Parser)]
#[command(name = "anode-pollsink", version)]
struct Args {
    /// The address to receive on.
    bind: SocketAddr,
    /// Stop after this many seconds (0..120).
    max_seconds: f64,
    /// Stop this many seconds after the last packet (0..60).
    #[arg(default_value_t = 1.0)]
    idle_seconds: f64,
}

fn main() -> ExitCode {
    let a = <Args as clap::Parser>::parse();
    let (addr, max, idle) = (a.bind, a.max_seconds, a.idle_seconds);
    if !(0.0..=120.0).contains(&max) || !(0.0..=60.0).contains(&idle) {
        eprintln!("anode-pollsink: MAX_SECONDS must be 0..120 and IDLE_SECONDS 0..60");
        return ExitCode::from(2);
    }
    let sock = match UdpSocket::bind(addr) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("anode-pollsink: bind {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let fd = sock.as_raw_fd();
    let size: libc::c_int = 4 << 20;
    // SAFETY: setsockopt reads one c_int from `size`, whose length is passed.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    let mut bufs = vec![[0u8; 2048]; BATCH];
    let mut iov: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain old data; all-zero is valid.
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    let (max, idle) = (Duration::from_secs_f64(max), Duration::from_secs_f64(idle));
    let start = Instant::now();
    let (mut n, mut bytes) = (0u64, 0u64);
    let (mut first, mut last) = (None::<Instant>, start);
    loop {
        // SAFETY: `msgs` holds BATCH valid headers whose iovecs point into `bufs`, alive
        // and unaliased for the call; the kernel writes at most each iovec's length.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                msgs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let now = Instant::now();
        if r > 0 {
            first.get_or_insert(now);
            last = now;
            n += r as u64;
            bytes += msgs
                .iter()
                .take(r as usize)
                .map(|m| u64::from(m.msg_len))
                .sum::<u64>();
        } else {
            std::hint::spin_loop();
        }
        if now - start > max || (n > 0 && now - last > idle) {
            break;
        }
    }
    let secs = first.map_or(0.0, |f| (last - f).as_secs_f64());
    let pps = if secs > 0.0 { n as f64 / secs } else { 0.0 };
    println!("rcvd={n} bytes={bytes} secs={secs:.3} pps={pps:.0}");
    ExitCode::SUCCESS
}
