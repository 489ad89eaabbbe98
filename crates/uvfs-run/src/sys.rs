//! The kernel calls of the supervisor: the seccomp filter, user notifications (receive,
//! answer, `ADDFD`), and the traced program's memory (`process_vm_readv`/`writev`).
//!
//! x86_64 only (the syscall numbers and `struct stat` layout are the x86_64 ABI's).
//! Linux analogues: kernel/seccomp.c (`seccomp_notify_recv`, `seccomp_notify_send`,
//! `seccomp_notify_addfd`), mm/process_vm_access.c. Every `unsafe` here is a raw syscall
//! on memory this module owns.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// `AUDIT_ARCH_X86_64`: the only architecture the filter lets through.
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// The x32 ABI's syscall bit: x32 calls would bypass the x86_64 numbers, so they fail.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// One classic-BPF instruction (`struct sock_filter`).
fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// A conditional jump: to `jt` instructions ahead when `A == k`, else `jf`.
fn jeq(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// The filter program: kill on a foreign architecture, `ENOSYS` for x32 calls, a user
/// notification for each syscall in `notify` and for an `ioctl` whose request (the low 32
/// bits of its second argument: the kernel's `unsigned int cmd`) is one of `ioctls`, and
/// every other call allowed.
pub(crate) fn filter_program(notify: &[u32], ioctls: &[u32]) -> Vec<libc::sock_filter> {
    let ld = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    let ret = (libc::BPF_RET | libc::BPF_K) as u16;
    // struct seccomp_data: int nr; __u32 arch; ...
    let mut p = vec![
        stmt(ld, 4),
        jeq(AUDIT_ARCH_X86_64, 1, 0),
        stmt(ret, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(ld, 0),
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        stmt(ret, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    ];
    for &nr in notify {
        p.push(jeq(nr, 0, 1));
        p.push(stmt(ret, libc::SECCOMP_RET_USER_NOTIF));
    }
    // A holds the number still. Not an ioctl: past the request checks, to ALLOW.
    let skip = u8::try_from(1 + 2 * ioctls.len()).expect("a short ioctl list");
    p.push(jeq(libc::SYS_ioctl as u32, 0, skip));
    // struct seccomp_data: nr, arch, instruction_pointer (8 bytes), args[6] (8 bytes
    // each, little-endian): args[1]'s low word at 24.
    p.push(stmt(ld, 24));
    for &cmd in ioctls {
        p.push(jeq(cmd, 0, 1));
        p.push(stmt(ret, libc::SECCOMP_RET_USER_NOTIF));
    }
    p.push(stmt(ret, libc::SECCOMP_RET_ALLOW));
    p
}

/// Installs `prog` on the calling thread with `NO_NEW_PRIVS` and returns the listener.
/// Called in the forked child before `execve`: only raw syscalls, no allocation.
///
/// # Safety
/// Async-signal-safe: may run between `fork` and `execve` of a multi-threaded process.
pub(crate) unsafe fn install_filter(prog: &[libc::sock_filter]) -> Result<RawFd, i32> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(errno());
    }
    let flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | (1 << 5); // WAIT_KILLABLE_RECV
                                                                   // SAFETY: `fprog` points at `prog`, alive for the call; the kernel copies it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &fprog as *const libc::sock_fprog,
        )
    };
    if fd >= 0 {
        return Ok(fd as RawFd);
    }
    let e = errno();
    if e != libc::EINVAL {
        return Err(e);
    }
    // Kernels before 5.19 have no WAIT_KILLABLE_RECV.
    // SAFETY: as above.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    };
    if fd >= 0 {
        Ok(fd as RawFd)
    } else {
        Err(errno())
    }
}

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// One notified syscall (`struct seccomp_notif`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Notif {
    /// The notification's cookie, for the answer and `NOTIF_ID_VALID`.
    pub id: u64,
    /// The calling thread's id (in the supervisor's pid namespace).
    pub pid: i32,
    /// The syscall number.
    pub nr: i64,
    /// The six arguments.
    pub args: [u64; 6],
}

/// Waits for the next notification on `listener`.
///
/// # Errors
/// `ENOENT` when the notifying thread died before it was received (the caller retries);
/// `EINTR`; others end the supervisor.
pub(crate) fn recv(listener: BorrowedFd<'_>) -> io::Result<Notif> {
    // SAFETY: all-zero is a valid `seccomp_notif` (plain integers); the kernel requires it
    // zeroed.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `n` is a `seccomp_notif` the ioctl fills.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut n as *mut libc::seccomp_notif,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Notif {
        id: n.id,
        pid: n.pid as i32,
        nr: n.data.nr as i64,
        args: n.data.args,
    })
}

/// What the notified syscall returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Success with this value.
    Val(i64),
    /// Failure with this errno.
    Err(i32),
    /// Let the kernel run the call itself (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): only for
    /// calls on the program's own host descriptors, never for a uvfs path.
    Continue,
    /// Not now: another thread answers it later (a lock wait, `Sup::defer_lock`).
    Later,
}

/// Answers notification `id`. A program that died meanwhile (`ENOENT`) is not an error.
pub(crate) fn respond(listener: BorrowedFd<'_>, id: u64, a: Answer) -> io::Result<()> {
    respond_delivered(listener, id, a).map(drop)
}

/// [`respond`], telling whether the answer reached the call: `false` when the notification
/// is gone (`ENOENT`: the thread died, or a signal interrupted its call, which then
/// returns `EINTR` or is restarted by the kernel).
pub(crate) fn respond_delivered(listener: BorrowedFd<'_>, id: u64, a: Answer) -> io::Result<bool> {
    let (val, error, flags) = match a {
        Answer::Val(v) => (v, 0, 0),
        Answer::Err(e) => (0, -e, 0),
        Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        // Nothing to send yet (the caller never passes it).
        Answer::Later => return Ok(true),
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    // SAFETY: `resp` is a `seccomp_notif_resp` the ioctl reads.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp as *mut libc::seccomp_notif_resp,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOENT) {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(true)
}

/// Whether notification `id` is still pending (its thread alive and waiting): checked
/// after reading the program's memory, so that a recycled pid's memory is never trusted.
pub(crate) fn id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads one u64.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id as *mut u64,
        ) == 0
    }
}

/// Installs `src` in the notifying process (`SECCOMP_IOCTL_NOTIF_ADDFD`): at the lowest
/// free number, or at `at` (replacing what is there, `SECCOMP_ADDFD_FLAG_SETFD`), with
/// close-on-exec as asked. Returns the number.
///
/// # Errors
/// The kernel's: `EMFILE` at the program's `RLIMIT_NOFILE`, `ENOENT` if it died.
pub(crate) fn addfd(
    listener: BorrowedFd<'_>,
    id: u64,
    src: BorrowedFd<'_>,
    at: Option<i32>,
    cloexec: bool,
) -> Result<i32, i32> {
    let mut a = libc::seccomp_notif_addfd {
        id,
        flags: if at.is_some() {
            libc::SECCOMP_ADDFD_FLAG_SETFD as u32
        } else {
            0
        },
        srcfd: src.as_raw_fd() as u32,
        newfd: at.unwrap_or(0) as u32,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: `a` is a `seccomp_notif_addfd` the ioctl reads.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &mut a as *mut libc::seccomp_notif_addfd,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

/// `pidfd_open(pid, flags)`.
pub(crate) fn pidfd_open(pid: i32, flags: u32) -> io::Result<OwnedFd> {
    // SAFETY: integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor the kernel gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// `pidfd_getfd`: a duplicate of the program's descriptor `fd`.
pub(crate) fn pidfd_getfd(pidfd: BorrowedFd<'_>, fd: i32) -> Result<OwnedFd, i32> {
    // SAFETY: integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if r < 0 {
        return Err(errno());
    }
    // SAFETY: a new descriptor the kernel gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// `pidfd_send_signal(pidfd, sig, NULL, 0)`: `sig` to the process behind `pidfd`, never
/// to another process that reused its number.
pub(crate) fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: i32) -> io::Result<()> {
    // SAFETY: integer arguments and a null siginfo (the kernel then fills in a kill(2)'s).
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the process or thread behind `pidfd` has exited (readable pidfd).
pub(crate) fn exited(pidfd: BorrowedFd<'_>) -> bool {
    let mut p = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, zero timeout.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r > 0 && p.revents != 0
}

/// Reads `buf.len()` bytes at `addr` of process `pid`.
///
/// # Errors
/// `EFAULT` when any byte is not readable (a bad pointer from the program); `ESRCH`.
pub(crate) fn read_mem(pid: i32, addr: u64, buf: &mut [u8]) -> Result<(), i32> {
    vm_rw(pid, addr, buf.as_mut_ptr(), buf.len(), false)
}

/// Writes `buf` at `addr` of process `pid`.
///
/// # Errors
/// `EFAULT` when any byte is not writable; `ESRCH`.
pub(crate) fn write_mem(pid: i32, addr: u64, buf: &[u8]) -> Result<(), i32> {
    // The pointer is only read by the kernel (process_vm_writev's local side).
    vm_rw(pid, addr, buf.as_ptr().cast_mut(), buf.len(), true)
}

/// `process_vm_writev` (`write`) or `process_vm_readv` of `len` bytes between `local`
/// and `addr` of process `pid`, all or nothing.
fn vm_rw(pid: i32, addr: u64, local: *mut u8, len: usize, write: bool) -> Result<(), i32> {
    if len == 0 {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: local.cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` covers a buffer of the caller's of `len` bytes (written only for a
    // read); the remote side is the kernel's to check.
    let r = unsafe {
        if write {
            libc::process_vm_writev(pid, &local, 1, &remote, 1, 0)
        } else {
            libc::process_vm_readv(pid, &local, 1, &remote, 1, 0)
        }
    };
    if r < 0 {
        let e = errno();
        return Err(if e == libc::ESRCH { e } else { libc::EFAULT });
    }
    if r as usize != len {
        return Err(libc::EFAULT);
    }
    Ok(())
}

/// Reads a NUL-terminated string of at most `max` bytes (the NUL excluded) at `addr`, a
/// page at a time so that a string ending just before an unmapped page is read.
///
/// # Errors
/// `EFAULT` for a bad pointer; `ENAMETOOLONG` when no NUL comes within `max` bytes.
pub(crate) fn read_cstr(pid: i32, addr: u64, max: usize) -> Result<Vec<u8>, i32> {
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    let mut out = Vec::new();
    let mut at = addr;
    loop {
        let to_page = 4096 - (at % 4096) as usize;
        let mut chunk = vec![0u8; to_page.min(max + 1 - out.len())];
        read_mem(pid, at, &mut chunk)?;
        if let Some(n) = chunk.iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..n]);
            return Ok(out);
        }
        out.extend_from_slice(&chunk);
        if out.len() > max {
            return Err(libc::ENAMETOOLONG);
        }
        at = at.checked_add(chunk.len() as u64).ok_or(libc::EFAULT)?;
    }
}

/// A new empty memfd: the kernel-side placeholder of a uvfs file in the program's table.
pub(crate) fn placeholder() -> Result<OwnedFd, i32> {
    // SAFETY: a static NUL-terminated name.
    let r = unsafe { libc::memfd_create(c"uvfs-file".as_ptr(), libc::MFD_CLOEXEC) };
    if r < 0 {
        return Err(errno());
    }
    // SAFETY: a new descriptor the kernel gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// The link text of `/proc/PID/fd/FD` (`None` when that descriptor is not open).
pub(crate) fn proc_fd_link(pid: i32, fd: i32) -> Option<Vec<u8>> {
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
        .ok()
        .map(|p| std::os::unix::ffi::OsStringExt::into_vec(p.into_os_string()))
}

/// Whether `/proc/PID/fd/FD`'s link names a placeholder of ours.
pub(crate) fn is_placeholder(pid: i32, fd: i32) -> bool {
    proc_fd_link(pid, fd).is_some_and(|l| l.starts_with(b"/memfd:uvfs-file"))
}

/// The real user and group ids and the supplementary groups of this process.
pub(crate) fn ids() -> (u32, u32, Vec<u32>) {
    // SAFETY: getuid/getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut groups = vec![0 as libc::gid_t; 65536];
    // SAFETY: `groups` has room for 65536 entries, the most the kernel returns.
    let n = unsafe { libc::getgroups(groups.len() as i32, groups.as_mut_ptr()) };
    groups.truncate(n.max(0) as usize);
    (uid, gid, groups)
}

/// Writes all of `buf` at `off` of `fd`.
pub(crate) fn pwrite_all(fd: BorrowedFd<'_>, mut buf: &[u8], mut off: u64) -> Result<(), i32> {
    while !buf.is_empty() {
        // SAFETY: `buf` is a live slice the kernel reads.
        let r = unsafe { libc::pwrite(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), off as i64) };
        if r < 0 {
            return Err(errno());
        }
        buf = &buf[r as usize..];
        off += r as u64;
    }
    Ok(())
}

/// Writes as much of `buf` at `addr` of process `pid` as is writable from the start;
/// returns the count. One call when it all goes in; page by page from the start when not,
/// so that the count stops exactly at the first page that cannot be written.
pub(crate) fn write_mem_partial(pid: i32, addr: u64, buf: &[u8]) -> usize {
    if write_mem(pid, addr, buf).is_ok() {
        return buf.len();
    }
    let mut done = 0usize;
    while done < buf.len() {
        let at = addr + done as u64;
        let to_page = (4096 - (at % 4096) as usize).min(buf.len() - done);
        if write_mem(pid, at, &buf[done..done + to_page]).is_err() {
            break;
        }
        done += to_page;
    }
    done
}

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`: the notifying thread and the supervisor hand the
/// CPU to each other (Linux 6.6). Best effort: older kernels refuse it (false) and work
/// without.
pub(crate) fn set_sync_wakeup(listener: BorrowedFd<'_>) -> bool {
    // SAFETY: the ioctl takes its flags by value.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            1u64,
        ) == 0
    }
}

/// Whether the listener polls as hung up: no process is left under the filter.
pub(crate) fn hung_up(listener: BorrowedFd<'_>) -> bool {
    let mut p = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, zero timeout.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r > 0 && p.revents & libc::POLLHUP != 0
}

/// Blocks `sigs` in the calling thread (and the threads it starts); returns the set for
/// [`wait_signal`].
pub(crate) fn block_signals(sigs: &[i32]) -> libc::sigset_t {
    // SAFETY: a sigset_t is plain data; sigemptyset initialises it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t; the signal numbers are valid.
    unsafe {
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    set
}

/// Waits up to `ms` milliseconds for one of the blocked signals in `set`.
pub(crate) fn wait_signal(set: &libc::sigset_t, ms: i64) -> Option<i32> {
    let ts = libc::timespec {
        tv_sec: ms / 1000,
        tv_nsec: (ms % 1000) * 1_000_000,
    };
    // SAFETY: `set` and `ts` are valid for the call; no siginfo is asked for.
    let r = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    (r > 0).then_some(r)
}

/// A one-byte message carrying one descriptor (`SCM_RIGHTS`), built in `msg` over `iov`,
/// `byte` and `cbuf` (cmsg(3)), for [`send_fd`] and [`recv_fd`].
///
/// # Safety
/// The pointers stored in `msg` are to the caller's locals, which must outlive its use.
unsafe fn fd_msg(
    msg: &mut libc::msghdr,
    iov: &mut libc::iovec,
    byte: &mut u8,
    cbuf: &mut [u64; 4],
) {
    *iov = libc::iovec {
        iov_base: (byte as *mut u8).cast(),
        iov_len: 1,
    };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is arithmetic.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(4) } as usize;
}

/// A connected pair of close-on-exec Unix `SOCK_SEQPACKET` sockets (the parent's end first):
/// the supervisor's channel to a child it forks (the listener, then messages that stay
/// whole).
///
/// # Errors
/// `socketpair`'s errno.
pub(crate) fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
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
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are new descriptors owned here alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) })
}

/// Sends `fd` over the socket `sock`. Async-signal-safe (no allocation): the child calls it
/// between fork and execve.
///
/// # Errors
/// The errno of `sendmsg`.
pub(crate) fn send_fd(sock: RawFd, fd: RawFd) -> Result<(), i32> {
    let (mut byte, mut cbuf) = (0u8, [0u64; 4]);
    // SAFETY: plain data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut iov: libc::iovec = unsafe { std::mem::zeroed() };
    // SAFETY: `msg` points at these locals only for this function; `cbuf` has room for
    // one descriptor's cmsg (CMSG_SPACE(4) <= 32 bytes), filled as cmsg(3) says.
    unsafe {
        fd_msg(&mut msg, &mut iov, &mut byte, &mut cbuf);
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), fd);
        if libc::sendmsg(sock, &msg, 0) != 1 {
            return Err(errno());
        }
    }
    Ok(())
}

/// Receives a descriptor [`send_fd`] sent over `sock` (close-on-exec).
///
/// # Errors
/// `recvmsg`'s; `UnexpectedEof` when the peer sent none (it died first).
pub(crate) fn recv_fd(sock: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let (mut byte, mut cbuf) = (0u8, [0u64; 4]);
    // SAFETY: plain data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut iov: libc::iovec = unsafe { std::mem::zeroed() };
    // SAFETY: `msg` points at these locals only for this function; the cmsg read back is
    // checked to be SCM_RIGHTS before its descriptor is taken.
    unsafe {
        fd_msg(&mut msg, &mut iov, &mut byte, &mut cbuf);
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
