//! The FUSE client's page cache: file data kept between reads, per mount, bounded.
//!
//! Linux analogue: the page cache of FUSE inodes (mm/filemap.c `filemap_read`, fs/fuse/file.c
//! `fuse_readahead`, `invalidate_inode_pages2`, `truncate_pagecache`); the policy (when to
//! keep, fill and drop pages) lives in fs.rs, this file is only the store.
//!
//! # Shape
//! One table per mount of `sets x WAYS` slots; a set is 8 pointers, one cache line. A slot is
//! null or an immutable [`Page`]: up to 4096 bytes of one file at one page index. A page is
//! found by its key (token, index). A token names one inode's cache generation: the inode's
//! id (unique per mount, drawn from one counter when the inode is made) and its generation
//! (the inode's own counter, bumped by each whole-file invalidation), so invalidating a
//! whole file writes only the inode's own word (its old pages are never found again and
//! age out of their sets), and no page can be found through a gone inode or a node id the
//! server reused.
//!
//! # Readers write nothing shared
//! A hit ([`PageCache::get`]): hash the key, load the set's pointers (one line, read only),
//! compare keys, test the page's referenced bit (written only when clear, lesson 3), copy.
//! The caller is pinned in the epoch (crossbeam-epoch: the thread's own line). Published
//! pages never change: a writer replaces or drops a page by swapping its slot, and the old
//! page is freed once every reader pinned at that time has unpinned.
//!
//! # Eviction: CLOCK within a set
//! An insert takes, in its set, the slot of the same key, else an empty slot, else the first
//! page without its referenced bit, starting at a way chosen by the page index and clearing
//! the bits it passes (second chance); when all were referenced, the starting way. A page
//! of a dead token is never referenced again, so it goes at the latest on the second
//! insert into its set. Inserts race by compare-and-swap on the slot: a lost race leaves
//! the page uncached (the cache is best effort; the reader has its data either way).
//!
//! # Memory bound
//! At most `slots` pages (`FuseClientOptions::cache_pages`, 4 KiB and a 48-byte header
//! each) are reachable; pages replaced or dropped wait for one epoch grace period (the
//! reclamation of every uvfs structure), and the table itself is 8 bytes per slot.
//!
//! # Invariants
//! - A page's key, length and bytes are written before it is published (the compare-and-swap
//!   with Release) and never after.
//! - A page leaves a slot only by a compare-and-swap of that slot, and is retired exactly once,
//!   by the thread whose swap removed it.

use crate::inode::PAGE_SIZE;
use crate::sync::epoch::{self, Atomic, Guard, Owned, Shared};
use crate::sync::plain::{AtomicBool, Ordering};
use std::fmt;

/// A page's owner and generation: `inode id << 64 | generation` (see the module doc).
pub(crate) type Token = u128;

/// Slots per set: 8 pointers, one 64-byte line.
pub(crate) const WAYS: usize = 8;

/// One cached page of one file.
pub(crate) struct Page {
    /// The token of the inode's cache generation it belongs to. Immutable.
    token: Token,
    /// Its page index in the file. Immutable.
    idx: u64,
    /// Valid bytes from the page's start, 1 ..= `PAGE_SIZE` (fewer: the server's end of file
    /// fell in this page when it was read). Immutable.
    len: usize,
    /// Read since the clock last passed it. Atomic; a hint: set on a hit only when clear,
    /// cleared by inserts that pass it.
    referenced: AtomicBool,
    /// The bytes; `data[..len]` are the file's. Immutable.
    data: [u8; PAGE_SIZE],
}

impl Page {
    /// A page of `bytes` (1 ..= `PAGE_SIZE` of them) at index `idx` of the file whose cache
    /// generation is `token`.
    pub(crate) fn new(token: Token, idx: u64, bytes: &[u8]) -> Owned<Page> {
        debug_assert!(!bytes.is_empty() && bytes.len() <= PAGE_SIZE);
        let mut p = Owned::new(Page {
            token,
            idx,
            len: bytes.len(),
            referenced: AtomicBool::new(false),
            data: [0; PAGE_SIZE],
        });
        p.data[..bytes.len()].copy_from_slice(bytes);
        p
    }

    /// The valid bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }

    /// Whether this is the page `idx` of generation `token`.
    #[inline]
    fn is(&self, token: Token, idx: u64) -> bool {
        self.token == token && self.idx == idx
    }
}

/// A mount's page cache (see the module doc).
pub(crate) struct PageCache {
    /// `sets * WAYS` slots, set `s` at `[s * WAYS, (s + 1) * WAYS)`. Each slot: atomic,
    /// written only by compare-and-swap (see the invariants).
    slots: Box<[Atomic<Page>]>,
    /// log2 of the number of sets.
    bits: u32,
}

impl fmt::Debug for PageCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageCache")
            .field("slots", &self.slots.len())
            .finish()
    }
}

impl PageCache {
    /// A cache of at most `pages` pages, rounded up to a power of two of sets of
    /// [`WAYS`]; 0: no cache (every read is a request).
    pub(crate) fn new(pages: usize) -> PageCache {
        if pages == 0 {
            return PageCache {
                slots: Box::new([]),
                bits: 0,
            };
        }
        let sets = pages.div_ceil(WAYS).next_power_of_two();
        PageCache {
            slots: (0..sets * WAYS).map(|_| Atomic::null()).collect(),
            bits: sets.trailing_zeros(),
        }
    }

    /// Whether pages are kept at all.
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        !self.slots.is_empty()
    }

    /// The number of slots (the most pages reachable at once).
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The set of `(token, idx)`: Fibonacci hashing of both, so that the pages of one file
    /// spread over consecutive-looking but different sets.
    #[inline]
    fn set(&self, token: Token, idx: u64) -> &[Atomic<Page>] {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let (id, gen) = ((token >> 64) as u64, token as u64);
        let h = ((id.wrapping_mul(K) ^ gen).wrapping_mul(K) ^ idx).wrapping_mul(K);
        let s = h.checked_shr(64 - self.bits).unwrap_or(0) as usize;
        &self.slots[s * WAYS..(s + 1) * WAYS]
    }

    /// The page `idx` of generation `token`, if cached; marks it referenced (only if it
    /// was not). Valid while `guard` is pinned.
    #[inline]
    pub(crate) fn get<'g>(&self, token: Token, idx: u64, guard: &'g Guard) -> Option<&'g Page> {
        if !self.enabled() {
            return None;
        }
        for slot in self.set(token, idx) {
            // Acquire: pairs with the AcqRel compare-and-swap in `insert`: the page's key
            // and bytes, written before it was published, are visible.
            let p = slot.load(Ordering::Acquire, guard);
            // SAFETY: a non-null slot points to a published page, retired (with
            // `defer_destroy`) only after a swap unlinked it, so it outlives `guard`.
            if let Some(p) = unsafe { p.as_ref() } {
                if p.is(token, idx) {
                    // Relaxed: a hint for the clock; tested first so that hits on a hot page
                    // write nothing.
                    if !p.referenced.load(Ordering::Relaxed) {
                        // Relaxed: as above.
                        p.referenced.store(true, Ordering::Relaxed);
                    }
                    return Some(p);
                }
            }
        }
        None
    }

    /// Publishes `page` in its set (see the module doc for the slot chosen); returns its
    /// address (for [`remove_exact`](Self::remove_exact)), or `None` when a racing insert
    /// won every slot tried (the page is dropped).
    pub(crate) fn insert(&self, page: Owned<Page>, guard: &Guard) -> Option<*const Page> {
        if !self.enabled() {
            return None;
        }
        let (token, idx) = (page.token, page.idx);
        let set = self.set(token, idx);
        let mut page = page;
        for _ in 0..2 {
            let way = self.victim(set, token, idx, guard);
            // Acquire: as in `get` (the old page is only compared and retired).
            let cur = set[way].load(Ordering::Acquire, guard);
            // AcqRel: Release publishes the page's fields to the Acquire loads in `get`,
            // `insert` and `remove`; Acquire orders the old page's reads before its
            // retirement here.
            match set[way].compare_exchange(cur, page, Ordering::AcqRel, Ordering::Acquire, guard) {
                Ok(new) => {
                    if !cur.is_null() {
                        // SAFETY: `cur` was unlinked by our swap; it is retired once, here.
                        unsafe { guard.defer_destroy(cur) };
                    }
                    return Some(new.as_raw());
                }
                Err(e) => page = e.new,
            }
        }
        None
    }

    /// The way of `set` an insert of `(token, idx)` takes: the same key's, an empty one, the
    /// first unreferenced page from the clock's start (clearing the bits passed), else the
    /// start.
    fn victim(&self, set: &[Atomic<Page>], token: Token, idx: u64, guard: &Guard) -> usize {
        let mut unreferenced = None;
        for (w, slot) in set.iter().enumerate() {
            // Acquire: as in `get`.
            let p = slot.load(Ordering::Acquire, guard);
            // SAFETY: as in `get`.
            match unsafe { p.as_ref() } {
                None => return w,
                Some(p) if p.is(token, idx) => return w,
                Some(_) => {}
            }
        }
        let start = (idx as usize) % WAYS;
        for k in 0..WAYS {
            let w = (start + k) % WAYS;
            // Acquire: as in `get`.
            let p = set[w].load(Ordering::Acquire, guard);
            // SAFETY: as in `get`.
            if let Some(p) = unsafe { p.as_ref() } {
                // Relaxed: the clock's hint (see `get`).
                if p.referenced.load(Ordering::Relaxed) {
                    // Relaxed: as above; second chance.
                    p.referenced.store(false, Ordering::Relaxed);
                } else {
                    unreferenced = Some(w);
                    break;
                }
            } else {
                unreferenced = Some(w);
                break;
            }
        }
        unreferenced.unwrap_or(start)
    }

    /// Drops the page `idx` of generation `token`, if cached.
    pub(crate) fn remove(&self, token: Token, idx: u64, guard: &Guard) {
        if !self.enabled() {
            return;
        }
        for slot in self.set(token, idx) {
            // Acquire: as in `get`.
            let p = slot.load(Ordering::Acquire, guard);
            // SAFETY: as in `get`.
            if unsafe { p.as_ref() }.is_some_and(|p| p.is(token, idx)) {
                self.unlink(slot, p, guard);
            }
        }
    }

    /// Drops `page` (an address [`insert`](Self::insert) returned for `(token, idx)`) if it
    /// is still cached: undoes an insert that raced a change.
    pub(crate) fn remove_exact(&self, token: Token, idx: u64, page: *const Page, guard: &Guard) {
        for slot in self.set(token, idx) {
            // Acquire: as in `get`.
            let p = slot.load(Ordering::Acquire, guard);
            if std::ptr::eq(p.as_raw(), page) {
                self.unlink(slot, p, guard);
            }
        }
    }

    /// Empties `slot` if it still holds `p`, and retires `p`.
    fn unlink(&self, slot: &Atomic<Page>, p: Shared<'_, Page>, guard: &Guard) {
        // AcqRel: Acquire orders the loads that found `p` (and the page's fields we read)
        // before its retirement; Release orders the null after them. Relaxed on failure:
        // another thread swapped the slot and retires what it removed.
        let (ok, fail) = (Ordering::AcqRel, Ordering::Relaxed);
        if slot
            .compare_exchange(p, Shared::null(), ok, fail, guard)
            .is_ok()
        {
            // SAFETY: our swap unlinked `p`; it is retired once, here.
            unsafe { guard.defer_destroy(p) };
        }
    }
}

impl Drop for PageCache {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader can reach the table any more (readers reach it
        // through the mount's shared state, which is being dropped, under pins that ended).
        let g = unsafe { epoch::unprotected() };
        for slot in self.slots.iter() {
            // Relaxed: exclusive access.
            let p = slot.swap(Shared::null(), Ordering::Relaxed, g);
            if !p.is_null() {
                // SAFETY: unlinked above, owned by the table alone.
                drop(unsafe { p.into_owned() });
            }
        }
    }
}

#[cfg(all(test, not(uvfs_loom)))]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove_and_clock() {
        let c = PageCache::new(16);
        assert_eq!(c.capacity(), 16);
        let g = epoch::pin();
        assert!(c.get(1, 0, &g).is_none());
        let p = c.insert(Page::new(1, 0, b"abc"), &g).unwrap();
        assert_eq!(c.get(1, 0, &g).unwrap().bytes(), b"abc");
        assert!(c.get(2, 0, &g).is_none(), "another token");
        assert!(
            c.get(1 << 64 | 1, 0, &g).is_none(),
            "another inode, same generation"
        );
        assert!(c.get(1, 1, &g).is_none(), "another index");
        // Same key: replaced.
        c.insert(Page::new(1, 0, b"xyz"), &g).unwrap();
        assert_eq!(c.get(1, 0, &g).unwrap().bytes(), b"xyz");
        c.remove_exact(1, 0, p, &g);
        assert_eq!(c.get(1, 0, &g).unwrap().bytes(), b"xyz", "not the old page");
        c.remove(1, 0, &g);
        assert!(c.get(1, 0, &g).is_none());
        // Far more pages than slots: never more than the capacity reachable.
        for i in 0..1000 {
            c.insert(Page::new(3, i, &[i as u8]), &g);
        }
        let n = (0..1000).filter(|&i| c.get(3, i, &g).is_some()).count();
        assert!(n <= 16 && n > 0, "{n}");
        let off = PageCache::new(0);
        assert!(off.insert(Page::new(1, 0, b"a"), &g).is_none());
        assert!(off.get(1, 0, &g).is_none());
    }
}
