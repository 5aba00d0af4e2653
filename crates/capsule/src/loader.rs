//! Demand loading: capsules whose code this node lacks wait here while the code is fetched
//! from a neighbor in chunks (`CodeRequest` / `CodeChunk` / `CodeUnavailable`).
//!
//! Protocol (per code object being fetched):
//! 1. Ask the first source link for `window` bytes from offset 0.
//! 2. Accept chunks only from the link asked, for the hash asked, with a constant `total` no
//!    larger than `max_code_bytes`, and only the chunk that starts where the contiguous prefix
//!    received so far ends (go-back-N: anything else is ignored and fetched again).
//! 3. When the requested window is complete, ask for the next one at once; when all `total`
//!    bytes are there, hand them to the EE, which verifies the SHA-256 before compiling.
//! 4. A deadline (`base_timeout`, doubling per try without progress) re-asks from the current
//!    offset, rotating through the source links; after `max_tries` tries without progress, or
//!    when every source said `CodeUnavailable`, the fetch fails and its parked capsules are
//!    dropped and counted. Nothing waits forever.
//!
//! Bounds: at most `max_fetches` fetches at once, `max_parked_per_code` capsules waiting per
//! code object and `max_parked` in all; capsules beyond are dropped and counted.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anode_core::{DropReason, EePacket, LinkId};

use crate::CodeHash;
use crate::cache::CodeMap;

/// Bounds and timers of demand loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderConfig {
    /// Capsules waiting for one code object.
    pub max_parked_per_code: usize,
    /// Capsules waiting in all.
    pub max_parked: usize,
    /// Code objects being fetched at once.
    pub max_fetches: usize,
    /// First retry timeout; doubles per try without progress.
    pub base_timeout: Duration,
    /// Tries (the first request included) before giving up.
    pub max_tries: u32,
    /// Bytes asked for per request.
    pub window: u32,
    /// Largest code object accepted.
    pub max_code_bytes: u32,
}

impl Default for LoaderConfig {
    fn default() -> Self {
        LoaderConfig {
            max_parked_per_code: 32,
            max_parked: 256,
            max_fetches: 16,
            base_timeout: Duration::from_millis(200),
            max_tries: 4,
            window: 32 * 1024,
            max_code_bytes: 1 << 20,
        }
    }
}

/// A capsule waiting for its code.
#[derive(Debug)]
pub(crate) struct Parked {
    pub pkt: EePacket,
}

#[derive(Debug)]
struct Fetch {
    parked: VecDeque<Parked>,
    sources: Vec<LinkId>,
    /// Index of the source being asked.
    cur: usize,
    /// Sources that answered `CodeUnavailable`.
    refused: Vec<LinkId>,
    tries: u32,
    deadline: Instant,
    total: Option<u32>,
    data: Vec<u8>,
    window_end: u32,
    started: Instant,
}

/// What the EE must do after a loader step.
#[derive(Debug)]
pub(crate) enum Step {
    /// Nothing.
    None,
    /// Send `CodeRequest { hash, offset, max }` on `link`.
    Request {
        link: LinkId,
        hash: CodeHash,
        offset: u32,
        max: u32,
    },
    /// All bytes are there: verify, compile, run `parked`.
    Complete {
        hash: CodeHash,
        bytes: Vec<u8>,
        parked: VecDeque<Parked>,
        started: Instant,
    },
    /// The fetch failed: drop and count `parked` under `reason`.
    Failed {
        hash: CodeHash,
        reason: DropReason,
        parked: VecDeque<Parked>,
    },
}

/// Outcome of [`Loader::park`].
#[derive(Debug)]
pub(crate) enum Park {
    /// Parked behind a fetch already running.
    Waiting,
    /// Parked; a new fetch must send this request.
    Started(Step),
    /// Not parked (bound reached or no source): drop it with this reason.
    Refused(DropReason),
}

/// The demand loader.
#[derive(Debug)]
pub(crate) struct Loader {
    cfg: LoaderConfig,
    fetches: CodeMap<Fetch>,
    parked: usize,
}

impl Loader {
    /// Whether `h` is being fetched (so it is in no local cache).
    #[inline]
    pub fn is_fetching(&self, h: &CodeHash) -> bool {
        self.fetches.contains_key(h)
    }

    pub fn new(cfg: LoaderConfig) -> Self {
        Loader {
            cfg,
            fetches: CodeMap::default(),
            parked: 0,
        }
    }

    /// Capsules waiting in all.
    pub fn parked(&self) -> usize {
        self.parked
    }

    /// The capsules waiting for code, in arrival order per code object.
    pub fn parked_packets(&self) -> impl Iterator<Item = &EePacket> {
        self.fetches
            .values()
            .flat_map(|f| f.parked.iter().map(|p| &p.pkt))
    }

    /// Code objects being fetched.
    pub fn fetching(&self) -> Vec<CodeHash> {
        self.fetches.keys().copied().collect()
    }

    /// Parks `pkt` (whose code is `hash`) and starts a fetch from `sources` if none runs.
    pub fn park(&mut self, now: Instant, hash: CodeHash, p: Parked, sources: Vec<LinkId>) -> Park {
        if self.parked >= self.cfg.max_parked {
            return Park::Refused(DropReason::ParkFull);
        }
        if let Some(f) = self.fetches.get_mut(&hash) {
            if f.parked.len() >= self.cfg.max_parked_per_code {
                return Park::Refused(DropReason::ParkFull);
            }
            for s in sources {
                if !f.sources.contains(&s) {
                    f.sources.push(s);
                }
            }
            f.parked.push_back(p);
            self.parked += 1;
            return Park::Waiting;
        }
        let Some(&first) = sources.first() else {
            return Park::Refused(DropReason::NoCodeSource);
        };
        if self.fetches.len() >= self.cfg.max_fetches {
            return Park::Refused(DropReason::ParkFull);
        }
        let window_end = self.cfg.window.min(self.cfg.max_code_bytes);
        let mut parked = VecDeque::new();
        parked.push_back(p);
        self.parked += 1;
        self.fetches.insert(
            hash,
            Fetch {
                parked,
                sources,
                cur: 0,
                refused: Vec::new(),
                tries: 1,
                deadline: now + self.cfg.base_timeout,
                total: None,
                data: Vec::new(),
                window_end,
                started: now,
            },
        );
        Park::Started(Step::Request {
            link: first,
            hash,
            offset: 0,
            max: window_end,
        })
    }

    fn finish(&mut self, hash: &CodeHash) -> Option<Fetch> {
        let f = self.fetches.remove(hash)?;
        self.parked -= f.parked.len();
        Some(f)
    }

    /// A chunk arrived on `link`.
    pub fn on_chunk(
        &mut self,
        now: Instant,
        link: LinkId,
        hash: CodeHash,
        total: u32,
        offset: u32,
        data: &[u8],
    ) -> Step {
        let cfg = self.cfg;
        let Some(f) = self.fetches.get_mut(&hash) else {
            return Step::None;
        };
        if f.sources.get(f.cur) != Some(&link) {
            return Step::None;
        }
        if total > cfg.max_code_bytes {
            return self.fail(&hash, DropReason::CodeTooBig);
        }
        if f.total.is_some_and(|t| t != total) {
            return Step::None;
        }
        f.total = Some(total);
        if offset as usize != f.data.len() || data.is_empty() && total != 0 {
            return Step::None;
        }
        f.data.extend_from_slice(data);
        f.tries = 1;
        f.deadline = now + cfg.base_timeout;
        let have = f.data.len() as u32;
        if have >= total {
            let Some(f) = self.finish(&hash) else {
                return Step::None;
            };
            return Step::Complete {
                hash,
                bytes: f.data,
                parked: f.parked,
                started: f.started,
            };
        }
        if have >= f.window_end {
            f.window_end = have.saturating_add(cfg.window).min(total);
            return Step::Request {
                link,
                hash,
                offset: have,
                max: f.window_end - have,
            };
        }
        Step::None
    }

    /// `link` says it does not hold `hash`.
    pub fn on_unavailable(&mut self, now: Instant, link: LinkId, hash: CodeHash) -> Step {
        let Some(f) = self.fetches.get_mut(&hash) else {
            return Step::None;
        };
        if f.sources.get(f.cur) != Some(&link) {
            return Step::None;
        }
        if !f.refused.contains(&link) {
            f.refused.push(link);
        }
        if f.sources.iter().all(|s| f.refused.contains(s)) {
            return self.fail(&hash, DropReason::CodeUnavailable);
        }
        // Move on to a source that has not refused, at once.
        f.cur = (f.cur + 1) % f.sources.len();
        while f.refused.contains(f.sources.get(f.cur).unwrap_or(&link)) {
            f.cur = (f.cur + 1) % f.sources.len();
        }
        f.deadline = now + self.cfg.base_timeout;
        let have = f.data.len() as u32;
        Step::Request {
            link: f.sources.get(f.cur).copied().unwrap_or(link),
            hash,
            offset: have,
            max: f.window_end.saturating_sub(have).max(1),
        }
    }

    fn fail(&mut self, hash: &CodeHash, reason: DropReason) -> Step {
        match self.finish(hash) {
            Some(f) => Step::Failed {
                hash: *hash,
                reason,
                parked: f.parked,
            },
            None => Step::None,
        }
    }

    /// The earliest retry deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.fetches.values().map(|f| f.deadline).min()
    }

    /// Retries or fails every fetch whose deadline passed.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Step> {
        let due: Vec<CodeHash> = self
            .fetches
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(h, _)| *h)
            .collect();
        let mut out = Vec::new();
        for h in due {
            let cfg = self.cfg;
            let Some(f) = self.fetches.get_mut(&h) else {
                continue;
            };
            if f.tries >= cfg.max_tries {
                out.push(self.fail(&h, DropReason::LoadTimeout));
                continue;
            }
            f.tries += 1;
            f.cur = (f.cur + 1) % f.sources.len().max(1);
            f.deadline = now + cfg.base_timeout * 2u32.saturating_pow(f.tries - 1);
            let have = f.data.len() as u32;
            if let Some(&link) = f.sources.get(f.cur) {
                out.push(Step::Request {
                    link,
                    hash: h,
                    offset: have,
                    max: f.window_end.saturating_sub(have).max(1),
                });
            }
        }
        out
    }
}
