//! Guest side of the service-module ABI (`anode_mod`, see `crates/modules/src/runtime.rs`):
//! safe wrappers over the host imports, and the panic handler (a panic traps, and the node
//! stops the module).

#![no_std]

#[link(wasm_import_module = "anode_mod")]
unsafe extern "C" {
    fn pkt_len() -> i32;
    fn pkt_read(off: i32, ptr: *mut u8, len: i32) -> i32;
    fn pkt_write(off: i32, ptr: *const u8, len: i32) -> i32;
    fn in_link() -> i32;
    fn ee_offset() -> i32;
    fn set_redirect(link: i32) -> i32;
    fn config(ptr: *const u8, len: i32) -> i64;
    fn q_len(class: i32) -> i32;
    fn q_head_len(class: i32) -> i32;
    fn call(ptr: *const u8, len: i32, op: i32, arg: i64) -> i64;
    fn emit(ptr: *const u8, len: i32, link: i32) -> i32;
    fn log(ptr: *const u8, len: i32);
}

/// Verdict: go on.
pub const CONTINUE: i32 = 0;
/// Verdict: drop.
pub const DROP: i32 = 1;
/// Verdict: consumed.
pub const CONSUME: i32 = 2;
/// Verdict: redirect to the link set with [`redirect`].
pub const REDIRECT: i32 = 3;

/// Routing functions (`route(flow) -> link`): no route, the packet is dropped.
pub const ROUTE_NONE: i32 = -1;
/// Routing functions: use the node's default (distance-vector) route.
pub const ROUTE_DEFAULT: i32 = -2;

/// Length of the packet being processed.
pub fn packet_len() -> usize {
    // SAFETY: host import with no arguments.
    let n = unsafe { pkt_len() };
    usize::try_from(n).unwrap_or(0)
}

/// Reads packet bytes at `off` into `buf`; false if out of bounds.
pub fn read(off: usize, buf: &mut [u8]) -> bool {
    // SAFETY: the host writes at most `buf.len()` bytes into `buf` and checks bounds.
    unsafe { pkt_read(off as i32, buf.as_mut_ptr(), buf.len() as i32) == buf.len() as i32 }
}

/// Writes `buf` into the packet at `off`; false if out of bounds.
pub fn write(off: usize, buf: &[u8]) -> bool {
    // SAFETY: the host reads `buf.len()` bytes from `buf` and checks bounds.
    unsafe { pkt_write(off as i32, buf.as_ptr(), buf.len() as i32) == buf.len() as i32 }
}

/// The link the packet arrived on (-1: local).
pub fn input_link() -> i32 {
    // SAFETY: host import with no arguments.
    unsafe { in_link() }
}

/// In an EE's `ee_packet`: where the packet's payload starts (the headers before it are the
/// node's: readable, not writable). `None` outside an EE call.
pub fn ee_payload_offset() -> Option<usize> {
    // SAFETY: host import with no arguments.
    usize::try_from(unsafe { ee_offset() }).ok()
}

/// Sets the link a REDIRECT verdict sends to.
pub fn redirect(link: i32) -> bool {
    // SAFETY: host import with a plain integer.
    unsafe { set_redirect(link) == 0 }
}

/// A configuration value by name (0 if absent).
pub fn config_int(name: &str) -> i64 {
    // SAFETY: the host reads `name.len()` bytes from `name`.
    unsafe { config(name.as_ptr(), name.len() as i32) }
}

/// Packets in queue class `c` (-1: no such class).
pub fn queue_len(c: i32) -> i32 {
    // SAFETY: host import with a plain integer.
    unsafe { q_len(c) }
}

/// Bytes of the head packet of class `c`.
pub fn queue_head_len(c: i32) -> i32 {
    // SAFETY: host import with a plain integer.
    unsafe { q_head_len(c) }
}

/// Calls operation `op` of the service `name` another module provides (-1: unavailable).
pub fn call_service(name: &str, op: i32, arg: i64) -> i64 {
    // SAFETY: the host reads `name.len()` bytes from `name`.
    unsafe { call(name.as_ptr(), name.len() as i32, op, arg) }
}

/// Sends a new packet `buf` on `link` beside the verdict (at most 16 per call); false if
/// refused.
pub fn emit_packet(buf: &[u8], link: i32) -> bool {
    // SAFETY: the host reads `buf.len()` bytes from `buf` and checks bounds.
    unsafe { emit(buf.as_ptr(), buf.len() as i32, link) == 0 }
}

/// Logs a line (at most 256 bytes, 16 per call); a typed PLAN service that refuses a call
/// logs why first (the message of the `ServiceError` PLAN code sees).
pub fn log_line(msg: &str) {
    // SAFETY: the host reads `msg.len()` bytes from `msg` and checks bounds.
    unsafe { log(msg.as_ptr(), msg.len() as i32) }
}

pub mod files;
pub mod plan;

/// The bytes a module whose state is one 64-bit number hands over on upgrade.
static mut STATE_U64: [u8; 8] = [0; 8];

/// For a module whose state is one 64-bit number: what its `state_export` returns to hand `v`
/// to its successor (8 bytes little-endian).
pub fn export_u64(v: u64) -> i64 {
    // SAFETY: single-threaded guest; the host reads the bytes before the next call.
    unsafe {
        STATE_U64 = v.to_le_bytes();
        let p = core::ptr::addr_of!(STATE_U64) as usize as i64;
        (p << 32) | 8
    }
}

/// What such a module's `alloc` returns: where the host writes the handed-over bytes.
pub fn state_u64_buffer() -> i32 {
    core::ptr::addr_of!(STATE_U64) as usize as i32
}

/// Defines `state_export`, `alloc` and `state_import` for a module whose state is the one
/// `static mut` 64-bit number `$var` (of type `$ty`, `u64` or `i64`): it is handed to the
/// successor on upgrade as 8 bytes little-endian.
#[macro_export]
macro_rules! u64_state {
    ($var:ident, $ty:ty) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn state_export() -> i64 {
            // SAFETY: single-threaded guest.
            $crate::export_u64(unsafe { $var } as u64)
        }

        #[unsafe(no_mangle)]
        pub extern "C" fn alloc(_len: i32) -> i32 {
            $crate::state_u64_buffer()
        }

        #[unsafe(no_mangle)]
        pub extern "C" fn state_import(_ptr: i32, len: i32) -> i32 {
            let Some(v) = $crate::import_u64(len) else {
                return -1;
            };
            // SAFETY: single-threaded guest.
            unsafe { $var = v as $ty };
            0
        }
    };
}

/// In such a module's `state_import(ptr, len)`: the number handed over, if `len` is 8.
pub fn import_u64(len: i32) -> Option<u64> {
    if len != 8 {
        return None;
    }
    // SAFETY: single-threaded guest; the host wrote 8 bytes at `state_u64_buffer()`.
    Some(u64::from_le_bytes(unsafe { STATE_U64 }))
}

/// Number of queue classes the host offers.
pub const CLASSES: i32 = 16;

#[cfg(target_arch = "wasm32")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}
