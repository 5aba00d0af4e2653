//! [`DomainScheduler`]: deficit round robin over per-domain queues.
//!
//! The node queues EE-bound work per domain ([`DomainScheduler::enqueue`]) and, each poll,
//! serves it with [`DomainScheduler::dequeue`] / [`DomainScheduler::complete`]. The cost of an
//! item (CPU ns) is usually known only after it ran, so this is DRR with *post-charging*: a
//! domain at the head of the round is served while its deficit is positive; each completed
//! item subtracts its actual cost (the deficit may go negative: that debt is carried into the
//! next round); a domain whose deficit is not positive goes to the back and, when it comes to
//! the head again, earns `quantum * weight` (once per visit) and is served if that put it in
//! credit.
//!
//! ## Invariants
//! - Over any interval in which domains `i` and `j` stay backlogged, the cost served to each,
//!   divided by its weight, differs by at most `quantum + max_cost` per weight unit, where
//!   `max_cost` is the largest single charge; callers bound that with the maximum run time
//!   between yields (EE fuel per call). Property-tested below.
//! - A domain that empties its queue keeps its debt but loses unused credit (no banking).
//! - Debt is capped at [`MAX_DEBT_QUANTA`] quanta, so `dequeue` always ends quickly even if a
//!   caller charges an absurd cost (fairness then holds only up to that cap).
//! - Queues are bounded (`max_queue` items per domain); `enqueue` hands back what it refused.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::DomainId;

/// The most debt a domain carries, in its quanta: `dequeue` visits a head at most this many
/// times before it is in credit again.
pub const MAX_DEBT_QUANTA: u64 = 1024;

#[derive(Debug)]
struct Queue<T> {
    items: VecDeque<T>,
    deficit: i64,
    weight: u32,
    active: bool,
    /// Items it may queue, if not the scheduler's `max_queue`.
    max: Option<usize>,
}

/// Deficit round robin over per-domain queues of `T`.
#[derive(Debug)]
pub struct DomainScheduler<T> {
    queues: FxHashMap<DomainId, Queue<T>>,
    round: VecDeque<DomainId>,
    quantum: u64,
    max_queue: usize,
    len: usize,
}

impl<T> DomainScheduler<T> {
    /// A scheduler whose domains earn `quantum * weight` cost units per round and queue at
    /// most `max_queue` items each.
    pub fn new(quantum: u64, max_queue: usize) -> Self {
        DomainScheduler {
            queues: FxHashMap::default(),
            round: VecDeque::new(),
            quantum: quantum.max(1),
            max_queue,
            len: 0,
        }
    }

    /// Sets a domain's weight (its policy's CPU share; at least 1).
    pub fn set_weight(&mut self, d: DomainId, weight: u32) {
        self.entry(d).weight = weight.max(1);
    }

    /// Sets how many items `d` may queue (instead of the scheduler's `max_queue`).
    pub fn set_max_queue(&mut self, d: DomainId, max: usize) {
        self.entry(d).max = Some(max);
    }

    fn entry(&mut self, d: DomainId) -> &mut Queue<T> {
        self.queues.entry(d).or_insert_with(|| Queue {
            items: VecDeque::new(),
            deficit: 0,
            weight: 1,
            active: false,
            max: None,
        })
    }

    /// Whether `d` may queue one more item.
    pub fn has_room(&self, d: DomainId) -> bool {
        self.queues
            .get(&d)
            .is_none_or(|q| q.items.len() < q.max.unwrap_or(self.max_queue))
    }

    /// Every queued item: the domains in the order they will be served, each queue in order.
    pub fn items(&self) -> impl Iterator<Item = &T> {
        let mut order: Vec<DomainId> = self.round.iter().copied().collect();
        let mut rest: Vec<DomainId> = self
            .queues
            .keys()
            .filter(|d| !self.round.contains(d))
            .copied()
            .collect();
        rest.sort_unstable();
        order.extend(rest);
        order
            .into_iter()
            .filter_map(|d| self.queues.get(&d))
            .flat_map(|q| q.items.iter())
    }

    /// Queues `item` for domain `d`; gives it back if the domain's queue is full.
    pub fn enqueue(&mut self, d: DomainId, item: T) -> Result<(), T> {
        self.enqueue_as(d, item, |t| t)
    }

    /// Queues `wrap(item)` for `d` if its queue has room, else gives `item` back (one
    /// lookup of `d`).
    pub(crate) fn enqueue_as<U>(
        &mut self,
        d: DomainId,
        item: U,
        wrap: impl FnOnce(U) -> T,
    ) -> Result<(), U> {
        let max = self.max_queue;
        let q = self.entry(d);
        if q.items.len() >= q.max.unwrap_or(max) {
            return Err(item);
        }
        q.items.push_back(wrap(item));
        let newly = !q.active;
        q.active = true;
        self.len += 1;
        if newly {
            self.round.push_back(d);
        }
        Ok(())
    }

    /// The next item to serve and its domain. Call [`DomainScheduler::complete`] with its
    /// cost after running it.
    pub fn dequeue(&mut self) -> Option<(DomainId, T)> {
        // Each pass over a non-positive head adds credit, so this ends: after at most
        // ceil(max_debt / quantum) rounds some head is positive.
        loop {
            let d = *self.round.front()?;
            let quantum = self.quantum;
            let Some(q) = self.queues.get_mut(&d) else {
                self.round.pop_front();
                continue;
            };
            if q.items.is_empty() {
                q.active = false;
                q.deficit = q.deficit.min(0);
                self.round.pop_front();
                continue;
            }
            if q.deficit <= 0 {
                let earn = quantum.saturating_mul(u64::from(q.weight));
                q.deficit = q
                    .deficit
                    .saturating_add(i64::try_from(earn).unwrap_or(i64::MAX));
                if q.deficit <= 0 {
                    // Still in debt: this visit only pays it down.
                    self.round.rotate_left(1);
                    continue;
                }
            }
            let item = q.items.pop_front()?;
            self.len -= 1;
            return Some((d, item));
        }
    }

    /// Charges `cost` to `d` for the item it was just served. The debt carried is capped at
    /// [`MAX_DEBT_QUANTA`] quanta, so a wild charge cannot stall `dequeue`.
    pub fn complete(&mut self, d: DomainId, cost: u64) {
        let quantum = self.quantum;
        let Some(q) = self.queues.get_mut(&d) else {
            return;
        };
        let floor = quantum
            .saturating_mul(u64::from(q.weight))
            .saturating_mul(MAX_DEBT_QUANTA);
        let floor = -i64::try_from(floor).unwrap_or(i64::MAX);
        q.deficit = q
            .deficit
            .saturating_sub(i64::try_from(cost).unwrap_or(i64::MAX))
            .max(floor);
        if q.deficit <= 0 && self.round.front() == Some(&d) && self.round.len() > 1 {
            self.round.rotate_left(1);
        }
    }

    /// Removes a domain and returns its queued items (termination gives everything back).
    pub fn remove(&mut self, d: DomainId) -> Vec<T> {
        self.round.retain(|x| *x != d);
        match self.queues.remove(&d) {
            Some(q) => {
                self.len -= q.items.len();
                q.items.into_iter().collect()
            }
            None => Vec::new(),
        }
    }

    /// Items queued in all domains.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Items queued for `d`.
    pub fn queued(&self, d: DomainId) -> usize {
        self.queues.get(&d).map_or(0, |q| q.items.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn serves_in_rounds_and_respects_queue_bound() {
        let mut s = DomainScheduler::new(10, 2);
        let (a, b) = (DomainId(1), DomainId(2));
        s.enqueue(a, 1).unwrap();
        s.enqueue(a, 2).unwrap();
        assert_eq!(s.enqueue(a, 3), Err(3));
        s.enqueue(b, 9).unwrap();
        let mut order = vec![];
        while let Some((d, x)) = s.dequeue() {
            order.push((d, x));
            s.complete(d, 10);
        }
        assert_eq!(order, vec![(a, 1), (b, 9), (a, 2)]);
        assert!(s.is_empty());
        s.enqueue(b, 5).unwrap();
        assert_eq!(s.remove(b), vec![5]);
        assert_eq!(s.len(), 0);
        assert!(s.dequeue().is_none());
        // An absurd charge is capped: the domain comes back after at most 1024 visits.
        s.enqueue(a, 7).unwrap();
        let (d, _) = s.dequeue().unwrap();
        s.complete(d, u64::MAX);
        s.enqueue(a, 8).unwrap();
        assert_eq!(s.dequeue(), Some((a, 8)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Backlogged domains get cost in proportion to their weights, within one quantum
        /// plus one maximal item per weight unit.
        #[test]
        fn drr_is_fair_between_backlogged_domains(
            weights in proptest::collection::vec(1u32..5, 2..6),
            costs in proptest::collection::vec(1u64..500, 50..400),
        ) {
            let quantum = 300u64;
            let max_cost = 500u64;
            let mut s = DomainScheduler::new(quantum, usize::MAX);
            let n = weights.len();
            for (i, w) in weights.iter().enumerate() {
                s.set_weight(DomainId(i as u32), *w);
                for k in 0..10_000 {
                    s.enqueue(DomainId(i as u32), k).unwrap();
                }
            }
            let mut served = vec![0u64; n];
            for ci in 0..5_000usize {
                let (d, _) = s.dequeue().unwrap();
                // Domain i always costs costs[(i + step) % len] for variety, some cost more.
                let c = costs[ci % costs.len()] * (1 + d.0 as u64 % 2);
                let c = c.min(max_cost);
                served[d.0 as usize] += c;
                s.complete(d, c);
            }
            let norm: Vec<f64> = served.iter().zip(&weights).map(|(s, w)| *s as f64 / *w as f64).collect();
            let lo = norm.iter().cloned().fold(f64::MAX, f64::min);
            let hi = norm.iter().cloned().fold(0.0, f64::max);
            prop_assert!(hi - lo <= (quantum + max_cost) as f64,
                "served {served:?} weights {weights:?}");
        }
    }
}
