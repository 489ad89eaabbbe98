//! Host-side helpers for the `O_PATH`/`O_TMPFILE`/`statx`/`openat2`/`chroot`/`mknodat`/
//! `statfs` family of [`Sys`](super::Sys) methods: raw system calls and conversions.

use super::{cpath, sc};
use uvfs::{Fd, Result, StatFs};

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
