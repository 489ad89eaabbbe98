//! Path walk (`Nameidata`) and the namespace calls built on it: `mkdirat`, `unlinkat`,
//! `rmdir`, `renameat`/`renameat2`, `linkat`, `symlinkat`, `readlinkat`.
//!
//! By family: walk.rs (the walk, cached and file-system lookups), may.rs (permission
//! predicates), create.rs (`mkdirat`, `mknodat`, `symlinkat`, `readlinkat`, `linkat`),
//! remove.rs (`unlinkat`, `rmdir`), rename.rs (`renameat2`, rename locking), cwd.rs
//! (`chdir`, `fchdir`, `chroot`, `getcwd`); here: the walk's state, `AtDir`, and the
//! entry points every call walks through (`with_walk`).
//!
//! Linux analogue: fs/namei.c (`link_path_walk`, `walk_component`, `handle_dots`,
//! `pick_link`, `filename_create`, `do_unlinkat`, `do_rmdir`, `do_renameat2`, `do_linkat`,
//! `may_delete`, `may_create`, `may_linkat`, `lock_rename`).
//!
//! The walk runs under an epoch guard, like Linux's RCU-walk: it reads directory maps and
//! parent links and takes no reference on the dentries it passes through, so walking a
//! shared path writes no shared cache line. Only the caller that keeps the result (open,
//! chdir) takes references, on the final dentry.
//!
//! Rules, as Linux: a path of more than 4095 bytes is `ENAMETOOLONG`, a component of more
//! than 255 bytes is `ENAMETOOLONG` when looked up; the empty path is `ENOENT`; `..` never
//! climbs above the task's root; at most 40 symlinks per walk (`ELOOP`); search permission
//! is needed on every directory a component is looked up in; a trailing slash requires a
//! directory (and follows a final symlink).

use crate::cred::{Cred, MAY_EXEC, MAY_READ, MAY_WRITE};
use crate::dentry::{DLink, Dentry, Name};
use crate::dentry::{Dir, DirLocked};
use crate::fdtable::FdRef;
use crate::fs::NewInode;
use crate::inode::{Inode, LINK_MAX};
use crate::mount::{MntNamespace, Mount, Path};
use crate::sync::epoch::{self, Guard};
use crate::sync::plock;
use crate::task::Task;
use crate::time::coarse_now;
use crate::types::*;
use crate::variant::Variant;
use crate::{Errno, Result};
use std::sync::Arc;

mod create;
mod cwd;
pub(crate) use cwd::d_path;
mod may;
mod remove;
mod rename;
mod walk;

pub(crate) use crate::dentry::{d_delete, mark_deleted, shrink_children, unhash};
pub(crate) use create::{create_locked, new_inode};
pub(crate) use may::{inode_init_owner, mode_strip_sgid};
use may::{may_create, may_delete, may_linkat};
pub(crate) use walk::{d_add, link_listed, lookup_locked};

/// Longest file name component (`NAME_MAX`).
pub const NAME_MAX: usize = 255;
/// Longest path including its NUL (`PATH_MAX`): paths of 4096 bytes or more are rejected.
pub const PATH_MAX: usize = 4096;
/// Most symlinks followed in one walk (`MAXSYMLINKS`).
pub const MAXSYMLINKS: u32 = 40;

/// Kind of the last component (`LAST_NORM`, `LAST_DOT`, `LAST_DOTDOT`, `LAST_ROOT`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum LastType {
    Norm,
    Dot,
    DotDot,
    Root,
}

/// The parent directory and last component of a walked path.
pub(crate) struct Last<'a, 'p> {
    /// The mount of `dir`.
    pub(crate) mnt: &'a Mount,
    pub(crate) dir: &'a Arc<Dentry>,
    pub(crate) name: &'p [u8],
    pub(crate) ty: LastType,
    pub(crate) trailing_slash: bool,
}

/// `LOOKUP_NO_SYMLINKS` (`RESOLVE_NO_SYMLINKS`): following any symlink is `ELOOP`.
pub(crate) const LOOKUP_NO_SYMLINKS: u32 = 1 << 0;
/// `LOOKUP_BENEATH` (`RESOLVE_BENEATH`): the walk's root is the start; leaving it (an
/// absolute path or symlink, `..` at it) is `EXDEV`.
pub(crate) const LOOKUP_BENEATH: u32 = 1 << 1;
/// `LOOKUP_IN_ROOT` (`RESOLVE_IN_ROOT`): the walk's root is the start, as after `chroot`.
pub(crate) const LOOKUP_IN_ROOT: u32 = 1 << 2;
/// `LOOKUP_IS_SCOPED`: either scoping flag.
pub(crate) const LOOKUP_IS_SCOPED: u32 = LOOKUP_BENEATH | LOOKUP_IN_ROOT;
/// `LOOKUP_NO_XDEV` (`RESOLVE_NO_XDEV`): crossing a mount, either way, is `EXDEV`.
pub(crate) const LOOKUP_NO_XDEV: u32 = 1 << 3;

/// State of one path walk (`struct nameidata`).
pub(crate) struct Nameidata<'a> {
    pub(crate) guard: &'a Guard,
    pub(crate) cred: &'a Cred,
    pub(crate) root: &'a Path,
    /// The mount of the dentry the walk is at (Linux `nd->path.mnt`): the start's, then
    /// changed by every mount crossing. After a walk returns a dentry, its mount.
    pub(crate) mnt: &'a Mount,
    /// The task's mount namespace, whose table the crossings read.
    pub(crate) ns: &'a MntNamespace,
    total_links: u32,
    /// `LOOKUP_*` restrictions (openat2's `resolve`); 0 for every other call, so the checks
    /// cost one branch on a word already in cache.
    pub(crate) flags: u32,
}

impl Nameidata<'_> {
    /// `d` (where the walk is, in [`mnt`](Self::mnt)) as a counted [`Path`]: what a call
    /// that keeps its result (open, chdir) takes at the end of the walk
    /// (`legitimize_path`).
    ///
    /// # Errors
    /// None in practice (a plain reference is never refused); typed for the writer form.
    pub(crate) fn path(&self, d: &Arc<Dentry>) -> Result<Path> {
        self.path_of(d.clone())
    }

    /// As [`path`](Self::path) for a dentry reference the caller already holds.
    #[inline]
    pub(crate) fn path_of(&self, dentry: Arc<Dentry>) -> Result<Path> {
        Ok(Path {
            mnt: self.mnt.get_ref(crate::sync::pcp_ref::REF, self.guard)?,
            dentry,
        })
    }
}

/// `getname`: checks a user path's length and contents.
///
/// # Errors
/// `ENAMETOOLONG` for 4096 bytes or more; `EINVAL` for an interior NUL (a C caller could not
/// pass one; uvfs refuses rather than truncating); `ENOENT` for the empty path unless
/// `empty_ok`.
#[inline]
pub(crate) fn getname(path: &[u8], empty_ok: bool) -> Result<&[u8]> {
    if path.len() >= PATH_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    if path.contains(&0) {
        return Err(Errno::EINVAL);
    }
    if path.is_empty() && !empty_ok {
        return Err(Errno::ENOENT);
    }
    Ok(path)
}

/// Where a `*at` call's relative path starts: a descriptor (`Fd::AT_FDCWD` for the cwd), as
/// in the syscalls, or a dentry of the task's namespace, as the kernel's internal callers
/// pass a `struct path` (nfsd, overlayfs, and here the FUSE server, whose requests name
/// their directory by node, not by descriptor). Every `*at` method takes either
/// (`impl Into<AtDir>`): existing callers pass an [`Fd`].
///
/// An absolute path ignores it, as it ignores `dirfd`. A dentry is used even if it has
/// been unlinked (as an `O_PATH` descriptor of it would be).
///
/// # Errors
/// `EBADF` for a descriptor that is not open; `EXDEV` for a descriptor or dentry of another
/// namespace (another [`SuperBlock`](crate::SuperBlock)), which the task cannot reach.
///
/// # References
/// Linux `struct path` arguments of `vfs_mkdir`, `vfs_create`, `lookup_one` (fs/namei.c).
#[derive(Clone, Copy, Debug)]
pub enum AtDir<'a> {
    /// A descriptor of the calling task, or `Fd::AT_FDCWD`.
    Fd(Fd),
    /// A dentry of the task's namespace.
    Dentry(&'a Arc<Dentry>),
}

impl From<Fd> for AtDir<'_> {
    fn from(fd: Fd) -> Self {
        AtDir::Fd(fd)
    }
}

impl<'a> From<&'a Arc<Dentry>> for AtDir<'a> {
    fn from(d: &'a Arc<Dentry>) -> Self {
        AtDir::Dentry(d)
    }
}

/// Where a walk starts: the dirfd's file (kept alive for the walk), a caller's dentry (with
/// the mount found for it), or the cwd.
pub(crate) enum Start<'t, V: Variant> {
    Cwd,
    File(FdRef<'t, V>),
    Dentry(&'t Arc<Dentry>, Arc<Mount>),
}

impl<V: Variant> Start<'_, V> {
    /// The start dentry and its mount, `cwd`'s for [`Start::Cwd`].
    pub(crate) fn path<'s>(&'s self, cwd: &'s Path) -> (&'s Arc<Dentry>, &'s Mount) {
        match self {
            Start::Cwd => (&cwd.dentry, &cwd.mnt),
            Start::File(f) => (f.dentry(), f.mount()),
            Start::Dentry(d, m) => (d, m),
        }
    }
}

impl<V: Variant> Task<V> {
    /// Resolves `dirfd` for a relative `path` (absolute paths ignore it, even if invalid).
    ///
    /// # Errors
    /// `EBADF` if `dirfd` is neither `AT_FDCWD` nor open (only for relative paths); `EXDEV`
    /// for a descriptor or dentry of another namespace.
    #[inline]
    pub(crate) fn start<'t>(&'t self, dirfd: AtDir<'t>, path: &[u8]) -> Result<Start<'t, V>> {
        if path.first() == Some(&b'/') || matches!(dirfd, AtDir::Fd(Fd::AT_FDCWD)) {
            return Ok(Start::Cwd);
        }
        self.start_at(dirfd)
    }

    /// [`start`](Self::start) for a relative path at a descriptor or dentry.
    fn start_at<'t>(&'t self, dirfd: AtDir<'t>) -> Result<Start<'t, V>> {
        let f = match dirfd {
            AtDir::Fd(fd) => self.fdget_raw(fd)?,
            AtDir::Dentry(d) => {
                let guard = epoch::pin();
                let m = self.fs.ns.mount_of(d, &guard).ok_or(Errno::EXDEV)?;
                return Ok(Start::Dentry(d, m));
            }
        };
        if f.mount().mnt_ns_id() != self.fs.ns.id() {
            // A descriptor of another namespace (installed with `install_file`): its tree is
            // not this task's to reach.
            return Err(Errno::EXDEV);
        }
        Ok(Start::File(f))
    }

    /// Runs `f` with a path walk set up for `dirfd`/`path`: the walk state (at the start's
    /// mount) and the start dentry.
    pub(crate) fn with_walk<R>(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        f: impl for<'a> FnOnce(&mut Nameidata<'a>, &'a Arc<Dentry>) -> Result<R>,
    ) -> Result<R> {
        let start = self.start(dirfd, path)?;
        let guard = epoch::pin();
        let root = self.fs.root.load(&guard);
        let (sd, sm) = start.path(self.fs.cwd.load(&guard));
        let mut nd = Nameidata::new(&guard, &self.cred, root, &self.fs.ns, sm);
        f(&mut nd, sd)
    }

    /// As [`with_walk`](Self::with_walk), under `LOOKUP_*` restrictions `lookup` (openat2's
    /// `resolve`): with `LOOKUP_BENEATH` or `LOOKUP_IN_ROOT` the walk's root is `dirfd`
    /// (the cwd for `AT_FDCWD`), and with `LOOKUP_IN_ROOT` an absolute `path` starts there
    /// too (`path_init` with `LOOKUP_IS_SCOPED`).
    ///
    /// # Errors
    /// `EXDEV` for an absolute `path` with `LOOKUP_BENEATH`; `EBADF` (dirfd); and `f`'s.
    pub(crate) fn with_walk_flags<R>(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        lookup: u32,
        f: impl for<'a> FnOnce(&mut Nameidata<'a>, &'a Arc<Dentry>) -> Result<R>,
    ) -> Result<R> {
        if lookup == 0 {
            return self.with_walk(dirfd, path, f);
        }
        if lookup & LOOKUP_BENEATH != 0 && path.first() == Some(&b'/') {
            return Err(Errno::EXDEV);
        }
        // IN_ROOT: `dirfd` is the start of absolute paths too.
        let start = if lookup & LOOKUP_IN_ROOT != 0 {
            self.start(dirfd, b".")?
        } else {
            self.start(dirfd, path)?
        };
        let guard = epoch::pin();
        let root = self.fs.root.load(&guard);
        let (sd, sm) = start.path(self.fs.cwd.load(&guard));
        let scoped;
        let nd_root = if lookup & LOOKUP_IS_SCOPED != 0 {
            scoped = Path {
                mnt: sm.get_ref(crate::sync::pcp_ref::REF, &guard)?,
                dentry: sd.clone(),
            };
            &scoped
        } else {
            root
        };
        let mut nd = Nameidata::new(&guard, &self.cred, nd_root, &self.fs.ns, sm);
        nd.flags = lookup;
        f(&mut nd, sd)
    }
}
