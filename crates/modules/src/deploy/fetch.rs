//! Packages between the nodes of a path: the cache a node serves from, the fetches it makes
//! from the node of the service before it, and what it agrees to serve.
//!
//! Contracts:
//! - The cache holds whole packages by SHA-256, verified on the way in, within a byte budget
//!   (oldest out first); a package never enters it unless its bytes hash to its name.
//! - A fetch asks one node (for one request) for windows of [`WINDOW`] bytes in [`MAX_CHUNK`]-byte
//!   chunks at chunk-aligned offsets; a chunk that is not aligned, has the wrong length or
//!   names another package length is ignored. A window that does not complete within
//!   [`RETRY`] is asked for again from its first missing chunk; after [`MAX_TRIES`] tries
//!   without progress the fetch fails.
//! - A node serves a package only for a request it forwarded while holding that package
//!   (by the request's nonce), for [`SERVE_FOR`] and at most [`SERVE_FACTOR`] times the
//!   package's length (retries included): nobody can make it send packages to an address
//!   that no deploy request of its path named, nor more than a few copies.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anode_wire::NodeAddr;
use anode_wire::deploy::{MAX_CHUNK, Transfer};
use sha2::{Digest, Sha256};

/// Bytes asked for at once.
pub const WINDOW: u32 = 48 * MAX_CHUNK as u32;
/// How long a window may take before it is asked for again.
pub const RETRY: Duration = Duration::from_millis(200);
/// Tries without progress before a fetch fails.
pub const MAX_TRIES: u32 = 6;
/// How long after forwarding a request a node serves its package.
pub const SERVE_FOR: Duration = Duration::from_secs(60);
/// How many times a package's length a node serves for one request.
pub const SERVE_FACTOR: u64 = 4;
/// Requests a node serves for at once.
pub const MAX_SERVING: usize = 1024;

/// Packages kept by hash within a byte budget.
#[derive(Debug)]
pub struct Cache {
    budget: usize,
    used: usize,
    order: VecDeque<[u8; 32]>,
    map: HashMap<[u8; 32], Arc<Vec<u8>>>,
}

impl Cache {
    /// An empty cache of `budget` bytes.
    pub fn new(budget: usize) -> Cache {
        Cache {
            budget,
            used: 0,
            order: VecDeque::new(),
            map: HashMap::new(),
        }
    }

    /// The package named `hash`.
    pub fn get(&self, hash: &[u8; 32]) -> Option<Arc<Vec<u8>>> {
        self.map.get(hash).cloned()
    }

    /// Keeps `bytes` if they hash to `hash` (false otherwise, or if larger than the budget).
    pub fn put(&mut self, hash: [u8; 32], bytes: Arc<Vec<u8>>) -> bool {
        if <[u8; 32]>::from(Sha256::digest(&bytes[..])) != hash || bytes.len() > self.budget {
            return false;
        }
        if self.map.contains_key(&hash) {
            return true;
        }
        while self.used + bytes.len() > self.budget {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(b) = self.map.remove(&old) {
                self.used -= b.len();
            }
        }
        self.used += bytes.len();
        self.order.push_back(hash);
        self.map.insert(hash, bytes);
        true
    }

    /// Bytes held.
    pub fn used(&self) -> usize {
        self.used
    }
}

/// A package being fetched from the node of the service before this one.
#[derive(Debug)]
pub struct Fetch {
    /// The node asked, and the request the fetch is for (its nonce).
    pub from: (NodeAddr, [u8; 16]),
    total: u32,
    data: Vec<u8>,
    got: Vec<bool>,
    missing: usize,
    /// When the current window is asked for again.
    pub deadline: Instant,
    tries: u32,
}

/// What a chunk did to a fetch.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// Nothing (a duplicate or an unusable chunk).
    None,
    /// Stored; more to come.
    Stored,
    /// Stored; the current window is complete: ask for the next one with this message.
    NextWindow(Transfer),
    /// The package is complete.
    Done(Vec<u8>),
}

fn chunks(total: u32) -> usize {
    (total as usize).div_ceil(MAX_CHUNK)
}

impl Fetch {
    /// A fetch of a `total`-byte package from `link`, and the first message to send.
    pub fn start(
        hash: [u8; 32],
        total: u32,
        from: (NodeAddr, [u8; 16]),
        now: Instant,
    ) -> (Fetch, Transfer) {
        let n = chunks(total);
        let f = Fetch {
            from,
            total,
            data: vec![0; total as usize],
            got: vec![false; n],
            missing: n,
            deadline: now + RETRY,
            tries: 1,
        };
        let want = f.want(hash);
        (f, want)
    }

    fn first_missing(&self) -> usize {
        self.got.iter().position(|g| !g).unwrap_or(self.got.len())
    }

    fn want(&self, hash: [u8; 32]) -> Transfer {
        // From the first missing chunk to the end of its window.
        let offset = (self.first_missing() * MAX_CHUNK) as u32;
        let end = (offset / WINDOW + 1).saturating_mul(WINDOW).min(self.total);
        Transfer::Want {
            hash,
            offset,
            max: end.saturating_sub(offset),
        }
    }

    /// Takes a chunk of the package.
    pub fn chunk(
        &mut self,
        hash: [u8; 32],
        (total, offset, data): (u32, u32, &[u8]),
        now: Instant,
    ) -> Progress {
        let at = offset as usize;
        let i = at / MAX_CHUNK;
        let want_len = (self.total as usize).saturating_sub(at).min(MAX_CHUNK);
        if total != self.total || !at.is_multiple_of(MAX_CHUNK) || data.len() != want_len {
            return Progress::None;
        }
        match self.got.get_mut(i) {
            Some(g) if !*g => *g = true,
            _ => return Progress::None,
        }
        if let Some(dst) = self.data.get_mut(at..at + data.len()) {
            dst.copy_from_slice(data);
        }
        self.missing -= 1;
        self.tries = 0;
        if self.missing == 0 {
            return Progress::Done(std::mem::take(&mut self.data));
        }
        // The window ends at a multiple of WINDOW: once its last chunk is in, ask for the
        // next one at once.
        let per_window = WINDOW as usize / MAX_CHUNK;
        if (i + 1).is_multiple_of(per_window) || i + 1 == self.got.len() {
            let w = i / per_window;
            let lo = w * per_window;
            let hi = (lo + per_window).min(self.got.len());
            if self.got.get(lo..hi).is_some_and(|s| s.iter().all(|g| *g)) {
                self.deadline = now + RETRY;
                return Progress::NextWindow(self.want(hash));
            }
        }
        Progress::Stored
    }

    /// The deadline passed: the message to ask again, or `None` if the fetch has failed.
    pub fn retry(&mut self, hash: [u8; 32], now: Instant) -> Option<Transfer> {
        self.tries += 1;
        if self.tries > MAX_TRIES {
            return None;
        }
        self.deadline = now + RETRY;
        Some(self.want(hash))
    }
}

/// The requests this node serves packages for (see the module docs).
#[derive(Debug, Default)]
pub struct Serving {
    map: HashMap<[u8; 16], ([u8; 32], u64, Instant)>,
}

impl Serving {
    /// Serves package `hash` (`len` bytes) for the request `nonce`.
    pub fn allow(&mut self, nonce: [u8; 16], hash: [u8; 32], len: u32, now: Instant) {
        if self.map.len() >= MAX_SERVING {
            self.map.retain(|_, (_, _, until)| *until > now);
            if self.map.len() >= MAX_SERVING {
                return;
            }
        }
        let budget = u64::from(len) * SERVE_FACTOR + u64::from(WINDOW);
        self.map.insert(nonce, (hash, budget, now + SERVE_FOR));
    }

    /// Takes `n` bytes of package `hash` for request `nonce`; false if it is not served.
    pub fn take(&mut self, nonce: &[u8; 16], hash: &[u8; 32], n: u64, now: Instant) -> bool {
        match self.map.get_mut(nonce) {
            Some((h, left, until)) if h == hash && *until > now && *left >= n => {
                *left -= n;
                true
            }
            _ => false,
        }
    }
}

/// The chunks answering `Want { offset, max }` for a package `bytes` long (at most one
/// window, starting at a chunk boundary at or before `offset`).
pub fn serve(hash: [u8; 32], bytes: &[u8], offset: u32, max: u32) -> Vec<Transfer> {
    let total = bytes.len() as u32;
    let start = (offset as usize / MAX_CHUNK) * MAX_CHUNK;
    let end = (offset.saturating_add(max.min(WINDOW)) as usize).min(bytes.len());
    let mut out = Vec::new();
    let mut at = start;
    while at < end {
        let n = (bytes.len() - at).min(MAX_CHUNK);
        if let Some(data) = bytes.get(at..at + n) {
            out.push(Transfer::Chunk {
                hash,
                total,
                offset: at as u32,
                data: data.to_vec(),
            });
        }
        at += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(b: &[u8]) -> [u8; 32] {
        Sha256::digest(b).into()
    }

    #[test]
    fn fetch_reassembles_windows_and_retries() {
        let bytes: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
        let h = hash(&bytes);
        let t0 = Instant::now();
        let from = (anode_wire::addr::v4(198, 18, 0, 1, 1), [0; 16]);
        let (mut f, mut want) = Fetch::start(h, bytes.len() as u32, from, t0);
        let mut windows = 0;
        let done: Vec<u8>;
        // Lose the third chunk of the first window once: the window is retried from it.
        let mut lost = false;
        'outer: loop {
            let Transfer::Want { offset, max, .. } = want else {
                panic!()
            };
            windows += 1;
            let mut next = None;
            for c in serve(h, &bytes, offset, max) {
                let Transfer::Chunk {
                    total,
                    offset,
                    data,
                    ..
                } = c
                else {
                    panic!()
                };
                if offset == 2 * MAX_CHUNK as u32 && !lost {
                    lost = true;
                    continue;
                }
                match f.chunk(h, (total, offset, &data), t0) {
                    Progress::Done(b) => {
                        done = b;
                        break 'outer;
                    }
                    Progress::NextWindow(w) => next = Some(w),
                    _ => {}
                }
            }
            want = match next {
                Some(w) => w,
                None => f.retry(h, t0 + RETRY).unwrap(),
            };
        }
        assert_eq!(done, bytes);
        // 150,000 B in 57,600 B windows: 3 windows, plus one retry of the first.
        assert_eq!(windows, 4);
        let mut c = Cache::new(200_000);
        assert!(c.put(h, Arc::new(bytes.clone())));
        assert!(!c.put([0; 32], Arc::new(bytes)), "a wrong name is refused");
    }

    #[test]
    fn unusable_chunks_are_ignored_and_fetches_give_up() {
        let t0 = Instant::now();
        let from = (anode_wire::addr::v4(198, 18, 0, 1, 1), [0; 16]);
        let (mut f, _) = Fetch::start([1; 32], 3000, from, t0);
        assert_eq!(f.chunk([1; 32], (3000, 5, &[0; 10]), t0), Progress::None);
        assert_eq!(f.chunk([1; 32], (2999, 0, &[0; 1200]), t0), Progress::None);
        assert_eq!(f.chunk([1; 32], (3000, 0, &[0; 100]), t0), Progress::None);
        assert_eq!(
            f.chunk([1; 32], (3000, 0, &[0; 1200]), t0),
            Progress::Stored
        );
        assert_eq!(f.chunk([1; 32], (3000, 0, &[0; 1200]), t0), Progress::None);
        let mut tries = 0;
        while f.retry([1; 32], t0).is_some() {
            tries += 1;
        }
        // The stored chunk was progress: the count of tries starts again.
        assert_eq!(tries, MAX_TRIES);
    }

    #[test]
    fn cache_and_serving_are_bounded() {
        let mut c = Cache::new(2500);
        for i in 0..5u8 {
            let b = vec![i; 1000];
            assert!(c.put(hash(&b), Arc::new(b)));
        }
        assert!(c.used() <= 2500);
        assert!(c.get(&hash(&[4u8; 1000])).is_some());
        assert!(c.get(&hash(&[0u8; 1000])).is_none());
        let mut s = Serving::default();
        let t0 = Instant::now();
        assert!(
            !s.take(&[1; 16], &[2; 32], 1, t0),
            "not a forwarded request"
        );
        s.allow([1; 16], [2; 32], 10_000, t0);
        assert!(!s.take(&[1; 16], &[3; 32], 1, t0), "another package");
        let mut served = 0u64;
        while s.take(&[1; 16], &[2; 32], 1200, t0) {
            served += 1200;
        }
        assert!(served <= 10_000 * SERVE_FACTOR + u64::from(WINDOW));
        s.allow([4; 16], [2; 32], 10_000, t0);
        assert!(!s.take(&[4; 16], &[2; 32], 1, t0 + SERVE_FOR), "too late");
    }
}
