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
//! child Dentry --d_link (RcuCell)--> DLink --Arc--> parent Dentry
//! File --Arc--> Dentry;   FsStruct (root, cwd) --Arc--> Mount, Dentry
//! ```
//! Parent and child point at each other while the child is linked; `unlink`/`rmdir`/`rename`
//! remove the downward edge, and dropping the `SuperBlock` (with its last `Mount`) clears
//! every directory (`SuperBlock::drop`), so no cycle outlives the file system; a directory
//! invalidated (hostfs) or removed has its cached subtree emptied too (`shrink_children`),
//! so none outlives its directory either. A dentry read under an epoch `Guard`
//! stays valid until the guard unpins, because the slot and skip-list nodes and links that
//! hold it are retired through the epoch too (the RCU-walk rule: a path walk takes no reference).

use crate::dcache::DirChild;
use crate::inode::{Inode, BOGO_DIRENT_SIZE};
use crate::sync::epoch::Guard;
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
    pub(crate) parent: Option<Arc<Dentry>>,
    /// The name in the parent.
    pub(crate) name: Name,
    /// Position in the parent's `getdents` order (stable while the entry exists).
    pub(crate) cookie: u64,
}

/// A name bound to an inode.
///
/// # Refcounting
/// `Arc<Dentry>`: held by the parent's directory index while linked, by open `File`s, by task
/// cwd/root, and by child dentries (their parent link). Path walks hold none (see module doc).
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
    /// and does not replace the link: a new link would clone the parent's `Arc` (a locked
    /// add on the parent's count line, which every thread creating or removing names in
    /// that directory writes) and retire the old one through the epoch (a locked subtract
    /// there later); measured 2026-12-07 on the Intel Xeon VM with `creat-clo`: those two
    /// of the four writes of the parent's count per loop cost (see docs/audit.md).
    d_unhashed: AtomicBool,
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
    /// A dentry for `inode` linked as `name` under `parent`.
    pub(crate) fn new(
        inode: Arc<Inode>,
        parent: Option<Arc<Dentry>>,
        name: Name,
        cookie: u64,
    ) -> Dentry {
        let d_flags = if inode.needs_revalidate() {
            DCACHE_OP_REVALIDATE
        } else {
            0
        };
        let d_dir = inode.is_dir().then(|| Box::new(Dir::new()));
        if let Some(p) = &parent {
            audit_parent_count(p);
        }
        Dentry {
            d_dir,
            d_inode: inode,
            d_flags: AtomicU32::new(d_flags),
            d_unhashed: AtomicBool::new(false),
            d_link: RcuCell::new(DLink {
                parent,
                name,
                cookie,
            }),
        }
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
        self.link(guard).parent.as_ref()
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
    /// last strong reference, `Arc::into_inner`), so readers' epoch rules are unchanged.
    fn drop(&mut self) {
        let mut parent = self.d_link.get_mut().parent.take();
        while let Some(p) = parent {
            audit_parent_count(&p);
            match Arc::into_inner(p) {
                Some(mut d) => parent = d.d_link.get_mut().parent.take(),
                None => break,
            }
        }
    }
}

/// In an audit build, records the write of `parent`'s reference count that a child's link
/// makes (the caller's clone when the link is made, its drop when the child goes): `Arc`'s
/// count is not one of `crate::sync`'s atomics, so the conflict audit did not see it, and
/// it is the line every thread creating and removing names in one directory writes (issue
/// 16, docs/audit.md). The count is on the line before the dentry (`Dentry` is
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

/// Marks a removed dentry unhashed (`__d_drop`); its link keeps parent and name for `..`
/// and getcwd. Context: the remover holds the lock under which the dentry left its
/// directory's index (its name's bucket, or every bucket).
pub(crate) fn unhash(d: &Dentry) {
    // Release: pairs with `is_unhashed`'s Acquire. A plain store, no locked instruction:
    // the flag is only ever set, and its byte is written by nothing else.
    d.d_unhashed.store(true, Ordering::Release);
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
            below.iter().for_each(|d| unhash(d));
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
    /// Dentry` releases the chain in a loop. A chain of 100,000 dropped on a 256 KiB stack.
    #[test]
    fn a_deep_chain_of_dentries_drops_on_a_small_stack() {
        let mnt = crate::tmpfs::mount(Default::default());
        let inode = mnt.mnt_root.d_inode.clone();
        let mut leaf = mnt.mnt_root.clone();
        for i in 0..100_000u64 {
            let name: Name = Arc::from(&b"n"[..]);
            leaf = Arc::new(Dentry::new(inode.clone(), Some(leaf), name, i + 2));
        }
        drop(mnt);
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || drop(leaf))
            .unwrap()
            .join()
            .unwrap();
    }
}
