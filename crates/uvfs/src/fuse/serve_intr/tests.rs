//! The server's interrupt bookkeeping (`serve_intr.rs`): unit tests of each way an interrupt
//! meets its request, and (under `--cfg uvfs_loom`) loom models of the races between a
//! worker's publish and withdraw and the thread that reads the interrupt, with the
//! mutations they must catch.

use std::sync::Arc;

#[cfg(uvfs_loom)]
use super::Mutation;
#[cfg(not(uvfs_loom))]
use super::PENDING_TTL;
use super::{IntrSlots, Target};
use crate::sync::{AtomicU64, Ordering};

/// A stand-in for the worker's `Interrupter`: how many interrupts reached it, and whether
/// one is pending (would cut the worker's next FUSE request short).
#[derive(Debug, Default)]
struct Probe {
    hits: AtomicU64,
    pending: AtomicU64,
}

impl Target for Arc<Probe> {
    fn interrupt(&self) {
        // SeqCst (all here): a test probe, read back by the test's assertions.
        self.hits.fetch_add(1, Ordering::SeqCst);
        // SeqCst: see above.
        self.pending.store(1, Ordering::SeqCst);
    }
    fn cancel(&self) {
        // SeqCst: see `interrupt`.
        self.pending.store(0, Ordering::SeqCst);
    }
}

impl Probe {
    fn hits(&self) -> u64 {
        // SeqCst: see `interrupt`.
        self.hits.load(Ordering::SeqCst)
    }
    fn pending(&self) -> u64 {
        // SeqCst: see `interrupt`.
        self.pending.load(Ordering::SeqCst)
    }
}

#[cfg(not(uvfs_loom))]
mod unit {
    use super::*;

    fn world() -> (IntrSlots<Arc<Probe>>, Arc<Probe>) {
        (IntrSlots::default(), Arc::new(Probe::default()))
    }

    /// A request never interrupted: nothing pending, nothing delivered, no cold path.
    #[test]
    fn uninterrupted_requests_touch_only_their_slot() {
        let (s, p) = world();
        let slot = s.register(p.clone());
        for u in (2..200).step_by(2) {
            s.publish(&slot, u);
            s.withdraw(&slot, u);
        }
        assert_eq!((p.hits(), p.pending(), s.pending_count()), (0, 0, 0));
    }

    /// The interrupt is read while the worker serves the request: delivered once, and what
    /// it left pending is cancelled when the request ends.
    #[test]
    fn interrupt_while_serving_is_delivered_then_cancelled() {
        let (s, p) = world();
        let slot = s.register(p.clone());
        s.publish(&slot, 8);
        assert!(s.interrupt(8));
        assert_eq!((p.hits(), p.pending()), (1, 1));
        s.withdraw(&slot, 8);
        assert_eq!((p.hits(), p.pending(), s.pending_count()), (1, 0, 0));
        // The next request starts uninterrupted.
        s.publish(&slot, 10);
        assert_eq!(p.pending(), 0);
        s.withdraw(&slot, 10);
    }

    /// The interrupt is read before the worker that read the request published it: it
    /// waits, and the worker takes it at publish.
    #[test]
    fn interrupt_before_publish_is_taken_by_the_worker() {
        let (s, p) = world();
        let slot = s.register(p.clone());
        let other = s.register(Arc::new(Probe::default()));
        s.publish(&other, 2);
        assert!(!s.interrupt(4));
        assert_eq!((p.hits(), s.pending_count()), (0, 1));
        s.publish(&slot, 4);
        assert_eq!((p.hits(), p.pending(), s.pending_count()), (1, 1, 0));
        s.withdraw(&slot, 4);
        assert_eq!(p.pending(), 0);
        s.withdraw(&other, 2);
    }

    /// The interrupt is read after its request finished: dropped at once (the slot says
    /// `U | 1`), or, when the worker moved on, at the next request of every slot that
    /// looked idle.
    #[test]
    fn interrupt_after_the_request_finished_is_dropped() {
        let (s, p) = world();
        let slot = s.register(p.clone());
        s.publish(&slot, 6);
        s.withdraw(&slot, 6);
        assert!(!s.interrupt(6));
        assert_eq!((p.hits(), s.pending_count()), (0, 0));
        // Finished, and the worker served another since: pending until the idle slot moves.
        s.publish(&slot, 12);
        s.withdraw(&slot, 12);
        assert!(!s.interrupt(6));
        assert_eq!(s.pending_count(), 1);
        s.publish(&slot, 14);
        assert_eq!((s.pending_count(), p.pending()), (0, 0));
        s.withdraw(&slot, 14);
        assert_eq!(p.hits(), 0);
    }

    /// A second interrupt of the same request (the kernel may queue it twice) makes no
    /// second entry; an interrupt no slot can hold (every slot serves another request) is
    /// dropped at once.
    #[test]
    fn a_repeated_interrupt_is_one_entry() {
        let (s, p) = world();
        let _idle = s.register(p.clone());
        let other = s.register(Arc::new(Probe::default()));
        s.publish(&other, 2);
        assert!(!s.interrupt(4));
        assert!(!s.interrupt(4));
        assert_eq!(s.pending_count(), 1);
        let (s, _p) = world();
        let other = s.register(Arc::new(Probe::default()));
        s.publish(&other, 2);
        assert!(!s.interrupt(4));
        assert_eq!(s.pending_count(), 0);
    }

    /// Bug (reviewer, the io_uring transport): a ring worker serves what one read fetched
    /// one request after another, and the kernel marks each sent when it puts it in an
    /// entry; an interrupt of request 4, behind request 2 that blocks (an inner server that
    /// hangs), found the worker "serving 2" and was dropped once every other slot moved on
    /// or after [`PENDING_TTL`]; 4 then ran without it, and its caller could not be ended.
    /// Fix: a batch reader's slot holds the interrupt until the worker read again, past the
    /// TTL too while it is in a request of that batch; the worker takes it at publish.
    #[test]
    fn a_batch_reader_keeps_the_interrupt_of_a_request_behind_a_blocked_one() {
        let (s, p) = world();
        let ring = s.register_batched(p.clone());
        let other = s.register(Arc::new(Probe::default()));
        s.next_batch(&ring);
        // The read fetched 2 and 4; 2 blocks.
        s.publish(&ring, 2);
        assert!(!s.interrupt(4));
        // The other worker moves on; long after, the interrupt is still there.
        s.publish(&other, 6);
        s.withdraw(&other, 6);
        backdate(&s);
        s.publish(&other, 8);
        s.withdraw(&other, 8);
        assert_eq!((p.hits(), s.pending_count()), (0, 1));
        s.withdraw(&ring, 2);
        assert_eq!(s.pending_count(), 1);
        s.publish(&ring, 4);
        assert_eq!((p.hits(), p.pending(), s.pending_count()), (1, 1, 0));
        s.withdraw(&ring, 4);
        assert_eq!(p.pending(), 0);
    }

    /// What a batch reader holds goes when it reads again (it served its batch), or when it
    /// retires; an interrupt found with the reader idle (between reads) still ages out.
    #[test]
    fn a_batch_reader_releases_the_interrupt_at_its_next_read() {
        let (s, p) = world();
        let ring = s.register_batched(p.clone());
        s.next_batch(&ring);
        s.publish(&ring, 2);
        s.withdraw(&ring, 2);
        assert!(!s.interrupt(4));
        assert_eq!(s.pending_count(), 1);
        s.next_batch(&ring);
        s.publish(&ring, 6);
        assert_eq!((s.pending_count(), p.hits()), (0, 0));
        s.withdraw(&ring, 6);
        // Idle between reads past the TTL: dropped.
        assert!(!s.interrupt(8));
        backdate(&s);
        let other = s.register(Arc::new(Probe::default()));
        s.publish(&other, 10);
        assert_eq!(s.pending_count(), 0);
        s.withdraw(&other, 10);
        // Retired: holds nothing.
        s.retire(&ring);
        assert!(!s.interrupt(12));
        s.publish(&other, 14);
        assert_eq!(s.pending_count(), 0);
        s.withdraw(&other, 14);
        assert_eq!(p.hits(), 0);
    }

    /// Makes every pending interrupt older than [`PENDING_TTL`].
    fn backdate(s: &IntrSlots<Arc<Probe>>) {
        for e in crate::sync::lock(&s.pending).iter_mut() {
            e.since = e
                .since
                .checked_sub(PENDING_TTL * 2)
                .expect("a monotonic clock past 4 s");
        }
    }
}

#[cfg(uvfs_loom)]
mod models {
    use super::*;
    use loom::thread;

    fn world(m: Option<Mutation>) -> (Arc<IntrSlots<Arc<Probe>>>, Arc<Probe>) {
        let mut s = IntrSlots::default();
        s.mutation = m;
        (Arc::new(s), Arc::new(Probe::default()))
    }

    /// The thread that reads the interrupt of request `u`.
    fn reader(s: &Arc<IntrSlots<Arc<Probe>>>, u: u64) -> thread::JoinHandle<()> {
        let s = s.clone();
        thread::spawn(move || {
            s.interrupt(u);
        })
    }

    /// A worker has read request 2 (so the kernel may queue its interrupt: the reader
    /// starts), publishes it and blocks in it until the interrupt has been handled; the
    /// request must have been interrupted, and nothing is left pending.
    fn blocked_request_gets_its_interrupt(m: Option<Mutation>) {
        loom::model(move || {
            let (s, p) = world(m);
            let slot = s.register(p.clone());
            let r = reader(&s, 2);
            s.publish(&slot, 2);
            // Blocked in request 2 (an inner FUSE wait) while the interrupt is handled.
            r.join().unwrap();
            assert_eq!(
                p.hits(),
                1,
                "the interrupt of a request being served was lost"
            );
            s.withdraw(&slot, 2);
            assert_eq!(p.pending(), 0, "an interrupt outlived its request");
            assert_eq!(s.pending_count(), 0, "a taken interrupt stayed pending");
        });
    }

    #[test]
    fn loom_serve_intr_blocked_request_is_interrupted() {
        blocked_request_gets_its_interrupt(None);
    }

    #[test]
    #[should_panic(expected = "the interrupt of a request being served was lost")]
    fn loom_serve_intr_no_publish_fence_is_caught() {
        blocked_request_gets_its_interrupt(Some(Mutation::NoPublishFence));
    }

    /// Worker A has read request 2 and not yet published it (it looks idle) while the
    /// interrupt of 2 is read and worker B serves request 4 (its cold paths sweep the
    /// pending interrupts): the sweep must keep the interrupt for A, which takes it when it
    /// publishes.
    #[test]
    fn loom_serve_intr_sweep_keeps_an_unpublished_request() {
        loom::model(|| {
            let (s, p) = world(None);
            let a = s.register(p.clone());
            let b = s.register(Arc::new(Probe::default()));
            let r = reader(&s, 2);
            let w = {
                let s = s.clone();
                thread::spawn(move || {
                    s.publish(&b, 4);
                    s.withdraw(&b, 4);
                })
            };
            r.join().unwrap();
            w.join().unwrap();
            s.publish(&a, 2);
            assert_eq!(
                p.hits(),
                1,
                "the sweep dropped an interrupt its worker had not met"
            );
            s.withdraw(&a, 2);
            assert_eq!((p.pending(), s.pending_count()), (0, 0));
        });
    }

    /// Request 2 runs without blocking while its interrupt is read at any moment; the
    /// worker then serves 4 and 6. An interrupt of 2 must not reach 4 or 6 (they start
    /// with nothing pending on the interrupter), and none stays pending once the worker
    /// served another request after the reader finished.
    fn late_interrupt_does_not_leak(m: Option<Mutation>) {
        loom::model(move || {
            let (s, p) = world(m);
            let slot = s.register(p.clone());
            let r = reader(&s, 2);
            s.publish(&slot, 2);
            s.withdraw(&slot, 2);
            s.publish(&slot, 4);
            assert_eq!(
                p.pending(),
                0,
                "an interrupt of request 2 reached request 4"
            );
            s.withdraw(&slot, 4);
            r.join().unwrap();
            s.publish(&slot, 6);
            assert_eq!(
                p.pending(),
                0,
                "an interrupt of request 2 reached request 6"
            );
            assert_eq!(s.pending_count(), 0, "a stale interrupt stayed pending");
            s.withdraw(&slot, 6);
            assert!(p.hits() <= 1);
        });
    }

    /// A ring worker's read fetched requests 2 and 4 (both sent: the interrupt of 4 may
    /// come); it blocks in 2 (an inner server) while the interrupt of 4 is read and worker
    /// B serves 6 (its cold paths sweep). The interrupt must not reach 2, and the worker
    /// must take it when it starts 4.
    fn request_behind_a_blocked_one_gets_its_interrupt(m: Option<Mutation>) {
        loom::model(move || {
            let (s, p) = world(m);
            let w = s.register_batched(p.clone());
            let b = s.register(Arc::new(Probe::default()));
            s.next_batch(&w);
            let r = reader(&s, 4);
            let t = {
                let s = s.clone();
                thread::spawn(move || {
                    s.publish(&b, 6);
                    s.withdraw(&b, 6);
                })
            };
            s.publish(&w, 2);
            // Blocked in request 2 while the interrupt of 4 is handled and B moves on.
            r.join().unwrap();
            t.join().unwrap();
            assert_eq!(p.hits(), 0, "the interrupt of request 4 reached request 2");
            s.withdraw(&w, 2);
            s.publish(&w, 4);
            assert_eq!(
                p.hits(),
                1,
                "the interrupt of a request behind a blocked one in its ring was lost"
            );
            s.withdraw(&w, 4);
            assert_eq!((p.pending(), s.pending_count()), (0, 0));
        });
    }

    #[test]
    fn loom_serve_intr_request_behind_a_blocked_one_is_interrupted() {
        request_behind_a_blocked_one_gets_its_interrupt(None);
    }

    #[test]
    #[should_panic(expected = "behind a blocked one in its ring was lost")]
    fn loom_serve_intr_batch_as_single_is_caught() {
        request_behind_a_blocked_one_gets_its_interrupt(Some(Mutation::BatchAsSingle));
    }

    #[test]
    fn loom_serve_intr_late_interrupt_does_not_leak() {
        late_interrupt_does_not_leak(None);
    }

    #[test]
    #[should_panic(expected = "reached request")]
    fn loom_serve_intr_no_withdraw_fence_is_caught() {
        late_interrupt_does_not_leak(Some(Mutation::NoWithdrawFence));
    }
}
