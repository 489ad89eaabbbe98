//! `statfs`, `fstatfs`, `fsync`, `fdatasync`: file-system statistics and the (no-op) syncs.
//!
//! Linux analogue: fs/statfs.c (`user_statfs`, `fd_statfs`, `statfs_by_dentry`,
//! `calculate_f_flags`), mm/shmem.c (`shmem_statfs`), fs/sync.c (`do_fsync`).
//!
//! Block and inode counts come from the mount's `size=` and `nr_inodes=` limits
//! ([`TmpfsOptions`](crate::TmpfsOptions)); a limit not set is tmpfs's default (half of RAM,
//! and as many inodes as half of RAM has pages), so a default mount reports what a Linux
//! tmpfs mounted without options reports. A limit of 0 is unlimited, as `size=0`/
//! `nr_inodes=0` in Linux, where `shmem_statfs` then leaves those counts 0, and so does
//! uvfs. Without limits uvfs keeps no used-space count; with them the counts are per-thread
//! reserves that `statfs` sums under the pools' locks (fs/tmpfs/limits.rs, Linux's
//! `percpu_counter_sum` in `shmem_statfs`), exact when no create or write runs meanwhile.

use crate::namei::getname;
use crate::task::Task;
use crate::types::*;
use crate::variant::Variant;
use crate::Result;

pub use crate::types::{
    StatFs, ST_NODEV, ST_NOEXEC, ST_NOSUID, ST_RDONLY, ST_RELATIME, ST_VALID, TMPFS_MAGIC,
};

/// `calculate_f_flags`: the file system's flags and the mount's (`flags_by_mnt`).
fn with_mount_flags(mut st: StatFs, mnt: &crate::Mount) -> StatFs {
    // The per-mount flag bits are the ST_* bits of the same meaning.
    st.f_flags |= (mnt.flags() & crate::MountFlags::PER_MOUNT).bits() as i64;
    st
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
    pub fn statfs(&self, path: impl AsPath) -> Result<StatFs> {
        let path = getname(path.path_bytes(), false)?;
        self.with_dentry(
            Fd::AT_FDCWD.into(),
            path,
            |nd, start| nd.walk(start, path, true, false),
            |d, mnt| Ok(with_mount_flags(d.d_inode.i_op.statfs(&d.d_inode)?, mnt)),
        )
    }

    /// `statfs` of the file system `d` is on, with its mount's flags (`vfs_statfs` of a
    /// `struct path`): for the FUSE server's STATFS of a node.
    ///
    /// # Errors
    /// `EXDEV` for a dentry of another namespace; the file system's.
    #[cfg_attr(not(feature = "fuse"), allow(dead_code))] // the FUSE server's
    pub(crate) fn statfs_dentry(&self, d: &std::sync::Arc<crate::Dentry>) -> Result<StatFs> {
        self.with_dentry(
            crate::namei::AtDir::Dentry(d),
            b"",
            |_, start| Ok(start),
            |d, mnt| Ok(with_mount_flags(d.d_inode.i_op.statfs(&d.d_inode)?, mnt)),
        )
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
        Ok(with_mount_flags(
            f.inode().i_op.statfs(f.inode())?,
            f.mount(),
        ))
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
        let f = self.fdget(fd)?;
        f.inode().i_op.fsync(f.inode(), f.fh(), false)
    }

    /// `fdatasync(2)`: as [`fsync`](Self::fsync).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open or is an `O_PATH` descriptor.
    ///
    /// # References
    /// fdatasync(2); Linux `do_fsync`.
    pub fn fdatasync(&self, fd: Fd) -> Result<()> {
        let f = self.fdget(fd)?;
        f.inode().i_op.fsync(f.inode(), f.fh(), true)
    }
}
