//! The data-path thread: one loop around the sans-IO node.
//!
//! ```text
//! loop {
//!     stop?            -> return the node
//!     wake flag set?   -> run pending `call` closures (then forget the peer->link cache)
//!     timers due?      -> node.handle_timeout(now)
//!     flush            -> drain poll_transmit through the impairments into sendmmsg batches
//!     events           -> try_send to the bounded channel (full: drop and count)
//!     idle?            -> busy poll (if configured), then
//!                         ppoll([socket, eventfd], next node deadline / impairment release)
//!     recvmmsg batch   -> node.handle_packet(now, link, buf) per datagram
//! }
//! ```
//!
//! Invariants:
//! - The loop never blocks except in `ppoll` (and, when the socket's send buffer is full,
//!   for at most [`SEND_WAIT`] per batch before the rest of the batch is dropped and counted).
//! - After a full receive batch the loop skips `ppoll` and reads again at once, so under load
//!   it costs one `recvmmsg` and one `sendmmsg` per batch, like the C forwarder.
//! - No allocation or payload copy per datagram in steady state: receive buffers come from a
//!   pool, go to the node by value, come back as transmits (the fast path reuses them) and
//!   return to the pool after `sendmmsg`.
//! - Every datagram and every error is counted (see `stats.rs`); no socket error stops the
//!   loop.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use anode_core::{Event, LinkId, Node, Transmit};
use anode_wire::NodeAddr;

use crate::DriverConfig;
use crate::impair::{Impairments, Offer};
use crate::kernel::Kernel;
use crate::stats::{DriverStats, SharedStats};
use crate::sys::{self, EventFd, MsgBatch, UdpSocket};
use crate::tap::{Direction, Tap, Taps};

/// Capacity of every receive buffer: the largest UDP payload, so nothing is truncated.
pub(crate) const BUF_LEN: usize = 65536;
/// Longest wait for send-buffer space per batch.
pub(crate) const SEND_WAIT: Duration = Duration::from_millis(10);
/// Most entries in the peer->link cache (sources that are no peer are cached too).
const PEER_CACHE_MAX: usize = 4096;
/// Shortest `ppoll` timeout, so a deadline that stays in the past cannot spin the loop hot.
const MIN_POLL: Duration = Duration::from_micros(20);

/// A closure run on the data-path thread by `NodeHandle::call`.
pub(crate) type Job = Box<dyn FnOnce(&mut Node, Instant) + Send>;

/// What the handle and the data path share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) stop: AtomicBool,
    /// While set, the data path reads nothing and runs only calls (`NodeHandle::pause`).
    pub(crate) paused: AtomicBool,
    /// Set (before the eventfd is written) when calls are pending.
    pub(crate) wake_flag: AtomicBool,
    pub(crate) wake: EventFd,
    pub(crate) stats: SharedStats,
    /// Captures opened by `NodeHandle::capture`, waiting for the data path to take them.
    pub(crate) new_taps: std::sync::Mutex<Vec<Tap>>,
}

impl Shared {
    /// Asks the data path to look at its call queue and stop flag.
    pub(crate) fn wake(&self) {
        if !self.wake_flag.swap(true, Ordering::AcqRel) {
            self.wake.notify();
        }
    }
}

/// What `kernel::start` needs, kept to attach the kernel fast path again after a pause.
#[derive(Debug, Clone)]
struct KernelStart {
    mode: crate::KernelTransit,
    bind: SocketAddr,
    me: NodeAddr,
    impaired: Vec<NodeAddr>,
}

/// The data path's state; built on its own thread (it holds raw `mmsghdr` pointers).
pub(crate) struct DataPath {
    node: Node,
    sock: UdpSocket,
    shared: Arc<Shared>,
    calls: Receiver<Job>,
    events: SyncSender<Event>,
    batch: usize,
    rx: MsgBatch,
    tx: MsgBatch,
    rx_bufs: Vec<Vec<u8>>,
    pool: Vec<Vec<u8>>,
    pool_max: usize,
    out: VecDeque<Transmit>,
    sending: Vec<Transmit>,
    /// The messages of the batch being sent: (first datagram in `sending`, datagrams).
    groups: Vec<(usize, usize)>,
    /// The datagrams of a coalesced receive after its first, while they are handed over.
    split: Vec<Vec<u8>>,
    /// Send runs of same-size datagrams to one peer as one `UDP_SEGMENT` send.
    gso: bool,
    impair: Impairments,
    peers: HashMap<NodeAddr, Option<LinkId>>,
    last_peer: Option<(SocketAddr, Option<LinkId>)>,
    st: DriverStats,
    taps: Taps,
    kernel: Option<Kernel>,
    /// How to start the kernel fast path again after a pause (it is detached while paused).
    kernel_start: KernelStart,
    /// Busy-poll time (`DriverConfig::busy_poll`; zero: off) and when work last came.
    busy_poll: Duration,
    last_work: Instant,
}

impl std::fmt::Debug for DataPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataPath")
            .field("node", &self.node)
            .field("batch", &self.batch)
            .finish()
    }
}

/// The largest datagram sent in a segmented run to `dst`: what fits a 1500-byte Ethernet
/// frame (1472 bytes of UDP payload over IPv4, 1452 over IPv6). A bigger datagram leaves on
/// its own, as IP fragments: a segmented send of segments over the path MTU can vanish
/// without an error (seen on veth), so the driver does not rely on the kernel refusing it.
fn max_segment(dst: NodeAddr) -> usize {
    if dst.socket_addr().is_ipv4() {
        1472
    } else {
        1452
    }
}

fn new_buf() -> Vec<u8> {
    Vec::with_capacity(BUF_LEN)
}

impl DataPath {
    pub(crate) fn new(
        node: Node,
        sock: UdpSocket,
        shared: Arc<Shared>,
        calls: Receiver<Job>,
        events: SyncSender<Event>,
        cfg: &DriverConfig,
        kernel: Option<Kernel>,
    ) -> Self {
        let batch = cfg.batch;
        let kernel_start = KernelStart {
            mode: cfg.kernel_transit,
            bind: cfg.bind,
            me: node.address(),
            impaired: cfg
                .impairments
                .iter()
                .map(|i| NodeAddr::from(i.peer))
                .collect(),
        };
        DataPath {
            node,
            sock,
            shared,
            calls,
            events,
            batch,
            rx: MsgBatch::new(batch),
            tx: MsgBatch::new(batch),
            rx_bufs: (0..batch).map(|_| new_buf()).collect(),
            pool: (0..batch).map(|_| new_buf()).collect(),
            pool_max: batch * 4 + 64,
            out: VecDeque::with_capacity(batch * 2),
            sending: Vec::with_capacity(batch),
            groups: Vec::with_capacity(batch),
            split: Vec::with_capacity(sys::MAX_SEGS),
            gso: cfg.udp_offload,
            impair: Impairments::new(&cfg.impairments, cfg.seed),
            peers: HashMap::new(),
            last_peer: None,
            st: DriverStats::default(),
            taps: Taps::default(),
            kernel,
            kernel_start,
            busy_poll: cfg.busy_poll,
            last_work: Instant::now(),
        }
    }

    /// Runs until the stop flag is set; returns the node.
    pub(crate) fn run(mut self) -> Node {
        let mut more = false;
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                break;
            }
            if self.shared.wake_flag.swap(false, Ordering::AcqRel) {
                self.run_calls(false);
            }
            if self.shared.paused.load(Ordering::Acquire) {
                self.pause();
                continue;
            }
            let now = Instant::now();
            if self.node.poll_timeout().is_some_and(|t| t <= now) {
                self.node.handle_timeout(now);
            }
            self.flush(now);
            self.forward_events();
            if let Some(k) = self.kernel.as_mut() {
                k.sync(&self.node, !self.taps.is_empty(), now);
                k.count(&mut self.st, now, false);
            }
            self.publish();
            let readable = more || self.idle();
            let now = Instant::now();
            let got = if readable { self.recv_batch(now) } else { 0 };
            if got > 0 {
                self.last_work = now;
            }
            more = readable && got >= self.batch;
        }
        if let Some(k) = self.kernel.as_mut() {
            k.count(&mut self.st, Instant::now(), true);
        }
        self.publish();
        self.node
    }

    /// Paused (`NodeHandle::pause`): sends what is queued, the packets a link impairment
    /// still delays among them (early), detaches the kernel fast path, then only runs calls
    /// (no timers, no reads: what arrives waits in the socket buffer for whoever reads it
    /// next) until resumed or stopped. Resumed, it attaches the kernel fast path again.
    fn pause(&mut self) {
        let now = Instant::now();
        self.flush(now);
        if !self.impair.is_empty() {
            self.impair
                .release(now + Duration::from_secs(86_400), &mut self.out);
            while !self.out.is_empty() {
                self.send_batch();
            }
        }
        if let Some(mut k) = self.kernel.take() {
            k.count(&mut self.st, now, true);
        }
        self.forward_events();
        self.publish();
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                return;
            }
            if self.shared.wake_flag.swap(false, Ordering::AcqRel) {
                self.run_calls(true);
                self.forward_events();
                self.publish();
            }
            if !self.shared.paused.load(Ordering::Acquire) {
                break;
            }
            let _ = sys::poll2(-1, self.shared.wake.raw(), Some(Duration::from_millis(100)));
            self.shared.wake.drain();
        }
        let k = &self.kernel_start;
        match crate::kernel::start(k.mode, k.bind, k.me, k.impaired.clone()) {
            Ok(kernel) => self.kernel = kernel,
            Err(e) => {
                tracing::warn!(error = %e, "anode-io: the kernel fast path did not come back after a pause; forwarding through the socket")
            }
        }
    }

    fn publish(&mut self) {
        self.shared.stats.add(&self.st);
        self.st = DriverStats::default();
    }

    fn count_errno(&mut self, e: &io::Error) -> Option<i32> {
        let code = e.raw_os_error();
        match code {
            Some(libc::EINTR) => self.st.eintr += 1,
            Some(libc::EAGAIN) => self.st.eagain += 1,
            Some(libc::ECONNREFUSED) => self.st.econnrefused += 1,
            Some(libc::ENOBUFS | libc::ENOMEM) => self.st.enobufs += 1,
            _ => {}
        }
        code
    }

    /// Waits in `ppoll` for a datagram, a wake-up or the next deadline. True if the socket is
    /// readable.
    fn idle(&mut self) -> bool {
        let deadline = match (self.node.poll_timeout(), self.impair.next_release()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if !self.busy_poll.is_zero()
            && let Some(r) = self.spin(deadline)
        {
            return r;
        }
        let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()).max(MIN_POLL));
        self.st.polls += 1;
        self.st.syscalls += 1;
        match sys::poll2(self.sock.raw(), self.shared.wake.raw(), timeout) {
            Ok(r) => {
                if r.wake {
                    self.st.syscalls += 1;
                    self.shared.wake.drain();
                }
                r.socket
            }
            Err(e) => {
                if self.count_errno(&e) != Some(libc::EINTR) {
                    tracing::warn!(error = %e, "anode-io: ppoll failed");
                }
                false
            }
        }
    }

    /// Busy polling: polls without blocking until something is ready, `deadline` or the
    /// busy-poll time since the last work passes. `Some(readable)` if something was ready.
    fn spin(&mut self, deadline: Option<Instant>) -> Option<bool> {
        let until = self.last_work + self.busy_poll;
        let until = deadline.map_or(until, |d| d.min(until));
        loop {
            self.st.syscalls += 1;
            if let Ok(r) = sys::poll2(
                self.sock.raw(),
                self.shared.wake.raw(),
                Some(Duration::ZERO),
            ) && (r.socket || r.wake)
            {
                if r.wake {
                    self.st.syscalls += 1;
                    self.shared.wake.drain();
                }
                return Some(r.socket);
            }
            if Instant::now() >= until {
                return None;
            }
            std::hint::spin_loop();
        }
    }

    /// Runs the calls waiting. Outside a pause (`in_pause` false) it stops at the first
    /// call it finds once a pause was asked for and leaves the rest (the wake flag set) for
    /// the pause loop: a pause's calls, and any the pauser sends once they are answered (a
    /// node's hand-over), must run after the pause's flush, or packets they see queued
    /// would also be sent by that flush.
    fn run_calls(&mut self, in_pause: bool) {
        loop {
            if !in_pause && self.shared.paused.load(Ordering::Acquire) {
                self.shared.wake_flag.store(true, Ordering::Release);
                break;
            }
            let Ok(job) = self.calls.try_recv() else {
                break;
            };
            job(&mut self.node, Instant::now());
            self.st.calls += 1;
        }
        // A call may have added or changed links.
        self.peers.clear();
        self.last_peer = None;
        let new = std::mem::take(
            &mut *self
                .shared
                .new_taps
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for t in new {
            self.taps.add(t);
        }
    }

    fn take_buf(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_else(new_buf)
    }

    fn recycle(&mut self, mut b: Vec<u8>) {
        if b.capacity() >= BUF_LEN && self.pool.len() < self.pool_max {
            b.clear();
            self.pool.push(b);
        }
    }

    fn link_of(&mut self, src: SocketAddr) -> Option<LinkId> {
        if let Some((a, l)) = self.last_peer
            && a == src
        {
            return l;
        }
        let na = NodeAddr::from(src);
        let l = match self.peers.get(&na) {
            Some(l) => *l,
            None => {
                let l = self.node.link_by_peer(&na);
                if self.peers.len() >= PEER_CACHE_MAX {
                    self.peers.clear();
                }
                self.peers.insert(na, l);
                l
            }
        };
        self.last_peer = Some((src, l));
        l
    }

    /// One `recvmmsg`; hands every datagram to the node. Returns how many arrived.
    fn recv_batch(&mut self, now: Instant) -> usize {
        self.st.syscalls += 1;
        let n = match self.rx.recv(self.sock.raw(), &mut self.rx_bufs) {
            Ok(n) => n,
            Err(e) => {
                match self.count_errno(&e) {
                    Some(libc::EINTR | libc::EAGAIN | libc::ECONNREFUSED) => {}
                    _ => {
                        self.st.recv_errors += 1;
                        tracing::debug!(error = %e, "anode-io: recvmmsg failed");
                    }
                }
                return 0;
            }
        };
        if n > 0 {
            self.st.rx_batches += 1;
        }
        for i in 0..n {
            let fresh = self.take_buf();
            let Some(slot) = self.rx_bufs.get_mut(i) else {
                self.recycle(fresh);
                break;
            };
            let buf = std::mem::replace(slot, fresh);
            let (src, truncated) = self.rx.received(i);
            if truncated {
                self.st.rx_datagrams += 1;
                self.st.rx_bytes += buf.len() as u64;
                self.st.truncated_drops += 1;
                self.recycle(buf);
                continue;
            }
            match self.rx.received_segment(i).filter(|s| *s < buf.len()) {
                None => self.receive(now, src, buf),
                Some(seg) => self.receive_coalesced(now, src, buf, seg),
            }
        }
        n
    }

    /// Hands one received datagram from `src` to the node.
    fn receive(&mut self, now: Instant, src: Option<SocketAddr>, buf: Vec<u8>) {
        self.st.rx_datagrams += 1;
        self.st.rx_bytes += buf.len() as u64;
        if !self.taps.is_empty()
            && let Some(s) = src
        {
            self.taps.show(Direction::In, s, &buf);
        }
        match src.and_then(|s| self.link_of(s)) {
            Some(link) => self.node.handle_packet(now, link, buf),
            None => {
                self.st.unknown_peer_drops += 1;
                self.recycle(buf);
            }
        }
    }

    /// Splits a coalesced receive (every `seg` bytes one datagram, the last maybe shorter)
    /// and hands each datagram to the node, in order.
    fn receive_coalesced(
        &mut self,
        now: Instant,
        src: Option<SocketAddr>,
        mut buf: Vec<u8>,
        seg: usize,
    ) {
        self.st.rx_coalesced_receives += 1;
        let mut rest = std::mem::take(&mut self.split);
        for part in buf.get(seg..).unwrap_or_default().chunks(seg) {
            // A pooled buffer if there is one; else one just big enough, so a burst of
            // coalesced receives costs their bytes, not 64 KiB per datagram.
            let mut b = self
                .pool
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(part.len()));
            b.extend_from_slice(part);
            rest.push(b);
        }
        buf.truncate(seg);
        self.st.rx_coalesced_datagrams += 1 + rest.len() as u64;
        self.receive(now, src, buf);
        for b in rest.drain(..) {
            self.receive(now, src, b);
        }
        self.split = rest;
    }

    /// Sends everything the node queued (through the impairments).
    fn flush(&mut self, now: Instant) {
        while let Some(t) = self.node.poll_transmit() {
            if self.impair.is_empty() {
                self.out.push_back(t);
                continue;
            }
            match self.impair.offer(now, t) {
                Offer::Pass(t) => self.out.push_back(t),
                Offer::Held => {}
                Offer::Lost(b) => {
                    self.st.impairment_loss_drops += 1;
                    self.recycle(b);
                }
                Offer::QueueFull(b) => {
                    self.st.impairment_queue_drops += 1;
                    self.recycle(b);
                }
            }
        }
        if !self.impair.is_empty() {
            self.impair.release(now, &mut self.out);
        }
        while !self.out.is_empty() {
            self.send_batch();
        }
    }

    /// Takes the next batch from `out` into `sending`, as messages in `groups`: with
    /// segmentation on, a run of datagrams to one peer of one size (the last may be shorter)
    /// is one message.
    fn take_batch(&mut self) {
        self.sending.clear();
        self.groups.clear();
        while self.groups.len() < self.batch {
            let Some(t) = self.out.pop_front() else { break };
            let joins = self.gso
                && self.groups.last().is_some_and(|&(start, len)| {
                    let (Some(first), Some(last)) =
                        (self.sending.get(start), self.sending.get(start + len - 1))
                    else {
                        return false;
                    };
                    let seg = first.buf.len();
                    seg <= max_segment(first.dst)
                        && first.dst == t.dst
                        && last.buf.len() == seg
                        && !t.buf.is_empty()
                        && t.buf.len() <= seg
                        && len < sys::MAX_SEGS
                        && seg * len + t.buf.len() <= sys::MAX_GSO_BYTES
                });
            if joins && let Some(g) = self.groups.last_mut() {
                g.1 += 1;
            } else {
                self.groups.push((self.sending.len(), 1));
            }
            self.sending.push(t);
        }
    }

    /// Points the batch's messages at their datagrams; a message whose peer this socket
    /// cannot reach (an IPv6 peer on an IPv4 socket) is dropped from `groups` and counted.
    fn set_batch(&mut self) {
        let v6 = self.sock.is_v6();
        let mut kept = 0;
        for g in 0..self.groups.len() {
            let Some(&(start, len)) = self.groups.get(g) else {
                break;
            };
            let Some(ts) = self.sending.get(start..start + len) else {
                break;
            };
            let Some(dst) = ts.first().map(|t| t.dst.socket_addr()) else {
                continue;
            };
            let bufs = ts.iter().map(|t| t.buf.as_slice());
            if self.tx.set_send_segments(kept, bufs, dst, v6) {
                if let Some(k) = self.groups.get_mut(kept) {
                    *k = (start, len);
                }
                kept += 1;
            } else {
                self.st.send_errors += len as u64;
            }
        }
        self.groups.truncate(kept);
    }

    /// One batch from `out` through `sendmmsg` (as many calls as partial sends need).
    fn send_batch(&mut self) {
        self.take_batch();
        self.set_batch();
        let n = self.groups.len();
        let (mut off, mut waited, mut refused) = (0, false, 0);
        while off < n {
            self.st.syscalls += 1;
            match self.tx.send(self.sock.raw(), off, n) {
                Ok(0) => {
                    self.st.send_errors += self.datagrams(off, n).0;
                    break;
                }
                Ok(k) => {
                    self.sent(off, off + k);
                    off += k;
                }
                Err(e) => match self.count_errno(&e) {
                    Some(libc::EINTR) => {}
                    Some(libc::EAGAIN) if !waited => {
                        // Send buffer full: give the kernel a moment, once per batch.
                        waited = true;
                        self.st.syscalls += 1;
                        let _ = sys::poll_out(self.sock.raw(), SEND_WAIT);
                    }
                    Some(libc::EAGAIN) => {
                        self.st.send_errors += self.datagrams(off, n).0;
                        break;
                    }
                    // A reported ICMP error is consumed by the failed call: retry a little.
                    Some(libc::ECONNREFUSED) if refused < 3 => refused += 1,
                    // The interface cannot segment (no checksum offload, a tunnel): from now
                    // on one datagram per message; this batch's rest goes back to be resent.
                    Some(libc::EIO) if self.groups.get(off).is_some_and(|g| g.1 > 1) => {
                        tracing::info!(
                            "anode-io: UDP segmentation refused (EIO); sending datagrams one by one"
                        );
                        self.gso = false;
                        let from = self.groups.get(off).map_or(0, |g| g.0);
                        for t in self.sending.drain(from..).rev() {
                            self.out.push_front(t);
                        }
                        break;
                    }
                    _ => {
                        // This message cannot go (e.g. ENOBUFS, ENETUNREACH): skip it.
                        tracing::trace!(error = %e, "anode-io: sendmmsg failed");
                        self.st.send_errors += self.datagrams(off, off + 1).0;
                        off += 1;
                        refused = 0;
                    }
                },
            }
        }
        let mut sending = std::mem::take(&mut self.sending);
        for t in sending.drain(..) {
            self.recycle(t.buf);
        }
        self.sending = sending;
    }

    /// Datagrams and bytes of messages `from..to` of the batch.
    fn datagrams(&self, from: usize, to: usize) -> (u64, u64) {
        let groups = self.groups.get(from..to).unwrap_or_default();
        let n: usize = groups.iter().map(|g| g.1).sum();
        let bytes: usize = groups
            .iter()
            .flat_map(|&(s, l)| self.sending.get(s..s + l).unwrap_or_default())
            .map(|t| t.buf.len())
            .sum();
        (n as u64, bytes as u64)
    }

    /// Counts messages `from..to` of the batch as sent (and shows them to captures).
    fn sent(&mut self, from: usize, to: usize) {
        let (n, bytes) = self.datagrams(from, to);
        self.st.tx_batches += 1;
        self.st.tx_datagrams += n;
        self.st.tx_bytes += bytes;
        for &(_, len) in self.groups.get(from..to).unwrap_or_default() {
            if len > 1 {
                self.st.tx_segmented_sends += 1;
                self.st.tx_segmented_datagrams += len as u64;
            }
        }
        if !self.taps.is_empty() {
            let first = self.groups.get(from).map_or(0, |g| g.0);
            let end = self.groups.get(to - 1).map_or(0, |g| g.0 + g.1);
            for t in self.sending.get(first..end).unwrap_or_default() {
                self.taps.show(Direction::Out, t.dst.socket_addr(), &t.buf);
            }
        }
    }

    /// Moves the node's events to the channel; a full channel drops (and counts) them.
    fn forward_events(&mut self) {
        while let Some(mut e) = self.node.poll_event() {
            if let Event::Delivered(d) = &mut e
                && d.buf.capacity() > d.buf.len() * 2 + 4096
            {
                // Do not hand a 64 KiB receive buffer to an application for a small payload.
                d.buf.shrink_to_fit();
            }
            match self.events.try_send(e) {
                Ok(()) => {}
                Err(TrySendError::Full(e) | TrySendError::Disconnected(e)) => {
                    self.st.event_drops += 1;
                    if let Event::Delivered(d) = e {
                        self.recycle(d.buf);
                    }
                }
            }
        }
    }
}
