//! `Mount`, `Path` and `MntNamespace`: a mounted tree, a (mount, dentry) position, and a
//! namespace's tree of mounts.
//!
//! Linux analogue: `struct vfsmount`/`struct mount` (fs/mount.h), `struct path`,
//! `struct mnt_namespace`, the mount hash (fs/namespace.c: `lookup_mnt`, `attach_mnt`,
//! `umount_tree`, `mntput_no_expire`).
//!
//! # Counting
//! Open files and task roots and cwds hold their mount with a `MntRef`, a per-thread
//! sharded count (`PcpCount`): an open and a close write only the calling thread's shard
//! line, as Linux's per-CPU `mnt_count`. While a mount is attached its namespace holds it;
//! unmounting detaches it, waits one epoch grace period and sums the shards; the mount (and,
//! with its last mount, the super block and its tree) goes when the sum reaches zero,
//! possibly at the last close of a file on a lazily unmounted mount.
//!
//! # The table
//! A namespace's mounts are a `MountTable` published in an [`RcuCell`] and replaced whole
//! (copy on write) under the namespace lock: walks read it without locks and only when they
//! reach a dentry marked `DCACHE_MOUNTED` or go up from a mount's root; mount and umount
//! are the rare path (Linux: the mount hash under RCU and `mount_lock`).
//!
//! Lock order: `MntNamespace::ns_lock` -> a mount's `PcpCount` lock; `mnt_keep` is a leaf.

use crate::dentry::Dentry;
use crate::super_block::SuperBlock;
use crate::sync::epoch::{self, Guard};
use crate::sync::pcp_ref::{this_shard, PcpCount, PcpCounted, PcpRef, TryGet, REF, WRITER};
use crate::sync::plain::{AtomicBool, AtomicU64, Mutex, Ordering};
use crate::sync::plock;
use crate::sync::rcu::RcuCell;
use crate::{Errno, Result};
use bitflags::bitflags;
use std::collections::HashMap;
use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Weak};

bitflags! {
    /// `mount(2)` flags (`MS_*`, include/uapi/linux/mount.h): the per-mount ones
    /// ([`MountFlags::PER_MOUNT`]) and the operation selectors uvfs understands.
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct MountFlags: u64 {
        /// `MS_RDONLY`: writes through this mount are `EROFS`.
        const RDONLY = 1;
        /// `MS_NOSUID`: exec through this mount ignores set-user-ID and set-group-ID bits.
        const NOSUID = 2;
        /// `MS_NODEV`: device nodes on this mount cannot be opened (`EACCES`).
        const NODEV = 4;
        /// `MS_NOEXEC`: files on this mount cannot be executed (`EACCES`).
        const NOEXEC = 8;
        /// `MS_REMOUNT`: change an existing mount.
        const REMOUNT = 32;
        /// `MS_BIND`: a bind mount (or, with `REMOUNT`, change only per-mount flags).
        const BIND = 4096;
        /// `MS_REC`: with `BIND`, the submounts too.
        const REC = 16384;
    }
}

impl MountFlags {
    /// The flags a mount carries (`MNT_READONLY`, `MNT_NOSUID`, `MNT_NODEV`, `MNT_NOEXEC`).
    pub const PER_MOUNT: MountFlags = MountFlags::RDONLY
        .union(MountFlags::NOSUID)
        .union(MountFlags::NODEV)
        .union(MountFlags::NOEXEC);
}

bitflags! {
    /// `umount2(2)` flags.
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct UmountFlags: u32 {
        /// `MNT_FORCE`: abort pending requests (meaningful for network and FUSE file
        /// systems; uvfs's have none, so it changes nothing, as on Linux's tmpfs).
        const FORCE = 1;
        /// `MNT_DETACH`: lazy unmount: detach now, free when no longer busy.
        const DETACH = 2;
        /// `MNT_EXPIRE`: mark for expiry; unmount on the second call if unused meanwhile.
        const EXPIRE = 4;
        /// `UMOUNT_NOFOLLOW`: do not follow a final symlink of the target.
        const NOFOLLOW = 8;
    }
}

/// Most mounts in one namespace (`fs.mount-max`'s default, Documentation/admin-guide/
/// sysctl/fs.rst): a mount past it is `ENOSPC`.
pub const MOUNT_MAX: usize = 100_000;

/// Namespace ids (the first is 1).
static NEXT_NS_ID: AtomicU64 = AtomicU64::new(1);

/// Mount ids (`mnt_id`, unique for the life of the process; the first is 1).
static NEXT_MNT_ID: AtomicU64 = AtomicU64::new(1);

/// A mounted file system tree: a super block seen from a root dentry, with per-mount flags.
///
/// # Refcounting
/// Memory: `Arc<Mount>`, held by the embedder (what [`tmpfs::mount`](crate::tmpfs::mount)
/// returns), by the namespace's table while attached, and by the mount itself
/// (`mnt_keep`) from attach until its last `MntRef` is gone after it was detached.
/// Users (open files, task roots and cwds): `MntRef`s on the sharded count.
pub struct Mount {
    pub(crate) mnt_sb: Arc<SuperBlock>,
    pub(crate) mnt_root: Arc<Dentry>,
    /// Unique id (`stx_mnt_id`, mountinfo's first field). Immutable.
    pub(crate) mnt_id: u64,
    /// Users, and the per-mount flags (`MountFlags::PER_MOUNT` bits) in its state word.
    pub(crate) mnt_count: PcpCount,
    /// The mount's hold on itself from attach until released (see Refcounting).
    mnt_keep: Mutex<Option<Arc<Mount>>>,
    /// The namespace it is (or was) attached in.
    mnt_ns: Mutex<Weak<MntNamespace>>,
    /// That namespace's id (0 before attach); set once at attach, read by every walk from a
    /// descriptor (`Task::start`).
    mnt_ns_id: AtomicU64,
    /// Whether it was ever attached (a mount is attached at most once).
    mnt_used: AtomicBool,
    /// `MNT_EXPIRE`'s mark: set by the first `umount2(MNT_EXPIRE)`, cleared by any use
    /// (Linux clears it in `mntput`; uvfs clears it when the mount is walked into by a
    /// reference-taking call). Written only by umount and by opens that see it set.
    pub(crate) mnt_expiry_mark: AtomicBool,
    /// The namespace's `fs.protected_hardlinks` (see [`Mount::set_protected_hardlinks`]).
    /// Atomic; written by `set_protected_hardlinks`, read by `linkat`.
    protected_hardlinks: AtomicBool,
}

/// A counted reference to a [`Mount`] (Linux: `mntget`/`mntput`): one write to the calling
/// thread's shard line to take, one to drop.
pub(crate) type MntRef = PcpRef<Mount>;

// SAFETY: a `Mount` attached in a namespace is held by its table and by `mnt_keep`, and
// `mnt_keep` is cleared only by `release`, which the count calls once, after the mount was
// detached and the last reference put; a `MntRef` is made only by `PcpRef::try_get` on an
// attached or still-referenced mount (`Mount::get_ref`) or by cloning one.
unsafe impl PcpCounted for Mount {
    fn pcp(&self) -> &PcpCount {
        &self.mnt_count
    }

    unsafe fn release(this: NonNull<Self>) {
        // SAFETY: allocated until the hold taken here is dropped (trait contract); the
        // borrow ends with this statement.
        let keep = plock(unsafe { &this.as_ref().mnt_keep }).take();
        drop(keep);
    }
}

impl fmt::Debug for Mount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mount")
            .field("id", &self.mnt_id)
            .field("sb", &self.mnt_sb)
            .field("flags", &self.flags())
            .finish()
    }
}

impl Mount {
    /// The super block.
    pub fn super_block(&self) -> &Arc<SuperBlock> {
        &self.mnt_sb
    }

    /// The root dentry.
    pub fn root(&self) -> &Arc<Dentry> {
        &self.mnt_root
    }

    /// The mount id (unique in the process; `stx_mnt_id`).
    pub fn id(&self) -> u64 {
        self.mnt_id
    }

    /// The per-mount flags ([`MountFlags::PER_MOUNT`] bits).
    pub fn flags(&self) -> MountFlags {
        MountFlags::from_bits_truncate(self.mnt_count.flags())
    }

    /// Whether writes through this mount are refused (`__mnt_is_readonly`).
    #[inline]
    pub(crate) fn is_readonly(&self) -> bool {
        self.mnt_count.flags() & MountFlags::RDONLY.bits() != 0
    }

    /// `mnt_want_write` for a call that changes the namespace or an inode's metadata.
    ///
    /// # Errors
    /// `EROFS` on a read-only mount.
    #[inline]
    pub(crate) fn want_write(&self) -> Result<()> {
        if self.is_readonly() {
            return Err(Errno::EROFS);
        }
        Ok(())
    }

    /// Sets this namespace's `fs.protected_hardlinks`: with it on (the default, and most
    /// distributions' setting), `linkat` lets a caller who is neither the file's owner nor
    /// root link only a regular file that is neither set-user-ID nor
    /// set-group-ID-and-group-executable and that it may read and write (`EPERM`
    /// otherwise); off (Linux's built-in default), anyone who may write the new parent
    /// links any file but a directory. Applies to the calls that start after it (as
    /// writing the sysctl does). Read from the task's root mount.
    ///
    /// # References
    /// Documentation/admin-guide/sysctl/fs.rst (`protected_hardlinks`); Linux
    /// `may_linkat`, `safe_hardlink_source`.
    pub fn set_protected_hardlinks(&self, on: bool) {
        // Relaxed: an independent setting, as Linux's plain read of the sysctl in
        // `may_linkat`; it orders no other memory.
        self.protected_hardlinks.store(on, Ordering::Relaxed);
    }

    /// This namespace's `fs.protected_hardlinks` (see
    /// [`set_protected_hardlinks`](Self::set_protected_hardlinks)).
    pub fn protected_hardlinks(&self) -> bool {
        // Relaxed: see `set_protected_hardlinks`.
        self.protected_hardlinks.load(Ordering::Relaxed)
    }

    /// A mount of super block `sb` with root directory `root` (inode of `sb`): what a file
    /// system's `mount` returns (Linux `vfs_create_mount` after `fill_super`), not yet
    /// attached anywhere.
    pub(crate) fn with_root(sb: Arc<SuperBlock>, root: Arc<crate::inode::Inode>) -> Arc<Mount> {
        let root = Dentry::new_arc(root, None, Arc::from(&b"/"[..]), 0);
        sb.set_root(&root);
        Mount::new(sb, root, MountFlags::empty())
    }

    /// A new mount of `sb` seen from `root` (`clone_mnt`).
    pub(crate) fn new(sb: Arc<SuperBlock>, root: Arc<Dentry>, flags: MountFlags) -> Arc<Mount> {
        Arc::new(Mount {
            mnt_sb: sb,
            mnt_root: root,
            // Relaxed: a unique id, ordered with nothing; mounting is the rare path.
            mnt_id: NEXT_MNT_ID.fetch_add(1, Ordering::Relaxed),
            mnt_count: PcpCount::new((flags & MountFlags::PER_MOUNT).bits()),
            mnt_keep: Mutex::new(None),
            mnt_ns: Mutex::new(Weak::new()),
            mnt_ns_id: AtomicU64::new(0),
            mnt_used: AtomicBool::new(false),
            mnt_expiry_mark: AtomicBool::new(false),
            protected_hardlinks: AtomicBool::new(true),
        })
    }

    /// A reference on this mount, reached under `guard` through a namespace table, a live
    /// `MntRef` or an `Arc` the caller holds (`legitimize_mnt`); waits out a concurrent
    /// umount's busy check.
    ///
    /// # Errors
    /// `EROFS` when `units` asks for a writer on a read-only mount; `ENOENT` when the mount
    /// was unmounted and released since the caller found it (possible only for a mount held
    /// by an `Arc` across an unpinned gap, as `AtDir::Dentry`'s).
    #[inline]
    pub(crate) fn get_ref(&self, units: u64, guard: &Guard) -> Result<MntRef> {
        // Relaxed: MNT_EXPIRE's mark is advisory (a use since the last expiry attempt);
        // written only when set, so an open writes nothing here in the common case.
        if self.mnt_expiry_mark.load(Ordering::Relaxed) {
            self.mnt_expiry_mark.store(false, Ordering::Relaxed);
        }
        // SAFETY: `self` was reached under `guard`, through a table that held it, a live
        // reference, or an `Arc` the caller holds (the caller's contract, stated above), so
        // it is allocated until the guard unpins; a released one refuses (`Gone`).
        match unsafe { MntRef::try_get(NonNull::from(self), units, guard) } {
            Ok(r) => Ok(r),
            Err(e) => self.get_ref_slow(units, guard, e),
        }
    }

    /// [`get_ref`](Self::get_ref) after a refusal: `EROFS`, or wait out the count's
    /// summer and try again.
    #[cold]
    fn get_ref_slow(&self, units: u64, guard: &Guard, mut e: TryGet) -> Result<MntRef> {
        loop {
            match e {
                TryGet::ReadOnly => return Err(Errno::EROFS),
                // Unmounted and released since the caller found it (a dentry's mount looked
                // up before an unpinned gap, `AtDir::Dentry`): the start is gone.
                TryGet::Gone => return Err(Errno::ENOENT),
                // A umount's busy check or a read-only switch is counting: it ends soon
                // (module doc of sync/pcp_ref.rs).
                TryGet::Retry | TryGet::Got => std::thread::yield_now(),
            }
            // SAFETY: as in `get_ref`.
            match unsafe { MntRef::try_get(NonNull::from(self), units, guard) } {
                Ok(r) => return Ok(r),
                Err(next) => e = next,
            }
        }
    }

    /// `mnt_get_write_access`: a write count for an open for writing, given back by
    /// [`put_write_access`](Self::put_write_access). The caller holds a reference.
    ///
    /// # Errors
    /// `EROFS` on a read-only mount.
    pub(crate) fn get_write_access(&self) -> Result<()> {
        loop {
            match self.mnt_count.try_get_on(this_shard(), WRITER) {
                // Undoing a writer never releases: the caller's reference is left.
                (TryGet::Got, _) => return Ok(()),
                (TryGet::ReadOnly, _) => return Err(Errno::EROFS),
                // The caller holds a reference, so the mount is not released; kept total.
                (TryGet::Gone, _) => return Err(Errno::ENOENT),
                // A switch to read-only is counting writers: it ends soon.
                (TryGet::Retry, _) => std::thread::yield_now(),
            }
        }
    }

    /// Marks this mount attached in `ns`, holding itself (see Refcounting).
    ///
    /// # Errors
    /// `EBUSY` when it was attached before (a mount is attached once; bind it instead).
    fn attach_to(self: &Arc<Mount>, ns: &Arc<MntNamespace>) -> Result<()> {
        if !self.claim() {
            return Err(Errno::EBUSY);
        }
        self.wire(ns);
        Ok(())
    }

    /// Claims the mount's one attach; false when it was claimed before.
    fn claim(&self) -> bool {
        // Relaxed: the namespace lock (or the single owner at namespace creation) orders
        // attaches; the swap only detects a second one.
        !self.mnt_used.swap(true, Ordering::Relaxed)
    }

    /// Makes a claimed mount part of `ns` (its namespace link and its hold on itself).
    fn wire(self: &Arc<Mount>, ns: &Arc<MntNamespace>) {
        *plock(&self.mnt_ns) = Arc::downgrade(ns);
        // Relaxed: published to other threads with the table (Release) or the task that
        // makes the namespace.
        self.mnt_ns_id.store(ns.id, Ordering::Relaxed);
        *plock(&self.mnt_keep) = Some(self.clone());
        let root = &self.mnt_root.d_inode;
        if root.needs_revalidate() || root.permission_asks_fs() {
            // Relaxed: a walk that misses it (racing this mount) walks as before: pinned
            // across the file system's calls, correct, only not leaving (`may_block`).
            ns.may_block.store(true, Ordering::Relaxed);
        }
    }

    /// Whether this mount was ever attached (a mount is attached once).
    pub(crate) fn was_attached(&self) -> bool {
        // Relaxed: see `attach_to`.
        self.mnt_used.load(Ordering::Relaxed)
    }

    /// The id of the namespace this mount was attached in (0: never attached).
    #[inline]
    pub(crate) fn mnt_ns_id(&self) -> u64 {
        // Relaxed: set once before the mount is reachable (see `attach_to`).
        self.mnt_ns_id.load(Ordering::Relaxed)
    }

    /// The namespace this mount is attached in, if it still is.
    pub(crate) fn namespace(&self) -> Option<Arc<MntNamespace>> {
        if self.mnt_count.is_detached() {
            return None;
        }
        plock(&self.mnt_ns).upgrade()
    }
}

/// A position in the namespace: a mount and a dentry in it (`struct path`).
///
/// Holds a reference on the mount (`MntRef`) and on the dentry.
#[derive(Clone, Debug)]
pub struct Path {
    /// The mount.
    pub(crate) mnt: MntRef,
    /// The dentry.
    pub(crate) dentry: Arc<Dentry>,
}

impl Path {
    /// The mount.
    pub fn mount(&self) -> &Mount {
        &self.mnt
    }

    /// The dentry.
    pub fn dentry(&self) -> &Arc<Dentry> {
        &self.dentry
    }
}

/// Where a mount is attached: its parent mount and the dentry it covers there.
#[derive(Clone, Debug)]
pub(crate) struct MountPoint {
    pub(crate) parent: Arc<Mount>,
    pub(crate) dentry: Arc<Dentry>,
}

/// Key of a (parent mount, mount point) pair: the two addresses (stable while the table
/// holds both).
fn key(parent: &Mount, dentry: &Dentry) -> (usize, usize) {
    (
        parent as *const Mount as usize,
        dentry as *const Dentry as usize,
    )
}

/// Whether `d` is `anc` or below it in one file system's tree (`is_subdir`).
fn is_under(d: &Arc<Dentry>, anc: &Arc<Dentry>, g: &Guard) -> bool {
    let mut cur = d;
    loop {
        if Arc::ptr_eq(cur, anc) {
            return true;
        }
        match cur.parent(g) {
            Some(p) => cur = p,
            None => return false,
        }
    }
}

/// A namespace's mounts, published whole (see the module doc).
#[derive(Clone, Default, Debug)]
pub(crate) struct MountTable {
    /// (parent mount, mount point) -> the mount on it (Linux: the mount hash).
    children: HashMap<(usize, usize), Arc<Mount>>,
    /// Mount address -> where it is attached (absent for the namespace's root).
    parents: HashMap<usize, MountPoint>,
    /// Mount point dentry address -> how many mounts cover it in this namespace.
    points: HashMap<usize, usize>,
    /// Every mount, parents before children (mountinfo's order).
    list: Vec<Arc<Mount>>,
}

impl MountTable {
    /// The mount on `dentry` seen through `parent` (`lookup_mnt`).
    #[inline]
    pub(crate) fn lookup(&self, parent: &Mount, dentry: &Dentry) -> Option<&Arc<Mount>> {
        self.children.get(&key(parent, dentry))
    }

    /// Where `m` is attached; `None` for the namespace's root or a detached mount.
    pub(crate) fn parent(&self, m: &Mount) -> Option<&MountPoint> {
        self.parents.get(&(m as *const Mount as usize))
    }

    /// Whether `d` is a mount point in this namespace (`is_local_mountpoint`).
    pub(crate) fn is_mountpoint(&self, d: &Dentry) -> bool {
        self.points.contains_key(&(d as *const Dentry as usize))
    }

    /// Whether `m` is attached here.
    fn contains(&self, m: &Mount) -> bool {
        self.arc_of(m).is_some()
    }

    /// The table's `Arc` of `m`, if `m` is attached here.
    pub(crate) fn arc_of(&self, m: &Mount) -> Option<&Arc<Mount>> {
        self.list.iter().find(|x| std::ptr::eq(&***x, m))
    }

    /// `copy_tree` for a recursive bind of `src_d` on `src` as the new mount `new_root`:
    /// a copy of every mount under `src_d` (in `src` and below), each with its mount
    /// point in the copy of its parent, parents first.
    pub(crate) fn copy_under(
        &self,
        src: &Arc<Mount>,
        src_d: &Arc<Dentry>,
        new_root: &Arc<Mount>,
        g: &Guard,
    ) -> Vec<(Arc<Mount>, MountPoint)> {
        let mut copies: Vec<(*const Mount, Arc<Mount>)> =
            vec![(&**src as *const Mount, new_root.clone())];
        let mut out = Vec::new();
        for c in self.subtree(src).into_iter().skip(1) {
            let Some(mp) = self.parent(&c) else { continue };
            let Some(parent_copy) = copies
                .iter()
                .find(|(orig, _)| std::ptr::eq(*orig, &*mp.parent))
                .map(|(_, copy)| copy.clone())
            else {
                continue;
            };
            if Arc::ptr_eq(&mp.parent, src) && !is_under(&mp.dentry, src_d, g) {
                continue;
            }
            let copy = Mount::new(c.mnt_sb.clone(), c.mnt_root.clone(), c.flags());
            copies.push((&*c as *const Mount, copy.clone()));
            out.push((
                copy,
                MountPoint {
                    parent: parent_copy,
                    dentry: mp.dentry.clone(),
                },
            ));
        }
        out
    }

    /// Mounts attached on `m` (directly).
    fn children_of<'t>(&'t self, m: &'t Mount) -> impl Iterator<Item = &'t Arc<Mount>> + 't {
        self.list
            .iter()
            .filter(move |c| self.parent(c).is_some_and(|p| std::ptr::eq(&*p.parent, m)))
    }

    /// `m` and every mount under it, parents first.
    fn subtree(&self, m: &Arc<Mount>) -> Vec<Arc<Mount>> {
        let mut out = vec![m.clone()];
        let mut i = 0;
        while i < out.len() {
            let cur = out[i].clone();
            out.extend(self.children_of(&cur).cloned());
            i += 1;
        }
        out
    }

    /// Adds `m` on `mp`.
    fn insert(&mut self, m: Arc<Mount>, mp: MountPoint) {
        self.children.insert(key(&mp.parent, &mp.dentry), m.clone());
        *self
            .points
            .entry(&*mp.dentry as *const Dentry as usize)
            .or_insert(0) += 1;
        mp.dentry.set_mounted();
        self.parents.insert(&*m as *const Mount as usize, mp);
        self.list.push(m);
    }

    /// Removes `m` (not its submounts).
    fn remove(&mut self, m: &Mount) {
        if let Some(mp) = self.parents.remove(&(m as *const Mount as usize)) {
            self.children.remove(&key(&mp.parent, &mp.dentry));
            let p = &*mp.dentry as *const Dentry as usize;
            if let Some(n) = self.points.get_mut(&p) {
                *n -= 1;
                if *n == 0 {
                    // The dentry's DCACHE_MOUNTED stays: another namespace may still mount on
                    // it (the bit is a hint that sends walks to their own table).
                    self.points.remove(&p);
                }
            }
        }
        self.list.retain(|x| !std::ptr::eq(&**x, m));
    }
}

/// A mount namespace: the tree of mounts its tasks see (`struct mnt_namespace`).
///
/// Held by every task's `FsStruct`; when the last goes, every mount in it is detached (as
/// when the last process of a Linux mount namespace exits).
pub(crate) struct MntNamespace {
    /// Unique id (Linux `mnt_ns->ns.inum`'s role here: telling namespaces apart).
    id: u64,
    /// The published table; replaced under `ns_lock`.
    table: RcuCell<MountTable>,
    /// Serialises changes of `table` (Linux `namespace_sem`).
    ns_lock: Mutex<()>,
    /// The root mount.
    pub(crate) root: Arc<Mount>,
    /// Set (never cleared) when a mount whose file system may block (FUSE, hostfs: its
    /// root revalidates or decides permissions itself) joins: only then may a walk leave
    /// its pin (`namei::Unlazy`); walks of a namespace without one take the shorter way.
    may_block: AtomicBool,
}

impl fmt::Debug for MntNamespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MntNamespace")
            .field("root", &self.root)
            .finish()
    }
}

impl MntNamespace {
    /// The namespace `mnt` is attached in and `mnt`, or a new namespace with `mnt` as its
    /// root: a mount never attached becomes the root itself; one attached before and
    /// detached since is replaced by a fresh mount of the same tree (`copy_tree` of one
    /// mount), returned as the second value.
    pub(crate) fn of(mnt: &Arc<Mount>) -> (Arc<MntNamespace>, Arc<Mount>) {
        if let Some(ns) = mnt.namespace() {
            return (ns, mnt.clone());
        }
        // Claimed first, so that no namespace is ever made around (and, dropped, would
        // detach) a mount another one holds: attached before, or by a racing `Task::init` of
        // the same fresh mount, it is replaced by a copy.
        let root = if mnt.claim() {
            mnt.clone()
        } else {
            let copy = Mount::new(mnt.mnt_sb.clone(), mnt.mnt_root.clone(), mnt.flags());
            copy.claim();
            copy
        };
        let ns = Arc::new(MntNamespace {
            // Relaxed: a unique id; namespaces are made on the rare path.
            id: NEXT_NS_ID.fetch_add(1, Ordering::Relaxed),
            table: RcuCell::new(MountTable {
                list: vec![root.clone()],
                ..Default::default()
            }),
            ns_lock: Mutex::new(()),
            root: root.clone(),
            may_block: AtomicBool::new(false),
        });
        root.wire(&ns);
        (ns, root)
    }

    /// Whether a mount of a file system that may block ever joined (see `may_block`).
    #[inline]
    pub(crate) fn may_block(&self) -> bool {
        // Relaxed: a hint set once; see `Mount::wire`.
        self.may_block.load(Ordering::Relaxed)
    }

    /// The namespace's id.
    #[inline]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The mount a bare dentry of this namespace is in (for [`AtDir::Dentry`]): the first
    /// mount, in mount order, of the dentry's super block whose root is the dentry or one of
    /// its ancestors. One lookup in the common case of a single mount.
    ///
    /// [`AtDir::Dentry`]: crate::AtDir::Dentry
    pub(crate) fn mount_of(&self, d: &Arc<Dentry>, guard: &Guard) -> Option<Arc<Mount>> {
        let t = self.table(guard);
        t.list
            .iter()
            .filter(|m| m.mnt_sb.s_dev == d.d_inode.i_dev)
            .find(|m| {
                let mut cur = d;
                loop {
                    if Arc::ptr_eq(cur, &m.mnt_root) {
                        return true;
                    }
                    match cur.parent(guard) {
                        Some(p) => cur = p,
                        None => return false,
                    }
                }
            })
            .cloned()
    }

    /// The current table, valid while `guard` is pinned.
    #[inline]
    pub(crate) fn table<'g>(&self, guard: &'g Guard) -> &'g MountTable {
        self.table.load(guard)
    }

    /// Attaches `m` on `mp` (`attach_recursive_mnt`), with `extra` mounts (a recursive bind's
    /// copies, each with its mount point) after it.
    ///
    /// # Errors
    /// `EINVAL` when `mp.parent` is no longer attached here; `EBUSY` when a mount was
    /// attached before.
    pub(crate) fn attach(
        self: &Arc<Self>,
        m: Arc<Mount>,
        mp: MountPoint,
        extra: Vec<(Arc<Mount>, MountPoint)>,
        flags: Option<MountFlags>,
    ) -> Result<()> {
        let _l = plock(&self.ns_lock);
        let g = epoch::pin();
        let mut t = self.table(&g).clone();
        if !t.contains(&mp.parent) {
            return Err(Errno::EINVAL);
        }
        // fs.mount-max (Linux's default 100000): more is ENOSPC.
        if t.list.len() + 1 + extra.len() > MOUNT_MAX {
            return Err(Errno::ENOSPC);
        }
        // lock_mount: the mount point's directory lock keeps it from being removed (or
        // renamed) until the new table is published; a removed one is ENOENT.
        let dir = mp.dentry.parent(&g).cloned();
        let _dl = dir.as_ref().and_then(|p| p.dir()).map(|d| d.lock_all());
        if mp.dentry.is_unhashed() {
            return Err(Errno::ENOENT);
        }
        m.attach_to(self)?;
        if let Some(f) = flags {
            // A mount just attached has no files open through it: no writer to refuse.
            m.mnt_count.set_flags(f.bits());
        }
        t.insert(m, mp);
        for (c, cmp) in extra {
            if c.attach_to(self).is_ok() {
                t.insert(c, cmp);
            }
        }
        self.table.replace(t, &g);
        Ok(())
    }

    /// Detaches `m` (`umount_tree`): with `lazy`, `m` and every mount under it; without,
    /// `m` alone, refused while it has submounts or users (`EBUSY`). The mounts go when
    /// their last users do.
    ///
    /// # Errors
    /// `EINVAL` when `m` is not attached here or is the namespace's root; `EBUSY`.
    pub(crate) fn umount(&self, m: &Arc<Mount>, lazy: bool, expire: bool) -> Result<()> {
        if !lazy && !epoch::is_pinned() {
            // Cwds and roots replaced just before (a `chdir` out of the mount) are dropped
            // after a grace period; let those pending go first, so that they do not count as
            // users (Linux drops them at once).
            crate::sync::rcu::synchronize();
        }
        let gone = {
            let _l = plock(&self.ns_lock);
            let g = epoch::pin();
            let cur = self.table(&g);
            if !cur.contains(m) || cur.parent(m).is_none() {
                return Err(Errno::EINVAL);
            }
            let gone = if lazy {
                cur.subtree(m)
            } else {
                if cur.children_of(m).next().is_some() || m.mnt_count.busy_check(0) {
                    return Err(Errno::EBUSY);
                }
                // Relaxed: the mark is read and written under `ns_lock` (and cleared by
                // users, which only makes the next expiry attempt fail again).
                if expire && !m.mnt_expiry_mark.swap(true, Ordering::Relaxed) {
                    m.mnt_count.end_sync();
                    return Err(Errno::EAGAIN);
                }
                vec![m.clone()]
            };
            let mut t = cur.clone();
            for x in gone.iter().rev() {
                t.remove(x);
            }
            self.table.replace(t, &g);
            for x in &gone {
                x.mnt_count.detach();
            }
            gone
        };
        settle(gone);
        Ok(())
    }

    /// The mounts visible from `root` (a task's root), parents first.
    pub(crate) fn list_under(
        &self,
        root: &Path,
        guard: &Guard,
    ) -> Vec<(Arc<Mount>, Option<MountPoint>)> {
        let t = self.table(guard);
        let mut out = Vec::new();
        // The mount of the root and everything under it, as mountinfo shows.
        let start = t
            .list
            .iter()
            .find(|m| std::ptr::eq(&***m, &*root.mnt))
            .cloned();
        if let Some(s) = start {
            for m in t.subtree(&s) {
                let mp = t.parent(&m).cloned();
                out.push((m, mp));
            }
        }
        out
    }
}

impl Drop for MntNamespace {
    fn drop(&mut self) {
        // Every mount leaves: detached at once, gone with its last user.
        let g = epoch::pin();
        let all = self.table(&g).list.clone();
        drop(g);
        for m in &all {
            m.mnt_count.detach();
        }
        settle(all);
    }
}

/// After one grace period (every walk and put that may have seen the mounts attached has
/// finished), takes the exact count of each detached mount and releases those unused.
fn settle(mounts: Vec<Arc<Mount>>) {
    let finish = move || {
        for m in &mounts {
            if m.mnt_count.settle() {
                // SAFETY: the count says the last reference is gone (once); `m` keeps
                // the memory allocated through the call.
                unsafe { Mount::release(NonNull::from(&**m)) };
            }
        }
    };
    // Under loom every model thread shares one epoch participant: never wait on it there.
    if cfg!(uvfs_loom) || epoch::is_pinned() {
        // Cannot wait for a grace period from inside one: let the epoch run it.
        epoch::pin().defer(finish);
    } else {
        crate::sync::rcu::synchronize();
        finish();
    }
}

/// `follow_mount` helper for the walk: the mount on `(mnt, d)`, if `d` is marked mounted.
#[inline]
pub(crate) fn mounted_on<'g>(
    table: &'g MountTable,
    mnt: &Mount,
    d: &Dentry,
) -> Option<&'g Arc<Mount>> {
    if d.is_mounted() {
        table.lookup(mnt, d)
    } else {
        None
    }
}

/// The root of `mnt` (held by the caller's `Arc`) as a counted [`Path`] (a new task's root
/// and cwd); `None` when `mnt` was unmounted and released meanwhile (the caller starts
/// again: [`MntNamespace::of`] then gives a fresh mount).
pub(crate) fn root_path(mnt: &Arc<Mount>) -> Option<Path> {
    let g = epoch::pin();
    let mnt_ref = mnt.get_ref(REF, &g).ok()?;
    Some(Path {
        mnt: mnt_ref,
        dentry: mnt.mnt_root.clone(),
    })
}
