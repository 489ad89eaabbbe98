//! The seam between the VFS and the file systems below it: [`FileSystem`] (a mounted
//! instance), [`InodeOps`] and [`FileOps`] (one inode's file-system part).
//!
//! Linux analogue: `struct super_operations`, `struct inode_operations`,
//! `struct file_operations` (include/linux/fs.h); gVisor's `vfs.FilesystemImpl` and
//! `vfs.FileDescriptionImpl` (pkg/sentry/vfs); Asterinas's `FileSystem` and `Inode` traits.
//!
//! # What sits where
//! The VFS (the rest of this crate) owns descriptor tables, [`File`](crate::File)s, the
//! dentry cache and the lock-free walk, permission checks (`may_*`), rename locking and
//! loop checks, set-ID stripping, the order of errno checks, and the generic attributes of
//! every [`Inode`] (number, mode, owner, link count, times, size, blocks, `rdev`): a
//! `fstat`, a walk through cached components and an `fget` read only those and make no
//! virtual call. A file system keeps its data and metadata behind [`FsInode`], one boxed
//! object per inode (`Inode::i_op`, Linux's `i_op` + `i_fop` + `i_private` in one vtable),
//! and is called by the VFS after the VFS's own checks, with the locks the VFS's lock
//! order names (lib.rs). A `read` or `write` makes one indirect call.
//!
//! [`Inode`] itself is defined here, beside the traits its `i_op` implements (as Linux
//! declares `struct inode` beside `inode_operations` in include/linux/fs.h); its methods
//! are inode.rs's. So this file imports no other core module (its submodules, the file
//! systems, sit on top of the VFS), and no core module imports in a circle (docs/vfs.md,
//! "Which module imports which"). The locking rules of the inode's fields are inode.rs's
//! module doc ("Invariants and locks"); every write of a field is in inode.rs or a file
//! system's own `i_size`/`i_blocks` under its data lock.
//!
//! Every method that a kind of inode may lack has a default returning the errno Linux gives
//! for it (`EISDIR` for data calls on a directory, `EINVAL` otherwise, `EPERM` for link
//! operations, `EOPNOTSUPP` for fallocate), so a file system implements what it has.
//!
//! # Status of the seam (issue 10)
//! Data calls (read, write, truncate, fallocate, SEEK_DATA/SEEK_HOLE, fsync, open and
//! release), symlink targets, statfs, inode creation, directory changes (link, unlink,
//! rmdir, rename), attribute changes, link-count bookkeeping and eviction go through these
//! traits. tmpfs ([`crate::fs::tmpfs`]) is the one implementation so far; its dentry cache
//! is complete (the cache is the store, as Linux's tmpfs, whose `simple_lookup` answers
//! every miss negatively), so it is never asked to look up, revalidate or list. The hooks
//! for a file system whose entries can change behind the VFS's back (`lookup`,
//! `revalidate`, `getattr`, `iterate_dir`, used for inodes marked
//! `Inode::set_revalidate`) are those hostfs and the FUSE client need.

pub mod hostfs;
pub mod tmpfs;

use crate::cred::Cred;
use crate::sync::padded::CacheLine;
use crate::sync::plain::{AtomicI32, AtomicU32, AtomicU64, Mutex};
use crate::sync::seqcount::SeqCount;
use crate::types::StatFs;
use crate::types::Timespec;
use crate::{Errno, Result};
use std::fmt;

/// An inode: identity, attributes and contents of one file.
///
/// # Refcounting
/// Held by `Arc`: by each `Dentry` naming it (open `File`s hold the dentry). An unlinked inode
/// keeps its data until the last `Arc` goes (Linux: `iput` of an inode with `i_nlink == 0`).
///
/// # Where it is defined
/// Here, beside the traits its `i_op` implements, as Linux declares `struct inode` beside
/// `inode_operations` in include/linux/fs.h: the seam's methods take the inode and the
/// inode holds the seam's object, so the two share a file and no import runs in a circle.
/// Its methods are inode.rs's (Linux fs/inode.c); the fields are `pub(crate)` for that
/// file, and the VFS and the file systems go through its methods for every field they do
/// not read directly today (`i_ino`, `i_dev`, `i_op`, `i_size`, `i_blocks`, `i_rdev`).
///
/// # Layout
/// Aligned to a cache line, so the `Arc` counts (written when dentries come and go) sit on
/// the line before it. Line 0: what every path walk and permission check reads (`i_ino`,
/// `i_dev`, mode, owner), written only by chmod/chown. Line 1: what changes write (the
/// attribute lock, times, link count). Line 2: size, blocks and `rdev` (a directory's
/// entries are its dentry's). The file system's part (`i_op`: a regular file's data lock,
/// written by every read, lives behind it) is immutable and read with line 0. Readers of
/// line 0 keep their copy while other cores change or read the file (lesson 1, applied to
/// the inode).
#[repr(C, align(64))]
pub struct Inode {
    /// Inode number (immutable).
    pub(crate) i_ino: u64,
    /// Device number of the owning super block (immutable).
    pub(crate) i_dev: u64,
    pub(crate) i_mode: AtomicU32,
    pub(crate) i_uid: AtomicU32,
    pub(crate) i_gid: AtomicU32,
    /// What the file system wants of the VFS (`I_EVICTABLE`, `I_REVALIDATE`,
    /// `I_VFS_ATTRS`, ...): set before the inode is published, never changed since, but
    /// for `I_NOSEC` (set at a write's first capability check, cleared when a
    /// `security.*` attribute is set: rare writes to this read-mostly line). On line 0
    /// (in the hole before `i_btime`), not with `i_state` on the written line 1, so that
    /// the walk's miss path, `stat`, open and close test these bits without reading a line
    /// other cores write (a directory's line 1 takes every create's and unlink's times).
    pub(crate) i_flags: AtomicU32,
    /// Creation time (`statx`'s `stx_btime`; tmpfs: `i_crtime`). Immutable after creation.
    pub(crate) i_btime: Timespec,
    /// The file system's part: its data and its operations (Linux `i_op`, `i_fop` and
    /// `i_private`; fs.rs). Immutable after creation (line 0).
    pub(crate) i_op: Box<dyn FsInode>,
    pub(crate) _line1: CacheLine<()>,
    pub(crate) i_nlink: AtomicU32,
    /// State bits (`I_LINKABLE`; Linux: `i_state`). Atomic; written under `attr_lock`.
    pub(crate) i_state: AtomicU32,
    pub(crate) times: Times,
    /// Serialises attribute writers (Linux: `i_rwsem` for `notify_change`).
    pub(crate) attr_lock: Mutex<()>,
    /// Open files of this inode, counted only with `I_EVICTABLE` (Linux: the `i_count` that a
    /// `struct file` holds through its dentry), so that an unlinked file's space comes back
    /// at its last close, not when the epoch frees a lock-free lookup's stale copy of its
    /// dentry. Written under `attr_lock` (line 1, next to it).
    pub(crate) i_opens: AtomicU32,
    pub(crate) _line2: CacheLine<()>,
    /// Size in bytes of a regular file (written under its data write lock) or symlink
    /// (immutable), or of a directory as its file system stores it (hostfs; tmpfs leaves 0:
    /// its dentry derives the size from the entry count, `Dentry::size`).
    pub(crate) i_size: AtomicU64,
    /// Blocks (512 bytes) the file holds (`st_blocks`); written by the file system, under
    /// its own data lock for a regular file.
    pub(crate) i_blocks: AtomicU64,
    /// Device number of a device node (`st_rdev`; 0 otherwise). Immutable after creation.
    pub(crate) i_rdev: u64,
    /// Linux `i_writecount`: open files that may write it (> 0), or `execve` opens that
    /// deny writing (< 0), never both: an open for writing of a file being run, or a run
    /// of a file open for writing, is `ETXTBSY`. On line 2, which writers of the file
    /// write anyway (`i_size`); a read-only open never touches it.
    pub(crate) i_writecount: AtomicI32,
    /// The file locks (Linux `i_flctx`): allocated at the first lock request, never
    /// replaced, freed with the inode (locks.rs). On line 2 beside the write count: `close`
    /// reads it (one load, `locks_remove_posix`'s test), read-only opens and reads never.
    pub(crate) i_flctx: crate::sync::once_box::OnceBox<crate::locks::FileLockContext>,
}

/// Timestamps `[atime, mtime, ctime]` under a sequence counter (seconds stored as `i64`
/// bits). The ctime's nanoseconds word also holds `I_CTIME_QUERIED`.
pub(crate) struct Times {
    pub(crate) seq: SeqCount,
    pub(crate) sec: [AtomicU64; 3],
    pub(crate) nsec: [AtomicU32; 3],
}

/// What a new inode is to be: the arguments of `->create`, `->mkdir`, `->symlink`,
/// `->mknod` and `->tmpfile`, after the VFS has applied the umask, `inode_init_owner` and
/// set-group-ID inheritance.
#[derive(Clone, Copy, Debug)]
pub struct NewInode<'a> {
    /// Type and permission bits (`S_IFREG`, `S_IFDIR`, `S_IFLNK`, `S_IFCHR`, `S_IFBLK`,
    /// `S_IFIFO`, `S_IFSOCK` with `0o7777` bits).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number of a character or block device node (`st_rdev`); 0 otherwise.
    pub rdev: u64,
    /// The target of a symlink (1 ..= 4095 bytes); `None` otherwise.
    pub target: Option<&'a [u8]>,
    /// The syscall's change time (`coarse_now`): all three times of the new inode.
    pub now: Timespec,
    /// For a regular file made by `open` (`O_CREAT` of a new name, `O_TMPFILE` with the
    /// name empty): the open's flags (`O_CREAT` in them, or `O_TMPFILE`'s bits; unknown
    /// bits and `O_CLOEXEC` dropped, `O_LARGEFILE` added, as `build_open_flags`), for a
    /// file system that creates and opens in one request (FUSE's CREATE and TMPFILE, as
    /// Linux's `->atomic_open` and `->tmpfile` get the `file`); the `FileOps::open` that
    /// follows has `created`. Empty otherwise (`mknod`, `mkdir`, `symlink`).
    pub open: crate::types::OpenFlags,
}

/// What a `fallocate(2)` asks of a file system ([`FileOps::fallocate`]): the modes some
/// file system behind the seam takes (`FALLOC_FL_*` less `KEEP_SIZE`, which goes apart).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FallocMode {
    /// Mode 0: allocate the range.
    Allocate,
    /// `FALLOC_FL_PUNCH_HOLE`: free the range.
    PunchHole,
    /// `FALLOC_FL_ZERO_RANGE`: zero the range, allocated (the FUSE client, and hostfs on
    /// a host file system that has it; not tmpfs).
    ZeroRange,
}

/// A mounted file-system instance: what a [`SuperBlock`](crate::SuperBlock) delegates to (Linux
/// `super_operations` plus `file_system_type`).
///
/// # Errors
/// Each method documents the errno it returns and when.
pub trait FileSystem: Send + Sync + fmt::Debug {
    /// The file system type's name (`/proc/self/mountinfo`'s fstype): `"tmpfs"`.
    fn name(&self) -> &'static str;

    /// Whether its inodes keep multigrain timestamps (Linux's `FS_MGTIME`, tmpfs and the
    /// local disk file systems since 6.13): `statx` then fills `stx_mtime` and
    /// `stx_ctime` only when asked (`fill_mg_cmtime`). Not for a FUSE mount, whose
    /// `statx` has them whatever the mask (measured on Linux 6.18: mask 0 gives
    /// `0x17ff` on a kernel FUSE mount, `0x173f` on tmpfs). Default: `true`.
    fn multigrain(&self) -> bool {
        true
    }

    /// `statx`'s `stx_attributes_mask`: the `STATX_ATTR_*` bits the file system supports.
    /// Default: tmpfs's ([`STATX_ATTR_MASK_TMPFS`](crate::stat::STATX_ATTR_MASK_TMPFS)).
    fn statx_attributes_mask(&self) -> u64 {
        crate::stat::STATX_ATTR_MASK_TMPFS
    }

    /// This file system as `Any`, for code that needs its own type behind a super block
    /// (Linux: `s_fs_info` cast by the file system; tmpfs snapshots).
    fn as_any(&self) -> &dyn std::any::Any;

    /// A new inode for the new name `name` in `dir` (empty for `O_TMPFILE`: no name yet):
    /// Linux `new_inode` + `->create`/`->mkdir`/`->symlink`/`->mknod`/`->tmpfile` before
    /// `d_instantiate`. The VFS has checked permissions, the name and the parent's link
    /// count; it links the result into the dentry cache. `dev` is the super block's device
    /// number (`s_dev`), the new inode's `i_dev`.
    ///
    /// # Errors
    /// `ENOSPC` when the file system has no inode or space left for it; `EPERM` for a kind
    /// of inode it cannot hold.
    ///
    /// Returns the inode already shared (`Arc`), so that a file system that indexes its
    /// inodes (hostfs: one host inode = one uvfs inode) can record it before the VFS
    /// publishes it.
    fn create(
        &self,
        dev: u64,
        dir: &Inode,
        name: &[u8],
        args: NewInode<'_>,
    ) -> Result<std::sync::Arc<Inode>>;
}

/// Operations on one inode (Linux `inode_operations` and `super_operations`' per-inode
/// parts: `evict_inode`, `statfs`). `inode` is the VFS inode whose `i_op` this is.
pub trait InodeOps: Send + Sync {
    /// The target of a symlink (`->get_link`).
    ///
    /// # Errors
    /// `EINVAL` when this is not a symlink (readlink(2)).
    fn get_link<'a>(&'a self, inode: &Inode) -> Result<&'a [u8]> {
        let _ = inode;
        Err(Errno::EINVAL)
    }

    /// [`get_link`](Self::get_link) on a walk that must not block (Linux: `->get_link`
    /// with no dentry, under RCU): the target, or `Err(ECHILD)` when only a call that may
    /// block has it; the walk then calls `get_link` unpinned and runs again, so a file
    /// system that answers `ECHILD` keeps the target `get_link` returned (the FUSE client
    /// keeps every symlink's). The default is `get_link`, for file systems that never
    /// block for it.
    ///
    /// # Errors
    /// `ECHILD` as above; [`get_link`](Self::get_link)'s.
    fn get_link_rcu<'a>(&'a self, inode: &Inode) -> Result<&'a [u8]> {
        self.get_link(inode)
    }

    /// The bookkeeping of one more name of `inode`, under its attribute lock after the
    /// VFS's checks and just before the link count is raised; `first` when the inode has
    /// no name yet (an `O_TMPFILE` file). The part of `->link` that is about the inode.
    ///
    /// # Errors
    /// `ENOSPC` (tmpfs: each further name takes an inode of `nr_inodes`, `shmem_link`).
    fn nlink_inc(&self, inode: &Inode, first: bool) -> Result<()> {
        let _ = (inode, first);
        Ok(())
    }

    /// The bookkeeping of names of a non-directory gone: its link count fell from `before`
    /// to `after` (unlink, rename over it). Called under the inode's attribute lock, only
    /// for inodes their file system marked evictable (`Inode::set_evictable`). tmpfs: every
    /// name but the last held an inode of `nr_inodes` (`shmem_free_inode`).
    fn nlink_dec(&self, inode: &Inode, before: u32, after: u32) {
        let _ = (inode, before, after);
    }

    /// `->permission`: may `cred` access `inode` for `mask` (`MAY_READ`, `MAY_WRITE`,
    /// `MAY_EXEC`, with `MAY_ACCESS` from access(2) or `MAY_CHDIR` from chdir(2), fchdir(2)
    /// and chroot(2))? Called in place of the mode-bit check only for inodes their file
    /// system marked `Inode::set_fs_permission` or `Inode::set_revalidate` (whose cached
    /// attributes may be stale: the file system may refresh them first, as Linux's
    /// `fuse_permission` under `default_permissions`); the default is that check
    /// (`generic_permission`). Called in walks for a directory's search check (`MAY_EXEC`
    /// alone), where it may block as the file system's `lookup` does there.
    ///
    /// # Errors
    /// `EACCES`; the file system's.
    fn permission(&self, inode: &Inode, cred: &Cred, mask: u32) -> Result<()> {
        inode.generic_permission(cred, mask)
    }

    /// `->lookup`: the inode named `name` in directory `dir`, `None` if there is none.
    /// Called on a dentry-cache miss, with the directory locked, only for directories
    /// marked `Inode::set_revalidate` (a file system whose dentry cache is complete, as
    /// tmpfs's, is never asked: a miss is `ENOENT`). May return an inode the cache holds
    /// under another name (a hard link).
    ///
    /// # Errors
    /// The file system's (`EACCES`, `EIO`, `ENOMEM`, ...); `ENOENT` is `Ok(None)`.
    fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<Option<std::sync::Arc<Inode>>> {
        let _ = (dir, name);
        Ok(None)
    }

    /// `->d_revalidate`: whether the cached entry `name` -> `child` of `dir` still holds.
    /// Called during walks for children marked `Inode::set_revalidate`. With `rcu` the
    /// call is on the lock-free walk and must not block: return `Err(ECHILD)` to be called
    /// again without `rcu` (Linux: `LOOKUP_RCU` -> `-ECHILD` -> ref-walk).
    ///
    /// # Errors
    /// `ECHILD` as above; the file system's.
    fn revalidate(&self, dir: &Inode, name: &[u8], child: &Inode, rcu: bool) -> Result<bool> {
        let _ = (dir, name, child, rcu);
        Ok(true)
    }

    /// `->link` on directory `dir`: makes `name` a new name of `inode`. Called with `dir`
    /// locked after the VFS's checks, before the dentry cache and the link count change.
    ///
    /// # Errors
    /// The file system's (`EEXIST` if the name appeared behind the VFS's back, `EMLINK`,
    /// `ENOSPC`, `EPERM`, `EXDEV`, `EIO`).
    fn link(&self, dir: &Inode, name: &[u8], inode: &Inode) -> Result<()>;

    /// `->unlink` on directory `dir`: removes the name `name` of non-directory `victim`.
    /// Called with `dir` locked after the VFS's checks, before the dentry cache changes.
    ///
    /// # Errors
    /// The file system's (`ENOENT` if it went behind the VFS's back, `EBUSY`, `EIO`).
    fn unlink(&self, dir: &Inode, name: &[u8], victim: &Inode) -> Result<()>;

    /// `->rmdir` on directory `dir`: removes the empty directory `victim` named `name`.
    /// Called with `dir` locked after the VFS's checks (for a complete dentry cache, the
    /// emptiness check too), before the dentry cache changes.
    ///
    /// # Errors
    /// `ENOTEMPTY` where the VFS could not tell; the file system's.
    fn rmdir(&self, dir: &Inode, name: &[u8], victim: &Inode) -> Result<()>;

    /// `->rename` from directory `odir` name `oname` to directory `ndir` name `nname`,
    /// with `flags` (`RENAME_NOREPLACE`, `RENAME_EXCHANGE`; never `RENAME_WHITEOUT`).
    /// Called on `odir`'s operations with both directories locked after the VFS's checks,
    /// the loop check included, before the dentry cache changes.
    ///
    /// # Errors
    /// The file system's (`EXDEV`, `ENOTEMPTY` where the VFS could not tell, `EIO`).
    fn rename(
        &self,
        odir: &Inode,
        oname: &[u8],
        ndir: &Inode,
        nname: &[u8],
        flags: crate::types::RenameFlags,
    ) -> Result<()>;

    /// `->setattr` for mode, owner and times: called under the inode's attribute lock after
    /// the VFS's checks, before the VFS stores the new values in the inode. Size changes go
    /// through [`truncate`](Self::truncate).
    ///
    /// # Errors
    /// The file system's (`EPERM`, `EROFS`, `EIO`); nothing is changed then.
    fn setattr(&self, inode: &Inode, attr: &SetAttr) -> Result<()>;

    /// `->getattr`: brings the VFS attributes of `inode` up to date with the file system.
    /// Called by `stat` and its family for inodes marked `Inode::set_revalidate`, before
    /// the attributes are read.
    ///
    /// # Errors
    /// The file system's (`ESTALE` for a file gone behind the VFS's back, `EIO`).
    fn getattr(&self, inode: &Inode) -> Result<()> {
        let _ = inode;
        Ok(())
    }

    /// Part of `->setattr` with `ATTR_KILL_SUID`/`ATTR_KILL_SGID`, for a file system that
    /// decides a set-ID kill itself (Linux's `fuse_setattr` without `handle_killpriv`: "ia_mode
    /// calculation may have used stale i_mode. Refresh and recalculate."). Called without
    /// the inode's locks when the VFS is about to clear set-ID bits: for a chown of a
    /// non-directory (`chown_common`), and for a write or truncate whose cached mode says
    /// so (`file_remove_privs`, `setattr_should_drop_suidgid`). `None` (the default): the
    /// VFS's rule from the cached mode stands. `Some(bits)`: the file system asked for the
    /// inode's attributes (a reply that raced a data change may be dropped, as Linux's
    /// `attr_version` drops it), and `bits` (within `S_ISUID | S_ISGID`) are the ones to
    /// clear; for a write or chown the VFS then sends its `setattr` even when `bits` clears
    /// nothing, as Linux sends `fuse_do_setattr` with whatever is left of the attributes
    /// (a truncation sends only its size).
    ///
    /// # Errors
    /// The file system's refresh (`ESTALE`, `EIO`); the call fails, nothing changes.
    fn setid_kill(&self, inode: &Inode) -> Result<Option<u32>> {
        let _ = inode;
        Ok(None)
    }

    /// Removes the file capability (`security.capability`) of `inode`, if it has one:
    /// Linux's `security_inode_need_killpriv` (`cap_inode_need_killpriv`: the attribute's
    /// length, any error counting as none) then `security_inode_killpriv`. The VFS calls
    /// it at a chown of a non-directory (`chown_common`'s `ATTR_KILL_PRIV`, before the
    /// set-ID kill) and, unless the inode is `I_NOSEC`, at a write, truncation or
    /// `fallocate` (`file_remove_privs`). The default asks [`getxattr`](Self::getxattr)
    /// for the length and removes with [`setxattr`](Self::setxattr) (FUSE: GETXATTR, then
    /// REMOVEXATTR when there is one; a server without GETXATTR is not asked again).
    ///
    /// # Errors
    /// The removal's but `EOPNOTSUPP` and `ENODATA` (the call fails, nothing else
    /// changes).
    fn kill_priv(&self, inode: &Inode) -> Result<()> {
        remove_file_caps(self, inode, &[])
    }

    /// Whether the inode's attributes change only through uvfs (Linux's `SB_NOSEC`), so
    /// that a capability check that found none holds until a `security.*` attribute is set
    /// through the VFS (`I_NOSEC`). Default `false`: every write asks (the FUSE client, as
    /// Linux's FUSE clears `SB_NOSEC`).
    fn sb_nosec(&self, inode: &Inode) -> bool {
        let _ = inode;
        false
    }

    /// `->getattr` as `statx(2)` and `fstatat(2)` with an `AT_STATX_*_SYNC` flag call it
    /// (`vfs_getattr`'s `request_mask` and `query_flags`): brings the attributes `mask`
    /// names (`STATX_*` bits) up to date as `sync` asks, and returns the birth time
    /// `statx` reports (the `btime` Linux's `->getattr` fills; `None`: `statx` leaves
    /// `STATX_BTIME` out of `stx_mask`). Called for inodes whose file system stores the
    /// attributes (not `Inode::set_vfs_attrs`). By default as a local file system, whose
    /// attributes are always current: [`getattr`](Self::getattr) whatever `sync` says for
    /// an inode marked `Inode::set_revalidate`, and the inode's birth time
    /// ([`Inode::btime`], set when it was made) when `mask` has `STATX_BTIME`.
    ///
    /// # Errors
    /// The file system's (`ESTALE`, `EIO`, `ENOTCONN`); the call fails.
    fn statx(
        &self,
        inode: &Inode,
        mask: u32,
        sync: crate::stat::StatxSync,
    ) -> Result<Option<crate::types::Timespec>> {
        let _ = sync;
        if inode.needs_revalidate() {
            self.getattr(inode)?;
        }
        Ok((mask & crate::stat::STATX_BTIME != 0).then(|| inode.btime()))
    }

    /// `->evict_inode`: no name and no open file are left; give back what the inode holds
    /// (`all`), or, after that was done once, only what was written since by an open that
    /// raced with the last unlink (`!all`). Called without the inode's locks. Only called
    /// for inodes their file system marked evictable (`Inode::set_evictable`).
    fn evict(&self, inode: &Inode, all: bool) {
        let _ = (inode, all);
    }

    /// `->setattr` with `ATTR_SIZE`: sets the size to `len` bytes, dropping the data past
    /// it; stamps mtime and ctime with `now` when the size changes, when the file has data,
    /// or when `stamp` (see `truncate(2)`, `ftruncate(2)`). `fh`: the handle of the open
    /// file it goes through (`ftruncate`: Linux's `ATTR_FILE`, which a FUSE client sends
    /// as `FATTR_FH`); `None` for `truncate(2)` and `open(O_TRUNC)` (whose `ATTR_OPEN`
    /// truncation Linux's FUSE client sends without the handle).
    ///
    /// # Errors
    /// `EISDIR` on a directory, `EINVAL` on anything but a regular file, `EFBIG` past the
    /// maximum file size, `ENOSPC`.
    fn truncate(
        &self,
        inode: &Inode,
        len: u64,
        now: Timespec,
        stamp: bool,
        fh: Option<u64>,
    ) -> Result<()> {
        let _ = (len, now, stamp, fh);
        Err(not_regular(inode))
    }

    /// The extended attribute `name` (full name, prefix included, checked by the VFS):
    /// copies its value into `buf` and returns its length, or with `buf` `None` returns
    /// the length only (`->get` of the name's `xattr_handler`).
    ///
    /// # Errors
    /// `ENODATA` (no such attribute), `ERANGE` (`buf` too small), `EOPNOTSUPP` (the
    /// default: no extended attributes).
    fn getxattr(&self, inode: &Inode, name: &[u8], buf: Option<&mut [u8]>) -> Result<usize> {
        let _ = (inode, name, buf);
        Err(Errno::EOPNOTSUPP)
    }

    /// Sets (`Some(value)`, possibly empty) or removes (`None`) the extended attribute
    /// `name`, after the VFS's permission checks, with `XATTR_CREATE`/`XATTR_REPLACE`
    /// `flags` (`->set` of the name's `xattr_handler`, `simple_xattr_set`). The VFS stamps
    /// the ctime on success.
    ///
    /// # Errors
    /// `EEXIST` (`XATTR_CREATE`, exists), `ENODATA` (`XATTR_REPLACE` or removal, absent),
    /// `ENOSPC` (no space left for it), `EOPNOTSUPP` (the default).
    fn setxattr(&self, inode: &Inode, name: &[u8], value: Option<&[u8]>, flags: u32) -> Result<()> {
        let _ = (inode, name, value, flags);
        Err(Errno::EOPNOTSUPP)
    }

    /// `->listxattr`: the NUL-terminated names of the extended attributes, into `buf` (or,
    /// with `None`, only the length they need); `trusted` says whether the caller may see
    /// `trusted.*` names (`CAP_SYS_ADMIN`; `simple_xattr_list` skips them otherwise).
    ///
    /// # Errors
    /// `ERANGE` (`buf` too small). The default lists nothing (`Ok(0)`), as Linux for an
    /// inode without `->listxattr`.
    fn listxattr(&self, inode: &Inode, buf: Option<&mut [u8]>, trusted: bool) -> Result<usize> {
        let _ = (inode, buf, trusted);
        Ok(0)
    }

    /// `->statfs` of the file system holding `inode` (Linux reaches it through
    /// `dentry->d_sb`; a uvfs inode reaches its file system through its own operations, so
    /// that creating one writes no count on the super block).
    ///
    /// # Errors
    /// The file system's (hostfs: the host's `fstatfs`; FUSE: the server's `STATFS`).
    fn statfs(&self, inode: &Inode) -> Result<StatFs>;
}

/// [`InodeOps::kill_priv`]'s default: `security.capability`'s length by
/// [`getxattr`](InodeOps::getxattr) (any error: none), and its removal by
/// [`setxattr`](InodeOps::setxattr). `EOPNOTSUPP` from the removal counts as done
/// (`cap_inode_killpriv`), and `ENODATA` too (a concurrent removal took it first: Linux holds
/// the inode lock across the check and the removal, uvfs does not); so do the errnos in
/// `also_done`.
///
/// # Errors
/// The removal's other errnos.
pub(crate) fn remove_file_caps<F: InodeOps + ?Sized>(
    fs: &F,
    inode: &Inode,
    also_done: &[Errno],
) -> Result<()> {
    const CAPS: &[u8] = b"security.capability";
    if fs.getxattr(inode, CAPS, None).is_ok_and(|n| n > 0) {
        match fs.setxattr(inode, CAPS, None, 0) {
            Err(Errno::EOPNOTSUPP | Errno::ENODATA) => {}
            Err(e) if also_done.contains(&e) => {}
            r => r?,
        }
    }
    Ok(())
}

/// Operations on an open file of one inode (Linux `file_operations`). Every call on an
/// open `File` passes `fh`, the handle its [`open`](Self::open) returned (0 for a `File`
/// whose inode skips `open`, `I_NOP_OPEN`, and for `O_PATH` files, which make no data call).
pub trait FileOps: Send + Sync {
    /// `->open`: a `File` of `inode` is being opened with `flags` (access mode included),
    /// after the VFS's permission checks; `created`: by the open that made the inode
    /// (`FMODE_CREATED`: `O_CREAT` of a new name, `O_TMPFILE`), right after
    /// [`FileSystem::create`] with the open's flags in [`NewInode::open`] (a file system
    /// that creates and opens in one request, FUSE's CREATE, hands its open over here).
    /// Returns the file's private handle (Linux `file->private_data`; a FUSE server's
    /// `fh`), which the VFS keeps in the `File` and passes to every later call on it; 0 for
    /// a file system without per-open state. Every successful `open` is paired with one
    /// [`release`](Self::release).
    ///
    /// # Errors
    /// The file system's (`EACCES`, `ENXIO`, `EMFILE`/`ENFILE` for host resources).
    fn open(&self, inode: &Inode, flags: crate::types::OpenFlags, created: bool) -> Result<u64> {
        let _ = (inode, flags, created);
        Ok(0)
    }

    /// Whether [`open`](Self::open) truncates regular file `inode` itself when `O_TRUNC`
    /// is in its flags (a FUSE server that accepted `FUSE_ATOMIC_O_TRUNC`: Linux's
    /// `fuse_open_common` keeps `O_TRUNC` in OPEN's flags, and `fuse_do_setattr` sends
    /// nothing for the `ATTR_OPEN` truncation `handle_truncate` makes next, the file
    /// system dropping its cached size and pages instead). With `true`, the VFS passes
    /// `O_TRUNC` to `open` for an `open(O_TRUNC)` of an existing regular file and makes no
    /// [`truncate`](InodeOps::truncate) call of its own after it (nor a set-ID kill: the
    /// file system's truncation drops the bits, as the server's `open(O_TRUNC)` does on
    /// Linux); with `false` (the default), `open` never sees `O_TRUNC` and the VFS
    /// truncates after it.
    fn atomic_o_trunc(&self, inode: &Inode) -> bool {
        let _ = inode;
        false
    }

    /// `->flush`: a descriptor of the `File` with handle `fh` is being closed by
    /// `close(2)` (Linux `filp_close`, on every close, not only the last). Its error is
    /// `close`'s; the descriptor is closed either way.
    ///
    /// # Errors
    /// The file system's (`EIO` for data it could not write back).
    fn flush(&self, inode: &Inode, fh: u64) -> Result<()> {
        let _ = (inode, fh);
        Ok(())
    }

    /// Whether the open file with handle `fh`, just opened, is unseekable (Linux's
    /// `nonseekable_open` or `stream_open` in the file system's `->open`: a FUSE server's
    /// `FOPEN_NONSEEKABLE` or `FOPEN_STREAM`): `lseek`, `pread` and `pwrite` on it are then
    /// `ESPIPE`. Default: no.
    fn nonseekable(&self, inode: &Inode, fh: u64) -> bool {
        let _ = (inode, fh);
        false
    }

    /// `stream_open` in the file system's `->open` (a FUSE server's `FOPEN_STREAM`): the
    /// open file has no position: `read` and `write` reach [`read_at`](Self::read_at) and
    /// [`write_at`](Self::write_at) with offset 0 and leave the position alone, and it is
    /// not seekable (as [`nonseekable`](Self::nonseekable)).
    fn stream(&self, inode: &Inode, fh: u64) -> bool {
        let _ = (inode, fh);
        false
    }

    /// The open that made `inode` failed before its [`open`](Self::open) with `created`
    /// (a VFS check after the create: `O_NOATIME` on a file the server gave another
    /// owner, `ETXTBSY`): give back what the create prepared for it (Linux: the `fput`
    /// of the file `->atomic_open` or `->tmpfile` opened, whose `->release` runs). Called
    /// only for inodes marked `Inode::set_revalidate`.
    fn release_created(&self, inode: &Inode) {
        let _ = inode;
    }

    /// `->release`: the last reference to a `File` opened by [`open`](Self::open), with
    /// the handle `fh` that `open` returned, went.
    fn release(&self, inode: &Inode, fh: u64) {
        let _ = (inode, fh);
    }

    /// `->iterate_shared` for a directory whose dentry cache is not complete (marked
    /// `Inode::set_revalidate`): calls `emit(name, ino, d_type, next)` for each entry from
    /// position `pos` (0 = the first entry after `.` and `..`, which the VFS emits, or the
    /// first entry of a [`raw_dir_listing`](Self::raw_dir_listing)) until it returns
    /// `false` (the buffer is full), the listing ends, or the file system has listed what
    /// one call of its own gives (FUSE: one READDIR, as Linux); returns the position to
    /// resume from. At the end that is the file system's end-of-directory position
    /// (`Some`, where later calls resume and find nothing, as a host directory's
    /// `DIR_OFFSET_EOD`), or `None` (the VFS parks at `i64::MAX`). Positions are stable
    /// cookies of the file system's choosing, below `i64::MAX - 2`.
    ///
    /// A file system whose listing also gives it the entries' inodes (FUSE's READDIRPLUS)
    /// may hand each to `link(name, inode)`, which enters it in the dentry cache as the
    /// directory's entry `name` (see [`DirLink`]); a later walk then finds it without a
    /// lookup.
    ///
    /// # Errors
    /// `ENOTDIR` (the default, for file systems whose dentry cache is complete);
    /// the file system's.
    fn iterate_dir(
        &self,
        dir: &Inode,
        fh: u64,
        pos: u64,
        emit: &mut DirEmit<'_>,
        link: &mut DirLink<'_>,
    ) -> Result<Option<u64>> {
        let _ = (dir, fh, pos, emit, link);
        Err(Errno::ENOTDIR)
    }

    /// Whether [`iterate_dir`](Self::iterate_dir)'s listing is the directory's whole
    /// listing as the file system gives it: `.` and `..` among its records (where, with
    /// which inode numbers, or not at all, as the file system says), positions the file
    /// system's own cookies from 0 (no VFS entries before them), and `lseek` on the
    /// directory as `generic_file_llseek` (`SEEK_END` at the directory's size, `SEEK_DATA`
    /// and `SEEK_HOLE` against it). The FUSE client's (Linux `fuse_readdir`, which emits
    /// every record of the server's reply with its offset, and `fuse_dir_operations`'
    /// `generic_file_llseek`). Default `false`: the VFS lists `.` and `..` at positions 0
    /// and 1 and only `SEEK_SET`/`SEEK_CUR` move a directory's position.
    fn raw_dir_listing(&self) -> bool {
        false
    }

    /// `->read_iter` at byte offset `off`: bytes read into `buf`, 0 at or past the end.
    ///
    /// # Errors
    /// `EISDIR` on a directory, `EINVAL` on a file without data.
    fn read_at(&self, inode: &Inode, fh: u64, buf: &mut [u8], off: u64) -> Result<usize> {
        let _ = (fh, buf, off);
        Err(not_regular(inode))
    }

    /// `->write_iter`: writes `buf` at `off`, or at the end of file when `append`
    /// (atomically with respect to other writers); returns `(bytes written, offset after)`.
    /// A write crossing `fsize_limit` (`RLIMIT_FSIZE`) or the maximum file size is
    /// shortened; a write running out of space stops short. Drops set-ID bits as
    /// `file_remove_privs` (`Inode::kill_suid`) and stamps mtime and ctime with `now`.
    ///
    /// # Errors
    /// `EFBIG` at or past the limit, `ENOSPC` when nothing could be written, `EISDIR`,
    /// `EINVAL` as [`read_at`](Self::read_at).
    #[allow(clippy::too_many_arguments)]
    fn write_at(
        &self,
        inode: &Inode,
        fh: u64,
        buf: &[u8],
        off: u64,
        append: bool,
        now: Timespec,
        cred: &Cred,
        fsize_limit: u64,
    ) -> Result<(usize, u64)> {
        let _ = (fh, buf, off, append, now, cred, fsize_limit);
        Err(not_regular(inode))
    }

    /// `->fallocate` on `[off, off + len)` (`len > 0`, range checked by the VFS), as
    /// `mode` says: [`FallocMode::PunchHole`] frees the range (the size never changes;
    /// `keep_size` always); otherwise the range is allocated (and zeroed for
    /// [`FallocMode::ZeroRange`]) and, unless `keep_size`, the size grows to its end.
    /// `fsize_limit`: the caller's `RLIMIT_FSIZE` (`u64::MAX`: none), which the file
    /// system applies by its own rule (`inode_newsize_ok` in `shmem_fallocate` for any
    /// allocation, in `fuse_file_fallocate` for a growing one).
    ///
    /// # Errors
    /// `ENOSPC`; `EOPNOTSUPP` where the file system lacks the mode (tmpfs:
    /// `ZeroRange`, as `shmem_fallocate`) or has no fallocate; `EFBIG` past
    /// `fsize_limit`; `EISDIR`/`EINVAL`.
    #[allow(clippy::too_many_arguments)]
    fn fallocate(
        &self,
        inode: &Inode,
        fh: u64,
        off: u64,
        len: u64,
        mode: FallocMode,
        keep_size: bool,
        now: Timespec,
        cred: &Cred,
        fsize_limit: u64,
    ) -> Result<()> {
        let _ = (fh, off, len, mode, keep_size, now, cred, fsize_limit);
        Err(if inode.is_reg() {
            Errno::EOPNOTSUPP
        } else {
            not_regular(inode)
        })
    }

    /// `SEEK_DATA` (`data`) or `SEEK_HOLE` from `off` (`->llseek`).
    ///
    /// # Errors
    /// `ENXIO` at or past the end of file.
    fn seek_data_hole(&self, inode: &Inode, fh: u64, off: u64, data: bool) -> Result<u64> {
        let _ = fh;
        let size = inode.size();
        match (off >= size, data) {
            (true, _) => Err(Errno::ENXIO),
            // Without a map of its own, the whole file is data (`generic_file_llseek`).
            (false, true) => Ok(off),
            (false, false) => Ok(size),
        }
    }

    /// `->fsync`: makes the file's data (and, unless `datasync`, its metadata) durable.
    ///
    /// # Errors
    /// `EIO` and the like from the storage below.
    fn fsync(&self, inode: &Inode, fh: u64, datasync: bool) -> Result<()>;

    /// A new host descriptor of the same file, opened with the access mode of `flags`
    /// (`O_RDONLY`, `O_WRONLY` or `O_RDWR`; close-on-exec), for a file system whose files
    /// are host files (hostfs). `uvfs run` installs it in the traced program
    /// (`SECCOMP_IOCTL_NOTIF_ADDFD`) so that the kernel can `mmap` the file itself (the
    /// loader maps shared libraries that way). No Linux analogue: a userspace file layer
    /// handing a file back to the kernel.
    ///
    /// # Errors
    /// `EOPNOTSUPP` (the default) when the file has no host descriptor (tmpfs, the FUSE
    /// client); the host's error when it cannot be reopened (`EACCES`, `ESTALE`).
    fn host_fd(
        &self,
        inode: &Inode,
        flags: crate::types::OpenFlags,
    ) -> Result<std::os::fd::OwnedFd> {
        let _ = (inode, flags);
        Err(Errno::EOPNOTSUPP)
    }
}

/// An inode's file-system part: its [`InodeOps`] and [`FileOps`] in one vtable, so that a
/// call through it is one indirect call.
pub trait FsInode: InodeOps + FileOps {
    /// This part as `Any`, for a file system to reach its own type behind another inode
    /// (Linux `container_of`, e.g. the other directory of a rename).
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<T: InodeOps + FileOps + 'static> FsInode for T {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The callback of [`FileOps::iterate_dir`] (Linux `dir_emit`): `(name, ino, d_type,
/// next position)`; returns `false` when the caller's buffer is full (the entry was not
/// taken).
pub type DirEmit<'a> = dyn FnMut(&[u8], u64, u8, u64) -> bool + 'a;

/// The second callback of [`FileOps::iterate_dir`] (Linux `fuse_direntplus_link`'s
/// `d_splice_alias`): `(name, inode)` makes `inode` the listed directory's cached entry
/// `name`, taking the reference. A cached entry `name` naming another inode is dropped
/// first with what was cached below it (`d_invalidate`), unless something is mounted on
/// it (then it stays, and `inode` is dropped). Called under the directory's lock; `name`
/// is a valid component (not `.`, `..`, no `/`, at most `NAME_MAX` bytes), else ignored.
pub type DirLink<'a> = dyn FnMut(&[u8], std::sync::Arc<Inode>) + 'a;

/// What `->setattr` is asked to change (`struct iattr` without the size): each `Some` is a
/// new value, already checked by the VFS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits (`0o7777`; the type bits are never changed).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New access time.
    pub atime: Option<Timespec>,
    /// New modification time.
    pub mtime: Option<Timespec>,
    /// `atime` is the current time (`UTIME_NOW`, or no times given), not a value the
    /// caller chose (Linux: `ATTR_ATIME` without `ATTR_ATIME_SET`): a file system with a
    /// clock of its own may take its own.
    pub atime_now: bool,
    /// As `atime_now`, for `mtime` (`ATTR_MTIME` without `ATTR_MTIME_SET`).
    pub mtime_now: bool,
}

/// The errno of a data call on something without data: `EISDIR` for a directory, `EINVAL`
/// otherwise (read(2), write(2), truncate(2)).
pub(crate) fn not_regular(inode: &Inode) -> Errno {
    if inode.is_dir() {
        Errno::EISDIR
    } else {
        Errno::EINVAL
    }
}
