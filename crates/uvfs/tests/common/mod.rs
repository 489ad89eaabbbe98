//! Differential harness for the `posix_*` tests: one operation, written once against the
//! [`Sys`] trait, runs on a fresh uvfs task and on the host Linux kernel, and the two
//! results must be equal.
//!
//! # The host side
//! Each run gets a fresh tmpfs mounted under a temporary directory (a plain temporary
//! directory if mounting fails) and a fresh thread that behaves like a new process over it:
//! `unshare(CLONE_FS)`, `chroot` into the directory, a descriptor table of its own with no
//! descriptor (`close_range(CLOSE_RANGE_UNSHARE)`: numbered from 0, as in a fresh uvfs
//! `FdTable`; no copy of the process's descriptors), `umask(022)`. All of
//! that is per thread, so tests keep running in parallel. Credentials are changed with the
//! raw `setres[ug]id`/`setgroups` system calls, which (unlike glibc's wrappers) change only
//! the calling thread. Calls are raw `syscall(2)`s so arbitrary (also invalid) descriptors
//! and flag bits reach the kernel unchanged.
//!
//! The host side needs root (`chroot`, `mount`). Without it, or with `UVFS_NO_HOST=1`,
//! only uvfs runs and is checked against the expected value written in the test.
//!
//! # The hostfs side
//! Every case that runs on a fresh uvfs tmpfs also runs on a fresh hostfs
//! ([`Uvfs::hostfs`]) over a fresh host tmpfs (mounted with the same `mode=`, `size=`,
//! `nr_inodes=` as the host side's, in a scratch thread's private mount namespace; a plain
//! directory under `/dev/shm` where mounting is refused), with the same expectations:
//! Linux's answer (`same`: the host's result when the host side runs, else uvfs tmpfs's).
//! Cases whose subject is tmpfs's own and not a host directory's may opt out by name in
//! [`HOSTFS_OPT_OUT`], with the reason; none needs to today. `UVFS_NO_HOSTFS=1` turns
//! the hostfs side off.
//!
//! # The FUSE client side
//! With the `fuse` feature (on in workspace builds), every case that runs on hostfs also
//! runs through uvfs's FUSE client ([`Uvfs::fuse_client`]) on uvfs's own FUSE server (a
//! fresh uvfs tmpfs with the same root mode and limits, behind fuser's `Session` in this
//! process over a socket pair), and must give hostfs's result (itself Linux's). Cases
//! whose subject a FUSE client cannot give (what the protocol has no message for) opt out
//! by name in [`FUSE_OPT_OUT`], with the reason. `UVFS_NO_FUSE_CLIENT=1` turns it off.
//!
//! # Patterns
//! - [`same`]: uvfs and Linux give equal results; returns the result.
//! - [`expect`]: both give `want` (the expected value documents Linux's answer and is
//!   checked against the kernel on every run).
//! - Stats are compared through [`Shape`] (no inode numbers, devices or times); times only
//!   by order relations, made deterministic by first setting explicit times in the past.

#![allow(dead_code)]

use std::ffi::CString;
use std::fmt::Debug;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use uvfs::open::Fcntl;
use uvfs::open::OpenHow;
use uvfs::stat::Statx;
use uvfs::{
    AtFlags, Cred, Errno, Fd, Mount, OpenFlags, RenameFlags, Result, Stat, StatFs, Task, Timespec,
};
use uvfs::{Flock, LockCmd};

mod openfam;
#[allow(unused_imports)]
pub use openfam::*;
mod xattrfam;
pub use xattrfam::XTarget;
mod fixture;
#[allow(unused_imports)]
pub use fixture::posix_tree;
mod mountfam;
#[allow(unused_imports)]
pub use mountfam::{check_mount_table, mount_shape, Mnt, MntShape, MountFlags, UmountFlags};

/// `AT_FDCWD`.
pub const CWD: Fd = Fd::AT_FDCWD;
/// No `AT_*` flags.
pub const NOAT: AtFlags = AtFlags::empty();
/// `O_RDONLY`.
pub const RO: OpenFlags = OpenFlags::RDONLY;
/// `O_WRONLY`.
pub const WO: OpenFlags = OpenFlags::WRONLY;
/// `O_RDWR`.
pub const RW: OpenFlags = OpenFlags::RDWR;
/// `O_CREAT`.
pub const CREAT: OpenFlags = OpenFlags::CREAT;

/// The system-call surface the tests use, implemented by uvfs ([`Uvfs`]) and the host
/// kernel ([`Host`]). Methods mirror `uvfs::Task`'s.
pub trait Sys {
    /// `"uvfs"` or `"linux"`, for messages.
    fn kind(&self) -> &'static str;
    fn openat(&self, dirfd: Fd, path: &[u8], flags: OpenFlags, mode: u32) -> Result<Fd>;
    fn close(&self, fd: Fd) -> Result<()>;
    fn dup(&self, fd: Fd) -> Result<Fd>;
    fn dup2(&self, old: Fd, new: Fd) -> Result<Fd>;
    fn dup3(&self, old: Fd, new: Fd, flags: OpenFlags) -> Result<Fd>;
    fn fcntl(&self, fd: Fd, cmd: Fcntl) -> Result<i32>;
    /// `fcntl(fd, cmd, fl)` for the record-lock commands (`F_GETLK` ... `F_OFD_SETLKW`).
    fn fcntl_lock(&self, fd: Fd, cmd: LockCmd, fl: &mut Flock) -> Result<()>;
    /// `flock(2)`.
    fn flock(&self, fd: Fd, op: i32) -> Result<()>;
    fn close_range(&mut self, first: u32, last: u32, flags: u32) -> Result<()>;
    fn read(&self, fd: Fd, buf: &mut [u8]) -> Result<usize>;
    fn write(&self, fd: Fd, buf: &[u8]) -> Result<usize>;
    fn pread(&self, fd: Fd, buf: &mut [u8], off: i64) -> Result<usize>;
    fn pwrite(&self, fd: Fd, buf: &[u8], off: i64) -> Result<usize>;
    fn lseek(&self, fd: Fd, off: i64, whence: i32) -> Result<i64>;
    fn fstat(&self, fd: Fd) -> Result<Stat>;
    fn fstatat(&self, dirfd: Fd, path: &[u8], flags: AtFlags) -> Result<Stat>;
    fn mkdirat(&self, dirfd: Fd, path: &[u8], mode: u32) -> Result<()>;
    fn unlinkat(&self, dirfd: Fd, path: &[u8], flags: AtFlags) -> Result<()>;
    fn renameat(&self, od: Fd, old: &[u8], nd: Fd, new: &[u8]) -> Result<()>;
    fn symlinkat(&self, target: &[u8], dirfd: Fd, path: &[u8]) -> Result<()>;
    fn readlinkat(&self, dirfd: Fd, path: &[u8], buf: &mut [u8]) -> Result<usize>;
    fn ftruncate(&self, fd: Fd, len: i64) -> Result<()>;
    fn futimens(&self, fd: Fd, times: Option<&[Timespec; 2]>) -> Result<()>;
    fn utimensat(
        &self,
        dirfd: Fd,
        path: &[u8],
        times: Option<&[Timespec; 2]>,
        flags: AtFlags,
    ) -> Result<()>;
    fn getdents64(&self, fd: Fd, buf: &mut [u8]) -> Result<usize>;
    fn chdir(&self, path: &[u8]) -> Result<()>;
    fn fchdir(&self, fd: Fd) -> Result<()>;
    fn getcwd(&self) -> Result<Vec<u8>>;
    fn umask(&self, mask: u32) -> u32;
    fn getuid(&self) -> u32;
    /// Becomes `uid`/`gid` with supplementary `groups` (back to root with `(0, 0, &[])`).
    fn set_cred(&mut self, uid: u32, gid: u32, groups: &[u32]);
    /// Runs `f` in a forked child (a copy of the fd table and fs context), waits for it.
    fn fork(&self, f: &mut (dyn FnMut(&mut dyn Sys) + Send));
    /// Runs `f` in a new thread sharing the fd table and fs context, waits for it.
    fn thread(&self, f: &mut (dyn FnMut(&mut dyn Sys) + Send));
    fn linkat(&self, od: Fd, old: &[u8], nd: Fd, new: &[u8], flags: AtFlags) -> Result<()>;
    fn renameat2(&self, od: Fd, old: &[u8], nd: Fd, new: &[u8], flags: RenameFlags) -> Result<()>;
    fn fchmod(&self, fd: Fd, mode: u32) -> Result<()>;
    /// `fchmodat2` (the host's syscall 452).
    fn fchmodat(&self, dirfd: Fd, path: &[u8], mode: u32, flags: AtFlags) -> Result<()>;
    fn fchown(&self, fd: Fd, uid: u32, gid: u32) -> Result<()>;
    fn fchownat(&self, dirfd: Fd, path: &[u8], uid: u32, gid: u32, flags: AtFlags) -> Result<()>;
    fn truncate(&self, path: &[u8], len: i64) -> Result<()>;
    fn faccessat2(&self, dirfd: Fd, path: &[u8], mode: u32, flags: AtFlags) -> Result<()>;
    /// Becomes real `ruid`/`rgid`, effective `euid`/`egid`, with supplementary `groups`.
    fn set_cred_real(&mut self, ruid: u32, euid: u32, rgid: u32, egid: u32, groups: &[u32]);
    /// Sets the effective capability set to `caps` (bit n = capability n, as `CapEff:`;
    /// a subset of the permitted set, which stays), ids unchanged. Call it after
    /// `set_cred`: that one gives uvfs's task the default set of its uid again.
    fn set_caps(&mut self, caps: u64);
    // O_PATH/O_TMPFILE/statx/openat2/chroot/mknodat/statfs family (openfam.rs).
    fn fsync(&self, fd: Fd) -> Result<()>;
    fn fdatasync(&self, fd: Fd) -> Result<()>;
    fn statfs(&self, path: &[u8]) -> Result<StatFs>;
    fn fstatfs(&self, fd: Fd) -> Result<StatFs>;
    fn statx(&self, dirfd: Fd, path: &[u8], flags: AtFlags, mask: u32) -> Result<Statx>;
    fn openat2(&self, dirfd: Fd, path: &[u8], how: &OpenHow) -> Result<Fd>;
    fn chroot(&self, path: &[u8]) -> Result<()>;
    fn mknodat(&self, dirfd: Fd, path: &[u8], mode: u32, dev: u64) -> Result<()>;
    /// `fallocate(2)` (`mode`: `FALLOC_FL_*` bits).
    fn fallocate(&self, fd: Fd, mode: i32, off: i64, len: i64) -> Result<()>;
    // Extended attributes (xattrfam.rs): `getxattr`/`lgetxattr`/`fgetxattr` by target, ...
    fn xattr_get(&self, t: XTarget<'_>, name: &[u8], buf: &mut [u8]) -> Result<usize>;
    fn xattr_set(&self, t: XTarget<'_>, name: &[u8], value: &[u8], flags: u32) -> Result<()>;
    fn xattr_list(&self, t: XTarget<'_>, buf: &mut [u8]) -> Result<usize>;
    fn xattr_remove(&self, t: XTarget<'_>, name: &[u8]) -> Result<()>;
    // The mount tree (mountfam.rs).
    /// `mount(2)` of a new, empty file system at directory `target` with per-mount `flags`
    /// (`RDONLY|NOSUID|NODEV|NOEXEC`). Linux: a tmpfs (`mount("tmpfs", target, "tmpfs",
    /// flags, NULL)`); uvfs: one of the kind under test (a tmpfs on tmpfs; on hostfs a
    /// hostfs over a fresh host tmpfs, as [`Uvfs::hostfs`]'s own).
    fn mount_new(&self, target: &[u8], flags: MountFlags) -> Result<()>;
    /// `mount(source, target, NULL, MS_BIND | flags, NULL)` (`flags`: `MS_REC` or nothing).
    fn mount_bind(&self, source: &[u8], target: &[u8], flags: MountFlags) -> Result<()>;
    /// `mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL)`: sets the per-mount
    /// flags of the mount whose root is `target`.
    fn mount_setflags(&self, target: &[u8], flags: MountFlags) -> Result<()>;
    /// `umount2(2)`.
    fn umount2(&self, target: &[u8], flags: UmountFlags) -> Result<()>;
    /// The mounts visible under the task's root, as `/proc/thread-self/mountinfo` lists
    /// them (Linux: read through a procfs mounted for the moment; uvfs:
    /// `Task::mountinfo`). Call it as root.
    fn mountinfo(&self) -> Result<Vec<Mnt>>;
    /// The open of `execve(2)` on `path`, an empty file: `Ok` where it may be executed
    /// (Linux: `execveat` failing with `ENOEXEC`, as no binary format takes an empty file;
    /// uvfs: `Task::open_exec`, which checks `noexec` on the walk's own mount).
    fn exec_check(&self, path: &[u8]) -> Result<()>;
}

// ---------------------------------------------------------------------------------------
// uvfs side

/// A fresh uvfs tmpfs (or hostfs, [`Uvfs::hostfs`]) and its init task.
pub struct Uvfs {
    pub task: Task,
    pub mnt: Arc<Mount>,
    /// The host directory of a hostfs mount, kept while the mount is used.
    pub host: Option<Arc<HostDir>>,
    /// For a FUSE client side: the server's end of the socket, shut down at drop so the
    /// in-process server's loop ends even while the client's connection lingers.
    pub server: Option<ServerStop>,
}

/// Shuts the in-process FUSE server's socket down at drop (see [`Uvfs::server`]).
pub struct ServerStop(pub rustix::fd::OwnedFd);

impl Drop for ServerStop {
    fn drop(&mut self) {
        let _ = rustix::net::shutdown(&self.0, rustix::net::Shutdown::Both);
    }
}

/// Whether the posix cases also run through the FUSE client (built with `fuse`; off
/// with `UVFS_NO_FUSE_CLIENT=1`).
pub fn fuse_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    cfg!(feature = "fuse")
        && *ON.get_or_init(|| std::env::var_os("UVFS_NO_FUSE_CLIENT").is_none_or(|v| v == "0"))
}

/// Cases that do not run through the FUSE client, by test function or table case name,
/// with the reason: what they check has no FUSE message (or differs by FUSE's design,
/// as Linux's own FUSE client differs there too).
pub const FUSE_OPT_OUT: &[(&str, &str)] = &[
    // Linux's FUSE client keeps set-group-ID without group execute where a local file
    // system drops it for a caller outside the file's group (`fuse_setattr` recomputes the
    // kill from refreshed attributes); posix_perm.rs's
    // `fuse_keeps_set_group_id_without_group_execute` checks the FUSE client's.
    (
        "the owner outside the file's group loses it",
        "set-group-ID without group execute stays on FUSE (fuse_setattr)",
    ),
    (
        "S_ISGID cleared for a non-member",
        "set-group-ID without group execute stays on FUSE (fuse_setattr)",
    ),
    // AT_STATX_DONT_SYNC shows the FUSE client's cached attributes (the CREATE reply's 0
    // blocks after a write), as Linux's; posix_attr.rs's
    // `fstatat_dont_sync_answers_from_the_fuse_cache` checks the FUSE client's.
    (
        "AT_STATX_DONT_SYNC",
        "the FUSE client's cache answers: 0 blocks",
    ),
    // A FUSE mount's statfs type is FUSE_SUPER_MAGIC, not TMPFS_MAGIC (as Linux's).
    ("statfs_fields", "f_type is FUSE_SUPER_MAGIC"),
    ("fstatfs", "f_type is FUSE_SUPER_MAGIC"),
    // The atime is the server's (Linux's FUSE inodes are S_NOATIME; the client asks again
    // after a READ or READDIR): where no request reaches the server, no atime moves.
    (
        "following_a_symlink_updates_its_atime",
        "atime: a cached symlink target (FUSE_CACHE_SYMLINKS) sends no READLINK",
    ),
    (
        "creat_through_symlink_stamps_link_atime",
        "atime: a cached symlink target sends no READLINK",
    ),
    (
        "regression_zero_length_read_updates_atime",
        "atime: a zero-length read sends no READ (as Linux's FUSE client)",
    ),
    (
        "getdents_after_end_does_not_list_new_entries",
        "atime: a getdents at the end of the listing sends no READDIR",
    ),
    (
        "getdents_too_small_buffer_still_stamps_atime",
        "atime: a getdents into a too-small buffer fails before any READDIR",
    ),
    // chown(-1, -1) reaches the server as a SETATTR with nothing valid, as Linux's FUSE
    // client sends it; the kernel sends the same for a write's privilege drop under
    // FUSE_HANDLE_KILLPRIV, so uvfs's server changes nothing for it, and the ctime stays.
    (
        "chmod_and_chown_stamp_ctime_only",
        "chown(-1, -1): a SETATTR with nothing valid, which the server cannot tell apart",
    ),
];

/// The reason the running test (or table case `case`) does not run through the FUSE
/// client, if listed in [`FUSE_OPT_OUT`].
pub fn fuse_opt_out(case: Option<&str>) -> Option<&'static str> {
    opt_out(FUSE_OPT_OUT, case)
}

/// The host directory under a hostfs mount: a fresh tmpfs mounted in a scratch thread's
/// private mount namespace (so it is reachable only through the descriptors hostfs
/// holds), or, where mounting is refused, a plain directory under `/dev/shm`.
#[derive(Debug)]
pub struct HostDir {
    pub dir: tempfile::TempDir,
    /// Whether `dir` is a plain directory (no tmpfs could be mounted on it).
    pub plain: bool,
    /// The host directories of the hostfs mounts [`Sys::mount_new`] attached inside this
    /// one, kept while this one is.
    pub children: std::sync::Mutex<Vec<HostDir>>,
}

/// Whether the posix cases also run on hostfs (off with `UVFS_NO_HOSTFS=1`).
pub fn hostfs_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("UVFS_NO_HOSTFS").is_none_or(|v| v == "0"))
}

/// Cases that do not run on hostfs, by test function or table case name, with the reason:
/// what they check is tmpfs's own (uvfs's in-memory file system), not a POSIX answer that
/// a host directory must give.
pub const HOSTFS_OPT_OUT: &[(&str, &str)] = &[];

/// The reason the running test (or table case `case`) does not run on hostfs, if listed
/// in [`HOSTFS_OPT_OUT`].
pub fn hostfs_opt_out(case: Option<&str>) -> Option<&'static str> {
    opt_out(HOSTFS_OPT_OUT, case)
}

/// The reason in `list` for the running test (or table case `case`), if any.
fn opt_out(list: &[(&str, &'static str)], case: Option<&str>) -> Option<&'static str> {
    let t = std::thread::current();
    let test = t.name().unwrap_or("");
    list.iter().find_map(|(n, why)| {
        let hit = case == Some(*n) || test == *n || test.ends_with(&format!("::{n}"));
        hit.then_some(*why)
    })
}

impl Uvfs {
    pub fn new() -> Uvfs {
        Self::with_root_mode(None)
    }

    /// A tmpfs mounted with `opts`.
    pub fn with_options(opts: uvfs::TmpfsOptions) -> Uvfs {
        let mnt = uvfs::tmpfs::mount(opts);
        Uvfs {
            task: Task::init(&mnt),
            mnt,
            host: None,
            server: None,
        }
    }

    /// hostfs over a fresh host tmpfs mounted with `mode=root_mode` (default `1777`) and
    /// `extra` options (e.g. `",size=65536"`), as the host side's sandbox.
    pub fn hostfs(root_mode: Option<u32>, extra: &str) -> Uvfs {
        let (mnt, dir) = new_hostfs(root_mode, extra);
        Uvfs {
            task: Task::init(&mnt),
            mnt,
            host: Some(Arc::new(dir)),
            server: None,
        }
    }

    /// uvfs's FUSE client on uvfs's FUSE server over a fresh tmpfs with root mode
    /// `root_mode` (default `1777`) and the `size=`/`nr_inodes=` of `extra` (as the host
    /// side's sandbox), the server in this process: `UvfsFuse::dispatch` on a socket pair,
    /// one request at a time (the code `uvfs mount` serves `/dev/fuse` with).
    #[cfg(feature = "fuse")]
    pub fn fuse_client(root_mode: Option<u32>, extra: &str) -> Uvfs {
        let mut opts = uvfs::TmpfsOptions {
            mode: root_mode,
            ..Default::default()
        };
        for o in extra.split(',').filter(|o| !o.is_empty()) {
            match o.split_once('=') {
                Some(("size", v)) => opts.size = Some(v.parse().expect("size=")),
                Some(("nr_inodes", v)) => opts.nr_inodes = Some(v.parse().expect("nr_inodes=")),
                _ => panic!("fuse_client: option {o} not known"),
            }
        }
        let served = uvfs::tmpfs::mount(opts);
        let (mine, theirs) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .expect("socketpair");
        let stop = ServerStop(theirs.try_clone().expect("dup"));
        let fs = uvfs::fuse::UvfsFuse::new(&served, Default::default());
        std::thread::Builder::new()
            .name("fuse-server".into())
            .spawn(move || {
                // The largest request: a WRITE of the server's `max_write` (1 MiB) and headers.
                let mut buf = vec![0u8; (1 << 20) + 4096];
                let mut out = Vec::new();
                loop {
                    let n =
                        match rustix::net::recv(&theirs, &mut buf, rustix::net::RecvFlags::empty())
                        {
                            Err(rustix::io::Errno::INTR) => continue,
                            Ok((0, _)) | Err(_) => return,
                            Ok((n, _)) => n,
                        };
                    if fs.dispatch(&buf[..n], &mut out) {
                        let _ = rustix::net::send(&theirs, &out, rustix::net::SendFlags::NOSIGNAL);
                    }
                }
            })
            .expect("server thread");
        let mnt = uvfs::fuse::client::mount(
            uvfs::fuse::client::FuseServer::Socket(mine),
            Default::default(),
        )
        .expect("FUSE client mount");
        Uvfs {
            task: Task::init(&mnt),
            mnt,
            host: None,
            server: Some(stop),
        }
    }

    /// A tmpfs whose root directory has permission bits `mode` (default `0o1777`).
    pub fn with_root_mode(mode: Option<u32>) -> Uvfs {
        let mnt = uvfs::tmpfs::mount(uvfs::TmpfsOptions {
            mode,
            ..Default::default()
        });
        Uvfs {
            task: Task::init(&mnt),
            mnt,
            host: None,
            server: None,
        }
    }
}

/// A hostfs over a fresh host tmpfs (see [`Uvfs::hostfs`]), and its host directory.
fn new_hostfs(root_mode: Option<u32>, extra: &str) -> (Arc<Mount>, HostDir) {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = tempfile::Builder::new()
        .prefix("uvfs-hostfs-")
        .tempdir_in(base)
        .expect("tempdir");
    let path = dir.path().to_owned();
    let mode = root_mode.unwrap_or(0o1777);
    let data = cpath(format!("mode={mode:o}{extra}").as_bytes());
    let required = root_mode.is_some() || !extra.is_empty();
    let (mnt, plain) = std::thread::spawn(move || {
        let p = cpath(path.as_os_str().as_encoded_bytes());
        // The thread ends right after mounting hostfs, whose descriptors keep the
        // tmpfs alive (reachable through them only).
        let mounted = mount_private_tmpfs(&p, &data);
        if !mounted {
            assert!(
                !required,
                "hostfs: a root mode or limits need a tmpfs mount"
            );
            // SAFETY: chmod of our own fresh directory.
            unsafe { libc::chmod(p.as_ptr(), mode) };
        }
        let m = uvfs::hostfs::mount(&path, uvfs::hostfs::HostfsOptions::default())
            .expect("hostfs mount");
        (m, !mounted)
    })
    .join()
    .expect("hostfs thread");
    let children = Default::default();
    (
        mnt,
        HostDir {
            dir,
            plain,
            children,
        },
    )
}

impl Default for Uvfs {
    fn default() -> Self {
        Self::new()
    }
}

impl Sys for Uvfs {
    fn kind(&self) -> &'static str {
        "uvfs"
    }
    fn openat(&self, dirfd: Fd, path: &[u8], flags: OpenFlags, mode: u32) -> Result<Fd> {
        self.task.openat(dirfd, path, flags, mode)
    }
    fn close(&self, fd: Fd) -> Result<()> {
        self.task.close(fd)
    }
    fn dup(&self, fd: Fd) -> Result<Fd> {
        self.task.dup(fd)
    }
    fn dup2(&self, old: Fd, new: Fd) -> Result<Fd> {
        self.task.dup2(old, new)
    }
    fn dup3(&self, old: Fd, new: Fd, flags: OpenFlags) -> Result<Fd> {
        self.task.dup3(old, new, flags)
    }
    fn fcntl(&self, fd: Fd, cmd: Fcntl) -> Result<i32> {
        self.task.fcntl(fd, cmd)
    }
    fn fcntl_lock(&self, fd: Fd, cmd: LockCmd, fl: &mut Flock) -> Result<()> {
        self.task.fcntl_lock(fd, cmd, fl)
    }
    fn flock(&self, fd: Fd, op: i32) -> Result<()> {
        self.task.flock(fd, op)
    }
    fn close_range(&mut self, first: u32, last: u32, flags: u32) -> Result<()> {
        self.task.close_range(first, last, flags)
    }
    fn read(&self, fd: Fd, buf: &mut [u8]) -> Result<usize> {
        self.task.read(fd, buf)
    }
    fn write(&self, fd: Fd, buf: &[u8]) -> Result<usize> {
        self.task.write(fd, buf)
    }
    fn pread(&self, fd: Fd, buf: &mut [u8], off: i64) -> Result<usize> {
        self.task.pread(fd, buf, off)
    }
    fn pwrite(&self, fd: Fd, buf: &[u8], off: i64) -> Result<usize> {
        self.task.pwrite(fd, buf, off)
    }
    fn lseek(&self, fd: Fd, off: i64, whence: i32) -> Result<i64> {
        self.task.lseek(fd, off, whence)
    }
    fn fstat(&self, fd: Fd) -> Result<Stat> {
        self.task.fstat(fd)
    }
    fn fstatat(&self, dirfd: Fd, path: &[u8], flags: AtFlags) -> Result<Stat> {
        self.task.fstatat(dirfd, path, flags)
    }
    fn mkdirat(&self, dirfd: Fd, path: &[u8], mode: u32) -> Result<()> {
        self.task.mkdirat(dirfd, path, mode)
    }
    fn unlinkat(&self, dirfd: Fd, path: &[u8], flags: AtFlags) -> Result<()> {
        self.task.unlinkat(dirfd, path, flags)
    }
    fn renameat(&self, od: Fd, old: &[u8], nd: Fd, new: &[u8]) -> Result<()> {
        self.task.renameat(od, old, nd, new)
    }
    fn symlinkat(&self, target: &[u8], dirfd: Fd, path: &[u8]) -> Result<()> {
        self.task.symlinkat(target, dirfd, path)
    }
    fn readlinkat(&self, dirfd: Fd, path: &[u8], buf: &mut [u8]) -> Result<usize> {
        self.task.readlinkat(dirfd, path, buf)
    }
    fn ftruncate(&self, fd: Fd, len: i64) -> Result<()> {
        self.task.ftruncate(fd, len)
    }
    fn futimens(&self, fd: Fd, times: Option<&[Timespec; 2]>) -> Result<()> {
        self.task.futimens(fd, times)
    }
    fn utimensat(
        &self,
        dirfd: Fd,
        path: &[u8],
        times: Option<&[Timespec; 2]>,
        flags: AtFlags,
    ) -> Result<()> {
        self.task.utimensat(dirfd, path, times, flags)
    }
    fn getdents64(&self, fd: Fd, buf: &mut [u8]) -> Result<usize> {
        self.task.getdents64(fd, buf)
    }
    fn chdir(&self, path: &[u8]) -> Result<()> {
        self.task.chdir(path)
    }
    fn fchdir(&self, fd: Fd) -> Result<()> {
        self.task.fchdir(fd)
    }
    fn getcwd(&self) -> Result<Vec<u8>> {
        self.task.getcwd()
    }
    fn umask(&self, mask: u32) -> u32 {
        self.task.umask(mask)
    }
    fn getuid(&self) -> u32 {
        self.task.getuid()
    }
    fn set_cred(&mut self, uid: u32, gid: u32, groups: &[u32]) {
        self.task.set_cred(Cred::new(uid, gid, groups));
    }
    fn fork(&self, f: &mut (dyn FnMut(&mut dyn Sys) + Send)) {
        let mut child = Uvfs {
            task: self.task.fork(),
            mnt: self.mnt.clone(),
            host: self.host.clone(),
            // The parent's: it stops the server when the parent goes.
            server: None,
        };
        f(&mut child);
    }
    fn thread(&self, f: &mut (dyn FnMut(&mut dyn Sys) + Send)) {
        let mut t = Uvfs {
            task: self.task.clone_thread(),
            mnt: self.mnt.clone(),
            host: self.host.clone(),
            // The parent's: it stops the server when the parent goes.
            server: None,
        };
        f(&mut t);
    }
    fn linkat(&self, od: Fd, old: &[u8], nd: Fd, new: &[u8], flags: AtFlags) -> Result<()> {
        self.task.linkat(od, old, nd, new, flags)
    }
    fn renameat2(&self, od: Fd, old: &[u8], nd: Fd, new: &[u8], flags: RenameFlags) -> Result<()> {
        self.task.renameat2(od, old, nd, new, flags)
    }
    fn fchmod(&self, fd: Fd, mode: u32) -> Result<()> {
        self.task.fchmod(fd, mode)
    }
    fn fchmodat(&self, dirfd: Fd, path: &[u8], mode: u32, flags: AtFlags) -> Result<()> {
        self.task.fchmodat(dirfd, path, mode, flags)
    }
    fn fchown(&self, fd: Fd, uid: u32, gid: u32) -> Result<()> {
        self.task.fchown(fd, uid, gid)
    }
    fn fchownat(&self, dirfd: Fd, path: &[u8], uid: u32, gid: u32, flags: AtFlags) -> Result<()> {
        self.task.fchownat(dirfd, path, uid, gid, flags)
    }
    fn truncate(&self, path: &[u8], len: i64) -> Result<()> {
        self.task.truncate(path, len)
    }
    fn faccessat2(&self, dirfd: Fd, path: &[u8], mode: u32, flags: AtFlags) -> Result<()> {
        self.task.faccessat2(dirfd, path, mode, flags)
    }
    fn set_cred_real(&mut self, ruid: u32, euid: u32, rgid: u32, egid: u32, groups: &[u32]) {
        self.task
            .set_cred(Cred::new(euid, egid, groups).with_real(ruid, rgid));
    }
    fn set_caps(&mut self, caps: u64) {
        let c = self.task.cred().clone().with_caps(uvfs::Caps(caps));
        self.task.set_cred(c);
    }
    fn fsync(&self, fd: Fd) -> Result<()> {
        self.task.fsync(fd)
    }
    fn fdatasync(&self, fd: Fd) -> Result<()> {
        self.task.fdatasync(fd)
    }
    fn statfs(&self, path: &[u8]) -> Result<StatFs> {
        self.task.statfs(path)
    }
    fn fstatfs(&self, fd: Fd) -> Result<StatFs> {
        self.task.fstatfs(fd)
    }
    fn statx(&self, dirfd: Fd, path: &[u8], flags: AtFlags, mask: u32) -> Result<Statx> {
        self.task.statx(dirfd, path, flags, mask)
    }
    fn openat2(&self, dirfd: Fd, path: &[u8], how: &OpenHow) -> Result<Fd> {
        self.task.openat2(dirfd, path, how)
    }
    fn chroot(&self, path: &[u8]) -> Result<()> {
        self.task.chroot(path)
    }
    fn mknodat(&self, dirfd: Fd, path: &[u8], mode: u32, dev: u64) -> Result<()> {
        self.task.mknodat(dirfd, path, mode, dev)
    }
    fn fallocate(&self, fd: Fd, mode: i32, off: i64, len: i64) -> Result<()> {
        self.task.fallocate(fd, mode, off, len)
    }
    fn xattr_get(&self, t: XTarget<'_>, name: &[u8], buf: &mut [u8]) -> Result<usize> {
        xattrfam::uvfs_get(&self.task, t, name, buf)
    }
    fn xattr_set(&self, t: XTarget<'_>, name: &[u8], value: &[u8], flags: u32) -> Result<()> {
        xattrfam::uvfs_set(&self.task, t, name, value, flags)
    }
    fn xattr_list(&self, t: XTarget<'_>, buf: &mut [u8]) -> Result<usize> {
        xattrfam::uvfs_list(&self.task, t, buf)
    }
    fn xattr_remove(&self, t: XTarget<'_>, name: &[u8]) -> Result<()> {
        xattrfam::uvfs_remove(&self.task, t, name)
    }
    fn mount_new(&self, target: &[u8], flags: MountFlags) -> Result<()> {
        let fs = match &self.host {
            None => uvfs::tmpfs::mount(Default::default()),
            Some(h) => {
                let (m, dir) = new_hostfs(None, "");
                h.children.lock().unwrap().push(dir);
                m
            }
        };
        self.task.mount(&fs, target, flags)
    }
    fn mount_bind(&self, source: &[u8], target: &[u8], flags: MountFlags) -> Result<()> {
        self.task.mount_bind(source, target, flags)
    }
    fn mount_setflags(&self, target: &[u8], flags: MountFlags) -> Result<()> {
        self.task.mount_setflags(target, flags)
    }
    fn umount2(&self, target: &[u8], flags: UmountFlags) -> Result<()> {
        self.task.umount2(target, flags)
    }
    fn mountinfo(&self) -> Result<Vec<Mnt>> {
        Ok(mountfam::from_uvfs(self.task.mountinfo()))
    }
    fn exec_check(&self, path: &[u8]) -> Result<()> {
        self.task.open_exec(CWD, path).map(drop)
    }
}

// ---------------------------------------------------------------------------------------
// host side

/// The host kernel, seen from a sandbox thread (see the module doc).
#[derive(Debug, Default)]
pub struct Host;

pub(crate) fn errno() -> Errno {
    let e = std::io::Error::last_os_error();
    Errno::from_io_error(&e)
}

/// Checks a raw `syscall` return value.
pub(crate) fn sc(r: libc::c_long) -> Result<libc::c_long> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

pub(crate) fn cpath(p: &[u8]) -> CString {
    CString::new(p).expect("a path with an interior NUL cannot be passed to the kernel")
}

fn ts(t: &Timespec) -> libc::timespec {
    libc::timespec {
        tv_sec: t.tv_sec,
        tv_nsec: t.tv_nsec,
    }
}

fn from_libc_stat(s: &libc::stat) -> Stat {
    Stat {
        st_dev: s.st_dev,
        st_ino: s.st_ino,
        st_nlink: s.st_nlink,
        st_mode: s.st_mode,
        st_uid: s.st_uid,
        st_gid: s.st_gid,
        st_rdev: s.st_rdev,
        st_size: s.st_size,
        st_blksize: s.st_blksize,
        st_blocks: s.st_blocks,
        st_atime: Timespec::new(s.st_atime, s.st_atime_nsec),
        st_mtime: Timespec::new(s.st_mtime, s.st_mtime_nsec),
        st_ctime: Timespec::new(s.st_ctime, s.st_ctime_nsec),
    }
}

fn fcntl_raw(cmd: Fcntl) -> (libc::c_int, libc::c_long) {
    match cmd {
        Fcntl::DupFd(a) => (libc::F_DUPFD, a as libc::c_long),
        Fcntl::DupFdCloexec(a) => (libc::F_DUPFD_CLOEXEC, a as libc::c_long),
        Fcntl::GetFd => (libc::F_GETFD, 0),
        Fcntl::SetFd(a) => (libc::F_SETFD, a as libc::c_long),
        Fcntl::GetFl => (libc::F_GETFL, 0),
        Fcntl::SetFl(a) => (libc::F_SETFL, a as libc::c_long),
    }
}

/// Makes the calling thread a fresh "process" rooted at `root` (see the module doc).
fn enter_sandbox(sb: &Sandbox) {
    let r = cpath(sb.dir.path().as_os_str().as_encoded_bytes());
    // SAFETY: plain system calls on this thread's own context: the fd table (unshared
    // empty by the `close_range` below), fs context and mount namespace are this thread's
    // private copies from here on, so closing its descriptors or mounting affects no one
    // else.
    unsafe {
        // A mount namespace of our own needs CAP_SYS_ADMIN; without it (e.g. a container
        // that forbids mounts) run on the bare directory, as before.
        let own_ns = libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS) == 0;
        if !own_ns {
            assert_eq!(libc::unshare(libc::CLONE_FS), 0, "unshare: {}", errno());
        }
        // Nothing mounted here propagates back to the host's namespace.
        let private = own_ns
            && libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0;
        let mounted = private
            && libc::mount(
                c"uvfs-posix".as_ptr(),
                r.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                sb.data.as_ptr().cast(),
            ) == 0;
        assert!(
            mounted || !sb.required,
            "a root mode or limits need a tmpfs mount: {}",
            errno()
        );
        if !mounted {
            // The tmpfs root would be mode 1777 (`mode=` default); give the bare directory
            // the same, so tasks with other credentials can use it.
            libc::chmod(r.as_ptr(), 0o1777);
            static ONCE: OnceLock<()> = OnceLock::new();
            ONCE.get_or_init(|| {
                eprintln!(
                    "note: cannot mount tmpfs ({}); host side uses a plain directory",
                    errno()
                )
            });
        }
        assert_eq!(libc::chroot(r.as_ptr()), 0, "chroot: {}", errno());
        assert_eq!(libc::chdir(c"/".as_ptr()), 0);
        // A table of our own with nothing in it: CLOSE_RANGE_UNSHARE over every descriptor
        // copies none (`unshare(CLONE_FILES)` would copy them all, briefly holding other
        // tests' host files open: hostfs's, whose space a test expects back at a close).
        let unshare = libc::CLOSE_RANGE_UNSHARE;
        sc(libc::syscall(
            libc::SYS_close_range,
            0u32,
            u32::MAX,
            unshare,
        ))
        .unwrap();
        libc::syscall(libc::SYS_umask, 0o022);
    }
}

fn unshare_like_fork() {
    // SAFETY: as in `enter_sandbox`: the copies belong to this thread only.
    unsafe {
        assert_eq!(libc::unshare(libc::CLONE_FS | libc::CLONE_FILES), 0);
    }
}

impl Sys for Host {
    fn kind(&self) -> &'static str {
        "linux"
    }
    fn openat(&self, dirfd: Fd, path: &[u8], flags: OpenFlags, mode: u32) -> Result<Fd> {
        let p = cpath(path);
        // SAFETY: valid NUL-terminated path.
        let r = unsafe {
            libc::syscall(
                libc::SYS_openat,
                dirfd.0,
                p.as_ptr(),
                flags.bits() as libc::c_int,
                mode,
            )
        };
        sc(r).map(|fd| Fd(fd as i32))
    }
    fn close(&self, fd: Fd) -> Result<()> {
        // SAFETY: closes a descriptor of this sandbox thread's private table.
        sc(unsafe { libc::syscall(libc::SYS_close, fd.0) }).map(drop)
    }
    fn dup(&self, fd: Fd) -> Result<Fd> {
        // SAFETY: descriptor-number arguments only.
        sc(unsafe { libc::syscall(libc::SYS_dup, fd.0) }).map(|r| Fd(r as i32))
    }
    fn dup2(&self, old: Fd, new: Fd) -> Result<Fd> {
        // SAFETY: descriptor-number arguments only.
        sc(unsafe { libc::syscall(libc::SYS_dup2, old.0, new.0) }).map(|r| Fd(r as i32))
    }
    fn dup3(&self, old: Fd, new: Fd, flags: OpenFlags) -> Result<Fd> {
        // SAFETY: descriptor-number arguments only.
        sc(unsafe { libc::syscall(libc::SYS_dup3, old.0, new.0, flags.bits() as libc::c_int) })
            .map(|r| Fd(r as i32))
    }
    fn fcntl(&self, fd: Fd, cmd: Fcntl) -> Result<i32> {
        let (c, a) = fcntl_raw(cmd);
        // SAFETY: these commands take integer arguments.
        sc(unsafe { libc::syscall(libc::SYS_fcntl, fd.0, c, a) }).map(|r| r as i32)
    }
    fn fcntl_lock(&self, fd: Fd, cmd: LockCmd, fl: &mut Flock) -> Result<()> {
        let p: *mut Flock = fl;
        // SAFETY: `Flock` has the kernel's `struct flock` layout (32 bytes, asserted in
        // uvfs); the kernel reads and writes it through the valid pointer.
        sc(unsafe { libc::syscall(libc::SYS_fcntl, fd.0, cmd.raw(), p) }).map(drop)
    }
    fn flock(&self, fd: Fd, op: i32) -> Result<()> {
        // SAFETY: integer arguments.
        sc(unsafe { libc::syscall(libc::SYS_flock, fd.0, op) }).map(drop)
    }
    fn close_range(&mut self, first: u32, last: u32, flags: u32) -> Result<()> {
        // SAFETY: integer arguments; affects only this thread's table.
        sc(unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) }).map(drop)
    }
    fn read(&self, fd: Fd, buf: &mut [u8]) -> Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        sc(unsafe { libc::syscall(libc::SYS_read, fd.0, buf.as_mut_ptr(), buf.len()) })
            .map(|r| r as usize)
    }
    fn write(&self, fd: Fd, buf: &[u8]) -> Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        sc(unsafe { libc::syscall(libc::SYS_write, fd.0, buf.as_ptr(), buf.len()) })
            .map(|r| r as usize)
    }
    fn pread(&self, fd: Fd, buf: &mut [u8], off: i64) -> Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        sc(unsafe { libc::syscall(libc::SYS_pread64, fd.0, buf.as_mut_ptr(), buf.len(), off) })
            .map(|r| r as usize)
    }
    fn pwrite(&self, fd: Fd, buf: &[u8], off: i64) -> Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        sc(unsafe { libc::syscall(libc::SYS_pwrite64, fd.0, buf.as_ptr(), buf.len(), off) })
            .map(|r| r as usize)
    }
    fn lseek(&self, fd: Fd, off: i64, whence: i32) -> Result<i64> {
        // SAFETY: integer arguments.
        sc(unsafe { libc::syscall(libc::SYS_lseek, fd.0, off, whence) })
    }
    fn fstat(&self, fd: Fd) -> Result<Stat> {
        // SAFETY: all-zero is a valid `stat`; the kernel fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a writable `struct stat`.
        sc(unsafe { libc::syscall(libc::SYS_fstat, fd.0, &mut st) })?;
        Ok(from_libc_stat(&st))
    }
    fn fstatat(&self, dirfd: Fd, path: &[u8], flags: AtFlags) -> Result<Stat> {
        let p = cpath(path);
        // SAFETY: all-zero is a valid `stat`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid path and writable `stat`.
        sc(unsafe {
            libc::syscall(
                libc::SYS_newfstatat,
                dirfd.0,
                p.as_ptr(),
                &mut st,
                flags.bits() as libc::c_int,
            )
        })?;
        Ok(from_libc_stat(&st))
    }
    fn mkdirat(&self, dirfd: Fd, path: &[u8], mode: u32) -> Result<()> {
        let p = cpath(path);
        // SAFETY: valid path.
        sc(unsafe { libc::syscall(libc::SYS_mkdirat, dirfd.0, p.as_ptr(), mode) }).map(drop)
    }
    fn unlinkat(&self, dirfd: Fd, path: &[u8], flags: AtFlags) -> Result<()> {
        let p = cpath(path);
        // SAFETY: valid path.
        sc(unsafe {
            libc::syscall(
                libc::SYS_unlinkat,
                dirfd.0,
                p.as_ptr(),
                flags.bits() as libc::c_int,
            )
        })
        .map(drop)
    }
    fn renameat(&self, od: Fd, old: &[u8], nd: Fd, new: &[u8]) -> Result<()> {
        let (o, n) = (cpath(old), cpath(new));
        // SAFETY: valid paths.
        sc(unsafe { libc::syscall(libc::SYS_renameat, od.0, o.as_ptr(), nd.0, n.as_ptr()) })
            .map(drop)
    }
    fn symlinkat(&self, target: &[u8], dirfd: Fd, path: &[u8]) -> Result<()> {
        let (t, p) = (cpath(target), cpath(path));
        // SAFETY: valid paths.
        sc(unsafe { libc::syscall(libc::SYS_symlinkat, t.as_ptr(), dirfd.0, p.as_ptr()) }).map(drop)
    }
    fn readlinkat(&self, dirfd: Fd, path: &[u8], buf: &mut [u8]) -> Result<usize> {
        let p = cpath(path);
        // SAFETY: valid path; `buf` valid for `buf.len()` bytes (dangling but non-null and
        // never written when empty).
        sc(unsafe {
            libc::syscall(
                libc::SYS_readlinkat,
                dirfd.0,
                p.as_ptr(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        })
        .map(|r| r as usize)
    }
    fn ftruncate(&self, fd: Fd, len: i64) -> Result<()> {
        // SAFETY: integer arguments.
        sc(unsafe { libc::syscall(libc::SYS_ftruncate, fd.0, len) }).map(drop)
    }
    fn futimens(&self, fd: Fd, times: Option<&[Timespec; 2]>) -> Result<()> {
        let t = times.map(|t| [ts(&t[0]), ts(&t[1])]);
        let tp = t.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
        // SAFETY: NULL path (futimens) and NULL or two valid timespecs.
        sc(unsafe {
            libc::syscall(
                libc::SYS_utimensat,
                fd.0,
                std::ptr::null::<libc::c_char>(),
                tp,
                0,
            )
        })
        .map(drop)
    }
    fn utimensat(
        &self,
        dirfd: Fd,
        path: &[u8],
        times: Option<&[Timespec; 2]>,
        flags: AtFlags,
    ) -> Result<()> {
        let p = cpath(path);
        let t = times.map(|t| [ts(&t[0]), ts(&t[1])]);
        let tp = t.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
        // SAFETY: valid path and NULL or two valid timespecs.
        sc(unsafe {
            libc::syscall(
                libc::SYS_utimensat,
                dirfd.0,
                p.as_ptr(),
                tp,
                flags.bits() as libc::c_int,
            )
        })
        .map(drop)
    }
    fn getdents64(&self, fd: Fd, buf: &mut [u8]) -> Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        sc(unsafe { libc::syscall(libc::SYS_getdents64, fd.0, buf.as_mut_ptr(), buf.len()) })
            .map(|r| r as usize)
    }
    fn chdir(&self, path: &[u8]) -> Result<()> {
        let p = cpath(path);
        // SAFETY: valid path; changes this thread's private fs context.
        sc(unsafe { libc::syscall(libc::SYS_chdir, p.as_ptr()) }).map(drop)
    }
    fn fchdir(&self, fd: Fd) -> Result<()> {
        // SAFETY: integer argument; changes this thread's private fs context.
        sc(unsafe { libc::syscall(libc::SYS_fchdir, fd.0) }).map(drop)
    }
    fn getcwd(&self) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; 4096];
        // SAFETY: `buf` is valid for its length.
        let n = sc(unsafe { libc::syscall(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len()) })?;
        buf.truncate(n as usize - 1); // the kernel counts the NUL
        Ok(buf)
    }
    fn umask(&self, mask: u32) -> u32 {
        // SAFETY: integer argument; this thread's private fs context.
        unsafe { libc::syscall(libc::SYS_umask, mask) as u32 }
    }
    fn getuid(&self) -> u32 {
        // SAFETY: no arguments.
        unsafe { libc::syscall(libc::SYS_getuid) as u32 }
    }
    fn set_caps(&mut self, caps: u64) {
        // capget/capset of this thread (pid 0), _LINUX_CAPABILITY_VERSION_3: two words.
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut h = Header {
            version: 0x2008_0522,
            pid: 0,
        };
        let mut d = [Data::default(); 2];
        // SAFETY: a valid header and a two-element data array, as version 3 reads/writes.
        unsafe {
            sc(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr())).unwrap();
        }
        // Capabilities this process never had (a container's bounding set) stay out:
        // effective must be a subset of permitted; uvfs checks none of those.
        d[0].effective = caps as u32 & d[0].permitted;
        d[1].effective = (caps >> 32) as u32 & d[1].permitted;
        // SAFETY: as above; capset only reads them.
        unsafe {
            sc(libc::syscall(libc::SYS_capset, &h, d.as_ptr())).unwrap();
        }
    }
    fn set_cred(&mut self, uid: u32, gid: u32, groups: &[u32]) {
        // Raw system calls: each changes only this thread's credentials. The saved uid stays
        // 0 so the thread can become root again.
        // SAFETY: integer arguments and a valid group array.
        unsafe {
            sc(libc::syscall(libc::SYS_setresuid, 0, 0, 0)).unwrap();
            sc(libc::syscall(
                libc::SYS_setgroups,
                groups.len(),
                groups.as_ptr(),
            ))
            .unwrap();
            sc(libc::syscall(libc::SYS_setresgid, gid, gid, gid)).unwrap();
            sc(libc::syscall(libc::SYS_setresuid, uid, uid, 0)).unwrap();
        }
    }
    fn fork(&self, f: &mut (dyn FnMut(&mut dyn Sys) + Send)) {
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                unshare_like_fork();
                f(&mut Host)
            });
            if let Err(p) = h.join() {
                resume_unwind(p)
            }
        });
    }
    fn thread(&self, f: &mut (dyn FnMut(&mut dyn Sys) + Send)) {
        std::thread::scope(|s| {
            let h = s.spawn(|| f(&mut Host));
            if let Err(p) = h.join() {
                resume_unwind(p)
            }
        });
    }
    fn linkat(&self, od: Fd, old: &[u8], nd: Fd, new: &[u8], flags: AtFlags) -> Result<()> {
        let (o, n) = (cpath(old), cpath(new));
        // SAFETY: valid NUL-terminated paths.
        sc(unsafe {
            libc::syscall(
                libc::SYS_linkat,
                od.0,
                o.as_ptr(),
                nd.0,
                n.as_ptr(),
                flags.bits() as libc::c_int,
            )
        })
        .map(drop)
    }
    fn renameat2(&self, od: Fd, old: &[u8], nd: Fd, new: &[u8], flags: RenameFlags) -> Result<()> {
        let (o, n) = (cpath(old), cpath(new));
        // SAFETY: valid NUL-terminated paths.
        sc(unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                od.0,
                o.as_ptr(),
                nd.0,
                n.as_ptr(),
                flags.bits() as libc::c_uint,
            )
        })
        .map(drop)
    }
    fn fchmod(&self, fd: Fd, mode: u32) -> Result<()> {
        // SAFETY: integer arguments.
        sc(unsafe { libc::syscall(libc::SYS_fchmod, fd.0, mode) }).map(drop)
    }
    fn fchmodat(&self, dirfd: Fd, path: &[u8], mode: u32, flags: AtFlags) -> Result<()> {
        let p = cpath(path);
        // SAFETY: valid NUL-terminated path.
        sc(unsafe {
            libc::syscall(
                libc::SYS_fchmodat2,
                dirfd.0,
                p.as_ptr(),
                mode,
                flags.bits() as libc::c_int,
            )
        })
        .map(drop)
    }
    fn fchown(&self, fd: Fd, uid: u32, gid: u32) -> Result<()> {
        // SAFETY: integer arguments.
        sc(unsafe { libc::syscall(libc::SYS_fchown, fd.0, uid, gid) }).map(drop)
    }
    fn fchownat(&self, dirfd: Fd, path: &[u8], uid: u32, gid: u32, flags: AtFlags) -> Result<()> {
        let p = cpath(path);
        // SAFETY: valid NUL-terminated path.
        sc(unsafe {
            libc::syscall(
                libc::SYS_fchownat,
                dirfd.0,
                p.as_ptr(),
                uid,
                gid,
                flags.bits() as libc::c_int,
            )
        })
        .map(drop)
    }
    fn truncate(&self, path: &[u8], len: i64) -> Result<()> {
        let p = cpath(path);
        // SAFETY: valid NUL-terminated path.
        sc(unsafe { libc::syscall(libc::SYS_truncate, p.as_ptr(), len) }).map(drop)
    }
    fn faccessat2(&self, dirfd: Fd, path: &[u8], mode: u32, flags: AtFlags) -> Result<()> {
        let p = cpath(path);
        // SAFETY: valid NUL-terminated path.
        sc(unsafe {
            libc::syscall(
                libc::SYS_faccessat2,
                dirfd.0,
                p.as_ptr(),
                mode,
                flags.bits() as libc::c_int,
            )
        })
        .map(drop)
    }
    fn set_cred_real(&mut self, ruid: u32, euid: u32, rgid: u32, egid: u32, groups: &[u32]) {
        // As `set_cred`; the saved uid stays 0 so the thread can become root again.
        // SAFETY: integer arguments and a valid group array.
        unsafe {
            sc(libc::syscall(libc::SYS_setresuid, 0, 0, 0)).unwrap();
            sc(libc::syscall(
                libc::SYS_setgroups,
                groups.len(),
                groups.as_ptr(),
            ))
            .unwrap();
            sc(libc::syscall(libc::SYS_setresgid, rgid, egid, egid)).unwrap();
            sc(libc::syscall(libc::SYS_setresuid, ruid, euid, 0)).unwrap();
        }
    }
    fn fsync(&self, fd: Fd) -> Result<()> {
        // SAFETY: integer argument.
        sc(unsafe { libc::syscall(libc::SYS_fsync, fd.0) }).map(drop)
    }
    fn fdatasync(&self, fd: Fd) -> Result<()> {
        // SAFETY: integer argument.
        sc(unsafe { libc::syscall(libc::SYS_fdatasync, fd.0) }).map(drop)
    }
    fn statfs(&self, path: &[u8]) -> Result<StatFs> {
        openfam::host_statfs(path)
    }
    fn fstatfs(&self, fd: Fd) -> Result<StatFs> {
        openfam::host_fstatfs(fd)
    }
    fn statx(&self, dirfd: Fd, path: &[u8], flags: AtFlags, mask: u32) -> Result<Statx> {
        openfam::host_statx(dirfd, path, flags, mask)
    }
    fn openat2(&self, dirfd: Fd, path: &[u8], how: &OpenHow) -> Result<Fd> {
        // With RESOLVE_* Linux answers EAGAIN when any rename or mount anywhere in the
        // system raced the walk (the global rename_lock/mount_lock seqcounts), or when
        // RESOLVE_CACHED found something uncached; openat2(2) says to retry. Other tests
        // mount and rename in parallel, so retry a while before taking EAGAIN as the answer
        // (an EAGAIN that is the real answer, e.g. RESOLVE_CACHED with O_CREAT, stays).
        let mut r = openfam::host_openat2(dirfd, path, how);
        for _ in 0..200 {
            if how.resolve == 0 || r != Err(Errno::EAGAIN) {
                break;
            }
            std::thread::yield_now();
            r = openfam::host_openat2(dirfd, path, how);
        }
        r
    }
    fn chroot(&self, path: &[u8]) -> Result<()> {
        let p = cpath(path);
        // SAFETY: valid path; changes this sandbox thread's private fs context.
        sc(unsafe { libc::syscall(libc::SYS_chroot, p.as_ptr()) }).map(drop)
    }
    fn mknodat(&self, dirfd: Fd, path: &[u8], mode: u32, dev: u64) -> Result<()> {
        let p = cpath(path);
        // As glibc's mknodat: the system call takes 32 bits of `dev`.
        let dev = u32::try_from(dev).map_err(|_| Errno::EINVAL)?;
        // SAFETY: valid path, integer arguments.
        sc(unsafe { libc::syscall(libc::SYS_mknodat, dirfd.0, p.as_ptr(), mode, dev) }).map(drop)
    }
    fn fallocate(&self, fd: Fd, mode: i32, off: i64, len: i64) -> Result<()> {
        // SAFETY: integer arguments.
        sc(unsafe { libc::syscall(libc::SYS_fallocate, fd.0, mode, off, len) }).map(drop)
    }
    fn xattr_get(&self, t: XTarget<'_>, name: &[u8], buf: &mut [u8]) -> Result<usize> {
        xattrfam::host_get(t, name, buf)
    }
    fn xattr_set(&self, t: XTarget<'_>, name: &[u8], value: &[u8], flags: u32) -> Result<()> {
        xattrfam::host_set(t, name, value, flags)
    }
    fn xattr_list(&self, t: XTarget<'_>, buf: &mut [u8]) -> Result<usize> {
        xattrfam::host_list(t, buf)
    }
    fn xattr_remove(&self, t: XTarget<'_>, name: &[u8]) -> Result<()> {
        xattrfam::host_remove(t, name)
    }
    fn mount_new(&self, target: &[u8], flags: MountFlags) -> Result<()> {
        mountfam::host_mount_tmpfs(target, flags)
    }
    fn mount_bind(&self, source: &[u8], target: &[u8], flags: MountFlags) -> Result<()> {
        mountfam::host_mount_bind(source, target, flags)
    }
    fn mount_setflags(&self, target: &[u8], flags: MountFlags) -> Result<()> {
        mountfam::host_mount_setflags(target, flags)
    }
    fn umount2(&self, target: &[u8], flags: UmountFlags) -> Result<()> {
        mountfam::host_umount2(target, flags)
    }
    fn mountinfo(&self) -> Result<Vec<Mnt>> {
        mountfam::host_mountinfo()
    }
    fn exec_check(&self, path: &[u8]) -> Result<()> {
        mountfam::host_exec_check(path)
    }
}

/// A host directory for one run, and the tmpfs options to mount on it. The tmpfs is mounted
/// by the run's thread inside a mount namespace of its own (`enter_sandbox`), so it goes
/// away with that thread even when the test process is killed: nothing is ever mounted in
/// the host's namespace. Without the mount (no CAP_SYS_ADMIN) the bare directory is used.
struct Sandbox {
    dir: tempfile::TempDir,
    /// tmpfs mount data, e.g. `mode=1777,size=65536`.
    data: CString,
    /// Whether the run needs the tmpfs (a root mode or limits were asked for).
    required: bool,
}

impl Sandbox {
    /// `root_mode`: the tmpfs `mode=` option (the root directory's permission bits).
    fn new(root_mode: Option<u32>) -> Sandbox {
        Sandbox::with_data(root_mode, "")
    }

    /// As [`Sandbox::new`], with `extra` tmpfs options (e.g. `",size=65536"`); those need
    /// the mount, like a root mode.
    fn with_data(root_mode: Option<u32>, extra: &str) -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix("uvfs-posix-")
            .tempdir()
            .expect("tempdir");
        let data = cpath(format!("mode={:o}{extra}", root_mode.unwrap_or(0o1777)).as_bytes());
        Sandbox {
            dir,
            data,
            required: root_mode.is_some() || !extra.is_empty(),
        }
    }
}

/// Whether the host side can run: root (for chroot and mount) and not disabled.
pub fn host_available() -> bool {
    static AVAIL: OnceLock<bool> = OnceLock::new();
    *AVAIL.get_or_init(|| {
        // SAFETY: no arguments.
        let root = unsafe { libc::geteuid() } == 0;
        let off = std::env::var_os("UVFS_NO_HOST").is_some_and(|v| v != "0");
        if !root && !off {
            eprintln!("note: not root: posix tests check uvfs against written expectations only");
        }
        if !root || off {
            return false;
        }
        // Comparing with anything but a real tmpfs (a plain directory on ext4 or overlayfs
        // has other sizes, block counts and times) would report false divergences: without
        // a tmpfs in a private mount namespace, check uvfs against expectations only.
        let tmpfs = can_mount_private_tmpfs();
        if !tmpfs {
            eprintln!(
                "note: cannot mount a tmpfs in a private mount namespace (CAP_SYS_ADMIN?): \
                 posix tests check uvfs against written expectations only"
            );
        }
        tmpfs
    })
}

/// Whether a thread can unshare a mount namespace and mount a tmpfs in it (what
/// `enter_sandbox` does), tried once on a scratch thread.
fn can_mount_private_tmpfs() -> bool {
    let Ok(dir) = tempfile::Builder::new().prefix("uvfs-probe-").tempdir() else {
        return false;
    };
    let p = cpath(dir.path().as_os_str().as_encoded_bytes());
    std::thread::spawn(move || mount_private_tmpfs(&p, c"mode=1777"))
        .join()
        .unwrap_or(false)
}

/// On a scratch thread about to end: makes its fs context and mount namespace private and
/// mounts a tmpfs with options `data` at `path` in it; whether that worked.
fn mount_private_tmpfs(path: &std::ffi::CStr, data: &std::ffi::CStr) -> bool {
    // SAFETY: plain system calls with valid NUL-terminated strings, on the calling
    // thread's own context (its fs context and mount namespace become private copies;
    // the caller is a scratch thread that ends right after).
    unsafe {
        libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS) == 0
            && libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
            && libc::mount(
                c"uvfs-tmpfs".as_ptr(),
                path.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                data.as_ptr().cast(),
            ) == 0
    }
}

fn panic_msg(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "non-string panic".into())
}

/// Runs `f` on a fresh uvfs tmpfs and init task.
pub fn on_uvfs<T>(f: &dyn Fn(&mut dyn Sys) -> T) -> T {
    f(&mut Uvfs::new())
}

/// Runs `f` on a fresh hostfs over a fresh host tmpfs (`root_mode`, `extra` as
/// [`Uvfs::hostfs`]); `None` when hostfs runs are off or the running test (or `case`) is in
/// [`HOSTFS_OPT_OUT`]. A panic in `f` is reported as hostfs's.
pub fn on_hostfs_data<T>(
    case: Option<&str>,
    root_mode: Option<u32>,
    extra: &str,
    f: &dyn Fn(&mut dyn Sys) -> T,
) -> Option<T> {
    if !hostfs_enabled() || hostfs_opt_out(case).is_some() {
        return None;
    }
    let mut u = Uvfs::hostfs(root_mode, extra);
    match catch_unwind(AssertUnwindSafe(|| f(&mut u))) {
        Ok(v) => Some(v),
        Err(p) => panic!("on hostfs: {}", panic_msg(&*p)),
    }
}

/// Runs `f` through a fresh FUSE client (`root_mode`, `extra` as [`Uvfs::fuse_client`]);
/// `None` when FUSE client runs are off or the running test (or `case`) is in
/// [`FUSE_OPT_OUT`]. A panic in `f` is reported as the FUSE client's.
pub fn on_fuse_data<T>(
    case: Option<&str>,
    root_mode: Option<u32>,
    extra: &str,
    f: &dyn Fn(&mut dyn Sys) -> T,
) -> Option<T> {
    if !fuse_enabled() || fuse_opt_out(case).is_some() {
        return None;
    }
    #[cfg(feature = "fuse")]
    {
        let mut u = Uvfs::fuse_client(root_mode, extra);
        match catch_unwind(AssertUnwindSafe(|| f(&mut u))) {
            Ok(v) => Some(v),
            Err(p) => panic!("through the FUSE client: {}", panic_msg(&*p)),
        }
    }
    #[cfg(not(feature = "fuse"))]
    {
        let _ = (root_mode, extra, f);
        None
    }
}

/// A fresh uvfs tmpfs and, unless hostfs runs are off, a fresh hostfs (default options),
/// for uvfs-only tests (no Linux side) that hold on every file system.
pub fn each_fs() -> Vec<Uvfs> {
    let mut v = vec![Uvfs::new()];
    if hostfs_enabled() {
        v.push(Uvfs::hostfs(None, ""));
    }
    v
}

/// [`on_hostfs_data`] with the default root and options.
pub fn on_hostfs<T>(f: &dyn Fn(&mut dyn Sys) -> T) -> Option<T> {
    on_hostfs_data(None, None, "", f)
}

/// Runs `f` on a fresh host sandbox; `None` when the host side is unavailable.
pub fn on_host<T: Send>(f: &(dyn Fn(&mut dyn Sys) -> T + Sync)) -> Option<T> {
    on_host_with(None, f)
}

/// As [`on_host`] on a tmpfs whose root has permission bits `root_mode`.
pub fn on_host_with<T: Send>(
    root_mode: Option<u32>,
    f: &(dyn Fn(&mut dyn Sys) -> T + Sync),
) -> Option<T> {
    on_host_data(root_mode, "", f)
}

/// As [`on_host_with`], with `extra` tmpfs mount options.
pub fn on_host_data<T: Send>(
    root_mode: Option<u32>,
    extra: &str,
    f: &(dyn Fn(&mut dyn Sys) -> T + Sync),
) -> Option<T> {
    if !host_available() {
        return None;
    }
    let sb = Sandbox::with_data(root_mode, extra);
    let r = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("linux".into())
            .spawn_scoped(s, || {
                enter_sandbox(&sb);
                // Caught here: this thread has no stderr (descriptor 2 is closed).
                catch_unwind(AssertUnwindSafe(|| f(&mut Host)))
                    .map_err(|p| format!("on Linux: {}", panic_msg(&*p)))
            })
            .expect("spawn")
            .join()
            .expect("join")
    });
    drop(sb);
    match r {
        Ok(v) => Some(v),
        Err(m) => panic!("{m}"),
    }
}

/// Runs `f` on uvfs and on Linux and asserts the results are equal; returns uvfs's.
#[track_caller]
pub fn same<T, F>(f: F) -> T
where
    T: PartialEq + Debug + Send,
    F: Fn(&mut dyn Sys) -> T + Sync,
{
    same_each(None, f)
}

/// As [`same`], where Linux's FUSE client differs from a local file system by design: the
/// FUSE client must give `fuse_of` of Linux's result (the caller says where that rule was
/// measured).
#[track_caller]
pub fn same_fuse<T, F, G>(fuse_of: G, f: F) -> T
where
    T: PartialEq + Debug + Send,
    F: Fn(&mut dyn Sys) -> T + Sync,
    G: Fn(&T) -> T,
{
    same_each(Some(&fuse_of), f)
}

/// [`same`] and [`same_fuse`].
#[track_caller]
fn same_each<T, F>(fuse_of: Option<&dyn Fn(&T) -> T>, f: F) -> T
where
    T: PartialEq + Debug + Send,
    F: Fn(&mut dyn Sys) -> T + Sync,
{
    let u = on_uvfs(&f);
    let h = on_host(&f);
    if let Some(h) = &h {
        assert_eq!(&u, h, "uvfs (left) differs from Linux (right)");
    }
    let want = h.as_ref().unwrap_or(&u);
    if let Some(hf) = on_hostfs(&f) {
        assert_eq!(&hf, want, "hostfs (left) differs from Linux (right)");
    }
    if let Some(fc) = on_fuse_data(None, None, "", &f) {
        match fuse_of {
            Some(g) => assert_eq!(
                fc,
                g(want),
                "the FUSE client (left) differs from Linux's FUSE client (right)"
            ),
            None => assert_eq!(
                &fc, want,
                "the FUSE client (left) differs from Linux (right)"
            ),
        }
    }
    u
}

/// Runs `f` on uvfs and on Linux and asserts both return `want`.
#[track_caller]
pub fn expect<T, F>(want: T, f: F)
where
    T: PartialEq + Debug + Send,
    F: Fn(&mut dyn Sys) -> T + Sync,
{
    expect_each(want, None, f);
}

/// As [`expect`], where Linux's FUSE client differs from a local file system by design:
/// uvfs, Linux and hostfs give `want`, the FUSE client `fuse_want` (the test says where
/// that was measured: a kernel FUSE mount of libfuse's passthrough_ll, say).
#[track_caller]
pub fn expect_fuse<T, F>(want: T, fuse_want: T, f: F)
where
    T: PartialEq + Debug + Send,
    F: Fn(&mut dyn Sys) -> T + Sync,
{
    expect_each(want, Some(fuse_want), f);
}

/// [`expect`] and [`expect_fuse`]: the FUSE client must give `fuse_want`, or `want`.
#[track_caller]
fn expect_each<T, F>(want: T, fuse_want: Option<T>, f: F)
where
    T: PartialEq + Debug + Send,
    F: Fn(&mut dyn Sys) -> T + Sync,
{
    let u = on_uvfs(&f);
    if let Some(h) = on_host(&f) {
        assert_eq!(
            h, want,
            "the test's expectation (right) is not what Linux returns (left); uvfs gave {u:?}"
        );
    }
    assert_eq!(u, want, "uvfs (left) differs from Linux (right)");
    if let Some(hf) = on_hostfs(&f) {
        assert_eq!(hf, want, "hostfs (left) differs from Linux (right)");
    }
    if let Some(fc) = on_fuse_data(None, None, "", &f) {
        match &fuse_want {
            Some(fw) => assert_eq!(
                &fc, fw,
                "the FUSE client (left) differs from Linux's FUSE client (right)"
            ),
            None => assert_eq!(
                fc, want,
                "the FUSE client (left) differs from Linux (right)"
            ),
        }
    }
}

/// As [`expect`], on file systems whose root directory has permission bits `root_mode`
/// (e.g. `0o2777` for a set-group-ID root).
#[track_caller]
pub fn expect_root_mode<T, F>(root_mode: u32, want: T, f: F)
where
    T: PartialEq + Debug + Send,
    F: Fn(&mut dyn Sys) -> T + Sync,
{
    let u = f(&mut Uvfs::with_root_mode(Some(root_mode)));
    if let Some(h) = on_host_with(Some(root_mode), &f) {
        assert_eq!(
            h, want,
            "the test's expectation (right) is not what Linux returns (left); uvfs gave {u:?}"
        );
    }
    assert_eq!(u, want, "uvfs (left) differs from Linux (right)");
    if let Some(hf) = on_hostfs_data(None, Some(root_mode), "", &f) {
        assert_eq!(hf, want, "hostfs (left) differs from Linux (right)");
    }
    if let Some(fc) = on_fuse_data(None, Some(root_mode), "", &f) {
        assert_eq!(
            fc, want,
            "the FUSE client (left) differs from Linux (right)"
        );
    }
}

/// As [`expect`], on file systems mounted with `size=size` (bytes) and `nr_inodes=inodes`
/// (0 = unlimited, as tmpfs).
#[track_caller]
pub fn expect_limits<T, F>(size: u64, inodes: u64, want: T, f: F)
where
    T: PartialEq + Debug + Send,
    F: Fn(&mut dyn Sys) -> T + Sync,
{
    let u = f(&mut Uvfs::with_options(uvfs::TmpfsOptions {
        size: Some(size),
        nr_inodes: Some(inodes),
        ..Default::default()
    }));
    let extra = format!(",size={size},nr_inodes={inodes}");
    if let Some(h) = on_host_data(None, &extra, &f) {
        assert_eq!(
            h, want,
            "the test's expectation (right) is not what Linux returns (left); uvfs gave {u:?}"
        );
    }
    assert_eq!(u, want, "uvfs (left) differs from Linux (right)");
    if let Some(hf) = on_hostfs_data(None, None, &extra, &f) {
        assert_eq!(hf, want, "hostfs (left) differs from Linux (right)");
    }
    if let Some(fc) = on_fuse_data(None, None, &extra, &f) {
        assert_eq!(
            fc, want,
            "the FUSE client (left) differs from Linux (right)"
        );
    }
}

/// One row of a [`table`]: a name, the expected (Linux) result, the operation.
pub type Case<'a, T> = (&'a str, T, fn(&mut dyn Sys) -> T);

/// A table of named cases, each expected to give `want` on both sides.
#[track_caller]
pub fn table<T>(cases: &[Case<'_, T>])
where
    T: PartialEq + Debug + Send + Sync + Clone,
{
    let mut failures = Vec::new();
    for (name, want, f) in cases {
        let u = on_uvfs(f);
        let h = on_host(f);
        if let Some(h) = &h {
            if h != want {
                failures.push(format!(
                    "{name}: expectation {want:?} but Linux gives {h:?}"
                ));
                continue;
            }
        }
        if &u != want {
            failures.push(format!("{name}: uvfs gives {u:?}, Linux {want:?}"));
        }
        if let Some(hf) = on_hostfs_data(Some(name), None, "", f) {
            if &hf != want {
                failures.push(format!("{name}: hostfs gives {hf:?}, Linux {want:?}"));
            }
        }
        if let Some(fc) = on_fuse_data(Some(name), None, "", f) {
            if &fc != want {
                failures.push(format!(
                    "{name}: the FUSE client gives {fc:?}, Linux {want:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// helpers over `dyn Sys`

/// The comparable part of a `Stat`: no inode or device numbers, no times.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    pub mode: u32,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
    pub size: i64,
    pub blocks: i64,
}

pub fn shape(s: Stat) -> Shape {
    Shape {
        mode: s.st_mode,
        nlink: s.st_nlink,
        uid: s.st_uid,
        gid: s.st_gid,
        size: s.st_size,
        blocks: s.st_blocks,
    }
}

/// A time in 2001, before anything a test creates.
pub const T2001: Timespec = Timespec::new(1_000_000_000, 123_456_789);
/// A time in 2002.
pub const T2002: Timespec = Timespec::new(1_030_000_000, 5);
/// A time in 2100, after anything a test creates.
pub const T2100: Timespec = Timespec::new(4_102_444_800, 999_999_999);

impl dyn Sys + '_ {
    /// `open(path, flags, mode)`.
    pub fn open(&self, path: &[u8], flags: OpenFlags, mode: u32) -> Result<Fd> {
        self.openat(CWD, path, flags, mode)
    }

    /// Creates (or truncates) regular file `path` holding `data`.
    pub fn mkfile(&self, path: &[u8], data: &[u8]) {
        let fd = self
            .open(path, CREAT | WO | OpenFlags::TRUNC, 0o644)
            .unwrap_or_else(|e| panic!("{}: create {:?}: {e:?}", self.kind(), show(path)));
        assert_eq!(self.write(fd, data).unwrap(), data.len());
        self.close(fd).unwrap();
    }

    /// `mkdir(path, 0o755)`, panicking on failure.
    pub fn mkdir(&self, path: &[u8]) {
        self.mkdirat(CWD, path, 0o755)
            .unwrap_or_else(|e| panic!("{}: mkdir {:?}: {e:?}", self.kind(), show(path)));
    }

    /// `symlink(target, path)`, panicking on failure.
    pub fn symlink(&self, target: &[u8], path: &[u8]) {
        self.symlinkat(target, CWD, path)
            .unwrap_or_else(|e| panic!("{}: symlink {:?}: {e:?}", self.kind(), show(path)));
    }

    /// `stat(path)`.
    pub fn stat(&self, path: &[u8]) -> Result<Stat> {
        self.fstatat(CWD, path, NOAT)
    }

    /// `lstat(path)`.
    pub fn lstat(&self, path: &[u8]) -> Result<Stat> {
        self.fstatat(CWD, path, AtFlags::SYMLINK_NOFOLLOW)
    }

    /// The shape of `stat(path)`.
    pub fn shape_of(&self, path: &[u8]) -> Result<Shape> {
        self.stat(path).map(shape)
    }

    /// Whether `path` exists (without following a final symlink).
    pub fn exists(&self, path: &[u8]) -> bool {
        self.lstat(path).is_ok()
    }

    /// The whole contents of `path`.
    pub fn read_file(&self, path: &[u8]) -> Result<Vec<u8>> {
        let fd = self.open(path, RO, 0)?;
        let out = self.read_to_end(fd);
        self.close(fd).unwrap();
        out
    }

    /// Reads `fd` to end of file.
    pub fn read_to_end(&self, fd: Fd) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 1000];
        loop {
            let n = self.read(fd, &mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    /// The target of symlink `path`.
    pub fn readlink(&self, path: &[u8]) -> Result<Vec<u8>> {
        let mut buf = [0u8; 5000];
        let n = self.readlinkat(CWD, path, &mut buf)?;
        Ok(buf[..n].to_vec())
    }

    /// Names in directory `fd` from its position on (`.` and `..` included), each with its
    /// `d_type`, read with a buffer of `bufsize` bytes.
    pub fn list_fd(&self, fd: Fd, bufsize: usize) -> Result<Vec<(String, u8)>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; bufsize];
        loop {
            let n = self.getdents64(fd, &mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            for e in uvfs::parse_dirents(&buf[..n]) {
                out.push((String::from_utf8(e.name).unwrap(), e.d_type));
            }
        }
    }

    /// Sorted names in directory `path`, without `.` and `..`.
    pub fn ls(&self, path: &[u8]) -> Result<Vec<String>> {
        let fd = self.open(path, RO | OpenFlags::DIRECTORY, 0)?;
        let l = self.list_fd(fd, 4096);
        self.close(fd).unwrap();
        let mut v: Vec<String> = l?
            .into_iter()
            .map(|(n, _)| n)
            .filter(|n| n != "." && n != "..")
            .collect();
        v.sort();
        Ok(v)
    }

    /// Sets atime and mtime of `path` explicitly.
    pub fn set_times(&self, path: &[u8], atime: Timespec, mtime: Timespec) {
        self.utimensat(CWD, path, Some(&[atime, mtime]), NOAT)
            .unwrap_or_else(|e| panic!("{}: utimensat {:?}: {e:?}", self.kind(), show(path)));
    }
}

/// `Ok(v)` as a `uvfs::Result` (for expectations whose error type is otherwise unknown).
pub fn ok<T>(v: T) -> Result<T> {
    Ok(v)
}

/// A path for messages.
pub fn show(p: &[u8]) -> String {
    String::from_utf8_lossy(p).into_owned()
}

/// `n` bytes of `c` (for long names and paths).
pub fn name(c: u8, n: usize) -> Vec<u8> {
    vec![c; n]
}

/// Makes `/l0 -> first`, `/l1 -> l0`, ... `/l{n-1}`: a chain of `n` symlinks ending at
/// `first` (which the caller creates).
pub fn symlink_chain(s: &dyn Sys, first: &str, n: usize) {
    for i in 0..n {
        let t = if i == 0 {
            first.to_string()
        } else {
            format!("l{}", i - 1)
        };
        s.symlink(t.as_bytes(), format!("/l{i}").as_bytes());
    }
}
