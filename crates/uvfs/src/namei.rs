//! Path walk (`Nameidata`) and the namespace calls built on it: `mkdirat`, `unlinkat`,
//! `rmdir`, `renameat`/`renameat2`, `linkat`, `symlinkat`, `readlinkat`.
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
use crate::dir::{Dir, DirLocked};
use crate::fdtable::FdRef;
use crate::fs::NewInode;
use crate::inode::{Inode, LINK_MAX};
use crate::mount::{Mount, Path};
use crate::sync::epoch::{self, Guard};
use crate::sync::plock;
use crate::task::Task;
use crate::time::coarse_now;
use crate::types::*;
use crate::variant::Variant;
use crate::{Errno, Result};
use std::sync::Arc;

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

/// State of one path walk (`struct nameidata`).
pub(crate) struct Nameidata<'a> {
    pub(crate) guard: &'a Guard,
    pub(crate) cred: &'a Cred,
    pub(crate) root: &'a Path,
    total_links: u32,
    /// `LOOKUP_*` restrictions (openat2's `resolve`); 0 for every other call, so the checks
    /// cost one branch on a word already in cache.
    pub(crate) flags: u32,
}

/// `getname`: checks a user path's length and contents.
///
/// # Errors
/// `ENAMETOOLONG` for 4096 bytes or more; `EINVAL` for an interior NUL (a C caller could not
/// pass one; uvfs refuses rather than truncating); `ENOENT` for the empty path unless
/// `empty_ok`.
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

impl<'a> Nameidata<'a> {
    pub(crate) fn new(guard: &'a Guard, cred: &'a Cred, root: &'a Path) -> Nameidata<'a> {
        Nameidata {
            guard,
            cred,
            root,
            total_links: 0,
            flags: 0,
        }
    }

    /// `may_lookup`: search permission on `dir`.
    #[inline]
    fn may_lookup(&self, dir: &Dentry) -> Result<()> {
        dir.d_inode.permission(self.cred, MAY_EXEC)
    }

    /// `..` of `cur`, clamped at the task's root and at the file system root.
    ///
    /// # Errors
    /// Scoped walks only: `EXDEV` at the root with `LOOKUP_BENEATH`; `EAGAIN` when the
    /// parent is no longer under the walk's root (a concurrent rename moved a directory out
    /// from under the walk; Linux: the `rename_lock` seqcount retry in `handle_dots`).
    fn dotdot(&self, cur: &'a Arc<Dentry>) -> Result<&'a Arc<Dentry>> {
        if self.flags & LOOKUP_IS_SCOPED != 0 {
            return self.dotdot_scoped(cur);
        }
        if Arc::ptr_eq(cur, &self.root.dentry) {
            return Ok(cur);
        }
        Ok(cur.parent(self.guard).unwrap_or(cur))
    }

    /// `follow_dotdot` for `RESOLVE_BENEATH`/`RESOLVE_IN_ROOT` (see `dotdot`).
    #[cold]
    fn dotdot_scoped(&self, cur: &'a Arc<Dentry>) -> Result<&'a Arc<Dentry>> {
        let root = &self.root.dentry;
        let parent = match cur.parent(self.guard) {
            Some(p) if !Arc::ptr_eq(cur, root) => p,
            // At the walk's root (or the file system's): `in_root`.
            _ if self.flags & LOOKUP_BENEATH != 0 => return Err(Errno::EXDEV),
            _ => return Ok(cur),
        };
        let mut a = parent;
        while !Arc::ptr_eq(a, root) {
            a = a.parent(self.guard).ok_or(Errno::EAGAIN)?;
        }
        Ok(parent)
    }

    /// Looks `name` up in directory `dir` (search permission already checked); follows a
    /// symlink result when `follow`.
    fn step(&mut self, dir: &'a Arc<Dentry>, name: &[u8], follow: bool) -> Result<&'a Arc<Dentry>> {
        let next = match name {
            b"." => dir,
            b".." => self.dotdot(dir)?,
            _ => {
                if name.len() > NAME_MAX {
                    return Err(Errno::ENAMETOOLONG);
                }
                self.lookup_cached(dir, name)?.ok_or(Errno::ENOENT)?
            }
        };
        if follow && next.d_inode.is_symlink() {
            return self.follow_link(dir, next);
        }
        Ok(next)
    }

    /// `lookup_fast` (and `lookup_slow` when it must): the entry `name` of directory `dir`
    /// (search permission checked by the caller), `None` when there is none. Lock-free for
    /// a complete cache (tmpfs); for a directory marked `I_REVALIDATE`, a cached entry is
    /// revalidated and a miss asks the file system.
    ///
    /// # Errors
    /// `ENOTDIR` when `dir` is not a directory; the file system's.
    #[inline]
    pub(crate) fn lookup_cached(
        &self,
        dir: &'a Arc<Dentry>,
        name: &[u8],
    ) -> Result<Option<&'a Arc<Dentry>>> {
        let di = &dir.d_inode;
        let d = di.dir().ok_or(Errno::ENOTDIR)?;
        match d.lookup(name, self.guard) {
            Some(e) if !e.d_inode.needs_revalidate() => Ok(Some(e)),
            Some(e) => match di.i_op.revalidate(di, name, &e.d_inode, true) {
                Ok(true) => Ok(Some(e)),
                Ok(false) | Err(Errno::ECHILD) => self.step_slow(dir, name),
                Err(err) => Err(err),
            },
            None if di.needs_revalidate() => self.step_slow(dir, name),
            None => Ok(None),
        }
    }

    /// `lookup_slow`: the entry `name` of `dir` (marked `I_REVALIDATE`) after a miss or a
    /// failed lock-free revalidation: under the directory's lock, revalidated or looked up
    /// by the file system and linked into the dentry cache ([`lookup_locked`]).
    ///
    /// # Errors
    /// The file system's.
    #[cold]
    fn step_slow(&self, dir: &'a Arc<Dentry>, name: &[u8]) -> Result<Option<&'a Arc<Dentry>>> {
        let d = dir.d_inode.dir().ok_or(Errno::ENOTDIR)?;
        loop {
            let mut dl = d.lock();
            if lookup_locked(dir, &mut dl, name)?.is_none() {
                return Ok(None);
            }
            drop(dl);
            // The entry is in the cache now, valid while the walk's guard is pinned; a
            // concurrent unlink may take it away again, and then it is looked up anew.
            if let Some(e) = d.lookup(name, self.guard) {
                return Ok(Some(e));
            }
        }
    }

    /// `pick_link`: resolves symlink `link` found in `dir`.
    fn follow_link(
        &mut self,
        dir: &'a Arc<Dentry>,
        link: &'a Arc<Dentry>,
    ) -> Result<&'a Arc<Dentry>> {
        self.count_link()?;
        link.d_inode.touch_atime();
        let body: &'a [u8] = link.d_inode.i_op.get_link(&link.d_inode)?;
        if body.is_empty() {
            return Err(Errno::ENOENT);
        }
        self.walk(dir, body, true, false)
    }

    /// `link_path_walk`: walks every component of `path` but the last, starting at `start`
    /// (or the root for an absolute path), checking search permission on the directory of
    /// each component including the last.
    ///
    /// # Errors
    /// `ENOTDIR` if `start` or an intermediate component is not a directory; `ENOENT`,
    /// `EACCES`, `ELOOP`, `ENAMETOOLONG` from the components.
    pub(crate) fn walk_parent<'p>(
        &mut self,
        start: &'a Arc<Dentry>,
        path: &'p [u8],
    ) -> Result<Last<'a, 'p>> {
        let (mut cur, mut rest) = match path.first() {
            // nd_jump_root: RESOLVE_BENEATH refuses absolute paths and symlinks.
            Some(b'/') if self.flags & LOOKUP_BENEATH != 0 => return Err(Errno::EXDEV),
            Some(b'/') => (&self.root.dentry, path),
            _ => (start, path),
        };
        while let [b'/', tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            return Ok(Last {
                dir: cur,
                name: rest,
                ty: LastType::Root,
                trailing_slash: false,
            });
        }
        loop {
            if !cur.d_inode.is_dir() {
                return Err(Errno::ENOTDIR);
            }
            self.may_lookup(cur)?;
            let end = rest.iter().position(|&c| c == b'/').unwrap_or(rest.len());
            let comp = &rest[..end];
            let mut after = &rest[end..];
            while let [b'/', tail @ ..] = after {
                after = tail;
            }
            if after.is_empty() {
                let ty = match comp {
                    b"." => LastType::Dot,
                    b".." => LastType::DotDot,
                    _ => LastType::Norm,
                };
                return Ok(Last {
                    dir: cur,
                    name: comp,
                    ty,
                    trailing_slash: end < rest.len(),
                });
            }
            cur = self.step(cur, comp, true)?;
            rest = after;
        }
    }

    /// Resolves the last component of a walked path: `follow` a final symlink, and require a
    /// directory when `want_dir` or the path had a trailing slash.
    ///
    /// # Errors
    /// `ENOENT`, `ENOTDIR`, `ELOOP`, `ENAMETOOLONG` as the walk.
    pub(crate) fn lookup_last(
        &mut self,
        last: Last<'a, '_>,
        follow: bool,
        want_dir: bool,
    ) -> Result<&'a Arc<Dentry>> {
        let follow = follow || last.trailing_slash;
        let want_dir = want_dir || last.trailing_slash;
        let d = match last.ty {
            LastType::Root | LastType::Dot => last.dir,
            LastType::DotDot => self.dotdot(last.dir)?,
            LastType::Norm => self.step(last.dir, last.name, follow)?,
        };
        if want_dir && !d.d_inode.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        Ok(d)
    }

    /// Walks `path` from `start` to its final dentry.
    pub(crate) fn walk(
        &mut self,
        start: &'a Arc<Dentry>,
        path: &[u8],
        follow: bool,
        want_dir: bool,
    ) -> Result<&'a Arc<Dentry>> {
        let last = self.walk_parent(start, path)?;
        self.lookup_last(last, follow, want_dir)
    }

    /// Counts one more symlink followed by a caller that restarts a walk at a symlink body
    /// (open with `O_CREAT`).
    ///
    /// # Errors
    /// `ELOOP` past 40, or at once under `LOOKUP_NO_SYMLINKS`.
    pub(crate) fn count_link(&mut self) -> Result<()> {
        if self.flags & LOOKUP_NO_SYMLINKS != 0 {
            return Err(Errno::ELOOP);
        }
        self.total_links += 1;
        if self.total_links > MAXSYMLINKS {
            return Err(Errno::ELOOP);
        }
        Ok(())
    }
}

/// The entry `name` of directory `dir`, whose lock `dl` the caller holds: the cached one, or
/// for a directory marked `I_REVALIDATE` the file system's (`d_revalidate`, then
/// `->lookup` on a miss, linking the result into the cache; a stale entry is dropped
/// first). For a complete cache (tmpfs) this is the cache lookup alone.
///
/// # Errors
/// The file system's; none for a complete cache.
pub(crate) fn lookup_locked(
    dir: &Arc<Dentry>,
    dl: &mut DirLocked<'_>,
    name: &[u8],
) -> Result<Option<Arc<Dentry>>> {
    let di = &dir.d_inode;
    if let Some(d) = dl.get(name).cloned() {
        if !d.d_inode.needs_revalidate() || di.i_op.revalidate(di, name, &d.d_inode, false)? {
            return Ok(Some(d));
        }
        // d_invalidate: the entry changed behind the VFS's back.
        dl.remove(name);
        unhash(&d);
    }
    if !di.needs_revalidate() || dl.inner.dead {
        return Ok(None);
    }
    let Some(inode) = di.i_op.lookup(di, name)? else {
        return Ok(None);
    };
    let name: Name = Arc::from(name);
    let cookie = dl.next_cookie();
    let d = Arc::new(Dentry::new(inode, Some(dir.clone()), name.clone(), cookie));
    dl.insert(name, d.clone(), cookie);
    Ok(Some(d))
}

/// `check_sticky`: in a sticky directory only the file's or directory's owner (or root) may
/// remove or rename an entry.
fn check_sticky(cred: &Cred, dir: &Inode, inode: &Inode) -> bool {
    dir.mode() & S_ISVTX != 0 && inode.uid() != cred.uid && dir.uid() != cred.uid && !cred.is_root()
}

/// `may_delete`: may `cred` remove `victim` from `dir` (`is_dir`: for rmdir/rename of a dir)?
///
/// # Errors
/// `EACCES` (no write+search on `dir`), `EPERM` (sticky), `ENOTDIR`/`EISDIR` (type
/// mismatch), `ENOENT` (dead directory).
fn may_delete(cred: &Cred, dir: &Inode, victim: &Inode, is_dir: bool, dead: bool) -> Result<()> {
    dir.permission(cred, MAY_WRITE | MAY_EXEC)?;
    if check_sticky(cred, dir, victim) {
        return Err(Errno::EPERM);
    }
    if is_dir {
        if !victim.is_dir() {
            return Err(Errno::ENOTDIR);
        }
    } else if victim.is_dir() {
        return Err(Errno::EISDIR);
    }
    if dead {
        return Err(Errno::ENOENT);
    }
    Ok(())
}

/// `may_linkat` with `fs.protected_hardlinks = 1`: the owner of `inode` or root may link
/// it; anyone else only a "safe" source (`safe_hardlink_source`): a regular file, not
/// set-user-ID, not set-group-ID and group-executable, readable and writable by `cred`.
///
/// # Errors
/// `EPERM` otherwise.
fn may_linkat(cred: &Cred, inode: &Inode) -> Result<()> {
    if cred.owner_or_capable(inode.uid()) {
        return Ok(());
    }
    let mode = inode.mode();
    let safe = inode.is_reg()
        && mode & S_ISUID == 0
        && mode & (S_ISGID | S_IXGRP) != (S_ISGID | S_IXGRP)
        && inode.permission(cred, MAY_READ | MAY_WRITE).is_ok();
    if safe {
        Ok(())
    } else {
        Err(Errno::EPERM)
    }
}

/// `may_create`: may `cred` create an entry in `dir`?
///
/// # Errors
/// `ENOENT` (the directory was removed), `EACCES` (no write+search permission).
fn may_create(cred: &Cred, dir: &Inode, dead: bool) -> Result<()> {
    if dead {
        return Err(Errno::ENOENT);
    }
    dir.permission(cred, MAY_WRITE | MAY_EXEC)
}

/// `mode_strip_sgid`: a non-directory `mode` (permission bits as given to the call,
/// before the umask) with `S_ISGID` removed when it is group-executable, `dir` is
/// set-group-ID and the creator is neither in `dir`'s group nor root (`CAP_FSETID`): the
/// new file would get that group, which the creator may not hand out with set-group-ID.
pub(crate) fn mode_strip_sgid(cred: &Cred, dir: &Inode, mode: u32) -> u32 {
    if mode & (S_ISGID | S_IXGRP) != S_ISGID | S_IXGRP
        || mode & S_IFMT == S_IFDIR
        || dir.mode() & S_ISGID == 0
        || cred.in_group(dir.gid())
        || cred.is_root()
    {
        return mode;
    }
    mode & !S_ISGID
}

/// `inode_init_owner`: the group and mode of a new inode created in `dir` with `mode`
/// (umask applied): a setgid directory passes its group on, and to subdirectories its
/// set-group-ID bit; otherwise the creator's group.
pub(crate) fn inode_init_owner(cred: &Cred, dir: &Inode, mode: u32, is_dir: bool) -> (u32, u32) {
    if dir.mode() & S_ISGID == 0 {
        return (cred.gid, mode);
    }
    let mode = if is_dir {
        mode | S_ISGID
    } else {
        // Callers strip before the umask (as `vfs_prepare_mode`); this catches those that
        // do not, as far as the masked mode still tells.
        mode_strip_sgid(cred, dir, mode)
    };
    (dir.gid(), mode)
}

/// Creates a new inode named `name` in the locked directory `dl` of `parent`
/// (`shmem_mknod`/`shmem_symlink` + `d_instantiate`). Checks nothing but the link count.
pub(crate) fn create_locked<V: Variant>(
    task: &Task<V>,
    parent: &Arc<Dentry>,
    dl: &mut DirLocked<'_>,
    name: &[u8],
    mode: u32,
    rdev: u64,
    target: Option<&[u8]>,
) -> Result<Arc<Dentry>> {
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
    };
    let inode = task.fs.new_inode(dir, name, args)?;
    let name: Name = Arc::from(name);
    let cookie = dl.next_cookie();
    let d = Arc::new(Dentry::new(
        inode,
        Some(parent.clone()),
        name.clone(),
        cookie,
    ));
    dl.insert(name, d.clone(), cookie);
    if is_dir {
        dir.add_nlink(1, None);
    }
    dir.touch_mtime_ctime(now);
    Ok(d)
}

impl crate::task::FsStruct {
    /// A new inode for `dir` from the file system owning it ([`FileSystem::create`]).
    /// With one mount per namespace that is the root mount's; the mount tree (issue 10)
    /// will pass the walk's mount instead.
    ///
    /// # Errors
    /// Those of [`FileSystem::create`] (tmpfs: `ENOSPC` when the mount's inodes or pages
    /// are used up).
    ///
    /// [`FileSystem::create`]: crate::fs::FileSystem::create
    pub(crate) fn new_inode(
        &self,
        dir: &Inode,
        name: &[u8],
        args: NewInode<'_>,
    ) -> Result<Arc<Inode>> {
        let g = epoch::pin();
        let sb = &self.root.load(&g).mnt.mnt_sb;
        sb.s_op.create(sb, dir, name, args)
    }
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

/// Where a walk starts: the dirfd's file (kept alive for the walk), a caller's dentry, or
/// the cwd.
pub(crate) enum Start<'t, V: Variant> {
    Cwd,
    File(FdRef<'t, V>),
    Dentry(&'t Arc<Dentry>),
}

impl<V: Variant> Start<'_, V> {
    /// The start dentry, `cwd` for [`Start::Cwd`].
    pub(crate) fn dentry<'s>(&'s self, cwd: &'s Arc<Dentry>) -> &'s Arc<Dentry> {
        match self {
            Start::Cwd => cwd,
            Start::File(f) => f.dentry(),
            Start::Dentry(d) => d,
        }
    }
}

impl<V: Variant> Task<V> {
    /// Resolves `dirfd` for a relative `path` (absolute paths ignore it, even if invalid).
    ///
    /// # Errors
    /// `EBADF` if `dirfd` is neither `AT_FDCWD` nor open (only for relative paths).
    pub(crate) fn start<'t>(&'t self, dirfd: AtDir<'t>, path: &[u8]) -> Result<Start<'t, V>> {
        if path.first() == Some(&b'/') || matches!(dirfd, AtDir::Fd(Fd::AT_FDCWD)) {
            return Ok(Start::Cwd);
        }
        let guard = epoch::pin();
        let dev = self.fs.root.load(&guard).mnt.mnt_sb.s_dev;
        let f = match dirfd {
            AtDir::Fd(fd) => self.fdget_raw(fd)?,
            AtDir::Dentry(d) if d.d_inode.i_dev == dev => return Ok(Start::Dentry(d)),
            AtDir::Dentry(_) => return Err(Errno::EXDEV),
        };
        if f.inode().i_dev != dev {
            // A descriptor of another namespace (installed with `install_file`): its tree has
            // its own super block (inode numbers, rename lock), which this task cannot reach.
            return Err(Errno::EXDEV);
        }
        Ok(Start::File(f))
    }

    /// Runs `f` with a path walk set up for `dirfd`/`path`: the walk state, the start dentry
    /// and the mount (a uvfs namespace has one mount, the task's root's; `start` refuses
    /// descriptors of other namespaces).
    pub(crate) fn with_walk<R>(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        f: impl for<'a> FnOnce(&mut Nameidata<'a>, &'a Arc<Dentry>, &'a Arc<Mount>) -> Result<R>,
    ) -> Result<R> {
        let start = self.start(dirfd, path)?;
        let guard = epoch::pin();
        let root = self.fs.root.load(&guard);
        let sd: &Arc<Dentry> = start.dentry(&self.fs.cwd.load(&guard).dentry);
        let mut nd = Nameidata::new(&guard, &self.cred, root);
        f(&mut nd, sd, &root.mnt)
    }

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
        f: impl FnOnce(&Last<'_, '_>, &mut DirLocked<'_>) -> Result<R>,
    ) -> Result<R> {
        self.with_walk(dirfd, path, |nd, start, _| {
            let last = nd.walk_parent(start, path)?;
            if last.ty != LastType::Norm {
                return Err(Errno::EEXIST);
            }
            if last.name.len() > NAME_MAX {
                return Err(Errno::ENAMETOOLONG);
            }
            let d = last.dir.d_inode.dir().ok_or(Errno::ENOTDIR)?;
            let mut dl = d.lock();
            if lookup_locked(last.dir, &mut dl, last.name)?.is_some() {
                return Err(Errno::EEXIST);
            }
            if last.trailing_slash && !dir {
                return Err(Errno::ENOENT);
            }
            may_create(&self.cred, &last.dir.d_inode, dl.inner.dead)?;
            f(&last, &mut dl)
        })
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
        f: impl for<'a> FnOnce(&mut Nameidata<'a>, &'a Arc<Dentry>, &'a Arc<Mount>) -> Result<R>,
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
        let sd: &Arc<Dentry> = start.dentry(&self.fs.cwd.load(&guard).dentry);
        let scoped;
        let nd_root = if lookup & LOOKUP_IS_SCOPED != 0 {
            scoped = Path {
                mnt: root.mnt.clone(),
                dentry: sd.clone(),
            };
            &scoped
        } else {
            root
        };
        let mut nd = Nameidata::new(&guard, &self.cred, nd_root);
        nd.flags = lookup;
        f(&mut nd, sd, &root.mnt)
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
        path: impl AsRef<[u8]>,
        mode: u32,
    ) -> Result<()> {
        let dirfd: AtDir<'_> = dirfd.into();
        let path = getname(path.as_ref(), false)?;
        // vfs_mkdir keeps only S_IRWXUGO | S_ISVTX of `mode`: set-user-ID and set-group-ID
        // are dropped (a subdirectory gets S_ISGID only from a setgid parent).
        let mode = S_IFDIR | (mode & 0o1777 & !self.current_umask());
        self.filename_create(dirfd, path, true, |last, dl| {
            create_locked(self, last.dir, dl, last.name, mode, 0, None).map(drop)
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
        target: impl AsRef<[u8]>,
        dirfd: impl Into<AtDir<'a>>,
        linkpath: impl AsRef<[u8]>,
    ) -> Result<()> {
        let dirfd: AtDir<'_> = dirfd.into();
        let target = getname(target.as_ref(), false)?;
        let path = getname(linkpath.as_ref(), false)?;
        self.filename_create(dirfd, path, false, |last, dl| {
            let mode = S_IFLNK | 0o777;
            create_locked(self, last.dir, dl, last.name, mode, 0, Some(target))?;
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
        path: impl AsRef<[u8]>,
        buf: &mut [u8],
    ) -> Result<usize> {
        let dirfd: AtDir<'_> = dirfd.into();
        if buf.is_empty() {
            return Err(Errno::EINVAL);
        }
        // LOOKUP_EMPTY: an empty path reads the symlink `dirfd` names (an `O_PATH|O_NOFOLLOW`
        // descriptor); anything else is then ENOENT rather than EINVAL.
        let path = getname(path.as_ref(), true)?;
        self.with_walk(dirfd, path, |nd, start, _| {
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
            let t = d.d_inode.symlink_target().ok_or(not_link)?;
            let n = t.len().min(buf.len());
            buf[..n].copy_from_slice(&t[..n]);
            d.d_inode.touch_atime();
            Ok(n)
        })
    }

    /// `unlinkat(2)`: removes a name (`flags` 0) or an empty directory (`AT_REMOVEDIR`).
    ///
    /// # Errors
    /// `EINVAL` (unknown flags; rmdir of `.`), `ENOENT`, `ENOTDIR`, `EISDIR` (unlink of a
    /// directory, of `.`/`..`/`/`), `ENOTEMPTY` (rmdir of a non-empty directory or `..`),
    /// `EBUSY` (rmdir of `/`), `EACCES`, `EPERM` (sticky directory), `ENAMETOOLONG`,
    /// `ELOOP`, `EBADF`.
    ///
    /// # References
    /// unlink(2), rmdir(2); Linux `do_unlinkat`, `do_rmdir`, `shmem_unlink`, `simple_rmdir`.
    pub fn unlinkat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsRef<[u8]>,
        flags: AtFlags,
    ) -> Result<()> {
        let dirfd: AtDir<'_> = dirfd.into();
        if !(flags - AtFlags::REMOVEDIR).is_empty() {
            return Err(Errno::EINVAL);
        }
        let rmdir = flags.contains(AtFlags::REMOVEDIR);
        let path = getname(path.as_ref(), false)?;
        self.with_walk(dirfd, path, |nd, start, _| {
            let last = nd.walk_parent(start, path)?;
            match (last.ty, rmdir) {
                (LastType::Norm, _) => {}
                (LastType::DotDot, true) => return Err(Errno::ENOTEMPTY),
                (LastType::Dot, true) => return Err(Errno::EINVAL),
                (LastType::Root, true) => return Err(Errno::EBUSY),
                (_, false) => return Err(Errno::EISDIR),
            }
            if last.name.len() > NAME_MAX {
                return Err(Errno::ENAMETOOLONG);
            }
            let dir_inode = &last.dir.d_inode;
            let dir = dir_inode.dir().ok_or(Errno::ENOTDIR)?;
            let mut dl = dir.lock();
            let victim = lookup_locked(last.dir, &mut dl, last.name)?.ok_or(Errno::ENOENT)?;
            let vi = &victim.d_inode;
            if !rmdir && last.trailing_slash {
                return Err(if vi.is_dir() {
                    Errno::EISDIR
                } else {
                    Errno::ENOTDIR
                });
            }
            may_delete(&self.cred, dir_inode, vi, rmdir, dl.inner.dead)?;
            let links = if rmdir {
                let sub = vi.dir().ok_or(Errno::ENOTDIR)?;
                let mut sl = sub.lock();
                // A cache that may be incomplete cannot tell; the file system's rmdir does.
                if !vi.needs_revalidate() && !sl.is_empty() {
                    return Err(Errno::ENOTEMPTY);
                }
                dir_inode.i_op.rmdir(dir_inode, last.name, vi)?;
                sl.inner.dead = true;
                let stale = sl.clear();
                drop(sl);
                for c in &stale {
                    unhash(c);
                }
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
            unhash(&victim);
            let t = vi.add_nlink(-links, Some(now));
            dir_inode.touch_mtime_ctime(t);
            Ok(())
        })
    }

    /// `renameat(2)`: renames `oldpath` to `newpath`, atomically replacing an existing
    /// target (a non-directory, or an empty directory when the source is a directory).
    /// The same as [`renameat2`](Self::renameat2) with no flags.
    ///
    /// # Errors
    /// `ENOENT` (no source), `EBUSY` (`.`, `..` or `/` as either last component), `ENOTDIR`
    /// (source not a directory with a trailing slash on either path; directory over a
    /// non-directory), `EISDIR` (non-directory over a directory), `EINVAL` (a directory into
    /// its own subtree), `ENOTEMPTY` (target directory not empty, or an ancestor of the
    /// source), `EACCES`, `EPERM` (sticky), `EXDEV` (different mounts), `EMLINK`,
    /// `ENAMETOOLONG`, `ELOOP`, `EBADF`.
    ///
    /// # References
    /// rename(2); Linux `do_renameat2`, `lock_rename`, `vfs_rename`, `shmem_rename2`.
    pub fn renameat<'a>(
        &self,
        olddirfd: impl Into<AtDir<'a>>,
        oldpath: impl AsRef<[u8]>,
        newdirfd: impl Into<AtDir<'a>>,
        newpath: impl AsRef<[u8]>,
    ) -> Result<()> {
        let olddirfd: AtDir<'_> = olddirfd.into();
        let newdirfd: AtDir<'_> = newdirfd.into();
        self.renameat2(olddirfd, oldpath, newdirfd, newpath, RenameFlags::empty())
    }

    /// `renameat2(2)`: [`renameat`](Self::renameat) with `flags`: `NOREPLACE` refuses to
    /// replace an existing target; `EXCHANGE` atomically swaps two existing entries, which
    /// may be of different types (both directories, or a directory and a non-directory, in
    /// the same or different parents; the parents' link counts follow a directory that
    /// changes parent). Either way a lockless lookup of either name never misses it.
    ///
    /// Path-walk order as Linux: flags, then the two parent walks, then the checks under
    /// the directory locks (source, then target).
    ///
    /// # Errors
    /// As `renameat`, and:
    /// - `EINVAL`: unknown flags; `EXCHANGE` with `NOREPLACE` or `WHITEOUT`; `WHITEOUT`
    ///   (uvfs has no device inodes, so no whiteouts: Linux tmpfs leaves a 0:0 character
    ///   device at the source; uvfs refuses before looking at the paths); with `EXCHANGE`,
    ///   a directory exchanged with an entry inside its own subtree, either way round.
    /// - `EEXIST`: `NOREPLACE` and the target exists (also for a `.`/`..`/`/` target,
    ///   where `renameat` gives `EBUSY`).
    /// - `ENOENT`: `EXCHANGE` and the target does not exist.
    /// - `ENOTDIR`: `EXCHANGE` with a trailing slash on a non-directory (a trailing slash on
    ///   the target is allowed when the target is a directory, whatever the source).
    /// - `EACCES`: also, for `EXCHANGE` across parents, no write permission on a target
    ///   directory (its `..` changes).
    ///
    /// Exchanging an entry with itself or with another hard link of the same inode succeeds
    /// and changes nothing.
    ///
    /// # References
    /// rename(2) (`renameat2`); Linux `do_renameat2`, `vfs_rename`, `shmem_rename2`,
    /// `simple_rename_exchange`, `simple_offset_rename_exchange`.
    #[doc(alias = "rename")]
    pub fn renameat2<'a>(
        &self,
        olddirfd: impl Into<AtDir<'a>>,
        oldpath: impl AsRef<[u8]>,
        newdirfd: impl Into<AtDir<'a>>,
        newpath: impl AsRef<[u8]>,
        flags: RenameFlags,
    ) -> Result<()> {
        let olddirfd: AtDir<'_> = olddirfd.into();
        let newdirfd: AtDir<'_> = newdirfd.into();
        let known = RenameFlags::NOREPLACE | RenameFlags::EXCHANGE | RenameFlags::WHITEOUT;
        if !(flags - known).is_empty()
            || (flags.contains(RenameFlags::EXCHANGE)
                && flags.intersects(RenameFlags::NOREPLACE | RenameFlags::WHITEOUT))
            || flags.contains(RenameFlags::WHITEOUT)
        {
            return Err(Errno::EINVAL);
        }
        // filename_parentat of the source, then of the target: an error of the first walk
        // wins over any of the second.
        let oldpath = getname(oldpath.as_ref(), false)?;
        let ostart = self.start(olddirfd, oldpath)?;
        let guard = epoch::pin();
        let root = self.fs.root.load(&guard);
        let cwd = self.fs.cwd.load(&guard);
        let osd = ostart.dentry(&cwd.dentry);
        let mut nd = Nameidata::new(&guard, &self.cred, root);
        let ol = nd.walk_parent(osd, oldpath)?;
        let newpath = getname(newpath.as_ref(), false)?;
        let nstart = self.start(newdirfd, newpath)?;
        let nsd = nstart.dentry(&cwd.dentry);
        let mut nd2 = Nameidata::new(&guard, &self.cred, root);
        let nl = nd2.walk_parent(nsd, newpath)?;
        if ol.dir.d_inode.i_dev != nl.dir.d_inode.i_dev {
            return Err(Errno::EXDEV);
        }
        if ol.ty != LastType::Norm {
            return Err(Errno::EBUSY);
        }
        if nl.ty != LastType::Norm {
            return Err(if flags.contains(RenameFlags::NOREPLACE) {
                Errno::EEXIST
            } else {
                Errno::EBUSY
            });
        }
        if ol.name.len() > NAME_MAX || nl.name.len() > NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        rename_locked(self, &ol, &nl, &root.mnt, flags)
    }

    /// `linkat(2)`: gives the file at `oldpath` the new name `newpath` (a hard link).
    ///
    /// `flags`: `AT_SYMLINK_FOLLOW` follows a final symlink of `oldpath` (by default the
    /// link itself gets the new name); `AT_EMPTY_PATH` with an empty `oldpath` links the file
    /// `olddirfd` refers to. A successful link stamps the inode's ctime and gives the new
    /// parent's mtime and ctime the same time (`shmem_link`).
    ///
    /// Behaves as Linux with `fs.protected_hardlinks = 1` (the common default, and the test
    /// machine's setting): a caller who is neither the file's owner nor root may link only a
    /// regular file that is neither set-user-ID nor set-group-ID-and-group-executable and
    /// that it may read and write.
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
        oldpath: impl AsRef<[u8]>,
        newdirfd: impl Into<AtDir<'a>>,
        newpath: impl AsRef<[u8]>,
        flags: AtFlags,
    ) -> Result<()> {
        let olddirfd: AtDir<'_> = olddirfd.into();
        let newdirfd: AtDir<'_> = newdirfd.into();
        if !(flags - (AtFlags::SYMLINK_FOLLOW | AtFlags::EMPTY_PATH)).is_empty() {
            return Err(Errno::EINVAL);
        }
        let empty_ok = flags.contains(AtFlags::EMPTY_PATH);
        let oldpath = getname(oldpath.as_ref(), empty_ok)?;
        // filename_lookup of the source, to its final dentry (its errors win over any of
        // the target's).
        let ostart = self.start(olddirfd, oldpath)?;
        if let (true, Start::File(f)) = (empty_ok, &ostart) {
            // path_init with LOOKUP_LINKAT_EMPTY: the descriptor was opened with the
            // caller's current credentials, or the caller has CAP_DAC_READ_SEARCH.
            if f.hot().f_cred_id != self.cred_id && !self.cred.is_root() {
                return Err(Errno::ENOENT);
            }
        }
        let follow = flags.contains(AtFlags::SYMLINK_FOLLOW);
        let old: Arc<Dentry> = {
            let guard = epoch::pin();
            let root = self.fs.root.load(&guard);
            let cwd = self.fs.cwd.load(&guard);
            let osd = ostart.dentry(&cwd.dentry);
            let mut nd = Nameidata::new(&guard, &self.cred, root);
            nd.walk(osd, oldpath, follow, false)?.clone()
        };
        // filename_create of the target.
        let newpath = getname(newpath.as_ref(), false)?;
        self.with_walk(newdirfd, newpath, |nd, start, _| {
            let nl = nd.walk_parent(start, newpath)?;
            if nl.ty != LastType::Norm {
                return Err(Errno::EEXIST);
            }
            if nl.name.len() > NAME_MAX {
                return Err(Errno::ENAMETOOLONG);
            }
            let ndir_i = &nl.dir.d_inode;
            let ndir = ndir_i.dir().ok_or(Errno::ENOTDIR)?;
            let mut dl = ndir.lock();
            if lookup_locked(nl.dir, &mut dl, nl.name)?.is_some() {
                return Err(Errno::EEXIST);
            }
            if nl.trailing_slash || dl.inner.dead {
                return Err(Errno::ENOENT);
            }
            let oi = &old.d_inode;
            if oi.i_dev != ndir_i.i_dev {
                return Err(Errno::EXDEV);
            }
            may_linkat(&self.cred, oi)?;
            ndir_i.permission(&self.cred, MAY_WRITE | MAY_EXEC)?;
            if oi.is_dir() {
                return Err(Errno::EPERM);
            }
            // shmem_link: the inode's new ctime, which the directory's mtime and ctime take
            // (from the directory's current time, so its change shows too; see `unlinkat`).
            let now = ndir_i.current_time(coarse_now());
            ndir_i.i_op.link(ndir_i, nl.name, oi)?;
            let t = oi.link_inc(now)?;
            let name: Name = Arc::from(nl.name);
            let cookie = dl.next_cookie();
            let d = Arc::new(Dentry::new(
                oi.clone(),
                Some(nl.dir.clone()),
                name.clone(),
                cookie,
            ));
            dl.insert(name, d, cookie);
            ndir_i.touch_mtime_ctime(t);
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
    pub fn rmdir(&self, path: impl AsRef<[u8]>) -> Result<()> {
        self.unlinkat(Fd::AT_FDCWD, path, AtFlags::REMOVEDIR)
    }
}

/// Marks a removed dentry unhashed (its link keeps parent and name for `..` and getcwd).
pub(crate) fn unhash(d: &Arc<Dentry>) {
    let g = epoch::pin();
    let l = d.link(&g);
    d.d_link.replace(
        DLink {
            parent: l.parent.clone(),
            name: l.name.clone(),
            cookie: l.cookie,
            unhashed: true,
        },
        &g,
    );
}

/// The child of `anc` on the way down to `d` (Linux `d_ancestor`), if `anc` is a proper
/// ancestor of `d`. Context: rename lock held.
fn child_towards<'g>(
    anc: &Arc<Dentry>,
    d: &'g Arc<Dentry>,
    g: &'g Guard,
) -> Option<&'g Arc<Dentry>> {
    let mut cur = d;
    loop {
        let p = cur.parent(g)?;
        if Arc::ptr_eq(p, anc) {
            return Some(cur);
        }
        cur = p;
    }
}

/// `lock_rename` + `vfs_rename` + `shmem_rename2`: the checks and the change under the
/// directory locks. `flags` are valid (`renameat2` checked them).
fn rename_locked<V: Variant>(
    task: &Task<V>,
    ol: &Last<'_, '_>,
    nl: &Last<'_, '_>,
    mnt: &Arc<Mount>,
    flags: RenameFlags,
) -> Result<()> {
    let cred = &task.cred;
    let exchange = flags.contains(RenameFlags::EXCHANGE);
    let odir_i = &ol.dir.d_inode;
    let ndir_i = &nl.dir.d_inode;
    let odir = odir_i.dir().ok_or(Errno::ENOTDIR)?;
    let ndir = ndir_i.dir().ok_or(Errno::ENOTDIR)?;
    let same = Arc::ptr_eq(ol.dir, nl.dir);
    let g = epoch::pin();
    // lock_rename: same directory -> its lock; else the super block's rename lock, then
    // ancestor first, else by address.
    let _rename_guard = if same {
        None
    } else {
        Some(plock(&mnt.mnt_sb.s_rename_lock))
    };
    let (mut trap_old, mut trap_new) = (None, None);
    let (mut ol_lock, mut nl_lock): (DirLocked<'_>, Option<DirLocked<'_>>) = if same {
        (odir.lock(), None)
    } else if let Some(t) = child_towards(ol.dir, nl.dir, &g) {
        // old dir is an ancestor of the new dir.
        trap_old = Some(t.clone());
        let a = odir.lock();
        (a, Some(ndir.lock()))
    } else if let Some(t) = child_towards(nl.dir, ol.dir, &g) {
        trap_new = Some(t.clone());
        let b = ndir.lock();
        (odir.lock(), Some(b))
    } else if (odir as *const Dir) < (ndir as *const Dir) {
        let a = odir.lock();
        (a, Some(ndir.lock()))
    } else {
        let b = ndir.lock();
        (odir.lock(), Some(b))
    };
    // do_renameat2, in its order: the source, the target, the flags, trailing slashes, then
    // the traps.
    let old = lookup_locked(ol.dir, &mut ol_lock, ol.name)?.ok_or(Errno::ENOENT)?;
    let ndead = match &nl_lock {
        Some(l) => l.inner.dead,
        None => ol_lock.inner.dead,
    };
    if ndead {
        // The target's lookup (`lookup_one_qstr_excl`) refuses a dead directory before any
        // flag or permission check.
        return Err(Errno::ENOENT);
    }
    let oi = old.d_inode.clone();
    let is_dir = oi.is_dir();
    let target = match &mut nl_lock {
        Some(l) => lookup_locked(nl.dir, l, nl.name)?,
        None => lookup_locked(nl.dir, &mut ol_lock, nl.name)?,
    };
    if flags.contains(RenameFlags::NOREPLACE) && target.is_some() {
        return Err(Errno::EEXIST);
    }
    let new_is_dir = target.as_ref().is_some_and(|t| t.d_inode.is_dir());
    if exchange {
        if target.is_none() {
            return Err(Errno::ENOENT);
        }
        if !new_is_dir && nl.trailing_slash {
            return Err(Errno::ENOTDIR);
        }
    }
    if !is_dir && (ol.trailing_slash || (!exchange && nl.trailing_slash)) {
        return Err(Errno::ENOTDIR);
    }
    if trap_old.as_ref().is_some_and(|t| Arc::ptr_eq(t, &old)) {
        return Err(Errno::EINVAL);
    }
    if let (Some(t), Some(tn)) = (&trap_new, &target) {
        if Arc::ptr_eq(t, tn) {
            return Err(if exchange {
                Errno::EINVAL
            } else {
                Errno::ENOTEMPTY
            });
        }
    }
    // vfs_rename
    if let Some(t) = &target {
        if Arc::ptr_eq(&t.d_inode, &oi) {
            return Ok(());
        }
    }
    may_delete(cred, odir_i, &oi, is_dir, ol_lock.inner.dead)?;
    match &target {
        None => may_create(cred, ndir_i, ndead)?,
        // An exchanged target is removed from its place as what it is.
        Some(t) => may_delete(
            cred,
            ndir_i,
            &t.d_inode,
            if exchange { new_is_dir } else { is_dir },
            ndead,
        )?,
    }
    if !same {
        // A directory changing parent needs write permission on itself (its `..` changes).
        if is_dir {
            oi.permission(cred, MAY_WRITE)?;
        }
        if let (true, Some(t)) = (exchange && new_is_dir, &target) {
            t.d_inode.permission(cred, MAY_WRITE)?;
        }
        // tmpfs has no link limit (`s_max_links` 0); uvfs refuses to wrap the 32-bit count.
        if is_dir && !new_is_dir && ndir_i.nlink() == LINK_MAX {
            return Err(Errno::EMLINK);
        }
        if exchange && !is_dir && new_is_dir && odir_i.nlink() == LINK_MAX {
            return Err(Errno::EMLINK);
        }
    }
    if exchange {
        let t = target.as_ref().expect("checked above");
        odir_i
            .i_op
            .rename(odir_i, ol.name, ndir_i, nl.name, flags)?;
        exchange_locked(ol, nl, &old, t, &mut ol_lock, &mut nl_lock, same, &g);
        return Ok(());
    }
    let target_dir = target.as_ref().and_then(|t| t.d_inode.dir());
    // Lock order: the target is a child of the new dir (locked): parent before child.
    let target_lock = target_dir.map(|td| td.lock());
    if let (Some(tl), Some(t)) = (&target_lock, &target) {
        // A cache that may be incomplete cannot tell; the file system's rename does.
        if !t.d_inode.needs_revalidate() && !tl.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
    }
    odir_i
        .i_op
        .rename(odir_i, ol.name, ndir_i, nl.name, flags)?;
    if let Some(mut tl) = target_lock {
        tl.inner.dead = true;
        let stale = tl.clear();
        drop(tl);
        for c in &stale {
            unhash(c);
        }
    }
    // Commit: nothing below can fail. Each skip-list change is seen by lookups as it is made;
    // a replaced target is bracketed by `replace_begin`/`replace_end` (dir.rs), so a lookup
    // of the new name sees the old or the new entry, never neither (rename(2)).
    let now = coarse_now();
    ol_lock.remove(ol.name);
    let nlock: &mut DirLocked<'_> = match &mut nl_lock {
        Some(l) => l,
        None => &mut ol_lock,
    };
    let mut target_time = None;
    if let Some(t) = &target {
        nlock.replace_begin();
        nlock.remove(nl.name);
        unhash(t);
        // shmem_rename2 unlinks the target first (see `unlinkat`).
        let tnow = ndir_i.current_time(now);
        target_time = Some(
            t.d_inode
                .add_nlink(if is_dir { -2 } else { -1 }, Some(tnow)),
        );
        if is_dir {
            odir_i.add_nlink(-1, None);
        }
    } else if is_dir && !same {
        odir_i.add_nlink(-1, None);
        ndir_i.add_nlink(1, None);
    }
    let name: Name = Arc::from(nl.name);
    // Within one directory the entry keeps its getdents position, so a listing that runs
    // during the rename shows it once, under one of its names. (Linux 6.18's offset map gives
    // it a new offset, and a listing can then show it twice: issue 4 asks to do better.)
    // Into another directory it gets that directory's next cookie.
    let cookie = if same {
        old.link(&g).cookie
    } else {
        nlock.next_cookie()
    };
    old.d_link.replace(
        DLink {
            parent: Some(nl.dir.clone()),
            name: name.clone(),
            cookie,
            unhashed: false,
        },
        &g,
    );
    nlock.insert(name, old, cookie);
    nlock.replace_end();
    if let Some(t) = target_time {
        ndir_i.touch_mtime_ctime(t);
    }
    // simple_rename_timestamp: each inode its own current time from the one coarse `now`
    // (Linux stamps the target's ctime once more here, a no-op after its unlink).
    odir_i.touch_mtime_ctime(now);
    if !same {
        ndir_i.touch_mtime_ctime(now);
    }
    oi.touch_ctime(now);
    Ok(())
}

/// The commit of `RENAME_EXCHANGE` (`simple_offset_rename_exchange` +
/// `simple_rename_exchange` + `d_exchange`): `old` (named `ol`) and `target` (named `nl`)
/// swap names, parents and getdents cookies; the parents' link counts follow a directory
/// exchanged with a non-directory across parents; both parents' mtime and ctime and both
/// inodes' ctime are stamped. Nothing here fails. Context: caller holds both directory locks
/// (`ol_lock`, and `nl_lock` unless `same`) and checked everything.
#[allow(clippy::too_many_arguments)]
fn exchange_locked<'l>(
    ol: &Last<'_, '_>,
    nl: &Last<'_, '_>,
    old: &Arc<Dentry>,
    target: &Arc<Dentry>,
    ol_lock: &mut DirLocked<'l>,
    nl_lock: &mut Option<DirLocked<'l>>,
    same: bool,
    g: &Guard,
) {
    let (odir_i, ndir_i) = (&ol.dir.d_inode, &nl.dir.d_inode);
    let (oi, ti) = (&old.d_inode, &target.d_inode);
    let now = coarse_now();
    let (oc, tc) = (old.link(g).cookie, target.link(g).cookie);
    let (oname, nname): (Name, Name) = (Arc::from(ol.name), Arc::from(nl.name));
    // Both names are replaced, not removed: lockless lookups that miss either wait for the
    // exchange to end (dir.rs), so neither name is ever seen missing.
    ol_lock.replace_begin();
    if let Some(l) = nl_lock.as_mut() {
        l.replace_begin();
    }
    old.d_link.replace(
        DLink {
            parent: Some(nl.dir.clone()),
            name: nname.clone(),
            cookie: tc,
            unhashed: false,
        },
        g,
    );
    target.d_link.replace(
        DLink {
            parent: Some(ol.dir.clone()),
            name: oname.clone(),
            cookie: oc,
            unhashed: false,
        },
        g,
    );
    ol_lock.exchange_entry(oname, target.clone(), oc);
    let nlock: &mut DirLocked<'l> = match nl_lock {
        Some(l) => l,
        None => ol_lock,
    };
    nlock.exchange_entry(nname, old.clone(), tc);
    nlock.replace_end();
    ol_lock.replace_end();
    if !same && oi.is_dir() != ti.is_dir() {
        // The directory's `..` moves from one parent to the other.
        let (from, to) = if oi.is_dir() {
            (odir_i, ndir_i)
        } else {
            (ndir_i, odir_i)
        };
        from.add_nlink(-1, None);
        to.add_nlink(1, None);
    }
    // simple_rename_timestamp: both parents' mtime and ctime, both inodes' ctime.
    odir_i.touch_mtime_ctime(now);
    if !same {
        ndir_i.touch_mtime_ctime(now);
    }
    oi.touch_ctime(now);
    ti.touch_ctime(now);
}

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

/// `WHITEOUT_DEV`: a character device 0:0 is an overlayfs whiteout, which needs no
/// `CAP_MKNOD`.
const WHITEOUT_DEV: u32 = 0;

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
        path: impl AsRef<[u8]>,
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
        let path = getname(path.as_ref(), false)?;
        let perm = mode & 0o7777 & !self.current_umask();
        self.filename_create(dirfd, path, false, |last, dl| {
            // vfs_create / vfs_mknod
            let rdev = match ty {
                S_IFCHR | S_IFBLK => {
                    let whiteout = ty == S_IFCHR && dev == WHITEOUT_DEV;
                    if !whiteout && !self.cred.is_root() {
                        return Err(Errno::EPERM);
                    }
                    dev as u64
                }
                _ => 0,
            };
            // vfs_prepare_mode: set-group-ID is stripped from the mode as given, before the
            // umask (as `openat` does).
            let perm = perm & mode_strip_sgid(&self.cred, &last.dir.d_inode, mode & 0o7777);
            create_locked(self, last.dir, dl, last.name, ty | perm, rdev, None)?;
            Ok(())
        })
    }
}
