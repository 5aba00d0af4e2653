//! IP prefixes over the distance-vector service, for `anode router`: the local node sends
//! this router's prefix advertisement (`anode_ip::learn::PrefixAd`) to every node it has a
//! route to, takes the advertisements other routers send, and keeps the router's learned
//! routes in step with them and with the node's distance-vector table (see
//! `anode_ip::learn` for how prefixes, metrics and gateways are chosen).
//!
//! Timing: an advertisement goes out every `advertise` interval and at once after the
//! node's routing table changed (so a new neighbor learns the prefixes without waiting);
//! receivers hold it for three intervals plus half a second. The learned routes are
//! recomputed whenever an advertisement's contents change, one expires, or the node's
//! routing table changes, and each change is printed on stderr
//! (`anode router: learned routes: ...`).

use std::time::{Duration, Instant};

use anode_core::Node;
use anode_ip::IpRouter;
use anode_ip::learn::{PREFIX_AD_PORT, PrefixAd, PrefixLearner, Reach};

/// The prefix exchange of one router's node.
pub(super) struct PrefixExchange {
    ad: PrefixAd,
    interval: Duration,
    next_ad: Instant,
    learner: PrefixLearner,
    dirty: bool,
}

impl PrefixExchange {
    /// Advertises `ad` (addresses and prefixes; seq and hold are filled in) every
    /// `interval`.
    pub(super) fn new(mut ad: PrefixAd, interval: Duration, now: Instant) -> Self {
        let hold = interval * 3 + Duration::from_millis(500);
        ad.hold_ms = u32::try_from(hold.as_millis()).unwrap_or(u32::MAX);
        PrefixExchange {
            ad,
            interval,
            next_ad: now,
            learner: PrefixLearner::new(),
            dirty: false,
        }
    }

    /// True if `port` is the advertisement port (the delivery belongs to [`Self::receive`]).
    pub(super) fn is_ad_port(port: u16) -> bool {
        port == PREFIX_AD_PORT
    }

    /// An advertisement delivered from `src`.
    pub(super) fn receive(&mut self, now: Instant, src: anode_wire::NodeAddr, payload: &[u8]) {
        match self.learner.receive(now, src, payload) {
            Ok(changed) => self.dirty |= changed,
            Err(e) => tracing::debug!("prefix advertisement from {src} dropped: {e}"),
        }
    }

    /// The node's routing table changed: advertise now and recompute.
    pub(super) fn routes_changed(&mut self, now: Instant) {
        self.dirty = true;
        self.next_ad = now;
    }

    /// Sends due advertisements, expires old ones and re-syncs the router's learned routes
    /// when anything changed; returns the next deadline.
    pub(super) fn poll(&mut self, now: Instant, node: &mut Node, router: &mut IpRouter) -> Instant {
        if now >= self.next_ad {
            self.ad.seq = self.ad.seq.wrapping_add(1);
            match self.ad.to_bytes() {
                Ok(bytes) => {
                    let me = node.address();
                    let dests: Vec<_> = node
                        .routes()
                        .into_iter()
                        .filter(|r| r.dest != me && r.next_hop.is_some())
                        .filter(|r| r.metric < node.config().routing.infinity)
                        .map(|r| r.dest)
                        .collect();
                    for d in dests {
                        if let Err(e) = node.send_datagram(now, d, PREFIX_AD_PORT, 0, None, &bytes)
                        {
                            tracing::debug!("prefix advertisement to {d} dropped: {e:?}");
                        }
                    }
                }
                Err(e) => tracing::warn!("cannot advertise prefixes: {e}"),
            }
            self.next_ad = now + self.interval;
        }
        if self.learner.expire(now) {
            self.dirty = true;
        }
        if self.dirty {
            self.dirty = false;
            let infinity = node.config().routing.infinity;
            let reach: Vec<Reach> = node
                .routes()
                .into_iter()
                .filter(|r| r.metric < infinity)
                .filter_map(|r| {
                    r.next_hop.map(|nh| Reach {
                        origin: r.dest,
                        metric: u32::from(r.metric),
                        next_hop: nh.addr,
                    })
                })
                .collect();
            if let Some(set) = self.learner.sync(&reach, router) {
                let text: Vec<String> = set.iter().map(|r| r.to_string()).collect();
                eprintln!(
                    "anode router: learned routes: {}",
                    if text.is_empty() {
                        "none".to_string()
                    } else {
                        text.join("; ")
                    }
                );
            }
        }
        [Some(self.next_ad), self.learner.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(self.next_ad)
    }
}
