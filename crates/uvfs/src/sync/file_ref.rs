//! `FileRef`: the open file's reference count, after Linux's `file_ref_t`.
//!
//! Linux analogue: `include/linux/file_ref.h`, `fs/file.c` `__file_ref_put` (6.13), and
//! `file_ref_put_close` (6.15). Seed patch: "fs: Optimized fget to improve performance"
//! (an atomic add instead of a compare-and-swap loop).
//!
//! The counter stores `refs - 1` in a `u64` split into zones:
//!
//! ```text
//! ONEREF 0x0000_0000_0000_0000 ..= MAXREF 0x7FFF_FFFF_FFFF_FFFF  valid: 1 ..= 2^63 references
//!        0x8000_0000_0000_0000 ..=        0xBFFF_FFFF_FFFF_FFFF  saturation zone (SATURATED in the middle)
//!        0xC000_0000_0000_0000 ..=        0xDFFF_FFFF_FFFF_FFFF  released zone (imbalanced puts)
//!        0xE000_0000_0000_0000 ..=        0xFFFF_FFFF_FFFF_FFFE  dead zone (DEAD at its start)
//! NOREF  0xFFFF_FFFF_FFFF_FFFF                                    no reference left, not yet dead
//! ```
//!
//! A get is one unconditional `fetch_add(1)`: it succeeds unless the result is "negative"
//! (top bit set). A put is one `fetch_sub(1)`; only the transition to `NOREF` takes the slow
//! path, a compare-and-swap `NOREF -> DEAD` that decides, once, who releases. A get that races
//! with the last put and lands on `NOREF` turns it back into `ONEREF` (the count was never
//! released, so this is not a resurrection) and makes that compare-and-swap fail. A dead
//! count is never repaired: it takes about 2^61 further gets to leave the dead zone.
//!
//! # Invariants
//! - Once the count holds a value in the released or dead zone, `get` never succeeds again
//!   (short of 2^61 failed gets) and `put` never returns `true` again.
//! - Exactly one `put`/`put_close` returns `true` per object, after every successful `get`
//!   has been matched by a `put`.

use super::refcount::RefCount;
use super::{AtomicU64, Ordering};

const ONEREF: u64 = 0x0000_0000_0000_0000;
const MAXREF: u64 = 0x7FFF_FFFF_FFFF_FFFF;
const SATURATED: u64 = 0xA000_0000_0000_0000;
const RELEASED: u64 = 0xC000_0000_0000_0000;
const DEAD: u64 = 0xE000_0000_0000_0000;
const NOREF: u64 = 0xFFFF_FFFF_FFFF_FFFF;

/// A reference count for objects found by lockless lookup (`fget`), after `file_ref_t`.
///
/// Shapes: one `AtomicU64` (8 bytes). Counts are in references; `read()` returns 0 once the
/// object is released.
///
/// # Refcounting
/// `new(n)` starts with `n` references. Each successful [`get`](FileRef::get) and each initial
/// reference is dropped by one [`put`](FileRef::put) or [`put_close`](FileRef::put_close); the
/// one that returns `true` owns the release of the object.
///
/// # References
/// Linux `include/linux/file_ref.h` (`file_ref_get`, `file_ref_put`, `file_ref_put_close`).
#[derive(Debug)]
pub struct FileRef {
    refcnt: AtomicU64,
}

impl FileRef {
    /// A count holding `cnt` references (`cnt >= 1`; 0 is treated as 1).
    #[inline]
    pub fn new(cnt: u64) -> FileRef {
        FileRef {
            refcnt: AtomicU64::new(cnt.max(1) - 1),
        }
    }

    /// Takes one reference; `false` when the count was already released (the object is
    /// dying and must not be used). One `fetch_add`, no loop.
    ///
    /// Ordering: Acquire. It pairs with the Release of the `put` that made the count reach
    /// `NOREF` or `DEAD`: when `fget` (fdtable.rs) takes a reference that a concurrent `close`
    /// was dropping, the slot store that `close` made before its put (slot = NULL) happens
    /// before `fget`'s re-check of the slot, so the re-check sees it and `fget` backs off.
    /// Later loads (the re-check) cannot move before the increment.
    #[inline]
    #[must_use]
    pub fn get(&self) -> bool {
        // Acquire: see the doc comment above; pairs with the Release in `put`.
        let old = self.refcnt.fetch_add(1, Ordering::Acquire);
        if (old.wrapping_add(1) as i64) >= 0 {
            return true;
        }
        self.get_slow(old.wrapping_add(1))
    }

    #[cold]
    fn get_slow(&self, cnt: u64) -> bool {
        if cnt >= RELEASED {
            // Released or dead: fail, and leave the count alone (writing DEAD here could
            // race with nothing useful; the dead zone is wide enough).
            return false;
        }
        // Saturation zone (2^63 references): pin the count in the middle of the zone and
        // leak the object rather than overflow. Relaxed: a saturated count is never released,
        // so no ordering with a release is needed.
        self.refcnt.store(SATURATED, Ordering::Relaxed);
        true
    }

    /// Takes one more reference on an object the caller already holds one on; cannot fail.
    ///
    /// Ordering: Relaxed. The caller's own reference keeps the count above `NOREF`, so no
    /// release can race, and the new reference needs no happens-before with anything (the
    /// same argument as `Arc::clone`).
    #[inline]
    pub fn inc(&self) {
        // Relaxed: see the doc comment; the caller's reference orders everything needed.
        let old = self.refcnt.fetch_add(1, Ordering::Relaxed);
        if (old.wrapping_add(1) as i64) < 0 {
            self.get_slow(old.wrapping_add(1));
        }
    }

    /// Drops one reference; `true` when this was the last one and the caller must release
    /// the object. One `fetch_sub`; the slow path only at the last reference.
    ///
    /// Ordering: the decrement is Release (pairs with the Acquire of the slow path's
    /// compare-and-swap and of `get`): everything this holder did to the object happens
    /// before its release. The `NOREF -> DEAD` compare-and-swap is AcqRel: Acquire so the
    /// releaser sees every other holder's accesses; Release so a late `get` that fails
    /// (Acquire) is ordered after it.
    #[inline]
    #[must_use]
    pub fn put(&self) -> bool {
        // Release: pairs with the Acquire of the CAS in `put_slow` / of `get`.
        let old = self.refcnt.fetch_sub(1, Ordering::Release);
        let cnt = old.wrapping_sub(1);
        if (cnt as i64) >= 0 {
            return false;
        }
        self.put_slow(cnt)
    }

    #[cold]
    fn put_slow(&self, cnt: u64) -> bool {
        if cnt == NOREF {
            // AcqRel on success: see `put`'s doc. Failure (Relaxed): a concurrent get
            // revived the count or another put already decided; we must not release and we
            // read nothing of the object afterwards, so no ordering is needed.
            return self
                .refcnt
                .compare_exchange(NOREF, DEAD, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok();
        }
        if cnt >= RELEASED {
            // Imbalanced put on a dead count: a caller bug. Keep the count dead; Relaxed
            // because nothing is published by this store.
            debug_assert!(false, "imbalanced put on FileRef");
            self.refcnt.store(DEAD, Ordering::Relaxed);
            return false;
        }
        if cnt > MAXREF {
            // Put on a saturated count: restore the middle of the zone; Relaxed as in
            // `get_slow`.
            self.refcnt.store(SATURATED, Ordering::Relaxed);
        }
        false
    }

    /// Drops a reference on `close()`: when it is likely the last one, a single
    /// compare-and-swap `ONEREF -> DEAD` releases it (Linux 6.15 `file_ref_put_close`);
    /// otherwise as [`put`](FileRef::put). Returns `true` when the caller must release.
    ///
    /// Ordering: the load is Relaxed (only a hint); the CAS is AcqRel like `put_slow`'s
    /// (Acquire: sees the other holders' accesses, which their Release puts published;
    /// Release: orders this holder's accesses before the release and late failed gets).
    #[inline]
    #[must_use]
    pub fn put_close(&self) -> bool {
        // Relaxed: a hint only; the CAS below re-validates.
        if self.refcnt.load(Ordering::Relaxed) == ONEREF
            // AcqRel / Relaxed failure: see the doc comment.
            && self
                .refcnt
                .compare_exchange(ONEREF, DEAD, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            return true;
        }
        self.put()
    }

    /// The current number of references, 0 once released. A snapshot for tests and stats.
    ///
    /// Ordering: Relaxed; the value can be stale as soon as it is returned.
    pub fn read(&self) -> u64 {
        // Relaxed: a diagnostic snapshot, ordered with nothing.
        let c = self.refcnt.load(Ordering::Relaxed);
        if c >= RELEASED {
            0
        } else {
            c.wrapping_add(1)
        }
    }
}

// SAFETY: the module's invariants (zones, exactly one releasing put, no get after release)
// are those `RefCount` requires; see the module doc and the loom models.
unsafe impl RefCount for FileRef {
    #[inline]
    fn new(cnt: u64) -> Self {
        FileRef::new(cnt)
    }
    #[inline]
    fn get(&self) -> bool {
        FileRef::get(self)
    }
    #[inline]
    fn inc(&self) {
        FileRef::inc(self)
    }
    #[inline]
    fn put(&self) -> bool {
        FileRef::put(self)
    }
    #[inline]
    fn put_close(&self) -> bool {
        FileRef::put_close(self)
    }
    #[inline]
    fn read(&self) -> u64 {
        FileRef::read(self)
    }
}

#[cfg(all(test, not(uvfs_loom)))]
mod tests {
    use super::*;

    #[test]
    fn get_put_last() {
        let r = FileRef::new(1);
        assert_eq!(r.read(), 1);
        assert!(r.get());
        assert_eq!(r.read(), 2);
        assert!(!r.put());
        assert!(r.put(), "last put releases");
        assert_eq!(r.read(), 0);
        assert!(!r.get(), "a released count never comes back");
        assert_eq!(r.read(), 0);
    }

    #[test]
    fn put_close_fast_and_slow() {
        let r = FileRef::new(1);
        assert!(r.put_close());
        assert!(!r.get());
        let r = FileRef::new(2);
        assert!(!r.put_close());
        assert!(r.put_close());
    }

    #[test]
    fn get_on_noref_revives_and_blocks_release() {
        // The race of `put` vs `get`, serialised: the put's decrement reached NOREF, then a
        // get landed before the put's compare-and-swap.
        let r = FileRef::new(1);
        // Release: test code, mirrors `put`'s first half.
        r.refcnt.fetch_sub(1, Ordering::Release);
        assert!(r.get(), "NOREF + 1 = ONEREF: still a valid reference");
        assert!(!r.put_slow(NOREF), "the racing put must not release");
        assert!(r.put(), "the getter's put releases");
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        let r = FileRef::new(1);
        // Relaxed: single-threaded test setup.
        r.refcnt.store(MAXREF, Ordering::Relaxed);
        assert!(r.get(), "a get at MAXREF saturates and succeeds");
        // Relaxed: single-threaded test read.
        assert_eq!(r.refcnt.load(Ordering::Relaxed), SATURATED);
        assert!(!r.put());
        // Relaxed: single-threaded test read.
        assert_eq!(r.refcnt.load(Ordering::Relaxed), SATURATED);
    }

    #[test]
    fn dead_zone_gets_fail_without_repair() {
        let r = FileRef::new(1);
        assert!(r.put());
        for _ in 0..1000 {
            assert!(!r.get());
        }
        assert_eq!(r.read(), 0);
    }
}
