//! `Inode`: a file's attributes and contents (tmpfs keeps everything in memory).
//!
//! Linux analogue: `struct inode` (include/linux/fs.h), `mm/shmem.c` (tmpfs inodes,
//! `BOGO_DIRENT_SIZE`), `fs/inode.c` (`touch_atime`, `relatime_need_update`,
//! `file_update_time`).
//!
//! # Invariants and locks
//! - `i_ino`, `i_dev` and the file type bits of `i_mode`: immutable after creation.
//! - Attributes (`i_mode` permission bits, `i_uid`, `i_gid`, `i_nlink`, times): atomics, read
//!   without locks (as `generic_fillattr` does); written under `attr_lock` (Linux: `i_rwsem`).
//!   The times are read through a `SeqCount` so a reader never sees a torn timestamp.
//! - `i_size`, `i_blocks`: atomics, written only under the regular file's data write lock.
//! - Directory contents: see `Dir` (dir.rs).
//!
//! Lock order: `SuperBlock::s_rename_lock` -> `DirInner` (ancestor first, else by address)
//! -> `RegData` (data `RwLock`) -> `attr_lock`.

use crate::cred::Cred;
use crate::dir::Dir;
use crate::sync::plain::{AtomicU32, AtomicU64, Mutex, Ordering};
use crate::sync::seqcount::SeqCount;
use crate::sync::{plock, read, write, RwLock};
use crate::types::*;
use crate::{Errno, Result};
use std::collections::BTreeMap;
use std::fmt;

/// Bytes in one page of file data.
pub const PAGE_SIZE: usize = 4096;
/// tmpfs accounts 20 bytes of directory size per entry (`BOGO_DIRENT_SIZE`, mm/shmem.c).
pub const BOGO_DIRENT_SIZE: u64 = 20;
/// The largest file size and offset (`MAX_LFS_FILESIZE` on 64-bit).
pub const MAX_LFS_FILESIZE: i64 = i64::MAX;
/// Maximum number of hard links to one inode (tmpfs: `~0U`).
pub const LINK_MAX: u32 = u32::MAX;

/// What an inode is, with its type-specific contents.
pub(crate) enum InodeKind {
    /// Regular file: sparse pages.
    Reg(RwLock<RegData>),
    /// Directory.
    Dir(Box<Dir>),
    /// Symbolic link: its target, immutable.
    Symlink(Box<[u8]>),
}

/// A regular file's data: present pages by index; absent pages are holes (read as zeros).
#[derive(Default)]
pub(crate) struct RegData {
    pages: BTreeMap<u64, Box<[u8; PAGE_SIZE]>>,
}

/// Timestamps under a sequence counter (seconds stored as `i64` bits).
struct Times {
    seq: SeqCount,
    sec: [AtomicU64; 3],
    nsec: [AtomicU32; 3],
}

/// An inode: identity, attributes and contents of one file.
///
/// # Refcounting
/// Held by `Arc`: by each `Dentry` naming it and by each open `File`. An unlinked inode
/// keeps its data until the last `Arc` goes (Linux: `iput` of an inode with `i_nlink == 0`).
pub struct Inode {
    /// Inode number (immutable).
    pub(crate) i_ino: u64,
    /// Device number of the owning super block (immutable).
    pub(crate) i_dev: u64,
    i_mode: AtomicU32,
    i_uid: AtomicU32,
    i_gid: AtomicU32,
    i_nlink: AtomicU32,
    /// Size in bytes; written under the data write lock (regular) or the dir lock (dirs).
    pub(crate) i_size: AtomicU64,
    i_blocks: AtomicU64,
    times: Times,
    /// Serialises attribute writers (Linux: `i_rwsem` for `notify_change`).
    attr_lock: Mutex<()>,
    pub(crate) kind: InodeKind,
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
    /// A new inode of type `mode & S_IFMT` with all three times `now`.
    pub(crate) fn new(ino: u64, dev: u64, mode: u32, uid: u32, gid: u32, kind: InodeKind) -> Inode {
        let now = Timespec::now();
        let (nlink, size, blocks) = match &kind {
            InodeKind::Dir(_) => (2, 2 * BOGO_DIRENT_SIZE, 0),
            InodeKind::Reg(_) => (1, 0, 0),
            // shmem_symlink: a target of 128 bytes or more (129 with its NUL, past
            // SHORT_SYMLINK_LEN) takes a page; shorter ones live in the inode.
            InodeKind::Symlink(t) => (1, t.len() as u64, if t.len() >= 128 { 8 } else { 0 }),
        };
        let s = now.tv_sec as u64;
        let n = now.tv_nsec as u32;
        Inode {
            i_ino: ino,
            i_dev: dev,
            i_mode: AtomicU32::new(mode),
            i_uid: AtomicU32::new(uid),
            i_gid: AtomicU32::new(gid),
            i_nlink: AtomicU32::new(nlink),
            i_size: AtomicU64::new(size),
            i_blocks: AtomicU64::new(blocks),
            times: Times {
                seq: SeqCount::new(),
                sec: [AtomicU64::new(s), AtomicU64::new(s), AtomicU64::new(s)],
                nsec: [AtomicU32::new(n), AtomicU32::new(n), AtomicU32::new(n)],
            },
            attr_lock: Mutex::new(()),
            kind,
        }
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

    /// Size in bytes.
    #[inline]
    pub fn size(&self) -> u64 {
        // Relaxed: single-word snapshot; readers of data take the data lock, which orders
        // the size with the pages.
        self.i_size.load(Ordering::Relaxed)
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
        loop {
            let s = self.times.seq.read_begin();
            let mut out = [Timespec::default(); 3];
            for (i, t) in out.iter_mut().enumerate() {
                // Relaxed: inside a seqcount read section; `read_retry` orders them.
                t.tv_sec = self.times.sec[i].load(Ordering::Relaxed) as i64;
                // Relaxed: as above.
                t.tv_nsec = self.times.nsec[i].load(Ordering::Relaxed) as i64;
            }
            if !self.times.seq.read_retry(s) {
                return out;
            }
        }
    }

    /// Sets the chosen timestamps. Context: caller holds `attr_lock`.
    fn set_times_locked(&self, t: [Option<Timespec>; 3]) {
        self.times.seq.write_begin();
        for (i, v) in t.iter().enumerate() {
            if let Some(v) = v {
                // Relaxed: inside a seqcount write section, which orders them for readers.
                self.times.sec[i].store(v.tv_sec as u64, Ordering::Relaxed);
                // Relaxed: as above.
                self.times.nsec[i].store(v.tv_nsec as u32, Ordering::Relaxed);
            }
        }
        self.times.seq.write_end();
    }

    /// Sets atime/mtime/ctime (each `None` = unchanged) under the attribute lock.
    pub(crate) fn set_times(
        &self,
        atime: Option<Timespec>,
        mtime: Option<Timespec>,
        ctime: Option<Timespec>,
    ) {
        let _g = plock(&self.attr_lock);
        self.set_times_locked([atime, mtime, ctime]);
    }

    /// mtime = ctime = now (a change to contents: `inode_set_mtime_to_ts(.., inode_set_ctime_current)`).
    pub(crate) fn touch_mtime_ctime(&self) {
        let now = Timespec::now();
        self.set_times(None, Some(now), Some(now));
    }

    /// ctime = now (a change to attributes or links).
    pub(crate) fn touch_ctime(&self) {
        self.set_times(None, None, Some(Timespec::now()));
    }

    /// `touch_atime` under `relatime` (tmpfs's default): atime is written only when it is not
    /// newer than mtime or ctime, or is a day old. Test before set: most reads write nothing,
    /// so readers of a shared file do not steal its cache line (lesson 3).
    pub(crate) fn touch_atime(&self) {
        let [a, m, c] = self.times();
        let now = Timespec::now();
        let need = m >= a || c >= a || now.tv_sec - a.tv_sec >= 24 * 60 * 60;
        if need && a != now {
            self.set_times(Some(now), None, None);
        }
    }

    /// Changes the link count by `delta` and stamps ctime. Context: the caller holds the lock
    /// of a directory naming this inode.
    pub(crate) fn add_nlink(&self, delta: i32, ctime: Option<Timespec>) {
        let _g = plock(&self.attr_lock);
        // Relaxed: writers are serialised by `attr_lock`; readers take a snapshot.
        let n = self.i_nlink.load(Ordering::Relaxed);
        // Relaxed: as above.
        self.i_nlink
            .store(n.wrapping_add_signed(delta), Ordering::Relaxed);
        if ctime.is_some() {
            self.set_times_locked([None, None, ctime]);
        }
    }

    /// Adjusts a directory's tmpfs size by `delta` bytes. Context: caller holds its `DirInner`.
    pub(crate) fn add_dir_size(&self, delta: i64) {
        // Relaxed: serialised by the directory lock the caller holds.
        let s = self.i_size.load(Ordering::Relaxed);
        // Relaxed: as above.
        self.i_size
            .store(s.wrapping_add_signed(delta), Ordering::Relaxed);
    }

    /// `killpriv` on write and truncate (`setattr_should_drop_suidgid`): clears set-user-ID,
    /// and set-group-ID when group-executable or when the writer is not in the file's group,
    /// unless the writer has `CAP_FSETID` (root). Tests before writing (lesson 3).
    pub(crate) fn kill_suid(&self, cred: &Cred) {
        // setattr_should_drop_sgid: set-group-ID goes when group-executable, or, without
        // group execute, when the writer is not in the file's group.
        let drop_sgid =
            |mode: u32| mode & S_ISGID != 0 && (mode & S_IXGRP != 0 || !cred.in_group(self.gid()));
        let mode = self.mode();
        let kill = mode & S_ISUID != 0 || drop_sgid(mode);
        if kill && !cred.is_root() {
            let _g = plock(&self.attr_lock);
            let mode = self.mode();
            let mut new = mode & !S_ISUID;
            if drop_sgid(mode) {
                new &= !S_ISGID;
            }
            // Relaxed: serialised by `attr_lock`.
            self.i_mode.store(new, Ordering::Relaxed);
            self.set_times_locked([None, None, Some(Timespec::now())]);
        }
    }

    /// `generic_fillattr`: the inode's attributes as a `Stat`.
    pub fn stat(&self) -> Stat {
        let [a, m, c] = self.times();
        Stat {
            st_dev: self.i_dev,
            st_ino: self.i_ino,
            st_nlink: self.nlink() as u64,
            st_mode: self.mode(),
            st_uid: self.uid(),
            st_gid: self.gid(),
            st_rdev: 0,
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
            InodeKind::Symlink(_) => Err(Errno::EINVAL),
        }
    }

    /// Reads into `buf` from byte offset `off` (`off >= 0`); returns bytes read, 0 at or past
    /// end of file. Holes read as zeros.
    ///
    /// # Errors
    /// `EISDIR` on a directory, `EINVAL` on a symlink.
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
    pub(crate) fn write_at(&self, buf: &[u8], off: u64, append: bool) -> Result<(usize, u64)> {
        let mut data = write(self.reg()?);
        let size = self.size();
        let off = if append { size } else { off };
        if buf.is_empty() {
            return Ok((0, off));
        }
        let max = MAX_LFS_FILESIZE as u64;
        if off >= max {
            return Err(Errno::EFBIG);
        }
        let n = (buf.len() as u64).min(max - off) as usize;
        let mut done = 0;
        while done < n {
            let pos = off + done as u64;
            let idx = pos / PAGE_SIZE as u64;
            let in_page = (pos % PAGE_SIZE as u64) as usize;
            let chunk = (PAGE_SIZE - in_page).min(n - done);
            let page = data
                .pages
                .entry(idx)
                .or_insert_with(|| Box::new([0u8; PAGE_SIZE]));
            page[in_page..in_page + chunk].copy_from_slice(&buf[done..done + chunk]);
            done += chunk;
        }
        let end = off + n as u64;
        if end > size {
            // Relaxed: written under the data write lock; readers of data hold the read lock.
            self.i_size.store(end, Ordering::Relaxed);
        }
        // Relaxed: as above.
        self.i_blocks.store(
            data.pages.len() as u64 * (PAGE_SIZE as u64 / 512),
            Ordering::Relaxed,
        );
        drop(data);
        self.touch_mtime_ctime();
        Ok((n, end))
    }

    /// Sets the size to `len` bytes, dropping pages past it and zeroing the tail of the last
    /// partial page; stamps mtime and ctime (as `do_truncate` always does).
    ///
    /// # Errors
    /// `EFBIG` when `len > MAX_LFS_FILESIZE`; `EISDIR`/`EINVAL` on non-regular files.
    pub(crate) fn truncate(&self, len: u64) -> Result<()> {
        if len > MAX_LFS_FILESIZE as u64 {
            return Err(Errno::EFBIG);
        }
        let mut data = write(self.reg()?);
        let size = self.size();
        if len < size {
            let first_gone = len.div_ceil(PAGE_SIZE as u64);
            let _ = data.pages.split_off(&first_gone);
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
        self.i_blocks.store(
            data.pages.len() as u64 * (PAGE_SIZE as u64 / 512),
            Ordering::Relaxed,
        );
        drop(data);
        self.touch_mtime_ctime();
        Ok(())
    }

    /// `SEEK_DATA` / `SEEK_HOLE` from `off`: stored pages are data, everything else (and the
    /// end of file) is a hole, as tmpfs reports.
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
