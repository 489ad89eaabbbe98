//! The working directory and root: `chdir`, `fchdir`, `chroot`, `getcwd`.
//!
//! Linux analogue: fs/open.c (`ksys_chdir`, `ksys_fchdir`, `ksys_chroot`), fs/d_path.c
//! (`getcwd`).

use super::*;

impl<V: Variant> Task<V> {
    /// `chdir(2)`: makes `path` the current directory.
    ///
    /// # Errors
    /// `ENOENT`, `ENOTDIR`, `EACCES` (no search permission on the directory itself),
    /// `ELOOP`, `ENAMETOOLONG`.
    pub fn chdir(&self, path: impl AsPath) -> Result<()> {
        let path = getname(path.path_bytes(), false)?;
        // The search check after the walk, unpinned: a FUSE server may be asked (ACCESS, or
        // GETATTR for stale attributes).
        let p = self.with_walk(Fd::AT_FDCWD.into(), path, |nd, start| {
            let d = nd.walk(start, path, true, true)?;
            nd.path(d)
        })?;
        p.dentry
            .d_inode
            .permission(&self.cred, MAY_EXEC | crate::cred::MAY_CHDIR)?;
        self.fs.set_cwd(p);
        Ok(())
    }

    /// `fchdir(2)`: makes the directory open at `fd` (an `O_PATH` descriptor too) the current
    /// directory.
    ///
    /// # Errors
    /// `EBADF`, `ENOTDIR`, `EACCES`; `EXDEV` for a directory of another namespace.
    pub fn fchdir(&self, fd: Fd) -> Result<()> {
        let f = self.fdget_raw(fd)?;
        if !f.inode().is_dir() {
            return Err(Errno::ENOTDIR);
        }
        f.inode()
            .permission(&self.cred, MAY_EXEC | crate::cred::MAY_CHDIR)?;
        if f.mount().mnt_ns_id() != self.fs.ns.id() {
            // As for a dirfd (`start`): another namespace's tree is out of reach.
            return Err(Errno::EXDEV);
        }
        self.fs.set_cwd(Path {
            mnt: (*f.hot().f_mnt).clone(),
            dentry: f.dentry().clone(),
        });
        Ok(())
    }

    /// `chroot(2)`: makes directory `path` the root of this task and of the tasks sharing
    /// its file-system context (`clone_thread`; not `fork`ed ones): absolute paths and
    /// symlinks start there and `..` stops there. The current directory is left alone, so it
    /// may be outside the new root (see [`getcwd`](Self::getcwd)).
    ///
    /// # Errors
    /// In Linux's order: `ENOENT`, `ENOTDIR`, `EACCES` (search permission on the path or on
    /// the directory itself), `ELOOP`, `ENAMETOOLONG`, then `EPERM` (the caller is not root:
    /// no `CAP_SYS_CHROOT`).
    ///
    /// # References
    /// chroot(2); Linux `ksys_chroot`, `set_fs_root`.
    pub fn chroot(&self, path: impl AsPath) -> Result<()> {
        let path = getname(path.path_bytes(), false)?;
        // The search check after the walk, unpinned: a FUSE server may be asked (ACCESS, or
        // GETATTR for stale attributes).
        let p = self.with_walk(Fd::AT_FDCWD.into(), path, |nd, start| {
            let d = nd.walk(start, path, true, true)?;
            nd.path(d)
        })?;
        p.dentry
            .d_inode
            .permission(&self.cred, MAY_EXEC | crate::cred::MAY_CHDIR)?;
        if !self.cred.capable(crate::Caps::SYS_CHROOT) {
            return Err(Errno::EPERM);
        }
        self.fs.set_root(p);
        Ok(())
    }

    /// `getcwd(2)`: the absolute path of the current directory, relative to the task's root.
    /// A current directory outside the root (after `chroot`) is given from the file
    /// system's root with the prefix `(unreachable)`, as Linux does.
    ///
    /// # Errors
    /// `ENOENT` if the current directory was removed; `ENAMETOOLONG` if the path with its
    /// NUL would not fit in a page (`PATH_MAX`, 4096 bytes: Linux builds it in one page,
    /// `d_path` -> `prepend` fails).
    ///
    /// # References
    /// getcwd(2); Linux fs/d_path.c `SYSCALL_DEFINE2(getcwd)`.
    pub fn getcwd(&self) -> Result<Vec<u8>> {
        let g = epoch::pin();
        let root = self.fs.root.load(&g);
        let cwd = self.fs.cwd.load(&g);
        let (path, reachable) = d_path(root, &cwd.mnt, &cwd.dentry, &self.fs.ns, &g, true)?;
        let out = if reachable {
            path
        } else {
            [&b"(unreachable)"[..], &path].concat()
        };
        if out.len() >= PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        Ok(out)
    }

    /// What the link `/proc/PID/fd/N` shows for descriptor `fd` (`O_PATH` ones too): the
    /// file's path from this task's root across mount points, with ` (deleted)` appended
    /// once its name is gone (unlinked, replaced or removed through uvfs; found gone from
    /// the file system by a lookup; an `O_TMPFILE` file never linked, named `#INODE` in
    /// its directory). A file out of the root's reach (on a detached mount, or above a
    /// `chroot`) shows its path from the top of its mount tree, unmarked, as Linux's
    /// `d_path` (only `getcwd` marks it unreachable).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open; `ENAMETOOLONG` past `PATH_MAX` with its NUL.
    ///
    /// # References
    /// proc(5) `/proc/pid/fd/`; Linux `proc_fd_link`, fs/d_path.c `d_path`.
    pub fn fd_path(&self, fd: Fd) -> Result<Vec<u8>> {
        let f = self.fdget_raw(fd)?;
        let g = epoch::pin();
        proc_link(
            self.fs.root.load(&g),
            f.mount(),
            f.dentry(),
            &self.fs.ns,
            &g,
        )
    }

    /// What the link `/proc/PID/cwd` shows: as [`fd_path`](Self::fd_path), for the current
    /// directory (` (deleted)` once it was removed, where [`getcwd`](Self::getcwd) fails
    /// with `ENOENT`).
    ///
    /// # Errors
    /// `ENAMETOOLONG` past `PATH_MAX` with its NUL.
    ///
    /// # References
    /// proc(5) `/proc/pid/cwd`; Linux `proc_cwd_link`, `d_path`.
    pub fn cwd_path(&self) -> Result<Vec<u8>> {
        let g = epoch::pin();
        let cwd = self.fs.cwd.load(&g);
        proc_link(
            self.fs.root.load(&g),
            &cwd.mnt,
            &cwd.dentry,
            &self.fs.ns,
            &g,
        )
    }
}

/// Linux's `d_path` for the links of /proc (see [`Task::fd_path`]): [`d_path`]'s path,
/// unmarked when out of the root's reach, ` (deleted)` when `d` is unlinked (`d_unlinked`:
/// here `Dentry::is_deleted`, not every unhashed dentry: uvfs also unhashes entries it only
/// stopped caching, whose names Linux keeps).
fn proc_link(
    root: &Path,
    mnt: &Mount,
    d: &Arc<Dentry>,
    ns: &MntNamespace,
    g: &Guard,
) -> Result<Vec<u8>> {
    let (mut out, _) = d_path(root, mnt, d, ns, g, false)?;
    if d.is_deleted() {
        out.extend_from_slice(b" (deleted)");
    }
    if out.len() >= PATH_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(out)
}

/// `d_path`/`prepend_path`: the path of `d` (on `mnt`) from `root`, across mount points of
/// `ns`, and whether `root` was reached: `false` when the climb ended at a file-system root
/// (or a detached mount's root) that is not `root`, the path then being from there
/// (`prepend_path`'s positive return; getcwd marks it `(unreachable)`, mountinfo skips the
/// mount, `d_path` shows it as is). With `check_unhashed`, a removed dentry on the way is
/// `ENOENT` (getcwd of a removed directory).
///
/// # Errors
/// `ENOENT` as said.
pub(crate) fn d_path(
    root: &Path,
    mnt: &Mount,
    d: &Arc<Dentry>,
    ns: &MntNamespace,
    g: &Guard,
    check_unhashed: bool,
) -> Result<(Vec<u8>, bool)> {
    let table = ns.table(g);
    let (mut cur, mut m) = (d, mnt);
    let mut parts: Vec<&[u8]> = Vec::new();
    let mut unreachable = false;
    loop {
        if Arc::ptr_eq(cur, &root.dentry) && std::ptr::eq(m, &*root.mnt) {
            break;
        }
        if Arc::ptr_eq(cur, &m.mnt_root) {
            match table.parent(m) {
                Some(mp) => {
                    m = &mp.parent;
                    cur = &mp.dentry;
                    continue;
                }
                None => {
                    unreachable = true;
                    break;
                }
            }
        }
        let l = cur.link(g);
        if check_unhashed && cur.is_unhashed() {
            return Err(Errno::ENOENT);
        }
        match &l.parent {
            Some(p) => {
                parts.push(&l.name);
                cur = p;
            }
            None => {
                unreachable = true;
                break;
            }
        }
    }
    let mut out = Vec::new();
    for p in parts.iter().rev() {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if parts.is_empty() {
        out.push(b'/');
    }
    Ok((out, !unreachable))
}
