//! `Dir`: a tmpfs directory's entries, looked up without locks and listed in stable order.
//!
//! Linux analogue: the dcache hash + RCU-walk for lookup (fs/dcache.c `__d_lookup_rcu`), and
//! the tmpfs offset map for `getdents` (fs/libfs.c `simple_offset_*`, 6.6+).
//!
//! Lookups load the published children map under an epoch guard and write nothing. Writers
//! (create, unlink, rename) hold `inner`, edit the authoritative persistent map (`imbl`,
//! O(log n) path copy per change, O(1) clone) and publish a clone of it; the previous
//! version is retired through the epoch.
//!
//! # Invariants
//! - `children` (published) equals `inner.map` whenever `inner` is unlocked.
//! - `inner.by_cookie` holds exactly the entries of `inner.map`, keyed by their `DLink::cookie`;
//!   cookies are never reused within a directory, so a `getdents` cursor (a cookie) never
//!   sees an entry twice or skips one that stayed linked.
//!
//! Lock order: see inode.rs.

use crate::dentry::{Dentry, Name};
use crate::sync::epoch::Guard;
use crate::sync::plain::Mutex;
use crate::sync::plock;
use crate::sync::rcu::RcuCell;
use std::collections::BTreeMap;
use std::sync::{Arc, MutexGuard};

/// The published name -> dentry map.
pub(crate) type Children = imbl::HashMap<Name, Arc<Dentry>>;

/// The first `getdents` cookie of a real entry (0 is `.`, 1 is `..`).
pub(crate) const FIRST_COOKIE: u64 = 2;

/// A directory's contents.
pub(crate) struct Dir {
    children: RcuCell<Children>,
    inner: Mutex<DirInner>,
}

/// Writer-side state. Protected by `Dir::inner`.
pub(crate) struct DirInner {
    map: Children,
    pub(crate) by_cookie: BTreeMap<u64, Arc<Dentry>>,
    next_cookie: u64,
    /// Set by `rmdir`: no entry may be created any more (`IS_DEADDIR`, `S_DEAD`).
    pub(crate) dead: bool,
}

impl Dir {
    pub(crate) fn new() -> Dir {
        Dir {
            children: RcuCell::new(Children::new()),
            inner: Mutex::new(DirInner {
                map: Children::new(),
                by_cookie: BTreeMap::new(),
                next_cookie: FIRST_COOKIE,
                dead: false,
            }),
        }
    }

    /// Lockless lookup: the dentry named `name`, valid while `guard` is pinned.
    #[inline]
    pub(crate) fn lookup<'g>(&self, name: &[u8], guard: &'g Guard) -> Option<&'g Arc<Dentry>> {
        self.children.load(guard).get(name)
    }

    /// Locks the writer side.
    pub(crate) fn lock(&self) -> DirLocked<'_> {
        DirLocked {
            dir: self,
            inner: plock(&self.inner),
            dirty: false,
        }
    }
}

/// A locked directory; changes are published when it is dropped.
pub(crate) struct DirLocked<'a> {
    dir: &'a Dir,
    pub(crate) inner: MutexGuard<'a, DirInner>,
    dirty: bool,
}

impl DirLocked<'_> {
    /// The entry named `name` (authoritative, under the lock).
    pub(crate) fn get(&self, name: &[u8]) -> Option<&Arc<Dentry>> {
        self.inner.map.get(name)
    }

    /// Whether the directory has no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.map.is_empty()
    }

    /// Reserves the next cookie for a new entry.
    pub(crate) fn next_cookie(&mut self) -> u64 {
        let c = self.inner.next_cookie;
        self.inner.next_cookie += 1;
        c
    }

    /// Inserts `d` (whose link already names `name` and holds a fresh cookie), replacing and
    /// returning any entry of the same name.
    pub(crate) fn insert(
        &mut self,
        name: Name,
        d: Arc<Dentry>,
        cookie: u64,
    ) -> Option<Arc<Dentry>> {
        self.dirty = true;
        let inner = &mut *self.inner;
        let old = inner.map.insert(name, d.clone());
        if let Some(o) = &old {
            let g = crate::sync::epoch::pin();
            inner.by_cookie.remove(&o.link(&g).cookie);
        }
        inner.by_cookie.insert(cookie, d);
        old
    }

    /// Removes and returns the entry named `name`.
    pub(crate) fn remove(&mut self, name: &[u8]) -> Option<Arc<Dentry>> {
        let inner = &mut *self.inner;
        let old = inner.map.remove(name)?;
        self.dirty = true;
        let g = crate::sync::epoch::pin();
        inner.by_cookie.remove(&old.link(&g).cookie);
        Some(old)
    }

    /// Removes every entry (namespace teardown); returns them.
    pub(crate) fn clear(&mut self) -> Vec<Arc<Dentry>> {
        self.dirty = true;
        let inner = &mut *self.inner;
        inner.map = Children::new();
        std::mem::take(&mut inner.by_cookie).into_values().collect()
    }

    /// Publishes pending changes now (also done on drop).
    pub(crate) fn publish(&mut self) {
        if self.dirty {
            self.dirty = false;
            let g = crate::sync::epoch::pin();
            self.dir.children.replace(self.inner.map.clone(), &g);
        }
    }
}

impl Drop for DirLocked<'_> {
    fn drop(&mut self) {
        self.publish();
    }
}
