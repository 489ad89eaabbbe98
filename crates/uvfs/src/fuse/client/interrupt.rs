//! Interrupting a FUSE request a thread waits for (the client side of FUSE_INTERRUPT), as a
//! signal does for a process blocked in a FUSE request on Linux (`request_wait_answer` ->
//! `queue_interrupt`; `fuse_read_interrupt` builds the message).
//!
//! uvfs has no signals, so a thread that may block in FUSE requests hands out an
//! [`Interrupter`] ([`Interrupter::current`]); another thread's [`Interrupter::interrupt`]
//! interrupts the request it waits for now, or, when it waits for none, the next one it
//! sends (a pending signal). The request is marked `FR_INTERRUPTED` and linked on the
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
use crate::sync::plain::{AtomicBool, Mutex, Ordering};
use crate::sync::plock;
use std::ptr::NonNull;
use std::sync::Arc;

/// One thread's slot: the request it waits for, and a pending interrupt.
#[derive(Default)]
pub(crate) struct Slot {
    /// The request in flight: its connection and a counted reference, published by the
    /// waiter for the time it waits. The connection outlives the publication: the waiter
    /// is inside a call on it until it withdraws, under this lock.
    cur: Mutex<Option<(ConnPtr, Ref)>>,
    /// An interrupt came while no request was in flight: the next one is interrupted.
    pending: AtomicBool,
}

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
        *cur = Some((ConnPtr(NonNull::from(conn)), Ref(p)));
        // Relaxed: set and taken under `cur`'s lock, which orders them with the publish (an
        // interrupter sees the request or leaves the flag for it).
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
    /// server), or, if it waits for none, the next one it sends. The request still ends
    /// with the server's answer: `EINTR` if the server gave it up, its result otherwise.
    ///
    /// Linux analogue: a signal to a task in `request_wait_answer` (fs/fuse/dev.c).
    pub fn interrupt(&self) {
        let cur = plock(&self.0.cur);
        match &*cur {
            Some((conn, r)) => {
                // SAFETY: published, so the waiter is inside its call on the connection
                // until it withdraws, which needs the lock we hold (see `Slot::cur`); the
                // slot's reference keeps the request allocated meanwhile.
                unsafe { conn.0.as_ref().interrupt(r.0.as_ref()) };
            }
            None => {
                // Relaxed: see `publish`.
                self.0.pending.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Forgets an interrupt that no request took (one made while the thread waited for
    /// none): the FUSE server calls it when the request it was serving for the kernel is
    /// over, so that an interrupt meant for that request does not cut the worker's next one
    /// short (fuse/serve_intr.rs). A request in flight keeps its interrupt.
    pub(crate) fn cancel_pending(&self) {
        let _cur = plock(&self.0.cur);
        // Relaxed: see `publish` (set and taken under `cur`'s lock, held here too).
        self.0.pending.store(false, Ordering::Relaxed);
    }
}
