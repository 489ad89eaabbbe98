//! Garbage retired through the epoch is freed by the thread that retired it.
//!
//! uvfs carries a patched crossbeam-epoch (vendor/crossbeam-epoch, UVFS-PATCH.md): a
//! participant keeps the bags it seals and frees them itself once they are two epochs old,
//! as Linux runs RCU callbacks on the CPU that queued them (kernel/rcu/tree.c,
//! per-CPU `rcu_data.cblist`). Stock crossbeam-epoch pushes every full bag onto one global
//! queue that any thread pops, so half the frees of a two-thread create/unlink loop ran on
//! the other thread (a cross-thread free: the allocator's remote-free list, and the
//! object's lines moved to the freeing CPU): `creat-clo` fell to 0.83x at 2 threads, and
//! went to 1.33x with the patch (docs/bench.md).
//!
//! This test fails on stock crossbeam-epoch (50k-185k of 400k closures ran on the other
//! thread): two threads each retire 200,000 closures that record on which thread they run;
//! while both are still retiring, fewer than 5% may run on the other thread (the patch
//! moves a bag to the global queue only past 16 local ones, which happens only while the
//! other thread holds the epoch back).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

#[test]
fn garbage_is_freed_by_the_thread_that_retired_it() {
    const N: usize = 200_000;
    let barrier = Arc::new(Barrier::new(2));
    // Set by each thread when it stops retiring; a closure run on another thread after
    // that is a hand-over at exit (allowed), before it a steal (not allowed).
    let done = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let stolen = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|me| {
            let (barrier, done, stolen, ran) =
                (barrier.clone(), done.clone(), stolen.clone(), ran.clone());
            thread::spawn(move || {
                let owner = thread::current().id();
                barrier.wait();
                for _ in 0..N {
                    let g = crossbeam_epoch::pin();
                    let (done, stolen, ran) = (done.clone(), stolen.clone(), ran.clone());
                    g.defer(move || {
                        // Relaxed (all four): counters and flags read after the threads
                        // are joined (join orders them); the owner's `done` store is
                        // read racily on purpose: a closure that runs before it was set
                        // ran while the owner was still retiring.
                        ran.fetch_add(1, Ordering::Relaxed);
                        if thread::current().id() != owner && !done[me].load(Ordering::Relaxed) {
                            stolen.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
                // Relaxed: see above.
                done[me].store(true, Ordering::Relaxed);
                // Pins without garbage, so that this thread collects what it sealed last
                // (every 128th pin collects) once the other has stopped holding epochs.
                for _ in 0..1024 {
                    drop(crossbeam_epoch::pin());
                }
                // Wait for the other thread too, so that neither exits (handing its bags to
                // the global queue) while the other is still retiring.
                barrier.wait();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Relaxed: after join.
    let (ran, stolen) = (ran.load(Ordering::Relaxed), stolen.load(Ordering::Relaxed));
    // Not all: a thread keeps up to 17 bags when the other held the epoch back (pinned
    // while preempted); most run, or the check below would be vacuous.
    assert!(
        ran > N,
        "only {ran} of {} closures ran while the threads ran: the epoch did not advance",
        2 * N
    );
    // Not zero: a thread hands bags past its 16th to the global queue, which happens when
    // the other thread holds the epoch back (preempted while pinned, on a busy machine):
    // 0.4% of them in a run beside a build. Stock crossbeam-epoch: 12-46%.
    assert!(
        stolen * 20 < ran,
        "{stolen} of {ran} closures ran on the other thread while their thread still retired"
    );
}
