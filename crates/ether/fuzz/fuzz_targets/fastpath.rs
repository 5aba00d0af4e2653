//! The kernel fast path (`crates/ether/bpf/fastpath.c`, TC hook) on arbitrary frames, run
//! through `BPF_PROG_TEST_RUN` with tables synced from an `IpRouter` (see `common.rs`), and
//! checked against `IpRouter::handle_frame` on the same bytes, arriving on either interface:
//!
//! - the program always runs (the kernel refuses only frames shorter than an Ethernet header
//!   or than the IPv4/IPv6 header their EtherType announces; the router must not forward
//!   those) and returns `TC_ACT_OK` or `TC_ACT_REDIRECT`;
//! - redirected: the router forwards out of the interface whose MAC is the new source MAC,
//!   with identical bytes;
//! - passed on: the frame is unchanged.
//!
//! Input: one Ethernet frame. Frames longer than the kernel takes for a test run (probed at
//! setup: a page minus skb overhead, about 3.7 KB) are skipped.
//!
//! Setup (once per fuzzing thread; libFuzzer calls the target on its main thread only):
//! needs root, and panics at once without it. The thread moves into a new, unnamed network
//! namespace (`unshare(CLONE_NEWNET)`) holding a veth pair, whose ifindexes the program takes
//! as ingress interfaces. Nothing else holds the namespace, so the kernel deletes it, veths
//! and all, when the process ends, however it ends (also on the abort of a finding):
//! nothing is left behind to clean up.
#![no_main]

// The router under test and its frame builders, shared with crates/ether/tests/fastpath.rs.
#[path = "../../tests/support/mod.rs"]
mod common;

use std::cell::{Cell, OnceCell};
use std::fmt::Write as _;
use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use anode_ether::fastpath::{FastPath, FastPathStats, Hook, verdict};
use anode_ip::{IfaceId, Verdict};
use libfuzzer_sys::fuzz_target;

use common::MACS;

/// Longest frame tried when probing what the kernel takes.
const MAX_FRAME: usize = 9000;

struct Setup {
    fp: FastPath,
    /// Ingress ifindexes of router interfaces 0 and 1.
    idx: [u32; 2],
    now: Instant,
    /// Longest frame `BPF_PROG_TEST_RUN` takes.
    max_len: usize,
    /// The program's counters after the last run.
    stats: Cell<FastPathStats>,
}

/// Coverage libFuzzer does not see by itself, the eBPF program's: which of its counters
/// (pass reasons, forwarded v4/v6) a run moved, per ingress interface. libFuzzer takes the
/// bytes of the section `__libfuzzer_extra_counters` as extra coverage counters (and clears
/// them before each input), so inputs reaching a new decision of the program are kept.
#[used]
#[unsafe(link_section = "__libfuzzer_extra_counters")]
static PROGRAM_COVERAGE: [AtomicU8; 32] = [const { AtomicU8::new(0) }; 32];

/// The counters of `s`, in a fixed order.
fn counters(s: &FastPathStats) -> [u64; 14] {
    [
        s.forwarded_v4,
        s.forwarded_v6,
        s.not_ip,
        s.not_for_our_mac,
        s.bad_header,
        s.options_or_fragment,
        s.martian,
        s.punted,
        s.filter,
        s.ttl,
        s.no_route,
        s.too_big,
        s.no_neighbor,
        s.error,
    ]
}

/// Marks the counters the last run on interface `ingress` moved.
fn note_program_coverage(s: &Setup, ingress: usize) {
    let now =
        s.fp.stats()
            .unwrap_or_else(|e| panic!("reading the program's counters: {e}"));
    let before = counters(&s.stats.get());
    for (i, (a, b)) in counters(&now).iter().zip(before.iter()).enumerate() {
        if a != b
            && let Some(c) = PROGRAM_COVERAGE.get(ingress * 16 + i)
        {
            c.store(1, Ordering::Relaxed);
        }
    }
    s.stats.set(now);
}

thread_local! {
    /// Per thread, as the network namespace it lives in is the thread's.
    static SETUP: OnceCell<Setup> = const { OnceCell::new() };
}

fuzz_target!(|data: &[u8]| {
    SETUP.with(|s| check(s.get_or_init(setup), data));
});

fn check(s: &Setup, frame: &[u8]) {
    if frame.len() > s.max_len {
        return;
    }
    for (ingress, &ifindex) in s.idx.iter().enumerate() {
        // A fresh router each time: the program's tables are the fresh router's.
        let mut r = common::router(s.now, true);
        let mut g = frame.to_vec();
        let rv = r.handle_frame(s.now, IfaceId(ingress as u32), &mut g);
        let (v, out) = match s.fp.test_run(frame, ifindex) {
            Ok(x) => x,
            Err(e) if kernel_refuses(frame) => {
                assert!(
                    !matches!(rv, Verdict::Forward { .. }),
                    "a frame too short for a test run ({e}) forwarded by the router: {rv:?} on \
                     interface {ingress}\nframe {}",
                    hex(frame)
                );
                continue;
            }
            Err(e) => panic!(
                "the program failed to run on a {}-byte frame arriving on interface {ingress}: \
                 {e}\nframe {}",
                frame.len(),
                hex(frame)
            ),
        };
        note_program_coverage(s, ingress);
        match v {
            verdict::TC_ACT_REDIRECT => {
                let out_iface = out
                    .get(6..12)
                    .and_then(|m| MACS.iter().position(|x| x[..] == *m));
                let Some(out_iface) = out_iface else {
                    panic!(
                        "redirected with a source MAC not ours; in on interface {ingress}\n\
                         frame {}\nout   {}",
                        hex(frame),
                        hex(&out)
                    );
                };
                match rv {
                    Verdict::Forward { iface, start, len } => {
                        let sent = g.get(start..start.saturating_add(len));
                        assert!(
                            iface == IfaceId(out_iface as u32) && sent == Some(&out[..]),
                            "in on interface {ingress}: the program redirected out of \
                             interface {out_iface}, the router forwards out of {iface:?}\n\
                             frame   {}\nprogram {}\nrouter  {}",
                            hex(frame),
                            hex(&out),
                            hex(sent.unwrap_or(&[]))
                        );
                    }
                    other => panic!(
                        "in on interface {ingress}: the program redirected out of interface \
                         {out_iface}, the router says {other:?}\nframe   {}\nprogram {}",
                        hex(frame),
                        hex(&out)
                    ),
                }
            }
            verdict::TC_ACT_OK => assert!(
                out == frame,
                "in on interface {ingress}: passed on, but changed\nframe {}\nout   {}",
                hex(frame),
                hex(&out)
            ),
            other => panic!(
                "in on interface {ingress}: verdict {other}, neither TC_ACT_OK nor \
                 TC_ACT_REDIRECT\nframe {}",
                hex(frame)
            ),
        }
    }
}

/// Frames `BPF_PROG_TEST_RUN` refuses (EINVAL) for a TC program: shorter than an Ethernet
/// header, or than the IPv4/IPv6 header their EtherType announces.
fn kernel_refuses(f: &[u8]) -> bool {
    match f.get(12..14) {
        None => true,
        Some([0x08, 0x00]) => f.len() < 14 + 20,
        Some([0x86, 0xdd]) => f.len() < 14 + 40,
        Some(_) => false,
    }
}

fn setup() -> Setup {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!(
            "the fastpath fuzz target needs root (a network namespace, a veth pair and a BPF \
             program); run it as root, as CI does"
        );
    }
    // SAFETY: unshare(CLONE_NEWNET) changes only the calling thread's network namespace.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
    // Children start in the calling thread's namespace.
    sh("ip link add afz0 type veth peer name afz1 && ip link set afz0 up && ip link set afz1 up");
    let idx = [ifindex("afz0"), ifindex("afz1")];
    let now = Instant::now();
    let r = common::router(now, true);
    let table = r.fast_table();
    assert_eq!(
        common::router(now, true).fast_table(),
        table,
        "the router is the same each time it is built"
    );
    let mut fp =
        FastPath::load_unattached(Hook::Tc, &idx).unwrap_or_else(|e| panic!("loading: {e}"));
    let rep = fp
        .sync(&table)
        .unwrap_or_else(|e| panic!("syncing the tables: {e}"));
    assert!(rep.notes.is_empty(), "{:?}", rep.notes);
    assert_eq!(rep.filters, 2, "{rep:?}");

    // The longest frame the kernel takes (not IP: any length is a whole frame).
    let runs = |n: usize| {
        let mut f = vec![0u8; n];
        f[12..14].copy_from_slice(&[0x88, 0xb5]);
        fp.test_run(&f, idx[0]).is_ok()
    };
    assert!(runs(14), "BPF_PROG_TEST_RUN refuses a 14-byte frame");
    let (mut lo, mut hi) = (14, MAX_FRAME + 1);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if runs(mid) { lo = mid } else { hi = mid }
    }
    // SAFETY: getpid and gettid have no preconditions.
    let main_thread = unsafe { libc::gettid() == libc::getpid() };
    eprintln!(
        "fastpath fuzz: program loaded on veth ifindexes {idx:?} in a private network \
         namespace (on the main thread: {main_thread}); test runs take frames up to {lo} bytes"
    );
    let stats = Cell::new(fp.stats().unwrap_or_else(|e| panic!("stats: {e}")));
    Setup {
        fp,
        idx,
        now,
        max_len: lo,
        stats,
    }
}

fn sh(cmd: &str) {
    let o = Command::new("sh")
        .args(["-c", cmd])
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn ifindex(name: &str) -> u32 {
    let c = std::ffi::CString::new(name).expect("no NUL");
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert!(i != 0, "no interface {name}");
    i
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}
