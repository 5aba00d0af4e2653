//! Raw host imports (module `"anode"`), exactly as `crates/capsule/ABI.md` lists them.
//! Pointers are offsets into this module's linear memory; the host checks every range.

#[link(wasm_import_module = "anode")]
unsafe extern "C" {
    pub fn cap_len() -> i32;
    pub fn cap_info(out: *mut u8) -> i32;
    pub fn cap_read(off: i32, ptr: *mut u8, len: i32) -> i32;
    pub fn cap_write(off: i32, ptr: *const u8, len: i32) -> i32;
    pub fn cap_resize(len: i32) -> i32;
    pub fn cap_set_dst(addr: *const u8) -> i32;
    pub fn cap_set_transit_flags(flags: i32) -> i32;
    pub fn forward() -> i32;
    pub fn forward_via(addr: *const u8) -> i32;
    pub fn forward_by(name: *const u8, name_len: i32, flow: i64) -> i32;
    pub fn copy_via(addr: *const u8) -> i32;
    pub fn deliver(port: i32) -> i32;
    pub fn cut_through(lifetime_ms: i32) -> i32;
    pub fn send(
        dst: *const u8,
        code: *const u8,
        rb: i32,
        flow: i64,
        payload: *const u8,
        len: i32,
    ) -> i32;
    pub fn state_get(key: *const u8, klen: i32, buf: *mut u8, cap: i32) -> i32;
    pub fn state_put(key: *const u8, klen: i32, val: *const u8, vlen: i32, ttl_ms: i32) -> i32;
    pub fn state_del(key: *const u8, klen: i32) -> i32;
    pub fn file_read(path: *const u8, plen: i32, off: i32, buf: *mut u8, cap: i32) -> i32;
    pub fn file_write(path: *const u8, plen: i32, data: *const u8, dlen: i32) -> i32;
    pub fn file_delete(path: *const u8, plen: i32) -> i32;
    pub fn node_addr(out: *mut u8) -> i32;
    pub fn now_ns() -> i64;
    pub fn neighbors(out: *mut u8, max: i32) -> i32;
    pub fn route(dst: *const u8, hop_out: *mut u8) -> i32;
    pub fn log(ptr: *const u8, len: i32) -> i32;
    pub fn sha256(ptr: *const u8, len: i32, out: *mut u8) -> i32;
    pub fn checksum(ptr: *const u8, len: i32) -> i32;
}
