//! Loom model of `OnceBox` (sync/once_box.rs), the lazy publication of an inode's lock
//! context (`Inode::i_flctx`, locks.rs): two threads race to initialise it while a third
//! reads. Every initialiser gets the same value, every reader that sees it sees it
//! initialised, and exactly one value survives (loom checks leaks and double frees of
//! the loom-tracked `Arc`s held in the value).

use crate::sync::once_box::model::OnceBox;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A value whose initialisation is a plain store a racing reader must see.
struct Val {
    tag: usize,
    data: AtomicUsize,
    _tracked: Arc<()>,
}

fn make(tag: usize, tracked: &Arc<()>) -> Val {
    let v = Val {
        tag,
        data: AtomicUsize::new(0),
        _tracked: tracked.clone(),
    };
    // Relaxed: initialisation before publication; the publication orders it.
    v.data.store(tag * 10, Ordering::Relaxed);
    v
}

#[test]
fn loom_once_box_two_initialisers_and_a_reader() {
    loom::model(|| {
        let tracked = Arc::new(());
        let b = Arc::new(OnceBox::<Val>::new());
        let hs: Vec<_> = (1..=2)
            .map(|tag| {
                let b = b.clone();
                let t = tracked.clone();
                thread::spawn(move || {
                    let v = b.get_or_init(|| make(tag, &t));
                    // Relaxed: ordered by `get_or_init`'s Acquire.
                    assert_eq!(v.data.load(Ordering::Relaxed), v.tag * 10);
                    v.tag
                })
            })
            .collect();
        if let Some(v) = b.get() {
            // Relaxed: ordered by `get`'s Acquire.
            assert_eq!(v.data.load(Ordering::Relaxed), v.tag * 10);
        }
        let tags: Vec<usize> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            tags[0], tags[1],
            "both initialisers use the one published value"
        );
        assert_eq!(b.get().map(|v| v.tag), Some(tags[0]));
        drop(b);
        // The loser's value was freed, the winner's with the box: only ours is left.
        assert_eq!(Arc::strong_count(&tracked), 1);
    });
}
