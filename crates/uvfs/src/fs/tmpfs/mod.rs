//! tmpfs: the in-memory file system, behind the seam (`crate::fs`).
//!
//! Linux analogue: mm/shmem.c (`shmem_get_inode`, `shmem_reserve_inode`,
//! `shmem_free_inode`, `shmem_link`, `shmem_unlink`, `shmem_evict_inode`, `shmem_statfs`,
//! `shmem_symlink`).
//!
//! As in Linux, a tmpfs directory's entries live in the dentry cache (the VFS's directory
//! index, dcache.rs), which is authoritative: tmpfs keeps no directory data of its own. What
//! tmpfs keeps per inode (`TmpfsInode`): a regular file's pages (regular.rs), a
//! symlink's target, and, on a mount with `size=`/`nr_inodes=` limits, the accounting that
//! charges them to the mount.
//!
//! # Invariants
//! - An inode of a mount with limits holds one inode of `nr_inodes` per name (at least
//!   one while it exists), and one page of `size=` per present page (a symlink of 128
//!   bytes or more: one); `evict` and `Drop` give them back exactly once.

mod limits;
mod options;
mod regular;
mod snapshot;

pub(crate) use limits::Limits;
#[cfg(uvfs_loom)]
pub(crate) use limits::Mutation as LimitsMutation;
#[cfg(feature = "fuse")]
pub(crate) use options::ram_pages;
pub use options::TmpfsOptions;
pub use snapshot::snapshot;
pub(crate) use snapshot::snapshot_at;

use crate::cred::Cred;
use crate::fs::{FileOps, FileSystem, InodeOps, NewInode};
use crate::inode::{Inode, PAGE_SIZE};
use crate::mount::Mount;
use crate::namei::NAME_MAX;
use crate::super_block::SuperBlock;
use crate::sync::padded::CacheLine;
use crate::sync::plain::Mutex;
use crate::sync::plain::Ordering;
use crate::sync::plock;
use crate::types::{StatFs, ST_RELATIME, ST_VALID, TMPFS_MAGIC};
use crate::types::{Timespec, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG};
use crate::xattr::{XATTR_CREATE, XATTR_REPLACE};
use crate::Errno;
use crate::Result;
use regular::{RegFile, BLOCKS_PER_PAGE};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What kind of tmpfs inode, with its contents.
enum Contents {
    /// Regular file: sparse pages.
    Reg(RegFile),
    /// Symbolic link: its target, immutable.
    Symlink(Box<[u8]>),
    /// Directory (entries in the dentry cache), FIFO, socket or device node: nothing.
    None,
}

/// A tmpfs inode's own part (`shmem_inode_info`).
pub(crate) struct TmpfsInode {
    /// The mount's accounting when it has limits (`shmem_sb_info`); `None` without.
    /// Immutable.
    acct: Option<Arc<Limits>>,
    contents: Contents,
    /// Extended attributes by full name (`info->xattrs`, a `simple_xattrs`), listed in
    /// name order. Protected by its mutex (a leaf lock, taken alone).
    xattrs: Mutex<Xattrs>,
}

/// Extended attributes: full name -> value.
type Xattrs = BTreeMap<Box<[u8]>, Box<[u8]>>;

/// `simple_xattr_space`: the inode space an extended attribute is charged.
fn xattr_space(name: &[u8], value: &[u8]) -> u64 {
    40 + name.len() as u64 + value.len() as u64
}

impl TmpfsInode {
    fn reg(&self) -> Option<&RegFile> {
        match &self.contents {
            Contents::Reg(d) => Some(d),
            _ => None,
        }
    }
}

/// Inode numbers a thread takes from the mount at once (Linux: `SHMEM_INO_BATCH`).
const INO_BATCH: u64 = 1024;

thread_local! {
    /// (device, next, end) of this thread's current inode-number batch.
    static INO_CACHE: Cell<(u64, u64, u64)> = const { Cell::new((0, 0, 0)) };
}

/// One tmpfs mount's own state (`shmem_sb_info`): its options, its accounting, its inode
/// numbers.
///
/// Nothing here is written on open, close, read or write. Inode numbers come from a
/// per-thread batch of `INO_BATCH`, refilled from `next_ino` once per batch, so create
/// writes the shared counter once per 1024 files (Linux: per-CPU `ino_batch`). A mount
/// with `size` or `nr_inodes` limits (by default tmpfs's, half of RAM) also keeps
/// [`Limits`], per-thread reserves that a create or a page far from the limit takes from
/// the thread's own shard line; one asked for without limits (`size: Some(0)` and `nr_inodes: Some(0)`, as
/// tmpfs's `size=0,nr_inodes=0`) has none and writes no counter.
#[derive(Debug)]
pub(crate) struct Tmpfs {
    /// Mount options (immutable).
    opts: TmpfsOptions,
    /// Space and inode accounting; `None` without limits (immutable).
    limits: Option<Arc<Limits>>,
    /// Next unassigned inode-number batch start; written once per `INO_BATCH` creates, on
    /// a line of its own.
    next_ino: CacheLine<crate::sync::plain::AtomicU64>,
}

impl Tmpfs {
    /// The state of a new mount with `opts`: `None` limits are tmpfs's defaults, 0 is
    /// unlimited (`u64::MAX`), as tmpfs.
    fn new(opts: TmpfsOptions) -> Tmpfs {
        let limit = |v: Option<u64>, default: fn() -> u64, unit: u64| match v {
            Some(0) => u64::MAX,
            v => v.unwrap_or_else(default).div_ceil(unit),
        };
        let max_blocks = limit(opts.size, TmpfsOptions::default_size, options::PAGE_BYTES);
        let max_inodes = limit(opts.nr_inodes, TmpfsOptions::default_nr_inodes, 1);
        let limits = (max_blocks != u64::MAX || max_inodes != u64::MAX)
            .then(|| Arc::new(Limits::new(max_blocks, max_inodes)));
        Tmpfs {
            opts,
            limits,
            // 1 is the root directory.
            next_ino: CacheLine(crate::sync::plain::AtomicU64::new(2)),
        }
    }

    /// A fresh inode number of the mount with device `dev` (never reused within it).
    fn next_ino(&self, dev: u64) -> u64 {
        INO_CACHE.with(|c| {
            let (d, next, end) = c.get();
            if d == dev && next < end {
                c.set((d, next + 1, end));
                return next;
            }
            // Relaxed: only uniqueness is needed, which the RMW gives.
            let start = self.next_ino.fetch_add(INO_BATCH, Ordering::Relaxed);
            c.set((dev, start + 1, start + INO_BATCH));
            start
        })
    }
}

/// tmpfs: creates a new, empty in-memory file system and mounts it.
///
/// The root directory is inode 1, mode `0o1777` (or `opts.mode`), owned by
/// `opts.uid`/`opts.gid`, as `mount -t tmpfs` creates it; `size` and `nr_inodes` as
/// [`TmpfsOptions`] says (by default Linux's: half of RAM).
///
/// # References
/// Linux `mm/shmem.c` `shmem_fill_super`.
pub fn mount(opts: TmpfsOptions) -> Arc<Mount> {
    let fs = Tmpfs::new(opts);
    let args = NewInode {
        mode: S_IFDIR | fs.opts.mode.unwrap_or(0o1777) & 0o7777,
        uid: fs.opts.uid,
        gid: fs.opts.gid,
        rdev: 0,
        target: None,
        now: crate::time::coarse_now(),
        open: crate::types::OpenFlags::empty(),
    };
    let limits = fs.limits.clone();
    let sb = Arc::new(SuperBlock::new(Box::new(fs)));
    // The root counts against nr_inodes (Linux: `shmem_reserve_inode` in `shmem_get_inode`
    // for the root); a limit of at least 1 always fits it.
    let root_inode = new_inode(1, sb.s_dev, args, limits.as_ref())
        .unwrap_or_else(|_| unreachable!("an empty mount holds its root"));
    Mount::with_root(sb, root_inode)
}

/// A tmpfs inode for `args`, charged to `acct` (a mount's limits) when given: Linux
/// `shmem_get_inode` with `shmem_reserve_inode` and, for a long symlink, `shmem_symlink`'s
/// page. Without `acct` (no limits), the root of a new mount and the unit tests. Returned
/// in its `Arc` (built in this frame and moved to the heap once, not moved out of an
/// `Ok` first: the inode is a few cache lines).
///
/// # Errors
/// `ENOSPC` when the mount's `nr_inodes` or (for a long symlink) `size=` is used up;
/// nothing is charged then.
pub(crate) fn new_inode(
    ino: u64,
    dev: u64,
    args: NewInode<'_>,
    acct: Option<&Arc<Limits>>,
) -> Result<Arc<Inode>> {
    let contents = match args.mode & S_IFMT {
        S_IFREG => Contents::Reg(RegFile::default()),
        S_IFLNK => Contents::Symlink(Box::from(args.target.unwrap_or_default())),
        _ => Contents::None,
    };
    let (size, blocks) = match &contents {
        // shmem_symlink: a target of 128 bytes or more (129 with its NUL, past
        // SHORT_SYMLINK_LEN) takes a page; shorter ones live in the inode.
        Contents::Symlink(t) => (
            t.len() as u64,
            if t.len() >= 128 { BLOCKS_PER_PAGE } else { 0 },
        ),
        _ => (0, 0),
    };
    let pages = blocks / BLOCKS_PER_PAGE;
    charge(acct, pages, 0)?;
    let t = TmpfsInode {
        acct: acct.cloned(),
        contents,
        xattrs: Mutex::new(BTreeMap::new()),
    };
    let mut inode = assemble(ino, dev, args, t, size, pages);
    // No attribute yet, so no capability.
    inode.set_nosec();
    Ok(Arc::new(inode))
}

/// Charges one new inode to `acct` (a mount's limits, if it has them): one inode of
/// `nr_inodes`, `pages` pages of `size=` and `ispace` bytes of extended-attribute space;
/// all or nothing.
///
/// # Errors
/// `ENOSPC` when one of them does not fit; nothing stays charged then.
fn charge(acct: Option<&Arc<Limits>>, pages: u64, ispace: u64) -> Result<()> {
    let Some(a) = acct else { return Ok(()) };
    a.reserve_inode()?;
    if let Err(e) = a.reserve_blocks(pages) {
        a.release_inode();
        return Err(e);
    }
    if ispace > 0 {
        if let Err(e) = a.reserve_ispace(ispace) {
            a.release_blocks(pages);
            a.release_inode();
            return Err(e);
        }
    }
    Ok(())
}

/// The inode for the tmpfs part `t`, charged already ([`charge`]): `args`' type, mode,
/// owner, device number and times, `size` bytes and `pages` pages, and the flags every
/// tmpfs inode carries (evictable on a mount with limits: from here on its `Drop` gives
/// back what was charged).
#[inline]
fn assemble(ino: u64, dev: u64, args: NewInode<'_>, t: TmpfsInode, size: u64, pages: u64) -> Inode {
    let evictable = t.acct.is_some();
    let mut inode = Inode::new(
        ino,
        dev,
        args.mode,
        args.uid,
        args.gid,
        args.now,
        Box::new(t),
    );
    inode.i_rdev = args.rdev;
    // Relaxed: the inode is not published yet; whatever publishes it orders these.
    inode.i_size.store(size, Ordering::Relaxed);
    // Relaxed: as above.
    inode
        .i_blocks
        .store(pages * BLOCKS_PER_PAGE, Ordering::Relaxed);
    if evictable {
        inode.set_evictable();
    }
    // The attributes are the VFS inode's alone (`setattr` below does nothing), and open
    // and release have nothing to do.
    inode.set_vfs_attrs();
    inode.set_nop_open();
    inode
}

impl FileSystem for Tmpfs {
    fn name(&self) -> &'static str {
        "tmpfs"
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    /// [`new_inode`] with a fresh inode number from the per-thread batch.
    fn create(
        &self,
        dev: u64,
        _dir: &Inode,
        _name: &[u8],
        args: NewInode<'_>,
    ) -> Result<Arc<Inode>> {
        new_inode(self.next_ino(dev), dev, args, self.limits.as_ref())
    }
}

impl InodeOps for TmpfsInode {
    fn get_link<'a>(&'a self, _inode: &Inode) -> Result<&'a [u8]> {
        match &self.contents {
            Contents::Symlink(t) => Ok(t),
            _ => Err(crate::Errno::EINVAL),
        }
    }

    /// `shmem_link`: each further name takes an inode of the mount's count.
    fn nlink_inc(&self, _inode: &Inode, first: bool) -> Result<()> {
        match (&self.acct, first) {
            (Some(a), false) => a.reserve_inode(),
            _ => Ok(()),
        }
    }

    /// `shmem_unlink`: every name but the last held an inode of the mount's count.
    fn nlink_dec(&self, _inode: &Inode, before: u32, after: u32) {
        if let Some(a) = &self.acct {
            for _ in after.max(1)..before {
                a.release_inode();
            }
        }
    }

    /// `shmem_link`: the name is the new dentry the VFS links into its cache, which is
    /// tmpfs's directory; nothing else to change (the inode's count is `nlink_inc`'s).
    fn link(&self, _dir: &Inode, _name: &[u8], _inode: &Inode) -> Result<()> {
        Ok(())
    }

    /// `shmem_unlink`: the entry is the dentry the VFS removes from its cache.
    fn unlink(&self, _dir: &Inode, _name: &[u8], _victim: &Inode) -> Result<()> {
        Ok(())
    }

    /// `simple_rmdir`: the VFS has checked that the directory is empty (its cache is the
    /// whole directory) and removes the entry.
    fn rmdir(&self, _dir: &Inode, _name: &[u8], _victim: &Inode) -> Result<()> {
        Ok(())
    }

    /// `shmem_rename2`: the entries are the dentries the VFS moves (`d_move`,
    /// `d_exchange`); times and link counts are the VFS's.
    fn rename(
        &self,
        _odir: &Inode,
        _oname: &[u8],
        _ndir: &Inode,
        _nname: &[u8],
        _flags: crate::types::RenameFlags,
    ) -> Result<()> {
        Ok(())
    }

    /// `shmem_setattr` without a size: the attributes are the VFS inode's, which the VFS
    /// stores; tmpfs keeps no copy. Never called: tmpfs inodes are marked
    /// `Inode::set_vfs_attrs`.
    fn setattr(&self, _inode: &Inode, _attr: &crate::fs::SetAttr) -> Result<()> {
        Ok(())
    }

    /// `shmem_evict_inode`: drops the pages and gives them back, and with `all` the inode;
    /// the extended attributes' space too (`simple_xattrs_free`).
    fn evict(&self, inode: &Inode, all: bool) {
        let Some(a) = &self.acct else { return };
        let gone = std::mem::take(&mut *plock(&self.xattrs));
        if a.limits_inodes() {
            a.release_ispace(gone.iter().map(|(n, v)| xattr_space(n, v)).sum());
        }
        match &self.contents {
            Contents::Reg(d) => a.release_blocks(regular::drop_pages(d, inode)),
            // A long symlink's page. Relaxed: nothing else writes a symlink's `i_blocks`,
            // and with no name and no open file nobody can stat it any more; zeroed so that
            // it is not given back twice.
            _ => a.release_blocks(inode.i_blocks.swap(0, Ordering::Relaxed) / BLOCKS_PER_PAGE),
        }
        if all {
            a.release_inode();
        }
    }

    fn truncate(
        &self,
        inode: &Inode,
        len: u64,
        now: Timespec,
        stamp: bool,
        _fh: Option<u64>,
    ) -> Result<()> {
        match self.reg() {
            Some(d) => regular::truncate(d, &self.acct, inode, len, now, stamp),
            None => Err(crate::fs::not_regular(inode)),
        }
    }

    /// Attributes change only through uvfs (`shmem_fill_super` sets `SB_NOSEC`).
    fn sb_nosec(&self, _inode: &Inode) -> bool {
        true
    }

    /// `simple_xattr_get`.
    fn getxattr(&self, _inode: &Inode, name: &[u8], buf: Option<&mut [u8]>) -> Result<usize> {
        let x = plock(&self.xattrs);
        let v = x.get(name).ok_or(Errno::ENODATA)?;
        if let Some(buf) = buf {
            let dst = buf.get_mut(..v.len()).ok_or(Errno::ERANGE)?;
            dst.copy_from_slice(v);
        }
        Ok(v.len())
    }

    /// `shmem_xattr_handler_set` + `simple_xattr_set`: with `nr_inodes` set, a new value
    /// is charged to the inode space first (`ENOSPC`) and the old one given back.
    fn setxattr(
        &self,
        _inode: &Inode,
        name: &[u8],
        value: Option<&[u8]>,
        flags: u32,
    ) -> Result<()> {
        let acct = self.acct.as_ref().filter(|a| a.limits_inodes());
        let charge = match (acct, value) {
            (Some(a), Some(v)) => {
                let n = xattr_space(name, v);
                a.reserve_ispace(n)?;
                n
            }
            _ => 0,
        };
        let mut x = plock(&self.xattrs);
        let exists = x.contains_key(name);
        let refused = if exists && flags & XATTR_CREATE != 0 {
            Some(Errno::EEXIST)
        } else if !exists && (flags & XATTR_REPLACE != 0 || value.is_none()) {
            Some(Errno::ENODATA)
        } else {
            None
        };
        if let Some(e) = refused {
            drop(x);
            if let Some(a) = acct {
                a.release_ispace(charge);
            }
            return Err(e);
        }
        let old = match value {
            Some(v) => x.insert(Box::from(name), Box::from(v)),
            None => x.remove(name),
        };
        drop(x);
        if let (Some(a), Some(old)) = (acct, old) {
            a.release_ispace(xattr_space(name, &old));
        }
        Ok(())
    }

    /// `simple_xattr_list`: the names in order, `trusted.*` only for `CAP_SYS_ADMIN`.
    fn listxattr(&self, _inode: &Inode, buf: Option<&mut [u8]>, trusted: bool) -> Result<usize> {
        let x = plock(&self.xattrs);
        let names = x.keys().filter(|n| trusted || !n.starts_with(b"trusted."));
        let mut len = 0;
        match buf {
            None => names.for_each(|n| len += n.len() + 1),
            Some(buf) => {
                for n in names {
                    let dst = buf.get_mut(len..len + n.len() + 1).ok_or(Errno::ERANGE)?;
                    dst[..n.len()].copy_from_slice(n);
                    dst[n.len()] = 0;
                    len += n.len() + 1;
                }
            }
        }
        Ok(len)
    }

    /// `shmem_statfs`: block and inode counts from the mount's limits; a limit not set
    /// leaves its counts 0, as `size=0`/`nr_inodes=0`.
    fn statfs(&self, inode: &Inode) -> Result<StatFs> {
        let dev = inode.i_dev;
        let (mut f_blocks, mut f_bfree, mut f_files, mut f_ffree) = (0, 0, 0, 0);
        if let Some(l) = &self.acct {
            let (max_blocks, used_blocks, max_inodes, used_inodes) = l.counts();
            if max_blocks != u64::MAX {
                f_blocks = max_blocks;
                f_bfree = max_blocks.saturating_sub(used_blocks);
            }
            if max_inodes != u64::MAX {
                f_files = max_inodes;
                f_ffree = max_inodes.saturating_sub(used_inodes);
            }
        }
        Ok(StatFs {
            f_blocks,
            f_bfree,
            f_bavail: f_bfree,
            f_files,
            f_ffree,
            f_type: TMPFS_MAGIC,
            f_bsize: PAGE_SIZE as i64,
            f_fsid: [dev as u32 as i32, (dev >> 32) as u32 as i32],
            f_namelen: NAME_MAX as i64,
            f_frsize: PAGE_SIZE as i64,
            f_flags: ST_VALID | ST_RELATIME,
        })
    }
}

impl FileOps for TmpfsInode {
    #[inline]
    fn read_at(&self, inode: &Inode, _fh: u64, buf: &mut [u8], off: u64) -> Result<usize> {
        match self.reg() {
            Some(d) => regular::read_at(d, inode, buf, off),
            None => Err(crate::fs::not_regular(inode)),
        }
    }

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
        match self.reg() {
            Some(d) => regular::write_at(
                d,
                &self.acct,
                inode,
                buf,
                off,
                append,
                now,
                cred,
                fsize_limit,
            ),
            None => Err(crate::fs::not_regular(inode)),
        }
    }

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
        let punch = match mode {
            FallocMode::Allocate => false,
            FallocMode::PunchHole => true,
            // shmem_fallocate: KEEP_SIZE and PUNCH_HOLE only.
            FallocMode::ZeroRange => return Err(Errno::EOPNOTSUPP),
        };
        if !punch {
            // "We need to check rlimit even when FALLOC_FL_KEEP_SIZE" (shmem_fallocate).
            inode.newsize_ok(off.saturating_add(len), fsize_limit)?;
        }
        match self.reg() {
            Some(d) => {
                regular::fallocate(d, &self.acct, inode, off, len, punch, keep_size, now, cred)
            }
            None => Err(crate::fs::not_regular(inode)),
        }
    }

    /// `noop_fsync`: memory is where tmpfs keeps its data.
    fn fsync(&self, _inode: &Inode, _fh: u64, _datasync: bool) -> Result<()> {
        Ok(())
    }

    fn seek_data_hole(&self, inode: &Inode, _fh: u64, off: u64, data: bool) -> Result<u64> {
        match self.reg() {
            Some(d) => regular::seek_data_hole(d, inode, off, data),
            None => Err(crate::fs::not_regular(inode)),
        }
    }
}
