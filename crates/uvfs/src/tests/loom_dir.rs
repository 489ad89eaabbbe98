//! Loom models of `Dir` (dcache.rs), issue 16: a directory's per-name bucket locks against
//! its all-bucket (exclusive) side. Two creates of one name (exactly one wins), a create
//! against `rmdir`'s emptiness check and death mark (never both), and creates and unlinks
//! against a `getdents` cursor that lists in several steps (each entry that stays linked
//! exactly once, no entry twice, nothing created after the listing's start).
//!
//! What loom sees: the models' directories (`Dir::new_modelled`) take a loom `Mutex` with
//! each bucket lock (sync/loom_spin.rs), so every order of the lock acquisitions (up to
//! `LOOM_MAX_PREEMPTIONS`) is explored; each
//! model step is the same `Dir` code that namei/readdir run (`lock_name`, `lock_all`,
//! `next_cookie`, `insert`, `remove`, `listing_end`, `listing`, and the lockless `lookup`).
//! Their slot words are loom atomics too (`SlotWord`; one slot per bucket in the loom build,
//! so a second name of a bucket takes the skip-list path), so every order of a lookup's slot
//! loads against a writer's stores is explored. What it cannot see: the skip lists' and
//! `OnceBox`'s atomics, the buckets' counts and `replace_seq` are `std`'s (a lookup that
//! races a skip-list replacement is not modelled).

use crate::dcache::{Dir, DirChild, FIRST_COOKIE};
use crate::sync::epoch::Guard;
use crate::{Errno, Result};
use loom::sync::Arc as LoomArc;
use loom::thread;
use std::sync::Arc;

/// A directory entry: its name and cookie.
struct Entry {
    name: &'static [u8],
    cookie: u64,
}

impl DirChild for Entry {
    fn cookie(&self, _: &Guard) -> u64 {
        self.cookie
    }
}

/// `filename_create` + `create_locked` in miniature: EEXIST, ENOENT (dead), else linked.
fn create(dir: &Dir<Entry>, name: &'static [u8]) -> Result<u64> {
    let mut l = dir.lock_name(name);
    if l.get(name).is_some() {
        return Err(Errno::EEXIST);
    }
    if l.dead() {
        return Err(Errno::ENOENT);
    }
    let cookie = l.next_cookie(name)?;
    l.insert(Arc::from(name), Arc::new(Entry { name, cookie }), cookie);
    Ok(cookie)
}

/// `unlinkat` in miniature.
fn unlink(dir: &Dir<Entry>, name: &'static [u8]) -> Result<()> {
    let mut l = dir.lock_name(name);
    l.remove(name).map(drop).ok_or(Errno::ENOENT)
}

/// `rmdir`'s part on the removed directory: ENOTEMPTY, else marked dead.
fn rmdir(dir: &Dir<Entry>) -> Result<()> {
    let mut l = dir.lock_all();
    if !l.is_empty() {
        return Err(Errno::ENOTEMPTY);
    }
    l.set_dead();
    Ok(())
}

/// One `getdents64` call of at most `max` entries from `*pos` (readdir.rs): the listing's end
/// is taken at the first call.
fn getdents(dir: &Dir<Entry>, pos: &mut u64, end: &mut u64, max: usize) -> Vec<&'static [u8]> {
    let mut l = dir.lock_all();
    if *end == 0 {
        *end = l.listing_end();
    }
    let mut out = Vec::new();
    for (c, e) in l.listing(*pos, *end).take(max) {
        out.push(e.name);
        *pos = c + 1;
    }
    out
}

/// Two creates of one name: exactly one succeeds, the other gets EEXIST, one entry.
#[test]
fn two_creates_of_one_name() {
    loom::model(|| {
        let dir = LoomArc::new(Dir::<Entry>::new_modelled());
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let dir = dir.clone();
                thread::spawn(move || create(&dir, b"x"))
            })
            .collect();
        let rs: Vec<Result<u64>> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let ok = rs.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "{rs:?}");
        assert!(rs.contains(&Err(Errno::EEXIST)), "{rs:?}");
        assert_eq!(dir.len(), 1);
        assert!(!dir.lock_all().is_empty());
    });
}

/// A create against `rmdir`: either the create wins (rmdir: ENOTEMPTY) or the rmdir does
/// (the create: ENOENT, the directory stays empty); never a dead directory with an entry.
#[test]
fn create_vs_rmdir() {
    loom::model(|| {
        let dir = LoomArc::new(Dir::<Entry>::new_modelled());
        let d2 = dir.clone();
        let c = thread::spawn(move || create(&d2, b"x"));
        let r = rmdir(&dir);
        let c = c.join().unwrap();
        match (c, r) {
            (Ok(_), Err(e)) => {
                assert_eq!(e, Errno::ENOTEMPTY);
                assert_eq!(dir.len(), 1);
            }
            (Err(e), Ok(())) => {
                assert_eq!(e, Errno::ENOENT);
                assert_eq!(dir.len(), 0);
                assert!(dir.lock_all().dead());
            }
            (c, r) => panic!("create {c:?}, rmdir {r:?}"),
        }
    });
}

/// Creates and unlinks against a listing read one entry per call: the entries that stay
/// linked (`a`, `c`) are listed exactly once, no name twice, an entry removed before the
/// cursor reaches it (`b`) at most once, and entries created after the listing's first call
/// (`n`, `m`, made after a creator saw the listing started) never.
#[test]
fn create_unlink_vs_getdents_cursor() {
    loom::model(|| {
        let dir = LoomArc::new(Dir::<Entry>::new_modelled());
        for n in [b"a", b"b", b"c"] {
            create(&dir, n).unwrap();
        }
        let started = LoomArc::new(loom::sync::atomic::AtomicBool::new(false));
        let (d2, s2) = (dir.clone(), started.clone());
        let w = thread::spawn(move || {
            // SeqCst (test only): a total order with the lister's store, to tell which
            // creates come after its first call.
            let after = s2.load(loom::sync::atomic::Ordering::SeqCst);
            let c = create(&d2, b"n").unwrap();
            unlink(&d2, b"b").unwrap();
            let m = create(&d2, b"m").unwrap();
            (after, c, m)
        });
        let (mut pos, mut end) = (FIRST_COOKIE, 0);
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.extend(getdents(&dir, &mut pos, &mut end, 1));
            // SeqCst (test only): see the writer's load.
            started.store(true, loom::sync::atomic::Ordering::SeqCst);
        }
        let (after, cn, cm) = w.join().unwrap();
        let count = |n: &[u8]| seen.iter().filter(|&&s| s == n).count();
        assert_eq!(count(b"a"), 1, "{seen:?}");
        assert_eq!(count(b"c"), 1, "{seen:?}");
        assert!(count(b"b") <= 1, "{seen:?}");
        assert!(count(b"n") <= 1 && count(b"m") <= 1, "{seen:?}");
        if after {
            assert_eq!(count(b"n") + count(b"m"), 0, "{seen:?}");
        }
        // Entries created after the end was taken have cookies at or past it.
        for (name, c) in [(b"n", cn), (b"m", cm)] {
            if count(name) == 1 {
                assert!(c < end, "{seen:?}");
            }
        }
    });
}

/// `rename` onto an existing name in miniature: the entry named `name` replaced by a new
/// one with a new cookie (`lock_all`, a replacing `insert`); returns the new cookie.
fn replace(dir: &Dir<Entry>, name: &'static [u8]) -> u64 {
    let mut l = dir.lock_all();
    let cookie = l.next_cookie(name).unwrap();
    let old = l.insert(Arc::from(name), Arc::new(Entry { name, cookie }), cookie);
    assert!(old.is_some(), "the name existed");
    cookie
}

/// The lockless lookup (a walk's step, `Dir::lookup`) against a writer that replaces the
/// name it looks for, then unlinks a second name and creates a third (the bucket slots'
/// protocol, dcache.rs `Slots`; `x` is its bucket's first entry, so it lives in a slot):
/// `x`, linked throughout, is always found, as its old entry or its new one, never
/// neither; `z` is created after `y`'s unlink, so a lookup that found `z` (Acquire of the
/// store that published it) and then looks for `y` must miss it; after the writer, the
/// lookups give the new `x`, no `y`, and `z`.
#[test]
fn lookup_vs_replace_unlink_create() {
    loom::model(|| {
        let dir = LoomArc::new(Dir::<Entry>::new_modelled());
        let old_x = create(&dir, b"x").unwrap();
        create(&dir, b"y").unwrap();
        let d2 = dir.clone();
        let w = thread::spawn(move || {
            let new_x = replace(&d2, b"x");
            unlink(&d2, b"y").unwrap();
            create(&d2, b"z").unwrap();
            new_x
        });
        // The lookups on a thread of their own: on the model's main thread loom explored
        // one order only (checked: a replacement that empties the slot before filling it
        // was not caught there, and is here).
        let d3 = dir.clone();
        let r = thread::spawn(move || {
            let g = crate::sync::epoch::pin();
            let x = d3.lookup(b"x", &g).expect("x is linked throughout");
            assert_eq!(x.name, b"x");
            let z = d3.lookup(b"z", &g).is_some();
            let y = d3.lookup(b"y", &g).is_some();
            assert!(!(z && y), "z found, then y still found");
        });
        r.join().unwrap();
        let new_x = w.join().unwrap();
        assert_ne!(old_x, new_x);
        let g = crate::sync::epoch::pin();
        assert_eq!(dir.lookup(b"x", &g).map(|e| e.cookie), Some(new_x));
        assert!(dir.lookup(b"y", &g).is_none());
        assert!(dir.lookup(b"z", &g).is_some());
        assert_eq!(dir.len(), 2);
    });
}
