//! `Dir`: the dentry cache's index of a directory's children, looked up without locks and
//! listed in stable order; for tmpfs, whose dentry cache is complete, the directory itself.
//!
//! Linux analogue: the dcache hash + RCU-walk for lookup (fs/dcache.c `__d_lookup_rcu`), and
//! the tmpfs offset map for `getdents` (fs/libfs.c `simple_offset_*`, 6.6+).
//!
//! The entries live in a lock-free skip list (`crossbeam_skiplist::base::SkipList`, reclaimed
//! through the same crossbeam-epoch collector as the rest of uvfs): lookups search it under
//! an epoch guard and write nothing (no reference count on the node, unlike `SkipMap`'s
//! entries). Writers (create, unlink, rename) hold `inner`, so that the cookie index and the
//! skip list change together; a mutation allocates one node and copies no other entry, so
//! creating a file in a shared directory does not touch the cache lines of its neighbours.
//!
//! Replacing an entry (`rename` over an existing name) is not one skip-list operation: the
//! old node is unlinked (or, in the skip list's own replacing insert, marked removed) before
//! the new one is linked, and a lookup in between would miss a name that rename(2) says is
//! never missing. Such writers bracket the change with `replace_seq` (odd while it runs); a
//! lockless lookup that misses re-checks the count and retries if it moved (Linux:
//! `d_lookup`'s retry on `rename_lock`). A lookup reads the count once more than before, from
//! a line only replacing renames write; a miss reads it twice.
//!
//! # Invariants
//! - `inner.by_cookie` holds exactly the entries of `children`, keyed by their
//!   `DirChild::cookie`;
//!   cookies are never reused within a directory, so a `getdents` cursor (a cookie) never
//!   sees an entry twice or skips one that stayed linked.
//!
//! `Dir` is generic over its entries (`E`: a `Dentry`, which holds its directory's `Dir`;
//! dentry.rs names `Dir<Dentry>` `dentry::Dir`), so this module, below dentry.rs, imports
//! nothing of it.
//!
//! Lock order: see inode.rs.

#[cfg(feature = "audit")]
use crate::sync::audit::{PlMutex as Mutex, PlMutexGuard as MutexGuard};
use crate::sync::epoch::{self, Guard};
use crate::sync::padded::CacheLine;
use crate::sync::seqcount::SeqCount;
use crossbeam_skiplist::base::SkipList;
#[cfg(not(feature = "audit"))]
use parking_lot::{Mutex, MutexGuard};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

/// A directory entry name (1 ..= 255 bytes, no `/`, no NUL, not `.` or `..`).
pub(crate) type Name = Arc<[u8]>;

/// What a directory's index needs of its entries.
pub(crate) trait DirChild: Send + Sync + 'static {
    /// The entry's `getdents` cookie in its directory (stable while it is linked there),
    /// read under `guard`.
    fn cookie(&self, guard: &Guard) -> u64;
}

/// The name -> entry index, searched without locks.
type Children<E> = SkipList<Name, Arc<E>>;

/// The first `getdents` cookie of a real entry (0 is `.`, 1 is `..`).
pub(crate) const FIRST_COOKIE: u64 = 2;

/// A directory's contents: its entries `E` by name and by cookie.
pub(crate) struct Dir<E> {
    /// Written only under `inner`; read by anyone pinned.
    children: Children<E>,
    /// Odd while a writer replaces an entry of `children` (see the module doc). Written only
    /// under `inner`, by `DirLocked::replace_begin`/`replace_end`; on its own cache line so
    /// that lookups do not share one with the lock.
    replace_seq: CacheLine<SeqCount>,
    inner: Mutex<DirInner<E>>,
}

impl<E> fmt::Debug for Dir<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dir")
            .field("entries", &self.children.len())
            .finish()
    }
}

/// Writer-side state. Protected by `Dir::inner`.
pub(crate) struct DirInner<E> {
    pub(crate) by_cookie: BTreeMap<u64, Arc<E>>,
    next_cookie: u64,
    /// Set by `rmdir`: no entry may be created any more (`IS_DEADDIR`, `S_DEAD`).
    pub(crate) dead: bool,
}

impl<E: DirChild> Dir<E> {
    /// An empty directory.
    pub(crate) fn new() -> Dir<E> {
        Dir {
            children: SkipList::new(epoch::default_collector().clone()),
            replace_seq: CacheLine(SeqCount::new()),
            inner: Mutex::new(DirInner {
                by_cookie: BTreeMap::new(),
                next_cookie: FIRST_COOKIE,
                dead: false,
            }),
        }
    }

    /// Lockless lookup: the dentry named `name`, valid while `guard` is pinned. Never misses
    /// a name that is being replaced (it waits for the replacement instead).
    ///
    /// Context: the caller does not hold this directory's lock (a replacement it is making
    /// would make a miss spin forever); under the lock use `DirLocked::get`.
    #[inline]
    pub(crate) fn lookup<'g>(&'g self, name: &[u8], guard: &'g Guard) -> Option<&'g Arc<E>> {
        loop {
            let seq = self.replace_seq.read_begin();
            if let Some(e) = self.children.get(name, guard) {
                // A hit is a valid answer: the entry was linked during the search.
                return Some(e.value());
            }
            if !self.replace_seq.read_retry(seq) {
                return None;
            }
        }
    }

    /// The number of entries (without `.` and `..`).
    ///
    /// Exact whenever no writer is inside a change: every writer holds `inner`, and the
    /// skip list counts an entry in (out) within the `insert` (`remove`) call that links
    /// (unlinks) it; a replacing insert counts the old node out and the new one in. A reader
    /// racing a writer sees the count before or after that change (one atomic word, which
    /// the skip list writes anyway, so deriving the size from it adds no write).
    pub(crate) fn len(&self) -> usize {
        self.children.len()
    }

    /// Locks the writer side.
    pub(crate) fn lock(&self) -> DirLocked<'_, E> {
        let inner = self.inner.lock();
        DirLocked {
            dir: self,
            inner,
            guard: epoch::pin(),
            replacing: false,
        }
    }
}

/// A locked directory.
pub(crate) struct DirLocked<'a, E> {
    dir: &'a Dir<E>,
    pub(crate) inner: MutexGuard<'a, DirInner<E>>,
    guard: Guard,
    /// Inside `replace_begin` .. `replace_end` (`replace_seq` is odd).
    replacing: bool,
}

impl<E: DirChild> DirLocked<'_, E> {
    /// The entry named `name` (stable while locked).
    pub(crate) fn get(&self, name: &[u8]) -> Option<&Arc<E>> {
        // Not `Dir::lookup`: no replacement but our own can be in progress, and a miss
        // during it must not wait for ourselves.
        self.dir.children.get(name, &self.guard).map(|e| e.value())
    }

    /// Whether the directory has no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.by_cookie.is_empty()
    }

    /// The cookie the next new entry will get: every entry linked now has a smaller one
    /// (the end of a listing that starts now, `readdir.rs`).
    pub(crate) fn peek_next_cookie(&self) -> u64 {
        self.inner.next_cookie
    }

    /// Reserves the next cookie for a new entry.
    pub(crate) fn next_cookie(&mut self) -> u64 {
        let c = self.inner.next_cookie;
        self.inner.next_cookie += 1;
        c
    }

    /// Inserts `d` (whose link already names `name` and holds `cookie`), replacing and
    /// returning any entry of the same name; a lockless lookup sees the old or the new
    /// entry, never neither (the skip list's replacing insert marks the old node removed
    /// before linking the new one, so the replacement is bracketed by `replace_seq`).
    pub(crate) fn insert(&mut self, name: Name, d: Arc<E>, cookie: u64) -> Option<Arc<E>> {
        let old = self.get(&name).cloned();
        let outer = self.replacing;
        if let Some(o) = &old {
            self.replace_begin();
            let c = o.cookie(&self.guard);
            self.inner.by_cookie.remove(&c);
        }
        self.inner.by_cookie.insert(cookie, d.clone());
        self.dir
            .children
            .insert(name, d, &self.guard)
            .release(&self.guard);
        if !outer {
            self.replace_end();
        }
        old
    }

    /// Replaces the entry named `name` (which exists) by `d` at getdents position `cookie`,
    /// leaving the cookie index of the replaced entry alone: for `RENAME_EXCHANGE`, where the
    /// two dentries swap names and cookies (Linux `simple_offset_rename_exchange`), so each
    /// name keeps its place in a listing. Context: inside `replace_begin` .. `replace_end`.
    pub(crate) fn exchange_entry(&mut self, name: Name, d: Arc<E>, cookie: u64) {
        debug_assert!(self.replacing, "caller brackets the exchange");
        debug_assert!(self.get(&name).is_some(), "an exchange replaces an entry");
        self.inner.by_cookie.insert(cookie, d.clone());
        self.dir
            .children
            .insert(name, d, &self.guard)
            .release(&self.guard);
    }

    /// Removes and returns the entry named `name`.
    pub(crate) fn remove(&mut self, name: &[u8]) -> Option<Arc<E>> {
        let e = self.dir.children.remove(name, &self.guard)?;
        let d = e.value().clone();
        e.release(&self.guard);
        let c = d.cookie(&self.guard);
        self.inner.by_cookie.remove(&c);
        Some(d)
    }

    /// Removes every entry (namespace teardown); returns them.
    ///
    /// `SkipList::clear` only marks the nodes of its last batch (up to 100) removed: they
    /// stay linked, each holding its `Arc<Dentry>`, until some later search unlinks them,
    /// and a torn-down directory is never searched again. A child's link holds its parent,
    /// so those nodes kept the whole tree alive (issue 15 item 2). The search from the front
    /// below unlinks every marked node at every level (each level is walked to its end, as
    /// no entry is left unmarked), which gives each node's last reference to the epoch.
    pub(crate) fn clear(&mut self) -> Vec<Arc<E>> {
        self.dir.children.clear(&mut self.guard);
        let left = self
            .dir
            .children
            .lower_bound::<[u8]>(Bound::Unbounded, &self.guard);
        debug_assert!(left.is_none(), "no entry is inserted under the lock");
        std::mem::take(&mut self.inner.by_cookie)
            .into_values()
            .collect()
    }
}

impl<E> DirLocked<'_, E> {
    /// Starts replacing an entry: until `replace_end` (or the unlock), lockless lookups that
    /// miss wait and retry, so the name being replaced is never seen missing.
    pub(crate) fn replace_begin(&mut self) {
        if !self.replacing {
            self.replacing = true;
            self.dir.replace_seq.write_begin();
        }
    }

    /// Ends a replacement started by `replace_begin`.
    pub(crate) fn replace_end(&mut self) {
        if self.replacing {
            self.replacing = false;
            self.dir.replace_seq.write_end();
        }
    }
}

impl<E> Drop for DirLocked<'_, E> {
    fn drop(&mut self) {
        // An early return (an error found after `replace_begin`) or a panic must not leave
        // the count odd: missing lookups would spin forever.
        self.replace_end();
    }
}
