//! Pins in a thread-local destructor do not nest garbage collections.
//!
//! Bug (posix_dir died with SIGSEGV, no "overflowed its stack" message): a FUSE server
//! thread's `WORKER` thread-local held the served tmpfs; its destructor, run after
//! crossbeam-epoch's per-thread `HANDLE` was gone, tore the file system down and pinned.
//! Without `HANDLE` every `crossbeam_epoch::pin()` registers a fresh participant, whose
//! first pin collects; each deferred function that pins (an old cwd `Path`'s mount put,
//! `PcpRef::drop`) so started a collection of the next expired bag inside the last: one
//! nesting (about 9.6 KiB of a debug build's stack) per bag, and `chdir` flushes one bag a
//! call (regression_getcwd_past_path_max makes 2048 of them on each file system). In a
//! thread-local destructor there is no alternate signal stack, so the overflow was a plain
//! SIGSEGV (si_code SI_KERNEL). Fix (vendor/crossbeam-epoch, UVFS-PATCH.md): no collection
//! starts inside another on the same thread.
//!
//! Own test binary: it needs the global queue to itself.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

const BAGS: usize = 1000;

// Relaxed throughout: the counters are read after the threads that write them are joined.
static DEPTH: AtomicUsize = AtomicUsize::new(0);
static MAX_DEPTH: AtomicUsize = AtomicUsize::new(0);
static RAN: AtomicUsize = AtomicUsize::new(0);

/// A deferred function that pins, as a `PcpRef`'s drop does, and records how many of its
/// kind are running on the stack.
fn pinning() {
    let d = DEPTH.fetch_add(1, Ordering::Relaxed) + 1;
    MAX_DEPTH.fetch_max(d, Ordering::Relaxed);
    drop(crossbeam_epoch::pin());
    // Relaxed: a test counter, read after the threads are joined (see the statics).
    DEPTH.fetch_sub(1, Ordering::Relaxed);
    RAN.fetch_add(1, Ordering::Relaxed);
}

struct PinsOnExit;

impl Drop for PinsOnExit {
    fn drop(&mut self) {
        // Runs after `HANDLE`'s destructor (registered later, destroyed first).
        drop(crossbeam_epoch::pin());
    }
}

thread_local! {
    static ON_EXIT: PinsOnExit = const { PinsOnExit };
}

#[test]
fn pins_in_a_thread_local_destructor_do_not_nest_collections() {
    // A pinned thread holds the epoch back: none of the bags below expires meanwhile.
    let (hold_tx, hold_rx) = mpsc::channel::<()>();
    let (pinned_tx, pinned_rx) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let g = crossbeam_epoch::pin();
        pinned_tx.send(()).unwrap();
        hold_rx.recv().unwrap();
        drop(g);
    });
    pinned_rx.recv().unwrap();
    // One bag per flush, each with a function that pins, in the global queue.
    for _ in 0..BAGS {
        let g = crossbeam_epoch::pin();
        g.defer(pinning);
        g.flush();
    }
    hold_tx.send(()).unwrap();
    holder.join().unwrap();
    // Two epoch advances: every bag expires (these collections run a few of them, at
    // most 8 each, each at depth 1).
    for _ in 0..2 {
        crossbeam_epoch::pin().flush();
    }
    // A large stack, so that the unfixed nesting is counted rather than overflowing.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(|| {
            // Registered before `HANDLE` (first pin below), so destroyed after it.
            ON_EXIT.with(|_| ());
            drop(crossbeam_epoch::pin());
        })
        .unwrap()
        .join()
        .unwrap();
    // Relaxed: every writer was joined above; join synchronizes with its end.
    let (ran, max) = (
        RAN.load(Ordering::Relaxed),
        MAX_DEPTH.load(Ordering::Relaxed),
    );
    assert!(ran > 16, "only {ran} of the {BAGS} deferred functions ran");
    assert_eq!(
        max, 1,
        "collections nested {max} deep ({ran} functions ran)"
    );
}
