//! The data-path thread of one router: polls every link's receive ring, runs each frame
//! through the [`IpRouter`] in place, and sends forwarded frames in one `sendmmsg` batch per
//! outgoing link per received batch (a V2 run of ready slots or a V3 block), straight from
//! the receive ring (no user-space copy).
//! Frames the router generates (ARP, NDP, ICMP, released packets) and diverted frames'
//! answers go out in batches after each round.
//!
//! Invariant: a batch is given back to the kernel only after every frame in it that was
//! forwarded has been handed to `sendmmsg` (which copies it), so no iovec ever points into
//! memory the kernel may be rewriting.
//!
//! What does not depend on the link type is `Core`, which the AF_XDP forwarder
//! ([`crate::xsk::XskForwarder`]) runs too: the router, the [`Hooks`] (diverted frames, their
//! poll and deadline), the router's timers, the fast-path sync, the [`Waker`], the stop flag,
//! the real-time priority, the generated frames' hand-over and the [`Stopped`] report. So
//! both link types route, divert, wake and report the same way; only receiving and sending
//! differ.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anode_ip::wire::{EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet, checksum};
use anode_ip::{FilterId, IfaceId, IpRouter, Verdict};

use crate::link::{EtherLink, LinkStats};
use crate::ring::RxFrame;
use crate::sys;
use crate::xsk::XskReport;

/// What the data path hands to the rest of anode: diverted frames and a timer.
pub trait Hooks: Send {
    /// A frame an installed filter diverted (`frame[l3_offset..]` is its network-layer
    /// packet, or the ANEP payload for the ANEP EtherType). Answers go out through
    /// `router.send_udp` / `router.send_ether`.
    fn divert(
        &mut self,
        now: Instant,
        router: &mut IpRouter,
        iface: IfaceId,
        filter: FilterId,
        frame: &[u8],
        l3_offset: usize,
    );

    /// Called once per round, and at once after a [`Waker::wake`]; returns the next deadline
    /// the hooks need.
    fn poll(&mut self, _now: Instant, _router: &mut IpRouter) -> Option<Instant> {
        None
    }

    /// Lines for the exit report (what the hooks did), taken when the data path stops.
    fn report(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Hooks that drop every diverted frame.
#[derive(Debug, Default)]
pub struct NoHooks;

impl Hooks for NoHooks {
    fn divert(
        &mut self,
        _: Instant,
        _: &mut IpRouter,
        _: IfaceId,
        _: FilterId,
        _: &[u8],
        _: usize,
    ) {
    }
}

/// Wakes the data-path thread from another thread, so that it runs a round (and
/// [`Hooks::poll`]) at once instead of at its next deadline: for work the hooks take from
/// other threads, such as control requests for the router's node. An eventfd in the loop's
/// poll set; cheap to clone; a wake costs one `write` and wakes the loop once however often
/// it is called before the loop runs.
#[derive(Debug, Clone)]
pub struct Waker(Arc<std::os::fd::OwnedFd>);

impl Waker {
    /// Makes the data path run a round soon.
    pub fn wake(&self) {
        sys::eventfd_notify(&self.0);
    }
}

/// A fast path outside the data-path thread that forwards plain IP from the router's tables
/// (the eBPF program of [`crate::fastpath`]); the data path keeps it in sync.
pub trait FastPathSync: Send {
    /// Makes the fast path's tables equal to `table` (it may have forwarded on older ones
    /// until now). An error means the tables may be stale: the data path then drops the fast
    /// path (which detaches it) and forwards everything itself.
    fn sync(&mut self, table: &anode_ip::FastTable) -> Result<(), String>;
    /// Neighbor entries used since the last call (see [`IpRouter::touch_neighbor`]).
    fn take_used(&mut self) -> Vec<anode_ip::router::NeighKey>;
    /// Lines for the exit report.
    fn report(&self) -> Vec<String>;
}

/// How often the fast path's neighbor use is reported to the router.
const TOUCH_INTERVAL: Duration = Duration::from_secs(1);

/// What a stopped data path gives back.
#[derive(Debug)]
pub struct Stopped {
    /// The router, with its counters and tables.
    pub router: IpRouter,
    /// Per-link (AF_PACKET) or per-socket (AF_XDP) counters, by interface name.
    pub links: LinkReport,
    /// Frames whose transport checksum the driver completed (sender used checksum offload;
    /// AF_PACKET only: AF_XDP gives no such flag).
    pub csum_fixed: u64,
    /// The hooks' exit report ([`Hooks::report`]).
    pub hooks_report: Vec<String>,
    /// The fast path's exit report ([`FastPathSync::report`]; empty without one).
    pub fast_path_report: Vec<String>,
}

impl Stopped {
    /// The AF_XDP sockets' report, if the data path ran over AF_XDP.
    pub fn xsk(&self) -> Option<&XskReport> {
        match &self.links {
            LinkReport::Xsk(x) => Some(x),
            LinkReport::Packet(_) => None,
        }
    }
}

/// The counters of a stopped data path's links, by link type.
#[derive(Debug)]
pub enum LinkReport {
    /// AF_PACKET links ([`DataPath`]), by interface name.
    Packet(Vec<(String, LinkStats)>),
    /// AF_XDP sockets ([`XskForwarder`](crate::xsk::XskForwarder)).
    Xsk(XskReport),
}

impl LinkReport {
    /// One line per link, for reports.
    pub fn lines(&self) -> Vec<String> {
        match self {
            LinkReport::Packet(l) => l.iter().map(|(n, s)| s.line(n)).collect(),
            LinkReport::Xsk(x) => x.lines(),
        }
    }

    /// Every counter of every link, by interface name (for machine-readable reports).
    pub fn entries(&self) -> Vec<(String, Vec<(&'static str, u64)>)> {
        match self {
            LinkReport::Packet(l) => l.iter().map(|(n, s)| (n.clone(), s.entries())).collect(),
            LinkReport::Xsk(x) => x
                .ports
                .iter()
                .map(|(n, s)| (n.clone(), s.entries()))
                .collect(),
        }
    }
}

struct TxBatch {
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in a batch only ever point into memory owned by the data-path
// thread (the ring or frames it holds) and are cleared after each flush.
unsafe impl Send for TxBatch {}

const BATCH: usize = 1024;

impl TxBatch {
    fn new() -> Self {
        TxBatch {
            iov: Vec::with_capacity(BATCH),
            msgs: Vec::with_capacity(BATCH),
        }
    }

    fn push(&mut self, ptr: *const u8, len: usize) {
        self.iov.push(libc::iovec {
            iov_base: ptr as *mut libc::c_void,
            iov_len: len,
        });
    }

    /// Sends everything batched on `fd`, retrying briefly when the socket is full.
    fn flush(&mut self, fd: i32, stats: &mut LinkStats) {
        if self.iov.is_empty() {
            return;
        }
        self.msgs.clear();
        for v in self.iov.iter_mut() {
            // SAFETY: mmsghdr is plain old data; all-zero is valid (no name, no control).
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = v as *mut libc::iovec;
            m.msg_hdr.msg_iovlen = 1;
            self.msgs.push(m);
        }
        let mut sent = 0usize;
        let mut retries = 0;
        while sent < self.msgs.len() {
            let rest = self.msgs.len() - sent;
            // SAFETY: `msgs[sent..]` are initialized mmsghdrs whose iovecs point at frames
            // that stay alive and unmodified until this call returns (ring batch not yet
            // released / owned buffers not yet recycled).
            let n = unsafe {
                libc::sendmmsg(
                    fd,
                    self.msgs.as_mut_ptr().add(sent),
                    rest.min(u32::MAX as usize) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            stats.tx_calls += 1;
            if n > 0 {
                sent += n as usize;
                continue;
            }
            let e = std::io::Error::last_os_error();
            let again = matches!(
                e.raw_os_error(),
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR)
            );
            if again && retries < 8 {
                retries += 1;
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd for the duration of the call.
                unsafe { libc::poll(&mut p, 1, 1) };
                continue;
            }
            // A frame the device refuses (e.g. too big) would block the batch: skip it.
            stats.tx_dropped += 1;
            sent += 1;
        }
        stats.tx_frames += sent as u64;
        self.iov.clear();
        self.msgs.clear();
    }
}

/// Completes the TCP/UDP checksum of a frame whose sender left it to offload
/// (`TP_STATUS_CSUMNOTREADY`): the field holds only the pseudo-header sum.
fn fix_l4_checksum(frame: &mut [u8]) -> bool {
    let Ok(e) = EthernetFrame::new_checked(&*frame) else {
        return false;
    };
    let l3 = e.payload_offset();
    let (proto, l4, src_sum) = match e.ethertype() {
        EtherType::IPV4 => {
            let Ok(p) = Ipv4Packet::new_checked(frame.get(l3..).unwrap_or(&[])) else {
                return false;
            };
            if p.is_fragment() {
                return false;
            }
            let len = p.payload().len();
            let ph = checksum::pseudo_v4(p.src(), p.dst(), p.protocol(), len as u16);
            (
                p.protocol(),
                l3 + p.header_len()..l3 + usize::from(p.total_len()),
                ph,
            )
        }
        EtherType::IPV6 => {
            let Ok(p) = Ipv6Packet::new_checked(frame.get(l3..).unwrap_or(&[])) else {
                return false;
            };
            let Ok(u) = p.upper_layer() else {
                return false;
            };
            if u.fragment {
                return false;
            }
            let end = 40 + usize::from(p.payload_len());
            let len = end.saturating_sub(u.offset);
            let ph = checksum::pseudo_v6(p.src(), p.dst(), u.protocol, len as u32);
            (u.protocol, l3 + u.offset..l3 + end, ph)
        }
        _ => return false,
    };
    let field = match proto {
        6 => 16,
        17 => 6,
        _ => return false,
    };
    let Some(seg) = frame.get_mut(l4) else {
        return false;
    };
    let Some(f) = seg.get_mut(field..field + 2) else {
        return false;
    };
    f.copy_from_slice(&[0, 0]);
    let mut c = checksum::finish(checksum::combine(&[src_sum, checksum::sum(seg)]));
    if c == 0 && proto == 17 {
        c = 0xffff;
    }
    if let Some(f) = seg.get_mut(field..field + 2) {
        f.copy_from_slice(&c.to_be_bytes());
    }
    true
}

/// What every link type's loop shares: the router, the hooks, the timers, the fast path, the
/// waker, the stop flag and the scheduling, and the exit report. A loop ([`DataPath`] over
/// AF_PACKET, [`XskForwarder`](crate::xsk::XskForwarder) over AF_XDP) receives frames its
/// own way, hands each to [`Core::handle_frame`], sends what it says; once per round it
/// calls [`Core::timers`] and [`Core::generated`]; when idle it sleeps in [`Core::sleep`],
/// whose poll set ends with the waker's eventfd ([`Core::wake_pollfd`]).
pub(crate) struct Core {
    pub(crate) router: IpRouter,
    hooks: Box<dyn Hooks>,
    stop: Arc<AtomicBool>,
    rt_priority: Option<i32>,
    fast: Option<Box<dyn FastPathSync>>,
    /// Lines about the fast path (why it was dropped) for the exit report.
    fast_notes: Vec<String>,
    /// The fast path's tables are those of this router generation.
    fast_gen: Option<u64>,
    /// When the fast path's neighbor use is next reported to the router.
    touch_at: Instant,
    /// The eventfd behind [`Core::waker`], once asked for.
    waker: Option<Waker>,
    /// Frames whose transport checksum was completed ([`Stopped::csum_fixed`]).
    pub(crate) csum_fixed: u64,
}

impl Core {
    pub(crate) fn new(router: IpRouter, hooks: Box<dyn Hooks>) -> Self {
        Core {
            router,
            hooks,
            stop: Arc::new(AtomicBool::new(false)),
            rt_priority: None,
            fast: None,
            fast_notes: Vec::new(),
            fast_gen: None,
            touch_at: Instant::now(),
            waker: None,
            csum_fixed: 0,
        }
    }

    pub(crate) fn set_hooks(&mut self, hooks: Box<dyn Hooks>) {
        self.hooks = hooks;
    }

    /// See [`DataPath::waker`].
    pub(crate) fn waker(&mut self) -> std::io::Result<Waker> {
        if let Some(w) = &self.waker {
            return Ok(w.clone());
        }
        let w = Waker(Arc::new(sys::eventfd()?));
        self.waker = Some(w.clone());
        Ok(w)
    }

    /// See [`DataPath::set_realtime`].
    pub(crate) fn set_realtime(&mut self, priority: i32) {
        self.rt_priority = Some(priority.clamp(1, 99));
    }

    pub(crate) fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Whether the loop should go on.
    pub(crate) fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }

    /// Called first on the loop's thread: applies the real-time priority, if any.
    pub(crate) fn enter_thread(&mut self) {
        self.touch_at = Instant::now() + TOUCH_INTERVAL;
        let Some(p) = self.rt_priority else {
            return;
        };
        let param = libc::sched_param { sched_priority: p };
        // SAFETY: sets the scheduling policy of the calling thread with a valid param.
        let r =
            unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
        if r != 0 {
            tracing::warn!(
                "cannot run the data path under SCHED_FIFO {p}: {}",
                std::io::Error::from_raw_os_error(r)
            );
        }
    }

    /// Runs one received frame of interface `iface` through the router, in place; diverted
    /// frames go to the hooks. Returns the range of `buf` to send and where, if forwarded.
    pub(crate) fn handle_frame(
        &mut self,
        now: Instant,
        iface: IfaceId,
        buf: &mut [u8],
    ) -> Option<(IfaceId, std::ops::Range<usize>)> {
        match self.router.handle_frame(now, iface, buf) {
            Verdict::Forward { iface, start, len } => Some((iface, start..start + len)),
            Verdict::Divert { filter, l3_offset } => {
                self.hooks
                    .divert(now, &mut self.router, iface, filter, buf, l3_offset);
                None
            }
            Verdict::Consumed => None,
        }
    }

    /// The round's timers: the router's, the hooks' poll, the fast path's sync. Returns the
    /// hooks' next deadline (for [`Core::sleep`]).
    pub(crate) fn timers(&mut self, now: Instant) -> Option<Instant> {
        if self.router.poll_timeout().is_some_and(|t| t <= now) {
            self.router.handle_timeout(now);
        }
        let deadline = self.hooks.poll(now, &mut self.router);
        self.fast_path_round(now);
        deadline
    }

    /// Takes the frames the router generated (ARP, NDP, ICMP, released packets, the hooks'
    /// answers) into `owned`, up to [`BATCH`]; give them back with [`Core::recycle`].
    pub(crate) fn generated(&mut self, owned: &mut Vec<anode_ip::Transmit>) {
        while owned.len() < BATCH
            && let Some(t) = self.router.poll_transmit()
        {
            owned.push(t);
        }
    }

    /// Gives the buffers of sent generated frames back to the router.
    pub(crate) fn recycle(&mut self, owned: &mut Vec<anode_ip::Transmit>) {
        for t in owned.drain(..) {
            self.router.recycle(t.frame);
        }
    }

    /// Syncs the fast path if the router's tables changed; reports neighbor use when due.
    fn fast_path_round(&mut self, now: Instant) {
        let Some(fp) = self.fast.as_mut() else {
            return;
        };
        let g = self.router.fast_generation();
        if self.fast_gen != Some(g) {
            if let Err(e) = fp.sync(&self.router.fast_table()) {
                tracing::warn!("kernel fast path dropped, forwarding in user space: {e}");
                let mut report = fp.report();
                report.push(format!("fast path dropped after a sync error: {e}"));
                self.fast_notes = report;
                self.fast = None;
                return;
            }
            self.fast_gen = Some(g);
        }
        if now >= self.touch_at {
            self.touch_at = now + TOUCH_INTERVAL;
            for key in fp.take_used() {
                self.router.touch_neighbor(now, key);
            }
        }
    }

    /// The waker's pollfd, to go last in the loop's poll set (after `n` link sockets, `n`
    /// being what [`Core::sleep`] is given).
    pub(crate) fn wake_pollfd(&self) -> Option<libc::pollfd> {
        self.waker.as_ref().map(|w| libc::pollfd {
            fd: w.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
    }

    /// Sleeps in `poll` on `pfds` (the loop's `links` sockets, then [`Core::wake_pollfd`])
    /// until a socket is ready, the waker fires, the router's or the hooks' next deadline,
    /// or `cap_ms`. Drains the waker before returning, so a wake during the next round's
    /// hooks poll is not lost. Returns `poll`'s result (the sockets' `revents` are left for
    /// the caller).
    pub(crate) fn sleep(
        &mut self,
        pfds: &mut [libc::pollfd],
        links: usize,
        hook_deadline: Option<Instant>,
        cap_ms: i32,
    ) -> i32 {
        let deadline = [self.router.poll_timeout(), hook_deadline]
            .into_iter()
            .flatten()
            .min();
        let mut ms = cap_ms;
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            ms = ms.min(left.as_millis().min(i32::MAX as u128) as i32);
            if left > Duration::ZERO && ms == 0 {
                ms = 1;
            }
        }
        // SAFETY: `pfds` is a valid array of `pfds.len()` pollfds for the call.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
        if let (Some(w), Some(p)) = (&self.waker, pfds.get_mut(links)) {
            if p.revents & libc::POLLIN != 0 {
                sys::eventfd_drain(&w.0);
            }
            p.revents = 0;
        }
        r
    }

    /// The exit report, with the loop's link counters.
    pub(crate) fn finish(mut self, links: LinkReport) -> Stopped {
        Stopped {
            links,
            csum_fixed: self.csum_fixed,
            hooks_report: self.hooks.report(),
            fast_path_report: match &self.fast {
                Some(fp) => fp.report(),
                None => std::mem::take(&mut self.fast_notes),
            },
            router: self.router,
        }
    }
}

/// The data path of one router over AF_PACKET links.
pub struct DataPath {
    links: Vec<EtherLink>,
    core: Core,
}

impl std::fmt::Debug for DataPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataPath")
            .field("links", &self.links.len())
            .finish()
    }
}

impl DataPath {
    /// A data path over `links`; link `i` is the router's interface `IfaceId(i)`.
    pub fn new(links: Vec<EtherLink>, router: IpRouter, hooks: Box<dyn Hooks>) -> Self {
        DataPath {
            links,
            core: Core::new(router, hooks),
        }
    }

    /// A [`Waker`] for this data path (the same one on every call).
    pub fn waker(&mut self) -> std::io::Result<Waker> {
        self.core.waker()
    }

    /// Puts `fast` in front of this data path: the loop syncs its tables from the router
    /// whenever [`IpRouter::fast_generation`] changes and reports its neighbor use to the
    /// router every second. The links must then receive by protocol
    /// ([`crate::Receive::Protocols`]), or fast-pathed frames would be forwarded twice.
    pub fn set_fast_path(&mut self, fast: Box<dyn FastPathSync>) {
        self.core.fast = Some(fast);
    }

    /// Runs the data-path thread under `SCHED_FIFO` at `priority` (1..=99), so that under
    /// overload it is not descheduled by the threads feeding its rings (whose softirq work
    /// lands in their own time slices) and the rings do not overflow. Kernel real-time
    /// throttling still leaves other tasks 5 % of the CPU. If the scheduler refuses (no
    /// privilege), the thread runs normally and a warning is logged.
    pub fn set_realtime(&mut self, priority: i32) {
        self.core.set_realtime(priority);
    }

    /// Setting this flag stops the loop within one poll interval (100 ms).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.core.stop_flag()
    }

    /// Runs the loop on a new thread named `anode-router`.
    pub fn spawn(self) -> std::io::Result<JoinHandle<Stopped>> {
        std::thread::Builder::new()
            .name("anode-router".into())
            .spawn(move || self.run())
    }

    /// Reads and clears a pending socket error (`POLLERR`, e.g. `ENETDOWN` after the
    /// interface went down), which would otherwise make every `poll` return at once and the
    /// loop spin. The error is counted; the ring stays mapped and works again once the
    /// interface is up.
    fn clear_errors(&mut self, pfds: &mut [libc::pollfd], sources: &[(usize, usize)]) {
        for (p, &(i, _)) in pfds.iter_mut().zip(sources) {
            let Some(l) = self.links.get_mut(i) else {
                continue;
            };
            if p.revents & libc::POLLERR != 0 {
                let mut err: libc::c_int = 0;
                let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                // SAFETY: SO_ERROR writes one c_int into `err`, whose size `len` gives.
                unsafe {
                    libc::getsockopt(
                        p.fd,
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        (&mut err as *mut libc::c_int).cast(),
                        &mut len,
                    )
                };
                l.stats.sock_errors += 1;
                tracing::debug!(
                    "{}: socket error {}",
                    l.name,
                    std::io::Error::from_raw_os_error(err)
                );
            }
            p.revents = 0;
        }
    }

    /// Sends every batch on its link.
    fn flush(&mut self, batches: &mut [TxBatch]) {
        for (b, l) in batches.iter_mut().zip(self.links.iter_mut()) {
            b.flush(l.raw_fd(), &mut l.stats);
        }
    }

    /// Runs the loop on this thread until the stop flag is set.
    pub fn run(mut self) -> Stopped {
        self.core.enter_thread();
        let n = self.links.len();
        let mut batches: Vec<TxBatch> = (0..n).map(|_| TxBatch::new()).collect();
        let mut frames: Vec<RxFrame> = Vec::with_capacity(BATCH);
        let mut owned: Vec<anode_ip::Transmit> = Vec::with_capacity(BATCH);
        // Every receive socket of every link, as (link, socket) indices.
        let sources: Vec<(usize, usize)> = self
            .links
            .iter()
            .enumerate()
            .flat_map(|(i, l)| (0..l.rx.len()).map(move |k| (i, k)))
            .collect();
        let mut pfds: Vec<libc::pollfd> = sources
            .iter()
            .filter_map(|&(i, k)| self.links.get(i)?.rx.get(k))
            .map(|s| libc::pollfd {
                fd: s.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        pfds.extend(self.core.wake_pollfd());
        while self.core.running() {
            let mut now = Instant::now();
            let mut busy = false;
            for &(i, k) in &sources {
                // Bounded work per socket per round so one busy link cannot starve the others.
                for _ in 0..8 {
                    let Some(link) = self.links.get_mut(i) else {
                        break;
                    };
                    let Some(rx) = link.rx.get_mut(k) else {
                        break;
                    };
                    if !rx.ring.next_batch(&mut frames) {
                        break;
                    }
                    busy = true;
                    link.stats.rx_blocks += 1;
                    link.stats.rx_frames += frames.len() as u64;
                    now = Instant::now();
                    for f in &frames {
                        if f.len < f.wire_len {
                            link.stats.rx_truncated += 1;
                            continue;
                        }
                        // SAFETY: the frame lies inside a ring block user space owns until
                        // `release` below (checked by `next_block`); nothing else aliases it
                        // during this iteration.
                        let buf = unsafe { std::slice::from_raw_parts_mut(f.ptr, f.len) };
                        if f.status & sys::TP_STATUS_CSUMNOTREADY != 0 && fix_l4_checksum(buf) {
                            self.core.csum_fixed += 1;
                        }
                        if let Some((out, range)) =
                            self.core.handle_frame(now, IfaceId(i as u32), buf)
                            && let (Some(b), Some(s)) =
                                (batches.get_mut(out.0 as usize), buf.get(range))
                        {
                            b.push(s.as_ptr(), s.len());
                        }
                    }
                    // Send what this block forwarded before giving the block back.
                    self.flush(&mut batches);
                    if let Some(rx) = self.links.get_mut(i).and_then(|l| l.rx.get_mut(k)) {
                        rx.ring.release();
                    }
                }
            }
            let hook_deadline = self.core.timers(now);
            self.core.generated(&mut owned);
            if !owned.is_empty() {
                busy = true;
                for t in &owned {
                    if let Some(b) = batches.get_mut(t.iface.0 as usize) {
                        b.push(t.frame.as_ptr(), t.frame.len());
                    }
                }
                self.flush(&mut batches);
                self.core.recycle(&mut owned);
            }
            if !busy
                && self
                    .core
                    .sleep(&mut pfds, sources.len(), hook_deadline, 100)
                    > 0
            {
                self.clear_errors(&mut pfds, &sources);
            }
        }
        for l in self.links.iter_mut() {
            l.update_ring_stats();
        }
        let links = self
            .links
            .iter()
            .map(|l| (l.name.clone(), l.stats))
            .collect();
        self.core.finish(LinkReport::Packet(links))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_ip::wire::{EthernetRepr, Ipv4Repr, MacAddr, UdpPacket};

    #[test]
    fn completes_partial_udp_checksum() {
        let (s, d) = ("198.18.1.1".parse().unwrap(), "198.18.2.2".parse().unwrap());
        let mut f = vec![0u8; 14 + 20 + 8 + 5];
        EthernetRepr {
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            dst: MacAddr([2, 0, 0, 0, 0, 2]),
            ethertype: EtherType::IPV4,
        }
        .emit(&mut f)
        .unwrap();
        Ipv4Repr {
            src: s,
            dst: d,
            protocol: 17,
            ttl: 64,
            tos: 0,
            ident: 1,
            dont_frag: true,
            payload_len: 13,
        }
        .emit(&mut f[14..])
        .unwrap();
        f[34..36].copy_from_slice(&1234u16.to_be_bytes());
        f[36..38].copy_from_slice(&5678u16.to_be_bytes());
        f[38..40].copy_from_slice(&13u16.to_be_bytes());
        f[42..].copy_from_slice(b"hello");
        // What an offloading sender leaves: the folded pseudo-header sum.
        let ph = checksum::pseudo_v4(s, d, 17, 13);
        f[40..42].copy_from_slice(&ph.to_be_bytes());
        assert!(fix_l4_checksum(&mut f));
        let u = UdpPacket::new_checked(&f[34..]).unwrap();
        assert!(u.verify_checksum(s.into(), d.into()));
    }
}
