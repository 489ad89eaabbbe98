//! Epoch-protected pointers: `RcuCell` (a replaceable value read without writes) and
//! `RcuRef` (a counted reference to an object that lockless lookups may still be reading
//! after its last reference is gone).
//!
//! Linux analogue: `rcu_dereference`/`rcu_assign_pointer` + `kfree_rcu`, and
//! `SLAB_TYPESAFE_BY_RCU` for `struct file` (fs/file_table.c). Reclamation is
//! crossbeam-epoch: memory retired while a reader is pinned is freed only after it unpins.
//!
//! # Invariants
//! - An `RcuCell` is never null; readers pinned with a `Guard` may keep the `&'g T` they loaded
//!   until they unpin, even if the cell was replaced meanwhile.
//! - An `RcuRef<T>` owns one count of `T::file_ref()`. When the count is released, `T`'s
//!   fields are dropped at once (so resources such as inode references go away at last
//!   close, as in Linux's `__fput`), but the memory is freed only after every reader pinned at
//!   that time has unpinned: a reader that loaded a raw pointer under a pin may still call
//!   `file_ref().get()` on it, which then fails.

use super::epoch::{self, Atomic, Guard, Owned};
use super::refcount::RefCount;
use super::Ordering;
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::fmt;
use std::mem::{align_of, size_of};
use std::ops::Deref;
use std::ptr::NonNull;

/// A value readers load without writing any shared cache line; writers replace it whole.
///
/// Writers must be serialised by a lock of the caller's (the "Context" of
/// [`replace`](RcuCell::replace)).
pub struct RcuCell<T: Send + Sync + 'static> {
    ptr: Atomic<T>,
}

impl<T: Send + Sync + 'static> RcuCell<T> {
    /// A cell holding `v`.
    pub fn new(v: T) -> RcuCell<T> {
        RcuCell {
            ptr: Atomic::new(v),
        }
    }

    /// The current value, valid while `guard` is pinned.
    #[inline]
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn load<'g>(&self, guard: &'g Guard) -> &'g T {
        // Acquire: pairs with the AcqRel swap in `replace` (and the initial store in `new`,
        // published by whatever made `self` reachable): the pointee's fields are initialised.
        let p = self.ptr.load(Ordering::Acquire, guard);
        #[cfg(feature = "audit")]
        super::audit::touch(&self.ptr, false, false);
        // SAFETY: the cell is never null (INVARIANT of `new`/`replace`), and the pointee is
        // retired with `defer_destroy` only after being unlinked, so it outlives `guard`.
        unsafe { p.deref() }
    }

    /// The value, through exclusive access (no reader can hold the cell: `&mut self`).
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: the cell is never null (INVARIANT of `new`/`replace`) and owns its value;
        // `&mut self` excludes every loader and writer for the borrow's life.
        // Relaxed: exclusive access.
        unsafe {
            let p = self.ptr.load(Ordering::Relaxed, epoch::unprotected());
            &mut *(p.as_raw() as *mut T)
        }
    }

    /// Replaces the value; the old one is dropped once no pinned reader can hold it.
    ///
    /// Context: the caller serialises writers of this cell (holds the owner's lock).
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn replace(&self, v: T, guard: &Guard) {
        // AcqRel: Release publishes `v`'s fields to the Acquire load in `load`; Acquire makes
        // the old value's fields visible to its destructor here.
        let old = self.ptr.swap(Owned::new(v), Ordering::AcqRel, guard);
        #[cfg(feature = "audit")]
        super::audit::touch(&self.ptr, true, true);
        // SAFETY: `old` was the cell's value, is now unreachable from the cell (INVARIANT:
        // the cell holds the new non-null value) and is retired exactly once, by this writer.
        unsafe { guard.defer_destroy(old) };
    }
}

impl<T: Send + Sync + 'static> Drop for RcuCell<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no one can load from this cell any more. Readers that loaded
        // through a container that is now being dropped could only have reached it through a
        // reference kept alive by their own pin, so none exists (see the module invariants).
        // Relaxed: exclusive access.
        unsafe {
            let g = epoch::unprotected();
            let p = self.ptr.load(Ordering::Relaxed, g);
            if !p.is_null() {
                drop(p.into_owned());
            }
        }
    }
}

impl<T: Send + Sync + 'static + fmt::Debug> fmt::Debug for RcuCell<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = epoch::pin();
        self.load(&g).fmt(f)
    }
}

/// An object counted by a [`RefCount`] (uvfs: [`FileRef`](super::file_ref::FileRef)) and
/// found by lockless lookups.
///
/// # Safety
/// `file_ref` must always return the same count, stored inside `self`, and the object
/// must not be freed other than through [`RcuRef`].
pub unsafe trait RcuRefcounted: Send + Sync + 'static {
    /// The type of the count.
    type Ref: RefCount;

    /// The object's reference count.
    fn file_ref(&self) -> &Self::Ref;

    /// The count of the object at `this`, without forming a reference to the whole object
    /// (a lockless reader may reach an object whose other fields are being dropped).
    ///
    /// # Safety
    /// - `this` points to an allocated `Self` (possibly with its payload dropped).
    unsafe fn file_ref_raw(this: *const Self) -> *const Self::Ref;

    /// Drops every field but the count, in place (the count stays readable until the
    /// memory is freed). `guard` is the releaser's pin, for puts that must be pinned (a
    /// `File`'s mount reference), which then need no pin of their own.
    ///
    /// # Safety
    /// - The caller owns the object (its last reference was released) and calls this once.
    unsafe fn drop_payload(this: *mut Self, guard: &Guard);
}

/// A counted reference to a `T` (Linux: a `struct file *` holding one `f_ref`).
///
/// # Refcounting
/// `new` creates the object with one reference; `clone` adds one (`RefCount::inc`); `drop`
/// puts one (`RefCount::put`) and the last put drops the fields and retires the memory.
/// `into_raw`/`from_raw` move a reference into and out of a raw slot (the fd table).
pub struct RcuRef<T: RcuRefcounted> {
    ptr: NonNull<T>,
}

// SAFETY: `RcuRef<T>` is a shared reference plus a count, like `Arc<T>`; `T: Send + Sync`
// (required by `RcuRefcounted`) makes sending and sharing it sound.
unsafe impl<T: RcuRefcounted> Send for RcuRef<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: RcuRefcounted> Sync for RcuRef<T> {}

impl<T: RcuRefcounted> RcuRef<T> {
    /// The memory block of a `T`: its size, rounded up to a power of two when `T` is
    /// over-aligned (a `File`: 192 -> 256 bytes), and its alignment. Size-class allocators
    /// place a power-of-two block at a multiple of its size, so the aligned request takes
    /// their ordinary path; mimalloc serves 192 bytes at 64 by over-allocating 255 (a
    /// 256-byte block all the same) through its generic aligned path, about 150
    /// instructions per open more, and a slower free of the interior pointer.
    const LAYOUT: Layout = {
        let size = size_of::<T>();
        let size = if align_of::<T>() > 16 {
            size.next_power_of_two()
        } else {
            size
        };
        // Never zero-sized: `alloc` needs a size (`T` holds at least its count).
        let size = if size == 0 { 1 } else { size };
        match Layout::from_size_align(size, align_of::<T>()) {
            Ok(l) => l,
            Err(_) => panic!("RcuRef layout"),
        }
    };

    /// Allocates a `T` and builds it in place with `f` (no copy of the value from the
    /// stack); `f`'s value must hold exactly one reference in `file_ref()`.
    #[inline]
    pub fn new_with(f: impl FnOnce() -> T) -> RcuRef<T> {
        let layout = Self::LAYOUT;
        // SAFETY: `layout` has a nonzero size (see `LAYOUT`).
        let p = unsafe { alloc(layout) }.cast::<T>();
        let Some(ptr) = NonNull::new(p) else {
            handle_alloc_error(layout)
        };
        // SAFETY: `ptr` is a fresh block of at least `size_of::<T>()` bytes at `T`'s
        // alignment, written once before any use. If `f` panics the block leaks (nothing
        // was written; no double free).
        unsafe { ptr.as_ptr().write(f()) };
        // SAFETY: just initialised.
        debug_assert_eq!(unsafe { ptr.as_ref() }.file_ref().read(), 1);
        RcuRef { ptr }
    }

    /// Moves `v`, whose `file_ref()` must hold exactly one reference, to the heap.
    pub fn new(v: T) -> RcuRef<T> {
        Self::new_with(|| v)
    }

    /// Gives up this reference as a raw pointer (to be stored in a slot).
    pub fn into_raw(this: RcuRef<T>) -> *mut T {
        let p = this.ptr.as_ptr();
        std::mem::forget(this);
        p
    }

    /// Takes back a reference given up by [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    /// - `ptr` came from `into_raw` (or a successful [`try_get_raw`](Self::try_get_raw)) and
    ///   the reference it carries has not been taken back already.
    pub unsafe fn from_raw(ptr: *mut T) -> RcuRef<T> {
        RcuRef {
            // SAFETY: `into_raw` never returns null (caller's contract).
            ptr: unsafe { NonNull::new_unchecked(ptr) },
        }
    }

    /// Tries to take a new reference on the object at `ptr`, loaded from a slot while
    /// `_guard` was pinned. `None` when the object is already released (dying).
    ///
    /// Ordering: as `RefCount::get` (Acquire).
    ///
    /// # Safety
    /// - `ptr` was loaded, while `_guard` was (and still is) pinned, from a slot that held an
    ///   `into_raw` reference at that time.
    #[inline]
    pub unsafe fn try_get_raw(ptr: *mut T, _guard: &Guard) -> Option<RcuRef<T>> {
        // SAFETY: the memory of an object reachable from a slot while we were pinned is freed
        // only by the deferred free of `release` after our pin ends (module invariant), so it is
        // allocated; its count is never dropped (`drop_payload` leaves it), and no reference
        // to the rest of the object is formed.
        let r = unsafe { &*T::file_ref_raw(ptr) };
        if r.get() {
            Some(RcuRef {
                // SAFETY: non-null (it was dereferenced above); the get gave us a reference.
                ptr: unsafe { NonNull::new_unchecked(ptr) },
            })
        } else {
            None
        }
    }

    /// Drops this reference as `close()` does, with `RefCount::put_close`.
    pub fn put_close(this: RcuRef<T>) {
        let ptr = this.ptr;
        std::mem::forget(this);
        // SAFETY: we own one reference on a live object.
        if unsafe { ptr.as_ref() }.file_ref().put_close() {
            // SAFETY: this put released the last reference (RefCount invariant: exactly once).
            unsafe { Self::release(ptr) };
        }
    }

    /// Whether two references point to the same object.
    pub fn ptr_eq(a: &RcuRef<T>, b: &RcuRef<T>) -> bool {
        a.ptr == b.ptr
    }

    /// The raw pointer, without giving up the reference.
    pub fn as_ptr(this: &RcuRef<T>) -> *mut T {
        this.ptr.as_ptr()
    }

    /// Releases the object: drops its fields now, frees its memory after a grace period.
    ///
    /// # Safety
    /// - The caller's put released the last reference of the object at `ptr`.
    #[cold]
    unsafe fn release(ptr: NonNull<T>) {
        // Pinned first: the payload's drop puts what must be put pinned (a `File`'s mount
        // reference) under this pin, and the memory is retired under it.
        let guard = epoch::pin();
        // SAFETY: we own the object (last reference). Dropping the other fields in place now
        // frees what they hold; concurrent `try_get_raw` callers only touch the count (through
        // `file_ref_raw`), which is not dropped and stays allocated until the deferred free.
        unsafe { T::drop_payload(ptr.as_ptr(), &guard) };
        let raw = ptr.as_ptr().cast::<u8>();
        // SAFETY: the block came from `alloc(Self::LAYOUT)` in `new_with` and is freed with
        // the same layout, without dropping `T` again (its payload is dropped; the count
        // has no drop glue). Retired once (we are the releaser); readers pinned now may
        // still read `file_ref()` until they unpin.
        unsafe { guard.defer_unchecked(move || dealloc(raw, Self::LAYOUT)) };
    }
}

impl<T: RcuRefcounted> Deref for RcuRef<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: we hold a reference, so the object is not released.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: RcuRefcounted> Clone for RcuRef<T> {
    #[inline]
    fn clone(&self) -> Self {
        self.file_ref().inc();
        RcuRef { ptr: self.ptr }
    }
}

impl<T: RcuRefcounted> Drop for RcuRef<T> {
    #[inline]
    fn drop(&mut self) {
        if self.file_ref().put() {
            // SAFETY: this put released the last reference (RefCount invariant: exactly once).
            unsafe { Self::release(self.ptr) };
        }
    }
}

impl<T: RcuRefcounted + fmt::Debug> fmt::Debug for RcuRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

/// Waits until every function the calling thread deferred (`Guard::defer`, an
/// [`RcuRef`]'s last put) before the call has run, on whichever thread collected it.
///
/// Linux analogue: `rcu_barrier()` (kernel/rcu/tree.c), narrowed to the calling thread's
/// callbacks: crossbeam-epoch keeps each thread's deferred functions in that thread's bags
/// until it seals and hands them over, so another thread's are not reached from here (each
/// thread that must be drained calls this itself). Used by the conflict audit (`uvfs bench
/// --audit`) so that the work a workload defers is counted in the loops that made it, not
/// in whichever later window the epoch happens to collect it.
///
/// How: a flush hands this thread's open bag and sealed bags to the global queue; a marker
/// deferred after that lands in a later bag, behind all of them in the queue, which is
/// collected in order ([`synchronize`] waits for the marker). Done twice, so that what
/// the first drain's functions defer in turn (an inode's drop releasing its pages) runs too.
/// The caller must not be pinned (it would wait for itself).
pub fn rcu_barrier_local() {
    for _ in 0..2 {
        epoch::pin().flush();
        synchronize();
    }
}

/// Waits one grace period (`synchronize_rcu`): returns after every thread pinned when it was
/// called has unpinned, so that whatever they read before a store the caller made earlier
/// is done with. The caller must not be pinned (it would wait for itself).
pub(crate) fn synchronize() {
    debug_assert!(
        !epoch::is_pinned(),
        "synchronize from inside a grace period"
    );
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let g = epoch::pin();
        let d = done.clone();
        // Release/Acquire: the deferred store runs after every guard pinned now is gone;
        // our Acquire load below orders what follows after it.
        g.defer(move || d.store(true, std::sync::atomic::Ordering::Release));
        g.flush();
    }
    // Acquire: pairs with the deferred Release store.
    while !done.load(std::sync::atomic::Ordering::Acquire) {
        let g = epoch::pin();
        g.flush();
        drop(g);
        std::thread::yield_now();
    }
}
