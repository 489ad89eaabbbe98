//! `Dentry`: a name of an inode in its parent directory; the tree of dentries is the
//! namespace of a tmpfs (which, as in Linux, lives entirely in the dentry cache).
//!
//! Linux analogue: `struct dentry` (include/linux/dcache.h), fs/dcache.c.
//!
//! # Reference graph and release order
//! ```text
//! SuperBlock --Arc--> root Dentry --d_dir--> buckets' slot nodes, skip lists, cookie maps
//!     --Arc--> child
//! Dentry --Arc--> Inode
//! child Dentry --d_link (RcuCell)--> DLink --ParentLink--> parent's Dir::child_refs
//! directory Dentry --Arc (its children's hold, until child_refs is released)--> itself
//! File --Arc--> Dentry;   FsStruct (root, cwd) --Arc--> Mount, Dentry
//! ```
//! Parent and child point at each other while the child is linked; `unlink`/`rmdir`/`rename`
//! remove the downward edge, and dropping the `SuperBlock` (with its last `Mount`) clears
//! every directory (`SuperBlock::drop`), so no cycle outlives the file system; a directory
//! invalidated (hostfs) or removed has its cached subtree emptied too (`shrink_children`),
//! so none outlives its directory either. A child's link counts on its parent's sharded
//! child count, not on the parent's `Arc` ([`ParentLink`]); a directory holds itself for its
//! children until it leaves its tree ([`unhash`], or its super block's end) and the last
//! link to it is gone. A dentry read under an epoch `Guard`
//! stays valid until the guard unpins, because the slot and skip-list nodes and links that
//! hold it are retired through the epoch too (the RCU-walk rule: a path walk takes no reference).

use crate::dcache::DirChild;
use crate::inode::{Inode, BOGO_DIRENT_SIZE};
use crate::sync::epoch::Guard;
use crate::sync::pcp_ref::{this_shard, TryGet, REF};
use crate::sync::plain::{AtomicBool, AtomicU32, Ordering};
use crate::sync::rcu::RcuCell;
use std::fmt;
use std::sync::Arc;

pub(crate) use crate::dcache::Name;

/// A directory's index of its child dentries (dcache.rs).
pub(crate) type Dir = crate::dcache::Dir<Dentry>;
/// A locked [`Dir`].
pub(crate) type DirLocked<'a> = crate::dcache::DirLocked<'a, Dentry>;

/// Where a dentry is linked: its parent, its name there and its `getdents` cookie.
/// Replaced whole by `rename` (Linux: `d_parent`, `d_name`, the offset-map index); not by
/// an unlink, which only marks the dentry ([`Dentry::is_unhashed`]).
#[derive(Debug)]
pub(crate) struct DLink {
    /// The parent directory; `None` for a file system root.
    pub(crate) parent: Option<ParentLink>,
    /// The name in the parent.
    pub(crate) name: Name,
    /// Position in the parent's `getdents` order (stable while the entry exists).
    pub(crate) cookie: u64,
}

/// A child's hold on its parent directory: a reference on the parent's sharded child count
/// (`Dir::child_refs`, a [`PcpCount`]), so that creating and freeing entries of one
/// directory from several threads writes only each thread's own shard line, not the
/// directory's `Arc` count (Linux's `d_alloc` takes `dget_dlock(parent)`, a write of the
/// parent's lockref line; measured 2026-12-07 on the Intel Xeon VM, `creat-clo` at 2
/// threads: that line cost 10-13% and was the one line the conflict audit found both threads
/// writing in every round).
///
/// # Protocol (sync/pcp_ref.rs's, with the directory as the counted object)
/// A directory's dentry holds one strong count of its own `Arc` for all its children's
/// links ([`Dentry::new_arc`]). While the directory is in its tree the count is attached: a
/// link takes and gives back a reference on the calling thread's shard. When the directory
/// leaves its tree ([`unhash`]; the root when its super block ends) the count is detached
/// and, one epoch grace period later, settled; the put (or the settle) that then finds no
/// reference left releases the hold, exactly once. A link made while the count refuses
/// (detached and released, or a summer counting: only a directory out of its tree, which
/// file systems whose directories are never marked dead may still create in) holds a plain
/// `Arc` instead. So the parent stays allocated while any link to it exists, as with an
/// `Arc`, and [`Deref`](std::ops::Deref) gives it as one (its strong count is at least the
/// hold's while the link lives), for the callers that clone it.
pub(crate) struct ParentLink {
    /// The parent. Counted (a real `Arc`) only when `sharded` is false; otherwise a view
    /// of the pointer made without a count, never dropped (`ManuallyDrop`).
    parent: std::mem::ManuallyDrop<Arc<Dentry>>,
    /// The link holds a reference on the parent's `child_refs`, not on its `Arc`.
    sharded: bool,
}

impl ParentLink {
    /// A link's hold on `parent` (a directory, held by the caller).
    pub(crate) fn new(parent: &Arc<Dentry>) -> ParentLink {
        if let Some(dir) = parent.dir() {
            // Not pinned: `parent` is allocated while the caller holds it (its own `Arc`, or
            // the uncounted view inside a live link, whose count keeps the directory), and
            // a take that races a settle is decided by their Dekker pair (`try_get_on`'s
            // SYNC check), not by a grace period; an undo puts under the count's lock.
            let (got, release) = dir.child_refs.try_get_on(this_shard(), REF);
            if got == TryGet::Got {
                // SAFETY: a pointer of a live `Arc` (the caller's); the view is never
                // dropped, so it takes no count and gives none back.
                let view = unsafe { Arc::from_raw(Arc::as_ptr(parent)) };
                return ParentLink {
                    parent: std::mem::ManuallyDrop::new(view),
                    sharded: true,
                };
            }
            if release {
                // Our undo was the last put of the detached count: the hold goes. No link
                // counts on the directory (else the sum was not zero), so the caller's
                // `parent` is a counted `Arc`, which keeps the dentry allocated past this.
                // SAFETY: the hold's strong count (`Dentry::new_arc`), released once.
                unsafe { Arc::decrement_strong_count(Arc::as_ptr(parent)) };
            }
        }
        audit_parent_count(parent);
        ParentLink {
            parent: std::mem::ManuallyDrop::new(Arc::clone(parent)),
            sharded: false,
        }
    }

    /// Gives the hold back. Returns the `Arc` whose drop is the caller's (the parent's, or
    /// its children's hold when this was the last link of a detached directory), so that
    /// `Dentry::drop` can free a chain of parents without recursion.
    fn release(self) -> Option<Arc<Dentry>> {
        let mut me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again.
        unsafe { me.give_back() }
    }

    /// [`release`](Self::release)'s work, for it and for `drop`.
    ///
    /// # Safety
    /// Called once; `self` is not used afterwards (its `parent` may have been moved out).
    unsafe fn give_back(&mut self) -> Option<Arc<Dentry>> {
        if !self.sharded {
            audit_parent_count(&self.parent);
            // SAFETY: the caller's contract: `parent` is not used again.
            return Some(unsafe { std::mem::ManuallyDrop::take(&mut self.parent) });
        }
        let p = Arc::as_ptr(&self.parent);
        let dir = self.parent.dir().expect("a parent link names a directory");
        // Pinned from before the put until it returns (`PcpCount::put_on`).
        let _g = crate::sync::epoch::pin();
        if dir.child_refs.put_on(this_shard(), REF) {
            // SAFETY: our put was the last of the detached count: the hold's strong count
            // (`Dentry::new_arc`) is ours to give back, once.
            return Some(unsafe { Arc::from_raw(p) });
        }
        None
    }
}

impl std::ops::Deref for ParentLink {
    type Target = Arc<Dentry>;
    #[inline]
    fn deref(&self) -> &Arc<Dentry> {
        &self.parent
    }
}

impl Drop for ParentLink {
    fn drop(&mut self) {
        // SAFETY: dropped once, never used after.
        drop(unsafe { self.give_back() });
    }
}

impl fmt::Debug for ParentLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParentLink")
            .field("sharded", &self.sharded)
            .finish_non_exhaustive()
    }
}

/// A name bound to an inode.
///
/// # Refcounting
/// `Arc<Dentry>`: held by the parent's directory index while linked, by open `File`s, by task
/// cwd/root, and, for a directory, by itself for its children's links ([`ParentLink`]), which
/// count on its sharded `Dir::child_refs` instead. Path walks hold none (see module doc).
///
/// # Invariants
/// `d_inode` never changes (tmpfs keeps no negative dentries). `d_dir` is `Some` exactly
/// when `d_inode` is a directory, and never changes either.
///
/// # Layout
/// Aligned to a cache line so that the `Arc` counts, written by every open and close of the
/// file, sit on the line before the fields path walks read (`d_inode`, `d_link`, `d_dir`).
/// Linux 6.10 moved the dentry's lockref off the line RCU-walk reads: +55% on 20-way stat
/// of one file.
#[repr(C, align(64))]
pub struct Dentry {
    pub(crate) d_inode: Arc<Inode>,
    pub(crate) d_link: RcuCell<DLink>,
    /// `DCACHE_*` flags: [`DCACHE_OP_REVALIDATE`] (immutable) when the inode's file system
    /// can change it behind the VFS's back, [`DCACHE_MOUNTED`] while a mount covers it. On
    /// the line the walk reads anyway, so testing it there costs no read of the inode's
    /// written lines (Linux tests `d_flags`, not the inode, in `lookup_fast`). Written only
    /// by mount and umount (under the namespace lock).
    pub(crate) d_flags: AtomicU32,
    /// Removed from its parent (`d_unhashed`): unlinked, rmdir'd, replaced by rename, or an
    /// `O_TMPFILE` never linked. Set once ([`unhash`]), never cleared: a removed dentry is
    /// never linked again (a later link of its inode makes a new one). A flag beside the
    /// link, not a field of it, so that an unlink writes one byte of the dentry's own line
    /// and does not replace the link: a new link would take another reference on the
    /// parent (then a clone of its `Arc`, a locked add on the line every thread creating or
    /// removing names in that directory wrote; now a reference on the thread's shard of
    /// its child count, `ParentLink`) and retire the old one through the epoch (its put
    /// later), and allocate; measured 2026-12-07 on the Intel Xeon VM with `creat-clo`:
    /// those two of the four writes of the parent's count per loop cost (docs/audit.md).
    d_unhashed: AtomicBool,
    /// Deleted as Linux's `d_unlinked` says of it (what `/proc/PID/fd/N` marks
    /// ` (deleted)`): unlinked, rmdir'd or replaced by rename through uvfs, an `O_TMPFILE`
    /// never linked, or dropped by `d_invalidate` because its name no longer holds it on
    /// the file system ([`mark_deleted`]). Narrower than `d_unhashed`, which also marks
    /// entries uvfs merely stopped caching (below an invalidated directory, `d_add`),
    /// whose names Linux keeps hashed. Set once, never cleared.
    d_deleted: AtomicBool,
    /// A directory's children: the dentry cache's index of them and their `getdents`
    /// cookies (dcache.rs); `None` for anything else. Immutable after creation (the index
    /// itself is lock-free). In the dentry, as Linux's `d_children`, not the inode: a walk
    /// reads it from the line it has read already, and a dentry's children link to it. On
    /// tmpfs a directory has exactly one dentry (no hard links; a bind mount shares it), so
    /// this is the directory; on hostfs a host directory reached by two paths (a host bind
    /// mount, a rename seen after the fact) has a dentry, and a cache, per path.
    d_dir: Option<Box<Dir>>,
}

/// `DCACHE_OP_REVALIDATE`: walks must revalidate this entry (`InodeOps::revalidate`).
pub(crate) const DCACHE_OP_REVALIDATE: u32 = 1 << 0;
/// `DCACHE_MOUNTED`: a mount covers (or once covered) this dentry in some namespace; a walk
/// reaching it looks in its own namespace's mount table (`d_mountpoint`). Never cleared:
/// namespaces that share dentries (a detached mount given to `Task::init`) may each mount on
/// one, and a stale bit costs only a table lookup.
pub(crate) const DCACHE_MOUNTED: u32 = 1 << 1;

#[cfg(not(uvfs_loom))]
mod layout {
    use super::*;
    use crate::sync::padded::CACHE_LINE;
    use std::mem::size_of;
    // What a walk reads of a dentry (inode, link, flags, directory index) is one line.
    crate::const_assert!(size_of::<Dentry>() == CACHE_LINE);
}

impl fmt::Debug for Dentry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = crate::sync::epoch::pin();
        let l = self.d_link.load(&g);
        f.debug_struct("Dentry")
            .field("name", &String::from_utf8_lossy(&l.name))
            .field("inode", &self.d_inode)
            .finish()
    }
}

impl Dentry {
    /// A dentry for `inode` linked as `name` under `parent` (its link holds `parent`,
    /// [`ParentLink`]). A directory's dentry also holds itself for its children's links
    /// (see [`ParentLink`]) until it leaves its tree ([`unhash`], or its super block's end,
    /// [`detach_children`]) and its last child's link is gone.
    pub(crate) fn new_arc(
        inode: Arc<Inode>,
        parent: Option<&Arc<Dentry>>,
        name: Name,
        cookie: u64,
    ) -> Arc<Dentry> {
        let d_flags = if inode.needs_revalidate() {
            DCACHE_OP_REVALIDATE
        } else {
            0
        };
        let d_dir = inode.is_dir().then(|| Box::new(Dir::new()));
        let d = Arc::new(Dentry {
            d_dir,
            d_inode: inode,
            d_flags: AtomicU32::new(d_flags),
            d_unhashed: AtomicBool::new(false),
            d_deleted: AtomicBool::new(false),
            d_link: RcuCell::new(DLink {
                parent: parent.map(ParentLink::new),
                name,
                cookie,
            }),
        });
        if d.d_dir.is_some() {
            // The children's hold: one strong count, given back (`decrement_strong_count`,
            // `from_raw`) by the release of `Dir::child_refs` (`ParentLink`).
            let _hold = Arc::into_raw(Arc::clone(&d));
        }
        d
    }

    /// Whether walks must revalidate this entry (`DCACHE_OP_REVALIDATE`).
    #[inline]
    pub(crate) fn needs_revalidate(&self) -> bool {
        // Relaxed: the bit is immutable after creation.
        self.d_flags.load(Ordering::Relaxed) & DCACHE_OP_REVALIDATE != 0
    }

    /// Whether a mount covers this dentry (`d_mountpoint`).
    #[inline]
    pub(crate) fn is_mounted(&self) -> bool {
        // Relaxed: a hint; the mount table (published with Release, loaded with Acquire)
        // is the truth. A walk that misses a concurrent mount's bit sees the tree as it
        // was before the mount, which a walk racing a mount may.
        self.d_flags.load(Ordering::Relaxed) & DCACHE_MOUNTED != 0
    }

    /// Sets [`DCACHE_MOUNTED`] (mount, under the namespace lock).
    pub(crate) fn set_mounted(&self) {
        // Relaxed: see `is_mounted`.
        self.d_flags.fetch_or(DCACHE_MOUNTED, Ordering::Relaxed);
    }

    /// Whether this dentry was removed from its parent (`d_unhashed`): see
    /// [`unhash`].
    #[inline]
    pub(crate) fn is_unhashed(&self) -> bool {
        // Acquire: pairs with `unhash`'s Release store, as the link's load paired with its
        // publication when the flag was part of the link; the callers that must not miss
        // a removal (mount's check, getcwd's) hold, or follow, the lock the remover held.
        self.d_unhashed.load(Ordering::Acquire)
    }

    /// Whether this dentry was deleted as Linux's `d_unlinked` says (`d_deleted`).
    pub(crate) fn is_deleted(&self) -> bool {
        // Relaxed: as `mark_deleted`'s store.
        self.d_deleted.load(Ordering::Relaxed)
    }

    /// The inode this dentry names.
    pub fn inode(&self) -> &Arc<Inode> {
        &self.d_inode
    }

    /// The directory's entries, if a directory.
    #[inline]
    pub(crate) fn dir(&self) -> Option<&Dir> {
        self.d_dir.as_deref()
    }

    /// Size in bytes ([`Inode::size`]), with a directory's that of tmpfs: 40 (`.` and `..`)
    /// plus `BOGO_DIRENT_SIZE` per entry, derived from the entry count rather than stored,
    /// so that creating and removing entries writes no size (Linux stores `i_size` and adds
    /// or subtracts 20). A directory whose file system can change behind the VFS's back
    /// (`I_REVALIDATE`) has a cache that may hold only some entries: its size is the file
    /// system's, stored by `set_attrs`.
    #[inline]
    pub fn size(&self) -> u64 {
        match &self.d_dir {
            Some(d) if !self.d_inode.needs_revalidate() => (2 + d.len() as u64) * BOGO_DIRENT_SIZE,
            _ => self.d_inode.size(),
        }
    }

    /// [`Inode::stat_query`] with the size from [`size`](Self::size) (a directory's).
    pub(crate) fn stat_query(&self, query: bool, test_first: bool) -> crate::types::Stat {
        let mut st = self.d_inode.stat_query(query, test_first);
        if self.d_dir.is_some() {
            st.st_size = self.size() as i64;
        }
        st
    }

    /// [`stat_query`](Self::stat_query) marking the ctime queried (`stat`, `fstat`).
    pub(crate) fn stat_marking(&self, test_first: bool) -> crate::types::Stat {
        self.stat_query(true, test_first)
    }

    /// The current link, valid while `guard` is pinned.
    pub(crate) fn link<'g>(&self, guard: &'g Guard) -> &'g DLink {
        self.d_link.load(guard)
    }

    /// The parent, or `None` at a file system root.
    pub(crate) fn parent<'g>(&self, guard: &'g Guard) -> Option<&'g Arc<Dentry>> {
        self.link(guard).parent.as_deref()
    }
}

impl Drop for Dentry {
    /// Releases the parent chain iteratively: a dentry's link holds its parent, so the
    /// last reference to the deepest of a chain of otherwise unreferenced dentries (a
    /// removed or torn-down tree: `..` links of directories nested thousands deep, as a
    /// path past `PATH_MAX` builds) would otherwise drop each parent from inside its
    /// child's drop, one recursion per level (about 0.5 KiB of stack a level in a debug
    /// build: 2048 levels overflow a 1 MiB stack). Here each parent whose last reference
    /// this was is unlinked from its own parent before it is dropped, so the stack stays
    /// flat. The memory is freed exactly when the recursive drop would have freed it (the
    /// last strong reference, `Arc::into_inner`), so readers' epoch rules are unchanged. A
    /// removed directory's hold on itself (`ParentLink`) may be the last reference: then
    /// this runs from the count's release, on the thread of the last child's put or, from
    /// the epoch's deferred settle, on whichever thread collects it.
    fn drop(&mut self) {
        let mut parent = self
            .d_link
            .get_mut()
            .parent
            .take()
            .and_then(ParentLink::release);
        while let Some(p) = parent {
            match Arc::into_inner(p) {
                Some(mut d) => {
                    parent = d
                        .d_link
                        .get_mut()
                        .parent
                        .take()
                        .and_then(ParentLink::release)
                }
                None => break,
            }
        }
    }
}

/// In an audit build, records the write of `parent`'s reference count that a child's link
/// makes when it holds a plain `Arc` (`ParentLink`'s fallback: its clone when the link is
/// made, its drop when the child goes): `Arc`'s count is not one of `crate::sync`'s
/// atomics, so the conflict audit would not see it; until 2026-12-07 every link held one,
/// the line every thread creating and removing names in one directory wrote (issue 16,
/// docs/audit.md). The count is on the line before the dentry (`Dentry` is
/// line-aligned, so `Arc`'s counts fill the line ahead of it).
#[inline]
fn audit_parent_count(parent: &Arc<Dentry>) {
    #[cfg(feature = "audit")]
    crate::sync::audit::touch(
        Arc::as_ptr(parent).cast::<u8>().wrapping_sub(64),
        true,
        true,
    );
    #[cfg(not(feature = "audit"))]
    let _ = parent;
}

impl DirChild for Dentry {
    #[inline]
    fn cookie(&self, guard: &Guard) -> u64 {
        self.link(guard).cookie
    }
}

/// Marks `d` deleted (see `Dentry::d_deleted`); the caller unhashes it too
/// ([`d_delete`], or `shrink_children` with what is below it). Linux: the `__d_drop` of
/// `d_delete`, `d_invalidate` and `d_tmpfile`, as `d_unlinked` sees it.
pub(crate) fn mark_deleted(d: &Dentry) {
    // Relaxed: a report (`d_path`'s " (deleted)"), read racily as Linux's `d_unlinked` is;
    // nothing is ordered by it.
    d.d_deleted.store(true, Ordering::Relaxed);
}

/// `d_delete`: `d`'s name is gone (unlinked, rmdir'd, replaced by rename, or an
/// `O_TMPFILE` never named): marked deleted, then unhashed ([`unhash`]'s context).
pub(crate) fn d_delete(d: &Arc<Dentry>) {
    mark_deleted(d);
    unhash(d);
}

/// Marks a removed dentry unhashed (`__d_drop`); its link keeps parent and name for `..`
/// and getcwd. Context: the remover holds the lock under which the dentry left its
/// directory's index (its name's bucket, or every bucket).
pub(crate) fn unhash(d: &Arc<Dentry>) {
    if d.d_dir.is_none() {
        // Release: pairs with `is_unhashed`'s Acquire. A plain store, no locked
        // instruction: the flag is only ever set, and its byte is written by nothing else.
        d.d_unhashed.store(true, Ordering::Release);
        return;
    }
    // A directory leaves its tree once: the first mark detaches its children's count (a
    // second `unhash`, `shrink_children`'s of an entry its caller marked, must not).
    // AcqRel: the Release half as the store above; the swap makes the first mark unique.
    if !d.d_unhashed.swap(true, Ordering::AcqRel) {
        detach_children(d);
    }
}

/// Detaches a directory's children's count (`ParentLink`): it has left its tree, so the
/// count is summed exactly one grace period later, and the hold on the directory goes when
/// no child's link is left. Context: exactly once per directory, from [`unhash`]'s first
/// mark (a second call would queue a second settle, which may find the dentry freed).
fn detach_children(d: &Arc<Dentry>) {
    let Some(dir) = d.dir() else {
        return;
    };
    debug_assert!(
        !dir.child_refs.is_detached(),
        "a directory is detached once"
    );
    dir.child_refs.detach();
    /// The dentry, sent to the epoch's deferred call.
    struct Held(*const Dentry);
    // SAFETY: a pointer to a `Sync` dentry, used only to reach its count and give back its
    // hold (both thread-safe).
    unsafe impl Send for Held {}
    // From the `Arc` (not the `&Dentry`), so the pointer may reach the counts in front of
    // the dentry (`decrement_strong_count`).
    let held = Held(Arc::as_ptr(d));
    let g = crate::sync::epoch::pin();
    let settle = move || {
        let held = held;
        // SAFETY: the hold keeps the dentry allocated until the count releases it, which
        // only this settle or a put after it can do.
        let d = unsafe { &*held.0 };
        if d.dir().is_some_and(|dir| dir.child_refs.settle()) {
            // SAFETY: the settle found no link left: the hold's strong count
            // (`Dentry::new_arc`) is ours to give back, once.
            unsafe { Arc::decrement_strong_count(held.0) };
        }
    };
    // SAFETY: (`defer_unchecked`) the closure reads only the dentry, which stays allocated
    // until the count is released (above), and it is `Send`.
    unsafe { g.defer_unchecked(settle) };
}

/// Unhashes `children` (dentries just taken out of their directory's index) and empties
/// every cached directory below them the same way, so that no entry keeps its parent alive
/// through an index nobody can reach any more (a child's link holds its parent); with
/// `dead`, each of those directories is also marked removed (`S_DEAD`: no entry may be made
/// in it). Linux: `shrink_dcache_parent` as `d_invalidate` and `rmdir` call it. For tmpfs
/// the directories below a removed one are empty; for a file system whose cache may be
/// partial (hostfs), an invalidated or removed directory may still hold cached entries.
///
/// Context: the caller may hold the lock of the directory these came from (an ancestor of
/// every lock taken here: ancestors first, lock order in inode.rs); one lock at a time is
/// taken here, each released before the next. A caller that released that lock has marked
/// `children` unhashed before it did, so that a mount, which checks the mark under the
/// parent's lock, never finds a removed dentry unmarked; below them each directory's
/// entries are marked before its lock is released.
pub(crate) fn shrink_children(children: Vec<Arc<Dentry>>, dead: bool) {
    let mut stack = children;
    while let Some(c) = stack.pop() {
        // Already marked (see below); a no-op then, kept for a caller that has not.
        unhash(&c);
        if let Some(dir) = c.dir() {
            let mut l = dir.lock_all();
            if dead {
                l.set_dead();
            }
            let below = l.clear();
            // Marked under the lock they left under (see `unhash`); `c` itself was, by
            // the caller or by the round that took it out of its own directory.
            below.iter().for_each(unhash);
            drop(l);
            stack.extend(below);
        }
    }
}

#[cfg(all(test, not(uvfs_loom)))]
mod tests {
    use super::*;

    /// Bug: the last reference to the deepest dentry of an unreferenced chain dropped its
    /// parents recursively (`Arc<Dentry>` -> `DLink` -> parent `Arc<Dentry>` ...): 2048
    /// levels (posix_dir's `regression_getcwd_past_path_max`) took about 1 MiB of a debug
    /// build's stack, run on whichever thread collected the epoch's garbage. Fix: `Drop for
    /// Dentry` releases the chain in a loop. A chain of 20,000 directories, each removed
    /// (`unhash`) as soon as made, dropped on a 256 KiB stack, which also collects the
    /// epoch's garbage there (the removed directories' counts settle and give back their
    /// holds, `ParentLink`): every dentry of the chain, and the root, is freed (the inode
    /// they all name is held by nothing else at the end).
    #[test]
    fn a_deep_chain_of_dentries_drops_on_a_small_stack() {
        let mnt = crate::tmpfs::mount(Default::default());
        let inode = mnt.mnt_root.d_inode.clone();
        let mut leaf = mnt.mnt_root.clone();
        for i in 0..20_000u64 {
            let name: Name = Arc::from(&b"n"[..]);
            let d = Dentry::new_arc(inode.clone(), Some(&leaf), name, i + 2);
            unhash(&d);
            leaf = d;
        }
        drop(mnt);
        // The settles this thread deferred go to the global queue (a thread's own bag
        // is handed on when full, at a flush or at its exit).
        crate::sync::epoch::pin().flush();
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || {
                drop(leaf);
                assert!(
                    flush_until(|| Arc::strong_count(&inode) == 1),
                    "{} dentries alive",
                    Arc::strong_count(&inode) - 1
                );
            })
            .unwrap()
            .join()
            .unwrap();
    }

    /// [`crate::sync::flush_deferred_until`] for up to 10 s.
    fn flush_until(done: impl Fn() -> bool) -> bool {
        crate::sync::flush_deferred_until(done, std::time::Duration::from_secs(10))
    }

    /// A link made under a directory whose child count has been released (removed, settled,
    /// no child left: what hostfs or the FUSE client may still cache entries under) holds a
    /// plain `Arc` (`ParentLink`'s fallback): the directory stays allocated while the child
    /// lives, and both are freed after.
    #[test]
    fn a_link_under_a_released_directory_holds_an_arc() {
        let mnt = crate::tmpfs::mount(Default::default());
        let inode = mnt.mnt_root.d_inode.clone();
        let dir = Dentry::new_arc(inode.clone(), Some(&mnt.mnt_root), Arc::from(&b"d"[..]), 2);
        let count = || dir.dir().map(|d| d.child_refs.is_detached());
        unhash(&dir);
        assert_eq!(count(), Some(true));
        // The settle runs and releases the hold: only our `Arc` is left.
        crate::sync::epoch::pin().flush();
        assert!(
            flush_until(|| Arc::strong_count(&dir) == 1),
            "hold not released"
        );
        let child = Dentry::new_arc(inode.clone(), Some(&dir), Arc::from(&b"c"[..]), 2);
        let g = crate::sync::epoch::pin();
        let link = child.link(&g).parent.as_ref().expect("linked");
        assert!(
            !link.sharded,
            "a released count refuses: the link holds an Arc"
        );
        assert_eq!(Arc::strong_count(&dir), 2);
        drop(g);
        let weak = Arc::downgrade(&dir);
        drop(dir);
        assert!(
            weak.upgrade().is_some(),
            "freed while its child's link holds it"
        );
        unhash(&child);
        drop(child);
        drop(mnt);
        crate::sync::epoch::pin().flush();
        assert!(
            flush_until(|| weak.strong_count() == 0),
            "not freed after its child"
        );
    }
}
