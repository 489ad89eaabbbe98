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
        let p = self.with_walk(Fd::AT_FDCWD.into(), path, |nd, start| {
            let d = nd.walk(start, path, true, true)?;
            d.d_inode
                .permission(&self.cred, MAY_EXEC | crate::cred::MAY_CHDIR)?;
            nd.path(d)
        })?;
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
        let p = self.with_walk(Fd::AT_FDCWD.into(), path, |nd, start| {
            let d = nd.walk(start, path, true, true)?;
            d.d_inode
                .permission(&self.cred, MAY_EXEC | crate::cred::MAY_CHDIR)?;
            nd.path(d)
        })?;
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
        let out = d_path(root, &cwd.mnt, &cwd.dentry, &self.fs.ns, &g, true)?;
        if out.len() >= PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        Ok(out)
    }
}

/// `d_path`/`prepend_path`: the path of `d` (on `mnt`) from `root`, across mount points of
/// `ns`; prefixed `(unreachable)` when the climb ends at a file-system root (or a detached
/// mount's root) that is not `root`. With `check_unhashed`, a removed dentry on the way is
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
) -> Result<Vec<u8>> {
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
    if unreachable {
        out.extend_from_slice(b"(unreachable)");
    }
    for p in parts.iter().rev() {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if parts.is_empty() {
        out.push(b'/');
    }
    Ok(out)
}
