//! Creating names: `mkdirat`, `mknodat`, `symlinkat` (with `readlinkat`), `linkat`.
//!
//! Linux analogue: fs/namei.c (`filename_create`, `do_mkdirat`, `do_mknodat`,
//! `do_symlinkat`, `do_linkat`), fs/stat.c (`do_readlinkat`).

use super::*;

/// `WHITEOUT_DEV`: a character device 0:0 is an overlayfs whiteout, which needs no
/// `CAP_MKNOD`.
const WHITEOUT_DEV: u32 = 0;

/// A new inode for `dir` (on mount `mnt`) from the file system owning it
/// ([`FileSystem::create`]).
///
/// # Errors
/// Those of [`FileSystem::create`] (tmpfs: `ENOSPC` when the mount's inodes or pages are
/// used up).
///
/// [`FileSystem::create`]: crate::fs::FileSystem::create
pub(crate) fn new_inode(
    mnt: &Mount,
    dir: &Inode,
    name: &[u8],
    args: NewInode<'_>,
) -> Result<Arc<Inode>> {
    let sb = &mnt.mnt_sb;
    sb.s_op.create(sb.s_dev, dir, name, args)
}

/// Creates a new inode named `last.name` in the locked directory `dl` of `last.dir`
/// (`shmem_mknod`/`shmem_symlink` + `d_instantiate`). Checks nothing but the link count.
/// `open`: the flags of the `open(O_CREAT)` making it ([`NewInode::open`]), else empty.
pub(crate) fn create_locked<V: Variant>(
    task: &Task<V>,
    last: &Last<'_, '_>,
    dl: &mut DirLocked<'_>,
    mode: u32,
    (rdev, target): (u64, Option<&[u8]>),
    open: crate::types::OpenFlags,
) -> Result<Arc<Dentry>> {
    let (mnt, parent, name) = (last.mnt, last.dir, last.name);
    let dir = &parent.d_inode;
    let is_dir = mode & S_IFMT == S_IFDIR;
    if is_dir && dir.nlink() == LINK_MAX {
        return Err(Errno::EMLINK);
    }
    let (gid, mode) = inode_init_owner(&task.cred, dir, mode, is_dir);
    // shmem_mknod: the new inode gets the coarse time, the directory its own current time
    // (a fine-grained one if its ctime was queried in this tick).
    let now = coarse_now();
    // The file system's errors (tmpfs: ENOSPC from the mount's nr_inodes / size limits,
    // `shmem_reserve_inode`) after every other check, as in Linux.
    let args = NewInode {
        mode,
        uid: task.cred.uid,
        gid,
        rdev,
        target,
        now,
        open,
    };
    // The directory's ENOSPC (its cookies used up) before the file system allocates.
    let cookie = dl.next_cookie(name)?;
    if dir.needs_revalidate() {
        // The file system may block (a FUSE request): not pinned meanwhile.
        dl.unpin();
    }
    let inode = new_inode(mnt, dir, name, args)?;
    let name: Name = Arc::from(name);
    let d = Dentry::new_arc(inode, Some(parent), name.clone(), cookie);
    d_add(parent, dl, name, d.clone(), cookie);
    if is_dir {
        dir.add_nlink(1, None);
    }
    dir.touch_mtime_ctime(now);
    Ok(d)
}

impl<V: Variant> Task<V> {
    /// `filename_create` + `may_create` for a new name at `dirfd`/`path`: walks to the
    /// parent, locks it, checks that the last component is a plain new name that may be
    /// created there, and runs `f` with the parent and its lock. A trailing slash is allowed
    /// only for directories (`dir`), as `mkdir("d/")`.
    ///
    /// # Errors
    /// `EEXIST` (`.`, `..`, `/` or an existing name), `ENAMETOOLONG`, `ENOTDIR`, `ENOENT` (a
    /// trailing slash on a non-directory), the walk's, `may_create`'s, and `f`'s.
    fn filename_create<R>(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        dir: bool,
        mut f: impl FnMut(&Last<'_, '_>, &mut DirLocked<'_>) -> Result<R>,
    ) -> Result<R> {
        // `f` runs once per walk, a second time only after ESTALE (`retry_estale`).
        self.with_parent(dirfd, path, |last| {
            if last.ty != LastType::Norm {
                return Err(Errno::EEXIST);
            }
            if last.name.len() > NAME_MAX {
                return Err(Errno::ENAMETOOLONG);
            }
            let d = last.dir.dir().ok_or(Errno::ENOTDIR)?;
            let mut dl = d.lock_name(last.name);
            if lookup_locked(last.dir, &mut dl, last.name)?.is_some() {
                return Err(Errno::EEXIST);
            }
            if last.trailing_slash && !dir {
                return Err(Errno::ENOENT);
            }
            // filename_create: a read-only mount is reported after the lookup's errors.
            last.mnt.want_write()?;
            may_create(&self.cred, &last.dir.d_inode, dl.dead())?;
            f(last, &mut dl)
        })
    }

    /// `mkdirat(2)`: creates directory `path` with `mode & ~umask & 0o1777` (set-user-ID and
    /// set-group-ID in `mode` are ignored; setgid comes only from a setgid parent).
    ///
    /// # Errors
    /// `EEXIST` (exists, or `.`/`..`/`/`), `ENOENT` (missing parent, removed parent),
    /// `ENOTDIR`, `EACCES`, `ENAMETOOLONG`, `ELOOP`, `EBADF` (dirfd), `EMLINK`.
    ///
    /// # References
    /// mkdir(2); Linux `do_mkdirat`, `filename_create`, `shmem_mkdir`.
    pub fn mkdirat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        mode: u32,
    ) -> Result<()> {
        let dirfd: AtDir<'_> = dirfd.into();
        let path = getname(path.path_bytes(), false)?;
        // vfs_mkdir keeps only S_IRWXUGO | S_ISVTX of `mode`: set-user-ID and set-group-ID
        // are dropped (a subdirectory gets S_ISGID only from a setgid parent).
        let mode = S_IFDIR | (mode & 0o1777 & !self.current_umask());
        self.filename_create(dirfd, path, true, |last, dl| {
            create_locked(self, last, dl, mode, (0, None), OpenFlags::empty()).map(drop)
        })
    }

    /// `symlinkat(2)`: creates symlink `linkpath` pointing to `target` (stored as given).
    ///
    /// # Errors
    /// `ENOENT` (empty target, missing parent, or a trailing slash on `linkpath`),
    /// `ENAMETOOLONG` (target of 4096 bytes or more, long name), `EEXIST`, `ENOTDIR`,
    /// `EACCES`, `ELOOP`, `EBADF`.
    ///
    /// # References
    /// symlink(2); Linux `do_symlinkat`, `shmem_symlink`.
    pub fn symlinkat<'a>(
        &self,
        target: impl AsPath,
        dirfd: impl Into<AtDir<'a>>,
        linkpath: impl AsPath,
    ) -> Result<()> {
        let dirfd: AtDir<'_> = dirfd.into();
        let target = getname(target.path_bytes(), false)?;
        let path = getname(linkpath.path_bytes(), false)?;
        self.filename_create(dirfd, path, false, |last, dl| {
            let mode = S_IFLNK | 0o777;
            create_locked(self, last, dl, mode, (0, Some(target)), OpenFlags::empty())?;
            Ok(())
        })
    }

    /// `readlinkat(2)`: copies the target of symlink `path` into `buf` (truncated, no NUL);
    /// returns the number of bytes copied.
    ///
    /// # Errors
    /// `EINVAL` if `buf` is empty or `path` is not a symlink; `ENOENT` for an empty `path`
    /// when `dirfd` is not a symlink (an empty path means `dirfd` itself, as Linux); walk
    /// errors as `fstatat`.
    ///
    /// # References
    /// readlink(2); Linux `do_readlinkat`.
    pub fn readlinkat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        buf: &mut [u8],
    ) -> Result<usize> {
        let dirfd: AtDir<'_> = dirfd.into();
        if buf.is_empty() {
            return Err(Errno::EINVAL);
        }
        // LOOKUP_EMPTY: an empty path reads the symlink `dirfd` names (an `O_PATH|O_NOFOLLOW`
        // descriptor); anything else is then ENOENT rather than EINVAL.
        let path = getname(path.path_bytes(), true)?;
        self.with_walk(dirfd, path, |nd, start| {
            let d = if path.is_empty() {
                start
            } else {
                nd.walk(start, path, false, false)?
            };
            let not_link = if path.is_empty() {
                Errno::ENOENT
            } else {
                Errno::EINVAL
            };
            let i = &d.d_inode;
            if !i.is_symlink() {
                return Err(not_link);
            }
            // The file system's error (a FUSE server's READLINK) as is; read unpinned when
            // it may block (`link_body`).
            let t = nd.link_body(d)?;
            let n = t.len().min(buf.len());
            buf[..n].copy_from_slice(&t[..n]);
            d.d_inode.touch_atime();
            Ok(n)
        })
    }

    /// `linkat(2)`: gives the file at `oldpath` the new name `newpath` (a hard link).
    ///
    /// `flags`: `AT_SYMLINK_FOLLOW` follows a final symlink of `oldpath` (by default the
    /// link itself gets the new name); `AT_EMPTY_PATH` with an empty `oldpath` links the file
    /// `olddirfd` refers to. A successful link stamps the inode's ctime and gives the new
    /// parent's mtime and ctime the same time (`shmem_link`).
    ///
    /// Behaves as Linux with the namespace's `fs.protected_hardlinks`
    /// ([`Mount::set_protected_hardlinks`](crate::Mount::set_protected_hardlinks); on by
    /// default, the common setting): with it on, a caller who is neither the file's owner nor
    /// root may link only a regular file that is neither set-user-ID nor
    /// set-group-ID-and-group-executable and that it may read and write.
    ///
    /// # Errors
    /// Checked in Linux's order:
    /// - `EINVAL`: flags other than `AT_SYMLINK_FOLLOW | AT_EMPTY_PATH`.
    /// - `ENOENT`: empty `oldpath` without `AT_EMPTY_PATH`, or `newpath` empty; `AT_EMPTY_PATH`
    ///   with a relative (or empty) `oldpath` and a real `olddirfd` that was opened with
    ///   other credentials than the caller's current ones (another task's, or before a
    ///   `set_cred` or `fork`), unless the caller is root (`CAP_DAC_READ_SEARCH`); a missing
    ///   component of either path; `newpath` with a trailing slash that does not exist; the
    ///   new parent removed; the file has no links left (unlinked, and not an `O_TMPFILE`
    ///   file opened without `O_EXCL`).
    /// - `ENOTDIR`, `ELOOP`, `ENAMETOOLONG`, `EACCES` (search): from the walks; `ENOTDIR` also
    ///   for `oldpath` with a trailing slash naming a non-directory.
    /// - `EBADF`: a relative path with a bad dirfd.
    /// - `EEXIST`: `newpath` exists (also as a dangling symlink, or `.`, `..`, `/`).
    /// - `EXDEV`: a descriptor of another uvfs namespace (another mount).
    /// - `EPERM`: `protected_hardlinks` refuses (above); the file is a directory.
    /// - `EACCES`: no write and search permission on the new parent.
    /// - `EMLINK`: the link count would pass `u32::MAX` (tmpfs has no lower limit).
    ///
    /// Credentials are compared by identity as Linux compares `f_cred` with
    /// `current_cred()` (6.10+): a task's credentials are the same object for its threads
    /// (`clone_thread`) and a new one after `fork` and `set_cred`, even with equal ids.
    /// (Linux's `execve` also prepares new credentials; uvfs's `exec` models only the
    /// descriptor table and keeps them.)
    ///
    /// # References
    /// link(2); Linux `do_linkat`, `may_linkat`, `safe_hardlink_source`, `vfs_link`,
    /// `shmem_link`; Documentation/admin-guide/sysctl/fs.rst (`protected_hardlinks`).
    #[doc(alias = "link")]
    pub fn linkat<'a>(
        &self,
        olddirfd: impl Into<AtDir<'a>>,
        oldpath: impl AsPath,
        newdirfd: impl Into<AtDir<'a>>,
        newpath: impl AsPath,
        flags: AtFlags,
    ) -> Result<()> {
        let olddirfd: AtDir<'_> = olddirfd.into();
        let newdirfd: AtDir<'_> = newdirfd.into();
        if !(flags - (AtFlags::SYMLINK_FOLLOW | AtFlags::EMPTY_PATH)).is_empty() {
            return Err(Errno::EINVAL);
        }
        let empty_ok = flags.contains(AtFlags::EMPTY_PATH);
        let oldpath = getname(oldpath.path_bytes(), empty_ok)?;
        // filename_lookup of the source, to its final dentry (its errors win over any of
        // the target's).
        let ostart = self.start(olddirfd, oldpath)?;
        if let (true, Start::File(f)) = (empty_ok, &ostart) {
            // path_init with LOOKUP_LINKAT_EMPTY: the descriptor was opened with the
            // caller's current credentials, or the caller has CAP_DAC_READ_SEARCH.
            if f.hot().f_cred_id != self.cred_id && !self.cred.capable(crate::Caps::DAC_READ_SEARCH)
            {
                return Err(Errno::ENOENT);
            }
        }
        let follow = flags.contains(AtFlags::SYMLINK_FOLLOW);
        let newpath = newpath.path_bytes();
        // `retry_estale`: both walks again, as Linux's `do_linkat` (a source unlinked by
        // another task between the walk and the LINK, on hostfs or an NFS-style server).
        let r = self.link_once(&ostart, oldpath, follow, newdirfd, newpath);
        retry_estale(r, || {
            self.link_once(&ostart, oldpath, follow, newdirfd, newpath)
        })
    }

    /// One run of [`linkat`](Self::linkat) after its checks of the arguments: the old
    /// path's walk (`filename_lookup`, following a final symlink with `follow`), then the
    /// new name's `filename_create` and the link.
    fn link_once(
        &self,
        ostart: &Start<'_, V>,
        oldpath: &[u8],
        follow: bool,
        newdirfd: AtDir<'_>,
        newpath: &[u8],
    ) -> Result<()> {
        // A walk that leaves its pin for a file system that may block (`Unlazy`).
        let (old, old_mnt, protected): (Arc<Dentry>, u64, bool) =
            self.walk_from(&self.cred, ostart, |nd, start| {
                let d = nd.walk(start, oldpath, follow, false)?.clone();
                Ok((d, nd.mnt.mnt_id, nd.root.mnt.protected_hardlinks()))
            })?;
        // filename_create of the target (its name's errors after the old path's, as
        // `do_linkat`'s); the LINK after the walk, unpinned, where the file system may
        // block (`with_parent_once`).
        let newpath = getname(newpath, false)?;
        self.with_parent_once(newdirfd, newpath, |nl| {
            if nl.ty != LastType::Norm {
                return Err(Errno::EEXIST);
            }
            if nl.name.len() > NAME_MAX {
                return Err(Errno::ENAMETOOLONG);
            }
            let ndir_i = &nl.dir.d_inode;
            let ndir = nl.dir.dir().ok_or(Errno::ENOTDIR)?;
            let mut dl = ndir.lock_name(nl.name);
            if lookup_locked(nl.dir, &mut dl, nl.name)?.is_some() {
                return Err(Errno::EEXIST);
            }
            if nl.trailing_slash || dl.dead() {
                return Err(Errno::ENOENT);
            }
            // filename_create's mnt_want_write, then do_linkat's same-mount check.
            nl.mnt.want_write()?;
            let oi = &old.d_inode;
            if old_mnt != nl.mnt.mnt_id {
                return Err(Errno::EXDEV);
            }
            may_linkat(&self.cred, oi, protected)?;
            ndir_i.permission(&self.cred, MAY_WRITE | MAY_EXEC)?;
            if oi.is_dir() {
                return Err(Errno::EPERM);
            }
            // shmem_link: the inode's new ctime, which the directory's mtime and ctime take
            // (from the directory's current time, so its change shows too; see `unlinkat`).
            let now = ndir_i.current_time(coarse_now());
            // The directory's ENOSPC (its cookies used up) before the file system commits.
            let cookie = dl.next_cookie(nl.name)?;
            if ndir_i.needs_revalidate() {
                // The file system may block (a FUSE LINK): not pinned meanwhile.
                dl.unpin();
            }
            let t = oi.link_inc(now, || ndir_i.i_op.link(ndir_i, nl.name, oi))?;
            let name: Name = Arc::from(nl.name);
            let d = Dentry::new_arc(oi.clone(), Some(nl.dir), name.clone(), cookie);
            d_add(nl.dir, &mut dl, name, d, cookie);
            ndir_i.touch_mtime_ctime(t);
            Ok(())
        })
    }
}

impl<V: Variant> Task<V> {
    /// `mknodat(2)`: creates a file of type `mode & S_IFMT` named `path`, with permission
    /// bits `mode & 0o7777 & ~umask`:
    /// - `S_IFREG` or 0: an empty regular file (as `O_CREAT|O_EXCL`, no descriptor);
    /// - `S_IFIFO`, `S_IFSOCK`: an inode of that type (`st_rdev` 0);
    /// - `S_IFCHR`, `S_IFBLK`: a device node with `st_rdev` = `dev`; root only, except the
    ///   character device 0:0 (an overlayfs whiteout).
    ///
    /// `dev` is a `dev_t` as `makedev` makes it; the system call takes 32 bits, so a larger
    /// value is `EINVAL` (as glibc's `mknodat` checks). uvfs has no pipes, sockets or
    /// device drivers: opening what this creates fails (see [`openat`](Self::openat)),
    /// except with `O_PATH`; `stat`, `chmod`, `rename`, `unlink` work as for any file.
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` (`dev` above 32 bits; a type that is not one of the
    /// above, e.g. `S_IFLNK`), `EPERM` (`S_IFDIR`), `ENOENT`, `ENOTDIR`, `ENAMETOOLONG`,
    /// `ELOOP`, `EBADF` (the walk), `EEXIST` (the name exists, or is `.`, `..`, `/`),
    /// `ENOENT` (trailing slash on a missing name; removed directory), `EACCES` (no write
    /// or search permission on the directory), `EPERM` (a device node by a non-root caller).
    ///
    /// # References
    /// mknod(2); Linux `do_mknodat`, `may_mknod`, `vfs_mknod`, `shmem_mknod`.
    #[doc(alias = "mknod")]
    pub fn mknodat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        mode: u32,
        dev: u64,
    ) -> Result<()> {
        let dirfd: AtDir<'_> = dirfd.into();
        let dev = u32::try_from(dev).map_err(|_| Errno::EINVAL)?;
        // may_mknod
        let ty = match mode & S_IFMT {
            0 | S_IFREG => S_IFREG,
            t @ (S_IFCHR | S_IFBLK | S_IFIFO | S_IFSOCK) => t,
            S_IFDIR => return Err(Errno::EPERM),
            _ => return Err(Errno::EINVAL),
        };
        let path = getname(path.path_bytes(), false)?;
        let perm = mode & 0o7777 & !self.current_umask();
        self.filename_create(dirfd, path, false, |last, dl| {
            // vfs_create / vfs_mknod
            let rdev = match ty {
                S_IFCHR | S_IFBLK => {
                    let whiteout = ty == S_IFCHR && dev == WHITEOUT_DEV;
                    if !whiteout && !self.cred.capable(crate::Caps::MKNOD) {
                        return Err(Errno::EPERM);
                    }
                    dev as u64
                }
                _ => 0,
            };
            // vfs_prepare_mode: set-group-ID is stripped from the mode as given, before the
            // umask (as `openat` does).
            let perm = perm & mode_strip_sgid(&self.cred, &last.dir.d_inode, mode & 0o7777);
            create_locked(self, last, dl, ty | perm, (rdev, None), OpenFlags::empty())?;
            Ok(())
        })
    }
}
