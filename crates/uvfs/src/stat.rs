//! `fstat`, `fstatat`, `futimens`, `utimensat`.
//!
//! Linux analogue: fs/stat.c (`vfs_fstatat`, `generic_fillattr`), fs/utimes.c
//! (`do_utimes`, `vfs_utimes`), fs/attr.c (`setattr_prepare`).

use crate::cred::MAY_WRITE;
use crate::inode::Inode;
use crate::namei::getname;
use crate::namei::AtDir;
use crate::task::Task;
use crate::time::{coarse_now, TimeUpdate};
use crate::types::*;
use crate::variant::Variant;
use crate::{Errno, Result};

fn nsec_valid(ns: i64) -> bool {
    ns == Timespec::UTIME_NOW_NSEC
        || ns == Timespec::UTIME_OMIT_NSEC
        || (0..=999_999_999).contains(&ns)
}

/// Both times `UTIME_OMIT`: the `utimensat` syscall returns 0 at once, checking neither the
/// descriptor, the flags nor the path ("Nothing to do, we must not even check the path").
fn both_omit(times: Option<&[Timespec; 2]>) -> bool {
    times.is_some_and(|t| {
        t[0].tv_nsec == Timespec::UTIME_OMIT_NSEC && t[1].tv_nsec == Timespec::UTIME_OMIT_NSEC
    })
}

impl<V: Variant> Task<V> {
    /// `fstat(2)` (an `O_PATH` descriptor too).
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    pub fn fstat(&self, fd: Fd) -> Result<Stat> {
        let f = self.fdget_raw(fd)?;
        f.inode().refresh()?;
        Ok(f.dentry().stat_marking(V::TEST_BEFORE_SET))
    }

    /// `fstatat(2)` / `newfstatat`: status of `path` relative to `dirfd`; follows a final
    /// symlink unless `AT_SYMLINK_NOFOLLOW`; with `AT_EMPTY_PATH` an empty path means
    /// `dirfd` itself (or the cwd for `AT_FDCWD`).
    ///
    /// # Errors
    /// `EINVAL` (flags other than `AT_SYMLINK_NOFOLLOW`, `AT_NO_AUTOMOUNT`, `AT_EMPTY_PATH`
    /// and the `AT_STATX_*_SYNC` bits, which `vfs_statx` passes to the file system: see
    /// [`StatxSync`]; both together are `AT_STATX_FORCE_SYNC`), `EBADF`, `ENOENT`,
    /// `ENOTDIR`, `EACCES`, `ELOOP`, `ENAMETOOLONG`.
    ///
    /// # References
    /// stat(2); Linux `vfs_fstatat`, `vfs_statx`.
    pub fn fstatat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        flags: AtFlags,
    ) -> Result<Stat> {
        let dirfd: AtDir<'_> = dirfd.into();
        let allowed = AtFlags::SYMLINK_NOFOLLOW
            | AtFlags::NO_AUTOMOUNT
            | AtFlags::EMPTY_PATH
            | AtFlags::STATX_FORCE_SYNC
            | AtFlags::STATX_DONT_SYNC;
        if !(flags - allowed).is_empty() {
            return Err(Errno::EINVAL);
        }
        let path = getname(path.path_bytes(), flags.contains(AtFlags::EMPTY_PATH))?;
        let sync = StatxSync::of(flags);
        let follow = !flags.contains(AtFlags::SYMLINK_NOFOLLOW);
        self.with_dentry(
            dirfd,
            path,
            |nd, start| nd.walk_or_start(start, path, follow),
            |d, _| {
                d.d_inode.refresh_sync(sync)?;
                Ok(d.stat_marking(V::TEST_BEFORE_SET))
            },
        )
    }

    /// `futimens(3)`: sets atime and mtime of an open file from `times` (`None` = both now;
    /// `UTIME_NOW`, `UTIME_OMIT` per entry); ctime becomes now. Both `UTIME_OMIT` is a
    /// no-op that succeeds without looking at `fd`.
    ///
    /// # Errors
    /// In Linux's order: `EFAULT` (`fd` is `AT_FDCWD`), `EBADF` (also for an `O_PATH`
    /// descriptor), then `EINVAL` (an invalid `tv_nsec`), then `EPERM`
    /// (`times` given and not both `UTIME_NOW`, and the caller neither owns the file nor is
    /// root) or `EACCES` (`None` or both `UTIME_NOW`, and the caller neither owns nor may
    /// write the file).
    ///
    /// # References
    /// utimensat(2); Linux `utimensat` syscall, `do_utimes_fd`, `vfs_utimes`,
    /// `setattr_prepare`.
    pub fn futimens(&self, fd: Fd, times: Option<&[Timespec; 2]>) -> Result<()> {
        if both_omit(times) {
            return Ok(());
        }
        if fd == Fd::AT_FDCWD {
            // `futimens(AT_FDCWD)` is `utimensat(AT_FDCWD, NULL, ..)`, which Linux's
            // `do_utimes` treats as a path walk of a NULL name.
            return Err(Errno::EFAULT);
        }
        let f = self.fdget(fd)?;
        self.utimes_inode(f.mount(), f.inode(), times)
    }

    /// `utimensat(2)`: as `futimens` on `path` (follows a final symlink unless
    /// `AT_SYMLINK_NOFOLLOW`; `AT_EMPTY_PATH` with an empty path means `dirfd`). Both
    /// `UTIME_OMIT` succeeds at once, checking neither flags nor path.
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` (flags other than those two), walk errors as `fstatat`,
    /// then `EINVAL` (invalid `tv_nsec`), `EACCES`/`EPERM` as `futimens`.
    pub fn utimensat<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        times: Option<&[Timespec; 2]>,
        flags: AtFlags,
    ) -> Result<()> {
        let dirfd: AtDir<'_> = dirfd.into();
        if both_omit(times) {
            return Ok(());
        }
        if !(flags - (AtFlags::SYMLINK_NOFOLLOW | AtFlags::EMPTY_PATH)).is_empty() {
            return Err(Errno::EINVAL);
        }
        let path = getname(path.path_bytes(), flags.contains(AtFlags::EMPTY_PATH))?;
        let follow = !flags.contains(AtFlags::SYMLINK_NOFOLLOW);
        self.with_dentry(
            dirfd,
            path,
            |nd, start| nd.walk_or_start(start, path, follow),
            |d, mnt| self.utimes_inode(mnt, &d.d_inode, times),
        )
    }

    /// `vfs_utimes` + `setattr_prepare` on one inode: validates the nanoseconds (after the
    /// lookup, as Linux), then the caller's right to set the times.
    /// `mnt` is the mount the file was reached through (`EROFS` when read-only, after the
    /// nanoseconds).
    fn utimes_inode(
        &self,
        mnt: &crate::Mount,
        inode: &Inode,
        times: Option<&[Timespec; 2]>,
    ) -> Result<()> {
        if let Some(t) = times {
            if !nsec_valid(t[0].tv_nsec) || !nsec_valid(t[1].tv_nsec) {
                return Err(Errno::EINVAL);
            }
        }
        let (a, m) = match times {
            None => (Timespec::UTIME_NOW, Timespec::UTIME_NOW),
            Some(t) => (t[0], t[1]),
        };
        let omit = Timespec::UTIME_OMIT_NSEC;
        let now_ns = Timespec::UTIME_NOW_NSEC;
        if a.tv_nsec == omit && m.tv_nsec == omit {
            return Ok(());
        }
        // vfs_utimes: mnt_want_write.
        mnt.want_write()?;
        // ATTR_TIMES_SET: any `times` but "both now" (which vfs_utimes turns into NULL, i.e.
        // ATTR_TOUCH) needs ownership; `UTIME_OMIT` next to `UTIME_NOW` counts as explicit.
        let explicit = !(a.tv_nsec == now_ns && m.tv_nsec == now_ns);
        if !self.cred.owner_or_capable(inode.uid()) {
            // A file system that decides permissions: `ATTR_FORCE` skips setattr_prepare's
            // ownership check; may_setattr's MAY_WRITE check asks it (below).
            if explicit && !inode.fs_permission() {
                return Err(Errno::EPERM);
            }
            inode.permission(&self.cred, MAY_WRITE)?;
        }
        // setattr_copy_mgtime: ctime becomes the current time, `UTIME_NOW` that same time.
        let pick = |t: Timespec| match t.tv_nsec {
            n if n == omit => TimeUpdate::Keep,
            n if n == now_ns => TimeUpdate::Now,
            _ => TimeUpdate::Set(t),
        };
        inode.set_times(coarse_now(), pick(a), pick(m))?;
        Ok(())
    }
}

/// `statx` mask bit: `stx_mode & S_IFMT`.
pub const STATX_TYPE: u32 = 0x1;
/// `statx` mask bit: `stx_mode & !S_IFMT`.
pub const STATX_MODE: u32 = 0x2;
/// `statx` mask bit: `stx_nlink`.
pub const STATX_NLINK: u32 = 0x4;
/// `statx` mask bit: `stx_uid`.
pub const STATX_UID: u32 = 0x8;
/// `statx` mask bit: `stx_gid`.
pub const STATX_GID: u32 = 0x10;
/// `statx` mask bit: `stx_atime`.
pub const STATX_ATIME: u32 = 0x20;
/// `statx` mask bit: `stx_mtime`.
pub const STATX_MTIME: u32 = 0x40;
/// `statx` mask bit: `stx_ctime`.
pub const STATX_CTIME: u32 = 0x80;
/// `statx` mask bit: `stx_ino`.
pub const STATX_INO: u32 = 0x100;
/// `statx` mask bit: `stx_size`.
pub const STATX_SIZE: u32 = 0x200;
/// `statx` mask bit: `stx_blocks`.
pub const STATX_BLOCKS: u32 = 0x400;
/// Everything `stat` returns (`STATX_TYPE` ..= `STATX_BLOCKS`).
pub const STATX_BASIC_STATS: u32 = 0x7ff;
/// `statx` mask bit: `stx_btime`.
pub const STATX_BTIME: u32 = 0x800;
/// `statx` mask bit: `stx_mnt_id` (the mount id).
pub const STATX_MNT_ID: u32 = 0x1000;
/// `statx` mask bit: `stx_mnt_id` (the unique mount id).
pub const STATX_MNT_ID_UNIQUE: u32 = 0x4000;
/// `STATX__RESERVED`: a mask with this bit is `EINVAL` (room for a future extension).
pub const STATX_RESERVED: u32 = 0x8000_0000;
/// `stx_attributes` bit: the file is the root of its mount.
pub const STATX_ATTR_MOUNT_ROOT: u64 = 0x2000;
/// `stx_attributes_mask` the VFS gives every file system: automount (0x1000), mount root
/// (0x2000), DAX (0x200000) (`vfs_getattr_nosec`, `vfs_statx`); a FUSE mount's (measured
/// on Linux 6.18).
pub const STATX_ATTR_MASK_VFS: u64 = 0x0020_3000;
/// `stx_attributes_mask` of a tmpfs: the VFS's ([`STATX_ATTR_MASK_VFS`]) and immutable
/// (0x10), append (0x20), nodump (0x40) (`shmem_getattr`).
pub const STATX_ATTR_MASK_TMPFS: u64 = STATX_ATTR_MASK_VFS | 0x70;

/// What `statx(2)`'s `AT_STATX_SYNC_TYPE` flags ask of a file system whose attributes can
/// change behind uvfs (`query_flags & AT_STATX_SYNC_TYPE` of Linux's `vfs_getattr`). A
/// local file system's attributes are always current and it ignores them; Linux's FUSE
/// client (`fuse_update_get_attr`) and uvfs's follow them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StatxSync {
    /// `AT_STATX_SYNC_AS_STAT` (0): whatever `stat` does (a FUSE client asks the server
    /// when its cached attributes are past their timeout).
    AsStat,
    /// `AT_STATX_FORCE_SYNC` (0x2000): ask the server, however fresh the cache.
    Force,
    /// `AT_STATX_DONT_SYNC` (0x4000): answer from the cache, however old.
    Dont,
}

impl StatxSync {
    /// The sync type of `flags`. Both bits (which `statx` refuses with `EINVAL` and
    /// `fstatat` accepts) are `Force`, as `fuse_update_get_attr` tests `AT_STATX_FORCE_SYNC`
    /// first.
    pub fn of(flags: AtFlags) -> StatxSync {
        if flags.contains(AtFlags::STATX_FORCE_SYNC) {
            StatxSync::Force
        } else if flags.contains(AtFlags::STATX_DONT_SYNC) {
            StatxSync::Dont
        } else {
            StatxSync::AsStat
        }
    }
}

/// A `statx` timestamp (`struct statx_timestamp`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct StatxTimestamp {
    /// Seconds since the epoch.
    pub tv_sec: i64,
    /// Nanoseconds, `0 ..= 999_999_999`.
    pub tv_nsec: u32,
}

impl From<Timespec> for StatxTimestamp {
    fn from(t: Timespec) -> Self {
        StatxTimestamp {
            tv_sec: t.tv_sec,
            tv_nsec: t.tv_nsec as u32,
        }
    }
}

/// Extended file status, as `statx(2)` returns it (`struct statx`).
///
/// `stx_mask` says which fields are filled: always `STATX_BASIC_STATS` but, when the
/// request asked for neither `STATX_MTIME` nor `STATX_CTIME`, without those two (their
/// fields are then 0, as Linux's multigrain `fill_mg_cmtime`); `STATX_BTIME` when asked;
/// `STATX_MNT_ID_UNIQUE` when asked, else `STATX_MNT_ID`. Units as [`Stat`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Statx {
    /// Which fields are valid (`STATX_*`).
    pub stx_mask: u32,
    /// Preferred I/O size: 4096.
    pub stx_blksize: u32,
    /// `STATX_ATTR_*` flags: `STATX_ATTR_MOUNT_ROOT` for the root of the mount.
    pub stx_attributes: u64,
    /// Number of hard links.
    pub stx_nlink: u32,
    /// Owner user id.
    pub stx_uid: u32,
    /// Owner group id.
    pub stx_gid: u32,
    /// File type and permission bits.
    pub stx_mode: u16,
    /// Inode number.
    pub stx_ino: u64,
    /// Size in bytes.
    pub stx_size: u64,
    /// Allocated 512-byte blocks.
    pub stx_blocks: u64,
    /// Which `stx_attributes` bits the file system supports ([`STATX_ATTR_MASK_TMPFS`],
    /// [`STATX_ATTR_MASK_VFS`] on a FUSE mount).
    pub stx_attributes_mask: u64,
    /// Last access time.
    pub stx_atime: StatxTimestamp,
    /// Creation time (0 unless `STATX_BTIME` was asked for).
    pub stx_btime: StatxTimestamp,
    /// Last status change time.
    pub stx_ctime: StatxTimestamp,
    /// Last data modification time.
    pub stx_mtime: StatxTimestamp,
    /// Major device number of a device node.
    pub stx_rdev_major: u32,
    /// Minor device number of a device node.
    pub stx_rdev_minor: u32,
    /// Major device number of the file system (0: anonymous, as tmpfs).
    pub stx_dev_major: u32,
    /// Minor device number of the file system.
    pub stx_dev_minor: u32,
    /// Mount id of the mount the file was reached through ([`Mount::id`], unique in the
    /// process; the same for `STATX_MNT_ID` and `STATX_MNT_ID_UNIQUE`: Linux gives a small
    /// reused id for the first and a 64-bit unique one for the second).
    ///
    /// [`Mount::id`]: crate::Mount::id
    pub stx_mnt_id: u64,
}

/// glibc's `major()`/`minor()` of a 64-bit `dev_t` (as in `st_dev`/`st_rdev`).
pub(crate) fn dev_split(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

impl<V: Variant> Task<V> {
    /// `statx(2)`: extended status of `path` relative to `dirfd`; follows a final symlink
    /// unless `AT_SYMLINK_NOFOLLOW`; with `AT_EMPTY_PATH` an empty path means `dirfd` itself
    /// (an `O_PATH` descriptor too). `AT_NO_AUTOMOUNT` is accepted (nothing to automount);
    /// the `AT_STATX_*_SYNC` bits go to the file system ([`StatxSync`]: tmpfs and hostfs
    /// are always current, the FUSE client asks or answers from its cache as Linux's).
    /// `mask` is the `STATX_*` fields wanted; see [`Statx`] for what comes back. Asking for `STATX_MTIME` or `STATX_CTIME` marks the
    /// ctime queried, as `stat` (the next change gets a distinguishable timestamp).
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` (`mask` with `STATX__RESERVED`; both `AT_STATX_FORCE_SYNC`
    /// and `AT_STATX_DONT_SYNC`; other flags), then as [`fstatat`](Self::fstatat): `EBADF`,
    /// `ENOENT` (also an empty path without `AT_EMPTY_PATH`), `ENOTDIR`, `EACCES`, `ELOOP`,
    /// `ENAMETOOLONG`.
    ///
    /// # References
    /// statx(2); Linux `do_statx`, `vfs_statx`, `shmem_getattr`, `generic_fillattr`,
    /// `fill_mg_cmtime`.
    pub fn statx<'a>(
        &self,
        dirfd: impl Into<AtDir<'a>>,
        path: impl AsPath,
        flags: AtFlags,
        mask: u32,
    ) -> Result<Statx> {
        let dirfd: AtDir<'_> = dirfd.into();
        if mask & STATX_RESERVED != 0 {
            return Err(Errno::EINVAL);
        }
        let sync = AtFlags::STATX_FORCE_SYNC | AtFlags::STATX_DONT_SYNC;
        if flags.contains(sync) {
            return Err(Errno::EINVAL);
        }
        let allowed = AtFlags::SYMLINK_NOFOLLOW | AtFlags::NO_AUTOMOUNT | AtFlags::EMPTY_PATH;
        if !(flags - allowed - sync).is_empty() {
            return Err(Errno::EINVAL);
        }
        let path = getname(path.path_bytes(), flags.contains(AtFlags::EMPTY_PATH))?;
        let follow = !flags.contains(AtFlags::SYMLINK_NOFOLLOW);
        self.with_dentry(
            dirfd,
            path,
            |nd, start| nd.walk_or_start(start, path, follow),
            |d, mnt| {
                let inode = &d.d_inode;
                // The file system refreshes what `mask` asks as `flags` say, and gives the
                // birth time where it knows one (a FUSE server without STATX does not; the
                // FUSE client gives a known one whatever the mask, as Linux's).
                let btime = inode.fs_statx(mask, StatxSync::of(flags))?;
                let cm = mask & (STATX_MTIME | STATX_CTIME) != 0;
                let st = d.stat_query(cm, V::TEST_BEFORE_SET);
                let (dev_major, dev_minor) = dev_split(st.st_dev);
                let (rdev_major, rdev_minor) = dev_split(st.st_rdev);
                let mut stx_mask = STATX_BASIC_STATS;
                // `generic_fillattr`: a multigrain file system's times only when asked.
                let fs = &mnt.mnt_sb.s_op;
                let times = cm || !fs.multigrain();
                if !times {
                    stx_mask &= !(STATX_MTIME | STATX_CTIME);
                }
                stx_mask |= if mask & STATX_MNT_ID_UNIQUE != 0 {
                    STATX_MNT_ID_UNIQUE
                } else {
                    STATX_MNT_ID
                };
                if btime.is_some() {
                    stx_mask |= STATX_BTIME;
                }
                let btime: StatxTimestamp = btime.map(Into::into).unwrap_or_default();
                let (mtime, ctime) = if times {
                    (st.st_mtime.into(), st.st_ctime.into())
                } else {
                    Default::default()
                };
                let root = std::sync::Arc::ptr_eq(d, &mnt.mnt_root);
                Ok(Statx {
                    stx_mask,
                    stx_blksize: st.st_blksize as u32,
                    stx_attributes: if root { STATX_ATTR_MOUNT_ROOT } else { 0 },
                    stx_nlink: st.st_nlink as u32,
                    stx_uid: st.st_uid,
                    stx_gid: st.st_gid,
                    stx_mode: st.st_mode as u16,
                    stx_ino: st.st_ino,
                    stx_size: st.st_size as u64,
                    stx_blocks: st.st_blocks as u64,
                    stx_attributes_mask: fs.statx_attributes_mask(),
                    stx_atime: st.st_atime.into(),
                    stx_btime: btime,
                    stx_ctime: ctime,
                    stx_mtime: mtime,
                    stx_rdev_major: rdev_major,
                    stx_rdev_minor: rdev_minor,
                    stx_dev_major: dev_major,
                    stx_dev_minor: dev_minor,
                    stx_mnt_id: mnt.mnt_id,
                })
            },
        )
    }
}
