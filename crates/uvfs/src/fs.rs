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
//! Every method that a kind of inode may lack has a default returning the errno Linux gives
//! for it (`EISDIR` for data calls on a directory, `EINVAL` otherwise, `EPERM` for link
//! operations, `EOPNOTSUPP` for fallocate), so a file system implements what it has.
//!
//! # Status of the seam (issue 10)
//! Data calls (read, write, truncate, fallocate, SEEK_DATA/SEEK_HOLE, fsync), symlink
//! targets, statfs, inode creation, link-count bookkeeping and eviction go through these
//! traits; tmpfs ([`crate::fs::tmpfs`]) is the one implementation. Not yet behind the seam:
//! lookup on a dentry-cache miss and its revalidation, `iterate_dir` over a file system's
//! own listing, and the host side of directory changes; today the dentry cache is the
//! authoritative directory index, as it is for Linux's tmpfs (`simple_lookup` answers
//! every miss negatively). These are what hostfs and the FUSE client need next.

pub mod tmpfs;

use crate::cred::Cred;
use crate::inode::Inode;
use crate::statfs::StatFs;
use crate::super_block::SuperBlock;
use crate::types::Timespec;
use crate::{Errno, Result};
use std::fmt;

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
}

/// A mounted file-system instance: what a [`SuperBlock`] delegates to (Linux
/// `super_operations` plus `file_system_type`).
///
/// # Errors
/// Each method documents the errno it returns and when.
pub trait FileSystem: Send + Sync + fmt::Debug {
    /// The file system type's name (`/proc/self/mountinfo`'s fstype): `"tmpfs"`.
    fn name(&self) -> &'static str;

    /// A new inode for a new name in `dir` (or, for `O_TMPFILE`, for no name yet):
    /// Linux `new_inode` + `->create`/`->mkdir`/`->symlink`/`->mknod`/`->tmpfile` before
    /// `d_instantiate`. The VFS has checked permissions, the name and the parent's link
    /// count; it links the result into the dentry cache.
    ///
    /// # Errors
    /// `ENOSPC` when the file system has no inode or space left for it; `EPERM` for a kind
    /// of inode it cannot hold.
    fn create(&self, sb: &SuperBlock, dir: &Inode, args: NewInode<'_>) -> Result<Inode>;
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

    /// `->link`'s bookkeeping for one more name of `inode` (the VFS has checked and will
    /// raise the link count); `first` when the inode has no name yet (an `O_TMPFILE` file).
    ///
    /// # Errors
    /// `ENOSPC` (tmpfs: each further name takes an inode of `nr_inodes`, `shmem_link`).
    fn link(&self, inode: &Inode, first: bool) -> Result<()> {
        let _ = (inode, first);
        Ok(())
    }

    /// `->unlink`'s bookkeeping: the link count of a non-directory fell from `before` to
    /// `after` (unlink, rename over it). Called under the inode's attribute lock, only for
    /// inodes their file system marked evictable (`Inode::set_evictable`). tmpfs: every
    /// name but the last held an inode of `nr_inodes` (`shmem_free_inode`).
    fn unlink(&self, inode: &Inode, before: u32, after: u32) {
        let _ = (inode, before, after);
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
    /// or when `stamp` (see `truncate(2)`, `ftruncate(2)`).
    ///
    /// # Errors
    /// `EISDIR` on a directory, `EINVAL` on anything but a regular file, `EFBIG` past the
    /// maximum file size, `ENOSPC`.
    fn truncate(&self, inode: &Inode, len: u64, now: Timespec, stamp: bool) -> Result<()> {
        let _ = (len, now, stamp);
        Err(not_regular(inode))
    }

    /// `->statfs` of the file system holding `inode` (Linux reaches it through
    /// `dentry->d_sb`; a uvfs inode reaches its file system through its own operations, so
    /// that creating one writes no count on the super block).
    fn statfs(&self, inode: &Inode) -> StatFs;
}

/// Operations on an open file of one inode (Linux `file_operations`).
pub trait FileOps: Send + Sync {
    /// `->read_iter` at byte offset `off`: bytes read into `buf`, 0 at or past the end.
    ///
    /// # Errors
    /// `EISDIR` on a directory, `EINVAL` on a file without data.
    fn read_at(&self, inode: &Inode, buf: &mut [u8], off: u64) -> Result<usize> {
        let _ = (buf, off);
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
        buf: &[u8],
        off: u64,
        append: bool,
        now: Timespec,
        cred: &Cred,
        fsize_limit: u64,
    ) -> Result<(usize, u64)> {
        let _ = (buf, off, append, now, cred, fsize_limit);
        Err(not_regular(inode))
    }

    /// `->fallocate` on `[off, off + len)` (`len > 0`, range checked by the VFS): with
    /// `punch`, frees the range (the size never changes); otherwise allocates it and,
    /// unless `keep_size`, grows the size to its end.
    ///
    /// # Errors
    /// `ENOSPC`; `EOPNOTSUPP` where the file system has no fallocate; `EISDIR`/`EINVAL`.
    #[allow(clippy::too_many_arguments)]
    fn fallocate(
        &self,
        inode: &Inode,
        off: u64,
        len: u64,
        punch: bool,
        keep_size: bool,
        now: Timespec,
        cred: &Cred,
    ) -> Result<()> {
        let _ = (off, len, punch, keep_size, now, cred);
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
    fn seek_data_hole(&self, inode: &Inode, off: u64, data: bool) -> Result<u64> {
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
    fn fsync(&self, inode: &Inode, datasync: bool) -> Result<()> {
        let _ = (inode, datasync);
        Ok(())
    }
}

/// An inode's file-system part: its [`InodeOps`] and [`FileOps`] in one vtable, so that a
/// call through it is one indirect call.
pub trait FsInode: InodeOps + FileOps {}

impl<T: InodeOps + FileOps> FsInode for T {}

/// The errno of a data call on something without data: `EISDIR` for a directory, `EINVAL`
/// otherwise (read(2), write(2), truncate(2)).
pub(crate) fn not_regular(inode: &Inode) -> Errno {
    if inode.is_dir() {
        Errno::EISDIR
    } else {
        Errno::EINVAL
    }
}
