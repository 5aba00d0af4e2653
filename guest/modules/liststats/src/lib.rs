//! The PLAN service `liststats : (string, int list) -> string * int * int` (registered with
//! the node's PLAN EE while the module is active): `liststats(label, xs)` is the label in
//! capitals, the sum of `xs` and its largest element; an empty list is refused (the call
//! raises `ServiceError` with the reason). A module service with a type other than
//! `int -> int`: arguments and answer are marshalled PLAN values (`anode_msdk::plan`).

#![no_std]

use anode_msdk::plan::{Reader, Writer, args};

static mut IN: [u8; 8192] = [0; 8192];
static mut OUT: [u8; 1024] = [0; 1024];

fn fail(why: &str) -> i64 {
    anode_msdk::log_line(why);
    -1
}

#[unsafe(no_mangle)]
pub extern "C" fn plan_invoke(_len: i32) -> i64 {
    // SAFETY: single-threaded guest; the buffers are used only during this call, and the
    // host reads OUT before the next one.
    let (input, out) = unsafe {
        (
            &mut *core::ptr::addr_of_mut!(IN),
            &mut *core::ptr::addr_of_mut!(OUT),
        )
    };
    let Some(bytes) = args(input) else {
        return fail("liststats: the arguments are too large");
    };
    let mut r = Reader::new(bytes);
    if r.varint() != Some(2) {
        return fail("liststats takes a label and a list");
    }
    let (Some(label), Some(n)) = (r.string(), r.list()) else {
        return fail("liststats takes (string, int list)");
    };
    if n == 0 {
        return fail("liststats: the list is empty");
    }
    let (mut sum, mut max) = (0i64, i64::MIN);
    for _ in 0..n {
        let Some(x) = r.int() else {
            return fail("liststats: the list holds something else than ints");
        };
        sum = sum.wrapping_add(x);
        max = max.max(x);
    }
    let mut upper = [0u8; 256];
    let label = &label[..label.len().min(upper.len())];
    for (u, c) in upper.iter_mut().zip(label) {
        *u = c.to_ascii_uppercase();
    }
    let mut w = Writer::new(out);
    w.tuple(3);
    w.string(&[&upper[..label.len()]]);
    w.int(sum);
    w.int(max);
    w.finish()
}
