//! A test-and-set lock for the loom build (`--cfg uvfs_loom`) of locks whose owners may
//! outlive one loom execution: a directory's bucket locks (dcache.rs).
//!
//! Linux analogue: none (a test device).
//!
//! loom's own `Mutex` is an object of the execution that created it, and touching it from
//! another one panics in loom ("index out of bounds" in its object store). A `Dir` is
//! dropped when its dentry's last reference goes, which the epoch may defer to a later
//! execution, and the fd-table models create directories too. So under loom a bucket lock is
//! this lock: its word is a `std` atomic (valid in any execution), and a failed attempt
//! yields to loom's scheduler (`loom::thread::yield_now`) before the next, so a waiter lets
//! the holder run. An uncontended take of a plain lock (`new`) calls no loom function at
//! all: a directory torn down when the epoch gets round to it (at a moment no model
//! controls) must not add scheduling points to an execution, or loom finds the model not
//! deterministic. A lock made by `new_modelled` (the directories the models of
//! tests/loom_dir.rs create and drop within one execution) also takes a loom `Mutex`
//! first, so loom sees the lock and explores every order in which threads take it.
//!
//! # Invariants
//! - `locked` is true exactly while a `MutexGuard` exists; the guard is the only accessor
//!   of `value`.

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// A lock whose word survives loom executions (module doc).
pub(crate) struct Mutex<T> {
    locked: AtomicBool,
    /// A loom lock taken around `locked` (`new_modelled`), for loom to see.
    shadow: Option<loom::sync::Mutex<()>>,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands `&mut T` to one guard at a time (INVARIANT), as `std::sync::Mutex`.
unsafe impl<T: Send> Send for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Mutex<T> {}

impl<T> Mutex<T> {
    /// An unlocked lock holding `v`.
    pub(crate) fn new(v: T) -> Mutex<T> {
        Mutex {
            locked: AtomicBool::new(false),
            shadow: None,
            value: UnsafeCell::new(v),
        }
    }

    /// An unlocked lock holding `v` that loom sees (module doc). Context: inside
    /// `loom::model`, and dropped in the same execution.
    #[cfg(test)]
    pub(crate) fn new_modelled(v: T) -> Mutex<T> {
        Mutex {
            locked: AtomicBool::new(false),
            shadow: Some(loom::sync::Mutex::new(())),
            value: UnsafeCell::new(v),
        }
    }

    /// Takes the lock, yielding to loom after each failed attempt.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        let shadow = self.shadow.as_ref().map(|m| match m.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        });
        loop {
            // Acquire: pairs with the Release store in `MutexGuard::drop`: the previous
            // holder's writes to `value` are visible. (loom runs one thread at a time on
            // one OS thread, so this orders nothing loom checks; module doc.)
            if !self.locked.swap(true, Ordering::Acquire) {
                // INVARIANT: `locked` was false and is now ours.
                return MutexGuard {
                    m: self,
                    _shadow: shadow,
                };
            }
            loom::thread::yield_now();
        }
    }
}

impl<T> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Relaxed: a snapshot for display.
        let locked = self.locked.load(Ordering::Relaxed);
        f.debug_struct("Mutex").field("locked", &locked).finish()
    }
}

/// The holder of a [`Mutex`].
pub(crate) struct MutexGuard<'a, T> {
    m: &'a Mutex<T>,
    /// The loom lock, released after `locked` (fields drop after `Drop::drop`).
    _shadow: Option<loom::sync::MutexGuard<'a, ()>>,
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard is the only accessor of `value` while it lives (INVARIANT).
        unsafe { &*self.m.value.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this access unique.
        unsafe { &mut *self.m.value.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire swap in `Mutex::lock`.
        self.m.locked.store(false, Ordering::Release);
    }
}
