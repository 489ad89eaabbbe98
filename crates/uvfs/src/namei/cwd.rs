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
    pub fn chdir(&self, path: impl AsRef<[u8]>) -> Result<()> {
        let path = getname(path.as_ref(), false)?;
        let p = self.with_walk(Fd::AT_FDCWD.into(), path, |nd, start, mnt| {
            let d = nd.walk(start, path, true, true)?;
            d.d_inode.permission(&self.cred, MAY_EXEC)?;
            Ok(Path {
                mnt: mnt.clone(),
                dentry: d.clone(),
            })
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
        f.inode().permission(&self.cred, MAY_EXEC)?;
        let guard = epoch::pin();
        let mnt = self.fs.root.load(&guard).mnt.clone();
        if f.inode().i_dev != mnt.mnt_sb.s_dev {
            // As for a dirfd (`start`): another namespace's tree is out of reach.
            return Err(Errno::EXDEV);
        }
        self.fs.set_cwd(Path {
            mnt,
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
    pub fn chroot(&self, path: impl AsRef<[u8]>) -> Result<()> {
        let path = getname(path.as_ref(), false)?;
        let p = self.with_walk(Fd::AT_FDCWD.into(), path, |nd, start, mnt| {
            let d = nd.walk(start, path, true, true)?;
            d.d_inode.permission(&self.cred, MAY_EXEC)?;
            Ok(Path {
                mnt: mnt.clone(),
                dentry: d.clone(),
            })
        })?;
        if !self.cred.is_root() {
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
        let mut cur = &self.fs.cwd.load(&g).dentry;
        let mut parts: Vec<&[u8]> = Vec::new();
        let mut unreachable = false;
        while !Arc::ptr_eq(cur, &root.dentry) {
            let l = cur.link(&g);
            if l.unhashed {
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
        if out.len() >= PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        Ok(out)
    }
}
