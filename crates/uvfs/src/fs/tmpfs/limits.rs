//! `Limits`: a tmpfs mount's space and inode-space accounting against `size=` and
//! `nr_inodes=`, as per-thread batched reservations.
//!
//! Linux analogue: mm/shmem.c (`shmem_sb_info.used_blocks`, `free_ispace`,
//! `shmem_reserve_inode`, `shmem_inode_acct_blocks`), lib/percpu_counter.c
//! (`__percpu_counter_limited_add`, `__percpu_counter_sum`).
//!
//! # The protocol (sloppy counters with reserves)
//! Each of the two pools (pages; inode space in bytes) keeps the units nobody holds in
//! `free`, a count under the pool's lock, and an array of shards, one `u64` on its own
//! cache line each, holding units taken out of `free` ahead of need. A thread uses the shard
//! `this_shard()` gave it at its first call (a per-process counter written once per
//! thread, sync/pcp_ref.rs), so two threads creating files touch two different lines.
//!
//! - A reservation of `n` first takes `n` from its shard's reserve (a compare-and-swap on
//!   the shard's line) when the shard holds `n` and is open. Otherwise it takes the lock
//!   and takes `n` from `free`; when `free` stays far above the limit (more than
//!   [`Pool::slack`], the most all shards may hold, plus a batch: Linux's
//!   `count + unknown <= limit`) it also moves one batch into the caller's shard. When
//!   `free` holds less than `n`, it *closes* every shard (a swap to `CLOSED`, taking its
//!   reserve into `free`; a closed shard refuses both fast paths, which then wait for the
//!   lock), decides on the exact count, and reopens them empty before unlocking.
//! - A release of `n` adds `n` to its shard when the shard is open and stays within two
//!   batches; otherwise it adds `n` to `free` under the lock.
//!
//! # Invariants
//! - Conservation: `max = used + free + sum of the open shards' reserves`; every unit is in
//!   exactly one place, moved by one atomic read-modify-write or under the lock. So a mount
//!   never holds more than its limit, whatever the interleaving: a fast path only spends
//!   units already taken out of `free`.
//! - Exact failure: `ENOSPC` is given only with every shard closed, when `free` is the whole
//!   free count (no fast path can move a unit while its shard is closed): at that moment
//!   fewer than `n` units are free. Linux's `__percpu_counter_limited_add` is not exact
//!   under races: its fast path tests `fbc->count + unknown <= limit` with `fbc->count` read
//!   without the lock while a locked adder moves a CPU's count into it (the race raised on
//!   linux-mm when it landed, and by KCSAN in 2024); here the fast path spends only units
//!   already taken out of `free`, so no interleaving passes the limit.
//! - Shards are closed only while the pool's lock is held, and reopened before it is
//!   released: whoever holds the lock sees every shard open.
//! - `statfs` ([`Limits::counts`]) sums `free` and the shards under the lock, as Linux's
//!   `percpu_counter_sum` in `shmem_statfs`: exact when no reservation runs concurrently,
//!   off by at most the ones in flight otherwise.
//!
//! Lock order: each pool's lock is a leaf (nothing is taken under it).
//!
//! Loom models: tests/loom_limits.rs (two reservers near the limit never exceed it; the last
//! inode goes to exactly one; frees are never lost; mutations the models catch).

use crate::sync::padded::CacheLine;
use crate::sync::pcp_ref::this_shard;
use crate::sync::{AtomicU64, Mutex, Ordering};
use crate::{Errno, Result};

/// Bytes of inode space one inode takes (`BOGO_INODE_SIZE`, mm/shmem.c).
const BOGO_INODE_SIZE: u64 = 1024;

/// The shard bit that refuses the fast paths: the pool's lock holder is collecting the
/// reserves (set and cleared only under the lock).
const CLOSED: u64 = 1 << 63;

/// A change the loom models must catch (tests/loom_limits.rs); never set in uvfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mutation {
    /// The fast reservation takes from the shard without checking that it holds `n`
    /// (Linux's fast path without its limit test): units appear from nothing.
    NoReserveCheck,
    /// The slow path gives `ENOSPC` from `free` alone, without collecting the shards'
    /// reserves: a false `ENOSPC` while another shard holds the space.
    NoCollect,
}

/// One pool of units (pages, or bytes of inode space) against its maximum.
#[derive(Debug)]
struct Pool {
    /// Units the mount may hold (`u64::MAX`: unlimited). Immutable.
    max: u64,
    /// Units a shard takes from `free` at once; a shard holds at most two batches. Immutable.
    batch: u64,
    /// `free` above which a slow reservation refills the caller's shard: the most the
    /// shards may hold together (shards x batch, Linux's `unknown`). Immutable.
    slack: u64,
    /// Units neither used nor held by a shard. Protected by its lock.
    free: CacheLine<Mutex<u64>>,
    /// Per-shard reserves (a power of two of them), each alone on its line: units taken
    /// from `free`, or `CLOSED`. Atomic; written by the threads of that shard, and by the
    /// lock holder while collecting.
    shards: Box<[CacheLine<AtomicU64>]>,
}

impl Pool {
    /// A pool of `max` units, `nshards` (a power of two) shards refilled `batch` at a time.
    fn new(max: u64, nshards: usize, batch: u64) -> Pool {
        debug_assert!(nshards.is_power_of_two());
        Pool {
            max,
            batch,
            slack: batch.saturating_mul(nshards as u64),
            free: CacheLine(Mutex::new(max)),
            shards: (0..nshards).map(|_| CacheLine(AtomicU64::new(0))).collect(),
        }
    }

    /// Shard `i` (any `usize`, masked).
    #[inline]
    fn shard(&self, i: usize) -> &AtomicU64 {
        &self.shards[i & (self.shards.len() - 1)]
    }

    /// Takes `n` units on shard `i`; see the module doc.
    ///
    /// # Errors
    /// `ENOSPC` when fewer than `n` units are free (with every shard collected); nothing is
    /// taken then.
    #[inline]
    fn take(&self, i: usize, n: u64, m: Mutations) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let s = self.shard(i);
        // Relaxed: the reserve publishes nothing (pages and inodes are published by their
        // own locks); only the count's atomicity matters, which the compare-and-swap gives.
        let mut v = s.load(Ordering::Relaxed);
        while v & CLOSED == 0 && (v >= n || m.is(Mutation::NoReserveCheck)) {
            // Relaxed on success and failure: see above. A closed shard (set under the lock
            // by `collect_locked`) makes this fail and go to the lock.
            let (r, f) = (Ordering::Relaxed, Ordering::Relaxed);
            match s.compare_exchange(v, v.saturating_sub(n), r, f) {
                Ok(_) => return Ok(()),
                Err(x) => v = x,
            }
        }
        self.take_slow(s, n, m)
    }

    /// [`take`](Self::take) under the lock: from `free`, collecting the shards if needed.
    #[cold]
    fn take_slow(&self, s: &AtomicU64, n: u64, m: Mutations) -> Result<()> {
        let mut free = crate::sync::lock(&self.free);
        if *free < n && !m.is(Mutation::NoCollect) {
            self.collect_locked(&mut free);
            let ok = *free >= n;
            if ok {
                *free -= n;
            }
            self.reopen_locked();
            return if ok { Ok(()) } else { Err(Errno::ENOSPC) };
        }
        *free = free.checked_sub(n).ok_or(Errno::ENOSPC)?;
        if *free > self.slack.saturating_add(self.batch) {
            *free -= self.batch;
            // Relaxed: see `take`; the shard is open (shards close only under this lock).
            s.fetch_add(self.batch, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Closes every shard and moves its reserve into `free`.
    ///
    /// Context: caller holds the lock (`free`), and reopens the shards before releasing it.
    fn collect_locked(&self, free: &mut u64) {
        for s in self.shards.iter() {
            // Relaxed: the swap's atomicity alone makes each unit land once, here or in
            // a fast path that ran before it; no other memory is published with it.
            let v = s.swap(CLOSED, Ordering::Relaxed);
            debug_assert_eq!(v & CLOSED, 0, "a shard closed outside the lock");
            *free += v & !CLOSED;
        }
    }

    /// Reopens every shard, empty.
    ///
    /// Context: caller holds the lock and closed them all (`collect_locked`).
    fn reopen_locked(&self) {
        for s in self.shards.iter() {
            // Relaxed: a closed shard is written by nobody else (fast paths only read it and
            // go to the lock), so the empty value needs no ordering.
            s.store(0, Ordering::Relaxed);
        }
    }

    /// Gives back `n` units on shard `i` (taken earlier, on any shard).
    #[inline]
    fn give(&self, i: usize, n: u64) {
        if n == 0 {
            return;
        }
        let s = self.shard(i);
        let cap = self.batch.saturating_mul(2);
        // Relaxed: see `take`.
        let mut v = s.load(Ordering::Relaxed);
        while v & CLOSED == 0 && v.saturating_add(n) <= cap {
            // Relaxed on success and failure: see `take`.
            let (r, f) = (Ordering::Relaxed, Ordering::Relaxed);
            match s.compare_exchange(v, v + n, r, f) {
                Ok(_) => return,
                Err(x) => v = x,
            }
        }
        self.give_slow(n);
    }

    /// [`give`](Self::give) under the lock, into `free`.
    #[cold]
    fn give_slow(&self, n: u64) {
        let mut free = crate::sync::lock(&self.free);
        debug_assert!(
            free.checked_add(n).is_some_and(|f| f <= self.max),
            "gave back more than was taken"
        );
        *free = free.saturating_add(n).min(self.max);
    }

    /// Units in use: `max` less `free` and the shards' reserves, summed under the lock
    /// (`percpu_counter_sum`): exact when nothing runs concurrently.
    fn used(&self) -> u64 {
        let free = crate::sync::lock(&self.free);
        let held: u64 = self
            .shards
            .iter()
            // Relaxed: a snapshot; the lock keeps the shards open and `free` still.
            .map(|s| s.load(Ordering::Relaxed) & !CLOSED)
            .sum();
        self.max.saturating_sub(free.saturating_add(held))
    }
}

/// The loom models' mutations (a zero-sized nothing in uvfs).
#[derive(Debug, Clone, Copy)]
struct Mutations {
    /// The mutation in force, if any.
    #[cfg(uvfs_loom)]
    m: Option<Mutation>,
}

impl Mutations {
    /// Whether the loom models' mutation `which` is in force (never in uvfs).
    #[inline]
    fn is(self, which: Mutation) -> bool {
        #[cfg(uvfs_loom)]
        return self.m == Some(which);
        #[cfg(not(uvfs_loom))]
        {
            let _ = which;
            false
        }
    }
}

/// The accounting of a mount with limits: pages and inode space in use against the maxima.
///
/// Shapes: a count of 4 KiB pages, and inode space in bytes as Linux 6.6+ keeps it
/// (`free_ispace`): `nr_inodes * BOGO_INODE_SIZE` (1024) in all, each inode and each
/// further hard link taking 1024, each extended attribute `40 + name + value` bytes
/// (`simple_xattr_space`). Each is a pool of per-thread shards (see the module doc): a
/// reservation or release far from the limit writes only the calling thread's shard line;
/// near it, it takes the pool's lock, and fails only on the exact count, so concurrent
/// writers near the limit get exactly the space there is and never more.
///
/// # References
/// Linux mm/shmem.c `shmem_inode_acct_blocks` (`percpu_counter_limited_add`),
/// `shmem_reserve_inode`, `shmem_statfs` (`percpu_counter_sum`); tmpfs(5) `size`,
/// `nr_inodes`.
#[derive(Debug)]
pub(crate) struct Limits {
    /// Inodes the mount may hold (`u64::MAX`: unlimited). Immutable.
    max_inodes: u64,
    /// Pages.
    blocks: Pool,
    /// Inode space in bytes: `max_inodes * BOGO_INODE_SIZE` in all (`u64::MAX`: unlimited).
    ispace: Pool,
    /// The loom models' mutation. Immutable.
    mutations: Mutations,
}

/// Shards per pool: twice the machine's parallelism rounded up to a power of two, at most 64
/// (so that threads numbered round-robin rarely share one).
fn nr_shards() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .saturating_mul(2)
            .next_power_of_two()
            .min(64)
    })
}

impl Limits {
    /// Limits of `max_blocks` pages and `max_inodes` inodes (`u64::MAX`: no limit), with
    /// [`nr_shards`] shards and Linux's batch (`percpu_counter_batch`: `max(32, 2 x CPUs)`
    /// pages, as many inodes' worth of inode space).
    pub(crate) fn new(max_blocks: u64, max_inodes: u64) -> Limits {
        let n = nr_shards();
        let batch = (2 * n as u64).max(32);
        Self::with_shards(max_blocks, max_inodes, n, batch)
    }

    /// [`new`](Self::new) with `nshards` shards (a power of two) and a batch of `batch`
    /// pages (and `batch` inodes' worth of inode space): the loom models' small pools.
    pub(crate) fn with_shards(
        max_blocks: u64,
        max_inodes: u64,
        nshards: usize,
        batch: u64,
    ) -> Limits {
        Limits {
            max_inodes,
            blocks: Pool::new(max_blocks, nshards, batch),
            ispace: Pool::new(
                max_inodes.saturating_mul(BOGO_INODE_SIZE),
                nshards,
                batch.saturating_mul(BOGO_INODE_SIZE),
            ),
            mutations: Mutations {
                #[cfg(uvfs_loom)]
                m: None,
            },
        }
    }

    /// [`with_shards`](Self::with_shards) with `mutation` in force (the loom models).
    #[cfg(uvfs_loom)]
    pub(crate) fn mutant(
        max_blocks: u64,
        max_inodes: u64,
        nshards: usize,
        batch: u64,
        mutation: Mutation,
    ) -> Limits {
        let mut l = Self::with_shards(max_blocks, max_inodes, nshards, batch);
        l.mutations.m = Some(mutation);
        l
    }

    /// Reserves `n` pages.
    ///
    /// # Errors
    /// `ENOSPC` when fewer than `n` are free; nothing is reserved then.
    pub(crate) fn reserve_blocks(&self, n: u64) -> Result<()> {
        // Nothing to take (a create's 0 pages): not even the shard's number.
        if n == 0 {
            return Ok(());
        }
        self.reserve_blocks_on(this_shard(), n)
    }

    /// [`reserve_blocks`](Self::reserve_blocks) on shard `shard` (any `usize`).
    pub(crate) fn reserve_blocks_on(&self, shard: usize, n: u64) -> Result<()> {
        self.blocks.take(shard, n, self.mutations)
    }

    /// Gives back `n` pages reserved earlier.
    pub(crate) fn release_blocks(&self, n: u64) {
        if n > 0 {
            self.release_blocks_on(this_shard(), n);
        }
    }

    /// [`release_blocks`](Self::release_blocks) on shard `shard`.
    pub(crate) fn release_blocks_on(&self, shard: usize, n: u64) {
        self.blocks.give(shard, n);
    }

    /// Reserves one inode (`BOGO_INODE_SIZE` bytes of inode space, `shmem_reserve_inode`).
    ///
    /// # Errors
    /// `ENOSPC` when the inode space is used up.
    pub(crate) fn reserve_inode(&self) -> Result<()> {
        self.reserve_inode_on(this_shard())
    }

    /// [`reserve_inode`](Self::reserve_inode) on shard `shard`.
    pub(crate) fn reserve_inode_on(&self, shard: usize) -> Result<()> {
        self.ispace.take(shard, BOGO_INODE_SIZE, self.mutations)
    }

    /// Gives back one inode.
    pub(crate) fn release_inode(&self) {
        self.release_inode_on(this_shard());
    }

    /// [`release_inode`](Self::release_inode) on shard `shard`.
    pub(crate) fn release_inode_on(&self, shard: usize) {
        self.ispace.give(shard, BOGO_INODE_SIZE);
    }

    /// Reserves `n` bytes of inode space (an extended attribute: `simple_xattr_space`).
    ///
    /// # Errors
    /// `ENOSPC` when fewer than `n` bytes are free; nothing is reserved then.
    pub(crate) fn reserve_ispace(&self, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.ispace.take(this_shard(), n, self.mutations)
    }

    /// Gives back `n` bytes of inode space reserved earlier.
    pub(crate) fn release_ispace(&self, n: u64) {
        if n > 0 {
            self.ispace.give(this_shard(), n);
        }
    }

    /// Whether inode space is limited (`nr_inodes` set): Linux charges extended attributes
    /// only then (`sbinfo->max_inodes` in `shmem_xattr_handler_set`).
    pub(crate) fn limits_inodes(&self) -> bool {
        self.max_inodes != u64::MAX
    }

    /// Pages the mount may hold (`u64::MAX`: unlimited).
    pub(crate) fn max_blocks(&self) -> u64 {
        self.blocks.max
    }

    /// `(max_blocks, used_blocks, max_inodes, used_inodes)`, summed over the shards under
    /// each pool's lock (`statfs`; exact when no reservation runs concurrently);
    /// `used_inodes` is `max_inodes` less the whole inodes' worth of free inode space
    /// (`shmem_statfs`: `f_ffree = free_ispace / BOGO_INODE_SIZE`).
    pub(crate) fn counts(&self) -> (u64, u64, u64, u64) {
        let free_ispace = self.ispace.max.saturating_sub(self.ispace.used());
        (
            self.blocks.max,
            self.blocks.used(),
            self.max_inodes,
            self.max_inodes
                .saturating_sub(free_ispace / BOGO_INODE_SIZE),
        )
    }
}
