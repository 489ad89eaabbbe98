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

use crate::cred::{Cred, MAY_EXEC, MAY_NOT_BLOCK, MAY_READ, MAY_WRITE};
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
use std::cell::{RefCell, RefMut};
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

/// How many times a call by path runs again after its file system said `ESTALE`
/// (`retry_estale`). Linux runs it once more, with `LOOKUP_REVAL`; on a local file system
/// a file found by the walk stays openable after another task unlinks it, so no ESTALE
/// arises there at all. hostfs has no handle to open such a file by (it drops its
/// descriptor at the unlink so that the host frees the file, and reopens by name), so a
/// second walk can meet the same race with a task that creates and unlinks the name in a
/// loop: measured, 2 x 20000 rounds of seven calls, 9 ESTALE with one retry. Each retry
/// means the other task unlinked the name again; the bound keeps a host that changes a
/// name without end from holding the call. As over NFS (not as on a local file system),
/// an `open(O_CREAT)` whose new file another task unlinked before the open reached it runs
/// again and creates the name anew (with `O_EXCL`, `EEXIST` if a third task made it
/// meanwhile). A stat-family or attribute call on a descriptor or a dentry (an empty
/// path: nothing to look up again) runs once.
pub(crate) const MAX_ESTALE_RETRIES: u32 = 8;

/// Linux's `retry_estale` loop: while `r` is `ESTALE`, runs the call again (`again`), at
/// most [`MAX_ESTALE_RETRIES`] times; the last result. Other results are returned as they
/// are.
pub(crate) fn retry_estale<R>(mut r: Result<R>, mut again: impl FnMut() -> Result<R>) -> Result<R> {
    let mut tries = 0;
    while matches!(r, Err(Errno::ESTALE)) && tries < MAX_ESTALE_RETRIES {
        tries += 1;
        r = again();
    }
    r
}

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
    /// Set by [`Task::with_walk`]: a lookup that must ask the file system leaves the walk
    /// through here instead of blocking while pinned ([`Unlazy`]); `None`: it asks pinned.
    pub(crate) unlazy: Option<&'a UnlazyCell>,
}

/// The most times one call's walk is left for a file system call ([`Unlazy`]); past it,
/// the calls are made pinned, as before the walk could leave (a name that keeps changing
/// under a walk, e.g. renamed back and forth by another task). A FUSE path with zero
/// timeouts leaves twice per component (the search check's GETATTR, the LOOKUP): 64 covers
/// 32 components.
const MAX_UNLAZY: u32 = 64;

/// Linux's `unlazy_walk`/`try_to_unlazy` in uvfs's form: a walk runs pinned in the epoch
/// and borrows what it passes, so it must not block; but a file system that revalidates
/// (FUSE, hostfs) answers a lookup miss or a stale entry only by a call that may block (a
/// FUSE request the server may never answer). Pinned meanwhile, the thread would hold back
/// every deferred free of the process. So the walk's slow lookup (`step_slow`) records the
/// directory (counted) and the name here and fails with `ECHILD` (Linux's "leave RCU
/// walk" errno); [`Task::with_walk`] unpins, makes the lookup with only the directory's
/// bucket lock held ([`lookup_locked`], which unpins that lock too), keeps its result here,
/// and runs the call again: the walk then takes the kept result for that directory and
/// name (so a result the cache does not keep, such as a miss or an entry with a zero
/// timeout, is not asked again during the call; Linux's ref-walk goes on with what it
/// looked up). Nothing before a walk's lookups changes anything, so running a call again
/// repeats no effect.
#[derive(Default)]
pub(crate) struct Unlazy {
    /// The lookup the walk left for.
    want: Option<Want>,
    /// The results of this call's search checks that would have blocked (a FUSE
    /// directory's stale attributes refreshed first), by directory, for the walk run again.
    searched: Vec<Kept<Arc<Dentry>, Result<()>>>,
    /// The results of this call's lookups (at most [`MAX_UNLAZY`]), for the walk run
    /// again: a path of several uncached names is answered one name per run, and each run
    /// walks the names before it again.
    got: Vec<Kept<NameKey, Result<Option<Arc<Dentry>>>>>,
    /// The errors of this call's symlink reads (`->get_link`), by symlink.
    link_errors: Vec<Kept<Arc<Dentry>, Errno>>,
    /// How many times this call's walk left.
    times: u32,
}

/// The [`Unlazy`] state of one call, made at the first time its walk leaves: a call whose
/// walk never does (every walk on tmpfs, every cached path) pays two words for it.
#[derive(Default)]
pub(crate) struct UnlazyCell(RefCell<Option<Box<Unlazy>>>);

impl UnlazyCell {
    /// The state, made if need be.
    fn get(&self) -> RefMut<'_, Unlazy> {
        RefMut::map(self.0.borrow_mut(), |u| {
            &mut **u.get_or_insert_with(Box::default)
        })
    }
}

impl Drop for UnlazyCell {
    #[inline]
    fn drop(&mut self) {
        // Inline and cheap when nothing was made (every walk on tmpfs): a stat(2) paid a
        // call for the cell's drop otherwise (13 instructions, callgrind).
        if let Some(u) = self.0.get_mut().take() {
            drop_unlazy(u);
        }
    }
}

/// Drops a made [`Unlazy`] state.
#[cold]
#[inline(never)]
fn drop_unlazy(u: Box<Unlazy>) {
    drop(u);
}

/// A directory and a name in it.
type NameKey = (Arc<Dentry>, Box<[u8]>);

/// A result [`Unlazy`] keeps for the key it was asked for.
struct Kept<K, R> {
    key: K,
    result: R,
}

impl Unlazy {
    /// The result kept for the key `is` finds.
    fn find<K, R: Clone>(kept: &[Kept<K, R>], is: impl Fn(&K) -> bool) -> Option<R> {
        kept.iter().find(|k| is(&k.key)).map(|k| k.result.clone())
    }

    /// Keeps `result` for `key`, in place of an older result for it.
    fn keep<K, R>(kept: &mut Vec<Kept<K, R>>, key: K, result: R, is: impl Fn(&K, &K) -> bool) {
        kept.retain(|k| !is(&k.key, &key));
        kept.push(Kept { key, result });
    }
}

impl Nameidata<'_> {
    /// Forgets the lookup of `name` in `dir` this call's walk kept ([`Unlazy`]), so that
    /// the next asks the file system: for a caller that learnt the answer is stale (an
    /// open's create that found the name taken since).
    pub(crate) fn forget_lookup(&self, dir: &Arc<Dentry>, name: &[u8]) {
        let Some(cell) = self.unlazy else { return };
        if let Some(u) = cell.0.borrow_mut().as_mut() {
            u.got
                .retain(|k| !(Arc::ptr_eq(&k.key.0, dir) && *k.key.1 == *name));
        }
    }
}

/// What a walk left for ([`Unlazy`]).
enum Want {
    /// The entry `name` of a directory (`lookup_slow`).
    Lookup(Arc<Dentry>, Box<[u8]>),
    /// Search permission on a directory (`may_lookup` without `MAY_NOT_BLOCK`).
    Search(Arc<Dentry>),
    /// A symlink's target (`->get_link`).
    Link(Arc<Dentry>),
}

impl Unlazy {
    /// After a call failed: if its walk left for a file system call, makes that call with
    /// `cred`, unpinned, keeps its result, and returns `true` (run the call again); `false`
    /// otherwise (the failure is the call's).
    fn resolve(cell: &UnlazyCell, cred: &Cred) -> bool {
        // Not `get`: a call that never left has no state to make.
        let want = cell.0.borrow_mut().as_mut().and_then(|u| u.want.take());
        let Some(want) = want else {
            return false;
        };
        // Unpinned: the file system's call, then its result kept (no borrow of the cell
        // across the call).
        crate::cred::set_caller(cred);
        match want {
            Want::Lookup(dir, name) => {
                let r = match dir.dir() {
                    Some(d) => {
                        let mut dl = d.lock_name(&name);
                        lookup_locked(&dir, &mut dl, &name)
                    }
                    None => Err(Errno::ENOTDIR),
                };
                Unlazy::keep(&mut cell.get().got, (dir, name), r, |a, b| {
                    Arc::ptr_eq(&a.0, &b.0) && a.1 == b.1
                });
            }
            Want::Search(dir) => {
                let r = dir.d_inode.permission(cred, MAY_EXEC);
                Unlazy::keep(&mut cell.get().searched, dir, r, Arc::ptr_eq);
            }
            Want::Link(link) => {
                let i = &link.d_inode;
                if let Err(e) = i.i_op.get_link(i) {
                    Unlazy::keep(&mut cell.get().link_errors, link, e, Arc::ptr_eq);
                }
            }
        }
        cell.get().times += 1;
        true
    }
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
        f: impl for<'a> FnMut(&mut Nameidata<'a>, &'a Arc<Dentry>) -> Result<R>,
    ) -> Result<R> {
        let start = self.start(dirfd, path)?;
        self.walk_from(&self.cred, &start, f)
    }

    /// [`with_walk`](Self::with_walk) from `start`, checking as `cred` (access(2)'s real
    /// ids, else the task's).
    #[inline(always)]
    fn walk_from<R>(
        &self,
        cred: &Cred,
        start: &Start<'_, V>,
        mut f: impl for<'a> FnMut(&mut Nameidata<'a>, &'a Arc<Dentry>) -> Result<R>,
    ) -> Result<R> {
        if self.fs.ns.may_block() {
            return self.walk_leaving(cred, start, &mut f);
        }
        // No file system here blocks (tmpfs alone): one pinned run, its result returned as
        // made (a copy of it, to look at it first, cost open+close 9%: its wide loads
        // stalled on store forwarding).
        let guard = epoch::pin();
        let root = self.fs.root.load(&guard);
        let (sd, sm) = start.path(self.fs.cwd.load(&guard));
        let mut nd = Nameidata::new(&guard, cred, root, &self.fs.ns, sm);
        f(&mut nd, sd)
    }

    /// [`walk_from`](Self::walk_from) in a namespace where a walk may leave ([`Unlazy`]).
    #[inline(never)]
    fn walk_leaving<R>(
        &self,
        cred: &Cred,
        start: &Start<'_, V>,
        f: &mut impl for<'a> FnMut(&mut Nameidata<'a>, &'a Arc<Dentry>) -> Result<R>,
    ) -> Result<R> {
        let unlazy = UnlazyCell::default();
        let r = self.walk_run(cred, start, &unlazy, f);
        self.walk_again(r, cred, start, &unlazy, f)
    }

    /// One run of [`with_walk`](Self::with_walk)'s call, pinned.
    #[inline]
    fn walk_run<R>(
        &self,
        cred: &Cred,
        start: &Start<'_, V>,
        unlazy: &UnlazyCell,
        f: &mut impl for<'a> FnMut(&mut Nameidata<'a>, &'a Arc<Dentry>) -> Result<R>,
    ) -> Result<R> {
        let guard = epoch::pin();
        let root = self.fs.root.load(&guard);
        let (sd, sm) = start.path(self.fs.cwd.load(&guard));
        let mut nd = Nameidata::new(&guard, cred, root, &self.fs.ns, sm);
        nd.unlazy = Some(unlazy);
        f(&mut nd, sd)
    }

    /// After a run of [`with_walk`](Self::with_walk)'s call that made its [`Unlazy`] state,
    /// with its result `r`: while the run failed with `ECHILD` because its walk left for a
    /// file system call, makes that call unpinned and runs the call again. (Taking `r` here
    /// keeps the common path's result where it was made: a copy of it cost open+close
    /// 15%, its loads stalled on store forwarding.)
    #[cold]
    #[inline(never)]
    fn walk_again<R>(
        &self,
        mut r: Result<R>,
        cred: &Cred,
        start: &Start<'_, V>,
        unlazy: &UnlazyCell,
        f: &mut impl for<'a> FnMut(&mut Nameidata<'a>, &'a Arc<Dentry>) -> Result<R>,
    ) -> Result<R> {
        while matches!(r, Err(Errno::ECHILD)) && Unlazy::resolve(unlazy, cred) {
            r = self.walk_run(cred, start, unlazy, f);
        }
        r
    }

    /// `filename_parentat` and the change after it: walks to the parent of `path` and runs
    /// `op` on it (the parent, its mount and the last component). For a parent whose file
    /// system never blocks (tmpfs) `op` runs inside the walk's pin, taking no reference;
    /// for one that may (FUSE, hostfs: `I_REVALIDATE`) the walk ends first and `op` runs
    /// unpinned, the parent and its mount counted (as Linux holds them after
    /// `filename_parentat`), so that the file system's request (MKDIR, UNLINK, ...) holds
    /// back no deferred free of the process while it waits ([`Unlazy`]'s reason). `op`
    /// drops its directory lock's own pin before such a request (`DirLocked::unpin`).
    ///
    /// # Errors
    /// The walk's; `op`'s.
    pub(crate) fn with_parent<R>(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        mut op: impl FnMut(&Last<'_, '_>) -> Result<R>,
    ) -> Result<R> {
        if !self.fs.ns.may_block() {
            return self.with_parent_once(dirfd, path, op);
        }
        // `retry_estale`, as in `dentry_from` (Linux's `do_mkdirat`, `do_unlinkat`, ...:
        // the parent gone behind its dentry).
        let r = self.parent_leaving(dirfd, path, &mut op);
        retry_estale(r, || self.parent_leaving(dirfd, path, &mut op))
    }

    /// [`with_parent`](Self::with_parent) without its runs again after `ESTALE`, for a
    /// caller that runs more than this walk again (`linkat`: its old path's walk too).
    pub(crate) fn with_parent_once<R>(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        mut op: impl FnMut(&Last<'_, '_>) -> Result<R>,
    ) -> Result<R> {
        if !self.fs.ns.may_block() {
            // No file system here blocks: `op` inside the walk, its result as made.
            return self.with_walk(dirfd, path, |nd, start| {
                let last = nd.walk_parent(start, path)?;
                op(&last)
            });
        }
        self.parent_leaving(dirfd, path, &mut op)
    }

    /// One run of [`with_parent`](Self::with_parent) in a namespace where a file system
    /// may block.
    #[inline(never)]
    fn parent_leaving<R>(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        op: &mut impl FnMut(&Last<'_, '_>) -> Result<R>,
    ) -> Result<R> {
        let r = self.with_walk(dirfd, path, |nd, start| {
            let last = nd.walk_parent(start, path)?;
            if last.dir.d_inode.needs_revalidate() {
                let parent = nd.path(last.dir)?;
                return Ok(Err((parent, last.name, last.ty, last.trailing_slash)));
            }
            op(&last).map(Ok)
        })?;
        match r {
            Ok(r) => Ok(r),
            Err((parent, name, ty, trailing_slash)) => {
                let last = Last {
                    mnt: &parent.mnt,
                    dir: &parent.dentry,
                    name,
                    ty,
                    trailing_slash,
                };
                op(&last)
            }
        }
    }

    /// A walk and a call on the dentry it ends at: `walk` walks (from the start it is
    /// given) and `op` runs on the result with its mount. As [`with_parent`](Self::with_parent):
    /// inside the walk's pin for a file system that never blocks, else after the walk,
    /// unpinned, the dentry and its mount counted, so that a request `op` sends (GETATTR,
    /// STATX, SETATTR, STATFS, ...) holds back no deferred free while it waits.
    ///
    /// # Errors
    /// `walk`'s; `op`'s.
    pub(crate) fn with_dentry<R>(
        &self,
        dirfd: AtDir<'_>,
        path: &[u8],
        walk: impl for<'a> FnMut(&mut Nameidata<'a>, &'a Arc<Dentry>) -> Result<&'a Arc<Dentry>>,
        op: impl FnMut(&Arc<Dentry>, &Mount) -> Result<R>,
    ) -> Result<R> {
        let start = self.start(dirfd, path)?;
        self.dentry_from(&self.cred, &start, path, walk, op)
    }

    /// [`with_dentry`](Self::with_dentry) from `start`, checking as `cred` (attr.rs
    /// `lookup_with`: access(2)'s real ids).
    #[inline(always)]
    pub(crate) fn dentry_from<R>(
        &self,
        cred: &Cred,
        start: &Start<'_, V>,
        path: &[u8],
        mut walk: impl for<'a> FnMut(&mut Nameidata<'a>, &'a Arc<Dentry>) -> Result<&'a Arc<Dentry>>,
        mut op: impl FnMut(&Arc<Dentry>, &Mount) -> Result<R>,
    ) -> Result<R> {
        if !self.fs.ns.may_block() {
            // No file system here blocks: `op` inside the walk, its result as made.
            return self.walk_from(cred, start, |nd, start| {
                let d = walk(nd, start)?;
                op(d, nd.mnt)
            });
        }
        // `retry_estale`: a file system that found its object gone behind the dentry the
        // walk used (a hostfs file unlinked by another task between the walk and the
        // call, an NFS-style server's stale handle) answers ESTALE and marks the entry for
        // revalidation; the whole call runs again, as Linux's `user_path_at` callers do
        // with `LOOKUP_REVAL` (at most `MAX_ESTALE_RETRIES` times). Only here: tmpfs never
        // answers ESTALE. An empty `path` (a descriptor's or a dentry's own object) has no
        // walk to look anything up again: once.
        let r = self.dentry_leaving(cred, start, &mut walk, &mut op);
        if path.is_empty() {
            return r;
        }
        retry_estale(r, || self.dentry_leaving(cred, start, &mut walk, &mut op))
    }

    /// One run of [`dentry_from`](Self::dentry_from) in a namespace where a file system
    /// may block.
    #[inline(never)]
    fn dentry_leaving<R>(
        &self,
        cred: &Cred,
        start: &Start<'_, V>,
        walk: &mut impl for<'a> FnMut(&mut Nameidata<'a>, &'a Arc<Dentry>) -> Result<&'a Arc<Dentry>>,
        op: &mut impl FnMut(&Arc<Dentry>, &Mount) -> Result<R>,
    ) -> Result<R> {
        // The dentry to run `op` on after the walk; the walk's result is then a placeholder
        // error (not a nested `Result`: a stat(2)'s `Stat` would be copied once more).
        let mut after: Option<Path> = None;
        let r = self.walk_from(cred, start, |nd, start| {
            let d = walk(nd, start)?;
            if d.d_inode.needs_revalidate() {
                after = Some(nd.path(d)?);
                return Err(Errno::EAGAIN);
            }
            op(d, nd.mnt)
        });
        match after {
            Some(p) => op(&p.dentry, &p.mnt),
            None => r,
        }
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
        mut f: impl for<'a> FnMut(&mut Nameidata<'a>, &'a Arc<Dentry>) -> Result<R>,
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
        let unlazy = UnlazyCell::default();
        let leaving = self.fs.ns.may_block();
        let mut run = |unlazy: &UnlazyCell| {
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
            if leaving {
                nd.unlazy = Some(unlazy);
            }
            f(&mut nd, sd)
        };
        // As in `with_walk`.
        loop {
            match run(&unlazy) {
                Err(Errno::ECHILD) if Unlazy::resolve(&unlazy, &self.cred) => continue,
                r => return r,
            }
        }
    }
}
