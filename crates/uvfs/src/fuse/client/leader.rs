//! Leader/follower receive: the thread that waits for a reply reads the socket itself.
//!
//! # Why
//! With one reader thread, every request cost three cross-thread wake-ups: the caller's
//! send wakes a server thread, the server's reply wakes the reader, the reader wakes the
//! caller. The kernel's FUSE client costs two: the server's `write(2)` of the reply wakes
//! the caller directly (`fuse_dev_do_write` -> `request_end` -> `wake_up(&req->waitq)`). Here
//! the waiting caller receives its own reply, so a request costs what the kernel's does.
//!
//! # The protocol
//! At most one thread receives at a time: the *leader* (`State::leading`). A caller whose
//! request is not finished
//! - becomes the leader if there is none, and receives and dispatches messages (its own
//!   reply, or other callers' replies, which wake them as the reader did) until its request
//!   is finished; then it *leaves*;
//! - otherwise is a *follower*: it links its request on `State::followers` and sleeps on the
//!   request ([`Request::wait_turn`]) until the request finished or the leader handed it
//!   the receive side ([`Request::promote`]).
//!
//! *Leaving* hands the receive side to the oldest follower whose request is not finished;
//! with none, the connection has no leader. A follower unlinks itself (or a leaver
//! unlinked it) before it returns, so the list never holds a request whose waiter left.
//! Liveness: while a follower's request is not finished, there is a leader (a follower is
//! linked only while `leading` is set, and `leading` is cleared only when no unfinished
//! follower is linked), and the leader receives until its own request finishes, then
//! hands over. A connection that ends (EOF, an error, an abort) finishes every request
//! in flight, so every leader and follower returns.
//!
//! # The reader thread
//! Someone must receive when no caller waits: replies to background requests (RELEASE),
//! notifications, the server's exit. The reader thread takes the receive side only when
//! the connection has been idle (no leader, and none since its last look, `State::busy`,
//! checked every [`IDLE`]): then it polls the socket, takes the lead when a message comes
//! and no caller took it meanwhile, receives what is there without waiting, and leaves
//! (handing over to a follower that arrived meanwhile). So a busy connection's replies go
//! to their callers, and an idle one's messages are handled within `IDLE`.
//!
//! Notifications (INVAL_INODE, INVAL_ENTRY, DELETE) are applied by the reader thread only:
//! a caller may hold the directory or inode locks a notification takes. A leader that
//! receives one queues it (`State::for_reader`), hands the receive side to the reader
//! thread and becomes the first follower, so the messages after the notification are
//! dispatched after it is applied, in the server's order.
//!
//! Linux analogue: none directly (its server thread completes requests inside the kernel);
//! the pattern is the leader/followers of Schmidt et al. (1998), as in Go's netpoller.
//! Loom model: `loom_leader.rs`.

use super::request::Request;
use crate::sync::cv::{self, Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

/// How long the connection must be idle before the reader thread polls the socket.
pub(crate) const IDLE: Duration = Duration::from_millis(5);

/// What one receive did.
#[derive(Debug)]
pub(crate) enum Received {
    /// A message was received and acted on.
    Dispatched,
    /// A notification for the reader thread (the whole message).
    ForReader(Vec<u8>),
    /// The connection ended (EOF, an error): it aborted, every request in flight failed.
    Closed,
    /// The deadline passed with nothing received.
    TimedOut,
}

/// The socket's receive side, as the leader uses it.
pub(crate) trait Wire {
    /// Receives one message into `buf` (blocking; at most until `deadline`) and acts on it
    /// as a caller would (`for_reader`: false: notifications are returned, not applied)
    /// or as the reader thread (`true`: everything applied).
    fn receive(&self, buf: &mut Vec<u8>, deadline: Option<Instant>, for_reader: bool) -> Received;
    /// Whether a message (or the end of the connection) is there to receive, waiting at
    /// most `timeout` (`None`: until there is, or until [`wake`](Self::wake)).
    fn ready(&self, timeout: Option<Duration>) -> bool;
    /// Ends a `ready(None)` in progress, or the next one (the reader thread's idle look:
    /// a leader handed it a notification, whose message it received itself).
    fn wake(&self);
    /// Applies a notification a leader handed to the reader thread.
    fn apply(&self, msg: &[u8]);
}

/// The leadership of one connection.
pub(crate) struct Leadership {
    st: Mutex<State>,
    /// The receive buffer's size (bytes).
    buf_len: usize,
    /// The reader thread's sleep while the connection is busy.
    reader_cv: Condvar,
    /// Loom only: the mutation the model runs (`loom_leader.rs`), `None` for the code.
    #[cfg(uvfs_loom)]
    pub(crate) mutation: Option<Mutation>,
}

/// Loom only: a change to the protocol that the model must catch (`loom_leader.rs`).
#[cfg(uvfs_loom)]
#[allow(dead_code)] // made by the model's tests only
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mutation {
    /// Leaving clears `leading` without handing over to a follower.
    NoHandOver,
    /// A leader that receives a notification queues it for the reader thread and goes
    /// on receiving (the messages after it may be acted on before it is applied).
    KeepLeadOnNote,
    /// A follower whose deadline passed returns without unlinking its request, which its
    /// waiter then frees while a leaver may still hand it the lead.
    TimeoutKeepsLink,
}

/// Under [`Leadership::st`].
struct State {
    /// Some thread holds the receive side.
    leading: bool,
    /// Waiters of unfinished requests while another thread leads, oldest first: links,
    /// no references (each waiter holds its own and unlinks itself before it returns).
    followers: VecDeque<NonNull<Request>>,
    /// A caller took the lead since the reader thread last looked.
    busy: bool,
    /// The receive side was handed to the reader thread (a notification came).
    reader_turn: bool,
    /// Notifications for the reader thread, in order.
    for_reader: VecDeque<Vec<u8>>,
    /// The connection is closing: the reader thread exits.
    closed: bool,
    /// The receive buffer, lent to the leader.
    buf: Option<Vec<u8>>,
}

// SAFETY: the pointers are only dereferenced under the lock, while their waiters keep the
// requests allocated (each unlinks its own before it drops its reference); `Request` is
// `Sync`.
unsafe impl Send for State {}

/// How a caller's wait ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Waited {
    /// The request finished.
    Finished,
    /// The deadline passed first (the request is still in flight).
    TimedOut,
}

impl Leadership {
    /// A connection's leadership with a receive buffer of `buf_len` bytes.
    pub(crate) fn new(buf_len: usize) -> Leadership {
        Leadership {
            st: Mutex::new(State {
                leading: false,
                followers: VecDeque::new(),
                busy: false,
                reader_turn: false,
                for_reader: VecDeque::new(),
                closed: false,
                buf: Some(vec![0; buf_len]),
            }),
            buf_len,
            reader_cv: Condvar::new(),
            #[cfg(uvfs_loom)]
            mutation: None,
        }
    }

    /// Whether the model runs mutation `m`.
    #[cfg(uvfs_loom)]
    fn is(&self, m: Mutation) -> bool {
        self.mutation == Some(m)
    }

    /// A caller's wait for `req` (sent, in the processing table, with the caller's
    /// reference): as leader or follower (module doc) until it finished, or until
    /// `deadline`.
    pub(crate) fn wait(
        &self,
        req: &Request,
        wire: &impl Wire,
        deadline: Option<Instant>,
    ) -> Waited {
        let me = NonNull::from(req);
        let mut st = cv::lock(&self.st);
        let mut leader = false;
        loop {
            if req.finished() {
                if leader {
                    self.leave(&mut st);
                } else {
                    unlink(&mut st, me);
                }
                return Waited::Finished;
            }
            if !leader {
                if !st.leading {
                    st.leading = true;
                    st.busy = true;
                    leader = true;
                } else {
                    if !st.followers.contains(&me) {
                        st.followers.push_back(me);
                    }
                    drop(st);
                    let in_time = req.wait_turn(deadline);
                    st = cv::lock(&self.st);
                    if req.take_lead() {
                        leader = true;
                        st.busy = true;
                    } else if !in_time && !req.finished() {
                        #[cfg(uvfs_loom)]
                        if self.is(Mutation::TimeoutKeepsLink) {
                            return Waited::TimedOut;
                        }
                        unlink(&mut st, me);
                        return Waited::TimedOut;
                    }
                    continue;
                }
            }
            // The leader: one message, then look again.
            let mut buf = st.buf.take().unwrap_or_else(|| vec![0; self.buf_len]);
            drop(st);
            let got = {
                // A panic while receiving must not leave the connection without a receiver.
                let guard = LeaveOnUnwind(self);
                let got = wire.receive(&mut buf, deadline, false);
                std::mem::forget(guard);
                got
            };
            st = cv::lock(&self.st);
            st.buf = Some(buf);
            match got {
                Received::Dispatched => {}
                Received::Closed => {
                    if !req.finished() {
                        // The connection ended and aborted: whoever drained the processing
                        // table completes every request that was in it (conn.rs `abort`),
                        // ours too. Waiting for that, rather than receiving the end again
                        // and again while that thread is descheduled (a spin the loom
                        // model found).
                        self.leave(&mut st);
                        drop(st);
                        req.wait_turn(None);
                        return Waited::Finished;
                    }
                }
                Received::ForReader(msg) => {
                    #[cfg(uvfs_loom)]
                    if self.is(Mutation::KeepLeadOnNote) {
                        st.for_reader.push_back(msg);
                        self.reader_cv.notify_all();
                        wire.wake();
                        continue;
                    }
                    // The reader thread applies it and receives what follows; we follow.
                    st.for_reader.push_back(msg);
                    st.reader_turn = true;
                    leader = false;
                    st.followers.push_front(me);
                    self.reader_cv.notify_all();
                    // The reader thread may be in its idle look at the socket, whose message
                    // we took.
                    wire.wake();
                }
                Received::TimedOut => {
                    if !req.finished() {
                        self.leave(&mut st);
                        return Waited::TimedOut;
                    }
                }
            }
        }
    }

    /// Hands the receive side to the oldest follower whose request is not finished, or
    /// clears `leading`. Context: the caller leads and holds the lock.
    fn leave(&self, st: &mut MutexGuard<'_, State>) {
        self.hand_over(st);
        // The liveness invariant (module doc), checked where it could break: without a
        // leader, no follower sleeps. (A stranded follower is a deadlock, which loom
        // reports by aborting the test process; this names it first.)
        #[cfg(uvfs_loom)]
        assert!(
            st.leading || st.followers.is_empty(),
            "a follower asleep while nobody receives"
        );
    }

    /// The body of [`leave`](Self::leave).
    fn hand_over(&self, st: &mut MutexGuard<'_, State>) {
        #[cfg(uvfs_loom)]
        if self.is(Mutation::NoHandOver) {
            st.leading = false;
            return;
        }
        while let Some(f) = st.followers.pop_front() {
            // SAFETY: linked, so its waiter has not returned (module doc): allocated.
            let r = unsafe { f.as_ref() };
            // The model checks that claim: a linked request's header is not the free's.
            #[cfg(uvfs_loom)]
            r.assert_not_freed("a follower link to a freed request");
            // A finished one returns by itself (its completion woke it).
            if !r.finished() {
                r.promote();
                return;
            }
        }
        st.leading = false;
    }

    /// The reader thread's loop (module doc) until [`close`](Self::close) or the end of
    /// the connection.
    pub(crate) fn reader(&self, wire: &impl Wire) {
        let mut st = cv::lock(&self.st);
        loop {
            if st.closed {
                return;
            }
            if st.reader_turn {
                // Handed over by a leader (`leading` stays set).
                st.reader_turn = false;
            } else if !st.leading && !st.busy {
                drop(st);
                wire.ready(None);
                st = cv::lock(&self.st);
                // A caller leads or led since the last look: it will receive (busy).
                if st.closed || st.reader_turn || st.leading || st.busy {
                    continue;
                }
                st.leading = true;
            } else {
                st.busy = false;
                st = self
                    .reader_cv
                    .wait_timeout(st, IDLE)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                continue;
            }
            // The leader: what was handed over, then what is there, without waiting.
            let notes: Vec<Vec<u8>> = st.for_reader.drain(..).collect();
            let mut buf = st.buf.take().unwrap_or_else(|| vec![0; self.buf_len]);
            drop(st);
            for m in &notes {
                wire.apply(m);
            }
            let mut closed = false;
            while wire.ready(Some(Duration::ZERO)) {
                match wire.receive(&mut buf, None, true) {
                    Received::Dispatched | Received::TimedOut => {}
                    Received::ForReader(m) => wire.apply(&m),
                    Received::Closed => {
                        closed = true;
                        break;
                    }
                }
            }
            st = cv::lock(&self.st);
            st.buf = Some(buf);
            self.leave(&mut st);
            if closed {
                return;
            }
        }
    }

    /// The connection is closing: the reader thread exits at its next look (woken now if
    /// it sleeps on the lock; one polling the socket wakes when the socket is shut down).
    pub(crate) fn close(&self) {
        cv::lock(&self.st).closed = true;
        self.reader_cv.notify_all();
    }
}

/// Leaves the lead if a receive panics (dropped only while unwinding: forgotten after a
/// receive that returned).
struct LeaveOnUnwind<'a>(&'a Leadership);

impl Drop for LeaveOnUnwind<'_> {
    fn drop(&mut self) {
        let mut st = cv::lock(&self.0.st);
        self.0.leave(&mut st);
    }
}

/// Takes `me` off the follower list if it is there. Context: the caller holds the lock.
fn unlink(st: &mut State, me: NonNull<Request>) {
    if let Some(i) = st.followers.iter().position(|&p| p == me) {
        st.followers.remove(i);
    }
}
