//! Counts by key, kept in the module's files (`anode_msdk::files`): each key `k` is the file
//! `k/<k>` holding its count (8 bytes, little-endian), so the counts outlive node restarts,
//! upgrades and hand-overs, and `anode module remove` deletes them.
//!
//! Service `tally`: op 0 adds one to key `arg` and returns the new count; op 1 returns key
//! `arg`'s count (0 if it has none); op 2 deletes key `arg` (returns 0, or -3 if it had no
//! count). Errors are the files' codes, negative (-5: over the quotas of its manifest,
//! 1024 keys).

#![no_std]

use anode_msdk::files;

/// `k/` and a key in decimal: at most 2 + 20 bytes.
fn path(key: i64, buf: &mut [u8; 24]) -> &str {
    buf[0] = b'k';
    buf[1] = b'/';
    let mut n = key.unsigned_abs();
    let mut digits = [0u8; 20];
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut at = 2;
    if key < 0 {
        // `-` is a path character: negative keys have names of their own.
        buf[at] = b'-';
        at += 1;
    }
    for d in digits[..len].iter().rev() {
        buf[at] = *d;
        at += 1;
    }
    core::str::from_utf8(&buf[..at]).unwrap_or("k/0")
}

fn code(e: files::Error) -> i64 {
    match e {
        files::Error::Bounds => -1,
        files::Error::BadPath => -2,
        files::Error::NotFound => -3,
        files::Error::TooBig => -4,
        files::Error::Quota => -5,
    }
}

fn count(p: &str) -> Result<i64, files::Error> {
    let mut v = [0u8; 8];
    match files::read(p, 0, &mut v) {
        Ok(8) => Ok(i64::from_le_bytes(v)),
        Ok(_) => Ok(0),
        Err(files::Error::NotFound) => Ok(0),
        Err(e) => Err(e),
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn service(op: i32, arg: i64) -> i64 {
    let mut buf = [0u8; 24];
    let p = path(arg, &mut buf);
    let r = match op {
        0 => count(p).and_then(|c| {
            let c = c.wrapping_add(1);
            files::write(p, &c.to_le_bytes()).map(|()| c)
        }),
        1 => count(p),
        2 => files::delete(p).map(|()| 0),
        _ => return -1,
    };
    r.unwrap_or_else(code)
}
