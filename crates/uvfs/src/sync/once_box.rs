//! `OnceBox<T>`: a pointer that starts null and is set at most once to a boxed value,
//! read without a lock (Linux's lazily allocated `inode->i_flctx`, fs/locks.c
//! `locks_get_lock_context` and `locks_inode_context`).
//!
//! A reader that finds it unset pays one load (`get`); the first user allocates, and a
//! compare-and-swap from null publishes one value: a loser frees its own and uses the
//! winner's. Never reset while the owner lives; freed with it.
//!
//! The loom model is `sync/tests/loom_once_box.rs`: two racing initialisers publish one
//! value, both see it fully initialised, and nothing leaks or is freed twice. The code is
//! written once (`once_box_impl!`) for `std`'s atomics (what uvfs runs; inodes keep them in
//! loom builds too, as `SeqCount`'s: the models' file systems outlive one execution) and,
//! under `--cfg uvfs_loom`, for loom's (`model::OnceBox`).

/// Defines `OnceBox` over the atomics `$atomic` (a module path).
macro_rules! once_box_impl {
    ($($atomic:ident)::+) => {
        use $($atomic)::+::{AtomicPtr, Ordering};
        use std::ptr;

        /// A lazily set, never replaced `Box<T>` (see the module doc).
        ///
        /// # Invariants
        /// The pointer is null or came from `Box::into_raw` and is owned by this `OnceBox`; once
        /// non-null it never changes until drop.
        pub(crate) struct OnceBox<T> {
            p: AtomicPtr<T>,
        }

        // SAFETY: an `OnceBox<T>` owns a `Box<T>` (INVARIANT): it may move to another thread
        // when `T` may (`Send`), and shared access hands out `&T` (`Sync` needs `T: Sync`;
        // `Send` too, since whichever thread drops the last owner drops the `T`). Without
        // these bounds `AtomicPtr<T>` would make it `Send + Sync` for any `T`.
        unsafe impl<T: Send> Send for OnceBox<T> {}
        // SAFETY: as above.
        unsafe impl<T: Send + Sync> Sync for OnceBox<T> {}

        impl<T> OnceBox<T> {
            /// An unset box.
            pub(crate) fn new() -> OnceBox<T> {
                OnceBox {
                    p: AtomicPtr::new(ptr::null_mut()),
                }
            }

            /// The value, if set. One load.
            #[inline]
            #[cfg_attr(feature = "audit", track_caller)]
            pub(crate) fn get(&self) -> Option<&T> {
                // Acquire: pairs with the Release of the publishing compare-exchange in
                // `get_or_init`, so the value's initialisation is visible before it is used (Linux:
                // `smp_load_acquire(&inode->i_flctx)` vs the `cmpxchg` in
                // `locks_get_lock_context`).
                let p = self.p.load(Ordering::Acquire);
                // SAFETY: non-null means published by `get_or_init` from `Box::into_raw`, never
                // freed before `self` (INVARIANT); the Acquire above makes its contents visible.
                unsafe { p.as_ref() }
            }

            /// The value, set to `init()` first if unset. Racing callers all get the one value
            /// published; the others' values are dropped.
            #[cfg_attr(feature = "audit", track_caller)]
            pub(crate) fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
                if let Some(v) = self.get() {
                    return v;
                }
                let new = Box::into_raw(Box::new(init()));
                // Release (success): publishes the initialised value, pairs with the Acquire loads
                // in `get` and below. Acquire (failure): the winner's value is read next, pairs
                // with the winner's Release.
                match self
                    .p
                    .compare_exchange(ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire)
                {
                    // SAFETY: ours, just published and never freed before `self` (INVARIANT).
                    Ok(_) => unsafe { &*new },
                    Err(cur) => {
                        // SAFETY: `new` was never published: ours to free.
                        drop(unsafe { Box::from_raw(new) });
                        // SAFETY: `cur` is the published value (non-null: the exchange failed on
                        // it), alive as long as `self`; the failure's Acquire made it visible.
                        unsafe { &*cur }
                    }
                }
            }
        }

        impl<T> Drop for OnceBox<T> {
            fn drop(&mut self) {
                // Relaxed: `&mut self`, no other access; the publication happened before whatever
                // handed us exclusive access.
                let p = self.p.load(Ordering::Relaxed);
                if !p.is_null() {
                    // SAFETY: from `Box::into_raw`, owned by us (INVARIANT), freed once here.
                    drop(unsafe { Box::from_raw(p) });
                }
            }
        }

        impl<T: std::fmt::Debug> std::fmt::Debug for OnceBox<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple("OnceBox").field(&self.get()).finish()
            }
        }
    };
}

once_box_impl!(crate::sync::atomic);

/// The same code over loom's atomics, for the model (sync/tests/loom_once_box.rs).
#[cfg(uvfs_loom)]
pub(crate) mod model {
    once_box_impl!(loom::sync::atomic);
}
