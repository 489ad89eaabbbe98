//! The supervisor: starts the program under the filter and answers its notified calls from
//! uvfs tasks, one per process of the program.
//!
//! One thread serves the listener, so notifications are answered one at a time: a uvfs
//! descriptor is in the process's uvfs table before the kernel descriptor of the same
//! number can be used by another thread of the program. Invariant: every descriptor in a
//! process's uvfs table has a kernel descriptor of the same number (its placeholder or host
//! file); descriptors uvfs does not hold are the program's own (pipes, sockets, the
//! terminal, host devices) and their calls run natively.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use uvfs::{AtFlags, Errno, Fcntl, Fd, OpenFlags, RenameFlags, Task, Timespec};

use crate::sys::{self, Answer, Notif};
use crate::view::View;

/// The most bytes one `read`/`write` moves through the supervisor's buffer at a time.
const CHUNK: usize = 1 << 20;
/// `PATH_MAX` (the NUL included).
const PATH_LIMIT: usize = 4096;
/// `XATTR_SIZE_MAX`: the largest value.
const XATTR_SIZE_MAX: usize = 65536;
/// `XATTR_LIST_MAX`: the largest name list.
const XATTR_LIST_MAX: usize = 65536;
/// `IOV_MAX`.
const IOV_MAX: u64 = 1024;
/// `PIDFD_THREAD` (= `O_EXCL`): a pidfd of one thread.
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;
/// uvfs's `NR_OPEN`: the uvfs tables follow the kernel's numbers, whose limit is the
/// program's `RLIMIT_NOFILE`, so the uvfs limit is the most it may be.
const NR_OPEN: u32 = 1024 * 1024;

/// The calls the filter notifies.
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
        SYS_fanotify_mark,
        SYS_uselib,
        SYS_acct,
        SYS_swapon,
        SYS_quotactl,
    ]
    .iter()
    .map(|&n| n as u32)
    .collect()
}

/// One process of the program.
struct Proc {
    /// Its uvfs task (descriptor table, working directory, root, umask, credentials).
    task: Task,
    /// `pidfd_open` of the process: exit detection, `pidfd_getfd` for `dup`.
    pidfd: OwnedFd,
    /// The highest descriptor number uvfs has installed (bounds the scans).
    max_fd: i32,
    /// An `execve` was let through; whether it succeeded is read at the next call.
    exec_pending: bool,
}

/// The supervisor's state.
struct Sup {
    listener: OwnedFd,
    /// Processes by thread-group id.
    procs: HashMap<i32, Proc>,
    /// Threads that are not thread-group leaders: tid -> (tgid, thread pidfd).
    threads: HashMap<i32, (i32, OwnedFd)>,
    /// Tables forked for children not seen yet, by parent tgid, oldest first.
    pending: HashMap<i32, VecDeque<Task>>,
    /// Calls already reported as unsupported (one log line each).
    said: HashSet<String>,
}

/// Starts `argv` under the filter with the view's task and serves it until every process
/// of the program has exited; returns the first process's exit status.
pub(crate) fn run(view: &View, argv: &[OsString]) -> Result<i32, String> {
    let Some(prog) = argv.first() else {
        return Err("uvfs run: no program given (uvfs run -- CMD ARGS...)".to_owned());
    };
    let path = find_program(&view.task, prog.as_bytes())?;
    let task = view.task.fork();
    let _ = task.setrlimit_nofile(NR_OPEN);
    let (uid, gid, groups) = sys::ids();
    let mut task = task;
    if uid != 0 {
        task.set_cred(uvfs::Cred::new(uid, gid, &groups));
    }
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
    let prog_filter = sys::filter_program(&notified());
    let mut sv = [0 as libc::c_int; 2];
    // SAFETY: `sv` has room for the two descriptors.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    } != 0
    {
        return Err(format!(
            "uvfs run: socketpair: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: both are new descriptors we own.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
    // SAFETY: fork; the child runs only async-signal-safe calls (`child`) and execve or
    // _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("uvfs run: fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: in the child of fork; every pointer was made before fork and is alive.
        unsafe { child(&prog_filter, theirs.as_raw_fd(), &cpath, &cargv, &cenvp) }
    }
    drop(theirs);
    let listener = match recv_fd(&ours) {
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
    let mut sup = Sup {
        listener,
        procs: HashMap::new(),
        threads: HashMap::new(),
        pending: HashMap::new(),
        said: HashSet::new(),
    };
    sup.procs.insert(
        pid,
        Proc {
            task,
            pidfd,
            max_fd: -1,
            exec_pending: false,
        },
    );
    let r = sup.serve();
    if let Err(e) = &r {
        // SAFETY: kill with integer arguments; the program must not outlive its supervisor
        // blocked on a listener nobody reads.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        eprintln!("uvfs run: supervisor error: {e}");
    }
    drop(sup);
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
    path: &CString,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
) -> ! {
    // SAFETY: the caller's contract: async-signal-safe raw syscalls only.
    let fd = match unsafe { sys::install_filter(prog) } {
        Ok(fd) => fd,
        // SAFETY: _exit is async-signal-safe.
        Err(_) => unsafe { libc::_exit(126) },
    };
    // SAFETY: a cmsg buffer on the stack for one descriptor, filled as cmsg(3) says.
    unsafe {
        let mut byte = 0u8;
        let mut iov = libc::iovec {
            iov_base: (&mut byte as *mut u8).cast(),
            iov_len: 1,
        };
        let mut buf = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = buf.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as usize;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), fd);
        if libc::sendmsg(sock, &msg, 0) != 1 {
            libc::_exit(126);
        }
        libc::close(fd);
        libc::close(sock);
        libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        libc::_exit(if sys::errno() == libc::ENOENT {
            127
        } else {
            126
        });
    }
}

/// Receives the listener the child sent.
fn recv_fd(sock: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: as in `child`: one byte and a cmsg buffer for one descriptor.
    unsafe {
        let mut byte = 0u8;
        let mut iov = libc::iovec {
            iov_base: (&mut byte as *mut u8).cast(),
            iov_len: 1,
        };
        let mut buf = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = buf.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as usize;
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if n != 1 || c.is_null() || (*c).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "no listener received",
            ));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
        Ok(OwnedFd::from_raw_fd(fd))
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
    fn serve(&mut self) -> io::Result<()> {
        loop {
            let mut p = libc::pollfd {
                fd: self.listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd.
            let r = unsafe { libc::poll(&mut p, 1, 250) };
            if r < 0 {
                if sys::errno() == libc::EINTR {
                    continue;
                }
                return Err(io::Error::last_os_error());
            }
            if r == 0 {
                self.sweep();
                continue;
            }
            if p.revents & libc::POLLIN == 0 && p.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                return Ok(());
            }
            let n = match sys::recv(self.listener.as_fd()) {
                Ok(n) => n,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => continue,
                Err(e) => return Err(e),
            };
            let a = match self.proc_of(n.pid) {
                Some(tgid) => self.handle(tgid, &n).unwrap_or_else(Answer::Err),
                None => Answer::Err(libc::ENOSYS),
            };
            sys::respond(self.listener.as_fd(), n.id, a)?;
        }
    }

    /// Drops the processes and threads that have exited (their uvfs tables close).
    fn sweep(&mut self) {
        self.procs.retain(|_, p| !sys::exited(p.pidfd.as_fd()));
        let procs = &self.procs;
        self.threads
            .retain(|_, (tgid, fd)| procs.contains_key(tgid) && !sys::exited(fd.as_fd()));
        self.pending.retain(|tgid, _| procs.contains_key(tgid));
    }

    /// The thread-group id of thread `tid`, making its process's task on first sight: a
    /// child gets the table its parent forked for it at `clone`.
    fn proc_of(&mut self, tid: i32) -> Option<i32> {
        if let Some(p) = self.procs.get(&tid) {
            if !sys::exited(p.pidfd.as_fd()) {
                return Some(tid);
            }
            self.procs.remove(&tid);
        }
        if let Some((tgid, fd)) = self.threads.get(&tid) {
            if !sys::exited(fd.as_fd()) && self.procs.contains_key(tgid) {
                return Some(*tgid);
            }
            self.threads.remove(&tid);
        }
        let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
        let field = |name: &str| -> Option<i32> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
        };
        let (tgid, ppid) = (field("Tgid:")?, field("PPid:")?);
        if tgid != tid {
            self.proc_of(tgid)?;
            let fd = sys::pidfd_open(tid, PIDFD_THREAD).ok()?;
            self.threads.insert(tid, (tgid, fd));
            return Some(tgid);
        }
        self.sweep();
        let task = match self.pending.get_mut(&ppid).and_then(VecDeque::pop_front) {
            Some(t) => t,
            None => {
                let parent = self
                    .procs
                    .get(&ppid)
                    .or_else(|| self.procs.values().next())?;
                eprintln!(
                    "uvfs run: process {tid}: no clone seen from its parent {ppid}; its \
                     descriptor table is copied from {} now",
                    if self.procs.contains_key(&ppid) {
                        "the parent"
                    } else {
                        "another process"
                    }
                );
                parent.task.fork()
            }
        };
        let pidfd = sys::pidfd_open(tid, 0).ok()?;
        self.procs.insert(
            tid,
            Proc {
                task,
                pidfd,
                max_fd: -1,
                exec_pending: false,
            },
        );
        Some(tid)
    }

    /// One log line per unsupported call, then `ENOSYS`.
    fn unsupported(&mut self, what: &str) -> R {
        if self.said.insert(what.to_owned()) {
            eprintln!("uvfs run: {what} is not supported on uvfs files yet (ENOSYS)");
        }
        Err(libc::ENOSYS)
    }

    /// Answers one notification of process `tgid`.
    #[allow(non_upper_case_globals)] // libc's SYS_* names in the patterns
    fn handle(&mut self, tgid: i32, n: &Notif) -> R {
        let pid = n.pid;
        let a = n.args;
        if self.procs[&tgid].exec_pending {
            self.settle_exec(tgid);
        }
        // Reads the path argument `i` and checks the notification is still live, so that
        // memory of a recycled pid is never acted on.
        let listener = self.listener.as_fd();
        let path = |i: usize| -> Result<Vec<u8>, i32> {
            let p = sys::read_cstr(pid, a[i], PATH_LIMIT - 1)?;
            if !sys::id_valid(listener, n.id) {
                return Err(libc::ESRCH);
            }
            Ok(proc_self(p, tgid, pid))
        };
        let fdarg = |i: usize| a[i] as i32;
        let pr = self.procs.get_mut(&tgid).ok_or(libc::ESRCH)?;
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
            SYS_open => {
                let p = path(0)?;
                self.open(tgid, n, Fd::AT_FDCWD, &p, a[1] as u32, a[2] as u32)
            }
            SYS_creat => {
                let p = path(0)?;
                let fl = (O_CREAT | O_WRONLY | O_TRUNC) as u32;
                self.open(tgid, n, Fd::AT_FDCWD, &p, fl, a[1] as u32)
            }
            SYS_openat => {
                let p = path(1)?;
                let d = dirfd(fdarg(0), &p)?;
                self.open(tgid, n, d, &p, a[2] as u32, a[3] as u32)
            }
            SYS_stat | SYS_lstat => {
                let p = path(0)?;
                if let Some(fd) = magic_fd(&p, tgid).filter(|&f| is_uvfs(f) && n.nr == SYS_stat) {
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
            SYS_newfstatat => {
                let fl = a[3] as u32;
                let p = if a[1] == 0 && fl & AT_EMPTY_PATH as u32 != 0 {
                    Vec::new()
                } else {
                    path(1)?
                };
                if p.is_empty()
                    && fl & AT_EMPTY_PATH as u32 != 0
                    && fdarg(0) != AT_FDCWD
                    && !is_uvfs(fdarg(0))
                {
                    return Ok(Answer::Continue);
                }
                let d = dirfd(fdarg(0), &p)?;
                let st = t
                    .fstatat(d, p.as_slice(), AtFlags::from_bits_retain(fl))
                    .map_err(raw)?;
                sys::write_mem(pid, a[2], &stat_bytes(&st))?;
                val(0)
            }
            SYS_statx => {
                let fl = a[2] as u32;
                let p = if a[1] == 0 && fl & AT_EMPTY_PATH as u32 != 0 {
                    Vec::new()
                } else {
                    path(1)?
                };
                if p.is_empty()
                    && fl & AT_EMPTY_PATH as u32 != 0
                    && fdarg(0) != AT_FDCWD
                    && !is_uvfs(fdarg(0))
                {
                    return Ok(Answer::Continue);
                }
                let d = dirfd(fdarg(0), &p)?;
                let sx = t
                    .statx(d, p.as_slice(), AtFlags::from_bits_retain(fl), a[3] as u32)
                    .map_err(raw)?;
                sys::write_mem(pid, a[4], &statx_bytes(&sx))?;
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
            SYS_access => {
                let p = path(0)?;
                ok0(t.faccessat2(Fd::AT_FDCWD, p.as_slice(), a[1] as u32, AtFlags::empty()))
            }
            SYS_faccessat | SYS_faccessat2 => {
                let p = path(1)?;
                let d = dirfd(fdarg(0), &p)?;
                let fl = if n.nr == SYS_faccessat2 {
                    a[3] as u32
                } else {
                    0
                };
                ok0(t.faccessat2(d, p.as_slice(), a[2] as u32, AtFlags::from_bits_retain(fl)))
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
                let (d, p, buf, size) = if n.nr == SYS_readlink {
                    (Fd::AT_FDCWD, path(0)?, a[1], a[2] as i64)
                } else {
                    let p = path(1)?;
                    (dirfd(fdarg(0), &p)?, p, a[2], a[3] as i64)
                };
                if size <= 0 {
                    return Err(EINVAL);
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
                if let Some(fd) = magic_fd(&p, tgid).filter(|&f| is_uvfs(f)) {
                    return ok0(t.fchmodat(Fd(fd), "", a[1] as u32, AtFlags::EMPTY_PATH));
                }
                ok0(t.fchmodat(Fd::AT_FDCWD, p.as_slice(), a[1] as u32, AtFlags::empty()))
            }
            SYS_fchmodat | 452 => {
                let p = path(1)?;
                if let Some(fd) = magic_fd(&p, tgid).filter(|&f| is_uvfs(f)) {
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
                if let Some(fd) = magic_fd(&p, tgid).filter(|&f| is_uvfs(f)) {
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
                ok0(t.truncate(p.as_slice(), a[1] as i64))
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
                if first > last {
                    return Err(EINVAL);
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
                self.dup_to(tgid, n, fd, None, 0, false)
            }
            SYS_dup2 | SYS_dup3 => {
                let (old, new) = (fdarg(0), fdarg(1));
                let fl = if n.nr == SYS_dup3 { a[2] as u32 } else { 0 };
                if old == new || !is_uvfs(old) {
                    if old != new && is_uvfs(new) {
                        let _ = t.close(Fd(new));
                    }
                    return Ok(Answer::Continue);
                }
                if new < 0 {
                    return Err(EBADF);
                }
                t.dup3(Fd(old), Fd(new), OpenFlags::from_bits_retain(fl))
                    .map_err(raw)?;
                pr.max_fd = pr.max_fd.max(new);
                Ok(Answer::Continue)
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
                        self.dup_to(tgid, n, fd, None, min, a[1] as i32 == F_DUPFD_CLOEXEC)
                    }
                    F_GETFD => Ok(Answer::Continue),
                    F_SETFD => {
                        t.fcntl(Fd(fd), Fcntl::SetFd(a[2] as i32)).map_err(raw)?;
                        Ok(Answer::Continue)
                    }
                    F_GETFL => val(t.fcntl(Fd(fd), Fcntl::GetFl).map_err(raw)?),
                    F_SETFL => val(t.fcntl(Fd(fd), Fcntl::SetFl(a[2] as u32)).map_err(raw)?),
                    cmd => self.unsupported(&format!("fcntl command {cmd}")),
                }
            }
            SYS_flock => {
                if !is_uvfs(fdarg(0)) {
                    return Ok(Answer::Continue);
                }
                self.unsupported("flock")
            }
            SYS_mmap => {
                let (fl, fd) = (a[3] as i32, a[4] as i32);
                if fl & MAP_ANONYMOUS != 0 || !is_uvfs(fd) || !sys::is_placeholder(pid, fd) {
                    return Ok(Answer::Continue);
                }
                if fl & MAP_PRIVATE == 0 {
                    if self.said.insert("mmap".into()) {
                        eprintln!(
                            "uvfs run: a shared mmap of a file that exists only in uvfs is not \
                             supported (it would not stay coherent with the file; ENODEV)"
                        );
                    }
                    return Err(ENODEV);
                }
                self.mmap_private(tgid, n, fd)
            }
            SYS_sendfile | SYS_splice | SYS_tee | SYS_copy_file_range => {
                let fds = match n.nr {
                    SYS_sendfile => [fdarg(0), fdarg(1)],
                    SYS_copy_file_range => [fdarg(0), fdarg(2)],
                    _ => [fdarg(0), fdarg(2)],
                };
                if !fds.iter().any(|&f| is_uvfs(f)) {
                    return Ok(Answer::Continue);
                }
                let name = match n.nr {
                    SYS_sendfile => "sendfile",
                    SYS_splice => "splice",
                    SYS_tee => "tee",
                    _ => "copy_file_range",
                };
                self.unsupported(name)
            }
            SYS_clone | SYS_clone3 | SYS_fork | SYS_vfork => {
                let flags = match n.nr {
                    SYS_clone => a[0],
                    SYS_clone3 => {
                        let mut b = [0u8; 8];
                        sys::read_mem(pid, a[0], &mut b)?;
                        u64::from_ne_bytes(b)
                    }
                    _ => 0,
                };
                if flags & CLONE_THREAD as u64 == 0 {
                    let child = if flags & CLONE_FILES as u64 != 0 {
                        t.clone_thread()
                    } else {
                        t.fork()
                    };
                    self.pending.entry(tgid).or_default().push_back(child);
                }
                Ok(Answer::Continue)
            }
            SYS_execve => {
                let p = path(0)?;
                self.execve(tgid, n, &p)
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
            SYS_fanotify_mark => self.unsupported("fanotify_mark"),
            SYS_uselib | SYS_acct | SYS_swapon | SYS_quotactl => Err(EPERM),
            other => self.unsupported(&format!("syscall {other}")),
        }
    }

    /// `open`/`openat`/`creat`: the file opened in uvfs, then its kernel descriptor
    /// installed at the number the kernel picks; the uvfs descriptor moved to that number.
    /// A device on a host bind is handed over as the host's device and left to the kernel.
    fn open(&mut self, tgid: i32, n: &Notif, d: Fd, p: &[u8], flags: u32, mode: u32) -> R {
        let pr = self.procs.get_mut(&tgid).ok_or(libc::ESRCH)?;
        let t = &pr.task;
        let cloexec = flags & libc::O_CLOEXEC as u32 != 0;
        let oflags = OpenFlags::from_bits_retain(flags);
        let fd = match t.openat(d, p, oflags, mode) {
            // uvfs drives no devices: a device node on a host bind opens the host's.
            Err(Errno::ENXIO) => return self.open_device(tgid, n, d, p, flags),
            r => r.map_err(raw)?,
        };
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
    fn open_device(&mut self, tgid: i32, n: &Notif, d: Fd, p: &[u8], flags: u32) -> R {
        let pr = self.procs.get_mut(&tgid).ok_or(libc::ESRCH)?;
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
    fn mmap_private(&mut self, tgid: i32, n: &Notif, fd: i32) -> R {
        let pr = self.procs.get_mut(&tgid).ok_or(libc::ESRCH)?;
        let t = &pr.task;
        let st = t.fstat(Fd(fd)).map_err(raw)?;
        if st.st_mode & 0o170000 != 0o100000 {
            return Err(libc::ENODEV);
        }
        let f = t.fget_file(Fd(fd)).map_err(raw)?;
        let mem = sys::placeholder()?;
        let mut buf = vec![0u8; CHUNK];
        let mut off = 0u64;
        loop {
            let k = match f.read_at(&mut buf, off) {
                Ok(0) => break,
                Ok(k) => k,
                // Linux checks read access at mmap: EACCES for a descriptor not open for
                // reading.
                Err(e) if e.raw_os_error() == Some(libc::EBADF) => return Err(libc::EACCES),
                Err(e) => return Err(e.raw_os_error().unwrap_or(libc::EIO)),
            };
            sys::pwrite_all(mem.as_fd(), &buf[..k], off)?;
            off += k as u64;
        }
        let cloexec = t.fcntl(Fd(fd), Fcntl::GetFd) == Ok(libc::FD_CLOEXEC);
        sys::addfd(self.listener.as_fd(), n.id, mem.as_fd(), Some(fd), cloexec)?;
        Ok(Answer::Continue)
    }

    /// `dup`/`F_DUPFD`: the kernel descriptor duplicated at the lowest free number `>= min`
    /// of the program's table, and the uvfs descriptor at the same number.
    fn dup_to(
        &mut self,
        tgid: i32,
        n: &Notif,
        fd: i32,
        _at: Option<i32>,
        min: i32,
        cloexec: bool,
    ) -> R {
        let pr = self.procs.get_mut(&tgid).ok_or(libc::ESRCH)?;
        let open: HashSet<i32> = std::fs::read_dir(format!("/proc/{}/fd", n.pid))
            .map_err(|_| libc::ESRCH)?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        let mut k = min;
        while open.contains(&k) {
            k += 1;
        }
        let src = sys::pidfd_getfd(pr.pidfd.as_fd(), fd)?;
        // The limit is the program's: ADDFD at `k` fails with EBADF past RLIMIT_NOFILE.
        let got = sys::addfd(self.listener.as_fd(), n.id, src.as_fd(), Some(k), cloexec)
            .map_err(|e| if e == libc::EBADF { libc::EMFILE } else { e })?;
        let fl = if cloexec {
            OpenFlags::CLOEXEC
        } else {
            OpenFlags::empty()
        };
        pr.task.dup3(Fd(fd), Fd(got), fl).map_err(raw)?;
        pr.max_fd = pr.max_fd.max(got);
        val(got)
    }

    /// `execve`: let through when the kernel will run the very file uvfs's view resolves
    /// to (a file on a host bind: the same host inode at the path as the program's kernel
    /// sees it); a file that exists only in uvfs cannot be run yet (`EACCES`, logged).
    fn execve(&mut self, tgid: i32, n: &Notif, p: &[u8]) -> R {
        let pr = self.procs.get_mut(&tgid).ok_or(libc::ESRCH)?;
        let t = &pr.task;
        let f = t
            .open_file(p, OpenFlags::RDONLY | OpenFlags::CLOEXEC, 0)
            .map_err(raw)?;
        drop(f);
        // Exec permission and noexec mounts, as uvfs's `open_exec` checks them.
        let fd = t
            .openat(Fd::AT_FDCWD, p, OpenFlags::RDONLY | OpenFlags::CLOEXEC, 0)
            .map_err(raw)?;
        let host = t.host_fd(fd);
        let _ = t.close(fd);
        t.open_exec(Fd::AT_FDCWD, p).map_err(raw)?;
        let same = match host {
            Ok(h) => {
                let mine = fstat_host(h.as_raw_fd());
                let theirs = std::fs::File::open(format!("/proc/{}/cwd", n.pid))
                    .ok()
                    .and_then(|cwd| {
                        let c = CString::new(p).ok()?;
                        let mut st: libc::stat = unsafe_zeroed_stat();
                        // SAFETY: `c` is NUL-terminated; `st` is a stat the call fills.
                        let r = unsafe { libc::fstatat(cwd.as_raw_fd(), c.as_ptr(), &mut st, 0) };
                        (r == 0).then_some((st.st_dev, st.st_ino))
                    });
                mine.is_some() && mine == theirs
            }
            Err(_) => false,
        };
        if !same {
            eprintln!(
                "uvfs run: execve {}: the file is not the host file at that path (it exists \
                 only in uvfs, or a bind shadows it); running such files is not supported \
                 yet (EACCES)",
                String::from_utf8_lossy(p)
            );
            return Err(libc::EACCES);
        }
        pr.exec_pending = true;
        Ok(Answer::Continue)
    }

    /// After an `execve` was let through: the descriptors the kernel closed on exec (their
    /// numbers gone from `/proc/PID/fd`) are closed in uvfs too. A failed exec closed none.
    fn settle_exec(&mut self, tgid: i32) {
        let Some(pr) = self.procs.get_mut(&tgid) else {
            return;
        };
        pr.exec_pending = false;
        for fd in 0..=pr.max_fd {
            if pr.task.fcntl(Fd(fd), Fcntl::GetFd) == Ok(libc::FD_CLOEXEC)
                && sys::proc_fd_link(tgid, fd).is_none()
            {
                let _ = pr.task.close(Fd(fd));
            }
        }
    }
}

/// `/proc/self/...` and `/proc/thread-self/...` as the program means them: its own
/// process's entries (`/proc/TGID/...`, `/proc/TGID/task/TID/...`), not the supervisor's.
fn proc_self(p: Vec<u8>, tgid: i32, tid: i32) -> Vec<u8> {
    let rest = |pre: &[u8]| -> Option<Vec<u8>> {
        let r = p.strip_prefix(pre)?;
        (r.is_empty() || r[0] == b'/').then(|| r.to_vec())
    };
    if let Some(r) = rest(b"/proc/self") {
        let mut out = format!("/proc/{tgid}").into_bytes();
        out.extend_from_slice(&r);
        return out;
    }
    if let Some(r) = rest(b"/proc/thread-self") {
        let mut out = format!("/proc/{tgid}/task/{tid}").into_bytes();
        out.extend_from_slice(&r);
        return out;
    }
    p
}

/// The descriptor a `/proc/TGID/fd/N` path names (after [`proc_self`]), for the calls that
/// act on the file behind the magic link (`chmod`, `chown`, `stat`).
fn magic_fd(p: &[u8], tgid: i32) -> Option<i32> {
    let pre = format!("/proc/{tgid}/fd/");
    let n = p.strip_prefix(pre.as_bytes())?;
    std::str::from_utf8(n).ok()?.parse().ok()
}

/// A zeroed `struct stat`.
fn unsafe_zeroed_stat() -> libc::stat {
    // SAFETY: `struct stat` is plain integers; all-zero is valid.
    unsafe { std::mem::zeroed() }
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
    let len = len.min(isize::MAX as u64) as usize;
    let mut tmp = vec![0u8; len.min(CHUNK)];
    let mut done = 0usize;
    while done < len {
        let want = (len - done).min(CHUNK);
        let r = match off {
            Some(o) => t.pread(fd, &mut tmp[..want], o + done as i64),
            None => t.read(fd, &mut tmp[..want]),
        };
        match r {
            Ok(0) => break,
            Ok(k) => {
                sys::write_mem(pid, buf + done as u64, &tmp[..k])?;
                done += k;
                if k < want {
                    break;
                }
            }
            Err(e) if done == 0 => return Err(raw(e)),
            Err(_) => break,
        }
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
