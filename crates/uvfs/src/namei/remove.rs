//! Removing names: `unlinkat`, `rmdir`.
//!
//! Linux analogue: fs/namei.c (`do_unlinkat`, `do_rmdir`, `vfs_unlink`, `vfs_rmdir`).

use super::*;

impl<V: Variant> Task<V> {
    /// `unlinkat(2)`: removes a name (`flags` 0) or an empty directory (`AT_REMOVEDIR`).
    ///
    /// # Errors
    /// `EINVAL` (unknown flags; rmdir of `.`), `ENOENT`, `ENOTDIR`, `EISDIR` (unlink of a
    /// directory, of `.`/`..`/`/`), `ENOTEMPTY` (rmdir of a non-empty directory or `..`),
    /// `EBUSY` (rmdir of `/`; a mount point), `EROFS` (a read-only mount), `EACCES`, `EPERM`
    /// (sticky directory), `ENAMETOOLONG`, `ELOOP`, `EBADF`.
    ///
    /// # References
    /// unlink(2), rmdir(2); Linux `do_unlinkat`, `do_rmdir`, `shmem_unlink`, `simple_rmdir`.
    pub fn unlinkat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        flags: AtFlags,
    ) -> Result<()> {
        let dirfd: AtDir<'_> = dirfd.into();
        if !(flags - AtFlags::REMOVEDIR).is_empty() {
            return Err(Errno::EINVAL);
        }
        let rmdir = flags.contains(AtFlags::REMOVEDIR);
        let path = getname(path.path_bytes(), false)?;
        self.with_parent(dirfd, path, |last| {
            match (last.ty, rmdir) {
                (LastType::Norm, _) => {}
                (LastType::DotDot, true) => return Err(Errno::ENOTEMPTY),
                (LastType::Dot, true) => return Err(Errno::EINVAL),
                (LastType::Root, true) => return Err(Errno::EBUSY),
                (_, false) => return Err(Errno::EISDIR),
            }
            // do_unlinkat/do_rmdir: mnt_want_write before the last component's lookup.
            last.mnt.want_write()?;
            if last.name.len() > NAME_MAX {
                return Err(Errno::ENAMETOOLONG);
            }
            let dir_inode = &last.dir.d_inode;
            let dir = last.dir.dir().ok_or(Errno::ENOTDIR)?;
            let mut dl = dir.lock_name(last.name);
            let victim = lookup_locked(last.dir, &mut dl, last.name)?.ok_or(Errno::ENOENT)?;
            let vi = &victim.d_inode;
            if !rmdir && last.trailing_slash {
                return Err(if vi.is_dir() {
                    Errno::EISDIR
                } else {
                    Errno::ENOTDIR
                });
            }
            may_delete(&self.cred, dir_inode, vi, rmdir, dl.dead())?;
            // vfs_unlink/vfs_rmdir: a mount point of this namespace stays.
            if victim.is_mounted() && self.fs.ns.table(&epoch::pin()).is_mountpoint(&victim) {
                return Err(Errno::EBUSY);
            }
            // The file system may block (a FUSE request): not pinned meanwhile (`with_parent`).
            let may_block = dir_inode.needs_revalidate();
            if may_block {
                dl.unpin();
            }
            let links = if rmdir {
                let sub = victim.dir().ok_or(Errno::ENOTDIR)?;
                let mut sl = sub.lock_all();
                // A cache that may be incomplete cannot tell; the file system's rmdir does.
                if !vi.needs_revalidate() && !sl.is_empty() {
                    return Err(Errno::ENOTEMPTY);
                }
                if may_block {
                    sl.unpin();
                }
                dir_inode.i_op.rmdir(dir_inode, last.name, vi)?;
                sl.set_dead();
                let stale = sl.clear();
                // Marked under the lock they left under (see `unhash`).
                stale.iter().for_each(unhash);
                drop(sl);
                shrink_children(stale, false);
                dir_inode.add_nlink(-1, None);
                2
            } else {
                dir_inode.i_op.unlink(dir_inode, last.name, vi)?;
                1
            };
            // simple_unlink: the directory's mtime and ctime become the victim's new ctime.
            // Linux takes that time from the victim alone, so a directory queried in this
            // tick would keep its time; uvfs starts from the directory's own current time,
            // so that its change shows too (the two still get one time).
            let now = dir_inode.current_time(coarse_now());
            // The name goes first (Linux: `d_delete` before the final `iput`), so that a
            // walk starting now cannot reach an inode whose space `add_nlink` may give back.
            dl.remove(last.name);
            d_delete(&victim);
            let t = vi.add_nlink(-links, Some(now));
            dir_inode.touch_mtime_ctime(t);
            Ok(())
        })
    }

    /// `rmdir(2)`: removes the empty directory `path` (`unlinkat(AT_FDCWD, path,
    /// AT_REMOVEDIR)`).
    ///
    /// # Errors
    /// As [`unlinkat`](Self::unlinkat) with `AT_REMOVEDIR`: `ENOENT`, `ENOTDIR`,
    /// `ENOTEMPTY` (also for a last component `..`), `EINVAL` (last component `.`), `EBUSY`
    /// (`/`), `EACCES`, `EPERM` (sticky directory), `ENAMETOOLONG`, `ELOOP`.
    ///
    /// # References
    /// rmdir(2); Linux `do_rmdir`.
    pub fn rmdir(&self, path: impl AsPath) -> Result<()> {
        self.unlinkat(Fd::AT_FDCWD, path, AtFlags::REMOVEDIR)
    }
}
