//! `Inode`'s methods: a file's attributes and their rules (the struct itself is defined in
//! fs.rs, beside the seam its `i_op` implements; a directory's entries hang off its dentry).
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
//! by the times' spinning seqlock (`SeqCount::write_lock`), so a change stores the new ctime
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
//!   without locks (as `generic_fillattr` does). Mode, owner and link count are written under
//!   `attr_lock` (Linux: `i_rwsem`); the times are written in write sections of their own
//!   spinning seqlock (`Times::seq`, one locked instruction, never a parking lock: issue 16's
//!   `futimens` on one file from many threads), taken by itself or inside `attr_lock`, and
//!   read through it so a reader never sees a torn timestamp. The one write outside both is
//!   `stat` setting `I_CTIME_QUERIED` (a `fetch_or`).
//! - `i_size`, `i_blocks`: atomics, written only under the regular file's data write lock
//!   (for an inode marked `I_REVALIDATE`: by its file system, from its backing store,
//!   under `attr_lock` in `set_attrs` or under the file system's own data lock).
//!   tmpfs stores no directory size: `Dentry::size` derives it from the entry count.
//! - Directory contents: the directory's dentry holds them (`Dentry::dir`, dcache.rs).
//!
//! Lock order: `SuperBlock::s_rename_lock` -> a directory's bucket locks (dcache.rs
//! `Dir::lock_name`: one name's bucket; `Dir::lock_all`: every bucket in index order;
//! ancestor first, else by address) -> `RegData` (data `RwLock`) -> `attr_lock` -> the times' seqlock (held for a few stores,
//! nothing taken inside it).

use crate::cred::Cred;
pub use crate::fs::Inode;
use crate::fs::{FsInode, Times};
use crate::stat::StatxSync;
use crate::sync::padded::CacheLine;
use crate::sync::plain::{AtomicI32, AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering};
use crate::sync::plock;
use crate::sync::seqcount::{SeqCount, SeqWriteGuard};
use crate::time::{clock, coarse_now, fine_now, next_ctime, TimeUpdate};
use crate::types::*;
use crate::{Errno, Result};
use std::fmt;

/// Bytes in one page of file data.
pub const PAGE_SIZE: usize = 4096;

/// tmpfs accounts 20 bytes of directory size per entry (`BOGO_DIRENT_SIZE`, mm/shmem.c).
pub const BOGO_DIRENT_SIZE: u64 = 20;
/// The largest file size and offset (`MAX_LFS_FILESIZE` on 64-bit).
pub const MAX_LFS_FILESIZE: i64 = i64::MAX;
/// Maximum number of hard links to one inode (tmpfs: `~0U`).
pub const LINK_MAX: u32 = u32::MAX;

/// `I_CTIME_QUERIED`: set in the ctime's nanoseconds word by `stat` (nanoseconds need 30
/// bits), cleared by the next change of the ctime.
const I_CTIME_QUERIED: u32 = 1 << 31;

/// `I_LINKABLE` in `Inode::i_state`: an inode with no links that `linkat` may still give a
/// name (Linux sets it on an `O_TMPFILE` file opened without `O_EXCL`); cleared by the first
/// successful link.
const I_LINKABLE: u32 = 1 << 0;

/// `I_FREEING` in `Inode::i_state`: the file system was told to give this inode's space
/// back (`InodeOps::evict` with `all`: no name and no open file left); `Drop` asks only for
/// what was written since.
const I_FREEING: u32 = 1 << 1;

/// `I_EVICTABLE` in `Inode::i_flags`: the file system wants [`InodeOps::evict`] (tmpfs: a
/// mount with limits), so opens are counted and the last unlink or close evicts. Set
/// before the inode is published, never cleared.
///
/// [`InodeOps::evict`]: crate::fs::InodeOps::evict
const I_EVICTABLE: u32 = 1 << 2;

/// `I_REVALIDATE` in `Inode::i_flags`: the inode's file system can change behind the VFS's
/// back (hostfs, the FUSE client): the walk revalidates its cached entries and asks the
/// file system on a miss (`InodeOps::lookup`, `revalidate`), `stat` refreshes its
/// attributes first (`getattr`) and `getdents` lists through `iterate_dir`. Set before the
/// inode is published, never cleared; tmpfs never sets it, so its walks, stats and
/// listings test one bit and make no call.
const I_REVALIDATE: u32 = 1 << 3;

/// `I_VFS_ATTRS` in `Inode::i_flags`: the VFS inode is the only store of the attributes
/// that [`InodeOps::setattr`] is told of (mode, owner, times): the file system keeps no
/// copy and its `setattr` does nothing (tmpfs), so the VFS neither builds the request nor
/// makes the call (futimens, chmod, chown, the set-ID drop of a write). Set before the
/// inode is published, never cleared; a file system that does not set it is always asked.
///
/// [`InodeOps::setattr`]: crate::fs::InodeOps::setattr
const I_VFS_ATTRS: u32 = 1 << 4;

/// `I_NOP_OPEN` in `Inode::i_flags`: the file system's [`FileOps::open`] and
/// [`FileOps::release`] do nothing for this inode (tmpfs), so the VFS makes neither call
/// (two indirect calls off every open and last close). Set before the inode is published,
/// never cleared.
///
/// [`FileOps::open`]: crate::fs::FileOps::open
/// [`FileOps::release`]: crate::fs::FileOps::release
const I_NOP_OPEN: u32 = 1 << 5;

/// `I_FS_PERMISSION` in `Inode::i_flags`: the inode's file system decides permissions
/// ([`InodeOps::permission`] replaces the mode-bit check, and `chmod`, `chown` and
/// `utimensat` skip their owner checks, as Linux's `ATTR_FORCE`): the FUSE client without
/// `default_permissions`. Set before the inode is published, never cleared.
///
/// [`InodeOps::permission`]: crate::fs::InodeOps::permission
const I_FS_PERMISSION: u32 = 1 << 6;

/// `S_NOSEC` in `Inode::i_flags`: the inode has no file capability
/// (`security.capability`), so a write or truncation need not ask its file system
/// (Linux's `file_remove_privs` returns at `IS_NOSEC`). Set by a file system whose
/// inodes change only through uvfs (`InodeOps::sb_nosec`, Linux's `SB_NOSEC`): tmpfs
/// sets it on a new inode before publication, and the VFS as it checks an inode (just
/// before the check, undone if the removal fails: see `Inode::kill_priv`);
/// cleared when a `security.*` attribute is set (`__vfs_setxattr_noperm`). Unlike the
/// bits above, it changes after publication.
const I_NOSEC: u32 = 1 << 7;

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

/// Attributes a file system read from its backing store, for [`Inode::set_attrs`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FsAttrs {
    /// `st_mode` (the type bits are ignored: an inode's type never changes).
    pub(crate) mode: u32,
    /// Owner.
    pub(crate) uid: u32,
    /// Group.
    pub(crate) gid: u32,
    /// Link count.
    pub(crate) nlink: u32,
    /// Size in bytes.
    pub(crate) size: u64,
    /// 512-byte blocks.
    pub(crate) blocks: u64,
    /// `[atime, mtime, ctime]`.
    pub(crate) times: [Timespec; 3],
}

impl Drop for Inode {
    fn drop(&mut self) {
        // Relaxed: `&mut self`, no other access.
        let st = self.i_state.load(Ordering::Relaxed);
        if self.evictable() {
            // What is still held: everything if never evicted (a mount torn down with files
            // in it), else pages written by an open that raced with the last unlink.
            self.i_op.evict(self, st & I_FREEING == 0);
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
    // The immutable flags fill the hole before `i_btime` (line 0 stays one line).
    crate::const_assert!(offset_of!(Inode, i_flags) + 4 <= offset_of!(Inode, i_btime));
    // Read-mostly identity and attributes, the creation time included, fill line 0 only.
    crate::const_assert!(offset_of!(Inode, i_btime) + size_of::<Timespec>() <= CACHE_LINE);
    crate::const_assert!(offset_of!(Inode, i_nlink) == CACHE_LINE);
    crate::const_assert!(offset_of!(Inode, attr_lock) < 2 * CACHE_LINE);
    // The file system's part (immutable) on line 0, the open count (written under
    // `attr_lock`) on line 1 with it: the inode stays three lines.
    crate::const_assert!(offset_of!(Inode, i_op) + 2 * size_of::<usize>() <= CACHE_LINE);
    crate::const_assert!(offset_of!(Inode, i_opens) + 4 <= 2 * CACHE_LINE);
    crate::const_assert!(size_of::<Inode>() == 3 * CACHE_LINE);
    crate::const_assert!(offset_of!(Inode, i_size) == 2 * CACHE_LINE);
    crate::const_assert!(offset_of!(Inode, i_writecount) + 4 <= 3 * CACHE_LINE);
    crate::const_assert!(offset_of!(Inode, i_flctx) + 8 <= 3 * CACHE_LINE);
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
    /// `simple_inode_init_ts` on a fresh inode, never queried), one link (two for a
    /// directory, whose dentry gets an empty entry index), size and blocks 0, and `i_op` as its
    /// file system's part. For file systems (`FileSystem::create`), which set size, blocks
    /// and `rdev` before publishing it.
    pub(crate) fn new(
        ino: u64,
        dev: u64,
        mode: u32,
        uid: u32,
        gid: u32,
        now: Timespec,
        i_op: Box<dyn FsInode>,
    ) -> Inode {
        let is_dir = mode & S_IFMT == S_IFDIR;
        let s = now.tv_sec as u64;
        let n = now.tv_nsec as u32;
        Inode {
            i_ino: ino,
            i_dev: dev,
            i_mode: AtomicU32::new(mode),
            i_uid: AtomicU32::new(uid),
            i_gid: AtomicU32::new(gid),
            i_flags: AtomicU32::new(0),
            i_btime: now,
            i_op,
            _line1: CacheLine(()),
            i_nlink: AtomicU32::new(if is_dir { 2 } else { 1 }),
            i_state: AtomicU32::new(0),
            times: Times {
                seq: SeqCount::new(),
                sec: [AtomicU64::new(s), AtomicU64::new(s), AtomicU64::new(s)],
                nsec: [AtomicU32::new(n), AtomicU32::new(n), AtomicU32::new(n)],
            },
            attr_lock: Mutex::new(()),
            i_opens: AtomicU32::new(0),
            _line2: CacheLine(()),
            i_size: AtomicU64::new(0),
            i_blocks: AtomicU64::new(0),
            i_rdev: 0,
            i_writecount: AtomicI32::new(0),
            i_flctx: crate::sync::once_box::OnceBox::new(),
        }
    }

    /// Marks a new inode as one its file system wants evicted (`I_EVICTABLE`). Context: the
    /// inode is not yet published.
    pub(crate) fn set_evictable(&self) {
        // Relaxed: not yet published; whatever publishes the inode orders this store.
        self.i_flags.fetch_or(I_EVICTABLE, Ordering::Relaxed);
    }

    /// Marks a new inode as one whose file system may change it behind the VFS's back
    /// (`I_REVALIDATE`). Context: the inode is not yet published.
    pub(crate) fn set_revalidate(&self) {
        // Relaxed: not yet published; whatever publishes the inode orders this store.
        self.i_flags.fetch_or(I_REVALIDATE, Ordering::Relaxed);
    }

    /// Stores attributes the file system read from its backing store (hostfs: a host
    /// `fstat`; Linux: `fuse_change_attributes`, `nfs_refresh_inode`): permission bits
    /// (the type bits are kept), owner, link count, size, blocks and the three times. Only
    /// the values that differ are written, the times through the seqcount (a ctime stored
    /// here clears the queried mark: it is the file system's, not a stamp of uvfs's). For
    /// inodes marked `I_REVALIDATE`, whose size and blocks are the file system's to write.
    pub(crate) fn set_attrs(&self, a: &FsAttrs) {
        let _g = self.lock_attr();
        let mode = (self.mode() & S_IFMT) | (a.mode & !S_IFMT);
        if mode != self.mode() {
            // Relaxed: writers are serialised by `attr_lock`; readers take a snapshot of
            // each word, as everywhere else (`setattr`).
            self.i_mode.store(mode, Ordering::Relaxed);
        }
        if a.uid != self.uid() {
            // Relaxed: as above.
            self.i_uid.store(a.uid, Ordering::Relaxed);
        }
        if a.gid != self.gid() {
            // Relaxed: as above.
            self.i_gid.store(a.gid, Ordering::Relaxed);
        }
        if a.nlink != self.nlink() {
            // Relaxed: as above (`add_nlink` writes it under `attr_lock` too).
            self.i_nlink.store(a.nlink, Ordering::Relaxed);
        }
        // Relaxed: a single-word snapshot for `stat`; data calls of a file system that
        // sets these order their data by their own locks (hostfs: the host's).
        self.i_size.store(a.size, Ordering::Relaxed);
        // Relaxed: as above.
        self.i_blocks.store(a.blocks, Ordering::Relaxed);
        let ([at, mt, ct], _) = self.times_raw(false, true);
        let new = [
            (a.times[0] != at).then_some(a.times[0]),
            (a.times[1] != mt).then_some(a.times[1]),
            (a.times[2] != ct).then_some(a.times[2]),
        ];
        if new.iter().any(Option::is_some) {
            self.store_times(new);
        }
    }

    /// Marks a new inode as one whose attributes live in the VFS inode alone
    /// (`I_VFS_ATTRS`): its file system's `setattr` is never called. Context: the inode is
    /// not yet published.
    pub(crate) fn set_vfs_attrs(&mut self) {
        // `&mut`: a plain store, no locked instruction on the create path.
        *self.i_flags.get_mut() |= I_VFS_ATTRS;
    }

    /// Marks a new inode as one without a file capability (`I_NOSEC`). Context: the inode
    /// is not yet published.
    pub(crate) fn set_nosec(&mut self) {
        // `&mut`: a plain store.
        *self.i_flags.get_mut() |= I_NOSEC;
    }

    /// A `security.*` attribute was set: the next write or truncation asks the file system
    /// for a capability again (`__vfs_setxattr_noperm` clears `S_NOSEC`).
    pub(crate) fn clear_nosec(&self) {
        // Relaxed: tested before it is written (lesson 3). This runs after the
        // attribute's store, which the file system's lock orders after any check that
        // missed it; that check's set of the bit happens before its look, so it happens
        // before this load, which then sees it (read coherence) and clears it. A check
        // that saw the attribute removes it itself (see `kill_priv`).
        if self.i_flags.load(Ordering::Relaxed) & I_NOSEC != 0 {
            self.i_flags.fetch_and(!I_NOSEC, Ordering::Relaxed);
        }
    }

    /// The capability half of `file_remove_privs` (a write, a truncation, an
    /// `fallocate`): unless the inode is `I_NOSEC`, the file system removes a
    /// `security.capability` the file has ([`InodeOps::kill_priv`]); a file system whose
    /// inodes change only through uvfs then marks the inode `I_NOSEC`, so that later writes
    /// make no call (Linux's `inode_has_no_xattr`).
    ///
    /// # Errors
    /// The file system's removal (the write or truncation fails, nothing else changes).
    ///
    /// [`InodeOps::kill_priv`]: crate::fs::InodeOps::kill_priv
    #[inline]
    pub(crate) fn kill_priv(&self) -> Result<()> {
        // Relaxed: a hint; see `kill_priv_slow` for why a stale answer is safe.
        if self.i_flags.load(Ordering::Relaxed) & I_NOSEC != 0 {
            return Ok(());
        }
        self.kill_priv_slow()
    }

    /// [`kill_priv`](Self::kill_priv) past its test: asks the file system, marking the
    /// inode `I_NOSEC` first where its file system allows. While one writer checks,
    /// another that sees the bit skips the check: harmless, as the first one's check
    /// removes the capability, or, if its removal fails, the capability is one its file
    /// system drops anyway (hostfs: the host's own write, truncation or chown), and an
    /// executable being written cannot be run meanwhile (`i_writecount`).
    #[cold]
    #[inline(never)]
    fn kill_priv_slow(&self) -> Result<()> {
        let cache = self.i_op.sb_nosec(self);
        if cache {
            // Set before the look, not after it: a `setxattr` of a capability that the
            // look misses stores it after the look (ordered by the file system's lock;
            // on hostfs, by the host's system calls) and then clears the bit
            // (`clear_nosec`), whose load happens after this set and so sees it. Relaxed:
            // that happens-before comes from the lock, not from this store.
            self.i_flags.fetch_or(I_NOSEC, Ordering::Relaxed);
        }
        let r = self.i_op.kill_priv(self);
        if r.is_err() && cache {
            self.clear_nosec();
        }
        r
    }

    /// Marks a new inode as one whose file system's `open` and `release` do nothing
    /// (`I_NOP_OPEN`). Context: the inode is not yet published.
    pub(crate) fn set_nop_open(&mut self) {
        // `&mut`: a plain store.
        *self.i_flags.get_mut() |= I_NOP_OPEN;
    }

    /// Whether the file system's `open` and `release` must be called for this inode.
    #[inline]
    pub(crate) fn wants_open(&self) -> bool {
        // Relaxed: the bit is immutable after creation (set before publication).
        self.i_flags.load(Ordering::Relaxed) & I_NOP_OPEN == 0
    }

    /// Gives this new inode `src`'s permission bits, owner, the three times (as `stat`
    /// reads them, consistent with each other; the queried mark clear: nobody has seen
    /// this inode's ctime yet), creation time and device number: a tmpfs snapshot's copy
    /// (snapshot.rs). Link count, size and blocks are the caller's. Context: the inode is
    /// not yet published (`&mut`: plain stores).
    pub(crate) fn copy_attrs_from(&mut self, src: &Inode) {
        let mode = *self.i_mode.get_mut() & S_IFMT | src.mode() & !S_IFMT;
        *self.i_mode.get_mut() = mode;
        *self.i_uid.get_mut() = src.uid();
        *self.i_gid.get_mut() = src.gid();
        for (i, t) in src.times().iter().enumerate() {
            *self.times.sec[i].get_mut() = t.tv_sec as u64;
            *self.times.nsec[i].get_mut() = t.tv_nsec as u32;
        }
        self.i_btime = src.i_btime;
        self.i_rdev = src.i_rdev;
    }

    /// `->setattr` with the request `attr` builds, unless the file system keeps no
    /// attributes of its own (`I_VFS_ATTRS`: no request, no call). Context: caller holds
    /// `attr_lock`.
    ///
    /// # Errors
    /// The file system's ([`InodeOps::setattr`](crate::fs::InodeOps)).
    #[inline]
    fn fs_setattr(&self, attr: impl FnOnce() -> crate::fs::SetAttr) -> Result<()> {
        if self.vfs_attrs() {
            return Ok(());
        }
        self.i_op.setattr(self, &attr())
    }

    /// The file system's set-ID kill ([`InodeOps::setid_kill`](crate::fs::InodeOps)):
    /// `None` for an inode whose attributes the VFS alone stores.
    ///
    /// # Errors
    /// The file system's refresh (`ESTALE`, `EIO`).
    pub(crate) fn fs_setid_kill(&self) -> Result<Option<u32>> {
        if self.vfs_attrs() {
            return Ok(None);
        }
        self.i_op.setid_kill(self)
    }

    /// `vfs_getattr` for `statx`: the file system brings the attributes `mask` names up to
    /// date as `sync` asks and gives the birth time it reports
    /// ([`InodeOps::statx`](crate::fs::InodeOps::statx)); where the VFS alone stores the
    /// attributes, the inode's own birth time when `mask` has `STATX_BTIME`
    /// (`shmem_getattr`).
    ///
    /// # Errors
    /// The file system's (`ESTALE`, `EIO`).
    pub(crate) fn fs_statx(&self, mask: u32, sync: StatxSync) -> Result<Option<Timespec>> {
        if self.vfs_attrs() {
            self.refresh()?;
            return Ok((mask & crate::stat::STATX_BTIME != 0).then(|| self.btime()));
        }
        self.i_op.statx(self, mask, sync)
    }

    /// `vfs_getattr` for `fstatat`'s basic stats with its `AT_STATX_*_SYNC` flags: as
    /// [`refresh`](Self::refresh) for `AT_STATX_SYNC_AS_STAT` (the path `stat` takes),
    /// else as [`fs_statx`](Self::fs_statx) with `STATX_BASIC_STATS`.
    ///
    /// # Errors
    /// The file system's (`ESTALE`, `EIO`).
    pub(crate) fn refresh_sync(&self, sync: StatxSync) -> Result<()> {
        if sync == StatxSync::AsStat {
            return self.refresh();
        }
        self.fs_statx(crate::stat::STATX_BASIC_STATS, sync)
            .map(drop)
    }

    /// Whether the VFS inode is the only store of the attributes (`I_VFS_ATTRS`).
    #[inline]
    fn vfs_attrs(&self) -> bool {
        // Relaxed: set before the inode was published, never changed since.
        self.i_flags.load(Ordering::Relaxed) & I_VFS_ATTRS != 0
    }

    /// Whether the inode's file system wants revalidation (`I_REVALIDATE`).
    #[inline]
    pub(crate) fn needs_revalidate(&self) -> bool {
        // Relaxed: set before the inode was published, never changed since.
        self.i_flags.load(Ordering::Relaxed) & I_REVALIDATE != 0
    }

    /// `vfs_getattr`'s refresh: for an inode marked `I_REVALIDATE`, asks the file system to
    /// bring the attributes up to date (`InodeOps::getattr`); nothing otherwise.
    ///
    /// # Errors
    /// The file system's (`ESTALE`, `EIO`).
    #[inline]
    pub(crate) fn refresh(&self) -> Result<()> {
        if self.needs_revalidate() {
            return self.i_op.getattr(self);
        }
        Ok(())
    }

    /// Whether the file system wants evictions and open counts (`I_EVICTABLE`).
    #[inline]
    fn evictable(&self) -> bool {
        // Relaxed: set before the inode was published, never changed since.
        self.i_flags.load(Ordering::Relaxed) & I_EVICTABLE != 0
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

    /// Creation time (`stx_btime`), set once when the inode is made.
    pub fn btime(&self) -> Timespec {
        self.i_btime
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

    /// Size in bytes of a regular file or symlink, or the stored size of a directory (0 on
    /// tmpfs, whose directory size the dentry derives from its entries:
    /// [`Dentry::size`](crate::Dentry::size)).
    #[inline]
    pub fn size(&self) -> u64 {
        // Relaxed: single-word snapshot; readers of data take the data lock, which orders
        // the size with the pages.
        self.i_size.load(Ordering::Relaxed)
    }

    /// Whether this is a directory.
    #[inline]
    pub fn is_dir(&self) -> bool {
        self.mode() & S_IFMT == S_IFDIR
    }

    /// Whether this is a symbolic link.
    #[inline]
    pub fn is_symlink(&self) -> bool {
        self.mode() & S_IFMT == S_IFLNK
    }

    /// Whether this is a regular file.
    #[inline]
    pub fn is_reg(&self) -> bool {
        self.mode() & S_IFMT == S_IFREG
    }

    /// `inode_permission` for `mask` (`MAY_READ`, `MAY_WRITE`, `MAY_EXEC`, with
    /// `MAY_ACCESS` or `MAY_CHDIR` from access(2) and chdir(2)): the mode bits as
    /// [`Cred::permission`] says, or the file system's own answer for an inode whose file
    /// system decides permissions or revalidates its attributes (`->permission`,
    /// [`InodeOps::permission`]).
    ///
    /// # Errors
    /// `EACCES` as [`Cred::permission`]; the file system's.
    ///
    /// [`InodeOps::permission`]: crate::fs::InodeOps::permission
    #[inline]
    pub fn permission(&self, cred: &Cred, mask: u32) -> Result<()> {
        if self.permission_asks_fs() {
            return self.i_op.permission(self, cred, mask);
        }
        self.generic_permission(cred, mask)
    }

    /// Whether [`permission`](Self::permission) asks the file system (which may block:
    /// the FUSE client refreshing attributes) rather than checking the mode bits alone.
    #[inline]
    pub(crate) fn permission_asks_fs(&self) -> bool {
        // Relaxed: set before the inode was published, never changed since.
        self.i_flags.load(Ordering::Relaxed) & (I_FS_PERMISSION | I_REVALIDATE) != 0
    }

    /// `generic_permission`: the mode-bit check of [`permission`](Self::permission), for
    /// `mask`'s `MAY_READ | MAY_WRITE | MAY_EXEC` bits (`MAY_ACCESS`, `MAY_CHDIR` ignored).
    ///
    /// # Errors
    /// `EACCES` as [`Cred::permission`].
    #[inline]
    pub fn generic_permission(&self, cred: &Cred, mask: u32) -> Result<()> {
        cred.permission(
            self.mode(),
            self.uid(),
            self.gid(),
            mask & crate::cred::MAY_RWX,
        )
    }

    /// Whether the inode's file system decides permissions (`I_FS_PERMISSION`).
    #[inline]
    pub(crate) fn fs_permission(&self) -> bool {
        // Relaxed: set before the inode was published, never changed since.
        self.i_flags.load(Ordering::Relaxed) & I_FS_PERMISSION != 0
    }

    /// Marks a new inode as one whose file system decides permissions
    /// (`I_FS_PERMISSION`). Context: the inode is not yet published.
    pub(crate) fn set_fs_permission(&mut self) {
        // `&mut`: a plain store.
        *self.i_flags.get_mut() |= I_FS_PERMISSION;
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
            let (out, queried) = self.load_times();
            if query && (!queried || !test_first) {
                count_write();
                // Relaxed: the mark needs no ordering of its own. The next change (a syscall
                // that starts after this one returns) loads the word in its write section and
                // sees the mark by coherence. Inside this read section the `fetch_or` is one
                // more read: if it found a value a writer stored, `read_retry` (its Acquire
                // fence, paired with the Release fence in `SeqCount::write_lock`) sees the
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

    /// Reads the times inside a write section (no other writer, so no retry) and whether
    /// the ctime was queried.
    fn times_in_section(&self, _w: &SeqWriteGuard<'_>) -> ([Timespec; 3], bool) {
        self.load_times()
    }

    /// Loads `[atime, mtime, ctime]` and the queried mark, for a read section (which
    /// validates them with `read_retry`) or a write section (no other writer).
    #[inline]
    fn load_times(&self) -> ([Timespec; 3], bool) {
        let mut out = [Timespec::default(); 3];
        let mut cns = 0;
        for (i, t) in out.iter_mut().enumerate() {
            // Relaxed: in a read section `read_retry` orders them; in a write section only
            // its owner stores them, and `write_lock`'s Acquire ordered the previous
            // section's stores before these loads.
            t.tv_sec = self.times.sec[i].load(Ordering::Relaxed) as i64;
            // Relaxed: as above (in a write section a racing `stat`'s `fetch_or` of the
            // mark is read or not: either way that reader retries or sees the value this
            // section replaces).
            cns = self.times.nsec[i].load(Ordering::Relaxed);
            t.tv_nsec = (cns & !I_CTIME_QUERIED) as i64;
        }
        (out, cns & I_CTIME_QUERIED != 0)
    }

    /// Stores the chosen timestamps (`None` = unchanged) inside a write section; storing a
    /// ctime clears `I_CTIME_QUERIED`.
    fn store_in_section(&self, _w: &SeqWriteGuard<'_>, t: [Option<Timespec>; 3]) {
        for (i, v) in t.iter().enumerate() {
            if let Some(v) = v {
                // Relaxed: inside a seqcount write section, which orders them for readers.
                self.times.sec[i].store(v.tv_sec as u64, Ordering::Relaxed);
                // Relaxed: as above. For the ctime this overwrites a mark a racing `stat`
                // set on the old value: see `times_raw`.
                self.times.nsec[i].store(v.tv_nsec as u32, Ordering::Relaxed);
            }
        }
    }

    /// Stores the chosen timestamps (`None` = unchanged) in one write section of the times'
    /// spinning seqlock; storing a ctime clears `I_CTIME_QUERIED`.
    fn store_times(&self, t: [Option<Timespec>; 3]) {
        count_write();
        let w = self.times.seq.write_lock();
        self.store_in_section(&w, t);
    }

    /// Stamps the ctime with the current time (`inode_set_ctime_current`, see `next_ctime`)
    /// and sets atime and mtime as asked, `TimeUpdate::Now` being the new ctime (as
    /// `setattr_copy_mgtime`). Stores only the fields that change. Returns the ctime. `now`
    /// is the syscall's [`coarse_now`] (or a later time another inode of the same syscall
    /// was stamped with).
    ///
    /// One write section of the times' spinning seqlock reads the times, decides and
    /// stores, so stamps never lose each other's changes and the ctime never moves back
    /// past a racing stamp's. Needs no `attr_lock`: the times have their own writers' lock
    /// (callers that also change other attributes hold `attr_lock` around it for those).
    /// It reads nothing first: the hot callers that may change nothing test before they
    /// call (`touch_mtime_ctime`, `touch_ctime`: lesson 3), and `futimens` with explicit
    /// times almost always changes them, so a read before the section would only cost
    /// (tools/callgrind's futimes loop: 902 instructions per loop with it, 692 without).
    fn stamp(&self, now: Timespec, atime: TimeUpdate, mtime: TimeUpdate) -> Timespec {
        count_write();
        let w = self.times.seq.write_lock();
        let (cur, queried) = self.times_in_section(&w);
        let t = next_ctime(now, cur[2], queried, fine_now);
        let new = Self::stamp_changes(cur, t, atime, mtime);
        self.store_in_section(&w, new);
        t
    }

    /// The fields a stamp with ctime `t` changes from `cur` (`None` = unchanged).
    fn stamp_changes(
        cur: [Timespec; 3],
        t: Timespec,
        atime: TimeUpdate,
        mtime: TimeUpdate,
    ) -> [Option<Timespec>; 3] {
        let [a, m, c] = cur;
        let pick = |u: TimeUpdate, cur: Timespec| {
            match u {
                TimeUpdate::Keep => None,
                TimeUpdate::Now => Some(t),
                TimeUpdate::Set(v) => Some(v),
            }
            .filter(|v| *v != cur)
        };
        [pick(atime, a), pick(mtime, m), (t != c).then_some(t)]
    }

    /// `futimens`/`utimensat` (`setattr_copy_mgtime`): ctime becomes the current time, atime
    /// and mtime as asked.
    ///
    /// For a file system that keeps no attributes of its own (`I_VFS_ATTRS`: tmpfs) this is
    /// one [`stamp`](Self::stamp): no `attr_lock`, one locked instruction, the times' line
    /// the only one written (issue 16: concurrent `futimens` of one file spin on that line
    /// for a few stores, never park). Otherwise, under `attr_lock`, the file system gets the
    /// times first (`->setattr`), and the VFS stores them after it succeeded.
    ///
    /// # Errors
    /// The file system's ([`InodeOps::setattr`](crate::fs::InodeOps)); nothing changes.
    pub(crate) fn set_times(
        &self,
        now: Timespec,
        atime: TimeUpdate,
        mtime: TimeUpdate,
    ) -> Result<()> {
        if self.vfs_attrs() {
            self.stamp(now, atime, mtime);
            return Ok(());
        }
        let _g = self.lock_attr();
        let (cur, queried) = self.times_raw(false, true);
        let t = next_ctime(now, cur[2], queried, fine_now);
        let value = |u: TimeUpdate| match u {
            TimeUpdate::Keep => None,
            TimeUpdate::Now => Some(t),
            TimeUpdate::Set(v) => Some(v),
        };
        self.fs_setattr(|| crate::fs::SetAttr {
            atime: value(atime),
            mtime: value(mtime),
            atime_now: matches!(atime, TimeUpdate::Now),
            mtime_now: matches!(mtime, TimeUpdate::Now),
            ..Default::default()
        })?;
        count_write();
        let w = self.times.seq.write_lock();
        let (now_cur, _) = self.times_in_section(&w);
        let mut new = Self::stamp_changes(now_cur, t, atime, mtime);
        // A stamp that raced with the file system's call (`stamp` takes no `attr_lock`) and
        // stored a later ctime keeps it: the ctime never goes back.
        if now_cur[2] != cur[2] && now_cur[2] > t {
            new[2] = None;
        }
        self.store_in_section(&w, new);
        Ok(())
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
        self.stamp(now, TimeUpdate::Keep, TimeUpdate::Now)
    }

    /// ctime = the current time (a change to attributes or links); as `touch_mtime_ctime`,
    /// writes nothing when the ctime would not change. Returns the ctime.
    pub(crate) fn touch_ctime(&self, now: Timespec) -> Timespec {
        let ([_, _, c], queried) = self.times_raw(false, true);
        if !queried && next_ctime(now, c, false, fine_now) == c {
            return c;
        }
        self.stamp(now, TimeUpdate::Keep, TimeUpdate::Keep)
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
            self.store_times([Some(now), None, None]);
        }
    }

    /// Changes the link count by `delta` and, with `now`, stamps the ctime (see
    /// `stamp`). Returns the ctime. Tells the file system of names of a
    /// non-directory gone (`InodeOps::unlink`) and, at the last name with no open file,
    /// evicts (`InodeOps::evict`, which may take the data lock).
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
        if self.evictable() {
            if new < n && !self.is_dir() {
                self.i_op.nlink_dec(self, n, new);
            }
            if new == 0 {
                evict = self.may_evict_locked();
            }
        }
        let t = match now {
            Some(now) => self.stamp(now, TimeUpdate::Keep, TimeUpdate::Keep),
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

    /// `evict` (`iput_final` -> `evict_inode`): tells the file system, unless `what` is
    /// `Evict::No`. Called without `attr_lock` (its data lock comes first in the lock order).
    fn evict(&self, what: Evict) {
        if what != Evict::No {
            self.i_op.evict(self, what == Evict::All);
        }
    }

    /// A `File` opened this inode (`open_handle`); counted for evictable inodes only.
    #[inline]
    pub(crate) fn file_opened(&self) {
        if self.evictable() {
            self.file_opened_evictable();
        }
    }

    /// [`file_opened`](Self::file_opened) for an evictable inode (out of line: tmpfs's
    /// inodes are not).
    #[inline(never)]
    fn file_opened_evictable(&self) {
        let _g = self.lock_attr();
        // Relaxed: under `attr_lock`.
        let n = self.i_opens.load(Ordering::Relaxed);
        // Relaxed: as above.
        self.i_opens.store(n + 1, Ordering::Relaxed);
    }

    /// `get_write_access`: counts an opener that may write the file; `ETXTBSY` while an
    /// `execve` open denies writing ([`deny_write_access`](Self::deny_write_access)).
    /// Paired with [`put_write_access`](Self::put_write_access).
    ///
    /// # References
    /// Linux `get_write_access` (include/linux/fs.h): `atomic_inc_unless_negative`.
    pub(crate) fn get_write_access(&self) -> Result<()> {
        self.write_count_step(1)
    }

    /// `f` under a write count of its own ([`get_write_access`](Self::get_write_access)
    /// before, [`put_write_access`](Self::put_write_access) after): `truncate(2)` and an
    /// `O_TRUNC` open that holds none (Linux `vfs_truncate`, `handle_truncate`).
    ///
    /// # Errors
    /// `ETXTBSY` (the file runs), then `f`'s.
    pub(crate) fn with_write_access<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.get_write_access()?;
        let r = f();
        self.put_write_access();
        r
    }

    /// `atomic_inc_unless_negative` (`step` 1) / `atomic_dec_unless_positive` (`step`
    /// -1) of `i_writecount`; `ETXTBSY` when the count has the other sign.
    fn write_count_step(&self, step: i32) -> Result<()> {
        // Relaxed: the count orders no other memory (the data a writer changes is ordered
        // by its own locks); the compare-and-swap alone makes the sign check and the step
        // one atomic step against the opposite step of a writer or an exec open.
        let mut n = self.i_writecount.load(Ordering::Relaxed);
        loop {
            if n.signum() == -step {
                return Err(Errno::ETXTBSY);
            }
            // Relaxed (both): as above; a failure reloads the current count.
            let (ok, fail) = (Ordering::Relaxed, Ordering::Relaxed);
            match self
                .i_writecount
                .compare_exchange_weak(n, n + step, ok, fail)
            {
                Ok(_) => return Ok(()),
                Err(cur) => n = cur,
            }
        }
    }

    /// Whether a file is open for writing on this inode (`i_writecount > 0`, Linux's
    /// `inode_is_open_for_write`). A snapshot: opens and closes may race it.
    #[cfg_attr(not(feature = "fuse"), allow(dead_code))] // the FUSE server's
    pub(crate) fn is_open_for_write(&self) -> bool {
        // Relaxed: a snapshot that orders nothing. Its one caller (the FUSE server's
        // empty SETATTR) needs only to see the count its own request's writer holds: that
        // writer's open completed (its reply sent) before the kernel sent this request.
        self.i_writecount.load(Ordering::Relaxed) > 0
    }

    /// `put_write_access`: a writer counted by [`get_write_access`](Self::get_write_access)
    /// is gone.
    pub(crate) fn put_write_access(&self) {
        // Relaxed: as `write_count_step`.
        self.i_writecount.fetch_sub(1, Ordering::Relaxed);
    }

    /// `deny_write_access`: an `execve` open runs the file; `ETXTBSY` while a writer has it
    /// open. Paired with [`allow_write_access`](Self::allow_write_access).
    ///
    /// # References
    /// Linux `deny_write_access` / `exe_file_deny_write_access`:
    /// `atomic_dec_unless_positive`.
    pub(crate) fn deny_write_access(&self) -> Result<()> {
        self.write_count_step(-1)
    }

    /// `allow_write_access`: a denial of [`deny_write_access`](Self::deny_write_access) is
    /// gone.
    pub(crate) fn allow_write_access(&self) {
        // Relaxed: as `write_count_step`.
        self.i_writecount.fetch_add(1, Ordering::Relaxed);
    }

    /// A `File` of this inode was released (its last reference); for an evictable inode,
    /// evicts an unlinked one at its last close.
    #[inline]
    pub(crate) fn file_closed(&self) {
        if self.evictable() {
            self.file_closed_evictable();
        }
    }

    /// [`file_closed`](Self::file_closed) for an evictable inode (out of line, as
    /// `file_opened_evictable`).
    #[inline(never)]
    fn file_closed_evictable(&self) {
        let g = self.lock_attr();
        // Relaxed: under `attr_lock`.
        let n = self.i_opens.load(Ordering::Relaxed);
        // Relaxed: as above.
        self.i_opens.store(n.saturating_sub(1), Ordering::Relaxed);
        let evict = self.may_evict_locked();
        drop(g);
        self.evict(evict);
    }

    /// Whether this inode has no open file now (a `File` counts from its open,
    /// `file_opened`, to its last put, `file_closed`). Read under `attr_lock`, which both
    /// take: whatever the caller did before this call happens before every use of a file
    /// opened after it, and every use of a file closed before it happens before the
    /// caller's next step (tmpfs `drop_pages` frees pages at once on that ground).
    /// Context: an evictable inode (others keep no open count); the caller holds neither
    /// `attr_lock` nor anything ordered after it.
    pub(crate) fn no_open_file(&self) -> bool {
        debug_assert!(
            self.evictable(),
            "open files are counted for evictable inodes only"
        );
        let _g = self.lock_attr();
        // Relaxed: written only under `attr_lock`, which we hold.
        self.i_opens.load(Ordering::Relaxed) == 0
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
    /// `stamp`) and returns it. Clears `I_LINKABLE`.
    ///
    /// Under `attr_lock`, as `add_nlink`, so a concurrent unlink of the last name either
    /// comes first (and this fails) or after.
    ///
    /// # Errors
    /// `ENOENT` when the link count is 0 and the inode is not `I_LINKABLE` (a removed file);
    /// `EMLINK` when the count is at [`LINK_MAX`] (tmpfs has no limit of its own: Linux would
    /// wrap the 32-bit count after 2^32 links; uvfs refuses the last one).
    ///
    /// `fs_link` is the file system's `->link` (the new name on its side), called under
    /// `attr_lock` after the VFS's checks and the inode's own bookkeeping, as `vfs_link`
    /// calls `->link` with the inode locked after its checks; its error undoes the
    /// bookkeeping and changes nothing.
    pub(crate) fn link_inc(
        &self,
        now: Timespec,
        fs_link: impl FnOnce() -> Result<()>,
    ) -> Result<Timespec> {
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
        // The file system's bookkeeping last (tmpfs: `ENOSPC` from `nr_inodes`), after
        // every check of the VFS's, as `vfs_link` calls `->link` last.
        self.i_op.nlink_inc(self, n == 0)?;
        if let Err(e) = fs_link() {
            if self.evictable() {
                self.i_op.nlink_dec(self, n + 1, n);
            }
            return Err(e);
        }
        // Relaxed: as above.
        self.i_nlink.store(n + 1, Ordering::Relaxed);
        if st & I_LINKABLE != 0 {
            // Relaxed: as above.
            self.i_state.store(st & !I_LINKABLE, Ordering::Relaxed);
        }
        Ok(self.stamp(now, TimeUpdate::Keep, TimeUpdate::Keep))
    }

    /// `notify_change` for mode and owner (`setattr_prepare` + `setattr_copy`): under
    /// `attr_lock`, `f` gets the current `(mode, uid, gid)`, checks the caller's rights and
    /// returns the new ones (or an errno, changing nothing); stores those that differ and
    /// stamps the ctime (`ATTR_CTIME`, set by chmod and chown even when nothing else
    /// changes). The file type bits of the mode are kept whatever `f` returns. `chmod`: the
    /// caller is chmod(2), whose mode goes to the file system even when it is unchanged.
    ///
    /// # Errors
    /// Those of `f`.
    pub(crate) fn setattr(
        &self,
        now: Timespec,
        chmod: bool,
        f: impl FnOnce(u32, u32, u32) -> Result<(u32, u32, u32)>,
    ) -> Result<()> {
        let _g = self.lock_attr();
        let (mode, uid, gid) = (self.mode(), self.uid(), self.gid());
        let (new_mode, new_uid, new_gid) = f(mode, uid, gid)?;
        let new_mode = (mode & S_IFMT) | (new_mode & !S_IFMT);
        // The file system's change after the VFS's checks, before the VFS's copy. A chmod
        // passes its mode even when unchanged (Linux's `chmod_common` always sets
        // ATTR_MODE): a FUSE server must see a SETATTR of the mode to stamp the ctime.
        self.fs_setattr(|| crate::fs::SetAttr {
            mode: (chmod || new_mode != mode).then_some(new_mode & 0o7777),
            uid: (new_uid != uid).then_some(new_uid),
            gid: (new_gid != gid).then_some(new_gid),
            ..Default::default()
        })?;
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
        self.stamp(now, TimeUpdate::Keep, TimeUpdate::Keep);
        Ok(())
    }

    /// `killpriv` on write and truncate (`file_remove_privs`, `setattr_should_drop_suidgid`):
    /// clears set-user-ID, and set-group-ID when group-executable or when the writer is not
    /// in the file's group, unless the writer has `CAP_FSETID` (root). Tests before writing
    /// (lesson 3). Where the cached mode says to kill, a file system that decides the kill
    /// itself ([`InodeOps::setid_kill`](crate::fs::InodeOps), FUSE as `fuse_setattr`) refreshes
    /// and recomputes it first.
    ///
    /// # Errors
    /// The file system's ([`InodeOps::setattr`](crate::fs::InodeOps), its refresh); nothing
    /// changes.
    pub(crate) fn kill_suid(&self, cred: &Cred, now: Timespec) -> Result<()> {
        self.kill_suid_with(cred, now, false)
    }

    /// [`kill_suid`](Self::kill_suid) before a truncation (`do_truncate`, which puts the
    /// kill in the same `notify_change` as the size): where the file system's recomputed
    /// kill clears nothing, no `setattr` is sent for it (the size's goes on its own).
    ///
    /// # Errors
    /// As [`kill_suid`](Self::kill_suid).
    pub(crate) fn kill_suid_truncate(&self, cred: &Cred, now: Timespec) -> Result<()> {
        self.kill_suid_with(cred, now, true)
    }

    /// Whether a write, truncation or chown by `cred` would clear a set-ID bit of `mode`
    /// (this inode's, now or under its attribute lock): `setattr_should_drop_suidgid`
    /// without its `CAP_FSETID` test, which the callers make or, for a caller the kernel
    /// says lacks it, skip. Set-user-ID always; set-group-ID when group-executable or
    /// `cred` is outside the file's group (`setattr_should_drop_sgid`).
    pub(crate) fn drops_setid(&self, mode: u32, cred: &Cred) -> bool {
        mode & S_ISUID != 0 || self.drops_sgid(mode, cred)
    }

    /// The set-group-ID half of [`drops_setid`](Self::drops_setid).
    fn drops_sgid(&self, mode: u32, cred: &Cred) -> bool {
        mode & S_ISGID != 0 && (mode & S_IXGRP != 0 || !cred.in_group(self.gid()))
    }

    /// [`kill_suid`](Self::kill_suid), for a truncation when `truncate`; the file
    /// capability first ([`kill_priv`](Self::kill_priv)), whoever the caller is.
    fn kill_suid_with(&self, cred: &Cred, now: Timespec, truncate: bool) -> Result<()> {
        self.kill_priv()?;
        if self.drops_setid(self.mode(), cred) && !cred.capable(crate::Caps::FSETID) {
            // Before the attribute lock: a refresh stores attributes under it.
            let fs_kill = self.fs_setid_kill()?;
            let _g = self.lock_attr();
            let mode = self.mode();
            let new = match fs_kill {
                Some(bits) => mode & !bits,
                None if self.drops_sgid(mode, cred) => mode & !(S_ISUID | S_ISGID),
                None => mode & !S_ISUID,
            };
            if truncate && fs_kill.is_some() && new == mode {
                return Ok(());
            }
            self.fs_setattr(|| crate::fs::SetAttr {
                // Linux's `fuse_setattr` sends what is left when the refreshed mode has
                // nothing to clear (no ATTR_MODE); otherwise the mode, as notify_change.
                mode: (fs_kill.is_none() || new != mode).then_some(new & 0o7777),
                ..Default::default()
            })?;
            // Relaxed: serialised by `attr_lock`.
            self.i_mode.store(new, Ordering::Relaxed);
            self.stamp(now, TimeUpdate::Keep, TimeUpdate::Keep);
        }
        Ok(())
    }

    /// `generic_fillattr` + `fill_mg_cmtime`: the inode's attributes as a `Stat`. Marks the
    /// ctime queried (a write only when not already marked), so that the next change gets
    /// a timestamp different from the one returned here. A directory's `st_size` here is
    /// the stored one (0 on tmpfs); `stat`, `fstat` and `statx` give its dentry's
    /// ([`Dentry::size`](crate::Dentry::size)).
    pub fn stat(&self) -> Stat {
        self.stat_query(true, true)
    }

    /// [`stat`](Self::stat), marking the ctime queried only when `query` (`statx` asking
    /// for neither mtime nor ctime leaves the mark alone, as `fill_mg_cmtime`), and then
    /// test-before-set (`test_first`, uvfs) or by an unconditional `fetch_or` (`false`:
    /// lesson 3's "before", for ablation benchmarks; see [`crate::variant`]).
    pub(crate) fn stat_query(&self, query: bool, test_first: bool) -> Stat {
        let ([a, m, c], _) = self.times_raw(query, test_first);
        Stat {
            st_dev: self.i_dev,
            st_ino: self.i_ino,
            st_nlink: self.nlink() as u64,
            st_mode: self.mode(),
            st_uid: self.uid(),
            st_gid: self.gid(),
            st_rdev: self.i_rdev,
            st_size: self.size() as i64,
            st_blksize: PAGE_SIZE as i64,
            // Relaxed: single-word snapshot.
            st_blocks: self.i_blocks.load(Ordering::Relaxed) as i64,
            st_atime: a,
            st_mtime: m,
            st_ctime: c,
        }
    }

    /// Reads at `off` through the file system ([`FileOps::read_at`](crate::fs::FileOps)).
    #[inline]
    pub(crate) fn read_at(&self, fh: u64, buf: &mut [u8], off: u64) -> Result<usize> {
        self.i_op.read_at(self, fh, buf, off)
    }

    /// Writes through the file system ([`FileOps::write_at`](crate::fs::FileOps)).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_at(
        &self,
        fh: u64,
        buf: &[u8],
        off: u64,
        append: bool,
        now: Timespec,
        cred: &Cred,
        fsize_limit: u64,
    ) -> Result<(usize, u64)> {
        self.i_op
            .write_at(self, fh, buf, off, append, now, cred, fsize_limit)
    }

    /// Truncates through the file system ([`InodeOps::truncate`](crate::fs::InodeOps)),
    /// through the open file with handle `fh` if given.
    pub(crate) fn truncate_at(
        &self,
        len: u64,
        now: Timespec,
        stamp: bool,
        fh: Option<u64>,
    ) -> Result<()> {
        self.i_op.truncate(self, len, now, stamp, fh)
    }

    /// fallocate through the file system ([`FileOps::fallocate`](crate::fs::FileOps)).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fallocate(
        &self,
        fh: u64,
        off: u64,
        len: u64,
        mode: crate::fs::FallocMode,
        keep_size: bool,
        now: Timespec,
        cred: &Cred,
        fsize_limit: u64,
    ) -> Result<()> {
        self.i_op
            .fallocate(self, fh, off, len, mode, keep_size, now, cred, fsize_limit)
    }

    /// `SEEK_DATA`/`SEEK_HOLE` through the file system
    /// ([`FileOps::seek_data_hole`](crate::fs::FileOps)).
    pub(crate) fn seek_data_hole(&self, fh: u64, off: u64, data: bool) -> Result<u64> {
        self.i_op.seek_data_hole(self, fh, off, data)
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{ns_to_ts, ts_next, ts_to_ns};

    fn writes() -> u32 {
        SHARED_WRITES.with(|c| c.get())
    }

    fn reg(now: Timespec) -> std::sync::Arc<Inode> {
        let args = crate::fs::NewInode {
            mode: S_IFREG | 0o644,
            uid: 0,
            gid: 0,
            rdev: 0,
            target: None,
            now,
            open: crate::types::OpenFlags::empty(),
        };
        crate::fs::tmpfs::new_inode(2, 0, args, None).unwrap()
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
        assert!(i.link_inc(t, || Ok(())).is_ok());
        assert_eq!(i.nlink(), 2);
        // A count at LINK_MAX (here 2 - 3, wrapped) refuses one more link, unchanged.
        i.add_nlink(-3, None);
        assert_eq!(i.nlink(), LINK_MAX);
        assert_eq!(i.link_inc(t, || Ok(())), Err(Errno::EMLINK));
        assert_eq!(i.nlink(), LINK_MAX);
        // No links: ENOENT, unless marked linkable (O_TMPFILE), which one link clears.
        i.add_nlink(1, None);
        assert_eq!(i.nlink(), 0);
        assert_eq!(i.link_inc(t, || Ok(())), Err(Errno::ENOENT));
        i.set_linkable();
        assert!(i.link_inc(t, || Ok(())).is_ok());
        assert_eq!(i.nlink(), 1);
        i.add_nlink(-1, None);
        assert_eq!(i.link_inc(t, || Ok(())), Err(Errno::ENOENT));
    }

    #[test]
    fn fine_times_raise_the_floor() {
        let f = fine_now();
        assert!(coarse_now() >= f);
        assert!(fine_now() >= f);
    }
}
