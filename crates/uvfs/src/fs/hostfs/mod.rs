//! hostfs: a directory of the host as a uvfs file system, confined to it.
//!
//! Linux analogue: none in-tree; the idea is gVisor's gofer/lisafs (pkg/sentry/fsimpl/gofer:
//! every host call relative to a held file descriptor, one path component at a time) and
//! FUSE's attribute/entry timeouts (fs/fuse/dir.c `fuse_dentry_revalidate`,
//! `fuse_update_attributes`).
//!
//! # Confinement
//! Every host call names at most one component relative to a descriptor hostfs holds
//! (`openat(dirfd, name, O_PATH | O_NOFOLLOW)`, `fstatat(dirfd, name,
//! AT_SYMLINK_NOFOLLOW)`, `mkdirat`, `unlinkat`, `renameat2`, `linkat(fd, "",
//! AT_EMPTY_PATH)`, `symlinkat`, `mknodat`, `readlinkat(fd, "")`, `fchownat(fd, "",
//! AT_EMPTY_PATH)`, `utimensat(fd, "", AT_EMPTY_PATH)`), or no path at all (`fstat`,
//! `pread`, `pwrite`, `ftruncate`, `fallocate`, `lseek`, `fsync`, `getdents64`). Names
//! come from the VFS, which never passes `.`, `..`, an empty name or one with a `/`; a
//! host symlink is never followed by the host (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`,
//! `AT_EMPTY_PATH` on the link's own `O_PATH` descriptor): its target is read with
//! `readlinkat` and followed by uvfs's own walk in uvfs's namespace, so an absolute target
//! resolves against the uvfs root and `..` stops at it. A directory renamed on the host
//! while uvfs holds a descriptor of it stays the same directory, wherever it went (within
//! the bound tree: a host process that moves a directory *out* of the bound tree moves it
//! out of reach of nothing, as with a Linux bind mount). The one path string:
//! `/proc/self/fd/N` of a file's own descriptor, for `chmod` (the host's `fchmodat2` with
//! `AT_EMPTY_PATH` needs a raw syscall, which this crate keeps out of file-system code),
//! for the extended-attribute calls (an `O_PATH` descriptor takes no `f*xattr`), and to
//! reopen a regular file for data from its cached `O_PATH` descriptor (whatever its names
//! are now); that magic link resolves to exactly the inode the descriptor holds (a
//! symlink's names the symlink itself), never to a name, so it reaches nothing else.
//! Without `/proc`, `chmod` and xattrs fail with the host's errno and data opens go by
//! name.
//!
//! # Identity
//! One host inode (`st_dev`, `st_ino`) is one uvfs inode while uvfs holds it (hard links
//! are one `Inode`): a map from the host identity to a `Weak<Inode>`, consulted on every
//! lookup and creation (the slow path). `st_ino` is the host's, `st_dev` the uvfs
//! mount's. A host tree spanning several host file systems may show the same `st_ino`
//! twice (uvfs has one device number per mount).
//!
//! # Caching (the bound on staleness)
//! Every hostfs inode is marked `I_REVALIDATE`: a walk through a cached entry asks
//! [`revalidate`](crate::fs::InodeOps::revalidate), a dentry-cache miss asks `lookup`,
//! `stat` asks `getattr`, `getdents` lists the host directory. An entry or attributes
//! checked less than [`HostfsOptions::attr_timeout`] ago are trusted (the lock-free walk
//! answers from the cache); older ones are checked with one `fstatat` of the name
//! (identity and attributes) or `fstat` of the inode's descriptor. With the default
//! timeout 0 every walk and every `stat` asks the host, so a change made on the host by
//! another process is seen by the next call that starts after it; with a timeout `t`, by
//! the first call starting `t` after it. Listings are always the host's. Every change made
//! through uvfs is a host call made before the uvfs call returns (no data or metadata is
//! held only in uvfs memory; durability is the host's `fsync`).
//!
//! # Host descriptors (the bound on fd use)
//! - An `O_PATH` descriptor per inode in use, kept in a cache of at most
//!   [`HostfsOptions::max_cached_fds`] descriptors (the least recently used evicted; the root's is held
//!   apart, always). An inode whose descriptor was evicted is reopened from its parent's
//!   descriptor and its last known name (`openat(parent, name, O_PATH | O_NOFOLLOW)`,
//!   recursively up to the root), and the result is checked against the inode's host
//!   identity (`ESTALE` when the name now holds another file or none).
//! - A regular file opened through uvfs holds one data descriptor per inode (all uvfs
//!   `File`s of the inode share it; counted opens, closed at the last release), opened
//!   with the widest access the host grants and reopened wider when an open needs more.
//!   An `O_TMPFILE` file, which has no name to reopen by, keeps its descriptor while the
//!   inode lives.
//! - A listing opens the directory for the one `getdents64` call and closes it.
//!
//! - An open directory keeps its `O_PATH` descriptor while open (so that a removed or
//!   evicted directory stays usable as a `dirfd`).
//!
//! So the process holds at most `max_cached_fds + 1` path descriptors, one descriptor per
//! regular file or directory open in uvfs (however many uvfs `File`s share it), and one
//! per call in flight. A cached descriptor of a file removed on the host by another
//! process keeps that file's space until it is evicted or its inode leaves uvfs; a file
//! removed through uvfs loses its cached descriptor at once. A host `EMFILE`/`ENFILE` is
//! `ENFILE` to the caller (the caller's own table is not full; the system's is).
//!
//! # Permissions
//! The VFS checks the task's credentials against the cached attributes (refreshed from the
//! host as above): search permission on every directory walked, `may_create`,
//! `may_delete` and the sticky bit, `may_open`, owner checks of `chmod`/`chown`/`utimensat`,
//! `protected_hardlinks`, set-ID stripping. The host kernel then checks the uvfs process's
//! own credentials for the host call. A call succeeds only if both allow it, so a task
//! never does more than its credentials allow on Linux (against the attributes as last
//! seen); it can do less when the uvfs process has fewer rights on the host than the task
//! has in uvfs (then the host's errno is returned). When the uvfs process is root, new
//! files are given the task's owner and group (`fchownat` after the creation) and their
//! exact mode (a `chmod` after it, as the host's umask applies to the creation), so
//! ownership matches Linux's; otherwise they belong to the uvfs process. `linkat` of an
//! existing inode uses `AT_EMPTY_PATH`, which needs `CAP_DAC_READ_SEARCH` on the host.
//!
//! # Read-only
//! With [`HostfsOptions::read_only`] every change (creation, link, unlink, rmdir, rename,
//! `setattr`, truncate, fallocate, an open for writing) fails with `EROFS` at the point
//! where the VFS hands it to the file system, after the VFS's own checks. (Linux checks a
//! read-only mount before some permission checks; the mount tree's read-only flag in the
//! VFS gives Linux's exact order.)
//!
//! Lock order: the directory locks of the VFS -> `HostInode::append` (an `O_APPEND`
//! write) -> `Inode::attr_lock` -> a regular file's `HostInode::data` (held while its data
//! descriptor is reopened) -> its parents' `data`, `HostInode::loc`, `Shared::inodes`,
//! `Shared::fds` (leaves: each taken alone, and no `Arc<Inode>` is dropped while one of
//! these leaves is held, since the last drop takes `Shared::inodes` and `Shared::fds`).

mod inode;

use crate::fs::{FileSystem, NewInode};
use crate::inode::{FsAttrs, Inode};
use crate::mount::Mount;
use crate::super_block::SuperBlock;
use crate::sync::plain::Mutex;
use crate::sync::plock;
use crate::types::*;
use crate::{Errno, Result};
use inode::{HostInode, Loc};
use rustix::fs::{AtFlags as HAt, Mode, OFlags};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Options of a hostfs mount.
#[derive(Clone, Debug)]
pub struct HostfsOptions {
    /// How long a checked entry or attribute is trusted without asking the host again;
    /// `Duration::ZERO` (the default) asks on every walk and `stat`. See the module doc
    /// for the bound this gives.
    pub attr_timeout: Duration,
    /// Every change fails with `EROFS`.
    pub read_only: bool,
    /// The most `O_PATH` descriptors kept cached (at least 1; default 1024).
    pub max_cached_fds: usize,
}

impl Default for HostfsOptions {
    fn default() -> Self {
        HostfsOptions {
            attr_timeout: Duration::ZERO,
            read_only: false,
            max_cached_fds: 1024,
        }
    }
}

/// A host identity: (`st_dev`, `st_ino`).
pub(crate) type Key = (u64, u64);

/// The capped cache of `O_PATH` descriptors (see the module doc), least recently used
/// evicted first.
#[derive(Default)]
struct FdCache {
    /// Each cached descriptor with the stamp of its latest use.
    map: HashMap<Key, (Arc<OwnedFd>, u64)>,
    /// Uses, oldest first: a key and the stamp of that use. One whose stamp is no longer
    /// the key's (used again since, or removed) is stale: skipped when popped, compacted.
    order: VecDeque<(Key, u64)>,
    /// The next use's stamp.
    next: u64,
}

impl FdCache {
    /// Queues a use of `key` as the latest; returns its stamp, which the caller stores in
    /// the key's entry.
    fn record(&mut self, key: Key) -> u64 {
        let stamp = self.next;
        self.next += 1;
        self.order.push_back((key, stamp));
        stamp
    }

    /// Whether `(key, stamp)` is the key's latest use.
    fn current(map: &HashMap<Key, (Arc<OwnedFd>, u64)>, key: &Key, stamp: u64) -> bool {
        map.get(key).is_some_and(|e| e.1 == stamp)
    }

    /// Drops stale uses once they outnumber `2 * cap` (each use is compacted away at most
    /// once, so a use costs O(1) amortized).
    fn compact(&mut self, cap: usize) {
        if self.order.len() > 2 * cap {
            let FdCache { map, order, .. } = self;
            order.retain(|(k, s)| FdCache::current(map, k, *s));
        }
    }
}

/// State shared by a mount and its inodes.
pub(crate) struct Shared {
    /// Options (immutable).
    pub(crate) opts: HostfsOptions,
    /// The bound directory (immutable; never evicted).
    pub(crate) root_fd: Arc<OwnedFd>,
    /// Host identity -> uvfs inode (see the module doc). Protected by its mutex.
    inodes: Mutex<HashMap<Key, Weak<Inode>>>,
    /// The `O_PATH` descriptor cache. Protected by its mutex.
    fds: Mutex<FdCache>,
    /// Whether the uvfs process is root on the host (new files get the task's owner).
    is_root: bool,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("hostfs").field("opts", &self.opts).finish()
    }
}

/// A host errno as the caller sees it: unchanged, but for the host process's descriptor
/// table being full, which is not the caller's (`ENFILE`, "too many open files in the
/// system", rather than the `EMFILE` the caller could not explain).
pub(crate) fn host_err(e: rustix::io::Errno) -> Errno {
    if e == rustix::io::Errno::MFILE {
        Errno::ENFILE
    } else {
        e.into()
    }
}

/// [`host_err`] for `rustix::io::Result`.
pub(crate) trait HostResult<T> {
    /// The result with a uvfs errno.
    fn h(self) -> Result<T>;
}

impl<T> HostResult<T> for rustix::io::Result<T> {
    fn h(self) -> Result<T> {
        self.map_err(host_err)
    }
}

/// The attributes of a host `stat`.
pub(crate) fn fs_attrs(st: &rustix::fs::Stat) -> FsAttrs {
    let t = |s: i64, n: i64| Timespec::new(s, n);
    FsAttrs {
        mode: st.st_mode,
        uid: st.st_uid,
        gid: st.st_gid,
        nlink: st.st_nlink.min(u32::MAX as u64) as u32,
        size: st.st_size.max(0) as u64,
        blocks: st.st_blocks.max(0) as u64,
        times: [
            t(st.st_atime, st.st_atime_nsec as i64),
            t(st.st_mtime, st.st_mtime_nsec as i64),
            t(st.st_ctime, st.st_ctime_nsec as i64),
        ],
    }
}

/// Stores the host's attributes `st` in `inode`, but for an access time older than the
/// one uvfs holds: uvfs stamps atimes the host never sees (a symlink followed by uvfs's
/// own walk, a listing the VFS answers alone), so the later of the two is kept. (An atime
/// set backwards on the host by another process is therefore not seen.)
pub(crate) fn store_attrs(inode: &Inode, st: &rustix::fs::Stat) {
    let mut a = fs_attrs(st);
    let [atime, _, _] = inode.times();
    if atime > a.times[0] {
        a.times[0] = atime;
    }
    inode.set_attrs(&a);
}

/// The host identity of a `stat`.
pub(crate) fn key_of(st: &rustix::fs::Stat) -> Key {
    (st.st_dev, st.st_ino)
}

/// `openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)`: one component, never followed.
pub(crate) fn open_path(dirfd: impl AsFd, name: &[u8]) -> Result<OwnedFd> {
    rustix::fs::openat(
        dirfd,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .h()
}

impl Shared {
    /// The cached `O_PATH` descriptor of `key`.
    /// A use makes it the most recently used: a directory in use (a working directory
    /// that creates go on in) stays cached however many other inodes pass through, so it
    /// is not reopened by a name the host may have changed meanwhile (found by a new
    /// user's trial: with FIFO eviction, the 1021st create in a working directory renamed
    /// on the host failed with `ESTALE`, and every later call in it).
    fn cached_fd(&self, key: Key) -> Option<Arc<OwnedFd>> {
        let mut c = plock(&self.fds);
        let fd = c.map.get(&key)?.0.clone();
        let stamp = c.record(key);
        if let Some(e) = c.map.get_mut(&key) {
            e.1 = stamp;
        }
        c.compact(self.opts.max_cached_fds.max(1));
        Some(fd)
    }

    /// Caches `fd` as the descriptor of `key` (its latest use), evicting the least
    /// recently used past the cap; the evicted descriptors are closed after the lock (or
    /// by their last user).
    fn cache_fd(&self, key: Key, fd: Arc<OwnedFd>) {
        let mut evicted = Vec::new();
        {
            let mut c = plock(&self.fds);
            let stamp = c.record(key);
            c.map.insert(key, (fd, stamp));
            let cap = self.opts.max_cached_fds.max(1);
            while c.map.len() > cap {
                let Some((k, s)) = c.order.pop_front() else {
                    break;
                };
                if FdCache::current(&c.map, &k, s) {
                    if let Some((fd, _)) = c.map.remove(&k) {
                        evicted.push(fd);
                    }
                }
            }
            c.compact(cap);
        }
        drop(evicted);
    }

    /// Drops the cached descriptor of `key` (closed after the lock, or by its last user).
    pub(crate) fn uncache(&self, key: Key) {
        let fd = plock(&self.fds).map.remove(&key).map(|e| e.0);
        drop(fd);
    }

    /// Drops the cached descriptor of `key` if the host file has no name left, so that
    /// the host frees it (its space, its inode) when uvfs's last open file of it closes,
    /// as it would without uvfs.
    pub(crate) fn uncache_if_unlinked(&self, key: Key) {
        if let Some(fd) = self.cached_fd(key) {
            if rustix::fs::fstat(&fd).map_or(true, |st| st.st_nlink == 0) {
                self.uncache(key);
            }
        }
    }

    /// Forgets the descriptor and the map entry of an inode going away.
    fn forget(&self, key: Key) {
        let fd = plock(&self.fds).map.remove(&key).map(|e| e.0);
        drop(fd);
        let mut m = plock(&self.inodes);
        if m.get(&key).is_some_and(|w| w.strong_count() == 0) {
            m.remove(&key);
        }
    }

    /// The uvfs inode of the host file `st` (one per host identity): the one uvfs holds,
    /// with its attributes refreshed and its location updated to `loc`, or a new one,
    /// marked `I_REVALIDATE`, with `path_fd` cached as its descriptor and `data` as its
    /// pinned data descriptor (`O_TMPFILE`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn inode_for(
        self: &Arc<Self>,
        dev: u64,
        st: &rustix::fs::Stat,
        loc: Loc,
        path_fd: Option<OwnedFd>,
        data: Option<OwnedFd>,
        is_root: bool,
    ) -> Result<Arc<Inode>> {
        let key = key_of(st);
        let ty = st.st_mode & S_IFMT;
        let existing = plock(&self.inodes).get(&key).and_then(Weak::upgrade);
        if let Some(i) = existing.filter(|i| i.mode() & S_IFMT == ty) {
            inode::host(&i)?.set_loc(loc);
            store_attrs(&i, st);
            if let Some(fd) = path_fd {
                self.cache_fd(key, Arc::new(fd));
            }
            return Ok(i);
        }
        let target = if ty == S_IFLNK {
            let fd = path_fd.as_ref().ok_or(Errno::ESTALE)?;
            let t = rustix::fs::readlinkat(fd, "", Vec::new()).h()?;
            Some(t.into_bytes().into_boxed_slice())
        } else {
            None
        };
        let a = fs_attrs(st);
        let shared = self.clone();
        let inode = Arc::new_cyclic(|me| {
            let hi = HostInode::new(shared, key, me.clone(), loc, target, data, is_root);
            let ctime = a.times[2];
            let mut i = Inode::new(
                st.st_ino,
                dev,
                st.st_mode,
                a.uid,
                a.gid,
                ctime,
                Box::new(hi),
            );
            i.i_rdev = st.st_rdev;
            i.set_revalidate();
            i.set_attrs(&a);
            i
        });
        if let Some(fd) = path_fd {
            self.cache_fd(key, Arc::new(fd));
        }
        // Two lookups of one new host inode under two names (hard links) may race: the
        // first to record its inode wins, the other's is dropped after the lock.
        // Every `Arc<Inode>` and `Weak` leaves the lock alive: a last reference dropped
        // under it would take it again (`HostInode::drop`).
        let (winner, old, stale) = {
            let mut m = plock(&self.inodes);
            let cur = m.get(&key).and_then(Weak::upgrade);
            if cur.as_ref().is_some_and(|i| i.mode() & S_IFMT == ty) {
                (cur, None, None)
            } else {
                (None, m.insert(key, Arc::downgrade(&inode)), cur)
            }
        };
        drop((old, stale));
        match winner {
            Some(i) => {
                drop(inode);
                Ok(i)
            }
            None => Ok(inode),
        }
    }
}

/// The hostfs file-system type: one per mount.
pub(crate) struct HostFs {
    shared: Arc<Shared>,
}

impl fmt::Debug for HostFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl FileSystem for HostFs {
    fn name(&self) -> &'static str {
        "hostfs"
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    /// The host's `openat(O_CREAT | O_EXCL)`, `mkdirat`, `symlinkat`, `mknodat` or
    /// `openat(O_TMPFILE)` in `dir`'s host directory, then (as root) `fchownat` to the
    /// task's owner and a `chmod` to the exact mode.
    fn create(&self, dev: u64, dir: &Inode, name: &[u8], args: NewInode<'_>) -> Result<Arc<Inode>> {
        inode::create(&self.shared, dev, dir, name, args)
    }
}

/// hostfs: mounts the host directory `host_dir` as a new uvfs namespace whose root it is,
/// confined to it (see the module doc).
///
/// # Errors
/// The host's for opening `host_dir` (`ENOENT`, `ENOTDIR`, `EACCES`, `ELOOP`,
/// `ENAMETOOLONG`, `ENFILE`).
///
/// # References
/// gVisor's gofer (`pkg/sentry/fsimpl/gofer`); openat(2) `O_PATH`.
pub fn mount(host_dir: impl AsRef<std::path::Path>, opts: HostfsOptions) -> Result<Arc<Mount>> {
    let fd = rustix::fs::open(
        host_dir.as_ref(),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .h()?;
    // O_PATH asks for no permission on the directory itself; a mount the process cannot
    // search is refused now rather than at the first walk.
    rustix::fs::accessat(&fd, ".", rustix::fs::Access::EXEC_OK, HAt::EACCESS).h()?;
    let st = rustix::fs::fstat(&fd).h()?;
    let shared = Arc::new(Shared {
        opts,
        root_fd: Arc::new(fd),
        inodes: Mutex::new(HashMap::new()),
        fds: Mutex::new(FdCache::default()),
        is_root: rustix::process::geteuid().is_root(),
    });
    let sb = Arc::new(SuperBlock::new(Box::new(HostFs {
        shared: shared.clone(),
    })));
    let loc = Loc {
        parent: None,
        name: Arc::from(&b"/"[..]),
    };
    let root = shared.inode_for(sb.s_dev, &st, loc, None, None, true)?;
    Ok(Mount::with_root(sb, root))
}
