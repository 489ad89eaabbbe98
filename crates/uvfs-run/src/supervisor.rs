//! The supervisor: starts the program under the filter and answers its notified calls from
//! uvfs tasks, one per process of the program.
//!
//! One serving thread per CPU receives notifications; a call holds its process's lock until
//! it is answered, so one process's calls are answered one at a time (a uvfs descriptor is
//! in the process's uvfs table before the kernel descriptor of the same number can be used
//! by another thread of the program) and different processes' calls in parallel. Lock
//! order: see [`Sup`]. Invariant: every descriptor in a
//! process's uvfs table has a kernel descriptor of the same number (its placeholder or host
//! file); descriptors uvfs does not hold are the program's own (pipes, sockets, the
//! terminal, host devices) and their calls run natively.
//!
//! File locks (`fcntl` record locks, `flock`) are uvfs's (crates/uvfs/src/locks.rs). A
//! request that must sleep is answered later by a waiter thread of its own, never by a
//! serving thread (see `Waits`); a watchdog ends such waits when the caller dies or a
//! signal it catches comes (`ERESTARTSYS`: `EINTR` or a restart, as Linux's), and drops
//! exited processes (their classic locks go with their tables) while anyone waits.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rustix::net::{AddressFamily, SocketAddrUnix};

use uvfs::{
    AtFlags, Errno, Fcntl, Fd, Flock, Interrupter, LockCmd, MountFlags, OpenFlags, RenameFlags,
    Task, Timespec,
};

use crate::creds::{self, ThreadCreds};
use crate::sys::{self, Answer, Notif};
use crate::view::View;

/// One line on standard error; a closed or full stderr loses the line, never the
/// supervisor (`eprintln!` panics on a write error, e.g. a reader gone from a pipe).
macro_rules! log {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// The most bytes one `read`/`write` moves through the supervisor's buffer at a time.
const CHUNK: usize = 1 << 20;
/// `PATH_MAX` (the NUL included).
const PATH_LIMIT: usize = 4096;
/// `XATTR_SIZE_MAX`: the largest value.
const XATTR_SIZE_MAX: usize = 65536;
/// `XATTR_LIST_MAX`: the largest name list.
const XATTR_LIST_MAX: usize = 65536;
/// `TASK_SIZE_MAX` of x86_64 with 4-level page tables: the end of user addresses.
const TASK_SIZE: u64 = (1 << 47) - 4096;
/// `MAX_RW_COUNT`: the most one read or write moves (`INT_MAX` rounded down to a page).
const MAX_RW_COUNT: u64 = 0x7fff_f000;
/// `IOV_MAX`.
const IOV_MAX: u64 = 1024;
/// `PIDFD_THREAD` (= `O_EXCL`): a pidfd of one thread.
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;
/// uvfs's `NR_OPEN`: the uvfs tables follow the kernel's numbers, whose limit is the
/// program's `RLIMIT_NOFILE`, so the uvfs limit is the most it may be.
const NR_OPEN: u32 = 1024 * 1024;

/// The calls the filter notifies.
/// The `ioctl` requests the filter notifies (every other ioctl runs natively): those that
/// read or change a file's inode attributes or its file system given only ownership or a
/// read-only descriptor (include/uapi/linux/fs.h, fsverity.h), which on the host
/// descriptor uvfs installs for a file of a read-only bind would change the host's file
/// (found by a trial: `chattr +A` through a read-only bind). See [`ATTR_IOCTL_READS`] for
/// how they are answered. (Their 32-bit `FS_IOC32_*` forms cannot arrive: the filter
/// kills other architectures.)
const NOTIFIED_IOCTLS: [u32; 8] = [
    FS_IOC_GETFLAGS,
    0x4008_6602, // FS_IOC_SETFLAGS
    FS_IOC_FSGETXATTR,
    0x401c_5820, // FS_IOC_FSSETXATTR
    FS_IOC_GETVERSION,
    0x4008_7602, // FS_IOC_SETVERSION
    0x4080_6685, // FS_IOC_ENABLE_VERITY
    0x4100_9432, // FS_IOC_SETFSLABEL
];

/// `FS_IOC_GETFLAGS`.
const FS_IOC_GETFLAGS: u32 = 0x8008_6601;
/// `FS_IOC_FSGETXATTR`.
const FS_IOC_FSGETXATTR: u32 = 0x801c_581f;
/// `FS_IOC_GETVERSION`.
const FS_IOC_GETVERSION: u32 = 0x8008_7601;

/// The notified ioctls that only read. On a uvfs descriptor of a file on a host bind
/// (whose kernel descriptor is the host file) these run natively, as do the others on a
/// read-write bind; the others are `EROFS` on a read-only bind (Linux's
/// `mnt_want_write_file`). On a file only uvfs holds, all are `ENOTTY` (uvfs keeps no
/// such attributes; Linux's answer for a file system without them), with one line.
const ATTR_IOCTL_READS: [u32; 3] = [FS_IOC_GETFLAGS, FS_IOC_FSGETXATTR, FS_IOC_GETVERSION];

fn notified() -> Vec<u32> {
    use libc::*;
    [
        SYS_open,
        SYS_openat,
        SYS_creat,
        SYS_openat2,
        SYS_stat,
        SYS_lstat,
        SYS_newfstatat,
        SYS_statx,
        SYS_access,
        SYS_faccessat,
        SYS_faccessat2,
        SYS_mkdir,
        SYS_mkdirat,
        SYS_rmdir,
        SYS_unlink,
        SYS_unlinkat,
        SYS_rename,
        SYS_renameat,
        SYS_renameat2,
        SYS_link,
        SYS_linkat,
        SYS_symlink,
        SYS_symlinkat,
        SYS_readlink,
        SYS_readlinkat,
        SYS_chdir,
        SYS_fchdir,
        SYS_getcwd,
        SYS_chroot,
        SYS_chmod,
        SYS_fchmod,
        SYS_fchmodat,
        452, // fchmodat2
        SYS_chown,
        SYS_lchown,
        SYS_fchown,
        SYS_fchownat,
        SYS_utimensat,
        SYS_utime,
        SYS_utimes,
        SYS_futimesat,
        SYS_truncate,
        SYS_ftruncate,
        SYS_mknod,
        SYS_mknodat,
        SYS_statfs,
        SYS_fstatfs,
        SYS_execve,
        SYS_execveat,
        SYS_read,
        SYS_write,
        SYS_pread64,
        SYS_pwrite64,
        SYS_readv,
        SYS_writev,
        SYS_preadv,
        SYS_pwritev,
        SYS_preadv2,
        SYS_pwritev2,
        SYS_lseek,
        SYS_getdents64,
        SYS_getdents,
        SYS_fstat,
        SYS_fcntl,
        SYS_dup,
        SYS_dup2,
        SYS_dup3,
        SYS_close,
        SYS_close_range,
        SYS_fallocate,
        SYS_fsync,
        SYS_fdatasync,
        SYS_flock,
        SYS_mmap,
        SYS_sendfile,
        SYS_copy_file_range,
        SYS_splice,
        SYS_tee,
        SYS_umask,
        SYS_clone,
        SYS_clone3,
        SYS_fork,
        SYS_vfork,
        // Only so that a failed exec's rewritten path is put back before a vfork parent
        // resumes (see `settle_exec`); answered CONTINUE.
        SYS_exit_group,
        SYS_setxattr,
        SYS_lsetxattr,
        SYS_fsetxattr,
        SYS_getxattr,
        SYS_lgetxattr,
        SYS_fgetxattr,
        SYS_listxattr,
        SYS_llistxattr,
        SYS_flistxattr,
        SYS_removexattr,
        SYS_lremovexattr,
        SYS_fremovexattr,
        SYS_inotify_add_watch,
        SYS_name_to_handle_at,
        // A file handle opens a host file by inode number, past every bind.
        SYS_open_by_handle_at,
        SYS_fanotify_mark,
        SYS_uselib,
        SYS_acct,
        SYS_swapon,
        SYS_quotactl,
        // Paths and files reached another way: the *xattrat calls and file_getattr/
        // file_setattr (Linux 6.13-6.17), io_uring (its requests would open host files
        // behind the filter's back), mounts, Unix sockets bound or connected by path.
        463,
        464,
        465,
        466,
        467,
        468,
        469,
        SYS_io_uring_setup,
        SYS_mount,
        SYS_umount2,
        SYS_pivot_root,
        SYS_open_tree,
        SYS_move_mount,
        SYS_fsopen,
        SYS_fsconfig,
        SYS_fsmount,
        SYS_fspick,
        SYS_mount_setattr,
        SYS_bind,
        SYS_connect,
        SYS_unshare,
    ]
    .iter()
    // Last: the filter tests these in order, and they are rare.
    .chain(&creds::CRED_CALLS)
    .map(|&n| n as u32)
    .collect()
}

/// One process of the program.
struct Proc {
    /// Its uvfs task (descriptor table, working directory, root, umask, credentials).
    task: Task,
    /// The credentials of the threads `task` serves, and whose it carries now (see
    /// `creds`).
    creds: ThreadCreds,
    /// `pidfd_open` of the process: exit detection, `pidfd_getfd` for `dup`.
    pidfd: OwnedFd,
    /// The highest descriptor number uvfs has installed (bounds the scans).
    max_fd: i32,
    /// An `execve` was let through, by this thread; whether it succeeded is read once the
    /// exec is over (see [`ExecPending`]).
    exec_pending: Option<ExecPending>,
    /// The file the process runs when uvfs gave it (a file only uvfs holds, or a host file
    /// the kernel reaches another way): an `open_exec` file, which denies writing while it
    /// is open (`ETXTBSY`, Linux's `mm->exe_file`). Replaced at the next exec, inherited at
    /// `fork`, gone with the process.
    exe: Option<uvfs::OpenFile>,
    /// For an `execve` let through, whose file is `exe` from then on (so that writers
    /// are refused from the moment the program may run): the previous `exe`, and the
    /// descriptor the new file was installed at in the program (close-on-exec, still open
    /// if the exec failed). At the next call the previous `exe` is dropped, or put back if
    /// the exec failed.
    exe_pending: Option<(Option<uvfs::OpenFile>, i32)>,
    /// Bytes an `execve` overwrote in the program's memory (its path string, rewritten to
    /// `/dev/fd/K`): `(address, original bytes, K)`, put back at the next call if the
    /// exec failed (see `settle_exec`).
    restore: Option<(u64, Vec<u8>, i32)>,
}

/// An `execve` let through and not settled yet: the thread that makes it.
///
/// The exec is over (failed, or the new program runs) at that thread's next notified call,
/// or once that thread is gone: a successful exec by a thread other than the leader ends
/// every other thread and gives the caller the thread-group id (Linux's `de_thread`:
/// `exchange_tids`, then `release_task` of the old leader, which now holds the caller's old
/// id), so the caller's old id has no thread from then on. Until then the kernel may not
/// have read the path string yet (the call runs after the answer, `getname` first), so
/// another thread's call must not settle it: that put the original string back before the
/// kernel read it, and the exec ran the host file at that path or failed with `ENOENT`.
struct ExecPending {
    /// The calling thread's id when it made the call.
    tid: i32,
    /// That thread's pidfd (`PIDFD_THREAD`), `None` on kernels before 6.9 (then its
    /// `/proc/TGID/task/TID` entry tells).
    pidfd: Option<OwnedFd>,
}

impl ExecPending {
    /// The exec of thread `n.pid`, which is blocked in it.
    fn of(n: &Notif) -> ExecPending {
        ExecPending {
            tid: n.pid,
            pidfd: sys::pidfd_open(n.pid, PIDFD_THREAD).ok(),
        }
    }

    /// Whether the exec is over, seen from a call of thread `caller` of process `tgid`:
    /// the exec's own thread is calling again, or it is gone.
    fn done(&self, tgid: i32, caller: i32) -> bool {
        caller == self.tid || !thread_alive(tgid, self.tid, &self.pidfd)
    }

    /// Whether the exec's thread may still be in its `execve`/`execveat`: its
    /// `/proc/TGID/task/TID/syscall` names one of them, or cannot tell (`running`: on a
    /// CPU, possibly inside the exec; unreadable). `false` when it is blocked in another
    /// call or in none (`-1`): then the exec failed (a good one leaves no other caller of
    /// this process, or gives the thread the group's id, see `done`).
    ///
    /// "Running" is looked at again, every millisecond for up to [`EXEC_RUNNING_WAIT`]: a
    /// thread whose exec failed is usually on its way to its next call, and on a loaded
    /// host it may sit runnable (read as `running`) for a while; refusing at the first
    /// look made another thread's exec fail with `EAGAIN` where Linux runs it (CI saw it
    /// under load: `exec_after_another_threads_failed_exec`).
    fn in_exec(&self, tgid: i32) -> bool {
        let path = format!("/proc/{tgid}/task/{}/syscall", self.tid);
        let start = std::time::Instant::now();
        loop {
            let Ok(s) = std::fs::read_to_string(&path) else {
                // Gone meanwhile (its exec succeeded, or it exited): not in an exec.
                return !matches!(std::fs::metadata(&path), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
            };
            match s.split_whitespace().next().map(str::parse::<i64>) {
                Some(Ok(nr)) => return nr == libc::SYS_execve || nr == libc::SYS_execveat,
                _ if start.elapsed() >= EXEC_RUNNING_WAIT => return true,
                _ => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
    }
}

/// How long [`ExecPending::in_exec`] looks again at a thread read as `running` before it
/// takes it for one still in its exec: 200 ms.
const EXEC_RUNNING_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// A table forked at a `clone` notification, waiting for the child's first call.
///
/// The child is known only by its pid, which the kernel allocates after the notification
/// is answered: it comes after `last_pid`, the namespace's last allocated pid read at the
/// notification, and before the `last_pid` of any later clone of the same thread, in the
/// allocator's cyclic order (see [`pids_after`]). A child takes the entry of its parent
/// whose `last_pid` comes last before its own pid (then any parent's: a child whose parent
/// exited has been reparented); see [`pick_clone`].
struct PendingFork {
    /// The cloning process.
    parent: i32,
    /// `/proc/sys/kernel/ns_last_pid` at the notification.
    last_pid: i32,
    /// The child's table (forked, or shared for `CLONE_FILES`) and working directory.
    task: Task,
    /// The parent's highest descriptor number: the child's table holds the same ones.
    max_fd: i32,
    /// The parent's exec file (`Proc::exe`): the child runs the same program.
    exe: Option<uvfs::OpenFile>,
    /// When the clone was seen: entries of children that never made a call go after
    /// `PENDING_TTL`.
    when: std::time::Instant,
}

/// Linux's `RESERVED_PIDS`: where the pid allocator starts again after `pid_max`.
const RESERVED_PIDS: i32 = 300;

/// Linux's `PID_MAX_LIMIT` on 64-bit: the largest `pid_max` (4 Mi), assumed when
/// `/proc/sys/kernel/pid_max` cannot be read.
const PID_MAX_LIMIT: i32 = 4 * 1024 * 1024;

/// How many pids after `last_pid` the kernel's allocator reaches `tid`, counting as it
/// allocates (`alloc_pid`: the next free number after the last one, up to `pid_max - 1`,
/// then again from `RESERVED_PIDS`): `Some(n)`, `n >= 1`, when `tid` can have been
/// allocated after `last_pid` was read; `None` when it is `last_pid` itself or was
/// allocated before it (more than half a cycle on: a pid is not reused that soon).
///
/// Bug this replaces: `last_pid < tid`, which after the counter wrapped (pid_max 32768
/// here: every 32 Ki forks) matched no clone for a child given a pid under its parent's
/// `last_pid`, whose file calls then all failed with `ENOSYS` ("no clone of a known
/// process made it", seen after a few fork-heavy runs).
fn pids_after(last_pid: i32, tid: i32, pid_max: i32) -> Option<i32> {
    let n = if tid > last_pid {
        tid - last_pid
    } else if tid >= RESERVED_PIDS {
        (pid_max - last_pid) + (tid - RESERVED_PIDS)
    } else {
        return None;
    };
    (n >= 1 && n <= (pid_max - RESERVED_PIDS) / 2).then_some(n)
}

/// The pending clone that made the child `tid` of parent `ppid`, among `entries` (each a
/// clone's `(parent, last_pid)`, in [`PendingFork`] order): its parent's whose `last_pid`
/// comes last before `tid` ([`pids_after`] smallest), else any parent's so (the child was
/// reparented). Its index in `entries`, or `None`.
fn pick_clone(
    entries: impl Iterator<Item = (i32, i32)> + Clone,
    tid: i32,
    ppid: i32,
    pid_max: i32,
) -> Option<usize> {
    let pick = |same_parent: bool| {
        entries
            .clone()
            .enumerate()
            .filter(|(_, (parent, _))| !same_parent || *parent == ppid)
            .filter_map(|(i, (_, last))| pids_after(last, tid, pid_max).map(|n| (i, n)))
            .min_by_key(|&(_, n)| n)
            .map(|(i, _)| i)
    };
    pick(true).or_else(|| pick(false))
}

/// How long a clone's table waits for its child's first call.
const PENDING_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// The most clones waiting for their child (a failed clone leaves its entry; the oldest
/// goes first).
const MAX_PENDING: usize = 1024;

/// The supervisor's state, shared by its threads.
///
/// Lock order: `procs` -> `threads` -> one `Proc` -> `pending` -> `said`, and a `Proc`
/// -> `threads` (unshare): no holder of `procs` or `threads` waits for a `Proc` (`sweep`
/// only try-locks them). `Waits::sleeping` is a leaf. A call holds its process's `Proc`
/// lock from start to answer, so one process's calls are answered one at a time (the
/// descriptor-number invariant: a uvfs descriptor is in the uvfs table before the same
/// number can be used by another thread of the program) while other processes' calls are
/// answered in parallel; a lock request that must sleep is the exception: it is answered
/// later by a waiter thread, without the `Proc` lock (`Sup::defer_lock`).
struct Sup {
    listener: OwnedFd,
    /// Processes by thread-group id.
    procs: Mutex<HashMap<i32, Arc<Mutex<Proc>>>>,
    /// Threads that are not thread-group leaders, and any thread with a table of its own:
    /// tid -> (tgid, thread pidfd (`None` on kernels before 6.9, which have no
    /// `PIDFD_THREAD`), the thread's own table after `unshare(CLONE_FILES)`, else `None`:
    /// its process's).
    threads: Mutex<HashMap<i32, Thread>>,
    /// Tables forked at `clone` for children not seen yet, oldest first.
    pending: Mutex<VecDeque<PendingFork>>,
    /// Calls already reported as unsupported (one log line each).
    said: Mutex<HashSet<String>>,
    /// The kernel's working directory of every process of the program, a private host
    /// directory (0700, removed at the end, or by the next `uvfs run` after a SIGKILL: see
    /// [`ExecDir`]): a relative `execve` of a file the kernel
    /// cannot see at that path is made to resolve here, to a symlink of the same relative
    /// name pointing at `/proc/self/fd/EXEC_FD` (see `Sup::execve`). The processes' real
    /// working directories are uvfs's.
    execdir: std::path::PathBuf,
    /// Unix sockets the program bound to uvfs paths: the socket file's `(st_dev, st_ino)`
    /// in uvfs -> the host path (`execdir/sN`) the socket is really bound to (see
    /// `Sup::bind_unix`). Entries stay until the end (a later socket at a recycled inode
    /// number replaces its entry).
    sockets: Mutex<HashMap<(u64, u64), std::path::PathBuf>>,
    /// The next `N` of `execdir/sN`.
    next_socket: AtomicU64,
    /// `/proc/sys/kernel/pid_max` at the start: where the pid allocator wraps (see
    /// [`pids_after`]).
    pid_max: i32,
    /// Lock requests asleep in waiter threads (see [`Sup::defer_lock`]).
    waits: Arc<Waits>,
}

/// Lock requests (`F_SETLKW`, `F_OFD_SETLKW`, `flock` without `LOCK_NB`) that must sleep:
/// each sleeps in a waiter thread of its own, which answers its notification when the
/// lock is granted (or fails), so that the serving threads never sleep in a lock wait
/// (with one serving thread, a program waiting for its sibling's lock would stop every
/// process). The watchdog (in [`run`]) ends a wait whose caller is gone.
struct Waits {
    /// A duplicate of the listener, for the waiters' answers and the watchdog's checks.
    listener: OwnedFd,
    /// Notification id -> the calling thread's id and the interrupter of the waiter thread
    /// serving it.
    sleeping: Mutex<HashMap<u64, (i32, Interrupter)>>,
    /// Signalled when a wait is added to `sleeping` and at the run's end: the watchdog
    /// sleeps on it (with `sleeping`'s lock) while no request waits, rather than ticking.
    watched: Condvar,
}

/// `ERESTARTSYS` (kernel-internal, include/linux/errno.h): the answer to a lock wait a
/// signal interrupts (see [`Sup::watchdog`]). The kernel turns it, on the way back to the
/// program with the signal pending, into `EINTR` when the signal's handler lacks
/// `SA_RESTART`, else into a restart of the call; exactly what Linux's interruptible lock
/// wait returns. Never answered without a signal pending (the program would see 512).
const ERESTARTSYS: i32 = 512;

/// Whether thread `tid` has a signal pending that it catches and does not block, which
/// the kernel is sure to act on when the thread's call returns: one sent to the thread, or
/// one sent to its process when that has no other thread (otherwise another thread may
/// take it). From `/proc/TID/status` (`SigPnd`, `ShdPnd`, `SigBlk`, `SigCgt`, `Threads`).
fn signal_pending(tid: i32) -> bool {
    let Some(st) = proc_status(tid) else {
        return false;
    };
    let mask = |name: &str| {
        st.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let shared = if status_field(&st, "Threads:") == Some(1) {
        mask("ShdPnd:")
    } else {
        0
    };
    (mask("SigPnd:") | shared) & !mask("SigBlk:") & mask("SigCgt:") != 0
}

/// A lock waiter thread's stack: it runs one lock request (`fcntl_lock` or `flock`, whose
/// range resolution may ask the file system for the file's size), its answer and an undo;
/// a quarter of std's 2 MiB default leaves a margin for a file system's size call (a FUSE
/// request) while a program with many sleeping requests maps far less.
const WAITER_STACK: usize = 256 * 1024;

/// How often the watchdog looks at the sleeping lock requests: the delay with which a
/// waiting program's death or a signal to it ends its wait.
const WATCHDOG_TICK: Duration = Duration::from_millis(20);

/// A lock request a waiter thread makes (see [`Waits`]).
enum LockJob {
    /// `fcntl(fd, cmd, &fl)` (a `W` command).
    Posix(Fd, LockCmd, Flock),
    /// `flock(fd, op)`.
    Flock(Fd, i32),
}

impl LockJob {
    /// Makes the request on `t`, sleeping as long as it must.
    fn run(&self, t: &Task) -> Result<(), Errno> {
        match *self {
            LockJob::Posix(fd, cmd, mut fl) => t.fcntl_lock(fd, cmd, &mut fl),
            LockJob::Flock(fd, op) => t.flock(fd, op),
        }
    }

    /// Takes back a lock granted to a call that is gone (its thread was killed, so its
    /// process is going, and with it its locks; an OFD or `flock` lock may outlive it in
    /// a file shared with another process). The range (or the `flock` lock) is unlocked,
    /// which also drops what the caller held there before the call. On `held`, the file
    /// the call's descriptor named, not by the descriptor number, which another thread of
    /// the dying process may have closed and reused meanwhile (the unlock would then
    /// remove another file's OFD or `flock` lock, and leave this one).
    fn undo(&self, t: &Task, held: &uvfs::OpenFile) {
        let _ = match *self {
            LockJob::Posix(_, cmd, fl) => {
                let set = if cmd == LockCmd::OfdSetLkW {
                    LockCmd::OfdSetLk
                } else {
                    LockCmd::SetLk
                };
                t.unlock_file(held, set, Some(&fl))
            }
            LockJob::Flock(..) => t.unlock_file(held, LockCmd::SetLk, None),
        };
    }

    /// The descriptor the request names.
    fn fd(&self) -> Fd {
        match *self {
            LockJob::Posix(fd, ..) | LockJob::Flock(fd, _) => fd,
        }
    }
}

/// Where a thread's calls go: its thread group, the `Proc` that serves it, and its
/// credentials when it was seen for the first time.
type Placed = (i32, Arc<Mutex<Proc>>, Option<uvfs::Cred>);

/// A thread's entry in [`Sup::threads`]: its thread group, its pidfd, its own table.
type Thread = (i32, Option<OwnedFd>, Option<Arc<Mutex<Proc>>>);

/// Locks `m`; a panic of another supervisor thread (a bug) does not poison the rest.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The descriptor number a relative `execve` installs its file at: one number for every
/// process, so the symlinks in the exec directory read the same for all.
const EXEC_FD: i32 = 1023;

/// How deep below the exec directory the program's kernel working directory is
/// (`d/d/.../d`): the `..` components a relative `execve` may have.
const EXEC_DEPTH: usize = 8;

/// The exec directory (see `Sup::execdir`) and its lock: a descriptor of the directory
/// holding `flock(LOCK_EX)` on it, taken before its `d` chain is made. Dropped: the
/// directory is removed, then the lock let go. When `uvfs run` dies without that
/// (SIGKILL), the kernel drops the lock with the process, and the next `uvfs run`
/// removes the directory ([`remove_stale_execdirs`]).
struct ExecDir {
    /// `$TMPDIR/uvfs-run-PID-N`.
    path: std::path::PathBuf,
    /// The lock (close-on-exec: the program's exec closes the copy its fork made).
    _lock: OwnedFd,
}

impl Drop for ExecDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Makes the exec directory: `$TMPDIR/uvfs-run-PID-N`, mode 0700, locked (see
/// [`ExecDir`]), after removing the stale ones there ([`remove_stale_execdirs`]).
fn make_execdir() -> Result<ExecDir, String> {
    use std::os::unix::fs::DirBuilderExt;
    let tmp = std::env::temp_dir();
    remove_stale_execdirs(&tmp);
    for n in 0..100 {
        let d = tmp.join(format!("{EXECDIR_PREFIX}{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&d) {
            Ok(()) => {
                let msg = |e: io::Error| {
                    // Made but not locked: no `ExecDir` removes it.
                    let _ = std::fs::remove_dir(&d);
                    format!("uvfs run: {}: {e}", d.display())
                };
                let lock = rustix::fs::open(
                    &d,
                    rustix::fs::OFlags::RDONLY
                        | rustix::fs::OFlags::DIRECTORY
                        | rustix::fs::OFlags::NOFOLLOW
                        | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                )
                .map_err(|e| msg(e.into()))?;
                // Blocking: a `remove_stale_execdirs` of another `uvfs run` that opened
                // the new directory before this lock holds it for a moment and leaves it
                // (no `d` chain yet).
                rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
                    .map_err(|e| msg(e.into()))?;
                let mut cwd = d.clone();
                for _ in 0..EXEC_DEPTH {
                    cwd.push("d");
                }
                let dir = ExecDir {
                    path: d,
                    _lock: lock,
                };
                std::fs::create_dir_all(&cwd)
                    .map_err(|e| format!("uvfs run: {}: {e}", cwd.display()))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("uvfs run: {}: {e}", d.display())),
        }
    }
    Err("uvfs run: cannot make a temporary directory".to_owned())
}

/// The exec directories' names: `uvfs-run-PID-N`.
const EXECDIR_PREFIX: &str = "uvfs-run-";

/// Removes the exec directories in `tmp` that a `uvfs run` killed without its cleanup
/// (SIGKILL) left: each `uvfs-run-PID-N` directory (not a symlink) of this user whose lock
/// ([`ExecDir`]) nobody holds, whose `d` chain exists and whose PID has no process
/// (`kill(PID, 0)`: `ESRCH`). Races survived:
/// - its owner alive: its lock is held (`LOCK_NB` fails), whatever pid namespace it
///   runs in (the lock is the file's, not the pid's); an owner built before the lock
///   existed (no lock) still has its PID (same pid namespace);
/// - a directory being made (between its `mkdir` and its owner's `flock`): no `d` chain
///   yet, left alone, and its owner waits for the lock held here that moment;
/// - two `uvfs run`s cleaning at once: one holds the lock and removes the directory
///   before it lets the lock go; the other then finds it unlinked (no `d`) or gone;
/// - the name reused by a new `uvfs run` of the same pid: not while the old directory
///   exists (its `mkdir` fails and it takes the next N), so the name removed is the one
///   locked here.
///
/// Errors are ignored: a directory that cannot be read or removed stays, as before.
fn remove_stale_execdirs(tmp: &Path) {
    use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(EXECDIR_PREFIX))
            .and_then(|n| n.split_once('-'))
            .filter(|(pid, n)| {
                [pid, n]
                    .iter()
                    .all(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()))
            })
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
            .filter(|&pid| pid > 0)
        else {
            continue;
        };
        // SAFETY: kill with integer arguments; signal 0 sends nothing.
        if unsafe { libc::kill(pid, 0) } == 0 || sys::errno() != libc::ESRCH {
            continue;
        }
        let path = e.path();
        let Ok(fd) = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            continue;
        };
        if rustix::fs::fstat(&fd).map_or(true, |st| st.st_uid != me)
            || rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_err()
            || rustix::fs::statat(&fd, "d", AtFlags::SYMLINK_NOFOLLOW).is_err()
        {
            continue;
        }
        // `fd` (the lock) stays open until the directory is gone.
        let _ = std::fs::remove_dir_all(&path);
        drop(fd);
    }
}

/// Starts `argv` under the filter with the view's task and serves it until every process
/// of the program has exited; returns the first process's exit status.
pub(crate) fn run(view: &View, argv: &[OsString]) -> Result<i32, String> {
    let Some(prog) = argv.first() else {
        return Err("uvfs run: no program given (uvfs run -- CMD ARGS...)".to_owned());
    };
    let path = match find_program(&view.task, prog.as_bytes()) {
        Ok(p) => p,
        Err(msg) => {
            // As a shell reports a command it cannot find.
            log!("{msg}");
            return Ok(127);
        }
    };
    // Its credentials are the program's, read at its first call (see `creds`).
    let task = view.task.fork();
    let _ = task.setrlimit_nofile(NR_OPEN);
    // Everything the child needs, made before fork (no allocation after it).
    let cpath = CString::new(path).map_err(|_| "uvfs run: NUL in the program path")?;
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| "uvfs run: NUL in an argument")?;
    let mut cargv: Vec<*const libc::c_char> = cargs.iter().map(|a| a.as_ptr()).collect();
    cargv.push(std::ptr::null());
    let cenv: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let mut cenvp: Vec<*const libc::c_char> = cenv.iter().map(|a| a.as_ptr()).collect();
    cenvp.push(std::ptr::null());
    let prog_filter = sys::filter_program(&notified(), &NOTIFIED_IOCTLS);
    // Removed at every return from here on (dropped).
    let execdir = make_execdir()?;
    let kernel_cwd = (0..EXEC_DEPTH).fold(execdir.path.clone(), |d, _| d.join("d"));
    let cexecdir = CString::new(kernel_cwd.as_os_str().as_bytes())
        .map_err(|_| "uvfs run: NUL in the temporary directory's path")?;
    let (ours, theirs) = sys::seqpacket_pair().map_err(|e| format!("uvfs run: socketpair: {e}"))?;
    // SAFETY: fork; the child runs only async-signal-safe calls (`child`) and execve or
    // _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("uvfs run: fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: in the child of fork; every pointer was made before fork and is alive.
        unsafe {
            child(
                &prog_filter,
                theirs.as_raw_fd(),
                &cexecdir,
                &cpath,
                &cargv,
                &cenvp,
            )
        }
    }
    drop(theirs);
    let listener = match sys::recv_fd(ours.as_fd()) {
        Ok(fd) => fd,
        Err(e) => {
            let status = wait(pid);
            return Err(format!(
                "uvfs run: the program could not be put under the filter ({e}; status {status})"
            ));
        }
    };
    drop(ours);
    // The terminal's SIGINT and SIGQUIT are the program's to act on; the supervisor lives
    // until the program's processes have gone.
    // SAFETY: setting dispositions to SIG_IGN.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let pidfd = sys::pidfd_open(pid, 0).map_err(|e| format!("uvfs run: pidfd_open: {e}"))?;
    let waits_listener = listener
        .try_clone()
        .map_err(|e| format!("uvfs run: dup of the listener: {e}"))?;
    let mut task = task;
    // F_GETLK reports the program's pids.
    task.set_pid(pid);
    let sup = Sup {
        listener,
        procs: Mutex::new(HashMap::new()),
        threads: Mutex::new(HashMap::new()),
        pending: Mutex::new(VecDeque::new()),
        said: Mutex::new(HashSet::new()),
        execdir: execdir.path.clone(),
        sockets: Mutex::new(HashMap::new()),
        next_socket: AtomicU64::new(0),
        pid_max: std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(PID_MAX_LIMIT),
        waits: Arc::new(Waits {
            listener: waits_listener,
            sleeping: Mutex::new(HashMap::new()),
            watched: Condvar::new(),
        }),
    };
    lock(&sup.procs).insert(
        pid,
        Arc::new(Mutex::new(Proc {
            task,
            creds: ThreadCreds::default(),
            pidfd,
            max_fd: -1,
            exec_pending: None,
            exe: None,
            exe_pending: None,
            restore: None,
        })),
    );
    // Synchronous wake-ups (Linux 6.6): the notifying thread hands its CPU to the
    // supervisor and gets it back with the answer, instead of two cross-CPU wake-ups per
    // call. Older kernels refuse the flag (EINVAL): the plain way works there.
    let sync = sys::set_sync_wakeup(sup.listener.as_fd());
    // Serving threads: every one blocks in RECV, and all return when no process is left
    // under the filter (RECV's ENOENT with the listener hung up). Kernels before 6.6 (no
    // synchronous wake-ups either) do not wake a blocked RECV at the end: one thread there.
    // One per two CPUs by default: with synchronous wake-ups a call runs on its caller's
    // CPU, and on this project's 2-vCPU VM a second thread made one stream 30-50% slower
    // (dd bs=1: 12.6-13.5 us/byte with one, 16.8-20.3 with two) and two streams no faster
    // (27-34 us/byte each, either way). UVFS_RUN_THREADS=N sets it (1-64).
    let n = if sync {
        std::env::var("UVFS_RUN_THREADS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()) / 2)
            .clamp(1, 64)
    } else {
        1
    };
    // SIGTERM and SIGHUP sent to `uvfs run` are the program's: forwarded to each of its
    // processes (as timeout(1) and container runtimes do), the supervisor staying until
    // they are gone. Blocked here, before the serving threads start (they inherit the
    // mask); one thread takes them with sigtimedwait. The child was forked before: its
    // mask is the caller's.
    let sigs = sys::block_signals(&[libc::SIGTERM, libc::SIGHUP]);
    let done = AtomicBool::new(false);
    let r = std::thread::scope(|sc| {
        sc.spawn(|| {
            // Relaxed: a stop flag; the serving threads' results are read after join.
            while !done.load(Ordering::Relaxed) {
                if let Some(sig) = sys::wait_signal(&sigs, 200) {
                    let procs: Vec<(i32, Arc<Mutex<Proc>>)> = lock(&sup.procs)
                        .iter()
                        .map(|(&pid, p)| (pid, p.clone()))
                        .collect();
                    for (pid, p) in procs {
                        // Through its pidfd: a process that exited since the last sweep
                        // may have left its number to an unrelated one. Its lock is held
                        // briefly by `sweep`, and for as long as a call of it is served;
                        // waiting for such a call could wait for this very signal.
                        let mut held = None;
                        for _ in 0..100 {
                            match p.try_lock() {
                                Ok(g) => held = Some(g),
                                Err(std::sync::TryLockError::Poisoned(e)) => {
                                    held = Some(e.into_inner())
                                }
                                Err(std::sync::TryLockError::WouldBlock) => {
                                    std::thread::yield_now();
                                    continue;
                                }
                            }
                            break;
                        }
                        match held {
                            Some(g) => {
                                let _ = sys::pidfd_send_signal(g.pidfd.as_fd(), sig);
                            }
                            // Still serving a call of it: it was alive when the call
                            // came, and its number goes to another process only after
                            // its exit and its parent's wait (a window of that call's
                            // length, where before every exited number was one).
                            None => {
                                // SAFETY: kill with integer arguments.
                                unsafe { libc::kill(pid, sig) };
                            }
                        }
                    }
                }
            }
        });
        sc.spawn(|| sup.watchdog(&done));
        let hs: Vec<_> = (0..n).map(|_| sc.spawn(|| sup.serve())).collect();
        let rs: Vec<io::Result<()>> = hs
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("a supervisor thread panicked")))
            })
            .collect();
        // Relaxed: see the signal thread; the watchdog reads it under `sleeping`'s lock,
        // which we take after the store before waking it, so it sees it or is woken.
        done.store(true, Ordering::Relaxed);
        drop(lock(&sup.waits.sleeping));
        sup.waits.watched.notify_all();
        rs.into_iter().collect::<io::Result<()>>()
    });
    if let Err(e) = &r {
        // SAFETY: kill with integer arguments; the program must not outlive its supervisor
        // blocked on a listener nobody reads.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        log!("uvfs run: supervisor error: {e}");
    }
    drop(sup);
    drop(execdir);
    let status = wait(pid);
    r.map_err(|e| format!("uvfs run: {e}"))?;
    Ok(status)
}

/// The child between fork and execve: the filter, the listener sent to the parent, exec.
///
/// # Safety
/// Called in the child of `fork`; the pointers are valid NUL-terminated arrays.
unsafe fn child(
    prog: &[libc::sock_filter],
    sock: libc::c_int,
    execdir: &CString,
    path: &CString,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
) -> ! {
    // The program goes with `uvfs run` if it is killed (SIGKILL can't be forwarded): its
    // file calls would have no one to answer them.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    // The kernel's working directory: the exec directory (see `Sup::execdir`).
    // SAFETY: chdir of a NUL-terminated path made before fork.
    if unsafe { libc::chdir(execdir.as_ptr()) } != 0 {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(126) };
    }
    // SAFETY: the caller's contract: async-signal-safe raw syscalls only.
    let fd = match unsafe { sys::install_filter(prog) } {
        Ok(fd) => fd,
        // SAFETY: _exit is async-signal-safe.
        Err(_) => unsafe { libc::_exit(126) },
    };
    if sys::send_fd(sock, fd).is_err() {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(126) };
    }
    // SAFETY: closes, execve and write(2) of buffers made before fork; async-signal-safe.
    unsafe {
        libc::close(fd);
        libc::close(sock);
        libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        let e = sys::errno();
        // One line, as a shell says it, with write(2) only (no allocation after fork).
        let why: &[u8] = match e {
            libc::ENOENT => b": no such file\n",
            libc::EACCES => b": permission denied\n",
            libc::ENOEXEC => b": exec format error\n",
            _ => b": cannot execute\n",
        };
        let pre = b"uvfs run: cannot execute ";
        let p = path.as_bytes();
        libc::write(2, pre.as_ptr().cast(), pre.len());
        libc::write(2, p.as_ptr().cast(), p.len());
        libc::write(2, why.as_ptr().cast(), why.len());
        libc::_exit(if e == libc::ENOENT { 127 } else { 126 });
    }
}

/// Waits for `pid` and returns its status as a shell reports it.
fn wait(pid: i32) -> i32 {
    let mut st = 0;
    loop {
        // SAFETY: `st` is an int the call fills.
        let r = unsafe { libc::waitpid(pid, &mut st, 0) };
        if r == pid {
            break;
        }
        if r < 0 && sys::errno() != libc::EINTR {
            return 1;
        }
    }
    if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else if libc::WIFSIGNALED(st) {
        128 + libc::WTERMSIG(st)
    } else {
        1
    }
}

/// `argv[0]` as the program's shell would find it: a name with a `/` as it is, else the
/// first `PATH` entry where uvfs's view has it executable.
fn find_program(task: &Task, name: &[u8]) -> Result<Vec<u8>, String> {
    if name.contains(&b'/') {
        return Ok(name.to_vec());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in path.as_bytes().split(|&b| b == b':') {
        let dir = if dir.is_empty() { &b"."[..] } else { dir };
        let mut p = dir.to_vec();
        p.push(b'/');
        p.extend_from_slice(name);
        if let Ok(st) = task.fstatat(Fd::AT_FDCWD, p.as_slice(), AtFlags::empty()) {
            if st.st_mode & 0o170000 == 0o100000
                && task
                    .faccessat2(Fd::AT_FDCWD, p.as_slice(), 1, AtFlags::empty())
                    .is_ok()
            {
                return Ok(p);
            }
        }
    }
    Err(format!(
        "uvfs run: {}: command not found in the view's PATH",
        String::from_utf8_lossy(name)
    ))
}

/// The size of x86_64's `struct flock`.
const FLOCK_SIZE: usize = 32;

/// A `struct flock` read from the program (x86_64: `l_type` at 0, `l_whence` at 2,
/// `l_start` at 8, `l_len` at 16, `l_pid` at 24).
fn flock_from(b: &[u8; FLOCK_SIZE]) -> Flock {
    let i16_at = |o: usize| i16::from_ne_bytes([b[o], b[o + 1]]);
    let i64_at = |o: usize| i64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or_default());
    Flock {
        l_type: i16_at(0),
        l_whence: i16_at(2),
        l_start: i64_at(8),
        l_len: i64_at(16),
        l_pid: i32::from_ne_bytes(b[24..28].try_into().unwrap_or_default()),
    }
}

/// Writes `fl`'s fields into `b` (laid out as [`flock_from`] reads them; the padding left
/// as it is).
fn flock_into(fl: &Flock, b: &mut [u8; FLOCK_SIZE]) {
    b[0..2].copy_from_slice(&fl.l_type.to_ne_bytes());
    b[2..4].copy_from_slice(&fl.l_whence.to_ne_bytes());
    b[8..16].copy_from_slice(&fl.l_start.to_ne_bytes());
    b[16..24].copy_from_slice(&fl.l_len.to_ne_bytes());
    b[24..28].copy_from_slice(&fl.l_pid.to_ne_bytes());
}

/// An errno from uvfs as the raw number.
fn raw(e: Errno) -> i32 {
    e.raw()
}

/// A call's result: an `Answer`, or an errno.
type R = Result<Answer, i32>;

fn val(v: impl TryInto<i64>) -> R {
    Ok(Answer::Val(v.try_into().unwrap_or(i64::MAX)))
}

fn ok0(r: uvfs::Result<()>) -> R {
    r.map(|()| Answer::Val(0)).map_err(raw)
}

impl Sup {
    /// Serves notifications until every process under the filter has exited.
    fn serve(&self) -> io::Result<()> {
        let mut since_sweep = 0u32;
        loop {
            // RECV blocks until a call comes, or until no process is left under the filter
            // (then it returns ENOENT and the listener polls as hung up).
            let n = match sys::recv(self.listener.as_fd()) {
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    if sys::hung_up(self.listener.as_fd()) {
                        return Ok(());
                    }
                    // The caller died between its call and our RECV.
                    continue;
                }
                Err(e) => return Err(e),
            };
            since_sweep += 1;
            if since_sweep >= 4096 {
                since_sweep = 0;
                self.sweep();
            }
            let a = match self.proc_of(n.pid) {
                Some((tgid, pr, seen)) => {
                    let mut pr = lock(&pr);
                    if let Some(cred) = seen {
                        pr.creds.seen(n.pid, cred);
                    }
                    self.handle(tgid, &mut pr, &n).unwrap_or_else(Answer::Err)
                }
                // The kernel changes credentials itself; nothing of uvfs's to keep.
                None if creds::is_cred_call(n.nr) => Answer::Continue,
                None => Answer::Err(libc::ENOSYS),
            };
            if a != Answer::Later {
                sys::respond(self.listener.as_fd(), n.id, a)?;
            }
        }
    }

    /// The lock waits' watchdog (see [`Waits`]): every [`WATCHDOG_TICK`] while some wait,
    /// sweeps the processes that have exited (their tables close: their classic locks go,
    /// and their open files' last closes drop OFD and `flock` locks, which may grant a
    /// waiter), then ends the wait of each caller that is gone or has a signal to act on:
    /// - its notification is no longer valid (the thread was killed): the waiter is
    ///   interrupted (its answer then finds the call gone);
    /// - a signal it catches is pending ([`signal_pending`]): the filter's
    ///   `WAIT_KILLABLE_RECV` keeps it pending while the call waits for its answer, so the
    ///   waiter is interrupted and answers `ERESTARTSYS` (`EINTR` or a restart, by the
    ///   handler's `SA_RESTART`, as Linux's `F_SETLKW` and `flock`), or, if the lock was
    ///   granted first, success (the handler runs as the call returns, as on Linux). A
    ///   signal the thread does not catch is left to the kernel: a fatal one kills it
    ///   (first case), a stop signal stops it only once the lock is granted.
    ///
    /// At the end (`done`) every remaining waiter is interrupted.
    fn watchdog(&self, done: &AtomicBool) {
        loop {
            // No tick while no request waits: sleeps until a waiter registers or the run
            // ends (both signal `watched` after their change, under or after `sleeping`'s
            // lock, which the predicate is read under).
            drop(
                self.waits
                    .watched
                    .wait_while(lock(&self.waits.sleeping), |s| {
                        // Relaxed: ordered by `sleeping`'s lock (see its store in `run`).
                        s.is_empty() && !done.load(Ordering::Relaxed)
                    })
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            std::thread::sleep(WATCHDOG_TICK);
            // Relaxed: a stop flag, as the signal thread's.
            let stop = done.load(Ordering::Relaxed);
            let sleeping: Vec<(u64, i32, Interrupter)> = lock(&self.waits.sleeping)
                .iter()
                .map(|(id, (tid, i))| (*id, *tid, i.clone()))
                .collect();
            if !sleeping.is_empty() {
                self.sweep();
            }
            let listener = self.waits.listener.as_fd();
            for (id, tid, intr) in sleeping {
                if stop || !sys::id_valid(listener, id) || signal_pending(tid) {
                    intr.interrupt();
                }
            }
            if stop {
                return;
            }
        }
    }

    /// A lock request (`job`, already tried without sleeping: it conflicts) that must
    /// sleep: a waiter thread with a task of the calling process (its table: the same lock
    /// owner) sleeps in it and answers notification `n` itself; the serving thread goes on
    /// (`Answer::Later`). Deadlocks are found by the request itself (`EDEADLK`). The
    /// watchdog ends the wait when the caller dies or a signal it catches comes (`EINTR` or
    /// a restart, as on Linux), within [`WATCHDOG_TICK`]. The waiter alone answers, so a
    /// restarted call never races a late grant; a lock granted to a call that is gone is
    /// given back (`LockJob::undo`).
    fn defer_lock(&self, t: &Task, n: &Notif, job: LockJob) -> R {
        // The file the request names now (for `LockJob::undo`).
        let held = t.fget_file(job.fd()).map_err(raw)?;
        let task = t.clone_thread();
        let waits = self.waits.clone();
        let (id, tid) = (n.id, n.pid);
        let spawned = std::thread::Builder::new()
            .name("uvfs-run-lock".into())
            .stack_size(WAITER_STACK)
            .spawn(move || {
                lock(&waits.sleeping).insert(id, (tid, Interrupter::current()));
                // A wait to watch: the watchdog sleeps while there is none.
                waits.watched.notify_one();
                let r = job.run(&task);
                lock(&waits.sleeping).remove(&id);
                let a = match r {
                    Ok(()) => Answer::Val(0),
                    // Only the watchdog interrupts a waiter: for a caught signal pending
                    // (still pending: the thread cannot take it before this answer), or
                    // for a call that is gone (the answer is lost anyway).
                    Err(Errno::EINTR) => Answer::Err(ERESTARTSYS),
                    Err(e) => Answer::Err(e.raw()),
                };
                let delivered = sys::respond_delivered(waits.listener.as_fd(), id, a);
                if r.is_ok() && !matches!(delivered, Ok(true)) {
                    job.undo(&task, &held);
                }
            });
        match spawned {
            Ok(_) => Ok(Answer::Later),
            // No thread for it: the request cannot sleep (Linux's ENOLCK: no lock
            // resources).
            Err(_) => Err(libc::ENOLCK),
        }
    }

    /// `f`, and once more after a [`sweep`](Self::sweep) if it conflicted (`EAGAIN`): a
    /// process that has exited may still hold locks until a sweep sees it gone, where
    /// Linux drops them at its exit. Context: may hold one `Proc` lock.
    fn lock_retry(&self, f: impl Fn() -> Result<(), Errno>) -> Result<(), Errno> {
        match f() {
            Err(Errno::EAGAIN) => {
                self.sweep();
                f()
            }
            r => r,
        }
    }

    /// `F_GETLK` (`f`: the answer), and once more after a [`sweep`](Self::sweep) if it
    /// found a conflicting lock: as for [`lock_retry`](Self::lock_retry), the lock may be
    /// one of a process that has exited (Linux reports `F_UNLCK` once its exit dropped
    /// it). Context: may hold one `Proc` lock.
    fn getlk_retry(&self, f: impl Fn() -> Result<Flock, Errno>) -> Result<Flock, Errno> {
        match f() {
            Ok(fl) if fl.l_type != uvfs::locks::F_UNLCK => {
                self.sweep();
                f()
            }
            r => r,
        }
    }

    /// `f`, and once more after a [`sweep`](Self::sweep) if it failed with `ETXTBSY`: a
    /// program that has exited may still hold its exec file (`Proc::exe`) until a sweep
    /// sees it gone, where Linux drops the denial before its parent's `wait` returns.
    /// Context: may hold one `Proc` lock (the lock order allows `procs` after it).
    fn txtbsy_retry<T>(&self, f: impl Fn() -> Result<T, Errno>) -> Result<T, Errno> {
        match f() {
            Err(Errno::ETXTBSY) => {
                self.sweep();
                f()
            }
            r => r,
        }
    }

    /// Drops the processes and threads that have exited (their uvfs tables close), and the
    /// credentials their processes kept for the threads (thread ids are reused).
    fn sweep(&self) {
        let mut procs = lock(&self.procs);
        // A process with a call in progress (its lock held) is alive.
        procs.retain(|_, p| p.try_lock().map_or(true, |p| !sys::exited(p.pidfd.as_fd())));
        let mut gone = Vec::new();
        lock(&self.threads).retain(|tid, (tgid, fd, _)| {
            let keep = procs.contains_key(tgid) && thread_alive(*tgid, *tid, fd);
            if !keep {
                gone.push((*tid, *tgid));
            }
            keep
        });
        for (tid, tgid) in gone {
            // A process serving a call (its lock held) keeps the entry until the thread id
            // is seen again (`ThreadCreds::seen` replaces it) or the process goes: waiting
            // here for that lock under `procs` would invert the order `serve` takes them.
            if let Some(Ok(mut p)) = procs.get(&tgid).map(|p| p.try_lock()) {
                p.creds.forget(tid);
            }
        }
    }

    /// The thread-group id of thread `tid` and the process (or own table) that serves it,
    /// making its process's task on first sight: a child gets the table its parent forked
    /// for it at `clone`. A thread seen for the first time comes with its credentials
    /// (see `creds`), read from the status text read to place it.
    fn proc_of(&self, tid: i32) -> Option<Placed> {
        {
            // Known threads are trusted without a liveness check per call: their pid is
            // reused only after the kernel's pid counter wraps (pid_max), and the sweeps at
            // every new process and every 4096 calls drop the dead ones first.
            let procs = lock(&self.procs);
            let threads = lock(&self.threads);
            match threads.get(&tid) {
                // A thread with a table of its own (after unshare).
                Some((tgid, _, Some(own))) => return Some((*tgid, own.clone(), None)),
                Some((tgid, _, None)) => {
                    if let Some(p) = procs.get(tgid) {
                        return Some((*tgid, p.clone(), None));
                    }
                }
                None => {
                    if let Some(p) = procs.get(&tid) {
                        return Some((tid, p.clone(), None));
                    }
                }
            }
        }
        self.sweep();
        // The rest under the table lock: two threads of a new process must not both make
        // (and take a pending table for) it.
        let mut procs = lock(&self.procs);
        self.resolve_locked(&mut procs, tid, true)
    }

    /// [`proc_of`](Self::proc_of)'s first sight of `tid`. `caller`: `tid` is the thread
    /// whose notified call is being served (blocked in it, so its credentials read now are
    /// the ones the call is made with); `false` for its thread-group leader reached from
    /// it, whose credentials may be changing as they are read (read at its own first
    /// call). Context: caller holds `procs`.
    fn resolve_locked(
        &self,
        procs: &mut HashMap<i32, Arc<Mutex<Proc>>>,
        tid: i32,
        caller: bool,
    ) -> Option<Placed> {
        if let Some(p) = procs.get(&tid) {
            return Some((tid, p.clone(), None));
        }
        let status = proc_status(tid)?;
        let (tgid, ppid) = (
            status_field(&status, "Tgid:")?,
            status_field(&status, "PPid:")?,
        );
        // Read while `tid` waits in its call: the credentials it makes the call with.
        let cred = caller
            .then(|| creds::parse(&status, || creds::same_user_ns(tid)))
            .flatten();
        if tgid != tid {
            let (_, p, _) = self.resolve_locked(procs, tgid, false)?;
            let fd = match sys::pidfd_open(tid, PIDFD_THREAD) {
                Ok(fd) => Some(fd),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => None,
                Err(_) => return None,
            };
            lock(&self.threads).insert(tid, (tgid, fd, None));
            return Some((tgid, p, cred));
        }
        // The clone this child came from (see `PendingFork`).
        let mut pending = lock(&self.pending);
        let entries = pending.iter().map(|p| (p.parent, p.last_pid));
        let Some(i) = pick_clone(entries, tid, ppid, self.pid_max) else {
            log!(
                "uvfs run: process {tid} (parent {ppid}): no clone of a known process made \
                 it; its file calls fail with ENOSYS"
            );
            return None;
        };
        let entry = pending.remove(i)?;
        drop(pending);
        let pidfd = sys::pidfd_open(tid, 0).ok()?;
        let mut thread_creds = ThreadCreds::default();
        if let Some(c) = cred {
            thread_creds.seen(tid, c);
        }
        let mut task = entry.task;
        // F_GETLK reports the program's pids.
        task.set_pid(tid);
        let p = Arc::new(Mutex::new(Proc {
            task,
            creds: thread_creds,
            pidfd,
            max_fd: entry.max_fd,
            exec_pending: None,
            exe: entry.exe,
            exe_pending: None,
            restore: None,
        }));
        procs.insert(tid, p.clone());
        Some((tid, p, None))
    }

    /// One log line per unsupported call, then `ENOSYS`.
    fn unsupported(&self, what: &str) -> R {
        self.unsupported_as(what, libc::ENOSYS, "ENOSYS")
    }

    /// One log line per unsupported call, then `errno` (named `name` in the line): for a
    /// call whose "not here" has its own errno (`ENOTTY` for an ioctl).
    fn unsupported_as(&self, what: &str, errno: i32, name: &str) -> R {
        if lock(&self.said).insert(what.to_owned()) {
            log!("uvfs run: {what} is not supported on uvfs files yet ({name})");
        }
        Err(errno)
    }

    /// Answers one notification of process `tgid`.
    #[allow(non_upper_case_globals)] // libc's SYS_* names in the patterns
    fn handle(&self, tgid: i32, pr: &mut Proc, n: &Notif) -> R {
        let pid = n.pid;
        let a = n.args;
        if let Some(e) = &pr.exec_pending {
            if e.done(tgid, pid) {
                settle_exec(pr, tgid, pid == e.tid);
            } else if matches!(n.nr, libc::SYS_execve | libc::SYS_execveat) {
                if e.in_exec(tgid) {
                    // Another thread's exec is under way: as Linux's `de_thread` answers
                    // an exec racing another thread's (one record of the pending exec
                    // each process; see `ExecPending`).
                    return Err(libc::EAGAIN);
                }
                // Its exec failed and the thread went on without a notified call since
                // (it may only wait in futexes for long): settle it now, so that this
                // exec is not refused for as long.
                settle_exec(pr, tgid, false);
            }
        }
        if n.nr == libc::SYS_exit_group {
            return Ok(Answer::Continue);
        }
        if creds::is_cred_call(n.nr) {
            // The kernel makes the change (CONTINUE); read at the thread's next call.
            pr.creds.stale(pid);
            return Ok(Answer::Continue);
        }
        // The calling thread's credentials check this call (Linux: `current_cred()`).
        let listener = self.listener.as_fd();
        pr.creds
            .apply(&mut pr.task, pid, || sys::id_valid(listener, n.id))?;
        // Reads the path argument `i` and checks the notification is still live, so that
        // memory of a recycled pid is never acted on.
        let path = |i: usize| -> Result<Vec<u8>, i32> {
            let p = sys::read_cstr(pid, a[i], PATH_LIMIT - 1)?;
            if !sys::id_valid(listener, n.id) {
                return Err(libc::ESRCH);
            }
            Ok(proc_self(p, tgid, pid))
        };
        let fdarg = |i: usize| a[i] as i32;
        let magic = |p: &[u8]| magic_fd(p, tgid);
        let t = &pr.task;
        let is_uvfs = |fd: i32| fd >= 0 && t.fcntl(Fd(fd), Fcntl::GetFd).is_ok();
        // A `dirfd` argument: AT_FDCWD, a uvfs descriptor, or (for a relative path) an
        // error: ENOTDIR for the program's own descriptors, EBADF for none.
        let dirfd = |fd: i32, p: &[u8]| -> Result<Fd, i32> {
            if fd == libc::AT_FDCWD || p.first() == Some(&b'/') || is_uvfs(fd) {
                return Ok(Fd(fd));
            }
            Err(if sys::proc_fd_link(pid, fd).is_some() {
                libc::ENOTDIR
            } else {
                libc::EBADF
            })
        };
        use libc::*;
        match n.nr {
            SYS_open | SYS_creat | SYS_openat => {
                let (d, p, fl, mode) = match n.nr {
                    SYS_open => (Fd::AT_FDCWD, path(0)?, a[1] as u32, a[2] as u32),
                    SYS_creat => (
                        Fd::AT_FDCWD,
                        path(0)?,
                        (O_CREAT | O_WRONLY | O_TRUNC) as u32,
                        a[1] as u32,
                    ),
                    _ => {
                        let p = path(1)?;
                        (dirfd(fdarg(0), &p)?, p, a[2] as u32, a[3] as u32)
                    }
                };
                match magic(&p) {
                    // The program's own descriptor (a pipe, the terminal): the kernel
                    // reopens it through its /proc, as it would without uvfs.
                    Some(m) if !is_uvfs(m) => Ok(Answer::Continue),
                    Some(m) => self.reopen(pr, n, m, fl),
                    None => match mount_table(&p, tgid, pid) {
                        Some(info) => self.open_mount_table(pr, n, info, fl),
                        None => self.open(pr, n, d, &p, fl, mode),
                    },
                }
            }
            SYS_stat | SYS_lstat => {
                let p = path(0)?;
                if magic(&p).is_some_and(|m| !is_uvfs(m) || n.nr == SYS_lstat) {
                    return Ok(Answer::Continue);
                }
                if let Some(fd) = magic(&p) {
                    let st = t.fstatat(Fd(fd), "", AtFlags::EMPTY_PATH).map_err(raw)?;
                    sys::write_mem(pid, a[1], &stat_bytes(&st))?;
                    return val(0);
                }
                let fl = if n.nr == SYS_lstat {
                    AtFlags::SYMLINK_NOFOLLOW
                } else {
                    AtFlags::empty()
                };
                let st = t.fstatat(Fd::AT_FDCWD, p.as_slice(), fl).map_err(raw)?;
                sys::write_mem(pid, a[1], &stat_bytes(&st))?;
                val(0)
            }
            SYS_newfstatat | SYS_statx => {
                // (dirfd, path, flags): newfstatat(dirfd, path, buf, flags),
                // statx(dirfd, path, flags, mask, buf).
                let fl = if n.nr == SYS_statx {
                    a[2] as u32
                } else {
                    a[3] as u32
                };
                let empty = fl & AT_EMPTY_PATH as u32 != 0;
                let p = if a[1] == 0 && empty {
                    Vec::new()
                } else {
                    path(1)?
                };
                // The program's own descriptor (AT_EMPTY_PATH), or a magic link to one or
                // the link itself: the kernel's.
                if p.is_empty() && empty && fdarg(0) != AT_FDCWD && !is_uvfs(fdarg(0)) {
                    return Ok(Answer::Continue);
                }
                let nofollow = fl & AT_SYMLINK_NOFOLLOW as u32 != 0;
                if magic(&p).is_some_and(|m| !is_uvfs(m) || nofollow) {
                    return Ok(Answer::Continue);
                }
                let (d, p, fl) = match magic(&p) {
                    Some(m) => (Fd(m), Vec::new(), fl | AT_EMPTY_PATH as u32),
                    None => (dirfd(fdarg(0), &p)?, p, fl),
                };
                let fl = AtFlags::from_bits_retain(fl);
                if n.nr == SYS_statx {
                    let sx = t.statx(d, p.as_slice(), fl, a[3] as u32).map_err(raw)?;
                    sys::write_mem(pid, a[4], &statx_bytes(&sx))?;
                } else {
                    let st = t.fstatat(d, p.as_slice(), fl).map_err(raw)?;
                    sys::write_mem(pid, a[2], &stat_bytes(&st))?;
                }
                val(0)
            }
            SYS_fstat => {
                if !is_uvfs(fdarg(0)) {
                    return Ok(Answer::Continue);
                }
                let st = t.fstat(Fd(fdarg(0))).map_err(raw)?;
                sys::write_mem(pid, a[1], &stat_bytes(&st))?;
                val(0)
            }
            SYS_access | SYS_faccessat | SYS_faccessat2 => {
                let (d, p, mode) = if n.nr == SYS_access {
                    (Fd::AT_FDCWD, path(0)?, a[1] as u32)
                } else {
                    let p = path(1)?;
                    (dirfd(fdarg(0), &p)?, p, a[2] as u32)
                };
                let fl = if n.nr == SYS_faccessat2 {
                    a[3] as u32
                } else {
                    0
                };
                match magic(&p) {
                    Some(m) if !is_uvfs(m) => return Ok(Answer::Continue),
                    Some(m) => {
                        let fl = AtFlags::from_bits_retain(fl) | AtFlags::EMPTY_PATH;
                        return ok0(t.faccessat2(Fd(m), "", mode, fl));
                    }
                    None => {}
                }
                ok0(t.faccessat2(d, p.as_slice(), mode, AtFlags::from_bits_retain(fl)))
            }
            SYS_mkdir => {
                let p = path(0)?;
                ok0(t.mkdirat(Fd::AT_FDCWD, p.as_slice(), a[1] as u32))
            }
            SYS_mkdirat => {
                let p = path(1)?;
                let d = dirfd(fdarg(0), &p)?;
                ok0(t.mkdirat(d, p.as_slice(), a[2] as u32))
            }
            SYS_rmdir => {
                let p = path(0)?;
                ok0(t.unlinkat(Fd::AT_FDCWD, p.as_slice(), AtFlags::REMOVEDIR))
            }
            SYS_unlink => {
                let p = path(0)?;
                ok0(t.unlinkat(Fd::AT_FDCWD, p.as_slice(), AtFlags::empty()))
            }
            SYS_unlinkat => {
                let p = path(1)?;
                let d = dirfd(fdarg(0), &p)?;
                ok0(t.unlinkat(d, p.as_slice(), AtFlags::from_bits_retain(a[2] as u32)))
            }
            SYS_rename => {
                let (o, nw) = (path(0)?, path(1)?);
                ok0(t.renameat2(
                    Fd::AT_FDCWD,
                    o.as_slice(),
                    Fd::AT_FDCWD,
                    nw.as_slice(),
                    RenameFlags::empty(),
                ))
            }
            SYS_renameat | SYS_renameat2 => {
                let (o, nw) = (path(1)?, path(3)?);
                let (od, nd) = (dirfd(fdarg(0), &o)?, dirfd(fdarg(2), &nw)?);
                let fl = if n.nr == SYS_renameat2 {
                    a[4] as u32
                } else {
                    0
                };
                ok0(t.renameat2(
                    od,
                    o.as_slice(),
                    nd,
                    nw.as_slice(),
                    RenameFlags::from_bits_retain(fl),
                ))
            }
            SYS_link => {
                let (o, nw) = (path(0)?, path(1)?);
                ok0(t.linkat(
                    Fd::AT_FDCWD,
                    o.as_slice(),
                    Fd::AT_FDCWD,
                    nw.as_slice(),
                    AtFlags::empty(),
                ))
            }
            SYS_linkat => {
                let fl = a[4] as u32;
                let o = if a[1] == 0 && fl & AT_EMPTY_PATH as u32 != 0 {
                    Vec::new()
                } else {
                    path(1)?
                };
                let nw = path(3)?;
                let (od, nd) = (dirfd(fdarg(0), &o)?, dirfd(fdarg(2), &nw)?);
                ok0(t.linkat(
                    od,
                    o.as_slice(),
                    nd,
                    nw.as_slice(),
                    AtFlags::from_bits_retain(fl),
                ))
            }
            SYS_symlink => {
                let (target, lp) = (path(0)?, path(1)?);
                ok0(t.symlinkat(target.as_slice(), Fd::AT_FDCWD, lp.as_slice()))
            }
            SYS_symlinkat => {
                let (target, lp) = (path(0)?, path(2)?);
                let d = dirfd(fdarg(1), &lp)?;
                ok0(t.symlinkat(target.as_slice(), d, lp.as_slice()))
            }
            SYS_readlink | SYS_readlinkat => {
                // `bufsiz` is an `int` (the upper half of the register ignored), checked
                // before the path is read (Linux's `do_readlinkat`): EINVAL for 0 and for
                // a negative one, (size_t)-1 and 2^31 included.
                let size = a[if n.nr == SYS_readlink { 2 } else { 3 }] as i32;
                if size <= 0 {
                    return Err(EINVAL);
                }
                let (d, p, buf) = if n.nr == SYS_readlink {
                    (Fd::AT_FDCWD, path(0)?, a[1])
                } else {
                    let p = path(1)?;
                    (dirfd(fdarg(0), &p)?, p, a[2])
                };
                // `/dev/stdin` and the like are symlinks themselves (to `/proc/self/fd/N`),
                // which the kernel reads; only a final `fd/N` is the file's magic link.
                if matches!(&p[..], b"/dev/stdin" | b"/dev/stdout" | b"/dev/stderr") {
                    return Ok(Answer::Continue);
                }
                match magic(&p) {
                    Some(m) if !is_uvfs(m) => return Ok(Answer::Continue),
                    Some(fd) => {
                        let mut out = t.fd_path(Fd(fd)).map_err(raw)?;
                        out.truncate((size as usize).min(PATH_LIMIT));
                        sys::write_mem(pid, buf, &out)?;
                        return val(out.len());
                    }
                    None => {}
                }
                // The working directory and root are uvfs's (the kernel's cwd is the exec
                // directory).
                if p == format!("/proc/{tgid}/cwd").as_bytes()
                    || p == format!("/proc/{tgid}/root").as_bytes()
                {
                    let mut out = if p.ends_with(b"cwd") {
                        t.cwd_path().map_err(raw)?
                    } else {
                        b"/".to_vec()
                    };
                    out.truncate((size as usize).min(PATH_LIMIT));
                    sys::write_mem(pid, buf, &out)?;
                    return val(out.len());
                }
                let mut out = vec![0u8; (size as usize).min(PATH_LIMIT)];
                let k = t.readlinkat(d, p.as_slice(), &mut out).map_err(raw)?;
                sys::write_mem(pid, buf, &out[..k])?;
                val(k)
            }
            SYS_chdir => {
                let p = path(0)?;
                ok0(t.chdir(p.as_slice()))
            }
            SYS_fchdir => {
                let fd = fdarg(0);
                if !is_uvfs(fd) {
                    return Err(if sys::proc_fd_link(pid, fd).is_some() {
                        ENOTDIR
                    } else {
                        EBADF
                    });
                }
                ok0(t.fchdir(Fd(fd)))
            }
            SYS_getcwd => {
                let mut cwd = t.getcwd().map_err(raw)?;
                cwd.push(0);
                if cwd.len() > a[1] as usize {
                    return Err(ERANGE);
                }
                sys::write_mem(pid, a[0], &cwd)?;
                val(cwd.len())
            }
            SYS_chroot => {
                let p = path(0)?;
                ok0(t.chroot(p.as_slice()))
            }
            SYS_chmod => {
                let p = path(0)?;
                if magic(&p).is_some_and(|m| !is_uvfs(m)) {
                    return Ok(Answer::Continue);
                }
                if let Some(fd) = magic(&p) {
                    return ok0(t.fchmodat(Fd(fd), "", a[1] as u32, AtFlags::EMPTY_PATH));
                }
                ok0(t.fchmodat(Fd::AT_FDCWD, p.as_slice(), a[1] as u32, AtFlags::empty()))
            }
            SYS_fchmodat | 452 => {
                let p = path(1)?;
                if magic(&p).is_some_and(|m| !is_uvfs(m)) {
                    return Ok(Answer::Continue);
                }
                if let Some(fd) = magic(&p) {
                    return ok0(t.fchmodat(Fd(fd), "", a[2] as u32, AtFlags::EMPTY_PATH));
                }
                let d = dirfd(fdarg(0), &p)?;
                let fl = if n.nr == 452 { a[3] as u32 } else { 0 };
                ok0(t.fchmodat(d, p.as_slice(), a[2] as u32, AtFlags::from_bits_retain(fl)))
            }
            SYS_fchmod => {
                if !is_uvfs(fdarg(0)) {
                    return Ok(Answer::Continue);
                }
                ok0(t.fchmod(Fd(fdarg(0)), a[1] as u32))
            }
            SYS_chown | SYS_lchown => {
                let p = path(0)?;
                if magic(&p).is_some_and(|m| !is_uvfs(m)) {
                    return Ok(Answer::Continue);
                }
                if let Some(fd) = magic(&p) {
                    return ok0(t.fchownat(
                        Fd(fd),
                        "",
                        a[1] as u32,
                        a[2] as u32,
                        AtFlags::EMPTY_PATH,
                    ));
                }
                let fl = if n.nr == SYS_lchown {
                    AtFlags::SYMLINK_NOFOLLOW
                } else {
                    AtFlags::empty()
                };
                ok0(t.fchownat(Fd::AT_FDCWD, p.as_slice(), a[1] as u32, a[2] as u32, fl))
            }
            SYS_fchownat => {
                let fl = a[4] as u32;
                let p = if a[1] == 0 && fl & AT_EMPTY_PATH as u32 != 0 {
                    Vec::new()
                } else {
                    path(1)?
                };
                let d = dirfd(fdarg(0), &p)?;
                ok0(t.fchownat(
                    d,
                    p.as_slice(),
                    a[2] as u32,
                    a[3] as u32,
                    AtFlags::from_bits_retain(fl),
                ))
            }
            SYS_fchown => {
                if !is_uvfs(fdarg(0)) {
                    return Ok(Answer::Continue);
                }
                ok0(t.fchown(Fd(fdarg(0)), a[1] as u32, a[2] as u32))
            }
            SYS_utimensat => {
                let times = if a[2] == 0 {
                    None
                } else {
                    let mut b = [0u8; 32];
                    sys::read_mem(pid, a[2], &mut b)?;
                    let w = |i: usize| {
                        i64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or_default())
                    };
                    Some([
                        Timespec {
                            tv_sec: w(0),
                            tv_nsec: w(1),
                        },
                        Timespec {
                            tv_sec: w(2),
                            tv_nsec: w(3),
                        },
                    ])
                };
                if a[1] == 0 {
                    // futimens(fd, times), as glibc spells it.
                    if !is_uvfs(fdarg(0)) {
                        return Ok(Answer::Continue);
                    }
                    return ok0(t.futimens(Fd(fdarg(0)), times.as_ref()));
                }
                let p = path(1)?;
                let d = dirfd(fdarg(0), &p)?;
                ok0(t.utimensat(
                    d,
                    p.as_slice(),
                    times.as_ref(),
                    AtFlags::from_bits_retain(a[3] as u32),
                ))
            }
            SYS_truncate => {
                let p = path(0)?;
                ok0(self.txtbsy_retry(|| t.truncate(p.as_slice(), a[1] as i64)))
            }
            SYS_ftruncate => {
                if !is_uvfs(fdarg(0)) {
                    return Ok(Answer::Continue);
                }
                ok0(t.ftruncate(Fd(fdarg(0)), a[1] as i64))
            }
            SYS_fallocate => {
                if !is_uvfs(fdarg(0)) {
                    return Ok(Answer::Continue);
                }
                ok0(t.fallocate(Fd(fdarg(0)), a[1] as i32, a[2] as i64, a[3] as i64))
            }
            SYS_ioctl => {
                // Only the requests of NOTIFIED_IOCTLS come here; on the program's own
                // descriptors they run.
                let fd = fdarg(0);
                if !is_uvfs(fd) {
                    return Ok(Answer::Continue);
                }
                let cmd = a[1] as u32;
                match t.host_fd(Fd(fd)) {
                    // A host file (the kernel's descriptor at `fd` is that file).
                    Ok(_) => {
                        let ro = t
                            .fstatfs(Fd(fd))
                            .is_ok_and(|s| s.f_flags & uvfs::types::ST_RDONLY != 0);
                        if ro && !ATTR_IOCTL_READS.contains(&cmd) {
                            Err(libc::EROFS)
                        } else {
                            Ok(Answer::Continue)
                        }
                    }
                    Err(_) => self.unsupported_as(
                        "ioctl FS_IOC_GETFLAGS/SETFLAGS/FSGETXATTR/FSSETXATTR/GETVERSION/\
                         SETVERSION/ENABLE_VERITY/SETFSLABEL (chattr, lsattr, fsverity)",
                        libc::ENOTTY,
                        "ENOTTY",
                    ),
                }
            }
            SYS_fsync | SYS_fdatasync => {
                if !is_uvfs(fdarg(0)) {
                    return Ok(Answer::Continue);
                }
                ok0(if n.nr == SYS_fsync {
                    t.fsync(Fd(fdarg(0)))
                } else {
                    t.fdatasync(Fd(fdarg(0)))
                })
            }
            SYS_mknod => {
                let p = path(0)?;
                ok0(t.mknodat(Fd::AT_FDCWD, p.as_slice(), a[1] as u32, a[2]))
            }
            SYS_mknodat => {
                let p = path(1)?;
                let d = dirfd(fdarg(0), &p)?;
                ok0(t.mknodat(d, p.as_slice(), a[2] as u32, a[3]))
            }
            SYS_statfs => {
                let p = path(0)?;
                let s = t.statfs(p.as_slice()).map_err(raw)?;
                sys::write_mem(pid, a[1], &statfs_bytes(&s))?;
                val(0)
            }
            SYS_fstatfs => {
                if !is_uvfs(fdarg(0)) {
                    return Ok(Answer::Continue);
                }
                let s = t.fstatfs(Fd(fdarg(0))).map_err(raw)?;
                sys::write_mem(pid, a[1], &statfs_bytes(&s))?;
                val(0)
            }
            SYS_umask => {
                t.umask(a[0] as u32 & 0o777);
                Ok(Answer::Continue)
            }
            SYS_read | SYS_pread64 => {
                let fd = fdarg(0);
                if !is_uvfs(fd) {
                    return Ok(Answer::Continue);
                }
                let off = (n.nr == SYS_pread64).then_some(a[3] as i64);
                read_into(t, pid, Fd(fd), a[1], a[2], off)
            }
            SYS_write | SYS_pwrite64 => {
                let fd = fdarg(0);
                if !is_uvfs(fd) {
                    return Ok(Answer::Continue);
                }
                let off = (n.nr == SYS_pwrite64).then_some(a[3] as i64);
                write_from(t, pid, Fd(fd), a[1], a[2], off)
            }
            SYS_readv | SYS_writev | SYS_preadv | SYS_pwritev | SYS_preadv2 | SYS_pwritev2 => {
                let fd = fdarg(0);
                if !is_uvfs(fd) {
                    return Ok(Answer::Continue);
                }
                let write = matches!(n.nr, SYS_writev | SYS_pwritev | SYS_pwritev2);
                let mut off = match n.nr {
                    SYS_readv | SYS_writev => None,
                    _ if a[3] as i64 == -1 && matches!(n.nr, SYS_preadv2 | SYS_pwritev2) => None,
                    _ => Some(a[3] as i64),
                };
                if matches!(n.nr, SYS_preadv2 | SYS_pwritev2) && a[5] != 0 {
                    return self.unsupported("preadv2/pwritev2 with flags");
                }
                if a[2] > IOV_MAX {
                    return Err(EINVAL);
                }
                let mut raw_iov = vec![0u8; a[2] as usize * 16];
                sys::read_mem(pid, a[1], &mut raw_iov)?;
                // EINVAL when the lengths add up past SSIZE_MAX (`import_iovec`).
                let mut sum: u64 = 0;
                for v in raw_iov.chunks_exact(16) {
                    let len = u64::from_ne_bytes(v[8..].try_into().unwrap_or_default());
                    sum = sum
                        .checked_add(len)
                        .filter(|&x| x <= isize::MAX as u64)
                        .ok_or(EINVAL)?;
                }
                let mut total: u64 = 0;
                for v in raw_iov.chunks_exact(16) {
                    let base = u64::from_ne_bytes(v[..8].try_into().unwrap_or_default());
                    let len = u64::from_ne_bytes(v[8..].try_into().unwrap_or_default());
                    let r = if write {
                        write_from(t, pid, Fd(fd), base, len, off)
                    } else {
                        read_into(t, pid, Fd(fd), base, len, off)
                    };
                    match r {
                        Ok(Answer::Val(k)) => {
                            total += k as u64;
                            if let Some(o) = off.as_mut() {
                                *o += k;
                            }
                            if (k as u64) < len {
                                break;
                            }
                        }
                        Ok(other) => return Ok(other),
                        Err(e) if total == 0 => return Err(e),
                        Err(_) => break,
                    }
                }
                val(total)
            }
            SYS_lseek => {
                if !is_uvfs(fdarg(0)) {
                    return Ok(Answer::Continue);
                }
                val(t
                    .lseek(Fd(fdarg(0)), a[1] as i64, a[2] as i32)
                    .map_err(raw)?)
            }
            SYS_getdents64 => {
                let fd = fdarg(0);
                if !is_uvfs(fd) {
                    return Ok(Answer::Continue);
                }
                let mut buf = vec![0u8; (a[2] as usize).min(CHUNK)];
                let k = t.getdents64(Fd(fd), &mut buf).map_err(raw)?;
                sys::write_mem(pid, a[1], &buf[..k])?;
                val(k)
            }
            SYS_getdents => {
                if !is_uvfs(fdarg(0)) {
                    return Ok(Answer::Continue);
                }
                self.unsupported("getdents (use getdents64)")
            }
            SYS_close => {
                let fd = fdarg(0);
                if is_uvfs(fd) {
                    // The uvfs file closes here; the kernel then closes the placeholder.
                    let _ = t.close(Fd(fd));
                }
                Ok(Answer::Continue)
            }
            SYS_close_range => {
                let (first, last, fl) = (a[0] as u32, a[1] as u32, a[2] as u32);
                // The kernel's checks first, so a refused call changes nothing.
                if first > last || fl & !(CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE) != 0 {
                    return Err(EINVAL);
                }
                if fl & CLOSE_RANGE_UNSHARE != 0 {
                    return self.unsupported("close_range(CLOSE_RANGE_UNSHARE)");
                }
                let top = (pr.max_fd.max(0) as u32).min(last);
                for fd in first..=top {
                    let fd = Fd(fd as i32);
                    if fl & CLOSE_RANGE_CLOEXEC != 0 {
                        let _ = t.fcntl(fd, Fcntl::SetFd(FD_CLOEXEC));
                    } else {
                        let _ = t.close(fd);
                    }
                }
                Ok(Answer::Continue)
            }
            SYS_dup => {
                let fd = fdarg(0);
                if !is_uvfs(fd) {
                    return Ok(Answer::Continue);
                }
                self.dup_to(pr, n, fd, 0, false)
            }
            SYS_dup2 | SYS_dup3 => {
                let (old, new) = (fdarg(0), fdarg(1));
                let fl = if n.nr == SYS_dup3 { a[2] as u32 } else { 0 };
                // Neither side is uvfs's, or the kernel answers alone (`dup3`'s EINVAL for
                // bad flags or old == new, `dup2`'s old == new).
                if old == new || fl & !(O_CLOEXEC as u32) != 0 || (!is_uvfs(old) && !is_uvfs(new)) {
                    return Ok(Answer::Continue);
                }
                if new < 0 {
                    return Err(EBADF);
                }
                // The kernel's side first (ADDFD at `new` replaces what is there, as dup2
                // does, and fails as it would: EBADF for a bad `old`, a `new` past the
                // limit), so a failed call changes nothing in uvfs.
                let src = sys::pidfd_getfd(thread_pidfd(n.pid)?.as_fd(), old)?;
                let cloexec = fl != 0;
                sys::addfd(self.listener.as_fd(), n.id, src.as_fd(), Some(new), cloexec)?;
                if is_uvfs(old) {
                    // Cannot fail: both numbers are valid now; it replaces a uvfs file at
                    // `new` (closing it) as the kernel replaced its placeholder.
                    let _ = t.dup3(Fd(old), Fd(new), OpenFlags::from_bits_retain(fl));
                    pr.max_fd = pr.max_fd.max(new);
                } else {
                    // A host descriptor now at `new`: uvfs's file there is closed.
                    let _ = t.close(Fd(new));
                }
                val(new)
            }
            SYS_fcntl => {
                let fd = fdarg(0);
                if !is_uvfs(fd) {
                    return Ok(Answer::Continue);
                }
                match a[1] as i32 {
                    F_DUPFD | F_DUPFD_CLOEXEC => {
                        let min = a[2] as i32;
                        if min < 0 {
                            return Err(EINVAL);
                        }
                        self.dup_to(pr, n, fd, min, a[1] as i32 == F_DUPFD_CLOEXEC)
                    }
                    F_GETFD => Ok(Answer::Continue),
                    F_SETFD => {
                        t.fcntl(Fd(fd), Fcntl::SetFd(a[2] as i32)).map_err(raw)?;
                        Ok(Answer::Continue)
                    }
                    F_GETFL => val(t.fcntl(Fd(fd), Fcntl::GetFl).map_err(raw)?),
                    F_SETFL => val(t.fcntl(Fd(fd), Fcntl::SetFl(a[2] as u32)).map_err(raw)?),
                    c @ (F_GETLK | F_SETLK | F_SETLKW | F_OFD_GETLK | F_OFD_SETLK
                    | F_OFD_SETLKW) => {
                        let cmd = LockCmd::from_raw(c).ok_or(EINVAL)?;
                        let mut b = [0u8; FLOCK_SIZE];
                        sys::read_mem(pid, a[2], &mut b)?;
                        if !sys::id_valid(listener, n.id) {
                            return Err(ESRCH);
                        }
                        let mut fl = flock_from(&b);
                        match cmd {
                            LockCmd::GetLk | LockCmd::OfdGetLk => {
                                fl = self
                                    .getlk_retry(|| {
                                        let mut got = fl;
                                        t.fcntl_lock(Fd(fd), cmd, &mut got).map(|()| got)
                                    })
                                    .map_err(raw)?;
                                // Linux copies the whole struct back (padding as read).
                                flock_into(&fl, &mut b);
                                sys::write_mem(pid, a[2], &b)?;
                                val(0)
                            }
                            LockCmd::SetLk | LockCmd::OfdSetLk => {
                                ok0(self.lock_retry(|| t.fcntl_lock(Fd(fd), cmd, &mut { fl })))
                            }
                            LockCmd::SetLkW | LockCmd::OfdSetLkW => {
                                let once = if cmd == LockCmd::SetLkW {
                                    LockCmd::SetLk
                                } else {
                                    LockCmd::OfdSetLk
                                };
                                match self.lock_retry(|| t.fcntl_lock(Fd(fd), once, &mut { fl })) {
                                    Err(Errno::EAGAIN) => {
                                        self.defer_lock(t, n, LockJob::Posix(Fd(fd), cmd, fl))
                                    }
                                    r => ok0(r),
                                }
                            }
                        }
                    }
                    // Commands Linux has that uvfs does not: leases, owners, signals,
                    // notify, pipe sizes, seals, hints (10/11: F_SETSIG/F_GETSIG, 15/16:
                    // F_SETOWN_EX/F_GETOWN_EX).
                    cmd @ (F_SETOWN
                    | F_GETOWN
                    | 10
                    | 11
                    | 15
                    | 16
                    | F_SETLEASE
                    | F_GETLEASE
                    | F_NOTIFY
                    | F_SETPIPE_SZ
                    | F_GETPIPE_SZ
                    | F_ADD_SEALS
                    | F_GET_SEALS
                    | 1035..=1038
                    // F_CREATED_QUERY (Linux 6.12): uvfs does not record FMODE_CREATED.
                    | 1028) => self.unsupported(&format!("fcntl command {cmd}")),
                    // F_DUPFD_QUERY (Linux 6.10, fs/fcntl.c `f_dupfd_query`): 1 when
                    // descriptor `arg` names the same open file as `fd`, 0 when another,
                    // EBADF when `arg` is not open.
                    1027 => {
                        let other = a[2] as i32;
                        if is_uvfs(other) {
                            let x = t.fget_file(Fd(fd)).map_err(raw)?;
                            let y = t.fget_file(Fd(other)).map_err(raw)?;
                            let same = std::ptr::eq::<uvfs::File>(&**x.file(), &**y.file());
                            return val(i64::from(same));
                        }
                        // A descriptor of the program's own (a host file, pipe, socket)
                        // names another file than a uvfs one.
                        if other >= 0 && sys::proc_fd_link(pid, other).is_some() {
                            val(0)
                        } else {
                            Err(EBADF)
                        }
                    }
                    // Unknown commands: EINVAL, as Linux's `do_fcntl`.
                    _ => Err(EINVAL),
                }
            }
            SYS_flock => {
                let (fd, op) = (fdarg(0), a[1] as i32);
                if !is_uvfs(fd) {
                    return Ok(Answer::Continue);
                }
                let (sh_ex, nb) = (LOCK_SH | LOCK_EX, LOCK_NB);
                if op & nb != 0 || op & !nb & sh_ex == 0 || op & !(sh_ex | nb) != 0 {
                    // Not a sleeping request (LOCK_NB, LOCK_UN, or an EINVAL).
                    return ok0(self.lock_retry(|| t.flock(Fd(fd), op)));
                }
                match self.lock_retry(|| t.flock(Fd(fd), op | nb)) {
                    Err(Errno::EAGAIN) => self.defer_lock(t, n, LockJob::Flock(Fd(fd), op)),
                    r => ok0(r),
                }
            }
            SYS_mmap => {
                let (fl, fd) = (a[3] as i32, a[4] as i32);
                if fl & MAP_ANONYMOUS != 0 || !is_uvfs(fd) || !sys::is_placeholder(pid, fd) {
                    return Ok(Answer::Continue);
                }
                if fl & MAP_PRIVATE == 0 {
                    if lock(&self.said).insert("mmap".into()) {
                        log!(
                            "uvfs run: a shared mmap of a file that exists only in uvfs is not \
                             supported (it would not stay coherent with the file; ENODEV)"
                        );
                    }
                    return Err(ENODEV);
                }
                self.mmap_private(pr, n, fd)
            }
            SYS_sendfile | SYS_splice | SYS_tee | SYS_copy_file_range => {
                // (in, in offset pointer, out, out offset pointer, count, flags)
                let (fin, pin, fout, pout, count, flags) = match n.nr {
                    SYS_sendfile => (fdarg(1), a[2], fdarg(0), 0, a[3], 0),
                    _ => (fdarg(0), a[1], fdarg(2), a[3], a[4], a[5]),
                };
                let (uin, uout) = (is_uvfs(fin), is_uvfs(fout));
                if !uin && !uout {
                    return Ok(Answer::Continue);
                }
                if n.nr == SYS_splice || n.nr == SYS_tee || !(uin && uout) {
                    // One end is not a uvfs file: Linux's answer for files that cannot be
                    // spliced or copied between (copy_file_range across file systems:
                    // EXDEV; sendfile and splice from a file without splice: EINVAL).
                    // Callers (coreutils, python's shutil) fall back to read and write.
                    return Err(if n.nr == SYS_copy_file_range {
                        EXDEV
                    } else {
                        EINVAL
                    });
                }
                if flags != 0 {
                    return Err(EINVAL);
                }
                // An O_APPEND destination: copy_file_range EBADF, sendfile EINVAL
                // (`generic_copy_file_checks`, `do_sendfile`).
                let outfl = t.fcntl(Fd(fout), Fcntl::GetFl).map_err(raw)?;
                if outfl & O_APPEND != 0 {
                    return Err(if n.nr == SYS_copy_file_range {
                        EBADF
                    } else {
                        EINVAL
                    });
                }
                let offset = |ptr: u64| -> Result<Option<i64>, i32> {
                    if ptr == 0 {
                        return Ok(None);
                    }
                    let mut b = [0u8; 8];
                    sys::read_mem(pid, ptr, &mut b)?;
                    let o = i64::from_ne_bytes(b);
                    if o < 0 {
                        Err(EINVAL)
                    } else {
                        Ok(Some(o))
                    }
                };
                let (oin, oout) = (offset(pin)?, offset(pout)?);
                // Overlapping ranges of one file: EINVAL (`generic_copy_file_checks`).
                if n.nr == SYS_copy_file_range {
                    let (si, so) = (
                        t.fstat(Fd(fin)).map_err(raw)?,
                        t.fstat(Fd(fout)).map_err(raw)?,
                    );
                    if (si.st_dev, si.st_ino) == (so.st_dev, so.st_ino) {
                        let i0 = match oin {
                            Some(o) => o,
                            None => t.lseek(Fd(fin), 0, SEEK_CUR).map_err(raw)?,
                        };
                        let o0 = match oout {
                            Some(o) => o,
                            None => t.lseek(Fd(fout), 0, SEEK_CUR).map_err(raw)?,
                        };
                        let len = count.min(i64::MAX as u64) as i64;
                        if i0 < o0.saturating_add(len) && o0 < i0.saturating_add(len) {
                            return Err(EINVAL);
                        }
                    }
                }
                // One chunk per call: both calls may copy less than asked; callers loop.
                let mut buf = vec![0u8; (count as usize).min(CHUNK)];
                let k = match oin {
                    Some(o) => t.pread(Fd(fin), &mut buf, o),
                    None => t.read(Fd(fin), &mut buf),
                }
                .map_err(raw)?;
                let w = match oout {
                    Some(o) => t.pwrite(Fd(fout), &buf[..k], o),
                    None => t.write(Fd(fout), &buf[..k]),
                }
                .map_err(raw)?;
                if w < k && oin.is_none() {
                    // Give back what was read but not written.
                    let _ = t.lseek(Fd(fin), w as i64 - k as i64, SEEK_CUR);
                }
                if let Some(o) = oin {
                    sys::write_mem(pid, pin, &(o + w as i64).to_ne_bytes())?;
                }
                if let Some(o) = oout {
                    sys::write_mem(pid, pout, &(o + w as i64).to_ne_bytes())?;
                }
                val(w)
            }
            SYS_clone | SYS_clone3 | SYS_fork | SYS_vfork => {
                let flags = match n.nr {
                    SYS_clone => a[0],
                    SYS_clone3 => {
                        let mut b = [0u8; 8];
                        sys::read_mem(pid, a[0], &mut b)?;
                        u64::from_ne_bytes(b)
                    }
                    SYS_vfork => (CLONE_VM | CLONE_VFORK) as u64,
                    _ => 0,
                };
                if flags & CLONE_THREAD as u64 == 0 {
                    let task = if flags & CLONE_FILES as u64 != 0 {
                        t.clone_thread()
                    } else {
                        t.fork()
                    };
                    let last_pid = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                        .unwrap_or(0);
                    let mut pending = lock(&self.pending);
                    pending.retain(|p| p.when.elapsed() < PENDING_TTL);
                    if pending.len() >= MAX_PENDING {
                        pending.pop_front();
                    }
                    pending.push_back(PendingFork {
                        parent: tgid,
                        last_pid,
                        task,
                        max_fd: pr.max_fd,
                        exe: pr.exe.clone(),
                        when: std::time::Instant::now(),
                    });
                }
                Ok(Answer::Continue)
            }
            SYS_execve => {
                let p = path(0)?;
                self.execve(pr, n, &p)
            }
            SYS_openat2 => self.unsupported("openat2"),
            SYS_execveat => self.unsupported("execveat"),
            SYS_utime | SYS_utimes | SYS_futimesat => {
                self.unsupported("utime/utimes/futimesat (use utimensat)")
            }
            SYS_setxattr | SYS_lsetxattr | SYS_fsetxattr | SYS_getxattr | SYS_lgetxattr
            | SYS_fgetxattr | SYS_listxattr | SYS_llistxattr | SYS_flistxattr | SYS_removexattr
            | SYS_lremovexattr | SYS_fremovexattr => {
                let fd_call = matches!(
                    n.nr,
                    SYS_fsetxattr | SYS_fgetxattr | SYS_flistxattr | SYS_fremovexattr
                );
                // The file: (dirfd, path, flags) as the *xattrat calls take it.
                let (d, p, fl) = if fd_call {
                    if !is_uvfs(fdarg(0)) {
                        return Ok(Answer::Continue);
                    }
                    (Fd(fdarg(0)), Vec::new(), AtFlags::EMPTY_PATH)
                } else {
                    let nofollow = matches!(
                        n.nr,
                        SYS_lsetxattr | SYS_lgetxattr | SYS_llistxattr | SYS_lremovexattr
                    );
                    let fl = if nofollow {
                        AtFlags::SYMLINK_NOFOLLOW
                    } else {
                        AtFlags::empty()
                    };
                    (Fd::AT_FDCWD, path(0)?, fl)
                };
                // XATTR_NAME_MAX: a longer name is ERANGE, as Linux's `import_xattr_name`.
                let name = |i: usize| -> Result<Vec<u8>, i32> {
                    sys::read_cstr(pid, a[i], 255).map_err(|e| {
                        if e == ENAMETOOLONG {
                            ERANGE
                        } else {
                            e
                        }
                    })
                };
                match n.nr {
                    SYS_getxattr | SYS_lgetxattr | SYS_fgetxattr => {
                        let nm = name(1)?;
                        let mut buf = vec![0u8; (a[3] as usize).min(XATTR_SIZE_MAX)];
                        let k = t
                            .getxattrat(d, p.as_slice(), fl, &nm, &mut buf)
                            .map_err(raw)?;
                        sys::write_mem(pid, a[2], &buf[..k.min(buf.len())])?;
                        val(k)
                    }
                    SYS_setxattr | SYS_lsetxattr | SYS_fsetxattr => {
                        let nm = name(1)?;
                        if a[3] as usize > XATTR_SIZE_MAX {
                            return Err(E2BIG);
                        }
                        let mut v = vec![0u8; a[3] as usize];
                        sys::read_mem(pid, a[2], &mut v)?;
                        ok0(t.setxattrat(d, p.as_slice(), fl, &nm, &v, a[4] as u32))
                    }
                    SYS_listxattr | SYS_llistxattr | SYS_flistxattr => {
                        let mut buf = vec![0u8; (a[2] as usize).min(XATTR_LIST_MAX)];
                        let k = t.listxattrat(d, p.as_slice(), fl, &mut buf).map_err(raw)?;
                        sys::write_mem(pid, a[1], &buf[..k.min(buf.len())])?;
                        val(k)
                    }
                    _ => {
                        let nm = name(1)?;
                        ok0(t.removexattrat(d, p.as_slice(), fl, &nm))
                    }
                }
            }
            SYS_inotify_add_watch => self.unsupported("inotify_add_watch"),
            SYS_name_to_handle_at => self.unsupported("name_to_handle_at"),
            // It would open any host file by its inode number, around the binds (Linux
            // needs CAP_DAC_READ_SEARCH, which a root program has): refused as a mount is.
            SYS_open_by_handle_at => Err(EPERM),
            SYS_fanotify_mark => self.unsupported("fanotify_mark"),
            SYS_uselib | SYS_acct | SYS_swapon | SYS_quotactl => Err(EPERM),
            463..=466 => self.unsupported("setxattrat/getxattrat/listxattrat/removexattrat"),
            467 => self.unsupported("open_tree_attr"),
            468 | 469 => self.unsupported("file_getattr/file_setattr"),
            SYS_io_uring_setup => self.unsupported("io_uring"),
            SYS_unshare => {
                // A thread that leaves its process's descriptor table gets a uvfs table of
                // its own (a copy, as the kernel's), kept in `threads`; the calls of the
                // program's other threads keep the old one. Leaving only the file-system
                // context (CLONE_FS without CLONE_FILES) in a multi-threaded process would
                // need a task sharing a table under another lock: refused.
                let fl = a[0] as i32;
                if fl & CLONE_NEWUSER != 0 {
                    // New credentials: all capabilities, in the new namespace only.
                    pr.creds.stale(pid);
                }
                if fl & (CLONE_FILES | CLONE_FS) == 0 {
                    return Ok(Answer::Continue);
                }
                let threads = proc_status(tgid)
                    .and_then(|st| status_field(&st, "Threads:"))
                    .unwrap_or(2);
                if threads <= 1 {
                    // Nothing shared with another thread to leave.
                    return Ok(Answer::Continue);
                }
                if fl & CLONE_FILES == 0 {
                    return self.unsupported("unshare(CLONE_FS) alone in a multi-threaded process");
                }
                let mut task = pr.task.clone_thread();
                task.unshare_files();
                if fl & CLONE_FS != 0 {
                    task.unshare_fs();
                }
                // Its credentials: this thread's, which the task carries now (unless a
                // CLONE_NEWUSER above made them stale: read at its next call then).
                let thread_creds = if fl & CLONE_NEWUSER != 0 {
                    ThreadCreds::default()
                } else {
                    ThreadCreds::carried(pid, &task)
                };
                let own = Arc::new(Mutex::new(Proc {
                    task,
                    creds: thread_creds,
                    pidfd: thread_pidfd(pid)?,
                    max_fd: pr.max_fd,
                    exec_pending: None,
                    exe: pr.exe.clone(),
                    exe_pending: None,
                    restore: None,
                }));
                // Lock order: a Proc, then `threads` (no holder of `threads` waits for a
                // Proc: `sweep` only try-locks them).
                let fd = sys::pidfd_open(pid, PIDFD_THREAD).ok();
                lock(&self.threads).insert(pid, (tgid, fd, Some(own)));
                Ok(Answer::Continue)
            }
            SYS_mount | SYS_umount2 | SYS_pivot_root | SYS_open_tree | SYS_move_mount
            | SYS_fsopen | SYS_fsconfig | SYS_fsmount | SYS_fspick | SYS_mount_setattr => {
                if lock(&self.said).insert("mount".into()) {
                    log!("uvfs run: mount calls are refused: they would change the host's mounts (EPERM)");
                }
                Err(EPERM)
            }
            SYS_bind | SYS_connect => {
                // struct sockaddr_un: sa_family_t, then the path; abstract names (a NUL
                // first byte) and other families are not paths. `addrlen` is an `int`;
                // one past `sizeof(struct sockaddr_un)` (110) or negative is no Unix
                // socket's address: the kernel refuses it (EINVAL: `move_addr_to_kernel`,
                // `unix_validate_addr`; another family's socket its own errno) with
                // nothing made, so it runs natively, as one too short for a path does.
                let len = a[2] as i32;
                if !(3..=110).contains(&len) {
                    return Ok(Answer::Continue);
                }
                let mut sa = vec![0u8; len as usize];
                if sys::read_mem(pid, a[1], &mut sa).is_err() {
                    return Ok(Answer::Continue);
                }
                if u16::from_ne_bytes([sa[0], sa[1]]) != AF_UNIX as u16 || sa[2] == 0 {
                    return Ok(Answer::Continue);
                }
                let end = sa[2..]
                    .iter()
                    .position(|&b| b == 0)
                    .map_or(sa.len(), |i| i + 2);
                let sp = proc_self(sa[2..end].to_vec(), tgid, pid);
                if n.nr == SYS_bind {
                    return self.bind_unix(t, n, &sp);
                }
                // connect, as Linux's `unix_find_bsd`: the walk's errno, write permission
                // on the socket file (EACCES), a socket (else ECONNREFUSED).
                let st = t
                    .fstatat(Fd::AT_FDCWD, sp.as_slice(), AtFlags::empty())
                    .map_err(raw)?;
                t.faccessat2(Fd::AT_FDCWD, sp.as_slice(), W_OK as u32, AtFlags::EACCESS)
                    .map_err(raw)?;
                if st.st_mode & 0o170000 != 0o140000 {
                    return Err(ECONNREFUSED);
                }
                // The host's socket when uvfs's view has that very socket (a host bind at
                // the same path, as /run's).
                let theirs = host_stat_from_cwd(pid, &sp);
                if theirs
                    .is_some_and(|(_, ino, mode)| ino == st.st_ino && mode & 0o170000 == 0o140000)
                {
                    return Ok(Answer::Continue);
                }
                // A socket a program bound in uvfs: its host twin; none (a socket file
                // made by mknod, or bound outside `uvfs run`) is a socket nobody listens
                // on, as on Linux.
                let host = lock(&self.sockets).get(&(st.st_dev, st.st_ino)).cloned();
                match host {
                    Some(host) => connect_unix(n, &host, &self.listener),
                    None => Err(ECONNREFUSED),
                }
            }
            other => self.unsupported(&format!("syscall {other}")),
        }
    }

    /// `open`/`openat`/`creat`: the file opened in uvfs, then its kernel descriptor
    /// installed at the number the kernel picks; the uvfs descriptor moved to that number.
    /// A device on a host bind is handed over as the host's device and left to the kernel.
    fn open(&self, pr: &mut Proc, n: &Notif, d: Fd, p: &[u8], flags: u32, mode: u32) -> R {
        let t = &pr.task;
        let cloexec = flags & libc::O_CLOEXEC as u32 != 0;
        let oflags = OpenFlags::from_bits_retain(flags);
        let fd = match self.txtbsy_retry(|| t.openat(d, p, oflags, mode)) {
            // uvfs drives no devices: a device node on a host bind opens the host's.
            Err(Errno::ENXIO) => return self.open_device(pr, n, d, p, flags),
            r => r.map_err(raw)?,
        };
        self.install(pr, n, fd, cloexec)
    }

    /// An open of `/proc/self/fd/M` (or `/dev/fd/M`, `/dev/stdin`...) for uvfs descriptor
    /// `m`: a new open file of the same file with `flags` (Linux's magic-link reopen,
    /// `dentry_open` with the permission checks of the new access), installed as `open`
    /// installs.
    fn reopen(&self, pr: &mut Proc, n: &Notif, m: i32, flags: u32) -> R {
        let t = &pr.task;
        let cloexec = flags & libc::O_CLOEXEC as u32 != 0;
        let old = t.fget_file(Fd(m)).map_err(raw)?;
        let oflags = OpenFlags::from_bits_retain(flags) & !(OpenFlags::CREAT | OpenFlags::EXCL);
        let f = t.dentry_open(old.file().dentry(), oflags).map_err(raw)?;
        let fd = t.install_file(f, cloexec).map_err(raw)?;
        self.install(pr, n, fd, cloexec)
    }

    /// Installs uvfs descriptor `fd` (just opened) in the program: its kernel descriptor
    /// (the host file, or a placeholder) at the number the kernel picks, and the uvfs
    /// descriptor moved there. A device is handed over as the host's and leaves uvfs.
    fn install(&self, pr: &mut Proc, n: &Notif, fd: Fd, cloexec: bool) -> R {
        let t = &pr.task;
        let st = match t.fstat(fd) {
            Ok(st) => st,
            Err(e) => {
                let _ = t.close(fd);
                return Err(raw(e));
            }
        };
        let kind = st.st_mode & 0o170000;
        let device = kind == 0o020000 || kind == 0o060000;
        let src = match t.host_fd(fd) {
            Ok(h) => h,
            Err(_) if device => {
                let _ = t.close(fd);
                return Err(libc::ENXIO);
            }
            Err(_) => match sys::placeholder() {
                Ok(h) => h,
                Err(e) => {
                    let _ = t.close(fd);
                    return Err(e);
                }
            },
        };
        let k = match sys::addfd(self.listener.as_fd(), n.id, src.as_fd(), None, cloexec) {
            Ok(k) => k,
            Err(e) => {
                let _ = t.close(fd);
                return Err(e);
            }
        };
        if device {
            // The host's device: the program's own from now on.
            let _ = t.close(fd);
            return val(k);
        }
        if k != fd.0 {
            let fl = if cloexec {
                OpenFlags::CLOEXEC
            } else {
                OpenFlags::empty()
            };
            let r = t.dup3(fd, Fd(k), fl);
            let _ = t.close(fd);
            r.map_err(raw)?;
        }
        pr.max_fd = pr.max_fd.max(k);
        val(k)
    }

    /// A device node on a host bind: the permission uvfs's view gives for the access asked,
    /// then the host's device installed, left to the kernel from then on (as the
    /// program's own descriptors are).
    fn open_device(&self, pr: &mut Proc, n: &Notif, d: Fd, p: &[u8], flags: u32) -> R {
        let t = &pr.task;
        let oflags = OpenFlags::from_bits_retain(flags);
        let want = match oflags.access_mode() {
            0 => 4,
            1 => 2,
            _ => 6,
        };
        let fl = if oflags.contains(OpenFlags::NOFOLLOW) {
            AtFlags::SYMLINK_NOFOLLOW
        } else {
            AtFlags::empty()
        };
        t.faccessat2(d, p, want, fl | AtFlags::EACCESS)
            .map_err(raw)?;
        let pf = OpenFlags::PATH | OpenFlags::CLOEXEC | (oflags & OpenFlags::NOFOLLOW);
        let fd = t.openat(d, p, pf, 0).map_err(raw)?;
        let host = t.host_fd_as(fd, oflags);
        let _ = t.close(fd);
        let host = host.map_err(|_| libc::ENXIO)?;
        let cloexec = flags & libc::O_CLOEXEC as u32 != 0;
        val(sys::addfd(
            self.listener.as_fd(),
            n.id,
            host.as_fd(),
            None,
            cloexec,
        )?)
    }

    /// `mmap(MAP_PRIVATE)` of a file only uvfs holds: the kernel descriptor's placeholder
    /// is replaced by a memfd holding the file's contents as they are now, which the kernel
    /// then maps (a private mapping is a copy; Linux may show later writes to pages not
    /// yet copied, this shows none).
    fn mmap_private(&self, pr: &mut Proc, n: &Notif, fd: i32) -> R {
        let t = &pr.task;
        let st = t.fstat(Fd(fd)).map_err(raw)?;
        if st.st_mode & 0o170000 != 0o100000 {
            return Err(libc::ENODEV);
        }
        let f = t.fget_file(Fd(fd)).map_err(raw)?;
        // Linux checks read access at mmap: EACCES for a descriptor not open for reading.
        let mem = memfd_copy(&f).map_err(|e| if e == libc::EBADF { libc::EACCES } else { e })?;
        let cloexec = t.fcntl(Fd(fd), Fcntl::GetFd) == Ok(libc::FD_CLOEXEC);
        sys::addfd(self.listener.as_fd(), n.id, mem.as_fd(), Some(fd), cloexec)?;
        Ok(Answer::Continue)
    }

    /// `dup`/`F_DUPFD`: the kernel descriptor duplicated at the lowest free number `>= min`
    /// of the program's table, and the uvfs descriptor at the same number.
    fn dup_to(&self, pr: &mut Proc, n: &Notif, fd: i32, min: i32, cloexec: bool) -> R {
        let src = sys::pidfd_getfd(thread_pidfd(n.pid)?.as_fd(), fd)?;
        let got = if min == 0 {
            // `dup`: the kernel picks the lowest free number itself, atomically.
            sys::addfd(self.listener.as_fd(), n.id, src.as_fd(), None, cloexec)?
        } else {
            // `F_DUPFD` above `min`: ADDFD has no "lowest free from", so the number comes
            // from the table as /proc shows it. A thread of the program opening a
            // descriptor natively between the scan and the ADDFD could lose it (docs/run.md).
            let open: HashSet<i32> = std::fs::read_dir(format!("/proc/{}/fd", n.pid))
                .map_err(|_| libc::ESRCH)?
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect();
            let mut k = min;
            while open.contains(&k) {
                k += 1;
            }
            // ADDFD at `k` fails with EBADF past the program's RLIMIT_NOFILE: EINVAL when
            // `min` itself is past it (fcntl(2)), else EMFILE.
            sys::addfd(self.listener.as_fd(), n.id, src.as_fd(), Some(k), cloexec).map_err(|e| {
                match e {
                    libc::EBADF if k == min => libc::EINVAL,
                    libc::EBADF => libc::EMFILE,
                    e => e,
                }
            })?
        };
        let fl = if cloexec {
            OpenFlags::CLOEXEC
        } else {
            OpenFlags::empty()
        };
        pr.task.dup3(Fd(fd), Fd(got), fl).map_err(raw)?;
        pr.max_fd = pr.max_fd.max(got);
        val(got)
    }

    /// `execve` of the file uvfs's view resolves `p` to (`exec` permission and `noexec`
    /// mounts checked by uvfs's `open_exec`):
    /// - when the kernel would find that very host file at `p` itself (a host bind at the
    ///   same path: the same host inode from the program's kernel working directory), the
    ///   call runs as it is;
    /// - otherwise the file (the host file, or for a file only uvfs holds a memfd copy of
    ///   it) is installed in the program and the path string in the program's memory is
    ///   rewritten to name it: for a binary, to its last component, resolved in the exec
    ///   directory (`execve_relative`, descriptor `EXEC_FD`, close-on-exec); for a script,
    ///   to `/dev/fd/K` of a descriptor K it keeps open (its interpreter reads
    ///   `/dev/fd/K`, as `fexecve(3)` of a script needs), which needs the string to be at
    ///   least that long. A read-only or too short string: `EACCES` with one line saying
    ///   so.
    fn execve(&self, pr: &mut Proc, n: &Notif, p: &[u8]) -> R {
        let t = &pr.task;
        // Exec permission and noexec mounts checked; the handle reads (as the kernel's
        // exec does, read permission or not) and is installed for the calls below.
        let fh = t.open_exec(Fd::AT_FDCWD, p).map_err(raw)?;
        let fd = t.install_file(fh, true).map_err(raw)?;
        let host = t.host_fd(fd).ok();
        let mine = host.as_ref().and_then(|h| fstat_host(h.as_raw_fd()));
        // Only an absolute path can name a host file as it is: the kernel's working
        // directory is the exec directory, which holds nothing else.
        let theirs = (p.first() == Some(&b'/'))
            .then(|| host_stat_from_cwd(n.pid, p).map(|(dev, ino, _)| (dev, ino)))
            .flatten();
        if mine.is_some() && mine == theirs {
            // The kernel runs the host file itself, and denies writing it.
            let _ = t.close(fd);
            pr.exec_pending = Some(ExecPending::of(n));
            return Ok(Answer::Continue);
        }
        let exe = t.fget_file(fd).map_err(raw)?;
        let mut head = [0u8; 2];
        let script = t.pread(fd, &mut head, 0) == Ok(2) && &head == b"#!";
        let src = match host {
            Some(h) => Ok(h),
            None => memfd_copy(&exe),
        };
        let _ = t.close(fd);
        let src = src?;
        if p.first() != Some(&b'/') {
            let r = self.execve_relative(pr, n, p, src.as_fd(), script);
            if r.is_ok() {
                pr.exe_pending = Some((pr.exe.replace(exe), EXEC_FD));
            }
            return r;
        }
        // What the path string becomes, and the descriptor the file is at in the program.
        // A binary: its last component, which the kernel resolves in the exec directory
        // (`execve_relative`, at `EXEC_FD`), so that a program that passes the same string
        // as `argv[0]` (dash, busybox's shell) keeps its base name there (busybox picks
        // its applet by it); it always fits, being part of the string. A script:
        // `/dev/fd/K`, which its interpreter opens.
        let (new, k) = if script {
            let k = sys::addfd(self.listener.as_fd(), n.id, src.as_fd(), None, false)?;
            (format!("/dev/fd/{k}\0").into_bytes(), k)
        } else {
            let base = p
                .rsplit(|&b| b == b'/')
                .find(|c| !c.is_empty())
                .unwrap_or(p);
            self.execve_relative(pr, n, base, src.as_fd(), false)?;
            ([base, b"\0"].concat(), EXEC_FD)
        };
        // The string's own storage: its length as read, plus its NUL.
        let fits = p.len() + 1 >= new.len();
        let mut orig = p[..new.len().min(p.len())].to_vec();
        orig.resize(new.len(), 0);
        if !fits || sys::write_mem(n.pid, n.args[0], &new).is_err() {
            // K stays open in the program: a descriptor it did not ask for, closed at its
            // next exec (binary) or left (script); the call fails.
            pr.exec_pending = None;
            log!(
                "uvfs run: execve {}: the file is not the host's at that path, and the path \
                 string is {} to be rewritten to {}; running it is not supported (EACCES)",
                String::from_utf8_lossy(p),
                if fits { "read-only" } else { "too short" },
                String::from_utf8_lossy(&new[..new.len() - 1])
            );
            return Err(libc::EACCES);
        }
        pr.restore = Some((n.args[0], orig, k));
        pr.exe_pending = Some((pr.exe.replace(exe), k));
        pr.exec_pending = Some(ExecPending::of(n));
        Ok(Answer::Continue)
    }

    /// An open of the program's own mount table (see [`mount_table`]): a read-only memfd
    /// holding the lines Linux's `show_mountinfo` (`info`) or `show_vfsmnt` would print for
    /// uvfs's mounts as the process sees them (`Task::mountinfo`), at the number the kernel
    /// picks. The source field reads `uvfs`, the super block options `rw`.
    ///
    /// # Errors
    /// `EACCES` for an open for writing (the files are 0444; Linux has no write for them).
    fn open_mount_table(&self, pr: &Proc, n: &Notif, info: bool, flags: u32) -> R {
        if flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32 {
            return Err(libc::EACCES);
        }
        let mut text = Vec::new();
        for m in pr.task.mountinfo() {
            let mut opts = String::from(if m.flags.contains(MountFlags::RDONLY) {
                "ro"
            } else {
                "rw"
            });
            for (f, name) in [
                (MountFlags::NOSUID, ",nosuid"),
                (MountFlags::NODEV, ",nodev"),
                (MountFlags::NOEXEC, ",noexec"),
            ] {
                if m.flags.contains(f) {
                    opts.push_str(name);
                }
            }
            let dev = m.dev as libc::dev_t;
            let (maj, min) = (libc::major(dev), libc::minor(dev));
            if info {
                text.extend_from_slice(
                    format!("{} {} {maj}:{min} ", m.mnt_id, m.parent_id).as_bytes(),
                );
                mangle(&mut text, &m.root);
                text.push(b' ');
                mangle(&mut text, &m.mount_point);
                text.extend_from_slice(format!(" {opts} - {} uvfs rw\n", m.fs_type).as_bytes());
            } else {
                text.extend_from_slice(b"uvfs ");
                mangle(&mut text, &m.mount_point);
                text.extend_from_slice(format!(" {} {opts} 0 0\n", m.fs_type).as_bytes());
            }
        }
        let mem = sys::placeholder()?;
        sys::pwrite_all(mem.as_fd(), &text, 0)?;
        // A read-only open file of it, as the program asked for.
        let ro = std::fs::File::open(format!("/proc/self/fd/{}", mem.as_raw_fd()))
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        let cloexec = flags & libc::O_CLOEXEC as u32 != 0;
        let k = sys::addfd(self.listener.as_fd(), n.id, ro.as_fd(), None, cloexec)?;
        val(k)
    }

    /// `bind` of the program's Unix socket (descriptor `args[0]`) to the uvfs path `p`:
    /// the socket file is made in uvfs (`S_IFSOCK`, mode 0777 less the umask, as Linux's
    /// `unix_bind_bsd`), and the socket itself is bound to a fresh host path in the
    /// private exec directory, which `connect` to the uvfs path then reaches. A socket
    /// of another family, or a descriptor that is not a socket, is left to the kernel
    /// (its errno: `EINVAL`, `EAFNOSUPPORT`, `ENOTSOCK`, `EBADF`).
    ///
    /// # Errors
    /// In Linux's order: the walk's and mknod's errnos (`ENOENT`, `EACCES`, `EROFS`, ...),
    /// `EADDRINUSE` (the name exists), `EINVAL` (the socket is bound already; the new
    /// file is removed again), the host bind's errno.
    fn bind_unix(&self, t: &Task, n: &Notif, p: &[u8]) -> R {
        let fd = n.args[0] as i32;
        let Ok(sock) = sys::pidfd_getfd(thread_pidfd(n.pid)?.as_fd(), fd) else {
            return Ok(Answer::Continue);
        };
        if rustix::net::sockopt::socket_domain(&sock).ok() != Some(AddressFamily::UNIX) {
            return Ok(Answer::Continue);
        }
        t.mknodat(Fd::AT_FDCWD, p, libc::S_IFSOCK | 0o777, 0)
            .map_err(|e| match e {
                Errno::EEXIST => libc::EADDRINUSE,
                e => raw(e),
            })?;
        let undo = |e: i32| {
            let _ = t.unlinkat(Fd::AT_FDCWD, p, AtFlags::empty());
            e
        };
        // Bound already: a path, an abstract or an autobound name, so more than the
        // family (rustix's `SocketAddrUnix::is_unnamed` is false for an unbound socket's
        // address, which it builds as an empty path with its NUL).
        let bound = rustix::net::getsockname(&sock)
            .is_ok_and(|a| a.addr_len() as usize > std::mem::size_of::<libc::sa_family_t>());
        if bound {
            return Err(undo(libc::EINVAL));
        }
        let st = t
            .fstatat(Fd::AT_FDCWD, p, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| undo(raw(e)))?;
        // Relaxed: only a unique number is wanted; the host bind that follows publishes
        // nothing through it.
        let k = self.next_socket.fetch_add(1, Ordering::Relaxed);
        let host = self.execdir.join(format!("s{k}"));
        SocketAddrUnix::new(host.as_path())
            .and_then(|a| rustix::net::bind(&sock, &a))
            .map_err(|e| undo(e.raw_os_error()))?;
        lock(&self.sockets).insert((st.st_dev, st.st_ino), host);
        val(0)
    }

    /// A relative `execve` (`./a.out`, `bin/test`) of a file the kernel cannot see there:
    /// the file at `EXEC_FD` in the program, and `p` made in the exec directory (the
    /// program's kernel working directory) as a symlink to `/proc/self/fd/EXEC_FD`.
    fn execve_relative(
        &self,
        pr: &mut Proc,
        n: &Notif,
        p: &[u8],
        src: BorrowedFd<'_>,
        script: bool,
    ) -> R {
        // Where the kernel resolves `p` from its working directory, EXEC_DEPTH levels
        // down the exec directory, so that up to that many `..` stay inside it.
        let mut at: Vec<&[u8]> = vec![b"d"; EXEC_DEPTH];
        let mut up_too_far = false;
        for c in p
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
        {
            if c == b".." {
                up_too_far |= at.pop().is_none();
            } else {
                at.push(c);
            }
        }
        // Out of the exec directory, or onto one of the `d` directories of the working
        // directory's own chain (a symlink there would replace it).
        let on_chain = at.len() <= EXEC_DEPTH && at.iter().all(|c| *c == b"d");
        let why = if up_too_far || on_chain {
            Some("it climbs out of the exec directory")
        } else if sys::proc_fd_link(n.pid, EXEC_FD).is_some() {
            Some("the program holds descriptor 1023")
        } else {
            None
        };
        let done = why.map_or_else(
            || {
                let mut dir = self.execdir.clone();
                for c in &at[..at.len() - 1] {
                    dir.push(std::ffi::OsStr::from_bytes(c));
                    // A symlink left by an earlier exec where a directory is needed now.
                    if dir
                        .symlink_metadata()
                        .is_ok_and(|m| m.file_type().is_symlink())
                    {
                        let _ = std::fs::remove_file(&dir);
                    }
                }
                std::fs::create_dir_all(&dir).map_err(|_| "the exec directory cannot hold it")?;
                let link = dir.join(std::ffi::OsStr::from_bytes(at[at.len() - 1]));
                let target = format!("/proc/self/fd/{EXEC_FD}");
                match std::fs::read_link(&link) {
                    Ok(t) if t.as_os_str().as_bytes() == target.as_bytes() => {}
                    _ => {
                        // A directory left by an earlier exec (`x/y`) where `x` is wanted.
                        if link.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                            let _ = std::fs::remove_dir_all(&link);
                        }
                        std::os::unix::fs::symlink(&target, &link)
                            .map_err(|_| "the exec directory cannot hold it")?;
                    }
                }
                sys::addfd(self.listener.as_fd(), n.id, src, Some(EXEC_FD), !script)
                    .map_err(|_| "descriptor 1023 is past the program's RLIMIT_NOFILE")?;
                Ok(())
            },
            Err,
        );
        if let Err(why) = done {
            log!(
                "uvfs run: execve {}: the file is not the host's at that path and {why}; \
                 running it is not supported (EACCES)",
                String::from_utf8_lossy(p)
            );
            return Err(libc::EACCES);
        }
        pr.exec_pending = Some(ExecPending::of(n));
        Ok(Answer::Continue)
    }
}

/// After an `execve` was let through, once it is over (see [`ExecPending`]): the descriptors the kernel closed on exec (their
/// numbers gone from `/proc/PID/fd`) are closed in uvfs too. A failed exec closed none.
/// `by_caller`: settled at the exec thread's own next call (else at another thread's, the
/// exec thread having gone on meanwhile: then the rewritten path string is left as it is,
/// since that thread may be using or have freed its memory; docs/run.md).
fn settle_exec(pr: &mut Proc, tgid: i32, by_caller: bool) {
    pr.exec_pending = None;
    // A new program: capabilities recomputed (a root thread's raised again, others'
    // cleared but for ambient ones), and the thread that made the call now has the thread
    // group's id.
    pr.creds.all_stale();
    // Whether the exec failed: the file's descriptor K still open (both records name the
    // same K when both are set).
    let k = pr.exe_pending.as_ref().map(|e| e.1);
    let failed = k.is_some_and(|k| exec_failed_binary(tgid, k));
    // The program the process runs now denies writing its file (`Proc::exe`); a failed
    // exec puts the old one back.
    if let Some((old, _)) = pr.exe_pending.take() {
        if failed {
            pr.exe = old;
        }
    }
    if let Some((addr, orig, _)) = pr.restore.take() {
        // The bytes go back only where the exec failed (through the process itself: a
        // vfork child's pages are its parent's), which the file's descriptor K still
        // open tells (K is close-on-exec for a binary; for a script, left open, a
        // failed exec cannot be told from a good one and nothing is put back): then the
        // caller is still inside its exec path (this is its next call), and a vfork
        // parent is still suspended (Linux releases it at a successful exec or at the
        // child's exit), so the string is still the one the exec read.
        //
        // After a successful exec nothing is written anywhere: the process's old memory
        // is gone, and a vfork parent (the same pages: vfork, posix_spawn) has been
        // running since the exec and may have freed the string and reused its memory:
        // writing the old bytes there corrupted its heap (glibc's "malloc(): unaligned
        // tcache chunk detected" under pjdfstest). Such a parent still holding the string
        // reads `/dev/fd/K` in it (see docs/run.md).
        if failed && by_caller {
            let _ = sys::write_mem(tgid, addr, &orig);
        }
    }
    for fd in 0..=pr.max_fd {
        if pr.task.fcntl(Fd(fd), Fcntl::GetFd) == Ok(libc::FD_CLOEXEC)
            && sys::proc_fd_link(tgid, fd).is_none()
        {
            let _ = pr.task.close(Fd(fd));
        }
    }
}

/// Whether descriptor `k` of `pid` is still the close-on-exec file an `execve` installed
/// (so the exec failed): its `FD_CLOEXEC` flag in /proc/PID/fdinfo.
fn exec_failed_binary(pid: i32, k: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{k}"))
        .ok()
        .and_then(|info| {
            let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
            u32::from_str_radix(flags.trim(), 8).ok()
        })
        .is_some_and(|f| f & libc::O_CLOEXEC as u32 != 0)
}

/// `/proc/self/...` and `/proc/thread-self/...` as the program means them: its own
/// process's entries (`/proc/TGID/...`, `/proc/TGID/task/TID/...`), not the supervisor's.
fn proc_self(p: Vec<u8>, tgid: i32, tid: i32) -> Vec<u8> {
    // Compared without empty and `.` components (`/proc//self/./fd/3` is
    // `/proc/self/fd/3`); harmless to drop for these pseudo paths, whose components are
    // all directories or magic links.
    let norm: Vec<u8> = if p.first() == Some(&b'/') {
        let mut out = Vec::with_capacity(p.len());
        for c in p
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
        {
            out.push(b'/');
            out.extend_from_slice(c);
        }
        out
    } else {
        return p;
    };
    let rest = |pre: &[u8]| -> Option<Vec<u8>> {
        let r = norm.strip_prefix(pre)?;
        (r.is_empty() || r[0] == b'/').then(|| r.to_vec())
    };
    for (pre, to) in [
        (&b"/proc/self"[..], format!("/proc/{tgid}")),
        (b"/proc/thread-self", format!("/proc/{tgid}/task/{tid}")),
        // On the host a symlink to /proc/self/fd, which hostfs would follow as the
        // supervisor's.
        (b"/dev/fd", format!("/proc/{tgid}/fd")),
    ] {
        if let Some(r) = rest(pre) {
            let mut out = to.into_bytes();
            out.extend_from_slice(&r);
            return out;
        }
    }
    p
}

/// Whether `p` (after [`proc_self`]) names the calling process's own mount table:
/// `Some(true)` for `/proc/TGID/mountinfo` (and its thread's), `Some(false)` for
/// `/proc/TGID/mounts`, `/proc/mounts` and `/etc/mtab` (on the host symlinks to
/// `/proc/self/mounts`, which hostfs would resolve as the supervisor's). Another
/// process's table is the host's file (see docs/run.md).
fn mount_table(p: &[u8], tgid: i32, tid: i32) -> Option<bool> {
    if p == b"/proc/mounts" || p == b"/etc/mtab" && etc_mtab_is_proc() {
        return Some(false);
    }
    // Every open passes here: nothing is built for a path outside /proc.
    if !p.starts_with(b"/proc/") {
        return None;
    }
    let own = format!("/proc/{tgid}/");
    let thread = format!("/proc/{tgid}/task/{tid}/");
    let name = p
        .strip_prefix(thread.as_bytes())
        .or_else(|| p.strip_prefix(own.as_bytes()))?;
    match name {
        b"mountinfo" => Some(true),
        b"mounts" => Some(false),
        _ => None,
    }
}

/// Whether the host's `/etc/mtab` is the usual symlink into `/proc` (`../proc/self/mounts`,
/// `/proc/mounts`), not a file of its own.
fn etc_mtab_is_proc() -> bool {
    std::fs::read_link("/etc/mtab").is_ok_and(|t| {
        let t = t.as_os_str().as_bytes();
        t.ends_with(b"proc/self/mounts") || t.ends_with(b"proc/mounts")
    })
}

/// Appends `s` with space, tab, newline and backslash as octal escapes (`\040`), as
/// Linux's `mangle` in fs/proc_namespace.c.
fn mangle(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            b => out.push(b),
        }
    }
}

/// The descriptor a magic link names: `/dev/stdin`, `/dev/stdout`, `/dev/stderr`,
/// `/dev/fd/N`, `/proc/TGID/fd/N` and `/proc/TGID/task/TID/fd/N` (after [`proc_self`]). On
/// the host these are symlinks into `/proc/self`, which hostfs would resolve as the
/// supervisor's; the program means its own descriptor.
fn magic_fd(p: &[u8], tgid: i32) -> Option<i32> {
    match p {
        b"/dev/stdin" => return Some(0),
        b"/dev/stdout" => return Some(1),
        b"/dev/stderr" => return Some(2),
        _ => {}
    }
    let num = |n: &[u8]| -> Option<i32> {
        (!n.is_empty() && n.iter().all(u8::is_ascii_digit))
            .then(|| std::str::from_utf8(n).ok()?.parse().ok())
            .flatten()
    };
    if let Some(n) = p.strip_prefix(b"/dev/fd/") {
        return num(n);
    }
    let rest = p.strip_prefix(format!("/proc/{tgid}/").as_bytes())?;
    if let Some(n) = rest.strip_prefix(b"fd/") {
        return num(n);
    }
    let rest = rest.strip_prefix(b"task/")?;
    let slash = rest.iter().position(|&b| b == b'/')?;
    num(rest[slash + 1..].strip_prefix(b"fd/")?)
}

/// `connect` of the program's socket (descriptor `args[0]` of `n`) to `host`, the host
/// twin of a socket bound in uvfs, made by the supervisor on a duplicate of the socket
/// (the same socket). The program's own timeout and `O_NONBLOCK` apply as on Linux: a
/// non-blocking socket gets `EAGAIN` at once when the listener's backlog is full; a
/// blocking one waits, in slices of 100 ms (`SO_SNDTIMEO` lowered for the call and put
/// back) so that the wait ends when the program dies; the program's own `SO_SNDTIMEO`,
/// when it has one, still ends it with `EAGAIN` (Linux `unix_wait_for_peer`).
///
/// # Errors
/// The kernel's `connect` errnos (`ECONNREFUSED` when the binder closed its socket,
/// `EPROTOTYPE`, `EISCONN`, `EAGAIN`); `ESRCH` when the program is gone.
fn connect_unix(n: &Notif, host: &Path, listener: &OwnedFd) -> R {
    use rustix::net::sockopt::{set_socket_timeout, socket_timeout, Timeout};
    let raw = |e: rustix::io::Errno| e.raw_os_error();
    let sock = sys::pidfd_getfd(thread_pidfd(n.pid)?.as_fd(), n.args[0] as i32)?;
    let addr = SocketAddrUnix::new(host).map_err(raw)?;
    let theirs = socket_timeout(&sock, Timeout::Send).map_err(raw)?;
    let slice = std::time::Duration::from_millis(100).min(theirs.unwrap_or(Duration::MAX));
    let nonblocking = rustix::fs::fcntl_getfl(&sock)
        .map_err(raw)?
        .contains(rustix::fs::OFlags::NONBLOCK);
    let start = std::time::Instant::now();
    set_socket_timeout(&sock, Timeout::Send, Some(slice)).map_err(raw)?;
    let r = loop {
        match rustix::net::connect(&sock, &addr) {
            Err(rustix::io::Errno::AGAIN) if !nonblocking => {
                let expired = theirs.is_some_and(|d| start.elapsed() >= d);
                if expired || !sys::id_valid(listener.as_fd(), n.id) {
                    break Err(libc::EAGAIN);
                }
            }
            r => break r.map_err(raw),
        }
    };
    let _ = set_socket_timeout(&sock, Timeout::Send, theirs);
    r.and_then(|()| val(0))
}

/// A pidfd of thread `tid`, whose descriptor table `pidfd_getfd` reads (a thread may have
/// its own); the process's on kernels without `PIDFD_THREAD` (6.9).
fn thread_pidfd(tid: i32) -> Result<OwnedFd, i32> {
    sys::pidfd_open(tid, PIDFD_THREAD)
        .or_else(|_| sys::pidfd_open(tid, 0))
        .map_err(|e| e.raw_os_error().unwrap_or(libc::ESRCH))
}

/// Whether thread `tid` of `tgid` is alive: its pidfd, or (without one) its
/// `/proc/TGID/task/TID` entry.
fn thread_alive(tgid: i32, tid: i32, fd: &Option<OwnedFd>) -> bool {
    match fd {
        Some(fd) => !sys::exited(fd.as_fd()),
        None => Path::new(&format!("/proc/{tgid}/task/{tid}")).exists(),
    }
}

/// A memfd holding the contents of `f` as they are now: what the kernel maps or runs for a
/// file only uvfs holds.
///
/// # Errors
/// The read's errno (`EBADF` for a file not open for reading); memfd_create's.
fn memfd_copy(f: &uvfs::OpenFile) -> Result<OwnedFd, i32> {
    let mem = sys::placeholder()?;
    let mut buf = vec![0u8; CHUNK];
    let mut off = 0u64;
    loop {
        let k = f
            .read_at(&mut buf, off)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        if k == 0 {
            return Ok(mem);
        }
        sys::pwrite_all(mem.as_fd(), &buf[..k], off)?;
        off += k as u64;
    }
}

/// /proc/PID/status.
fn proc_status(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status")).ok()
}

/// Field `name` (`"Tgid:"`, `"PPid:"`, `"Threads:"`) of a /proc/PID/status text.
fn status_field(status: &str, name: &str) -> Option<i32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
}

/// A zeroed `struct stat`.
fn unsafe_zeroed_stat() -> libc::stat {
    // SAFETY: `struct stat` is plain integers; all-zero is valid.
    unsafe { std::mem::zeroed() }
}

/// `(st_dev, st_ino, st_mode)` of `path` as process `pid`'s kernel resolves it (from its
/// kernel working directory), without following a final symlink's target check.
fn host_stat_from_cwd(pid: i32, path: &[u8]) -> Option<(u64, u64, u32)> {
    let cwd = std::fs::File::open(format!("/proc/{pid}/cwd")).ok()?;
    let c = CString::new(path).ok()?;
    let mut st = unsafe_zeroed_stat();
    // SAFETY: `c` is NUL-terminated; `st` is a stat the call fills.
    let r = unsafe { libc::fstatat(cwd.as_raw_fd(), c.as_ptr(), &mut st, 0) };
    (r == 0).then_some((st.st_dev, st.st_ino, st.st_mode))
}

/// `(st_dev, st_ino)` of a host descriptor.
fn fstat_host(fd: i32) -> Option<(u64, u64)> {
    let mut st = unsafe_zeroed_stat();
    // SAFETY: `st` is a stat the call fills.
    let r = unsafe { libc::fstat(fd, &mut st) };
    (r == 0).then_some((st.st_dev, st.st_ino))
}

/// `read`/`pread` of `len` bytes into the program's `buf`, through a bounded buffer.
fn read_into(t: &Task, pid: i32, fd: Fd, buf: u64, len: u64, off: Option<i64>) -> R {
    // `access_ok`: a range past the user address space is EFAULT before anything is read.
    if buf.checked_add(len).is_none_or(|end| end > TASK_SIZE) {
        return Err(libc::EFAULT);
    }
    let len = len.min(MAX_RW_COUNT) as usize;
    // A buffer that faults part way gets a short read, and the position moves only by
    // what the program took (the rest is seeked back over), as Linux's `copy_to_user`
    // (EFAULT when nothing fit). The common case is one read.
    let mut tmp = vec![0u8; len.min(CHUNK)];
    let mut done = 0usize;
    let mut fault = false;
    while done < len {
        let want = (len - done).min(CHUNK);
        let r = match off {
            Some(o) => t.pread(fd, &mut tmp[..want], o + done as i64),
            None => t.read(fd, &mut tmp[..want]),
        };
        match r {
            Ok(0) => break,
            Ok(k) => {
                let w = sys::write_mem_partial(pid, buf + done as u64, &tmp[..k]);
                done += w;
                if w < k {
                    fault = true;
                    if off.is_none() {
                        t.lseek(fd, w as i64 - k as i64, libc::SEEK_CUR)
                            .map_err(raw)?;
                    }
                    break;
                }
                if k < want {
                    break;
                }
            }
            Err(e) if done == 0 => return Err(raw(e)),
            Err(_) => break,
        }
    }
    if fault && done == 0 {
        return Err(libc::EFAULT);
    }
    val(done)
}

/// `write`/`pwrite` of `len` bytes from the program's `buf`, through a bounded buffer.
fn write_from(t: &Task, pid: i32, fd: Fd, buf: u64, len: u64, off: Option<i64>) -> R {
    let len = len.min(isize::MAX as u64) as usize;
    let mut tmp = vec![0u8; len.min(CHUNK)];
    let mut done = 0usize;
    while done < len || (len == 0 && done == 0) {
        let want = (len - done).min(CHUNK);
        if let Err(e) = sys::read_mem(pid, buf + done as u64, &mut tmp[..want]) {
            if done == 0 {
                return Err(e);
            }
            break;
        }
        let r = match off {
            Some(o) => t.pwrite(fd, &tmp[..want], o + done as i64),
            None => t.write(fd, &tmp[..want]),
        };
        match r {
            Ok(k) => {
                done += k;
                if k < want || len == 0 {
                    break;
                }
            }
            Err(e) if done == 0 => return Err(raw(e)),
            Err(_) => break,
        }
    }
    val(done)
}

/// The x86_64 `struct stat` of `st`.
fn stat_bytes(st: &uvfs::Stat) -> Vec<u8> {
    let mut s = unsafe_zeroed_stat();
    s.st_dev = st.st_dev;
    s.st_ino = st.st_ino;
    s.st_nlink = st.st_nlink;
    s.st_mode = st.st_mode;
    s.st_uid = st.st_uid;
    s.st_gid = st.st_gid;
    s.st_rdev = st.st_rdev;
    s.st_size = st.st_size;
    s.st_blksize = st.st_blksize;
    s.st_blocks = st.st_blocks;
    s.st_atime = st.st_atime.tv_sec;
    s.st_atime_nsec = st.st_atime.tv_nsec;
    s.st_mtime = st.st_mtime.tv_sec;
    s.st_mtime_nsec = st.st_mtime.tv_nsec;
    s.st_ctime = st.st_ctime.tv_sec;
    s.st_ctime_nsec = st.st_ctime.tv_nsec;
    as_bytes(&s)
}

/// The `struct statx` of `sx`.
fn statx_bytes(sx: &uvfs::Statx) -> Vec<u8> {
    // SAFETY: `struct statx` is plain integers; all-zero is valid.
    let mut s: libc::statx = unsafe { std::mem::zeroed() };
    s.stx_mask = sx.stx_mask;
    s.stx_blksize = sx.stx_blksize;
    s.stx_attributes = sx.stx_attributes;
    s.stx_nlink = sx.stx_nlink;
    s.stx_uid = sx.stx_uid;
    s.stx_gid = sx.stx_gid;
    s.stx_mode = sx.stx_mode;
    s.stx_ino = sx.stx_ino;
    s.stx_size = sx.stx_size;
    s.stx_blocks = sx.stx_blocks;
    s.stx_attributes_mask = sx.stx_attributes_mask;
    let ts = |t: &uvfs::stat::StatxTimestamp| {
        // SAFETY: plain integers; all-zero is valid.
        let mut x: libc::statx_timestamp = unsafe { std::mem::zeroed() };
        x.tv_sec = t.tv_sec;
        x.tv_nsec = t.tv_nsec;
        x
    };
    s.stx_atime = ts(&sx.stx_atime);
    s.stx_btime = ts(&sx.stx_btime);
    s.stx_ctime = ts(&sx.stx_ctime);
    s.stx_mtime = ts(&sx.stx_mtime);
    s.stx_rdev_major = sx.stx_rdev_major;
    s.stx_rdev_minor = sx.stx_rdev_minor;
    s.stx_dev_major = sx.stx_dev_major;
    s.stx_dev_minor = sx.stx_dev_minor;
    s.stx_mnt_id = sx.stx_mnt_id;
    as_bytes(&s)
}

/// The x86_64 `struct statfs` of `f` (fifteen 8-byte words: type, bsize, blocks, bfree,
/// bavail, files, ffree, fsid, namelen, frsize, flags, four spare).
fn statfs_bytes(f: &uvfs::StatFs) -> Vec<u8> {
    let fsid = (f.f_fsid[0] as u32 as u64) | ((f.f_fsid[1] as u32 as u64) << 32);
    let words: [u64; 15] = [
        f.f_type as u64,
        f.f_bsize as u64,
        f.f_blocks,
        f.f_bfree,
        f.f_bavail,
        f.f_files,
        f.f_ffree,
        fsid,
        f.f_namelen as u64,
        f.f_frsize as u64,
        f.f_flags as u64,
        0,
        0,
        0,
        0,
    ];
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// The bytes of a plain-integer C struct.
fn as_bytes<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: `T` is one of the plain-integer kernel structs above (no pointers, padding
    // zeroed by `mem::zeroed` before the fields were set), readable as bytes.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
        .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Before a wrap, as the old `last_pid < tid` rule: after, not at, not before.
    #[test]
    fn pids_after_without_wrap() {
        assert_eq!(pids_after(100, 105, 32768), Some(5));
        assert_eq!(pids_after(105, 105, 32768), None);
        assert_eq!(pids_after(105, 100, 32768), None);
    }

    /// Across the wrap: 32700 -> 32767, then 300 on (the old rule matched none of these).
    #[test]
    fn pids_after_across_the_wrap() {
        assert_eq!(pids_after(32700, 32767, 32768), Some(67));
        assert_eq!(pids_after(32700, 300, 32768), Some(68));
        assert_eq!(pids_after(32700, 305, 32768), Some(73));
        assert_eq!(pids_after(32767, 300, 32768), Some(1));
        // Before the wrap point, by more than half a cycle: before, not after.
        assert_eq!(pids_after(305, 32700, 32768), None);
        assert_eq!(pids_after(32700, 299, 32768), None);
    }

    /// The clone whose `last_pid` comes last before the child, its parent's first; one
    /// made after the child (a later clone of the same parent) is not it.
    #[test]
    fn pick_clone_across_the_wrap() {
        let entries = [(10, 32700), (10, 302), (20, 32760)];
        let pick = |tid, ppid| pick_clone(entries.iter().copied(), tid, ppid, 32768);
        // Child 305 of 10: after both of 10's clones; 302 is the later one.
        assert_eq!(pick(305, 10), Some(1));
        // Child 301 of 10: before the clone at 302, after the one at 32700.
        assert_eq!(pick(301, 10), Some(0));
        // Reparented child (ppid 1): any parent's, the latest before it.
        assert_eq!(pick(32765, 1), Some(2));
        // Before every clone: none.
        assert_eq!(pick(200, 10), None);
    }
}
