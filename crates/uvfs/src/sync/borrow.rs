//! Borrow slots: a task says "I am using the object at `p`" in a slot on its own cache line
//! instead of taking a reference on `p`'s shared counter; whoever drops the reference that
//! kept `p` alive for the borrower first pays the borrower's debt by turning it into a real
//! reference.
//!
//! Linux analogue: none; Linux's `fget` on a shared table increments `f_count`. The scheme is
//! hazard pointers (M. Michael, "Hazard Pointers", IEEE TPDS 2004) with arc-swap's debt
//! payment (`arc_swap::debt`): a remover does not wait for borrowers, it hands them a
//! reference, so the last `fput` runs exactly when it would with counted `fget`s (after the
//! borrowing call ends) and removal never blocks.
//!
//! # Protocol (for one container slot `c` and one borrow slot `s`)
//! Borrower: `p = c.load()`; [`publish`](BorrowSlots::publish) `s = p` (SeqCst store);
//! re-check `c.load() == p` (SeqCst); on a mismatch [`Borrow::release`] and
//! retry. While `s` holds `p`, `p` is alive. [`Borrow::release`] swaps `s`
//! to 0 and tells whether the borrow was paid (then the borrower owns one reference).
//!
//! Remover (holding the container's reference on `p`, which it is about to drop):
//! `c.store(null)`; SeqCst fence; [`pay`](BorrowSlots::pay) every borrow slot that holds `p`
//! (one new reference each, moved into the slot by a CAS `p -> p | PAID`); then drop its
//! own reference.
//!
//! Why it is enough: the borrower's store-then-load and the remover's store-then-load are a
//! Dekker pair under SeqCst: either the borrower's re-check sees the removal (it retries
//! without touching `p`), or the remover's scan sees the borrow (it pays before dropping its
//! reference, so `p` stays alive for the borrower). A borrower that publishes `p` only after
//! `p` was freed and its address reused fails its re-check unless the container now holds the
//! new object at that address, which it then has validly borrowed.

#[cfg(not(uvfs_loom))]
use super::atomic::AtomicUsize;
use super::Ordering;
#[cfg(uvfs_loom)]
use loom::sync::atomic::AtomicUsize;

/// Borrow slots per task: a call borrows at most this many descriptors at once without
/// falling back to counted references (a walk's dirfd and one more is the common most).
pub const SLOTS: usize = 4;

/// The low bit of a slot: the borrow was paid (the slot's owner now holds a reference).
/// Objects are at least 2-byte aligned, so the bit is free.
const PAID: usize = 1;

/// One task's borrow slots, on a cache line of their own: only the owner writes a free slot,
/// removers write only a slot that holds the object they remove.
#[repr(align(64))]
#[derive(Debug)]
pub struct BorrowSlots {
    slots: [AtomicUsize; SLOTS],
}

// The slots fill one line (SLOTS * 8 bytes <= 64), which the alignment makes their own.
#[cfg(not(uvfs_loom))]
const _: () = assert!(std::mem::size_of::<BorrowSlots>() == 64);

impl Default for BorrowSlots {
    fn default() -> Self {
        BorrowSlots {
            slots: std::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }
}

impl BorrowSlots {
    /// Publishes a borrow of `p` (not null, even) in a free slot and returns it, or `None`
    /// if all are in use. Context: called by the slots' owner only.
    ///
    /// Ordering: the free-slot test is Relaxed (only the owner makes a slot non-zero, and a
    /// remover's write leaves it non-zero); the publication is SeqCst: the store half of the
    /// borrower's Dekker pair with [`pay`](Self::pay)'s caller (its SeqCst fence after the
    /// removal); the caller's re-check must be a SeqCst load.
    #[inline]
    pub fn publish(&self, p: usize) -> Option<Borrow<'_>> {
        debug_assert!(p != 0 && p & PAID == 0);
        for s in &self.slots {
            // Relaxed: see the doc comment.
            if s.load(Ordering::Relaxed) == 0 {
                // SeqCst: the Dekker store, pairing with the remover's SeqCst fence before
                // its scan in `pay`.
                s.store(p, Ordering::SeqCst);
                // loom models SeqCst accesses only as AcqRel (its README); the SeqCst fence it
                // does model stands in for the store's place in the single total order.
                #[cfg(uvfs_loom)]
                super::fence(Ordering::SeqCst);
                return Some(Borrow { slot: s });
            }
        }
        None
    }

    /// Remover side: turns every borrow of `p` in these slots into a real reference, calling
    /// `get` once per borrow found (it must add a reference on `p`; the caller holds one, so
    /// it cannot fail) and `put` for each one not taken because the borrower released
    /// first (the caller's own reference keeps it from being the last). Returns the number
    /// paid.
    ///
    /// Context: the caller has removed `p` from the container the borrowers re-check and then
    /// issued a SeqCst fence ([`removal_fence`]), and still holds its reference on `p`.
    ///
    /// Ordering: the slot loads are Acquire (a borrower's release, read here as 0, orders its
    /// reads of `p` before the caller's later drop); the CAS is Release on success (pairs with
    /// the Acquire of [`Borrow::release`]: the reference `get` added is the
    /// borrower's) and Relaxed on failure (the borrower released; nothing was handed over).
    pub fn pay(&self, p: usize, get: impl Fn(), put: impl Fn()) -> usize {
        let mut paid = 0;
        for s in &self.slots {
            // Acquire: see the doc comment.
            if s.load(Ordering::Acquire) != p {
                continue;
            }
            get();
            // Release on success / Relaxed on failure: see the doc comment.
            match s.compare_exchange(p, p | PAID, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => paid += 1,
                Err(_) => put(),
            }
        }
        paid
    }

    /// Whether every slot is free (a snapshot, for tests and debug checks).
    pub fn is_idle(&self) -> bool {
        self.slots
            .iter()
            // Relaxed: a snapshot.
            .all(|s| s.load(Ordering::Relaxed) == 0)
    }
}

/// One published borrow: a slot of a task's [`BorrowSlots`] naming the object.
#[derive(Debug)]
pub struct Borrow<'a> {
    slot: &'a AtomicUsize,
}

impl Borrow<'_> {
    /// The borrowed object's address.
    ///
    /// Ordering: Relaxed: the owner wrote the slot itself, and a remover only sets `PAID`,
    /// which the mask drops.
    #[inline]
    pub fn addr(&self) -> usize {
        // Relaxed: see the doc comment.
        self.slot.load(Ordering::Relaxed) & !PAID
    }

    /// Ends the borrow; call once. Returns `true` when a remover paid it: the caller then
    /// owns one reference on the object and must put it. Context: the slots' owner.
    ///
    /// Ordering: AcqRel swap. Release: the borrower's reads of the object happen before a
    /// remover that then reads 0 (Acquire, in `pay`) drops the last reference. Acquire: pairs
    /// with the Release CAS in `pay`, so the paid reference is ours before we put it.
    #[inline]
    #[must_use]
    pub fn release(&self) -> bool {
        // AcqRel: see the doc comment.
        self.slot.swap(0, Ordering::AcqRel) & PAID != 0
    }
}

/// The remover's SeqCst fence between removing `p` from the container and scanning borrow
/// slots ([`BorrowSlots::pay`]): the load half of its Dekker pair with
/// [`BorrowSlots::publish`].
#[inline]
pub fn removal_fence() {
    // SeqCst: the store-load pattern of the module doc (the container store above, the slot
    // loads in `pay` below), pairing with the borrower's SeqCst store and re-check.
    super::fence(Ordering::SeqCst);
}
