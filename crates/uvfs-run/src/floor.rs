//! What one notified call costs on this machine when the supervisor does nothing but
//! answer: the floor under `uvfs run`'s time per call, measured beside it by `uvfs bench
//! --target run` (its `seccomp-floor` target).
//!
//! A forked child installs a filter that notifies only `fstat` and forks the other
//! processes, which share the filter and its listener; each pins itself (process i to the
//! i-th CPU this process may use, as the benchmark pins worker i) and calls `fstat(0)` for
//! the given time. One thread, unpinned as `uvfs run`'s serving threads are, answers each
//! call as `uvfs run` answers an `fstat`: one `process_vm_writev` of a 144-byte `struct
//! stat` and a success, with synchronous wake-ups (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`, as
//! `supervisor::run` sets). What is left of `uvfs run`'s own time per call above this is
//! uvfs's (finding the process, the `fstat` through the embedded layer, its longer filter);
//! the rest is the kernel's context switches, which no supervisor can avoid. Differences
//! from `uvfs run` that remain: one serving thread (`uvfs run` has one per two CPUs), and
//! processes where the benchmark's `fstat-shared` workers are threads of one process.
//!
//! Linux analogue: none; the probe is seccomp_unotify(2)'s example reduced to one call.

use std::io;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use crate::sys;

/// Measures the floor with `procs` processes calling for `duration` each, answered by one
/// serving thread (as `uvfs run` serves with one on this project's 2-CPU VM): notified
/// calls per second, all processes' calls over the longest process's time (as the
/// benchmark's harness counts a run). Process i is pinned to the i-th CPU this process may
/// run on (round robin), as the benchmark pins worker i.
///
/// # Errors
/// `EINVAL` for `procs` 0 or above 64; `Unsupported` where the kernel has no synchronous
/// wake-ups (before Linux 6.6: `uvfs run` serves with them, and a blocked receive there
/// would not end if a process died early); the fork's errno; `UnexpectedEof` when the
/// child ended before sending its listener (the kernel refused the filter: `EBUSY` under
/// another listener, e.g. inside `uvfs run`) or a process ended before its last call.
pub fn notify_floor(procs: usize, duration: Duration) -> io::Result<f64> {
    if !(1..=64).contains(&procs) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let prog = sys::filter_program(&[libc::SYS_fstat as u32], &[]);
    // Each process's CPU set, made before the fork (a child must not allocate).
    // SAFETY: all-zero is an empty cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a cpu_set_t the call fills; its size is passed.
    let got = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    let cpus: Vec<usize> = if got == 0 {
        // SAFETY: CPU_ISSET reads `set` within its size.
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    } else {
        Vec::new()
    };
    let pins: Vec<Option<libc::cpu_set_t>> = (0..procs)
        .map(|i| {
            let &c = cpus.get(i % cpus.len().max(1))?;
            // SAFETY: all-zero is an empty set.
            let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: `c` < CPU_SETSIZE (from the loop above): CPU_SET writes within `one`.
            unsafe { libc::CPU_SET(c, &mut one) };
            Some(one)
        })
        .collect();
    // SEQPACKET: each process's report stays one message.
    let (ours, theirs) = sys::seqpacket_pair()?;
    let ns = u64::try_from(duration.as_nanos())
        .unwrap_or(u64::MAX)
        .max(1);
    // SAFETY: the child runs `child` only: raw syscalls on locals made before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: we are the child of that fork.
        unsafe { child(&prog, theirs.as_raw_fd(), &pins, ns) }
    }
    drop(theirs);
    // A pidfd (opened before anyone can reap the child, so it names this child for good),
    // for the kill on the error path.
    // SAFETY: pidfd_open with integer arguments.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    // Reaped at once when it ends, not after `serve`: on Linux 6.6 to 6.10 a filter's
    // listener hangs up only when its last process is reaped, so a child that died early
    // must be reaped for `serve`'s blocked receive to end.
    let reap = move || {
        let mut st = 0;
        // SAFETY: `st` is an int the call fills; `pid` is our child, reaped only here.
        while unsafe { libc::waitpid(pid, &mut st, 0) } < 0 && sys::errno() == libc::EINTR {}
    };
    let reaper = std::thread::Builder::new()
        .name("uvfs-floor-reap".into())
        .spawn(reap);
    let r = serve(std::fs::File::from(ours), procs);
    if r.is_err() && pidfd >= 0 {
        // SAFETY: pidfd_send_signal with integer arguments and no siginfo: the first
        // process, whose forks die with it (PDEATHSIG).
        unsafe { libc::syscall(libc::SYS_pidfd_send_signal, pidfd, libc::SIGKILL, 0, 0) };
    }
    match reaper {
        Ok(h) => drop(h.join()),
        Err(_) => reap(),
    }
    if pidfd >= 0 {
        // SAFETY: our pidfd, not used after.
        unsafe { libc::close(pidfd) };
    }
    r
}

/// `fstat`'s descriptor argument that ends a process's calls: -1 (the kernel's `unsigned
/// int fd` is the register's low 32 bits).
const END: u32 = u32::MAX;

/// The parent's side: the listener, then answers until every process sent its end marker;
/// their summed rate.
fn serve(mut sock: std::fs::File, procs: usize) -> io::Result<f64> {
    let listener = sys::recv_fd(sock.as_fd())?;
    if !sys::set_sync_wakeup(listener.as_fd()) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the kernel has no synchronous seccomp wake-ups (Linux 6.6)",
        ));
    }
    // Go: each process starts its clock after its byte.
    for _ in 0..procs {
        sock.write_all(&[1])?;
    }
    let stat = [0u8; std::mem::size_of::<libc::stat>()];
    let mut ended = 0;
    while ended < procs {
        let n = match sys::recv(listener.as_fd()) {
            Ok(n) => n,
            // A call that went before it was received (a signal); or, with the listener
            // hung up, every process gone before its end marker.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                if sys::hung_up(listener.as_fd()) {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the probe's processes ended before their last call",
                    ));
                }
                continue;
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        };
        let a = if n.args[0] as u32 == END {
            ended += 1;
            sys::Answer::Err(libc::EBADF)
        } else {
            // The caller's buffer; a failure answered as uvfs run answers one.
            match sys::write_mem(n.pid, n.args[1], &stat) {
                Ok(()) => sys::Answer::Val(0),
                Err(e) => sys::Answer::Err(e),
            }
        };
        sys::respond(listener.as_fd(), n.id, a)?;
    }
    let (mut calls, mut longest) = (0u64, 1u64);
    for _ in 0..procs {
        let mut m = [0u8; 16];
        sock.read_exact(&mut m)?;
        calls += u64::from_ne_bytes(m[..8].try_into().unwrap_or_default());
        longest = longest.max(u64::from_ne_bytes(m[8..].try_into().unwrap_or_default()));
    }
    Ok(calls as f64 * 1e9 / longest as f64)
}

/// The first process: the filter, the listener to the parent, one fork per further
/// process (sharing the filter and its listener, as a program's processes under `uvfs
/// run`), then its own calls.
///
/// # Safety
/// Called in the child of `fork` of a possibly multi-threaded process: raw syscalls only,
/// no allocation, no lock.
unsafe fn child(
    prog: &[libc::sock_filter],
    sock: i32,
    pins: &[Option<libc::cpu_set_t>],
    ns: u64,
) -> ! {
    // SAFETY: async-signal-safe calls (the whole body) on this frame's locals and on
    // `prog` and `pins`, made before the fork.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        let Ok(fd) = sys::install_filter(prog) else {
            libc::_exit(1)
        };
        if sys::send_fd(sock, fd).is_err() {
            libc::_exit(1);
        }
        libc::close(fd);
        let mut me = 0;
        for i in 1..pins.len() {
            let p = libc::fork();
            if p == 0 {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                me = i;
                break;
            }
            if p < 0 {
                libc::_exit(1);
            }
        }
        if let Some(set) = &pins[me] {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
        }
        calls(sock, ns);
        if me == 0 {
            // The first process outlives its forks (their PDEATHSIG): it waits for all of
            // them (a signal's handler, inherited from the benchmark, only interrupts one
            // wait).
            let mut st = 0;
            while libc::wait(&mut st) > 0 || sys::errno() == libc::EINTR {}
        }
        libc::_exit(0)
    }
}

/// One process's calls: `fstat(0)` until `ns` nanoseconds have passed (the clock read
/// every 64 calls), the end marker, then its count and time to the parent.
///
/// # Safety
/// As [`child`]'s.
unsafe fn calls(sock: i32, ns: u64) {
    // SAFETY: raw syscalls (the whole body) on this frame's locals.
    unsafe {
        let mut go = 0u8;
        if libc::read(sock, (&mut go as *mut u8).cast(), 1) != 1 {
            libc::_exit(1);
        }
        let now = || {
            let mut t: libc::timespec = std::mem::zeroed();
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t);
            (t.tv_sec as u64)
                .wrapping_mul(1_000_000_000)
                .wrapping_add(t.tv_nsec as u64)
        };
        let mut st: libc::stat = std::mem::zeroed();
        let t0 = now();
        let (mut n, mut took) = (0u64, 0u64);
        while took < ns {
            for _ in 0..64 {
                libc::syscall(
                    libc::SYS_fstat,
                    0 as libc::c_long,
                    &mut st as *mut libc::stat,
                );
            }
            n += 64;
            took = now().wrapping_sub(t0);
        }
        libc::syscall(
            libc::SYS_fstat,
            -1 as libc::c_long,
            &mut st as *mut libc::stat,
        );
        let mut m = [0u8; 16];
        m[..8].copy_from_slice(&n.to_ne_bytes());
        m[8..].copy_from_slice(&took.to_ne_bytes());
        libc::write(sock, m.as_ptr().cast(), m.len());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// The probe answers every process's calls to the end and reports a rate (positive and
    /// finite; a bound on it would be a timed test, which the benchmark replaces).
    #[test]
    fn floor_is_measured() {
        for procs in [1, 3] {
            let rate = super::notify_floor(procs, Duration::from_millis(20))
                .expect("seccomp user notification");
            assert!(rate.is_finite() && rate > 0.0, "{procs}: {rate}");
        }
    }
}
