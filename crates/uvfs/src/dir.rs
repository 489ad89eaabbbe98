//! `Dir`: a tmpfs directory's entries, looked up without locks and listed in stable order.
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
//! # Invariants
//! - `inner.by_cookie` holds exactly the entries of `children`, keyed by their `DLink::cookie`;
//!   cookies are never reused within a directory, so a `getdents` cursor (a cookie) never
//!   sees an entry twice or skips one that stayed linked.
//!
//! Lock order: see inode.rs.

use crate::dentry::{Dentry, Name};
use crate::sync::epoch::{self, Guard};
use crossbeam_skiplist::base::SkipList;
use parking_lot::{Mutex, MutexGuard};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The name -> dentry index, searched without locks.
type Children = SkipList<Name, Arc<Dentry>>;

/// The first `getdents` cookie of a real entry (0 is `.`, 1 is `..`).
pub(crate) const FIRST_COOKIE: u64 = 2;

/// A directory's contents.
pub(crate) struct Dir {
    /// Written only under `inner`; read by anyone pinned.
    children: Children,
    inner: Mutex<DirInner>,
}

impl fmt::Debug for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dir")
            .field("entries", &self.children.len())
            .finish()
    }
}

/// Writer-side state. Protected by `Dir::inner`.
pub(crate) struct DirInner {
    pub(crate) by_cookie: BTreeMap<u64, Arc<Dentry>>,
    next_cookie: u64,
    /// Set by `rmdir`: no entry may be created any more (`IS_DEADDIR`, `S_DEAD`).
    pub(crate) dead: bool,
}

impl Dir {
    pub(crate) fn new() -> Dir {
        Dir {
            children: SkipList::new(epoch::default_collector().clone()),
            inner: Mutex::new(DirInner {
                by_cookie: BTreeMap::new(),
                next_cookie: FIRST_COOKIE,
                dead: false,
            }),
        }
    }

    /// Lockless lookup: the dentry named `name`, valid while `guard` is pinned.
    #[inline]
    pub(crate) fn lookup<'g>(&'g self, name: &[u8], guard: &'g Guard) -> Option<&'g Arc<Dentry>> {
        self.children.get(name, guard).map(|e| e.value())
    }

    /// Locks the writer side.
    pub(crate) fn lock(&self) -> DirLocked<'_> {
        let inner = self.inner.lock();
        DirLocked {
            dir: self,
            inner,
            guard: epoch::pin(),
        }
    }
}

/// A locked directory.
pub(crate) struct DirLocked<'a> {
    dir: &'a Dir,
    pub(crate) inner: MutexGuard<'a, DirInner>,
    guard: Guard,
}

impl DirLocked<'_> {
    /// The entry named `name` (stable while locked).
    pub(crate) fn get(&self, name: &[u8]) -> Option<&Arc<Dentry>> {
        self.dir.lookup(name, &self.guard)
    }

    /// Whether the directory has no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.by_cookie.is_empty()
    }

    /// Reserves the next cookie for a new entry.
    pub(crate) fn next_cookie(&mut self) -> u64 {
        let c = self.inner.next_cookie;
        self.inner.next_cookie += 1;
        c
    }

    /// Inserts `d` (whose link already names `name` and holds `cookie`), atomically
    /// replacing and returning any entry of the same name (a lookup sees the old or the new
    /// entry, never neither).
    pub(crate) fn insert(
        &mut self,
        name: Name,
        d: Arc<Dentry>,
        cookie: u64,
    ) -> Option<Arc<Dentry>> {
        let old = self.get(&name).cloned();
        if let Some(o) = &old {
            let c = o.link(&self.guard).cookie;
            self.inner.by_cookie.remove(&c);
        }
        self.inner.by_cookie.insert(cookie, d.clone());
        self.dir
            .children
            .insert(name, d, &self.guard)
            .release(&self.guard);
        old
    }

    /// Removes and returns the entry named `name`.
    pub(crate) fn remove(&mut self, name: &[u8]) -> Option<Arc<Dentry>> {
        let e = self.dir.children.remove(name, &self.guard)?;
        let d = e.value().clone();
        e.release(&self.guard);
        let c = d.link(&self.guard).cookie;
        self.inner.by_cookie.remove(&c);
        Some(d)
    }

    /// Removes every entry (namespace teardown); returns them.
    pub(crate) fn clear(&mut self) -> Vec<Arc<Dentry>> {
        self.dir.children.clear(&mut self.guard);
        std::mem::take(&mut self.inner.by_cookie)
            .into_values()
            .collect()
    }
}
