//! Loom models of `PcpCount` (sync/pcp_ref.rs): the detach protocol of a sharded count.
//!
//! An epoch grace period is modelled by a loom `RwLock`: a pinned section holds it for
//! reading, and `synchronize` takes it for writing once (it returns after every section
//! that began before it has ended), which is the property `settle` relies on.

use crate::sync::pcp_ref::{Loom, PcpCount, TryGet, F_RDONLY, REF, WRITER};
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, RwLock};
use loom::thread;

/// A holder's put, a walker's borrowed get (it found the object in the tree before the
/// detach) and a lazy detach race: the object is released exactly once, after the last
/// reference, and no get succeeds after the release.
#[test]
fn lazy_detach_races_put_and_borrowed_get() {
    loom::model(|| {
        let c = Arc::new(PcpCount::<Loom>::with_shards(0, 2));
        c.inc_on(0, REF);
        let grace = Arc::new(RwLock::new(()));
        let attached = Arc::new(AtomicBool::new(true));
        let released = Arc::new(AtomicUsize::new(0));

        let holder = {
            let (c, grace, released) = (c.clone(), grace.clone(), released.clone());
            thread::spawn(move || {
                let _pin = grace.read().unwrap();
                if c.put_on(0, REF) {
                    // Relaxed: counted after join.
                    released.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let walker = {
            let (c, grace, attached, released) =
                (c.clone(), grace.clone(), attached.clone(), released.clone());
            thread::spawn(move || {
                let pin = grace.read().unwrap();
                // SeqCst: the tree lookup; the detacher unlinks before its grace period.
                if !attached.load(Ordering::SeqCst) {
                    return;
                }
                let (got, rel) = c.try_get_on(1, REF);
                if rel {
                    // Relaxed: counted after join.
                    released.fetch_add(1, Ordering::Relaxed);
                }
                drop(pin);
                if got == TryGet::Got {
                    // Relaxed: we hold a reference, so no release may have happened.
                    assert_eq!(released.load(Ordering::Relaxed), 0, "got after release");
                    let _pin = grace.read().unwrap();
                    if c.put_on(1, REF) {
                        // Relaxed: counted after join.
                        released.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        // The detacher: unlink, mark detached, one grace period, the first exact sum.
        // SeqCst: see the walker.
        attached.store(false, Ordering::SeqCst);
        c.detach();
        drop(grace.write().unwrap());
        if c.settle() {
            // Relaxed: counted after join.
            released.fetch_add(1, Ordering::Relaxed);
        }
        holder.join().unwrap();
        walker.join().unwrap();
        // Relaxed: all threads joined.
        assert_eq!(released.load(Ordering::Relaxed), 1, "exactly one release");
    });
}

/// A umount's busy check against a walker's borrowed get: either the check sees the
/// reference (busy) or the get backs off; a get that succeeds after a "not busy" answer
/// finds the object detached, and the count still releases it exactly once.
#[test]
fn busy_check_races_borrowed_get() {
    loom::model(|| {
        let c = Arc::new(PcpCount::<Loom>::with_shards(0, 2));
        let grace = Arc::new(RwLock::new(()));
        let attached = Arc::new(AtomicBool::new(true));
        let released = Arc::new(AtomicUsize::new(0));
        let walker = {
            let (c, grace, attached, released) =
                (c.clone(), grace.clone(), attached.clone(), released.clone());
            thread::spawn(move || {
                let pin = grace.read().unwrap();
                // SeqCst: the tree lookup (see `lazy_detach_races_put_and_borrowed_get`).
                if !attached.load(Ordering::SeqCst) {
                    return;
                }
                let (got, rel) = c.try_get_on(1, REF);
                assert!(!rel, "nothing to release while attached");
                drop(pin);
                if got == TryGet::Got {
                    let _pin = grace.read().unwrap();
                    if c.put_on(1, REF) {
                        // Relaxed: counted after join.
                        released.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        let busy = c.busy_check(0);
        if !busy {
            // SeqCst: the unlink from the tree, before the grace period.
            attached.store(false, Ordering::SeqCst);
            c.detach();
            drop(grace.write().unwrap());
            if c.settle() {
                // Relaxed: counted after join.
                released.fetch_add(1, Ordering::Relaxed);
            }
        }
        walker.join().unwrap();
        // Relaxed: all threads joined.
        let n = released.load(Ordering::Relaxed);
        if busy {
            // The walker's increment was seen (it may still have backed off: a spurious
            // EBUSY, as Linux's racy check allows); nothing was detached.
            assert_eq!(n, 0);
        } else {
            assert_eq!(n, 1, "detached: released exactly once");
        }
    });
}

/// Making the object read-only against an open for writing: never both (a writer on a
/// read-only mount).
#[test]
fn read_only_switch_races_writer() {
    loom::model(|| {
        let c = Arc::new(PcpCount::<Loom>::with_shards(0, 2));
        c.inc_on(0, REF);
        let writer = {
            let c = c.clone();
            thread::spawn(move || c.try_get_on(1, WRITER).0)
        };
        let made_ro = c.set_flags(F_RDONLY);
        let w = writer.join().unwrap();
        assert!(
            !(made_ro && w == TryGet::Got),
            "a writer was let in on a read-only object"
        );
    });
}
