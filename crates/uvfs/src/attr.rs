//! The attribute calls and their checks: `fchmod`/`fchmodat`, `fchown`/`fchownat`,
//! `truncate`, `faccessat2`.
//!
//! Linux analogue: fs/open.c (`chmod_common`, `do_fchmodat`, `chown_common`,
//! `do_fchownat`, `do_sys_truncate`, `vfs_truncate`, `do_faccessat`,
//! `access_override_creds`), fs/attr.c (`setattr_prepare`, `chown_ok`, `chgrp_ok`,
//! `setattr_should_drop_sgid`, `notify_change`).
//!
//! Each change runs its checks and stores its result under the inode's attribute lock
//! (`Inode::setattr`, Linux: `inode_lock` around `notify_change`), so a check never
//! sees the mode or owner of a half-done change. Lock order: the attribute lock is a leaf.

use crate::cred::{Cred, MAY_WRITE};
use crate::dentry::Dentry;
use crate::inode::Inode;
use crate::mount::{Mount, MountFlags};
use crate::namei::getname;
use crate::namei::AtDir;
use crate::task::Task;
use crate::time::coarse_now;
use crate::types::*;
use crate::variant::Variant;
use crate::{Errno, Result};
use std::sync::Arc;

/// `access` mode: the file exists.
pub const F_OK: u32 = 0;
/// `access` mode: execute (search, for a directory) permission.
pub const X_OK: u32 = 1;
/// `access` mode: write permission.
pub const W_OK: u32 = 2;
/// `access` mode: read permission.
pub const R_OK: u32 = 4;

/// The permission bits chmod may set (`S_IALLUGO`).
const S_IALLUGO: u32 = 0o7777;

/// `in_group_or_capable` with `CAP_FSETID`.
fn in_group_or_capable(cred: &Cred, gid: u32) -> bool {
    cred.in_group(gid) || cred.capable(crate::Caps::FSETID)
}

/// `chmod_common` + `notify_change`: sets the permission bits of `inode` to `mode`.
fn chmod_common(cred: &Cred, inode: &Inode, mode: u32) -> Result<()> {
    // notify_change refuses a mode for symlinks before setattr_prepare looks at the caller.
    if inode.is_symlink() {
        return Err(Errno::EOPNOTSUPP);
    }
    // A file system that decides permissions is asked as it is: Linux's `ATTR_FORCE`
    // (`fuse_do_setattr` without `default_permissions`) skips setattr_prepare's checks.
    let force = inode.fs_permission();
    inode.setattr(coarse_now(), true, |_, uid, gid| {
        if !force && !cred.owner_or_capable(uid) {
            return Err(Errno::EPERM);
        }
        let mut mode = mode & S_IALLUGO;
        // setattr_prepare: "Also check the setgid bit!"
        if !force && !in_group_or_capable(cred, gid) {
            mode &= !S_ISGID;
        }
        Ok((mode, uid, gid))
    })
}

/// `chown_common` + `setattr_prepare` + `notify_change`: sets the owner to `user` and the
/// group to `group` (`u32::MAX` = unchanged).
fn chown_common(cred: &Cred, inode: &Inode, user: u32, group: u32) -> Result<()> {
    let is_dir = inode.is_dir();
    // As in `chmod_common`: `ATTR_FORCE` skips setattr_prepare's checks (chown_ok,
    // chgrp_ok, the kill's ownership and set-group-ID checks), not chown_common's kill.
    let force = inode.fs_permission();
    // setattr_prepare's chown_ok and chgrp_ok (skipped under ATTR_FORCE).
    let owner_ok = |uid: u32, gid: u32| -> Result<()> {
        let new_uid = if user == u32::MAX { uid } else { user };
        let new_gid = if group == u32::MAX { gid } else { group };
        if force {
            return Ok(());
        }
        // chown_ok: the owner may "change" the owner to itself; CAP_CHOWN anything.
        if user != u32::MAX
            && !(uid == cred.uid && new_uid == uid || cred.capable(crate::Caps::CHOWN))
        {
            return Err(Errno::EPERM);
        }
        // chgrp_ok: the owner may pick its file's group or a group it is in.
        if group != u32::MAX
            && !(uid == cred.uid && (new_gid == gid || cred.in_group(new_gid))
                || cred.capable(crate::Caps::CHOWN))
        {
            return Err(Errno::EPERM);
        }
        Ok(())
    };
    // chown_common sets ATTR_KILL_SUID for every non-directory; a file system that decides
    // the kill itself refreshes and recomputes it (`fuse_setattr`), before the lock.
    // notify_change's ATTR_KILL_PRIV: the file capability goes, but only once the chown
    // is allowed (Linux removes it at the end of `setattr_prepare`, after chown_ok and
    // chgrp_ok): checked here against the owner as it is now, and again under the lock
    // below (a chown racing this one decides there).
    if !is_dir {
        owner_ok(inode.uid(), inode.gid())?;
        inode.i_op.kill_priv(inode)?;
    }
    let fs_kill = if is_dir { None } else { inode.fs_setid_kill()? };
    inode.setattr(coarse_now(), false, |mode, uid, gid| {
        let new_uid = if user == u32::MAX { uid } else { user };
        let new_gid = if group == u32::MAX { gid } else { group };
        owner_ok(uid, gid)?;
        // chown_common: ATTR_KILL_SUID, and ATTR_KILL_SGID when `setattr_should_drop_sgid`
        // (group-executable, or the caller outside the file's current group without
        // CAP_FSETID), for every non-directory and whoever the caller is, root included.
        // A file system's own rule (`setid_kill`) replaces it.
        let mut kill = 0;
        if !is_dir {
            kill = S_ISUID;
            if mode & S_IXGRP != 0 || !in_group_or_capable(cred, gid) {
                kill |= S_ISGID;
            }
        }
        let kill = fs_kill.unwrap_or(kill) & mode;
        let mut new_mode = mode & !kill;
        if kill != 0 && !force {
            // notify_change turned the kill into ATTR_MODE, which setattr_prepare checks as
            // a chmod: ownership, and set-group-ID against the new group.
            if !cred.owner_or_capable(uid) {
                return Err(Errno::EPERM);
            }
            if !in_group_or_capable(cred, new_gid) {
                new_mode &= !S_ISGID;
            }
        }
        Ok((new_mode, new_uid, new_gid))
    })
}

impl<V: Variant> Task<V> {
    /// `user_path_at` with the credentials `cred`: the dentry `path` names relative to
    /// `dirfd` (an empty path, already allowed by `getname`, names `dirfd` or the cwd),
    /// following a final symlink when `follow`; runs `f` on it.
    pub(crate) fn lookup_with<R>(
        &self,
        cred: &Cred,
        dirfd: AtDir<'_>,
        path: &[u8],
        follow: bool,
        f: impl FnMut(&Arc<Dentry>, &Mount) -> Result<R>,
    ) -> Result<R> {
        // Before `start` (whose `fdget_raw` records the task's own) and the walk: `cred`
        // (access(2)'s real ids) is this call's caller (`Nameidata::new` records it).
        let start = self.start(dirfd, path)?;
        crate::cred::set_caller(cred);
        // `f` runs once per walk, a second time only after ESTALE (`retry_estale`).
        self.dentry_from(
            cred,
            &start,
            path,
            |nd, start| nd.walk_or_start(start, path, follow),
            f,
        )
    }

    /// `fchmod(2)`: sets the permission bits (`mode & 0o7777`) of the open file `fd`;
    /// stamps the ctime. The caller must own the file (or be root, `CAP_FOWNER`); a
    /// non-root caller outside the file's group loses `S_ISGID` from `mode`.
    ///
    /// # Errors
    /// `EBADF` (`fd` not open), `EPERM` (neither owner nor root).
    ///
    /// # References
    /// chmod(2); Linux `fchmod` syscall, `chmod_common`, `setattr_prepare`.
    pub fn fchmod(&self, fd: Fd, mode: u32) -> Result<()> {
        let f = self.fdget(fd)?;
        // mnt_want_write_file.
        f.mount().want_write()?;
        chmod_common(&self.cred, f.inode(), mode)
    }

    /// `fchmodat2(2)` (and, with `flags` empty, `chmod(2)`/`fchmodat(2)`): as
    /// [`fchmod`](Self::fchmod) on `path` relative to `dirfd`. A final symlink is followed
    /// unless `AT_SYMLINK_NOFOLLOW`; symlinks have no mode of their own to change, so with
    /// that flag a symlink gives `EOPNOTSUPP` (Linux 6.6+, `notify_change`). With
    /// `AT_EMPTY_PATH` an empty path means `dirfd` itself (the cwd for `AT_FDCWD`).
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` (flags other than those two), walk errors (`ENOENT`,
    /// `ENOTDIR`, `EACCES` without search permission, `ELOOP`, `ENAMETOOLONG`, `EBADF`),
    /// `EOPNOTSUPP` (a symlink), `EPERM` (neither owner nor root).
    ///
    /// # References
    /// chmod(2), fchmodat2 (Linux 6.6); Linux `do_fchmodat`, `chmod_common`,
    /// `notify_change`.
    #[doc(alias = "chmod")]
    #[doc(alias = "fchmodat2")]
    pub fn fchmodat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        mode: u32,
        flags: AtFlags,
    ) -> Result<()> {
        let dirfd: AtDir<'_> = dirfd.into();
        if !(flags - (AtFlags::SYMLINK_NOFOLLOW | AtFlags::EMPTY_PATH)).is_empty() {
            return Err(Errno::EINVAL);
        }
        let path = getname(path.path_bytes(), flags.contains(AtFlags::EMPTY_PATH))?;
        let follow = !flags.contains(AtFlags::SYMLINK_NOFOLLOW);
        self.lookup_with(&self.cred, dirfd, path, follow, |d, m| {
            // do_fchmodat: mnt_want_write after the walk.
            m.want_write()?;
            chmod_common(&self.cred, &d.d_inode, mode)
        })
    }

    /// `fchown(2)`: sets the owner to `uid` and the group to `gid` of the open file `fd`
    /// (`u32::MAX`, C's `-1`, leaves that id); stamps the ctime. Only root (`CAP_CHOWN`)
    /// changes the owner; the owner may set the group to one it belongs to. On a
    /// non-directory it clears `S_ISUID`, and `S_ISGID` when group-executable (or when the
    /// caller, not root, is outside the file's group), whoever the caller, even with both
    /// ids `-1`.
    ///
    /// # Errors
    /// `EBADF` (`fd` not open), `EPERM` (changing the owner without being root; setting a
    /// group the caller is not in, or not owning the file; clearing set-ID bits of a file
    /// the caller does not own).
    ///
    /// # References
    /// chown(2); Linux `ksys_fchown`, `chown_common`, `setattr_prepare` (`chown_ok`,
    /// `chgrp_ok`), `notify_change`.
    pub fn fchown(&self, fd: Fd, uid: u32, gid: u32) -> Result<()> {
        let f = self.fdget(fd)?;
        // mnt_want_write_file.
        f.mount().want_write()?;
        chown_common(&self.cred, f.inode(), uid, gid)
    }

    /// `fchownat(2)` (`chown`, `lchown` with `AT_SYMLINK_NOFOLLOW`): as
    /// [`fchown`](Self::fchown) on `path` relative to `dirfd`; with `AT_EMPTY_PATH` an
    /// empty path means `dirfd` itself (the cwd for `AT_FDCWD`).
    ///
    /// # Errors
    /// `EINVAL` (flags other than `AT_SYMLINK_NOFOLLOW`, `AT_EMPTY_PATH`), walk errors
    /// (`ENOENT`, `ENOTDIR`, `EACCES`, `ELOOP`, `ENAMETOOLONG`, `EBADF`), `EPERM` as
    /// `fchown`.
    ///
    /// # References
    /// chown(2); Linux `do_fchownat`, `chown_common`.
    #[doc(alias = "chown")]
    #[doc(alias = "lchown")]
    pub fn fchownat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        uid: u32,
        gid: u32,
        flags: AtFlags,
    ) -> Result<()> {
        let dirfd: AtDir<'_> = dirfd.into();
        if !(flags - (AtFlags::SYMLINK_NOFOLLOW | AtFlags::EMPTY_PATH)).is_empty() {
            return Err(Errno::EINVAL);
        }
        let path = getname(path.path_bytes(), flags.contains(AtFlags::EMPTY_PATH))?;
        let follow = !flags.contains(AtFlags::SYMLINK_NOFOLLOW);
        self.lookup_with(&self.cred, dirfd, path, follow, |d, m| {
            // do_fchownat: mnt_want_write after the walk.
            m.want_write()?;
            chown_common(&self.cred, &d.d_inode, uid, gid)
        })
    }

    /// `truncate(2)`: sets the size of the regular file `path` (relative to the cwd,
    /// following symlinks) to `length` bytes, zero-filling when it grows. Needs write
    /// permission, not an open file. A non-root caller clears `S_ISUID` (and `S_ISGID` as
    /// a write does). Stamps mtime and ctime, even when the size does not change (Linux
    /// 6.18 does).
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` (negative `length`), walk errors (`ENOENT`, `ENOTDIR`,
    /// `EACCES` without search permission, `ELOOP`, `ENAMETOOLONG`), `EISDIR` (a
    /// directory), `EINVAL` (another non-regular file), `EROFS`, `EACCES` (no write
    /// permission), `ETXTBSY` (the file runs: an [`open_exec`](Self::open_exec) file is
    /// open), `EFBIG` (past the maximum file size; unreachable with an `i64` on 64-bit).
    ///
    /// # References
    /// truncate(2); Linux `do_sys_truncate`, `vfs_truncate`, `do_truncate`.
    pub fn truncate(&self, path: impl AsPath, length: i64) -> Result<()> {
        self.truncate_at(Fd::AT_FDCWD.into(), path.path_bytes(), length)
    }

    /// `vfs_truncate`: [`truncate`](Self::truncate) of `path` relative to `at`; an empty
    /// `path` truncates `at` itself (the FUSE server's `setattr` of a size without a file
    /// handle).
    ///
    /// # Errors
    /// As [`truncate`](Self::truncate); `ENOENT` for an empty path with a descriptor.
    pub(crate) fn truncate_at(&self, at: AtDir<'_>, path: &[u8], length: i64) -> Result<()> {
        if length < 0 {
            return Err(Errno::EINVAL);
        }
        let path = getname(path, matches!(at, AtDir::Dentry(_)))?;
        self.lookup_with(&self.cred, at, path, true, |d, m| {
            let inode = &d.d_inode;
            if inode.is_dir() {
                return Err(Errno::EISDIR);
            }
            if !inode.is_reg() {
                return Err(Errno::EINVAL);
            }
            // vfs_truncate: mnt_want_write before the permission check.
            m.want_write()?;
            inode.permission(&self.cred, MAY_WRITE)?;
            // get_write_access: not while the file runs (ETXTBSY).
            inode.with_write_access(|| {
                inode.newsize_ok(length as u64, self.getrlimit_fsize())?;
                let now = coarse_now();
                inode.kill_suid_truncate(&self.cred, now)?;
                inode.truncate_at(length as u64, now, false, None)
            })
        })
    }

    /// `faccessat2(2)` (`access`, `faccessat`: `flags` empty): whether the caller may access
    /// `path` for `mode`, `F_OK` (exists) or an or of `R_OK`, `W_OK`, `X_OK`. Without
    /// `AT_EACCESS` it checks (in the walk too) with the real uid and gid, and with the
    /// permitted capabilities for a real uid 0, none for any other ([`Cred::access_cred`],
    /// Linux `access_override_creds`); with it, with the effective ids and capabilities.
    /// Capabilities override the mode bits as [`Cred::permission`] says. A final symlink is followed unless
    /// `AT_SYMLINK_NOFOLLOW`; `AT_EMPTY_PATH` with an empty path checks `dirfd` itself.
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` (mode bits other than `R_OK | W_OK | X_OK`; flags other
    /// than `AT_EACCESS`, `AT_SYMLINK_NOFOLLOW`, `AT_EMPTY_PATH`), walk errors (`ENOENT`,
    /// `ENOTDIR`, `EACCES` without search permission, `ELOOP`, `ENAMETOOLONG`, `EBADF`),
    /// `EACCES` (access denied).
    ///
    /// # References
    /// access(2), faccessat2 (Linux 5.8); Linux `do_faccessat`,
    /// `access_need_override_creds`, `access_override_creds`.
    #[doc(alias = "access")]
    #[doc(alias = "faccessat")]
    pub fn faccessat2<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        mode: u32,
        flags: AtFlags,
    ) -> Result<()> {
        let dirfd: AtDir<'_> = dirfd.into();
        if mode & !(R_OK | W_OK | X_OK) != 0 {
            return Err(Errno::EINVAL);
        }
        let allowed = AtFlags::EACCESS | AtFlags::SYMLINK_NOFOLLOW | AtFlags::EMPTY_PATH;
        if !(flags - allowed).is_empty() {
            return Err(Errno::EINVAL);
        }
        let path = getname(path.path_bytes(), flags.contains(AtFlags::EMPTY_PATH))?;
        let follow = !flags.contains(AtFlags::SYMLINK_NOFOLLOW);
        let real;
        let cred = if flags.contains(AtFlags::EACCESS) || !self.cred.access_needs_override() {
            &self.cred
        } else {
            real = self.cred.access_cred();
            &real
        };
        // R_OK, W_OK, X_OK are MAY_READ, MAY_WRITE, MAY_EXEC.
        self.lookup_with(cred, dirfd, path, follow, |d, m| {
            let inode = &d.d_inode;
            // do_faccessat: X_OK of a regular file on a `noexec` mount; then the
            // permission; then W_OK of a non-special file on a read-only mount ("SuS v2
            // requires we report a read only fs too").
            if mode & X_OK != 0 && inode.is_reg() && m.flags().contains(MountFlags::NOEXEC) {
                return Err(Errno::EACCES);
            }
            inode.permission(cred, mode | crate::cred::MAY_ACCESS)?;
            let special = matches!(
                inode.mode() & S_IFMT,
                S_IFCHR | S_IFBLK | S_IFIFO | S_IFSOCK
            );
            if mode & W_OK != 0 && !special {
                m.want_write()?;
            }
            Ok(())
        })
    }
}
