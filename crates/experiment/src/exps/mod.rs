//! The experiments, one module each (shared pieces in `common`).

mod common;
mod fwd;
mod netserv_mlffr;
mod nodeos_paths;
mod openet_aping;
mod pan_flood;
mod pan_ping;
mod planet_bw;
mod planet_hops;
mod planet_queue;
mod planet_scouts;
mod service;

use crate::{Experiment, Method};

/// Every experiment.
pub fn all() -> Vec<Experiment> {
    vec![
        Experiment {
            name: "pan-ping-latency",
            paper: "PAN",
            figure: "Figs. 3-6",
            method: Method::Netns,
            summary: "capsule ping RTT vs size: middle node absent, kernel forwarding, anode node; per-capsule latency and overhead",
            run: pan_ping::run,
        },
        Experiment {
            name: "pan-flood-throughput",
            paper: "PAN",
            figure: "Figs. 7-8",
            method: Method::Netns,
            summary: "capsules flooded through the middle node by size: kernel, C forwarder, anode fast path, anode capsule EE; capsules/s and Mbit/s",
            run: pan_flood::run,
        },
        Experiment {
            name: "netserv-mlffr",
            paper: "NetServ",
            figure: "Fig. 3",
            method: Method::Netns,
            summary: "maximum loss-free forwarding rate at minimum size: kernel, C forwarder, anode node, anode node + null module",
            run: netserv_mlffr::run,
        },
        Experiment {
            name: "planet-switching",
            paper: "PLANet",
            figure: "Fig. 3, Table I",
            method: Method::Netns,
            summary: "ping/noeval round trip vs hops; per-packet and per-byte switching cost of kernel IP, PLAN routed passively and capsules run at every hop",
            run: planet_hops::switching,
        },
        Experiment {
            name: "planet-eval-overhead",
            paper: "PLANet",
            figure: "Fig. 4",
            method: Method::Netns,
            summary: "PLAN ping/eval (evaluated at every router) vs ping/noeval, by hops: the cost of one evaluation",
            run: planet_hops::eval_overhead,
        },
        Experiment {
            name: "planet-bandwidth-hops",
            paper: "PLANet",
            figure: "Fig. 5",
            method: Method::Netns,
            summary: "bandwidth of maximal packets vs hops: kernel routers, anode fast path, anode capsule code at every router",
            run: planet_bw::run,
        },
        Experiment {
            name: "openet-aping",
            paper: "Openet",
            figure: "Fig. 4, Table 1, Fig. 5",
            method: Method::Netns,
            summary: "active ping through an anode router vs ICMP ping through a kernel router by send interval; first capsule with code load vs cached; delay split",
            run: openet_aping::run,
        },
        Experiment {
            name: "planet-queue-swap",
            paper: "PLANet",
            figure: "Fig. 7",
            method: Method::Emulator,
            summary: "FCFS swapped for a round-robin queue module live at a router under a misbehaving source; bandwidth per phase",
            run: planet_queue::run,
        },
        Experiment {
            name: "planet-route-scouts",
            paper: "PLANet",
            figure: "Fig. 8",
            method: Method::Loopback,
            summary: "route scouts find the uncongested longer path; the flow moves to it while a link is loaded and back",
            run: planet_scouts::run,
        },
        Experiment {
            name: "nodeos-forwarding-paths",
            paper: "NodeOS",
            figure: "Tables I-III",
            method: Method::Netns,
            summary: "minimum-size forwarding rate along each path of anode node: fast path, in -> EE -> out (module), active EE (capsule)",
            run: nodeos_paths::run,
        },
    ]
}
