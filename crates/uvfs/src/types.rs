//! Syscall argument and result types with Linux's values: `Fd`, `OpenFlags`, `AtFlags`,
//! `Timespec`, `Stat`, `StatFs`, file-type and permission bits.
//!
//! Linux analogue: `include/uapi/asm-generic/fcntl.h`, `include/uapi/linux/stat.h`,
//! `arch/x86/include/uapi/asm/stat.h`.

use bitflags::bitflags;

/// A file descriptor number, an index into a task's [`FdTable`](crate::FdTable).
///
/// Valid descriptors are `0 ..= i32::MAX`; anything negative other than
/// [`Fd::AT_FDCWD`] is `EBADF` wherever a descriptor is expected.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fd(pub i32);

impl Fd {
    /// "The current working directory" as a `dirfd` argument (`AT_FDCWD`, -100).
    pub const AT_FDCWD: Fd = Fd(-100);

    /// The raw number.
    pub const fn raw(self) -> i32 {
        self.0
    }
}

impl std::fmt::Display for Fd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

bitflags! {
    /// `open(2)` flags, with Linux's (x86_64/generic) values.
    ///
    /// The access mode is the low two bits: `RDONLY` (0), `WRONLY` (1), `RDWR` (2); use
    /// [`OpenFlags::access_mode`]. Unknown bits are ignored by `openat` (and not kept for
    /// `F_GETFL`) as Linux does.
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct OpenFlags: u32 {
        /// Open for reading only (value 0: test with `access_mode()`).
        const RDONLY = 0;
        /// Open for writing only.
        const WRONLY = 0o1;
        /// Open for reading and writing.
        const RDWR = 0o2;
        /// Mask of the access mode bits.
        const ACCMODE = 0o3;
        /// Create the file if it does not exist.
        const CREAT = 0o100;
        /// With `CREAT`: fail with `EEXIST` if the name exists (even as a dangling symlink).
        const EXCL = 0o200;
        /// Accepted and ignored (no terminals in uvfs).
        const NOCTTY = 0o400;
        /// Truncate a regular file to length 0.
        const TRUNC = 0o1000;
        /// Every write appends atomically.
        const APPEND = 0o2000;
        /// Non-blocking I/O (no effect on tmpfs files).
        const NONBLOCK = 0o4000;
        /// Accepted and ignored (tmpfs writes are synchronous).
        const DSYNC = 0o10000;
        /// Accepted and ignored.
        const ASYNC = 0o20000;
        /// Accepted and ignored.
        const DIRECT = 0o40000;
        /// Accepted and ignored (always large-file on 64-bit).
        const LARGEFILE = 0o100000;
        /// Fail with `ENOTDIR` unless the path names a directory.
        const DIRECTORY = 0o200000;
        /// Fail with `ELOOP` if the last component is a symlink.
        const NOFOLLOW = 0o400000;
        /// Do not update atime on reads (accepted and ignored), allowed only for the file's
        /// owner or root (`EPERM`).
        const NOATIME = 0o1000000;
        /// Set close-on-exec on the new descriptor.
        const CLOEXEC = 0o2000000;
        /// Accepted and ignored (with `DSYNC`).
        const SYNC = 0o4010000;
        /// `O_PATH`: a descriptor that only names the file (see `Task::openat`).
        const PATH = 0o10000000;
        /// `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`): an unnamed regular file in the given
        /// directory (see `Task::openat`).
        const TMPFILE = 0o20200000;
        const _ = !0;
    }
}

impl OpenFlags {
    /// The access mode: `RDONLY`, `WRONLY`, `RDWR` or the special 3 ("no access",
    /// permission for both checked, neither granted).
    pub fn access_mode(self) -> u32 {
        self.bits() & 0o3
    }
}

bitflags! {
    /// `AT_*` flags of the `*at()` calls, with Linux's values.
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct AtFlags: u32 {
        /// Do not follow a symlink in the last component.
        const SYMLINK_NOFOLLOW = 0x100;
        /// `unlinkat`: remove a directory.
        const REMOVEDIR = 0x200;
        /// `faccessat2`: check with the effective ids (the same bit as `REMOVEDIR`).
        const EACCESS = 0x200;
        /// `linkat`: follow a symlink in the last component.
        const SYMLINK_FOLLOW = 0x400;
        /// Accepted and ignored (no automounts).
        const NO_AUTOMOUNT = 0x800;
        /// An empty path means the `dirfd` itself.
        const EMPTY_PATH = 0x1000;
        /// `fstatat`: accepted and ignored (`AT_STATX_FORCE_SYNC`; nothing to sync).
        const STATX_FORCE_SYNC = 0x2000;
        /// `fstatat`: accepted and ignored (`AT_STATX_DONT_SYNC`).
        const STATX_DONT_SYNC = 0x4000;
        const _ = !0;
    }
}

bitflags! {
    /// `renameat2(2)` flags (`RENAME_*`, include/uapi/linux/fs.h).
    #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
    pub struct RenameFlags: u32 {
        /// Fail with `EEXIST` instead of replacing an existing target.
        const NOREPLACE = 1;
        /// Atomically exchange source and target (both must exist).
        const EXCHANGE = 2;
        /// Leave a whiteout at the source (overlayfs); not supported by uvfs (`EINVAL`).
        const WHITEOUT = 4;
        const _ = !0;
    }
}

/// File type mask of `st_mode`.
pub const S_IFMT: u32 = 0o170000;
/// Socket.
pub const S_IFSOCK: u32 = 0o140000;
/// Symbolic link.
pub const S_IFLNK: u32 = 0o120000;
/// Regular file.
pub const S_IFREG: u32 = 0o100000;
/// Block device.
pub const S_IFBLK: u32 = 0o060000;
/// Directory.
pub const S_IFDIR: u32 = 0o040000;
/// Character device.
pub const S_IFCHR: u32 = 0o020000;
/// FIFO.
pub const S_IFIFO: u32 = 0o010000;
/// Set-user-ID bit.
pub const S_ISUID: u32 = 0o4000;
/// Set-group-ID bit.
pub const S_ISGID: u32 = 0o2000;
/// Sticky bit.
pub const S_ISVTX: u32 = 0o1000;
/// Group execute bit.
pub const S_IXGRP: u32 = 0o010;

/// `lseek` whence: set the offset.
pub const SEEK_SET: i32 = 0;
/// `lseek` whence: relative to the current offset.
pub const SEEK_CUR: i32 = 1;
/// `lseek` whence: relative to the end of the file.
pub const SEEK_END: i32 = 2;
/// `lseek` whence: next data at or after the offset.
pub const SEEK_DATA: i32 = 3;
/// `lseek` whence: next hole at or after the offset.
pub const SEEK_HOLE: i32 = 4;

/// `getdents64` `d_type`: directory.
pub const DT_DIR: u8 = 4;
/// `getdents64` `d_type`: regular file.
pub const DT_REG: u8 = 8;
/// `getdents64` `d_type`: symbolic link.
pub const DT_LNK: u8 = 10;
/// `getdents64` `d_type`: FIFO.
pub const DT_FIFO: u8 = 1;
/// `getdents64` `d_type`: character device.
pub const DT_CHR: u8 = 2;
/// `getdents64` `d_type`: block device.
pub const DT_BLK: u8 = 6;
/// `getdents64` `d_type`: socket.
pub const DT_SOCK: u8 = 12;

/// A time in seconds and nanoseconds since the Unix epoch (`struct timespec`).
///
/// In `futimens`/`utimensat` arguments `tv_nsec` may be [`Timespec::UTIME_NOW_NSEC`] or
/// [`Timespec::UTIME_OMIT_NSEC`]; otherwise it must be in `0 ..= 999_999_999` (`EINVAL`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timespec {
    /// Whole seconds (may be negative: before 1970).
    pub tv_sec: i64,
    /// Nanoseconds, `0 ..= 999_999_999`.
    pub tv_nsec: i64,
}

impl Timespec {
    /// `UTIME_NOW`: `(1 << 30) - 1`.
    pub const UTIME_NOW_NSEC: i64 = (1 << 30) - 1;
    /// `UTIME_OMIT`: `(1 << 30) - 2`.
    pub const UTIME_OMIT_NSEC: i64 = (1 << 30) - 2;
    /// A `futimens` time meaning "set to the current time".
    pub const UTIME_NOW: Timespec = Timespec {
        tv_sec: 0,
        tv_nsec: Self::UTIME_NOW_NSEC,
    };
    /// A `futimens` time meaning "leave unchanged".
    pub const UTIME_OMIT: Timespec = Timespec {
        tv_sec: 0,
        tv_nsec: Self::UTIME_OMIT_NSEC,
    };

    /// A time from seconds and nanoseconds.
    pub const fn new(tv_sec: i64, tv_nsec: i64) -> Timespec {
        Timespec { tv_sec, tv_nsec }
    }

    /// The current `CLOCK_REALTIME` time (what Linux stamps inodes with).
    pub fn now() -> Timespec {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
        Timespec {
            tv_sec: t.tv_sec,
            tv_nsec: t.tv_nsec as i64,
        }
    }
}

/// File status, as `fstat(2)` returns it (`struct stat`, x86_64 field set).
///
/// Units: sizes in bytes, `st_blocks` in 512-byte units, `st_blksize` in bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// Device number of the file system (one per mounted `SuperBlock`).
    pub st_dev: u64,
    /// Inode number, unique within `st_dev`.
    pub st_ino: u64,
    /// Number of hard links (directories: 2 + subdirectories).
    pub st_nlink: u64,
    /// File type (`S_IFMT` bits) and permission bits.
    pub st_mode: u32,
    /// Owner user id.
    pub st_uid: u32,
    /// Owner group id.
    pub st_gid: u32,
    /// Device number for device nodes, 0 otherwise.
    pub st_rdev: u64,
    /// Size in bytes (directories: 20 per entry plus 40, as tmpfs; symlinks: target length).
    pub st_size: i64,
    /// Preferred I/O size: 4096.
    pub st_blksize: i64,
    /// Allocated 512-byte blocks (8 per 4 KiB page stored).
    pub st_blocks: i64,
    /// Last access time.
    pub st_atime: Timespec,
    /// Last data modification time.
    pub st_mtime: Timespec,
    /// Last status change time.
    pub st_ctime: Timespec,
}

impl Stat {
    /// The file type bits (`st_mode & S_IFMT`).
    pub fn file_type(&self) -> u32 {
        self.st_mode & S_IFMT
    }

    /// Whether this is a directory (`S_ISDIR`; std's `Metadata::is_dir`).
    ///
    /// ```
    /// # use uvfs::{AtFlags, Fd, Task};
    /// let task = Task::init(&uvfs::tmpfs::mount(Default::default()));
    /// task.mkdirat(Fd::AT_FDCWD, "/d", 0o755).unwrap();
    /// let st = task.fstatat(Fd::AT_FDCWD, "/d", AtFlags::empty()).unwrap();
    /// assert!(st.is_dir() && !st.is_file() && !st.is_symlink());
    /// ```
    pub fn is_dir(&self) -> bool {
        self.file_type() == S_IFDIR
    }

    /// Whether this is a regular file (`S_ISREG`; std's `Metadata::is_file`).
    pub fn is_file(&self) -> bool {
        self.file_type() == S_IFREG
    }

    /// Whether this is a symbolic link (`S_ISLNK`; std's `Metadata::is_symlink`): only
    /// from a call that does not follow it (`AT_SYMLINK_NOFOLLOW`, `lstat`).
    pub fn is_symlink(&self) -> bool {
        self.file_type() == S_IFLNK
    }
}

/// `TMPFS_MAGIC` (include/uapi/linux/magic.h): `f_type` of a tmpfs.
pub const TMPFS_MAGIC: i64 = 0x0102_1994;
/// `ST_VALID`: `f_flags` is valid (always set by Linux `statfs`).
pub const ST_VALID: i64 = 0x0020;
/// `ST_RELATIME`: atime under relatime rules (uvfs's only atime policy).
pub const ST_RELATIME: i64 = 0x1000;
/// `ST_RDONLY`: a read-only mount (or file system).
pub const ST_RDONLY: i64 = 0x0001;
/// `ST_NOSUID`: a `nosuid` mount.
pub const ST_NOSUID: i64 = 0x0002;
/// `ST_NODEV`: a `nodev` mount.
pub const ST_NODEV: i64 = 0x0004;
/// `ST_NOEXEC`: a `noexec` mount.
pub const ST_NOEXEC: i64 = 0x0008;

/// File-system statistics, as `statfs(2)` returns them (`struct statfs`, x86_64 field set).
///
/// Units: `f_blocks`, `f_bfree`, `f_bavail` in `f_bsize` (4096-byte) blocks.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    /// File-system type: [`TMPFS_MAGIC`].
    pub f_type: i64,
    /// Block size: 4096 (`PAGE_SIZE`).
    pub f_bsize: i64,
    /// Total blocks: the `size=` limit in pages; 0 without one (see [`crate::statfs`]).
    pub f_blocks: u64,
    /// Free blocks: the limit less the pages in use; 0 without a limit.
    pub f_bfree: u64,
    /// Free blocks for unprivileged users: as `f_bfree` (tmpfs reserves none for root).
    pub f_bavail: u64,
    /// Total inodes: the `nr_inodes=` limit; 0 without one.
    pub f_files: u64,
    /// Free inodes: the limit less the inodes in use (hard links count, as tmpfs); 0
    /// without a limit.
    pub f_ffree: u64,
    /// File-system id: the device number, split in two words (Linux: from the super
    /// block's uuid).
    pub f_fsid: [i32; 2],
    /// Longest file name: 255.
    pub f_namelen: i64,
    /// Fragment size: 4096, as `f_bsize`.
    pub f_frsize: i64,
    /// Mount flags (`ST_*`): `ST_VALID | ST_RELATIME`, and `ST_RDONLY`, `ST_NOSUID`,
    /// `ST_NODEV`, `ST_NOEXEC` as the mount (or the file system) has them.
    pub f_flags: i64,
}

/// A path argument: the bytes Linux takes (a Unix path is bytes, not UTF-8). Every
/// path-taking method of [`Task`](crate::Task) accepts `&str`, `String`, `&[u8]`, a byte
/// string literal (`b"/d/f"`), `Vec<u8>`, `&OsStr`, `OsString`, `&Path` and `PathBuf`
/// alike, as `std::fs` accepts `AsRef<Path>` (whose `Path` a Unix `OsStr` is bytes of), and
/// any of them behind `&`, `&mut`, `Box`, `Arc`, `Rc` or `Cow`. (Until 2026-12 the bound was
/// `AsRef<[u8]>`; a caller generic over that bound now needs `AsPath`.)
///
/// ```
/// # use uvfs::{AtFlags, Fd, Task};
/// use std::path::{Path, PathBuf};
/// let task = Task::init(&uvfs::tmpfs::mount(Default::default()));
/// task.mkdirat(Fd::AT_FDCWD, Path::new("/d"), 0o755).unwrap();
/// let p = PathBuf::from("/d").join("sub");
/// task.mkdirat(Fd::AT_FDCWD, &p, 0o755).unwrap();
/// assert!(task.fstatat(Fd::AT_FDCWD, b"/d/sub", AtFlags::empty()).unwrap().is_dir());
/// assert!(task.fstatat(Fd::AT_FDCWD, "/d/sub".to_string(), AtFlags::empty()).unwrap().is_dir());
/// ```
pub trait AsPath {
    /// The path's bytes.
    fn path_bytes(&self) -> &[u8];
}

impl AsPath for [u8] {
    fn path_bytes(&self) -> &[u8] {
        self
    }
}
impl<const N: usize> AsPath for [u8; N] {
    fn path_bytes(&self) -> &[u8] {
        self
    }
}
impl AsPath for Vec<u8> {
    fn path_bytes(&self) -> &[u8] {
        self
    }
}
impl AsPath for str {
    fn path_bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}
impl AsPath for String {
    fn path_bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}
impl AsPath for std::ffi::OsStr {
    fn path_bytes(&self) -> &[u8] {
        std::os::unix::ffi::OsStrExt::as_bytes(self)
    }
}
impl AsPath for std::ffi::OsString {
    fn path_bytes(&self) -> &[u8] {
        std::os::unix::ffi::OsStrExt::as_bytes(self.as_os_str())
    }
}
impl AsPath for std::path::Path {
    fn path_bytes(&self) -> &[u8] {
        self.as_os_str().path_bytes()
    }
}
impl AsPath for std::path::PathBuf {
    fn path_bytes(&self) -> &[u8] {
        self.as_os_str().path_bytes()
    }
}
impl<T: AsPath + ?Sized> AsPath for &T {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}
impl<T: AsPath + ?Sized> AsPath for &mut T {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}
impl<T: AsPath + ?Sized> AsPath for Box<T> {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}
impl<T: AsPath + ?Sized> AsPath for std::sync::Arc<T> {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}
impl<T: AsPath + ?Sized> AsPath for std::rc::Rc<T> {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}
impl<T: AsPath + ToOwned + ?Sized> AsPath for std::borrow::Cow<'_, T> {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}
