//! Loom model of the leader/follower receive (leader.rs): the real `Leadership` and
//! `Request` (under `--cfg uvfs_loom` their locks, condition variables and flags are
//! loom's) over a model socket: a queue of messages under a loom lock, which the server
//! (the model's main thread) fills with replies, in the order the callers sent, and a
//! notification where the model asks for one.
//!
//! Properties, in every interleaving: every caller returns with its request finished
//! (no follower is left asleep while nobody receives: loom reports a deadlock), the
//! reader thread exits at close, and a notification the server sent before a reply is
//! applied before that reply completes its request. The mutations it must catch: leaving
//! without handing over to a follower (a follower left asleep with nobody receiving; leader.rs
//! asserts that invariant under loom, since loom's own deadlock report aborts the test
//! process), and a leader that goes on receiving
//! after queuing a notification for the reader thread (the reply acted on first).
//!
//! Timeouts (`loom_leader_timeout_*`): loom has no clock, so a caller's deadline is one
//! that has passed already: the model socket answers a leader's receive with `TimedOut`
//! whenever it would block, and a follower's `wait_turn` returns at once unless its
//! request finished or it was handed the lead. The caller then does what `Conn::request`
//! does: an answer that came meanwhile is taken; otherwise the connection aborts (the
//! socket closes and every request in flight completes with `ECONNABORTED`) and it waits
//! for its own to finish. Properties: every caller returns with an answer, none is
//! stranded, no follower link outlives its waiter; the mutation that keeps a timed-out
//! follower's link is caught.

use super::leader::{Leadership, Mutation, Received, Waited, Wire};
use super::request::{EndMode, InputQueue, Request, FR_FINISHED};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

/// A message from the model server.
#[derive(Clone, Copy, Debug)]
enum Msg {
    /// The reply to the request with this unique.
    Reply(u64),
    /// A notification.
    Note,
}

/// The model socket, the processing table and what was applied.
struct World {
    /// Server -> client messages; `true` once closed; `true` while a wake (the eventfd)
    /// is pending.
    to_client: Mutex<(VecDeque<Msg>, bool, bool)>,
    to_client_cv: Condvar,
    /// Client -> server: uniques sent.
    to_server: Mutex<VecDeque<u64>>,
    to_server_cv: Condvar,
    /// The processing table: unique, request address (its in-flight reference).
    table: Mutex<Vec<(u64, usize)>>,
    iq: InputQueue,
    /// Notifications applied.
    applied: AtomicU64,
    /// Signalled when a notification is applied.
    applied_m: Mutex<()>,
    applied_cv: Condvar,
    lead: Leadership,
}

impl World {
    /// Acts on one message (as conn.rs's `dispatch`).
    fn act(&self, m: Msg, for_reader: bool) -> Received {
        match m {
            Msg::Note if !for_reader => Received::ForReader(Vec::new()),
            Msg::Note => {
                // SeqCst: the model's counter; the order that matters is the leadership's
                // (the caller reads it after its request finished).
                self.applied.fetch_add(1, Ordering::SeqCst);
                let _g = self.applied_m.lock().unwrap();
                self.applied_cv.notify_all();
                Received::Dispatched
            }
            Msg::Reply(u) => {
                let found = {
                    let mut t = self.table.lock().unwrap();
                    let i = t.iter().position(|&(x, _)| x == u);
                    i.map(|i| t.remove(i).1)
                };
                if let Some(a) = found {
                    let p = NonNull::new(a as *mut Request).unwrap();
                    // SAFETY: the table's in-flight reference, now ours.
                    let r = unsafe { p.as_ref() };
                    r.complete(&self.iq, EndMode::Sticky, Ok(Vec::new()));
                    // SAFETY: the in-flight reference, not used after.
                    unsafe { Request::put(p) };
                }
                Received::Dispatched
            }
        }
    }
}

impl Wire for World {
    fn receive(&self, _buf: &mut Vec<u8>, d: Option<Instant>, for_reader: bool) -> Received {
        let mut q = self.to_client.lock().unwrap();
        loop {
            if let Some(m) = q.0.pop_front() {
                drop(q);
                return self.act(m, for_reader);
            }
            if q.1 {
                // As conn.rs's receive at the socket's end: the connection aborts (every
                // request in flight finishes), so a leader does not receive the end again
                // and again.
                drop(q);
                abort(self);
                return Received::Closed;
            }
            if d.is_some() {
                // The model's deadlines have passed (module doc).
                return Received::TimedOut;
            }
            q = self.to_client_cv.wait(q).unwrap();
        }
    }

    fn ready(&self, timeout: Option<Duration>) -> bool {
        let mut q = self.to_client.lock().unwrap();
        loop {
            if timeout.is_none() && q.2 {
                // The eventfd: read, so the count is 0 again.
                q.2 = false;
                return true;
            }
            if !q.0.is_empty() || q.1 {
                return true;
            }
            if timeout.is_some() {
                // The model's only bounded wait is the reader's look (`Duration::ZERO`).
                return false;
            }
            q = self.to_client_cv.wait(q).unwrap();
        }
    }

    fn wake(&self) {
        self.to_client.lock().unwrap().2 = true;
        self.to_client_cv.notify_all();
    }

    fn apply(&self, _msg: &[u8]) {
        // SeqCst: as in `act`.
        self.applied.fetch_add(1, Ordering::SeqCst);
        let _g = self.applied_m.lock().unwrap();
        self.applied_cv.notify_all();
    }
}

/// A caller: sends request `unique` and waits for it through the leadership.
fn caller(w: &World, unique: u64, note_first: bool) {
    let p = Request::alloc(unique, 2);
    w.table.lock().unwrap().push((unique, p.as_ptr() as usize));
    w.to_server.lock().unwrap().push_back(unique);
    w.to_server_cv.notify_all();
    // SAFETY: the waiter's reference.
    let req = unsafe { p.as_ref() };
    assert_eq!(w.lead.wait(req, w, None), Waited::Finished);
    assert!(req.take_reply().is_some(), "finished without an answer");
    if note_first {
        // SeqCst: as in `act`; what the check relies on is that the notification was
        // applied before the reply was acted on (the leadership orders them).
        assert_eq!(
            w.applied.load(Ordering::SeqCst),
            1,
            "a reply was acted on before the notification the server sent first"
        );
    }
    // SAFETY: the waiter's reference, not used after.
    unsafe { Request::put(p) };
}

/// `Conn::abort`: the socket closes (a receiving leader sees its end) and every request
/// in flight completes with `ECONNABORTED`, its in-flight reference put.
fn abort(w: &World) {
    w.to_client.lock().unwrap().1 = true;
    w.to_client_cv.notify_all();
    let drained: Vec<(u64, usize)> = w.table.lock().unwrap().drain(..).collect();
    for (_, a) in drained {
        let p = NonNull::new(a as *mut Request).unwrap();
        // SAFETY: the table's in-flight reference, now ours.
        let r = unsafe { p.as_ref() };
        if r.flags() & FR_FINISHED == 0 {
            r.complete(&w.iq, EndMode::Sticky, Err(crate::Errno::ECONNABORTED));
        }
        // SAFETY: the in-flight reference, not used after.
        unsafe { Request::put(p) };
    }
}

/// A caller with a deadline (module doc: one that has passed), as `Conn::request`.
fn caller_with_deadline(w: &World, unique: u64) {
    let p = Request::alloc(unique, 2);
    w.table.lock().unwrap().push((unique, p.as_ptr() as usize));
    w.to_server.lock().unwrap().push_back(unique);
    w.to_server_cv.notify_all();
    // SAFETY: the waiter's reference.
    let req = unsafe { p.as_ref() };
    let waited = w.lead.wait(req, w, Some(Instant::now()));
    let answer = if waited == Waited::Finished || req.finished() {
        req.take_reply()
    } else {
        abort(w);
        req.wait_finished()
    };
    assert!(
        answer.is_some(),
        "a timed-out caller returned without an answer"
    );
    // SAFETY: the waiter's reference, not used after.
    unsafe { Request::put(p) };
}

/// One caller with a deadline and `others` without; the server answers every request it
/// is sent, in order, whether or not the connection was aborted meanwhile.
fn timeout_model(others: u64, mutation: Option<Mutation>) {
    loom::model(move || {
        let mut lead = Leadership::new(0);
        lead.mutation = mutation;
        let w = Arc::new(World {
            to_client: Mutex::new((VecDeque::new(), false, false)),
            to_client_cv: Condvar::new(),
            to_server: Mutex::new(VecDeque::new()),
            to_server_cv: Condvar::new(),
            table: Mutex::new(Vec::new()),
            iq: InputQueue::default(),
            applied: AtomicU64::new(0),
            applied_m: Mutex::new(()),
            applied_cv: Condvar::new(),
            lead,
        });
        let mut cs = vec![{
            let w = w.clone();
            thread::spawn(move || caller_with_deadline(&w, 2))
        }];
        for i in 0..others {
            let w = w.clone();
            cs.push(thread::spawn(move || caller(&w, 2 * (i + 2), false)));
        }
        // The server.
        for _ in 0..=others {
            let u = {
                let mut q = w.to_server.lock().unwrap();
                loop {
                    if let Some(u) = q.pop_front() {
                        break u;
                    }
                    q = w.to_server_cv.wait(q).unwrap();
                }
            };
            w.to_client.lock().unwrap().0.push_back(Msg::Reply(u));
            w.to_client_cv.notify_all();
        }
        for c in cs {
            c.join().unwrap();
        }
        w.lead.close();
    });
}

/// A caller with a deadline alone: it times out as leader (the reply not there yet) and
/// aborts, or finds its reply.
#[test]
fn loom_leader_timeout_alone() {
    timeout_model(0, None);
}

/// A caller with a deadline and one without: either may lead; the one with the deadline
/// may time out as leader (handing over) or as follower (unlinking, unless it was just
/// handed the lead), and its abort finishes the other's request too.
#[test]
fn loom_leader_timeout_beside_a_waiting_caller() {
    timeout_model(1, None);
}

/// Mutation: a timed-out follower keeps its link; a leaver later reaches the freed request
/// (loom reports the leaver's read of the request's header racing its free, or the read
/// sees the free's mark: `hand_over`'s assertion).
#[test]
#[should_panic]
fn loom_leader_timeout_keeps_link_is_caught() {
    timeout_model(1, Some(Mutation::TimeoutKeepsLink));
}

/// `callers` callers, each one request; the server answers them in the order they were
/// sent, with a notification before the first reply when `note`; the reader thread runs
/// when `reader`.
fn model(callers: u64, note: bool, reader: bool, mutation: Option<Mutation>) {
    model2(callers, note, reader, mutation, false)
}

/// As [`model`]; with `note_wait`, the first reply is sent only once the notification
/// before it was applied.
fn model2(callers: u64, note: bool, reader: bool, mutation: Option<Mutation>, note_wait: bool) {
    loom::model(move || {
        let mut lead = Leadership::new(0);
        lead.mutation = mutation;
        let w = Arc::new(World {
            to_client: Mutex::new((VecDeque::new(), false, false)),
            to_client_cv: Condvar::new(),
            to_server: Mutex::new(VecDeque::new()),
            to_server_cv: Condvar::new(),
            table: Mutex::new(Vec::new()),
            iq: InputQueue::default(),
            applied: AtomicU64::new(0),
            applied_m: Mutex::new(()),
            applied_cv: Condvar::new(),
            lead,
        });
        let rd = reader.then(|| {
            let w = w.clone();
            thread::spawn(move || w.lead.reader(&*w))
        });
        let cs: Vec<_> = (0..callers)
            .map(|i| {
                let w = w.clone();
                thread::spawn(move || caller(&w, 2 * (i + 1), note && callers == 1))
            })
            .collect();
        // The server.
        for i in 0..callers {
            let u = {
                let mut q = w.to_server.lock().unwrap();
                loop {
                    if let Some(u) = q.pop_front() {
                        break u;
                    }
                    q = w.to_server_cv.wait(q).unwrap();
                }
            };
            {
                let mut q = w.to_client.lock().unwrap();
                if note && i == 0 {
                    q.0.push_back(Msg::Note);
                }
                if !(note_wait && i == 0) {
                    q.0.push_back(Msg::Reply(u));
                }
            }
            w.to_client_cv.notify_all();
            if note_wait && i == 0 {
                // The reply only once the notification was applied.
                let mut g = w.applied_m.lock().unwrap();
                while w.applied.load(Ordering::SeqCst) == 0 {
                    g = w.applied_cv.wait(g).unwrap();
                }
                drop(g);
                w.to_client.lock().unwrap().0.push_back(Msg::Reply(u));
                w.to_client_cv.notify_all();
            }
        }
        for c in cs {
            c.join().unwrap();
        }
        // Close: the socket ends, the leadership closes, the reader exits.
        w.to_client.lock().unwrap().1 = true;
        w.to_client_cv.notify_all();
        w.lead.close();
        if let Some(r) = rd {
            r.join().unwrap();
        }
        if note {
            // SeqCst: as in `act` (every thread is joined).
            assert_eq!(w.applied.load(Ordering::SeqCst), 1, "a notification lost");
        }
    });
}

/// Two callers, no reader thread: one leads, the other follows and is handed the
/// receive side, or finds its reply received by the first.
#[test]
fn loom_leader_two_callers() {
    model(2, false, false, None);
}

/// One caller and the reader thread, the server sending a notification before the reply:
/// the caller leads (or the idle reader does), the notification goes to the reader
/// thread, applied before the reply is acted on.
#[test]
fn loom_leader_notification_then_reply() {
    model(1, true, true, None);
}

/// Two callers and the reader thread.
#[test]
fn loom_leader_two_callers_and_the_reader() {
    model(2, false, true, None);
}

/// Mutation: leaving without handing over: the follower sleeps for ever.
#[test]
#[should_panic(expected = "a follower asleep while nobody receives")]
fn loom_leader_no_hand_over_is_caught() {
    model(2, false, false, Some(Mutation::NoHandOver));
}

/// Mutation: the leader keeps receiving after a notification: the reply is acted on
/// before the notification is applied.
#[test]
#[should_panic(expected = "a reply was acted on before the notification")]
fn loom_leader_keep_lead_on_note_is_caught() {
    model(1, true, true, Some(Mutation::KeepLeadOnNote));
}

/// The server sends a notification and answers only once it is applied (a request held
/// meanwhile): the reader thread, idle in its look at the socket when the caller took the
/// notification's message, is woken to apply it (without the wake, loom finds the three
/// threads asleep: a reviewer's scenario, the code before the eventfd).
#[test]
fn loom_leader_notification_applied_while_the_request_is_held() {
    model2(1, true, true, None, true);
}
