//! File locks: `fcntl` record locks (`F_GETLK`, `F_SETLK`, `F_SETLKW` and the `F_OFD_*`
//! forms) and `flock(2)`, asserted against Linux tmpfs (each differential case also runs on
//! the host kernel, hostfs and the FUSE client, see `common`).
//!
//! A "process" is a forked task (on the host: a thread with its own descriptor table, which
//! is what Linux's classic locks are owned by). The host's forked threads share the test
//! process's pid, so differential cases compare `l_pid` as its kind (`PID` for a process,
//! -1 for an OFD lock, 0); the uvfs-only cases at the end check the exact pid, and cover
//! what needs two processes at once (blocking waits, `EDEADLK`, interruption) with
//! expectations measured on Linux 6.x tmpfs by a Python probe (`fcntl.fcntl`,
//! `fcntl.flock`, `os.fork`; its results are quoted at each case).
//!
//! Linux: fs/locks.c (`fcntl_getlk`, `fcntl_setlk`, `flock64_to_posix_lock`,
//! `check_fmode_for_setlk`, `posix_lock_inode`, `posix_locks_deadlock`, `flock_lock_inode`,
//! `locks_remove_posix`, `locks_remove_file`), fs/fcntl.c (`do_fcntl`: `EBADF` on `O_PATH`).

mod common;
use common::*;
use std::sync::mpsc;
use std::time::Duration;
use uvfs::locks::{F_RDLCK, F_UNLCK, F_WRLCK, LOCK_EX, LOCK_MAND, LOCK_NB, LOCK_SH, LOCK_UN};
use uvfs::types::{SEEK_CUR, SEEK_END, SEEK_SET};
use uvfs::{Errno, Fd, Flock, Interrupter, LockCmd, OpenFlags, Task};

type R<T> = Result<T, Errno>;

const RD: i16 = F_RDLCK;
const WR: i16 = F_WRLCK;
const UN: i16 = F_UNLCK;
/// `l_pid` of a classic lock, compared as "some process" (see the module doc).
const PID: i32 = 1;

const GET: LockCmd = LockCmd::GetLk;
const SET: LockCmd = LockCmd::SetLk;
const OGET: LockCmd = LockCmd::OfdGetLk;
const OSET: LockCmd = LockCmd::OfdSetLk;

fn lk(ty: i16, whence: i32, start: i64, len: i64) -> Flock {
    Flock {
        l_type: ty,
        l_whence: whence as i16,
        l_start: start,
        l_len: len,
        l_pid: 0,
    }
}

/// `(l_type, l_whence, l_start, l_len, l_pid kind)`.
type Got = (i16, i16, i64, i64, i32);

fn kind(pid: i32) -> i32 {
    if pid > 0 {
        PID
    } else {
        pid
    }
}

/// A `Set` command over `[start, start + len)` from `SEEK_SET`.
fn set(s: &dyn Sys, fd: Fd, cmd: LockCmd, ty: i16, start: i64, len: i64) -> R<()> {
    s.fcntl_lock(fd, cmd, &mut lk(ty, SEEK_SET, start, len))
}

/// A `Get` command over `[start, start + len)`: what comes back.
fn get(s: &dyn Sys, fd: Fd, cmd: LockCmd, ty: i16, start: i64, len: i64) -> R<Got> {
    let mut f = lk(ty, SEEK_SET, start, len);
    s.fcntl_lock(fd, cmd, &mut f)?;
    Ok((f.l_type, f.l_whence, f.l_start, f.l_len, kind(f.l_pid)))
}

/// What another process's `F_GETLK` of each `(type, start, len)` sees.
fn seen_by_child(s: &dyn Sys, fd: Fd, probes: &[(i16, i64, i64)]) -> Vec<R<Got>> {
    let mut out = Vec::new();
    s.fork(&mut |c| {
        out = probes
            .iter()
            .map(|&(t, st, l)| get(c, fd, GET, t, st, l))
            .collect();
    });
    out
}

/// `/f` open read-write with 100 bytes.
fn file(s: &dyn Sys) -> Fd {
    let fd = s.open(b"/f", CREAT | RW, 0o644).unwrap();
    s.write(fd, &[b'x'; 100]).unwrap();
    fd
}

#[test]
fn argument_errors() {
    // Probe (Linux): bad type, bad whence (both: EINVAL), F_GETLK of F_UNLCK EINVAL, a
    // start before 0 EINVAL, a negative length reaching before 0 EINVAL, start + len past
    // OFFSET_MAX EOVERFLOW (exactly OFFSET_MAX is fine), SEEK_END + l_start past it
    // EOVERFLOW, before 0 EINVAL, OFD with l_pid != 0 EINVAL (set and get).
    table::<Vec<R<()>>>(&[(
        "fcntl lock argument errors",
        vec![
            Err(Errno::EINVAL),
            Err(Errno::EINVAL),
            Err(Errno::EINVAL),
            Err(Errno::EINVAL),
            Err(Errno::EINVAL),
            Err(Errno::EINVAL),
            Ok(()),
            Err(Errno::EOVERFLOW),
            Ok(()),
            Err(Errno::EOVERFLOW),
            Err(Errno::EINVAL),
            Err(Errno::EINVAL),
            Err(Errno::EINVAL),
            Err(Errno::EBADF),
        ],
        |s| {
            let m = i64::MAX;
            let fd = file(s);
            let c = |cmd, mut f: Flock| s.fcntl_lock(fd, cmd, &mut f);
            let mut ofd_pid = lk(WR, SEEK_SET, 0, 0);
            ofd_pid.l_pid = 1;
            let mut ofd_get_pid = lk(WR, SEEK_SET, 0, 0);
            ofd_get_pid.l_pid = 1;
            vec![
                c(SET, lk(7, SEEK_SET, 0, 0)),
                c(SET, lk(WR, 5, 0, 0)),
                c(SET, lk(7, 5, 0, 0)),
                c(GET, lk(UN, SEEK_SET, 0, 0)),
                c(SET, lk(WR, SEEK_SET, -1, 0)),
                c(SET, lk(WR, SEEK_SET, 5, -6)),
                c(SET, lk(WR, SEEK_SET, 5, -5)),
                c(SET, lk(WR, SEEK_SET, m, 2)),
                c(SET, lk(WR, SEEK_SET, m, 1)),
                c(SET, lk(WR, SEEK_END, m, 0)),
                c(SET, lk(WR, SEEK_END, -101, 0)),
                c(OSET, ofd_pid),
                c(OGET, ofd_get_pid),
                s.fcntl_lock(Fd(99), SET, &mut lk(WR, SEEK_SET, 0, 0)),
            ]
        },
    )]);
}

#[test]
fn access_mode_and_o_path() {
    // Probe: F_WRLCK on O_RDONLY and F_RDLCK on O_WRONLY: EBADF; F_UNLCK on O_RDONLY: fine;
    // a bad type on O_RDONLY: EINVAL (before EBADF); O_PATH: EBADF for F_GETLK, F_SETLK and
    // flock; a directory takes both kinds. F_GETLK of F_WRLCK on O_RDONLY: F_UNLCK.
    expect(
        (
            vec![
                Err(Errno::EBADF),
                Err(Errno::EBADF),
                Ok(()),
                Err(Errno::EINVAL),
                Err(Errno::EBADF),
                Err(Errno::EBADF),
                Err(Errno::EBADF),
                Ok(()),
                Ok(()),
            ],
            Ok((UN, 0, 0, 0, 0)),
        ),
        |s| {
            let _ = file(s);
            let rd = s.open(b"/f", RO, 0).unwrap();
            let wr = s.open(b"/f", WO, 0).unwrap();
            let op = s.open(b"/f", OpenFlags::PATH, 0).unwrap();
            s.mkdirat(CWD, b"/d", 0o755).unwrap();
            let d = s.open(b"/d", RO, 0).unwrap();
            (
                vec![
                    set(s, rd, SET, WR, 0, 0),
                    set(s, wr, SET, RD, 0, 0),
                    set(s, rd, SET, UN, 0, 0),
                    set(s, rd, SET, 9, 0, 0),
                    get(s, op, GET, WR, 0, 0).map(drop),
                    set(s, op, SET, UN, 0, 0),
                    s.flock(op, LOCK_SH),
                    set(s, d, SET, RD, 0, 0),
                    s.flock(d, LOCK_EX),
                ],
                get(s, rd, GET, WR, 0, 0),
            )
        },
    );
}

#[test]
fn getlk_leaves_fields_when_nothing_conflicts() {
    // Probe: with no conflicting lock only l_type changes (to F_UNLCK): l_pid 55 and the
    // range come back as given; one's own locks never conflict.
    expect(Ok(lk_pid(UN, SEEK_CUR, 3, 4, 55)), |s| {
        let fd = file(s);
        set(s, fd, SET, WR, 0, 0).unwrap();
        let mut f = lk_pid(WR, SEEK_CUR, 3, 4, 55);
        s.fcntl_lock(fd, GET, &mut f).map(|()| f)
    });
}

fn lk_pid(ty: i16, whence: i32, start: i64, len: i64, pid: i32) -> Flock {
    Flock {
        l_pid: pid,
        ..lk(ty, whence, start, len)
    }
}

#[test]
fn conflicts_between_processes_and_getlk_fields() {
    // Probe: parent holds W [10, 20) and R [30, EOF); the child's F_GETLK W from 0 reports
    // the write lock (SEEK_SET, 10, 10, the parent's pid); R at 15 the same; R at 40: no
    // conflict; W at 40: the read lock (30, 0 = to EOF); W at [25, 30): none; its F_SETLK
    // W from 0: EAGAIN; its F_OFD_GETLK W at 12: the write lock with the parent's pid.
    expect(
        (
            vec![
                Ok((WR, 0, 10, 10, PID)),
                Ok((WR, 0, 10, 10, PID)),
                Ok((UN, 0, 40, 5, 0)),
                Ok((RD, 0, 30, 0, PID)),
                Ok((UN, 0, 25, 5, 0)),
            ],
            Err(Errno::EAGAIN),
            Ok((WR, 0, 10, 10, PID)),
            Ok((UN, 0, 0, 0, 0)),
        ),
        |s| {
            let fd = file(s);
            set(s, fd, SET, WR, 10, 10).unwrap();
            set(s, fd, SET, RD, 30, 0).unwrap();
            let mut out = (Vec::new(), Ok(()), Err(Errno::EIO), Err(Errno::EIO));
            s.fork(&mut |c| {
                out.0 = [
                    (WR, 0, 0),
                    (RD, 15, 1),
                    (RD, 40, 5),
                    (WR, 40, 5),
                    (WR, 25, 5),
                ]
                .iter()
                .map(|&(t, st, l)| get(c, fd, GET, t, st, l))
                .collect();
                out.1 = set(c, fd, SET, WR, 0, 0);
                out.2 = get(c, fd, OGET, WR, 12, 1);
            });
            out.3 = get(s, fd, GET, WR, 0, 0);
            (out.0, out.1, out.2, out.3)
        },
    );
}

#[test]
fn whence_cur_and_end() {
    // SEEK_CUR counts from the offset (50), SEEK_END from the size (100); a negative
    // length locks the bytes before the start. The child sees [40, 45), [90, EOF) and
    // [60, 70) (SEEK_END -30, len -10).
    expect(
        vec![
            Ok((WR, 0, 40, 5, PID)),
            Ok((WR, 0, 90, 0, PID)),
            Ok((RD, 0, 60, 10, PID)),
        ],
        |s| {
            let fd = file(s);
            s.lseek(fd, 50, SEEK_SET).unwrap();
            s.fcntl_lock(fd, SET, &mut lk(WR, SEEK_CUR, -10, 5))
                .unwrap();
            s.fcntl_lock(fd, SET, &mut lk(WR, SEEK_END, -10, 0))
                .unwrap();
            s.fcntl_lock(fd, SET, &mut lk(RD, SEEK_END, -30, -10))
                .unwrap();
            seen_by_child(s, fd, &[(WR, 0, 50), (RD, 80, 0), (WR, 55, 15)])
        },
    );
}

#[test]
fn merge_split_and_unlock_in_the_middle() {
    // Probe: W [0,10) + W [10,20) merge: the child sees (0, 20). W [0,30) then R [10,20):
    // split into W [0,10), R [10,20), W [20,30). W [0,EOF) then unlock [10,20): W [0,10)
    // and W [20,EOF).
    table::<Vec<R<Got>>>(&[
        (
            "adjacent write locks merge",
            vec![Ok((WR, 0, 0, 20, PID))],
            |s| {
                let fd = file(s);
                set(s, fd, SET, WR, 0, 10).unwrap();
                set(s, fd, SET, WR, 10, 10).unwrap();
                seen_by_child(s, fd, &[(WR, 5, 1)])
            },
        ),
        (
            "a read lock splits a write lock",
            vec![
                Ok((WR, 0, 0, 10, PID)),
                Ok((UN, 0, 10, 10, 0)),
                Ok((RD, 0, 10, 10, PID)),
                Ok((WR, 0, 20, 10, PID)),
            ],
            |s| {
                let fd = file(s);
                set(s, fd, SET, WR, 0, 30).unwrap();
                set(s, fd, SET, RD, 10, 10).unwrap();
                seen_by_child(s, fd, &[(RD, 0, 0), (RD, 10, 10), (WR, 10, 1), (RD, 25, 1)])
            },
        ),
        (
            "unlock in the middle",
            vec![
                Ok((WR, 0, 0, 10, PID)),
                Ok((UN, 0, 10, 10, 0)),
                Ok((WR, 0, 20, 0, PID)),
            ],
            |s| {
                let fd = file(s);
                set(s, fd, SET, WR, 0, 0).unwrap();
                set(s, fd, SET, UN, 10, 10).unwrap();
                seen_by_child(s, fd, &[(WR, 0, 0), (WR, 10, 10), (WR, 20, 1)])
            },
        ),
        (
            "read locks of two processes share",
            vec![Ok((RD, 0, 0, 0, PID))],
            |s| {
                let fd = file(s);
                set(s, fd, SET, RD, 0, 0).unwrap();
                let mut r = Err(Errno::EIO);
                s.fork(&mut |c| {
                    r = set(c, fd, SET, RD, 5, 5).and_then(|()| get(c, fd, GET, WR, 0, 0));
                });
                vec![r]
            },
        ),
    ]);
}

#[test]
fn same_owner_and_release_on_close() {
    // Probe: one process's locks through two descriptors never conflict; closing ANY
    // descriptor of the file (one that locked nothing, read-only) drops them all; a fork
    // child closing its inherited descriptor leaves the parent's locks.
    table::<Vec<R<Got>>>(&[
        (
            "same owner through two opens",
            vec![Ok((UN, 0, 0, 0, 0))],
            |s| {
                let fd = file(s);
                let fd2 = s.open(b"/f", RW, 0).unwrap();
                set(s, fd, SET, WR, 0, 0).unwrap();
                set(s, fd2, SET, WR, 0, 0).unwrap();
                vec![get(s, fd2, GET, WR, 0, 0)]
            },
        ),
        (
            "close of another descriptor releases",
            vec![Ok((UN, 0, 0, 0, 0))],
            |s| {
                let fd = file(s);
                let fd2 = s.open(b"/f", RO, 0).unwrap();
                set(s, fd, SET, WR, 0, 0).unwrap();
                s.close(fd2).unwrap();
                seen_by_child(s, fd, &[(WR, 0, 0)])
            },
        ),
        (
            "dup2 over a descriptor releases",
            vec![Ok((UN, 0, 0, 0, 0))],
            |s| {
                let fd = file(s);
                let fd2 = s.open(b"/f", RO, 0).unwrap();
                let other = s.open(b"/g", CREAT | RW, 0o644).unwrap();
                set(s, fd, SET, WR, 0, 0).unwrap();
                s.dup2(other, fd2).unwrap();
                seen_by_child(s, fd, &[(WR, 0, 0)])
            },
        ),
        (
            "close_range over a descriptor releases",
            vec![Ok((UN, 0, 0, 0, 0))],
            |s| {
                let fd = file(s);
                let fd2 = s.open(b"/f", RO, 0).unwrap();
                set(s, fd, SET, WR, 0, 0).unwrap();
                // Only `fd2` (the highest descriptor) closes.
                s.close_range(fd2.0 as u32, u32::MAX, 0).unwrap();
                seen_by_child(s, fd, &[(WR, 0, 0)])
            },
        ),
        (
            "a child's close keeps the parent's locks",
            vec![Ok((WR, 0, 0, 0, PID))],
            |s| {
                let fd = file(s);
                set(s, fd, SET, WR, 0, 0).unwrap();
                s.fork(&mut |c| c.close(fd).unwrap());
                seen_by_child(s, fd, &[(WR, 0, 0)])
            },
        ),
        (
            "a child's locks go when it exits",
            vec![Ok((UN, 0, 0, 0, 0))],
            |s| {
                let fd = file(s);
                s.fork(&mut |c| set(c, fd, SET, WR, 0, 0).unwrap());
                vec![get(s, fd, GET, WR, 0, 0)]
            },
        ),
    ]);
}

#[test]
fn ofd_locks() {
    // Probe: an OFD lock conflicts with another open's OFD lock and with the process's own
    // classic lock through it (EAGAIN both), F_GETLK reports it with l_pid -1; a dup shares
    // it (converting [0,5) to a read lock; the other open's F_OFD_GETLK then sees the read
    // lock first); closing another descriptor or one dup keeps it, the last close drops it.
    expect(
        (
            vec![
                Ok(()),
                Err(Errno::EAGAIN),
                Err(Errno::EAGAIN),
                Ok(()),
                Err(Errno::EAGAIN),
                Err(Errno::EAGAIN),
                Ok(()),
            ],
            vec![
                Ok((WR, 0, 0, 0, -1)),
                Ok((WR, 0, 0, 0, -1)),
                Ok((RD, 0, 0, 5, -1)),
                Ok((WR, 0, 5, 0, -1)),
            ],
        ),
        |s| {
            let fd = file(s);
            let fd2 = s.open(b"/f", RW, 0).unwrap();
            let mut sets = vec![
                set(s, fd, OSET, WR, 0, 0),
                set(s, fd2, OSET, WR, 0, 0),
                set(s, fd2, SET, WR, 0, 0),
            ];
            let mut gets = vec![get(s, fd2, GET, RD, 0, 0), get(s, fd2, OGET, RD, 0, 0)];
            let fd3 = s.dup(fd).unwrap();
            sets.push(set(s, fd3, OSET, RD, 0, 5));
            gets.push(get(s, fd2, OGET, WR, 0, 0));
            gets.push(get(s, fd2, OGET, WR, 5, 0));
            let fd4 = s.open(b"/f", RO, 0).unwrap();
            s.close(fd4).unwrap();
            sets.push(set(s, fd2, OSET, RD, 0, 0));
            s.close(fd).unwrap();
            sets.push(set(s, fd2, OSET, RD, 0, 0));
            s.close(fd3).unwrap();
            sets.push(set(s, fd2, OSET, WR, 0, 0));
            (sets, gets)
        },
    );
}

#[test]
fn ofd_getlk_of_unlck_reports_the_descriptors_own_lock() {
    // Probe (Linux 6.18 tmpfs, Python): F_OFD_GETLK with F_UNLCK (Linux 6.6+) reports the
    // open file's own OFD lock over the range ((WR, 0, 0, 10, -1)), F_UNLCK with the fields
    // left when it has none there (another open of the file; past the lock; no lock at
    // all); F_GETLK of F_UNLCK and F_OFD_GETLK of type 7 are EINVAL.
    expect(
        vec![
            Ok((UN, 0, 0, 0, 0)),
            Ok((WR, 0, 0, 10, -1)),
            Ok((UN, 0, 5, 1, 0)),
            Ok((UN, 0, 20, 1, 0)),
            Err(Errno::EINVAL),
            Err(Errno::EINVAL),
        ],
        |s| {
            let fd = file(s);
            let fd2 = s.open(b"/f", RW, 0).unwrap();
            let mut out = vec![get(s, fd, OGET, UN, 0, 0)];
            set(s, fd, OSET, WR, 0, 10).unwrap();
            out.push(get(s, fd, OGET, UN, 5, 1));
            out.push(get(s, fd2, OGET, UN, 5, 1));
            out.push(get(s, fd, OGET, UN, 20, 1));
            out.push(get(s, fd, GET, UN, 0, 0));
            out.push(get(s, fd, OGET, 7, 0, 0));
            out
        },
    );
}

#[test]
fn ofd_and_classic_of_one_process_conflict() {
    // Probe: a classic W [0,10) and an OFD W at 5 through another open of the same
    // process: EAGAIN; F_OFD_GETLK sees the classic lock with the process's pid.
    expect((Err(Errno::EAGAIN), Ok((WR, 0, 0, 10, PID))), |s| {
        let fd = file(s);
        let fd2 = s.open(b"/f", RW, 0).unwrap();
        set(s, fd, SET, WR, 0, 10).unwrap();
        (set(s, fd2, OSET, WR, 5, 1), get(s, fd2, OGET, WR, 0, 0))
    });
}

#[test]
fn flock_errors() {
    // Probe: op 0, 3 (SH|EX), LOCK_NB alone: EINVAL, also on a bad descriptor (checked
    // first); LOCK_MAND: 0; a bad descriptor: EBADF; LOCK_UN of an unlocked file: 0.
    expect(
        vec![
            Err(Errno::EINVAL),
            Err(Errno::EINVAL),
            Err(Errno::EINVAL),
            Ok(()),
            Err(Errno::EINVAL),
            Err(Errno::EBADF),
            Ok(()),
        ],
        |s| {
            let fd = file(s);
            vec![
                s.flock(fd, 0),
                s.flock(fd, LOCK_SH | LOCK_EX),
                s.flock(fd, LOCK_NB),
                s.flock(fd, LOCK_MAND),
                s.flock(Fd(99), 3),
                s.flock(Fd(99), LOCK_SH),
                s.flock(fd, LOCK_UN),
            ]
        },
    );
}

#[test]
fn flock_sharing_and_conversion() {
    // Probe: EX on one open, SH|NB on another: EWOULDBLOCK; SH through a dup converts the
    // shared lock (then the other open's SH succeeds, its EX fails); a fork child's LOCK_UN
    // through the inherited descriptor unlocks it for everyone. A failed conversion (SH to
    // EX|NB while another open holds SH) leaves the file unlocked. flock and OFD locks do
    // not see each other. Closing one dup keeps the lock; the last close drops it.
    table::<Vec<R<()>>>(&[
        (
            "conversions through a dup, unlock from a child",
            vec![
                Ok(()),
                Err(Errno::EWOULDBLOCK),
                Ok(()),
                Ok(()),
                Err(Errno::EWOULDBLOCK),
                Ok(()),
                Ok(()),
            ],
            |s| {
                let fd = file(s);
                let fd2 = s.open(b"/f", RW, 0).unwrap();
                let mut v = vec![s.flock(fd, LOCK_EX), s.flock(fd2, LOCK_SH | LOCK_NB)];
                let fd3 = s.dup(fd).unwrap();
                v.push(s.flock(fd3, LOCK_SH));
                v.push(s.flock(fd2, LOCK_SH | LOCK_NB));
                v.push(s.flock(fd2, LOCK_EX | LOCK_NB));
                let mut r = Err(Errno::EIO);
                s.fork(&mut |c| r = c.flock(fd, LOCK_UN));
                v.push(r);
                v.push(s.flock(fd2, LOCK_EX | LOCK_NB));
                v
            },
        ),
        (
            "a failed conversion unlocks",
            vec![
                Ok(()),
                Ok(()),
                Err(Errno::EWOULDBLOCK),
                Err(Errno::EWOULDBLOCK),
                Ok(()),
                Ok(()),
            ],
            |s| {
                let fd = file(s);
                let fd2 = s.open(b"/f", RW, 0).unwrap();
                let fd5 = s.open(b"/f", RW, 0).unwrap();
                vec![
                    s.flock(fd, LOCK_SH),
                    s.flock(fd2, LOCK_SH),
                    s.flock(fd, LOCK_EX | LOCK_NB),
                    s.flock(fd5, LOCK_EX | LOCK_NB),
                    s.flock(fd2, LOCK_UN),
                    s.flock(fd5, LOCK_EX | LOCK_NB),
                ]
            },
        ),
        (
            "flock and record locks are apart; last close releases",
            vec![Ok(()), Ok(()), Err(Errno::EWOULDBLOCK), Ok(())],
            |s| {
                let fd = file(s);
                let fd2 = s.open(b"/f", RW, 0).unwrap();
                let mut v = vec![s.flock(fd, LOCK_EX), set(s, fd2, OSET, WR, 0, 0)];
                let fd3 = s.dup(fd).unwrap();
                s.close(fd).unwrap();
                v.push(s.flock(fd2, LOCK_EX | LOCK_NB));
                s.close(fd3).unwrap();
                v.push(s.flock(fd2, LOCK_EX | LOCK_NB));
                v
            },
        ),
    ]);
}

// ---------------------------------------------------------------------------------------
// uvfs only: two processes at once (threads), on every file system behind the seam.

/// Every file system behind the seam: [`each_fs`] and, with the `fuse` feature, the FUSE
/// client (the locks are the VFS's, so all must behave alike).
fn all_fs() -> Vec<Uvfs> {
    #[allow(unused_mut)]
    let mut v = each_fs();
    #[cfg(feature = "fuse")]
    if fuse_enabled() {
        v.push(Uvfs::fuse_client(None, ""));
    }
    v
}

fn open_f(t: &Task) -> Fd {
    t.open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
        .unwrap()
}

fn t_set(t: &Task, fd: Fd, cmd: LockCmd, ty: i16, start: i64, len: i64) -> R<()> {
    t.fcntl_lock(fd, cmd, &mut lk(ty, SEEK_SET, start, len))
}

/// Runs `f` on task `c` in a thread of its own (a second process running at once); `f`
/// sends its results through the channel. The join gives the task back.
fn run_child<T: Send + 'static>(
    c: Task,
    f: impl FnOnce(&Task, mpsc::Sender<T>) + Send + 'static,
) -> (mpsc::Receiver<T>, std::thread::JoinHandle<Task>) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        f(&c, tx);
        c
    });
    (rx, h)
}

/// The child's next result, waiting at most 10 s.
fn next<T>(rx: &mpsc::Receiver<T>) -> Result<T, mpsc::RecvTimeoutError> {
    rx.recv_timeout(Duration::from_secs(10))
}

/// Gives a thread time to fall asleep in a lock wait.
fn settle() {
    std::thread::sleep(Duration::from_millis(100));
}

#[test]
fn getlk_reports_the_owner_pid() {
    for u in all_fs() {
        let p = &u.task;
        let fd = open_f(p);
        t_set(p, fd, SET, WR, 0, 0).unwrap();
        let c = p.fork();
        let mut f = lk(RD, SEEK_SET, 0, 0);
        c.fcntl_lock(fd, GET, &mut f).unwrap();
        assert_eq!((f.l_type, f.l_pid), (WR, p.getpid()));
        assert_ne!(p.getpid(), c.getpid());
    }
}

#[test]
fn setlkw_waits_until_granted() {
    // Probe: a child's F_SETLKW of a read lock sleeps while the parent holds a write lock
    // and returns 0 when the parent unlocks (after 0.3 s there).
    for u in all_fs() {
        let p = &u.task;
        let fd = open_f(p);
        t_set(p, fd, SET, WR, 0, 0).unwrap();
        let c = p.fork();
        let (rx, h) = run_child(c, move |c, tx| {
            tx.send(t_set(c, fd, LockCmd::SetLkW, RD, 0, 0)).unwrap();
        });
        settle();
        assert!(
            rx.try_recv().is_err(),
            "F_SETLKW returned while the lock was held"
        );
        t_set(p, fd, SET, UN, 0, 0).unwrap();
        assert_eq!(next(&rx), Ok(Ok(())));
        let c = h.join().unwrap();
        // The child holds it now: the parent's write lock conflicts.
        assert_eq!(t_set(p, fd, SET, WR, 0, 0), Err(Errno::EAGAIN));
        drop(c);
        // Its exit released it.
        assert_eq!(t_set(p, fd, SET, WR, 0, 0), Ok(()));
    }
}

#[test]
fn setlkw_deadlock_is_edeadlk() {
    // Probe: parent holds [0,1), child holds [1,2) and sleeps in F_SETLKW for [0,1); the
    // parent's F_SETLKW for [1,2) fails with EDEADLK (Python: EDEADLOCK, the same 35); after
    // the parent unlocks, the child gets its lock.
    for u in all_fs() {
        let p = &u.task;
        let fd = open_f(p);
        t_set(p, fd, SET, WR, 0, 1).unwrap();
        let c = p.fork();
        t_set(&c, fd, SET, WR, 1, 1).unwrap();
        let (rx, h) = run_child(c, move |c, tx| {
            tx.send(t_set(c, fd, LockCmd::SetLkW, WR, 0, 1)).unwrap();
        });
        settle();
        assert_eq!(t_set(p, fd, LockCmd::SetLkW, WR, 1, 1), Err(Errno::EDEADLK));
        t_set(p, fd, SET, UN, 0, 0).unwrap();
        assert_eq!(next(&rx), Ok(Ok(())));
        drop(h.join().unwrap());
    }
}

#[test]
fn lock_waits_are_interruptible() {
    // Probe: SIGUSR1 (handler installed without SA_RESTART) to a child asleep in F_SETLKW
    // or in flock: both return -1 EINTR. uvfs's stand-in for the signal is the waiting
    // thread's Interrupter.
    for u in all_fs() {
        let p = &u.task;
        let fd = open_f(p);
        t_set(p, fd, SET, WR, 0, 0).unwrap();
        p.flock(fd, LOCK_EX).unwrap();
        let c = p.fork();
        let fd2 = c.open("/f", OpenFlags::RDWR, 0).unwrap();
        let (itx, irx) = mpsc::channel();
        let (rx, h) = run_child(c, move |c, tx| {
            itx.send(Interrupter::current()).unwrap();
            tx.send(t_set(c, fd, LockCmd::SetLkW, RD, 0, 0)).unwrap();
            tx.send(c.flock(fd2, LOCK_SH)).unwrap();
            // Nothing left pending by the interrupted waits: this one waits for the unlock.
            tx.send(t_set(c, fd, LockCmd::OfdSetLkW, RD, 0, 0)).unwrap();
        });
        let intr = irx.recv().unwrap();
        settle();
        intr.interrupt();
        assert_eq!(next(&rx), Ok(Err(Errno::EINTR)));
        settle();
        intr.interrupt();
        assert_eq!(next(&rx), Ok(Err(Errno::EINTR)));
        // The OFD read lock conflicts with the parent's classic write lock: it waits until
        // the parent unlocks.
        settle();
        t_set(p, fd, SET, UN, 0, 0).unwrap();
        assert_eq!(next(&rx), Ok(Ok(())));
        drop(h.join().unwrap());
    }
}

#[test]
fn blocking_flock_waits_for_the_last_close() {
    // A blocking flock sleeps until the holder's open file is closed for the last time.
    for u in all_fs() {
        let p = &u.task;
        let fd = open_f(p);
        p.flock(fd, LOCK_EX).unwrap();
        let c = p.fork();
        // The child's inherited descriptor names the holder's open file too.
        c.close(fd).unwrap();
        let fd2 = c.open("/f", OpenFlags::RDWR, 0).unwrap();
        let (rx, h) = run_child(c, move |c, tx| tx.send(c.flock(fd2, LOCK_EX)).unwrap());
        settle();
        assert!(rx.try_recv().is_err());
        let d = p.dup(fd).unwrap();
        p.close(fd).unwrap();
        settle();
        assert!(rx.try_recv().is_err(), "a dup still holds the open file");
        p.close(d).unwrap();
        assert_eq!(next(&rx), Ok(Ok(())));
        drop(h.join().unwrap());
    }
}

#[test]
fn threads_share_classic_locks() {
    // Threads of one process share its descriptor table, so its classic locks: no
    // conflict between them, and a close in one releases the locks set by the other.
    for u in all_fs() {
        let p = &u.task;
        let fd = open_f(p);
        let t = p.clone_thread();
        t_set(p, fd, SET, WR, 0, 0).unwrap();
        assert_eq!(t_set(&t, fd, SET, WR, 0, 0), Ok(()));
        let fd2 = t.open("/f", OpenFlags::RDONLY, 0).unwrap();
        t.close(fd2).unwrap();
        let c = p.fork();
        assert_eq!(t_set(&c, fd, SET, WR, 0, 0), Ok(()));
    }
}

#[test]
fn deadlock_seen_while_another_thread_still_waits() {
    // Probe (Python threads of one process, which share its locks): P holds f[0,1), Q holds
    // f[1,2) and g[0,1); P's two threads sleep in F_SETLKW for f[1,2) and g[0,1); Q unlocks
    // f[1,2) (the first thread gets it); Q's F_SETLKW for f[0,1) is EDEADLK, since P's
    // second thread still waits for Q. When P unlocks and Q exits, the second thread gets
    // g[0,1). (The second wait is on another file so that Q's unlock does not wake it.)
    //
    // Regression: bug: Q slept forever; cause: the deadlock table kept one entry per owner,
    // which the first thread's wake-up removed; fix: one entry per sleeping request.
    for u in all_fs() {
        let p = &u.task;
        let f = open_f(p);
        let g = p
            .open("/g", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
            .unwrap();
        t_set(p, f, SET, WR, 0, 1).unwrap();
        let q = p.fork();
        t_set(&q, f, SET, WR, 1, 1).unwrap();
        t_set(&q, g, SET, WR, 0, 1).unwrap();
        let (rx1, h1) = run_child(p.clone_thread(), move |t, tx| {
            tx.send(t_set(t, f, LockCmd::SetLkW, WR, 1, 1)).unwrap();
        });
        let (rx2, h2) = run_child(p.clone_thread(), move |t, tx| {
            tx.send(t_set(t, g, LockCmd::SetLkW, WR, 0, 1)).unwrap();
        });
        settle();
        t_set(&q, f, SET, UN, 1, 1).unwrap();
        assert_eq!(next(&rx1), Ok(Ok(())));
        let (rxq, hq) = run_child(q, move |q, tx| {
            tx.send(t_set(q, f, LockCmd::SetLkW, WR, 0, 1)).unwrap();
        });
        let got = next(&rxq);
        // Whatever happened, let everyone go.
        t_set(p, f, SET, UN, 0, 1).unwrap();
        assert_eq!(got, Ok(Err(Errno::EDEADLK)));
        drop(hq.join().unwrap());
        assert_eq!(next(&rx2), Ok(Ok(())));
        drop(h1.join().unwrap());
        drop(h2.join().unwrap());
    }
}

#[test]
fn no_stale_edeadlk_after_unlock() {
    // Bug: P holds [0,1) and sleeps in F_SETLKW on [1,2), held by Q; Q unlocks [1,2) and at
    // once asks F_SETLKW for [0,1): uvfs answered EDEADLK (12 of 20 runs), Linux sleeps.
    // Cause: P's entry in the deadlock table stayed until P's thread woke and returned, so Q
    // saw "P waits for Q". Fix: a change that wakes a context's waiters drops their entries
    // at once (Linux: `locks_delete_lock_ctx` -> `locks_wake_up_blocks` ->
    // `__locks_delete_block`); a waiter that must sleep again records itself anew.
    let mut bad = 0;
    for _ in 0..20 {
        let u = each_fs().into_iter().next().unwrap();
        let p = &u.task;
        let fd = open_f(p);
        t_set(p, fd, SET, WR, 0, 1).unwrap();
        let q = p.fork();
        t_set(&q, fd, SET, WR, 1, 1).unwrap();
        let (rx1, h1) = run_child(p.clone_thread(), move |t, tx| {
            tx.send(t_set(t, fd, LockCmd::SetLkW, WR, 1, 1)).unwrap();
        });
        settle();
        let (rxq, hq) = run_child(q, move |q, tx| {
            t_set(q, fd, SET, UN, 1, 1).unwrap();
            tx.send(t_set(q, fd, LockCmd::SetLkW, WR, 0, 1)).unwrap();
        });
        let got1 = next(&rx1);
        settle();
        t_set(p, fd, SET, UN, 0, 0).unwrap();
        let gotq = next(&rxq);
        if gotq == Ok(Err(Errno::EDEADLK)) {
            bad += 1;
        }
        assert_eq!(got1, Ok(Ok(())));
        drop(hq.join().unwrap());
        drop(h1.join().unwrap());
    }
    assert_eq!(bad, 0, "spurious EDEADLK in {bad}/20 runs");
}

#[test]
fn unlock_file_acts_on_the_open_file_not_a_descriptor() {
    // `Task::unlock_file`, which `uvfs run` uses to take back a lock granted to a call that
    // is gone: the lock goes from the open file it names even when its descriptor number
    // now names another file (a classic lock, an OFD lock, a `flock` lock).
    let u = each_fs().into_iter().next().unwrap();
    let p = &u.task;
    let fd = open_f(p);
    let held = p.fget_file(fd).unwrap();
    t_set(p, fd, SET, WR, 0, 10).unwrap();
    t_set(p, fd, OSET, WR, 20, 10).unwrap();
    p.flock(fd, LOCK_EX).unwrap();
    p.close(fd).unwrap();
    let other = p
        .open("/g", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
        .unwrap();
    assert_eq!(other, fd);
    p.unlock_file(&held, OSET, Some(&lk(WR, SEEK_SET, 20, 10)))
        .unwrap();
    p.unlock_file(&held, SET, None).unwrap();
    let q = p.fork();
    let fd2 = open_f(&q);
    let mut fl = lk(WR, SEEK_SET, 0, 0);
    q.fcntl_lock(fd2, GET, &mut fl).unwrap();
    assert_eq!(fl.l_type, UN, "{fl}");
    assert_eq!(q.flock(fd2, LOCK_EX | LOCK_NB), Ok(()));
}
