//! `SuperBlock`: one mounted tmpfs instance: device number, inode numbers, rename lock.
//!
//! Linux analogue: `struct super_block` (include/linux/fs.h), `mm/shmem.c`
//! (`shmem_reserve_inode`: per-CPU batches of inode numbers).
//!
//! Nothing here is written on open, close, read or write. Inode numbers come from a
//! per-thread batch of `INO_BATCH`, refilled from `s_next_ino` once per batch, so create
//! writes the shared counter once per 1024 files (Linux: `SHMEM_INO_BATCH`).

use crate::sync::plain::{AtomicU64, Mutex, Ordering};
use std::cell::Cell;
use std::fmt;

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
        SuperBlock {
            // Relaxed: a unique id, ordered with nothing.
            s_dev: NEXT_DEV.fetch_add(1, Ordering::Relaxed),
            // 1 is the root directory.
            s_next_ino: AtomicU64::new(2),
            s_rename_lock: Mutex::new(()),
            opts,
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
