//! Interrupting a FUSE request or a file-lock wait a thread is blocked in (the client side
//! of FUSE_INTERRUPT; `EINTR` from `F_SETLKW` or a blocking `flock`), as a signal does for
//! a process blocked in a FUSE request (`request_wait_answer` -> `queue_interrupt`;
//! `fuse_read_interrupt` builds the message) or in a lock wait (`locks_lock_inode_wait`'s
//! interruptible sleep) on Linux.
//!
//! uvfs has no signals, so a thread that may block hands out an [`Interrupter`]
//! ([`Interrupter::current`]); another thread's [`Interrupter::interrupt`] interrupts the
//! request or lock wait it is blocked in now, or, when it is blocked in neither, the next
//! one (a pending signal). A lock wait (locks.rs) publishes its inode's lock context in the
//! slot; an interrupt marks the slot pending and wakes the context's waiters, and the
//! waiter, which tests the mark under the context's lock before each sleep, returns
//! `EINTR`. An interrupt that comes while a lock wait is published is consumed when it
//! ends, even if the lock was granted first (a signal that comes as the call returns is
//! handled then, not at the next call).
//!
//! For FUSE requests: The request is marked `FR_INTERRUPTED` and linked on the
//! connection's interrupt list (`request.rs`'s protocol, loom-checked), and a
//! `FUSE_INTERRUPT` (unique = the request's | 1) goes to the server. The caller keeps
//! waiting for the request's answer: the server answers it (with `EINTR` when it gave up,
//! or with the result when it had finished), as on Linux. An `EAGAIN` answer to the
//! interrupt sends it again (`fuse_dev_do_write`); `ENOSYS` stops interrupts on that
//! connection (`fc->no_interrupt`).
//!
//! Cost on the request path: one thread-local read per FUSE request, and, for a thread
//! that made an `Interrupter`, one lock of its own slot (no other thread's line) to publish
//! the request and one to withdraw it.

use super::conn::Conn;
use super::request::Request;
use crate::locks::FileLockContext;
use crate::sync::plain::{AtomicBool, Mutex, Ordering};
use crate::sync::plock;
use std::ptr::NonNull;
use std::sync::Arc;

/// One thread's slot: what it is blocked in, and a pending interrupt.
#[derive(Default)]
pub(crate) struct Slot {
    /// What the thread is blocked in, published by the waiter for the time it waits.
    cur: Mutex<Option<Waiting>>,
    /// An interrupt came while nothing was in flight: the next wait is interrupted. For a
    /// lock wait, also the interrupt of the wait in progress (module doc). On a slot that
    /// `keeps_pending`, any interrupt, until `cancel_pending`.
    pending: AtomicBool,
    /// A FUSE server's worker ([`Interrupter::keep_pending`]): an interrupt stays pending
    /// for every later request until the request it serves ends (`cancel_pending`), as a
    /// signal stays pending until the system call returns. Set once, before the worker's
    /// first request; read under `cur`'s lock.
    keeps_pending: AtomicBool,
}

/// What a thread is blocked in (`Slot::cur`).
pub(crate) enum Waiting {
    /// A FUSE request: its connection and a counted reference. The connection outlives the
    /// publication: the waiter is inside a call on it until it withdraws, under the slot's
    /// lock.
    Fuse(ConnPtr, Ref),
    /// A lock wait on this inode's lock context, which outlives the publication: the
    /// waiter holds a reference to an open file of the inode until it withdraws, under the
    /// slot's lock.
    Lock(CtxPtr),
}

/// The lock context a lock wait is published on (see `Waiting::Lock`).
pub(crate) struct CtxPtr(NonNull<FileLockContext>);

// SAFETY: `FileLockContext` is `Sync`; the pointer is used only under the slot's lock,
// while the waiter's open file keeps the inode, and so its context, alive.
unsafe impl Send for CtxPtr {}

/// The connection a published request is on (see `Slot::cur`).
pub(crate) struct ConnPtr(NonNull<Conn>);

// SAFETY: `Conn` is `Sync`; the pointer is used only under the slot's lock, while the
// waiter's call on the connection keeps it alive.
unsafe impl Send for ConnPtr {}

/// A counted reference to a request (one of its `refs`).
pub(crate) struct Ref(NonNull<Request>);

// SAFETY: a counted reference to a `Send + Sync` request, used under the slot's lock.
unsafe impl Send for Ref {}

impl Drop for Ref {
    fn drop(&mut self) {
        // SAFETY: the reference this `Ref` owns, not used after.
        unsafe { Request::put(self.0) };
    }
}

thread_local! {
    /// This thread's slot, once it made an `Interrupter`.
    static SLOT: std::cell::RefCell<Option<Arc<Slot>>> = const { std::cell::RefCell::new(None) };
}

/// This thread's slot, if it made an [`Interrupter`].
pub(crate) fn current_slot() -> Option<Arc<Slot>> {
    // `try_with`: a request made from a thread-local destructor (a close in one) finds
    // no slot rather than panicking.
    SLOT.try_with(|s| s.borrow().clone()).ok().flatten()
}

impl Slot {
    /// The waiter publishes request `p` of `conn`, taking a reference of it for the slot
    /// (`p` must hold a reference the caller owns for the call), and gets the pending
    /// interrupt if one came before.
    pub(crate) fn publish(&self, conn: &Conn, p: NonNull<Request>) -> bool {
        // SAFETY: the caller's reference keeps `p` allocated; the new one is the slot's.
        unsafe { p.as_ref() }.get();
        let mut cur = plock(&self.cur);
        *cur = Some(Waiting::Fuse(ConnPtr(NonNull::from(conn)), Ref(p)));
        // Relaxed: set and taken under `cur`'s lock, which orders them with the publish (an
        // interrupter sees the request or leaves the flag for it); `keeps_pending` is set
        // before the thread's first request, by the thread itself.
        if self.keeps_pending.load(Ordering::Relaxed) {
            // Relaxed: as above.
            return self.pending.load(Ordering::Relaxed);
        }
        // Relaxed: as above.
        self.pending.swap(false, Ordering::Relaxed)
    }

    /// The waiter's request is answered: withdrawn (its reference dropped).
    fn withdraw(&self) {
        let cur = plock(&self.cur).take();
        drop(cur);
    }
}

/// A published request's slot: withdraws it when dropped (also on unwind), so the slot
/// never names a connection the waiter has left.
pub(crate) struct Published<'a>(pub(crate) &'a Slot);

impl Drop for Published<'_> {
    fn drop(&mut self) {
        self.0.withdraw();
    }
}

/// A lock wait's publication in the calling thread's slot (locks.rs), if the thread made an
/// [`Interrupter`]; withdrawn on drop, which also consumes an interrupt that came during
/// the wait (module doc).
pub(crate) struct LockWait(Option<Arc<Slot>>);

impl LockWait {
    /// Publishes a wait on `ctx` (the caller holds an open file of its inode until this is
    /// dropped). Context: caller does not hold `ctx`'s state lock (an interrupter takes it
    /// under the slot's lock: the lock order, locks.rs).
    pub(crate) fn publish(ctx: &FileLockContext) -> LockWait {
        let slot = current_slot();
        if let Some(slot) = &slot {
            let mut cur = plock(&slot.cur);
            debug_assert!(cur.is_none(), "one wait per thread at a time");
            *cur = Some(Waiting::Lock(CtxPtr(NonNull::from(ctx))));
        }
        LockWait(slot)
    }

    /// Whether an interrupt is pending (then consumed). Context: caller holds the state
    /// lock of the context it waits on, from this check until its sleep releases it.
    pub(crate) fn interrupted(&self) -> bool {
        // Relaxed: ordered by the context's lock, which the interrupter takes (to wake
        // the waiters) after setting the flag and the waiter holds from this load until it
        // sleeps: either the flag is seen here, or the wake-up comes after the sleep began.
        self.0
            .as_ref()
            .is_some_and(|s| s.pending.swap(false, Ordering::Relaxed))
    }
}

impl Drop for LockWait {
    fn drop(&mut self) {
        if let Some(slot) = &self.0 {
            let mut cur = plock(&slot.cur);
            if matches!(*cur, Some(Waiting::Lock(_))) {
                *cur = None;
                // Relaxed: under the slot's lock, as the interrupter's store.
                slot.pending.store(false, Ordering::Relaxed);
            }
        }
    }
}

/// Interrupts the FUSE requests of the thread that made it (see the module doc). `Send`
/// and `Sync`; clone it freely.
#[derive(Clone)]
pub struct Interrupter(Arc<Slot>);

impl std::fmt::Debug for Interrupter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interrupter")
    }
}

impl Interrupter {
    /// The calling thread's interrupter (made at the first call; later calls share it).
    pub fn current() -> Interrupter {
        SLOT.with(|s| Interrupter(s.borrow_mut().get_or_insert_with(Default::default).clone()))
    }

    /// Interrupts the FUSE request the thread waits for now (a `FUSE_INTERRUPT` goes to its
    /// server) or its lock wait (`F_SETLKW`, `F_OFD_SETLKW`, `flock` without `LOCK_NB`:
    /// `EINTR`, unless the lock was granted first), or, if it waits for neither, the next
    /// one. A FUSE request still ends with the server's answer: `EINTR` if the server gave
    /// it up, its result otherwise.
    ///
    /// Linux analogue: a signal to a task in `request_wait_answer` (fs/fuse/dev.c) or in
    /// `locks_lock_inode_wait` (fs/locks.c).
    pub fn interrupt(&self) {
        let cur = plock(&self.0.cur);
        match &*cur {
            Some(Waiting::Lock(ctx)) => {
                // Relaxed: see `LockWait::interrupted` (the context's lock orders it).
                self.0.pending.store(true, Ordering::Relaxed);
                // SAFETY: published, so the waiter holds an open file of the context's
                // inode until it withdraws, which needs the slot's lock we hold.
                unsafe { ctx.0.as_ref() }.wake_all();
            }
            Some(Waiting::Fuse(conn, r)) => {
                // SAFETY: published, so the waiter is inside its call on the connection
                // until it withdraws, which needs the lock we hold (see `Slot::cur`); the
                // slot's reference keeps the request allocated meanwhile.
                unsafe { conn.0.as_ref().interrupt(r.0.as_ref()) };
                // Relaxed: see `publish` (under `cur`'s lock).
                if self.0.keeps_pending.load(Ordering::Relaxed) {
                    // Relaxed: as above.
                    self.0.pending.store(true, Ordering::Relaxed);
                }
            }
            None => {
                // Relaxed: see `publish`.
                self.0.pending.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Makes this thread's interrupts stay pending until [`cancel_pending`]
    /// (Self::cancel_pending): every later FUSE request of the thread is interrupted as it
    /// is sent, not only the one in flight or the next (a signal stays pending until the
    /// system call returns: a walk whose first request the server answered before the
    /// interrupt reached it sends its next one interrupted, as Linux's
    /// `request_wait_answer` does with the signal still pending). For a FUSE server's
    /// worker, which serves the kernel's request with several of its own. Context: the
    /// calling thread's own interrupter, before its first request.
    #[cfg_attr(not(feature = "fuse"), allow(dead_code))] // the server's
    pub(crate) fn keep_pending(&self) {
        let _cur = plock(&self.0.cur);
        // Relaxed: see `publish` (read under `cur`'s lock, held here too).
        self.0.keeps_pending.store(true, Ordering::Relaxed);
    }

    /// Forgets an interrupt that no request took (one made while the thread waited for
    /// none), or, on a slot that keeps them, any: the FUSE server calls it when the
    /// request it was serving for the kernel is over, so that an interrupt meant for that
    /// request does not cut the worker's next one short (fuse/serve_intr.rs). A request in
    /// flight keeps its interrupt.
    pub(crate) fn cancel_pending(&self) {
        let _cur = plock(&self.0.cur);
        // Relaxed: see `publish` (set and taken under `cur`'s lock, held here too).
        self.0.pending.store(false, Ordering::Relaxed);
    }
}
