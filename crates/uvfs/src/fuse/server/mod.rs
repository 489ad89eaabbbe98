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
//! # Two front ends, one set of operations
//! Each request is one wire-neutral operation (`ops.rs`: `op_lookup`, `op_write`, ...,
//! arguments as plain values, results as the `fuse/abi` reply structs shared with the FUSE
//! client), reached two ways:
//! - `fuser_fs.rs`: [`fuser::Filesystem`] callbacks, for fuser's `Session` (how
//!   `uvfs mount` serves `/dev/fuse` when not root: its mounting through `fusermount3`,
//!   its cloned-descriptor worker threads and session end stay fuser's);
//! - `dispatch.rs`: [`UvfsFuse::dispatch`], uvfs's own decoder of a request's bytes into
//!   the reply's bytes, for what fuser does not do: `FUSE_INTERRUPT` (`dev.rs`,
//!   [`serve_dev`]: INIT and `/dev/fuse` read by uvfs's reader threads, the classic
//!   transport as root) and FUSE over io_uring (`ring.rs`, [`serve_uring`]: one ring per
//!   CPU whose entries `uring.rs` serves in place).
//!
//! Neither front end does more than decode and encode, so the two cannot answer a request
//! differently (interrupts apart, which fuser answers `ENOSYS`). The session's lifecycle
//! (unmount races, aborted connections: `uvfs-cli/src/mount.rs`) is the caller's for
//! [`serve_dev`] as for [`serve_uring`]: both end at `ENODEV` or `ECONNABORTED`, as fuser's
//! session does.
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
//! A request can block: a FUSE client mount inside the namespace (`uvfs mount --fuse`)
//! waits for its server's reply, and a hung or slow inner server would hold the caller on
//! the outer mount in `request_wait_answer` for good (fs/fuse/dev.c: once a request was
//! read, even SIGKILL waits for its answer). So `FUSE_INTERRUPT` is honoured, as libfuse
//! does (lib/fuse_lowlevel.c `do_interrupt`), without its session lock on every request:
//! each worker publishes the unique it serves in a slot on its own cache line and
//! withdraws it after (`fuse/serve_intr.rs`, loom-checked); the thread that reads an
//! interrupt finds the worker and interrupts its FUSE client
//! [`Interrupter`](crate::fuse::client::Interrupter), whose request to the inner server
//! then gets a `FUSE_INTERRUPT` of its own and ends with that server's answer (`EINTR` if
//! it gave the request up), which the worker returns. An interrupt read before the worker
//! published its request waits for it; one read after the request finished is dropped.
//! The server never answers an interrupt. A request that does not block is not affected
//! (what the interrupt left on the interrupter is cancelled when the request ends).
//!
//! Which transports: uvfs's own `/dev/fuse` loop ([`serve_dev`], `uvfs mount` as root) and
//! the io_uring transport (the interrupt comes on `/dev/fuse`, the request is served on a
//! ring: the same slots). A ring worker holds up to `RING_DEPTH` (`ring.rs`)
//! requests the kernel already counts as sent and serves them one after another, so an
//! interrupt of a request waiting behind one that blocks stays pending until the worker
//! starts it (its slot is a batch reader's: `fuse/serve_intr.rs`, "Batches"), and that
//! request starts interrupted; meanwhile every request takes the interrupt bookkeeping's
//! cold path. fuser's session (`uvfs mount` without root, mounted through
//! `fusermount3`) answers `FUSE_INTERRUPT` with `ENOSYS` itself (fuser 0.18
//! `request.rs`), after which the kernel sends no more (`fc->no_interrupt`): there a
//! request blocked in an inner server cannot be interrupted. [`serve_dev`] reads with
//! [`FuseOptions::threads`] readers: while all of them block (`--threads 1`: while its one
//! request blocks), interrupts are not read either.
//!
//! Lock order: a node shard lock is a leaf (never held across a call into uvfs); the
//! handle registry's lock (`handles.rs`) is taken only at a worker's first use of a table
//! or a new table, before that table's `file_lock`; the interrupt bookkeeping's locks
//! (`fuse/serve_intr.rs`) are taken only by interrupts and, while one is pending, by
//! requests before and after they call into uvfs, never around a call.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use super::abi;
use super::client::Interrupter;
use super::handles::{default_max_handles, Handles, Opener};
use super::serve_intr::{IntrSlots, ServeSlot};
use crate::cred::{Caps, Cred};
use crate::dentry::Dentry;
use crate::errno::{Errno, Result};
use crate::mount::Mount;
use crate::namei::AtDir;
use crate::sync::padded::CacheLine;
use crate::task::Task;
use crate::types::{self, AtFlags, Fd, OpenFlags, Stat};

mod dev;
mod dispatch;
mod fuser_fs;
mod ops;
mod ring;
mod uring;

pub use dev::{serve_dev, DevStats};
pub use ring::{
    serve_uring, uring_enabled, AbortConn, RingsUp, UringStats, MAX_RETRIES, RING_DEPTH,
};
pub use uring::{UringScratch, URING_HEADER_SIZE};

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
fn fopen_flags(flags: OpenFlags) -> u32 {
    if flags & OpenFlags::ACCMODE == OpenFlags::RDWR {
        0
    } else {
        abi::fopen::FOPEN_NOFLUSH
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
    /// Take `FUSE_OVER_IO_URING` in INIT when the kernel offers it: the connection is to be
    /// served by [`serve_uring`], whose rings the kernel then waits for (requests block
    /// until every queue is registered, or a registration fails). Off for fuser's session,
    /// which has no rings. Default `false`.
    pub over_io_uring: bool,
}

impl Default for FuseOptions {
    fn default() -> Self {
        FuseOptions {
            threads: 1,
            permissions: Permissions::Kernel,
            timeout: Duration::from_secs(1),
            max_handles_per_user: None,
            max_handles: default_max_handles(),
            over_io_uring: false,
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
    /// Caller uid -> the table this worker opens that caller's files into.
    own_tables: HashMap<u32, usize>,
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
    /// The calling worker's interrupt slot (`fuse/serve_intr.rs`) and the server it is
    /// registered with, made at its first request that can block (a thread that serves only
    /// INIT, FORGET and INTERRUPT has none). Apart from `WORKER`, so that a request reaches
    /// it with one thread-local access and holds no borrow of `WORKER` while it runs.
    static INTR: RefCell<WorkerSlot> = const { RefCell::new(None) };
}

/// A worker's interrupt slot as `INTR` keeps it: the id of the server it is registered
/// with, and the slot.
type WorkerSlot = Option<(u64, Arc<CacheLine<ServeSlot<Interrupter>>>)>;

/// A ring worker's interrupt slot ([`UvfsFuse::register_intr_batched`]): retired when
/// dropped (the worker reads no more).
struct BatchReader<'a> {
    fs: &'a UvfsFuse,
    slot: Arc<CacheLine<ServeSlot<Interrupter>>>,
}

impl BatchReader<'_> {
    /// The worker is about to read: see [`IntrSlots::next_batch`].
    #[inline]
    fn next_batch(&self) {
        self.fs.intr.next_batch(&self.slot);
    }
}

impl Drop for BatchReader<'_> {
    fn drop(&mut self) {
        self.fs.intr.retire(&self.slot);
    }
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
    /// The workers' interrupt slots and the interrupts not yet matched to a request.
    intr: IntrSlots<Interrupter>,
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
    /// INIT settled `FUSE_HANDLE_KILLPRIV_V2`: the client leaves set-ID drops at
    /// truncation, `fallocate` and the empty SETATTR of a privilege drop to uvfs (a
    /// client without it, uvfs's own, computes them itself and sends the mode).
    killpriv_v2: AtomicBool,
}

impl fmt::Debug for UvfsFuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UvfsFuse")
            .field("handles", &self.handles.open_count())
            .field("opts", &self.opts)
            .finish()
    }
}

/// A name from a request: one path component (the kernel never sends a `/` or an empty
/// name; a message that does is refused).
///
/// # Errors
/// `EINVAL` for an empty name or one containing `/`.
fn component(b: &[u8]) -> Result<&[u8]> {
    if b.is_empty() || b.contains(&b'/') {
        return Err(Errno::EINVAL);
    }
    Ok(b)
}

/// The attributes of `st` as FUSE sends them (`struct fuse_attr`; Linux's has no birth
/// time). Times before 1970 keep their normalised form (seconds negative, nanoseconds
/// 0..1e9), as the kernel's `fuse_fillattr` reads them back.
fn wire_attr(st: &Stat) -> abi::Attr {
    abi::Attr {
        ino: st.st_ino,
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: st.st_atime.tv_sec as u64,
        mtime: st.st_mtime.tv_sec as u64,
        ctime: st.st_ctime.tv_sec as u64,
        atimensec: st.st_atime.tv_nsec.clamp(0, 999_999_999) as u32,
        mtimensec: st.st_mtime.tv_nsec.clamp(0, 999_999_999) as u32,
        ctimensec: st.st_ctime.tv_nsec.clamp(0, 999_999_999) as u32,
        mode: st.st_mode,
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

/// A validity period as `fuse_entry_out`/`fuse_attr_out` carry it: seconds, nanoseconds.
fn valid(d: Duration) -> (u64, u32) {
    (d.as_secs(), d.subsec_nanos())
}

/// How the xattr requests name their node: the dentry itself, a symlink not followed.
const XATTR_AT: AtFlags = AtFlags::EMPTY_PATH.union(AtFlags::SYMLINK_NOFOLLOW);

/// What a `GETXATTR`/`LISTXATTR` answers: the length alone when the kernel asked for it
/// (`size` 0), else the bytes.
#[derive(Debug)]
enum Xattr<'a> {
    /// The value's or list's length (a size query).
    Size(u32),
    /// The value or list.
    Data(&'a [u8]),
}

/// The answer to a `GETXATTR`/`LISTXATTR` of `size` bytes whose value is `len` bytes long,
/// `data` the bytes read (empty for a size query).
fn xattr_answer(size: u32, data: &[u8], len: usize) -> Xattr<'_> {
    if size == 0 {
        // A value or list is at most 64 KiB (XATTR_SIZE_MAX, XATTR_LIST_MAX).
        Xattr::Size(u32::try_from(len).unwrap_or(u32::MAX))
    } else {
        Xattr::Data(data)
    }
}

/// The file handle of descriptor `fd` in table `table`.
fn fh_make(table: usize, fd: Fd) -> u64 {
    (table as u64) << 32 | u64::from(fd.0 as u32)
}

/// A file handle: the table it lives in and its descriptor there.
fn fh_split(fh: u64) -> (usize, Fd) {
    ((fh >> 32) as usize, Fd(fh as u32 as i32))
}

/// Who sent a request: `fuse_in_header`'s `uid`, `gid` and `pid` (the caller's fsuid and
/// fsgid, and its thread id in the server's PID namespace, 0 outside it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Caller {
    uid: u32,
    gid: u32,
    pid: u32,
}

/// Whether `inode` is a regular file with a set-ID bit: the only files whose set-ID drops
/// the server makes itself.
fn setid_reg(inode: &crate::Inode) -> bool {
    inode.is_reg() && inode.mode() & (types::S_ISUID | types::S_ISGID) != 0
}

/// `c`'s credentials as Linux checks a set-ID drop against them: its uid, gid and
/// supplementary groups (read from `/proc`), with uvfs's capabilities for its uid.
fn caller_cred(c: &Caller) -> Cred {
    Cred::new(c.uid, c.gid, &proc_groups(c.pid))
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
            intr: IntrSlots::default(),
            opts: FuseOptions { threads, ..opts },
            root_dev: mnt.mnt_sb.s_dev,
            devs: crate::sync::RwLock::new(Vec::new()),
            killpriv_v2: AtomicBool::new(false),
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
    fn node(&self, ino: u64) -> Result<NodeRef<'_>> {
        if ino == abi::FUSE_ROOT_ID {
            return Ok(NodeRef::Root(self.mnt.root()));
        }
        self.shard(ino)
            .read()
            .get(&ino)
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
    fn file_attr(&self, st: &Stat) -> abi::Attr {
        let mut a = wire_attr(st);
        a.ino = self.ino_of(st.st_dev, st.st_ino);
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
    fn forget_node(&self, ino: u64, nlookup: u64) {
        let mut s = self.shard(ino).write();
        if let Some(n) = s.get_mut(&ino) {
            n.nlookup = n.nlookup.saturating_sub(nlookup);
            if n.nlookup == 0 {
                s.remove(&ino);
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

    /// Runs request `unique` (`f`) with it published in the calling worker's interrupt slot
    /// (registered now if it has none), so that a `FUSE_INTERRUPT` for it reaches the
    /// worker's [`Interrupter`]: a FUSE request of a FUSE client mount inside the namespace
    /// that the worker waits for then ends (`EINTR` if that server gives it up). Not for
    /// `INIT` and `DESTROY`: they cannot block, and INIT may come on a thread that serves
    /// nothing else (a slot that stays idle holds up the sweep of stale interrupts,
    /// `fuse/serve_intr.rs`).
    fn interruptible<R>(&self, unique: u64, f: impl FnOnce() -> R) -> R {
        INTR.with(|cell| {
            if !matches!(&*cell.borrow(), Some((id, _)) if *id == self.id) {
                self.register_intr(cell);
            }
            // A shared borrow for the request's time: nothing in it takes `INTR` mutably
            // (a request does not serve another on the same thread).
            let b = cell.borrow();
            let Some((_, slot)) = &*b else {
                unreachable!("registered above")
            };
            self.intr.publish(slot, unique);
            let r = f();
            self.intr.withdraw(slot, unique);
            r
        })
    }

    /// Registers the calling thread's interrupt slot with this server (its first request
    /// that can block; a thread that served another server before gets a new slot).
    #[cold]
    fn register_intr(&self, cell: &RefCell<WorkerSlot>) {
        let i = Interrupter::current();
        i.keep_pending();
        *cell.borrow_mut() = Some((self.id, self.intr.register(i)));
    }

    /// Registers the calling thread's interrupt slot with this server as a batch reader's
    /// (a ring worker, `ring.rs`: what one `io_uring_enter` fetched into its entries is
    /// served one request after another), before its first read; it then calls
    /// [`IntrSlots::next_batch`] before each read (`intr_next_batch`) and
    /// [`IntrSlots::retire`] when it ends (the returned guard's drop).
    #[cold]
    fn register_intr_batched(&self) -> BatchReader<'_> {
        let i = Interrupter::current();
        i.keep_pending();
        let slot = self.intr.register_batched(i);
        INTR.with(|cell| *cell.borrow_mut() = Some((self.id, slot.clone())));
        BatchReader { fs: self, slot }
    }

    /// A `FUSE_INTERRUPT` for request `unique`: the worker serving it is interrupted, or the
    /// interrupt waits for the worker that read it (`fuse/serve_intr.rs`). Never answered.
    fn op_interrupt(&self, unique: u64) {
        self.intr.interrupt(unique);
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

    /// Runs `f` as `c` with the calling thread's task for requests that open
    /// nothing, and the thread's buffer.
    ///
    /// # Errors
    /// `f`'s.
    fn with<R>(&self, c: &Caller, f: impl FnOnce(&Task, &mut Vec<u8>) -> Result<R>) -> Result<R> {
        self.worker(|w| {
            self.set_caller(&mut w.base, c);
            f(&w.base, &mut w.buf)
        })
    }

    /// Runs `f` as `c` on the table the calling worker opens that caller's files
    /// into (made now if there is none), with an [`Opener`] for it; returns the table's
    /// number (for [`fh_make`]) and `f`'s result.
    ///
    /// # Errors
    /// `ENFILE` if a new table would pass [`FuseOptions::max_handles`]; `f`'s.
    fn with_opener<R>(
        &self,
        c: &Caller,
        f: impl FnOnce(&Task, &mut Opener<'_>) -> Result<R>,
    ) -> Result<(usize, R)> {
        self.worker(|w| {
            let uid = c.uid;
            let n = match w.own_tables.entry(uid) {
                std::collections::hash_map::Entry::Occupied(e) => *e.get(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    *v.insert(self.handles.table(w.own, uid)?)
                }
            };
            let task = Worker::table_task(&mut w.tasks, &self.handles, n)?;
            self.set_caller(task, c);
            let mut opener = Opener {
                handles: &self.handles,
                worker: w.own,
                uid,
                table: n,
            };
            Ok((n, f(task, &mut opener)?))
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
        c: &Caller,
        fh: u64,
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
                    self.set_caller(task, c);
                }
            }
            f(task, fd, buf)
        })
    }

    /// Gives `task` the credentials of `c` (unchanged ones are not rebuilt).
    fn set_caller(&self, task: &mut Task, c: &Caller) {
        let (uid, gid) = (c.uid, c.gid);
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
                    proc_groups(c.pid)
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

    /// With kernel checks, drops the set-ID bits of regular file `inode` that `c` is
    /// writing, truncating (`open(O_TRUNC)`, SETATTR of the size) or allocating in, as
    /// Linux's `file_remove_privs` and `do_truncate` do for a caller without `CAP_FSETID`
    /// (`setattr_should_drop_suidgid`). The kernel knows, but under
    /// `FUSE_HANDLE_KILLPRIV_V2` it leaves the drop to the server (`fuse_setattr` sends
    /// no mode; with `FUSE_ATOMIC_O_TRUNC` no SETATTR follows an `O_TRUNC` OPEN at all),
    /// and the flags that would tell (`FUSE_OPEN_KILL_SUIDGID`, `FATTR_KILL_SUIDGID`) are
    /// not passed on by fuser 0.18; the request runs with all capabilities, which keep
    /// the bits. So the caller's own credentials decide here: its uid, gid and
    /// supplementary groups (read from `/proc` only when the file has a set-ID bit);
    /// root holds `CAP_FSETID`, as everywhere in uvfs. With uvfs checking, the request
    /// itself runs with those credentials and drops the bits already.
    ///
    /// # Errors
    /// The file system's, from changing the mode (the request then fails, as Linux's when
    /// its `notify_change` does).
    fn kill_suid_as_caller(&self, c: &Caller, inode: &crate::Inode) -> Result<()> {
        self.kill_suid_as_caller_if(true, c, inode)
    }

    /// A WRITE flagged `FUSE_WRITE_KILL_SUIDGID`: the kernel found that writer `c` lacks
    /// `CAP_FSETID` (`fuse_perform_write`, `fuse_direct_io` under
    /// `FUSE_HANDLE_KILLPRIV_V2`), so the set-ID bits of regular file `inode` go by the
    /// rule for such a caller (`setattr_should_drop_suidgid`: set-user-ID always,
    /// set-group-ID when group-executable or `c` is outside the file's group), whatever
    /// its uid and in both permission modes: the flag, not the uid, says whether the
    /// caller holds the capability. Root without it (`setpriv --bounding-set=-fsetid`, a
    /// container's root) writing a set-group-ID file of a group it is not in, without
    /// group execute, kept the bit here (its empty SETATTR before the write runs as a
    /// chown(-1, -1) by root, which keeps such a bit) where a kernel tmpfs drops it
    /// (measured: 2664 -> 664). Groups are read from `/proc` only when the file has a
    /// set-ID bit.
    ///
    /// # Errors
    /// The file system's, from changing the mode.
    fn kill_suid_flagged_write(&self, c: &Caller, inode: &crate::Inode) -> Result<()> {
        if !setid_reg(inode) {
            return Ok(());
        }
        inode.kill_suid(
            &caller_cred(c).with_caps(Caps(0)),
            crate::time::coarse_now(),
        )
    }

    /// [`kill_suid_as_caller`](Self::kill_suid_as_caller), unless `all`, only under
    /// `FUSE_HANDLE_KILLPRIV_V2` (see `killpriv_v2`).
    fn kill_suid_as_caller_if(&self, all: bool, c: &Caller, inode: &crate::Inode) -> Result<()> {
        if !all && !self.killpriv_v2() {
            return Ok(());
        }
        let kernel = self.opts.permissions == Permissions::Kernel;
        if !kernel || !setid_reg(inode) || c.uid == 0 {
            return Ok(());
        }
        inode.kill_suid(&caller_cred(c), crate::time::coarse_now())
    }

    /// An empty SETATTR from `c` (not root) on set-ID regular file `inode`: the
    /// privilege drop before a write or `fallocate` (`__remove_privs`) or a chown(-1, -1),
    /// which drop the same bits by the caller's rule (`setattr_should_drop_suidgid`,
    /// `chown_common`), as the caller. The request does not say which call sent it, but a
    /// write's or `fallocate`'s comes with the file open for writing (the writer's
    /// descriptor, whose handle the server holds until RELEASE): on a file nobody has open
    /// for writing it is a chown(-1, -1), which Linux refuses with `EPERM` to anyone but
    /// the owner (or `CAP_FOWNER`) when the drop would clear a bit (`notify_change` turns
    /// the drop into a mode change, which `setattr_prepare` checks; measured on a kernel
    /// tmpfs with uid 65534 on root-owned files of modes 4644, 2644, 2654 and 4666, the
    /// last one it may write; 0644, and 2644 of the caller's own group, where the drop
    /// clears nothing, are allowed): so it is here, and nothing changes. A write's drop
    /// is never refused (`__remove_privs` passes `ATTR_FORCE`), even for a writer whose
    /// write permission went after its open (measured on a kernel tmpfs: 6777 -> 6755
    /// after the open, the write succeeds, 755). Left ambiguous: a non-owner's
    /// chown(-1, -1) of a file that someone has open for writing drops the bits and
    /// succeeds here, where Linux refuses it.
    ///
    /// # Errors
    /// `EPERM` as above; the file system's, from changing the mode.
    fn kill_suid_empty_setattr(&self, c: &Caller, inode: &crate::Inode) -> Result<()> {
        let caller = caller_cred(c);
        // When the caller's drop would clear nothing (a set-group-ID file without group
        // execute, the caller in its group) Linux's chown(-1, -1) changes no mode and is
        // allowed to anyone.
        let drops = inode.drops_setid(inode.mode(), &caller);
        if drops && inode.uid() != c.uid && !inode.is_open_for_write() {
            // CAP_FOWNER: uvfs's credentials hold it for uid 0 only, and root's empty
            // SETATTR does not come here.
            return Err(Errno::EPERM);
        }
        inode.kill_suid(&caller, crate::time::coarse_now())
    }

    /// Whether INIT settled `FUSE_HANDLE_KILLPRIV_V2`.
    fn killpriv_v2(&self) -> bool {
        // Relaxed: written once at INIT, before the first request is read (the kernel
        // sends nothing else until INIT is answered); the read of that request orders it.
        self.killpriv_v2.load(Ordering::Relaxed)
    }

    /// Records what INIT settled (`flags`: the capabilities both sides have).
    fn init_settled(&self, flags: u64) {
        // Relaxed: see `killpriv_v2`.
        self.killpriv_v2.store(
            flags & abi::init::FUSE_HANDLE_KILLPRIV_V2 != 0,
            Ordering::Relaxed,
        );
    }

    /// `fstatat(d, "", AT_EMPTY_PATH)` as FUSE attributes.
    fn attr_of(&self, task: &Task, d: &Arc<Dentry>) -> Result<abi::Attr> {
        let st = task.fstatat(d, "", AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(self.file_attr(&st))
    }

    /// `lookup_one`: the entry `name` in directory `dir`, not following a final symlink.
    fn lookup_one(task: &Task, dir: &Arc<Dentry>, name: &[u8]) -> Result<Arc<Dentry>> {
        task.with_walk(AtDir::Dentry(dir), name, |nd, start| {
            Ok(nd.walk(start, name, false, false)?.clone())
        })
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
    fn names_are_single_components() {
        assert_eq!(component(b"a"), Ok(&b"a"[..]));
        assert_eq!(component(b".."), Ok(&b".."[..]));
        assert_eq!(component(b""), Err(Errno::EINVAL));
        assert_eq!(component(b"a/b"), Err(Errno::EINVAL));
        assert_eq!(component(b"/"), Err(Errno::EINVAL));
    }

    #[test]
    fn file_handles_name_table_and_descriptor() {
        assert_eq!(fh_split(3 << 32 | 17), (3, Fd(17)));
        // A forged handle: a table that does not exist is refused by `table_task` (EBADF), a
        // descriptor past i32 stays invalid (negative) for `fget`.
        assert_eq!(fh_split(u64::MAX), (u32::MAX as usize, Fd(-1)));
    }

    /// The server's operations without a kernel: lookup counts, forget, and a forged node.
    #[test]
    fn lookup_counts_and_forget() {
        let mnt = crate::tmpfs::mount(Default::default());
        let fs = UvfsFuse::new(&mnt, FuseOptions::default());
        let t = Task::init(&mnt);
        t.mkdirat(Fd::AT_FDCWD, "/d", 0o755).unwrap();
        let d = UvfsFuse::lookup_one(&t, mnt.root(), b"d").unwrap();
        let ino = d.inode().ino();
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
        assert!(Arc::ptr_eq(&fs.node(1).unwrap(), mnt.root()));
    }
}
