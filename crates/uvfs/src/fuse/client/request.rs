//! A FUSE request's life after it is sent: its state bits, the input queue's interrupt
//! list, and the three parties that meet on an interrupted request (`request_end`,
//! `queue_interrupt`, the interrupt reader), after Linux fs/fuse/dev.c.
//!
//! # The protocol (Linux since e1e71c168813, 2021)
//! - The **waiter** (`request_wait_answer`), interrupted, sets [`FR_INTERRUPTED`] (sticky:
//!   never cleared) and calls [`InputQueue::queue_interrupt`]: under the input queue's
//!   lock it links the request on the interrupt list unless it is linked, re-reads
//!   [`FR_FINISHED`] and, if the request finished meanwhile, unlinks it again. Then it
//!   waits for `FR_FINISHED` and drops its reference.
//! - The **interrupt reader** (`fuse_read_interrupt`, a transport thread building the
//!   `FUSE_INTERRUPT` message for the server) unlinks the first request of the list and
//!   reads its header (`unique`), all under the lock. It holds no reference: the list
//!   entry is only a link, as Linux's `intr_entry`.
//! - The **replier** ([`request_end`], when the reply arrives or the connection aborts)
//!   sets `FR_FINISHED` and, only when `FR_INTERRUPTED` is set, takes the lock and unlinks
//!   the request; then wakes the waiter and drops its reference.
//!
//! Why that is enough: `FR_INTERRUPTED` and `FR_FINISHED` are bits of one word, both set
//! by read-modify-writes, so one of the two sets comes second in the word's modification
//! order and sees the other bit. If the replier's comes second, it sees `FR_INTERRUPTED`
//! and takes the lock, so it unlinks the request after any reader holding the lock is
//! done with it, and the last reference (the waiter's or its own) goes after that. If
//! the waiter's comes second, the waiter reads `FR_FINISHED` under the lock it links the
//! request with, and unlinks it before unlocking: no reader ever sees it. Linux orders
//! the same two facts with `test_and_set_bit` (a full barrier) in `request_end` and
//! `smp_mb()` in `queue_interrupt`; the SeqCst orderings below give the same.
//!
//! A request that was never interrupted completes with one read-modify-write of its own
//! flags word and no lock (lesson 5: Linux's `request_end` took `fiq->lock` for every
//! request before 2018, [`EndMode::Locked`], kept for the ablation benchmark).
//!
//! The 2018 form checked `list_empty(&req->intr_entry)` instead of the sticky flag. The
//! reader's unlink makes the entry empty while the reader is still reading the request,
//! so `request_end` skipped the lock, the waiter woke and freed the request, and the
//! reader read freed memory (the use-after-free e1e71c168813 fixed). The loom model
//! (`fuse/client/tests.rs`, `loom_model`) runs all three parties and finds that race in the 2018
//! form (built only for the model) and none in this one.
//!
//! The connection (conn.rs) completes every request through [`request_end`], and
//! [`Interrupter`](super::Interrupter) (interrupt.rs) is the waiter's side.

use crate::sync::{cv, lock, AtomicU64, Mutex, Ordering, UnsafeCell};

/// Locks a request's reply slot, ignoring poisoning (as `sync::plock`): the mutex its
/// `Condvar` waits with (`std`'s, loom's in the models).
fn lock_reply<T>(m: &cv::Mutex<T>) -> cv::MutexGuard<'_, T> {
    cv::lock(m)
}
use std::collections::VecDeque;
use std::ptr::NonNull;

// Linux's FR_PENDING (1 << 0) and FR_SENT (1 << 1) have no counterpart: a caller writes
// its request to the socket itself (conn.rs), so there is no pending queue to be on.
/// `FR_FINISHED`: the reply arrived (or the connection aborted); set once.
pub(crate) const FR_FINISHED: u64 = 1 << 2;
/// `FR_INTERRUPTED`: the waiter was interrupted; sticky, never cleared.
pub(crate) const FR_INTERRUPTED: u64 = 1 << 3;
/// `FR_BACKGROUND`: nobody waits; the replier completes it (capped by max_background).
pub(crate) const FR_BACKGROUND: u64 = 1 << 4;
// Linux's FR_ABORTED (1 << 5): an aborted request here is one finished with ECONNABORTED.

/// `FUSE_INT_REQ_BIT`: an interrupt's unique is its request's with bit 0 set (requests'
/// uniques are even).
pub(crate) const FUSE_INT_REQ_BIT: u64 = 1;

/// How [`request_end`] decides whether to take the input queue's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EndMode {
    /// Only when [`FR_INTERRUPTED`] is set (Linux since e1e71c168813): the fast path.
    Sticky,
    /// Always (Linux before 2018): lesson 5's "before", for the ablation benchmark.
    Locked,
    /// When the request is linked on the interrupt list, tested without the lock (Linux
    /// 2018-2021, `list_empty(&req->intr_entry)`): the use-after-free. Built only for the
    /// loom model, which must find it.
    #[cfg(uvfs_loom)]
    #[cfg_attr(not(test), allow(dead_code))]
    ListEmpty2018,
}

/// One request in flight (the lifecycle part of Linux's `struct fuse_req`).
///
/// # Refcounting
/// `refs` counts the waiter's reference, the in-flight one (the processing table's, or the
/// background queue's before it is sent) and, while its waiter is interruptible, the
/// waiter's interrupt slot's (interrupt.rs); the last [`put`](Request::put) frees the
/// request. The interrupt list holds no reference: a
/// linked request stays allocated because [`request_end`] unlinks it (under the lock)
/// before the in-flight reference is dropped, whenever a reader could still find it.
pub(crate) struct Request {
    /// References (`fuse_req.count`).
    refs: AtomicU64,
    /// `FR_*` bits.
    flags: AtomicU64,
    /// `in.h.unique` (even): written before the request is queued, read by the interrupt
    /// reader under the input queue's lock. A cell loom checks for races: the request is
    /// freed by whoever drops the last reference, maybe while a reader looks at it, if
    /// the protocol were wrong.
    unique: UnsafeCell<u64>,
    /// On the interrupt list (`!list_empty(&req->intr_entry)`): 0 or 1, written under the
    /// input queue's lock. Read without it only by `EndMode::ListEmpty2018`.
    intr_linked: AtomicU64,
    /// The answer (`fuse_req.out`): set once by the replier before `request_end`, taken
    /// by the waiter; with `done`, the waiter's sleep (`req->waitq`). Part of the
    /// leader/follower model (leader.rs), not of the interrupt model.
    reply: cv::Mutex<Option<crate::Result<Vec<u8>>>>,
    /// Signalled after `request_end` (`wake_up(&req->waitq)`) and when the waiter is made
    /// the connection's receiving leader (leader.rs).
    done: cv::Condvar,
    /// 1 when the waiter, a follower, has been handed the receive side of the connection
    /// (leader.rs); written under the leadership lock, read by the waiter under `reply`.
    lead: AtomicU64,
}

impl Request {
    /// A new request with header `unique` (even) and `refs` references (the waiter's and
    /// the in-flight one: 2), leaked to a pointer; freed by the last [`put`](Self::put).
    pub(crate) fn alloc(unique: u64, refs: u64) -> NonNull<Request> {
        debug_assert_eq!(unique & FUSE_INT_REQ_BIT, 0, "request uniques are even");
        let r = Box::new(Request {
            refs: AtomicU64::new(refs),
            flags: AtomicU64::new(0),
            unique: UnsafeCell::new(unique),
            intr_linked: AtomicU64::new(0),
            reply: cv::Mutex::new(None),
            done: cv::Condvar::new(),
            lead: AtomicU64::new(0),
        });
        NonNull::from(Box::leak(r))
    }

    /// The `FR_*` bits now.
    pub(crate) fn flags(&self) -> u64 {
        // Acquire: a waiter that sees FR_FINISHED sees what the replier stored before
        // setting it (the reply); pairs with `request_end`'s SeqCst set.
        self.flags.load(Ordering::Acquire)
    }

    /// Sets `FR_BACKGROUND` (before the request is published: nobody else sees it yet).
    pub(crate) fn set_background(&self) {
        // Relaxed: the request is not shared yet; publishing it (the table's lock) orders
        // this for the reader.
        self.flags.fetch_or(FR_BACKGROUND, Ordering::Relaxed);
    }

    /// Sets `FR_INTERRUPTED` (the waiter, before [`InputQueue::queue_interrupt`]);
    /// returns the bits before. If they hold `FR_FINISHED`, there is nothing to interrupt.
    pub(crate) fn set_interrupted(&self) -> u64 {
        // SeqCst: one side of the pair with `request_end`'s set of FR_FINISHED (module
        // doc: the later of the two read-modify-writes of this word sees the other bit).
        self.flags.fetch_or(FR_INTERRUPTED, Ordering::SeqCst)
    }

    /// Takes one more reference (for an interrupter's slot); the caller holds one.
    pub(crate) fn get(&self) {
        // Relaxed: a new reference from an existing one needs no ordering (as `Arc::clone`);
        // the last put's Acquire fence orders the uses.
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops one reference of the request at `p`; the last frees it.
    ///
    /// # Safety
    /// `p` came from [`alloc`](Self::alloc) and the caller owns one of its references,
    /// which it does not use after this call.
    pub(crate) unsafe fn put(p: NonNull<Request>) {
        // SAFETY: the caller's reference keeps the request allocated until this put.
        let r = unsafe { p.as_ref() };
        // Release: our uses of the request happen before the free; the Acquire fence on
        // the last put pairs with the other holders' Release decrements.
        if r.refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Acquire: see above (the last put sees every other holder's uses).
        crate::sync::fence(Ordering::Acquire);
        // SAFETY: the last reference: nobody else holds or links the request (the
        // protocol in the module doc), so the memory can go.
        unsafe { Request::free(p) };
    }

    /// Frees the request (the last reference went).
    #[cfg(not(uvfs_loom))]
    unsafe fn free(p: NonNull<Request>) {
        // SAFETY: allocated by `alloc` as a Box; the caller owns the last reference.
        drop(unsafe { Box::from_raw(p.as_ptr()) });
    }

    /// Under loom the free is a write of the header (`FREED`), which loom checks against
    /// every other access of it (a reader's read racing the free is the use-after-free);
    /// the model frees the memory itself after joining its threads.
    #[cfg(uvfs_loom)]
    unsafe fn free(p: NonNull<Request>) {
        // SAFETY: the memory stays allocated (the model frees it); the write is the
        // "free" loom checks.
        unsafe { p.as_ref() }
            .unique
            .with_mut(|u| unsafe { *u = FREED });
    }
}

impl Request {
    /// The replier's side: stores the answer, then [`request_end`], then wakes the
    /// waiter. Returns `false` (and stores nothing) when the request had finished already.
    pub(crate) fn complete(
        &self,
        iq: &InputQueue,
        mode: EndMode,
        r: crate::Result<Vec<u8>>,
    ) -> bool {
        let mut slot = lock_reply(&self.reply);
        if slot.is_some() {
            return false;
        }
        *slot = Some(r);
        drop(slot);
        let first = request_end(iq, self, mode);
        debug_assert!(first, "only one answer is stored");
        // The lock orders the answer with the waiter's check; notify after `request_end` so
        // that a woken waiter sees FR_FINISHED.
        let _g = lock_reply(&self.reply);
        self.done.notify_all();
        true
    }

    /// Whether the answer is there (or the request failed): `FR_FINISHED`.
    pub(crate) fn finished(&self) -> bool {
        self.flags() & FR_FINISHED != 0
    }

    /// Makes this request's waiter the receiving leader (leader.rs) and wakes it.
    /// Context: the caller holds the leadership lock and has taken the waiter off the
    /// follower list.
    pub(crate) fn promote(&self) {
        // Relaxed: the reply lock taken below orders the store with the waiter's check
        // (it reads `lead` under that lock, before sleeping and after each wake).
        self.lead.store(1, Ordering::Relaxed);
        let _g = lock_reply(&self.reply);
        self.done.notify_all();
    }

    /// Whether this request's waiter was made the leader; clears the mark. Context: the
    /// caller (the waiter) holds the leadership lock.
    pub(crate) fn take_lead(&self) -> bool {
        // Relaxed: written under the leadership lock, which the caller holds.
        if self.lead.load(Ordering::Relaxed) == 0 {
            return false;
        }
        // Relaxed: as above.
        self.lead.store(0, Ordering::Relaxed);
        true
    }

    /// A follower's sleep (leader.rs): until the request finished or its waiter was made
    /// the leader; `false` when `deadline` passed first.
    pub(crate) fn wait_turn(&self, deadline: Option<std::time::Instant>) -> bool {
        let mut slot = lock_reply(&self.reply);
        loop {
            // Relaxed: `promote` stores it before taking this lock (see there).
            if self.finished() || self.lead.load(Ordering::Relaxed) != 0 {
                return true;
            }
            slot = match deadline {
                None => self.done.wait(slot).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    self.done
                        .wait_timeout(slot, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    /// Takes the answer of a finished request (`None` if it is not finished, or taken).
    pub(crate) fn take_reply(&self) -> Option<crate::Result<Vec<u8>>> {
        let mut slot = lock_reply(&self.reply);
        if !self.finished() {
            return None;
        }
        slot.take()
    }

    /// The waiter's sleep until the request finished (it is no follower: nobody makes it
    /// the leader), then its answer.
    pub(crate) fn wait_finished(&self) -> Option<crate::Result<Vec<u8>>> {
        let mut slot = lock_reply(&self.reply);
        while !self.finished() {
            slot = self.done.wait(slot).unwrap_or_else(|e| e.into_inner());
        }
        slot.take()
    }
}

#[cfg(uvfs_loom)]
impl Request {
    /// Panics with `what` if the request was freed (its header is [`FREED`]); a read that
    /// races the free is loom's own report.
    pub(crate) fn assert_not_freed(&self, what: &str) {
        // SAFETY: under loom the memory stays allocated (`free`); loom checks this read
        // against the free's write.
        let u = self.unique.with(|u| unsafe { *u });
        assert_ne!(u, FREED, "{what}");
    }
}

/// The header value a freed request has under loom.
#[cfg(uvfs_loom)]
pub(crate) const FREED: u64 = u64::MAX;

/// The input queue's interrupt list (part of Linux's `struct fuse_iqueue`).
pub(crate) struct InputQueue {
    /// The lock (`fiq->lock`) and the list of interrupted requests to tell the server
    /// of, oldest first (`fiq->interrupts`).
    inner: Mutex<Interrupts>,
}

/// Links to interrupted requests (no references; see [`Request`]).
struct Interrupts(VecDeque<NonNull<Request>>);

// SAFETY: the pointers are only dereferenced under the input queue's lock, while the
// protocol keeps each linked request allocated (module doc); `Request` is `Sync` (atomics
// and a cell accessed under the protocol).
unsafe impl Send for Interrupts {}

// SAFETY: as above: shared access goes through atomics and the cell the protocol orders.
unsafe impl Sync for Request {}
// SAFETY: as above.
unsafe impl Send for Request {}

impl Default for InputQueue {
    fn default() -> Self {
        InputQueue {
            inner: Mutex::new(Interrupts(VecDeque::new())),
        }
    }
}

impl InputQueue {
    /// `queue_interrupt`: links `req` (whose waiter set `FR_INTERRUPTED`) on the interrupt
    /// list, unless it is linked or finished; returns whether a reader should be woken.
    pub(crate) fn queue_interrupt(&self, req: &Request) -> bool {
        // Only a request whose waiter was interrupted may be linked: `request_end`'s fast
        // path skips the lock for the others, so a linked one of them would be freed while
        // on the list (a server's EAGAIN for an interrupt never sent must not link it;
        // Linux checks the same since 2018). Acquire: pairs with `set_interrupted`'s
        // SeqCst; a stale 0 only skips a requeue the waiter's own call makes.
        if req.flags.load(Ordering::Acquire) & FR_INTERRUPTED == 0 {
            return false;
        }
        let mut q = lock(&self.inner);
        // Relaxed: written only under the lock we hold.
        if req.intr_linked.load(Ordering::Relaxed) != 0 {
            return false;
        }
        q.0.push_back(NonNull::from(req));
        // Relaxed: under the lock (the 2018 form's lockless reader of it is the bug).
        req.intr_linked.store(1, Ordering::Relaxed);
        // SeqCst: Linux's `smp_mb()` pairing with `request_end`'s barrier; with both bits in
        // one word the waiter's earlier `set_interrupted` already orders this (module doc).
        if req.flags.load(Ordering::SeqCst) & FR_FINISHED != 0 {
            q.0.pop_back();
            // Relaxed: under the lock.
            req.intr_linked.store(0, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// `fuse_read_interrupt`: unlinks the oldest interrupted request and returns the
    /// `(unique of the FUSE_INTERRUPT message, unique of the request it interrupts)`, or
    /// `None` when the list is empty.
    pub(crate) fn read_interrupt(&self) -> Option<(u64, u64)> {
        let mut q = lock(&self.inner);
        let p = q.0.pop_front()?;
        // SAFETY: linked, so allocated: `request_end` unlinks under this lock before the
        // request's in-flight reference goes (module doc).
        let req = unsafe { p.as_ref() };
        // Relaxed: under the lock. (`list_del_init` before reading the header, as Linux.)
        req.intr_linked.store(0, Ordering::Relaxed);
        // SAFETY: read under the lock; writers of the header (its creation, and under loom
        // the free) are ordered with us by the protocol.
        let unique = req.unique.with(|u| unsafe { *u });
        #[cfg(uvfs_loom)]
        assert_ne!(unique, FREED, "read a freed request");
        Some((unique | FUSE_INT_REQ_BIT, unique))
    }

    /// Unlinks `req` from the interrupt list if it is there. Context: caller holds the lock.
    fn unlink_locked(q: &mut Interrupts, req: &Request) {
        // Relaxed: under the lock.
        if req.intr_linked.load(Ordering::Relaxed) == 0 {
            return;
        }
        let me = NonNull::from(req);
        if let Some(i) = q.0.iter().position(|&p| p == me) {
            q.0.remove(i);
        }
        // Relaxed: under the lock.
        req.intr_linked.store(0, Ordering::Relaxed);
    }
}

/// `fuse_request_end`: marks `req` finished and, when it may be on the interrupt list
/// (`mode`), unlinks it under the input queue's lock. Returns `false` when it had
/// finished already (an abort and a reply racing: the second does nothing). The caller
/// then wakes the waiter and drops the in-flight reference.
pub(crate) fn request_end(iq: &InputQueue, req: &Request, mode: EndMode) -> bool {
    // SeqCst: the full barrier of `test_and_set_bit` (module doc): pairs with the waiter's
    // `set_interrupted` and with `queue_interrupt`'s re-read.
    let prev = req.flags.fetch_or(FR_FINISHED, Ordering::SeqCst);
    if prev & FR_FINISHED != 0 {
        return false;
    }
    let take_lock = match mode {
        EndMode::Sticky => prev & FR_INTERRUPTED != 0,
        EndMode::Locked => true,
        // Relaxed: the 2018 code's racy `list_empty`.
        #[cfg(uvfs_loom)]
        EndMode::ListEmpty2018 => req.intr_linked.load(Ordering::Relaxed) != 0,
    };
    if take_lock {
        let mut q = lock(&iq.inner);
        InputQueue::unlink_locked(&mut q, req);
    }
    true
}
