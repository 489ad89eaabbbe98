//! tmpfs regular files: sparse pages in memory (the page store).
//!
//! Linux analogue: mm/shmem.c (`shmem_file_read_iter`, `shmem_file_write_iter` through
//! `generic_perform_write`, `shmem_setattr`'s truncate, `shmem_fallocate`,
//! `shmem_file_llseek`), mm/filemap.c.
//!
//! # Reads without the lock (`filemap_read`'s fast short reads, Linux, 2025)
//! A read of up to [`FAST_READ_MAX`] bytes takes no lock and writes no shared cache line:
//! pinned in the page collector (sync/page_reclaim.rs), it reads the file's sequence count
//! ([`RegFile::seq`]), the size, finds each page in the lockless [`PageIndex`] and copies it byte-wise atomically
//! ([`PageBuf::load`]), then re-checks the count; after [`FAST_READ_TRIES`] tries that raced
//! with a writer (or one that found a write in progress) it takes the data lock shared,
//! as every read did before. Every change of the bytes, the pages present or the size
//! happens inside a write section of the count (odd), under the data write lock; a page
//! or index node unlinked from a file is freed only after a grace period (or, at
//! eviction, once no reader can be left: `drop_pages`), so a pinned
//! reader never copies freed memory (it may copy a page being changed or removed, and
//! then the count makes it retry).
//!
//! # Invariants and locks
//! - `RegData` is protected by its `RwLock` (the "data lock"): reads that do not take the
//!   fast path take it shared, everything that changes pages, the size or the block count
//!   takes it exclusive.
//! - `RegFile::index` maps exactly the pages of `RegData::pages` (index -> the page's
//!   bytes); it changes, and the bytes and the size change, only under the data write lock
//!   and inside a write section of `RegFile::seq`.
//! - A page removed from `pages` (or a shared page replaced by its copy), and an index node
//!   pruned, is dropped through the page collector (`Garbage::retire`,
//!   sync/page_reclaim.rs), after every reader pinned at its removal; the writer drives
//!   that grace period itself once its thread has more than `page_reclaim::BOUND` (2 MiB)
//!   waiting. At eviction with no open file they are freed at once (`drop_pages`).
//! - The VFS inode's `i_size` and `i_blocks` are written only under the data write lock;
//!   `i_blocks` is always `pages.len() * 8`.
//! - On a mount with limits every present page is charged to the mount's `Limits`.
//! - A page is [`Page::Own`] (this file alone holds it) or [`Page::Shared`] (a snapshot,
//!   snapshot.rs, gave it to more than one file, copy-on-write): nothing ever writes
//!   the bytes of a shared page; a change to one copies it first ([`own_page`]). Each
//!   file holding a shared page is charged for it, as for a copy.
//!
//! Lock order: data lock -> the inode's `attr_lock` (lib.rs).

use super::Limits;
use crate::cred::Cred;
use crate::inode::{Inode, MAX_LFS_FILESIZE, PAGE_SIZE};
use crate::sync::page::PageBuf;
use crate::sync::page_index::{PageIndex, Unlinked};
use crate::sync::page_reclaim;
use crate::sync::plain::Ordering;
use crate::sync::seqcount::SeqCount;
use crate::sync::{read, write, RwLock, RwLockWriteGuard};
use crate::types::Timespec;
use crate::{Errno, Result};
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Pages `fallocate` allocates under one hold of the data lock (2 MiB).
const FALLOC_BATCH: u64 = 512;

/// The longest read that tries the lockless path (bytes): Linux limits its fast short
/// reads to what it copies on the stack; here the copy goes straight to the caller's
/// buffer, and the limit only bounds what a retry recopies.
const FAST_READ_MAX: usize = 16 * PAGE_SIZE;

/// Lockless tries before a read falls back to the data lock: the first, and one more in
/// case a writer's section ended just after the first began.
const FAST_READ_TRIES: u32 = 2;

/// `i_blocks` units (512 bytes) per page.
pub(super) const BLOCKS_PER_PAGE: u64 = PAGE_SIZE as u64 / 512;

/// One page of file data.
pub(super) enum Page {
    /// Held by this file alone: written in place, without a reference count (a file
    /// never snapshotted has only these, so its writes cost what they did before
    /// snapshots existed).
    Own(Box<PageBuf>),
    /// Shared copy-on-write with other files (snapshot.rs): read in place, never written;
    /// a write copies it into an `Own` page. The `Arc` holds the `Box` rather than the
    /// bytes so that sharing a page moves its pointer instead of copying 4 KiB
    /// (`Arc::from(Box)` would copy) and the allocation stays a 4 KiB one.
    #[allow(clippy::redundant_allocation)] // the extra allocation is the point (above)
    Shared(Arc<Box<PageBuf>>),
}

impl Page {
    /// The page's bytes.
    #[inline]
    fn bytes(&self) -> &PageBuf {
        match self {
            Page::Own(b) => b,
            Page::Shared(a) => a,
        }
    }

    /// A fresh zeroed page.
    fn zeroed() -> Page {
        Page::Own(PageBuf::zeroed())
    }
}

/// A regular file's contents: the pages under the data lock, and what lockless readers
/// use (see the module doc).
pub(crate) struct RegFile {
    /// Odd while the bytes, the pages present or the size change; written only under the
    /// data write lock (`write_begin`/`write_end`), read by lockless readers.
    seq: SeqCount,
    /// The present pages by index, for lockless readers; changed only under the data
    /// write lock, inside a write section of `seq`.
    index: PageIndex,
    /// The pages and the running fallocate (the "data lock").
    data: RwLock<RegData>,
}

impl Default for RegFile {
    fn default() -> Self {
        RegFile::new(RegData::default())
    }
}

impl RegFile {
    /// A file holding `data`'s pages (a new file, or a snapshot's copy).
    pub(super) fn new(data: RegData) -> RegFile {
        let index = PageIndex::new();
        for (&i, p) in &data.pages {
            // SAFETY: the page is owned by `data`, which the returned `RegFile` keeps; it
            // leaves `pages` only into a `Garbage` after its slot is cleared (module
            // invariants).
            unsafe { index.set(i, p.bytes()) };
        }
        RegFile {
            seq: SeqCount::new(),
            index,
            data: RwLock::new(data),
        }
    }

    /// The pages, read-locked (tests).
    #[cfg(test)]
    pub(super) fn read_data(&self) -> crate::sync::RwLockReadGuard<'_, RegData> {
        read(&self.data)
    }
}

/// A write section of a file's sequence count: lockless readers that overlap it retry.
/// Context: the caller holds the data write lock (the guard borrows it, so it cannot
/// outlive it).
struct Section<'a> {
    seq: &'a SeqCount,
}

impl<'a> Section<'a> {
    /// Enters the section (count odd).
    fn begin(f: &'a RegFile, _locked: &RwLockWriteGuard<'_, RegData>) -> Section<'a> {
        f.seq.write_begin();
        Section { seq: &f.seq }
    }
}

impl Drop for Section<'_> {
    fn drop(&mut self) {
        self.seq.write_end();
    }
}

/// What a writer unlinked from a file under the data lock: pages whose index slots it
/// cleared and index nodes it pruned. Lockless readers pinned before the unlink may still
/// be copying them, so they are retired through the page collector once the lock is
/// dropped ([`retire`](Garbage::retire)), or freed at once when no reader can be left
/// ([`free_now`](Garbage::free_now)).
///
/// # Invariants
/// Everything held is unreachable from the file's index. Dropped without one of those two
/// (only when a panic unwinds through the writer), it leaks what it holds rather than free
/// it under a reader.
#[derive(Default)]
struct Garbage {
    /// Whole maps of removed pages (a truncate, a punch, an eviction).
    maps: Vec<BTreeMap<u64, Page>>,
    /// Single removed pages (a shared page replaced by its copy).
    pages: Vec<Page>,
    /// Pruned index nodes.
    nodes: Unlinked,
}

impl Garbage {
    /// Clears the index slots of `gone`, pages just removed from the file's pages, and
    /// keeps them.
    ///
    /// Context: the caller holds the data write lock, inside a write section.
    fn unlink_all(&mut self, index: &PageIndex, gone: BTreeMap<u64, Page>) {
        if gone.is_empty() {
            return;
        }
        for &i in gone.keys() {
            // SAFETY: the pruned nodes go into `self.nodes`, which is retired or freed only
            // when no reader can hold them (`retire`, `free_now`; leaked otherwise).
            unsafe { index.clear(i, &mut self.nodes) };
        }
        self.maps.push(gone);
    }

    /// The pages and nodes held, in bytes (each page counted whole, shared or not).
    fn bytes(&self) -> usize {
        let pages = self.pages.len() + self.maps.iter().map(BTreeMap::len).sum::<usize>();
        pages * PAGE_SIZE + self.nodes.bytes()
    }

    /// Takes everything out (what `Drop` leaves leaked is then nothing).
    fn take(&mut self) -> (Vec<BTreeMap<u64, Page>>, Vec<Page>, Unlinked) {
        (
            std::mem::take(&mut self.maps),
            std::mem::take(&mut self.pages),
            std::mem::take(&mut self.nodes),
        )
    }

    /// Frees what is held once every lockless reader pinned now has unpinned
    /// (`page_reclaim::retire`), then, when this thread has more than
    /// `page_reclaim::BOUND` bytes waiting (now, or left by an earlier operation whose
    /// rounds a pinned reader outlasted), drives the grace period itself
    /// (`page_reclaim::collect_if_over`): an idle server pins nothing that would. With
    /// nothing held and nothing over the bound: one load of the thread's own count.
    ///
    /// Context: the data lock is dropped (and no page-collector guard is held).
    fn retire(mut self) {
        if !(self.maps.is_empty() && self.pages.is_empty() && self.nodes.bytes() == 0) {
            let bytes = self.bytes();
            let g = page_reclaim::pin();
            page_reclaim::retire(&g, bytes, self.take());
            drop(g);
        }
        page_reclaim::collect_if_over();
    }

    /// Frees what is held now.
    ///
    /// # Safety
    /// - No lockless reader can hold a page or node of it: none is inside `read_lockless`
    ///   on this file, and none that enters it later can reach them (see `drop_pages`).
    unsafe fn free_now(mut self) {
        drop(self.take());
    }
}

impl Drop for Garbage {
    fn drop(&mut self) {
        // Reached with something held only when a panic unwinds through a writer between
        // the unlink and `retire`: a pinned reader may still copy it, so leak it.
        std::mem::forget(self.take());
    }
}

/// `pages[idx]` (present) made writable: a shared page is replaced by a private copy
/// first (or, when every other holder has dropped it, by the page itself, no copy), and
/// the caller writes the copy. Costs one more search of the map, only on the first write
/// to a page after a snapshot. A copy replaces the page in `index` and the shared handle
/// is retired (lockless readers may be copying it).
///
/// Context: the caller holds the data write lock, inside a write section.
fn own_page<'p>(
    pages: &'p mut BTreeMap<u64, Page>,
    idx: u64,
    index: &PageIndex,
    garbage: &mut Garbage,
) -> &'p PageBuf {
    if let Some(Page::Shared(_)) = pages.get(&idx) {
        let Some(Page::Shared(a)) = pages.remove(&idx) else {
            unreachable!("just looked at it")
        };
        // `try_unwrap` is an atomic read-modify-write of the count: it succeeds only
        // if no other file holds the page any more (Acquire: the other holders' reads,
        // released by their drops, happen before our writes).
        let b = match Arc::try_unwrap(a) {
            // The same bytes: the index already points at them.
            Ok(b) => b,
            Err(a) => {
                let b = a.copy();
                // SAFETY: `b` is owned by `pages` from the insert below; it leaves them
                // only into a `Garbage` after its slot is cleared or replaced.
                unsafe { index.set(idx, &b) };
                // The shared handle's slot now points at the copy: unreachable for readers
                // that pin from now on.
                garbage.pages.push(Page::Shared(a));
                b
            }
        };
        pages.insert(idx, Page::Own(b));
    }
    match pages.get(&idx) {
        Some(Page::Own(b)) => b,
        _ => unreachable!("the caller's page is present and now owned"),
    }
}

/// A regular file's data: present pages by index; absent pages are holes (read as zeros).
#[derive(Default)]
pub(crate) struct RegData {
    pages: BTreeMap<u64, Page>,
    /// The `fallocate` in progress on a mount with limits, if any (one at a time).
    falloc: Option<Falloc>,
}

/// An `fallocate` filling pages `[first, past)` batch by batch, the data lock dropped in
/// between: the pages it has charged and not yet allocated. A write that allocates a page
/// in the range between two batches takes it from `budget` instead of charging its own,
/// so it never sees `ENOSPC` for space the fallocate holds for that very page (Linux holds
/// `inode_lock` across `shmem_fallocate`: the write waits, then finds the page there).
struct Falloc {
    first: u64,
    past: u64,
    budget: u64,
}

/// Takes one page of the running fallocate `falloc`'s budget for page `idx`, if it is in
/// its range and the budget is not spent. (A function of the field, not of `RegData`, so
/// that a write can call it while it holds an entry of `pages`.)
fn take_falloc_page(falloc: &mut Option<Falloc>, idx: u64) -> bool {
    match falloc {
        Some(f) if f.budget > 0 && (f.first..f.past).contains(&idx) => {
            f.budget -= 1;
            true
        }
        _ => false,
    }
}

/// Drops every page of a file (eviction); returns how many were held. Context: no name and
/// no open file are left (the caller saw none, `Inode::may_evict_locked`), or the inode is
/// being dropped (`Drop for Inode`).
///
/// The pages and index nodes are freed here and now, not after a grace period, unless a
/// file was opened since the caller looked (`Inode::no_open_file`), which is what makes
/// the synchronous free sound:
/// - a lockless reader is inside `read_at` only through an open file of this inode, which
///   counts in the inode's open count from before the call (`file_opened`, at the open)
///   to after it (`file_closed`, at the file's last put, which a borrowed descriptor
///   defers until the borrowing call ends, sync/borrow.rs);
/// - the index is emptied (`detach`) before the count is read under `attr_lock`, so if it
///   is 0 then every file opened before was closed, its reads done (its `file_closed` took
///   `attr_lock` before us), and a file opened after takes `attr_lock` after us: its reads
///   load the index root after our store of null (lock release -> acquire), and never
///   reach the detached nodes or the pages they held.
///
/// Otherwise (an open that raced with the last unlink: a lock-free walk reached the name
/// just before it went) they are retired, as a truncate's are.
pub(super) fn drop_pages(f: &RegFile, inode: &Inode) -> u64 {
    let mut data = write(&f.data);
    let sec = Section::begin(f, &data);
    let gone = std::mem::take(&mut data.pages);
    let n = gone.len() as u64;
    let mut garbage = Garbage::default();
    // SAFETY: the detached tree goes into `garbage`, freed below only when no reader can be
    // left, else retired (or leaked on a panic).
    garbage.nodes = unsafe { f.index.detach() };
    garbage.maps.push(gone);
    drop(sec);
    // Relaxed: under the data write lock.
    inode.i_blocks.store(0, Ordering::Relaxed);
    drop(data);
    if inode.no_open_file() {
        // SAFETY: no reader is inside `read_lockless` on this file, and none that enters
        // it later can reach what was detached (this function's doc).
        unsafe { garbage.free_now() };
    } else {
        garbage.retire();
    }
    n
}

/// Reads into `buf` from byte offset `off` (`off >= 0`); returns bytes read, 0 at or past
/// end of file. Holes read as zeros. Up to [`FAST_READ_MAX`] bytes are read without the
/// data lock (module doc): the result is what the file held at one instant between the
/// call and its return, as under the lock (a racing write or truncate is seen whole or not
/// at all; past a truncate the read is short or 0, never stale bytes of removed pages).
/// When a racing change made a lockless try fail, the bytes of `buf` past the returned
/// count may have been written (with the file's contents of that instant).
///
/// # Errors
/// None for a regular file (`EISDIR`/`EINVAL` for other types come from the caller).
///
/// # References
/// Linux `shmem_file_read_iter`, `filemap_read` (the fast short-read path, 2025:
/// "mm/filemap: Implement fast short reads").
#[inline]
pub(super) fn read_at(f: &RegFile, inode: &Inode, buf: &mut [u8], off: u64) -> Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    match read_lockless(f, inode, buf, off) {
        Some(n) => Ok(n),
        None => read_locked(f, inode, buf, off),
    }
}

/// The lockless read (module doc): `None` when it raced with a writer [`FAST_READ_TRIES`]
/// times, found a write in progress, or the read is longer than [`FAST_READ_MAX`].
#[inline]
fn read_lockless(f: &RegFile, inode: &Inode, buf: &mut [u8], off: u64) -> Option<usize> {
    // The pin keeps every page and index node this read may reach allocated until it ends
    // (they are retired through the page collector, module invariants).
    let g = page_reclaim::pin();
    for _ in 0..FAST_READ_TRIES {
        // Acquire (inside): pairs with `write_end`'s Release; what the last section stored
        // (size, index, bytes) is visible to the loads below.
        let s = f.seq.try_read_begin()?;
        // A racing section may make this size stale: the copy below stays inside `buf`
        // and inside pages kept by the pin whatever it is, and `read_retry` rejects it.
        let size = inode.size();
        let n = if off >= size {
            0
        } else {
            (size - off).min(buf.len() as u64) as usize
        };
        if n > FAST_READ_MAX {
            return None;
        }
        copy_out(&mut buf[..n], off, |idx| f.index.get(idx, &g));
        // Acquire fence (inside): the data loads above are ordered before the re-load of
        // the count; pairs with `write_begin`'s Release fence.
        if !f.seq.read_retry(s) {
            return Some(n);
        }
    }
    None
}

/// The read under the data lock (shared): longer reads, and those that raced.
#[cold]
fn read_locked(f: &RegFile, inode: &Inode, buf: &mut [u8], off: u64) -> Result<usize> {
    let data = read(&f.data);
    let size = inode.size();
    if off >= size {
        return Ok(0);
    }
    let n = (size - off).min(buf.len() as u64) as usize;
    copy_out(&mut buf[..n], off, |idx| {
        data.pages.get(&idx).map(Page::bytes)
    });
    Ok(n)
}

/// Copies the file's bytes at `off` into all of `dst`, page by page, with `page(idx)` the
/// page at `idx` (`None`: a hole, zeros).
#[inline]
fn copy_out<'p>(dst: &mut [u8], off: u64, page: impl Fn(u64) -> Option<&'p PageBuf>) {
    let mut done = 0;
    while done < dst.len() {
        let pos = off + done as u64;
        let idx = pos / PAGE_SIZE as u64;
        let in_page = (pos % PAGE_SIZE as u64) as usize;
        let chunk = (PAGE_SIZE - in_page).min(dst.len() - done);
        let d = &mut dst[done..done + chunk];
        match page(idx) {
            Some(p) => p.load(in_page, d),
            None => d.fill(0),
        }
        done += chunk;
    }
}

/// Writes `buf` at offset `off`, or at the end of file when `append` (atomically with
/// respect to other writers of this inode); returns `(bytes written, offset after)`.
///
/// # Errors
/// `EFBIG` when the offset is at or past `MAX_LFS_FILESIZE`; writes that would cross it
/// are shortened (`generic_write_check_limits`). `EISDIR`/`EINVAL` as `read_at`.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_at(
    f: &RegFile,
    acct: &Option<Arc<Limits>>,
    inode: &Inode,
    buf: &[u8],
    off: u64,
    append: bool,
    now: Timespec,
    cred: &Cred,
    fsize_limit: u64,
) -> Result<(usize, u64)> {
    let mut data = write(&f.data);
    // A zero-length write changes nothing, not even an O_APPEND position
    // (`generic_write_checks_count` returns before repositioning).
    if buf.is_empty() {
        return Ok((0, off));
    }
    let size = inode.size();
    let off = if append { size } else { off };
    // generic_write_check_limits: at or past RLIMIT_FSIZE (Linux also sends SIGXFSZ) or
    // the file system's maximum, EFBIG; below them the write is shortened to them.
    let max = (MAX_LFS_FILESIZE as u64).min(fsize_limit);
    if off >= max {
        return Err(Errno::EFBIG);
    }
    // After the limit checks, under the data lock (Linux: `file_remove_privs` after
    // `generic_write_checks`, under `inode_lock`): a refused write changes nothing.
    inode.kill_suid(cred, now)?;
    let want = (buf.len() as u64).min(max - off) as usize;
    let mut garbage = Garbage::default();
    let sec = Section::begin(f, &data);
    let mut done = 0;
    while done < want {
        let pos = off + done as u64;
        let idx = pos / PAGE_SIZE as u64;
        let in_page = (pos % PAGE_SIZE as u64) as usize;
        let chunk = (PAGE_SIZE - in_page).min(want - done);
        // One search of the page map per page (the entry), whether the page is there or not.
        let RegData { pages, falloc } = &mut *data;
        let page = match pages.entry(idx) {
            Entry::Occupied(e) => match e.into_mut() {
                Page::Own(b) => &**b,
                Page::Shared(_) => own_page(pages, idx, &f.index, &mut garbage),
            },
            Entry::Vacant(v) => {
                // A new page counts against `size=` (`shmem_inode_acct_blocks`), unless a
                // running fallocate charged it already; when none is left the write stops
                // short, or fails if nothing was written (`generic_perform_write`).
                if let Some(a) = acct {
                    if !take_falloc_page(falloc, idx) && a.reserve_blocks(1).is_err() {
                        break;
                    }
                }
                let Page::Own(b) = v.insert(Page::zeroed()) else {
                    unreachable!("a fresh page is owned")
                };
                // SAFETY: the page is owned by `pages` and leaves it only into a
                // `Garbage` after its slot is cleared (module invariants).
                unsafe { f.index.set(idx, b) };
                &**b
            }
        };
        page.store(in_page, &buf[done..done + chunk]);
        done += chunk;
    }
    let n = done;
    if n == 0 {
        drop(sec);
        // Linux stamped the times before trying (`file_update_time`).
        drop(data);
        garbage.retire();
        inode.touch_mtime_ctime(now);
        return Err(Errno::ENOSPC);
    }
    let end = off + n as u64;
    if end > size {
        // Relaxed: written under the data write lock, inside the write section: readers
        // hold the read lock or validate with the sequence count.
        inode.i_size.store(end, Ordering::Relaxed);
    }
    drop(sec);
    // Relaxed: as above.
    inode
        .i_blocks
        .store(data.pages.len() as u64 * BLOCKS_PER_PAGE, Ordering::Relaxed);
    drop(data);
    // A shared page this write copied (after a snapshot) goes now.
    garbage.retire();
    inode.touch_mtime_ctime(now);
    Ok((n, end))
}

/// Sets the size to `len` bytes; unless that grows the file, drops the pages past it
/// and zeroes the tail of the last partial page; stamps mtime and ctime with `now`, the
/// syscall's [`coarse_now`], when the size changes, when the file has pages, or when
/// `stamp` (ftruncate and `O_TRUNC` pass `ATTR_MTIME | ATTR_CTIME` to `do_truncate`;
/// truncate(2) passes neither, and `shmem_setattr` then stamps only a change of size
/// or, through `shmem_truncate_range`, a file with allocated pages).
///
/// # Errors
/// `EFBIG` when `len > MAX_LFS_FILESIZE`; `EISDIR`/`EINVAL` on non-regular files.
pub(super) fn truncate(
    f: &RegFile,
    acct: &Option<Arc<Limits>>,
    inode: &Inode,
    len: u64,
    now: Timespec,
    stamp: bool,
) -> Result<()> {
    if len > MAX_LFS_FILESIZE as u64 {
        return Err(Errno::EFBIG);
    }
    let mut data = write(&f.data);
    let size = inode.size();
    if len == size && !stamp && data.pages.is_empty() {
        return Ok(());
    }
    let mut garbage = Garbage::default();
    let sec = Section::begin(f, &data);
    // `newsize <= oldsize` (shmem_setattr): the same size too drops the pages past it,
    // which `FALLOC_FL_KEEP_SIZE` may have allocated.
    if len <= size {
        let first_gone = len.div_ceil(PAGE_SIZE as u64);
        let gone = data.pages.split_off(&first_gone);
        if let Some(a) = &acct {
            a.release_blocks(gone.len() as u64);
        }
        garbage.unlink_all(&f.index, gone);
        let tail = (len % PAGE_SIZE as u64) as usize;
        if tail != 0 {
            let idx = len / PAGE_SIZE as u64;
            if data.pages.contains_key(&idx) {
                own_page(&mut data.pages, idx, &f.index, &mut garbage).zero(tail, PAGE_SIZE - tail);
            }
        }
    }
    // Relaxed: under the data write lock, inside the write section.
    inode.i_size.store(len, Ordering::Relaxed);
    drop(sec);
    // Relaxed: under the data write lock.
    inode
        .i_blocks
        .store(data.pages.len() as u64 * BLOCKS_PER_PAGE, Ordering::Relaxed);
    drop(data);
    // The removed pages go after a grace period, driven here past the bound (an idle
    // server pins nothing that would).
    garbage.retire();
    inode.touch_mtime_ctime(now);
    Ok(())
}

/// `shmem_fallocate` on `[off, off + len)` (`len > 0`, the range checked by the caller):
/// with `punch`, frees the whole pages inside the range and zeroes the partial ones at
/// its ends (the size never changes); otherwise allocates zeroed pages for the holes in
/// the range and, unless `keep_size`, grows the size to `off + len`. Both stamp mtime and
/// ctime and drop set-user-ID (`file_modified`); nothing changes on failure. The pages
/// are charged before any is allocated, then allocated `FALLOC_BATCH` at a time, the
/// data lock dropped between batches.
///
/// # Errors
/// `ENOSPC` when the mount's `size=` cannot hold the new pages, or the range is larger
/// than the mount: at once, before any page is allocated (Linux allocates until the
/// space runs out, then frees them again on shmem's `undone:` path). Only a range whose
/// pages a concurrent punch or truncate freed meanwhile, when no page is left for them,
/// fails part-way (keeping the pages allocated so far, size unchanged).
/// `EISDIR`/`EINVAL` as `read_at`.
#[allow(clippy::too_many_arguments)]
pub(super) fn fallocate(
    f: &RegFile,
    acct: &Option<Arc<Limits>>,
    inode: &Inode,
    off: u64,
    len: u64,
    punch: bool,
    keep_size: bool,
    now: Timespec,
    cred: &Cred,
) -> Result<()> {
    let mut data = write(&f.data);
    let mut garbage = Garbage::default();
    let ps = PAGE_SIZE as u64;
    let end = off + len;
    if punch {
        let sec = Section::begin(f, &data);
        // Past the end there is nothing to punch; the partial pages at the ends are
        // zeroed, the whole ones freed (`shmem_truncate_range`).
        let (first_whole, end_whole) = (off.div_ceil(ps), end / ps);
        if first_whole < end_whole {
            let mut tail = data.pages.split_off(&first_whole);
            let mut keep = tail.split_off(&end_whole);
            if let Some(a) = &acct {
                a.release_blocks(tail.len() as u64);
            }
            data.pages.append(&mut keep);
            garbage.unlink_all(&f.index, tail);
        }
        for pos in [off, end - 1] {
            let idx = pos / ps;
            if idx >= first_whole && idx < end_whole {
                continue;
            }
            if data.pages.contains_key(&idx) {
                let lo = off.max(idx * ps) - idx * ps;
                let hi = end.min((idx + 1) * ps) - idx * ps;
                own_page(&mut data.pages, idx, &f.index, &mut garbage)
                    .zero(lo as usize, (hi - lo) as usize);
            }
        }
        drop(sec);
    } else {
        let (first, past) = (off / ps, end.div_ceil(ps));
        // Pages reserved for the holes of the range and not yet allocated.
        if let Some(a) = &acct {
            // "Try to avoid a swapstorm if len is impossible to satisfy": a range of
            // more pages than the mount holds fails before any page is looked at; one
            // with more holes than pages are free fails before any is allocated.
            if past - first > a.max_blocks() {
                return Err(Errno::ENOSPC);
            }
            // One fallocate at a time per file (Linux: `inode_lock`): another one's
            // budget may hold the space this one needs.
            while data.falloc.is_some() {
                drop(data);
                std::thread::yield_now();
                data = write(&f.data);
            }
            let held = data.pages.range(first..past).count() as u64;
            let budget = past - first - held;
            a.reserve_blocks(budget).map_err(|_| Errno::ENOSPC)?;
            data.falloc = Some(Falloc {
                first,
                past,
                budget,
            });
        }
        // `FALLOC_BATCH` pages at a time, the data lock dropped in between, so that
        // reads and writes of the file wait for one batch, not for the whole range
        // (Linux holds `i_rwsem` throughout but lets page faults in, `shmem_falloc`).
        // A write in between allocates a page of the range from the budget (`Falloc`);
        // a punch or truncate in between frees pages that were counted as held, whose
        // holes are charged one by one once the budget is spent.
        let mut next = first;
        let r = loop {
            let stop = past.min(next + FALLOC_BATCH);
            let mut short = false;
            // New pages read as the holes they fill (zeros); the section still marks the
            // index's change.
            let sec = Section::begin(f, &data);
            let RegData { pages, falloc } = &mut *data;
            for i in next..stop {
                let std::collections::btree_map::Entry::Vacant(v) = pages.entry(i) else {
                    continue;
                };
                if let Some(a) = &acct {
                    // This fallocate's budget (set above whenever `acct` is), then one
                    // page at a time once it is spent.
                    match falloc {
                        Some(f) if f.budget > 0 => f.budget -= 1,
                        _ if a.reserve_blocks(1).is_err() => {
                            short = true;
                            break;
                        }
                        _ => {}
                    }
                }
                let Page::Own(b) = v.insert(Page::zeroed()) else {
                    unreachable!("a fresh page is owned")
                };
                // SAFETY: owned by `pages`, which it leaves only into a `Garbage` after
                // its slot is cleared (module invariants).
                unsafe { f.index.set(i, b) };
            }
            drop(sec);
            // Relaxed: under the data write lock.
            inode
                .i_blocks
                .store(data.pages.len() as u64 * BLOCKS_PER_PAGE, Ordering::Relaxed);
            if short {
                break Err(Errno::ENOSPC);
            }
            if stop == past {
                break Ok(());
            }
            next = stop;
            drop(data);
            // The lock is not fair: without a yield this thread takes it again before
            // a woken reader or writer runs.
            std::thread::yield_now();
            data = write(&f.data);
        };
        if let Some(a) = &acct {
            if let Some(f) = data.falloc.take() {
                a.release_blocks(f.budget);
            }
        }
        r?;
        if !keep_size && end > inode.size() {
            let _sec = Section::begin(f, &data);
            // Relaxed: under the data write lock, inside the write section (as `write_at`).
            inode.i_size.store(end, Ordering::Relaxed);
        }
    }
    // Relaxed: under the data write lock.
    inode
        .i_blocks
        .store(data.pages.len() as u64 * BLOCKS_PER_PAGE, Ordering::Relaxed);
    drop(data);
    // A punch's pages go after a grace period (as a truncate's).
    garbage.retire();
    inode.kill_suid(cred, now)?;
    inode.touch_mtime_ctime(now);
    Ok(())
}

/// `SEEK_DATA` / `SEEK_HOLE` from `off`: stored pages are data, everything else (and the
/// end of file) is a hole, as tmpfs reports. Pages `fallocate` allocated are data too,
/// where tmpfs reports them as holes until written (README: intentional differences).
///
/// # Errors
/// `ENXIO` when `off` is at or past the end of file.
pub(super) fn seek_data_hole(
    f: &RegFile,
    inode: &Inode,
    off: u64,
    data_wanted: bool,
) -> Result<u64> {
    let data = read(&f.data);
    let size = inode.size();
    if off >= size {
        return Err(Errno::ENXIO);
    }
    let ps = PAGE_SIZE as u64;
    let mut idx = off / ps;
    if data_wanted {
        match data.pages.range(idx..).next() {
            Some((&i, _)) if i * ps < size => Ok((i * ps).max(off)),
            _ => Err(Errno::ENXIO),
        }
    } else {
        while data.pages.contains_key(&idx) {
            idx += 1;
        }
        Ok((idx * ps).max(off).min(size))
    }
}

/// The data of a new file sharing every page of `d` (a snapshot, snapshot.rs), with the
/// file's size then: both files' pages become [`Page::Shared`], so neither sees the
/// other's later writes. Taken under `d`'s data write lock (turning a page from owned to
/// shared changes the map), so the copy is the file as one instant saw it. Cost: one
/// small allocation per page not shared before, one reference-count increment per page;
/// no file data is copied.
///
/// The index needs no change: the pages keep their bytes' addresses (the `Box` moves into
/// the `Arc`), and neither the bytes nor the size change.
pub(super) fn share_pages(f: &RegFile, inode: &Inode) -> (RegData, u64) {
    let mut data = write(&f.data);
    let size = inode.size();
    let theirs: BTreeMap<u64, Page> = if data.pages.values().all(|p| matches!(p, Page::Shared(_))) {
        // Shared already (a snapshot of a snapshot, or a second one): clone the handles.
        data.pages
            .iter()
            .map(|(&i, p)| match p {
                Page::Shared(a) => (i, Page::Shared(a.clone())),
                Page::Own(_) => unreachable!("all shared"),
            })
            .collect()
    } else {
        // Rebuilt from sorted pairs: `collect` into a BTreeMap bulk-builds sorted input.
        let (mine, theirs): (BTreeMap<u64, Page>, BTreeMap<u64, Page>) =
            std::mem::take(&mut data.pages)
                .into_iter()
                .map(|(i, p)| {
                    let a = match p {
                        Page::Own(b) => Arc::new(b),
                        Page::Shared(a) => a,
                    };
                    ((i, Page::Shared(a.clone())), (i, Page::Shared(a)))
                })
                .unzip();
        data.pages = mine;
        theirs
    };
    (
        RegData {
            pages: theirs,
            falloc: None,
        },
        size,
    )
}

impl RegData {
    /// Pages present (each charged as one page of `size=`).
    pub(super) fn page_count(&self) -> u64 {
        self.pages.len() as u64
    }
}

#[cfg(test)]
impl RegData {
    /// `(index, shared, address of the bytes)` of every present page (tests).
    pub(super) fn page_addrs(&self) -> Vec<(u64, bool, usize)> {
        self.pages
            .iter()
            .map(|(&i, p)| (i, matches!(p, Page::Shared(_)), p.bytes().addr()))
            .collect()
    }
}
