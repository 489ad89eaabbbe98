//! `fstat`, `fstatat`, `futimens`/`utimensat`, `ftruncate`, `umask`, `getuid`, `getpid`,
//! asserted against Linux (see `common`). Times are compared by order relations against
//! explicit times set in the past, never with the wall clock.

mod common;
use common::*;
use uvfs::types::*;
use uvfs::{AtFlags, Errno, Fd, OpenFlags, Stat, Timespec};

const NOFOLLOW: AtFlags = AtFlags::SYMLINK_NOFOLLOW;
const EMPTY: AtFlags = AtFlags::EMPTY_PATH;
const NOW: Timespec = Timespec::UTIME_NOW;
const OMIT: Timespec = Timespec::UTIME_OMIT;

type RS = Result<Shape, Errno>;
type R = Result<(), Errno>;

const FILE: Shape = Shape {
    mode: S_IFREG | 0o644,
    nlink: 1,
    uid: 0,
    gid: 0,
    size: 5,
    blocks: 8,
};
/// `/d` of [`posix_tree`]: two links plus one for its subdirectory `sub`; tmpfs's size
/// is 40 plus 20 per entry (`f`, `sub`).
const DIR: Shape = Shape {
    mode: S_IFDIR | 0o755,
    nlink: 3,
    uid: 0,
    gid: 0,
    size: 40 + 2 * 20,
    blocks: 0,
};
const LINK: Shape = Shape {
    mode: S_IFLNK | 0o777,
    nlink: 1,
    uid: 0,
    gid: 0,
    size: 1,
    blocks: 0,
};
/// `/` of [`posix_tree`]: two links plus one per subdirectory (`d`, `e`, `sticky`); its
/// 10 entries at 20 each.
const ROOT: Shape = Shape {
    mode: S_IFDIR | 0o1777,
    nlink: 5,
    uid: 0,
    gid: 0,
    size: 40 + 10 * 20,
    blocks: 0,
};

fn st(s: &dyn Sys, dirfd: Fd, p: &[u8], f: AtFlags) -> RS {
    s.fstatat(dirfd, p, f).map(shape)
}

#[test]
fn fstatat_cases() {
    table::<RS>(&[
        ("file", Ok(FILE), |s| {
            posix_tree(s);
            st(s, CWD, b"/f", NOAT)
        }),
        ("dir", Ok(DIR), |s| {
            posix_tree(s);
            st(s, CWD, b"/d", NOAT)
        }),
        ("root", Ok(ROOT), |s| {
            posix_tree(s);
            st(s, CWD, b"/", NOAT)
        }),
        ("symlink followed", Ok(FILE), |s| {
            posix_tree(s);
            st(s, CWD, b"/l", NOAT)
        }),
        ("symlink not followed", Ok(LINK), |s| {
            posix_tree(s);
            st(s, CWD, b"/l", NOFOLLOW)
        }),
        ("file with AT_SYMLINK_NOFOLLOW", Ok(FILE), |s| {
            posix_tree(s);
            st(s, CWD, b"/f", NOFOLLOW)
        }),
        (
            "intermediate symlink followed with NOFOLLOW",
            Ok(DIR),
            |s| {
                posix_tree(s);
                st(s, CWD, b"/ld/.", NOFOLLOW)
            },
        ),
        ("trailing slash follows with NOFOLLOW", Ok(DIR), |s| {
            posix_tree(s);
            st(s, CWD, b"/ld/", NOFOLLOW)
        }),
        (
            "trailing slash on a symlink to a file",
            Err(Errno::ENOTDIR),
            |s| {
                posix_tree(s);
                st(s, CWD, b"/l/", NOFOLLOW)
            },
        ),
        ("dangling followed", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            st(s, CWD, b"/dangling", NOAT)
        }),
        (
            "dangling not followed",
            Ok(Shape { size: 7, ..LINK }),
            |s| {
                posix_tree(s);
                st(s, CWD, b"/dangling", NOFOLLOW)
            },
        ),
        ("missing", Err(Errno::ENOENT), |s| st(s, CWD, b"/x", NOAT)),
        ("file as a dir", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            st(s, CWD, b"/f/x", NOAT)
        }),
        ("empty path", Err(Errno::ENOENT), |s| st(s, CWD, b"", NOAT)),
        ("empty path, AT_EMPTY_PATH, cwd", Ok(DIR), |s| {
            posix_tree(s);
            s.chdir(b"/d").unwrap();
            st(s, CWD, b"", EMPTY)
        }),
        ("empty path, AT_EMPTY_PATH, file fd", Ok(FILE), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0).unwrap();
            st(s, fd, b"", EMPTY)
        }),
        ("empty path, AT_EMPTY_PATH, write-only fd", Ok(FILE), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", WO, 0).unwrap();
            st(s, fd, b"", EMPTY)
        }),
        (
            "empty path, AT_EMPTY_PATH, unlinked file",
            Ok(Shape { nlink: 0, ..FILE }),
            |s| {
                posix_tree(s);
                let fd = s.open(b"/f", RO, 0).unwrap();
                s.unlinkat(CWD, b"/f", NOAT).unwrap();
                st(s, fd, b"", EMPTY)
            },
        ),
        (
            "empty path, AT_EMPTY_PATH, bad fd",
            Err(Errno::EBADF),
            |s| st(s, Fd(5), b"", EMPTY),
        ),
        (
            "empty path without AT_EMPTY_PATH, file fd",
            Err(Errno::ENOENT),
            |s| {
                posix_tree(s);
                let fd = s.open(b"/f", RO, 0).unwrap();
                st(s, fd, b"", NOAT)
            },
        ),
        ("AT_EMPTY_PATH with a path", Ok(FILE), |s| {
            posix_tree(s);
            st(s, CWD, b"/f", EMPTY)
        }),
        ("relative to a dir fd", Ok(Shape { size: 4, ..FILE }), |s| {
            posix_tree(s);
            let d = s.open(b"/d", RO, 0).unwrap();
            st(s, d, b"f", NOAT)
        }),
        ("relative to a file fd", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0).unwrap();
            st(s, fd, b"x", NOAT)
        }),
        ("relative to a bad fd", Err(Errno::EBADF), |s| {
            posix_tree(s);
            st(s, Fd(9), b"f", NOAT)
        }),
        ("absolute path, bad fd", Ok(FILE), |s| {
            posix_tree(s);
            st(s, Fd(9), b"/f", NOAT)
        }),
        ("AT_NO_AUTOMOUNT is accepted", Ok(FILE), |s| {
            posix_tree(s);
            st(s, CWD, b"/f", AtFlags::NO_AUTOMOUNT)
        }),
        ("AT_REMOVEDIR is EINVAL", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            st(s, CWD, b"/f", AtFlags::REMOVEDIR)
        }),
        ("unknown flag is EINVAL", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            st(s, CWD, b"/f", AtFlags::from_bits_retain(0x8000))
        }),
        (
            "unknown flag is EINVAL before a bad fd",
            Err(Errno::EINVAL),
            |s| st(s, Fd(9), b"f", AtFlags::from_bits_retain(0x8000)),
        ),
        ("name of 256 bytes", Err(Errno::ENAMETOOLONG), |s| {
            let mut p = b"/".to_vec();
            p.extend(name(b'n', 256));
            st(s, CWD, &p, NOAT)
        }),
        ("no search permission", Err(Errno::EACCES), |s| {
            s.mkdirat(CWD, b"/p", 0o700).unwrap();
            s.mkfile(b"/p/f", b"hello");
            s.set_cred(1000, 1000, &[]);
            st(s, CWD, b"/p/f", NOAT)
        }),
        (
            "stat needs no read permission",
            Ok(Shape {
                mode: S_IFREG | 0o600,
                ..FILE
            }),
            |s| {
                s.umask(0);
                let fd = s.open(b"/f", CREAT | WO, 0o600).unwrap();
                s.write(fd, b"hello").unwrap();
                s.set_cred(1000, 1000, &[]);
                st(s, CWD, b"/f", NOAT)
            },
        ),
    ]);
}

/// Bug: `fstatat` refused `AT_STATX_FORCE_SYNC` (0x2000) and `AT_STATX_DONT_SYNC`
/// (0x4000) with EINVAL; Linux's `vfs_statx` accepts the `AT_STATX_SYNC_TYPE` bits for
/// `newfstatat` too (they are no-ops for local file systems). Cause: the allowed-flags
/// mask lacked them. Fix: accept `AT_STATX_SYNC_TYPE` (stat.rs, types.rs).
#[test]
fn regression_fstatat_accepts_statx_sync_flags() {
    table::<RS>(&[
        ("AT_STATX_FORCE_SYNC", Ok(FILE), |s| {
            posix_tree(s);
            st(s, CWD, b"/f", AtFlags::from_bits_retain(0x2000))
        }),
        ("AT_STATX_DONT_SYNC", Ok(FILE), |s| {
            posix_tree(s);
            st(s, CWD, b"/f", AtFlags::from_bits_retain(0x4000))
        }),
        ("both", Ok(FILE), |s| {
            posix_tree(s);
            st(s, CWD, b"/f", AtFlags::from_bits_retain(0x6000))
        }),
    ]);
}

/// `AT_STATX_DONT_SYNC` answers from the FUSE client's cache, however old: after a
/// create and a 5-byte write, the blocks the CREATE reply gave (0), where a local file
/// system has the page it allocated (8). Measured on Linux 6.18 with `fstatat(path,
/// AT_STATX_DONT_SYNC)`: 0 blocks on kernel FUSE mounts of libfuse 3.14's passthrough_ll
/// and of `uvfs mount`, 8 without the flag and on tmpfs. Before, uvfs's client asked the
/// server (8).
#[test]
fn fstatat_dont_sync_answers_from_the_fuse_cache() {
    let fresh = |flags: u32| {
        move |s: &mut dyn Sys| {
            posix_tree(s);
            st(s, CWD, b"/f", AtFlags::from_bits_retain(flags)).map(|x| x.blocks)
        }
    };
    expect_fuse(Ok(8), Ok(0), fresh(0x4000));
    expect(Ok(8), fresh(0));
    expect(Ok(8), fresh(0x2000));
}

#[test]
fn fstat_cases() {
    table::<RS>(&[
        ("file", Ok(FILE), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0).unwrap();
            s.fstat(fd).map(shape)
        }),
        ("dir", Ok(DIR), |s| {
            posix_tree(s);
            let fd = s.open(b"/d", RO, 0).unwrap();
            s.fstat(fd).map(shape)
        }),
        ("through a symlink", Ok(FILE), |s| {
            posix_tree(s);
            let fd = s.open(b"/l", RO, 0).unwrap();
            s.fstat(fd).map(shape)
        }),
        ("dup", Ok(FILE), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0).unwrap();
            let d = s.dup(fd).unwrap();
            s.close(fd).unwrap();
            s.fstat(d).map(shape)
        }),
        ("unlinked", Ok(Shape { nlink: 0, ..FILE }), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0).unwrap();
            s.unlinkat(CWD, b"/f", NOAT).unwrap();
            s.fstat(fd).map(shape)
        }),
        (
            "removed dir",
            Ok(Shape {
                nlink: 0,
                size: 40,
                ..DIR
            }),
            |s| {
                s.mkdir(b"/e");
                let fd = s.open(b"/e", RO, 0).unwrap();
                s.unlinkat(CWD, b"/e", AtFlags::REMOVEDIR).unwrap();
                s.fstat(fd).map(shape)
            },
        ),
        ("bad fd", Err(Errno::EBADF), |s| s.fstat(Fd(3)).map(shape)),
        ("negative fd", Err(Errno::EBADF), |s| {
            s.fstat(Fd(-1)).map(shape)
        }),
        ("AT_FDCWD", Err(Errno::EBADF), |s| s.fstat(CWD).map(shape)),
        ("closed fd", Err(Errno::EBADF), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0).unwrap();
            s.close(fd).unwrap();
            s.fstat(fd).map(shape)
        }),
    ]);
}

#[test]
fn stat_identity() {
    // Same device everywhere; distinct inode numbers; a symlink's stat is its target's;
    // the block size is a page; no device numbers.
    expect((true, true, true, true, true), |s| {
        posix_tree(s);
        let all: Vec<Stat> = [&b"/"[..], b"/d", b"/d/f", b"/f"]
            .iter()
            .map(|p| s.stat(p).unwrap())
            .collect();
        let link = s.lstat(b"/l").unwrap();
        let mut inos: Vec<u64> = all.iter().map(|x| x.st_ino).collect();
        inos.push(link.st_ino);
        inos.sort();
        inos.dedup();
        (
            all.iter().all(|x| x.st_dev == all[0].st_dev) && link.st_dev == all[0].st_dev,
            inos.len() == 5,
            s.stat(b"/l").unwrap().st_ino == all[3].st_ino,
            all.iter().all(|x| x.st_blksize == 4096),
            all.iter().all(|x| x.st_rdev == 0),
        )
    });
}

#[test]
fn link_counts_and_dir_sizes() {
    // Directory nlink = 2 + subdirectories; size = 40 + 20 per entry (tmpfs).
    expect(vec![(3, 80), (4, 100), (3, 80), (2, 40), (2, 40)], |s| {
        s.mkdir(b"/a");
        s.mkdir(b"/a/b");
        s.mkfile(b"/a/f", b"");
        let mut v = Vec::new();
        let mut look = |s: &dyn Sys| {
            let x = s.stat(b"/a").unwrap();
            v.push((x.st_nlink, x.st_size));
        };
        look(s);
        s.mkdir(b"/a/c");
        look(s);
        s.renameat(CWD, b"/a/c", CWD, b"/c").unwrap();
        look(s);
        s.unlinkat(CWD, b"/a/b", AtFlags::REMOVEDIR).unwrap();
        s.unlinkat(CWD, b"/a/f", NOAT).unwrap();
        look(s);
        s.symlink(b"x", b"/a/s");
        s.unlinkat(CWD, b"/a/s", NOAT).unwrap();
        look(s);
        v
    });
}

// ---------------------------------------------------------------------------------------
// utimensat / futimens

fn times(st: &Stat) -> (Timespec, Timespec) {
    (st.st_atime, st.st_mtime)
}

#[test]
fn utimens_explicit_now_omit() {
    // Explicit times are stored to the nanosecond; negative seconds are fine.
    expect(Ok((Timespec::new(-1, 5), T2002)), |s| {
        s.mkfile(b"/f", b"");
        s.utimensat(CWD, b"/f", Some(&[Timespec::new(-1, 5), T2002]), NOAT)?;
        s.stat(b"/f").map(|st| times(&st))
    });
    // UTIME_OMIT keeps one time; UTIME_NOW sets it to now; ctime always moves.
    expect((T2001, true, true, true, T2002), |s| {
        s.mkfile(b"/f", b"");
        s.set_times(b"/f", T2001, T2002);
        let fd = s.open(b"/f", RO, 0).unwrap();
        s.futimens(fd, Some(&[OMIT, NOW])).unwrap();
        let a = s.fstat(fd).unwrap();
        s.set_times(b"/f", T2001, T2002);
        s.futimens(fd, Some(&[NOW, OMIT])).unwrap();
        let b = s.fstat(fd).unwrap();
        (
            a.st_atime,
            a.st_mtime > T2002,
            a.st_ctime >= a.st_mtime,
            b.st_atime > T2002,
            b.st_mtime,
        )
    });
    // `None` is "both now": atime, mtime and ctime get one timestamp.
    expect((true, true, true), |s| {
        s.mkfile(b"/f", b"");
        s.set_times(b"/f", T2001, T2001);
        s.utimensat(CWD, b"/f", None, NOAT).unwrap();
        let x = s.stat(b"/f").unwrap();
        (
            x.st_atime > T2001,
            x.st_atime == x.st_mtime,
            x.st_ctime == x.st_mtime,
        )
    });
    // Setting times moves ctime to now, ahead of the explicit times.
    expect(true, |s| {
        s.mkfile(b"/f", b"");
        let fd = s.open(b"/f", RO, 0).unwrap();
        s.futimens(fd, Some(&[T2001, T2001])).unwrap();
        s.fstat(fd).unwrap().st_ctime > T2001
    });
    // UTIME_NOW / UTIME_OMIT ignore tv_sec.
    expect(Ok(T2001), |s| {
        s.mkfile(b"/f", b"");
        s.set_times(b"/f", T2001, T2001);
        let omit = Timespec::new(-77, Timespec::UTIME_OMIT_NSEC);
        let now = Timespec::new(12345, Timespec::UTIME_NOW_NSEC);
        s.utimensat(CWD, b"/f", Some(&[omit, now]), NOAT)?;
        s.stat(b"/f").map(|x| x.st_atime)
    });
}

#[test]
fn utimens_both_omit_changes_nothing() {
    // Not even ctime.
    expect(true, |s| {
        s.mkfile(b"/f", b"");
        s.set_times(b"/f", T2001, T2001);
        let before = s.stat(b"/f").unwrap();
        s.utimensat(CWD, b"/f", Some(&[OMIT, OMIT]), NOAT).unwrap();
        let fd = s.open(b"/f", RO, 0).unwrap();
        s.futimens(fd, Some(&[OMIT, OMIT])).unwrap();
        let after = s.stat(b"/f").unwrap();
        before.st_ctime == after.st_ctime && times(&before) == times(&after)
    });
}

/// Bug: `utimensat`/`futimens` with both times `UTIME_OMIT` checked the descriptor, the
/// flags and the path; Linux's `utimensat` returns 0 before looking at any of them ("Nothing
/// to do, we must not even check the path"). Cause: the early return sat in
/// `utimes_inode`, after the walk. Fix: return right after validating the nanoseconds
/// (stat.rs).
#[test]
fn regression_utimens_both_omit_checks_nothing() {
    table::<R>(&[
        ("futimens, bad fd", Ok(()), |s| {
            s.futimens(Fd(7), Some(&[OMIT, OMIT]))
        }),
        ("utimensat, missing path", Ok(()), |s| {
            s.utimensat(CWD, b"/missing", Some(&[OMIT, OMIT]), NOAT)
        }),
        ("utimensat, bad dirfd", Ok(()), |s| {
            s.utimensat(Fd(7), b"x", Some(&[OMIT, OMIT]), NOAT)
        }),
        ("utimensat, unknown flags", Ok(()), |s| {
            s.utimensat(CWD, b"/x", Some(&[OMIT, OMIT]), AtFlags::REMOVEDIR)
        }),
        ("utimensat, not the owner", Ok(()), |s| {
            s.mkfile(b"/f", b"");
            s.set_cred(1000, 1000, &[]);
            s.utimensat(CWD, b"/f", Some(&[OMIT, OMIT]), NOAT)
        }),
        ("utimensat, empty path", Ok(()), |s| {
            s.utimensat(CWD, b"", Some(&[OMIT, OMIT]), NOAT)
        }),
    ]);
}

#[test]
fn utimens_errors() {
    const BAD_NEG: Timespec = Timespec::new(0, -1);
    const BAD_BIG: Timespec = Timespec::new(0, 1_000_000_000);
    table::<R>(&[
        ("negative nsec", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.utimensat(CWD, b"/f", Some(&[BAD_NEG, T2001]), NOAT)
        }),
        ("nsec of one second", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.utimensat(CWD, b"/f", Some(&[T2001, BAD_BIG]), NOAT)
        }),
        ("bad nsec next to UTIME_OMIT", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.utimensat(CWD, b"/f", Some(&[OMIT, BAD_BIG]), NOAT)
        }),
        ("futimens, bad fd", Err(Errno::EBADF), |s| {
            s.futimens(Fd(8), None)
        }),
        ("futimens, negative fd", Err(Errno::EBADF), |s| {
            s.futimens(Fd(-2), Some(&[T2001, T2001]))
        }),
        ("unknown flag", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.utimensat(CWD, b"/f", None, AtFlags::REMOVEDIR)
        }),
        ("missing", Err(Errno::ENOENT), |s| {
            s.utimensat(CWD, b"/x", None, NOAT)
        }),
        ("empty path", Err(Errno::ENOENT), |s| {
            s.utimensat(CWD, b"", None, NOAT)
        }),
        ("empty path with AT_EMPTY_PATH", Ok(()), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0).unwrap();
            s.utimensat(fd, b"", Some(&[T2001, T2001]), EMPTY)?;
            assert_eq!(s.fstat(fd).unwrap().st_mtime, T2001);
            Ok(())
        }),
        ("empty path with AT_EMPTY_PATH, cwd", Ok(()), |s| {
            posix_tree(s);
            s.chdir(b"/d").unwrap();
            s.utimensat(CWD, b"", Some(&[T2001, T2001]), EMPTY)?;
            assert_eq!(s.stat(b"/d").unwrap().st_mtime, T2001);
            Ok(())
        }),
        ("dangling symlink followed", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            s.utimensat(CWD, b"/dangling", None, NOAT)
        }),
        ("dangling symlink, AT_SYMLINK_NOFOLLOW", Ok(()), |s| {
            posix_tree(s);
            s.utimensat(CWD, b"/dangling", None, NOFOLLOW)
        }),
        ("relative to a bad fd", Err(Errno::EBADF), |s| {
            s.utimensat(Fd(5), b"f", None, NOAT)
        }),
        ("file as a dir", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            s.utimensat(CWD, b"/f/", None, NOAT)
        }),
    ]);
}

/// Bug: `utimensat`/`futimens` validated the nanoseconds before the descriptor and path,
/// and let a non-owner with write permission pass `[UTIME_NOW, UTIME_OMIT]`. Linux (5.9+)
/// checks `tv_nsec` in `vfs_utimes`, after the lookup, and any `times` other than "both
/// now" is `ATTR_TIMES_SET`, which needs ownership (EPERM). Cause: the checks mirrored the
/// older `do_utimes`. Fix: validate in `utimes_inode`, and treat everything but
/// `None`/both-`UTIME_NOW` as explicit (stat.rs).
#[test]
fn regression_utimens_check_order_and_now_omit() {
    const BAD: Timespec = Timespec::new(0, -1);
    fn setup(s: &mut dyn Sys) {
        s.umask(0);
        let fd = s.open(b"/666", CREAT | WO, 0o666).unwrap();
        s.close(fd).unwrap();
        s.set_cred(1000, 1000, &[]);
    }
    table::<R>(&[
        ("missing path before bad nsec", Err(Errno::ENOENT), |s| {
            s.utimensat(CWD, b"/x", Some(&[BAD, T2001]), NOAT)
        }),
        ("bad dirfd before bad nsec", Err(Errno::EBADF), |s| {
            s.utimensat(Fd(8), b"x", Some(&[BAD, T2001]), NOAT)
        }),
        ("bad flags before a missing path", Err(Errno::EINVAL), |s| {
            s.utimensat(CWD, b"/x", None, AtFlags::REMOVEDIR)
        }),
        ("futimens, bad fd before bad nsec", Err(Errno::EBADF), |s| {
            s.futimens(Fd(8), Some(&[BAD, T2001]))
        }),
        ("bad nsec before permissions", Err(Errno::EINVAL), |s| {
            setup(s);
            s.utimensat(CWD, b"/666", Some(&[BAD, T2001]), NOAT)
        }),
        (
            "not owner, writable, NOW and OMIT",
            Err(Errno::EPERM),
            |s| {
                setup(s);
                s.utimensat(CWD, b"/666", Some(&[NOW, OMIT]), NOAT)
            },
        ),
        (
            "not owner, writable, OMIT and NOW",
            Err(Errno::EPERM),
            |s| {
                setup(s);
                let fd = s.open(b"/666", WO, 0).unwrap();
                s.futimens(fd, Some(&[OMIT, NOW]))
            },
        ),
        ("not owner, writable, NOW and NOW", Ok(()), |s| {
            setup(s);
            let fd = s.open(b"/666", WO, 0).unwrap();
            s.futimens(fd, Some(&[NOW, NOW]))
        }),
    ]);
}

#[test]
fn utimens_symlinks() {
    // Without the flag the target changes; with it, the link itself.
    expect((T2001, T2002, T2002, T2001), |s| {
        posix_tree(s);
        s.set_times(b"/f", T2001, T2001);
        s.utimensat(CWD, b"/l", Some(&[T2001, T2001]), NOFOLLOW)
            .unwrap();
        s.utimensat(CWD, b"/l", Some(&[T2002, T2002]), NOAT)
            .unwrap();
        let f1 = s.stat(b"/f").unwrap().st_mtime;
        s.utimensat(CWD, b"/l", Some(&[T2002, T2002]), NOFOLLOW)
            .unwrap();
        s.set_times(b"/f", T2001, T2001);
        (
            s.lstat(b"/f").unwrap().st_mtime,
            f1,
            s.lstat(b"/l").unwrap().st_mtime,
            s.stat(b"/l").unwrap().st_mtime,
        )
    });
}

#[test]
fn utimens_permissions() {
    fn setup(s: &mut dyn Sys) {
        s.umask(0);
        for (p, m) in [(&b"/666"[..], 0o666), (b"/644", 0o644)] {
            let fd = s.open(p, CREAT | WO, m).unwrap();
            s.close(fd).unwrap();
        }
        s.mkdirat(CWD, b"/w", 0o777).unwrap();
        s.set_cred(1000, 1000, &[]);
        s.mkfile(b"/w/mine", b"");
    }
    table::<R>(&[
        ("not owner, writable, now", Ok(()), |s| {
            setup(s);
            s.utimensat(CWD, b"/666", None, NOAT)
        }),
        ("not owner, writable, UTIME_NOW pair", Ok(()), |s| {
            setup(s);
            s.utimensat(CWD, b"/666", Some(&[NOW, NOW]), NOAT)
        }),
        ("not owner, writable, explicit", Err(Errno::EPERM), |s| {
            setup(s);
            s.utimensat(CWD, b"/666", Some(&[T2001, T2001]), NOAT)
        }),
        (
            "not owner, writable, explicit and OMIT",
            Err(Errno::EPERM),
            |s| {
                setup(s);
                s.utimensat(CWD, b"/666", Some(&[OMIT, T2001]), NOAT)
            },
        ),
        ("not owner, read-only, now", Err(Errno::EACCES), |s| {
            setup(s);
            s.utimensat(CWD, b"/644", None, NOAT)
        }),
        ("not owner, read-only, explicit", Err(Errno::EPERM), |s| {
            setup(s);
            s.utimensat(CWD, b"/644", Some(&[T2001, T2001]), NOAT)
        }),
        ("not owner, read-only fd, now", Err(Errno::EACCES), |s| {
            setup(s);
            let fd = s.open(b"/644", RO, 0).unwrap();
            s.futimens(fd, None)
        }),
        ("not owner, write fd on a writable file, now", Ok(()), |s| {
            setup(s);
            let fd = s.open(b"/666", WO, 0).unwrap();
            s.futimens(fd, None)
        }),
        ("owner, explicit", Ok(()), |s| {
            setup(s);
            s.utimensat(CWD, b"/w/mine", Some(&[T2001, T2001]), NOAT)
        }),
        ("root, explicit on another's file", Ok(()), |s| {
            setup(s);
            s.set_cred(0, 0, &[]);
            s.utimensat(CWD, b"/w/mine", Some(&[T2001, T2001]), NOAT)
        }),
    ]);
}

// ---------------------------------------------------------------------------------------
// ftruncate

#[test]
fn ftruncate_cases() {
    type RT = Result<(i64, i64, Vec<u8>), Errno>;
    fn tr(s: &dyn Sys, flags: OpenFlags, len: i64) -> RT {
        s.mkfile(b"/f", b"hello world");
        let fd = s.open(b"/f", flags, 0)?;
        s.ftruncate(fd, len)?;
        let st = s.fstat(fd)?;
        Ok((st.st_size, st.st_blocks, s.read_file(b"/f")?))
    }
    table::<RT>(&[
        ("shrink", Ok((5, 8, b"hello".to_vec())), |s| tr(s, WO, 5)),
        ("to zero", Ok((0, 0, vec![])), |s| tr(s, WO, 0)),
        ("same size", Ok((11, 8, b"hello world".to_vec())), |s| {
            tr(s, WO, 11)
        }),
        (
            "grow with zeros",
            Ok((13, 8, b"hello world\0\0".to_vec())),
            |s| tr(s, RW, 13),
        ),
        (
            "grow far: a hole, no blocks",
            Ok((1 << 20, 8, {
                let mut v = b"hello world".to_vec();
                v.resize(1 << 20, 0);
                v
            })),
            |s| tr(s, RW, 1 << 20),
        ),
        ("O_APPEND fd", Ok((3, 8, b"hel".to_vec())), |s| {
            tr(s, WO | OpenFlags::APPEND, 3)
        }),
        ("read-only fd", Err(Errno::EINVAL), |s| tr(s, RO, 3)),
        ("access mode 3", Err(Errno::EINVAL), |s| {
            tr(s, OpenFlags::ACCMODE, 3)
        }),
        ("negative", Err(Errno::EINVAL), |s| tr(s, WO, -1)),
        ("directory", Err(Errno::EINVAL), |s| {
            s.mkdir(b"/d");
            let fd = s.open(b"/d", RO, 0)?;
            s.ftruncate(fd, 0)?;
            Ok((0, 0, vec![]))
        }),
        ("bad fd", Err(Errno::EBADF), |s| {
            s.ftruncate(Fd(6), 0)?;
            Ok((0, 0, vec![]))
        }),
        ("negative length, bad fd", Err(Errno::EINVAL), |s| {
            s.ftruncate(Fd(6), -1)?;
            Ok((0, 0, vec![]))
        }),
    ]);
    // Shrinking then growing reads zeros where the data was, in the partial page too.
    expect(Ok(b"hel\0\0\0\0\0".to_vec()), |s| {
        s.mkfile(b"/f", b"hello wo");
        let fd = s.open(b"/f", RW, 0).unwrap();
        s.ftruncate(fd, 3).unwrap();
        s.ftruncate(fd, 8).unwrap();
        s.read_file(b"/f")
    });
    // The size limit: i64::MAX is allowed on tmpfs.
    expect(Ok(i64::MAX), |s| {
        let fd = s.open(b"/f", CREAT | RW, 0o644).unwrap();
        s.ftruncate(fd, i64::MAX)?;
        s.fstat(fd).map(|x| x.st_size)
    });
    // The position is left alone.
    expect(Ok(11), |s| {
        s.mkfile(b"/f", b"hello world");
        let fd = s.open(b"/f", RW, 0).unwrap();
        s.lseek(fd, 0, SEEK_END).unwrap();
        s.ftruncate(fd, 2).unwrap();
        s.lseek(fd, 0, SEEK_CUR)
    });
}

#[test]
fn ftruncate_times() {
    // mtime and ctime move on a size change and (ftruncate always passes ATTR_MTIME |
    // ATTR_CTIME) on the same size too; atime stays.
    expect(((true, true), (true, true)), |s| {
        let run = |len: i64| {
            s.mkfile(b"/f", b"hello");
            s.set_times(b"/f", T2001, T2001);
            let fd = s.open(b"/f", WO, 0).unwrap();
            s.ftruncate(fd, len).unwrap();
            let x = s.fstat(fd).unwrap();
            s.close(fd).unwrap();
            (x.st_mtime > T2001, x.st_atime == T2001)
        };
        (run(2), run(5))
    });
}

#[test]
fn ftruncate_by_non_root_clears_setuid() {
    expect((0o100777, 0o106777), |s| {
        s.umask(0);
        for p in [&b"/a"[..], b"/b"] {
            let fd = s.open(p, CREAT | WO, 0o6777).unwrap();
            s.close(fd).unwrap();
        }
        let fd = s.open(b"/b", WO, 0).unwrap();
        s.ftruncate(fd, 1).unwrap();
        s.set_cred(1000, 1000, &[]);
        let fd = s.open(b"/a", WO, 0).unwrap();
        s.ftruncate(fd, 1).unwrap();
        (
            s.stat(b"/a").unwrap().st_mode,
            s.stat(b"/b").unwrap().st_mode,
        )
    });
}

// ---------------------------------------------------------------------------------------
// umask, getuid, getpid

#[test]
fn umask_calls() {
    // umask returns the previous mask; only the permission bits are kept.
    expect((0o022, 0o077, 0o777, 0o000, 0o7), |s| {
        let a = s.umask(0o077);
        let b = s.umask(0o7777);
        let c = s.umask(0);
        let d = s.umask(0o7);
        (a, b, c, d, s.umask(0o022))
    });
    // It applies to open(O_CREAT) and mkdir, not to symlinks.
    expect((0o100600, 0o40700, 0o120777), |s| {
        s.umask(0o077);
        let fd = s.open(b"/f", CREAT | WO, 0o666).unwrap();
        s.mkdirat(CWD, b"/d", 0o777).unwrap();
        s.symlink(b"f", b"/l");
        (
            s.fstat(fd).unwrap().st_mode,
            s.stat(b"/d").unwrap().st_mode,
            s.lstat(b"/l").unwrap().st_mode,
        )
    });
}

#[test]
fn getuid_follows_credentials() {
    expect((0, 1000, 0), |s| {
        let a = s.getuid();
        s.set_cred(1000, 1000, &[]);
        let b = s.getuid();
        s.set_cred(0, 0, &[]);
        (a, b, s.getuid())
    });
}

#[test]
fn getpid_of_forks_and_threads() {
    // uvfs only: pids are uvfs's own. A thread shares its process's pid; a fork gets a
    // new, unique one.
    let u = Uvfs::new();
    let t = &u.task;
    assert_eq!(t.getpid(), 1);
    assert_eq!(t.clone_thread().getpid(), 1);
    let a = t.fork();
    let b = t.fork();
    assert!(a.getpid() > 1 && b.getpid() > 1 && a.getpid() != b.getpid());
    assert_eq!(a.clone_thread().getpid(), a.getpid());
    assert_eq!(a.getuid(), 0);
}

/// `/f` 0644 after `op`, as `(mode, uid, gid, size)`.
fn attrs(s: &dyn Sys, p: &[u8]) -> Result<(u32, u32, u32, i64), Errno> {
    s.lstat(p)
        .map(|st| (st.st_mode, st.st_uid, st.st_gid, st.st_size))
}

type RA = Result<(u32, u32, u32, i64), Errno>;
const FCHMODAT_BAD_FLAG: AtFlags = AtFlags::from_bits_retain(0x8000);

#[test]
fn chmod_cases() {
    table::<RA>(&[
        ("chmod a file", Ok((S_IFREG | 0o600, 0, 0, 5)), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"/f", 0o600, NOAT)?;
            attrs(s, b"/f")
        }),
        (
            "file type bits in mode are ignored",
            Ok((S_IFREG | 0o7755, 0, 0, 5)),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/f", S_IFDIR | 0o7755, NOAT)?;
                attrs(s, b"/f")
            },
        ),
        (
            "chmod a directory",
            Ok((S_IFDIR | 0o1700, 0, 0, DIR.size)),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/d", 0o1700, NOAT)?;
                attrs(s, b"/d")
            },
        ),
        ("follows a symlink", Ok((S_IFREG | 0o400, 0, 0, 5)), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"/l", 0o400, NOAT)?;
            assert_eq!(attrs(s, b"/l").unwrap().0, S_IFLNK | 0o777);
            attrs(s, b"/f")
        }),
        (
            "AT_SYMLINK_NOFOLLOW on a symlink",
            Err(Errno::EOPNOTSUPP),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/l", 0o400, NOFOLLOW)?;
                attrs(s, b"/f")
            },
        ),
        (
            "AT_SYMLINK_NOFOLLOW on a file",
            Ok((S_IFREG | 0o640, 0, 0, 5)),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/f", 0o640, NOFOLLOW)?;
                attrs(s, b"/f")
            },
        ),
        ("dangling symlink", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"/dangling", 0o640, NOAT)?;
            attrs(s, b"/f")
        }),
        ("unknown flag", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"/f", 0o640, FCHMODAT_BAD_FLAG)?;
            attrs(s, b"/f")
        }),
        ("AT_REMOVEDIR is unknown here", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"/f", 0o640, AtFlags::REMOVEDIR)?;
            attrs(s, b"/f")
        }),
        ("empty path", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"", 0o640, NOAT)?;
            attrs(s, b"/f")
        }),
        (
            "AT_EMPTY_PATH with a file descriptor",
            Ok((S_IFREG | 0o604, 0, 0, 5)),
            |s| {
                posix_tree(s);
                let fd = s.open(b"/f", RO, 0)?;
                s.fchmodat(fd, b"", 0o604, EMPTY)?;
                attrs(s, b"/f")
            },
        ),
        (
            "AT_EMPTY_PATH with the cwd",
            Ok((S_IFDIR | 0o711, 0, 0, DIR.size)),
            |s| {
                posix_tree(s);
                s.chdir(b"/d")?;
                s.fchmodat(CWD, b"", 0o711, EMPTY)?;
                attrs(s, b"/d")
            },
        ),
        ("relative to a file descriptor", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0)?;
            s.fchmodat(fd, b"x", 0o604, NOAT)?;
            attrs(s, b"/f")
        }),
        ("trailing slash on a file", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"/f/", 0o604, NOAT)?;
            attrs(s, b"/f")
        }),
        (
            "fchmod on a read-only descriptor",
            Ok((S_IFREG | 0o4711, 0, 0, 5)),
            |s| {
                posix_tree(s);
                let fd = s.open(b"/f", RO, 0)?;
                s.fchmod(fd, 0o4711)?;
                attrs(s, b"/f")
            },
        ),
        ("fchmod on a bad descriptor", Err(Errno::EBADF), |s| {
            posix_tree(s);
            s.fchmod(Fd(9), 0o600)?;
            attrs(s, b"/f")
        }),
    ]);
}

#[test]
fn chmod_and_chown_stamp_ctime_only() {
    same(|s| {
        posix_tree(s);
        s.set_times(b"/f", T2001, T2002);
        let a = s.stat(b"/f").unwrap();
        s.fchmodat(CWD, b"/f", 0o644, NOAT).unwrap(); // the same mode: still a change
        let b = s.stat(b"/f").unwrap();
        s.fchownat(CWD, b"/f", u32::MAX, u32::MAX, NOAT).unwrap();
        let c = s.stat(b"/f").unwrap();
        (
            times(&b) == times(&a),
            b.st_ctime > a.st_ctime,
            c.st_ctime > b.st_ctime,
            times(&c) == (T2001, T2002),
        )
    });
}

#[test]
fn chown_cases() {
    const M: u32 = u32::MAX;
    table::<RA>(&[
        (
            "root chowns a file",
            Ok((S_IFREG | 0o644, 1000, 2000, 5)),
            |s| {
                posix_tree(s);
                s.fchownat(CWD, b"/f", 1000, 2000, NOAT)?;
                attrs(s, b"/f")
            },
        ),
        (
            "-1 leaves the owner",
            Ok((S_IFREG | 0o644, 0, 2000, 5)),
            |s| {
                posix_tree(s);
                s.fchownat(CWD, b"/f", M, 2000, NOAT)?;
                attrs(s, b"/f")
            },
        ),
        ("-1 leaves the group", Ok((S_IFREG | 0o644, 7, 0, 5)), |s| {
            posix_tree(s);
            s.fchownat(CWD, b"/f", 7, M, NOAT)?;
            attrs(s, b"/f")
        }),
        ("follows a symlink", Ok((S_IFREG | 0o644, 5, 6, 5)), |s| {
            posix_tree(s);
            s.fchownat(CWD, b"/l", 5, 6, NOAT)?;
            assert_eq!(attrs(s, b"/l").unwrap().1, 0);
            attrs(s, b"/f")
        }),
        (
            "AT_SYMLINK_NOFOLLOW changes the symlink",
            Ok((S_IFLNK | 0o777, 5, 6, 1)),
            |s| {
                posix_tree(s);
                s.fchownat(CWD, b"/l", 5, 6, NOFOLLOW)?;
                assert_eq!(attrs(s, b"/f").unwrap().1, 0);
                attrs(s, b"/l")
            },
        ),
        (
            "AT_EMPTY_PATH with a descriptor",
            Ok((S_IFREG | 0o644, 3, 3, 5)),
            |s| {
                posix_tree(s);
                let fd = s.open(b"/f", RO, 0)?;
                s.fchownat(fd, b"", 3, 3, EMPTY)?;
                attrs(s, b"/f")
            },
        ),
        (
            "empty path without AT_EMPTY_PATH",
            Err(Errno::ENOENT),
            |s| {
                posix_tree(s);
                let fd = s.open(b"/f", RO, 0)?;
                s.fchownat(fd, b"", 3, 3, NOAT)?;
                attrs(s, b"/f")
            },
        ),
        ("unknown flag", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.fchownat(CWD, b"/f", 3, 3, FCHMODAT_BAD_FLAG)?;
            attrs(s, b"/f")
        }),
        ("missing", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            s.fchownat(CWD, b"/nope", 3, 3, NOAT)?;
            attrs(s, b"/f")
        }),
        ("fchown", Ok((S_IFREG | 0o644, 9, 8, 5)), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0)?;
            s.fchown(fd, 9, 8)?;
            attrs(s, b"/f")
        }),
        ("fchown on a bad descriptor", Err(Errno::EBADF), |s| {
            posix_tree(s);
            s.fchown(Fd(9), 9, 8)?;
            attrs(s, b"/f")
        }),
        (
            "root's chown clears set-user-ID",
            Ok((S_IFREG | 0o755, 0, 0, 5)),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/f", 0o4755, NOAT)?;
                s.fchownat(CWD, b"/f", 0, 0, NOAT)?;
                attrs(s, b"/f")
            },
        ),
        (
            "even with both ids -1",
            Ok((S_IFREG | 0o755, 0, 0, 5)),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/f", 0o6755, NOAT)?;
                s.fchownat(CWD, b"/f", M, M, NOAT)?;
                attrs(s, b"/f")
            },
        ),
        (
            "root keeps set-group-ID without group execute",
            Ok((S_IFREG | 0o2644, 0, 5, 5)),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/f", 0o6644, NOAT)?;
                s.fchownat(CWD, b"/f", M, 5, NOAT)?;
                attrs(s, b"/f")
            },
        ),
        (
            "a directory keeps its set-ID bits",
            Ok((S_IFDIR | 0o7755, 4, 4, DIR.size)),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/d", 0o7755, NOAT)?;
                s.fchownat(CWD, b"/d", 4, 4, NOAT)?;
                attrs(s, b"/d")
            },
        ),
    ]);
}

#[test]
fn truncate_cases() {
    table::<RA>(&[
        ("grow", Ok((S_IFREG | 0o644, 0, 0, 10_000)), |s| {
            posix_tree(s);
            s.truncate(b"/f", 10_000)?;
            attrs(s, b"/f")
        }),
        ("shrink", Ok((S_IFREG | 0o644, 0, 0, 2)), |s| {
            posix_tree(s);
            s.truncate(b"/f", 2)?;
            assert_eq!(s.read_file(b"/f").unwrap(), b"he");
            attrs(s, b"/f")
        }),
        (
            "shrink then grow reads zeros",
            Ok((S_IFREG | 0o644, 0, 0, 4)),
            |s| {
                posix_tree(s);
                s.truncate(b"/f", 1)?;
                s.truncate(b"/f", 4)?;
                assert_eq!(s.read_file(b"/f").unwrap(), b"h\0\0\0");
                attrs(s, b"/f")
            },
        ),
        ("follows a symlink", Ok((S_IFREG | 0o644, 0, 0, 1)), |s| {
            posix_tree(s);
            s.truncate(b"l", 1)?;
            attrs(s, b"/f")
        }),
        ("relative to the cwd", Ok((S_IFREG | 0o644, 0, 0, 3)), |s| {
            posix_tree(s);
            s.chdir(b"/d")?;
            s.truncate(b"f", 3)?;
            attrs(s, b"/d/f")
        }),
        ("negative length", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.truncate(b"/f", -1)?;
            attrs(s, b"/f")
        }),
        (
            "negative length before the lookup",
            Err(Errno::EINVAL),
            |s| {
                s.truncate(b"/missing", -1)?;
                attrs(s, b"/f")
            },
        ),
        ("a directory", Err(Errno::EISDIR), |s| {
            posix_tree(s);
            s.truncate(b"/d", 0)?;
            attrs(s, b"/d")
        }),
        ("a symlink to a directory", Err(Errno::EISDIR), |s| {
            posix_tree(s);
            s.truncate(b"/ld", 0)?;
            attrs(s, b"/d")
        }),
        ("dangling symlink", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            s.truncate(b"/dangling", 0)?;
            attrs(s, b"/f")
        }),
        ("trailing slash", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            s.truncate(b"/f/", 0)?;
            attrs(s, b"/f")
        }),
        ("empty path", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            s.truncate(b"", 0)?;
            attrs(s, b"/f")
        }),
        (
            "root needs no write permission",
            Ok((S_IFREG, 0, 0, 0)),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/f", 0, NOAT)?;
                s.truncate(b"/f", 0)?;
                attrs(s, b"/f")
            },
        ),
        ("no write permission", Err(Errno::EACCES), |s| {
            posix_tree(s);
            s.set_cred(1000, 1000, &[]);
            s.truncate(b"/f", 0)?;
            attrs(s, b"/f")
        }),
        (
            "write permission through other",
            Ok((S_IFREG | 0o666, 0, 0, 1)),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/f", 0o666, NOAT)?;
                s.set_cred(1000, 1000, &[]);
                s.truncate(b"/f", 1)?;
                attrs(s, b"/f")
            },
        ),
        ("owner without write permission", Err(Errno::EACCES), |s| {
            posix_tree(s);
            s.fchownat(CWD, b"/f", 1000, 1000, NOAT)?;
            s.fchmodat(CWD, b"/f", 0o466, NOAT)?;
            s.set_cred(1000, 1000, &[]);
            s.truncate(b"/f", 1)?;
            attrs(s, b"/f")
        }),
        (
            "non-root clears set-ID bits",
            Ok((S_IFREG | 0o777, 0, 0, 1)),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/f", 0o6777, NOAT)?;
                s.set_cred(1000, 1000, &[]);
                s.truncate(b"/f", 1)?;
                attrs(s, b"/f")
            },
        ),
        (
            "root keeps set-ID bits",
            Ok((S_IFREG | 0o6777, 0, 0, 1)),
            |s| {
                posix_tree(s);
                s.fchmodat(CWD, b"/f", 0o6777, NOAT)?;
                s.truncate(b"/f", 1)?;
                attrs(s, b"/f")
            },
        ),
    ]);
}

/// `truncate(2)` stamps mtime and ctime even when the size does not change (as
/// `ftruncate`), and leaves atime.
#[test]
fn truncate_times() {
    expect((true, true), |s| {
        posix_tree(s);
        s.set_times(b"/f", T2001, T2002);
        let a = s.stat(b"/f").unwrap();
        s.truncate(b"/f", 5).unwrap();
        let b = s.stat(b"/f").unwrap();
        (
            b.st_mtime > T2002 && b.st_ctime > a.st_ctime && b.st_mtime == b.st_ctime,
            b.st_atime == T2001,
        )
    });
}

#[test]
fn access_cases() {
    use uvfs::attr::{F_OK, R_OK, W_OK, X_OK};
    const EACCESS: AtFlags = AtFlags::EACCESS;
    table::<R>(&[
        ("F_OK", Ok(()), |s| {
            posix_tree(s);
            s.faccessat2(CWD, b"/f", F_OK, NOAT)
        }),
        ("missing", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            s.faccessat2(CWD, b"/nope", F_OK, NOAT)
        }),
        ("bad mode", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.faccessat2(CWD, b"/f", 8, NOAT)
        }),
        ("bad mode before the lookup", Err(Errno::EINVAL), |s| {
            s.faccessat2(Fd(9), b"nope", 0o10, NOAT)
        }),
        ("bad flag", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.faccessat2(CWD, b"/f", F_OK, AtFlags::NO_AUTOMOUNT)
        }),
        ("root reads and writes a 000 file", Ok(()), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"/f", 0, NOAT).unwrap();
            s.faccessat2(CWD, b"/f", R_OK | W_OK, NOAT)
        }),
        (
            "root cannot execute a file without x bits",
            Err(Errno::EACCES),
            |s| {
                posix_tree(s);
                s.faccessat2(CWD, b"/f", X_OK, NOAT)
            },
        ),
        ("root executes a file with any x bit", Ok(()), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"/f", 0o001, NOAT).unwrap();
            s.faccessat2(CWD, b"/f", R_OK | W_OK | X_OK, NOAT)
        }),
        ("root searches a 000 directory", Ok(()), |s| {
            posix_tree(s);
            s.fchmodat(CWD, b"/d", 0, NOAT).unwrap();
            s.faccessat2(CWD, b"/d", R_OK | W_OK | X_OK, EACCESS)
        }),
        ("follows a dangling symlink", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            s.faccessat2(CWD, b"/dangling", F_OK, NOAT)
        }),
        ("AT_SYMLINK_NOFOLLOW checks the symlink", Ok(()), |s| {
            posix_tree(s);
            s.set_cred(1000, 1000, &[]);
            s.faccessat2(CWD, b"/dangling", R_OK | W_OK | X_OK, NOFOLLOW)
        }),
        ("AT_EMPTY_PATH with a descriptor", Err(Errno::EACCES), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.faccessat2(fd, b"", W_OK, EMPTY)
        }),
        ("AT_EMPTY_PATH reads with a descriptor", Ok(()), |s| {
            posix_tree(s);
            let fd = s.open(b"/f", RO, 0).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.faccessat2(fd, b"", R_OK, EMPTY)
        }),
        (
            "empty path without AT_EMPTY_PATH",
            Err(Errno::ENOENT),
            |s| {
                posix_tree(s);
                s.faccessat2(CWD, b"", F_OK, NOAT)
            },
        ),
        ("trailing slash on a file", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            s.faccessat2(CWD, b"/f/", F_OK, NOAT)
        }),
    ]);
}

/// Bug (found by tests/differential.rs): `futimens(AT_FDCWD, times)` gave EBADF; Linux
/// gives EFAULT.
/// Cause: `futimens` is `utimensat(fd, NULL, ..)`, and Linux's `do_utimes` treats a NULL
/// path with `AT_FDCWD` as a path walk of a NULL name; uvfs looked the descriptor up.
/// Fix: `futimens` answers EFAULT for `AT_FDCWD` (after the both-`UTIME_OMIT` no-op).
#[test]
fn futimens_at_fdcwd_is_efault() {
    expect((Err(Errno::EFAULT), Ok(())), |s| {
        (
            s.futimens(CWD, Some(&[T2001, T2002])),
            s.futimens(CWD, Some(&[OMIT, OMIT])),
        )
    });
}

/// Bug (found by tests/differential.rs): truncate(2) of a file without data pages to its
/// current size stamped mtime and ctime; Linux leaves both (ftruncate and `O_TRUNC` do
/// stamp them, and so does truncate(2) of a file with pages).
/// Cause: truncate(2)'s `do_truncate` passes only `ATTR_SIZE`; `shmem_setattr` stamps
/// times for a change of size, or in `shmem_truncate_range` when pages are allocated;
/// uvfs's truncation stamped always.
/// Fix: `truncate_at` takes whether to stamp an unchanged size (ftruncate, O_TRUNC) and
/// otherwise stamps only a change of size or a file with pages.
#[test]
fn truncate_to_same_size_keeps_times_without_pages() {
    expect((T2002, true, true, true), |s| {
        s.mkfile(b"/e", b"");
        s.mkfile(b"/f", b"abc");
        s.mkfile(b"/g", b"");
        for p in [&b"/e"[..], b"/f", b"/g"] {
            s.set_times(p, T2001, T2002);
        }
        let before = s.stat(b"/e").unwrap().st_ctime;
        s.truncate(b"/e", 0).unwrap();
        s.truncate(b"/f", 3).unwrap();
        let fd = s.open(b"/g", WO, 0).unwrap();
        s.ftruncate(fd, 0).unwrap();
        let e = s.stat(b"/e").unwrap();
        (
            e.st_mtime,
            e.st_ctime == before,
            s.stat(b"/f").unwrap().st_mtime != T2002,
            s.stat(b"/g").unwrap().st_mtime != T2002,
        )
    });
}
