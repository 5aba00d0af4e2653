//! The test kit's process helpers (`anode_testkit::process`) bound to the `anode` binary
//! under test.

#![allow(dead_code)] // each test binary uses its own part

use std::net::IpAddr;

pub use anode_testkit::process::*;

/// The `anode` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_anode");

/// The `anode` command under test.
pub fn anode() -> Anode {
    Anode::new(BIN)
}

/// An address as config files and the CLI write it.
pub fn addr(ip: IpAddr, port: u16) -> String {
    std::net::SocketAddr::new(ip, port).to_string()
}
