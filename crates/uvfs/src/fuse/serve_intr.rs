//! The FUSE server's side of `FUSE_INTERRUPT`: which worker serves the request an interrupt
//! names, found without a shared lock or a shared written line on the path of a request
//! that is never interrupted.
//!
//! Linux analogue: libfuse lib/fuse_lowlevel.c `do_interrupt`, `find_interrupted`,
//! `check_interrupt` (the server half); the kernel half is fs/fuse/dev.c
//! `request_wait_answer`, `queue_interrupt`, `fuse_read_interrupt`, `fuse_dev_do_write`.
//!
//! # The protocol
//! The kernel sends an interrupt for request `U` only after a server thread read `U`
//! (`FR_SENT` before `queue_interrupt`), so the interrupt may be read by another thread
//! before, while or after the worker holding `U` serves it. libfuse keeps every request in
//! a list under the session lock to find it; here each worker has a [`ServeSlot`] on its own
//! cache line:
//! - **publish** (worker, before it calls into uvfs): `serving = U` (Relaxed), a SeqCst
//!   fence, then it loads `marks`, the count of interrupts not yet matched to a request.
//!   Zero, the common case: nothing more. Otherwise (cold) under the `pending` lock it takes
//!   the interrupt for `U` if there is one and interrupts its own target.
//! - **withdraw** (worker, after uvfs returned): `serving = U | 1` ("`U` finished"), a
//!   SeqCst fence, then it loads its slot's `hit` and `marks`: both zero, the common case:
//!   nothing more. `hit`: an interrupt reached its target during `U`; under the slot's lock
//!   (after that delivery ended) it cancels what `U` left pending on its target, so that it
//!   cannot cut the next request short. `marks`: it drops a pending interrupt for `U`.
//! - **interrupt** (the thread that read `FUSE_INTERRUPT` for `U`): under `pending` it
//!   records `U` and stores `marks`, a SeqCst fence, then it scans the slots. A slot serving
//!   `U`: `U` is taken off `pending` (by whoever removes it: this thread or the worker's
//!   publish, once) and delivered: under the slot's lock `hit = 1`, a SeqCst fence, and the
//!   target is interrupted only if the slot still serves `U`. A slot saying `U | 1`: `U`
//!   finished, the interrupt is dropped (the kernel drops it too). Neither: `U` stays
//!   pending, with the values of the slots that may hold `U` unpublished: the single
//!   readers that were idle (even `U`'s holder, read but not published, looks idle) and
//!   every batch reader (see batches), with its `reads`.
//!
//! Why no interrupt is lost: publish and interrupt are the store-buffering pattern (each
//! stores, fences, loads the other's word), so with both fences SeqCst at least one sees
//! the other: the worker sees `marks` and takes `U` itself, or the scan sees `serving = U`.
//! The same holds for withdraw against a delivery (`serving = U | 1` against `hit`): either
//! the delivery sees `U` finished and interrupts nothing, or the worker sees `hit` and waits
//! for the delivery before it cancels.
//!
//! Why a pending interrupt does not stay forever (then every request would take the cold
//! path): it goes when its worker publishes `U` (taken), or when a sweep (any cold path,
//! under `pending`) finds `U | 1` in a slot (finished), or finds that every slot that may
//! hold `U` moved: a single reader idle at the scan has published since and does not serve
//! `U` (`U`'s holder, idle-looking at the scan, publishes `U` next and takes it, so a slot
//! that moved to anything else did not hold it; a single reader serving another request at
//! the scan cannot hold it: it read `U` before the interrupt came, so before the scan, and
//! it reads only after it withdrew), a batch reader has read again since. Slot values never
//! repeat: uniques are never reused on a connection.
//!
//! # Batches (the io_uring transport)
//! A ring worker ([`register_batched`](IntrSlots::register_batched)) does not read after it
//! withdrew: the kernel puts up to `RING_DEPTH` requests in its entries in one
//! `io_uring_enter` and marks each sent then (`fuse_uring_prepare_send` sets `FR_SENT`, in
//! the worker's task work: `IORING_SETUP_DEFER_TASKRUN`, or in its `COMMIT_AND_FETCH`), and
//! the worker serves them one after another. So `U` may wait behind `V`, which blocks (an
//! inner server that hangs): the interrupt of `U` finds the worker serving `V`. The worker
//! stores `reads + 1` and a SeqCst fence before each `io_uring_enter`
//! ([`next_batch`](IntrSlots::next_batch)), and publishes every request that enter fetched
//! before its next one; the kernel marks `U` sent inside that enter, after the store, so the
//! scan, which follows `U`'s sending (the requester queues the interrupt only once `U` is
//! sent), sees that count or a later one. The scan keeps every batch reader's `reads`; the
//! interrupt stays pending until each has read again (then it published `U` if it held
//! it, and took the interrupt at publish: the publish/interrupt store-buffering above), and
//! past [`PENDING_TTL`] while one is inside the scan's batch (in a request then, or one
//! since). The worker then starts `U` with its interrupter interrupted: `U`'s request to
//! the inner server gets a `FUSE_INTERRUPT` as soon as it is sent (libfuse answers `EINTR`
//! to a request whose interrupt came before it was processed). A batch reader registers
//! before its first read; one registered after the scan cannot hold `U`; one that ends
//! [`retire`](IntrSlots::retire)s its slot (it holds nothing).
//!
//! # Costs
//! A request never interrupted: two stores and one load of its worker's own line, two
//! loads of `marks` (a line no request writes), two fences (`lock or` on x86-64); no lock,
//! no shared write (tools/callgrind `dispatch-getattr`: +112 instructions and +2 locked
//! per request).
//! While an interrupt is pending every publish and withdraw takes the cold path (the
//! `pending` lock, a sweep over the slots). An interrupt read after its request finished
//! and its worker moved on waits for every slot that looked idle to move too; a slot that
//! stays idle (a ring whose CPUs send nothing) would keep it, so a pending interrupt older
//! than [`PENDING_TTL`] is dropped by the next sweep. The bound this puts on the protocol:
//! a worker that stays more than [`PENDING_TTL`] between reading a request and publishing
//! it (a few instructions; for a ring worker, between its read and its first publish, not
//! counting the requests it serves before `U`) may miss that request's interrupt (the
//! request then runs to its end, as without interrupts).
//! A ring worker blocked in a request keeps every interrupt that its batch may hold
//! pending (an interrupt of a request that finished included) until it reads again: every
//! request takes the cold path meanwhile. A ring worker's read costs one more store of its
//! own line and a SeqCst fence (one per `io_uring_enter`, not per request).
//!
//! The server never answers an interrupt (neither `EAGAIN` nor `ENOSYS`): `EAGAIN` would
//! only work written on the descriptor that read `U` (`fuse_dev_do_write` looks `U` up in
//! that device's processing queue), and the pending list makes it unnecessary.
//!
//! # Invariants
//! - A slot's `serving` is written only by its worker: `U` while it serves `U` (even),
//!   `U | 1` after, 0 before its first request.
//! - A batch reader's `reads` is written only by its worker, and grows: every request read
//!   while it is `r` is published before it is `r + 1` (or `RETIRED`).
//! - `marks` is the length of `pending`, written under its lock; while an interrupt for `U`
//!   is pending, `marks` is nonzero.
//!
//! Lock order: `pending` -> `slots` (the sweep); a slot's `lock` -> the target's locks (a
//! delivery: the FUSE client `Interrupter`'s slot, then its connection's), taken with
//! neither `pending` nor `slots` held.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sync::padded::CacheLine;
use crate::sync::{fence, lock, AtomicU64, Mutex, Ordering};

/// What an interrupt acts on: the worker's FUSE client [`Interrupter`]
/// (crate::fuse::client::Interrupter).
pub(crate) trait Target {
    /// Interrupts the request the worker waits for, or the next one it sends.
    fn interrupt(&self);
    /// Forgets an interrupt no request took (the worker's request is over).
    fn cancel(&self);
}

impl Target for crate::fuse::client::Interrupter {
    fn interrupt(&self) {
        crate::fuse::client::Interrupter::interrupt(self);
    }
    fn cancel(&self) {
        self.cancel_pending();
    }
}

/// The protocol's changes that its loom model must catch (`serve_intr` tests); outside
/// tests, each names the fence it would leave out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mutation {
    /// `publish` without its fence.
    NoPublishFence,
    /// `withdraw` without its fence.
    NoWithdrawFence,
    /// (Tests only.) Batch readers' slots swept as a single reader's (the bug this field's protocol
    /// fixed: an interrupt of a request behind a blocked one in its ring was dropped).
    #[cfg(test)]
    BatchAsSingle,
}

/// One worker's slot, on its own cache line.
#[derive(Debug)]
pub(crate) struct ServeSlot<T> {
    /// The unique served now, or the last one served with bit 0 set, 0 before the first.
    /// Atomic; written only by the slot's worker, read by interrupts and sweeps.
    serving: AtomicU64,
    /// 1: an interrupt was delivered to `target` (or the worker took one) since the worker
    /// last cancelled. Atomic; set by deliveries under `lock` and by the worker, cleared by
    /// the worker under `lock`.
    hit: AtomicU64,
    /// A batch reader's reads (a ring worker): how many it started ([`IntrSlots::next_batch`],
    /// before each `io_uring_enter` that may fetch requests), [`RETIRED`] once it reads no
    /// more; 0 for a single reader. Atomic; written only by the slot's worker, read by
    /// interrupts and sweeps.
    reads: AtomicU64,
    /// Whether the worker reads requests in batches (a ring worker: what one read fetched
    /// is served one request after another). Immutable after registration.
    batched: bool,
    /// Orders a delivery before the worker's cancel. Taken only on cold paths.
    lock: Mutex<()>,
    /// The worker's interrupter. Immutable after registration.
    target: T,
}

/// A batch reader's `reads` once it reads no more (its worker ended).
const RETIRED: u64 = u64::MAX;

/// How long an interrupt may stay pending without its request being found: then a sweep
/// drops it (see the module doc's costs).
pub(crate) const PENDING_TTL: Duration = Duration::from_secs(2);

/// An interrupt not yet matched to a request.
#[derive(Debug)]
struct Pending {
    /// The interrupted request's unique.
    unique: u64,
    /// When it was read.
    since: Instant,
    /// Filled by the scan: the slots that may hold the request unpublished; and how many
    /// slots there were (later single readers count as idle at 0; later batch readers
    /// registered after the request was read and cannot hold it). `None` while the scan
    /// runs.
    idle: Option<(Vec<Seen>, usize)>,
}

/// A slot as the scan saw it, one that may hold the interrupted request unpublished.
#[derive(Debug)]
struct Seen {
    /// The slot's index.
    i: usize,
    /// Its `serving` then.
    serving: u64,
    /// A batch reader's `reads` then; `None` for a single reader (then idle at the scan).
    reads: Option<u64>,
}

/// The workers' slots and the pending interrupts of one server.
#[derive(Debug)]
pub(crate) struct IntrSlots<T> {
    /// Every registered slot (never removed). Protected by its lock, taken at a worker's
    /// registration and by interrupts and sweeps.
    slots: Mutex<Vec<Arc<CacheLine<ServeSlot<T>>>>>,
    /// The pending interrupts. Protected by its lock (cold paths only).
    pending: Mutex<Vec<Pending>>,
    /// `pending.len()`. Atomic; written under `pending`, read by every publish and withdraw
    /// (a line read by all, written only when an interrupt comes and goes).
    marks: CacheLine<AtomicU64>,
    #[cfg(test)]
    pub(crate) mutation: Option<Mutation>,
}

impl<T> Default for IntrSlots<T> {
    fn default() -> Self {
        IntrSlots {
            slots: Mutex::new(Vec::new()),
            pending: Mutex::new(Vec::new()),
            marks: CacheLine(AtomicU64::new(0)),
            #[cfg(test)]
            mutation: None,
        }
    }
}

impl<T: Target> IntrSlots<T> {
    /// A new slot for the calling worker, one that reads one request at a time and serves it
    /// before it reads again (`/dev/fuse`), interrupting `target`. Cold: once per worker.
    #[cold]
    pub(crate) fn register(&self, target: T) -> Arc<CacheLine<ServeSlot<T>>> {
        self.register_as(target, false)
    }

    /// A new slot for the calling worker, one that reads requests in batches (a ring
    /// worker), interrupting `target`; registered before its first read, and told of each
    /// read by [`next_batch`](Self::next_batch). Cold: once per worker.
    #[cold]
    pub(crate) fn register_batched(&self, target: T) -> Arc<CacheLine<ServeSlot<T>>> {
        self.register_as(target, true)
    }

    #[cold]
    fn register_as(&self, target: T, batched: bool) -> Arc<CacheLine<ServeSlot<T>>> {
        let s = Arc::new(CacheLine(ServeSlot {
            serving: AtomicU64::new(0),
            hit: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            batched,
            lock: Mutex::new(()),
            target,
        }));
        lock(&self.slots).push(s.clone());
        s
    }

    /// The batch reader of `slot` is about to read (an `io_uring_enter` that may fetch
    /// requests into its ring): every request it reads from now until its next call here is
    /// published (or was never read) before that call. See the module doc's batches.
    #[inline]
    pub(crate) fn next_batch(&self, slot: &ServeSlot<T>) {
        // Relaxed: only this worker writes it.
        let r = slot.reads.load(Ordering::Relaxed);
        // Relaxed: ordered before the read by the fence below.
        slot.reads.store(r + 1, Ordering::Relaxed);
        // SeqCst: orders the store before what the read does in the kernel: it marks the
        // requests it fetches sent (`FR_SENT`), which a requester sees before it queues an
        // interrupt, which the reader of that interrupt reads (the kernel's locks) before
        // its scan loads `reads`: the scan sees this read's count or a later one.
        fence(Ordering::SeqCst);
    }

    /// The batch reader of `slot` reads no more (its worker ends, every request it read
    /// served): its slot can hold no request.
    #[cold]
    pub(crate) fn retire(&self, slot: &ServeSlot<T>) {
        // Relaxed: a stale value only keeps a pending interrupt longer (until it is seen or
        // [`PENDING_TTL`]).
        slot.reads.store(RETIRED, Ordering::Relaxed);
    }

    /// Whether the scan treats `s` as a batch reader (a loom model's mutation
    /// `BatchAsSingle` says no).
    fn batched(&self, s: &ServeSlot<T>) -> bool {
        #[cfg(test)]
        if self.mutation == Some(Mutation::BatchAsSingle) {
            return false;
        }
        s.batched
    }

    /// The worker of `slot` starts serving request `unique` (even, nonzero): see the module
    /// doc's publish.
    #[inline]
    pub(crate) fn publish(&self, slot: &ServeSlot<T>, unique: u64) {
        // Relaxed: ordered before the `marks` load by the fence below.
        slot.serving.store(unique, Ordering::Relaxed);
        // Store-buffering with the fence in `interrupt` (its `marks` store before, its scan
        // of `serving` after): one of the two sees the other's store.
        self.fence(Mutation::NoPublishFence);
        // Relaxed: the fence above orders it (see there).
        if self.marks.0.load(Ordering::Relaxed) != 0 {
            self.publish_slow(slot, unique);
        }
    }

    /// The SeqCst fence of `publish` and `withdraw` (what it pairs with is said there); a
    /// loom model's mutation `m` leaves it out.
    #[inline]
    fn fence(&self, m: Mutation) {
        #[cfg(test)]
        if self.mutation == Some(m) {
            return;
        }
        let _ = m;
        // SeqCst: the store-load pattern of its callers (store-buffering), see there.
        fence(Ordering::SeqCst);
    }

    /// An interrupt may be pending: takes the one for `unique`, sweeps the others.
    #[cold]
    fn publish_slow(&self, slot: &ServeSlot<T>, unique: u64) {
        let mut p = lock(&self.pending);
        let took = take(&mut p, unique);
        self.sweep(&mut p);
        drop(p);
        if took {
            // Relaxed: the worker's own flag, read back by its own `withdraw`.
            slot.hit.store(1, Ordering::Relaxed);
            slot.target.interrupt();
        }
    }

    /// The worker of `slot` finished request `unique`: see the module doc's withdraw.
    #[inline]
    pub(crate) fn withdraw(&self, slot: &ServeSlot<T>, unique: u64) {
        // Relaxed: ordered before the loads below by the fence.
        slot.serving.store(unique | 1, Ordering::Relaxed);
        // Store-buffering with the fence in `deliver` (`hit` before, `serving` after) and in
        // `interrupt` (`marks` before, the scan after).
        self.fence(Mutation::NoWithdrawFence);
        // Relaxed (both): ordered by the fence above.
        let hit = slot.hit.load(Ordering::Relaxed);
        let marks = self.marks.0.load(Ordering::Relaxed);
        if hit != 0 || marks != 0 {
            self.withdraw_slow(slot, unique, hit != 0, marks != 0);
        }
    }

    /// Cancels what a delivery left on the target; drops a pending interrupt of `unique`.
    #[cold]
    fn withdraw_slow(&self, slot: &ServeSlot<T>, unique: u64, hit: bool, marks: bool) {
        if hit {
            // After any delivery in progress (it holds the lock while it interrupts).
            let _g = lock(&slot.lock);
            slot.target.cancel();
            // Relaxed: under the slot's lock, which deliveries take to set it.
            slot.hit.store(0, Ordering::Relaxed);
        }
        if marks {
            let mut p = lock(&self.pending);
            take(&mut p, unique);
            self.sweep(&mut p);
        }
    }

    /// A `FUSE_INTERRUPT` for request `unique` was read: see the module doc's interrupt.
    /// Returns whether a worker serving it was interrupted.
    pub(crate) fn interrupt(&self, unique: u64) -> bool {
        {
            let mut p = lock(&self.pending);
            if p.iter().any(|e| e.unique == unique) {
                // The kernel queued it twice (`request_wait_answer` and
                // `fuse_dev_do_read` both may): one entry does.
                return false;
            }
            p.push(Pending {
                unique,
                since: Instant::now(),
                idle: None,
            });
            // Relaxed: under `pending`; ordered before the scan by the fence below.
            self.marks.0.store(p.len() as u64, Ordering::Relaxed);
        }
        // SeqCst: store-buffering with the fences in `publish` and `withdraw` (see there).
        fence(Ordering::SeqCst);
        let slots = lock(&self.slots).clone();
        let mut found = None;
        let mut finished = false;
        let mut idle = Vec::new();
        for (i, s) in slots.iter().enumerate() {
            // Relaxed: ordered after the `marks` store by the fence above.
            let v = s.serving.load(Ordering::Relaxed);
            if v == unique {
                found = Some(s);
            } else if v == unique | 1 {
                finished = true;
            } else if self.batched(s) {
                // Relaxed: ordered after the `marks` store by the fence above; the worker's
                // store before the read that fetched `unique` is ordered before this load by
                // the fence in `next_batch` (see there).
                let r = s.reads.load(Ordering::Relaxed);
                if r != RETIRED {
                    idle.push(Seen {
                        i,
                        serving: v,
                        reads: Some(r),
                    });
                }
            } else if v & 1 == 1 || v == 0 {
                idle.push(Seen {
                    i,
                    serving: v,
                    reads: None,
                });
            }
        }
        let mut p = lock(&self.pending);
        let took = if found.is_some() || finished {
            take(&mut p, unique) && found.is_some()
        } else {
            if let Some(e) = p.iter_mut().find(|e| e.unique == unique) {
                e.idle = Some((idle, slots.len()));
            }
            false
        };
        self.sweep(&mut p);
        drop(p);
        match found {
            Some(s) if took => Self::deliver(s, unique),
            _ => false,
        }
    }

    /// Interrupts `s`'s target if it still serves `unique`; returns whether it did.
    fn deliver(s: &ServeSlot<T>, unique: u64) -> bool {
        let _g = lock(&s.lock);
        // Relaxed: under the slot's lock (the worker clears it under the same lock).
        s.hit.store(1, Ordering::Relaxed);
        // SeqCst: store-buffering with the fence in `withdraw` (its `serving` store before,
        // its `hit` load after): it sees `hit` and waits for this lock, or this sees `U`
        // finished.
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fence above.
        if s.serving.load(Ordering::Relaxed) == unique {
            s.target.interrupt();
            true
        } else {
            false
        }
    }

    /// Drops the pending interrupts that can no longer meet their request (module doc);
    /// stores `marks`.
    ///
    /// Context: caller holds `pending`.
    fn sweep(&self, p: &mut Vec<Pending>) {
        if !p.is_empty() {
            let slots = lock(&self.slots);
            // Relaxed (every load here): a value seen is one the slot's worker stored; a
            // stale one only keeps an entry longer.
            let cur = |i: usize| slots[i].serving.load(Ordering::Relaxed);
            // Relaxed: as above; a batch reader's `reads` that moved past the scan's was
            // stored after its publishes of that batch, whose cold paths (`publish_slow`
            // took the interrupt) released `pending` before: this sweep, holding `pending`,
            // sees the new count only after them.
            let reads = |i: usize| slots[i].reads.load(Ordering::Relaxed);
            p.retain(|e| {
                let u = e.unique;
                let Some((idle, n)) = &e.idle else {
                    return true;
                };
                if (0..slots.len()).any(|i| cur(i) == u | 1) {
                    return false;
                }
                // A single reader moved: it published another request than `u` since the
                // scan. A batch reader moved: it read again since, so it published every
                // request of the scan's batch.
                let moved = |s: &Seen| match s.reads {
                    None => {
                        let v = cur(s.i);
                        v != s.serving && v != u
                    }
                    Some(r0) => reads(s.i) != r0,
                };
                let all_moved = idle.iter().all(moved)
                    && (*n..slots.len()).all(|i| {
                        let v = cur(i);
                        slots[i].batched || (v != 0 && v != u)
                    });
                if all_moved {
                    return false;
                }
                if e.since.elapsed() > PENDING_TTL {
                    // Kept past the TTL only while a batch reader is still inside the
                    // scan's batch, in a request then or since: `u` may be behind it in
                    // its ring (a request blocked in an inner server).
                    return idle.iter().any(|s| {
                        let v = cur(s.i);
                        let busy = v != s.serving || (v != 0 && v & 1 == 0);
                        s.reads.is_some_and(|r0| reads(s.i) == r0) && busy
                    });
                }
                true
            });
        }
        // Relaxed: under `pending` (see the field).
        self.marks.0.store(p.len() as u64, Ordering::Relaxed);
    }

    /// Tests: interrupts still pending.
    #[cfg(test)]
    pub(crate) fn pending_count(&self) -> usize {
        lock(&self.pending).len()
    }
}

/// Removes the pending interrupt of `unique`; says whether there was one.
fn take(p: &mut Vec<Pending>, unique: u64) -> bool {
    match p.iter().position(|e| e.unique == unique) {
        Some(i) => {
            p.swap_remove(i);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests;
