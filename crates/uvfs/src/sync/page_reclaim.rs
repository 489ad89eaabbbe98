//! Grace-period frees of file pages and page-index nodes: an epoch domain of their own,
//! with a bound on what a thread leaves waiting.
//!
//! Linux analogue: `call_rcu`/`kvfree_rcu` for what lockless page-cache readers may still
//! be copying, with RCU's callback flood control (`rcu_do_batch`'s `qhimark`: past a
//! high-water mark of queued callbacks, the grace period is forced and callbacks run).
//!
//! # Why a collector of its own
//! Lockless readers of tmpfs files (fs/tmpfs/regular.rs `read_lockless`) pin [`pin`];
//! writers retire the pages and nodes they unlink with [`retire`]. crossbeam-epoch frees
//! retired memory only when some thread later pins or flushes and the epoch has advanced
//! twice; an idle `uvfs mount` server pins nothing, so 256 MiB of removed pages stayed
//! allocated (CI, `mount_lifecycle::freed_file_memory_returns_to_the_system`). So the
//! writer drives the grace period itself ([`collect_if_over`]). It could not in the default
//! collector: its epoch is held back by every pin of uvfs (a path walk, a locked
//! directory), and a writer may be inside one (truncate(2) runs under its walk's guard).
//! Pins of this collector are taken only inside regular.rs, never across a call out of it,
//! so once a writer's operation has dropped its guard the thread is unpinned here, and the
//! only pins that hold the epoch back are lockless reads (one copy of at most 64 KiB each)
//! and other writers' operations.
//!
//! # The bound
//! Each thread counts the bytes it has retired and that are not yet freed (`Pending`, on a
//! line of its own, shared with nothing: written by the thread when it retires and by the
//! deferred free, on whichever thread runs it). A tmpfs operation that changes pages ends
//! with [`collect_if_over`]: a thread holding more than [`BOUND`] (2 MiB) retired bytes
//! pins, flushes its bag into the collector and collects, unpinned in between, until its
//! count is 0 or [`MAX_STALLS`] rounds in a row freed nothing (another thread stayed
//! pinned; the rounds yield to let it finish its read). So when an operation returns, its
//! thread has at most `BOUND` bytes waiting, unless a reader stayed pinned through every
//! round, and then the thread's next write, truncate or fallocate of a tmpfs file drives
//! again. Per thread, so at most `BOUND` per thread that ever changed pages stays waiting
//! on an idle process (a `uvfs mount` server: `BOUND` times its worker threads). A whole file's
//! pages are not retired at all when the inode is evicted with no open file (regular.rs
//! `drop_pages`: nobody can be reading, so they are freed at once).
//!
//! Nothing here is written on the read path: a read pins (its thread's own epoch line) and
//! never retires.
//!
//! Lock order: none (called with no lock held by [`collect_if_over`]'s callers).

use super::atomic::{AtomicUsize, Ordering};
use super::epoch::{Collector, Guard, LocalHandle};
use super::padded::CacheLine;
use std::sync::{Arc, OnceLock};

/// Retired bytes a thread may leave waiting after an operation (see the module doc).
pub(crate) const BOUND: usize = 2 << 20;

/// Collection rounds in a row that free nothing before [`collect_if_over`] gives up (see
/// the module doc). Two are normal: the epoch must advance twice past the retirement.
const MAX_STALLS: u32 = 16;

/// The collector of file pages and index nodes (see the module doc).
fn collector() -> &'static Collector {
    static COLLECTOR: OnceLock<Collector> = OnceLock::new();
    COLLECTOR.get_or_init(Collector::new)
}

/// Bytes one thread retired that are not freed yet.
#[derive(Debug)]
struct Pending(CacheLine<AtomicUsize>);

std::thread_local! {
    /// This thread's participant in [`collector`].
    static HANDLE: LocalHandle = collector().register();
    /// This thread's retired, not yet freed bytes.
    static PENDING: Arc<Pending> = Arc::new(Pending(CacheLine(AtomicUsize::new(0))));
}

/// Pins the current thread in the page collector: pages and index nodes retired after
/// this stay allocated until the guard is dropped.
#[inline]
pub(crate) fn pin() -> Guard {
    // A thread whose thread-locals are being destroyed (an inode dropped by a
    // thread-local's destructor) pins through a handle of its own, as crossbeam's
    // `epoch::pin` does.
    HANDLE
        .try_with(LocalHandle::pin)
        .unwrap_or_else(|_| collector().register().pin())
}

/// Whether this thread is pinned in the page collector.
fn is_pinned() -> bool {
    HANDLE.try_with(LocalHandle::is_pinned).unwrap_or(false)
}

/// Drops `garbage` (`bytes` of pages and index nodes unlinked from a file) once every
/// thread pinned in the page collector now has unpinned, and counts `bytes` against this
/// thread's bound until then.
///
/// `guard` must come from [`pin`] (its collector is the one lockless readers pin).
pub(crate) fn retire<T: Send + 'static>(guard: &Guard, bytes: usize, garbage: T) {
    let pending = PENDING.try_with(Arc::clone).ok();
    if let Some(p) = &pending {
        // Relaxed: a count read only by this thread's bound check, which needs no other
        // memory ordered with it (the frees are crossbeam's to order).
        p.0.fetch_add(bytes, Ordering::Relaxed);
    }
    guard.defer(move || {
        drop(garbage);
        if let Some(p) = pending {
            // Relaxed: as the `fetch_add` in `retire`.
            p.0.fetch_sub(bytes, Ordering::Relaxed);
        }
    });
}

/// Bytes this thread retired that are not freed yet (tests).
#[doc(hidden)]
pub fn pending_bytes() -> usize {
    // Relaxed: a snapshot of a count (see `retire`).
    PENDING
        .try_with(|p| p.0.load(Ordering::Relaxed))
        .unwrap_or(0)
}

/// When this thread has more than [`BOUND`] retired bytes waiting, drives the page
/// collector until they are freed (see the module doc). Cheap otherwise: one load of the
/// thread's own count.
///
/// Context: the caller holds no guard of [`pin`] (a pinned thread holds the epoch back).
#[inline]
pub(crate) fn collect_if_over() {
    if pending_bytes() > BOUND {
        drive();
    }
}

/// The rounds of [`collect_if_over`].
#[cold]
#[inline(never)]
fn drive() {
    debug_assert!(!is_pinned(), "collect_if_over called while pinned");
    if is_pinned() {
        return;
    }
    let mut last = pending_bytes();
    let mut stalls = 0;
    while last > 0 && stalls < MAX_STALLS {
        // Each round: pin (in the current epoch), move this thread's bag to the collector
        // (sealed with that epoch), try to advance the epoch and free the bags two epochs
        // old; unpinned again so that the next round's pin can let it advance once more.
        let g = pin();
        g.flush();
        drop(g);
        let now = pending_bytes();
        if now < last {
            stalls = 0;
        } else {
            stalls += 1;
            if stalls >= 2 {
                std::thread::yield_now();
            }
        }
        last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Retiring more than the bound and calling `collect_if_over` with nothing else pinned
    /// frees it all at once; under the bound it waits.
    #[test]
    fn over_the_bound_is_freed_by_the_retiring_thread() {
        std::thread::spawn(|| {
            let g = pin();
            retire(&g, 4096, vec![0u8; 4096]);
            drop(g);
            collect_if_over();
            assert_eq!(pending_bytes(), 4096, "under the bound: left to wait");
            let g = pin();
            retire(&g, BOUND, vec![0u8; BOUND]);
            drop(g);
            collect_if_over();
            assert_eq!(pending_bytes(), 0, "over the bound: freed");
        })
        .join()
        .unwrap();
    }
}
