//! SIGINT, SIGTERM and SIGHUP (the terminal went away) as a flag the benchmark (and `uvfs
//! mount`) polls, so that Ctrl-C stops a
//! run promptly and the normal cleanup still runs (the kernel peer's
//! directories removed, its tmpfs unmounted).
//!
//! The handlers only store to atomics (async-signal-safe). The harness's
//! main thread polls [`received`] while a run lasts and raises the workers'
//! stop flag; reading and importing the tree poll [`check`] per entry. The
//! error then unwinds through the usual teardown and close, and the caller
//! exits with `128 + signal`.
//!
//! Further signals change nothing: `timeout(1)` sends its signal to the
//! process and again to its process group, so one interruption can arrive
//! twice, and the second must not cut the cleanup short. SIGQUIT (Ctrl-\\)
//! and SIGKILL still end the process at once.

use std::sync::atomic::{AtomicUsize, Ordering};

use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};

use crate::error::{Error, Result};

/// The last signal received, 0 if none. Written only by the handlers.
static SIGNAL: AtomicUsize = AtomicUsize::new(0);

/// Installs the SIGINT, SIGTERM and SIGHUP handlers (process-wide; call once, from
/// the program's main thread, before the benchmark starts).
///
/// # Errors
///
/// `sigaction` failed.
pub fn install() -> Result<()> {
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register_usize(sig, &SIGNAL, sig as usize)
            .map_err(|e| Error::new(format!("installing a {} handler", signal_name(sig)), e))?;
    }
    Ok(())
}

/// The signal received since [`install`], if any (the exit status is
/// `128 +` it).
pub fn received() -> Option<i32> {
    // Relaxed: a flag polled between steps; nothing is published with it.
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        sig => i32::try_from(sig).ok(),
    }
}

/// Fails if a signal was received: the benchmark is to stop and clean up.
///
/// # Errors
///
/// "interrupted by SIGINT" (or SIGTERM) once a signal was received.
pub fn check() -> Result<()> {
    match received() {
        None => Ok(()),
        Some(sig) => Err(Error::msg(format!("interrupted by {}", signal_name(sig)))),
    }
}

/// `SIGINT`, `SIGTERM`, `SIGHUP`, or the number for another signal.
pub fn signal_name(sig: i32) -> String {
    match sig {
        SIGINT => "SIGINT".to_owned(),
        SIGTERM => "SIGTERM".to_owned(),
        SIGHUP => "SIGHUP".to_owned(),
        _ => format!("signal {sig}"),
    }
}
