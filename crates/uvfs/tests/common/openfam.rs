//! Host-side helpers for the `O_PATH`/`O_TMPFILE`/`statx`/`openat2`/`chroot`/`mknodat`/
//! `statfs` family of [`Sys`](super::Sys) methods: raw system calls and conversions.

use super::{cpath, sc};
use uvfs::open::OpenHow;
use uvfs::stat::{Statx, StatxTimestamp};
use uvfs::{AtFlags, Fd, Result, StatFs};

/// The kernel's `struct statfs` on 64-bit (libc's lacks `f_flags` on some targets).
#[repr(C)]
#[derive(Default)]
struct KStatfs {
    f_type: i64,
    f_bsize: i64,
    f_blocks: u64,
    f_bfree: u64,
    f_bavail: u64,
    f_files: u64,
    f_ffree: u64,
    f_fsid: [i32; 2],
    f_namelen: i64,
    f_frsize: i64,
    f_flags: i64,
    f_spare: [i64; 4],
}

fn from_kstatfs(s: &KStatfs) -> StatFs {
    StatFs {
        f_type: s.f_type,
        f_bsize: s.f_bsize,
        f_blocks: s.f_blocks,
        f_bfree: s.f_bfree,
        f_bavail: s.f_bavail,
        f_files: s.f_files,
        f_ffree: s.f_ffree,
        f_fsid: s.f_fsid,
        f_namelen: s.f_namelen,
        f_frsize: s.f_frsize,
        f_flags: s.f_flags,
    }
}

/// `statfs(2)` on the host.
pub(crate) fn host_statfs(path: &[u8]) -> Result<StatFs> {
    let p = cpath(path);
    let mut st = KStatfs::default();
    // SAFETY: valid path and a writable `struct statfs`.
    sc(unsafe { libc::syscall(libc::SYS_statfs, p.as_ptr(), &mut st) })?;
    Ok(from_kstatfs(&st))
}

/// `fstatfs(2)` on the host.
pub(crate) fn host_fstatfs(fd: Fd) -> Result<StatFs> {
    let mut st = KStatfs::default();
    // SAFETY: a writable `struct statfs`.
    sc(unsafe { libc::syscall(libc::SYS_fstatfs, fd.0, &mut st) })?;
    Ok(from_kstatfs(&st))
}

/// The part of a [`StatFs`] that does not depend on the mount's limits or identity: type,
/// sizes, name length, flags.
pub fn statfs_fixed(s: StatFs) -> (i64, i64, i64, i64, i64) {
    (s.f_type, s.f_bsize, s.f_namelen, s.f_frsize, s.f_flags)
}

fn from_libc_ts(t: &libc::statx_timestamp) -> StatxTimestamp {
    StatxTimestamp {
        tv_sec: t.tv_sec,
        tv_nsec: t.tv_nsec,
    }
}

/// `statx(2)` on the host.
pub(crate) fn host_statx(dirfd: Fd, path: &[u8], flags: AtFlags, mask: u32) -> Result<Statx> {
    let p = cpath(path);
    // SAFETY: all-zero is a valid `statx`; the kernel fills it.
    let mut s: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and a writable `struct statx`.
    sc(unsafe {
        libc::syscall(
            libc::SYS_statx,
            dirfd.0,
            p.as_ptr(),
            flags.bits() as libc::c_int,
            mask,
            &mut s,
        )
    })?;
    Ok(Statx {
        stx_mask: s.stx_mask,
        stx_blksize: s.stx_blksize,
        stx_attributes: s.stx_attributes,
        stx_nlink: s.stx_nlink,
        stx_uid: s.stx_uid,
        stx_gid: s.stx_gid,
        stx_mode: s.stx_mode,
        stx_ino: s.stx_ino,
        stx_size: s.stx_size,
        stx_blocks: s.stx_blocks,
        stx_attributes_mask: s.stx_attributes_mask,
        stx_atime: from_libc_ts(&s.stx_atime),
        stx_btime: from_libc_ts(&s.stx_btime),
        stx_ctime: from_libc_ts(&s.stx_ctime),
        stx_mtime: from_libc_ts(&s.stx_mtime),
        stx_rdev_major: s.stx_rdev_major,
        stx_rdev_minor: s.stx_rdev_minor,
        stx_dev_major: s.stx_dev_major,
        stx_dev_minor: s.stx_dev_minor,
        stx_mnt_id: s.stx_mnt_id,
    })
}

/// The comparable part of a [`Statx`]: no inode, device or mount numbers, no times.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct XShape {
    pub mask: u32,
    pub blksize: u32,
    pub attributes: u64,
    pub attributes_mask: u64,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub mode: u16,
    pub size: u64,
    pub blocks: u64,
    pub rdev: (u32, u32),
}

pub fn xshape(s: Statx) -> XShape {
    XShape {
        mask: s.stx_mask,
        blksize: s.stx_blksize,
        attributes: s.stx_attributes,
        attributes_mask: s.stx_attributes_mask,
        nlink: s.stx_nlink,
        uid: s.stx_uid,
        gid: s.stx_gid,
        mode: s.stx_mode,
        size: s.stx_size,
        blocks: s.stx_blocks,
        rdev: (s.stx_rdev_major, s.stx_rdev_minor),
    }
}

/// `openat2(2)` on the host (`struct open_how` is three `u64`s, as `OpenHow`).
pub(crate) fn host_openat2(dirfd: Fd, path: &[u8], how: &OpenHow) -> Result<Fd> {
    let p = cpath(path);
    let raw: [u64; 3] = [how.flags, how.mode, how.resolve];
    // SAFETY: valid path and a readable 24-byte `struct open_how`.
    sc(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd.0,
            p.as_ptr(),
            raw.as_ptr(),
            std::mem::size_of_val(&raw),
        )
    })
    .map(|fd| Fd(fd as i32))
}
