//! `OnceBox`: a heap value created on first use under the owner's lock, then read without
//! locks or writes for the owner's whole life.
//!
//! Linux analogue: a pointer published once with `smp_store_release` and read with
//! `smp_load_acquire` (e.g. `inode->i_fsnotify_marks`' lazy allocation); std's `OnceLock`
//! without the lock-free initialisation race (writers are serialised by the caller).
//!
//! # Invariants
//! - The pointer is null or points to a `Box<T>` leaked by `get_or_init`, owned by the
//!   `OnceBox` and freed only by its `Drop`; once non-null it never changes.

use super::plain::{AtomicPtr, Ordering};
use std::fmt;
use std::ptr;

/// A lazily allocated `T`, never replaced once set.
pub(crate) struct OnceBox<T> {
    ptr: AtomicPtr<T>,
}

// SAFETY: an `OnceBox<T>` owns a `Box<T>` (INVARIANT above): it may move to another thread
// when `T` may (`Send`), and shared access hands out `&T` (`Sync` needs `T: Sync`; `Send`
// too, since the last owner on any thread drops the `T`).
unsafe impl<T: Send> Send for OnceBox<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for OnceBox<T> {}

impl<T> OnceBox<T> {
    /// An empty cell.
    pub(crate) fn new() -> OnceBox<T> {
        OnceBox {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The value, if one was set.
    #[inline]
    #[cfg_attr(feature = "audit", track_caller)]
    pub(crate) fn get(&self) -> Option<&T> {
        // Acquire: pairs with the Release store in `get_or_init`, so that the `T` it
        // published is seen initialised.
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: non-null means a leaked `Box<T>` that lives until `self` drops and never
        // changes (INVARIANT), so `&T` may borrow `self`'s lifetime.
        unsafe { p.as_ref() }
    }

    /// The value, created by `f` if none was set yet.
    ///
    /// Context: the caller serialises the callers of `get_or_init` on this cell (holds the
    /// owner's lock), so no two create a value.
    #[cfg_attr(feature = "audit", track_caller)]
    pub(crate) fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
        if let Some(v) = self.get() {
            return v;
        }
        let p = Box::into_raw(Box::new(f()));
        // Release: pairs with the Acquire load in `get`: `*p` is initialised before it is
        // seen. A plain store suffices: the caller's lock makes this the only writer.
        self.ptr.store(p, Ordering::Release);
        // SAFETY: `p` was just leaked from a `Box` and is now owned by `self` (INVARIANT).
        unsafe { &*p }
    }
}

impl<T> Drop for OnceBox<T> {
    fn drop(&mut self) {
        // Relaxed: `&mut self` is exclusive; whatever published the value happened before
        // the owner was handed to the dropping thread.
        let p = self.ptr.load(Ordering::Relaxed);
        if !p.is_null() {
            // SAFETY: `p` is the `Box` leaked by `get_or_init`, owned by `self` (INVARIANT),
            // and no reference to it outlives `&mut self`.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for OnceBox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OnceBox").field(&self.get()).finish()
    }
}
