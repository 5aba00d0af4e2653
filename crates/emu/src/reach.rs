//! All-pairs reachability kept up to date from the nodes' forwarding changes, at a cost that
//! grows with the changes rather than with n² per routing event.
//!
//! "Every node reaches every other" means: for every destination d, following each node's
//! next hop toward d over links that are up ends at d. The tracker keeps, per destination,
//! whether that holds (`broken[d]` when not) and how many nodes have a route to d at all
//! (`have[d]`, from a bit per (node, destination)). After an event the simulator reports the
//! (node, destination) pairs whose forwarding entry changed ([`Reach::note`]) and link
//! changes ([`Reach::links_changed`]); [`Reach::evaluate`] then re-checks only the
//! destinations touched:
//! - fewer than n-1 nodes with a route: broken, no walk;
//! - reachable before and only some nodes' next hops changed: a path from an unchanged node
//!   either meets no changed node (so it is the path it was, which reached d) or meets one,
//!   so it suffices to walk from each changed node (O(path length) each);
//! - otherwise (broken before, or a link changed): a full check of d, O(n), visiting each
//!   node once with memoised results.
//!
//! Invariant: after [`Reach::evaluate`], `broken[d]` is exactly "some node does not reach d
//! over up links" for every d, given a `hop` function that names the next node over an up
//! link (or none).

/// The next node from `u` toward destination `d` over a link that is up, if any.
pub(crate) trait Hops {
    /// See the trait docs.
    fn hop(&self, u: usize, d: usize) -> Option<usize>;
}

/// The tracker; see the module docs.
#[derive(Debug)]
pub(crate) struct Reach {
    n: usize,
    /// Bit u*n+d: node u has a route to d.
    has: Vec<u64>,
    /// Per destination: nodes other than d with a route to it.
    have: Vec<u32>,
    broken: Vec<bool>,
    broken_count: usize,
    /// (destination, node) pairs changed since the last evaluation.
    changes: Vec<(u32, u32)>,
    /// Destinations that need a full check (links changed, or the start).
    full: Vec<bool>,
    full_list: Vec<u32>,
    /// Full-check memo: `mark[u] == epoch*2` reaches, `epoch*2+1` does not.
    mark: Vec<u64>,
    epoch: u64,
    stack: Vec<usize>,
}

impl Reach {
    /// A tracker for `n` nodes with no routes yet (every destination due for a full check).
    pub(crate) fn new(n: usize) -> Reach {
        let words = (n * n).div_ceil(64);
        Reach {
            n,
            has: vec![0; words],
            have: vec![0; n],
            broken: vec![true; n],
            broken_count: n,
            changes: Vec::new(),
            full: vec![true; n],
            full_list: (0..n as u32).collect(),
            mark: vec![0; n],
            epoch: 0,
            stack: Vec::new(),
        }
    }

    /// Node `u`'s forwarding entry for `d` may have changed; `present` is whether it has one
    /// now.
    pub(crate) fn note(&mut self, u: usize, d: usize, present: bool) {
        if u >= self.n || d >= self.n || u == d {
            return;
        }
        let bit = u * self.n + d;
        let (w, m) = (bit / 64, 1u64 << (bit % 64));
        let Some(word) = self.has.get_mut(w) else {
            return;
        };
        let was = *word & m != 0;
        if was != present {
            *word ^= m;
            if let Some(h) = self.have.get_mut(d) {
                if present {
                    *h += 1;
                } else {
                    *h = h.saturating_sub(1);
                }
            }
        }
        self.changes.push((d as u32, u as u32));
    }

    /// A link went up or down: every destination gets a full check.
    pub(crate) fn links_changed(&mut self) {
        for d in 0..self.n {
            self.mark_full(d);
        }
    }

    fn mark_full(&mut self, d: usize) {
        if let Some(f) = self.full.get_mut(d)
            && !*f
        {
            *f = true;
            self.full_list.push(d as u32);
        }
    }

    fn set_broken(&mut self, d: usize, b: bool) {
        if let Some(x) = self.broken.get_mut(d)
            && *x != b
        {
            *x = b;
            if b {
                self.broken_count += 1;
            } else {
                self.broken_count -= 1;
            }
        }
    }

    /// Brings `broken` up to date with what was noted; returns whether every node reaches
    /// every other.
    pub(crate) fn evaluate(&mut self, net: &dyn Hops) -> bool {
        let mut changes = std::mem::take(&mut self.changes);
        changes.sort_unstable();
        changes.dedup();
        let mut i = 0;
        while let Some(&(d, _)) = changes.get(i) {
            let start = i;
            while changes.get(i).is_some_and(|c| c.0 == d) {
                i += 1;
            }
            let d = d as usize;
            if self.full.get(d).copied().unwrap_or(false) {
                continue; // checked in full below
            }
            let ok = if self.have.get(d).copied().unwrap_or(0) as usize + 1 < self.n {
                false
            } else if self.broken.get(d).copied().unwrap_or(true) {
                self.full_check(net, d)
            } else {
                changes
                    .get(start..i)
                    .unwrap_or(&[])
                    .iter()
                    .all(|c| self.walk_ok(net, c.1 as usize, d))
            };
            self.set_broken(d, !ok);
        }
        changes.clear();
        self.changes = changes;
        let full = std::mem::take(&mut self.full_list);
        for &d in &full {
            let d = d as usize;
            if let Some(f) = self.full.get_mut(d) {
                *f = false;
            }
            let ok = self.have.get(d).copied().unwrap_or(0) as usize + 1 >= self.n
                && self.full_check(net, d);
            self.set_broken(d, !ok);
        }
        self.full_list = full;
        self.full_list.clear();
        self.broken_count == 0
    }

    /// Whether following next hops from `u` reaches `d` within n hops.
    fn walk_ok(&self, net: &dyn Hops, u: usize, d: usize) -> bool {
        let mut at = u;
        for _ in 0..=self.n {
            if at == d {
                return true;
            }
            match net.hop(at, d) {
                Some(next) => at = next,
                None => return false,
            }
        }
        false
    }

    /// Whether every node reaches `d`: each node's chain is followed until it meets `d`, a
    /// node already known either way, or itself (a loop); O(n) lookups in all.
    fn full_check(&mut self, net: &dyn Hops, d: usize) -> bool {
        self.epoch += 1;
        let (good, bad) = (self.epoch * 2, self.epoch * 2 + 1);
        let on_stack = u64::MAX;
        if let Some(m) = self.mark.get_mut(d) {
            *m = good;
        }
        for u in 0..self.n {
            let mut at = u;
            let mut stack = std::mem::take(&mut self.stack);
            stack.clear();
            let result = loop {
                let m = self.mark.get(at).copied().unwrap_or(bad);
                if m == good {
                    break good;
                }
                if m == bad || m == on_stack {
                    break bad;
                }
                if let Some(x) = self.mark.get_mut(at) {
                    *x = on_stack;
                }
                stack.push(at);
                match net.hop(at, d) {
                    Some(next) => at = next,
                    None => break bad,
                }
            };
            for &s in &stack {
                if let Some(x) = self.mark.get_mut(s) {
                    *x = result;
                }
            }
            self.stack = stack;
            if result == bad {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// next[u][d] over a complete set of up links.
    struct Table(Vec<Vec<Option<usize>>>);

    impl Hops for Table {
        fn hop(&self, u: usize, d: usize) -> Option<usize> {
            self.0[u][d]
        }
    }

    impl Table {
        fn has_route(&self, u: usize, d: usize) -> bool {
            self.0[u][d].is_some()
        }
    }

    fn line(n: usize) -> Table {
        // 0 - 1 - ... - n-1: toward a higher index go right, lower go left.
        Table(
            (0..n)
                .map(|u| {
                    (0..n)
                        .map(|d| match d.cmp(&u) {
                            std::cmp::Ordering::Greater => Some(u + 1),
                            std::cmp::Ordering::Less => Some(u - 1),
                            std::cmp::Ordering::Equal => None,
                        })
                        .collect()
                })
                .collect(),
        )
    }

    fn note_all(r: &mut Reach, t: &Table) {
        for u in 0..t.0.len() {
            for d in 0..t.0.len() {
                r.note(u, d, t.has_route(u, d));
            }
        }
    }

    #[test]
    fn tracks_full_tables_loops_and_missing_routes() {
        let mut t = line(6);
        let mut r = Reach::new(6);
        assert!(!r.evaluate(&t), "no routes noted yet");
        note_all(&mut r, &t);
        assert!(r.evaluate(&t));
        // A loop: 2 sends toward 5 back to 1.
        t.0[2][5] = Some(1);
        r.note(2, 5, true);
        assert!(!r.evaluate(&t));
        t.0[2][5] = Some(3);
        r.note(2, 5, true);
        assert!(r.evaluate(&t), "repaired");
        // A missing route.
        t.0[4][0] = None;
        r.note(4, 0, false);
        assert!(!r.evaluate(&t));
        t.0[4][0] = Some(3);
        r.note(4, 0, true);
        assert!(r.evaluate(&t));
        // A link "down" (the hop function stops naming it) needs links_changed.
        t.0[0][5] = None;
        t.0[0][4] = None;
        r.links_changed();
        assert!(!r.evaluate(&t));
    }

    #[test]
    fn agrees_with_a_brute_force_check_on_random_changes() {
        let n = 7;
        let mut t = line(n);
        let mut r = Reach::new(n);
        note_all(&mut r, &t);
        assert!(r.evaluate(&t));
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (u, d, v) = (
                (x % n as u64) as usize,
                ((x >> 8) % n as u64) as usize,
                ((x >> 16) % (n as u64 + 1)) as usize,
            );
            if u == d {
                continue;
            }
            t.0[u][d] = (v < n && v != u).then_some(v);
            r.note(u, d, t.0[u][d].is_some());
            let got = r.evaluate(&t);
            let brute = (0..n).all(|a| {
                (0..n).all(|b| {
                    let mut at = a;
                    for _ in 0..=n {
                        if at == b {
                            return true;
                        }
                        match t.0[at][b] {
                            Some(nx) => at = nx,
                            None => return false,
                        }
                    }
                    false
                })
            });
            assert_eq!(got, brute);
        }
    }
}
