//! `fstat`, `fstatat`, `futimens`, `utimensat`.
//!
//! Linux analogue: fs/stat.c (`vfs_fstatat`, `generic_fillattr`), fs/utimes.c
//! (`do_utimes`, `vfs_utimes`), fs/attr.c (`setattr_prepare`).

use crate::cred::MAY_WRITE;
use crate::inode::{coarse_now, Inode, TimeUpdate};
use crate::namei::getname;
use crate::task::Task;
use crate::types::*;
use crate::variant::Variant;
use crate::{Errno, Result};

fn nsec_valid(ns: i64) -> bool {
    ns == Timespec::UTIME_NOW_NSEC
        || ns == Timespec::UTIME_OMIT_NSEC
        || (0..=999_999_999).contains(&ns)
}

/// Both times `UTIME_OMIT`: the `utimensat` syscall returns 0 at once, checking neither the
/// descriptor, the flags nor the path ("Nothing to do, we must not even check the path").
fn both_omit(times: Option<&[Timespec; 2]>) -> bool {
    times.is_some_and(|t| {
        t[0].tv_nsec == Timespec::UTIME_OMIT_NSEC && t[1].tv_nsec == Timespec::UTIME_OMIT_NSEC
    })
}

impl<V: Variant> Task<V> {
    /// `fstat(2)` (an `O_PATH` descriptor too).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    pub fn fstat(&self, fd: Fd) -> Result<Stat> {
        let f = self.fdget_raw(fd)?;
        Ok(f.inode().stat_marking(V::TEST_BEFORE_SET))
    }

    /// `fstatat(2)` / `newfstatat`: status of `path` relative to `dirfd`; follows a final
    /// symlink unless `AT_SYMLINK_NOFOLLOW`; with `AT_EMPTY_PATH` an empty path means
    /// `dirfd` itself (or the cwd for `AT_FDCWD`).
    ///
    /// # Errors
    /// `EINVAL` (flags other than `AT_SYMLINK_NOFOLLOW`, `AT_NO_AUTOMOUNT`, `AT_EMPTY_PATH`
    /// and the `AT_STATX_*_SYNC` bits, which are accepted and ignored as `vfs_statx` does),
    /// `EBADF`, `ENOENT`, `ENOTDIR`, `EACCES`, `ELOOP`, `ENAMETOOLONG`.
    ///
    /// # References
    /// stat(2); Linux `vfs_fstatat`, `vfs_statx`.
    pub fn fstatat(&self, dirfd: Fd, path: impl AsRef<[u8]>, flags: AtFlags) -> Result<Stat> {
        let allowed = AtFlags::SYMLINK_NOFOLLOW
            | AtFlags::NO_AUTOMOUNT
            | AtFlags::EMPTY_PATH
            | AtFlags::STATX_FORCE_SYNC
            | AtFlags::STATX_DONT_SYNC;
        if !(flags - allowed).is_empty() {
            return Err(Errno::EINVAL);
        }
        let path = getname(path.as_ref(), flags.contains(AtFlags::EMPTY_PATH))?;
        if path.is_empty() {
            return self.with_walk(dirfd, path, |_, start, _| {
                Ok(start.d_inode.stat_marking(V::TEST_BEFORE_SET))
            });
        }
        let follow = !flags.contains(AtFlags::SYMLINK_NOFOLLOW);
        self.with_walk(dirfd, path, |nd, start, _| {
            Ok(nd
                .walk(start, path, follow, false)?
                .d_inode
                .stat_marking(V::TEST_BEFORE_SET))
        })
    }

    /// `futimens(3)`: sets atime and mtime of an open file from `times` (`None` = both now;
    /// `UTIME_NOW`, `UTIME_OMIT` per entry); ctime becomes now. Both `UTIME_OMIT` is a
    /// no-op that succeeds without looking at `fd`.
    ///
    /// # Errors
    /// In Linux's order: `EBADF` (also for an `O_PATH` descriptor), then `EINVAL` (an invalid `tv_nsec`), then `EPERM`
    /// (`times` given and not both `UTIME_NOW`, and the caller neither owns the file nor is
    /// root) or `EACCES` (`None` or both `UTIME_NOW`, and the caller neither owns nor may
    /// write the file).
    ///
    /// # References
    /// utimensat(2); Linux `utimensat` syscall, `do_utimes_fd`, `vfs_utimes`,
    /// `setattr_prepare`.
    pub fn futimens(&self, fd: Fd, times: Option<&[Timespec; 2]>) -> Result<()> {
        if both_omit(times) {
            return Ok(());
        }
        let f = self.fdget(fd)?;
        self.utimes_inode(f.inode(), times)
    }

    /// `utimensat(2)`: as `futimens` on `path` (follows a final symlink unless
    /// `AT_SYMLINK_NOFOLLOW`; `AT_EMPTY_PATH` with an empty path means `dirfd`). Both
    /// `UTIME_OMIT` succeeds at once, checking neither flags nor path.
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` (flags other than those two), walk errors as `fstatat`,
    /// then `EINVAL` (invalid `tv_nsec`), `EACCES`/`EPERM` as `futimens`.
    pub fn utimensat(
        &self,
        dirfd: Fd,
        path: impl AsRef<[u8]>,
        times: Option<&[Timespec; 2]>,
        flags: AtFlags,
    ) -> Result<()> {
        if both_omit(times) {
            return Ok(());
        }
        if !(flags - (AtFlags::SYMLINK_NOFOLLOW | AtFlags::EMPTY_PATH)).is_empty() {
            return Err(Errno::EINVAL);
        }
        let path = getname(path.as_ref(), flags.contains(AtFlags::EMPTY_PATH))?;
        let follow = !flags.contains(AtFlags::SYMLINK_NOFOLLOW);
        self.with_walk(dirfd, path, |nd, start, _| {
            let d = if path.is_empty() {
                start
            } else {
                nd.walk(start, path, follow, false)?
            };
            self.utimes_inode(&d.d_inode, times)
        })
    }

    /// `vfs_utimes` + `setattr_prepare` on one inode: validates the nanoseconds (after the
    /// lookup, as Linux), then the caller's right to set the times.
    fn utimes_inode(&self, inode: &Inode, times: Option<&[Timespec; 2]>) -> Result<()> {
        if let Some(t) = times {
            if !nsec_valid(t[0].tv_nsec) || !nsec_valid(t[1].tv_nsec) {
                return Err(Errno::EINVAL);
            }
        }
        let (a, m) = match times {
            None => (Timespec::UTIME_NOW, Timespec::UTIME_NOW),
            Some(t) => (t[0], t[1]),
        };
        let omit = Timespec::UTIME_OMIT_NSEC;
        let now_ns = Timespec::UTIME_NOW_NSEC;
        if a.tv_nsec == omit && m.tv_nsec == omit {
            return Ok(());
        }
        // ATTR_TIMES_SET: any `times` but "both now" (which vfs_utimes turns into NULL, i.e.
        // ATTR_TOUCH) needs ownership; `UTIME_OMIT` next to `UTIME_NOW` counts as explicit.
        let explicit = !(a.tv_nsec == now_ns && m.tv_nsec == now_ns);
        if !self.cred.owner_or_capable(inode.uid()) {
            if explicit {
                return Err(Errno::EPERM);
            }
            inode.permission(&self.cred, MAY_WRITE)?;
        }
        // setattr_copy_mgtime: ctime becomes the current time, `UTIME_NOW` that same time.
        let pick = |t: Timespec| match t.tv_nsec {
            n if n == omit => TimeUpdate::Keep,
            n if n == now_ns => TimeUpdate::Now,
            _ => TimeUpdate::Set(t),
        };
        inode.set_times(coarse_now(), pick(a), pick(m));
        Ok(())
    }
}
