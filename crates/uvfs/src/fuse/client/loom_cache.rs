//! Loom model of the page cache's protocol (cache.rs, module doc, "The protocol"): a read
//! miss (version, token, READ, `FileCache::fill_commit`) racing a change of the same page
//! (the server changes it and answers, then `FileCache::drop_pages` for a write, or
//! `invalidate` then `bump` for a truncate, or `invalidate` alone for an open without
//! `FOPEN_KEEP_CACHE`), on the real `PageCache` and `FileCache` (under
//! `--cfg uvfs_loom` their slots, versions and generation are loom atomics; a set has 2
//! ways). The review question of issue 11: can a READ that fetched the old bytes insert
//! them after the change dropped the pages, so that they outlive it?
//!
//! Properties, in every interleaving: once both have returned, a lookup finds no page of
//! the old bytes (a stale page), and a page read by anyone is whole (every byte of one
//! version, and loom's cell in `Page` reports a page read without its making ordered
//! before the read). The mutations the model must catch: `fill_commit` without the
//! version re-check, and without its fence (the store-buffering pattern then fails), and
//! the generation loaded Relaxed (what the model found in the code as merged: a truncate
//! racing a read miss left the old bytes cached; fixed by Acquire/Release, cache.rs).
//!
//! The server is a loom atomic, stored and loaded SeqCst: it answers one request at a
//! time, and a request's trip to it and the reply's trip back (a socket, conn.rs) order
//! the READ it answers after or before the change it made.

use super::cache::{FileCache, Mutation, Page, PageCache};
use crate::sync::epoch;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Bytes of a page in the model (a short page: its length is checked too).
const LEN: usize = 8;

/// What the changing thread does after the server made the change.
#[derive(Clone, Copy)]
enum Change {
    /// A WRITE of the page (fs.rs `write`: `drop_range`).
    Write,
    /// A truncate that changed the size (fs.rs `truncate`: `store_attrs` moves the
    /// generation, then `bump_version`).
    Truncate,
    /// A WRITE of more pages than the cache holds (`drop_pages`: the bump, then a new
    /// generation instead of the drops).
    BigWrite,
    /// An open answered without `FOPEN_KEEP_CACHE` after the server's file changed
    /// (`invalidate_data` alone, no bump).
    Open,
}

/// One mount's cache, one file, the mount's version, the server's copy of the page.
struct World {
    cache: PageCache,
    file: FileCache,
    mount: AtomicU64,
    server: AtomicU64,
}

fn world(mutation: Option<Mutation>) -> Arc<World> {
    let mut file = FileCache::new(1);
    file.mutation = mutation;
    Arc::new(World {
        cache: PageCache::new(2),
        file,
        mount: AtomicU64::new(1),
        server: AtomicU64::new(0),
    })
}

/// A whole page's version, or a panic if it is torn or short.
fn version_of(p: &Page) -> u8 {
    let b = p.bytes();
    assert_eq!(b.len(), LEN, "a short page");
    assert!(b.iter().all(|&x| x == b[0]), "a torn page: {b:?}");
    b[0]
}

/// fs.rs `read_cached` of page 0: a hit, else `fill` (version, token, READ, commit).
/// Returns the version read.
fn read(w: &World) -> u8 {
    let g = epoch::pin();
    if let Some(p) = w.cache.get(w.file.token(), 0, &g) {
        return version_of(p);
    }
    let ver = w.file.version();
    let token = w.file.token();
    // SeqCst: the READ (see the module doc: the server orders requests).
    let v = w.server.load(Ordering::SeqCst) as u8;
    let data = [v; LEN];
    w.file
        .fill_commit(&w.cache, token, ver, 0, std::iter::once(&data[..]), &g);
    v
}

/// The change: the server makes it and answers, then the client drops the pages.
fn change(w: &World, how: Change) {
    // SeqCst: the server's change, answered before what follows (the module doc).
    w.server.store(1, Ordering::SeqCst);
    match how {
        Change::Write => w.file.drop_pages(&w.cache, &w.mount, 0, 1),
        Change::Truncate => {
            w.file.invalidate();
            w.file.bump(&w.mount);
        }
        Change::BigWrite => {
            let past = w.cache.capacity() as u64 + 1;
            w.file.drop_pages(&w.cache, &w.mount, 0, past);
        }
        Change::Open => w.file.invalidate(),
    }
}

/// After every party returned: no page of the old bytes is found.
fn no_stale_page(w: &World) {
    let g = epoch::pin();
    if let Some(p) = w.cache.get(w.file.token(), 0, &g) {
        assert_eq!(version_of(p), 1, "a stale page survived a completed change");
    }
}

/// `readers` read misses (or hits) of page 0 racing one change; with `cached`, the old
/// page is in the cache at the start.
fn model(how: Change, readers: usize, cached: bool, mutation: Option<Mutation>) {
    loom::model(move || {
        let w = world(mutation);
        if cached {
            let g = epoch::pin();
            let old = [0u8; LEN];
            let token = w.file.token();
            let ver = w.file.version();
            w.file
                .fill_commit(&w.cache, token, ver, 0, std::iter::once(&old[..]), &g);
        }
        let rs: Vec<_> = (0..readers)
            .map(|_| {
                let w = w.clone();
                thread::spawn(move || read(&w))
            })
            .collect();
        change(&w, how);
        for r in rs {
            assert!(r.join().unwrap() <= 1);
        }
        no_stale_page(&w);
        // A read now gets the new bytes (from the cache or the server).
        assert_eq!(read(&w), 1, "a read after the change got the old bytes");
    });
}

/// A read miss racing a WRITE of its page: no stale page survives.
#[test]
fn loom_cache_miss_vs_write() {
    model(Change::Write, 1, false, None);
}

/// A read miss racing a truncate (a new generation, then the bump).
#[test]
fn loom_cache_miss_vs_truncate() {
    model(Change::Truncate, 1, false, None);
}

/// A read miss racing a WRITE larger than the cache (a new generation after the bump).
#[test]
fn loom_cache_miss_vs_big_write() {
    model(Change::BigWrite, 1, false, None);
}

/// A read miss racing an open that drops the file's pages (a new generation, no bump).
#[test]
fn loom_cache_miss_vs_open() {
    model(Change::Open, 1, false, None);
}

/// The old page cached; a reader that hits it or (once the write dropped it) misses, and
/// a second reader whose pages the first may read (publication), racing a WRITE.
#[test]
fn loom_cache_two_readers_vs_write() {
    model(Change::Write, 2, true, None);
}

/// Mutation: `fill_commit` inserts without the version re-check; the model must find
/// the READ's old bytes cached after the write.
#[test]
#[should_panic(expected = "a stale page survived a completed change")]
fn loom_cache_no_recheck_is_caught() {
    model(Change::Write, 1, false, Some(Mutation::NoRecheck));
}

/// Mutation: `fill_commit` without its fence: its insert and its version load may be
/// reordered (store buffering), so that neither side sees the other.
#[test]
#[should_panic(expected = "a stale page survived a completed change")]
fn loom_cache_no_fill_fence_is_caught() {
    model(Change::Write, 1, false, Some(Mutation::NoFillFence));
}

/// Mutation: the generation loaded Relaxed (the code as first merged): against a
/// truncate, a READ ordered before the change inserts the old bytes under the new
/// generation (the bug issue 11's model found; `loom_cache_miss_vs_truncate` is its
/// regression test).
#[test]
#[should_panic(expected = "a stale page survived a completed change")]
fn loom_cache_relaxed_generation_is_caught() {
    model(
        Change::Truncate,
        1,
        false,
        Some(Mutation::RelaxedGeneration),
    );
}
