//! The only import point for atomics, locks and reclamation in uvfs.
//!
//! Under `--cfg uvfs_loom` the atomics and `Mutex` come from loom so that the loom models in
//! `sync/tests/` and `tests/` explore every interleaving of the protocols built on them; in
//! normal builds they are `std`'s. Memory reclamation is crossbeam-epoch in both builds
//! (loom cannot model it; under loom all model threads share one epoch participant, which only
//! delays frees). crossbeam's `Atomic` is a real atomic that loom does not see, so a pointer
//! whose publication a loom model must check (`FdTable`'s slot array) is a `sync::AtomicPtr`
//! (a replaced array is not freed through the epoch at all: it is kept in
//! `FdAlloc::retired` until the table drops, fdtable.rs `expand_locked`); otherwise loom
//! reports the objects behind it as loaded before they were created.
//!
//! Linux analogue: `include/linux/atomic.h`, `include/linux/rcupdate.h`.

#[cfg(feature = "audit")]
pub mod audit;
pub mod borrow;
pub mod file_ref;
#[cfg(uvfs_loom)]
pub(crate) mod loom_spin;
pub(crate) mod once_box;
pub mod padded;
pub(crate) mod page;
pub(crate) mod page_index;
pub mod page_reclaim;
pub(crate) mod pcp_ref;
pub mod rcu;
pub mod refcount;
pub mod seqcount;

#[cfg(all(test, uvfs_loom))]
mod tests;

#[cfg(all(feature = "audit", uvfs_loom))]
compile_error!(
    "the audit build (feature `audit`) and the loom models (--cfg uvfs_loom) exclude each other"
);

/// The atomics and locks of uvfs outside the loom models: `std`'s, or in an audit build
/// (feature `audit`) [`audit`]'s recording wrappers of them.
#[allow(unused_imports)] // each build uses a different subset
pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::Ordering;
    #[cfg(not(feature = "audit"))]
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize,
    };
    #[cfg(not(feature = "audit"))]
    pub(crate) use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

    #[cfg(feature = "audit")]
    pub(crate) use super::audit::{
        fence, AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize,
        Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
    };
}

#[cfg(not(uvfs_loom))]
pub(crate) use atomic::{fence, AtomicPtr, AtomicU64, Mutex, MutexGuard, Ordering};

#[cfg(uvfs_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};
#[cfg(uvfs_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

pub(crate) use atomic::{RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(uvfs_loom)]
pub(crate) use loom::cell::{MutPtr, UnsafeCell};

/// `std::cell::UnsafeCell` with loom's access API (`with`, `with_mut`), so that under
/// `--cfg uvfs_loom` loom checks every access to a cell a protocol shares between threads
/// (a FUSE request's header, `fuse/client/request.rs`) for a data race.
#[cfg(not(uvfs_loom))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(uvfs_loom))]
impl<T> UnsafeCell<T> {
    /// A cell holding `v`.
    pub(crate) const fn new(v: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(v))
    }

    /// Calls `f` with a pointer for reading. The caller's protocol makes the read
    /// race-free (loom checks it in the models).
    #[inline]
    #[cfg_attr(feature = "audit", track_caller)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(feature = "audit")]
        audit::touch(self.0.get(), false, false);
        f(self.0.get())
    }

    /// Calls `f` with a pointer for writing, as [`with`](Self::with).
    #[allow(dead_code)] // loom's API; today only the loom build writes a shared cell
    #[inline]
    #[cfg_attr(feature = "audit", track_caller)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(feature = "audit")]
        audit::touch(self.0.get(), true, false);
        f(self.0.get())
    }

    /// A pointer for writing that may be kept (loom's `get_mut`: under `--cfg uvfs_loom`
    /// the access lasts, for loom's race check, until the `MutPtr` is dropped).
    #[inline]
    #[cfg_attr(feature = "audit", track_caller)]
    pub(crate) fn get_mut(&self) -> MutPtr<T> {
        #[cfg(feature = "audit")]
        audit::touch(self.0.get(), true, false);
        MutPtr(self.0.get())
    }
}

/// A kept write access to an [`UnsafeCell`] (loom's `MutPtr`).
#[cfg(not(uvfs_loom))]
#[derive(Debug)]
pub(crate) struct MutPtr<T>(*mut T);

#[cfg(not(uvfs_loom))]
impl<T> MutPtr<T> {
    /// The value, mutably.
    ///
    /// # Safety
    /// No other access to the cell overlaps the use of the result (the caller's protocol:
    /// a lock, or a single owner).
    #[inline]
    #[allow(clippy::mut_from_ref)] // loom's signature; the `# Safety` contract makes it unique
    pub(crate) unsafe fn deref(&self) -> &mut T {
        // SAFETY: the pointer came from a live cell (the `MutPtr` borrows nothing, so the
        // caller keeps the cell alive); exclusivity is the caller's contract.
        unsafe { &mut *self.0 }
    }
}

/// `std` atomics and locks for the parts of uvfs the loom models do not explore (inodes,
/// dentries, directories): keeping them out of loom keeps the models' state space small.
pub(crate) mod plain {
    /// The FUSE server's handle count (`fuse/handles.rs`).
    #[cfg(feature = "fuse")]
    pub(crate) use super::atomic::AtomicI64;
    pub(crate) use super::atomic::{
        AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Mutex, MutexGuard, Ordering,
    };
}

/// A mutex and the condition variable that waits with it, for sleeping waits (a file
/// lock's waiters, locks.rs): `std`'s in every build, since a `Condvar` waits only with
/// `std`'s own `Mutex` (the audit build does not record them; the loom models do not
/// explore them). The FUSE client's request reply slot uses the same pair
/// (fuse/client/request.rs).
pub(crate) mod wait {
    pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

    /// Locks `m`, ignoring poisoning (see [`super::lock`]).
    #[inline]
    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A mutex and condition variable that the loom models explore: `std`'s, or loom's under
/// `--cfg uvfs_loom` (not recorded by the audit build). For sleeps that are part of a
/// protocol a model checks for lost wake-ups: the FUSE client's request reply slot and its
/// leader/follower receive (fuse/client/request.rs, leader.rs). Loom's `wait_timeout` never
/// times out.
pub(crate) mod cv {
    #[cfg(uvfs_loom)]
    pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
    #[cfg(not(uvfs_loom))]
    pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

    /// Locks `m`, ignoring poisoning (see [`super::lock`]).
    #[inline]
    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Locks a `plain::Mutex`, ignoring poisoning (see [`lock`]).
#[inline]
#[cfg_attr(feature = "audit", track_caller)]
pub(crate) fn plock<T>(m: &plain::Mutex<T>) -> plain::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Epoch-based reclamation (the RCU of uvfs): readers `pin()`, writers publish with
/// `Atomic::swap`/`store` and retire with `Guard::defer_destroy`.
pub(crate) use crossbeam_epoch as epoch;

/// Locks `m`, ignoring poisoning: no uvfs critical section leaves its data inconsistent when
/// it panics (each one either completes or changes nothing), so a poisoned lock's data is
/// still valid.
#[inline]
#[cfg_attr(feature = "audit", track_caller)]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Read-locks `l`, ignoring poisoning (see [`lock`]).
#[inline]
#[cfg_attr(feature = "audit", track_caller)]
pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    match l.read() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Write-locks `l`, ignoring poisoning (see [`lock`]).
#[inline]
#[cfg_attr(feature = "audit", track_caller)]
pub(crate) fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    match l.write() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Runs the calling thread's deferred frees (crossbeam-epoch's: retired dentries, inodes,
/// pages, a removed directory's settle) until `done` returns true, for at most `timeout`;
/// returns `done()`'s last answer. For tests and embedders that check that what they dropped
/// is gone (weak references, memory): a free waits until every thread pinned when it was
/// retired has unpinned, and another thread may stay pinned for a while (a call blocked on
/// a FUSE server or a host file system), so this keeps flushing, sleeping 100 us every 64
/// tries, rather than trusting a fixed count.
pub fn flush_deferred_until(done: impl Fn() -> bool, timeout: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    for i in 0u64.. {
        if done() {
            return true;
        }
        if start.elapsed() >= timeout {
            break;
        }
        epoch::pin().flush();
        if i % 64 == 63 {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
    done()
}
