//! A hostfs inode's own part ([`HostInode`]) and the operations on it: each the matching
//! host call relative to a held descriptor (see the module doc of `hostfs`).
//!
//! # Invariants
//! - `key` is the host identity the inode was made for; a descriptor reopened for it is
//!   used only after `fstat` shows that identity.
//! - `loc` is the last name uvfs knows for the inode (the parent's inode and the name in
//!   it), updated by lookups, creations, links and renames; `None` parent: the root, or an
//!   `O_TMPFILE` file before its first link (which keeps its data descriptor, `pinned`).
//!
//! Lock order: see the `hostfs` module doc.

use super::{host_err, key_of, open_path, store_attrs, HostResult, Key, Shared};
use crate::cred::Cred;
use crate::fs::{DirEmit, DirLink, FileOps, InodeOps, NewInode, SetAttr};
use crate::inode::{Inode, MAX_LFS_FILESIZE};
use crate::namei::NAME_MAX;
use crate::stat::StatxSync;
use crate::sync::plain::{AtomicU64, Mutex, Ordering};
use crate::sync::plock;
use crate::time::mono_ns;
use crate::types::StatFs;
use crate::types::*;
use crate::{Errno, Result};
use rustix::fs::{AtFlags as HAt, Mode, OFlags};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Weak};

/// Deepest chain of parents reopened for one descriptor (a uvfs path of `PATH_MAX` bytes
/// has at most 2048 components; a longer chain is a cycle left by host renames).
const MAX_DEPTH: u32 = 4096;

/// Where uvfs last saw an inode: its parent directory and its name there.
pub(crate) struct Loc {
    /// The parent directory's inode; `None` for the root and an unnamed `O_TMPFILE` file.
    pub(crate) parent: Option<Arc<Inode>>,
    /// The name in `parent`.
    pub(crate) name: Arc<[u8]>,
}

/// A regular file's data descriptor, shared by the uvfs `File`s of the inode.
#[derive(Default)]
struct Data {
    /// The descriptor; `None` when no file is open (and not `pinned`).
    fd: Option<Arc<OwnedFd>>,
    /// Access the descriptor has.
    read: bool,
    /// As `read`.
    write: bool,
    /// Open `File`s using it (`open` .. `release`).
    opens: u32,
    /// Kept while the inode lives (`O_TMPFILE`: no name to reopen by).
    pinned: bool,
}

/// A hostfs inode's own part.
pub(crate) struct HostInode {
    /// The mount's shared state. Immutable.
    fs: Arc<Shared>,
    /// The host identity. Immutable.
    key: Key,
    /// The inode itself (`Arc::new_cyclic`). Immutable.
    me: Weak<Inode>,
    /// The mount's root (its descriptor is `Shared::root_fd`). Immutable.
    is_root: bool,
    /// Last known location. Protected by its mutex.
    loc: Mutex<Loc>,
    /// A symlink's target, read once (a host symlink's target never changes; a new one
    /// is a new inode). Immutable.
    target: Option<Box<[u8]>>,
    /// A regular file's data descriptor. Protected by its mutex.
    data: Mutex<Data>,
    /// Serialises `O_APPEND` writes (the size read and the write at it).
    append: Mutex<()>,
    /// When the entry and attributes were last checked with the host: monotonic
    /// nanoseconds + 1, 0 = to be checked. Atomic; a hint only.
    checked: AtomicU64,
}

impl Drop for HostInode {
    fn drop(&mut self) {
        self.fs.forget(self.key);
        // The parent chain is released in a loop: each inode's `Loc` holds its parent, so
        // dropping the last reference to the deepest of a chain of otherwise unreferenced
        // directories (2048 levels: a path of `PATH_MAX` bytes) would drop each parent
        // from inside its child's drop, one recursion per level. Each parent whose last
        // reference this was has its own parent taken before it is dropped.
        let mut parent = plock(&self.loc).parent.take();
        while let Some(p) = parent {
            let Some(inode) = Arc::into_inner(p) else {
                break;
            };
            parent = host(&inode).ok().and_then(|h| plock(&h.loc).parent.take());
        }
    }
}

/// The hostfs part of `inode`.
///
/// # Errors
/// `EXDEV` for an inode of another file system.
pub(crate) fn host(inode: &Inode) -> Result<&HostInode> {
    inode
        .i_op
        .as_any()
        .downcast_ref::<HostInode>()
        .ok_or(Errno::EXDEV)
}

impl HostInode {
    pub(super) fn new(
        fs: Arc<Shared>,
        key: Key,
        me: Weak<Inode>,
        loc: Loc,
        target: Option<Box<[u8]>>,
        data: Option<OwnedFd>,
        is_root: bool,
    ) -> HostInode {
        let pinned = data.is_some();
        HostInode {
            fs,
            key,
            me,
            is_root,
            loc: Mutex::new(loc),
            target,
            data: Mutex::new(Data {
                fd: data.map(Arc::new),
                read: pinned,
                write: pinned,
                opens: 0,
                pinned,
            }),
            append: Mutex::new(()),
            checked: AtomicU64::new(0),
        }
    }

    /// Records the inode's location (the old parent is dropped after the lock).
    pub(crate) fn set_loc(&self, loc: Loc) {
        if self.is_root {
            return;
        }
        let old = std::mem::replace(&mut *plock(&self.loc), loc);
        drop(old);
    }

    /// Whether the last check is recent enough to trust (`attr_timeout`).
    fn fresh(&self) -> bool {
        let t = self.fs.opts.attr_timeout.as_nanos() as u64;
        if t == 0 {
            return false;
        }
        // Relaxed: a hint; the values it vouches for are read through their own
        // synchronisation (the inode's attributes, the dentry cache).
        let c = self.checked.load(Ordering::Relaxed);
        c != 0 && mono_ns().saturating_sub(c - 1) < t
    }

    /// Marks the entry and attributes just checked.
    fn mark_checked(&self) {
        if !self.fs.opts.attr_timeout.is_zero() {
            // Relaxed: a hint (see `fresh`).
            self.checked.store(mono_ns() + 1, Ordering::Relaxed);
        }
    }

    /// Marks the attributes to be checked again (after a change made through uvfs, whose
    /// result the host decides: times, sizes, set-ID bits).
    fn invalidate(&self) {
        // Relaxed: a hint (see `fresh`).
        self.checked.store(0, Ordering::Relaxed);
    }

    /// The open data descriptor, if any.
    fn data_fd(&self) -> Option<Arc<OwnedFd>> {
        plock(&self.data).fd.clone()
    }

    /// The data descriptor of an open file.
    ///
    /// # Errors
    /// `EBADF` when no file is open (a call the VFS makes only on open files).
    fn open_fd(&self) -> Result<Arc<OwnedFd>> {
        self.data_fd().ok_or(Errno::EBADF)
    }

    /// The inode's `O_PATH` descriptor (any descriptor of the inode): the root's, the
    /// cached one, the data descriptor, or reopened from the parent's (see the module doc).
    ///
    /// # Errors
    /// `ESTALE` when the last known name no longer holds this inode; `ELOOP` for a chain
    /// of parents longer than `MAX_DEPTH`; the host's.
    pub(crate) fn path_fd(&self) -> Result<Arc<OwnedFd>> {
        self.path_fd_depth(0, true)
    }

    /// [`path_fd`](Self::path_fd) `depth` parents down; the data descriptor counts only
    /// with `use_data` (not for a caller holding `data`).
    fn path_fd_depth(&self, depth: u32, use_data: bool) -> Result<Arc<OwnedFd>> {
        if self.is_root {
            return Ok(self.fs.root_fd.clone());
        }
        if let Some(fd) = self.fs.cached_fd(self.key) {
            return Ok(fd);
        }
        if let Some(fd) = use_data.then(|| self.data_fd()).flatten() {
            return Ok(fd);
        }
        if depth > MAX_DEPTH {
            return Err(Errno::ELOOP);
        }
        let (parent, name) = {
            let l = plock(&self.loc);
            (l.parent.clone(), l.name.clone())
        };
        let parent = parent.ok_or(Errno::ESTALE)?;
        let pfd = host(&parent)?.path_fd_depth(depth + 1, true)?;
        drop(parent);
        let fd = self.reopen_in(&pfd, &name, OFlags::PATH)?;
        let fd = Arc::new(fd);
        self.fs.cache_fd(self.key, fd.clone());
        Ok(fd)
    }

    /// Opens `name` in the directory `dirfd` with `flags` (plus `O_NOFOLLOW | O_CLOEXEC |
    /// O_NOCTTY`) and checks that it is this inode.
    ///
    /// # Errors
    /// `ESTALE` when it is not (or is gone); the host's.
    fn reopen_in(&self, dirfd: &OwnedFd, name: &[u8], flags: OFlags) -> Result<OwnedFd> {
        let fl = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
        let fd = match rustix::fs::openat(dirfd, name, fl, Mode::empty()) {
            Err(rustix::io::Errno::NOENT) => return Err(self.stale()),
            r => r.h()?,
        };
        let st = rustix::fs::fstat(&fd).h()?;
        if key_of(&st) != self.key {
            return Err(self.stale());
        }
        Ok(fd)
    }

    /// `ESTALE`, after marking the entry and attributes to be checked again: the VFS runs
    /// the call once more (`retry_estale`), and that walk's revalidation then finds the
    /// name gone or another file's (as NFS's `LOOKUP_REVAL` retry does).
    #[cold]
    fn stale(&self) -> Errno {
        self.invalidate();
        Errno::ESTALE
    }

    /// Records `dir`/`name` as the inode's location unless it is already.
    fn seen_at(&self, dir: &Inode, name: &[u8]) {
        let same = {
            let l = plock(&self.loc);
            l.parent.as_ref().is_some_and(|p| std::ptr::eq(&**p, dir)) && &*l.name == name
        };
        if !same {
            if let Some(parent) = host(dir).ok().and_then(|h| h.me.upgrade()) {
                self.set_loc(Loc {
                    parent: Some(parent),
                    name: Arc::from(name),
                });
            }
        }
    }

    /// Opens the inode (a regular file) for data with `flags`: through the magic link of
    /// its `O_PATH` descriptor (cached, or reopened by name with its identity checked), so
    /// that what is opened is this inode whatever its names are now, and never a FIFO or
    /// device the host put under its name; without `/proc`, by its last known name
    /// (`O_NONBLOCK`, so that a FIFO put there does not block; checked after).
    ///
    /// Context: the caller may hold `data` (this never takes it).
    fn reopen_data(&self, flags: OFlags) -> Result<OwnedFd> {
        let pfd = self.path_fd_depth(0, false)?;
        {
            use std::os::fd::AsRawFd;
            let p = format!("/proc/self/fd/{}", pfd.as_raw_fd());
            let fl = flags | OFlags::CLOEXEC | OFlags::NOCTTY;
            if let Ok(f) = rustix::fs::open(p.as_str(), fl, Mode::empty()) {
                let st = rustix::fs::fstat(&f).h()?;
                if key_of(&st) != self.key {
                    return Err(self.stale());
                }
                return Ok(f);
            }
        }
        drop(pfd);
        let (parent, name) = {
            let l = plock(&self.loc);
            (l.parent.clone(), l.name.clone())
        };
        let parent = parent.ok_or(Errno::ESTALE)?;
        let pfd = host(&parent)?.path_fd()?;
        drop(parent);
        self.reopen_in(&pfd, &name, flags | OFlags::NONBLOCK)
    }

    /// `fstat` of the inode's descriptor whatever `attr_timeout` says. A file uvfs can no
    /// longer reach on the host keeps its attributes if it has no links left (an unlinked
    /// file held open only through `O_PATH`); otherwise `ESTALE`.
    fn stat_host(&self, inode: &Inode) -> Result<()> {
        match self.path_fd() {
            Ok(fd) => self.refresh_from(inode, &fd),
            Err(Errno::ESTALE) if inode.nlink() == 0 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Refreshes the VFS attributes of `inode` from `fd`.
    fn refresh_from(&self, inode: &Inode, fd: &OwnedFd) -> Result<()> {
        let st = rustix::fs::fstat(fd).h()?;
        store_attrs(inode, &st);
        self.mark_checked();
        Ok(())
    }

    /// The directory opened for reading (`getdents64`, `fsync`), through its own
    /// descriptor (`openat(fd, ".")`: the directory itself).
    fn open_dir(&self) -> Result<OwnedFd> {
        let pfd = self.path_fd()?;
        let fl = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        rustix::fs::openat(&pfd, ".", fl, Mode::empty()).h()
    }

    /// `EROFS` on a read-only mount.
    fn writable(&self) -> Result<()> {
        if self.fs.opts.read_only {
            return Err(Errno::EROFS);
        }
        Ok(())
    }

    /// A descriptor of a regular file that can write: the open one if it can, else one
    /// opened for this call (`truncate(2)` of a file not open in uvfs).
    fn write_fd(&self) -> Result<Arc<OwnedFd>> {
        {
            let d = plock(&self.data);
            if let (Some(fd), true) = (&d.fd, d.write) {
                return Ok(fd.clone());
            }
        }
        Ok(Arc::new(self.reopen_data(OFlags::WRONLY)?))
    }
}

/// `chmod` of the file `fd` holds, through its `/proc/self/fd` link (see the module doc).
fn chmod_fd(fd: &OwnedFd, mode: u32) -> Result<()> {
    use std::os::fd::AsRawFd;
    let p = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::chmodat(
        rustix::fs::CWD,
        p.as_str(),
        Mode::from_raw_mode(mode & 0o7777),
        HAt::empty(),
    )
    .h()
}

/// The `/proc/self/fd` link of `fd`: a path that names exactly the file `fd` holds (a
/// magic link; a symlink's `O_PATH` descriptor names the symlink itself, which the
/// following `*xattr` calls then act on, not its target).
fn fd_link(fd: &OwnedFd) -> String {
    use std::os::fd::AsRawFd;
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// The task's owner and exact mode for a file the host just created (see the module doc:
/// the host's umask and the uvfs process's owner are not the task's).
fn fix_new(
    fs: &Shared,
    fd: &OwnedFd,
    st: &mut rustix::fs::Stat,
    args: &NewInode<'_>,
) -> Result<()> {
    let is_link = args.mode & S_IFMT == S_IFLNK;
    if fs.is_root && (st.st_uid != args.uid || st.st_gid != args.gid) {
        rustix::fs::chownat(
            fd,
            "",
            Some(rustix::fs::Uid::from_raw(args.uid)),
            Some(rustix::fs::Gid::from_raw(args.gid)),
            HAt::EMPTY_PATH | HAt::SYMLINK_NOFOLLOW,
        )
        .h()?;
        *st = rustix::fs::fstat(fd).h()?;
    }
    if !is_link && st.st_mode & 0o7777 != args.mode & 0o7777 {
        chmod_fd(fd, args.mode)?;
        *st = rustix::fs::fstat(fd).h()?;
    }
    Ok(())
}

/// `FileSystem::create` of hostfs (see there).
pub(super) fn create(
    fs: &Arc<Shared>,
    dev: u64,
    dir: &Inode,
    name: &[u8],
    args: NewInode<'_>,
) -> Result<Arc<Inode>> {
    let h = host(dir)?;
    h.writable()?;
    let dfd = h.path_fd()?;
    let perm = Mode::from_raw_mode(args.mode & 0o7777);
    let ty = args.mode & S_IFMT;
    let dir_arc = h.me.upgrade().ok_or(Errno::ESTALE)?;
    h.invalidate();
    if name.is_empty() {
        // O_TMPFILE: an unnamed file in the directory, kept open while the inode lives.
        let fd = rustix::fs::openat(
            &dfd,
            ".",
            OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
            perm,
        )
        .h()?;
        let mut st = rustix::fs::fstat(&fd).h()?;
        fix_new(fs, &fd, &mut st, &args)?;
        let loc = Loc {
            parent: None,
            name: Arc::from(&b""[..]),
        };
        return fs.inode_for(dev, &st, loc, None, Some(fd), false);
    }
    let fd = match ty {
        S_IFREG => {
            // Read-write for `fix_new`'s owner and mode fixes; replaced by an O_PATH one.
            let fl = OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::NOFOLLOW;
            rustix::fs::openat(&dfd, name, fl | OFlags::CLOEXEC | OFlags::NOCTTY, perm).h()?
        }
        S_IFDIR => {
            rustix::fs::mkdirat(&dfd, name, perm).h()?;
            open_new(&dfd, name)?
        }
        S_IFLNK => {
            let target = args.target.ok_or(Errno::EINVAL)?;
            rustix::fs::symlinkat(target, &dfd, name).h()?;
            open_new(&dfd, name)?
        }
        S_IFCHR | S_IFBLK | S_IFIFO | S_IFSOCK => {
            let ft = rustix::fs::FileType::from_raw_mode(ty);
            rustix::fs::mknodat(&dfd, name, ft, perm, args.rdev).h()?;
            open_new(&dfd, name)?
        }
        _ => return Err(Errno::EINVAL),
    };
    let mut st = rustix::fs::fstat(&fd).h()?;
    if st.st_mode & S_IFMT != ty {
        // Replaced on the host between the creation and the open.
        return Err(Errno::ESTALE);
    }
    fix_new(fs, &fd, &mut st, &args)?;
    // The inode keeps an `O_PATH` descriptor, not the creating one: a host descriptor
    // open for writing held after the last writer closed would make every host `execve`
    // of the new file fail with ETXTBSY (a compiler's output, run at once). The VFS's open
    // that follows the creation reopens the data descriptor with the access it needs.
    let fd = if ty == S_IFREG {
        // Through the creating descriptor's `/proc/self/fd` link, which names this file
        // whatever the host did to its name since (found by a fresh user's trial: a host
        // thread unlinking the name in between made `open(O_CREAT)` say ENOENT); by name
        // only without `/proc`.
        let p = match rustix::fs::open(
            fd_link(&fd).as_str(),
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(p) => p,
            Err(_) => open_new(&dfd, name)?,
        };
        if key_of(&rustix::fs::fstat(&p).h()?) != key_of(&st) {
            // Replaced on the host between the creation and the reopen.
            return Err(Errno::ESTALE);
        }
        p
    } else {
        fd
    };
    let loc = Loc {
        parent: Some(dir_arc),
        name: Arc::from(name),
    };
    fs.inode_for(dev, &st, loc, Some(fd), None, false)
}

/// The `O_PATH` descriptor of `name` in `dirfd`, which this process just created there
/// (`mkdirat`, `symlinkat`, `mknodat` give no descriptor). `ESTALE` when the host removed
/// the name in between (ENOENT would say the parent is missing): the VFS runs the call
/// again (`retry_estale`), which makes the name anew, as a retry over NFS would; a host
/// that removes every one gets `ESTALE` to the caller after the retries.
fn open_new(dirfd: &OwnedFd, name: &[u8]) -> Result<OwnedFd> {
    match open_path(dirfd, name) {
        Err(Errno::ENOENT) => Err(Errno::ESTALE),
        r => r,
    }
}

/// The uvfs inode that the host name `name` of `dirfd` now holds, if uvfs has one: for
/// renames, which move inodes the VFS does not pass.
fn relocate(fs: &Shared, dirfd: &OwnedFd, dir: &Inode, name: &[u8]) {
    let Ok(st) = rustix::fs::statat(dirfd, name, HAt::SYMLINK_NOFOLLOW) else {
        return;
    };
    let Some(i) = plock(&fs.inodes).get(&key_of(&st)).and_then(Weak::upgrade) else {
        return;
    };
    if let (Ok(hi), Ok(hd)) = (host(&i), host(dir)) {
        if let Some(parent) = hd.me.upgrade() {
            hi.set_loc(Loc {
                parent: Some(parent),
                name: Arc::from(name),
            });
        }
        hi.invalidate();
    }
}

impl InodeOps for HostInode {
    fn get_link<'a>(&'a self, _inode: &Inode) -> Result<&'a [u8]> {
        self.target.as_deref().ok_or(Errno::EINVAL)
    }

    /// `openat(dir, name, O_PATH | O_NOFOLLOW)` and `fstat` (and `readlinkat(fd, "")` for
    /// a symlink): the host file, as the one uvfs inode of its host identity.
    fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<Option<Arc<Inode>>> {
        if name.len() > NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let dfd = self.path_fd()?;
        let fd = match open_path(&dfd, name) {
            Err(Errno::ENOENT) => return Ok(None),
            r => r?,
        };
        let st = rustix::fs::fstat(&fd).h()?;
        let parent = self.me.upgrade().ok_or(Errno::ESTALE)?;
        let loc = Loc {
            parent: Some(parent),
            name: Arc::from(name),
        };
        let i = self
            .fs
            .inode_for(dir.i_dev, &st, loc, Some(fd), None, false)?;
        host(&i)?.mark_checked();
        Ok(Some(i))
    }

    /// Trusts an entry checked within `attr_timeout`; otherwise (off the lock-free walk)
    /// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`: valid while the name holds the same host
    /// inode, whose attributes are refreshed.
    fn revalidate(&self, dir: &Inode, name: &[u8], child: &Inode, rcu: bool) -> Result<bool> {
        let c = host(child)?;
        if c.fresh() {
            return Ok(true);
        }
        if rcu {
            return Err(Errno::ECHILD);
        }
        let dfd = self.path_fd()?;
        match rustix::fs::statat(&dfd, name, HAt::SYMLINK_NOFOLLOW) {
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => Ok(false),
            Err(e) => Err(host_err(e)),
            Ok(st) if key_of(&st) == c.key && st.st_mode & S_IFMT == child.mode() & S_IFMT => {
                store_attrs(child, &st);
                c.seen_at(dir, name);
                c.mark_checked();
                Ok(true)
            }
            Ok(_) => Ok(false),
        }
    }

    /// `linkat(fd, "", dir, name, AT_EMPTY_PATH)`.
    fn link(&self, dir: &Inode, name: &[u8], inode: &Inode) -> Result<()> {
        self.writable()?;
        let hi = host(inode)?;
        let src = hi.path_fd()?;
        let dfd = self.path_fd()?;
        rustix::fs::linkat(&src, "", &dfd, name, HAt::EMPTY_PATH).h()?;
        self.invalidate();
        hi.invalidate();
        let unnamed = plock(&hi.loc).parent.is_none() && !hi.is_root;
        if unnamed {
            if let Some(parent) = host(dir)?.me.upgrade() {
                hi.set_loc(Loc {
                    parent: Some(parent),
                    name: Arc::from(name),
                });
            }
        }
        Ok(())
    }

    /// `unlinkat(dir, name, 0)`.
    fn unlink(&self, _dir: &Inode, name: &[u8], victim: &Inode) -> Result<()> {
        self.writable()?;
        let dfd = self.path_fd()?;
        rustix::fs::unlinkat(&dfd, name, HAt::empty()).h()?;
        self.invalidate();
        let v = host(victim)?;
        v.invalidate();
        self.fs.uncache_if_unlinked(v.key);
        Ok(())
    }

    /// `unlinkat(dir, name, AT_REMOVEDIR)` (the host says `ENOTEMPTY`).
    fn rmdir(&self, _dir: &Inode, name: &[u8], victim: &Inode) -> Result<()> {
        self.writable()?;
        let dfd = self.path_fd()?;
        rustix::fs::unlinkat(&dfd, name, HAt::REMOVEDIR).h()?;
        self.invalidate();
        self.fs.uncache(host(victim)?.key);
        Ok(())
    }

    /// `renameat2(odir, oname, ndir, nname, flags)`; the moved inodes' locations follow.
    fn rename(
        &self,
        odir: &Inode,
        oname: &[u8],
        ndir: &Inode,
        nname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        self.writable()?;
        let nh = host(ndir)?;
        let ofd = self.path_fd()?;
        let nfd = nh.path_fd()?;
        let hf = rustix::fs::RenameFlags::from_bits_retain(flags.bits());
        // The target a plain rename replaces, whose host file may lose its last name.
        let replaced = match flags.contains(RenameFlags::EXCHANGE) {
            true => None,
            false => rustix::fs::statat(&nfd, nname, HAt::SYMLINK_NOFOLLOW)
                .ok()
                .map(|st| key_of(&st)),
        };
        rustix::fs::renameat_with(&ofd, oname, &nfd, nname, hf).h()?;
        self.invalidate();
        nh.invalidate();
        if let Some(k) = replaced {
            self.fs.uncache_if_unlinked(k);
        }
        relocate(&self.fs, &nfd, ndir, nname);
        if flags.contains(RenameFlags::EXCHANGE) {
            relocate(&self.fs, &ofd, odir, oname);
        }
        Ok(())
    }

    /// `fchownat(fd, "", AT_EMPTY_PATH)`, then `chmod` (after the owner, whose change may
    /// clear set-ID bits on the host), then `utimensat(fd, "", AT_EMPTY_PATH)`.
    fn setattr(&self, inode: &Inode, attr: &SetAttr) -> Result<()> {
        self.writable()?;
        let fd = self.path_fd()?;
        self.invalidate();
        if *attr == SetAttr::default() {
            // chmod or chown changing nothing still changes the ctime (`ATTR_CTIME`): the
            // same mode again, or for a symlink (no mode to set) `fchownat(-1, -1)`.
            if inode.is_symlink() {
                rustix::fs::chownat(&fd, "", None, None, HAt::EMPTY_PATH).h()?;
                return Ok(());
            }
            return chmod_fd(&fd, inode.mode());
        }
        if attr.uid.is_some() || attr.gid.is_some() {
            rustix::fs::chownat(
                &fd,
                "",
                attr.uid.map(rustix::fs::Uid::from_raw),
                attr.gid.map(rustix::fs::Gid::from_raw),
                HAt::EMPTY_PATH | HAt::SYMLINK_NOFOLLOW,
            )
            .h()?;
        }
        if let Some(mode) = attr.mode {
            chmod_fd(&fd, mode)?;
        }
        if attr.atime.is_some() || attr.mtime.is_some() {
            // The host's clock for "now" (so that all three times are one, as Linux's
            // `UTIME_NOW`), the caller's value otherwise.
            let ts = |t: Option<Timespec>, now: bool| match t {
                Some(_) if now => rustix::fs::Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_NOW,
                },
                Some(t) => rustix::fs::Timespec {
                    tv_sec: t.tv_sec,
                    tv_nsec: t.tv_nsec as _,
                },
                None => rustix::fs::Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_OMIT,
                },
            };
            let times = rustix::fs::Timestamps {
                last_access: ts(attr.atime, attr.atime_now),
                last_modification: ts(attr.mtime, attr.mtime_now),
            };
            rustix::fs::utimensat(&fd, "", &times, HAt::EMPTY_PATH | HAt::SYMLINK_NOFOLLOW).h()?;
        }
        Ok(())
    }

    /// `fstat` of the inode's descriptor (`stat_host`), unless checked within
    /// `attr_timeout`.
    fn getattr(&self, inode: &Inode) -> Result<()> {
        if self.fresh() {
            return Ok(());
        }
        self.stat_host(inode)
    }

    /// As a bind mount of the host directory would answer (the host file system is local:
    /// its attributes are always current, and it ignores the sync flags): the attributes
    /// as `getattr`, but `AT_STATX_FORCE_SYNC` reads them from the host even within
    /// `attr_timeout`; for `STATX_BTIME`, the host file's own birth time (`statx` on its
    /// descriptor) where the host file system keeps one (tmpfs, ext4, xfs, btrfs), `None`
    /// where it does not, as Linux reports it then. (The inode's `btime` is when uvfs
    /// first saw the file: its change time then, which a chmod on the host moves.) A file
    /// uvfs can no longer reach has none.
    fn statx(&self, inode: &Inode, mask: u32, sync: StatxSync) -> Result<Option<Timespec>> {
        if sync == StatxSync::Force {
            self.stat_host(inode)?;
        } else {
            self.getattr(inode)?;
        }
        if mask & crate::stat::STATX_BTIME == 0 {
            return Ok(None);
        }
        let fd = match self.path_fd() {
            Ok(fd) => fd,
            Err(Errno::ESTALE) => return Ok(None),
            Err(e) => return Err(e),
        };
        let x = rustix::fs::statx(
            &fd,
            "",
            HAt::EMPTY_PATH | HAt::SYMLINK_NOFOLLOW,
            rustix::fs::StatxFlags::BTIME,
        )
        .h()?;
        Ok(
            (x.stx_mask & rustix::fs::StatxFlags::BTIME.bits() != 0).then(|| Timespec {
                tv_sec: x.stx_btime.tv_sec,
                tv_nsec: i64::from(x.stx_btime.tv_nsec),
            }),
        )
    }

    /// `ftruncate` of a writable descriptor; the host stamps the times.
    fn truncate(
        &self,
        inode: &Inode,
        len: u64,
        _now: Timespec,
        stamp: bool,
        _fh: Option<u64>,
    ) -> Result<()> {
        if !inode.is_reg() {
            return Err(crate::fs::not_regular(inode));
        }
        self.writable()?;
        if len > MAX_LFS_FILESIZE as u64 {
            return Err(Errno::EFBIG);
        }
        let fd = self.write_fd()?;
        if !stamp {
            // truncate(2) passes only `ATTR_SIZE`: tmpfs leaves the times of a file without
            // pages at its own size alone, and ftruncate would stamp them.
            let st = rustix::fs::fstat(&fd).h()?;
            if st.st_size as u64 == len && st.st_blocks == 0 {
                return self.refresh_from(inode, &fd);
            }
        }
        rustix::fs::ftruncate(&fd, len).h()?;
        self.invalidate();
        self.refresh_from(inode, &fd)
    }

    /// As a local file system's: a capability check that found none holds until a
    /// `security.*` attribute is set through uvfs. A capability the host sets behind
    /// uvfs's back on a file uvfs has checked is not seen by uvfs's own check; the host's
    /// write, truncation and chown of the file (which uvfs's make) drop it anyway.
    fn sb_nosec(&self, _inode: &Inode) -> bool {
        true
    }

    /// [`InodeOps::kill_priv`]'s default, except that `EPERM` counts as done: removing a
    /// capability needs `CAP_SETFCAP` on the host, which an unprivileged uvfs lacks, and
    /// the host's own write, truncation and chown of the file, which follow, drop it
    /// without (measured: as uid 65534 on its own file, `removexattr` is EPERM and a
    /// `write` drops the capability).
    fn kill_priv(&self, inode: &Inode) -> Result<()> {
        crate::fs::remove_file_caps(self, inode, &[Errno::EPERM])
    }

    /// `fstatfs` of the inode's descriptor: the host file system's numbers, with uvfs's
    /// `f_fsid` and `ST_RDONLY` on a read-only mount.
    /// The host's attribute (`getxattr` of the inode's `/proc/self/fd` link).
    fn getxattr(&self, _inode: &Inode, name: &[u8], buf: Option<&mut [u8]>) -> Result<usize> {
        // `fd` is held until the call returns: the link names it by number.
        let fd = self.path_fd()?;
        let link = fd_link(&fd);
        match buf {
            Some(buf) => rustix::fs::getxattr(link.as_str(), name, buf).h(),
            None => rustix::fs::getxattr_query(link.as_str(), name).h(),
        }
    }

    /// The host's `setxattr`/`removexattr`, after `EROFS` on a read-only mount.
    fn setxattr(
        &self,
        _inode: &Inode,
        name: &[u8],
        value: Option<&[u8]>,
        flags: u32,
    ) -> Result<()> {
        self.writable()?;
        // `fd` is held until the call returns: the link names it by number.
        let fd = self.path_fd()?;
        let link = fd_link(&fd);
        match value {
            Some(v) => {
                let flags = rustix::fs::XattrFlags::from_bits_retain(flags);
                rustix::fs::setxattr(link.as_str(), name, v, flags).h()
            }
            None => rustix::fs::removexattr(link.as_str(), name).h(),
        }
    }

    /// The host's list, without `trusted.*` names for a caller who may not see them (the
    /// host shows them to the uvfs process when it runs as root, whoever the task is).
    fn listxattr(&self, _inode: &Inode, buf: Option<&mut [u8]>, trusted: bool) -> Result<usize> {
        // `fd` is held until the call returns: the link names it by number.
        let fd = self.path_fd()?;
        let link = fd_link(&fd);
        let mut all = vec![0u8; crate::xattr::XATTR_LIST_MAX];
        let n = rustix::fs::listxattr(link.as_str(), &mut all[..]).h()?;
        crate::xattr::filter_list(&all[..n], buf, trusted)
    }

    /// The host's `fstatfs` of the inode's descriptor, with uvfs's device as the id.
    fn statfs(&self, inode: &Inode) -> Result<StatFs> {
        let dev = inode.i_dev;
        let s = rustix::fs::fstatfs(&self.path_fd()?).h()?;
        let mut out = StatFs {
            f_type: s.f_type,
            f_bsize: s.f_bsize,
            f_blocks: s.f_blocks,
            f_bfree: s.f_bfree,
            f_bavail: s.f_bavail,
            f_files: s.f_files,
            f_ffree: s.f_ffree,
            f_fsid: [dev as u32 as i32, (dev >> 32) as u32 as i32],
            f_namelen: s.f_namelen,
            f_frsize: s.f_frsize,
            f_flags: s.f_flags,
        };
        if self.fs.opts.read_only {
            out.f_flags |= 1; // ST_RDONLY
        }
        Ok(out)
    }
}

impl FileOps for HostInode {
    /// For a regular file: the shared data descriptor, opened (or reopened wider) with the
    /// access that covers `flags` and the opens before it (read only when only reading:
    /// a writable host descriptor would make the host's `execve` of the file ETXTBSY).
    fn open(&self, inode: &Inode, flags: OpenFlags, _created: bool) -> Result<u64> {
        if inode.is_dir() {
            // An open directory keeps its descriptor (which then outlives eviction and
            // `rmdir`: a removed directory stays usable as a `dirfd`, as on Linux).
            let fd = self.path_fd()?;
            let mut d = plock(&self.data);
            if d.fd.is_none() {
                d.fd = Some(fd);
            }
            d.opens += 1;
            return Ok(0);
        }
        if !inode.is_reg() {
            return Ok(0);
        }
        let acc = flags.access_mode();
        let want_write = acc == 1 || acc == 2 || flags.contains(OpenFlags::TRUNC);
        let want_read = acc == 0 || acc == 2;
        if want_write {
            self.writable()?;
        }
        let mut d = plock(&self.data);
        let covered = d.fd.is_some() && (!want_read || d.read) && (!want_write || d.write);
        if !covered {
            let read = want_read || d.read;
            let write = want_write || d.write;
            let tries: &[(OFlags, bool, bool)] = match (read, write) {
                (true, true) => &[(OFlags::RDWR, true, true)],
                (false, true) => &[(OFlags::RDWR, true, true), (OFlags::WRONLY, false, true)],
                // Read only: never write access the caller did not ask for. A host
                // descriptor open for writing makes every `execve` of the file on the host
                // fail with ETXTBSY (`deny_write_access`) while it is held, and a
                // read-only bind must not hold one at all.
                _ => &[(OFlags::RDONLY, true, false)],
            };
            let mut last = Errno::EACCES;
            let mut got = None;
            for &(fl, r, w) in tries {
                match self.reopen_data(fl) {
                    Ok(fd) => {
                        got = Some((fd, r, w));
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            let (fd, r, w) = got.ok_or(last)?;
            let old = d.fd.replace(Arc::new(fd));
            d.read = r;
            d.write = w;
            // The old descriptor closes with its last user (after the lock, or later).
            drop(d);
            drop(old);
            d = plock(&self.data);
        }
        d.opens += 1;
        Ok(0)
    }

    fn release(&self, inode: &Inode, _fh: u64) {
        if !inode.is_reg() && !inode.is_dir() {
            return;
        }
        // A pinned (`O_TMPFILE`) descriptor stays only while it is the one way to the
        // file: no link yet but linkable by an open file. With no open file left, an
        // unnamed file is unreachable (the host frees it now, as it would without uvfs),
        // and a named one can be reopened by its name.
        let named = plock(&self.loc).parent.is_some();
        let old = {
            let mut d = plock(&self.data);
            d.opens = d.opens.saturating_sub(1);
            if d.opens == 0 && (!d.pinned || named || inode.nlink() == 0) {
                d.read = false;
                d.write = false;
                d.pinned = false;
                d.fd.take()
            } else {
                None
            }
        };
        drop(old);
    }

    /// The host directory's `getdents64` from the host cookie `pos` (0: the start), `.`
    /// and `..` left out (the VFS lists them); at the end, the host's end position.
    fn iterate_dir(
        &self,
        _dir: &Inode,
        _fh: u64,
        pos: u64,
        emit: &mut DirEmit<'_>,
        _link: &mut DirLink<'_>,
    ) -> Result<Option<u64>> {
        let fd = self.open_dir()?;
        let pos = i64::try_from(pos).map_err(|_| Errno::EINVAL)?;
        rustix::fs::seek(&fd, rustix::fs::SeekFrom::Start(pos as u64)).h()?;
        let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 32 * 1024];
        let mut cur = pos as u64;
        loop {
            let mut it = rustix::fs::RawDir::new(&fd, &mut buf);
            let mut any = false;
            while let Some(e) = it.next() {
                let e = e.h()?;
                any = true;
                let name = e.file_name().to_bytes();
                let next = e.next_entry_cookie();
                if name != b"." && name != b".." {
                    let ty = (e.file_type().as_raw_mode() >> 12) as u8;
                    if !emit(name, e.ino(), ty, next) {
                        return Ok(Some(cur));
                    }
                }
                cur = next;
            }
            if !any {
                // The host's end-of-directory position (tmpfs: `DIR_OFFSET_EOD`), where it
                // parks the listing.
                let end = rustix::fs::seek(&fd, rustix::fs::SeekFrom::Current(0)).h()?;
                return Ok(Some(end));
            }
        }
    }

    /// A regular file or device node reopened from its `O_PATH` descriptor with the access
    /// mode asked (`/proc/self/fd/N`, checked to be the same host inode); a device opens
    /// the host's device (`O_NONBLOCK` as asked).
    fn host_fd(&self, inode: &Inode, flags: OpenFlags) -> Result<OwnedFd> {
        let fmt = inode.mode() & S_IFMT;
        let device = fmt == S_IFCHR || fmt == S_IFBLK;
        if !device && !inode.is_reg() {
            return Err(Errno::EOPNOTSUPP);
        }
        let mut fl = match flags.access_mode() {
            0 => OFlags::RDONLY,
            1 => OFlags::WRONLY,
            _ => OFlags::RDWR,
        };
        if device && flags.contains(OpenFlags::NONBLOCK) {
            fl |= OFlags::NONBLOCK;
        }
        self.reopen_data(fl)
    }

    /// `pread` on the data descriptor.
    fn read_at(&self, inode: &Inode, _fh: u64, buf: &mut [u8], off: u64) -> Result<usize> {
        if !inode.is_reg() {
            return Err(crate::fs::not_regular(inode));
        }
        let fd = self.open_fd()?;
        rustix::io::pread(&fd, buf, off).h()
    }

    /// `pwrite` on the data descriptor, at the host's size for `append` (under `append`).
    fn write_at(
        &self,
        inode: &Inode,
        _fh: u64,
        buf: &[u8],
        off: u64,
        append: bool,
        now: Timespec,
        cred: &Cred,
        fsize_limit: u64,
    ) -> Result<(usize, u64)> {
        if !inode.is_reg() {
            return Err(crate::fs::not_regular(inode));
        }
        if buf.is_empty() {
            return Ok((0, off));
        }
        self.writable()?;
        let fd = self.open_fd()?;
        let _g = append.then(|| plock(&self.append));
        let off = if append {
            rustix::fs::fstat(&fd).h()?.st_size.max(0) as u64
        } else {
            off
        };
        let max = (MAX_LFS_FILESIZE as u64).min(fsize_limit);
        if off >= max {
            return Err(Errno::EFBIG);
        }
        inode.kill_suid(cred, now)?;
        let want = (buf.len() as u64).min(max - off) as usize;
        let n = rustix::io::pwrite(&fd, &buf[..want], off).h()?;
        let end = off + n as u64;
        // Relaxed: a snapshot for `lseek(SEEK_END)` and `stat` until the next refresh; the
        // data is ordered by the host.
        inode.i_size.fetch_max(end, Ordering::Relaxed);
        self.invalidate();
        Ok((n, end))
    }

    /// The host's `fallocate` (`FALLOC_FL_KEEP_SIZE`, `FALLOC_FL_PUNCH_HOLE`).
    fn fallocate(
        &self,
        inode: &Inode,
        _fh: u64,
        off: u64,
        len: u64,
        mode: crate::fs::FallocMode,
        keep_size: bool,
        now: Timespec,
        cred: &Cred,
        fsize_limit: u64,
    ) -> Result<()> {
        use crate::fs::FallocMode;
        use rustix::fs::FallocateFlags as F;
        if !inode.is_reg() {
            return Err(crate::fs::not_regular(inode));
        }
        self.writable()?;
        let mut fl = match mode {
            FallocMode::Allocate => F::empty(),
            FallocMode::PunchHole => F::PUNCH_HOLE,
            FallocMode::ZeroRange => F::ZERO_RANGE,
        };
        if mode == FallocMode::Allocate || (mode == FallocMode::ZeroRange && !keep_size) {
            // As tmpfs's for allocation (the rule uvfs applied before the seam passed it
            // down); as ext4's `ext4_zero_range` for a zeroing that grows the file.
            inode.newsize_ok(off.saturating_add(len), fsize_limit)?;
        }
        let fd = self.open_fd()?;
        if keep_size {
            fl |= F::KEEP_SIZE;
        }
        if mode == FallocMode::ZeroRange {
            // The host's file system may lack it (tmpfs): its refusal must come before
            // anything changes, as Linux's does (`shmem_fallocate` refuses the mode first;
            // `ext4_zero_range` runs `file_modified` after its checks). So the host zeroes
            // first and the set-ID bits and capability go after; a concurrent reader may
            // see the zeroes before the bits go, which no single-threaded program can tell.
            rustix::fs::fallocate(&fd, fl, off, len).h()?;
            self.invalidate();
            let killed = inode.kill_suid(cred, now);
            self.refresh_from(inode, &fd)?;
            return killed;
        }
        inode.kill_suid(cred, now)?;
        rustix::fs::fallocate(&fd, fl, off, len).h()?;
        self.invalidate();
        self.refresh_from(inode, &fd)
    }

    /// The host's `lseek(SEEK_DATA | SEEK_HOLE)`; the data descriptor's offset is unused
    /// (data calls are `pread`/`pwrite`).
    fn seek_data_hole(&self, inode: &Inode, _fh: u64, off: u64, data: bool) -> Result<u64> {
        if !inode.is_reg() {
            return Err(crate::fs::not_regular(inode));
        }
        let fd = self.open_fd()?;
        let whence = if data {
            rustix::fs::SeekFrom::Data(off)
        } else {
            rustix::fs::SeekFrom::Hole(off)
        };
        rustix::fs::seek(&fd, whence).h()
    }

    /// The host's `fsync`/`fdatasync` (a directory opened for the call).
    fn fsync(&self, inode: &Inode, _fh: u64, datasync: bool) -> Result<()> {
        let fd: Arc<OwnedFd> = if inode.is_reg() {
            self.open_fd()?
        } else if inode.is_dir() {
            Arc::new(self.open_dir()?)
        } else {
            return Ok(());
        };
        if datasync {
            rustix::fs::fdatasync(fd.as_fd()).h()
        } else {
            rustix::fs::fsync(fd.as_fd()).h()
        }
    }
}
