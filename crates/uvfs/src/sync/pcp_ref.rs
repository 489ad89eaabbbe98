//! `PcpCount` and `PcpRef`: a reference count split into per-thread shards, so that taking
//! and dropping a reference writes only the calling thread's cache line, with the detach
//! protocol that makes the sum exact once the object has left its tree.
//!
//! Linux analogue: the mount count (`mnt_pcp->mnt_count`, fs/namespace.c: `mnt_add_count`,
//! `mnt_get_count`, `mntput_no_expire`, `__legitimize_mnt`, `MNT_SYNC_UMOUNT`,
//! `MNT_DOOMED`) and the mount writer count (`mnt_writers`, `mnt_hold_writers`,
//! `__mnt_want_write`, `MNT_WRITE_HOLD`). uvfs uses it for `Mount`: every open `File` and
//! every task root and cwd holds its mount, and a plain shared count there would be one
//! namespace-wide line written by every open and close; and for a directory's count of its
//! children's links (dentry.rs `ParentLink`, `Dir::child_refs`), where a plain count was
//! the line every thread creating and removing names in the directory wrote.
//!
//! # The protocol
//! Each shard is a wrapping `u64`: references in units of [`REF`] (low 32 bits), writers in
//! units of [`WRITER`] (high 32 bits).
//! A shard may go "negative" (a reference taken on one thread and dropped on another); only
//! the sum over all shards means anything.
//!
//! While the object is *attached* (its tree holds it), puts are one `fetch_sub` on the
//! caller's shard; nobody sums, except [`PcpCount::busy_check`] (umount without
//! `MNT_DETACH`), which is as approximate as Linux's (`propagate_mount_busy` sums per-CPU
//! counts that other CPUs change): a reference cloned and its parent dropped on two other
//! threads during the sum may be missed. That only decides `EBUSY`; memory safety never
//! rests on an attached sum.
//!
//! [`detach`](PcpCount::detach) sets `DETACHED`; the caller then waits one grace period
//! (an epoch: every put pinned before it has finished its decrement) and calls
//! [`settle`](PcpCount::settle), which sets `SETTLED` and takes the first exact sum. From then
//! on every put sees `DETACHED` and decrements under `lock`, so a locked sum never sees a
//! decrement without the increments that happened before it: a reference is cloned only from
//! a live one, whose decrement comes later under the same lock. The put (or settle) whose
//! sum reads zero references sets `DOOMED` and the owner releases the object, exactly once.
//!
//! A reference taken from a borrowed pointer (a walk that crossed into a mount under the
//! epoch, holding nothing) is [`try_get`](PcpCount::try_get_on): increment, then read the
//! state; if a summer has raised `SYNC` (umount checking, or a locked sum about to free) or
//! `DOOMED`, the increment may have been missed, so it is undone under the lock; the caller
//! (`Mount::get_ref`) waits for `SYNC` to drop and takes the reference then (on a mount a
//! racing umount may have detached meanwhile, which the exact sum counts), and gives up on a
//! `DOOMED` one. Increment-then-read against set-`SYNC`-then-sum is a Dekker
//! pair (both `SeqCst`): either the sum sees the increment or the getter sees `SYNC`.
//! Writers do the same against `WRITE_HOLD` (making a mount read-only).
//!
//! Loom models: sync/tests/loom_pcp_ref.rs.

use super::padded::CacheLine;
use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// The atomic word of a [`PcpCount`]: `std`'s in uvfs, loom's in the loom models (a mount
/// must not hold loom objects: its table snapshots are dropped by the epoch collector,
/// outside the model execution that made them).
pub(crate) trait Word: Send + Sync + 'static {
    /// A word holding `v`.
    fn new(v: u64) -> Self;
    /// `load`.
    fn load(&self, o: Ordering) -> u64;
    /// `store`.
    fn store(&self, v: u64, o: Ordering);
    /// `fetch_add`.
    fn fetch_add(&self, v: u64, o: Ordering) -> u64;
    /// `fetch_sub`.
    fn fetch_sub(&self, v: u64, o: Ordering) -> u64;
    /// `fetch_or`.
    fn fetch_or(&self, v: u64, o: Ordering) -> u64;
    /// `fetch_and`.
    fn fetch_and(&self, v: u64, o: Ordering) -> u64;
}

macro_rules! impl_word {
    ($t:ty) => {
        impl Word for $t {
            fn new(v: u64) -> Self {
                <$t>::new(v)
            }
            #[inline]
            fn load(&self, o: Ordering) -> u64 {
                <$t>::load(self, o)
            }
            #[inline]
            fn store(&self, v: u64, o: Ordering) {
                <$t>::store(self, v, o)
            }
            #[inline]
            fn fetch_add(&self, v: u64, o: Ordering) -> u64 {
                <$t>::fetch_add(self, v, o)
            }
            #[inline]
            fn fetch_sub(&self, v: u64, o: Ordering) -> u64 {
                <$t>::fetch_sub(self, v, o)
            }
            #[inline]
            fn fetch_or(&self, v: u64, o: Ordering) -> u64 {
                <$t>::fetch_or(self, v, o)
            }
            #[inline]
            fn fetch_and(&self, v: u64, o: Ordering) -> u64 {
                <$t>::fetch_and(self, v, o)
            }
        }
    };
}
impl_word!(super::atomic::AtomicU64);
#[cfg(uvfs_loom)]
impl_word!(loom::sync::atomic::AtomicU64);

/// The word and lock types of a [`PcpCount`] ([`Std`] in uvfs; `Loom` in the models).
pub(crate) trait Family: Send + Sync + 'static {
    /// The atomic word.
    type W: Word;
    /// The lock.
    type L: Send + Sync + 'static;
    /// A new lock.
    fn new_lock() -> Self::L;
    /// Takes the lock (ignoring poisoning, see `sync::lock`).
    fn lock(l: &Self::L) -> impl Sized + '_;
    /// The Dekker pairs' fence between a write and the read of the other side's word. The
    /// `SeqCst` read-modify-writes and loads are already totally ordered in C11 (and a
    /// locked instruction is a full barrier on x86), so `std` needs nothing; loom models
    /// `SeqCst` accesses only as `AcqRel` (its README) and gets a `SeqCst` fence, which it
    /// does model.
    fn dekker_fence();
}

/// `std` atomics and lock: what uvfs runs.
#[derive(Debug)]
pub(crate) struct Std;

impl Family for Std {
    type W = super::atomic::AtomicU64;
    type L = super::plain::Mutex<()>;
    fn new_lock() -> Self::L {
        super::plain::Mutex::new(())
    }
    fn lock(l: &Self::L) -> impl Sized + '_ {
        super::plock(l)
    }
    #[inline]
    fn dekker_fence() {}
}

/// loom atomics and lock: the models in sync/tests/loom_pcp_ref.rs.
#[cfg(uvfs_loom)]
#[derive(Debug)]
pub(crate) struct Loom;

#[cfg(uvfs_loom)]
impl Family for Loom {
    type W = loom::sync::atomic::AtomicU64;
    type L = loom::sync::Mutex<()>;
    fn new_lock() -> Self::L {
        loom::sync::Mutex::new(())
    }
    fn lock(l: &Self::L) -> impl Sized + '_ {
        super::lock(l)
    }
    fn dekker_fence() {
        // SeqCst: the fence loom does model (see the trait doc).
        loom::sync::atomic::fence(Ordering::SeqCst);
    }
}

/// Takes `l` (a helper so the call sites read as `lock::<F>(&self.lock)`).
fn lock<F: Family>(l: &F::L) -> impl Sized + '_ {
    F::lock(l)
}

/// One reference.
pub(crate) const REF: u64 = 1;
/// One writer (Linux's `mnt_get_write_access` for an open for writing; the open's file
/// holds a [`REF`] too, taken separately).
pub(crate) const WRITER: u64 = 1 << 32;

/// The owner's flags: the low 32 bits of the state word (for `Mount`: `MountFlags`), set by
/// [`PcpCount::set_flags`].
pub(crate) const FLAGS_MASK: u64 = 0xffff_ffff;
/// The flag bit that refuses writers ([`PcpCount::try_get_on`] with [`WRITER`]).
pub(crate) const F_RDONLY: u64 = 1;
/// Left its tree: puts take the slow path.
const DETACHED: u64 = 1 << 32;
/// A summer is counting: a borrowed get must back off.
const SYNC: u64 = 1 << 33;
/// Released (the count reached zero after detach); never cleared.
const DOOMED: u64 = 1 << 34;
/// One grace period has passed since `DETACHED`: locked sums are exact.
const SETTLED: u64 = 1 << 35;
/// Making the object read-only: a writer must back off (`MNT_WRITE_HOLD`).
const WRITE_HOLD: u64 = 1 << 36;

/// Shard count: the machine's parallelism rounded up to a power of two, at most 64.
fn nr_shards() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .next_power_of_two()
            .min(64)
    })
}

/// The calling thread's shard number (any `usize`; `PcpCount` masks it).
#[inline]
pub(crate) fn this_shard() -> usize {
    std::thread_local! {
        static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    SHARD.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        // Relaxed: a round-robin number; only its spread matters.
        let v = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        s.set(v);
        v
    })
}

/// What a borrowed get found (see [`PcpCount::try_get_on`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TryGet {
    /// The reference is taken.
    Got,
    /// Not taken: a summer was counting or the object is released; walk again.
    Retry,
    /// Not taken: a writer was asked for and the object is read-only (`EROFS`).
    ReadOnly,
    /// Not taken: the object was released (its last reference went after it was detached);
    /// it never comes back. Only a caller that held the object by other means than the
    /// count (an `Arc` across an unpinned gap) can see this.
    Gone,
}

/// A sharded reference count with a state word (see the module doc).
pub(crate) struct PcpCount<F: Family = Std> {
    /// Owner's flags (low 32 bits) and the protocol bits. Written only under `lock`, read
    /// by every borrowed get, put and flag check.
    state: F::W,
    /// Serialises summers, state changes and (after detach) every put.
    lock: F::L,
    /// One line per shard.
    shards: Box<[CacheLine<F::W>]>,
}

impl<F: Family> std::fmt::Debug for PcpCount<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Relaxed: a diagnostic snapshot.
        let s = self.state.load(Ordering::Relaxed);
        f.debug_struct("PcpCount")
            .field("state", &format_args!("{s:#x}"))
            .finish()
    }
}

impl PcpCount<Std> {
    /// No references, attached, flags `flags` (low 32 bits).
    pub(crate) fn new(flags: u64) -> PcpCount<Std> {
        Self::with_shards(flags, nr_shards())
    }

    /// As [`new`](Self::new) with at most `max` shards (a power of two): for objects made
    /// by the million (a directory's count of its children's links, dentry.rs
    /// `ParentLink`), whose memory a line per thread of a large machine would multiply.
    /// More threads than shards share them (an atomic add on a line two threads write).
    pub(crate) fn with_at_most(flags: u64, max: usize) -> PcpCount<Std> {
        Self::with_shards(flags, nr_shards().min(max))
    }
}

impl<F: Family> PcpCount<F> {
    /// As [`new`](Self::new) with `n` shards (a power of two; loom models use 2).
    pub(crate) fn with_shards(flags: u64, n: usize) -> PcpCount<F> {
        debug_assert!(n.is_power_of_two());
        PcpCount {
            state: F::W::new(flags & FLAGS_MASK),
            lock: F::new_lock(),
            shards: (0..n).map(|_| CacheLine(F::W::new(0))).collect(),
        }
    }

    #[inline]
    fn shard(&self, i: usize) -> &F::W {
        &self.shards[i & (self.shards.len() - 1)]
    }

    /// The owner's flags.
    #[inline]
    pub(crate) fn flags(&self) -> u64 {
        // Relaxed: flags are independent words read as a snapshot (Linux reads
        // `mnt_flags` plainly); writers are ordered by the Dekker pairs, not by this.
        self.state.load(Ordering::Relaxed) & FLAGS_MASK
    }

    /// Adds `units` from a reference the caller holds (`mntget`): the count cannot be
    /// zero, so no check is needed.
    #[inline]
    pub(crate) fn inc_on(&self, i: usize, units: u64) {
        // Relaxed: the caller's reference keeps the object alive; a locked sum sees this
        // increment because the parent reference's decrement comes after it, under the
        // lock the summer takes (module doc).
        self.shard(i).fetch_add(units, Ordering::Relaxed);
    }

    /// Takes `units` from a borrowed pointer (`__legitimize_mnt`): the caller is pinned and
    /// reached the object through its tree (or a pointer retired through the epoch), or
    /// holds it allocated by other means (a directory's child count, dentry.rs
    /// `ParentLink`: an `Arc` of the directory).
    /// On [`TryGet::Retry`] or [`TryGet::ReadOnly`] nothing is held; `release` is true when
    /// undoing made this the last reference of a detached object (the caller releases it).
    #[inline]
    pub(crate) fn try_get_on(&self, i: usize, units: u64) -> (TryGet, bool) {
        // SeqCst (both): the increment and the state read are one side of the Dekker pair
        // with a summer's set-SYNC-then-sum (`busy_check`, `check_zero`) and with
        // `set_flags`' set-WRITE_HOLD-then-sum: either it sees this increment or we see
        // its flag.
        self.shard(i).fetch_add(units, Ordering::SeqCst);
        F::dekker_fence();
        let s = self.state.load(Ordering::SeqCst);
        let writer = if units & WRITER != 0 {
            WRITE_HOLD | F_RDONLY
        } else {
            0
        };
        if s & (SYNC | DOOMED | writer) == 0 {
            return (TryGet::Got, false);
        }
        self.refuse(i, units, s)
    }

    /// [`try_get_on`](Self::try_get_on) refused (state `s`): undoes the increment.
    #[cold]
    fn refuse(&self, i: usize, units: u64, s: u64) -> (TryGet, bool) {
        let refused = if s & DOOMED != 0 {
            TryGet::Gone
        } else if s & SYNC != 0 || units & WRITER != 0 && s & WRITE_HOLD != 0 {
            TryGet::Retry
        } else {
            TryGet::ReadOnly
        };
        let release = self.put_slow_on(i, units);
        (refused, release)
    }

    /// Puts `units` (`mntput`). The caller must be pinned (an epoch guard, or the loom
    /// model's read lock) from before this call until it returns, so that `settle` runs
    /// after every put that saw the object attached. True when this was the last reference
    /// of a detached, settled object: the caller releases it.
    #[inline]
    pub(crate) fn put_on(&self, i: usize, units: u64) -> bool {
        // Acquire: pairs with `detach`'s SeqCst store (the grace period does the rest: a
        // put that reads "attached" finishes before `settle` sums).
        if self.state.load(Ordering::Acquire) & DETACHED == 0 {
            // Release: our uses of the object happen before whatever a later summer decides
            // (it acquires the lock after the grace period, which orders this too).
            self.shard(i).fetch_sub(units, Ordering::Release);
            return false;
        }
        self.put_slow_on(i, units)
    }

    /// Puts `units` under the lock (the detached path, and a borrowed get backing off).
    #[cold]
    fn put_slow_on(&self, i: usize, units: u64) -> bool {
        let _g = lock::<F>(&self.lock);
        // SeqCst: ordered with the locked sums by the lock; SeqCst for the Dekker reads of
        // a concurrent borrowed get.
        self.shard(i).fetch_sub(units, Ordering::SeqCst);
        F::dekker_fence();
        // Relaxed: DETACHED, SETTLED and DOOMED change only under the lock we hold.
        let s = self.state.load(Ordering::Relaxed);
        if s & (DETACHED | SETTLED) != DETACHED | SETTLED || s & DOOMED != 0 {
            return false;
        }
        self.check_zero_locked()
    }

    /// The sum of all shards: (references, writers). Exact only under the conditions in the
    /// module doc.
    fn sum(&self) -> (u64, u64) {
        let mut t = 0u64;
        for s in self.shards.iter() {
            // SeqCst: the summer's side of the Dekker pairs (see `try_get_on`).
            t = t.wrapping_add(s.load(Ordering::SeqCst));
        }
        (t & 0xffff_ffff, t >> 32)
    }

    /// Under the lock: raises SYNC, sums, and dooms the object if no reference is left.
    fn check_zero_locked(&self) -> bool {
        // SeqCst: see `try_get_on`.
        self.state.fetch_or(SYNC, Ordering::SeqCst);
        F::dekker_fence();
        if self.sum().0 == 0 {
            // SeqCst: a borrowed get reading DOOMED backs off (it also sees SYNC).
            self.state.fetch_or(DOOMED, Ordering::SeqCst);
            return true;
        }
        // SeqCst: as the set above.
        self.state.fetch_and(!SYNC, Ordering::SeqCst);
        false
    }

    /// Whether more than `allowed` references are held (`propagate_mount_busy`), with
    /// borrowed gets held off while counting. Attached objects only; approximate as the
    /// module doc says.
    pub(crate) fn busy_check(&self, allowed: u64) -> bool {
        let _g = lock::<F>(&self.lock);
        // SeqCst: see `try_get_on`.
        self.state.fetch_or(SYNC, Ordering::SeqCst);
        F::dekker_fence();
        let busy = self.sum().0 > allowed;
        if busy {
            // SeqCst: as the set above.
            self.state.fetch_and(!SYNC, Ordering::SeqCst);
        }
        // When not busy, SYNC stays up until `detach` (the caller's next step, under its own
        // lock): a borrowed get in between backs off and walks again (MNT_SYNC_UMOUNT).
        busy
    }

    /// Lowers the SYNC a successful `busy_check` left up (the caller decided not to detach).
    pub(crate) fn end_sync(&self) {
        let _g = lock::<F>(&self.lock);
        // SeqCst: as in `busy_check`.
        self.state.fetch_and(!SYNC, Ordering::SeqCst);
    }

    /// Marks the object detached (its tree dropped it). The caller waits one grace period
    /// and then calls [`settle`](Self::settle).
    pub(crate) fn detach(&self) {
        let _g = lock::<F>(&self.lock);
        // SeqCst: puts read it with Acquire; SYNC from a successful busy check is lowered:
        // borrowed gets that now see only DETACHED take a reference on a detached object,
        // which the settle sum counts.
        let s = self.state.load(Ordering::Relaxed);
        self.state.store((s | DETACHED) & !SYNC, Ordering::SeqCst);
    }

    /// After a grace period since [`detach`](Self::detach): the first exact sum. True when
    /// no reference is left: the caller releases the object.
    pub(crate) fn settle(&self) -> bool {
        let _g = lock::<F>(&self.lock);
        // Relaxed: under the lock.
        let s = self.state.load(Ordering::Relaxed);
        debug_assert!(s & DETACHED != 0);
        if s & DOOMED != 0 {
            return false;
        }
        // SeqCst: as the other state changes.
        self.state.fetch_or(SETTLED, Ordering::SeqCst);
        self.check_zero_locked()
    }

    /// Replaces the owner's flags with `flags`. Turning [`F_RDONLY`] on while writers are
    /// held is refused (`false`), as Linux's `mnt_make_readonly` gives `EBUSY`.
    pub(crate) fn set_flags(&self, flags: u64) -> bool {
        let _g = lock::<F>(&self.lock);
        // Relaxed: the state changes only under the lock we hold.
        let s = self.state.load(Ordering::Relaxed);
        if flags & F_RDONLY != 0 && s & F_RDONLY == 0 {
            // SeqCst: the Dekker pair with a writer's increment-then-read.
            self.state.fetch_or(WRITE_HOLD, Ordering::SeqCst);
            F::dekker_fence();
            if self.sum().1 > 0 {
                // SeqCst: as above.
                self.state.fetch_and(!WRITE_HOLD, Ordering::SeqCst);
                return false;
            }
        }
        // Relaxed: under the lock; the store below is SeqCst: it publishes the flags and
        // lowers WRITE_HOLD in one store.
        let s = self.state.load(Ordering::Relaxed);
        let new = (s & !FLAGS_MASK & !WRITE_HOLD) | (flags & FLAGS_MASK);
        self.state.store(new, Ordering::SeqCst);
        true
    }

    /// Whether the object is detached.
    pub(crate) fn is_detached(&self) -> bool {
        // Relaxed: a snapshot for listings and checks made under the owner's own lock.
        self.state.load(Ordering::Relaxed) & DETACHED != 0
    }
}

/// An object counted by a [`PcpCount`] and held by [`PcpRef`]s.
///
/// # Safety
/// The object stays allocated while any `PcpRef` to it exists: only
/// [`release`](PcpCounted::release), called once when the count says the last reference is
/// gone, may let its memory go (and then only after the caller's grace period, as a pinned
/// borrower may still read the count).
pub(crate) unsafe trait PcpCounted: Send + Sync + 'static {
    /// The count.
    fn pcp(&self) -> &PcpCount;
    /// The last reference of the detached object is gone: let the owner's hold go.
    ///
    /// # Safety
    /// `this` is the object whose count just said so (once per object); no reference to it
    /// is live in the caller (the release may free it).
    unsafe fn release(this: NonNull<Self>);
}

/// A counted reference to a `T` (Linux: a `struct vfsmount *` holding `mnt_count`, and for
/// a writer also `mnt_writers`).
pub(crate) struct PcpRef<T: PcpCounted> {
    ptr: NonNull<T>,
    units: u64,
}

// SAFETY: a shared reference plus a count, like `Arc<T>`; `T: Send + Sync`.
unsafe impl<T: PcpCounted> Send for PcpRef<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: PcpCounted> Sync for PcpRef<T> {}

impl<T: PcpCounted> PcpRef<T> {
    /// Takes a reference (`units`: [`REF`] or [`WRITER`]) on `t`, borrowed under `_guard`.
    ///
    /// # Safety
    /// `t` is allocated until `_guard` unpins: reached while pinned through a tree that held
    /// it or a `PcpRef` alive at the time, or held by the caller by other means (an `Arc`).
    /// A released object refuses ([`TryGet::Gone`]).
    #[inline]
    pub(crate) unsafe fn try_get(
        ptr: NonNull<T>,
        units: u64,
        _guard: &crossbeam_epoch::Guard,
    ) -> Result<PcpRef<T>, TryGet> {
        // SAFETY: allocated while the guard is pinned (caller's contract).
        let got = unsafe { ptr.as_ref() }
            .pcp()
            .try_get_on(this_shard(), units);
        match got {
            (TryGet::Got, _) => Ok(PcpRef { ptr, units }),
            (other, release) => {
                if release {
                    // SAFETY: our undo was the last put of the detached object; the borrow
                    // above has ended.
                    unsafe { T::release(ptr) };
                }
                Err(other)
            }
        }
    }

    /// Makes this reference also carry `units` the caller took on the same count (a
    /// writer), so that its drop gives both back in one decrement.
    pub(crate) fn absorb(&mut self, units: u64) {
        self.units += units;
    }

    /// Drops this reference under the caller's pin `_guard`, a real one (not
    /// `unprotected`): `drop` pins on its own, and a nested pin costs a thread-local lookup
    /// and a counter.
    #[inline]
    pub(crate) fn put(self, _guard: &crossbeam_epoch::Guard) {
        let this = std::mem::ManuallyDrop::new(self);
        // The caller's guard pins us from before the put until it returns (`put_on`).
        if this.pcp().put_on(this_shard(), this.units) {
            // SAFETY: our put was the last of the detached object; no borrow of it is live
            // (`this` is not dropped).
            unsafe { T::release(this.ptr) };
        }
    }

    /// A plain reference from this one (`mntget`).
    pub(crate) fn get(&self) -> PcpRef<T> {
        self.pcp().inc_on(this_shard(), REF);
        PcpRef {
            ptr: self.ptr,
            units: REF,
        }
    }
}

impl<T: PcpCounted> std::ops::Deref for PcpRef<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: we hold a reference, so the object is allocated (PcpCounted's contract).
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: PcpCounted> Clone for PcpRef<T> {
    fn clone(&self) -> Self {
        self.get()
    }
}

impl<T: PcpCounted> Drop for PcpRef<T> {
    #[inline]
    fn drop(&mut self) {
        // The put must be pinned (see `PcpCount::put_on`); a nested pin costs a counter.
        let _g = crossbeam_epoch::pin();
        if self.pcp().put_on(this_shard(), self.units) {
            // SAFETY: our put was the last of the detached object; no borrow of it is live.
            unsafe { T::release(self.ptr) };
        }
    }
}

impl<T: PcpCounted + std::fmt::Debug> std::fmt::Debug for PcpRef<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}
