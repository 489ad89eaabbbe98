//! Tests of the FUSE client's request lifecycle: the interrupt protocol's outcomes in
//! each order (unit tests), and under `--cfg uvfs_loom` the model of the three parties of
//! Linux's 2021 use-after-free (e1e71c168813) in every interleaving.

use super::request::{request_end, EndMode, InputQueue, Request, FR_FINISHED};

#[cfg(not(uvfs_loom))]
mod orders {
    use super::*;

    /// Interrupted before the reply: the reader gets the interrupt (unique | 1, the
    /// request's unique), once; the reply then finishes the request.
    #[test]
    fn interrupt_then_reply() {
        let iq = InputQueue::default();
        let p = Request::alloc(42, 2);
        // SAFETY: we hold both references until the puts below.
        let r = unsafe { p.as_ref() };
        assert_eq!(r.set_interrupted() & FR_FINISHED, 0);
        assert!(iq.queue_interrupt(r), "a reader is to be woken");
        assert!(!iq.queue_interrupt(r), "linked once");
        assert_eq!(iq.read_interrupt(), Some((43, 42)));
        assert_eq!(iq.read_interrupt(), None);
        assert!(request_end(&iq, r, EndMode::Sticky));
        assert!(
            !request_end(&iq, r, EndMode::Sticky),
            "an abort after the reply: no-op"
        );
        // SAFETY: our two references, not used after.
        unsafe {
            Request::put(p);
            Request::put(p);
        }
    }

    /// The reply came first: the interrupt is not queued at all.
    #[test]
    fn reply_then_interrupt() {
        let iq = InputQueue::default();
        let p = Request::alloc(8, 2);
        // SAFETY: as above.
        let r = unsafe { p.as_ref() };
        assert!(request_end(&iq, r, EndMode::Sticky));
        assert_ne!(
            r.set_interrupted() & FR_FINISHED,
            0,
            "the waiter sees it finished"
        );
        assert!(!iq.queue_interrupt(r));
        assert_eq!(iq.read_interrupt(), None);
        // SAFETY: as above.
        unsafe {
            Request::put(p);
            Request::put(p);
        }
    }

    /// Queued, then the reply arrives before a reader runs: `request_end` unlinks it, so
    /// the server is never told of an interrupt for a finished request, and the list
    /// holds no dangling link once the request is freed.
    #[test]
    fn queued_then_reply_unlinks() {
        for mode in [EndMode::Sticky, EndMode::Locked] {
            let iq = InputQueue::default();
            let a = Request::alloc(2, 2);
            let b = Request::alloc(4, 2);
            // SAFETY: as above.
            let (ra, rb) = unsafe { (a.as_ref(), b.as_ref()) };
            ra.set_interrupted();
            rb.set_interrupted();
            assert!(iq.queue_interrupt(ra));
            assert!(iq.queue_interrupt(rb));
            assert!(request_end(&iq, ra, mode));
            // SAFETY: as above; `a` is unlinked, so freeing it leaves no link behind.
            unsafe {
                Request::put(a);
                Request::put(a);
            }
            assert_eq!(iq.read_interrupt(), Some((5, 4)), "only the unfinished one");
            assert!(request_end(&iq, rb, mode));
            // SAFETY: as above.
            unsafe {
                Request::put(b);
                Request::put(b);
            }
        }
    }
}

/// Loom: the waiter (interrupted: sets the flag, queues the interrupt, waits for the
/// reply, drops its reference), the replier (`request_end`, drops the in-flight
/// reference) and the interrupt reader (reads the request's header under the lock,
/// holding no reference), in every interleaving. The last reference's free is a write of
/// the header that loom checks against the reader's read.
#[cfg(uvfs_loom)]
mod loom_model {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    fn three_parties(mode: EndMode) {
        loom::model(move || {
            let iq = Arc::new(InputQueue::default());
            let p = Request::alloc(10, 2);
            // Pointers are not Send; the model passes the address.
            let addr = p.as_ptr() as usize;
            let req = move || {
                // SAFETY: the model keeps the memory until every thread is joined (the
                // loom `free` only poisons the header).
                unsafe { &*(addr as *const Request) }
            };
            let waiter = {
                let iq = iq.clone();
                thread::spawn(move || {
                    let r = req();
                    if r.set_interrupted() & FR_FINISHED == 0 {
                        iq.queue_interrupt(r);
                    }
                    while r.flags() & FR_FINISHED == 0 {
                        thread::yield_now();
                    }
                    // SAFETY: the waiter's reference, not used after.
                    unsafe { Request::put(std::ptr::NonNull::new_unchecked(addr as *mut _)) };
                })
            };
            let replier = {
                let iq = iq.clone();
                thread::spawn(move || {
                    request_end(&iq, req(), mode);
                    // SAFETY: the in-flight reference, not used after.
                    unsafe { Request::put(std::ptr::NonNull::new_unchecked(addr as *mut _)) };
                })
            };
            let reader = {
                let iq = iq.clone();
                thread::spawn(move || {
                    if let Some((int, orig)) = iq.read_interrupt() {
                        assert_eq!((int, orig), (11, 10));
                    }
                })
            };
            waiter.join().unwrap();
            replier.join().unwrap();
            reader.join().unwrap();
            // SAFETY: every thread is joined; the model's allocation goes now.
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        });
    }

    /// Linux since 2021: no interleaving lets the reader see the request after its free.
    #[test]
    fn sticky_flag_has_no_use_after_free() {
        three_parties(EndMode::Sticky);
    }

    /// Linux before 2018 (always locked, the ablation's "before"): safe too.
    #[test]
    fn always_locked_has_no_use_after_free() {
        three_parties(EndMode::Locked);
    }

    /// Linux 2018-2021 (`list_empty` without the lock): the model must find the reader
    /// reading the header while the last put frees it (e1e71c168813).
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn list_empty_2018_is_caught() {
        three_parties(EndMode::ListEmpty2018);
    }
}
