//! `read`, `write`, `pread`, `pwrite`, `lseek`, `ftruncate`.
//!
//! Linux analogue: fs/read_write.c (`ksys_read`, `vfs_read`, `ksys_pread64`,
//! `generic_file_llseek_size`, `fdget_pos`), fs/open.c (`do_sys_ftruncate`),
//! mm/shmem.c (`shmem_file_read_iter`, `shmem_file_write_iter`).
//!
//! The file position is taken under `f_pos_lock` for the whole call, so `read`/`write` on a
//! shared descriptor never see the same position twice (Linux: `FMODE_ATOMIC_POS`).
//! `O_APPEND` writes take the end of file under the inode's data lock, so appends from any
//! number of descriptors never overwrite each other.

use crate::cred::Cred;
use crate::file::{FMode, File};
use crate::fs::FallocMode;
use crate::sync::plain::Ordering;
use crate::sync::plock;
use crate::task::Task;
use crate::time::coarse_now;
use crate::types::*;
use crate::variant::Variant;
use crate::{Errno, Result};

/// Largest single transfer (`MAX_RW_COUNT` = `INT_MAX & PAGE_MASK`).
pub const MAX_RW_COUNT: usize = (i32::MAX as usize) & !4095;

/// `rw_verify_area`: a transfer of `count` bytes at `pos` must not run past `i64::MAX`
/// (checked with the caller's full count, before it is clamped to `MAX_RW_COUNT`).
///
/// # Errors
/// `EINVAL` when `pos + count` overflows a signed 64-bit offset.
fn rw_verify_area(pos: u64, count: usize) -> Result<()> {
    match i64::try_from(pos)
        .ok()
        .and_then(|p| p.checked_add(i64::try_from(count).ok()?))
    {
        Some(_) => Ok(()),
        None => Err(Errno::EINVAL),
    }
}

/// `vfs_read`'s checks, in Linux's order: open for reading (`EBADF`), the range
/// (`EINVAL`), then the file type (`EISDIR`, from `generic_read_dir`).
fn check_read<V: Variant>(f: &File<V>, pos: u64, count: usize) -> Result<()> {
    if !f.mode().contains(FMode::READ) {
        return Err(Errno::EBADF);
    }
    rw_verify_area(pos, count)?;
    if f.inode().is_dir() {
        return Err(Errno::EISDIR);
    }
    Ok(())
}

/// `vfs_write`'s checks: open for writing (`EBADF`), then the range (`EINVAL`).
fn check_write<V: Variant>(f: &File<V>, pos: u64, count: usize) -> Result<()> {
    if !f.mode().contains(FMode::WRITE) {
        return Err(Errno::EBADF);
    }
    rw_verify_area(pos, count)
}

impl<V: Variant> Task<V> {
    /// `read(2)`: reads up to `buf.len()` bytes at the file position and advances it.
    /// Returns 0 at end of file. Every successful read, of 0 bytes too, is an access
    /// (atime, under relatime rules), as `shmem_file_read_iter`'s `file_accessed`.
    ///
    /// # Errors
    /// `EBADF` (not open, or not open for reading), `EINVAL` (position + length past
    /// `i64::MAX`), `EISDIR` (a directory).
    ///
    /// # References
    /// read(2); Linux `ksys_read`, `vfs_read`, `rw_verify_area`, `shmem_file_read_iter`.
    pub fn read(&self, fd: Fd, buf: &mut [u8]) -> Result<usize> {
        self.fdget(fd)?.read_pos(buf)
    }

    /// `pread(2)`: reads at `offset` without using or changing the file position.
    ///
    /// # Errors
    /// `EINVAL` for a negative offset (checked first, before the descriptor), then as
    /// `read`.
    pub fn pread(&self, fd: Fd, buf: &mut [u8], offset: i64) -> Result<usize> {
        if offset < 0 {
            return Err(Errno::EINVAL);
        }
        self.fdget(fd)?.read_at_offset(buf, offset)
    }

    /// `write(2)`: writes `buf` at the file position (or at the end with `O_APPEND`) and
    /// advances it; stamps mtime/ctime; clears set-user-ID (and set-group-ID) for non-root
    /// writers.
    ///
    /// # Errors
    /// `EBADF` (not open for writing), `EINVAL` (position + length past `i64::MAX`),
    /// `EFBIG` (position at or past the maximum file size).
    ///
    /// # References
    /// write(2); Linux `ksys_write`, `vfs_write`, `rw_verify_area`, `generic_write_checks`,
    /// `file_remove_privs`.
    pub fn write(&self, fd: Fd, buf: &[u8]) -> Result<usize> {
        self.fdget(fd)?
            .write_pos(buf, &self.cred, self.getrlimit_fsize())
    }

    /// `pwrite(2)`: writes at `offset` without using or changing the file position. As on
    /// Linux, with `O_APPEND` the data goes to the end of file regardless of `offset`.
    ///
    /// # Errors
    /// `EINVAL` for a negative offset (checked first, before the descriptor), then as
    /// `write`.
    pub fn pwrite(&self, fd: Fd, buf: &[u8], offset: i64) -> Result<usize> {
        if offset < 0 {
            return Err(Errno::EINVAL);
        }
        self.fdget(fd)?
            .write_at_offset(buf, offset, &self.cred, self.getrlimit_fsize())
    }

    /// `lseek(2)`: moves the file position; returns the new position.
    ///
    /// Regular files: `SEEK_SET`, `SEEK_CUR`, `SEEK_END`, `SEEK_DATA`, `SEEK_HOLE`.
    /// Directories (position = `getdents` cookie): `SEEK_SET`, `SEEK_CUR`; on a FUSE
    /// directory also `SEEK_END`, `SEEK_DATA`, `SEEK_HOLE` against the directory's size
    /// (Linux's `generic_file_llseek` there).
    ///
    /// # Errors
    /// `EBADF` (not open), `EINVAL` (unknown `whence`, negative or overflowing result),
    /// `ENXIO` (`SEEK_DATA`/`SEEK_HOLE` at or past end of file, or no data after `offset`).
    ///
    /// # References
    /// lseek(2); Linux `generic_file_llseek_size`, `shmem_file_llseek`, `offset_dir_llseek`.
    pub fn lseek(&self, fd: Fd, offset: i64, whence: i32) -> Result<i64> {
        self.fdget(fd)?.llseek(offset, whence)
    }

    /// [`lseek`](Self::lseek) with the whence typed as `std::io::SeekFrom` (`Start`,
    /// `Current`, `End`); returns the new position. `SEEK_DATA`/`SEEK_HOLE` have no
    /// `SeekFrom` form: use `lseek`.
    ///
    /// # Errors
    /// `EINVAL` for a `Start` offset past `i64::MAX` or a resulting negative position, else
    /// as `lseek`.
    pub fn seek(&self, fd: Fd, pos: std::io::SeekFrom) -> Result<u64> {
        let (off, whence) = crate::io::whence(pos)?;
        self.lseek(fd, off, whence).map(|p| p as u64)
    }

    /// `ftruncate(2)`: sets the size of a regular file open for writing; stamps mtime/ctime.
    ///
    /// # Errors
    /// `EINVAL` (negative length, checked first; not a regular file; not open for writing),
    /// `EBADF` (not open), `EFBIG` (length past the maximum file size).
    ///
    /// # References
    /// ftruncate(2); Linux `do_sys_ftruncate`.
    pub fn ftruncate(&self, fd: Fd, length: i64) -> Result<()> {
        if length < 0 {
            return Err(Errno::EINVAL);
        }
        self.fdget(fd)?
            .truncate_to(length, &self.cred, self.getrlimit_fsize())
    }

    /// `fallocate(2)` on the open file `fd`: `mode` 0 allocates `[offset, offset + len)`
    /// (zeroed pages for its holes) and grows the file to `offset + len`;
    /// `FALLOC_FL_KEEP_SIZE` allocates without growing; `FALLOC_FL_PUNCH_HOLE |
    /// FALLOC_FL_KEEP_SIZE` frees the range's whole pages and zeroes the partial ones (the
    /// range then reads as zeros and `SEEK_HOLE` finds it). These are the modes tmpfs
    /// supports; the others are refused, never ignored.
    ///
    /// # Errors
    /// In Linux's order: `EBADF` (not open, `O_PATH`), `EINVAL` (`offset < 0`, `len <= 0`),
    /// `EOPNOTSUPP` (modes no file system takes: unknown bits, two modes at once,
    /// `FALLOC_FL_PUNCH_HOLE` without `FALLOC_FL_KEEP_SIZE`, `COLLAPSE_RANGE`, `INSERT_RANGE`
    /// or `WRITE_ZEROES` with it), `EBADF` (not open for writing), `EISDIR` (a directory),
    /// `ENODEV` (not a regular file), `EFBIG` (`offset + len` past `MAX_LFS_FILESIZE`),
    /// `EOPNOTSUPP` (the modes other file systems take but tmpfs lacks: `ZERO_RANGE`,
    /// `UNSHARE_RANGE`, `COLLAPSE_RANGE`, `INSERT_RANGE`, `WRITE_ZEROES`), `EFBIG` (when
    /// allocating, past `RLIMIT_FSIZE`), `ENOSPC` (the mount's `size=`; nothing is
    /// allocated).
    ///
    /// # References
    /// fallocate(2); Linux `ksys_fallocate`, `vfs_fallocate`, `shmem_fallocate`.
    pub fn fallocate(&self, fd: Fd, mode: i32, offset: i64, len: i64) -> Result<()> {
        const KEEP_SIZE: i32 = 0x01;
        const PUNCH_HOLE: i32 = 0x02;
        const COLLAPSE_RANGE: i32 = 0x08;
        const ZERO_RANGE: i32 = 0x10;
        const INSERT_RANGE: i32 = 0x20;
        const UNSHARE_RANGE: i32 = 0x40;
        const WRITE_ZEROES: i32 = 0x80;
        const MODE_MASK: i32 =
            PUNCH_HOLE | COLLAPSE_RANGE | ZERO_RANGE | INSERT_RANGE | UNSHARE_RANGE | WRITE_ZEROES;
        // The descriptor first (`ksys_fallocate`), then `vfs_fallocate`'s checks in order.
        let f = self.fdget(fd)?;
        if offset < 0 || len <= 0 {
            return Err(Errno::EINVAL);
        }
        // vfs_fallocate: FALLOC_FL_SUPPORTED_MASK, then one mode at most, with KEEP_SIZE
        // only where it means something (Linux 6.17+, with WRITE_ZEROES).
        let keep = mode & KEEP_SIZE != 0;
        let mode_ok = match mode & MODE_MASK {
            0 | ZERO_RANGE | UNSHARE_RANGE => true,
            PUNCH_HOLE => keep,
            COLLAPSE_RANGE | INSERT_RANGE | WRITE_ZEROES => !keep,
            _ => false,
        };
        if mode & !(KEEP_SIZE | MODE_MASK) != 0 || !mode_ok {
            return Err(Errno::EOPNOTSUPP);
        }
        if !f.mode().contains(FMode::WRITE) {
            return Err(Errno::EBADF);
        }
        let inode = f.inode();
        let ty = inode.mode() & crate::types::S_IFMT;
        if ty == crate::types::S_IFIFO {
            return Err(Errno::ESPIPE);
        }
        if ty == crate::types::S_IFDIR {
            return Err(Errno::EISDIR);
        }
        if !inode.is_reg() {
            return Err(Errno::ENODEV);
        }
        // vfs_fallocate: the range's end within the largest file size.
        (offset as u64)
            .checked_add(len as u64)
            .filter(|&e| e <= crate::inode::MAX_LFS_FILESIZE as u64)
            .ok_or(Errno::EFBIG)?;
        // The modes some file system behind the seam takes (tmpfs and hostfs: KEEP_SIZE
        // and PUNCH_HOLE; the FUSE client: ZERO_RANGE too); each refuses what it lacks.
        let fm = match mode & MODE_MASK {
            0 => FallocMode::Allocate,
            PUNCH_HOLE => FallocMode::PunchHole,
            ZERO_RANGE => FallocMode::ZeroRange,
            _ => return Err(Errno::EOPNOTSUPP),
        };
        let now = coarse_now();
        let (off, len) = (offset as u64, len as u64);
        let fsize = self.getrlimit_fsize();
        inode.fallocate(f.fh(), off, len, fm, keep, now, &self.cred, fsize)
    }
}

/// The calls' bodies on the open file itself, shared by the [`Task`] methods (after their
/// descriptor lookup) and by [`crate::io::OpenFile`] (which holds the file, not a
/// descriptor). `cred` and `fsize` are the caller's credentials and `RLIMIT_FSIZE`.
impl<V: Variant> File<V> {
    /// `read` at the file position (under `f_pos_lock`).
    #[inline]
    pub(crate) fn read_pos(&self, buf: &mut [u8]) -> Result<usize> {
        let f = self;
        if f.mode().contains(FMode::STREAM) {
            return f.read_stream(buf);
        }
        let mut pos = plock(&f.f_pos);
        check_read(f, *pos, buf.len())?;
        let len = buf.len().min(MAX_RW_COUNT);
        let n = f.inode().read_at(f.fh(), &mut buf[..len], *pos)?;
        *pos += n as u64;
        drop(pos);
        f.file_accessed();
        Ok(n)
    }

    /// `read` of a stream (`FMode::STREAM`): offset 0, no position (`ksys_read` with
    /// `file_ppos` `NULL`).
    #[cold]
    fn read_stream(&self, buf: &mut [u8]) -> Result<usize> {
        check_read(self, 0, buf.len())?;
        let len = buf.len().min(MAX_RW_COUNT);
        let n = self.inode().read_at(self.fh(), &mut buf[..len], 0)?;
        self.file_accessed();
        Ok(n)
    }

    /// `pread` at `offset` (`>= 0`: the caller checked, before the descriptor).
    #[inline]
    pub(crate) fn read_at_offset(&self, buf: &mut [u8], offset: i64) -> Result<usize> {
        let f = self;
        // ksys_pread64: a file its open made unseekable has no pread.
        if !f.mode().contains(FMode::PREAD) {
            return Err(Errno::ESPIPE);
        }
        check_read(f, offset as u64, buf.len())?;
        let len = buf.len().min(MAX_RW_COUNT);
        let n = f.inode().read_at(f.fh(), &mut buf[..len], offset as u64)?;
        f.file_accessed();
        Ok(n)
    }

    /// `write` at the file position (the end with `O_APPEND`).
    #[inline]
    pub(crate) fn write_pos(&self, buf: &[u8], cred: &Cred, fsize: u64) -> Result<usize> {
        let f = self;
        if f.mode().contains(FMode::STREAM) {
            return f.write_stream(buf, cred, fsize);
        }
        let mut pos = plock(&f.f_pos);
        check_write(f, *pos, buf.len())?;
        let len = buf.len().min(MAX_RW_COUNT);
        let append = f.flags().contains(OpenFlags::APPEND);
        // One clock read for the syscall's timestamps.
        let now = coarse_now();
        let (n, end) = f
            .inode()
            .write_at(f.fh(), &buf[..len], *pos, append, now, cred, fsize)?;
        *pos = end;
        Ok(n)
    }

    /// `write` to a stream (`FMode::STREAM`): offset 0, no position (`ksys_write` with
    /// `file_ppos` `NULL`); `O_APPEND` is the file system's to apply, as on Linux.
    #[cold]
    fn write_stream(&self, buf: &[u8], cred: &Cred, fsize: u64) -> Result<usize> {
        check_write(self, 0, buf.len())?;
        let len = buf.len().min(MAX_RW_COUNT);
        let append = self.flags().contains(OpenFlags::APPEND);
        let now = coarse_now();
        let (n, _) = self
            .inode()
            .write_at(self.fh(), &buf[..len], 0, append, now, cred, fsize)?;
        Ok(n)
    }

    /// `pwrite` at `offset` (`>= 0`: the caller checked, before the descriptor).
    #[inline]
    pub(crate) fn write_at_offset(
        &self,
        buf: &[u8],
        offset: i64,
        cred: &Cred,
        fsize: u64,
    ) -> Result<usize> {
        let f = self;
        // ksys_pwrite64: as `read_at_offset`.
        if !f.mode().contains(FMode::PWRITE) {
            return Err(Errno::ESPIPE);
        }
        check_write(f, offset as u64, buf.len())?;
        let len = buf.len().min(MAX_RW_COUNT);
        let append = f.flags().contains(OpenFlags::APPEND);
        let now = coarse_now();
        let (n, _) =
            f.inode()
                .write_at(f.fh(), &buf[..len], offset as u64, append, now, cred, fsize)?;
        Ok(n)
    }

    /// `lseek`.
    #[inline]
    pub(crate) fn llseek(&self, offset: i64, whence: i32) -> Result<i64> {
        let f = self;
        // ksys_lseek: an unknown whence is EINVAL first; then vfs_llseek: a file its open
        // made unseekable (`nonseekable_open`).
        if !(SEEK_SET..=SEEK_HOLE).contains(&whence) {
            return Err(Errno::EINVAL);
        }
        if !f.mode().contains(FMode::LSEEK) {
            return Err(Errno::ESPIPE);
        }
        let inode = f.inode();
        let mut pos = plock(&f.f_pos);
        let cur = *pos as i64;
        let is_dir = inode.is_dir();
        // A directory whose file system gives its own listing seeks as a file against its
        // size, without refreshing it (Linux's FUSE directories: `generic_file_llseek`).
        let raw_dir = is_dir && inode.needs_revalidate() && inode.i_op.raw_dir_listing();
        let new = match whence {
            SEEK_SET => offset,
            SEEK_CUR => cur.checked_add(offset).ok_or(Errno::EINVAL)?,
            SEEK_END if raw_dir => (inode.size() as i64)
                .checked_add(offset)
                .ok_or(Errno::EINVAL)?,
            // generic_file_llseek_size: an offset at or past the size (a negative one, taken
            // unsigned, too) is ENXIO; data runs to the size, the hole is at it.
            SEEK_DATA | SEEK_HOLE if raw_dir => {
                let size = inode.size();
                if offset < 0 || offset as u64 >= size {
                    return Err(Errno::ENXIO);
                }
                if whence == SEEK_DATA {
                    offset
                } else {
                    size as i64
                }
            }
            SEEK_END if !is_dir => {
                // A file system that changes behind the VFS's back gives its current size
                // (Linux: `fuse_update_attributes` in `fuse_file_llseek`).
                inode.refresh()?;
                (inode.size() as i64)
                    .checked_add(offset)
                    .ok_or(Errno::EINVAL)?
            }
            SEEK_DATA | SEEK_HOLE if !is_dir => {
                if offset < 0 {
                    return Err(Errno::ENXIO);
                }
                inode.seek_data_hole(f.fh(), offset as u64, whence == SEEK_DATA)? as i64
            }
            _ => return Err(Errno::EINVAL),
        };
        // `new <= MAX_LFS_FILESIZE` always holds for an i64 (MAX_LFS_FILESIZE = i64::MAX).
        if new < 0 {
            return Err(Errno::EINVAL);
        }
        if is_dir && new == 0 {
            // A rewind starts a new listing, which records its own end (readdir.rs; Linux
            // 6.11 `offset_dir_llseek`). Relaxed: `f_dir_end` is protected by
            // `f_pos_lock`, held (`pos`).
            f.f_dir_end.store(0, Ordering::Relaxed);
        }
        *pos = new as u64;
        Ok(new)
    }

    /// `ftruncate` to `length` (`>= 0`: the caller checked, before the descriptor).
    #[inline]
    pub(crate) fn truncate_to(&self, length: i64, cred: &Cred, fsize: u64) -> Result<()> {
        let f = self;
        if !f.inode().is_reg() || !f.mode().contains(FMode::WRITE) {
            return Err(Errno::EINVAL);
        }
        f.inode().newsize_ok(length as u64, fsize)?;
        let now = coarse_now();
        f.inode().kill_suid_truncate(cred, now)?;
        f.inode()
            .truncate_at(length as u64, now, true, Some(f.fh()))
    }
}
