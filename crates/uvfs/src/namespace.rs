//! Mounting on a task: `mount` (a new file system at a directory, a bind mount, a change of
//! per-mount flags), `umount2`, and the mount listing (what `/proc/self/mountinfo` shows).
//!
//! Linux analogue: fs/namespace.c (`path_mount`, `do_new_mount`, `do_loopback`,
//! `do_reconfigure_mnt`, `path_umount`, `do_umount`, `graft_tree`, `copy_tree`),
//! fs/proc_namespace.c (`show_mountinfo`).
//!
//! Every change runs under the namespace lock and publishes a new mount table; walks never
//! wait for it (mount.rs). Lock order: the namespace lock -> a mount point's parent
//! directory lock (held while the mount is attached, so that a concurrent `rmdir` or
//! `rename` of the mount point either sees the mount, `EBUSY`, or removes the directory
//! first, `ENOENT` here).

use crate::dentry::Dentry;
use crate::mount::{MountFlags, MountPoint, UmountFlags};
use crate::namei::getname;
use crate::sync::epoch;
use crate::task::Task;
use crate::types::AsPath;
use crate::types::Fd;
use crate::variant::Variant;
use crate::{Errno, Mount, Result};
use std::sync::Arc;

/// One mount as the listing shows it (a line of `/proc/self/mountinfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountInfo {
    /// The mount id ([`Mount::id`]; mountinfo's field 1, `stx_mnt_id`).
    pub mnt_id: u64,
    /// The parent mount's id; the mount's own for the top of the listing (field 2).
    pub parent_id: u64,
    /// The file system's device number (`st_dev` of its files; field 3 as `major:minor`).
    pub dev: u64,
    /// The mount's root within its file system, from the file system's root (field 4:
    /// `/` for a plain mount, the directory's path for a bind of a subdirectory).
    pub root: Vec<u8>,
    /// The mount point, relative to the task's root (field 5).
    pub mount_point: Vec<u8>,
    /// The per-mount flags (field 6: `rw`/`ro`, `nosuid`, `nodev`, `noexec`).
    pub flags: MountFlags,
    /// The file system type (field 9: `tmpfs`, `hostfs`).
    pub fs_type: &'static str,
}

impl<V: Variant> Task<V> {
    /// Walks `path` (following symlinks) to a mount point candidate: the counted (mount,
    /// dentry) after any mounts on it, and the mount as the table holds it.
    ///
    /// # Errors
    /// The walk's; `EINVAL` when the mount is not in this task's namespace (detached).
    fn mount_target(&self, path: &[u8], follow: bool) -> Result<(Arc<Mount>, Arc<Dentry>)> {
        let path = getname(path, false)?;
        self.with_walk(Fd::AT_FDCWD.into(), path, |nd, start| {
            let d = nd.walk(start, path, follow, false)?;
            let m = nd
                .ns
                .table(nd.guard)
                .arc_of(nd.mnt)
                .cloned()
                .ok_or(Errno::EINVAL)?;
            Ok((m, d.clone()))
        })
    }

    /// `may_mount`: `CAP_SYS_ADMIN`.
    fn may_mount(&self) -> Result<()> {
        if !self.cred.capable(crate::Caps::SYS_ADMIN) {
            return Err(Errno::EPERM);
        }
        Ok(())
    }

    /// `mount(2)` of a new file-system instance: attaches `fs` (made by
    /// [`tmpfs::mount`](crate::tmpfs::mount) or [`hostfs::mount`](crate::hostfs::mount) and
    /// never attached before) on the directory `target` (symlinks followed; a target that
    /// is already a mount point gets the new mount on top), with the per-mount `flags`
    /// (`RDONLY`, `NOSUID`, `NODEV`, `NOEXEC`). The new file system's tree then replaces the
    /// directory's for every walk in this namespace; what was there comes back at umount.
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` (other flags), the walk's (`ENOENT`, `ENOTDIR`, `EACCES`,
    /// `ELOOP`, `ENAMETOOLONG`), `EPERM` (not root), `EBUSY` (`fs` was attached before:
    /// bind it instead), `ENOTDIR` (the target is not a directory), `ENOENT` (the target was
    /// removed meanwhile), `ENOSPC` (the namespace has [`MOUNT_MAX`] mounts).
    ///
    /// [`MOUNT_MAX`]: crate::mount::MOUNT_MAX
    ///
    /// # References
    /// mount(2); Linux `path_mount`, `do_new_mount`, `do_add_mount`, `graft_tree`.
    pub fn mount(&self, fs: &Arc<Mount>, target: impl AsPath, flags: MountFlags) -> Result<()> {
        if !(flags - MountFlags::PER_MOUNT).is_empty() {
            return Err(Errno::EINVAL);
        }
        let (pm, pd) = self.mount_target(target.path_bytes(), true)?;
        self.may_mount()?;
        if fs.was_attached() {
            return Err(Errno::EBUSY);
        }
        if pd.d_inode.is_dir() != fs.mnt_root.d_inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        // The flags are set once the mount is attached (a failed mount leaves them alone).
        let mp = MountPoint {
            parent: pm,
            dentry: pd,
        };
        self.fs.ns.attach(fs.clone(), mp, Vec::new(), Some(flags))
    }

    /// `mount(source, target, NULL, MS_BIND | (flags & MS_REC), NULL)`: makes the file or
    /// directory `source` also visible at `target` (both followed), as a new mount of the
    /// same file system with `source`'s mount's flags. With `REC` the mounts under `source`
    /// come too (`copy_tree`); without, the bind shows the directories beneath them.
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` (flags other than `REC`: Linux ignores the per-mount ones
    /// on a bind, which a remount sets; uvfs refuses rather than silently ignore), the
    /// target's walk errors, `EPERM` (not root), the source's walk errors, `EINVAL` (source
    /// or target in a detached mount), `ENOTDIR` (a directory onto a non-directory or the
    /// reverse), `ENOENT` (the target was removed meanwhile), `ENOSPC` (past
    /// [`MOUNT_MAX`](crate::mount::MOUNT_MAX) mounts with the copies).
    ///
    /// # References
    /// mount(2) (`MS_BIND`, `MS_REC`); Linux `do_loopback`, `clone_mnt`, `copy_tree`.
    pub fn mount_bind(
        &self,
        source: impl AsPath,
        target: impl AsPath,
        flags: MountFlags,
    ) -> Result<()> {
        if !(flags - MountFlags::REC).is_empty() {
            return Err(Errno::EINVAL);
        }
        let (pm, pd) = self.mount_target(target.path_bytes(), true)?;
        self.may_mount()?;
        let (sm, sd) = self.mount_target(source.path_bytes(), true)?;
        if pd.d_inode.is_dir() != sd.d_inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let m = Mount::new(sm.mnt_sb.clone(), sd.clone(), sm.flags());
        let extra = if flags.contains(MountFlags::REC) {
            let g = epoch::pin();
            self.fs.ns.table(&g).copy_under(&sm, &sd, &m, &g)
        } else {
            Vec::new()
        };
        self.fs.ns.attach(
            m,
            MountPoint {
                parent: pm,
                dentry: pd,
            },
            extra,
            None,
        )
    }

    /// `mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL)`: replaces the
    /// per-mount flags of the mount whose root `target` is with `flags` (`RDONLY`,
    /// `NOSUID`, `NODEV`, `NOEXEC`; the super block is unchanged, so other mounts of the
    /// same file system keep theirs).
    ///
    /// # Errors
    /// `EINVAL` (other flags), the walk's, `EPERM` (not root), `EINVAL` (`target` is not a
    /// mount's root), `EBUSY` (making it read-only while files are open for writing through
    /// it, as Linux's `mnt_make_readonly`).
    ///
    /// # References
    /// mount(2) (`MS_REMOUNT | MS_BIND`); Linux `do_reconfigure_mnt`, `mnt_make_readonly`.
    pub fn mount_setflags(&self, target: impl AsPath, flags: MountFlags) -> Result<()> {
        if !(flags - MountFlags::PER_MOUNT).is_empty() {
            return Err(Errno::EINVAL);
        }
        let (m, d) = self.mount_target(target.path_bytes(), true)?;
        self.may_mount()?;
        if !Arc::ptr_eq(&d, &m.mnt_root) {
            return Err(Errno::EINVAL);
        }
        if !m.mnt_count.set_flags(flags.bits()) {
            return Err(Errno::EBUSY);
        }
        Ok(())
    }

    /// `umount2(2)`: detaches the mount whose root `target` is (a final symlink followed
    /// unless `NOFOLLOW`). Without `DETACH` it must be unused: no open file, task root or
    /// cwd in it, no mount on it. With `DETACH` it and every mount under it leave the
    /// namespace at once; open files and cwds in them keep working, and they go when the
    /// last is closed. `EXPIRE` marks an unused mount and unmounts it on a second call if it
    /// stayed unused. `FORCE` changes nothing more (no file system here has requests to
    /// abort).
    ///
    /// As on Linux, a busy check racing with opens and closes on other threads may see
    /// either state; it never frees a mount in use (the count is exact once detached).
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` (unknown flags), the walk's, `EPERM` (not root), `EINVAL`
    /// (`target` is not a mount's root; the mount is not in this namespace; it is the
    /// namespace's root mount; `EXPIRE` with `FORCE` or `DETACH`, or of the caller's root
    /// mount), `EBUSY` (in use, without `DETACH`; also the caller's own root mount, which
    /// Linux instead remounts read-only, `do_umount_root`: uvfs has no read-only super
    /// block), `EAGAIN` (`EXPIRE`: marked now).
    ///
    /// # References
    /// umount2(2); Linux `ksys_umount`, `path_umount`, `can_umount`, `do_umount`,
    /// `umount_tree`.
    pub fn umount2(&self, target: impl AsPath, flags: UmountFlags) -> Result<()> {
        if flags.bits() & !UmountFlags::all().bits() != 0 {
            return Err(Errno::EINVAL);
        }
        let follow = !flags.contains(UmountFlags::NOFOLLOW);
        let (m, d) = self.mount_target(target.path_bytes(), follow)?;
        self.may_mount()?;
        if !Arc::ptr_eq(&d, &m.mnt_root) {
            return Err(Errno::EINVAL);
        }
        let expire = flags.contains(UmountFlags::EXPIRE);
        let is_root_mount = {
            let g = epoch::pin();
            std::ptr::eq(&*m, &*self.fs.root.load(&g).mnt)
        };
        if expire && (is_root_mount || flags.intersects(UmountFlags::FORCE | UmountFlags::DETACH)) {
            return Err(Errno::EINVAL);
        }
        drop(d);
        self.fs
            .ns
            .umount(&m, flags.contains(UmountFlags::DETACH), expire)
    }

    /// The mounts of this task's namespace at or under its root's mount, parents before
    /// children (`/proc/self/mountinfo`).
    ///
    /// # References
    /// proc(5) (`/proc/pid/mountinfo`); Linux `show_mountinfo`.
    pub fn mountinfo(&self) -> Vec<MountInfo> {
        let g = epoch::pin();
        let root = self.fs.root.load(&g);
        let ns = &self.fs.ns;
        let mut out = Vec::new();
        for (m, mp) in ns.list_under(root, &g) {
            // show_mountinfo: a mount whose root is not reachable from the task's root (the
            // root's own mount after a chroot below its root) is not shown.
            let Ok((mount_point, true)) =
                crate::namei::d_path(root, &m, &m.mnt_root, ns, &g, false)
            else {
                continue;
            };
            let parent_id = match &mp {
                Some(mp) if !std::ptr::eq(&*m, &*root.mnt) => mp.parent.mnt_id,
                _ => m.mnt_id,
            };
            out.push(MountInfo {
                mnt_id: m.mnt_id,
                parent_id,
                dev: m.mnt_sb.s_dev,
                root: fs_path(&m.mnt_root, &g),
                mount_point,
                flags: m.flags(),
                fs_type: m.mnt_sb.s_op.name(),
            });
        }
        out
    }
}

/// The path of `d` from its file system's root (`dentry_path`).
fn fs_path(d: &Arc<Dentry>, g: &epoch::Guard) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    let mut cur = d;
    while let Some(p) = cur.parent(g) {
        parts.push(&cur.link(g).name);
        cur = p;
    }
    let mut out = Vec::new();
    for p in parts.iter().rev() {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}
