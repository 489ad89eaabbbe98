//! Descriptor calls: `close`, `dup`/`dup2`/`dup3`, `fcntl` (`F_DUPFD`, `F_DUPFD_CLOEXEC`,
//! `F_GETFD`/`F_SETFD`, `F_GETFL`/`F_SETFL`), `close_range`, fork's copied table, threads'
//! shared table, and the descriptor limit (`EMFILE`), asserted against Linux (see
//! `common`). The limit is per process on Linux, so its cases run on uvfs only.

mod common;
use common::*;
use std::sync::Mutex;
use uvfs::open::{Fcntl, CLOSE_RANGE_CLOEXEC, CLOSE_RANGE_UNSHARE, FD_CLOEXEC};
use uvfs::types::*;
use uvfs::{Errno, Fd, OpenFlags};

const CLOEXEC: OpenFlags = OpenFlags::CLOEXEC;
const LARGEFILE: i32 = 0o100000;

type RF = Result<Fd, Errno>;
type RI = Result<i32, Errno>;
type R = Result<(), Errno>;

/// `/f` = "hello", opened read-only as fd 0, `/g` = "world" as fd 1.
fn two(s: &dyn Sys) {
    s.mkfile(b"/f", b"hello");
    s.mkfile(b"/g", b"world");
    assert_eq!(s.open(b"/f", RO, 0).unwrap(), Fd(0));
    assert_eq!(s.open(b"/g", RO, 0).unwrap(), Fd(1));
}

/// The first byte readable through `fd` at offset 0 (which file it refers to).
fn first_byte(s: &dyn Sys, fd: Fd) -> Result<u8, Errno> {
    let mut b = [0u8; 1];
    s.pread(fd, &mut b, 0)?;
    Ok(b[0])
}

#[test]
fn close_cases() {
    table::<R>(&[
        ("open fd", Ok(()), |s| {
            two(s);
            s.close(Fd(0))
        }),
        ("twice", Err(Errno::EBADF), |s| {
            two(s);
            s.close(Fd(0)).unwrap();
            s.close(Fd(0))
        }),
        ("never opened", Err(Errno::EBADF), |s| s.close(Fd(5))),
        ("negative", Err(Errno::EBADF), |s| s.close(Fd(-1))),
        ("AT_FDCWD", Err(Errno::EBADF), |s| s.close(CWD)),
        ("huge", Err(Errno::EBADF), |s| s.close(Fd(i32::MAX))),
        ("closed fd is unusable", Err(Errno::EBADF), |s| {
            two(s);
            s.close(Fd(1)).unwrap();
            s.read(Fd(1), &mut [0; 1]).map(drop)
        }),
        ("a dup survives closing the original", Ok(()), |s| {
            two(s);
            let d = s.dup(Fd(0)).unwrap();
            s.close(Fd(0)).unwrap();
            assert_eq!(first_byte(s, d), Ok(b'h'));
            Ok(())
        }),
    ]);
}

#[test]
fn dup_cases() {
    table::<RF>(&[
        ("lowest free", Ok(Fd(2)), |s| {
            two(s);
            s.dup(Fd(0))
        }),
        ("fills a hole", Ok(Fd(0)), |s| {
            two(s);
            s.close(Fd(0)).unwrap();
            s.dup(Fd(1))
        }),
        ("bad fd", Err(Errno::EBADF), |s| s.dup(Fd(3))),
        ("negative fd", Err(Errno::EBADF), |s| s.dup(Fd(-1))),
        ("dup2 to a free fd", Ok(Fd(7)), |s| {
            two(s);
            s.dup2(Fd(0), Fd(7))
        }),
        ("dup2 replaces an open fd", Ok(Fd(1)), |s| {
            two(s);
            let r = s.dup2(Fd(0), Fd(1));
            assert_eq!(first_byte(s, Fd(1)), Ok(b'h'));
            r
        }),
        ("dup2 onto itself", Ok(Fd(1)), |s| {
            two(s);
            s.dup2(Fd(1), Fd(1))
        }),
        ("dup2 onto itself, closed", Err(Errno::EBADF), |s| {
            s.dup2(Fd(4), Fd(4))
        }),
        ("dup2 from a bad fd", Err(Errno::EBADF), |s| {
            two(s);
            s.dup2(Fd(4), Fd(1))
        }),
        ("dup2 from a bad fd keeps the target", Ok(Fd(1)), |s| {
            two(s);
            s.dup2(Fd(4), Fd(1)).unwrap_err();
            s.dup(Fd(1)).and(Ok(Fd(1)))
        }),
        ("dup2 to a negative fd", Err(Errno::EBADF), |s| {
            two(s);
            s.dup2(Fd(0), Fd(-1))
        }),
        ("dup2 to i32::MAX", Err(Errno::EBADF), |s| {
            two(s);
            s.dup2(Fd(0), Fd(i32::MAX))
        }),
        ("dup2 from a negative fd", Err(Errno::EBADF), |s| {
            s.dup2(Fd(-1), Fd(0))
        }),
        (
            "dup2 far away, then open takes the lowest",
            Ok(Fd(2)),
            |s| {
                two(s);
                s.dup2(Fd(0), Fd(200)).unwrap();
                assert_eq!(first_byte(s, Fd(200)), Ok(b'h'));
                s.open(b"/f", RO, 0)
            },
        ),
        ("dup3", Ok(Fd(5)), |s| {
            two(s);
            s.dup3(Fd(0), Fd(5), OpenFlags::empty())
        }),
        ("dup3 onto itself", Err(Errno::EINVAL), |s| {
            two(s);
            s.dup3(Fd(0), Fd(0), OpenFlags::empty())
        }),
        ("dup3 onto itself, closed", Err(Errno::EINVAL), |s| {
            s.dup3(Fd(4), Fd(4), OpenFlags::empty())
        }),
        ("dup3 with O_NONBLOCK", Err(Errno::EINVAL), |s| {
            two(s);
            s.dup3(Fd(0), Fd(5), OpenFlags::NONBLOCK)
        }),
        ("dup3 with O_RDWR", Err(Errno::EINVAL), |s| {
            two(s);
            s.dup3(Fd(0), Fd(5), RW)
        }),
        ("dup3 bad flags before a bad fd", Err(Errno::EINVAL), |s| {
            s.dup3(Fd(7), Fd(5), OpenFlags::APPEND)
        }),
        ("dup3 from a bad fd", Err(Errno::EBADF), |s| {
            s.dup3(Fd(7), Fd(5), OpenFlags::empty())
        }),
        ("dup3 to a negative fd", Err(Errno::EBADF), |s| {
            two(s);
            s.dup3(Fd(0), Fd(-2), CLOEXEC)
        }),
    ]);
}

#[test]
fn dup_shares_the_open_file() {
    // One position and one set of status flags for all duplicates.
    expect((Ok(2), Ok(2), Ok(LARGEFILE | 0o2000 | 0o1)), |s| {
        s.mkfile(b"/f", b"hello");
        let a = s.open(b"/f", WO, 0).unwrap();
        let b = s.dup(a).unwrap();
        let c = s.fcntl(a, Fcntl::DupFd(10)).unwrap();
        s.lseek(a, 2, SEEK_SET).unwrap();
        s.fcntl(Fd(c), Fcntl::SetFl(OpenFlags::APPEND.bits()))
            .unwrap();
        (
            s.lseek(b, 0, SEEK_CUR),
            s.lseek(Fd(c), 0, SEEK_CUR),
            s.fcntl(b, Fcntl::GetFl),
        )
    });
}

#[test]
fn cloexec_bits() {
    // (dup, dup2, dup3, dup3 O_CLOEXEC, F_DUPFD, F_DUPFD_CLOEXEC, dup2 onto itself) of a
    // close-on-exec fd: only the *_CLOEXEC forms set the bit on the new fd; dup2 onto
    // itself changes nothing.
    expect(vec![Ok(0), Ok(0), Ok(0), Ok(1), Ok(0), Ok(1), Ok(1)], |s| {
        s.mkfile(b"/f", b"");
        let a = s.open(b"/f", RO | CLOEXEC, 0).unwrap();
        let fds = [
            s.dup(a).unwrap(),
            s.dup2(a, Fd(10)).unwrap(),
            s.dup3(a, Fd(11), OpenFlags::empty()).unwrap(),
            s.dup3(a, Fd(12), CLOEXEC).unwrap(),
            Fd(s.fcntl(a, Fcntl::DupFd(20)).unwrap()),
            Fd(s.fcntl(a, Fcntl::DupFdCloexec(20)).unwrap()),
            s.dup2(a, a).unwrap(),
        ];
        fds.iter()
            .map(|&fd| s.fcntl(fd, Fcntl::GetFd))
            .collect::<Vec<_>>()
    });
    // dup2 over a close-on-exec target clears the bit.
    expect(Ok(0), |s| {
        s.mkfile(b"/f", b"");
        let a = s.open(b"/f", RO, 0).unwrap();
        let b = s.open(b"/f", RO | CLOEXEC, 0).unwrap();
        s.dup2(a, b).unwrap();
        s.fcntl(b, Fcntl::GetFd)
    });
}

#[test]
fn fcntl_cases() {
    table::<RI>(&[
        ("F_DUPFD 0", Ok(2), |s| {
            two(s);
            s.fcntl(Fd(0), Fcntl::DupFd(0))
        }),
        ("F_DUPFD at a minimum", Ok(9), |s| {
            two(s);
            s.fcntl(Fd(0), Fcntl::DupFd(9))
        }),
        ("F_DUPFD skips open fds", Ok(3), |s| {
            two(s);
            s.dup2(Fd(0), Fd(2)).unwrap();
            s.fcntl(Fd(0), Fcntl::DupFd(1))
        }),
        ("F_DUPFD negative", Err(Errno::EINVAL), |s| {
            two(s);
            s.fcntl(Fd(0), Fcntl::DupFd(-1))
        }),
        ("F_DUPFD i32::MAX", Err(Errno::EINVAL), |s| {
            two(s);
            s.fcntl(Fd(0), Fcntl::DupFd(i32::MAX))
        }),
        ("F_DUPFD bad fd", Err(Errno::EBADF), |s| {
            s.fcntl(Fd(3), Fcntl::DupFd(0))
        }),
        ("F_DUPFD bad fd, bad minimum", Err(Errno::EBADF), |s| {
            s.fcntl(Fd(3), Fcntl::DupFd(-1))
        }),
        ("F_DUPFD_CLOEXEC", Ok(4), |s| {
            two(s);
            s.fcntl(Fd(1), Fcntl::DupFdCloexec(4))
        }),
        ("F_DUPFD_CLOEXEC negative", Err(Errno::EINVAL), |s| {
            two(s);
            s.fcntl(Fd(1), Fcntl::DupFdCloexec(-4))
        }),
        ("F_GETFD", Ok(0), |s| {
            two(s);
            s.fcntl(Fd(0), Fcntl::GetFd)
        }),
        ("F_GETFD bad fd", Err(Errno::EBADF), |s| {
            s.fcntl(Fd(2), Fcntl::GetFd)
        }),
        ("F_GETFD negative fd", Err(Errno::EBADF), |s| {
            s.fcntl(Fd(-2), Fcntl::GetFd)
        }),
        ("F_SETFD 1", Ok(FD_CLOEXEC), |s| {
            two(s);
            s.fcntl(Fd(0), Fcntl::SetFd(1)).unwrap();
            s.fcntl(Fd(0), Fcntl::GetFd)
        }),
        ("F_SETFD only looks at bit 0", Ok(0), |s| {
            two(s);
            s.fcntl(Fd(0), Fcntl::SetFd(1)).unwrap();
            s.fcntl(Fd(0), Fcntl::SetFd(2)).unwrap();
            s.fcntl(Fd(0), Fcntl::GetFd)
        }),
        ("F_SETFD -1", Ok(FD_CLOEXEC), |s| {
            two(s);
            s.fcntl(Fd(0), Fcntl::SetFd(-1)).unwrap();
            s.fcntl(Fd(0), Fcntl::GetFd)
        }),
        ("F_SETFD returns 0", Ok(0), |s| {
            two(s);
            s.fcntl(Fd(0), Fcntl::SetFd(1))
        }),
        ("F_SETFD is per descriptor", Ok(0), |s| {
            two(s);
            let d = s.dup(Fd(0)).unwrap();
            s.fcntl(Fd(0), Fcntl::SetFd(1)).unwrap();
            s.fcntl(d, Fcntl::GetFd)
        }),
        ("F_SETFD bad fd", Err(Errno::EBADF), |s| {
            s.fcntl(Fd(2), Fcntl::SetFd(1))
        }),
        ("F_GETFL bad fd", Err(Errno::EBADF), |s| {
            s.fcntl(Fd(2), Fcntl::GetFl)
        }),
        ("F_SETFL bad fd", Err(Errno::EBADF), |s| {
            s.fcntl(Fd(2), Fcntl::SetFl(0))
        }),
        ("F_SETFL returns 0", Ok(0), |s| {
            two(s);
            s.fcntl(Fd(0), Fcntl::SetFl(OpenFlags::APPEND.bits()))
        }),
    ]);
}

/// Bug (part): `F_GETFL` showed unknown bits given to `open` (e.g. `1 << 30`); Linux's
/// `build_open_flags` masks them with `VALID_OPEN_FLAGS`. Cause: `do_open` stored `flags`
/// minus the open-time flags only. Fix: mask with `VALID_OPEN_FLAGS` first (open.rs).
#[test]
fn fcntl_getfl_after_open() {
    // F_GETFL: access mode and status flags; O_CREAT, O_EXCL, O_NOCTTY, O_TRUNC, O_CLOEXEC
    // and unknown bits are not kept; O_LARGEFILE is always there on 64-bit.
    expect(
        vec![
            Ok(LARGEFILE),
            Ok(LARGEFILE | 1),
            Ok(LARGEFILE | 2),
            Ok(LARGEFILE | 3),
            Ok(LARGEFILE | 2 | 0o2000 | 0o4000),
            Ok(LARGEFILE | 1),
            Ok(LARGEFILE | 0o200000 | 0o400000),
            Ok(LARGEFILE),
            Ok(LARGEFILE | 1 | 0o4010000),
        ],
        |s| {
            s.mkdir(b"/d");
            let o = |p: &[u8], f: OpenFlags| {
                let fd = s.open(p, f, 0o644).unwrap();
                s.fcntl(fd, Fcntl::GetFl)
            };
            vec![
                o(b"/f1", CREAT | RO),
                o(b"/f1", WO),
                o(b"/f1", RW),
                o(b"/f1", OpenFlags::ACCMODE),
                o(
                    b"/f1",
                    RW | OpenFlags::APPEND | OpenFlags::NONBLOCK | CLOEXEC,
                ),
                o(
                    b"/f2",
                    WO | CREAT | OpenFlags::EXCL | OpenFlags::TRUNC | OpenFlags::NOCTTY,
                ),
                o(b"/d", RO | OpenFlags::DIRECTORY | OpenFlags::NOFOLLOW),
                o(b"/f1", RO | OpenFlags::from_bits_retain(1 << 30)),
                o(b"/f1", WO | OpenFlags::SYNC),
            ]
        },
    );
}

#[test]
fn fcntl_setfl() {
    // Only O_APPEND, O_NONBLOCK (and O_ASYNC, O_DIRECT, O_NOATIME) change; the access mode
    // and the open-time flags do not.
    expect(
        (
            Ok(LARGEFILE | 0o2000 | 0o4000),
            Ok(LARGEFILE),
            Ok(LARGEFILE | 1 | 0o2000),
            Ok(b"hello!".to_vec()),
        ),
        |s| {
            s.mkfile(b"/f", b"hello");
            let fd = s.open(b"/f", RO, 0).unwrap();
            let all = OpenFlags::APPEND
                | OpenFlags::NONBLOCK
                | RW
                | CREAT
                | OpenFlags::TRUNC
                | OpenFlags::DIRECTORY
                | CLOEXEC
                | OpenFlags::from_bits_retain(1 << 30);
            s.fcntl(fd, Fcntl::SetFl(all.bits())).unwrap();
            let a = s.fcntl(fd, Fcntl::GetFl);
            s.fcntl(fd, Fcntl::SetFl(0)).unwrap();
            let b = s.fcntl(fd, Fcntl::GetFl);
            // Appending through F_SETFL.
            let w = s.open(b"/f", WO, 0).unwrap();
            s.fcntl(w, Fcntl::SetFl(OpenFlags::APPEND.bits())).unwrap();
            s.write(w, b"!").unwrap();
            (a, b, s.fcntl(w, Fcntl::GetFl), s.read_file(b"/f"))
        },
    );
    // O_NOATIME is the owner's (or root's).
    expect((Ok(0), Ok(LARGEFILE | 0o1000000)), |s| {
        s.mkfile(b"/f", b"");
        let fd = s.open(b"/f", RO, 0).unwrap();
        (
            s.fcntl(fd, Fcntl::SetFl(OpenFlags::NOATIME.bits())),
            s.fcntl(fd, Fcntl::GetFl),
        )
    });
}

/// Bug: `F_SETFL` with `O_NOATIME` succeeded for a caller who does not own the file; Linux's
/// `setfl` returns EPERM (fcntl(2)). Cause: `O_NOATIME` was in `SETFL_MASK` with no
/// ownership check. Fix: check `owner_or_capable` when `O_NOATIME` is being turned on
/// (open.rs).
#[test]
fn regression_fcntl_setfl_noatime_needs_ownership() {
    table::<RI>(&[
        ("not the owner", Err(Errno::EPERM), |s| {
            s.mkfile(b"/f", b"");
            s.set_cred(1000, 1000, &[]);
            let fd = s.open(b"/f", RO, 0).unwrap();
            s.fcntl(fd, Fcntl::SetFl(OpenFlags::NOATIME.bits()))
        }),
        ("not the owner, flags unchanged", Ok(LARGEFILE), |s| {
            s.mkfile(b"/f", b"");
            s.set_cred(1000, 1000, &[]);
            let fd = s.open(b"/f", RO, 0).unwrap();
            let _ = s.fcntl(
                fd,
                Fcntl::SetFl((OpenFlags::NOATIME | OpenFlags::APPEND).bits()),
            );
            s.fcntl(fd, Fcntl::GetFl)
        }),
        ("not the owner, clearing it is allowed", Ok(0), |s| {
            s.mkfile(b"/f", b"");
            let fd = s.open(b"/f", RO | OpenFlags::NOATIME, 0).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.fcntl(fd, Fcntl::SetFl(0))
        }),
        ("not the owner, already set", Ok(0), |s| {
            s.mkfile(b"/f", b"");
            let fd = s.open(b"/f", RO | OpenFlags::NOATIME, 0).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.fcntl(fd, Fcntl::SetFl(OpenFlags::NOATIME.bits()))
        }),
    ]);
}

#[test]
fn close_range_cases() {
    // The open descriptors among 0..8 after each call (and its result).
    fn open_fds(s: &dyn Sys) -> Vec<i32> {
        (0..8)
            .filter(|&i| s.fcntl(Fd(i), Fcntl::GetFd).is_ok())
            .collect()
    }
    fn six(s: &dyn Sys) {
        s.mkfile(b"/f", b"");
        for _ in 0..6 {
            s.open(b"/f", RO, 0).unwrap();
        }
    }
    type RV = Result<Vec<i32>, Errno>;
    table::<RV>(&[
        ("a middle range", Ok(vec![0, 1, 5]), |s| {
            six(s);
            s.close_range(2, 4, 0)?;
            Ok(open_fds(s))
        }),
        ("one fd", Ok(vec![0, 1, 2, 4, 5]), |s| {
            six(s);
            s.close_range(3, 3, 0)?;
            Ok(open_fds(s))
        }),
        ("to the end", Ok(vec![0]), |s| {
            six(s);
            s.close_range(1, u32::MAX, 0)?;
            Ok(open_fds(s))
        }),
        ("everything", Ok(vec![]), |s| {
            six(s);
            s.close_range(0, u32::MAX, 0)?;
            Ok(open_fds(s))
        }),
        ("nothing open in range", Ok(vec![0, 1, 2, 3, 4, 5]), |s| {
            six(s);
            s.close_range(100, 200, 0)?;
            Ok(open_fds(s))
        }),
        ("first > last", Err(Errno::EINVAL), |s| {
            six(s);
            s.close_range(4, 3, 0)?;
            Ok(open_fds(s))
        }),
        ("unknown flag", Err(Errno::EINVAL), |s| {
            six(s);
            s.close_range(0, 3, 1)?;
            Ok(open_fds(s))
        }),
        (
            "unknown flag, nothing closed",
            Ok(vec![0, 1, 2, 3, 4, 5]),
            |s| {
                six(s);
                s.close_range(0, 3, 1 << 5).unwrap_err();
                Ok(open_fds(s))
            },
        ),
        ("CLOSE_RANGE_CLOEXEC", Ok(vec![0, 1, 2, 3, 4, 5]), |s| {
            six(s);
            s.close_range(2, 3, CLOSE_RANGE_CLOEXEC)?;
            let bits: Vec<i32> = (0..6)
                .map(|i| s.fcntl(Fd(i), Fcntl::GetFd).unwrap())
                .collect();
            assert_eq!(bits, [0, 0, 1, 1, 0, 0]);
            Ok(open_fds(s))
        }),
        ("CLOSE_RANGE_UNSHARE, private table", Ok(vec![4, 5]), |s| {
            six(s);
            s.close_range(0, 3, CLOSE_RANGE_UNSHARE)?;
            Ok(open_fds(s))
        }),
        ("then open takes the lowest", Ok(vec![0, 1, 2, 5]), |s| {
            six(s);
            s.close_range(1, 4, 0)?;
            assert_eq!(s.open(b"/f", RO, 0), Ok(Fd(1)));
            assert_eq!(s.open(b"/f", RO, 0), Ok(Fd(2)));
            Ok(open_fds(s))
        }),
    ]);
}

#[test]
fn close_range_unshare_in_a_thread() {
    // A thread that unshares closes only its copy; the process keeps its descriptors.
    expect((vec![4, 5], vec![0, 1, 2, 3, 4, 5]), |s| {
        s.mkfile(b"/f", b"");
        for _ in 0..6 {
            s.open(b"/f", RO, 0).unwrap();
        }
        let seen = Mutex::new(Vec::new());
        s.thread(&mut |t| {
            t.close_range(0, 3, CLOSE_RANGE_UNSHARE).unwrap();
            *seen.lock().unwrap() = (0..8)
                .filter(|&i| t.fcntl(Fd(i), Fcntl::GetFd).is_ok())
                .collect();
        });
        let parent: Vec<i32> = (0..8)
            .filter(|&i| s.fcntl(Fd(i), Fcntl::GetFd).is_ok())
            .collect();
        let child = seen.into_inner().unwrap();
        (child, parent)
    });
}

#[test]
fn fork_copies_the_table() {
    // The child gets the same open files (shared positions), its own descriptor numbers;
    // changes to either table stay there.
    expect(
        (
            (Ok(b'h'), Ok(0), Ok(2), Ok(FD_CLOEXEC)),
            (Ok(3), Ok(b'h'), Err(Errno::EBADF), Ok(b'w')),
        ),
        |s| {
            s.mkfile(b"/f", b"hello");
            s.mkfile(b"/g", b"world");
            let f = s.open(b"/f", RO, 0).unwrap();
            let g = s.open(b"/g", RO | CLOEXEC, 0).unwrap();
            s.read(f, &mut [0; 3]).unwrap();
            let out = Mutex::new(None);
            s.fork(&mut |c| {
                let r = (
                    first_byte(c, f),
                    c.lseek(f, -3, SEEK_CUR).map(|p| p as i32),
                    // The child's new descriptor: the lowest free in its table.
                    c.open(b"/f", RO, 0).map(|fd| fd.0),
                    c.fcntl(g, Fcntl::GetFd),
                );
                c.close(f).unwrap();
                c.dup2(g, Fd(5)).unwrap();
                *out.lock().unwrap() = Some(r);
            });
            let parent = (
                // The child's lseek moved the shared position back to 0; then this read.
                s.read(f, &mut [0; 3]).map(|n| n as i32),
                first_byte(s, f),
                // Not opened in the parent.
                s.fcntl(Fd(2), Fcntl::GetFd).map(|_| 0u8),
                first_byte(s, g),
            );
            (out.into_inner().unwrap().unwrap(), parent)
        },
    );
    // The fs context is copied too: the child's chdir and umask are its own.
    expect((b"/d".to_vec(), 0o077, b"/".to_vec(), 0o022), |s| {
        s.mkdir(b"/d");
        let out = Mutex::new(None);
        s.fork(&mut |c| {
            c.chdir(b"/d").unwrap();
            c.umask(0o077);
            *out.lock().unwrap() = Some((c.getcwd().unwrap(), c.umask(0o077)));
        });
        let (cwd, mask) = out.into_inner().unwrap().unwrap();
        (cwd, mask, s.getcwd().unwrap(), s.umask(0o022))
    });
}

#[test]
fn threads_share_the_table() {
    // A thread's opens, closes and dup2s are the process's; so are chdir and umask.
    expect(
        (
            Ok(b'w'),
            Err(Errno::EBADF),
            Ok(b'w'),
            b"/d".to_vec(),
            0o077,
            Ok(Fd(3)),
        ),
        |s| {
            s.mkfile(b"/f", b"hello");
            s.mkfile(b"/g", b"world");
            s.mkdir(b"/d");
            let f = s.open(b"/f", RO, 0).unwrap();
            let opened = Mutex::new(Fd(-1));
            s.thread(&mut |t| {
                *opened.lock().unwrap() = t.open(b"/g", RO, 0).unwrap();
                t.close(f).unwrap();
                t.dup2(Fd(1), Fd(2)).unwrap();
                t.chdir(b"/d").unwrap();
                t.umask(0o077);
            });
            let g = opened.into_inner().unwrap();
            assert_eq!(g, Fd(1));
            (
                first_byte(s, g),
                first_byte(s, f),
                first_byte(s, Fd(2)),
                s.getcwd().unwrap(),
                s.umask(0o022),
                s.open(b"/f", RO, 0).and_then(|_| s.open(b"/f", RO, 0)),
            )
        },
    );
}

#[test]
fn many_descriptors() {
    // 500 opens get 0..500 in order (the table grows past its first 64 slots); closing
    // every other one and reopening fills the holes from the lowest.
    expect((true, true, Ok(Fd(500))), |s| {
        s.mkfile(b"/f", b"x");
        let fds: Vec<i32> = (0..500).map(|_| s.open(b"/f", RO, 0).unwrap().0).collect();
        let in_order = fds.iter().enumerate().all(|(i, &fd)| fd == i as i32);
        for i in (0..500).step_by(2) {
            s.close(Fd(i)).unwrap();
        }
        let again: Vec<i32> = (0..250).map(|_| s.dup(Fd(1)).unwrap().0).collect();
        let holes = again.iter().enumerate().all(|(i, &fd)| fd == 2 * i as i32);
        (in_order, holes, s.open(b"/f", RO, 0))
    });
}

// ---------------------------------------------------------------------------------------
// uvfs only: the per-table limit (RLIMIT_NOFILE is per process on Linux) and exec.

#[test]
fn emfile_at_the_limit() {
    // As Linux with RLIMIT_NOFILE = 3 (getrlimit(2), open(2), dup(2), fcntl(2)).
    let u = Uvfs::new();
    let t = &u.task;
    t.files().set_rlimit(3).unwrap();
    assert_eq!(t.files().rlimit(), 3);
    let s: &dyn Sys = &u;
    s.mkfile(b"/f", b"x");
    for i in 0..3 {
        assert_eq!(s.open(b"/f", RO, 0), Ok(Fd(i)));
    }
    assert_eq!(s.open(b"/f", RO, 0), Err(Errno::EMFILE));
    // EMFILE comes before the walk: nothing is created, no other error is seen.
    assert_eq!(s.open(b"/new", CREAT | RW, 0o644), Err(Errno::EMFILE));
    assert!(!s.exists(b"/new"));
    assert_eq!(s.open(b"/missing/x", RO, 0), Err(Errno::EMFILE));
    assert_eq!(s.dup(Fd(0)), Err(Errno::EMFILE));
    assert_eq!(s.fcntl(Fd(0), Fcntl::DupFd(0)), Err(Errno::EMFILE));
    assert_eq!(s.fcntl(Fd(0), Fcntl::DupFdCloexec(2)), Err(Errno::EMFILE));
    // At or above the limit: F_DUPFD is EINVAL, dup2/dup3 EBADF.
    assert_eq!(s.fcntl(Fd(0), Fcntl::DupFd(3)), Err(Errno::EINVAL));
    assert_eq!(s.dup2(Fd(0), Fd(3)), Err(Errno::EBADF));
    assert_eq!(s.dup3(Fd(0), Fd(3), CLOEXEC), Err(Errno::EBADF));
    // Replacing within the limit is fine.
    assert_eq!(s.dup2(Fd(0), Fd(2)), Ok(Fd(2)));
    // A free slot makes room again.
    s.close(Fd(1)).unwrap();
    assert_eq!(s.dup(Fd(0)), Ok(Fd(1)));
    // Lowering the limit below open descriptors leaves them usable.
    t.files().set_rlimit(1).unwrap();
    assert_eq!(first_byte(s, Fd(2)), Ok(b'x'));
    assert_eq!(s.dup2(Fd(2), Fd(1)), Err(Errno::EBADF));
    s.close(Fd(2)).unwrap();
    s.close(Fd(1)).unwrap();
    assert_eq!(s.open(b"/f", RO, 0), Err(Errno::EMFILE));
    s.close(Fd(0)).unwrap();
    assert_eq!(s.open(b"/f", RO, 0), Ok(Fd(0)));
    // A limit of 0: nothing can be opened.
    t.files().set_rlimit(0).unwrap();
    s.close(Fd(0)).unwrap();
    assert_eq!(s.open(b"/f", RO, 0), Err(Errno::EMFILE));
    // Above NR_OPEN (2^20): EPERM, as setrlimit beyond fs.nr_open.
    assert_eq!(t.files().set_rlimit((1 << 20) + 1), Err(Errno::EPERM));
    assert_eq!(t.files().set_rlimit(1 << 20), Ok(()));
    // The default limit is 1024.
    assert_eq!(Uvfs::new().task.files().rlimit(), 1024);
}

#[test]
fn emfile_default_limit() {
    // 1024 descriptors by default: fds 0..=1023 open, the next is EMFILE; dup2 to 1023
    // works, to 1024 is EBADF; F_DUPFD(1024) is EINVAL.
    let u = Uvfs::new();
    let s: &dyn Sys = &u;
    s.mkfile(b"/f", b"");
    for i in 0..1024 {
        assert_eq!(s.open(b"/f", RO, 0), Ok(Fd(i)));
    }
    assert_eq!(s.open(b"/f", RO, 0), Err(Errno::EMFILE));
    assert_eq!(s.dup2(Fd(0), Fd(1023)), Ok(Fd(1023)));
    assert_eq!(s.dup2(Fd(0), Fd(1024)), Err(Errno::EBADF));
    assert_eq!(s.fcntl(Fd(0), Fcntl::DupFd(1024)), Err(Errno::EINVAL));
    assert_eq!(s.fcntl(Fd(0), Fcntl::DupFd(1023)), Err(Errno::EMFILE));
}

#[test]
fn limit_is_copied_by_fork_and_shared_by_threads() {
    let u = Uvfs::new();
    u.task.files().set_rlimit(2).unwrap();
    let child = u.task.fork();
    assert_eq!(child.files().rlimit(), 2);
    child.files().set_rlimit(10).unwrap();
    assert_eq!(u.task.files().rlimit(), 2);
    let thread = u.task.clone_thread();
    thread.files().set_rlimit(5).unwrap();
    assert_eq!(u.task.files().rlimit(), 5);
}

#[test]
fn exec_closes_cloexec_descriptors() {
    // execve(2): close-on-exec descriptors are closed, the others stay (bits included).
    let mut u = Uvfs::new();
    let s: &dyn Sys = &u;
    s.mkfile(b"/f", b"x");
    let keep = s.open(b"/f", RO, 0).unwrap();
    let gone = s.open(b"/f", RO | CLOEXEC, 0).unwrap();
    let gone2 = s.fcntl(keep, Fcntl::DupFdCloexec(10)).unwrap();
    let thread = u.task.clone_thread();
    u.task.exec();
    let s: &dyn Sys = &u;
    assert_eq!(first_byte(s, keep), Ok(b'x'));
    assert_eq!(s.fcntl(gone, Fcntl::GetFd), Err(Errno::EBADF));
    assert_eq!(s.fcntl(Fd(gone2), Fcntl::GetFd), Err(Errno::EBADF));
    // exec unshared the table first: the other thread still has its descriptors.
    assert_eq!(thread.fcntl(gone, Fcntl::GetFd), Ok(FD_CLOEXEC));
}
