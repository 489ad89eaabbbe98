//! `Inode`: a file's attributes and contents (tmpfs keeps everything in memory).
//!
//! Linux analogue: `struct inode` (include/linux/fs.h), `mm/shmem.c` (tmpfs inodes,
//! `BOGO_DIRENT_SIZE`), `fs/inode.c` (`touch_atime`, `relatime_need_update`,
//! `file_update_time`, `current_time`, `inode_set_ctime_current`), fs/stat.c
//! (`fill_mg_cmtime`), kernel/time/timekeeping.c (`ktime_get_coarse_real_ts64_mg`,
//! `ktime_get_real_ts64_mg`), Documentation/filesystems/multigrain-ts.rst.
//!
//! # Timestamps (multigrain, as tmpfs since Linux 6.13)
//! Changes are stamped with the coarse realtime clock (one clock tick, a few milliseconds),
//! read once per syscall (`coarse_now`). A change in the same tick as the last one then
//! stores the value already there, so it writes nothing: no lock, no seqcount, no store
//! (test before set, lesson 3); the directory of a file created and unlinked by many
//! threads is only read. That alone would hide changes from anyone comparing timestamps, so,
//! as Linux, a `stat` marks the ctime "queried" (`I_CTIME_QUERIED`, bit 31 of the ctime's
//! nanoseconds word; set only if clear), and the next change of a queried inode whose coarse
//! time would not move the ctime takes a fine-grained time instead ([`Inode::stat`],
//! `next_ctime`), which also clears the mark. Fine-grained times raise a global floor that
//! later coarse times never go below (`MG_FLOOR`), so a file changed after another never
//! shows an earlier time. Timestamps never go backwards except when the realtime clock is
//! stepped back by a second or more (then the new clock is taken, as Linux does).
//!
//! The queried mark and the ctime are one word, as in Linux, but uvfs writers are serialised
//! by `attr_lock` and publish through the times' seqcount, so a change stores the new ctime
//! plainly instead of Linux's `cmpxchg` loop: a concurrent `stat` either marks the old value
//! (which the store then overwrites together with its mark: the new value is unseen) or
//! reads inside the writer's section and retries (its `fetch_or` is a read of the section).
//! The one race left is Linux's own: a change that found the mark clear and its coarse time
//! equal to the stored one skips, while a `stat` racing with it marks and returns that
//! same value; both calls overlap, so neither order is promised (multigrain-ts.rst,
//! "Inode Timestamp Ordering").
//!
//! # Invariants and locks
//! - `i_ino`, `i_dev` and the file type bits of `i_mode`: immutable after creation.
//! - Attributes (`i_mode` permission bits, `i_uid`, `i_gid`, `i_nlink`, times): atomics, read
//!   without locks (as `generic_fillattr` does); written under `attr_lock` (Linux: `i_rwsem`).
//!   The times are read through a `SeqCount` so a reader never sees a torn timestamp. The
//!   one write without `attr_lock` is `stat` setting `I_CTIME_QUERIED` (a `fetch_or`).
//! - `i_size`, `i_blocks`: atomics, written only under the regular file's data write lock.
//!   A directory's size is not stored: `size` derives it from the entry count (dir.rs).
//! - Directory contents: see `Dir` (dir.rs).
//!
//! Lock order: `SuperBlock::s_rename_lock` -> `DirInner` (ancestor first, else by address)
//! -> `RegData` (data `RwLock`) -> `attr_lock`.

use crate::cred::Cred;
use crate::dir::Dir;
use crate::super_block::Limits;
use crate::sync::padded::CacheLine;
use crate::sync::plain::{AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering};
use crate::sync::seqcount::SeqCount;
use crate::sync::{plock, read, write, RwLock};
use crate::types::*;
use crate::{Errno, Result};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Bytes in one page of file data.
pub const PAGE_SIZE: usize = 4096;

/// Pages `fallocate` allocates under one hold of the data lock (2 MiB).
const FALLOC_BATCH: u64 = 512;

/// `i_blocks` units (512 bytes) per page.
const BLOCKS_PER_PAGE: u64 = PAGE_SIZE as u64 / 512;
/// tmpfs accounts 20 bytes of directory size per entry (`BOGO_DIRENT_SIZE`, mm/shmem.c).
pub const BOGO_DIRENT_SIZE: u64 = 20;
/// The largest file size and offset (`MAX_LFS_FILESIZE` on 64-bit).
pub const MAX_LFS_FILESIZE: i64 = i64::MAX;
/// Maximum number of hard links to one inode (tmpfs: `~0U`).
pub const LINK_MAX: u32 = u32::MAX;

/// `I_CTIME_QUERIED`: set in the ctime's nanoseconds word by `stat` (nanoseconds need 30
/// bits), cleared by the next change of the ctime.
const I_CTIME_QUERIED: u32 = 1 << 31;

const NSEC_PER_SEC: u64 = 1_000_000_000;

/// `I_LINKABLE` in `Inode::i_state`: an inode with no links that `linkat` may still give a
/// name (Linux sets it on an `O_TMPFILE` file opened without `O_EXCL`); cleared by the first
/// successful link.
const I_LINKABLE: u32 = 1 << 0;

/// `I_FREEING` in `Inode::i_state`: a mount with limits gave this inode's pages and its
/// inode count back (no name and no open file left); `Drop` must not give them back again.
const I_FREEING: u32 = 1 << 1;

/// What `Inode::evict` gives back.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Evict {
    /// Nothing: a name or an open file is left.
    No,
    /// The pages and the inode (the first time).
    All,
    /// Pages only (the inode was given back already).
    Pages,
}

/// How far a time may trail the current ctime (or the floor) and still be taken for the
/// same moment seen through a coarser clock; a larger gap means the realtime clock was
/// stepped back. Linux keeps its floor in monotonic time so that a step moves it along; a
/// process cannot read the realtime-minus-monotonic offset atomically, so uvfs bounds the
/// lead instead: the coarse clock trails the fine one by at most a tick (at most 10 ms), and
/// after a step back of less than this, times stay at the floor until the clock catches up.
const MAX_LEAD_NS: u64 = NSEC_PER_SEC;

/// Linux `mg_floor`: the latest fine-grained timestamp handed out, in nanoseconds since the
/// epoch. Atomic; read by every [`coarse_now`], written (compare-and-swap) only by
/// `fine_now`, that is only by a change to a queried inode, so it stays a read-mostly line;
/// on a line of its own so that no hot static shares it.
static MG_FLOOR: CacheLine<AtomicU64> = CacheLine(AtomicU64::new(0));

fn clock(id: rustix::time::ClockId) -> Timespec {
    let t = rustix::time::clock_gettime(id);
    Timespec::new(t.tv_sec, t.tv_nsec as i64)
}

/// Nanoseconds since the epoch (times before 1970 count as the epoch: only the clock's
/// values, never user-set times, go through here).
fn ts_to_ns(t: Timespec) -> u64 {
    if t.tv_sec < 0 {
        0
    } else {
        t.tv_sec as u64 * NSEC_PER_SEC + t.tv_nsec as u64
    }
}

fn ns_to_ts(ns: u64) -> Timespec {
    Timespec::new((ns / NSEC_PER_SEC) as i64, (ns % NSEC_PER_SEC) as i64)
}

/// The next nanosecond after `t`.
fn ts_next(t: Timespec) -> Timespec {
    if t.tv_nsec >= NSEC_PER_SEC as i64 - 1 {
        Timespec::new(t.tv_sec + 1, 0)
    } else {
        Timespec::new(t.tv_sec, t.tv_nsec + 1)
    }
}

/// Whether `t`, earlier than `cur`, is so much earlier that the clock must have been
/// stepped back (more than `MAX_LEAD_NS`), rather than read a little before `cur` was.
fn stepped_back(cur: Timespec, t: Timespec) -> bool {
    t < cur && ts_to_ns(cur).saturating_sub(ts_to_ns(t)) >= MAX_LEAD_NS
}

/// The time one syscall stamps changes with: the coarse realtime clock (the last tick), or
/// the floor when a fine-grained stamp in this tick is later (Linux
/// `ktime_get_coarse_real_ts64_mg`). Read once per syscall and passed to every inode it
/// changes; an inode whose ctime was queried turns it into a fine-grained time itself.
#[doc(alias = "ktime_get_coarse_real_ts64_mg")]
pub(crate) fn coarse_now() -> Timespec {
    let c = clock(rustix::time::ClockId::RealtimeCoarse);
    // Relaxed: the floor is one word and publishes nothing else. A syscall that starts after
    // another finished (ordered by whatever told the caller so) sees that one's floor by
    // coherence, which is all the cross-file ordering promise needs.
    let floor = MG_FLOOR.load(Ordering::Relaxed);
    let cn = ts_to_ns(c);
    if floor > cn && floor - cn < MAX_LEAD_NS {
        ns_to_ts(floor)
    } else {
        c
    }
}

/// A fine-grained time that also becomes the floor (Linux `ktime_get_real_ts64_mg`): the
/// realtime clock, or a later floor another thread installed meanwhile (which is later than
/// anything this thread has stamped, as in Linux).
#[doc(alias = "ktime_get_real_ts64_mg")]
fn fine_now() -> Timespec {
    let f = clock(rustix::time::ClockId::Realtime);
    let fns = ts_to_ns(f);
    // Relaxed: as in `coarse_now`; the compare-and-swap below only needs the latest value.
    let mut cur = MG_FLOOR.load(Ordering::Relaxed);
    loop {
        if cur >= fns && cur - fns < MAX_LEAD_NS {
            return ns_to_ts(cur);
        }
        // Relaxed: the floor orders nothing but itself (see `coarse_now`). A floor more than
        // `MAX_LEAD_NS` ahead is a clock stepped back and is replaced.
        match MG_FLOOR.compare_exchange_weak(cur, fns, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return f,
            Err(c) => cur = c,
        }
    }
}

/// The ctime a change stamps (Linux `inode_set_ctime_current`), from the syscall's coarse
/// time `now`, the current ctime `cur`, and whether `cur` was queried; `fine` reads a
/// fine-grained time. Never earlier than `cur` unless the clock was stepped back:
/// - later than `cur`: `now` (a new tick);
/// - queried and not later: a fine-grained time, or the nanosecond after `cur` should the
///   clock not have moved past it, so that the change is visible to whoever saw `cur`;
/// - not queried and not later: `cur` (the same tick, or `now` read just before another
///   change stamped a later time): nothing to write.
fn next_ctime(
    now: Timespec,
    cur: Timespec,
    queried: bool,
    fine: impl FnOnce() -> Timespec,
) -> Timespec {
    let t = if queried && now <= cur { fine() } else { now };
    if t > cur || stepped_back(cur, t) {
        t
    } else if queried {
        ts_next(cur)
    } else {
        cur
    }
}

/// What `Inode::stamp_locked` does to atime or mtime (`ATTR_[AM]TIME`, `ATTR_[AM]TIME_SET`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum TimeUpdate {
    /// Leave it.
    Keep,
    /// The new ctime (`UTIME_NOW`, or a change to contents for mtime).
    Now,
    /// This explicit time.
    Set(Timespec),
}

#[cfg(test)]
thread_local! {
    /// Writes to an inode's shared lines by this thread (attribute lock taken, seqcount write
    /// section, queried mark set): the unit tests check that same-tick stamps write nothing.
    static SHARED_WRITES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Counts a write to an inode's shared lines (tests only).
#[inline]
fn count_write() {
    #[cfg(test)]
    SHARED_WRITES.with(|c| c.set(c.get() + 1));
}

/// What an inode is, with its type-specific contents.
pub(crate) enum InodeKind {
    /// Regular file: sparse pages.
    Reg(RwLock<RegData>),
    /// Directory.
    Dir(Box<Dir>),
    /// Symbolic link: its target, immutable.
    Symlink(Box<[u8]>),
    /// FIFO, socket or device node (`mknodat`; the type is in the mode): its device number
    /// (`st_rdev`, 0 for FIFOs and sockets), immutable. No contents.
    Special(u64),
}

/// A regular file's data: present pages by index; absent pages are holes (read as zeros).
#[derive(Default)]
pub(crate) struct RegData {
    pages: BTreeMap<u64, Box<[u8; PAGE_SIZE]>>,
}

/// Timestamps `[atime, mtime, ctime]` under a sequence counter (seconds stored as `i64`
/// bits). The ctime's nanoseconds word also holds `I_CTIME_QUERIED`.
struct Times {
    seq: SeqCount,
    sec: [AtomicU64; 3],
    nsec: [AtomicU32; 3],
}

/// An inode: identity, attributes and contents of one file.
///
/// # Refcounting
/// Held by `Arc`: by each `Dentry` naming it (open `File`s hold the dentry). An unlinked inode
/// keeps its data until the last `Arc` goes (Linux: `iput` of an inode with `i_nlink == 0`).
///
/// # Layout
/// Aligned to a cache line, so the `Arc` counts (written when dentries come and go) sit on
/// the line before it. Line 0: what every path walk and permission check reads (`i_ino`,
/// `i_dev`, mode, owner), written only by chmod/chown. Line 1: what changes write (the
/// attribute lock, times, link count). Line 2: the contents (sizes and `kind`: a regular
/// file's data lock is written by every read). Readers of line 0 keep their copy while
/// other cores change or read the file (lesson 1, applied to the inode).
#[repr(C, align(64))]
pub struct Inode {
    /// Inode number (immutable).
    pub(crate) i_ino: u64,
    /// Device number of the owning super block (immutable).
    pub(crate) i_dev: u64,
    i_mode: AtomicU32,
    i_uid: AtomicU32,
    i_gid: AtomicU32,
    /// Creation time (`statx`'s `stx_btime`; tmpfs: `i_crtime`). Immutable after creation.
    i_btime: Timespec,
    /// The mount's accounting when it has limits (`i_sb`'s `shmem_sb_info`): charged one
    /// inode and `i_blocks / 8` pages, given back by `evict` at the last unlink or close,
    /// else on drop; `None` without limits. Immutable after creation (line 0).
    i_acct: Option<Arc<Limits>>,
    _line1: CacheLine<()>,
    i_nlink: AtomicU32,
    /// State bits (`I_LINKABLE`; Linux: `i_state`). Atomic; written under `attr_lock`.
    i_state: AtomicU32,
    times: Times,
    /// Serialises attribute writers (Linux: `i_rwsem` for `notify_change`).
    attr_lock: Mutex<()>,
    /// Open files of this inode, counted only with `i_acct` (Linux: the `i_count` that a
    /// `struct file` holds through its dentry), so that an unlinked file's space comes back
    /// at its last close, not when the epoch frees a lock-free lookup's stale copy of its
    /// dentry. Written under `attr_lock` (line 1, next to it).
    i_opens: AtomicU32,
    _line2: CacheLine<()>,
    /// Size in bytes of a regular file (written under its data write lock) or symlink
    /// (immutable); unused for directories, whose size `size` derives from the entry count.
    i_size: AtomicU64,
    i_blocks: AtomicU64,
    pub(crate) kind: InodeKind,
}

impl Drop for Inode {
    fn drop(&mut self) {
        let Some(a) = &self.i_acct else { return };
        // Pages still held (`evict` and `evict_pages` leave `i_blocks` at 0, so nothing is
        // given back twice): e.g. a mount torn down with files in it, or pages written by
        // an open that raced with the last unlink. Relaxed: `&mut self`, no other access.
        a.release_blocks(self.i_blocks.load(Ordering::Relaxed) / BLOCKS_PER_PAGE);
        // Relaxed: as above.
        if self.i_state.load(Ordering::Relaxed) & I_FREEING == 0 {
            a.release_inode();
        }
    }
}

#[cfg(not(uvfs_loom))]
mod layout {
    use super::*;
    use crate::sync::padded::CACHE_LINE;
    use std::mem::{align_of, offset_of, size_of};
    crate::const_assert!(align_of::<Inode>() == CACHE_LINE);
    crate::const_assert!(offset_of!(Inode, i_gid) < CACHE_LINE);
    // Read-mostly identity and attributes, the creation time included, fill line 0 only.
    crate::const_assert!(offset_of!(Inode, i_btime) + size_of::<Timespec>() <= CACHE_LINE);
    crate::const_assert!(offset_of!(Inode, i_nlink) == CACHE_LINE);
    crate::const_assert!(offset_of!(Inode, attr_lock) < 2 * CACHE_LINE);
    // The accounting pointer (immutable) on line 0, the open count (written under
    // `attr_lock`) on line 1 with it: the inode stays three lines.
    crate::const_assert!(offset_of!(Inode, i_acct) + size_of::<usize>() <= CACHE_LINE);
    crate::const_assert!(offset_of!(Inode, i_opens) + 4 <= 2 * CACHE_LINE);
    crate::const_assert!(size_of::<Inode>() == 3 * CACHE_LINE);
    crate::const_assert!(offset_of!(Inode, i_size) == 2 * CACHE_LINE);
}

impl fmt::Debug for Inode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inode")
            .field("ino", &self.i_ino)
            .field("mode", &format_args!("{:o}", self.mode()))
            .field("nlink", &self.nlink())
            .field("size", &self.size())
            .finish()
    }
}

impl Inode {
    /// A new inode of type `mode & S_IFMT` with all three times `now` (a [`coarse_now`]:
    /// `simple_inode_init_ts` on a fresh inode, never queried).
    pub(crate) fn new(
        ino: u64,
        dev: u64,
        mode: u32,
        uid: u32,
        gid: u32,
        kind: InodeKind,
        now: Timespec,
    ) -> Inode {
        let (nlink, size, blocks) = match &kind {
            // The size is derived from the entry count (`size`).
            InodeKind::Dir(_) => (2, 0, 0),
            InodeKind::Reg(_) => (1, 0, 0),
            // shmem_symlink: a target of 128 bytes or more (129 with its NUL, past
            // SHORT_SYMLINK_LEN) takes a page; shorter ones live in the inode.
            InodeKind::Symlink(t) => (1, t.len() as u64, if t.len() >= 128 { 8 } else { 0 }),
            InodeKind::Special(_) => (1, 0, 0),
        };
        let s = now.tv_sec as u64;
        let n = now.tv_nsec as u32;
        Inode {
            i_ino: ino,
            i_dev: dev,
            i_mode: AtomicU32::new(mode),
            i_uid: AtomicU32::new(uid),
            i_gid: AtomicU32::new(gid),
            i_btime: now,
            _line1: CacheLine(()),
            i_nlink: AtomicU32::new(nlink),
            i_state: AtomicU32::new(0),
            i_size: AtomicU64::new(size),
            i_blocks: AtomicU64::new(blocks),
            times: Times {
                seq: SeqCount::new(),
                sec: [AtomicU64::new(s), AtomicU64::new(s), AtomicU64::new(s)],
                nsec: [AtomicU32::new(n), AtomicU32::new(n), AtomicU32::new(n)],
            },
            attr_lock: Mutex::new(()),
            _line2: CacheLine(()),
            kind,
            i_acct: None,
            i_opens: AtomicU32::new(0),
        }
    }

    /// Turns a new, unnamed regular file into an `O_TMPFILE` one (`d_tmpfile`): link count 0
    /// and, when `linkable` (no `O_EXCL`), `I_LINKABLE` ([`set_linkable`](Self::set_linkable)),
    /// so that `linkat(AT_EMPTY_PATH)` may name it. Context: the inode is not yet reachable
    /// by anyone else.
    pub(crate) fn init_tmpfile(&self, linkable: bool) {
        // Relaxed: the inode is not published yet; the `Arc`/`File` that publishes it orders
        // this store for whoever receives it.
        self.i_nlink.store(0, Ordering::Relaxed);
        if linkable {
            self.set_linkable();
        }
    }

    /// The limits of the mount this inode was charged to (`None` on a mount without limits).
    pub(crate) fn limits(&self) -> Option<&Arc<Limits>> {
        self.i_acct.as_ref()
    }

    /// Creation time (`stx_btime`), set once when the inode is made.
    pub fn btime(&self) -> Timespec {
        self.i_btime
    }

    /// Charges this new inode (and its symlink page, if any) to `acct`, a mount's limits.
    ///
    /// # Errors
    /// `ENOSPC` when the mount's inodes or pages are used up; nothing is charged then.
    pub(crate) fn charged_to(mut self, acct: Option<&Arc<Limits>>) -> Result<Inode> {
        if let Some(a) = acct {
            a.reserve_inode()?;
            // Relaxed: not yet shared.
            let pages = self.i_blocks.load(Ordering::Relaxed) / BLOCKS_PER_PAGE;
            if let Err(e) = a.reserve_blocks(pages) {
                a.release_inode();
                return Err(e);
            }
            self.i_acct = Some(a.clone());
        }
        Ok(self)
    }

    /// Inode number.
    pub fn ino(&self) -> u64 {
        self.i_ino
    }

    /// `st_mode`: type and permission bits.
    #[inline]
    pub fn mode(&self) -> u32 {
        // Relaxed: a single-word attribute read without locks, as `generic_fillattr`.
        self.i_mode.load(Ordering::Relaxed)
    }

    /// Owner uid.
    #[inline]
    pub fn uid(&self) -> u32 {
        // Relaxed: single-word attribute snapshot.
        self.i_uid.load(Ordering::Relaxed)
    }

    /// Owner gid.
    #[inline]
    pub fn gid(&self) -> u32 {
        // Relaxed: single-word attribute snapshot.
        self.i_gid.load(Ordering::Relaxed)
    }

    /// Hard link count.
    #[inline]
    pub fn nlink(&self) -> u32 {
        // Relaxed: single-word attribute snapshot.
        self.i_nlink.load(Ordering::Relaxed)
    }

    /// Size in bytes. A directory's is tmpfs's: 40 (`.` and `..`) plus `BOGO_DIRENT_SIZE`
    /// per entry, derived from the entry count rather than stored, so that creating and
    /// removing entries writes no size (Linux stores `i_size` and adds or subtracts 20).
    #[inline]
    pub fn size(&self) -> u64 {
        match &self.kind {
            InodeKind::Dir(d) => (2 + d.len() as u64) * BOGO_DIRENT_SIZE,
            // Relaxed: single-word snapshot; readers of data take the data lock, which
            // orders the size with the pages.
            _ => self.i_size.load(Ordering::Relaxed),
        }
    }

    /// Whether this is a directory.
    #[inline]
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, InodeKind::Dir(_))
    }

    /// Whether this is a symbolic link.
    #[inline]
    pub fn is_symlink(&self) -> bool {
        matches!(self.kind, InodeKind::Symlink(_))
    }

    /// Whether this is a regular file.
    #[inline]
    pub fn is_reg(&self) -> bool {
        matches!(self.kind, InodeKind::Reg(_))
    }

    /// The directory contents, if a directory.
    pub(crate) fn dir(&self) -> Option<&Dir> {
        match &self.kind {
            InodeKind::Dir(d) => Some(d),
            _ => None,
        }
    }

    /// The symlink target, if a symlink.
    pub(crate) fn symlink_target(&self) -> Option<&[u8]> {
        match &self.kind {
            InodeKind::Symlink(t) => Some(t),
            _ => None,
        }
    }

    /// `inode_permission` for `mask` (`MAY_*`).
    ///
    /// # Errors
    /// `EACCES` as [`Cred::permission`].
    #[inline]
    pub fn permission(&self, cred: &Cred, mask: u32) -> Result<()> {
        cred.permission(self.mode(), self.uid(), self.gid(), mask)
    }

    /// The three timestamps `[atime, mtime, ctime]`, consistent with each other.
    pub fn times(&self) -> [Timespec; 3] {
        self.times_raw(false, true).0
    }

    /// The three timestamps and whether the ctime was queried; with `query`, marks it
    /// queried (`fill_mg_cmtime`), writing only when the mark is clear (or, when not
    /// `test_first`, always: the lesson-3 baseline).
    fn times_raw(&self, query: bool, test_first: bool) -> ([Timespec; 3], bool) {
        loop {
            let s = self.times.seq.read_begin();
            let mut out = [Timespec::default(); 3];
            let mut cns = 0;
            for (i, t) in out.iter_mut().enumerate() {
                // Relaxed: inside a seqcount read section; `read_retry` orders them.
                t.tv_sec = self.times.sec[i].load(Ordering::Relaxed) as i64;
                // Relaxed: as above.
                cns = self.times.nsec[i].load(Ordering::Relaxed);
                t.tv_nsec = (cns & !I_CTIME_QUERIED) as i64;
            }
            let queried = cns & I_CTIME_QUERIED != 0;
            if query && (!queried || !test_first) {
                count_write();
                // Relaxed: the mark needs no ordering of its own. The next change (a syscall
                // that starts after this one returns) loads the word under `attr_lock` and
                // sees the mark by coherence. Inside this read section the `fetch_or` is one
                // more read: if it found a value a writer stored, `read_retry` (its Acquire
                // fence, paired with the Release fence in `SeqCount::write_begin`) sees the
                // count moved and this retries, so the value returned is the value marked.
                // A mark set on a value a writer then overwrites goes with it: that writer
                // stores a time nobody has seen yet.
                self.times.nsec[2].fetch_or(I_CTIME_QUERIED, Ordering::Relaxed);
            }
            if !self.times.seq.read_retry(s) {
                return (out, queried || query);
            }
        }
    }

    /// Takes `attr_lock`.
    fn lock_attr(&self) -> MutexGuard<'_, ()> {
        count_write();
        plock(&self.attr_lock)
    }

    /// Stores the chosen timestamps (`None` = unchanged); storing a ctime clears
    /// `I_CTIME_QUERIED`. Context: caller holds `attr_lock`.
    fn store_times_locked(&self, t: [Option<Timespec>; 3]) {
        debug_assert!(self.attr_lock.try_lock().is_err(), "caller holds attr_lock");
        count_write();
        self.times.seq.write_begin();
        for (i, v) in t.iter().enumerate() {
            if let Some(v) = v {
                // Relaxed: inside a seqcount write section, which orders them for readers.
                self.times.sec[i].store(v.tv_sec as u64, Ordering::Relaxed);
                // Relaxed: as above. For the ctime this overwrites a mark a racing `stat`
                // set on the old value: see `times_raw`.
                self.times.nsec[i].store(v.tv_nsec as u32, Ordering::Relaxed);
            }
        }
        self.times.seq.write_end();
    }

    /// Stamps the ctime with the current time (`inode_set_ctime_current`, see `next_ctime`)
    /// and sets atime and mtime as asked, `TimeUpdate::Now` being the new ctime (as
    /// `setattr_copy_mgtime`). Stores only the fields that change, and enters no write
    /// section when none does. Returns the ctime. `now` is the syscall's [`coarse_now`] (or
    /// a later time another inode of the same syscall was stamped with).
    ///
    /// Context: caller holds `attr_lock`.
    fn stamp_locked(&self, now: Timespec, atime: TimeUpdate, mtime: TimeUpdate) -> Timespec {
        debug_assert!(self.attr_lock.try_lock().is_err(), "caller holds attr_lock");
        // Under `attr_lock` only the queried mark can change under us.
        let ([a, m, c], queried) = self.times_raw(false, true);
        let t = next_ctime(now, c, queried, fine_now);
        let pick = |u: TimeUpdate, cur: Timespec| {
            match u {
                TimeUpdate::Keep => None,
                TimeUpdate::Now => Some(t),
                TimeUpdate::Set(v) => Some(v),
            }
            .filter(|v| *v != cur)
        };
        let new = [pick(atime, a), pick(mtime, m), (t != c).then_some(t)];
        if new.iter().any(Option::is_some) {
            self.store_times_locked(new);
        }
        t
    }

    /// `futimens`/`utimensat` (`setattr_copy_mgtime`): ctime becomes the current time, atime
    /// and mtime as asked.
    pub(crate) fn set_times(&self, now: Timespec, atime: TimeUpdate, mtime: TimeUpdate) {
        let _g = self.lock_attr();
        self.stamp_locked(now, atime, mtime);
    }

    /// mtime = ctime = the current time: a change to contents (`file_update_time`,
    /// `inode_set_mtime_to_ts(inode, inode_set_ctime_current(inode))`). Returns the ctime.
    ///
    /// Test before set: when neither would change (the same coarse tick, not queried), it
    /// takes no lock and writes nothing, so that creating files in a shared directory does
    /// not bounce the directory inode's lines (`inode_needs_update_time`).
    pub(crate) fn touch_mtime_ctime(&self, now: Timespec) -> Timespec {
        let ([_, m, c], queried) = self.times_raw(false, true);
        if !queried && m == c && next_ctime(now, c, false, fine_now) == c {
            return c;
        }
        let _g = self.lock_attr();
        self.stamp_locked(now, TimeUpdate::Keep, TimeUpdate::Now)
    }

    /// ctime = the current time (a change to attributes or links); as `touch_mtime_ctime`,
    /// writes nothing when the ctime would not change. Returns the ctime.
    pub(crate) fn touch_ctime(&self, now: Timespec) -> Timespec {
        let ([_, _, c], queried) = self.times_raw(false, true);
        if !queried && next_ctime(now, c, false, fine_now) == c {
            return c;
        }
        let _g = self.lock_attr();
        self.stamp_locked(now, TimeUpdate::Keep, TimeUpdate::Keep)
    }

    /// The time a change of this inode would be stamped with now, without stamping it:
    /// `now`, or a fine-grained time (raising the floor) if the ctime was queried and `now`
    /// would not move it. For a syscall that stamps another inode first and then gives this
    /// one the same time (unlink: the victim, then its directory, as `simple_unlink`), so
    /// that this one's change shows too.
    pub(crate) fn current_time(&self, now: Timespec) -> Timespec {
        let ([_, _, c], queried) = self.times_raw(false, true);
        if queried && now <= c {
            next_ctime(now, c, true, fine_now)
        } else {
            now
        }
    }

    /// `touch_atime` under `relatime` (tmpfs's default): atime is written only when it is not
    /// newer than mtime or ctime, or is a day old. Test before set: most reads write nothing,
    /// so readers of a shared file do not steal its cache line (lesson 3). The time is the
    /// coarse one, or a fine-grained one (not raising the floor) when the ctime was queried
    /// in this tick, as Linux `current_time`.
    pub(crate) fn touch_atime(&self) {
        let ([a, m, c], queried) = self.times_raw(false, true);
        let now = coarse_now();
        let need = m >= a || c >= a || now.tv_sec - a.tv_sec >= 24 * 60 * 60;
        if !need {
            return;
        }
        let now = if queried && now <= c {
            now.max(clock(rustix::time::ClockId::Realtime))
        } else {
            now
        };
        if a != now {
            let _g = self.lock_attr();
            self.store_times_locked([Some(now), None, None]);
        }
    }

    /// Changes the link count by `delta` and, with `now`, stamps the ctime (see
    /// `stamp_locked`). Returns the ctime. On a mount with limits, gives back the inode
    /// count of a removed extra name and, at the last name with no open file, the space
    /// (`evict`, which takes the data lock).
    ///
    /// Context: the caller holds the lock of a directory naming this inode, and neither this
    /// inode's `attr_lock` nor its data lock (lock order: data lock -> `attr_lock`).
    pub(crate) fn add_nlink(&self, delta: i32, now: Option<Timespec>) -> Timespec {
        let g = self.lock_attr();
        // Relaxed: writers are serialised by `attr_lock`; readers take a snapshot.
        let n = self.i_nlink.load(Ordering::Relaxed);
        let new = n.wrapping_add_signed(delta);
        // Relaxed: as above.
        self.i_nlink.store(new, Ordering::Relaxed);
        let mut evict = Evict::No;
        if let Some(a) = &self.i_acct {
            if new < n && !self.is_dir() {
                // shmem_unlink: every name but the last held an inode of the mount's count.
                for _ in new.max(1)..n {
                    a.release_inode();
                }
            }
            if new == 0 {
                evict = self.may_evict_locked();
            }
        }
        let t = match now {
            Some(now) => self.stamp_locked(now, TimeUpdate::Keep, TimeUpdate::Keep),
            None => self.times()[2],
        };
        drop(g);
        self.evict(evict);
        t
    }

    /// What to give back now of this inode's space (on a mount with limits), once no name
    /// and no open file are left: everything the first time (and it is marked given back),
    /// then only pages written since by an open that raced with the last unlink (a lock-free
    /// walk can reach the dentry just before its name goes). `O_TMPFILE`'s `I_LINKABLE`
    /// does not keep it: without an open file nothing can link it any more.
    /// Context: caller holds `attr_lock`.
    fn may_evict_locked(&self) -> Evict {
        // Relaxed (all three): written under `attr_lock`, which the caller holds.
        let st = self.i_state.load(Ordering::Relaxed);
        if self.i_nlink.load(Ordering::Relaxed) != 0 || self.i_opens.load(Ordering::Relaxed) != 0 {
            return Evict::No;
        }
        if st & I_FREEING != 0 {
            return Evict::Pages;
        }
        // Relaxed: as above.
        self.i_state.store(st | I_FREEING, Ordering::Relaxed);
        Evict::All
    }

    /// `shmem_evict_inode` on a mount with limits: drops the pages and gives them back, and
    /// with `Evict::All` the inode too. Called without `attr_lock` (the data lock comes
    /// first in the lock order).
    fn evict(&self, what: Evict) {
        let Some(a) = &self.i_acct else { return };
        if what == Evict::No {
            return;
        }
        if let InodeKind::Reg(d) = &self.kind {
            let mut data = write(d);
            let gone = std::mem::take(&mut data.pages);
            // Relaxed: under the data write lock.
            self.i_blocks.store(0, Ordering::Relaxed);
            drop(data);
            a.release_blocks(gone.len() as u64);
        } else {
            // A long symlink's page. Relaxed: nothing else writes a symlink's `i_blocks`,
            // and with no name and no open file nobody can stat it any more; zeroed so that
            // `Drop` does not give the page back again.
            let pages = self.i_blocks.swap(0, Ordering::Relaxed) / BLOCKS_PER_PAGE;
            a.release_blocks(pages);
        }
        if what == Evict::All {
            a.release_inode();
        }
    }

    /// A `File` opened this inode (`open_handle`); counted on mounts with limits only.
    pub(crate) fn file_opened(&self) {
        if self.i_acct.is_some() {
            let _g = self.lock_attr();
            // Relaxed: under `attr_lock`.
            let n = self.i_opens.load(Ordering::Relaxed);
            // Relaxed: as above.
            self.i_opens.store(n + 1, Ordering::Relaxed);
        }
    }

    /// A `File` of this inode was released (its last reference); on a mount with limits,
    /// gives the space of an unlinked inode back at its last close.
    pub(crate) fn file_closed(&self) {
        if self.i_acct.is_some() {
            let g = self.lock_attr();
            // Relaxed: under `attr_lock`.
            let n = self.i_opens.load(Ordering::Relaxed);
            // Relaxed: as above.
            self.i_opens.store(n.saturating_sub(1), Ordering::Relaxed);
            let evict = self.may_evict_locked();
            drop(g);
            self.evict(evict);
        }
    }

    /// Marks an inode with no links as linkable (`I_LINKABLE`): `linkat` may then give it a
    /// name although its link count is 0. The hook for `O_TMPFILE` without `O_EXCL`
    /// (Linux `vfs_tmpfile`); the first successful link clears it.
    pub(crate) fn set_linkable(&self) {
        let _g = self.lock_attr();
        // Relaxed: serialised by `attr_lock`; read only under it (`link_inc`).
        let st = self.i_state.load(Ordering::Relaxed);
        // Relaxed: as above.
        self.i_state.store(st | I_LINKABLE, Ordering::Relaxed);
    }

    /// One more hard link (`vfs_link`'s checks under the inode lock, then `inc_nlink` and
    /// `inode_set_ctime_current`, as `shmem_link`): stamps the ctime from `now` (see
    /// `stamp_locked`) and returns it. Clears `I_LINKABLE`.
    ///
    /// Under `attr_lock`, as `add_nlink`, so a concurrent unlink of the last name either
    /// comes first (and this fails) or after.
    ///
    /// # Errors
    /// `ENOENT` when the link count is 0 and the inode is not `I_LINKABLE` (a removed file);
    /// `EMLINK` when the count is at [`LINK_MAX`] (tmpfs has no limit of its own: Linux would
    /// wrap the 32-bit count after 2^32 links; uvfs refuses the last one).
    pub(crate) fn link_inc(&self, now: Timespec) -> Result<Timespec> {
        let _g = self.lock_attr();
        // Relaxed: writers are serialised by `attr_lock`; readers take a snapshot.
        let n = self.i_nlink.load(Ordering::Relaxed);
        // Relaxed: written and read under `attr_lock`.
        let st = self.i_state.load(Ordering::Relaxed);
        if n == 0 && st & I_LINKABLE == 0 {
            return Err(Errno::ENOENT);
        }
        if n == LINK_MAX {
            return Err(Errno::EMLINK);
        }
        if let (Some(a), true) = (&self.i_acct, n > 0) {
            // shmem_link: each further name takes an inode of the mount's count.
            a.reserve_inode()?;
        }
        // Relaxed: as above.
        self.i_nlink.store(n + 1, Ordering::Relaxed);
        if st & I_LINKABLE != 0 {
            // Relaxed: as above.
            self.i_state.store(st & !I_LINKABLE, Ordering::Relaxed);
        }
        Ok(self.stamp_locked(now, TimeUpdate::Keep, TimeUpdate::Keep))
    }

    /// `notify_change` for mode and owner (`setattr_prepare` + `setattr_copy`): under
    /// `attr_lock`, `f` gets the current `(mode, uid, gid)`, checks the caller's rights and
    /// returns the new ones (or an errno, changing nothing); stores those that differ and
    /// stamps the ctime (`ATTR_CTIME`, set by chmod and chown even when nothing else
    /// changes). The file type bits of the mode are kept whatever `f` returns.
    ///
    /// # Errors
    /// Those of `f`.
    pub(crate) fn setattr(
        &self,
        now: Timespec,
        f: impl FnOnce(u32, u32, u32) -> Result<(u32, u32, u32)>,
    ) -> Result<()> {
        let _g = self.lock_attr();
        let (mode, uid, gid) = (self.mode(), self.uid(), self.gid());
        let (new_mode, new_uid, new_gid) = f(mode, uid, gid)?;
        let new_mode = (mode & S_IFMT) | (new_mode & !S_IFMT);
        if new_mode != mode {
            // Relaxed: writers are serialised by `attr_lock`; readers take a snapshot of
            // each word (as Linux reads `i_mode`, `i_uid`, `i_gid` without locks).
            self.i_mode.store(new_mode, Ordering::Relaxed);
        }
        if new_uid != uid {
            // Relaxed: as above.
            self.i_uid.store(new_uid, Ordering::Relaxed);
        }
        if new_gid != gid {
            // Relaxed: as above.
            self.i_gid.store(new_gid, Ordering::Relaxed);
        }
        self.stamp_locked(now, TimeUpdate::Keep, TimeUpdate::Keep);
        Ok(())
    }

    /// `killpriv` on write and truncate (`setattr_should_drop_suidgid`): clears set-user-ID,
    /// and set-group-ID when group-executable or when the writer is not in the file's group,
    /// unless the writer has `CAP_FSETID` (root). Tests before writing (lesson 3).
    pub(crate) fn kill_suid(&self, cred: &Cred, now: Timespec) {
        // setattr_should_drop_sgid: set-group-ID goes when group-executable, or, without
        // group execute, when the writer is not in the file's group.
        let drop_sgid =
            |mode: u32| mode & S_ISGID != 0 && (mode & S_IXGRP != 0 || !cred.in_group(self.gid()));
        let mode = self.mode();
        let kill = mode & S_ISUID != 0 || drop_sgid(mode);
        if kill && !cred.is_root() {
            let _g = self.lock_attr();
            let mode = self.mode();
            let mut new = mode & !S_ISUID;
            if drop_sgid(mode) {
                new &= !S_ISGID;
            }
            // Relaxed: serialised by `attr_lock`.
            self.i_mode.store(new, Ordering::Relaxed);
            self.stamp_locked(now, TimeUpdate::Keep, TimeUpdate::Keep);
        }
    }

    /// `generic_fillattr` + `fill_mg_cmtime`: the inode's attributes as a `Stat`. Marks the
    /// ctime queried (a write only when not already marked), so that the next change gets
    /// a timestamp different from the one returned here.
    pub fn stat(&self) -> Stat {
        self.stat_marking(true)
    }

    /// [`stat`](Self::stat), with the queried mark set test-before-set (`test_first`, uvfs)
    /// or by an unconditional `fetch_or` (`false`: lesson 3's "before", for ablation
    /// benchmarks; see [`crate::variant`]).
    pub(crate) fn stat_marking(&self, test_first: bool) -> Stat {
        self.stat_query(true, test_first)
    }

    /// [`stat_marking`](Self::stat_marking), marking the ctime queried only when `query`
    /// (`statx` asking for neither mtime nor ctime leaves the mark alone, as
    /// `fill_mg_cmtime`).
    pub(crate) fn stat_query(&self, query: bool, test_first: bool) -> Stat {
        let ([a, m, c], _) = self.times_raw(query, test_first);
        Stat {
            st_dev: self.i_dev,
            st_ino: self.i_ino,
            st_nlink: self.nlink() as u64,
            st_mode: self.mode(),
            st_uid: self.uid(),
            st_gid: self.gid(),
            st_rdev: match self.kind {
                InodeKind::Special(rdev) => rdev,
                _ => 0,
            },
            st_size: self.size() as i64,
            st_blksize: PAGE_SIZE as i64,
            // Relaxed: single-word snapshot.
            st_blocks: self.i_blocks.load(Ordering::Relaxed) as i64,
            st_atime: a,
            st_mtime: m,
            st_ctime: c,
        }
    }

    fn reg(&self) -> Result<&RwLock<RegData>> {
        match &self.kind {
            InodeKind::Reg(r) => Ok(r),
            InodeKind::Dir(_) => Err(Errno::EISDIR),
            InodeKind::Symlink(_) | InodeKind::Special(_) => Err(Errno::EINVAL),
        }
    }

    /// Reads into `buf` from byte offset `off` (`off >= 0`); returns bytes read, 0 at or past
    /// end of file. Holes read as zeros.
    ///
    /// # Errors
    /// `EISDIR` on a directory, `EINVAL` on a symlink or special file.
    pub(crate) fn read_at(&self, buf: &mut [u8], off: u64) -> Result<usize> {
        let data = read(self.reg()?);
        let size = self.size();
        if off >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = (size - off).min(buf.len() as u64) as usize;
        let mut done = 0;
        while done < n {
            let pos = off + done as u64;
            let idx = pos / PAGE_SIZE as u64;
            let in_page = (pos % PAGE_SIZE as u64) as usize;
            let chunk = (PAGE_SIZE - in_page).min(n - done);
            let dst = &mut buf[done..done + chunk];
            match data.pages.get(&idx) {
                Some(p) => dst.copy_from_slice(&p[in_page..in_page + chunk]),
                None => dst.fill(0),
            }
            done += chunk;
        }
        Ok(n)
    }

    /// Writes `buf` at offset `off`, or at the end of file when `append` (atomically with
    /// respect to other writers of this inode); returns `(bytes written, offset after)`.
    ///
    /// # Errors
    /// `EFBIG` when the offset is at or past `MAX_LFS_FILESIZE`; writes that would cross it
    /// are shortened (`generic_write_check_limits`). `EISDIR`/`EINVAL` as `read_at`.
    pub(crate) fn write_at(
        &self,
        buf: &[u8],
        off: u64,
        append: bool,
        now: Timespec,
        cred: &Cred,
        fsize_limit: u64,
    ) -> Result<(usize, u64)> {
        let mut data = write(self.reg()?);
        // A zero-length write changes nothing, not even an O_APPEND position
        // (`generic_write_checks_count` returns before repositioning).
        if buf.is_empty() {
            return Ok((0, off));
        }
        let size = self.size();
        let off = if append { size } else { off };
        // generic_write_check_limits: at or past RLIMIT_FSIZE (Linux also sends SIGXFSZ) or
        // the file system's maximum, EFBIG; below them the write is shortened to them.
        let max = (MAX_LFS_FILESIZE as u64).min(fsize_limit);
        if off >= max {
            return Err(Errno::EFBIG);
        }
        // After the limit checks, under the data lock (Linux: `file_remove_privs` after
        // `generic_write_checks`, under `inode_lock`): a refused write changes nothing.
        self.kill_suid(cred, now);
        let want = (buf.len() as u64).min(max - off) as usize;
        let mut done = 0;
        while done < want {
            let pos = off + done as u64;
            let idx = pos / PAGE_SIZE as u64;
            let in_page = (pos % PAGE_SIZE as u64) as usize;
            let chunk = (PAGE_SIZE - in_page).min(want - done);
            let page = match data.pages.entry(idx) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    // A new page counts against `size=` (`shmem_inode_acct_blocks`); when
                    // none is left the write stops short, or fails if nothing was written
                    // (`generic_perform_write`).
                    if let Some(Err(_)) = self.i_acct.as_ref().map(|a| a.reserve_blocks(1)) {
                        break;
                    }
                    v.insert(Box::new([0u8; PAGE_SIZE]))
                }
            };
            page[in_page..in_page + chunk].copy_from_slice(&buf[done..done + chunk]);
            done += chunk;
        }
        let n = done;
        if n == 0 {
            // Linux stamped the times before trying (`file_update_time`).
            drop(data);
            self.touch_mtime_ctime(now);
            return Err(Errno::ENOSPC);
        }
        let end = off + n as u64;
        if end > size {
            // Relaxed: written under the data write lock; readers of data hold the read lock.
            self.i_size.store(end, Ordering::Relaxed);
        }
        // Relaxed: as above.
        self.i_blocks
            .store(data.pages.len() as u64 * BLOCKS_PER_PAGE, Ordering::Relaxed);
        drop(data);
        self.touch_mtime_ctime(now);
        Ok((n, end))
    }

    /// `inode_newsize_ok`: growing a regular file to `len` bytes is refused past the
    /// caller's `RLIMIT_FSIZE` (`fsize_limit`; `u64::MAX` = none).
    ///
    /// # Errors
    /// `EFBIG` (Linux also sends `SIGXFSZ`).
    pub(crate) fn newsize_ok(&self, len: u64, fsize_limit: u64) -> Result<()> {
        if len > self.size() && len > fsize_limit {
            return Err(Errno::EFBIG);
        }
        Ok(())
    }

    /// Sets the size to `len` bytes; unless that grows the file, drops the pages past it
    /// and zeroes the tail of the last partial page; stamps mtime and ctime with `now`, the
    /// syscall's [`coarse_now`], when the size changes, when the file has pages, or when
    /// `stamp` (ftruncate and `O_TRUNC` pass `ATTR_MTIME | ATTR_CTIME` to `do_truncate`;
    /// truncate(2) passes neither, and `shmem_setattr` then stamps only a change of size
    /// or, through `shmem_truncate_range`, a file with allocated pages).
    ///
    /// # Errors
    /// `EFBIG` when `len > MAX_LFS_FILESIZE`; `EISDIR`/`EINVAL` on non-regular files.
    pub(crate) fn truncate_at(&self, len: u64, now: Timespec, stamp: bool) -> Result<()> {
        if len > MAX_LFS_FILESIZE as u64 {
            return Err(Errno::EFBIG);
        }
        let mut data = write(self.reg()?);
        let size = self.size();
        if len == size && !stamp && data.pages.is_empty() {
            return Ok(());
        }
        // `newsize <= oldsize` (shmem_setattr): the same size too drops the pages past it,
        // which `FALLOC_FL_KEEP_SIZE` may have allocated.
        if len <= size {
            let first_gone = len.div_ceil(PAGE_SIZE as u64);
            let gone = data.pages.split_off(&first_gone);
            if let Some(a) = &self.i_acct {
                a.release_blocks(gone.len() as u64);
            }
            let tail = (len % PAGE_SIZE as u64) as usize;
            if tail != 0 {
                if let Some(p) = data.pages.get_mut(&(len / PAGE_SIZE as u64)) {
                    p[tail..].fill(0);
                }
            }
        }
        // Relaxed: under the data write lock.
        self.i_size.store(len, Ordering::Relaxed);
        // Relaxed: under the data write lock.
        self.i_blocks
            .store(data.pages.len() as u64 * BLOCKS_PER_PAGE, Ordering::Relaxed);
        drop(data);
        self.touch_mtime_ctime(now);
        Ok(())
    }

    /// `shmem_fallocate` on `[off, off + len)` (`len > 0`, the range checked by the caller):
    /// with `punch`, frees the whole pages inside the range and zeroes the partial ones at
    /// its ends (the size never changes); otherwise allocates zeroed pages for the holes in
    /// the range and, unless `keep_size`, grows the size to `off + len`. Both stamp mtime and
    /// ctime and drop set-user-ID (`file_modified`); nothing changes on failure. The pages
    /// are charged before any is allocated, then allocated `FALLOC_BATCH` at a time, the
    /// data lock dropped between batches.
    ///
    /// # Errors
    /// `ENOSPC` when the mount's `size=` cannot hold the new pages, or the range is larger
    /// than the mount: at once, before any page is allocated (Linux allocates until the
    /// space runs out, then frees them again on shmem's `undone:` path). Only a range whose
    /// pages a concurrent punch or truncate freed meanwhile, when no page is left for them,
    /// fails part-way (keeping the pages allocated so far, size unchanged).
    /// `EISDIR`/`EINVAL` as `read_at`.
    pub(crate) fn fallocate(
        &self,
        off: u64,
        len: u64,
        punch: bool,
        keep_size: bool,
        now: Timespec,
        cred: &Cred,
    ) -> Result<()> {
        let mut data = write(self.reg()?);
        let ps = PAGE_SIZE as u64;
        let end = off + len;
        if punch {
            // Past the end there is nothing to punch; the partial pages at the ends are
            // zeroed, the whole ones freed (`shmem_truncate_range`).
            let (first_whole, end_whole) = (off.div_ceil(ps), end / ps);
            if first_whole < end_whole {
                let mut tail = data.pages.split_off(&first_whole);
                let mut keep = tail.split_off(&end_whole);
                if let Some(a) = &self.i_acct {
                    a.release_blocks(tail.len() as u64);
                }
                data.pages.append(&mut keep);
            }
            for pos in [off, end - 1] {
                let idx = pos / ps;
                if idx >= first_whole && idx < end_whole {
                    continue;
                }
                if let Some(p) = data.pages.get_mut(&idx) {
                    let lo = off.max(idx * ps) - idx * ps;
                    let hi = end.min((idx + 1) * ps) - idx * ps;
                    p[lo as usize..hi as usize].fill(0);
                }
            }
        } else {
            let (first, past) = (off / ps, end.div_ceil(ps));
            // Pages reserved for the holes of the range and not yet allocated.
            let mut budget = 0;
            if let Some(a) = &self.i_acct {
                // "Try to avoid a swapstorm if len is impossible to satisfy": a range of
                // more pages than the mount holds fails before any page is looked at; one
                // with more holes than pages are free fails before any is allocated.
                if past - first > a.counts().0 {
                    return Err(Errno::ENOSPC);
                }
                let held = data.pages.range(first..past).count() as u64;
                budget = past - first - held;
                a.reserve_blocks(budget).map_err(|_| Errno::ENOSPC)?;
            }
            // `FALLOC_BATCH` pages at a time, the data lock dropped in between, so that
            // reads and writes of the file wait for one batch, not for the whole range
            // (Linux holds `i_rwsem` throughout but lets page faults in, `shmem_falloc`).
            // A write in between allocates (and charges) its own page, which then uses
            // no budget; a punch or truncate in between frees pages that were counted as
            // held, whose holes are charged one by one.
            let mut next = first;
            let r = loop {
                let stop = past.min(next + FALLOC_BATCH);
                let mut short = false;
                for i in next..stop {
                    let std::collections::btree_map::Entry::Vacant(v) = data.pages.entry(i) else {
                        continue;
                    };
                    if let Some(a) = &self.i_acct {
                        if budget > 0 {
                            budget -= 1;
                        } else if a.reserve_blocks(1).is_err() {
                            short = true;
                            break;
                        }
                    }
                    v.insert(Box::new([0u8; PAGE_SIZE]));
                }
                // Relaxed: under the data write lock.
                self.i_blocks
                    .store(data.pages.len() as u64 * BLOCKS_PER_PAGE, Ordering::Relaxed);
                if short {
                    break Err(Errno::ENOSPC);
                }
                if stop == past {
                    break Ok(());
                }
                next = stop;
                drop(data);
                // The lock is not fair: without a yield this thread takes it again before
                // a woken reader or writer runs.
                std::thread::yield_now();
                data = write(self.reg()?);
            };
            if let Some(a) = &self.i_acct {
                a.release_blocks(budget);
            }
            r?;
            if !keep_size && end > self.size() {
                // Relaxed: under the data write lock (as `write_at`).
                self.i_size.store(end, Ordering::Relaxed);
            }
        }
        // Relaxed: under the data write lock.
        self.i_blocks
            .store(data.pages.len() as u64 * BLOCKS_PER_PAGE, Ordering::Relaxed);
        drop(data);
        self.kill_suid(cred, now);
        self.touch_mtime_ctime(now);
        Ok(())
    }

    /// `SEEK_DATA` / `SEEK_HOLE` from `off`: stored pages are data, everything else (and the
    /// end of file) is a hole, as tmpfs reports. Pages `fallocate` allocated are data too,
    /// where tmpfs reports them as holes until written (README: intentional differences).
    ///
    /// # Errors
    /// `ENXIO` when `off` is at or past the end of file.
    pub(crate) fn seek_data_hole(&self, off: u64, data_wanted: bool) -> Result<u64> {
        let data = read(self.reg()?);
        let size = self.size();
        if off >= size {
            return Err(Errno::ENXIO);
        }
        let ps = PAGE_SIZE as u64;
        let mut idx = off / ps;
        if data_wanted {
            match data.pages.range(idx..).next() {
                Some((&i, _)) if i * ps < size => Ok((i * ps).max(off)),
                _ => Err(Errno::ENXIO),
            }
        } else {
            while data.pages.contains_key(&idx) {
                idx += 1;
            }
            Ok((idx * ps).max(off).min(size))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writes() -> u32 {
        SHARED_WRITES.with(|c| c.get())
    }

    fn reg(now: Timespec) -> Inode {
        let kind = InodeKind::Reg(RwLock::default());
        Inode::new(2, 0, S_IFREG | 0o644, 0, 0, kind, now)
    }

    fn seq(i: &Inode) -> u32 {
        i.times.seq.read_begin()
    }

    #[test]
    fn same_tick_stamps_write_nothing() {
        let t = coarse_now();
        let i = reg(t);
        let (s, w) = (seq(&i), writes());
        assert_eq!(i.touch_mtime_ctime(t), t);
        assert_eq!(i.touch_ctime(t), t);
        // A time read just before another change stamped a later one is not stored either.
        let earlier = ns_to_ts(ts_to_ns(t) - 4_000_000);
        assert_eq!(i.touch_mtime_ctime(earlier), t);
        assert_eq!((seq(&i), writes()), (s, w), "no lock, no write section");
        assert_eq!(i.times(), [t; 3]);
        // A new tick writes once.
        let next = ts_next(t);
        assert_eq!(i.touch_mtime_ctime(next), next);
        assert_eq!(i.times(), [t, next, next]);
        assert_ne!(seq(&i), s);
    }

    #[test]
    fn stat_marks_once_and_the_next_change_is_later() {
        let t = coarse_now();
        let i = reg(t);
        let w = writes();
        let st = i.stat();
        assert_eq!(writes(), w + 1, "the first stat sets the mark");
        assert_eq!(i.stat(), st);
        assert_eq!(writes(), w + 1, "a marked inode: stat writes nothing");
        // The same coarse tick after a stat: a fine-grained time, later than what was seen.
        let c = i.touch_mtime_ctime(t);
        assert!(c > st.st_ctime);
        assert_eq!(i.times(), [t, c, c]);
        // That cleared the mark: the same tick again writes nothing.
        let (s, w) = (seq(&i), writes());
        assert_eq!(i.touch_mtime_ctime(t), c);
        assert_eq!(i.touch_ctime(t), c);
        assert_eq!((seq(&i), writes()), (s, w));
        // ... and a later coarse time never goes below the fine one (the floor).
        assert!(coarse_now() >= c);
    }

    #[test]
    fn ctime_choice() {
        let cur = Timespec::new(1_700_000_000, 500_000_000);
        let ms = |n: i64| Timespec::new(cur.tv_sec, cur.tv_nsec + n * 1_000_000);
        let s2 = Timespec::new(cur.tv_sec - 2, cur.tv_nsec);
        let no_fine = || -> Timespec { panic!("no fine-grained time needed") };
        // Not queried: a later tick is taken; the same or a slightly older one keeps `cur`;
        // a clock stepped back by seconds is followed.
        assert_eq!(next_ctime(ms(4), cur, false, no_fine), ms(4));
        assert_eq!(next_ctime(cur, cur, false, no_fine), cur);
        assert_eq!(next_ctime(ms(-4), cur, false, no_fine), cur);
        assert_eq!(next_ctime(s2, cur, false, no_fine), s2);
        // Queried: a later tick needs no fine time; otherwise the fine time, or the next
        // nanosecond if the clock has not moved past `cur`.
        assert_eq!(next_ctime(ms(4), cur, true, no_fine), ms(4));
        assert_eq!(next_ctime(cur, cur, true, || ms(1)), ms(1));
        assert_eq!(next_ctime(cur, cur, true, || cur), ts_next(cur));
        assert_eq!(next_ctime(ms(-4), cur, true, || ms(-3)), ts_next(cur));
        assert_eq!(next_ctime(s2, cur, true, || s2), s2);
        let end = Timespec::new(5, 999_999_999);
        assert_eq!(ts_next(end), Timespec::new(6, 0));
    }

    #[test]
    fn link_inc_refuses_removed_and_full() {
        let t = coarse_now();
        let i = reg(t);
        assert!(i.link_inc(t).is_ok());
        assert_eq!(i.nlink(), 2);
        // A count at LINK_MAX (here 2 - 3, wrapped) refuses one more link, unchanged.
        i.add_nlink(-3, None);
        assert_eq!(i.nlink(), LINK_MAX);
        assert_eq!(i.link_inc(t), Err(Errno::EMLINK));
        assert_eq!(i.nlink(), LINK_MAX);
        // No links: ENOENT, unless marked linkable (O_TMPFILE), which one link clears.
        i.add_nlink(1, None);
        assert_eq!(i.nlink(), 0);
        assert_eq!(i.link_inc(t), Err(Errno::ENOENT));
        i.set_linkable();
        assert!(i.link_inc(t).is_ok());
        assert_eq!(i.nlink(), 1);
        i.add_nlink(-1, None);
        assert_eq!(i.link_inc(t), Err(Errno::ENOENT));
    }

    #[test]
    fn fine_times_raise_the_floor() {
        let f = fine_now();
        assert!(coarse_now() >= f);
        assert!(fine_now() >= f);
    }
}
