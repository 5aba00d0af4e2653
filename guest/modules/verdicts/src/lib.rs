//! Every verdict but drop, chosen by config `mode`: 0 modifies the packet in place (its last
//! byte becomes 0xAA) and continues, 1 redirects it to link `link`, 2 emits a copy on link
//! `link` and continues, 3 consumes it. For tests and examples of the guest ABI.

#![no_std]

/// Largest packet mode 2 copies.
const MAX_COPY: usize = 2048;
static mut COPY: [u8; MAX_COPY] = [0; MAX_COPY];

#[unsafe(no_mangle)]
pub extern "C" fn process(_point: i32) -> i32 {
    let link = anode_msdk::config_int("link") as i32;
    match anode_msdk::config_int("mode") {
        0 => {
            let n = anode_msdk::packet_len();
            if n > 0 {
                anode_msdk::write(n - 1, &[0xAA]);
            }
            anode_msdk::CONTINUE
        }
        1 => {
            anode_msdk::redirect(link);
            anode_msdk::REDIRECT
        }
        2 => {
            // SAFETY: single-threaded guest; no other reference to COPY is live.
            let copy = unsafe { &mut *core::ptr::addr_of_mut!(COPY) };
            let n = anode_msdk::packet_len().min(MAX_COPY);
            if let Some(buf) = copy.get_mut(..n)
                && anode_msdk::read(0, buf)
            {
                anode_msdk::emit_packet(buf, link);
            }
            anode_msdk::CONTINUE
        }
        _ => anode_msdk::CONSUME,
    }
}
