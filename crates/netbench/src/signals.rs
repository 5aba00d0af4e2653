//! Waiting for SIGINT/SIGTERM or a time limit without a signal handler: the signals are
//! blocked in every thread (threads spawned later inherit the mask) and taken synchronously
//! with `sigtimedwait`.
//!
//! Contract: call [`block_stop_signals`] before spawning any thread, then [`wait`].

use std::io;
use std::time::{Duration, Instant};

fn stop_set() -> io::Result<libc::sigset_t> {
    // SAFETY: all-zero is a valid sigset_t to initialise with sigemptyset.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live sigset_t; these calls only write it.
    let ok = unsafe {
        libc::sigemptyset(&mut set) == 0
            && libc::sigaddset(&mut set, libc::SIGINT) == 0
            && libc::sigaddset(&mut set, libc::SIGTERM) == 0
    };
    if ok {
        Ok(set)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Blocks SIGINT and SIGTERM in the calling thread (and threads it spawns later).
pub fn block_stop_signals() -> io::Result<()> {
    let set = stop_set()?;
    // SAFETY: `set` is initialised; the old mask is not asked for.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

/// Waits until SIGINT/SIGTERM arrives (returns its number) or `limit` passes (returns None).
pub fn wait(limit: Duration) -> io::Result<Option<i32>> {
    let set = stop_set()?;
    let end = Instant::now() + limit;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(left.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(left.subsec_nanos() as i32),
        };
        // SAFETY: `set` and `ts` are live and initialised; no siginfo is asked for.
        let r = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
        if r > 0 {
            return Ok(Some(r));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EINTR) => {}
            _ => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_out_and_takes_a_pending_signal() {
        block_stop_signals().unwrap();
        let t = Instant::now();
        assert_eq!(wait(Duration::from_millis(30)).unwrap(), None);
        assert!(t.elapsed() >= Duration::from_millis(30));
        // SAFETY: sends SIGTERM to this very thread, where it is blocked (so it stays pending
        // and `wait` takes it).
        unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGTERM) };
        assert_eq!(wait(Duration::from_secs(2)).unwrap(), Some(libc::SIGTERM));
    }
}
