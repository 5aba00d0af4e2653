//! # anode guest SDK (capsule ABI v1)
//!
//! Safe wrappers over the host imports a capsule code object may call (module `"anode"`, see
//! `crates/capsule/ABI.md`). A code object is a `cdylib` for `wasm32-unknown-unknown` that
//! defines its per-capsule function and exports it with [`export_accept!`]:
//!
//! ```ignore
//! #![no_std]
//! use anode_sdk::{Capsule, Verdict, Why};
//! fn accept(cap: &mut Capsule, why: Why) -> Verdict { Verdict::Forward }
//! anode_sdk::export_accept!(accept);
//! ```
//!
//! Contracts: every host call is bounds-checked by the host; errors come back as [`Error`]
//! values, never as traps. The capsule handle is only valid during `accept`; once the capsule
//! was forwarded or delivered it is gone and further capsule calls return
//! [`Error::NoCapsule`]. No allocator is needed: all buffers are caller-provided.

#![no_std]

pub mod sys;

/// Length of a node address on the wire (IPv6 or IPv4-mapped address + port).
pub const ADDR_LEN: usize = 18;
/// Length of a code object name (SHA-256).
pub const HASH_LEN: usize = 32;

/// A node address in wire format.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Addr(pub [u8; ADDR_LEN]);

/// A code object name.
pub type CodeHash = [u8; HASH_LEN];

/// An error the host returned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Error {
    /// No such entry (soft state key, route, routing function).
    NotFound,
    /// A range outside the payload or the guest memory.
    Bounds,
    /// The capsule was already forwarded or delivered, or there is none (init/finalize).
    NoCapsule,
    /// Not enough resource bound.
    Rb,
    /// No route to the destination.
    NoRoute,
    /// Not allowed (unregistered port, foreign code, not a neighbor).
    Denied,
    /// Too big.
    TooBig,
    /// Soft-state budget exhausted.
    Budget,
    /// The node refused the packet (queue full, link down).
    Refused,
    /// The per-capsule action limit is reached.
    Limit,
    /// A code this SDK does not know.
    Other(i32),
}

impl Error {
    fn from_code(c: i32) -> Error {
        match c {
            -1 => Error::NotFound,
            -2 => Error::Bounds,
            -3 => Error::NoCapsule,
            -4 => Error::Rb,
            -5 => Error::NoRoute,
            -6 => Error::Denied,
            -7 => Error::TooBig,
            -8 => Error::Budget,
            -9 => Error::Refused,
            -10 => Error::Limit,
            o => Error::Other(o),
        }
    }
}

fn check(r: i32) -> Result<usize, Error> {
    if r < 0 {
        Err(Error::from_code(r))
    } else {
        Ok(r as usize)
    }
}

fn check64(r: i64) -> Result<i64, Error> {
    if r < 0 {
        Err(Error::from_code(r as i32))
    } else {
        Ok(r)
    }
}

/// Why the node runs the capsule here.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Why {
    /// This node is the capsule's destination.
    Destination,
    /// The capsule asks for evaluation at every hop and passes through.
    EveryHop,
    /// The capsule asks the EE to route it.
    Route,
    /// A local application injected it here.
    Local,
}

impl Why {
    /// From the ABI code.
    pub fn from_code(c: i32) -> Why {
        match c {
            0 => Why::Destination,
            2 => Why::Route,
            3 => Why::Local,
            _ => Why::EveryHop,
        }
    }
}

/// What the host does with the capsule after `accept` returns (if it still holds it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verdict {
    /// Nothing more: the capsule was forwarded or delivered, or is silently consumed.
    Done = 0,
    /// Forward it toward its destination (spends one unit of resource bound).
    Forward = 1,
    /// Drop it (the node counts it as `guest_drop`).
    Drop = 2,
}

/// The capsule's header fields as the host reports them (`cap_info`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Info {
    /// Resource bound left.
    pub rb: u16,
    /// Transit flags.
    pub transit_flags: u8,
    /// Capsule header flags.
    pub capsule_flags: u8,
    /// Flow id.
    pub flow: u64,
    /// Originating node.
    pub src: Addr,
    /// Destination node.
    pub dst: Addr,
    /// Previous hop.
    pub prev_hop: Addr,
    /// The code object the capsule names.
    pub code: CodeHash,
}

/// Size of the `cap_info` record.
pub const INFO_LEN: usize = 104;

fn addr_at(b: &[u8; INFO_LEN], at: usize) -> Addr {
    let mut a = [0u8; ADDR_LEN];
    a.copy_from_slice(&b[at..at + ADDR_LEN]);
    Addr(a)
}

/// The capsule being evaluated. Only [`export_accept!`] creates one.
#[derive(Debug)]
pub struct Capsule {
    _private: (),
}

impl Capsule {
    #[doc(hidden)]
    pub fn __new() -> Capsule {
        Capsule { _private: () }
    }

    /// Payload length.
    pub fn len(&self) -> usize {
        check(unsafe { sys::cap_len() }).unwrap_or(0)
    }

    /// True if the payload is empty (or the capsule is gone).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Header fields.
    pub fn info(&self) -> Result<Info, Error> {
        let mut b = [0u8; INFO_LEN];
        check(unsafe { sys::cap_info(b.as_mut_ptr()) })?;
        let mut code = [0u8; HASH_LEN];
        code.copy_from_slice(&b[72..104]);
        let mut flow = [0u8; 8];
        flow.copy_from_slice(&b[8..16]);
        Ok(Info {
            rb: u16::from_le_bytes([b[0], b[1]]),
            transit_flags: b[2],
            capsule_flags: b[3],
            flow: u64::from_le_bytes(flow),
            src: addr_at(&b, 16),
            dst: addr_at(&b, 34),
            prev_hop: addr_at(&b, 52),
            code,
        })
    }

    /// Copies payload bytes from `off` into `buf`; returns how many were copied.
    pub fn read(&self, off: usize, buf: &mut [u8]) -> Result<usize, Error> {
        check(unsafe { sys::cap_read(off as i32, buf.as_mut_ptr(), buf.len() as i32) })
    }

    /// Overwrites payload bytes at `off` (must lie within the current length).
    pub fn write(&mut self, off: usize, data: &[u8]) -> Result<(), Error> {
        check(unsafe { sys::cap_write(off as i32, data.as_ptr(), data.len() as i32) }).map(|_| ())
    }

    /// Sets the payload length (new bytes are zero).
    pub fn resize(&mut self, len: usize) -> Result<(), Error> {
        check(unsafe { sys::cap_resize(len as i32) }).map(|_| ())
    }

    /// Appends bytes to the payload.
    pub fn append(&mut self, data: &[u8]) -> Result<(), Error> {
        let at = self.len();
        self.resize(at + data.len())?;
        self.write(at, data)
    }

    /// Changes the destination.
    pub fn set_dst(&mut self, dst: &Addr) -> Result<(), Error> {
        check(unsafe { sys::cap_set_dst(dst.0.as_ptr()) }).map(|_| ())
    }

    /// Changes the transit flags (only evaluate-every-hop and EE-route may be set).
    pub fn set_transit_flags(&mut self, flags: u8) -> Result<(), Error> {
        check(unsafe { sys::cap_set_transit_flags(i32::from(flags)) }).map(|_| ())
    }

    /// Forwards toward the destination now (spends one unit of resource bound).
    pub fn forward(&mut self) -> Result<(), Error> {
        check(unsafe { sys::forward() }).map(|_| ())
    }

    /// Forwards toward the destination by the next hop the node's routing function `name`
    /// chooses for flow `flow` (spends one unit of resource bound). [`Error::NotFound`]: no
    /// routing function of that name; [`Error::NoRoute`]: it has no route. On either the
    /// capsule stays here.
    pub fn forward_by(&mut self, name: &[u8], flow: u64) -> Result<(), Error> {
        check(unsafe { sys::forward_by(name.as_ptr(), name.len() as i32, flow as i64) }).map(|_| ())
    }

    /// Forwards to the given neighbor.
    pub fn forward_via(&mut self, hop: &Addr) -> Result<(), Error> {
        check(unsafe { sys::forward_via(hop.0.as_ptr()) }).map(|_| ())
    }

    /// Sends a copy to the given neighbor; the capsule stays here.
    pub fn copy_via(&mut self, hop: &Addr) -> Result<(), Error> {
        check(unsafe { sys::copy_via(hop.0.as_ptr()) }).map(|_| ())
    }

    /// Asks this node to move this capsule's flow (its source, flow id and this code object)
    /// onto the fast path for `lifetime_ms` (1 to 600,000): later capsules of the flow
    /// passing through are forwarded without running this code (NodeOS cut-through channel;
    /// asking again refreshes it). Not at the capsule's destination ([`Error::Denied`]); the
    /// node may refuse it by policy (counted there, not reported here). The capsule itself
    /// still needs a verdict.
    pub fn cut_through(&mut self, lifetime_ms: u32) -> Result<(), Error> {
        let ms = i32::try_from(lifetime_ms).unwrap_or(i32::MAX);
        check(unsafe { sys::cut_through(ms) }).map(|_| ())
    }

    /// Delivers the payload to the local application port `port` (consumes the capsule).
    pub fn deliver(&mut self, port: u16) -> Result<(), Error> {
        check(unsafe { sys::deliver(i32::from(port)) }).map(|_| ())
    }

    /// Sends a new capsule to `dst` running `code` (`None`: this code object) carrying
    /// `payload`; it takes `rb` units of this capsule's resource bound.
    pub fn send(
        &mut self,
        dst: &Addr,
        code: Option<&CodeHash>,
        rb: u16,
        flow: u64,
        payload: &[u8],
    ) -> Result<(), Error> {
        let cp = code.map_or(core::ptr::null(), |c| c.as_ptr());
        check(unsafe {
            sys::send(
                dst.0.as_ptr(),
                cp,
                i32::from(rb),
                flow as i64,
                payload.as_ptr(),
                payload.len() as i32,
            )
        })
        .map(|_| ())
    }
}

/// This node's address.
pub fn node_addr() -> Addr {
    let mut a = [0u8; ADDR_LEN];
    let _ = unsafe { sys::node_addr(a.as_mut_ptr()) };
    Addr(a)
}

/// Nanoseconds since the node's EE epoch (monotonic; only comparable on the same node).
pub fn now_ns() -> u64 {
    check64(unsafe { sys::now_ns() }).unwrap_or(0) as u64
}

/// Up neighbors: fills `out`, returns how many there are in total.
pub fn neighbors(out: &mut [Addr]) -> usize {
    check(unsafe { sys::neighbors(out.as_mut_ptr().cast::<u8>(), out.len() as i32) }).unwrap_or(0)
}

/// The next hop toward `dst` and the route's metric.
pub fn route(dst: &Addr) -> Result<(Addr, u16), Error> {
    let mut hop = [0u8; ADDR_LEN];
    let m = check(unsafe { sys::route(dst.0.as_ptr(), hop.as_mut_ptr()) })?;
    Ok((Addr(hop), m as u16))
}

/// Logs a message as a node event.
pub fn log(msg: &str) {
    let _ = unsafe { sys::log(msg.as_ptr(), msg.len() as i32) };
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    let _ = unsafe { sys::sha256(data.as_ptr(), data.len() as i32, out.as_mut_ptr()) };
    out
}

/// Internet checksum of `data`.
pub fn checksum(data: &[u8]) -> u16 {
    check(unsafe { sys::checksum(data.as_ptr(), data.len() as i32) }).unwrap_or(0) as u16
}

/// This code object's soft state at this node: small keyed values with a time to live that
/// the node may evict at any time (it is *soft*).
pub mod state {
    use super::{Error, check, sys};

    /// Reads `key` into `buf`; returns the value's full length (which may exceed `buf`).
    pub fn get(key: &[u8], buf: &mut [u8]) -> Result<usize, Error> {
        check(unsafe {
            sys::state_get(
                key.as_ptr(),
                key.len() as i32,
                buf.as_mut_ptr(),
                buf.len() as i32,
            )
        })
    }

    /// Stores `value` under `key` for `ttl_ms` milliseconds.
    pub fn put(key: &[u8], value: &[u8], ttl_ms: u32) -> Result<(), Error> {
        check(unsafe {
            sys::state_put(
                key.as_ptr(),
                key.len() as i32,
                value.as_ptr(),
                value.len() as i32,
                ttl_ms.min(i32::MAX as u32) as i32,
            )
        })
        .map(|_| ())
    }

    /// Deletes `key`.
    pub fn delete(key: &[u8]) -> Result<(), Error> {
        check(unsafe { sys::state_del(key.as_ptr(), key.len() as i32) }).map(|_| ())
    }

    /// Reads a little-endian u64 stored under `key`.
    pub fn get_u64(key: &[u8]) -> Option<u64> {
        let mut b = [0u8; 8];
        match get(key, &mut b) {
            Ok(8) => Some(u64::from_le_bytes(b)),
            _ => None,
        }
    }
}

/// This code object's files at this node (ABI v2: export the marker with
/// [`export_accept_v2!`]): whole files under plain relative paths (`a-z A-Z 0-9 . _ -`
/// components separated by `/`), within the node's quotas, kept across restarts where the
/// node has a disk cache. Unlike soft state, a file stays until it is deleted (or the code
/// object's NodeOS domain ends).
pub mod files {
    use super::{Error, check, sys};

    /// Reads `path` from `offset` into `buf`; returns the file's full length (which may
    /// exceed what fit in `buf`).
    pub fn read(path: &str, offset: usize, buf: &mut [u8]) -> Result<usize, Error> {
        check(unsafe {
            sys::file_read(
                path.as_ptr(),
                path.len() as i32,
                offset.min(i32::MAX as usize) as i32,
                buf.as_mut_ptr(),
                buf.len() as i32,
            )
        })
    }

    /// Writes `data` as the whole of `path` (creating or replacing it). `Denied`: not a
    /// plain path; `TooBig`: larger than a file may be; `Budget`: over a quota.
    pub fn write(path: &str, data: &[u8]) -> Result<(), Error> {
        check(unsafe {
            sys::file_write(
                path.as_ptr(),
                path.len() as i32,
                data.as_ptr(),
                data.len() as i32,
            )
        })
        .map(|_| ())
    }

    /// Deletes `path`.
    pub fn delete(path: &str) -> Result<(), Error> {
        check(unsafe { sys::file_delete(path.as_ptr(), path.len() as i32) }).map(|_| ())
    }
}

/// Reads a big-endian u16 at `at` of `b` (0 if short).
pub fn be16(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some(s) => u16::from_be_bytes([s[0], s[1]]),
        None => 0,
    }
}

/// Reads a big-endian u32 at `at` of `b` (0 if short).
pub fn be32(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(s) => u32::from_be_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

/// Reads a big-endian u64 at `at` of `b` (0 if short).
pub fn be64(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 8) {
        Some(s) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            u64::from_be_bytes(a)
        }
        None => 0,
    }
}

/// Names the protocol: a custom section `anode.name` in the module, which nodes show in
/// `anode code list`, `anode domains` and metrics instead of only the code's hash. The name
/// is part of the module, so it is part of the code's SHA-256.
///
/// ```ignore
/// anode_sdk::protocol_name!(b"ping");
/// ```
#[macro_export]
macro_rules! protocol_name {
    ($name:literal) => {
        #[unsafe(link_section = "anode.name")]
        #[used]
        static __ANODE_NAME: [u8; $name.len()] = *$name;
    };
}

/// Exports `accept` (calling `$f(&mut Capsule, Why) -> Verdict`) and the ABI-version marker.
#[macro_export]
macro_rules! export_accept {
    ($f:path) => {
        $crate::__export_accept_marked!($f, "anode_abi_v1");
    };
}

/// [`export_accept!`] for code built for ABI v2 (it uses [`files`]): exports the v2 marker
/// only, so a node that speaks only v1 refuses the code by name instead of failing to link it.
#[macro_export]
macro_rules! export_accept_v2 {
    ($f:path) => {
        $crate::__export_accept_marked!($f, "anode_abi_v2");
    };
}

/// `accept` and the named ABI marker (the two macros above).
#[doc(hidden)]
#[macro_export]
macro_rules! __export_accept_marked {
    ($f:path, $marker:literal) => {
        const _: () = {
            #[unsafe(export_name = "accept")]
            extern "C" fn __anode_accept(_len: i32, why: i32) -> i32 {
                let mut cap = $crate::Capsule::__new();
                $f(&mut cap, $crate::Why::from_code(why)) as i32
            }

            #[unsafe(export_name = $marker)]
            extern "C" fn __anode_abi_marker() {}
        };
    };
}

#[cfg(target_arch = "wasm32")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}
