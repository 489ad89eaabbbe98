//! `statfs`, `fstatfs`, `fsync`, `fdatasync`: file-system statistics and the (no-op) syncs.
//!
//! Linux analogue: fs/statfs.c (`user_statfs`, `fd_statfs`, `statfs_by_dentry`,
//! `calculate_f_flags`), mm/shmem.c (`shmem_statfs`), fs/sync.c (`do_fsync`).
//!
//! uvfs's tmpfs has no size or inode limit, as a Linux tmpfs mounted with
//! `size=0,nr_inodes=0`; `shmem_statfs` then leaves the block and inode counts 0
//! (`simple_statfs`), and so does uvfs. (A default Linux tmpfs mount reports half of RAM
//! and its inode limit instead.) Keeping no used-space count also keeps create, write and
//! unlink free of a shared counter.

use crate::namei::{getname, NAME_MAX};
use crate::task::Task;
use crate::types::*;
use crate::variant::Variant;
use crate::Result;

/// `TMPFS_MAGIC` (include/uapi/linux/magic.h): `f_type` of a tmpfs.
pub const TMPFS_MAGIC: i64 = 0x0102_1994;
/// `ST_VALID`: `f_flags` is valid (always set by Linux `statfs`).
pub const ST_VALID: i64 = 0x0020;
/// `ST_RELATIME`: atime under relatime rules (uvfs's only atime policy).
pub const ST_RELATIME: i64 = 0x1000;

/// File-system statistics, as `statfs(2)` returns them (`struct statfs`, x86_64 field set).
///
/// Units: `f_blocks`, `f_bfree`, `f_bavail` in `f_bsize` (4096-byte) blocks.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    /// File-system type: [`TMPFS_MAGIC`].
    pub f_type: i64,
    /// Block size: 4096 (`PAGE_SIZE`).
    pub f_bsize: i64,
    /// Total blocks: 0 (no size limit; see the module doc).
    pub f_blocks: u64,
    /// Free blocks: 0 (no size limit).
    pub f_bfree: u64,
    /// Free blocks for unprivileged users: 0 (no size limit).
    pub f_bavail: u64,
    /// Total inodes: 0 (no inode limit).
    pub f_files: u64,
    /// Free inodes: 0 (no inode limit).
    pub f_ffree: u64,
    /// File-system id: the device number, split in two words (Linux: from the super
    /// block's uuid).
    pub f_fsid: [i32; 2],
    /// Longest file name: 255.
    pub f_namelen: i64,
    /// Fragment size: 4096, as `f_bsize`.
    pub f_frsize: i64,
    /// Mount flags (`ST_*`): `ST_VALID | ST_RELATIME`.
    pub f_flags: i64,
}

/// `shmem_statfs` + `calculate_f_flags` for the super block with device number `dev`.
fn tmpfs_statfs(dev: u64) -> StatFs {
    StatFs {
        f_type: TMPFS_MAGIC,
        f_bsize: crate::inode::PAGE_SIZE as i64,
        f_fsid: [dev as u32 as i32, (dev >> 32) as u32 as i32],
        f_namelen: NAME_MAX as i64,
        f_frsize: crate::inode::PAGE_SIZE as i64,
        f_flags: ST_VALID | ST_RELATIME,
        ..StatFs::default()
    }
}

impl<V: Variant> Task<V> {
    /// `statfs(2)`: statistics of the file system holding `path` (a final symlink is
    /// followed).
    ///
    /// # Errors
    /// `ENOENT`, `ENOTDIR`, `EACCES` (search permission), `ELOOP`, `ENAMETOOLONG`, `EINVAL`
    /// (interior NUL).
    ///
    /// # References
    /// statfs(2); Linux `user_statfs`, `shmem_statfs`.
    pub fn statfs(&self, path: impl AsRef<[u8]>) -> Result<StatFs> {
        let path = getname(path.as_ref(), false)?;
        self.with_walk(Fd::AT_FDCWD, path, |nd, start, _| {
            let d = nd.walk(start, path, true, false)?;
            Ok(tmpfs_statfs(d.d_inode.i_dev))
        })
    }

    /// `fstatfs(2)`: as [`statfs`](Self::statfs) for the file open at `fd` (an `O_PATH`
    /// descriptor too).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    ///
    /// # References
    /// fstatfs(2); Linux `fd_statfs` (`fdget_raw`).
    pub fn fstatfs(&self, fd: Fd) -> Result<StatFs> {
        let f = self.fdget_raw(fd)?;
        Ok(tmpfs_statfs(f.inode().i_dev))
    }

    /// `fsync(2)`: tmpfs data lives in memory only, so there is nothing to write back;
    /// succeeds on any descriptor but `O_PATH` ones (as `shmem`'s `noop_fsync`).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open or is an `O_PATH` descriptor.
    ///
    /// # References
    /// fsync(2); Linux `do_fsync` (`fdget`), `noop_fsync`.
    pub fn fsync(&self, fd: Fd) -> Result<()> {
        self.fdget(fd).map(drop)
    }

    /// `fdatasync(2)`: as [`fsync`](Self::fsync).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open or is an `O_PATH` descriptor.
    ///
    /// # References
    /// fdatasync(2); Linux `do_fsync`.
    pub fn fdatasync(&self, fd: Fd) -> Result<()> {
        self.fdget(fd).map(drop)
    }
}
