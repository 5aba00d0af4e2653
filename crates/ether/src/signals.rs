//! SIGINT / SIGTERM for every anode binary (`anode node`, `anode router`, the tools,
//! `anode-xskfwd`, the benchmark forwarder), on the `signal-hook` crate: the handler only sets
//! an atomic flag; the program polls [`stop_requested`] (or [`wait`]s with a time limit) and
//! shuts down cleanly.
//!
//! Contract: [`install`] may be called any number of times (the handlers are registered once);
//! once a signal came, [`stop_requested`] stays true.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGINT, SIGTERM};

struct Flags {
    stop: Arc<AtomicBool>,
    term: Arc<AtomicBool>,
}

static FLAGS: OnceLock<Flags> = OnceLock::new();
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
static WHICH: AtomicI32 = AtomicI32::new(0);

fn flags() -> &'static Flags {
    FLAGS.get_or_init(|| Flags {
        stop: Arc::new(AtomicBool::new(false)),
        term: Arc::new(AtomicBool::new(false)),
    })
}

/// Installs the handlers for SIGINT and SIGTERM (once).
pub fn install() -> std::io::Result<()> {
    let r = INSTALLED.get_or_init(|| {
        let f = flags();
        let reg = |sig, flag: &Arc<AtomicBool>| {
            signal_hook::flag::register(sig, Arc::clone(flag)).map(|_| ())
        };
        reg(SIGINT, &f.stop)
            .and_then(|()| reg(SIGTERM, &f.stop))
            .and_then(|()| reg(SIGTERM, &f.term))
            .map_err(|e| e.to_string())
    });
    r.clone().map_err(std::io::Error::other)
}

/// True once SIGINT or SIGTERM arrived.
pub fn stop_requested() -> bool {
    let f = flags();
    if f.stop.load(Ordering::SeqCst) {
        let sig = if f.term.load(Ordering::SeqCst) {
            SIGTERM
        } else {
            SIGINT
        };
        let _ = WHICH.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
        return true;
    }
    false
}

/// Waits until SIGINT/SIGTERM arrives (its number) or `limit` passes (`None`), checking every
/// 20 ms. Installs the handlers if needed.
pub fn wait(limit: Duration) -> std::io::Result<Option<i32>> {
    install()?;
    let end = Instant::now() + limit;
    loop {
        if stop_requested() {
            return Ok(Some(WHICH.load(Ordering::SeqCst)));
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_signal_sets_the_flag_and_ends_a_wait() {
        super::install().unwrap();
        super::install().unwrap();
        assert_eq!(
            super::wait(std::time::Duration::from_millis(30)).unwrap(),
            None
        );
        // SAFETY: raising a signal in our own process; the handler only sets a flag.
        unsafe {
            libc::raise(libc::SIGTERM);
        }
        assert!(super::stop_requested());
        assert_eq!(
            super::wait(std::time::Duration::from_secs(1)).unwrap(),
            Some(libc::SIGTERM)
        );
    }
}
