//! Deficit round robin per input link (Shreedhar and Varghese): each class earns `quantum`
//! bytes per round and sends while its deficit covers its head packet.

#![no_std]

const N: usize = anode_msdk::CLASSES as usize;
static mut DEFICIT: [i64; N] = [0; N];
static mut CUR: usize = 0;
static mut FRESH: bool = true;

#[unsafe(no_mangle)]
pub extern "C" fn enqueue(input: i32, _len: i32, _prio: i32) -> i32 {
    (input + 1).clamp(0, anode_msdk::CLASSES - 1)
}

#[unsafe(no_mangle)]
pub extern "C" fn dequeue() -> i32 {
    let q = anode_msdk::config_int("quantum").max(64);
    // SAFETY: single-threaded guest; the statics are only used here.
    unsafe {
        let d = &mut *core::ptr::addr_of_mut!(DEFICIT);
        for _ in 0..(2 * N * 64) {
            let c = CUR % N;
            let len = anode_msdk::queue_len(c as i32);
            if len <= 0 {
                if let Some(x) = d.get_mut(c) {
                    *x = 0;
                }
                CUR = (c + 1) % N;
                FRESH = true;
                continue;
            }
            let Some(x) = d.get_mut(c) else { return -1 };
            if FRESH {
                *x += q;
                FRESH = false;
            }
            let head = i64::from(anode_msdk::queue_head_len(c as i32));
            if head <= *x {
                *x -= head;
                return c as i32;
            }
            CUR = (c + 1) % N;
            FRESH = true;
        }
        -1
    }
}
