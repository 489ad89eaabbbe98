//! `RefCount`: what the fd table and `RcuRef` need of an open file's reference count, so
//! that lesson 2's "before" (a compare-and-swap loop) can run on the same code paths as
//! `FileRef` in an ablation benchmark.
//!
//! Linux analogue: `atomic_long_inc_not_zero(&file->f_count)` in `__fget_files_rcu` before
//! "fs: Optimized fget to improve performance" (and before 6.13's `file_ref_t`); the kernel
//! has no trait, it changed the one type.
//!
//! # Invariants (of every implementation)
//! - `new(n)` holds `n` references; each successful `get`, each `inc` and each initial
//!   reference is dropped by one `put` or `put_close`; exactly one of them returns `true`,
//!   after all successful gets were matched, and after it `get` never succeeds again.

use super::{AtomicU64, Ordering};

/// A reference count for objects found by lockless lookup.
///
/// Implemented by [`FileRef`](super::file_ref::FileRef) (uvfs: one `fetch_add` per get) and
/// [`CasRef`] (the lesson-2 baseline: "add unless zero" in a compare-and-swap loop).
///
/// # Safety
/// `RcuRef` and `File` free the object when a put returns `true`, so an implementation
/// must keep the module's invariants: exactly one `put`/`put_close` returns `true`, after
/// every reference (initial, `inc`, successful `get`) was put, and after it `get` never
/// succeeds; with the orderings each method documents. A count that says "last" twice
/// would make safe code free an object twice.
pub unsafe trait RefCount: Send + Sync + 'static {
    /// A count holding `cnt` references (`cnt >= 1`; 0 is treated as 1).
    fn new(cnt: u64) -> Self;
    /// Takes one reference on an object reached without one; `false` when it is already
    /// released. Ordering: at least Acquire (pairs with the releasing put's Release; the fd
    /// table's re-check relies on it, see `FdTable::fget`).
    #[must_use]
    fn get(&self) -> bool;
    /// Takes one more reference on an object the caller holds one on; cannot fail.
    fn inc(&self);
    /// Drops one reference; `true` when it was the last and the caller must release.
    /// Ordering: Release, and Acquire on the releasing path.
    #[must_use]
    fn put(&self) -> bool;
    /// Drops one reference on `close()`; like [`put`](RefCount::put) (implementations may
    /// have a faster path when the reference is likely the last).
    #[must_use]
    fn put_close(&self) -> bool;
    /// The current number of references, 0 once released; a snapshot.
    fn read(&self) -> u64;
}

/// The pre-2019 `f_count`: a plain count where 0 means released, taken with
/// `atomic_long_inc_not_zero` (load, then compare-and-swap `n -> n + 1` until it sticks or
/// reads 0). Under contention every failed compare-and-swap is one more round trip of the
/// line: the retries grow with the number of cores (O(N²) in total).
///
/// Only for ablation benchmarks (`uvfs bench --ablation`, lesson 2): uvfs uses
/// [`FileRef`](super::file_ref::FileRef).
///
/// Shapes: one `AtomicU64` (8 bytes), counting references.
///
/// # References
/// Linux 5.x `include/linux/atomic.h` `atomic_long_inc_not_zero`, `fs/file.c`
/// `__fget_files_rcu`; the seed patch "fs: Optimized fget to improve performance".
#[derive(Debug)]
pub struct CasRef {
    count: AtomicU64,
}

// SAFETY: 0 means released and is never left again (`get` refuses it, `inc` is only called
// with a reference held, so it never starts from 0); `put` returns `true` only for the
// decrement from 1 to 0, which happens once; orderings as documented on each method.
unsafe impl RefCount for CasRef {
    fn new(cnt: u64) -> Self {
        CasRef {
            count: AtomicU64::new(cnt.max(1)),
        }
    }

    #[inline]
    fn get(&self) -> bool {
        // Acquire, here and on a failed compare-and-swap: a get that finds 0 pairs with the
        // Release of the put that released the count, so the fd table's retry then sees the
        // slot that `close` cleared before that put (as `FileRef::get`'s Acquire
        // fetch_add; with Relaxed, `fget` could spin on a stale slot; the loom model
        // `cas_ref_fget_close_dup2_same_fd` finds that).
        let mut cur = self.count.load(Ordering::Acquire);
        loop {
            if cur == 0 {
                return false;
            }
            // Acquire on success: pairs with the Release of the put that a later re-check
            // must see (as `FileRef::get`). Acquire on failure: see above.
            let acq = Ordering::Acquire;
            match self.count.compare_exchange(cur, cur + 1, acq, acq) {
                Ok(_) => return true,
                Err(v) => cur = v,
            }
        }
    }

    #[inline]
    fn inc(&self) {
        // Relaxed: the caller's reference keeps the count above 0 (as `Arc::clone`).
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    fn put(&self) -> bool {
        // AcqRel: Release publishes this holder's accesses before the release; Acquire (used
        // only when this put reaches 0) makes every other holder's accesses visible to the
        // releaser. Pairs with itself in other holders and with `get`'s Acquire.
        let old = self.count.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(old != 0, "imbalanced put on CasRef");
        old == 1
    }

    #[inline]
    fn put_close(&self) -> bool {
        self.put()
    }

    fn read(&self) -> u64 {
        // Relaxed: a diagnostic snapshot, ordered with nothing.
        self.count.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(uvfs_loom)))]
mod tests {
    use super::*;

    #[test]
    fn cas_ref_get_put_last() {
        let r = <CasRef as RefCount>::new(1);
        assert!(r.get());
        assert_eq!(r.read(), 2);
        assert!(!r.put());
        assert!(r.put_close(), "last put releases");
        assert_eq!(r.read(), 0);
        assert!(!r.get(), "a released count never comes back");
        assert_eq!(r.read(), 0);
    }
}
