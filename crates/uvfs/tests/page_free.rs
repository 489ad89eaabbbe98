//! Freed tmpfs pages go back to the allocator while the process is otherwise idle (issue
//! 16's re-land).
//!
//! Bug: with the lockless reads, pages removed from a file (truncate, hole punch, eviction
//! of an unlinked file) were freed only after an epoch grace period, which crossbeam-epoch
//! completes only when some thread later pins or flushes; an idle `uvfs mount` server pins
//! nothing, so CI saw its RSS stay at ~300 MB after a 256 MiB file was removed
//! (uvfs-cli's `mount_lifecycle::freed_file_memory_returns_to_the_system`).
//! Cause: deferred frees with nobody left to drive them. Fix: the pages of an evicted
//! file nobody has open are freed at once (no reader can be left), and a writer that has
//! more than `sync::page_reclaim::BOUND` bytes waiting drives the grace period itself
//! (fs/tmpfs/regular.rs `drop_pages`, `Garbage::retire`).
//!
//! The check counts live page buffers (4 KiB, 64-byte aligned allocations) with a counting
//! global allocator: after each removal, with no further activity on any thread, they must
//! be back to (nearly) what they were. One `#[test]`, so that no other test of this binary
//! allocates pages meanwhile. Nothing is timed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use uvfs::types::AtFlags;
use uvfs::*;

/// The system allocator, counting live allocations of a page buffer's layout.
struct Counting;

/// Live 4 KiB, 64-byte-aligned allocations (tmpfs page buffers, `PageBuf`).
static LIVE_PAGES: AtomicIsize = AtomicIsize::new(0);

fn is_page(l: Layout) -> bool {
    l.size() == 4096 && l.align() == 64
}

// SAFETY: every call is forwarded to `System` unchanged; the count is a side effect.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if is_page(l) {
            // Relaxed: a statistic, read after the allocating calls returned on this thread.
            LIVE_PAGES.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if is_page(l) {
            // Relaxed: as in `alloc`.
            LIVE_PAGES.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if is_page(l) {
            // Relaxed: as in `alloc`.
            LIVE_PAGES.fetch_sub(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    // Relaxed: see `alloc`.
    LIVE_PAGES.load(Ordering::Relaxed)
}

/// 64 MiB, in pages.
const FILE_PAGES: isize = 16 * 1024;
/// What may stay allocated after a removal: `page_reclaim::BOUND` (2 MiB) in pages, and
/// a little slack.
const LEFT_MAX: isize = 512 + 16;

/// Writes `FILE_PAGES` pages to `path` (created) through `fd`, returned open.
fn fill(t: &Task, path: &str) -> Fd {
    let fd = t
        .open(path, OpenFlags::RDWR | OpenFlags::CREAT, 0o644)
        .unwrap();
    let chunk = vec![0x5au8; 1 << 20];
    for i in 0..FILE_PAGES / 256 {
        assert_eq!(t.pwrite(fd, &chunk, i as i64 * (1 << 20)), Ok(1 << 20));
    }
    fd
}

fn check(what: &str, before: isize) {
    let left = live() - before;
    assert!(
        left <= LEFT_MAX,
        "{what}: {left} of {FILE_PAGES} pages still allocated with nothing else running"
    );
}

/// The removals on a mount with `opts`; `evicts`: the mount has limits, so an unlinked
/// file's pages go at its last name or close (on a mount without, they go with the inode,
/// whose last reference a dentry freed through the default epoch collector drops: not
/// covered here).
fn scenarios(opts: TmpfsOptions, name: &str, evicts: bool) {
    let mnt = tmpfs::mount(opts);
    let t = Task::init(&mnt);
    let base = live();

    // Truncate of an open file to 0: the pages are retired, the writer drives the grace
    // period.
    let fd = fill(&t, "/a");
    assert!(
        live() - base >= FILE_PAGES,
        "{name}: the file's pages are allocated"
    );
    t.ftruncate(fd, 0).unwrap();
    check(&format!("{name}: ftruncate to 0 of an open file"), base);
    t.close(fd).unwrap();

    // A hole punched over the whole file.
    let fd = fill(&t, "/b");
    const PUNCH_HOLE: i32 = 0x02;
    const KEEP_SIZE: i32 = 0x01;
    t.fallocate(fd, PUNCH_HOLE | KEEP_SIZE, 0, FILE_PAGES as i64 * 4096)
        .unwrap();
    check(&format!("{name}: hole punched over the file"), base);
    t.close(fd).unwrap();

    t.unlinkat(Fd::AT_FDCWD, "/a", AtFlags::empty()).unwrap();
    t.unlinkat(Fd::AT_FDCWD, "/b", AtFlags::empty()).unwrap();
    if !evicts {
        return;
    }

    // The last name removed with no open file (eviction at unlink).
    let fd = fill(&t, "/c");
    t.close(fd).unwrap();
    t.unlinkat(Fd::AT_FDCWD, "/c", AtFlags::empty()).unwrap();
    check(&format!("{name}: unlink of a closed file"), base);

    // Unlinked while open, then the last close (eviction at close).
    let fd = fill(&t, "/d");
    t.unlinkat(Fd::AT_FDCWD, "/d", AtFlags::empty()).unwrap();
    assert!(
        live() - base >= FILE_PAGES,
        "{name}: an open file keeps its pages"
    );
    t.close(fd).unwrap();
    check(&format!("{name}: last close of an unlinked file"), base);
}

#[test]
fn removed_pages_are_freed_with_nothing_else_running() {
    // A mount with limits (tmpfs's defaults: inodes are evicted at the last name and close)
    // and one without (pages go when the inode is dropped).
    scenarios(TmpfsOptions::default(), "default limits", true);
    scenarios(TmpfsOptions::unlimited(), "unlimited", false);
}
