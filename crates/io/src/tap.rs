//! Packet capture on the data path: copies of the datagrams the socket receives and sends,
//! handed to another thread (`anode capture` on a running node).
//!
//! Contracts:
//! - With no capture open the data path pays one emptiness check per datagram.
//! - A capture never slows the data path down: copies go to a bounded channel with
//!   `try_send`; when the reader falls behind, packets are dropped from the capture (not
//!   from the node) and counted in [`Capture::dropped`].
//! - Received datagrams are shown as the socket gave them (before the node looks at them,
//!   malformed ones too); sent ones after `sendmmsg` accepted them (after the impairments).
//! - Dropping the [`Capture`] ends it: the data path forgets the tap at its next datagram.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, SystemTime};

use anode_wire::NodeAddr;

/// Most packets waiting between the data path and the capture's reader.
pub const DEFAULT_CAPTURE_QUEUE: usize = 8192;

/// Which way a captured datagram went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Received from the peer.
    In,
    /// Sent to the peer.
    Out,
}

/// One captured datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// When the data path saw it (wall clock).
    pub at: SystemTime,
    /// Received or sent.
    pub dir: Direction,
    /// The other end: the source of a received datagram, the destination of a sent one.
    pub peer: SocketAddr,
    /// The UDP payload (the whole ANEP packet).
    pub data: Vec<u8>,
}

/// What to capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureSpec {
    /// Only datagrams from or to this peer (`None`: all).
    pub peer: Option<NodeAddr>,
    /// Packets that may wait for the reader before more are dropped.
    pub queue: usize,
}

impl Default for CaptureSpec {
    fn default() -> Self {
        CaptureSpec {
            peer: None,
            queue: DEFAULT_CAPTURE_QUEUE,
        }
    }
}

#[derive(Debug, Default)]
struct TapState {
    closed: AtomicBool,
    dropped: AtomicU64,
}

/// The reading end of a capture; see the module docs.
#[derive(Debug)]
pub struct Capture {
    rx: Receiver<Captured>,
    state: Arc<TapState>,
}

impl Capture {
    /// The next captured datagram, waiting at most `wait`; `Disconnected` once the data
    /// path is gone.
    pub fn next(&self, wait: Duration) -> Result<Captured, RecvTimeoutError> {
        self.rx.recv_timeout(wait)
    }

    /// Packets the data path could not hand over because the reader was behind.
    pub fn dropped(&self) -> u64 {
        self.state.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.state.closed.store(true, Ordering::Release);
    }
}

/// The data path's end of one capture.
#[derive(Debug)]
pub(crate) struct Tap {
    peer: Option<NodeAddr>,
    tx: SyncSender<Captured>,
    state: Arc<TapState>,
}

/// Makes a capture: the reader's end and the tap for the data path.
pub(crate) fn open(spec: CaptureSpec) -> (Capture, Tap) {
    let (tx, rx) = std::sync::mpsc::sync_channel(spec.queue.max(1));
    let state = Arc::new(TapState::default());
    (
        Capture {
            rx,
            state: Arc::clone(&state),
        },
        Tap {
            peer: spec.peer,
            tx,
            state,
        },
    )
}

/// The open taps of one data path.
#[derive(Debug, Default)]
pub(crate) struct Taps {
    taps: Vec<Tap>,
}

impl Taps {
    pub(crate) fn add(&mut self, tap: Tap) {
        self.taps.push(tap);
    }

    /// True when no capture is open (the per-datagram check).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.taps.is_empty()
    }

    /// Shows one datagram to every open tap that wants it; forgets closed ones.
    pub(crate) fn show(&mut self, dir: Direction, peer: SocketAddr, data: &[u8]) {
        let at = SystemTime::now();
        let from = NodeAddr::from(peer);
        self.taps.retain(|t| {
            if t.state.closed.load(Ordering::Acquire) {
                return false;
            }
            if t.peer.is_some_and(|p| p != from) {
                return true;
            }
            let c = Captured {
                at,
                dir,
                peer,
                data: data.to_vec(),
            };
            match t.tx.try_send(c) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    t.state.dropped.fetch_add(1, Ordering::Relaxed);
                    true
                }
                Err(TrySendError::Disconnected(_)) => false,
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(p: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], p))
    }

    #[test]
    fn filters_by_peer_counts_overflow_and_forgets_closed_captures() {
        let mut taps = Taps::default();
        let (all, t) = open(CaptureSpec {
            peer: None,
            queue: 2,
        });
        taps.add(t);
        let (one, t) = open(CaptureSpec {
            peer: Some(NodeAddr::from(addr(2))),
            queue: 8,
        });
        taps.add(t);
        taps.show(Direction::In, addr(1), b"a");
        taps.show(Direction::Out, addr(2), b"b");
        taps.show(Direction::In, addr(2), b"c");
        assert_eq!(
            all.dropped(),
            1,
            "the third packet did not fit a queue of 2"
        );
        let got = one.next(Duration::ZERO).unwrap();
        assert_eq!(
            (got.dir, got.peer, &got.data[..]),
            (Direction::Out, addr(2), &b"b"[..])
        );
        assert_eq!(one.next(Duration::ZERO).unwrap().data, b"c");
        assert!(one.next(Duration::ZERO).is_err());
        drop(all);
        taps.show(Direction::In, addr(2), b"d");
        assert_eq!(taps.taps.len(), 1, "the closed capture is forgotten");
        drop(one);
        taps.show(Direction::In, addr(2), b"e");
        assert!(taps.is_empty());
    }
}
