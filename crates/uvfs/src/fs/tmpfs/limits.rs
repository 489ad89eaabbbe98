//! `Limits`: a tmpfs mount's space and inode-space accounting against `size=` and
//! `nr_inodes=`.
//!
//! Linux analogue: mm/shmem.c (`shmem_sb_info.used_blocks`, `free_ispace`,
//! `shmem_reserve_inode`, `shmem_inode_acct_blocks`).
//!
//! Two counters on their own cache lines, written when a page, an inode or an extended
//! attribute is allocated or freed. A mount without limits has none and writes nothing.

use crate::sync::padded::CacheLine;
use crate::{Errno, Result};

/// Bytes of inode space one inode takes (`BOGO_INODE_SIZE`, mm/shmem.c).
const BOGO_INODE_SIZE: u64 = 1024;

/// The accounting of a mount with limits: pages and inode space in use against the maxima.
///
/// Shapes: a count of 4 KiB pages, and inode space in bytes as Linux 6.6+ keeps it
/// (`free_ispace`): `nr_inodes * BOGO_INODE_SIZE` (1024) in all, each inode and each
/// further hard link taking 1024, each extended attribute `40 + name + value` bytes
/// (`simple_xattr_space`). Each counter sits on its own cache line; a
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
    /// Inode space in bytes: `max_inodes * BOGO_INODE_SIZE` (`u64::MAX`: unlimited).
    /// Immutable.
    max_ispace: u64,
    /// Pages in use.
    used_blocks: CacheLine<crate::sync::AtomicU64>,
    /// Inode space in use, in bytes.
    used_inodes: CacheLine<crate::sync::AtomicU64>,
}

impl Limits {
    /// Limits of `max_blocks` pages and `max_inodes` inodes (`u64::MAX`: no limit).
    pub(crate) fn new(max_blocks: u64, max_inodes: u64) -> Limits {
        Limits {
            max_blocks,
            max_inodes,
            max_ispace: max_inodes.saturating_mul(BOGO_INODE_SIZE),
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

    /// Reserves one inode (`BOGO_INODE_SIZE` bytes of inode space, `shmem_reserve_inode`).
    ///
    /// # Errors
    /// `ENOSPC` when the inode space is used up.
    pub(crate) fn reserve_inode(&self) -> Result<()> {
        self.reserve_ispace(BOGO_INODE_SIZE)
    }

    /// Gives back one inode.
    pub(crate) fn release_inode(&self) {
        self.release_ispace(BOGO_INODE_SIZE);
    }

    /// Reserves `n` bytes of inode space (an extended attribute: `simple_xattr_space`).
    ///
    /// # Errors
    /// `ENOSPC` when fewer than `n` bytes are free; nothing is reserved then.
    pub(crate) fn reserve_ispace(&self, n: u64) -> Result<()> {
        Self::reserve(&self.used_inodes, self.max_ispace, n)
    }

    /// Gives back `n` bytes of inode space reserved earlier.
    pub(crate) fn release_ispace(&self, n: u64) {
        if n > 0 {
            // Relaxed: see `reserve`.
            let old = self
                .used_inodes
                .fetch_sub(n, crate::sync::Ordering::Relaxed);
            debug_assert!(old >= n, "released more inode space than reserved");
        }
    }

    /// Whether inode space is limited (`nr_inodes` set): Linux charges extended attributes
    /// only then (`sbinfo->max_inodes` in `shmem_xattr_handler_set`).
    pub(crate) fn limits_inodes(&self) -> bool {
        self.max_inodes != u64::MAX
    }

    /// `(max_blocks, used_blocks, max_inodes, used_inodes)`, a snapshot (`statfs`);
    /// `used_inodes` is `max_inodes` less the whole inodes' worth of free inode space
    /// (`shmem_statfs`: `f_ffree = free_ispace / BOGO_INODE_SIZE`).
    pub(crate) fn counts(&self) -> (u64, u64, u64, u64) {
        // Relaxed: a snapshot, like Linux's percpu_counter_sum in shmem_statfs.
        let r = crate::sync::Ordering::Relaxed;
        let free_ispace = self.max_ispace.saturating_sub(self.used_inodes.load(r));
        (
            self.max_blocks,
            self.used_blocks.load(r),
            self.max_inodes,
            self.max_inodes
                .saturating_sub(free_ispace / BOGO_INODE_SIZE),
        )
    }
}
