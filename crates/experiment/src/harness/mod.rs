//! What experiments run on: real `anode` processes (nodes and client commands, killed when
//! dropped) and lines of network namespaces (deleted when dropped).

pub mod netns;
pub mod procs;
pub mod traffic;
