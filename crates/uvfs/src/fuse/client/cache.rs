//! The FUSE client's page cache: file data kept between reads, per mount, bounded, and the
//! protocol that keeps a read miss racing a change from leaving old bytes cached.
//!
//! Linux analogue: the page cache of FUSE inodes (mm/filemap.c `filemap_read`, fs/fuse/file.c
//! `fuse_readahead`, `invalidate_inode_pages2`, `truncate_pagecache`); the policy (when to
//! keep, fill and drop pages) lives in fs.rs; this file is the store ([`PageCache`]) and each
//! file's side of the protocol ([`FileCache`]), which fs.rs calls and the loom model
//! (`loom_cache.rs`) checks.
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
//! # The protocol: a read miss against a change (no stale page outlives a change)
//! Writes do not update cached pages: they drop them. A READ racing a change may fetch the
//! old bytes; the reader may return them (its read overlapped the change), but they must
//! not stay cached once the change has returned. The parties, all in [`FileCache`]:
//! - **Publish** (a read miss, fs.rs `fill`): `ver = version()` (SeqCst load of the file's
//!   `fi->attr_version`), `token()` (Acquire), then the READ; then [`FileCache::fill_commit`]:
//!   each page is inserted (slot compare-and-swap, AcqRel: Release publishes the page's key,
//!   length and bytes), a SeqCst fence, and the version is loaded again (SeqCst): if it
//!   moved, the pages this call inserted are removed again (`remove_exact`: only if the
//!   slot still holds that very page, which the pin keeps from being freed and reused).
//! - **Range change** (WRITE, fallocate, NOTIFY_INVAL_INODE with an offset:
//!   [`FileCache::drop_pages`] after the server answered): [`FileCache::bump`] (the mount's
//!   `fc->attr_version` fetch_add, then the file's version fetch_max to it, both SeqCst),
//!   a SeqCst fence, then each page of the range is looked up by the file's id and index,
//!   whatever its generation, and its slot emptied (Acquire loads, AcqRel
//!   compare-and-swap); a range larger than the cache moves the generation instead.
//! - **Whole-file change** (a new size or, with `FUSE_AUTO_INVAL_DATA`, mtime in attributes
//!   from the server, truncate included; an open without `FOPEN_KEEP_CACHE`; a range
//!   larger than the cache): [`FileCache::invalidate`] moves the generation (Release
//!   fetch_add, pairing with the Acquire load in `token()`): the file's older pages are
//!   never found again; truncate then bumps too.
//! - **Lookup** (a hit, fs.rs `read_cached`): `token()` (Acquire), then [`PageCache::get`]
//!   (Acquire loads of the set's slots, pairing with the insert's Release). It writes
//!   nothing shared.
//!
//! Why no stale page survives: the reader's insert then fence then version load, against
//! the change's version bump then fence then slot loads, is the store-buffering (Dekker)
//! pattern: by the two SeqCst fences one side sees the other. Either the reader's second
//! load sees the bump (it removes its pages), or the change's slot loads see the inserted
//! page (it removes it). A reader whose first version load already saw the bump sent its
//! READ after the server had answered the change, so it fetched the new bytes. A page
//! inserted under a generation that a whole-file change has since left is never found by a
//! lookup ordered after that change, and a reader that loads the new generation (Acquire,
//! pairing with the invalidation's Release) sent its READ after the server's change, so
//! what it inserts under it is new. (Relaxed, as first merged, broke that: a truncate
//! moves the generation and then bumps, with no drop after its fence, so a reader whose
//! READ was ordered before the change but whose token was the new one left the old bytes
//! cached; the loom model found it.) A range change drops the file's pages of every
//! generation, so it finds the reader's page even when it loaded an older generation than
//! the reader did (the C++ model allows that when a third thread moved it). Torn pages: a
//! page is written before the Release that publishes it and never after; every load that
//! can return it is Acquire.
//! The loom model checks these orderings in every interleaving, with the mutations it
//! must catch (no re-check, no fence).
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
//! # Loom
//! Under `--cfg uvfs_loom` a slot is a loom `AtomicPtr` (crossbeam's `Atomic` is invisible
//! to loom), retired pages are kept until the table drops (as fdtable.rs keeps its
//! retired arrays), a set has 2 ways, and a page carries a loom cell written when it is
//! made and read by [`Page::bytes`], so that loom reports a page read without the
//! publication ordered before it.
//!
//! # Invariants
//! - A page's key, length and bytes are written before it is published (the compare-and-swap
//!   with Release) and never after.
//! - A page leaves a slot only by a compare-and-swap of that slot, and is retired exactly once,
//!   by the thread whose swap removed it.

use crate::inode::PAGE_SIZE;
use crate::sync::epoch::{self, Guard, Owned, Shared};
use crate::sync::plain::AtomicBool;
use crate::sync::{fence, AtomicU64, Ordering};
use std::fmt;

/// A page's owner and generation: `inode id << 64 | generation` (see the module doc).
pub(crate) type Token = u128;

/// Slots per set: 8 pointers, one 64-byte line (2 in the loom models, to keep them small).
pub(crate) const WAYS: usize = if cfg!(uvfs_loom) { 2 } else { 8 };

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
    /// Loom only: written when the page is made, read by every `bytes`, so that loom
    /// reports a read of a page whose making is not ordered before it (a torn page).
    #[cfg(uvfs_loom)]
    made: loom::cell::UnsafeCell<()>,
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
            #[cfg(uvfs_loom)]
            made: loom::cell::UnsafeCell::new(()),
        });
        p.data[..bytes.len()].copy_from_slice(bytes);
        #[cfg(uvfs_loom)]
        p.made.with_mut(|_| ());
        p
    }

    /// The valid bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        #[cfg(uvfs_loom)]
        self.made.with(|_| ());
        &self.data[..self.len]
    }

    /// Whether this is the page `idx` of generation `token`.
    #[inline]
    fn is(&self, token: Token, idx: u64) -> bool {
        self.token == token && self.idx == idx
    }

    /// Whether this is the page `idx` of the file of `token`, in any generation.
    #[inline]
    fn is_file_page(&self, token: Token, idx: u64) -> bool {
        self.token >> 64 == token >> 64 && self.idx == idx
    }
}

/// One slot of the table: crossbeam's `Atomic` (loom's `AtomicPtr` under `--cfg uvfs_loom`,
/// see the module doc), with the two operations the table uses.
struct Slot(
    #[cfg(not(uvfs_loom))] epoch::Atomic<Page>,
    #[cfg(uvfs_loom)] crate::sync::AtomicPtr<Page>,
);

impl Slot {
    fn null() -> Slot {
        #[cfg(not(uvfs_loom))]
        return Slot(epoch::Atomic::null());
        #[cfg(uvfs_loom)]
        return Slot(crate::sync::AtomicPtr::new(std::ptr::null_mut()));
    }

    /// The page in the slot (null: none), loaded with `ord` (the callers comment it).
    #[inline]
    fn load<'g>(&self, ord: Ordering, guard: &'g Guard) -> Shared<'g, Page> {
        #[cfg(not(uvfs_loom))]
        return self.0.load(ord, guard);
        #[cfg(uvfs_loom)]
        return {
            let _ = guard;
            Shared::from(self.0.load(ord) as *const Page)
        };
    }

    /// Compare-and-swap `cur` for `new` with `ok` (on success) and `fail` orderings
    /// (the callers comment them); whether it swapped.
    #[inline]
    fn swap_if<'g>(
        &self,
        cur: Shared<'g, Page>,
        new: Shared<'g, Page>,
        ok: Ordering,
        fail: Ordering,
        guard: &'g Guard,
    ) -> bool {
        #[cfg(not(uvfs_loom))]
        return self.0.compare_exchange(cur, new, ok, fail, guard).is_ok();
        #[cfg(uvfs_loom)]
        return {
            let _ = guard;
            let (c, n) = (cur.as_raw() as *mut Page, new.as_raw() as *mut Page);
            self.0.compare_exchange(c, n, ok, fail).is_ok()
        };
    }
}

/// A mount's page cache (see the module doc).
pub(crate) struct PageCache {
    /// `sets * WAYS` slots, set `s` at `[s * WAYS, (s + 1) * WAYS)`. Each slot: atomic,
    /// written only by compare-and-swap (see the invariants).
    slots: Box<[Slot]>,
    /// log2 of the number of sets.
    bits: u32,
    /// Loom only: the pages unlinked, freed when the table drops (see the module doc).
    #[cfg(uvfs_loom)]
    retired: crate::sync::plain::Mutex<Vec<usize>>,
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
        let (slots, bits) = if pages == 0 {
            (Box::new([]) as Box<[Slot]>, 0)
        } else {
            let sets = pages.div_ceil(WAYS).next_power_of_two();
            (
                (0..sets * WAYS).map(|_| Slot::null()).collect(),
                sets.trailing_zeros(),
            )
        };
        PageCache {
            slots,
            bits,
            #[cfg(uvfs_loom)]
            retired: Default::default(),
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

    /// The set of `(file id, idx)`: Fibonacci hashing of both, so that the pages of one
    /// file spread over consecutive-looking but different sets. Not of the generation: a
    /// range change finds a file's pages of every generation (see the module doc).
    #[inline]
    fn set(&self, token: Token, idx: u64) -> &[Slot] {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let id = (token >> 64) as u64;
        let h = (id.wrapping_mul(K) ^ idx).wrapping_mul(K);
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
        let page = page.into_shared(guard);
        for _ in 0..2 {
            let way = self.victim(set, token, idx, guard);
            // Acquire: as in `get` (the old page is only compared and retired).
            let cur = set[way].load(Ordering::Acquire, guard);
            // AcqRel: Release publishes the page's fields to the Acquire loads in `get`,
            // `insert` and `remove`; Acquire orders the old page's reads before its
            // retirement here. Acquire on failure: as the load above.
            let (ok, fail) = (Ordering::AcqRel, Ordering::Acquire);
            if set[way].swap_if(cur, page, ok, fail, guard) {
                if !cur.is_null() {
                    // SAFETY: `cur` was unlinked by our swap; it is retired once, here.
                    unsafe { self.retire(cur, guard) };
                }
                return Some(page.as_raw());
            }
        }
        // SAFETY: every swap failed: `page` was never published, so it is ours alone.
        drop(unsafe { page.into_owned() });
        None
    }

    /// The way of `set` an insert of `(token, idx)` takes: the same key's, an empty one, the
    /// first unreferenced page from the clock's start (clearing the bits passed), else the
    /// start.
    fn victim(&self, set: &[Slot], token: Token, idx: u64, guard: &Guard) -> usize {
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

    /// Drops the page `idx` of the file of `token`, of every generation, if cached (a
    /// range change: see the module doc).
    pub(crate) fn remove(&self, token: Token, idx: u64, guard: &Guard) {
        if !self.enabled() {
            return;
        }
        for slot in self.set(token, idx) {
            // Acquire: as in `get`; after the fence in `FileCache::drop_pages`, the loads
            // of the Dekker pattern (see the module doc).
            let p = slot.load(Ordering::Acquire, guard);
            // SAFETY: as in `get`.
            if unsafe { p.as_ref() }.is_some_and(|p| p.is_file_page(token, idx)) {
                self.unlink(slot, p, guard);
            }
        }
    }

    /// Drops `page` (an address [`insert`](Self::insert) returned for `(token, idx)`) if it
    /// is still cached: undoes an insert that raced a change. The caller is pinned by
    /// `guard` since the insert, so the address names that page still.
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
    fn unlink(&self, slot: &Slot, p: Shared<'_, Page>, guard: &Guard) {
        // AcqRel: Acquire orders the loads that found `p` (and the page's fields we read)
        // before its retirement; Release orders the null after them. Relaxed on failure:
        // another thread swapped the slot and retires what it removed.
        let (ok, fail) = (Ordering::AcqRel, Ordering::Relaxed);
        if slot.swap_if(p, Shared::null(), ok, fail, guard) {
            // SAFETY: our swap unlinked `p`; it is retired once, here.
            unsafe { self.retire(p, guard) };
        }
    }

    /// Frees `p` once no reader pinned now can hold it.
    ///
    /// # Safety
    /// - `p` was unlinked from its slot by the caller's swap, and is retired once.
    unsafe fn retire(&self, p: Shared<'_, Page>, guard: &Guard) {
        #[cfg(not(uvfs_loom))]
        // SAFETY: the caller's contract; readers reach pages only under a pin.
        unsafe {
            guard.defer_destroy(p)
        };
        #[cfg(uvfs_loom)]
        {
            let _ = guard;
            crate::sync::plock(&self.retired).push(p.as_raw() as usize);
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
            let p = slot.load(Ordering::Relaxed, g);
            if !p.is_null() {
                // SAFETY: unlinked now (the table goes), owned by the table alone.
                drop(unsafe { p.into_owned() });
            }
        }
        #[cfg(uvfs_loom)]
        for p in crate::sync::plock(&self.retired).drain(..) {
            // SAFETY: unlinked by one swap and retired once (`retire`); no thread of the
            // model can reach it (`&mut self`).
            drop(unsafe { Box::from_raw(p as *mut Page) });
        }
    }
}

/// One file's side of the page cache protocol (see the module doc): its id and generation
/// (the tokens of its pages) and Linux's `fi->attr_version`. fs.rs's `FuseInode` holds one.
pub(crate) struct FileCache {
    /// The file's id in the cache (the high half of its tokens), unique per mount.
    /// Immutable.
    id: u64,
    /// The generation of its cached pages (the low half of their tokens): a new one drops
    /// every cached page of the file at once. Atomic; written by `invalidate` only.
    gen: AtomicU64,
    /// Linux's `fi->attr_version`: the mount's `attr_version` at the file's latest change
    /// of data or size (`bump`); a read miss that sees it move while its READ was out drops
    /// the pages it cached. Atomic; only grows.
    version: AtomicU64,
    /// Loom only: the mutation the model runs (`loom_cache.rs`), `None` for the code.
    #[cfg(uvfs_loom)]
    pub(crate) mutation: Option<Mutation>,
}

/// Loom only: a change to the protocol that the model must catch (`loom_cache.rs`).
#[cfg(uvfs_loom)]
#[allow(dead_code)] // made by the model's tests only
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mutation {
    /// `fill_commit` without the fence between its inserts and its version load.
    NoFillFence,
    /// `fill_commit` without the version re-check (inserts only).
    NoRecheck,
    /// `token` loads the generation Relaxed (the code before issue 11's model).
    RelaxedGeneration,
}

impl fmt::Debug for FileCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileCache").field("id", &self.id).finish()
    }
}

impl FileCache {
    /// The cache state of a new file with id `id` (unique per mount).
    pub(crate) fn new(id: u64) -> FileCache {
        FileCache {
            id,
            gen: AtomicU64::new(0),
            version: AtomicU64::new(0),
            #[cfg(uvfs_loom)]
            mutation: None,
        }
    }

    /// The token of the file's current cache generation.
    #[inline]
    pub(crate) fn token(&self) -> Token {
        // Acquire: pairs with the Release in `invalidate`: a read miss that loads the new
        // generation sends its READ after the server's change that the invalidation
        // reports (it happened before the invalidation), so the pages it inserts under the
        // new generation are the new bytes. Relaxed let the READ be ordered before the
        // change while the token was the new one, and a truncate (new generation, then
        // the bump) then left the old bytes cached under it: issue 11's loom model
        // (loom_cache.rs `loom_cache_miss_vs_truncate`). A reader that still loads the old
        // generation raced the invalidation: its pages are never found again. A load on
        // the hit path, no store: a hit still writes nothing shared.
        let ord = Ordering::Acquire;
        #[cfg(uvfs_loom)]
        // Relaxed: the mutation the model must catch (`Mutation::RelaxedGeneration`).
        let ord = match self.mutation {
            Some(Mutation::RelaxedGeneration) => Ordering::Relaxed,
            _ => ord,
        };
        (self.id as Token) << 64 | self.gen.load(ord) as Token
    }

    /// Drops every cached page of the file (`invalidate_inode_pages2`): a new generation,
    /// so the old pages are never found again (they age out of the cache). Writes only the
    /// file's own word: an open without `FOPEN_KEEP_CACHE` writes no mount-wide line.
    pub(crate) fn invalidate(&self) {
        // Release: pairs with the Acquire in `token` (see there): what happened before the
        // invalidation (the server's change, its reply) happens before a READ sent by a
        // reader that loads the new generation.
        self.gen.fetch_add(1, Ordering::Release);
    }

    /// The file's version now: before a read miss's READ (`fill_commit`'s `ver`), and for
    /// an attribute reply asked for at the mount's version `v` (stale if this is above).
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        // SeqCst: pairs with the SeqCst bump in `bump` (the total order of the mount's
        // version and of the file's): a change this load does not see comes after it.
        self.version.load(Ordering::SeqCst)
    }

    /// Marks a change of the file's data or size (`fi->attr_version =
    /// atomic64_inc_return(&fc->attr_version)`; `mount` is `fc->attr_version`), then a
    /// full barrier: the store-load pattern with `fill_commit` (see the module doc).
    pub(crate) fn bump(&self, mount: &AtomicU64) {
        // SeqCst: a total order with the loads of the mount's version (fs.rs
        // `attr_version_now`) and of the file's (`version`, `fill_commit`).
        let v = mount.fetch_add(1, Ordering::SeqCst) + 1;
        // SeqCst: as above; `fetch_max` keeps it growing when two changes race.
        self.version.fetch_max(v, Ordering::SeqCst);
        // SeqCst fence: the bump above before the slot loads of the drop that follows
        // (`drop_pages`), pairing with the fence in `fill_commit` between its inserts and
        // its version load (Dekker: one side sees the other).
        fence(Ordering::SeqCst);
    }

    /// A change of pages `[first, past)` that the server has made (a WRITE, fallocate,
    /// NOTIFY_INVAL_INODE: `invalidate_inode_pages2_range`): `bump`, then drops the cached
    /// pages of the range, of every generation; a range of more pages than the cache holds
    /// drops the whole file instead.
    pub(crate) fn drop_pages(&self, cache: &PageCache, mount: &AtomicU64, first: u64, past: u64) {
        self.bump(mount);
        if !cache.enabled() || past <= first {
            return;
        }
        if past - first > cache.capacity() as u64 {
            return self.invalidate();
        }
        let token = self.token();
        let g = epoch::pin();
        for idx in first..past {
            cache.remove(token, idx, &g);
        }
    }

    /// The end of a read miss (fs.rs `fill`): caches `pages` (page `first + k` holds the
    /// k-th chunk) under `token`, both `token` and `ver` (= [`version`](Self::version))
    /// loaded before the READ was sent; then, after a full barrier, drops them again if a
    /// change was marked since (see the module doc: they may be the old bytes).
    pub(crate) fn fill_commit<'a>(
        &self,
        cache: &PageCache,
        token: Token,
        ver: u64,
        first: u64,
        pages: impl Iterator<Item = &'a [u8]>,
        guard: &Guard,
    ) {
        let mut cached = Vec::new();
        for (k, chunk) in pages.enumerate() {
            let i = first + k as u64;
            if let Some(p) = cache.insert(Page::new(token, i, chunk), guard) {
                cached.push((i, p));
            }
        }
        #[cfg(uvfs_loom)]
        if self.mutation == Some(Mutation::NoRecheck) {
            return;
        }
        #[cfg(uvfs_loom)]
        let fenced = self.mutation != Some(Mutation::NoFillFence);
        #[cfg(not(uvfs_loom))]
        let fenced = true;
        if fenced {
            // SeqCst fence: our inserts before the version load below (see the module
            // doc), pairing with the fence in `bump`.
            fence(Ordering::SeqCst);
        }
        if self.version() != ver {
            for (i, p) in cached {
                cache.remove_exact(token, i, p, guard);
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
