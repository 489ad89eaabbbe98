//! `SuperBlock`: one mounted tmpfs instance: device number, inode numbers, rename lock.
//!
//! Linux analogue: `struct super_block` (include/linux/fs.h), `mm/shmem.c`
//! (`shmem_reserve_inode`: per-CPU batches of inode numbers).
//!
//! Nothing here is written on open, close, read or write. Inode numbers come from a
//! per-thread batch of `INO_BATCH`, refilled from `s_next_ino` once per batch, so create
//! writes the shared counter once per 1024 files (Linux: `SHMEM_INO_BATCH`).
//!
//! A mount with `size` or `nr_inodes` limits ([`TmpfsOptions`]) also keeps [`Limits`]: two
//! counters on their own cache lines, written when a page or an inode is allocated or freed
//! (Linux: `shmem_sb_info.used_blocks` / `free_ispace`). A mount without limits has none and
//! writes nothing (Linux accounts only when `max_blocks`/`max_inodes` are set).

use crate::sync::padded::CacheLine;
use crate::sync::plain::{AtomicU64, Mutex, Ordering};
use crate::{Errno, Result};
use std::cell::Cell;
use std::fmt;
use std::sync::Arc;

/// Inode numbers a thread takes from the super block at once.
const INO_BATCH: u64 = 1024;

/// Device numbers handed to super blocks (anonymous devices: major 0).
static NEXT_DEV: AtomicU64 = AtomicU64::new(0x30);

/// Options of a tmpfs mount.
#[derive(Clone, Debug, Default)]
pub struct TmpfsOptions {
    /// Permission bits of the root directory; `None` = `0o1777` (tmpfs's default).
    pub mode: Option<u32>,
    /// Owner of the root directory.
    pub uid: u32,
    /// Group of the root directory.
    pub gid: u32,
    /// `size=`: bytes of file data the mount may hold, rounded up to whole 4 KiB pages;
    /// `None` or `Some(0)` = unlimited (tmpfs's `size=0`). Writes and creations past it
    /// fail with `ENOSPC`; freed pages (truncate, the last close of an unlinked file) count
    /// again.
    pub size: Option<u64>,
    /// `nr_inodes=`: inodes the mount may hold, the root included; `None` or `Some(0)` =
    /// unlimited. Creations past it fail with `ENOSPC`.
    pub nr_inodes: Option<u64>,
}

/// A mounted file system instance.
pub struct SuperBlock {
    /// Device number (`st_dev`); immutable.
    pub(crate) s_dev: u64,
    /// Next unassigned inode-number batch start; written once per `INO_BATCH` creates.
    s_next_ino: AtomicU64,
    /// Serialises cross-directory renames (Linux: `s_vfs_rename_mutex`).
    pub(crate) s_rename_lock: Mutex<()>,
    /// Mount options (immutable).
    pub(crate) opts: TmpfsOptions,
    /// Space and inode accounting; `None` without limits (immutable).
    pub(crate) s_limits: Option<Arc<Limits>>,
    /// The file system behind this super block (Linux `s_op`, `s_type`); immutable.
    pub(crate) s_op: Box<dyn crate::fs::FileSystem>,
}

/// The accounting of a mount with limits: pages and inodes in use against the maxima.
///
/// Shapes: counts of 4 KiB pages and of inodes. Each counter sits on its own cache line; a
/// reservation is a compare-and-swap loop that never lets the count pass its maximum, so
/// concurrent writers near the limit get exactly the space there is (no transient
/// over-count making another fail).
///
/// # References
/// Linux mm/shmem.c `shmem_inode_acct_blocks` (`percpu_counter_limited_add`),
/// `shmem_reserve_inode`; tmpfs(5) `size`, `nr_inodes`.
#[derive(Debug)]
pub(crate) struct Limits {
    /// Pages the mount may hold (`u64::MAX`: unlimited). Immutable.
    max_blocks: u64,
    /// Inodes the mount may hold (`u64::MAX`: unlimited). Immutable.
    max_inodes: u64,
    /// Pages in use.
    used_blocks: CacheLine<crate::sync::AtomicU64>,
    /// Inodes in use.
    used_inodes: CacheLine<crate::sync::AtomicU64>,
}

impl Limits {
    /// Limits of `max_blocks` pages and `max_inodes` inodes (`u64::MAX`: no limit).
    pub(crate) fn new(max_blocks: u64, max_inodes: u64) -> Limits {
        Limits {
            max_blocks,
            max_inodes,
            used_blocks: CacheLine(crate::sync::AtomicU64::new(0)),
            used_inodes: CacheLine(crate::sync::AtomicU64::new(0)),
        }
    }

    /// Adds `n` to `counter` unless that passes `max`.
    fn reserve(counter: &crate::sync::AtomicU64, max: u64, n: u64) -> Result<()> {
        // Relaxed: the counter publishes nothing (pages and inodes are published by their
        // own locks); only the count's own atomicity matters, which the CAS gives.
        let mut cur = counter.load(crate::sync::Ordering::Relaxed);
        loop {
            let new = cur
                .checked_add(n)
                .filter(|&v| v <= max)
                .ok_or(Errno::ENOSPC)?;
            // Relaxed on success and failure: see above.
            let (r, f) = (
                crate::sync::Ordering::Relaxed,
                crate::sync::Ordering::Relaxed,
            );
            match counter.compare_exchange(cur, new, r, f) {
                Ok(_) => return Ok(()),
                Err(v) => cur = v,
            }
        }
    }

    /// Reserves `n` pages.
    ///
    /// # Errors
    /// `ENOSPC` when fewer than `n` are free; nothing is reserved then.
    pub(crate) fn reserve_blocks(&self, n: u64) -> Result<()> {
        Self::reserve(&self.used_blocks, self.max_blocks, n)
    }

    /// Gives back `n` pages reserved earlier.
    pub(crate) fn release_blocks(&self, n: u64) {
        if n > 0 {
            // Relaxed: see `reserve`.
            let old = self
                .used_blocks
                .fetch_sub(n, crate::sync::Ordering::Relaxed);
            debug_assert!(old >= n, "released more pages than reserved");
        }
    }

    /// Reserves one inode.
    ///
    /// # Errors
    /// `ENOSPC` when `nr_inodes` are in use.
    pub(crate) fn reserve_inode(&self) -> Result<()> {
        Self::reserve(&self.used_inodes, self.max_inodes, 1)
    }

    /// Gives back one inode.
    pub(crate) fn release_inode(&self) {
        // Relaxed: see `reserve`.
        let old = self
            .used_inodes
            .fetch_sub(1, crate::sync::Ordering::Relaxed);
        debug_assert!(old >= 1, "released more inodes than reserved");
    }

    /// `(max_blocks, used_blocks, max_inodes, used_inodes)`, a snapshot (`statfs`).
    pub(crate) fn counts(&self) -> (u64, u64, u64, u64) {
        // Relaxed: a snapshot, like Linux's percpu_counter_sum in shmem_statfs.
        let r = crate::sync::Ordering::Relaxed;
        (
            self.max_blocks,
            self.used_blocks.load(r),
            self.max_inodes,
            self.used_inodes.load(r),
        )
    }
}

impl fmt::Debug for SuperBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SuperBlock")
            .field("dev", &self.s_dev)
            .finish()
    }
}

thread_local! {
    /// (device, next, end) of this thread's current inode-number batch.
    static INO_CACHE: Cell<(u64, u64, u64)> = const { Cell::new((0, 0, 0)) };
}

impl SuperBlock {
    pub(crate) fn new(opts: TmpfsOptions) -> SuperBlock {
        let limit = |v: Option<u64>, unit: u64| match v {
            None | Some(0) => u64::MAX,
            Some(v) => v.div_ceil(unit),
        };
        let (max_blocks, max_inodes) = (limit(opts.size, 4096), limit(opts.nr_inodes, 1));
        let s_limits = (max_blocks != u64::MAX || max_inodes != u64::MAX)
            .then(|| Arc::new(Limits::new(max_blocks, max_inodes)));
        SuperBlock {
            s_limits,
            // Relaxed: a unique id, ordered with nothing.
            s_dev: NEXT_DEV.fetch_add(1, Ordering::Relaxed),
            // 1 is the root directory.
            s_next_ino: AtomicU64::new(2),
            s_rename_lock: Mutex::new(()),
            s_op: Box::new(crate::fs::tmpfs::Tmpfs),
            opts,
        }
    }

    /// A super block for the file system `s_op` (any but tmpfs, whose options and limits
    /// [`SuperBlock::new`] takes): a fresh device number, no limits.
    pub(crate) fn with_fs(s_op: Box<dyn crate::fs::FileSystem>) -> SuperBlock {
        SuperBlock {
            s_op,
            s_limits: None,
            ..SuperBlock::new(TmpfsOptions::default())
        }
    }

    /// Device number (`st_dev` of every inode here).
    pub fn dev(&self) -> u64 {
        self.s_dev
    }

    /// A fresh inode number (never reused within this super block).
    pub(crate) fn next_ino(&self) -> u64 {
        INO_CACHE.with(|c| {
            let (dev, next, end) = c.get();
            if dev == self.s_dev && next < end {
                c.set((dev, next + 1, end));
                return next;
            }
            // Relaxed: only uniqueness is needed, which the RMW gives.
            let start = self.s_next_ino.fetch_add(INO_BATCH, Ordering::Relaxed);
            c.set((self.s_dev, start + 1, start + INO_BATCH));
            start
        })
    }
}
