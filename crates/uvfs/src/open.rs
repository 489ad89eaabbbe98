//! `openat`, `close`, `dup`/`dup2`/`dup3`, `fcntl`, `close_range`, exec's close-on-exec.
//!
//! Linux analogue: fs/open.c (`do_sys_openat2`, `build_open_flags`, `do_dentry_open`),
//! fs/namei.c (`path_openat`, `open_last_lookups`, `do_open`, `may_open`,
//! `handle_truncate`), fs/file.c (`ksys_dup3`, `close_range`), fs/fcntl.c.

use crate::cred::{MAY_READ, MAY_WRITE};
use crate::dentry::Dentry;
use crate::file::{FMode, File, FileHandle};
use crate::inode::InodeKind;
use crate::namei::{create_locked, getname, mode_strip_sgid, LastType, NAME_MAX};
use crate::task::Task;
use crate::types::*;
use crate::variant::Variant;
use crate::{Errno, Result};
use std::sync::Arc;

/// `close_range` flag: unshare the fd table first.
pub const CLOSE_RANGE_UNSHARE: u32 = 1 << 1;
/// `close_range` flag: set close-on-exec instead of closing.
pub const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;
/// `F_GETFD`/`F_SETFD` flag bit: close-on-exec.
pub const FD_CLOEXEC: i32 = 1;

/// A `fcntl(2)` command with its argument.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fcntl {
    /// `F_DUPFD`: duplicate to the lowest free fd `>= arg`.
    DupFd(i32),
    /// `F_DUPFD_CLOEXEC`: as `DupFd`, with close-on-exec set.
    DupFdCloexec(i32),
    /// `F_GETFD`: returns `FD_CLOEXEC` or 0.
    GetFd,
    /// `F_SETFD`: sets close-on-exec from bit `FD_CLOEXEC`.
    SetFd(i32),
    /// `F_GETFL`: returns the access mode and status flags.
    GetFl,
    /// `F_SETFL`: changes `O_APPEND`, `O_NONBLOCK` (`O_ASYNC`, `O_DIRECT`, `O_NOATIME`
    /// are accepted and stored); other bits are ignored.
    SetFl(u32),
}

/// Flags `F_SETFL` may change (`SETFL_MASK`).
const SETFL_MASK: u32 = OpenFlags::APPEND.bits()
    | OpenFlags::NONBLOCK.bits()
    | OpenFlags::ASYNC.bits()
    | OpenFlags::DIRECT.bits()
    | OpenFlags::NOATIME.bits();

/// The flags `open` knows (`VALID_OPEN_FLAGS`, include/linux/fcntl.h); other bits are
/// ignored and not kept in the file's flags (so `F_GETFL` never shows them).
const VALID_OPEN_FLAGS: OpenFlags = OpenFlags::ACCMODE
    .union(OpenFlags::CREAT)
    .union(OpenFlags::EXCL)
    .union(OpenFlags::NOCTTY)
    .union(OpenFlags::TRUNC)
    .union(OpenFlags::APPEND)
    .union(OpenFlags::NONBLOCK)
    .union(OpenFlags::DSYNC)
    .union(OpenFlags::ASYNC)
    .union(OpenFlags::DIRECT)
    .union(OpenFlags::LARGEFILE)
    .union(OpenFlags::DIRECTORY)
    .union(OpenFlags::NOFOLLOW)
    .union(OpenFlags::NOATIME)
    .union(OpenFlags::CLOEXEC)
    .union(OpenFlags::SYNC)
    .union(OpenFlags::PATH)
    .union(OpenFlags::TMPFILE);

/// `build_open_flags`: the flag checks done before anything else.
///
/// # Errors
/// `EINVAL` for `O_CREAT|O_DIRECTORY` (Linux 6.4+); `EOPNOTSUPP` for `O_PATH` and
/// `O_TMPFILE` (not supported yet).
fn build_open_flags(flags: OpenFlags) -> Result<()> {
    if flags.contains(OpenFlags::CREAT | OpenFlags::DIRECTORY) {
        return Err(Errno::EINVAL);
    }
    if flags.intersects(OpenFlags::PATH) || flags.contains(OpenFlags::TMPFILE) {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
}

impl<V: Variant> Task<V> {
    /// `openat(2)`: opens (and with `O_CREAT` maybe creates) `path`, returns the lowest free
    /// descriptor.
    ///
    /// Supported: access modes, `O_CREAT`, `O_EXCL`, `O_TRUNC`, `O_APPEND`, `O_DIRECTORY`,
    /// `O_NOFOLLOW`, `O_CLOEXEC`, `O_NONBLOCK`; `mode & ~umask & 0o7777` for new files. Other
    /// known flags are accepted and ignored, unknown bits ignored, as Linux `open` does.
    ///
    /// # Errors
    /// `EINVAL` (`O_CREAT|O_DIRECTORY`, interior NUL), `EOPNOTSUPP` (`O_PATH`, `O_TMPFILE`:
    /// not supported yet), `ENAMETOOLONG`, `ENOENT` (missing; empty path; dangling symlink
    /// without `O_CREAT`), `EMFILE` (no descriptor below the limit; checked before the walk,
    /// so nothing is created), `EBADF` (dirfd), `ENOTDIR`, `EISDIR` (directory opened for
    /// writing or with `O_TRUNC`, `O_CREAT` on a directory or a trailing slash), `EEXIST`
    /// (`O_CREAT|O_EXCL` on an existing name, symlinks included), `ELOOP` (`O_NOFOLLOW` on a
    /// symlink; too many symlinks), `EACCES`, `EPERM` (`O_NOATIME` on a file the caller
    /// neither owns nor is root for).
    ///
    /// # References
    /// open(2); Linux `do_sys_openat2`, `path_openat`, `do_open`, `may_open`.
    #[doc(alias = "open")]
    pub fn openat(
        &self,
        dirfd: Fd,
        path: impl AsRef<[u8]>,
        flags: OpenFlags,
        mode: u32,
    ) -> Result<Fd> {
        build_open_flags(flags)?;
        let path = getname(path.as_ref(), false)?;
        let cloexec = flags.contains(OpenFlags::CLOEXEC);
        let fd = self.files.alloc_fd(0, cloexec)?;
        match self.do_filp_open(dirfd, path, flags, mode) {
            Ok(file) => {
                self.files.fd_install(fd, file);
                Ok(Fd(fd as i32))
            }
            Err(e) => {
                self.files.put_unused_fd(fd);
                Err(e)
            }
        }
    }

    /// `open(2)`: `openat(AT_FDCWD, ..)`.
    pub fn open(&self, path: impl AsRef<[u8]>, flags: OpenFlags, mode: u32) -> Result<Fd> {
        self.openat(Fd::AT_FDCWD, path, flags, mode)
    }

    /// Opens `path` and returns the file without installing a descriptor (`filp_open`).
    ///
    /// # Errors
    /// As [`openat`](Self::openat), without `EMFILE`.
    pub fn filp_open(
        &self,
        dirfd: Fd,
        path: impl AsRef<[u8]>,
        flags: OpenFlags,
        mode: u32,
    ) -> Result<FileHandle<V>> {
        build_open_flags(flags)?;
        let path = getname(path.as_ref(), false)?;
        self.do_filp_open(dirfd, path, flags, mode)
    }

    fn do_filp_open(
        &self,
        dirfd: Fd,
        path: &[u8],
        flags: OpenFlags,
        mode: u32,
    ) -> Result<FileHandle<V>> {
        // vfs_prepare_mode: set-group-ID is stripped (mode_strip_sgid) from the mode as
        // given, before the umask.
        let raw_mode = mode & 0o7777;
        let mode = raw_mode & !self.current_umask();
        let (p, created) = self.with_walk(dirfd, path, |nd, start, _| {
            let (d, created) = if flags.contains(OpenFlags::CREAT) {
                let mut start = start;
                let mut path: &[u8] = path;
                loop {
                    let last = nd.walk_parent(start, path)?;
                    if last.ty != LastType::Norm {
                        // `.`, `..`, `/` exist and are directories (Linux `do_open`:
                        // O_EXCL's EEXIST is checked before EISDIR).
                        return Err(if flags.contains(OpenFlags::EXCL) {
                            Errno::EEXIST
                        } else {
                            Errno::EISDIR
                        });
                    }
                    if last.trailing_slash {
                        // `open_last_lookups`: O_CREAT with a trailing slash.
                        return Err(Errno::EISDIR);
                    }
                    if last.name.len() > NAME_MAX {
                        return Err(Errno::ENAMETOOLONG);
                    }
                    let dir_inode = &last.dir.d_inode;
                    let dir = dir_inode.dir().ok_or(Errno::ENOTDIR)?;
                    // Fast path: an existing name needs no directory lock (as Linux's
                    // lookup_open with a positive cached dentry).
                    let found = match dir.lookup(last.name, nd.guard) {
                        Some(d) => Some(d),
                        None => {
                            let mut dl = dir.lock();
                            match dl.get(last.name) {
                                Some(_) => None, // raced with a create: retry lockless
                                None => {
                                    if dl.inner.dead {
                                        return Err(Errno::ENOENT);
                                    }
                                    dir_inode
                                        .permission(nd.cred, MAY_WRITE | crate::cred::MAY_EXEC)?;
                                    let m = mode & mode_strip_sgid(nd.cred, dir_inode, raw_mode);
                                    let d = create_locked(
                                        self,
                                        last.dir,
                                        &mut dl,
                                        last.name,
                                        S_IFREG | m,
                                        InodeKind::Reg(Default::default()),
                                    )?;
                                    drop(dl);
                                    break (Some(d), true);
                                }
                            }
                        }
                    };
                    let Some(d) = found else { continue };
                    if flags.contains(OpenFlags::EXCL) {
                        return Err(Errno::EEXIST);
                    }
                    if d.d_inode.is_symlink() {
                        if flags.contains(OpenFlags::NOFOLLOW) {
                            return Err(Errno::ELOOP);
                        }
                        nd.count_link()?;
                        let InodeKind::Symlink(body) = &d.d_inode.kind else {
                            unreachable!("is_symlink")
                        };
                        if body.is_empty() {
                            return Err(Errno::ENOENT);
                        }
                        start = last.dir;
                        path = body;
                        continue;
                    }
                    if d.d_inode.is_dir() {
                        return Err(Errno::EISDIR);
                    }
                    break (Some(d.clone()), false);
                }
            } else {
                let last = nd.walk_parent(start, path)?;
                let d = nd.lookup_last(
                    last,
                    !flags.contains(OpenFlags::NOFOLLOW),
                    flags.contains(OpenFlags::DIRECTORY),
                )?;
                (Some(d.clone()), false)
            };
            let d: Arc<Dentry> = d.ok_or(Errno::ENOENT)?;
            Ok((d, created))
        })?;
        self.do_open(p, flags, created)
    }

    /// `do_open` + `may_open` + `vfs_open`: checks access to the looked-up file and builds
    /// the `File`.
    fn do_open(&self, p: Arc<Dentry>, flags: OpenFlags, created: bool) -> Result<FileHandle<V>> {
        let inode = &p.d_inode;
        let acc = flags.access_mode();
        let mut acc_mode = match acc {
            0 => MAY_READ,
            1 => MAY_WRITE,
            _ => MAY_READ | MAY_WRITE,
        };
        if flags.contains(OpenFlags::TRUNC) {
            acc_mode |= MAY_WRITE;
        }
        if flags.contains(OpenFlags::DIRECTORY) && !inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        match &inode.kind {
            InodeKind::Symlink(_) => return Err(Errno::ELOOP),
            InodeKind::Dir(_) if acc_mode & MAY_WRITE != 0 => return Err(Errno::EISDIR),
            _ => {}
        }
        if !created {
            inode.permission(&self.cred, acc_mode)?;
        }
        // may_open: O_NOATIME only for the owner or CAP_FOWNER (a file just created is the
        // caller's own).
        if flags.contains(OpenFlags::NOATIME) && !self.cred.owner_or_capable(inode.uid()) {
            return Err(Errno::EPERM);
        }
        // OPEN_FMODE: access mode 3 grants neither read nor write.
        let mut fmode = FMode::LSEEK | FMode::PREAD | FMode::PWRITE;
        if acc == 0 || acc == 2 {
            fmode |= FMode::READ;
        }
        if acc == 1 || acc == 2 {
            fmode |= FMode::WRITE;
        }
        if inode.is_dir() {
            fmode -= FMode::PWRITE;
        }
        let truncate = flags.contains(OpenFlags::TRUNC) && inode.is_reg() && !created;
        // build_open_flags drops unknown bits and O_CLOEXEC; do_dentry_open drops the
        // open-time-only flags.
        let stored = (flags & VALID_OPEN_FLAGS)
            - (OpenFlags::CREAT
                | OpenFlags::EXCL
                | OpenFlags::NOCTTY
                | OpenFlags::TRUNC
                | OpenFlags::CLOEXEC);
        // The file first (it can fail only with an ablation variant's ENFILE), then the
        // truncation, so that a failed open leaves the data alone.
        let file = File::open_handle(p, fmode, stored | OpenFlags::LARGEFILE, self.cred_id)?;
        if truncate {
            // handle_truncate -> do_truncate: a non-root caller clears set-ID bits as a
            // write does (`dentry_needs_remove_privs`), even on an empty file.
            file.inode()
                .kill_suid(&self.cred, crate::inode::coarse_now());
            file.inode().truncate(0)?;
        }
        Ok(file)
    }

    /// Installs `file` at the lowest free descriptor (for handles from
    /// [`filp_open`](Self::filp_open)).
    ///
    /// # Errors
    /// `EMFILE`.
    pub fn install_file(&self, file: FileHandle<V>, cloexec: bool) -> Result<Fd> {
        self.files.install(file, 0, cloexec).map(|fd| Fd(fd as i32))
    }

    /// `close(2)`.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    ///
    /// # References
    /// close(2); Linux `close_fd`, `file_close_fd`, `filp_close`.
    pub fn close(&self, fd: Fd) -> Result<()> {
        self.files.close_fd(fd.0)
    }

    /// `dup(2)`: the lowest free descriptor, referring to the same open file.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open; `EMFILE` if no descriptor is free below the limit.
    pub fn dup(&self, fd: Fd) -> Result<Fd> {
        self.files.dup_from(fd.0, 0, false).map(|fd| Fd(fd as i32))
    }

    /// `dup2(2)`: makes `newfd` refer to `oldfd`'s open file, closing `newfd` first;
    /// `oldfd == newfd` returns `newfd` if it is open. Clears close-on-exec on `newfd`.
    ///
    /// # Errors
    /// `EBADF` (`oldfd` not open, `newfd` negative or at/above the limit), `EBUSY` (`newfd`
    /// reserved by a concurrent open).
    pub fn dup2(&self, oldfd: Fd, newfd: Fd) -> Result<Fd> {
        if oldfd == newfd {
            // Validity only: `fdget` takes no reference on a private table.
            drop(self.fdget(oldfd)?);
            return Ok(newfd);
        }
        self.files.dup2(oldfd.0, newfd.0, false).map(Fd)
    }

    /// `dup3(2)`: as `dup2` but `oldfd == newfd` is `EINVAL` and `O_CLOEXEC` may be given.
    ///
    /// # Errors
    /// `EINVAL` (flags other than `O_CLOEXEC`; `oldfd == newfd`), else as `dup2`.
    pub fn dup3(&self, oldfd: Fd, newfd: Fd, flags: OpenFlags) -> Result<Fd> {
        if !(flags - OpenFlags::CLOEXEC).is_empty() || oldfd == newfd {
            return Err(Errno::EINVAL);
        }
        self.files
            .dup2(oldfd.0, newfd.0, flags.contains(OpenFlags::CLOEXEC))
            .map(Fd)
    }

    /// `fcntl(2)` for descriptor and status-flag commands. Returns the command's result
    /// (new fd, flags, or 0).
    ///
    /// # Errors
    /// `EBADF` (`fd` not open), `EINVAL` (`F_DUPFD` argument negative or at/above the
    /// limit), `EMFILE` (no free descriptor), `EPERM` (`F_SETFL` turning `O_NOATIME` on for
    /// a file the caller neither owns nor is root for).
    ///
    /// # References
    /// fcntl(2); Linux `do_fcntl`, `f_dupfd`, `setfl`.
    pub fn fcntl(&self, fd: Fd, cmd: Fcntl) -> Result<i32> {
        match cmd {
            Fcntl::DupFd(min) | Fcntl::DupFdCloexec(min) => {
                // EBADF before EINVAL, as Linux (`fdget_raw` before `f_dupfd`).
                drop(self.fdget(fd)?);
                let min = u32::try_from(min).map_err(|_| Errno::EINVAL)?;
                if min >= self.files.rlimit() {
                    return Err(Errno::EINVAL);
                }
                let cloexec = matches!(cmd, Fcntl::DupFdCloexec(_));
                self.files.dup_from(fd.0, min, cloexec).map(|n| n as i32)
            }
            Fcntl::GetFd => Ok(if self.files.get_cloexec(fd.0)? {
                FD_CLOEXEC
            } else {
                0
            }),
            Fcntl::SetFd(arg) => self
                .files
                .set_cloexec(fd.0, arg & FD_CLOEXEC != 0)
                .map(|_| 0),
            Fcntl::GetFl => {
                let f = self.fdget(fd)?;
                Ok(f.flags().bits() as i32)
            }
            Fcntl::SetFl(arg) => {
                let f = self.fdget(fd)?;
                let old = f.flags().bits();
                // setfl: turning O_NOATIME on is for the owner or CAP_FOWNER only.
                let noatime = OpenFlags::NOATIME.bits();
                if arg & noatime != 0
                    && old & noatime == 0
                    && !self.cred.owner_or_capable(f.inode().uid())
                {
                    return Err(Errno::EPERM);
                }
                let new = (arg & SETFL_MASK) | (old & !SETFL_MASK);
                if new != old {
                    f.set_flags(OpenFlags::from_bits_retain(new));
                }
                Ok(0)
            }
        }
    }

    /// `close_range(2)`: closes (or with `CLOSE_RANGE_CLOEXEC` marks close-on-exec) every
    /// open descriptor in `first ..= last`; `CLOSE_RANGE_UNSHARE` first gives this task a
    /// private copy of a shared table.
    ///
    /// # Errors
    /// `EINVAL` for unknown flags or `first > last`.
    pub fn close_range(&mut self, first: u32, last: u32, flags: u32) -> Result<()> {
        if flags & !(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC) != 0 || first > last {
            return Err(Errno::EINVAL);
        }
        if flags & CLOSE_RANGE_UNSHARE != 0 {
            self.unshare_files();
        }
        if flags & CLOSE_RANGE_CLOEXEC != 0 {
            self.files.set_cloexec_range(first, last);
        } else {
            self.files.close_range(first, last);
        }
        Ok(())
    }

    /// The file-descriptor part of `execve`: unshares the fd table and closes every
    /// close-on-exec descriptor (`do_close_on_exec`).
    pub fn exec(&mut self) {
        self.unshare_files();
        self.files.close_on_exec();
    }
}
