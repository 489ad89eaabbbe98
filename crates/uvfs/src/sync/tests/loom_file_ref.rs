//! Loom models of `FileRef`: concurrent get, put and last put.

use crate::sync::file_ref::FileRef;
use crate::sync::refcount::{CasRef, RefCount};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Two holders put concurrently while a third thread tries to get: exactly one put (or the
/// getter's own put) releases, a failed get never makes a release happen twice, and no
/// successful get follows the release.
#[test]
fn get_races_last_put() {
    get_races_last_put_with::<FileRef>();
}

/// The same race for the lesson-2 baseline `CasRef` ("add unless zero" loop), which the
/// ablation benchmark runs on the real fd table.
#[test]
fn cas_ref_get_races_last_put() {
    get_races_last_put_with::<CasRef>();
}

fn get_races_last_put_with<R: RefCount>() {
    loom::model(|| {
        let r = Arc::new(<R as RefCount>::new(2));
        let released = Arc::new(AtomicUsize::new(0));
        let mut hs = Vec::new();
        for _ in 0..2 {
            let (r, released) = (r.clone(), released.clone());
            hs.push(thread::spawn(move || {
                if r.put() {
                    // Relaxed: counted after join.
                    released.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        let (r2, rel2) = (r.clone(), released.clone());
        let getter = thread::spawn(move || {
            if r2.get() {
                // Relaxed: the release must not have happened yet (we hold a reference).
                assert_eq!(
                    rel2.load(Ordering::Relaxed),
                    0,
                    "get succeeded after release"
                );
                if r2.put() {
                    // Relaxed: counted after join.
                    rel2.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        for h in hs {
            h.join().unwrap();
        }
        getter.join().unwrap();
        // Relaxed: all threads joined.
        assert_eq!(released.load(Ordering::Relaxed), 1, "exactly one release");
        assert_eq!(r.read(), 0);
        assert!(!r.get(), "a released count never comes back");
    });
}

/// `put_close` (one CAS ONEREF -> DEAD) racing a `get` and a plain `put`.
#[test]
fn put_close_races_get() {
    loom::model(|| {
        let r = Arc::new(FileRef::new(2));
        let released = Arc::new(AtomicUsize::new(0));
        let (a, ra) = (r.clone(), released.clone());
        let t1 = thread::spawn(move || {
            if a.put_close() {
                // Relaxed: counted after join.
                ra.fetch_add(1, Ordering::Relaxed);
            }
        });
        let (b, rb) = (r.clone(), released.clone());
        let t2 = thread::spawn(move || {
            let got = b.get();
            let mut n = 0;
            if b.put() {
                n += 1;
            }
            if got && b.put() {
                n += 1;
            }
            // Relaxed: counted after join.
            rb.fetch_add(n, Ordering::Relaxed);
        });
        t1.join().unwrap();
        t2.join().unwrap();
        // Relaxed: all threads joined.
        assert_eq!(released.load(Ordering::Relaxed), 1);
    });
}
