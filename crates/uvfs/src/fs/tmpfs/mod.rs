//! tmpfs: the in-memory file system, behind the seam (`crate::fs`).
//!
//! Linux analogue: mm/shmem.c (`shmem_get_inode`, `shmem_reserve_inode`,
//! `shmem_free_inode`, `shmem_link`, `shmem_unlink`, `shmem_evict_inode`, `shmem_statfs`,
//! `shmem_symlink`).
//!
//! As in Linux, a tmpfs directory's entries live in the dentry cache (the VFS's directory
//! index, dir.rs), which is authoritative: tmpfs keeps no directory data of its own. What
//! tmpfs keeps per inode ([`TmpfsInode`]): a regular file's pages (regular.rs), a
//! symlink's target, and, on a mount with `size=`/`nr_inodes=` limits, the accounting that
//! charges them to the mount.
//!
//! # Invariants
//! - An inode of a mount with limits holds one inode of `nr_inodes` per name (at least
//!   one while it exists), and one page of `size=` per present page (a symlink of 128
//!   bytes or more: one); `evict` and `Drop` give them back exactly once.

mod regular;

pub use crate::mount::mount;
pub use crate::super_block::TmpfsOptions;

use crate::cred::Cred;
use crate::fs::{FileOps, FileSystem, InodeOps, NewInode};
use crate::inode::{Inode, PAGE_SIZE};
use crate::namei::NAME_MAX;
use crate::statfs::{StatFs, ST_RELATIME, ST_VALID, TMPFS_MAGIC};
use crate::super_block::{Limits, SuperBlock};
use crate::sync::plain::Ordering;
use crate::sync::RwLock;
use crate::types::{Timespec, S_IFLNK, S_IFMT, S_IFREG};
use crate::Result;
use regular::{RegData, BLOCKS_PER_PAGE};
use std::sync::Arc;

/// What kind of tmpfs inode, with its contents.
enum Contents {
    /// Regular file: sparse pages.
    Reg(RwLock<RegData>),
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
}

impl TmpfsInode {
    fn reg(&self) -> Option<&RwLock<RegData>> {
        match &self.contents {
            Contents::Reg(d) => Some(d),
            _ => None,
        }
    }
}

/// The tmpfs file-system type; its per-mount state (options, limits, inode numbers) is in
/// the [`SuperBlock`] for now.
#[derive(Debug, Default)]
pub(crate) struct Tmpfs;

/// A tmpfs inode for `args`, charged to `acct` (a mount's limits) when given: Linux
/// `shmem_get_inode` with `shmem_reserve_inode` and, for a long symlink, `shmem_symlink`'s
/// page. Without `acct` (no limits), the root of a new mount and the unit tests.
///
/// # Errors
/// `ENOSPC` when the mount's `nr_inodes` or (for a long symlink) `size=` is used up;
/// nothing is charged then.
pub(crate) fn new_inode(
    ino: u64,
    dev: u64,
    args: NewInode<'_>,
    acct: Option<&Arc<Limits>>,
) -> Result<Inode> {
    let contents = match args.mode & S_IFMT {
        S_IFREG => Contents::Reg(RwLock::default()),
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
    if let Some(a) = acct {
        a.reserve_inode()?;
        if let Err(e) = a.reserve_blocks(blocks / BLOCKS_PER_PAGE) {
            a.release_inode();
            return Err(e);
        }
    }
    let i_op = Box::new(TmpfsInode {
        acct: acct.cloned(),
        contents,
    });
    let mut inode = Inode::new(ino, dev, args.mode, args.uid, args.gid, args.now, i_op);
    inode.i_rdev = args.rdev;
    // Relaxed: the inode is not published yet; whatever publishes it orders these.
    inode.i_size.store(size, Ordering::Relaxed);
    // Relaxed: as above.
    inode.i_blocks.store(blocks, Ordering::Relaxed);
    if acct.is_some() {
        inode.set_evictable();
    }
    Ok(inode)
}

impl FileSystem for Tmpfs {
    fn name(&self) -> &'static str {
        "tmpfs"
    }

    /// [`new_inode`] with a fresh inode number from the per-thread batch.
    fn create(
        &self,
        sb: &SuperBlock,
        _dir: &Inode,
        _name: &[u8],
        args: NewInode<'_>,
    ) -> Result<Arc<Inode>> {
        new_inode(sb.next_ino(), sb.s_dev, args, sb.s_limits.as_ref()).map(Arc::new)
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
    /// stores; tmpfs keeps no copy.
    fn setattr(&self, _inode: &Inode, _attr: &crate::fs::SetAttr) -> Result<()> {
        Ok(())
    }

    /// `shmem_evict_inode`: drops the pages and gives them back, and with `all` the inode.
    fn evict(&self, inode: &Inode, all: bool) {
        let Some(a) = &self.acct else { return };
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

    fn truncate(&self, inode: &Inode, len: u64, now: Timespec, stamp: bool) -> Result<()> {
        match self.reg() {
            Some(d) => regular::truncate(d, &self.acct, inode, len, now, stamp),
            None => Err(crate::fs::not_regular(inode)),
        }
    }

    /// `shmem_statfs`: block and inode counts from the mount's limits; a limit not set
    /// leaves its counts 0, as `size=0`/`nr_inodes=0`.
    fn statfs(&self, inode: &Inode) -> StatFs {
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
        StatFs {
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
        }
    }
}

impl FileOps for TmpfsInode {
    #[inline]
    fn read_at(&self, inode: &Inode, buf: &mut [u8], off: u64) -> Result<usize> {
        match self.reg() {
            Some(d) => regular::read_at(d, inode, buf, off),
            None => Err(crate::fs::not_regular(inode)),
        }
    }

    fn write_at(
        &self,
        inode: &Inode,
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
        off: u64,
        len: u64,
        punch: bool,
        keep_size: bool,
        now: Timespec,
        cred: &Cred,
    ) -> Result<()> {
        match self.reg() {
            Some(d) => {
                regular::fallocate(d, &self.acct, inode, off, len, punch, keep_size, now, cred)
            }
            None => Err(crate::fs::not_regular(inode)),
        }
    }

    /// `noop_fsync`: memory is where tmpfs keeps its data.
    fn fsync(&self, _inode: &Inode, _datasync: bool) -> Result<()> {
        Ok(())
    }

    fn seek_data_hole(&self, inode: &Inode, off: u64, data: bool) -> Result<u64> {
        match self.reg() {
            Some(d) => regular::seek_data_hole(d, inode, off, data),
            None => Err(crate::fs::not_regular(inode)),
        }
    }
}
