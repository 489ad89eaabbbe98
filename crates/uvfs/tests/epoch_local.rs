//! Garbage retired through the epoch is freed by the thread that retired it.
//!
//! uvfs carries a patched crossbeam-epoch (vendor/crossbeam-epoch, UVFS-PATCH.md): a
//! participant keeps the bags it seals (up to 16) and frees them itself once they are two
//! epochs old, as Linux runs RCU callbacks on the CPU that queued them (kernel/rcu/tree.c,
//! per-CPU `rcu_data.cblist`). Stock crossbeam-epoch pushes every full bag onto one global
//! queue that any thread pops, so half the frees of a two-thread create/unlink loop ran on
//! the other thread (a cross-thread free: the allocator's remote-free list, and the
//! object's lines moved to the freeing CPU): `creat-clo` fell to 0.83x at 2 threads, and
//! went to 1.33x with the patch (docs/bench.md).
//!
//! The test is sequential, so that no scheduling can change it (an earlier version raced two
//! retiring threads and failed on an oversubscribed machine: a thread preempted while
//! pinned holds the epoch back, and the other then hands bags past its 16th to the global
//! queue, by design). Thread A retires ten bags' worth of closures; then thread B, alone,
//! pins, flushes and collects many times (on stock crossbeam-epoch B's collections find A's
//! bags in the global queue, expired, and run them: the test fails); then A pins until its
//! own collections have run them all. Every closure must run, and on A.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

#[test]
fn garbage_is_freed_by_the_thread_that_retired_it() {
    // Ten bags of 64: under the patch's 16 kept per thread, so none is handed over.
    const N: usize = 640;
    let ran_on_a = Arc::new(AtomicUsize::new(0));
    let ran_elsewhere = Arc::new(AtomicUsize::new(0));
    let (to_a, a_rx) = mpsc::channel::<()>();
    let (to_main, main_rx) = mpsc::channel::<()>();
    let a = {
        let (ran_on_a, ran_elsewhere) = (ran_on_a.clone(), ran_elsewhere.clone());
        thread::spawn(move || {
            let me = thread::current().id();
            for _ in 0..N {
                let g = crossbeam_epoch::pin();
                let (on_a, elsewhere) = (ran_on_a.clone(), ran_elsewhere.clone());
                g.defer(move || {
                    // Relaxed: counters read after the threads are joined (join orders).
                    if thread::current().id() == me {
                        on_a.fetch_add(1, Ordering::Relaxed);
                    } else {
                        // Relaxed: as above.
                        elsewhere.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            // One more (uncounted) seals the tenth bag: a bag is sealed when the next
            // deferred function does not fit.
            crossbeam_epoch::pin().defer(|| ());
            // A is not pinned now; B runs alone.
            to_main.send(()).unwrap();
            a_rx.recv().unwrap();
            // A's own collections (every 128th pin) advance the epoch and run its bags,
            // at most 8 per collection.
            for _ in 0..128 * 16 {
                drop(crossbeam_epoch::pin());
            }
        })
    };
    main_rx.recv().unwrap();
    thread::spawn(|| {
        for _ in 0..128 * 16 {
            let g = crossbeam_epoch::pin();
            g.flush();
        }
    })
    .join()
    .unwrap();
    to_a.send(()).unwrap();
    a.join().unwrap();
    // Relaxed: after join.
    let (on_a, elsewhere) = (
        ran_on_a.load(Ordering::Relaxed),
        ran_elsewhere.load(Ordering::Relaxed),
    );
    assert_eq!(
        elsewhere, 0,
        "{elsewhere} of A's {N} closures ran on another thread ({on_a} on A)"
    );
    assert_eq!(on_a, N, "A's closures that ran on A");
}
