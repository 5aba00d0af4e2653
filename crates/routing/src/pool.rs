//! [`LsaPool`]: one copy of each LSA's link list for all the link-state nodes of a process.
//!
//! Every node of a link-state network stores every LSA, so an emulator running n nodes in
//! one process would hold n copies of each list: n² lists in all (the `world` backbone,
//! 3,815 nodes: 14.5 million). Nodes given the same pool keep one shared copy per
//! (origin, fragment, sequence number, contents) instead; the database entry itself (key,
//! sequence number, expiry, a pointer) stays per node.
//!
//! Contract: interning never changes what a node stores, only where: [`LsaPool::intern`]
//! returns a list equal to the one given. The pool holds weak references, so lists live
//! exactly as long as some node stores them; dead entries are swept when the table has
//! doubled since the last sweep (amortised O(1) per call). A single node (`anode node`)
//! needs no pool.

use std::sync::{Arc, Mutex, Weak};

use anode_wire::NodeAddr;
use anode_wire::addr::NODE_ADDR_LEN;
use rustc_hash::FxHashMap;

/// A shared LSA link list.
pub type LinkList = Arc<Vec<(NodeAddr, u16)>>;

type Key = ([u8; NODE_ADDR_LEN], u8, u32);

#[derive(Debug, Default)]
struct Table {
    map: FxHashMap<Key, Weak<Vec<(NodeAddr, u16)>>>,
    /// Entries after the last sweep (the next sweep comes at twice as many).
    swept_at: usize,
}

/// See the module docs. Cloning gives another handle on the same pool.
#[derive(Debug, Clone, Default)]
pub struct LsaPool(Arc<Mutex<Table>>);

impl LsaPool {
    /// A new, empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// The pool's copy of `links`, the list of `origin`'s fragment at `seq`: the one
    /// already held if it is equal, else `links` itself (remembered for the next node).
    pub fn intern(&self, origin: &NodeAddr, fragment: u8, seq: u32, links: &LinkList) -> LinkList {
        let Ok(mut t) = self.0.lock() else {
            // A poisoned pool only loses sharing, never correctness.
            return Arc::clone(links);
        };
        let key = (origin.to_bytes(), fragment, seq);
        if let Some(held) = t.map.get(&key).and_then(Weak::upgrade)
            && *held == **links
        {
            return held;
        }
        t.map.insert(key, Arc::downgrade(links));
        if t.map.len() >= 2 * t.swept_at.max(1024) {
            t.map.retain(|_, w| w.strong_count() > 0);
            t.swept_at = t.map.len();
        }
        Arc::clone(links)
    }

    /// Lists the pool remembers (live or not yet swept).
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |t| t.map.len())
    }

    /// True if it remembers none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_wire::addr::v4;

    fn list(v: &[(u8, u16)]) -> LinkList {
        Arc::new(v.iter().map(|(i, c)| (v4(198, 18, 0, *i, 1), *c)).collect())
    }

    #[test]
    fn equal_lists_are_shared_and_different_ones_are_not() {
        let pool = LsaPool::new();
        let o = v4(198, 18, 0, 1, 1);
        let a = pool.intern(&o, 0, 7, &list(&[(2, 1), (3, 1)]));
        let b = pool.intern(&o, 0, 7, &list(&[(2, 1), (3, 1)]));
        assert!(Arc::ptr_eq(&a, &b));
        // Same key, other contents (a forged or restarted origin): kept apart, and equal to
        // what was given.
        let c = pool.intern(&o, 0, 7, &list(&[(4, 1)]));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(*c, *list(&[(4, 1)]));
        let d = pool.intern(&o, 0, 8, &list(&[(2, 1), (3, 1)]));
        assert!(
            !Arc::ptr_eq(&d, &c),
            "another sequence number: another entry"
        );
    }

    #[test]
    fn dead_lists_are_swept() {
        let pool = LsaPool::new();
        for seq in 0..5000u32 {
            let l = pool.intern(&v4(198, 18, 0, 1, 1), 0, seq, &list(&[(2, 1)]));
            drop(l);
        }
        assert!(pool.len() < 2100, "{}", pool.len());
        let keep = pool.intern(&v4(198, 18, 0, 9, 1), 0, 1, &list(&[(2, 1)]));
        let again = pool.intern(&v4(198, 18, 0, 9, 1), 0, 1, &list(&[(2, 1)]));
        assert!(Arc::ptr_eq(&keep, &again));
    }
}
