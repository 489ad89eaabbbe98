//! The FUSE client as a file system behind the VFS seam: a FUSE server's tree mounted in
//! a uvfs namespace ([`mount`]).
//!
//! Linux analogue: fs/fuse/inode.c (`fuse_iget`, `fuse_evict_inode`'s forget,
//! `fuse_statfs`), fs/fuse/dir.c (`fuse_lookup`, `fuse_dentry_revalidate`,
//! `fuse_update_attributes`, `fuse_mknod`/`mkdir`/`symlink`/`link`/`unlink`/`rmdir`,
//! `fuse_rename2`, `fuse_do_setattr`), fs/fuse/file.c (`fuse_open_common`,
//! `fuse_release`, `fuse_flush`, `fuse_direct_io`, `fuse_fsync`, `fuse_file_fallocate`,
//! `fuse_lseek`), fs/fuse/readdir.c (`fuse_readdir_uncached`, `fuse_use_readdirplus`,
//! `parse_dirplusfile`, `fuse_direntplus_link`).
//!
//! # Identity and lookup counts
//! One server node id is one uvfs inode while uvfs holds it (a map from node id to
//! `Weak<Inode>`, consulted on every entry reply). Every entry reply (LOOKUP, MKNOD,
//! MKDIR, SYMLINK, LINK) makes the server count one more lookup of its node; uvfs counts
//! them on the inode (`nlookup`) and forgets the total when the inode goes (the last
//! dentry naming it was dropped), as Linux's `fuse_evict_inode`: queued, and sent in
//! BATCH_FORGETs (conn.rs). The root
//! (node 1) is never forgotten. `st_ino` is the server's `attr.ino`; `st_dev` the uvfs
//! mount's.
//!
//! # Caching (the bound on staleness)
//! Every inode is marked `I_REVALIDATE`. An entry is trusted for the server's
//! `entry_valid` after the reply that gave it, attributes for `attr_valid` (Linux's
//! `fuse_dentry_revalidate` and `fuse_update_attributes`); past that, a walk asks LOOKUP
//! again (off the lock-free walk: under `rcu` the check returns `ECHILD`) and `stat` asks
//! GETATTR. Every change made through uvfs is a request answered before the call returns
//! and drops the cached attributes of what it changed. Listings are always the server's
//! (READDIR on the open directory's handle). The server's notifications apply:
//! INVAL_INODE drops a node's cached attributes; INVAL_ENTRY and DELETE make every
//! cached entry of the mount be checked again at its next walk (one generation count per
//! mount, not per name: a notification is rare, a walk is not).
//!
//! # READDIRPLUS
//! Offered with `FUSE_READDIRPLUS_AUTO`, as Linux offers them (fs/fuse/readdir.c). A
//! server that takes `FUSE_DO_READDIRPLUS` is asked READDIRPLUS, with `AUTO` only for a
//! listing call from the start of the directory or after the directory was advised (a
//! LOOKUP found a name in it, or a walk went through an entry a READDIRPLUS linked, the
//! first time: `fuse_use_readdirplus`), else READDIR. Each record with a node id counts
//! one lookup on the server: the record's inode (found or made as for an entry reply,
//! with its entry and attribute timeouts) becomes the directory's cached entry of that
//! name through the VFS (`DirLink`; an entry naming another node is replaced), so a walk
//! or `stat` within the timeouts asks nothing (`ls -l` costs one request per 8 KiB of
//! listing instead of a LOOKUP per name). Every record's lookup is linked or forgotten,
//! past the caller's full buffer too; `.` and `..` and node id 0 count none
//! (`fuse_direntplus_link`); a symlink's target is read at its first use. A reply with a
//! bad record is `EIO`,
//! and the lookups of the records before it are given back.
//!
//! # Page cache (file data)
//! Linux's default for a FUSE mount without `writeback_cache` (fs/fuse/file.c): reads of
//! a regular file go through a page cache (cache.rs: 4 KiB pages, a per-mount table of
//! `FuseClientOptions::cache_pages` slots, 64 MiB by default, CLOCK eviction within
//! 8-way sets). A miss sends one READ from the start of its page of up to 32 pages
//! (readahead), cut at `max_read` and at the cached size; a read reaching past the cached
//! size (or, with `FUSE_AUTO_INVAL_DATA`, any read) first refreshes expired attributes
//! (`fuse_cache_read_iter`), and stops at the size. The pages of a file are dropped:
//! - at every open the server does not answer with `FOPEN_KEEP_CACHE`
//!   (`fuse_finish_open`);
//! - when attributes from the server show a new size, or a new mtime if the server took
//!   `FUSE_AUTO_INVAL_DATA` (`fuse_change_attributes`), truncate included;
//! - for `[off, off + len)` (`len` <= 0: to the end) at `NOTIFY_INVAL_INODE` with
//!   `off` >= 0;
//! - for the range written, after each WRITE (write-through: the data is the server's
//!   before the call returns), and for the range of an `fallocate`.
//!
//! A file opened with `O_DIRECT` or answered `FOPEN_DIRECT_IO` reads and writes with
//! requests only (`fuse_direct_io`); `fcntl(F_SETFL, O_DIRECT)` later does not switch.
//! A READ racing a change may return the old bytes to its caller but never leaves them
//! cached: a whole-file invalidation moves the inode's cache generation, which keys the
//! pages, so pages fetched under the old one are never found; a range change (a write,
//! fallocate, NOTIFY_INVAL_INODE with a length) bumps the inode's `attr_version`
//! (Linux's), and a miss drops the pages it inserted if that moved while its READ was out
//! (see `fill`). The same version keeps an attribute reply asked for before a write or
//! truncate from undoing it (a stale size). An open writes no mount-wide word.
//! A hit writes no shared cache line: an epoch pin (the thread's own line), the inode's
//! token, one set line, the page's referenced bit only when clear, the copy.
//!
//! # Permissions
//! Two modes, as a kernel mount with or without `default_permissions`
//! ([`FuseClientOptions::server_permissions`]). By default the caller's credentials are
//! checked against the attributes before a request is made (Linux's `fuse_permission`
//! under `default_permissions`: refreshed first when past `attr_valid`, and once more
//! before `EACCES`). With `server_permissions` the server
//! alone decides (`fuse_permission`): the inodes are marked `Inode::set_fs_permission`, so
//! the VFS asks `FuseInode::permission` instead of the mode bits (ACCESS for access(2) and
//! chdir(2), an execute bit for exec, nothing else) and skips the ownership checks of
//! chmod, chown and utimensat (`ATTR_FORCE`); as Linux, the VFS keeps the sticky-directory
//! rule, `O_NOATIME`'s owner check and the extended-attribute namespace rules. Either way
//! each request's header carries the caller's `uid`/`gid` (`cred::caller`: the request
//! uvfs's own FUSE server is serving, else the task or `OpenFile` whose call made it,
//! Linux's `current_fsuid()`; the process's own on a thread that never called into one)
//! and the uvfs process's `pid` (so a server that reads the caller's supplementary groups
//! from `/proc/PID`, libfuse's `fuse_req_getgroups`, reads uvfs's); ACCESS carries
//! access(2)'s credentials (the real ids unless `AT_EACCESS`).
//!
//! # Not offered
//! File locks, mmap coherence, writeback caching (writes are requests before the call
//! returns). Extended attributes, interrupts (`Interrupter`), READDIRPLUS and `O_TMPFILE`
//! (TMPFILE; `EOPNOTSUPP` from a server without it, as Linux's `fc->no_tmpfile`) are
//! offered.

use super::cache::{FileCache, PageCache};
use super::conn::Conn;
use super::request::EndMode;
use crate::cred::{Cred, MAY_ACCESS, MAY_CHDIR, MAY_EXEC, MAY_NOT_BLOCK, MAY_RWX};
use crate::fs::{DirEmit, DirLink, FileOps, FileSystem, InodeOps, NewInode, SetAttr};
use crate::fuse::abi::{self, fattr, fopen, init, opcode};
use crate::inode::{FsAttrs, Inode, MAX_LFS_FILESIZE, PAGE_SIZE};
use crate::mount::Mount;
use crate::namei::{NAME_MAX, PATH_MAX};
use crate::super_block::SuperBlock;
use crate::sync::plain::{AtomicBool, AtomicU64, Mutex, Ordering};
use crate::sync::{epoch, plock};
use crate::time::mono_ns;
use crate::types::*;
use crate::{Errno, Result};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Weak};
use zerocopy::{FromBytes, IntoBytes};

/// `FUSE_SUPER_MAGIC`, statfs's `f_type` of a FUSE mount.
pub const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// `FOPEN_*`/fallocate mode bits the client uses.
const FALLOC_FL_KEEP_SIZE: u32 = 1;
const FALLOC_FL_PUNCH_HOLE: u32 = 2;
const FALLOC_FL_ZERO_RANGE: u32 = 0x10;
const FUSE_FSYNC_FDATASYNC: u32 = 1;
/// `SEEK_DATA`, `SEEK_HOLE` (lseek(2)).
const SEEK_DATA: u32 = 3;
const SEEK_HOLE: u32 = 4;

/// The deadline `secs` + `nsec` from now (monotonic nanoseconds; saturating).
fn deadline(secs: u64, nsec: u32) -> u64 {
    mono_ns()
        .saturating_add(secs.saturating_mul(1_000_000_000))
        .saturating_add(nsec.min(999_999_999) as u64)
}

/// `new_encode_dev` of a 64-bit `dev_t` (the wire carries 32 bits).
fn encode_dev(dev: u64) -> u32 {
    let (major, minor) = ((dev >> 8) & 0xfff, (dev & 0xff) | ((dev >> 12) & 0xfff00));
    ((minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)) as u32
}

/// `new_decode_dev`, as the kernel reads `fuse_attr.rdev`.
fn decode_dev(dev: u32) -> u64 {
    let dev = dev as u64;
    let major = (dev & 0xfff00) >> 8;
    let minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
    (major << 8) | (minor & 0xff) | ((minor & !0xff) << 12)
}

/// The attributes of a server's `fuse_attr`.
fn fs_attrs(a: &abi::Attr) -> FsAttrs {
    let t = |s: u64, n: u32| Timespec::new(s as i64, n.min(999_999_999) as i64);
    FsAttrs {
        mode: a.mode,
        uid: a.uid,
        gid: a.gid,
        nlink: a.nlink,
        size: a.size.min(MAX_LFS_FILESIZE as u64),
        blocks: a.blocks,
        times: [
            t(a.atime, a.atimensec),
            t(a.mtime, a.mtimensec),
            t(a.ctime, a.ctimensec),
        ],
    }
}

/// A STATX reply's attributes as GETATTR's (`fuse_statx_to_attr`, less `rdev`).
fn statx_attr(sx: &abi::Statx) -> abi::Attr {
    abi::Attr {
        ino: sx.ino,
        size: sx.size,
        blocks: sx.blocks,
        atime: sx.atime.tv_sec as u64,
        mtime: sx.mtime.tv_sec as u64,
        ctime: sx.ctime.tv_sec as u64,
        atimensec: sx.atime.tv_nsec,
        mtimensec: sx.mtime.tv_nsec,
        ctimensec: sx.ctime.tv_nsec,
        mode: u32::from(sx.mode),
        nlink: sx.nlink,
        uid: sx.uid,
        gid: sx.gid,
        blksize: sx.blksize,
        // `rdev` is left out: uvfs keeps an inode's device number from when it was made.
        ..Default::default()
    }
}

/// A name as the wire carries it: the bytes and a NUL.
fn cname(name: &[u8]) -> Result<Vec<u8>> {
    if name.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    let mut v = Vec::with_capacity(name.len() + 1);
    v.extend_from_slice(name);
    v.push(0);
    Ok(v)
}

/// Counts a protocol error of the server on `conn`; the caller gets `EIO`.
fn proto_error(conn: &Conn) -> Errno {
    // Relaxed: a diagnostic counter.
    conn.stats.proto_errors.fetch_add(1, Ordering::Relaxed);
    Errno::EIO
}

/// A reply payload as exactly one `T`; anything else is the server's protocol error
/// (`EIO`, counted).
fn reply<T: abi::Wire>(conn: &Conn, payload: &[u8]) -> Result<T> {
    abi::exact::<T>(payload).map_err(|_| proto_error(conn))
}

/// Options of a FUSE client mount.
#[derive(Clone, Debug, Default)]
pub struct FuseClientOptions {
    /// Every change fails with `EROFS` before a request is sent.
    pub read_only: bool,
    /// How a completed request is ended (lesson 5 of `uvfs bench --ablation`); keep the
    /// default.
    pub request_end: RequestEnd,
    /// A caller that waits this long for an answer takes the server for dead: the
    /// connection aborts, that request and every other in flight fail with
    /// `ECONNABORTED`, every later one with `ENOTCONN` (Linux 6.14's FUSE request timeout,
    /// `fs.fuse.default_request_timeout`, which also aborts). `None` (the default): wait
    /// for ever, as Linux without it. Requests nobody waits for (RELEASE) are not timed,
    /// nor is a send: a caller blocked writing to a server that stopped reading (its socket
    /// buffer full, 4 MiB) waits until the server reads, exits, or another caller's wait
    /// times out and aborts the connection (which fails the send). Set this for a server
    /// that may stop answering: its callers wait as long (no other work of the process
    /// waits for them: see the module doc, "No request is sent pinned").
    pub request_timeout: Option<std::time::Duration>,
    /// The most pages (4 KiB each) of file data the mount's page cache keeps (see the
    /// module doc, "Page cache"): `None` for [`DEFAULT_CACHE_PAGES`] (64 MiB), `Some(0)`
    /// for none (every read is a READ request, as with `FOPEN_DIRECT_IO` on every open).
    pub cache_pages: Option<usize>,
    /// How long a caller that receives its own reply (the connection's leader, see
    /// conn.rs) looks at the socket without sleeping before it sleeps in `recv`: `None`
    /// for [`DEFAULT_RECEIVE_SPIN`], `Some(Duration::ZERO)` for never. A reply that comes
    /// within it saves the caller's wake-up (on a VM, a halted vCPU's wake-up costs more
    /// than a fast server's answer). Adaptive: a thread whose look found no reply does not
    /// look for its next [`SPIN_BACKOFF`] requests, so a slow server costs little CPU; and
    /// the receiving caller looks only while at most half the CPUs' worth of the
    /// connection's callers wait (never on one CPU; the look stops when more begin to
    /// wait), so that it leaves the server CPUs to answer on (per connection: the leaders
    /// of several mounts may each look).
    pub receive_spin: Option<std::time::Duration>,
    /// The server alone decides permissions, as a kernel mount without
    /// `default_permissions` (Linux's default; `fuse_permission`): uvfs checks no mode
    /// bits and no ownership for `chmod`, `chown` and `utimensat` on the mount (the
    /// sticky-directory rule, `O_NOATIME` and the xattr namespaces stay the VFS's); access(2),
    /// chdir(2), fchdir(2) and chroot(2) send ACCESS (`ENOSYS` from the server turns it
    /// off: allowed from then on); executing a regular file needs an execute bit in its
    /// (refreshed) attributes; the sticky-directory rule stays the VFS's. Every request
    /// carries the caller's `uid`/`gid` either way. `false` (the default): uvfs checks the
    /// caller against the cached attributes first, as a kernel mount with
    /// `default_permissions`, which a server that runs as one user and checks nothing
    /// (libfuse's passthrough_ll) needs for a namespace with several users.
    pub server_permissions: bool,
    /// Asked every 100 ms while [`mount`] waits for the server's answer to INIT (at most
    /// 30 s): `true` gives up, [`mount`] fails with `ECANCELED` and a started server is
    /// killed. For a program that must stay responsive meanwhile (`uvfs mount` passes
    /// whether SIGINT, SIGTERM or SIGHUP came). `None` (the default): wait.
    pub init_cancel: Option<fn() -> bool>,
}

/// The receive spin's default: 250 us. First 30 us, tuned on an Intel Xeon VM (`uvfs bench
/// --target fuse-client`: 1 thread 0.68-0.89x the kernel's client without a spin,
/// 0.96-1.30x with it); on this project's AMD EPYC VM passthrough_ll's answers take
/// longer than 30 us, so the look mostly failed and backed off: 1 thread 0.52-0.77x. With
/// 250 us (and no look while more callers wait than half the CPUs) the same runs gave
/// 0.84-1.73x at 1 thread (see docs/bench.md); a reply that comes sooner ends the look
/// sooner, so a fast server costs no more than before.
pub const DEFAULT_RECEIVE_SPIN: std::time::Duration = std::time::Duration::from_micros(250);

/// Requests a thread does not spin for after a spin that found no reply.
pub const SPIN_BACKOFF: u32 = 32;

/// The page cache's default size per mount, in pages: 16384 (64 MiB).
pub const DEFAULT_CACHE_PAGES: usize = 16384;

/// Pages a read miss asks the server for at most (readahead; also capped by `max_read`
/// and the file's size): 32 (128 KiB, Linux's default `max_pages`).
const READAHEAD_PAGES: u64 = 32;

/// How the connection ends a request when its reply arrives (`request_end` in Linux's
/// fs/fuse/dev.c).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RequestEnd {
    /// The lock of the input queue's interrupt list is taken only for a request whose
    /// waiter was interrupted (the sticky `FR_INTERRUPTED` flag, Linux since commit
    /// e1e71c168813, 2021; the check without the lock dates from 2018). The default.
    #[default]
    Sticky,
    /// The lock is taken for every request, as Linux's `request_end` before 2018: lesson
    /// 5's "before", kept for `uvfs bench --ablation` only.
    Locked,
}

/// State shared by a mount and its inodes.
pub(crate) struct Shared {
    /// The connection to the server (immutable).
    conn: Arc<Conn>,
    /// Options (immutable).
    opts: FuseClientOptions,
    /// Node id -> uvfs inode (see the module doc). Protected by its mutex.
    inodes: Mutex<HashMap<u64, Weak<Inode>>>,
    /// Bumped by INVAL_ENTRY and DELETE notifications: entries checked before the latest
    /// bump are checked again (see the module doc). Atomic; a hint.
    inval_gen: AtomicU64,
    /// The server answered FLUSH with `ENOSYS`: no more FLUSH (Linux `fc->no_flush`).
    no_flush: AtomicBool,
    /// As `no_flush`, for FSYNC (`fc->no_fsync`).
    no_fsync: AtomicBool,
    /// As `no_flush`, for FSYNCDIR (`fc->no_fsyncdir`: apart from FSYNC's).
    no_fsyncdir: AtomicBool,
    /// As `no_flush`, for LSEEK (`fc->no_lseek`).
    no_lseek: AtomicBool,
    /// As `no_flush`, for TMPFILE (`fc->no_tmpfile`: `O_TMPFILE` is `EOPNOTSUPP` from then
    /// on).
    no_tmpfile: AtomicBool,
    /// As `no_flush`, for CREATE (`fc->no_create`: MKNOD then OPEN from then on).
    no_create: AtomicBool,
    /// As `no_flush`, for FALLOCATE (`fc->no_fallocate`: `EOPNOTSUPP` from then on).
    no_fallocate: AtomicBool,
    /// As `no_flush`, for STATX (`fc->no_statx`: no birth time from then on).
    no_statx: AtomicBool,
    /// The server answered GETXATTR, SETXATTR, LISTXATTR, REMOVEXATTR (in that order) with
    /// `ENOSYS`: that call is `EOPNOTSUPP` from then on without a request (Linux's
    /// `no_getxattr`, `no_setxattr`, `no_listxattr`, `no_removexattr`).
    no_xattr: [AtomicBool; 4],
    /// DESTROY was sent ([`Shared::destroy`]): nothing more goes to the server.
    destroyed: AtomicBool,
    /// The server answered ACCESS with `ENOSYS`: access checks pass from then on without
    /// a request (Linux `fc->no_access`).
    no_access: AtomicBool,
    /// The uvfs process's credentials: its `pid` for every request, its `uid`/`gid` for
    /// those made on a thread that never called into a `Task` (see [`Shared::creds`]).
    creds: (u32, u32, u32),
    /// File data kept between reads (cache.rs). Internally synchronised.
    cache: PageCache,
    /// The next inode id of the page cache (cache.rs: the high half of a page's token).
    /// Atomic; written by inode creation only (an open writes no mount-wide word).
    next_token: AtomicU64,
    /// Linux's `fc->attr_version`: bumped by every change of a file's data or size the
    /// client makes or is told of; an attribute reply asked for before an inode's latest
    /// bump is not stored (it may predate the change). Atomic (`sync`'s, which
    /// `FileCache::bump` takes: loom's in its model).
    attr_version: crate::sync::AtomicU64,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("fuse").field("opts", &self.opts).finish()
    }
}

impl Drop for Shared {
    /// The last inode went before the super block's drop said so (a mount never attached):
    /// as at unmount.
    fn drop(&mut self) {
        self.destroy();
    }
}

impl Shared {
    /// Unmount (Linux `fuse_conn_destroy`, from `fuse_kill_sb_anon` when the super block's
    /// last mount goes; once): FORGET with the lookups of every inode still alive (torn
    /// down, waiting in the epoch's garbage: Linux evicts them after the abort and sends
    /// nothing; the counts are given back here, so a server that checks them sees them
    /// all), the RELEASEs still queued or in flight, DESTROY (not waited for), and the
    /// connection shut, so that the server sees EOF and exits now (a libfuse server's loop
    /// ends on it). An inode freed later sends nothing.
    fn destroy(&self) {
        // AcqRel: an inode's drop loads it (Acquire) before it forgets its own lookups;
        // one that loaded it clear may still queue a FORGET after DESTROY, which the shut
        // connection never sends (the count is lost, as Linux loses every one).
        if self.destroyed.swap(true, Ordering::AcqRel) {
            return;
        }
        let live: Vec<Arc<Inode>> = plock(&self.inodes)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for i in &live {
            if let Ok(f) = fuse(i) {
                // Relaxed: the count is only ever taken once (here or at the inode's drop,
                // which sees `destroyed` set and sends nothing).
                let n = f.nlookup.swap(0, Ordering::Relaxed);
                if n > 0 && f.nodeid != abi::FUSE_ROOT_ID {
                    self.conn.forget(f.nodeid, n);
                }
            }
        }
        self.conn
            .drain_background(std::time::Duration::from_secs(1));
        self.conn.flush_forgets();
        let _ = self.conn.send_oneway(opcode::FUSE_DESTROY, 0, &[]);
        self.conn.disconnect();
        drop(live);
    }
}

/// A FUSE inode's own part.
pub(crate) struct FuseInode {
    /// The mount's shared state. Immutable.
    fs: Arc<Shared>,
    /// The server's node id. Immutable.
    nodeid: u64,
    /// The server's generation of the node id. Immutable.
    generation: u64,
    /// Lookups the server counted for this node and uvfs has not forgotten. Atomic.
    nlookup: AtomicU64,
    /// Until when (monotonic ns) the entry naming it is trusted. Atomic; a hint.
    entry_until: AtomicU64,
    /// The mount's `inval_gen` when the entry was checked. Atomic; a hint.
    entry_gen: AtomicU64,
    /// Until when (monotonic ns) its attributes are trusted. Atomic; a hint.
    attr_until: AtomicU64,
    /// A symlink's target, read at its first use (a node's target does not change; Linux
    /// caches it with `FUSE_CACHE_SYMLINKS`). Set once.
    target: std::sync::OnceLock<Box<[u8]>>,
    /// Serialises `O_APPEND` writes (the size read and the write at it).
    append: Mutex<()>,
    /// The attributes may show an old atime (a READ or READDIR went to the server since
    /// they were fetched): `stat` asks again, reads do not (Linux's `STATX_ATIME` in
    /// `inval_mask`). Atomic; a hint, tested before it is set.
    atime_stale: AtomicBool,
    /// Its side of the page cache protocol (cache.rs): its id and cache generation (the
    /// tokens of its pages) and Linux's `fi->attr_version`. Internally synchronised.
    pages: FileCache,
    /// A directory's next listing call should be READDIRPLUS although it does not start
    /// at the beginning: a lookup in it, or a walk through an entry a READDIRPLUS linked,
    /// came since its last one (Linux's `FUSE_I_ADVISE_RDPLUS`, with
    /// `FUSE_READDIRPLUS_AUTO`). Atomic; a hint, tested before it is set.
    advise_rdplus: AtomicBool,
    /// Linked by a READDIRPLUS and not walked through since (`FUSE_I_INIT_RDPLUS`): the
    /// first walk through it advises its directory (above). Atomic; a hint.
    init_rdplus: AtomicBool,
    /// The server's handles of this regular file's open files: the handle uvfs's `File`
    /// holds is `slot << 1 | direct` (`direct`: the file bypasses the page cache), so a
    /// cache hit needs no lookup here. Protected by its mutex.
    files: Mutex<OpenFiles>,
    /// What STATX told of the node's birth time. Protected by its mutex (taken by `statx`
    /// alone, off every hot path).
    btime: Mutex<Btime>,
}

/// What STATX told of a node's birth time: Linux's `STATX_BTIME` in `fi->inval_mask`
/// (`asked` false), `FUSE_I_BTIME` and `fi->i_btime` (`known`).
#[derive(Clone, Copy, Default)]
struct Btime {
    /// A STATX reply's attributes were stored (whether or not it had a birth time).
    asked: bool,
    /// The last birth time a stored STATX reply gave (a later reply without one leaves it,
    /// as Linux leaves `FUSE_I_BTIME` set).
    known: Option<crate::types::Timespec>,
}

/// The server's `fh` of each open file of one regular file, by slot.
#[derive(Default)]
struct OpenFiles {
    /// `fhs[slot]`: the server's handle and its `FOPEN_*` flags, `None` for a free slot.
    fhs: Vec<Option<(u64, u32)>>,
    /// Free slots.
    free: Vec<usize>,
    /// A new file's handle from CREATE's or TMPFILE's reply, until the creating open takes
    /// it (the VFS makes the inode, then opens it: one request did both); given back if
    /// that open fails (`release_created`) or, at the latest, at eviction.
    created: Option<abi::OpenOut>,
}

impl OpenFiles {
    /// Records the handle and `FOPEN_*` flags of OPEN's reply `o`; returns its slot.
    fn add(&mut self, o: &abi::OpenOut) -> usize {
        let v = Some((o.fh, o.open_flags));
        match self.free.pop() {
            Some(s) => {
                self.fhs[s] = v;
                s
            }
            None => {
                self.fhs.push(v);
                self.fhs.len() - 1
            }
        }
    }

    /// The handle in `slot`.
    fn get(&self, slot: usize) -> Option<u64> {
        Some(self.fhs.get(slot).copied().flatten()?.0)
    }

    /// The `FOPEN_*` flags of the handle in `slot` (0 for a free one).
    fn open_flags(&self, slot: usize) -> u32 {
        self.fhs.get(slot).copied().flatten().map_or(0, |(_, f)| f)
    }

    /// Frees `slot`; returns its handle.
    fn remove(&mut self, slot: usize) -> Option<u64> {
        let (fh, _) = self.fhs.get_mut(slot)?.take()?;
        self.free.push(slot);
        Some(fh)
    }
}

impl Drop for FuseInode {
    /// `fuse_evict_inode`: FORGET with every lookup the server counted; the map entry goes
    /// if no newer inode took it.
    fn drop(&mut self) {
        // Relaxed: `&mut self`.
        let n = self.nlookup.load(Ordering::Relaxed);
        // Acquire: pairs with `Shared::destroy`'s swap (after it, DESTROY went: nothing
        // more is sent).
        let destroyed = self.fs.destroyed.load(Ordering::Acquire);
        let created = self.files.get_mut().map(|f| f.created.take());
        if let (Ok(Some(o)), false) = (created, destroyed) {
            // An O_TMPFILE whose creating open failed before it took the handle.
            send_release(&self.fs.conn, opcode::FUSE_RELEASE, self.nodeid, o.fh);
        }
        if n > 0 && self.nodeid != abi::FUSE_ROOT_ID && !destroyed {
            self.fs.conn.forget(self.nodeid, n);
        }
        let mut m = plock(&self.fs.inodes);
        if m.get(&self.nodeid).is_some_and(|w| w.strong_count() == 0) {
            m.remove(&self.nodeid);
        }
    }
}

/// The slot in `OpenFiles` of a regular file's uvfs handle (`slot << 1 | direct`).
fn slot_of(handle: u64) -> usize {
    (handle >> 1) as usize
}

/// RELEASE or RELEASEDIR (`op`) of the server's handle `fh` of node `nodeid`, in the
/// background (not waited for), without credentials (`fuse_prepare_release`'s `nocreds`).
fn send_release(conn: &Conn, op: u32, nodeid: u64, fh: u64) {
    let arg = abi::ReleaseIn {
        fh,
        ..Default::default()
    };
    let _ = conn.request_background(op, nodeid, (0, 0, 0), &[arg.as_bytes()]);
}

/// The FUSE part of `inode`.
///
/// # Errors
/// `EXDEV` for an inode of another file system.
fn fuse(inode: &Inode) -> Result<&FuseInode> {
    inode
        .i_op
        .as_any()
        .downcast_ref::<FuseInode>()
        .ok_or(Errno::EXDEV)
}

impl Shared {
    /// A request on `nodeid` with the caller's credentials ([`Shared::creds`]).
    fn req(&self, op: u32, nodeid: u64, args: &[&[u8]]) -> Result<Vec<u8>> {
        let r = self.conn.request(op, nodeid, self.creds(), args);
        if matches!(r, Err(Errno::ESTALE)) {
            self.stale(nodeid);
        }
        r
    }

    /// The server said `ESTALE` of `nodeid`: the entry naming it is looked up again at
    /// the next walk through it (the VFS then runs the call again, `retry_estale`; Linux's
    /// `fuse_dentry_revalidate` sends LOOKUP for that retry's `LOOKUP_REVAL`), and its
    /// attributes are asked for again.
    #[cold]
    fn stale(&self, nodeid: u64) {
        let i = plock(&self.inodes).get(&nodeid).and_then(Weak::upgrade);
        if let Some(f) = i.as_deref().and_then(|i| fuse(i).ok()) {
            // Relaxed: a hint, as `entry_seen`'s stores.
            f.entry_until.store(0, Ordering::Relaxed);
            f.invalidate_attrs();
        }
    }

    /// A request header's `(uid, gid, pid)` (`fuse_fill_in_header`): the `uid`/`gid` of
    /// the `Task` call this thread runs (`cred::caller`: Linux's `current_fsuid()`,
    /// `current_fsgid()`), the process's own on a thread that made none; the uvfs
    /// process's `pid` (a task's pid is uvfs's own number, which the server cannot look
    /// up).
    fn creds(&self) -> (u32, u32, u32) {
        match crate::cred::caller() {
            Some((uid, gid)) => (uid, gid, self.creds.2),
            None => self.creds,
        }
    }

    /// A request header's `(uid, gid, pid)` for a call whose credentials the VFS passed
    /// (a write's, access(2)'s): `cred`'s ids, the uvfs process's `pid`.
    fn creds_of(&self, cred: &Cred) -> (u32, u32, u32) {
        (cred.uid, cred.gid, self.creds.2)
    }

    /// The mount's `attr_version` now, for a request whose reply carries attributes
    /// (`fuse_get_attr_version`).
    fn attr_version_now(&self) -> u64 {
        // SeqCst: pairs with the SeqCst bump in `FileCache::bump` (cache.rs): a change whose
        // bump this load does not see was made after the load, so the inode's version
        // will exceed it and the reply is not stored.
        self.attr_version.load(Ordering::SeqCst)
    }

    /// Whether listings ask READDIRPLUS (`fc->do_readdirplus`), and whether only at their
    /// start or when advised (`fc->readdirplus_auto`).
    fn readdirplus(&self) -> (bool, bool) {
        let f = self.conn.negotiated().flags;
        (
            f & init::FUSE_DO_READDIRPLUS != 0,
            f & init::FUSE_READDIRPLUS_AUTO != 0,
        )
    }

    /// Whether the server invalidates data on mtime changes (`fc->auto_inval_data`).
    fn auto_inval_data(&self) -> bool {
        self.conn.negotiated().flags & init::FUSE_AUTO_INVAL_DATA != 0
    }

    /// `EROFS` on a read-only mount.
    fn writable(&self) -> Result<()> {
        if self.opts.read_only {
            return Err(Errno::EROFS);
        }
        Ok(())
    }

    /// The uvfs inode of the entry reply `e` (`fuse_iget`), counting its lookup: the one
    /// uvfs holds for the node id (same type and generation), refreshed, or a new one.
    /// A node id 0 is a negative entry: `None`.
    ///
    /// `attr_ver` is the mount's `attr_version` before the request was sent (0: no check):
    /// an inode changed since then keeps its attributes (`fuse_iget`'s `attr_version`).
    fn inode_for(
        self: &Arc<Self>,
        dev: u64,
        e: &abi::EntryOut,
        attr_ver: u64,
    ) -> Result<Option<Arc<Inode>>> {
        if e.nodeid == 0 {
            return Ok(None);
        }
        let ty = e.attr.mode & S_IFMT;
        if !matches!(
            ty,
            S_IFREG | S_IFDIR | S_IFLNK | S_IFCHR | S_IFBLK | S_IFIFO | S_IFSOCK
        ) || e.nodeid == abi::FUSE_ROOT_ID
        {
            // An entry of no known type, or naming the root (which has no other name):
            // the server is wrong. Its lookup is given back at once.
            if e.nodeid != abi::FUSE_ROOT_ID {
                self.conn.forget(e.nodeid, 1);
            }
            proto_error(&self.conn);
            return Err(Errno::EIO);
        }
        let existing = plock(&self.inodes).get(&e.nodeid).and_then(Weak::upgrade);
        if let Some(i) = existing {
            let fi = fuse(&i)?;
            if i.mode() & S_IFMT == ty && fi.generation == e.generation {
                // Relaxed: a count only FORGET at the inode's drop reads (`&mut`).
                fi.nlookup.fetch_add(1, Ordering::Relaxed);
                fi.entry_seen(e);
                fi.store_attrs(&i, &e.attr, attr_ver);
                return Ok(Some(i));
            }
        }
        let inode = Arc::new(self.new_inode(dev, e.nodeid, e.generation, 1, &e.attr));
        fuse(&inode)?.entry_seen(e);
        // Two replies for one new node may race: the first to record its inode wins; the
        // other's lookup count moves to the winner and its inode goes without a FORGET.
        let (winner, old, stale) = {
            let mut m = plock(&self.inodes);
            let cur = m.get(&e.nodeid).and_then(Weak::upgrade);
            match cur {
                Some(c)
                    if c.mode() & S_IFMT == ty
                        && fuse(&c).is_ok_and(|f| f.generation == e.generation) =>
                {
                    (Some(c), None, None)
                }
                cur => (None, m.insert(e.nodeid, Arc::downgrade(&inode)), cur),
            }
        };
        // Every `Arc<Inode>` and `Weak` leaves the lock alive: a last reference dropped
        // under it would take it again (`FuseInode::drop`).
        drop((old, stale));
        match winner {
            Some(w) => {
                let mine = fuse(&inode)?;
                // Relaxed: as above; `mine` is ours alone.
                mine.nlookup.store(0, Ordering::Relaxed);
                fuse(&w)?.nlookup.fetch_add(1, Ordering::Relaxed);
                drop(inode);
                Ok(Some(w))
            }
            None => Ok(Some(inode)),
        }
    }

    /// A new uvfs inode for node `nodeid` with `nlookup` lookups counted.
    fn new_inode(
        self: &Arc<Self>,
        dev: u64,
        nodeid: u64,
        generation: u64,
        nlookup: u64,
        a: &abi::Attr,
    ) -> Inode {
        let attrs = fs_attrs(a);
        let fi = FuseInode {
            fs: self.clone(),
            nodeid,
            generation,
            nlookup: AtomicU64::new(nlookup),
            entry_until: AtomicU64::new(0),
            entry_gen: AtomicU64::new(0),
            attr_until: AtomicU64::new(0),
            target: std::sync::OnceLock::new(),
            append: Mutex::new(()),
            atime_stale: AtomicBool::new(false),
            // Relaxed: a unique number; nothing is published with it.
            // Relaxed: only unique ids are needed, no ordering with anything else.
            pages: FileCache::new(self.next_token.fetch_add(1, Ordering::Relaxed)),
            files: Mutex::new(OpenFiles::default()),
            btime: Mutex::new(Btime::default()),
            advise_rdplus: AtomicBool::new(false),
            init_rdplus: AtomicBool::new(false),
        };
        let mut i = Inode::new(
            a.ino,
            dev,
            a.mode,
            attrs.uid,
            attrs.gid,
            attrs.times[2],
            Box::new(fi),
        );
        i.i_rdev = decode_dev(a.rdev);
        i.set_revalidate();
        if self.opts.server_permissions {
            i.set_fs_permission();
        }
        i.set_attrs(&attrs);
        i
    }

    /// Applies a notification (`fuse_notify`): INVAL_INODE, INVAL_ENTRY, DELETE.
    fn notify(&self, code: i32, payload: &[u8]) {
        match code {
            abi::notify::INVAL_INODE => {
                if let Ok((n, _)) = abi::NotifyInvalInodeOut::read_from_prefix(payload) {
                    let i = plock(&self.inodes).get(&n.ino).and_then(Weak::upgrade);
                    if let Some((i, f)) = i.as_deref().and_then(|i| Some((i, fuse(i).ok()?))) {
                        // `fuse_reverse_inval_inode`: the attributes always; with an
                        // offset >= 0 the pages from it, `len` bytes (<= 0: to the end).
                        f.invalidate_attrs();
                        f.bump_version();
                        if n.off >= 0 && i.is_reg() {
                            let from = n.off as u64;
                            if n.len <= 0 {
                                f.drop_range(from, u64::MAX);
                            } else {
                                f.drop_range(from, from.saturating_add(n.len as u64));
                            }
                        }
                    }
                }
            }
            _ => {
                // Relaxed: a hint; a walk racing with it may use the entry once more, as
                // one that started before the notification.
                self.inval_gen.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl FuseInode {
    /// Sets `advise_rdplus` (tested first) when listings use READDIRPLUS_AUTO.
    fn advise_readdirplus(&self) {
        // Relaxed: a hint read by the directory's next listing call.
        if self.fs.readdirplus() == (true, true) && !self.advise_rdplus.load(Ordering::Relaxed) {
            // Relaxed: as above.
            self.advise_rdplus.store(true, Ordering::Relaxed);
        }
    }

    /// `fuse_use_readdirplus`: whether a listing call from the file system's position
    /// `pos` asks READDIRPLUS (clearing the advice it follows).
    fn use_readdirplus(&self, pos: u64) -> bool {
        match self.fs.readdirplus() {
            (false, _) => false,
            (true, false) => true,
            (true, true) => {
                // Relaxed: a hint (see `advise_rdplus`); tested before it is cleared.
                let advised = self.advise_rdplus.load(Ordering::Relaxed)
                    // Relaxed: as above.
                    && self.advise_rdplus.swap(false, Ordering::Relaxed);
                pos == 0 || advised
            }
        }
    }

    /// `fuse_direntplus_link`: the lookup a READDIRPLUS record `e` counted (node id not 0,
    /// a name other than `.` and `..`) as the listed directory's cached entry `name`
    /// (`link`), or given back. Attributes asked for at `attr_ver` or later are stored.
    fn link_plus(
        &self,
        dev: u64,
        e: &abi::EntryOut,
        name: &[u8],
        attr_ver: u64,
        link: &mut crate::fs::DirLink<'_>,
    ) {
        if e.nodeid == 0 || name == b"." || name == b".." {
            return;
        }
        // An entry of no known type, or naming the root, is the server's error:
        // `inode_for` counts it and gives the lookup back.
        if let Ok(Some(i)) = self.fs.inode_for(dev, e, attr_ver) {
            if let (Ok(f), true) = (fuse(&i), self.fs.readdirplus().1) {
                // Relaxed: a hint (see `init_rdplus`).
                f.init_rdplus.store(true, Ordering::Relaxed);
            }
            link(name, i);
        }
    }

    /// Records the entry and attribute timeouts of the entry reply `e`.
    fn entry_seen(&self, e: &abi::EntryOut) {
        let (entry, attr) = (
            deadline(e.entry_valid, e.entry_valid_nsec),
            deadline(e.attr_valid, e.attr_valid_nsec),
        );
        // Relaxed: hints read by later walks; a stale read only costs a request.
        let gen = self.fs.inval_gen.load(Ordering::Relaxed);
        // Relaxed: as above.
        self.entry_until.store(entry, Ordering::Relaxed);
        // Relaxed: as above.
        self.entry_gen.store(gen, Ordering::Relaxed);
        // Relaxed: as above.
        self.attr_until.store(attr, Ordering::Relaxed);
    }

    /// Whether the entry naming this inode is still trusted.
    fn entry_fresh(&self) -> bool {
        // Relaxed: hints (see `entry_seen`).
        self.entry_until.load(Ordering::Relaxed) > mono_ns()
            && self.entry_gen.load(Ordering::Relaxed) == self.fs.inval_gen.load(Ordering::Relaxed)
    }

    /// Drops the cached attributes (a change was made).
    fn invalidate_attrs(&self) {
        // Relaxed: a hint.
        self.attr_until.store(0, Ordering::Relaxed);
    }

    /// `fuse_invalidate_atime`: after a READ or READDIR the server may have moved the
    /// atime (the client never does: Linux's FUSE inodes are `S_NOATIME`), so the next
    /// `stat` asks (not on a read-only mount). Tested before it is set (lesson 3): readers
    /// of a file whose attributes are stale already write nothing.
    fn invalidate_atime(&self) {
        // Relaxed: a hint, as `invalidate_attrs`.
        if !self.fs.opts.read_only && !self.atime_stale.load(Ordering::Relaxed) {
            // Relaxed: as above.
            self.atime_stale.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the cached attributes are within `attr_valid` (the size and times; the
    /// atime may be stale, see `atime_stale`).
    fn attrs_fresh(&self) -> bool {
        // Relaxed: a hint.
        self.attr_until.load(Ordering::Relaxed) > mono_ns()
    }

    /// Stores the server's attributes `a` in `inode` unless the inode changed since
    /// `attr_ver` was read (`attr_ver` 0: always), and drops the cached data when they show
    /// a change (`fuse_change_attributes`: a new size truncates and, without
    /// `explicit_inval_data`, which uvfs does not offer, invalidates the whole file; with
    /// `auto_inval_data`, a new mtime invalidates it too). Returns whether it stored them.
    fn store_attrs(&self, inode: &Inode, a: &abi::Attr, attr_ver: u64) -> bool {
        // `version` pairs with `attr_version_now` (see there).
        if attr_ver != 0 && self.pages.version() > attr_ver {
            return false;
        }
        let attrs = fs_attrs(a);
        if !inode.is_reg() || !self.fs.cache.enabled() {
            inode.set_attrs(&attrs);
            return true;
        }
        let (old_size, old_mtime) = (inode.size(), inode.times()[1]);
        inode.set_attrs(&attrs);
        if old_size != attrs.size || (self.fs.auto_inval_data() && old_mtime != attrs.times[1]) {
            self.invalidate_data();
        }
        true
    }

    /// Marks a change of this file's data or size (cache.rs `FileCache::bump`).
    fn bump_version(&self) {
        self.pages.bump(&self.fs.attr_version);
    }

    /// Drops every cached page of the file (cache.rs `FileCache::invalidate`).
    fn invalidate_data(&self) {
        if self.fs.cache.enabled() {
            self.pages.invalidate();
        }
    }

    /// Drops the cached pages holding bytes `[from, to)` (`invalidate_inode_pages2_range`),
    /// after marking the change so that a read miss in flight that fetched the old bytes
    /// drops what it caches (cache.rs `FileCache::drop_pages`).
    fn drop_range(&self, from: u64, to: u64) {
        let ps = PAGE_SIZE as u64;
        let first = from / ps;
        let past = if to <= from { first } else { to.div_ceil(ps) };
        self.pages
            .drop_pages(&self.fs.cache, &self.fs.attr_version, first, past);
    }

    /// An xattr request; `ENOSYS` turns extended attributes off for the mount (then
    /// `EOPNOTSUPP`, as Linux's `fc->no_getxattr` and its siblings).
    fn xattr_req(&self, op: u32, args: &[&[u8]]) -> Result<Vec<u8>> {
        let no = &self.fs.no_xattr[match op {
            opcode::FUSE_GETXATTR => 0,
            opcode::FUSE_SETXATTR => 1,
            opcode::FUSE_LISTXATTR => 2,
            _ => 3,
        }];
        // Relaxed: a hint, as `no_flush`.
        if no.load(Ordering::Relaxed) {
            return Err(Errno::EOPNOTSUPP);
        }
        match self.fs.req(op, self.nodeid, args) {
            Err(Errno::ENOSYS) => {
                // Relaxed: as above.
                no.store(true, Ordering::Relaxed);
                Err(Errno::EOPNOTSUPP)
            }
            r => r,
        }
    }

    /// A GETXATTR or LISTXATTR reply: the size (`buf` `None`: a `fuse_getxattr_out`) or the
    /// data copied into `buf` (at most its length, else the server's error: `EIO`).
    fn xattr_reply(&self, r: Vec<u8>, buf: Option<&mut [u8]>) -> Result<usize> {
        match buf {
            // Capped as Linux's `min(outarg.size, XATTR_SIZE_MAX)`.
            None => Ok(
                (reply::<abi::GetxattrOut>(&self.fs.conn, &r)?.size as usize)
                    .min(crate::xattr::XATTR_SIZE_MAX),
            ),
            Some(buf) => {
                let dst = buf
                    .get_mut(..r.len())
                    .ok_or_else(|| proto_error(&self.fs.conn))?;
                dst.copy_from_slice(&r);
                Ok(r.len())
            }
        }
    }

    /// Stores the attribute reply `payload` in `inode` (unless the inode changed since
    /// `attr_ver`, see `store_attrs`; then the attributes stay unfresh).
    fn attr_reply(&self, inode: &Inode, payload: &[u8], attr_ver: u64) -> Result<()> {
        let a: abi::AttrOut = reply(&self.fs.conn, payload)?;
        if a.attr.mode & S_IFMT != inode.mode() & S_IFMT {
            // The node changed type behind uvfs's back: Linux marks the inode bad (EIO).
            return Err(proto_error(&self.fs.conn));
        }
        if self.store_attrs(inode, &a.attr, attr_ver) {
            // Relaxed: a hint.
            self.attr_until
                .store(deadline(a.attr_valid, a.attr_valid_nsec), Ordering::Relaxed);
        }
        Ok(())
    }

    /// ACCESS for `mask`'s `MAY_READ | MAY_WRITE | MAY_EXEC` bits with `cred`'s ids
    /// (`fuse_access`, under access(2)'s credentials as Linux's
    /// `access_override_creds`). `ENOSYS` turns ACCESS off for the connection: allowed now
    /// and from then on (`fc->no_access`).
    ///
    /// # Errors
    /// The server's (`EACCES`, ...); `EIO` for a reply with a payload (counted).
    fn access(&self, cred: &Cred, mask: u32) -> Result<()> {
        // Relaxed: a hint, as `no_flush`.
        if self.fs.no_access.load(Ordering::Relaxed) {
            return Ok(());
        }
        let arg = abi::AccessIn {
            mask: mask & MAY_RWX,
            padding: 0,
        };
        let creds = self.fs.creds_of(cred);
        let r = self
            .fs
            .conn
            .request(opcode::FUSE_ACCESS, self.nodeid, creds, &[arg.as_bytes()]);
        match r {
            Ok(r) if r.is_empty() => Ok(()),
            Ok(_) => Err(proto_error(&self.fs.conn)),
            Err(Errno::ENOSYS) => {
                // Relaxed: as above.
                self.fs.no_access.store(true, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// GETATTR (`fuse_do_getattr`).
    fn refresh(&self, inode: &Inode) -> Result<()> {
        let arg = abi::GetattrIn::default();
        let ver = self.fs.attr_version_now();
        // Relaxed: a hint (see `invalidate_atime`); a READ racing this GETATTR may leave
        // the atime it moved unseen until the next one, as on Linux.
        if self.atime_stale.load(Ordering::Relaxed) {
            // Relaxed: as above.
            self.atime_stale.store(false, Ordering::Relaxed);
        }
        let r = self
            .fs
            .req(opcode::FUSE_GETATTR, self.nodeid, &[arg.as_bytes()])?;
        self.attr_reply(inode, &r, ver)
    }

    /// SETATTR with `arg` (`fuse_do_setattr`). With `store`, the reply's attributes are
    /// stored (truncate); without (`->setattr`, called under the inode's attribute lock,
    /// after which the VFS stores the values it set), only checked, and the cached
    /// attributes dropped so that the next `stat` asks for the server's times.
    fn setattr_req(&self, inode: &Inode, arg: &abi::SetattrIn, store: bool) -> Result<()> {
        self.fs.writable()?;
        let r = self
            .fs
            .req(opcode::FUSE_SETATTR, self.nodeid, &[arg.as_bytes()])?;
        if store {
            return self.attr_reply(inode, &r, 0);
        }
        let a: abi::AttrOut = reply(&self.fs.conn, &r)?;
        if a.attr.mode & S_IFMT != inode.mode() & S_IFMT {
            // As in `attr_reply`.
            return Err(proto_error(&self.fs.conn));
        }
        self.invalidate_attrs();
        Ok(())
    }

    /// A creating request's entry reply as the new inode.
    fn entry_reply(&self, dev: u64, r: &[u8]) -> Result<Arc<Inode>> {
        let e: abi::EntryOut = reply(&self.fs.conn, r)?;
        self.invalidate_attrs();
        self.fs.inode_for(dev, &e, 0)?.ok_or_else(|| {
            // A creation answered with a negative entry.
            proto_error(&self.fs.conn)
        })
    }
}

impl InodeOps for FuseInode {
    /// The target, READLINK the first time (`fuse_get_link`), not when the inode is made:
    /// a symlink whose READLINK fails can still be `lstat`ed, renamed and unlinked, as on
    /// Linux.
    ///
    /// # Errors
    /// `EINVAL` for a non-symlink; the server's; `EIO` for a target no symlink can have
    /// (empty, `PATH_MAX` bytes or more, a NUL), counted.
    fn get_link<'a>(&'a self, inode: &Inode) -> Result<&'a [u8]> {
        if let Some(t) = self.target.get() {
            return Ok(t);
        }
        if !inode.is_symlink() {
            return Err(Errno::EINVAL);
        }
        let t = self.fs.req(opcode::FUSE_READLINK, self.nodeid, &[])?;
        if t.is_empty() || t.len() >= PATH_MAX || t.contains(&0) {
            return Err(proto_error(&self.fs.conn));
        }
        // A racing reader may have set it first: the same node's target either way.
        Ok(self.target.get_or_init(|| t.into_boxed_slice()))
    }

    /// The target READLINK gave (kept for the node's life), else `ECHILD`: a READLINK
    /// would block (`fuse_get_link` without a dentry).
    fn get_link_rcu<'a>(&'a self, inode: &Inode) -> Result<&'a [u8]> {
        match self.target.get() {
            Some(t) => Ok(t),
            None if !inode.is_symlink() => Err(Errno::EINVAL),
            None => Err(Errno::ECHILD),
        }
    }

    /// `fuse_permission`. By default (`default_permissions`): the mode bits, in attributes
    /// refreshed first when past `attr_valid`, and refreshed once more before `EACCES` if
    /// they were not ("If permission is denied, try to refresh file attributes": a mode
    /// the server widened is seen at once; one it narrowed only after the timeout, as on
    /// Linux). With [`FuseClientOptions::server_permissions`]: access(2), chdir(2),
    /// fchdir(2) and chroot(2) ask the server (`fuse_access`); an execute check of a
    /// regular file needs an execute bit, in attributes refreshed when stale (and once
    /// more before `EACCES` if they were not); every other check is the server's when the
    /// operation reaches it.
    fn permission(&self, inode: &Inode, cred: &Cred, mask: u32) -> Result<()> {
        // `MAY_NOT_BLOCK` (a pinned walk): a GETATTR would block, so `ECHILD` instead of
        // each refresh (`fuse_permission`'s `-ECHILD` under `MAY_NOT_BLOCK`).
        let may_block = mask & MAY_NOT_BLOCK == 0;
        if !self.fs.opts.server_permissions {
            let refreshed = !self.attrs_fresh();
            if refreshed {
                if !may_block {
                    return Err(Errno::ECHILD);
                }
                self.refresh(inode)?;
            }
            return match inode.generic_permission(cred, mask) {
                Err(Errno::EACCES) if !refreshed => {
                    if !may_block {
                        return Err(Errno::ECHILD);
                    }
                    self.refresh(inode)?;
                    inode.generic_permission(cred, mask)
                }
                r => r,
            };
        }
        if mask & (MAY_ACCESS | MAY_CHDIR) != 0 {
            return self.access(cred, mask);
        }
        if mask & MAY_EXEC != 0 && inode.is_reg() {
            // Stale attributes are refreshed; fresh ones without an execute bit are asked
            // once more before EACCES (`fuse_perm_getattr`): one GETATTR at most.
            if !self.attrs_fresh() || inode.mode() & 0o111 == 0 {
                if !may_block {
                    return Err(Errno::ECHILD);
                }
                self.refresh(inode)?;
            }
            if inode.mode() & 0o111 == 0 {
                return Err(Errno::EACCES);
            }
        }
        Ok(())
    }

    /// LOOKUP (`fuse_lookup`).
    fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<Option<Arc<Inode>>> {
        let n = cname(name)?;
        let ver = self.fs.attr_version_now();
        match self.fs.req(opcode::FUSE_LOOKUP, self.nodeid, &[&n]) {
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e),
            Ok(r) => {
                let e: abi::EntryOut = reply(&self.fs.conn, &r)?;
                let i = self.fs.inode_for(dir.i_dev, &e, ver)?;
                if i.is_some() {
                    // `fuse_advise_use_readdirplus`: names are being looked up here.
                    self.advise_readdirplus();
                }
                Ok(i)
            }
        }
    }

    /// Trusts an entry within its `entry_valid`; otherwise (off the lock-free walk) LOOKUP:
    /// valid while the name holds the same node (`fuse_dentry_revalidate`).
    fn revalidate(&self, dir: &Inode, name: &[u8], child: &Inode, rcu: bool) -> Result<bool> {
        let c = fuse(child)?;
        if c.entry_fresh() {
            // `fuse_dentry_revalidate`: the first walk through an entry a READDIRPLUS
            // linked advises the directory's next listing call to be one too. Relaxed:
            // hints (tested first: a walk writes no line in the common case).
            if c.init_rdplus.load(Ordering::Relaxed) && c.init_rdplus.swap(false, Ordering::Relaxed)
            {
                self.advise_readdirplus();
            }
            return Ok(true);
        }
        if rcu {
            return Err(Errno::ECHILD);
        }
        match self.lookup(dir, name)? {
            Some(i) => Ok(std::ptr::eq(&*i, child)),
            None => Ok(false),
        }
    }

    /// LINK. Called under `inode`'s attribute lock (`Inode::link_inc`), so the reply's
    /// attributes are not stored (the VFS raises the link count; the next `stat` asks).
    fn link(&self, _dir: &Inode, name: &[u8], inode: &Inode) -> Result<()> {
        self.fs.writable()?;
        let fi = fuse(inode)?;
        let arg = abi::LinkIn {
            oldnodeid: fi.nodeid,
        };
        let n = cname(name)?;
        let r = self
            .fs
            .req(opcode::FUSE_LINK, self.nodeid, &[arg.as_bytes(), &n])
            .inspect_err(|&e| {
                // Either node may be the stale one (`req` marked the directory).
                if e == Errno::ESTALE {
                    self.fs.stale(fi.nodeid);
                }
            })?;
        let e: abi::EntryOut = reply(&self.fs.conn, &r)?;
        if e.nodeid != fi.nodeid || e.generation != fi.generation {
            // The server made the link a node of its own (or none): not a hard link. A
            // lookup it counted for a node id is given back.
            if e.nodeid != 0 && e.nodeid != abi::FUSE_ROOT_ID {
                self.fs.conn.forget(e.nodeid, 1);
            }
            return Err(proto_error(&self.fs.conn));
        }
        // Relaxed: a count only the inode's drop reads.
        fi.nlookup.fetch_add(1, Ordering::Relaxed);
        fi.entry_seen(&e);
        fi.invalidate_attrs();
        self.invalidate_attrs();
        Ok(())
    }

    /// UNLINK.
    fn unlink(&self, _dir: &Inode, name: &[u8], victim: &Inode) -> Result<()> {
        self.fs.writable()?;
        let n = cname(name)?;
        self.fs.req(opcode::FUSE_UNLINK, self.nodeid, &[&n])?;
        self.invalidate_attrs();
        fuse(victim)?.invalidate_attrs();
        Ok(())
    }

    /// RMDIR.
    fn rmdir(&self, _dir: &Inode, name: &[u8], victim: &Inode) -> Result<()> {
        self.fs.writable()?;
        let n = cname(name)?;
        self.fs.req(opcode::FUSE_RMDIR, self.nodeid, &[&n])?;
        self.invalidate_attrs();
        fuse(victim)?.invalidate_attrs();
        Ok(())
    }

    /// RENAME, or RENAME2 with flags (`fuse_rename2`: a server without RENAME2 gives
    /// `EINVAL` for flags, as Linux's `fc->no_rename2`).
    fn rename(
        &self,
        _odir: &Inode,
        oname: &[u8],
        ndir: &Inode,
        nname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        self.fs.writable()?;
        let nd = fuse(ndir)?;
        let (o, n) = (cname(oname)?, cname(nname)?);
        // Either directory may be the stale one (`req` marks the old one).
        let stale_new = |e: &Errno| {
            if *e == Errno::ESTALE {
                self.fs.stale(nd.nodeid);
            }
        };
        if flags.is_empty() {
            let arg = abi::RenameIn { newdir: nd.nodeid };
            self.fs
                .req(opcode::FUSE_RENAME, self.nodeid, &[arg.as_bytes(), &o, &n])
                .inspect_err(stale_new)?;
        } else {
            let arg = abi::Rename2In {
                newdir: nd.nodeid,
                flags: flags.bits(),
                padding: 0,
            };
            match self
                .fs
                .req(opcode::FUSE_RENAME2, self.nodeid, &[arg.as_bytes(), &o, &n])
                .inspect_err(stale_new)
            {
                Err(Errno::ENOSYS) => return Err(Errno::EINVAL),
                r => r?,
            };
        }
        self.invalidate_attrs();
        nd.invalidate_attrs();
        // The moved entries (and a replaced one) are checked again at their next walk.
        // Relaxed: a hint, as `notify`.
        self.fs.inval_gen.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// SETATTR of mode, owner and times.
    fn setattr(&self, inode: &Inode, attr: &SetAttr) -> Result<()> {
        let mut arg = abi::SetattrIn::default();
        if let Some(m) = attr.mode {
            arg.valid |= fattr::FATTR_MODE;
            arg.mode = (inode.mode() & S_IFMT) | (m & 0o7777);
        }
        if let Some(u) = attr.uid {
            arg.valid |= fattr::FATTR_UID;
            arg.uid = u;
        }
        if let Some(g) = attr.gid {
            arg.valid |= fattr::FATTR_GID;
            arg.gid = g;
        }
        if let Some(t) = attr.atime {
            arg.valid |= fattr::FATTR_ATIME;
            if attr.atime_now {
                arg.valid |= fattr::FATTR_ATIME_NOW;
            }
            arg.atime = t.tv_sec as u64;
            arg.atimensec = t.tv_nsec as u32;
        }
        if let Some(t) = attr.mtime {
            arg.valid |= fattr::FATTR_MTIME;
            if attr.mtime_now {
                arg.valid |= fattr::FATTR_MTIME_NOW;
            }
            arg.mtime = t.tv_sec as u64;
            arg.mtimensec = t.tv_nsec as u32;
        }
        // Nothing to change (`chown(-1, -1)`): SETATTR with `valid` 0, as Linux sends it; the
        // server stamps the ctime (or not) as it does for the kernel.
        self.setattr_req(inode, &arg, false)
    }

    /// `fuse_setattr` without `FUSE_HANDLE_KILLPRIV` (never offered): "ia_mode calculation
    /// may have used stale i_mode. Refresh and recalculate." A GETATTR whatever the
    /// attributes' age, then set-user-ID if set, and set-group-ID only when
    /// group-executable (`S_ISGID | S_IXGRP`: not for a caller outside the group, as the
    /// VFS's own rule would).
    fn setid_kill(&self, inode: &Inode) -> Result<Option<u32>> {
        self.refresh(inode)?;
        let mode = inode.mode();
        let mut kill = mode & S_ISUID;
        if mode & (S_ISGID | S_IXGRP) == S_ISGID | S_IXGRP {
            kill |= S_ISGID;
        }
        Ok(Some(kill))
    }

    /// `fuse_update_get_attr`: of `mask`, the basic stats and the birth time count (the
    /// birth time only while the server may have STATX). Nothing of those wanted, or
    /// `AT_STATX_DONT_SYNC`: the cache answers, however old. `AT_STATX_FORCE_SYNC`, a
    /// birth time never asked, an atime a READ may have moved, or attributes past
    /// `attr_valid`: the server is asked, by STATX when the birth time is wanted
    /// (`fuse_do_statx`; `sx_mask` basic stats and birth time, as Linux asks; its
    /// attributes are stored as GETATTR's; `ENOSYS`: never asked again, Linux's
    /// `fc->no_statx`, and GETATTR instead), else GETATTR. The birth time returned: a
    /// STATX reply's when it has one; from the cache, the last one a stored reply gave
    /// (whatever `mask` asked, as Linux's); after GETATTR, none.
    ///
    /// A STATX reply without every basic stat is not stored (Linux's rule); uvfs then asks
    /// GETATTR for them, where Linux reports the reply's fields alone.
    ///
    /// # Errors
    /// `EIO` for a reply of another file type or a short one (counted); the server's.
    fn statx(
        &self,
        inode: &Inode,
        mask: u32,
        sync: crate::stat::StatxSync,
    ) -> Result<Option<crate::types::Timespec>> {
        use crate::stat::{StatxSync, STATX_ATIME, STATX_BASIC_STATS, STATX_BTIME, STATX_TYPE};
        let mut want = mask & (STATX_BASIC_STATS | STATX_BTIME);
        loop {
            // Relaxed: a sticky hint.
            if self.fs.no_statx.load(Ordering::Relaxed) {
                want &= STATX_BASIC_STATS;
            }
            let cached = *plock(&self.btime);
            let ask = want != 0
                && match sync {
                    StatxSync::Force => true,
                    StatxSync::Dont => false,
                    // Relaxed: a hint, as in `getattr`.
                    StatxSync::AsStat => {
                        (want & STATX_BTIME != 0 && !cached.asked)
                            || (want & STATX_ATIME != 0 && self.atime_stale.load(Ordering::Relaxed))
                            || !self.attrs_fresh()
                    }
                };
            if !ask {
                return Ok(cached.known);
            }
            if want & STATX_BTIME == 0 {
                self.refresh(inode)?;
                return Ok(None);
            }
            let arg = abi::StatxIn {
                sx_mask: STATX_BASIC_STATS | STATX_BTIME,
                ..Default::default()
            };
            let ver = self.fs.attr_version_now();
            // Relaxed: as in `refresh`.
            let atime_stale = self.atime_stale.load(Ordering::Relaxed);
            if atime_stale {
                // Relaxed: as above.
                self.atime_stale.store(false, Ordering::Relaxed);
            }
            let r = match self
                .fs
                .req(opcode::FUSE_STATX, self.nodeid, &[arg.as_bytes()])
            {
                Err(Errno::ENOSYS) => {
                    // Relaxed: as above.
                    self.fs.no_statx.store(true, Ordering::Relaxed);
                    if atime_stale {
                        // The retry's GETATTR is still owed the atime (Linux's
                        // `inval_mask` keeps `STATX_ATIME`).
                        // Relaxed: as above.
                        self.atime_stale.store(true, Ordering::Relaxed);
                    }
                    continue;
                }
                r => r?,
            };
            let x: abi::StatxOut = reply(&self.fs.conn, &r)?;
            let sx = &x.stat;
            if sx.mask & STATX_TYPE != 0 && u32::from(sx.mode) & S_IFMT != inode.mode() & S_IFMT {
                // As `fuse_do_statx`'s `inode_wrong_type` (which marks the inode bad).
                return Err(proto_error(&self.fs.conn));
            }
            let b = (sx.mask & STATX_BTIME != 0).then(|| crate::types::Timespec {
                tv_sec: sx.btime.tv_sec,
                tv_nsec: i64::from(sx.btime.tv_nsec.min(999_999_999)),
            });
            if sx.mask & STATX_BASIC_STATS != STATX_BASIC_STATS {
                self.refresh(inode)?;
                return Ok(b);
            }
            if self.store_attrs(inode, &statx_attr(sx), ver) {
                // Relaxed: a hint, as in `attr_reply`.
                self.attr_until
                    .store(deadline(x.attr_valid, x.attr_valid_nsec), Ordering::Relaxed);
                // `fuse_change_attributes_common` with a `fuse_statx`.
                let mut c = plock(&self.btime);
                c.asked = true;
                if b.is_some() {
                    c.known = b;
                }
            }
            return Ok(b);
        }
    }

    /// GETATTR, unless the attributes are within `attr_valid`.
    fn getattr(&self, inode: &Inode) -> Result<()> {
        // Relaxed: a hint.
        if self.attrs_fresh() && !self.atime_stale.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.refresh(inode)
    }

    /// SETATTR with `FATTR_SIZE`; for `ftruncate` and `O_TRUNC` (`stamp`) also
    /// `FATTR_MTIME | FATTR_MTIME_NOW`, as Linux's `do_truncate` passes `ATTR_MTIME |
    /// ATTR_CTIME` for them (so the server stamps the times even when the size does not
    /// change); for truncate(2) the size alone, and the server decides. Through an open
    /// file (`fh`), `FATTR_FH` with the server's handle (`fuse_do_setattr` with a `file`),
    /// so that the server truncates what is open (a file opened for writing whose mode no
    /// longer allows it: passthrough_ll then uses its descriptor). No `FATTR_LOCKOWNER`:
    /// uvfs keeps POSIX locks itself and names no lock owner on the wire.
    fn truncate(
        &self,
        inode: &Inode,
        len: u64,
        now: Timespec,
        stamp: bool,
        fh: Option<u64>,
    ) -> Result<()> {
        if !inode.is_reg() {
            return Err(crate::fs::not_regular(inode));
        }
        let mut arg = abi::SetattrIn {
            valid: fattr::FATTR_SIZE,
            size: len,
            ..Default::default()
        };
        if let Some(h) = fh {
            arg.valid |= fattr::FATTR_FH;
            arg.fh = self.fh(inode, h)?;
        }
        if stamp {
            // The time too, as Linux's `iattr_to_fattr`, for a server that honours
            // FATTR_MTIME but not FATTR_MTIME_NOW.
            arg.valid |= fattr::FATTR_MTIME | fattr::FATTR_MTIME_NOW;
            arg.mtime = now.tv_sec as u64;
            arg.mtimensec = now.tv_nsec as u32;
        }
        let r = self.setattr_req(inode, &arg, true);
        // A size change (Linux's `fuse_do_setattr` bumps `attr_version`): a GETATTR reply
        // asked for before it is not stored over the new size.
        self.bump_version();
        r
    }

    /// GETXATTR (`fuse_getxattr`): with `buf`, its length as the size (the server answers
    /// `ERANGE` when the value does not fit); without, size 0 and the length the server
    /// reports.
    fn getxattr(&self, _inode: &Inode, name: &[u8], buf: Option<&mut [u8]>) -> Result<usize> {
        let n = cname(name)?;
        // An empty buffer asks for the length, as size 0 does in getxattr(2).
        let buf = buf.filter(|b| !b.is_empty());
        let size = buf
            .as_ref()
            .map_or(0, |b| b.len().min(crate::xattr::XATTR_SIZE_MAX));
        let arg = abi::GetxattrIn {
            size: size as u32,
            padding: 0,
        };
        let r = self.xattr_req(opcode::FUSE_GETXATTR, &[arg.as_bytes(), &n])?;
        self.xattr_reply(r, buf)
    }

    /// SETXATTR (the 8-byte `fuse_setxattr_in` of servers without `FUSE_SETXATTR_EXT`,
    /// which uvfs does not offer) or, for `None`, REMOVEXATTR.
    fn setxattr(
        &self,
        _inode: &Inode,
        name: &[u8],
        value: Option<&[u8]>,
        flags: u32,
    ) -> Result<()> {
        self.fs.writable()?;
        let n = cname(name)?;
        match value {
            Some(v) => {
                let arg = abi::SetxattrIn {
                    size: v.len() as u32,
                    flags,
                    ..Default::default()
                };
                let head = &arg.as_bytes()[..8];
                self.xattr_req(opcode::FUSE_SETXATTR, &[head, &n, v])?;
            }
            None => {
                self.xattr_req(opcode::FUSE_REMOVEXATTR, &[&n])?;
            }
        }
        // The server stamped the ctime.
        self.invalidate_attrs();
        Ok(())
    }

    /// LISTXATTR: the whole list (its length first), without `trusted.*` names for a
    /// caller who may not see them (the server may run with more rights than the caller,
    /// as uvfs's own and `passthrough_ll` as root do), into `buf` or as a length.
    fn listxattr(&self, _inode: &Inode, buf: Option<&mut [u8]>, trusted: bool) -> Result<usize> {
        let ask = |size: usize| {
            let arg = abi::GetxattrIn {
                size: size as u32,
                padding: 0,
            };
            self.xattr_req(opcode::FUSE_LISTXATTR, &[arg.as_bytes()])
        };
        // The length, then the list; a list that grew in between (ERANGE) is asked for
        // again, a few times (the caller asked for no size of ours).
        let mut all = Vec::new();
        let mut got = 0;
        for attempt in 0.. {
            // `xattr_reply` caps the length at XATTR_LIST_MAX, as `fuse_listxattr` does.
            let len = self.xattr_reply(ask(0)?, None)?;
            if len == crate::xattr::XATTR_LIST_MAX {
                // Maybe longer than any list may be: as Linux's caller, ask for that much
                // and let the server say ERANGE (which `listxattr` turns into E2BIG for a
                // buffer of XATTR_LIST_MAX bytes); the length query answers the cap.
                match buf.as_ref().map(|b| b.len()) {
                    None => return Ok(len),
                    Some(n) if n < len => return Err(Errno::ERANGE),
                    Some(_) => {}
                }
            }
            all = vec![0u8; len];
            if len == 0 {
                break;
            }
            match ask(len) {
                Err(Errno::ERANGE) if attempt < 3 && len < crate::xattr::XATTR_LIST_MAX => continue,
                r => got = self.xattr_reply(r?, Some(&mut all))?,
            }
            break;
        }
        // `fuse_verify_xattr_list`: NUL-terminated names, none empty.
        if (got > 0 && all[got - 1] != 0)
            || all[..got]
                .split_inclusive(|&c| c == 0)
                .any(|e| e.len() == 1)
        {
            return Err(proto_error(&self.fs.conn));
        }
        crate::xattr::filter_list(&all[..got], buf, trusted)
    }

    /// STATFS (`fuse_statfs`).
    fn statfs(&self, _inode: &Inode) -> Result<StatFs> {
        let r = self.fs.req(opcode::FUSE_STATFS, self.nodeid, &[])?;
        let s: abi::StatfsOut = reply(&self.fs.conn, &r)?;
        let st = s.st;
        Ok(StatFs {
            f_type: FUSE_SUPER_MAGIC,
            f_bsize: st.bsize as i64,
            f_blocks: st.blocks,
            f_bfree: st.bfree,
            f_bavail: st.bavail,
            f_files: st.files,
            f_ffree: st.ffree,
            // `convert_fuse_statfs` sets none (measured on a kernel FUSE mount: 0:0).
            f_fsid: [0, 0],
            f_namelen: st.namelen as i64,
            f_frsize: st.frsize as i64,
            // relatime: Linux's default for a new mount, FUSE's included (the atime itself
            // is the server's).
            f_flags: crate::statfs::ST_VALID
                | crate::types::ST_RELATIME
                | if self.fs.opts.read_only { 1 } else { 0 },
        })
    }
}

impl FuseInode {
    /// The server's `fh` of the open file whose uvfs handle is `handle` (see `files`):
    /// a directory's is the server's own.
    fn fh(&self, inode: &Inode, handle: u64) -> Result<u64> {
        if !inode.is_reg() {
            return Ok(handle);
        }
        plock(&self.files).get(slot_of(handle)).ok_or(Errno::EBADF)
    }

    /// READ of `buf.len()` bytes at `off` on the server's handle `fh`, in pieces of at
    /// most `max_read` bytes (`fuse_direct_io`); a short piece is the end of file.
    fn read_direct(&self, fh: u64, buf: &mut [u8], off: u64) -> Result<usize> {
        let max = self.fs.conn.negotiated().max_read;
        let mut done = 0;
        while done < buf.len() {
            let want = (buf.len() - done).min(max);
            let arg = abi::ReadIn {
                fh,
                offset: off + done as u64,
                size: want as u32,
                ..Default::default()
            };
            let r = match self
                .fs
                .req(opcode::FUSE_READ, self.nodeid, &[arg.as_bytes()])
            {
                Ok(r) => {
                    self.invalidate_atime();
                    r
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            };
            if r.len() > want {
                return Err(proto_error(&self.fs.conn));
            }
            buf[done..done + r.len()].copy_from_slice(&r);
            done += r.len();
            if r.len() < want {
                break;
            }
        }
        Ok(done)
    }

    /// A read through the page cache (`fuse_cache_read_iter` -> `filemap_read`): the
    /// size is refreshed first if the read reaches past it (or, with `auto_inval_data`,
    /// always) and the attributes are past `attr_valid`; the read stops at the size;
    /// cached pages are copied, each miss is one READ (`fill`).
    fn read_cached(&self, inode: &Inode, handle: u64, buf: &mut [u8], off: u64) -> Result<usize> {
        let len = buf.len() as u64;
        if (self.fs.auto_inval_data() || off.saturating_add(len) > inode.size())
            && !self.attrs_fresh()
        {
            self.refresh(inode)?;
        }
        let size = inode.size();
        if off >= size || buf.is_empty() {
            return Ok(0);
        }
        let end = size.min(off.saturating_add(len));
        let ps = PAGE_SIZE as u64;
        let mut pos = off;
        while pos < end {
            {
                let g = epoch::pin();
                let token = self.pages.token();
                while pos < end {
                    let (idx, in_page) = (pos / ps, (pos % ps) as usize);
                    let want = (ps - pos % ps).min(end - pos) as usize;
                    match self.fs.cache.get(token, idx, &g) {
                        Some(p) if p.bytes().len() >= in_page + want => {
                            let at = (pos - off) as usize;
                            buf[at..at + want].copy_from_slice(&p.bytes()[in_page..in_page + want]);
                            pos += want as u64;
                        }
                        _ => break,
                    }
                }
            }
            if pos >= end {
                break;
            }
            let at = (pos - off) as usize;
            match self.fill(inode, handle, pos, &mut buf[at..(end - off) as usize]) {
                Ok(0) => break,
                Ok(n) => pos += n as u64,
                Err(e) if pos == off => return Err(e),
                Err(_) => break,
            }
        }
        Ok((pos - off) as usize)
    }

    /// A read miss at `pos` (`fuse_readahead` + `fuse_send_readpages`): one READ from the
    /// start of `pos`'s page of up to [`READAHEAD_PAGES`] pages (at least what `buf`
    /// needs, at most `max_read` and the file's size); copies what `buf` wants and caches
    /// each page. Returns the bytes copied (0: the server's end of file).
    ///
    /// A READ racing a change of the file (a write, truncate or invalidation through
    /// `bump_version`) may return the old bytes: the caller gets them (its read overlapped
    /// the change, so Linux could return either), but they must not stay cached. The pages
    /// are inserted, then (a full barrier) the inode's version is compared with the one
    /// read before the READ: if it moved, the pages this call inserted are dropped again;
    /// if not, the change's bump comes after our inserts in the SeqCst order, so its drop
    /// (after its own barrier) finds them (cache.rs `FileCache::fill_commit`, the protocol
    /// in its module doc, checked by the loom model in loom_cache.rs).
    fn fill(&self, inode: &Inode, handle: u64, pos: u64, buf: &mut [u8]) -> Result<usize> {
        let ps = PAGE_SIZE as u64;
        let idx = pos / ps;
        let start = idx * ps;
        let size_pages = inode.size().div_ceil(ps);
        let max_pages = (self.fs.conn.negotiated().max_read / PAGE_SIZE).max(1) as u64;
        let need = (pos + buf.len() as u64).div_ceil(ps) - idx;
        let n = need
            .max(READAHEAD_PAGES.min(size_pages.saturating_sub(idx)))
            .min(max_pages)
            .max(1);
        // Before the READ (cache.rs, the protocol): the version, then the token.
        let ver = self.pages.version();
        let token = self.pages.token();
        let fh = self.fh(inode, handle)?;
        let want = (n * ps) as usize;
        let arg = abi::ReadIn {
            fh,
            offset: start,
            size: want as u32,
            ..Default::default()
        };
        let r = self
            .fs
            .req(opcode::FUSE_READ, self.nodeid, &[arg.as_bytes()])?;
        self.invalidate_atime();
        if r.len() > want {
            return Err(proto_error(&self.fs.conn));
        }
        let from = (pos - start) as usize;
        let copied = r.len().saturating_sub(from).min(buf.len());
        buf[..copied].copy_from_slice(&r[from..from + copied]);
        let g = epoch::pin();
        self.pages
            .fill_commit(&self.fs.cache, token, ver, idx, r.chunks(PAGE_SIZE), &g);
        Ok(copied)
    }
}

impl FileOps for FuseInode {
    /// OPEN or OPENDIR (`fuse_open_common`) with the open flags less those the VFS
    /// handles (`O_CREAT`, `O_EXCL`, `O_NOCTTY`; `O_TRUNC` without `FUSE_ATOMIC_O_TRUNC`);
    /// the server's `fh` is the file's handle. An OPEN that carried `O_TRUNC` (the server
    /// truncated) leaves size 0, no cached page and stale attributes behind
    /// (`fuse_do_setattr`'s `ATTR_OPEN` case and `fuse_truncate_update_attr`). The open
    /// that made the file (`created`) takes the handle CREATE or TMPFILE answered, when
    /// one did (no OPEN). Device nodes, FIFOs and sockets are not opened on the server
    /// (Linux: their own fops).
    fn open(&self, inode: &Inode, flags: OpenFlags, created: bool) -> Result<u64> {
        let op = if inode.is_dir() {
            opcode::FUSE_OPENDIR
        } else if inode.is_reg() {
            opcode::FUSE_OPEN
        } else {
            return Ok(0);
        };
        let acc = flags.access_mode();
        if acc != 0 || flags.contains(OpenFlags::TRUNC) {
            self.fs.writable()?;
        }
        // The open that follows a CREATE or TMPFILE: its reply opened the file.
        let created = match op == opcode::FUSE_OPEN && created {
            true => plock(&self.files).created.take(),
            false => None,
        };
        let o = match created {
            Some(o) => o,
            None => {
                let mut strip = OpenFlags::CREAT | OpenFlags::EXCL | OpenFlags::NOCTTY;
                if op != opcode::FUSE_OPEN || !self.atomic_o_trunc(inode) {
                    strip |= OpenFlags::TRUNC;
                }
                let arg = abi::OpenIn {
                    flags: (flags - strip).bits() & !(OpenFlags::CLOEXEC.bits()),
                    open_flags: 0,
                };
                let r = self.fs.req(op, self.nodeid, &[arg.as_bytes()]);
                let trunc = !strip.contains(OpenFlags::TRUNC) && flags.contains(OpenFlags::TRUNC);
                if trunc {
                    // The server may have truncated, whatever the answer: a read miss in
                    // flight drops what it fetched, and the cached pages and attributes
                    // go (the next `stat` asks).
                    self.bump_version();
                    self.invalidate_data();
                    self.invalidate_attrs();
                }
                let o = reply::<abi::OpenOut>(&self.fs.conn, &r?)?;
                if trunc {
                    // It did: the size is 0 until the next GETATTR.
                    // Relaxed: a snapshot, as the size a WRITE grows (`write_at`).
                    inode.i_size.store(0, Ordering::Relaxed);
                }
                o
            }
        };
        if op == opcode::FUSE_OPENDIR {
            return Ok(o.fh);
        }
        // `fuse_finish_open`: the cached data goes unless the server keeps it.
        if o.open_flags & fopen::FOPEN_KEEP_CACHE == 0 {
            self.invalidate_data();
        }
        let direct = o.open_flags & fopen::FOPEN_DIRECT_IO != 0
            || flags.contains(OpenFlags::DIRECT)
            || !self.fs.cache.enabled()
            || self.fs.conn.negotiated().max_read < PAGE_SIZE;
        let slot = plock(&self.files).add(&o);
        Ok((slot as u64) << 1 | direct as u64)
    }

    /// Whether the server accepted `FUSE_ATOMIC_O_TRUNC` (`fc->atomic_o_trunc`).
    fn atomic_o_trunc(&self, inode: &Inode) -> bool {
        inode.is_reg() && self.fs.conn.negotiated().flags & init::FUSE_ATOMIC_O_TRUNC != 0
    }

    /// The RELEASE of the handle CREATE or TMPFILE answered, if no open took it.
    fn release_created(&self, _inode: &Inode) {
        if let Some(o) = plock(&self.files).created.take() {
            send_release(&self.fs.conn, opcode::FUSE_RELEASE, self.nodeid, o.fh);
        }
    }

    /// `FOPEN_NONSEEKABLE` in OPEN's reply (`fuse_finish_open`: `nonseekable_open`).
    fn nonseekable(&self, inode: &Inode, fh: u64) -> bool {
        inode.is_reg() && plock(&self.files).open_flags(slot_of(fh)) & fopen::FOPEN_NONSEEKABLE != 0
    }

    /// `FOPEN_STREAM` in OPEN's reply (`fuse_finish_open`: `stream_open`): READs and
    /// WRITEs carry offset 0, as Linux's.
    fn stream(&self, inode: &Inode, fh: u64) -> bool {
        inode.is_reg() && plock(&self.files).open_flags(slot_of(fh)) & fopen::FOPEN_STREAM != 0
    }

    /// FLUSH (`fuse_flush`); a server without it (`ENOSYS`) is not asked again, nor for an
    /// open file whose OPEN answered `FOPEN_NOFLUSH`.
    fn flush(&self, inode: &Inode, fh: u64) -> Result<()> {
        // Relaxed: a sticky hint.
        if !inode.is_reg() || self.fs.no_flush.load(Ordering::Relaxed) {
            return Ok(());
        }
        if plock(&self.files).open_flags(slot_of(fh)) & fopen::FOPEN_NOFLUSH != 0 {
            return Ok(());
        }
        let fh = self.fh(inode, fh)?;
        let arg = abi::FlushIn {
            fh,
            ..Default::default()
        };
        match self
            .fs
            .req(opcode::FUSE_FLUSH, self.nodeid, &[arg.as_bytes()])
        {
            Err(Errno::ENOSYS) => {
                // Relaxed: as above.
                self.fs.no_flush.store(true, Ordering::Relaxed);
                Ok(())
            }
            r => r.map(drop),
        }
    }

    /// RELEASE or RELEASEDIR (`fuse_release`), sent in the background (not waited for:
    /// the last close may run where a lock-free walk is pinned, and a server that never
    /// answers must not hold that up); its answer has no caller. Its header carries no
    /// credentials (uid, gid, pid 0), as Linux's (`fuse_prepare_release`: `nocreds`): the
    /// last close may be any task's, whose ids say nothing about the open file.
    fn release(&self, inode: &Inode, fh: u64) {
        let op = if inode.is_dir() {
            opcode::FUSE_RELEASEDIR
        } else if inode.is_reg() {
            opcode::FUSE_RELEASE
        } else {
            return;
        };
        let fh = if inode.is_reg() {
            match plock(&self.files).remove(slot_of(fh)) {
                Some(fh) => fh,
                None => return,
            }
        } else {
            fh
        };
        send_release(&self.fs.conn, op, self.nodeid, fh);
    }

    /// Linux's FUSE directories list the server's records and seek as
    /// `generic_file_llseek` (`fuse_dir_operations`).
    fn raw_dir_listing(&self) -> bool {
        true
    }

    /// READDIR on the open directory's handle from the server's cookie `pos`: every
    /// record of the server's replies in its order, `.` and `..` too, each with the
    /// server's inode number and offset (`raw_dir_listing`; Linux `parse_dirfile`,
    /// `parse_dirplusfile`: `dir_emit` of each record, `ctx->pos = dirent->off`). At the end
    /// (an empty reply) the position stays at the last record's offset, where a later call
    /// asks again and finds nothing, as Linux's.
    fn iterate_dir(
        &self,
        dir: &Inode,
        fh: u64,
        pos: u64,
        emit: &mut DirEmit<'_>,
        link: &mut DirLink<'_>,
    ) -> Result<Option<u64>> {
        // One request per call, as Linux's `fuse_readdir_uncached`: the records that fit
        // are listed, the rest asked again from the last listed one's offset next time.
        let plus = self.use_readdirplus(pos);
        let arg = abi::ReadIn {
            fh,
            offset: pos,
            size: 8192,
            ..Default::default()
        };
        let (op, ver) = if plus {
            (opcode::FUSE_READDIRPLUS, self.fs.attr_version_now())
        } else {
            (opcode::FUSE_READDIR, 0)
        };
        let r = self.fs.req(op, self.nodeid, &[arg.as_bytes()])?;
        if r.len() > 8192 {
            if plus {
                // The lookups the records counted are given back.
                for (e, (_, _, _, name)) in abi::direntplus(&r).0 {
                    if e.nodeid != 0 && name != b"." && name != b".." {
                        self.fs.conn.forget(e.nodeid, 1);
                    }
                }
            }
            return Err(proto_error(&self.fs.conn));
        }
        self.invalidate_atime();
        let ents: Vec<abi::DirentRec<'_>> = if plus {
            let (recs, bad) = abi::direntplus(&r);
            // Every record's lookup is linked or given back, those past the caller's full
            // buffer too (`parse_dirplusfile`); on a bad record, those before it are given
            // back.
            if bad.is_some() {
                for (e, (_, _, _, name)) in recs {
                    if e.nodeid != 0 && name != b"." && name != b".." {
                        self.fs.conn.forget(e.nodeid, 1);
                    }
                }
                return Err(proto_error(&self.fs.conn));
            }
            for (e, (_, _, _, name)) in &recs {
                self.link_plus(dir.i_dev, e, name, ver, link);
            }
            recs.into_iter().map(|(_, d)| d).collect()
        } else {
            abi::dirents(&r).map_err(|_| proto_error(&self.fs.conn))?
        };
        let mut cur = pos;
        for (ino, off, ty, name) in ents {
            if off == cur {
                // A cookie that would not move the listing on: a listing that never ends
                // (Linux lists the record and the caller lists it again forever). (A cookie
                // at the top of the range, as ext4's last entry's `i64::MAX`, is the VFS's
                // end of listing.)
                return Err(proto_error(&self.fs.conn));
            }
            if !emit(name, ino, (ty & 0xf) as u8, off) {
                break;
            }
            cur = off;
        }
        Ok(Some(cur))
    }

    /// A read through the page cache (`read_cached`), or for a file opened with
    /// `O_DIRECT` or answered `FOPEN_DIRECT_IO` (or on a mount without a cache), READs of
    /// exactly the bytes asked for in pieces of at most `max_read` (`fuse_direct_io`).
    fn read_at(&self, inode: &Inode, fh: u64, buf: &mut [u8], off: u64) -> Result<usize> {
        if !inode.is_reg() {
            return Err(crate::fs::not_regular(inode));
        }
        if fh & 1 != 0 {
            let fh = self.fh(inode, fh)?;
            return self.read_direct(fh, buf, off);
        }
        self.read_cached(inode, fh, buf, off)
    }

    /// WRITE in pieces of at most `max_write` bytes, at the server's size for `append`
    /// (GETATTR first, under the inode's append lock); cut at `RLIMIT_FSIZE` and the
    /// maximum file size as Linux's `generic_write_checks`.
    fn write_at(
        &self,
        inode: &Inode,
        fh: u64,
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
        self.fs.writable()?;
        let fh = self.fh(inode, fh)?;
        let _g = append.then(|| plock(&self.append));
        let off = if append {
            self.refresh(inode)?;
            inode.size()
        } else {
            off
        };
        let max = (MAX_LFS_FILESIZE as u64).min(fsize_limit);
        if off >= max {
            return Err(Errno::EFBIG);
        }
        inode.kill_suid(cred, now)?;
        let total = (buf.len() as u64).min(max - off) as usize;
        let piece = self.fs.conn.negotiated().max_write;
        let creds = self.fs.creds_of(cred);
        let mut done = 0;
        while done < total {
            let want = (total - done).min(piece);
            let arg = abi::WriteIn {
                fh,
                offset: off + done as u64,
                size: want as u32,
                ..Default::default()
            };
            let r = self.fs.conn.request(
                opcode::FUSE_WRITE,
                self.nodeid,
                creds,
                &[arg.as_bytes(), &buf[done..done + want]],
            );
            let r = match r {
                Ok(r) => r,
                Err(e) if done == 0 => {
                    self.invalidate_attrs();
                    self.drop_range(off, off + total as u64);
                    return Err(e);
                }
                Err(_) => break,
            };
            let w: abi::WriteOut = reply(&self.fs.conn, &r)?;
            let n = w.size as usize;
            if n > want {
                return Err(proto_error(&self.fs.conn));
            }
            done += n;
            if n < want {
                break;
            }
        }
        let end = off + done as u64;
        // Write-through (Linux without `writeback_cache`): the server has the bytes; the
        // cached pages they cover go (the next read fetches them), and a read miss that
        // raced the WRITE drops what it cached (`bump_version`). The size grows first so
        // that a read after the write is not cut at the old size.
        // Relaxed: a snapshot for `lseek(SEEK_END)` and `stat` until the next refresh.
        inode.i_size.fetch_max(end, Ordering::Relaxed);
        self.drop_range(off, off + total as u64);
        self.invalidate_attrs();
        Ok((done, end))
    }

    /// FALLOCATE (`fuse_file_fallocate`; a server without it: `EOPNOTSUPP`).
    fn fallocate(
        &self,
        inode: &Inode,
        fh: u64,
        off: u64,
        len: u64,
        mode: crate::fs::FallocMode,
        keep_size: bool,
        now: Timespec,
        cred: &Cred,
        fsize_limit: u64,
    ) -> Result<()> {
        use crate::fs::FallocMode;
        if !inode.is_reg() {
            return Err(crate::fs::not_regular(inode));
        }
        self.fs.writable()?;
        // Relaxed: a sticky hint.
        if self.fs.no_fallocate.load(Ordering::Relaxed) {
            return Err(Errno::EOPNOTSUPP);
        }
        let end = off.saturating_add(len);
        if !keep_size && end > inode.size() {
            inode.newsize_ok(end, fsize_limit)?;
        }
        let fh = self.fh(inode, fh)?;
        inode.kill_suid(cred, now)?;
        let mut mode = match mode {
            FallocMode::Allocate => 0,
            FallocMode::PunchHole => FALLOC_FL_PUNCH_HOLE,
            FallocMode::ZeroRange => FALLOC_FL_ZERO_RANGE,
        };
        if keep_size {
            mode |= FALLOC_FL_KEEP_SIZE;
        }
        let arg = abi::FallocateIn {
            fh,
            offset: off,
            length: len,
            mode,
            padding: 0,
        };
        let r = self
            .fs
            .req(opcode::FUSE_FALLOCATE, self.nodeid, &[arg.as_bytes()]);
        // A punched hole or zeroed range reads as zeros now (`truncate_pagecache_range`).
        self.drop_range(off, off.saturating_add(len));
        self.invalidate_attrs();
        match r {
            Err(Errno::ENOSYS) => {
                // Relaxed: as above (`fc->no_fallocate`).
                self.fs.no_fallocate.store(true, Ordering::Relaxed);
                Err(Errno::EOPNOTSUPP)
            }
            r => r.map(drop),
        }
    }

    /// LSEEK (`fuse_lseek`); a server without it: the whole file is data, as Linux's
    /// `generic_file_llseek` after `fc->no_lseek`.
    fn seek_data_hole(&self, inode: &Inode, fh: u64, off: u64, data: bool) -> Result<u64> {
        if !inode.is_reg() {
            return Err(crate::fs::not_regular(inode));
        }
        // Relaxed: a sticky hint.
        if !self.fs.no_lseek.load(Ordering::Relaxed) {
            let fh = self.fh(inode, fh)?;
            let arg = abi::LseekIn {
                fh,
                offset: off,
                whence: if data { SEEK_DATA } else { SEEK_HOLE },
                padding: 0,
            };
            match self
                .fs
                .req(opcode::FUSE_LSEEK, self.nodeid, &[arg.as_bytes()])
            {
                // Relaxed: a sticky hint.
                Err(Errno::ENOSYS) => self.fs.no_lseek.store(true, Ordering::Relaxed),
                Err(e) => return Err(e),
                Ok(r) => return Ok(reply::<abi::LseekOut>(&self.fs.conn, &r)?.offset),
            }
        }
        self.refresh(inode)?;
        let size = inode.size();
        match (off >= size, data) {
            (true, _) => Err(Errno::ENXIO),
            (false, true) => Ok(off),
            (false, false) => Ok(size),
        }
    }

    /// FSYNC or FSYNCDIR (`fuse_fsync`); a server without it (`ENOSYS`) succeeds, as
    /// Linux's `fc->no_fsync` / `fc->no_fsyncdir` (each remembered apart).
    fn fsync(&self, inode: &Inode, fh: u64, datasync: bool) -> Result<()> {
        let (op, off) = if inode.is_dir() {
            (opcode::FUSE_FSYNCDIR, &self.fs.no_fsyncdir)
        } else if inode.is_reg() {
            (opcode::FUSE_FSYNC, &self.fs.no_fsync)
        } else {
            return Ok(());
        };
        // Relaxed: a sticky hint.
        if off.load(Ordering::Relaxed) {
            return Ok(());
        }
        let fh = self.fh(inode, fh)?;
        let arg = abi::FsyncIn {
            fh,
            fsync_flags: if datasync { FUSE_FSYNC_FDATASYNC } else { 0 },
            padding: 0,
        };
        match self.fs.req(op, self.nodeid, &[arg.as_bytes()]) {
            Err(Errno::ENOSYS) => {
                // Relaxed: as above.
                off.store(true, Ordering::Relaxed);
                Ok(())
            }
            r => r.map(drop),
        }
    }
}

/// The FUSE client file-system type: one per mount.
pub(crate) struct FuseFs {
    shared: Arc<Shared>,
}

impl fmt::Debug for FuseFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl Drop for FuseFs {
    /// The super block's last mount went (Linux `fuse_kill_sb_anon`): FORGETs, DESTROY
    /// and the connection shut now ([`Shared::destroy`]), not when the torn-down inodes
    /// are freed through the epoch (the garbage of whichever thread released the mount,
    /// which may not touch the epoch again for long).
    fn drop(&mut self) {
        self.shared.destroy();
    }
}

impl FileSystem for FuseFs {
    fn name(&self) -> &'static str {
        "fuse"
    }

    /// No: FUSE is not `FS_MGTIME` (the server's times).
    fn multigrain(&self) -> bool {
        false
    }

    /// The VFS's alone: Linux's FUSE client adds none (`fuse_fillattr`).
    fn statx_attributes_mask(&self) -> u64 {
        crate::stat::STATX_ATTR_MASK_VFS
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    /// MKNOD (a regular file too: uvfs's `open(O_CREAT)` creates, then opens, as Linux's
    /// `fuse_create_open` falls back to when CREATE is missing), MKDIR or SYMLINK, as the
    /// creating task (the header's `uid`/`gid`: its fsuid/fsgid, [`Shared::creds`]), with
    /// the mode the VFS computed (umask applied: `FUSE_DONT_MASK`, umask 0 on the wire).
    fn create(&self, dev: u64, dir: &Inode, name: &[u8], args: NewInode<'_>) -> Result<Arc<Inode>> {
        let d = fuse(dir)?;
        self.shared.writable()?;
        if name.is_empty() {
            return self.tmpfile(dev, d, &args);
        }
        let n = cname(name)?;
        let ty = args.mode & S_IFMT;
        // Relaxed: a sticky hint.
        if ty == S_IFREG
            && args.open.contains(OpenFlags::CREAT)
            && !self.shared.no_create.load(Ordering::Relaxed)
        {
            match self.create_open(dev, d, opcode::FUSE_CREATE, &n, &args) {
                Err(Errno::ENOSYS) => {
                    // Relaxed: as above.
                    self.shared.no_create.store(true, Ordering::Relaxed);
                }
                r => return r,
            }
        }
        let r = match ty {
            S_IFDIR => {
                let arg = abi::MkdirIn {
                    mode: args.mode,
                    umask: 0,
                };
                self.shared
                    .req(opcode::FUSE_MKDIR, d.nodeid, &[arg.as_bytes(), &n])?
            }
            S_IFLNK => {
                // The VFS checked the target (1 ..= PATH_MAX - 1 bytes, no NUL).
                let mut t = args.target.ok_or(Errno::EINVAL)?.to_vec();
                t.push(0);
                self.shared.req(opcode::FUSE_SYMLINK, d.nodeid, &[&n, &t])?
            }
            S_IFREG | S_IFCHR | S_IFBLK | S_IFIFO | S_IFSOCK => {
                let arg = abi::MknodIn {
                    mode: args.mode,
                    rdev: encode_dev(args.rdev),
                    umask: 0,
                    padding: 0,
                };
                self.shared
                    .req(opcode::FUSE_MKNOD, d.nodeid, &[arg.as_bytes(), &n])?
            }
            _ => return Err(Errno::EINVAL),
        };
        let i = d.entry_reply(dev, &r)?;
        if i.mode() & S_IFMT != ty {
            return Err(Errno::EIO);
        }
        Ok(i)
    }
}

impl FuseFs {
    /// `fuse_tmpfile` (Linux 6.1+): TMPFILE in `d` ([`create_open`](Self::create_open),
    /// the name `/` of the dentry `vfs_tmpfile` allocates). A server without it
    /// (`ENOSYS`) is not asked again: `EOPNOTSUPP`, as Linux's `fc->no_tmpfile`.
    ///
    /// # Errors
    /// `EOPNOTSUPP` (no TMPFILE), as `create_open`.
    fn tmpfile(&self, dev: u64, d: &FuseInode, args: &NewInode<'_>) -> Result<Arc<Inode>> {
        // Relaxed: a sticky hint.
        if self.shared.no_tmpfile.load(Ordering::Relaxed) {
            return Err(Errno::EOPNOTSUPP);
        }
        match self.create_open(dev, d, opcode::FUSE_TMPFILE, b"/\0", args) {
            Err(Errno::ENOSYS) => {
                // Relaxed: as above.
                self.shared.no_tmpfile.store(true, Ordering::Relaxed);
                Err(Errno::EOPNOTSUPP)
            }
            r => r,
        }
    }

    /// `fuse_create_open`: CREATE (`open(O_CREAT)` of the new name `n`, with its NUL) or
    /// TMPFILE in `d`, with the open's flags less `O_NOCTTY` (measured on Linux 6.18, a
    /// kernel FUSE mount of passthrough_ll: `O_CREAT`, `O_EXCL`, `O_TRUNC` unless
    /// `O_EXCL`, `O_LARGEFILE`, no `O_CLOEXEC`) and the mode the VFS computed (the umask
    /// applied already, so `umask` 0, where Linux sends the caller's: the server's result
    /// is the same either way). One request makes and opens the
    /// file: the reply's handle waits in the new inode for the open that follows
    /// ([`OpenFiles::created`]; given back at eviction if that open never comes).
    ///
    /// # Errors
    /// `ENOSYS` (the caller decides), `EIO` (a reply that is not a regular file's, or a
    /// handle for a node that has one waiting), the server's.
    fn create_open(
        &self,
        dev: u64,
        d: &FuseInode,
        op: u32,
        n: &[u8],
        args: &NewInode<'_>,
    ) -> Result<Arc<Inode>> {
        let flags = args.open - OpenFlags::NOCTTY - OpenFlags::CLOEXEC;
        let arg = abi::CreateIn {
            flags: flags.bits(),
            mode: args.mode,
            umask: 0,
            open_flags: 0,
        };
        let creds = self.shared.creds();
        let r = self
            .shared
            .conn
            .request(op, d.nodeid, creds, &[arg.as_bytes(), n])?;
        let entry = std::mem::size_of::<abi::EntryOut>();
        let Some((e, o)) = r.split_at_checked(entry) else {
            return Err(proto_error(&self.shared.conn));
        };
        let Ok(o) = abi::OpenOut::read_from_bytes(o) else {
            return Err(proto_error(&self.shared.conn));
        };
        // The handle is the server's to get back on any failure from here.
        let give_back =
            |nodeid: u64| send_release(&self.shared.conn, opcode::FUSE_RELEASE, nodeid, o.fh);
        let i = match d.entry_reply(dev, e) {
            Ok(i) if i.mode() & S_IFMT == S_IFREG => i,
            Ok(i) => {
                give_back(fuse(&i).map_or(0, |f| f.nodeid));
                return Err(Errno::EIO);
            }
            Err(err) => {
                if let Ok((eo, _)) = abi::EntryOut::read_from_prefix(e) {
                    give_back(eo.nodeid);
                }
                return Err(err);
            }
        };
        let f = fuse(&i)?;
        let mut files = plock(&f.files);
        if files.created.is_some() {
            // A node id the server gave twice: this handle has no inode of its own.
            drop(files);
            give_back(f.nodeid);
            return Err(proto_error(&self.shared.conn));
        }
        files.created = Some(o);
        drop(files);
        Ok(i)
    }
}

/// How to reach the FUSE server of a [`mount`].
#[derive(Debug)]
pub enum FuseServer {
    /// Start the program `argv[0]` with the arguments `argv[1..]`, one of which is `{}`:
    /// it is replaced by `/dev/fd/N`, the server's end of a `SOCK_SEQPACKET` socket pair
    /// (libfuse >= 3.3 serves an inherited descriptor given as its mountpoint; libfuse's
    /// examples `hello_ll` and `passthrough_ll` run unmodified this way). The process is
    /// reaped as soon as it exits (a server that forks into the background leaves no
    /// defunct process), and waited for (killed after a second) when the mount goes.
    Spawn(Vec<String>),
    /// Connect to a server listening on the Unix stream socket at this host path
    /// (libfuse's `hello_ll_uds`).
    Connect(std::path::PathBuf),
    /// Use this connected Unix socket, whose peer serves FUSE: a `SOCK_SEQPACKET` end (one
    /// message per packet, as `/dev/fuse` reads and writes them) or a `SOCK_STREAM` one
    /// (messages framed by their header's length). For a server in this process, e.g. a
    /// `fuser` `Filesystem` run with `fuser::Session::from_fd` on the
    /// other end of a `socketpair`: start it first, on its own thread, since it reads the
    /// INIT that [`mount`] sends and `mount` waits for the answer. Any other descriptor
    /// is `ENOTSOCK` or `EINVAL`.
    Socket(rustix::fd::OwnedFd),
}

/// Mounts a FUSE server's tree as a new uvfs mount whose root is the server's root node
/// (see the module doc); attach it with [`Task::mount`](crate::Task::mount).
///
/// ```no_run
/// # fn main() -> Result<(), uvfs::Errno> {
/// use uvfs::fuse::client::{mount, FuseClientOptions, FuseServer};
/// use uvfs::{MountFlags, OpenFlags, Task};
/// let task = Task::init(&uvfs::mount(Default::default()));
/// task.mkdirat(uvfs::Fd::AT_FDCWD, "/mnt", 0o755)?;
/// // libfuse's example, built from /usr/share/doc/libfuse3-dev/examples/passthrough_ll.c:
/// let argv = ["./passthrough_ll", "-o", "source=/usr/include", "{}"];
/// let server = FuseServer::Spawn(argv.map(String::from).to_vec());
/// let m = mount(server, FuseClientOptions::default())?;
/// task.mount(&m, "/mnt", MountFlags::empty())?;
/// let fd = task.open("/mnt/stdio.h", OpenFlags::RDONLY, 0)?;
/// task.close(fd)?;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// `EINVAL` (an empty `argv` or none with `{}`), `ENOENT` (no such program or socket),
/// `ECONNREFUSED`; `EPROTO` (the server answers INIT with another major, a minor below
/// 7.23, or nonsense), `ECONNABORTED` (it exits first), `ETIMEDOUT` (no answer within 30
/// s); the server's errno for the root's GETATTR, `EIO` for a malformed reply or a root
/// that is not a directory.
///
/// # References
/// fs/fuse/inode.c `fuse_fill_super`; libfuse `fuse_session_mount` (the `/dev/fd/N`
/// form).
pub fn mount(server: FuseServer, opts: FuseClientOptions) -> Result<Arc<Mount>> {
    let conn = match server {
        FuseServer::Spawn(argv) => Conn::spawn_with(&argv, opts.init_cancel)?,
        FuseServer::Connect(p) => Conn::connect_with(&p, opts.init_cancel)?,
        FuseServer::Socket(fd) => Conn::socket_with(fd, opts.init_cancel)?,
    };
    if let Some(t) = opts.request_timeout {
        conn.set_timeout(t);
    }
    conn.set_spin(opts.receive_spin.unwrap_or(DEFAULT_RECEIVE_SPIN));
    conn.set_end_mode(match opts.request_end {
        RequestEnd::Sticky => EndMode::Sticky,
        RequestEnd::Locked => EndMode::Locked,
    });
    let opts_cache_pages = opts.cache_pages.unwrap_or(DEFAULT_CACHE_PAGES);
    let shared = Arc::new(Shared {
        conn: conn.clone(),
        opts,
        inodes: Mutex::new(HashMap::new()),
        inval_gen: AtomicU64::new(0),
        no_flush: AtomicBool::new(false),
        no_fsync: AtomicBool::new(false),
        no_fsyncdir: AtomicBool::new(false),
        no_access: AtomicBool::new(false),
        destroyed: AtomicBool::new(false),
        no_lseek: AtomicBool::new(false),
        no_tmpfile: AtomicBool::new(false),
        no_create: AtomicBool::new(false),
        no_fallocate: AtomicBool::new(false),
        no_statx: AtomicBool::new(false),
        no_xattr: Default::default(),
        cache: PageCache::new(opts_cache_pages),
        next_token: AtomicU64::new(1),
        attr_version: crate::sync::AtomicU64::new(1),
        creds: (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
            rustix::process::getpid().as_raw_nonzero().get() as u32,
        ),
    });
    let weak = Arc::downgrade(&shared);
    conn.set_notify(Box::new(move |code, payload| {
        if let Some(s) = weak.upgrade() {
            s.notify(code, payload);
        }
    }));
    let arg = abi::GetattrIn::default();
    let r = shared.req(opcode::FUSE_GETATTR, abi::FUSE_ROOT_ID, &[arg.as_bytes()])?;
    let a: abi::AttrOut = reply(&conn, &r)?;
    if a.attr.mode & S_IFMT != S_IFDIR {
        return Err(Errno::EIO);
    }
    let sb = Arc::new(SuperBlock::new(Box::new(FuseFs {
        shared: shared.clone(),
    })));
    let root = Arc::new(shared.new_inode(sb.s_dev, abi::FUSE_ROOT_ID, 0, 0, &a.attr));
    fuse(&root)?
        .attr_until
        // Relaxed: not yet published.
        .store(deadline(a.attr_valid, a.attr_valid_nsec), Ordering::Relaxed);
    plock(&shared.inodes).insert(abi::FUSE_ROOT_ID, Arc::downgrade(&root));
    Ok(Mount::with_root(sb, root))
}

/// The counters of the connection behind the FUSE mount `m`: (malformed messages,
/// replies to no request), for tests and diagnostics; `None` for another file system.
pub fn conn_errors(m: &Mount) -> Option<(u64, u64)> {
    let root = &m.root().d_inode;
    let f = fuse(root).ok()?;
    let s = &f.fs.conn.stats;
    // Relaxed: diagnostic snapshots.
    Some((
        s.proto_errors.load(Ordering::Relaxed),
        s.unknown_uniques.load(Ordering::Relaxed),
    ))
}

/// Whether the FUSE server of mount `m` (made by [`mount`]) is gone, and why, in words
/// ("did not answer within the request timeout"; "closed the connection", with "; the
/// process uvfs started was killed by signal 9" or "... exited with status 1" once a
/// [`FuseServer::Spawn`] process has exited, which for a server that forks into the
/// background is the parent that exited at once): then every call under the mount fails with
/// `ENOTCONN`. `None` while it serves, or for a mount of another file system. For a
/// supervisor's log line (`uvfs mount` says it once); Linux has no counterpart (its
/// `/sys/fs/fuse/connections/N` shows only `waiting` and `abort`).
pub fn server_ended(m: &Mount) -> Option<String> {
    fuse(&m.root().d_inode).ok()?.fs.conn.ended()
}
