//! anode labs: a topology file run as real `anode node` processes, one per Linux network
//! namespace, wired by veth pairs with the links' delay, rate, loss and queue (Mininet-style),
//! and the same topology exported for containerlab or for bare hosts.
//!
//! What a lab is (see `docs/lab.md`):
//! - one namespace per node, named `al<4 hex>-<node>` (at most 15 characters; the prefix is
//!   a hash of the lab name, so two labs and their leftovers never meet);
//! - one veth pair per link, each end `ethK` in its node's namespace, a /30 from
//!   198.18.128.0/17 on it; the node's address (198.18.0.N:3322 unless the topology gives
//!   usable ones) on the namespace's `lo`, bound by its `anode node`, and a /32 route to each
//!   neighbor's address over the shared veth ([`plan`] explains why);
//! - link properties as a `tc netem` qdisc on each veth end, or, where the kernel has no
//!   netem, in each node's UDP driver (`[[link]] impair`) ([`netem`]);
//! - one `anode node --config` per namespace, configs, logs and state under
//!   `$XDG_STATE_HOME/anode/labs/LAB/`, control sockets under
//!   `$XDG_RUNTIME_DIR/anode/lab/NETNS/anode/PORT.sock` (or `/tmp/anode-UID/lab/...`).
//!
//! Layout: [`names`] (lab and namespace names), [`netem`] (link properties as netem options
//! and as `impair`), [`config`] (node config text), [`plan`] (the pure plan and its
//! `ip`/`tc` batches), [`export`] and [`yaml`] (containerlab and bare hosts), [`state`] (the
//! state file), [`apply`] (the `ip`/`tc` commands), [`run`] (up, down, status, exec),
//! [`sys`] (privileges, bounded commands, processes).
//!
//! Contracts: planning and exporting are pure and deterministic; `up` leaves either a
//! converged lab or nothing (or, if even the clean-up fails, an error naming what is left
//! and the state `down` needs to remove it); `down` is idempotent. Everything that changes
//! the system needs CAP_NET_ADMIN and CAP_SYS_ADMIN ([`error::LabError::NotRoot`] otherwise).

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod apply;
pub mod config;
pub mod error;
pub mod export;
pub mod names;
pub mod netem;
pub mod plan;
pub mod run;
pub mod state;
pub mod sys;
pub mod yaml;

pub use error::{LabError, PlanError};
pub use plan::{Impair, LabPlan, Layout};
pub use run::{Dirs, DownReport, ImpairChoice, LabStatus, UpOptions, UpReport};
