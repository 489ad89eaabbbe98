//! Loom models of `SeqCount`'s spinning write lock (sync/seqcount.rs, `write_lock`): the
//! protocol issue 16 put on an inode's timestamps, so that concurrent `futimens` of one
//! file spin on the times' line instead of parking on `attr_lock`.
//!
//! The data words are loom atomics read and written Relaxed, as `Times` is (fs.rs); each
//! section writes two words that must stay equal, so a torn read shows as a mismatch.

use crate::sync::seqcount::model::SeqCount;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Two words under one counter; a section stores the same value in both.
struct Pair {
    seq: SeqCount,
    a: AtomicU32,
    b: AtomicU32,
}

impl Pair {
    /// A read section, retried until it saw no write: `(a, b)`.
    fn read(&self) -> (u32, u32) {
        loop {
            let s = self.seq.read_begin();
            // Relaxed: inside a read section; `read_retry` orders them (its Acquire fence).
            let a = self.a.load(Ordering::Relaxed);
            // Relaxed: as above.
            let b = self.b.load(Ordering::Relaxed);
            if !self.seq.read_retry(s) {
                return (a, b);
            }
            thread::yield_now();
        }
    }

    /// A read-modify-write section (what `Inode::stamp` does: read the times in the
    /// section, decide, store): adds one to both words.
    fn increment(&self) {
        let _w = self.seq.write_lock();
        // Relaxed: the section's owner is the only writer; `write_lock`'s Acquire ordered
        // the previous section's stores before these loads.
        let a = self.a.load(Ordering::Relaxed);
        // Relaxed: inside the write section, ordered for readers by its fences.
        self.a.store(a + 1, Ordering::Relaxed);
        // Relaxed: as above.
        let b = self.b.load(Ordering::Relaxed);
        // Relaxed: as above.
        self.b.store(b + 1, Ordering::Relaxed);
    }
}

fn pair() -> Arc<Pair> {
    Arc::new(Pair {
        seq: SeqCount::new(),
        a: AtomicU32::new(0),
        b: AtomicU32::new(0),
    })
}

/// Two writers and a reader: no increment is lost (the sections exclude each other) and
/// the reader never sees a torn pair, only 0, 1 or 2 in both words.
#[test]
fn write_lock_two_writers_and_a_reader() {
    loom::model(|| {
        let p = pair();
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let p = p.clone();
                thread::spawn(move || p.increment())
            })
            .collect();
        let (a, b) = p.read();
        assert_eq!(a, b, "torn read");
        assert!(a <= 2);
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(p.read(), (2, 2), "an increment was lost");
    });
}

/// A reader that starts after a writer's section ended sees its stores (the guard's
/// Release store pairs with `read_begin`'s Acquire load), and a write section that
/// follows sees the previous one's stores (the CAS's Acquire).
#[test]
fn write_lock_publishes_to_later_reader_and_writer() {
    loom::model(|| {
        let p = pair();
        let w = {
            let p = p.clone();
            thread::spawn(move || p.increment())
        };
        let (a, b) = p.read();
        assert_eq!(a, b, "torn read");
        w.join().unwrap();
        p.increment();
        assert_eq!(p.read(), (2, 2));
    });
}

/// The same two writers entering with `write_begin`/`write_end` and no lock of their own
/// (the style `write_lock` replaces on the times, without the `attr_lock` it needed): loom
/// must find the lost increment or the torn read, or the models above prove nothing.
#[test]
#[should_panic]
fn unserialised_writers_race() {
    loom::model(|| {
        let p = pair();
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let p = p.clone();
                thread::spawn(move || {
                    p.seq.write_begin();
                    // Relaxed: the model's point is that nothing serialises these.
                    let a = p.a.load(Ordering::Relaxed);
                    // Relaxed: as above.
                    p.a.store(a + 1, Ordering::Relaxed);
                    // Relaxed: as above.
                    let b = p.b.load(Ordering::Relaxed);
                    // Relaxed: as above.
                    p.b.store(b + 1, Ordering::Relaxed);
                    p.seq.write_end();
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(p.read(), (2, 2), "an increment was lost");
    });
}
