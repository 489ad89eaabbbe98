//! The FUSE server: a uvfs namespace behind [`fuser::Filesystem`], so that programs that
//! cannot be changed use it through a real mount point (`uvfs mount`).
//!
//! Linux analogue: the server half of the FUSE protocol (`fuse_lowlevel_ops` in libfuse;
//! the kernel half is fs/fuse/). Every request runs the same code as the Rust API: a node is
//! a [`Dentry`] and node operations are the `*at` calls with [`AtDir::Dentry`]; a file
//! handle is a descriptor in one of the server's descriptor tables, so `read`, `write`,
//! `fsync`, `fallocate` and `release` are `pread`, `pwrite`, `fsync`, `fallocate` and `close`
//! on it, and the handle holds one reference on the same [`File`](crate::File) an `openat`
//! would have made.
//!
//! # No shared written line on the request path
//! - Each worker thread owns its [`Task`]s (credentials are set per request on the worker's
//!   own task) and opens files into a descriptor table of its own per caller uid (made at
//!   the first open of that caller on that worker, capped at
//!   [`FuseOptions::max_handles_per_user`], all of them together at
//!   [`FuseOptions::max_handles`]: one user cannot exhaust what others open from, see
//!   `handles.rs`); a handle names its table (`fh = table << 32 | fd`), so a `read` on any
//!   worker finds the `File` with [`FdTable::fget`](crate::FdTable::fget) (no lock) and a
//!   `release` takes only that table's lock.
//! - Nodes (`nodeid = st_ino`, the root is 1) live in [`NODE_SHARDS`] hash maps, each
//!   behind its own lock on its own cache line; a request takes one shard's lock for a
//!   moment. Requests on different inodes meet only when their inode numbers share a shard.
//!
//! # Lookup counts
//! Every reply that hands the kernel an entry (`lookup`, `create`, `mkdir`, `mknod`,
//! `symlink`, `link`, a `readdirplus` entry other than `.` and `..`) adds one to the node's
//! count; `forget` subtracts what the kernel says, and the node (its dentry reference) goes
//! at zero, as libfuse's `passthrough_ll` keeps `lo_inode.refcount`.
//!
//! # Permissions
//! [`Permissions::Kernel`] (the default) mounts with `default_permissions`: the kernel checks
//! every access against the attributes uvfs reports (supplementary groups included), and
//! uvfs runs the request with the caller's uid and gid (they own what is created) holding
//! root's capabilities ([`Cred::with_all_caps`]), so it does not check a second time with
//! less information. [`Permissions::Uvfs`] leaves the checks to uvfs: the caller's
//! supplementary groups are read from `/proc/PID/status` (as libfuse's
//! `fuse_req_getgroups`), then every check is uvfs's own.
//!
//! The price of each: with `default_permissions` the kernel refreshes a directory's
//! attributes (one `GETATTR` round trip) before the first permission check after any change
//! to it (fs/fuse/dir.c `fuse_dir_changed` invalidates them, `fuse_permission` refetches),
//! so create-and-unlink loops cost two extra round trips; with uvfs checking, a non-root
//! caller costs a read of `/proc/PID/status` per request, and a caller in another PID
//! namespace (pid 0 in the request) is checked without its supplementary groups.
//!
//! # Extended attributes
//! `GETXATTR`, `SETXATTR`, `LISTXATTR` and `REMOVEXATTR` are the `*xattrat` calls on the
//! node's dentry (`AT_EMPTY_PATH`, no symlink follow), as the caller. The kernel runs
//! `xattr_permission` itself before it sends one (fs/xattr.c: `trusted.*` needs the caller's
//! `CAP_SYS_ADMIN`, `user.*` only on regular files and directories, sticky directories for
//! their owner, then `inode_permission`, which with `default_permissions` checks the mode
//! bits); what it does not do is filter a list, so `LISTXATTR` runs with the caller's own
//! rights (no `trusted.*` names for others than root) in both modes.
//!
//! # Caching
//! Entries, attributes and missing names (negative entries) are cached by the kernel for
//! [`FuseOptions::timeout`] (1 s by default, libfuse's default). Every change made through the mount updates the kernel's
//! copy at once; changes made behind the kernel's back (through the Rust API on the same
//! namespace) show after at most the timeout. A timeout of 0 makes every access ask uvfs.
//! File contents go through the kernel's page cache, which is dropped at each open (no
//! `FOPEN_KEEP_CACHE`), so a file opened after such a change reads the new data.
//!
//! # Interrupts
//! No uvfs operation blocks (there are no waits on I/O, pipes or locks held across
//! requests: `setlk` is left to the kernel's local locking), so a request always completes
//! promptly and an interrupt has nothing to cut short. fuser 0.18 answers `FUSE_INTERRUPT`
//! with `ENOSYS`, after which the kernel sends no more interrupts and waits for the reply
//! (fs/fuse/dev.c `request_wait_answer`), which is what Linux's FUSE protocol defines for
//! servers that do not interrupt.
//!
//! Lock order: a node shard lock is a leaf (never held across a call into uvfs); the
//! handle registry's lock (`handles.rs`) is taken only at a worker's first use of a table
//! or a new table, before that table's `file_lock`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fmt;
use std::ops::Deref;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    FileAttr, FileType, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
};
use parking_lot::RwLock;

use super::handles::{default_max_handles, Handles, Opener};
use crate::cred::{Caps, Cred};
use crate::dentry::Dentry;
use crate::errno::{Errno, Result};
use crate::mount::Mount;
use crate::namei::AtDir;
use crate::readdir::parse_dirents;
use crate::sync::padded::CacheLine;
use crate::task::Task;
use crate::types::{self, AtFlags, Fd, OpenFlags, RenameFlags, Stat, Timespec};

/// How a file opened with `flags` is opened for the kernel. `O_RDWR` opens, the only ones a
/// shared writable mapping can be made of, without `FOPEN_NOFLUSH`: their `close(2)` then
/// runs the kernel's `fuse_flush`, which writes the file's dirty mapped pages back
/// (`write_inode_now`) and returns the error a WRITE of them got (`filemap_check_errors`:
/// `ENOSPC` past `--size`), before it would send a `FLUSH`, which uvfs answers `ENOSYS`
/// once so that the kernel sends none again (`no_flush`): no round trip per close. Every
/// other open with `FOPEN_NOFLUSH`: its close cannot have dirtied pages (`O_WRONLY` writes
/// are write-through, their errors are `write`'s), and need not take the inode lock to
/// write back, or report, another descriptor's pages. (tmpfs itself has nothing to do at
/// close, shmem has no `flush`; POSIX locks, which `FLUSH` would also release, are the
/// kernel's own here.)
fn fopen_flags(flags: OpenFlags) -> FopenFlags {
    if flags & OpenFlags::ACCMODE == OpenFlags::RDWR {
        FopenFlags::empty()
    } else {
        FopenFlags::FOPEN_NOFLUSH
    }
}

/// `__FMODE_EXEC` in an `OPEN`'s flags: the kernel opens a file for `execve`
/// (`do_open_execat`) and passes its `f_flags` on (include/linux/fcntl.h).
const FMODE_EXEC: u32 = 0x20;

/// Number of node-table shards (a power of two).
pub const NODE_SHARDS: usize = 64;

/// Who checks permissions on a FUSE mount.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Permissions {
    /// The kernel (`default_permissions`); uvfs runs requests with the caller's ids and
    /// root's capabilities.
    #[default]
    Kernel,
    /// uvfs, with the caller's uid, gid and supplementary groups.
    Uvfs,
}

/// How a [`UvfsFuse`] server behaves.
#[derive(Clone, Debug)]
pub struct FuseOptions {
    /// Worker threads (each with its own descriptor table for file handles); at least 1.
    pub threads: usize,
    /// Who checks permissions.
    pub permissions: Permissions,
    /// How long the kernel may cache entries and attributes.
    pub timeout: Duration,
    /// The most file handles one caller uid may hold in one worker's table (as
    /// `RLIMIT_NOFILE` per process: past it that caller's opens on that worker fail with
    /// `EMFILE`); 1 to 2^20. `None`: 2^20 (`nr_open`), or less so that one user's tables on
    /// all workers hold at most half of [`max_handles`](Self::max_handles) (one user alone
    /// cannot make the others' opens fail with `ENFILE`).
    pub max_handles_per_user: Option<u32>,
    /// The most file handles, and the most descriptor tables, of the whole server (as
    /// `fs.file-max`: past it, opens by callers other than root fail with `ENFILE`, reported
    /// on stderr at most once a minute); may be exceeded by less than one per worker when
    /// opens race. Default [`default_max_handles`] (Linux's `file-max` for this RAM); 0: no
    /// limit.
    pub max_handles: u64,
}

impl Default for FuseOptions {
    fn default() -> Self {
        FuseOptions {
            threads: 1,
            permissions: Permissions::Kernel,
            timeout: Duration::from_secs(1),
            max_handles_per_user: None,
            max_handles: default_max_handles(),
        }
    }
}

/// A node the kernel knows: a dentry of its inode, and how many times it was handed out.
struct Node {
    /// The most recently handed-out dentry of the inode (any alias works as a start).
    dentry: Arc<Dentry>,
    /// `nlookup`: entries handed to the kernel minus those it forgot.
    nlookup: u64,
}

/// A node's dentry for one request: the root is borrowed (no write to its count), other
/// nodes are cloned out of their shard.
enum NodeRef<'a> {
    Root(&'a Arc<Dentry>),
    Node(Arc<Dentry>),
}

impl Deref for NodeRef<'_> {
    type Target = Arc<Dentry>;
    fn deref(&self) -> &Arc<Dentry> {
        match self {
            NodeRef::Root(d) => d,
            NodeRef::Node(d) => d,
        }
    }
}

/// One shard of the node table: `nodeid -> Node`, behind its own lock.
type NodeShard = RwLock<HashMap<u64, Node>>;

/// Distinguishes servers in the per-thread worker state.
static NEXT_SERVER_ID: AtomicU64 = AtomicU64::new(1);

/// A worker thread's state: its tasks, a read buffer.
struct Worker {
    server: u64,
    /// This worker's number (`0 .. threads`): which tables it opens files into.
    own: usize,
    /// The task for requests that open nothing: a thread of the server's base task.
    base: Task,
    /// Table number -> this thread's task on that table (made at the first request that
    /// needs it).
    tasks: Vec<Option<Task>>,
    /// Caller uid -> the table this worker opens that caller's files into, and when that
    /// table's being full may next be reported (seconds after the server's start).
    own_tables: HashMap<u32, (usize, u64)>,
    buf: Vec<u8>,
}

impl Worker {
    /// This thread's task on table `n` (made at its first use here).
    ///
    /// # Errors
    /// `EBADF` for a table that does not exist (a forged file handle).
    fn table_task<'a>(
        tasks: &'a mut Vec<Option<Task>>,
        handles: &Handles,
        n: usize,
    ) -> Result<&'a mut Task> {
        if tasks.get(n).is_none_or(Option::is_none) {
            // Checked before the vector grows: a forged `n` must not size it.
            let t = handles.thread(n)?;
            if tasks.len() <= n {
                tasks.resize_with(n + 1, || None);
            }
            tasks[n] = Some(t);
        }
        tasks[n].as_mut().ok_or(Errno::EBADF)
    }
}

thread_local! {
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

/// uvfs served over FUSE: implements [`fuser::Filesystem`] on a mount's namespace.
///
/// # References
/// libfuse `fuse_lowlevel_ops` and `example/passthrough_ll.c` (node and handle model);
/// Linux fs/fuse/ (what the kernel sends and expects).
pub struct UvfsFuse {
    id: u64,
    mnt: Arc<Mount>,
    /// The descriptor tables of file handles and their limits.
    handles: Handles,
    /// `nodeid -> Node`, sharded by inode number.
    nodes: Box<[CacheLine<NodeShard>]>,
    /// Assigns worker threads their numbers. Written once per thread start.
    next_worker: CacheLine<AtomicUsize>,
    opts: FuseOptions,
    /// The root mount's device: its inode numbers are the node ids and `st_ino`s the
    /// kernel sees, unchanged.
    root_dev: u64,
    /// The other file systems mounted in the served namespace, by device, in order of first
    /// sight: the one at index `i` gets its inode numbers XORed with `(i + 1) << 48`, so
    /// that node ids and `st_ino`s of different file systems (which share the FUSE mount's
    /// one `st_dev`) do not collide. Read on every request naming such a file system;
    /// written once per file system.
    devs: crate::sync::RwLock<Vec<u64>>,
}

impl fmt::Debug for UvfsFuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UvfsFuse")
            .field("handles", &self.handles.open_count())
            .field("opts", &self.opts)
            .finish()
    }
}

/// The errno as fuser carries it.
fn fe(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.raw())
}

/// A name from a request: one path component (the kernel never sends a `/` or an empty
/// name; a message that does is refused).
///
/// # Errors
/// `EINVAL` for an empty name or one containing `/`.
fn component(name: &OsStr) -> Result<&[u8]> {
    let b = name.as_bytes();
    if b.is_empty() || b.contains(&b'/') {
        return Err(Errno::EINVAL);
    }
    Ok(b)
}

/// A timestamp as `SystemTime` (times before 1970 included).
fn system_time(t: Timespec) -> SystemTime {
    let nsec = Duration::from_nanos(t.tv_nsec.clamp(0, 999_999_999) as u64);
    if t.tv_sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.tv_sec as u64) + nsec
    } else {
        UNIX_EPOCH - Duration::from_secs(t.tv_sec.unsigned_abs()) + nsec
    }
}

/// A `SystemTime` as a timestamp (saturating at `i64::MIN` seconds).
fn timespec(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec {
            tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(d.subsec_nanos()),
        },
        Err(e) => {
            let d = e.duration();
            // `wrapping_neg`: 2^63 s before 1970 is i64::MIN itself.
            let s = (d.as_secs() as i64).wrapping_neg();
            match d.subsec_nanos() {
                0 => Timespec {
                    tv_sec: s,
                    tv_nsec: 0,
                },
                n => Timespec {
                    tv_sec: s.saturating_sub(1),
                    tv_nsec: 1_000_000_000 - i64::from(n),
                },
            }
        }
    }
}

/// The time the kernel sent in a `SETATTR`, from the `SystemTime` fuser 0.18 made of it.
/// fuser's `system_time_from_time` turns `(secs < 0, nsec)` into `EPOCH - (|secs| s + nsec
/// ns)` instead of `EPOCH - |secs| s + nsec ns` (its source says "TODO: 1_000_000_000 -
/// nsec"), so a time before 1970 with nanoseconds would be stored up to a second early
/// (`touch -d '1969-12-31 23:59:59.25'` became `.. 58.75`). The mapping is one-to-one, so
/// this undoes it; fuser is pinned to 0.18.0 (Cargo.toml) so that a fixed fuser cannot
/// silently turn this into the error.
fn setattr_time(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(_) => timespec(t),
        Err(e) => Timespec {
            tv_sec: (e.duration().as_secs() as i64).wrapping_neg(),
            tv_nsec: i64::from(e.duration().subsec_nanos()),
        },
    }
}

/// `setattr`'s time as `utimensat`'s.
fn utime(t: Option<TimeOrNow>) -> Timespec {
    match t {
        None => Timespec::UTIME_OMIT,
        Some(TimeOrNow::Now) => Timespec::UTIME_NOW,
        Some(TimeOrNow::SpecificTime(t)) => setattr_time(t),
    }
}

/// The file type of a mode.
fn file_type(mode: u32) -> FileType {
    match mode & types::S_IFMT {
        types::S_IFDIR => FileType::Directory,
        types::S_IFLNK => FileType::Symlink,
        types::S_IFIFO => FileType::NamedPipe,
        types::S_IFCHR => FileType::CharDevice,
        types::S_IFBLK => FileType::BlockDevice,
        types::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

/// The attributes of `st` as FUSE sends them (`btime` as `crtime`).
fn file_attr(st: &Stat, btime: Timespec) -> FileAttr {
    FileAttr {
        ino: INodeNo(st.st_ino),
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: system_time(st.st_atime),
        mtime: system_time(st.st_mtime),
        ctime: system_time(st.st_ctime),
        crtime: system_time(btime),
        kind: file_type(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        // The kernel's `new_decode_dev` reads the 32-bit `new_encode_dev` form, which is
        // the low half of the 64-bit `st_rdev` for majors below 4096.
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}

/// A reply that is complete once `ok` (an empty one, or a directory listing filled in).
trait Done {
    fn ok(self);
    fn error(self, e: fuser::Errno);
}

macro_rules! impl_done {
    ($($t:ty),*) => {$(
        impl Done for $t {
            fn ok(self) {
                <$t>::ok(self)
            }
            fn error(self, e: fuser::Errno) {
                <$t>::error(self, e)
            }
        }
    )*};
}
impl_done!(ReplyEmpty, ReplyDirectory, ReplyDirectoryPlus);

/// Answers `reply` with `r`'s outcome.
fn empty(reply: impl Done, r: Result<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(fe(e)),
    }
}

/// How the xattr requests name their node: the dentry itself, a symlink not followed.
const XATTR_AT: AtFlags = AtFlags::EMPTY_PATH.union(AtFlags::SYMLINK_NOFOLLOW);

/// Answers a `GETXATTR`/`LISTXATTR` of `size` bytes whose answer is `len` bytes long, `data`
/// (empty for a size query): the length alone when the kernel asked for it (`size` 0), else
/// the bytes.
fn xattr_reply(reply: ReplyXattr, size: u32, data: &[u8], len: usize) {
    if size == 0 {
        // A value or list is at most 64 KiB (XATTR_SIZE_MAX, XATTR_LIST_MAX).
        reply.size(u32::try_from(len).unwrap_or(u32::MAX));
    } else {
        reply.data(data);
    }
}

/// The file handle of descriptor `fd` in table `table`.
fn fh_make(table: usize, fd: Fd) -> fuser::FileHandle {
    fuser::FileHandle((table as u64) << 32 | u64::from(fd.0 as u32))
}

/// A file handle: the table it lives in and its descriptor there.
fn fh_split(fh: fuser::FileHandle) -> (usize, Fd) {
    ((fh.0 >> 32) as usize, Fd(fh.0 as u32 as i32))
}

/// The supplementary groups of thread `pid` (`Groups:` in `/proc/PID/status`), as
/// libfuse's `fuse_req_getgroups`; empty if the process is gone.
fn proc_groups(pid: u32) -> Vec<u32> {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Vec::new();
    };
    s.lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

impl UvfsFuse {
    /// A server for `mnt`'s namespace: root credentials, umask 0 (the kernel applies the
    /// caller's umask before it sends a mode), file handles in a descriptor table per worker
    /// and caller uid with `RLIMIT_NOFILE` `opts.max_handles_per_user` (see
    /// [`FuseOptions`]).
    pub fn new(mnt: &Arc<Mount>, opts: FuseOptions) -> UvfsFuse {
        let threads = opts.threads.max(1);
        let base = Task::init(mnt);
        base.umask(0);
        let handles = Handles::new(base, threads, opts.max_handles_per_user, opts.max_handles);
        let nodes = (0..NODE_SHARDS)
            .map(|_| CacheLine(RwLock::new(HashMap::new())))
            .collect();
        UvfsFuse {
            // Relaxed: a unique id, no ordering with anything else.
            id: NEXT_SERVER_ID.fetch_add(1, Ordering::Relaxed),
            mnt: mnt.clone(),
            handles,
            nodes,
            next_worker: CacheLine(AtomicUsize::new(0)),
            opts: FuseOptions { threads, ..opts },
            root_dev: mnt.mnt_sb.s_dev,
            devs: crate::sync::RwLock::new(Vec::new()),
        }
    }

    /// How long the kernel may keep a name -> node entry. With uvfs checking permissions it
    /// is 0: the kernel does not check search permission on directories itself, so a cached
    /// entry would let a caller reach a name through a directory it may not search (the
    /// walk would not ask uvfs); uncached, every walk step is a `LOOKUP` that uvfs checks
    /// with the caller's credentials.
    fn entry_ttl(&self) -> Duration {
        match self.opts.permissions {
            Permissions::Kernel => self.opts.timeout,
            Permissions::Uvfs => Duration::ZERO,
        }
    }

    /// The options this server runs with.
    pub fn options(&self) -> &FuseOptions {
        &self.opts
    }

    /// The node-table shard of inode `ino`.
    fn shard(&self, ino: u64) -> &NodeShard {
        &self.nodes[(ino as usize) & (NODE_SHARDS - 1)].0
    }

    /// The dentry of node `ino`.
    ///
    /// # Errors
    /// `ESTALE` for a node the kernel was never given or has forgotten.
    fn node(&self, ino: INodeNo) -> Result<NodeRef<'_>> {
        if ino.0 == 1 {
            return Ok(NodeRef::Root(self.mnt.root()));
        }
        self.shard(ino.0)
            .read()
            .get(&ino.0)
            .map(|n| NodeRef::Node(n.dentry.clone()))
            .ok_or(Errno::ESTALE)
    }

    /// The inode number the kernel sees for inode `ino` of the file system on device `dev`
    /// (its node id, and `st_ino`): `ino` itself on the root mount's file system, else `ino`
    /// XORed with that file system's tag (see `devs`). Inode numbers of 2^48 or more on a
    /// mounted file system could collide with another's; tmpfs's and common host file
    /// systems' stay far below.
    fn ino_of(&self, dev: u64, ino: u64) -> u64 {
        if dev == self.root_dev {
            return ino;
        }
        let find = |v: &Vec<u64>| v.iter().position(|&d| d == dev);
        // The read guard must end before the write lock (a `match` on it would keep it).
        let found = find(&crate::sync::read(&self.devs));
        let i = match found {
            Some(i) => i,
            None => {
                let mut w = crate::sync::write(&self.devs);
                find(&w).unwrap_or_else(|| {
                    w.push(dev);
                    w.len() - 1
                })
            }
        };
        ino ^ (((i as u64) + 1) << 48)
    }

    /// `d`'s node id ([`ino_of`](Self::ino_of) of its inode).
    fn node_id(&self, d: &Arc<Dentry>) -> u64 {
        self.ino_of(d.d_inode.i_dev, d.inode().ino())
    }

    /// The attributes of `st` as FUSE sends them, with the inode number the kernel sees.
    fn file_attr(&self, st: &Stat, btime: Timespec) -> FileAttr {
        let mut a = file_attr(st, btime);
        a.ino = INodeNo(self.ino_of(st.st_dev, st.st_ino));
        a
    }

    /// Counts one more kernel reference to `d`'s inode (an entry reply is about to go out).
    fn remember(&self, d: &Arc<Dentry>) {
        let ino = self.node_id(d);
        if ino == 1 {
            return;
        }
        let mut s = self.shard(ino).write();
        let n = s.entry(ino).or_insert_with(|| Node {
            dentry: d.clone(),
            nlookup: 0,
        });
        n.nlookup += 1;
        if !Arc::ptr_eq(&n.dentry, d) {
            n.dentry = d.clone();
        }
    }

    /// `forget`: the kernel let go of `nlookup` of the node's lookups; at zero the node (its
    /// dentry reference) goes. Unknown nodes and excess counts are ignored (a kernel that
    /// forgets more than it was given is not trusted to underflow anything).
    fn forget_node(&self, ino: INodeNo, nlookup: u64) {
        let mut s = self.shard(ino.0).write();
        if let Some(n) = s.get_mut(&ino.0) {
            n.nlookup = n.nlookup.saturating_sub(nlookup);
            if n.nlookup == 0 {
                s.remove(&ino.0);
            }
        }
    }

    /// A new worker's state: its number assigned round-robin; its tasks on tables (threads
    /// of the tables' owner tasks) are made when first needed.
    #[cold]
    fn new_worker(&self) -> Worker {
        // Relaxed: only distinctness matters (the counter orders nothing).
        let own = self.next_worker.0.fetch_add(1, Ordering::Relaxed) % self.opts.threads;
        Worker {
            server: self.id,
            own,
            base: self.handles.base_thread(),
            tasks: Vec::new(),
            own_tables: HashMap::new(),
            buf: Vec::new(),
        }
    }

    /// Runs `f` with the calling thread's worker state (made at its first request).
    fn worker<R>(&self, f: impl FnOnce(&mut Worker) -> Result<R>) -> Result<R> {
        WORKER.with(|w| {
            let mut w = w.borrow_mut();
            if w.as_ref().map(|w| w.server) != Some(self.id) {
                *w = Some(self.new_worker());
            }
            let Some(w) = w.as_mut() else {
                unreachable!("set above")
            };
            f(w)
        })
    }

    /// Runs `f` as `req`'s caller with the calling thread's task for requests that open
    /// nothing, and the thread's buffer.
    ///
    /// # Errors
    /// `f`'s.
    fn with<R>(
        &self,
        req: &Request,
        f: impl FnOnce(&Task, &mut Vec<u8>) -> Result<R>,
    ) -> Result<R> {
        self.worker(|w| {
            self.set_caller(&mut w.base, req);
            f(&w.base, &mut w.buf)
        })
    }

    /// Runs `f` as `req`'s caller on the table the calling worker opens that caller's files
    /// into (made now if there is none), with an [`Opener`] for it; returns the table's
    /// number (for [`fh_make`]) and `f`'s result.
    ///
    /// # Errors
    /// `ENFILE` if a new table would pass [`FuseOptions::max_handles`]; `f`'s.
    fn with_opener<R>(
        &self,
        req: &Request,
        f: impl FnOnce(&Task, &mut Opener<'_>) -> Result<R>,
    ) -> Result<(usize, R)> {
        self.worker(|w| {
            let uid = req.uid();
            let (n, next_report) = match w.own_tables.entry(uid) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert((self.handles.table(w.own, uid)?, 0))
                }
            };
            let task = Worker::table_task(&mut w.tasks, &self.handles, *n)?;
            self.set_caller(task, req);
            let mut opener = Opener {
                handles: &self.handles,
                worker: w.own,
                uid,
                next_report,
            };
            Ok((*n, f(task, &mut opener)?))
        })
    }

    /// Runs `f` on open file handle `fh` (its table's task, its descriptor). What uvfs does
    /// on an open file depends on no credentials (the open checked them), except a
    /// `write`-like change (`modifies`) to a set-user-ID or set-group-ID file, whose bits it
    /// may drop by the writer's rights: only then does the request take its caller's
    /// credentials, so that reads and writes of ordinary files cost no `/proc` lookup with
    /// `--permissions uvfs`.
    ///
    /// # Errors
    /// `EBADF` for a forged handle; `f`'s.
    fn with_fh<R>(
        &self,
        req: &Request,
        fh: fuser::FileHandle,
        modifies: bool,
        f: impl FnOnce(&Task, Fd, &mut Vec<u8>) -> Result<R>,
    ) -> Result<R> {
        let (table, fd) = fh_split(fh);
        self.worker(|w| {
            let task = Worker::table_task(&mut w.tasks, &self.handles, table)?;
            let buf = &mut w.buf;
            // With kernel checks the caller holds all capabilities: uvfs drops no bits
            // (the kernel's SETATTR does), so no credentials and no extra `fget` here.
            if modifies && self.opts.permissions == Permissions::Uvfs {
                let mode = task.fdget_raw(fd)?.inode().mode();
                if mode & (types::S_ISUID | types::S_ISGID) != 0 {
                    self.set_caller(task, req);
                }
            }
            f(task, fd, buf)
        })
    }

    /// Gives `task` the credentials of `req`'s caller (unchanged ones are not rebuilt).
    fn set_caller(&self, task: &mut Task, req: &Request) {
        let (uid, gid) = (req.uid(), req.gid());
        match self.opts.permissions {
            Permissions::Kernel => {
                let c = task.cred();
                if c.uid != uid || c.gid != gid || c.caps != Caps::ALL {
                    task.override_creds(Cred::new(uid, gid, &[]).with_all_caps());
                }
            }
            Permissions::Uvfs => {
                let groups = if uid == 0 {
                    Vec::new()
                } else {
                    proc_groups(req.pid())
                };
                let c = task.cred();
                if c.uid != uid
                    || c.gid != gid
                    || c.caps != Caps::for_uid(uid)
                    || *c.groups != *groups
                {
                    task.override_creds(Cred::new(uid, gid, &groups));
                }
            }
        }
    }

    /// With kernel checks, drops the set-ID bits of regular file `d` that `req`'s caller has
    /// just opened with `O_TRUNC`, as Linux's `do_truncate` does for a caller without
    /// `CAP_FSETID` (`setattr_should_drop_suidgid`). The kernel knows, but with
    /// `FUSE_ATOMIC_O_TRUNC` it sends no `SETATTR` after the `OPEN` (fs/fuse/dir.c
    /// `fuse_do_setattr`, `ATTR_OPEN`), and the flag that would tell (`FUSE_OPEN_KILL_SUIDGID`
    /// with `FUSE_HANDLE_KILLPRIV_V2`) is not passed on by fuser 0.18; the `OPEN` ran with
    /// all capabilities, which keep the bits. So the caller's own credentials decide here:
    /// its uid, gid and supplementary groups (read from `/proc` only in this case); root
    /// holds `CAP_FSETID`, as everywhere in uvfs. With uvfs checking, the open itself ran
    /// with those credentials and dropped the bits already.
    ///
    /// # Errors
    /// The file system's, from changing the mode (the open then fails, as Linux's when its
    /// `notify_change` does).
    fn kill_suid_after_open_trunc(&self, req: &Request, d: &Dentry) -> Result<()> {
        let inode = d.inode();
        let set_id = inode.mode() & (types::S_ISUID | types::S_ISGID) != 0;
        let kernel = self.opts.permissions == Permissions::Kernel;
        if !kernel || !set_id || !inode.is_reg() || req.uid() == 0 {
            return Ok(());
        }
        let caller = Cred::new(req.uid(), req.gid(), &proc_groups(req.pid()));
        inode.kill_suid(&caller, crate::time::coarse_now())
    }

    /// `fstatat(d, "", AT_EMPTY_PATH)` as FUSE attributes.
    fn attr_of(&self, task: &Task, d: &Arc<Dentry>) -> Result<FileAttr> {
        let st = task.fstatat(d, "", AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(self.file_attr(&st, d.inode().btime()))
    }

    /// `lookup_one`: the entry `name` in directory `dir`, not following a final symlink.
    fn lookup_one(task: &Task, dir: &Arc<Dentry>, name: &[u8]) -> Result<Arc<Dentry>> {
        task.with_walk(AtDir::Dentry(dir), name, |nd, start| {
            Ok(nd.walk(start, name, false, false)?.clone())
        })
    }

    /// Looks `name` up in `parent` and answers with its entry, counting the lookup. With
    /// `negative`, a missing name is answered with a negative entry (nodeid 0) that the
    /// kernel caches for the timeout (libfuse's `negative_timeout` option; the
    /// `passthrough_ll` example answers `ENOENT`, which is not cached), so that repeated
    /// lookups of a missing name (a `$PATH` search, a build's probes) stay in the kernel;
    /// creating the name through the mount replaces the kernel's negative dentry.
    fn entry_reply(
        &self,
        req: &Request,
        parent: &Arc<Dentry>,
        name: &[u8],
        negative: bool,
        reply: ReplyEntry,
    ) {
        match self.with(req, |t, _| {
            let d = Self::lookup_one(t, parent, name)?;
            let attr = self.attr_of(t, &d)?;
            self.remember(&d);
            Ok(attr)
        }) {
            Ok(attr) => {
                reply.entry_with_ttls(&self.opts.timeout, &self.entry_ttl(), &attr, Generation(0))
            }
            Err(Errno::ENOENT) if negative && !self.entry_ttl().is_zero() => {
                let mut attr = file_attr(&Stat::default(), Timespec::default());
                attr.ino = INodeNo(0);
                reply.entry(&self.entry_ttl(), &attr, Generation(0));
            }
            Err(e) => reply.error(fe(e)),
        }
    }

    /// Runs a node-creating call `f(task, parent, name)` and answers with the new entry.
    fn create_entry(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        reply: ReplyEntry,
        f: impl FnOnce(&Task, &Arc<Dentry>, &[u8]) -> Result<()>,
    ) {
        let r = (|| {
            let p = self.node(parent)?;
            let name = component(name)?;
            self.with(req, |t, _| f(t, &p, name))?;
            Ok((p, name))
        })();
        match r {
            Ok((p, name)) => self.entry_reply(req, &p, name, false, reply),
            Err(e) => reply.error(fe(e)),
        }
    }

    /// Reads directory `fh` from cookie `offset`, calling `add(entry)` until it says the
    /// reply is full.
    fn read_dir(
        &self,
        req: &Request,
        fh: fuser::FileHandle,
        offset: u64,
        mut add: impl FnMut(&Task, crate::DirEntry) -> Result<bool>,
    ) -> Result<()> {
        let offset = i64::try_from(offset).map_err(|_| Errno::EINVAL)?;
        self.with_fh(req, fh, false, |t, fd, buf| {
            t.lseek(fd, offset, types::SEEK_SET)?;
            let dev = t.fstat(fd)?.st_dev;
            buf.resize(16 * 1024, 0);
            loop {
                let n = t.getdents64(fd, buf)?;
                if n == 0 {
                    return Ok(());
                }
                for mut e in parse_dirents(&buf[..n]) {
                    e.d_ino = self.ino_of(dev, e.d_ino);
                    if add(t, e)? {
                        return Ok(());
                    }
                }
            }
        })
    }
}

impl Filesystem for UvfsFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        use fuser::InitFlags as F;
        // readdirplus when the kernel finds it useful (first read, after lookups); not when
        // uvfs checks permissions: its entries would be looked up with the lister's
        // credentials, and a directory that may be read but not searched must still list.
        if self.opts.permissions == Permissions::Kernel {
            let _ = config.add_capabilities(F::FUSE_DO_READDIRPLUS | F::FUSE_READDIRPLUS_AUTO);
        } else {
            // uvfs drops set-ID bits itself on write, truncate and chown, with the writer's
            // rights (`kill_suid`); otherwise the kernel would send a SETATTR of the mode as
            // the writer, which uvfs refuses (EPERM) to a writer who does not own the file,
            // failing the write. (With kernel checks the server's all-caps SETATTR does it.)
            let _ = config.add_capabilities(F::FUSE_HANDLE_KILLPRIV);
        }
        // Each is optional: a kernel without one keeps its default behaviour.
        for cap in [
            // lookups and readdirs in one directory in parallel: uvfs's are lock-free.
            F::FUSE_PARALLEL_DIROPS,
            // open(O_TRUNC) in one request, as `openat` does it.
            F::FUSE_ATOMIC_O_TRUNC,
            // symlink targets never change: the kernel may cache them.
            F::FUSE_CACHE_SYMLINKS,
        ] {
            let _ = config.add_capabilities(cap);
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.node(parent).and_then(|p| Ok((p, component(name)?))) {
            Ok((p, name)) => self.entry_reply(req, &p, name, true, reply),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.forget_node(ino, nlookup);
    }

    fn getattr(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: Option<fuser::FileHandle>,
        reply: ReplyAttr,
    ) {
        let r = match fh {
            Some(fh) => self.with_fh(req, fh, false, |t, fd, _| {
                let st = t.fstat(fd)?;
                let btime = self.node(ino).map(|d| d.inode().btime());
                Ok(self.file_attr(&st, btime.unwrap_or(st.st_ctime)))
            }),
            None => self
                .node(ino)
                .and_then(|d| self.with(req, |t, _| self.attr_of(t, &d))),
        };
        match r {
            Ok(attr) => reply.attr(&self.opts.timeout, &attr),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<fuser::FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let r = self.node(ino).and_then(|d| {
            let empty = AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW;
            let size = size
                .map(|len| i64::try_from(len).map_err(|_| Errno::EFBIG))
                .transpose()?;
            // `notify_change`'s order: owner (which drops set-ID bits), mode, size, times.
            // A SETATTR with nothing to set (the kernel's for chown(-1, -1), but also for a
            // write's ATTR_FORCE-only privilege drop under FUSE_HANDLE_KILLPRIV) changes
            // nothing: turned into chown(-1, -1) it would drop set-ID bits as the writer
            // and fail (mount_lifecycle's uvfs_permission_mode_matches_tmpfs).
            let owner_and_mode = |t: &Task| -> Result<()> {
                if uid.is_some() || gid.is_some() {
                    let (u, g) = (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX));
                    t.fchownat(&*d, "", u, g, empty)?;
                }
                if let Some(m) = mode {
                    t.fchmodat(&*d, "", m & 0o7777, empty)?;
                }
                Ok(())
            };
            let times_and_attr = |t: &Task| -> Result<FileAttr> {
                if atime.is_some() || mtime.is_some() {
                    t.utimensat(&*d, "", Some(&[utime(atime), utime(mtime)]), empty)?;
                }
                self.attr_of(t, &d)
            };
            match (size, fh) {
                // ftruncate: on the handle's table (the kernel checked it is open for
                // writing).
                (Some(len), Some(fh)) => {
                    self.with(req, |t, _| owner_and_mode(t))?;
                    self.with_fh(req, fh, true, |t, fd, _| t.ftruncate(fd, len))?;
                    self.with(req, |t, _| times_and_attr(t))
                }
                // Everything else in one call (one credential setup).
                (size, _) => self.with(req, |t, _| {
                    owner_and_mode(t)?;
                    if let Some(len) = size {
                        t.truncate_at(AtDir::Dentry(&d), b"", len)?;
                    }
                    times_and_attr(t)
                }),
            }
        });
        match r {
            Ok(attr) => reply.attr(&self.opts.timeout, &attr),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let r = self.node(ino).and_then(|d| {
            self.with(req, |t, buf| {
                buf.resize(crate::namei::PATH_MAX + 1, 0);
                let n = t.readlinkat(&*d, "", buf)?;
                Ok(buf[..n].to_vec())
            })
        });
        match r {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.create_entry(req, parent, name, reply, |t, p, name| {
            t.mknodat(p, name, mode, u64::from(rdev))
        });
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        self.create_entry(req, parent, name, reply, |t, p, name| {
            t.mkdirat(p, name, mode)
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.node(parent).and_then(|p| {
            let name = component(name)?;
            self.with(req, |t, _| t.unlinkat(&*p, name, AtFlags::empty()))
        });
        empty(reply, r);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.node(parent).and_then(|p| {
            let name = component(name)?;
            self.with(req, |t, _| t.unlinkat(&*p, name, AtFlags::REMOVEDIR))
        });
        empty(reply, r);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        let target = target.as_os_str().as_bytes();
        self.create_entry(req, parent, link_name, reply, |t, p, name| {
            t.symlinkat(target, p, name)
        });
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        let r = (|| {
            let (p, np) = (self.node(parent)?, self.node(newparent)?);
            let (name, newname) = (component(name)?, component(newname)?);
            let flags = RenameFlags::from_bits(flags.bits()).ok_or(Errno::EINVAL)?;
            self.with(req, |t, _| t.renameat2(&*p, name, &*np, newname, flags))
        })();
        empty(reply, r);
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let (d, np) = (self.node(ino)?, self.node(newparent)?);
            let newname = component(newname)?;
            self.with(req, |t, _| {
                t.linkat(&*d, "", &*np, newname, AtFlags::EMPTY_PATH)
            })?;
            Ok((np, newname))
        })();
        match r {
            Ok((np, newname)) => self.entry_reply(req, &np, newname, false, reply),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: fuser::OpenFlags, reply: ReplyOpen) {
        let r = self.node(ino).and_then(|d| {
            self.with_opener(req, |t, opener| {
                let flags = OpenFlags::from_bits_retain(flags.0 as u32);
                if flags.bits() & FMODE_EXEC != 0 {
                    // execve's open: without `default_permissions` the kernel checked only
                    // that some execute bit is set (`fuse_permission`); uvfs checks MAY_EXEC
                    // alone for this caller, as `do_open_execat` does (a 0711 program runs).
                    return opener.open(t, || t.dentry_open_exec(&d));
                }
                opener.open(t, || {
                    let f = t.dentry_open(&d, flags)?;
                    if flags.contains(OpenFlags::TRUNC) {
                        self.kill_suid_after_open_trunc(req, &d)?;
                    }
                    Ok(f)
                })
            })
        });
        match r {
            Ok((table, fd)) => {
                reply.opened(
                    fh_make(table, fd),
                    fopen_flags(OpenFlags::from_bits_retain(flags.0 as u32)),
                );
            }
            Err(e) => reply.error(fe(e)),
        }
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        offset: u64,
        size: u32,
        _flags: fuser::OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        // The data is sent from the worker's buffer, inside the call.
        let mut reply = Some(reply);
        let r = self.with_fh(req, fh, false, |t, fd, buf| {
            let off = i64::try_from(offset).map_err(|_| Errno::EINVAL)?;
            buf.resize(size as usize, 0);
            let n = t.pread(fd, &mut buf[..size as usize], off)?;
            if let Some(reply) = reply.take() {
                reply.data(&buf[..n]);
            }
            Ok(())
        });
        if let (Err(e), Some(reply)) = (r, reply) {
            reply.error(fe(e));
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: fuser::WriteFlags,
        flags: fuser::OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        let r = self.with_fh(req, fh, true, |t, fd, _| {
            let off = i64::try_from(offset).map_err(|_| Errno::EFBIG)?;
            // The descriptor's flags as they are now (`fuse_write_flags`: the kernel sends
            // `f_flags` with every WRITE), not as they were at `open`: `fcntl(F_SETFL)`
            // may have set or cleared O_APPEND since, and only the kernel saw it. A
            // writeback of mapped pages (`FUSE_WRITE_CACHE`) goes where its offset says.
            let append = OpenFlags::from_bits_retain(flags.0 as u32).contains(OpenFlags::APPEND)
                && !write_flags.contains(fuser::WriteFlags::FUSE_WRITE_CACHE);
            // One descriptor lookup for the flag and the writes (`pwrite`'s own body).
            let f = t.fdget(fd)?;
            if f.flags().contains(OpenFlags::APPEND) != append {
                f.set_flags(f.flags() ^ OpenFlags::APPEND);
            }
            let (cred, fsize) = (t.cred(), t.getrlimit_fsize());
            let n = f.write_at_offset(data, off, cred, fsize)?;
            if n == data.len() || !write_flags.contains(fuser::WriteFlags::FUSE_WRITE_CACHE) {
                return Ok(n);
            }
            // A writeback of dirty pages (mmap stores): the kernel looks only at the error
            // of the reply, never at a short count (fs/fuse/file.c `fuse_writepage_end`),
            // so the pages past `n` would be dropped unreported. Write on: the rest is
            // stored, or the reply is its error (ENOSPC past `--size`), which the kernel
            // records for `msync`, `fsync` and `close` to return.
            let mut done = n;
            while done < data.len() {
                let at = off + done as i64;
                match f.write_at_offset(&data[done..], at, cred, fsize)? {
                    0 => return Err(Errno::EIO),
                    k => done += k,
                }
            }
            Ok(done)
        });
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: fuser::FileHandle,
        _lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        // Only `O_RDWR` handles get here (`fopen_flags`), after the kernel has written their
        // file's dirty pages back and checked for errors itself (`fuse_flush`). tmpfs has
        // nothing more to do at close (`shmem` has no `flush`): ENOSYS makes the kernel send
        // no FLUSH again, on any handle (`fc->no_flush`), and close returns 0 for it.
        reply.error(fe(Errno::ENOSYS));
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        _flags: fuser::OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let (table, fd) = fh_split(fh);
        let r = self.worker(|w| {
            let t = Worker::table_task(&mut w.tasks, &self.handles, table)?;
            self.handles.close(t, w.own, fd)
        });
        empty(reply, r);
    }

    fn fsync(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.with_fh(req, fh, false, |t, fd, _| {
            if datasync {
                t.fdatasync(fd)
            } else {
                t.fsync(fd)
            }
        });
        empty(reply, r);
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: fuser::OpenFlags, reply: ReplyOpen) {
        self.open(
            req,
            ino,
            fuser::OpenFlags(flags.0 | OpenFlags::DIRECTORY.bits() as i32),
            reply,
        );
    }

    fn readdir(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let r = self.read_dir(req, fh, offset, |_, e| {
            Ok(reply.add(
                INodeNo(e.d_ino),
                e.d_off as u64,
                file_type(u32::from(e.d_type) << 12),
                OsStr::from_bytes(&e.name),
            ))
        });
        empty(reply, r);
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: fuser::FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let mut added = 0;
        let r = self.node(ino).and_then(|dir| {
            self.read_dir(req, fh, offset, |t, e| {
                let dot = e.name == b"." || e.name == b"..";
                // `.` and `..` carry no entry: the kernel neither links nor counts them
                // (`fuse_direntplus_link` skips them by name; fuser sends `attr.ino` as the
                // node id whatever `ino` says).
                let (nodeid, attr, d) = if dot {
                    let st = t.fstatat(&*dir, &e.name, AtFlags::SYMLINK_NOFOLLOW)?;
                    (0, self.file_attr(&st, st.st_ctime), None)
                } else {
                    match Self::lookup_one(t, &dir, &e.name) {
                        Ok(d) => (self.node_id(&d), self.attr_of(t, &d)?, Some(d)),
                        // Removed since getdents listed it: skip it.
                        Err(Errno::ENOENT) => return Ok(false),
                        Err(err) => return Err(err),
                    }
                };
                let full = reply.add(
                    INodeNo(nodeid),
                    e.d_off as u64,
                    OsStr::from_bytes(&e.name),
                    &self.opts.timeout,
                    &attr,
                    Generation(0),
                );
                if !full {
                    added += 1;
                    if let Some(d) = d {
                        self.remember(&d);
                    }
                }
                Ok(full)
            })
        });
        // An error after some entries were added: send those (they are counted, and the
        // kernel asks again from the last one's offset), as `readdir(3)` returns what it has.
        empty(reply, if added > 0 { Ok(()) } else { r });
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: fuser::FileHandle,
        flags: fuser::OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.release(req, ino, fh, flags, None, false, reply);
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: fuser::FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync(req, ino, fh, datasync, reply);
    }

    fn statfs(&self, req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.with(req, |t, _| t.statfs("/")) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namelen as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        // `position` is macOS's resource-fork offset; Linux always sends 0.
        let r = if position != 0 {
            Err(Errno::EINVAL)
        } else {
            self.node(ino).and_then(|d| {
                self.with(req, |t, _| {
                    t.setxattrat(&*d, "", XATTR_AT, name.as_bytes(), value, flags as u32)
                })
            })
        };
        empty(reply, r);
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        // The value is sent from the worker's buffer, inside the call.
        let mut reply = Some(reply);
        let r = self.node(ino).and_then(|d| {
            self.with(req, |t, buf| {
                // The kernel caps `size` at XATTR_SIZE_MAX (fs/xattr.c `do_getxattr`).
                buf.resize((size as usize).min(crate::xattr::XATTR_SIZE_MAX), 0);
                let n = t.getxattrat(&*d, "", XATTR_AT, name.as_bytes(), buf)?;
                if let Some(reply) = reply.take() {
                    xattr_reply(reply, size, &buf[..n.min(buf.len())], n);
                }
                Ok(())
            })
        });
        if let (Err(e), Some(reply)) = (r, reply) {
            reply.error(fe(e));
        }
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let mut reply = Some(reply);
        let r = self.node(ino).and_then(|d| {
            self.worker(|w| {
                self.set_caller(&mut w.base, req);
                if self.opts.permissions == Permissions::Kernel {
                    // The kernel leaves the list as the server sends it (fs/fuse/xattr.c
                    // `fuse_listxattr`), and `trusted.*` names are for CAP_SYS_ADMIN only
                    // (`simple_xattr_list`): list with the caller's own rights, not the
                    // capabilities kernel-checked requests otherwise run with.
                    let c = w.base.cred();
                    let own = Cred::new(c.uid, c.gid, &[]);
                    w.base.override_creds(own);
                }
                let buf = &mut w.buf;
                buf.resize((size as usize).min(crate::xattr::XATTR_LIST_MAX), 0);
                let n = w.base.listxattrat(&*d, "", XATTR_AT, buf)?;
                if let Some(reply) = reply.take() {
                    xattr_reply(reply, size, &buf[..n.min(buf.len())], n);
                }
                Ok(())
            })
        });
        if let (Err(e), Some(reply)) = (r, reply) {
            reply.error(fe(e));
        }
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.node(ino).and_then(|d| {
            self.with(req, |t, _| {
                t.removexattrat(&*d, "", XATTR_AT, name.as_bytes())
            })
        });
        empty(reply, r);
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // The kernel sends the caller's real ids for access(2) (`access_override_creds`
        // ran before `fuse_access`): check with them as the effective ones.
        let r = self.node(ino).and_then(|d| {
            self.with(req, |t, _| {
                t.faccessat2(
                    &*d,
                    "",
                    mask.bits() as u32,
                    AtFlags::EACCESS | AtFlags::EMPTY_PATH,
                )
            })
        });
        empty(reply, r);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = (|| {
            let p = self.node(parent)?;
            let name = component(name)?;
            self.with_opener(req, |t, opener| {
                let flags = OpenFlags::from_bits_retain(flags as u32);
                // The kernel sends CREATE only for a name it believes missing, and then skips
                // its own permission check of the open (`may_open` of a new file). If the
                // name exists after all (made behind the kernel's back, through the Rust API
                // of an embedding program), opening it here would bypass that check: create
                // exclusively, and answer ESTALE, which makes the VFS look the name up again
                // and open the existing file the checked way (`do_filp_open`'s
                // LOOKUP_REVAL retry). A caller's own O_EXCL gets its EEXIST.
                let excl = OpenFlags::CREAT | OpenFlags::EXCL;
                let mut dentry = None;
                let fd = opener.open(t, || {
                    let f = match t.filp_open(&*p, name, flags | excl, mode) {
                        Err(Errno::EEXIST) if !flags.contains(OpenFlags::EXCL) => {
                            return Err(Errno::ESTALE)
                        }
                        r => r?,
                    };
                    dentry = Some(f.dentry().clone());
                    Ok(f)
                })?;
                let d = dentry.ok_or(Errno::EIO)?;
                match self.attr_of(t, &d) {
                    Ok(attr) => {
                        self.remember(&d);
                        Ok((fd, attr))
                    }
                    Err(e) => {
                        let _ = opener.close(t, fd);
                        Err(e)
                    }
                }
            })
        })();
        match r {
            Ok((table, (fd, attr))) => {
                reply.created(
                    &self.entry_ttl(),
                    &attr,
                    Generation(0),
                    fh_make(table, fd),
                    fopen_flags(OpenFlags::from_bits_retain(flags as u32)),
                );
            }
            Err(e) => reply.error(fe(e)),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let r = self.with_fh(req, fh, true, |t, fd, _| {
            let off = i64::try_from(offset).map_err(|_| Errno::EFBIG)?;
            let len = i64::try_from(length).map_err(|_| Errno::EFBIG)?;
            t.fallocate(fd, mode, off, len)
        });
        empty(reply, r);
    }

    fn lseek(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        match self.with_fh(req, fh, false, |t, fd, _| t.lseek(fd, offset, whence)) {
            Ok(off) => reply.offset(off),
            Err(e) => reply.error(fe(e)),
        }
    }
}

// Each shard's lock sits alone on its cache line(s): two requests on inodes of different
// shards write no common line.
const _: () =
    assert!(std::mem::align_of::<CacheLine<NodeShard>>() >= crate::sync::padded::CACHE_LINE);
const _: () = assert!(
    std::mem::size_of::<CacheLine<NodeShard>>().is_multiple_of(crate::sync::padded::CACHE_LINE)
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_before_and_after_1970() {
        for (sec, nsec) in [
            (0, 0),
            (1, 5),
            (1_700_000_000, 999_999_999),
            (-1, 0),
            (-1, 1),
            (-2, 500_000_000),
            (i64::MIN, 0),
        ] {
            let t = Timespec {
                tv_sec: sec,
                tv_nsec: nsec,
            };
            assert_eq!(timespec(system_time(t)), t, "{sec}.{nsec}");
        }
        // -0.5 s is (-1 s, 500000000 ns), as the kernel normalises it.
        let half = UNIX_EPOCH - Duration::from_millis(500);
        assert_eq!(
            timespec(half),
            Timespec {
                tv_sec: -1,
                tv_nsec: 500_000_000
            }
        );
    }

    #[test]
    fn setattr_times_map_to_utimensat() {
        assert_eq!(utime(None).tv_nsec, Timespec::UTIME_OMIT_NSEC);
        assert_eq!(
            utime(Some(TimeOrNow::Now)).tv_nsec,
            Timespec::UTIME_NOW_NSEC
        );
        let t = UNIX_EPOCH + Duration::new(7, 8);
        assert_eq!(
            utime(Some(TimeOrNow::SpecificTime(t))),
            Timespec {
                tv_sec: 7,
                tv_nsec: 8
            }
        );
        // fuser 0.18's decoding of (secs, nsec) before 1970: EPOCH - (|secs| s + nsec ns).
        let fuser_decode =
            |secs: i64, nsec: u32| UNIX_EPOCH - Duration::new(secs.unsigned_abs(), nsec);
        for (secs, nsec) in [
            (-1, 250_000_000),
            (-1, 0),
            (-86_400, 999_999_999),
            (i64::MIN, 0),
        ] {
            let want = Timespec {
                tv_sec: secs,
                tv_nsec: i64::from(nsec),
            };
            let got = utime(Some(TimeOrNow::SpecificTime(fuser_decode(secs, nsec))));
            assert_eq!(got, want, "{secs}.{nsec}");
        }
    }

    #[test]
    fn names_are_single_components() {
        assert_eq!(component(OsStr::new("a")), Ok(&b"a"[..]));
        assert_eq!(component(OsStr::new("..")), Ok(&b".."[..]));
        assert_eq!(component(OsStr::new("")), Err(Errno::EINVAL));
        assert_eq!(component(OsStr::new("a/b")), Err(Errno::EINVAL));
        assert_eq!(component(OsStr::new("/")), Err(Errno::EINVAL));
    }

    #[test]
    fn file_handles_name_table_and_descriptor() {
        assert_eq!(fh_split(fuser::FileHandle(3 << 32 | 17)), (3, Fd(17)));
        // A forged handle: a table that does not exist is refused by `table_task` (EBADF), a
        // descriptor past i32 stays invalid (negative) for `fget`.
        assert_eq!(
            fh_split(fuser::FileHandle(u64::MAX)),
            (u32::MAX as usize, Fd(-1))
        );
    }

    #[test]
    fn attributes_carry_type_permissions_and_times() {
        let st = Stat {
            st_ino: 5,
            st_mode: types::S_IFLNK | 0o777,
            st_nlink: 1,
            st_size: 3,
            st_blocks: 0,
            st_blksize: 4096,
            st_mtime: Timespec {
                tv_sec: -3,
                tv_nsec: 1,
            },
            ..Default::default()
        };
        let a = file_attr(
            &st,
            Timespec {
                tv_sec: 9,
                tv_nsec: 0,
            },
        );
        assert_eq!(
            (a.ino, a.kind, a.perm, a.size, a.nlink),
            (INodeNo(5), FileType::Symlink, 0o777, 3, 1)
        );
        assert_eq!(timespec(a.mtime), st.st_mtime);
        assert_eq!(
            timespec(a.crtime),
            Timespec {
                tv_sec: 9,
                tv_nsec: 0
            }
        );
        for (ty, kind) in [
            (types::S_IFDIR, FileType::Directory),
            (types::S_IFREG, FileType::RegularFile),
            (types::S_IFIFO, FileType::NamedPipe),
            (types::S_IFSOCK, FileType::Socket),
            (types::S_IFCHR, FileType::CharDevice),
            (types::S_IFBLK, FileType::BlockDevice),
        ] {
            assert_eq!(file_type(ty | 0o644), kind);
        }
    }

    /// The server's operations without a kernel: lookup counts, forget, and a forged node.
    #[test]
    fn lookup_counts_and_forget() {
        let mnt = crate::tmpfs::mount(Default::default());
        let fs = UvfsFuse::new(&mnt, FuseOptions::default());
        let t = Task::init(&mnt);
        t.mkdirat(Fd::AT_FDCWD, "/d", 0o755).unwrap();
        let d = UvfsFuse::lookup_one(&t, mnt.root(), b"d").unwrap();
        let ino = INodeNo(d.inode().ino());
        assert!(
            matches!(fs.node(ino), Err(Errno::ESTALE)),
            "unknown until handed out"
        );
        fs.remember(&d);
        fs.remember(&d);
        assert!(Arc::ptr_eq(&fs.node(ino).unwrap(), &d));
        fs.forget_node(ino, 1);
        assert!(fs.node(ino).is_ok(), "one lookup left");
        fs.forget_node(ino, 1);
        assert!(
            matches!(fs.node(ino), Err(Errno::ESTALE)),
            "forgotten at zero"
        );
        // The root is always known and never counted.
        fs.remember(mnt.root());
        assert!(Arc::ptr_eq(&fs.node(INodeNo(1)).unwrap(), mnt.root()));
    }
}
