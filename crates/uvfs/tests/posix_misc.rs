//! `fsync`/`fdatasync`, `statfs`/`fstatfs`, `statx`, `chroot`, `mknodat`, asserted against
//! Linux (each case also runs on the host kernel, see `common`).

mod common;
use common::*;
use uvfs::stat::*;
use uvfs::statfs::{ST_RELATIME, ST_VALID, TMPFS_MAGIC};
use uvfs::types::*;
use uvfs::{AtFlags, Errno, Fd, OpenFlags};

#[test]
fn fsync_and_fdatasync() {
    table::<Result<(), Errno>>(&[
        ("fsync, file", Ok(()), |s| {
            s.mkfile(b"/f", b"x");
            let fd = s.open(b"/f", RO, 0).unwrap();
            s.fsync(fd)
        }),
        ("fdatasync, file for writing", Ok(()), |s| {
            let fd = s.open(b"/f", CREAT | WO, 0o644).unwrap();
            s.fdatasync(fd)
        }),
        ("fsync, directory", Ok(()), |s| {
            let fd = s.open(b"/", RO, 0).unwrap();
            s.fsync(fd)
        }),
        ("fsync, not open", Err(Errno::EBADF), |s| s.fsync(Fd(7))),
        ("fdatasync, negative", Err(Errno::EBADF), |s| {
            s.fdatasync(Fd(-1))
        }),
        ("fsync, closed", Err(Errno::EBADF), |s| {
            let fd = s.open(b"/", RO, 0).unwrap();
            s.close(fd).unwrap();
            s.fsync(fd)
        }),
    ]);
}

#[test]
fn statfs_fields() {
    let want = (TMPFS_MAGIC, 4096, 255, 4096, ST_VALID | ST_RELATIME);
    expect(Ok(want), |s| s.statfs(b"/").map(statfs_fixed));
    expect(Ok(want), |s| {
        s.mkdir(b"/d");
        s.symlink(b"d", b"/l");
        s.statfs(b"/l").map(statfs_fixed)
    });
    expect(Ok(want), |s| {
        s.mkfile(b"/f", b"");
        let fd = s.open(b"/f", RO, 0).unwrap();
        s.fstatfs(fd).map(statfs_fixed)
    });
    // statfs and fstatfs agree, and the id is stable.
    same(|s| {
        let fd = s.open(b"/", RO, 0).unwrap();
        s.fstatfs(fd).unwrap() == s.statfs(b"/").unwrap()
    });
}

/// Bug (issue 15 item 3): `tmpfs::mount(Default::default())` had no limits, so a program
/// could fill the machine's memory through it (`fallocate` of 100 GiB grew until it ran
/// out). Cause: `TmpfsOptions`' `None` meant unlimited, and only `uvfs mount` computed
/// tmpfs's defaults. Fix: `None` is tmpfs's default, computed by the library as
/// mm/shmem.c does; unlimited is `Some(0)`, as tmpfs's `size=0`.
#[test]
fn statfs_default_mount_has_tmpfs_default_limits() {
    // shmem_default_max_blocks / shmem_default_max_inodes, from sysinfo(2) as si_meminfo.
    // SAFETY: sysinfo fills the struct it is given.
    let si = unsafe {
        let mut si: libc::sysinfo = std::mem::zeroed();
        assert_eq!(libc::sysinfo(&mut si), 0);
        si
    };
    let pages = |n: u64| n * u64::from(si.mem_unit) / 4096;
    let (total, high) = (pages(si.totalram), pages(si.totalhigh));
    let blocks = total / 2;
    let inodes = (total - high).min(total / 2);
    // On both sides a fresh mount without options: no block used, one inode (the root).
    expect((blocks, blocks, blocks, inodes, inodes - 1), |s| {
        let a = s.statfs(b"/").unwrap();
        (a.f_blocks, a.f_bfree, a.f_bavail, a.f_files, a.f_ffree)
    });
    assert_eq!(
        (
            uvfs::TmpfsOptions::default_size(),
            uvfs::TmpfsOptions::default_nr_inodes()
        ),
        (blocks * 4096, inodes)
    );
    // Unlimited is an explicit choice: counts 0, as a Linux size=0,nr_inodes=0 tmpfs.
    expect_limits(0, 0, (0, 0, 0, 0, 0), |s| {
        let a = s.statfs(b"/").unwrap();
        (a.f_blocks, a.f_bfree, a.f_bavail, a.f_files, a.f_ffree)
    });
}

#[test]
fn statfs_errors() {
    table::<Result<(i64, i64, i64, i64, i64), Errno>>(&[
        ("missing", Err(Errno::ENOENT), |s| {
            s.statfs(b"/x").map(statfs_fixed)
        }),
        ("empty path", Err(Errno::ENOENT), |s| {
            s.statfs(b"").map(statfs_fixed)
        }),
        ("through a file", Err(Errno::ENOTDIR), |s| {
            s.mkfile(b"/f", b"");
            s.statfs(b"/f/x").map(statfs_fixed)
        }),
        ("symlink loop", Err(Errno::ELOOP), |s| {
            s.symlink(b"loop", b"/loop");
            s.statfs(b"/loop").map(statfs_fixed)
        }),
        ("dangling symlink", Err(Errno::ENOENT), |s| {
            s.symlink(b"nowhere", b"/dl");
            s.statfs(b"/dl").map(statfs_fixed)
        }),
        ("fstatfs, not open", Err(Errno::EBADF), |s| {
            s.fstatfs(Fd(9)).map(statfs_fixed)
        }),
        ("no search permission", Err(Errno::EACCES), |s| {
            s.mkdirat(CWD, b"/d", 0o700).unwrap();
            s.mkfile(b"/d/f", b"");
            s.set_cred(1000, 1000, &[]);
            s.statfs(b"/d/f").map(statfs_fixed)
        }),
    ]);
}

const STATX_ALL: u32 = 0xfff;

fn xs(s: &dyn Sys, path: &[u8], flags: AtFlags, mask: u32) -> Result<XShape, Errno> {
    posix_tree(s);
    s.statx(CWD, path, flags, mask).map(xshape)
}

/// What Linux's FUSE client gives where tmpfs gives `x` (measured on Linux 6.18 with
/// `statx` on kernel FUSE mounts of libfuse 3.14's passthrough_ll and of `uvfs mount`,
/// beside tmpfs): mtime and ctime whatever the mask (FUSE is not multigrain), the VFS's
/// attributes mask alone (0x203000), and, where no request went to the server (nothing
/// asked it serves, or `AT_STATX_DONT_SYNC`), the cached blocks (0 from the CREATE reply
/// of a file written since) and no birth time (none asked before).
fn on_linux_fuse(x: &Result<XShape, Errno>, cached: bool) -> Result<XShape, Errno> {
    let x = (*x)?;
    let btime = if cached { STATX_BTIME } else { 0 };
    Ok(XShape {
        mask: (x.mask | STATX_MTIME | STATX_CTIME) & !btime,
        attributes_mask: 0x20_3000,
        blocks: if cached { 0 } else { x.blocks },
        ..x
    })
}

#[test]
fn statx_masks_and_fields() {
    // Each case compares everything but ids and times with Linux.
    let cases: &[(&[u8], AtFlags, u32)] = &[
        (b"/d/f", NOAT, STATX_ALL),
        (b"/d/f", NOAT, 0),
        (b"/d/f", NOAT, STATX_BASIC_STATS),
        (b"/d/f", NOAT, STATX_CTIME),
        (b"/d/f", NOAT, STATX_MTIME | STATX_BTIME),
        (b"/d/f", NOAT, STATX_SIZE),
        (b"/d/f", NOAT, 0x7fff_ffff),
        (b"/d/f", NOAT, STATX_MNT_ID_UNIQUE),
        (b"/d", NOAT, STATX_ALL),
        (b"/", NOAT, STATX_ALL),
        (b"/l", NOAT, STATX_ALL),
        (b"/l", AtFlags::SYMLINK_NOFOLLOW, STATX_ALL),
        (b"/d/f", AtFlags::NO_AUTOMOUNT, STATX_ALL),
        (b"/d/f", AtFlags::STATX_FORCE_SYNC, STATX_ALL),
        (b"/d/f", AtFlags::STATX_DONT_SYNC, STATX_ALL),
    ];
    for &(path, flags, mask) in cases {
        let cached = flags == AtFlags::STATX_DONT_SYNC || mask & STATX_ALL == 0;
        let u = same_fuse(|x| on_linux_fuse(x, cached), |s| xs(s, path, flags, mask));
        assert!(u.is_ok(), "{} {flags:?} {mask:#x}: {u:?}", show(path));
    }
    // The numbers agree with fstatat's.
    same(|s| {
        posix_tree(s);
        let x = s.statx(CWD, b"/d/f", NOAT, STATX_ALL).unwrap();
        let st = s.stat(b"/d/f").unwrap();
        (
            x.stx_ino == st.st_ino,
            (x.stx_dev_major, x.stx_dev_minor) == (major(st.st_dev), minor(st.st_dev)),
            x.stx_mtime.tv_sec == st.st_mtime.tv_sec,
            x.stx_mtime.tv_nsec as i64 == st.st_mtime.tv_nsec,
            x.stx_atime.tv_nsec as i64 == st.st_atime.tv_nsec,
        )
    });
}

fn major(dev: u64) -> u32 {
    (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)) as u32
}
fn minor(dev: u64) -> u32 {
    ((dev & 0xff) | ((dev >> 12) & !0xff)) as u32
}

#[test]
fn statx_times() {
    // Neither mtime nor ctime asked for: both left 0 (multigrain tmpfs); a FUSE mount,
    // not multigrain, gives them (see `on_linux_fuse`).
    expect_fuse(ok((true, true)), ok((false, false)), |s| {
        posix_tree(s);
        let x = s.statx(CWD, b"/d/f", NOAT, STATX_ATIME)?;
        let zero = StatxTimestamp::default();
        Ok((x.stx_mtime == zero, x.stx_ctime == zero))
    });
    // btime only when asked; it is the creation time: explicit times move atime and
    // mtime, not btime.
    expect(ok((StatxTimestamp::default(), true, true)), |s| {
        posix_tree(s);
        let no = s.statx(CWD, b"/d/f", NOAT, STATX_BASIC_STATS)?.stx_btime;
        let before = s.statx(CWD, b"/d/f", NOAT, STATX_ALL)?;
        s.set_times(b"/d/f", T2001, T2002);
        let after = s.statx(CWD, b"/d/f", NOAT, STATX_ALL)?;
        Ok((
            no,
            after.stx_btime == before.stx_btime && after.stx_btime <= after.stx_ctime,
            after.stx_mtime == T2002.into() && after.stx_btime > after.stx_mtime,
        ))
    });
    // Asking for the ctime marks it queried: a change right after is always visible.
    same(|s| {
        posix_tree(s);
        let fd = s.open(b"/d/f", WO, 0).unwrap();
        (0..50).all(|_| {
            let a = s.statx(CWD, b"/d/f", NOAT, STATX_CTIME).unwrap().stx_ctime;
            s.write(fd, b"x").unwrap();
            s.statx(CWD, b"/d/f", NOAT, STATX_CTIME).unwrap().stx_ctime > a
        })
    });
}

type X = Result<u16, Errno>;

#[test]
fn statx_flags_and_errors() {
    table::<X>(&[
        ("reserved mask bit", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.statx(CWD, b"/d/f", NOAT, 0x8000_0000).map(|x| x.stx_mode)
        }),
        ("reserved mask bit before ENOENT", Err(Errno::EINVAL), |s| {
            s.statx(CWD, b"/x", NOAT, 0xffff_ffff).map(|x| x.stx_mode)
        }),
        ("both sync flags", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            let f = AtFlags::STATX_FORCE_SYNC | AtFlags::STATX_DONT_SYNC;
            s.statx(CWD, b"/d/f", f, STATX_ALL).map(|x| x.stx_mode)
        }),
        ("unknown flag", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.statx(CWD, b"/d/f", AtFlags::REMOVEDIR, STATX_ALL)
                .map(|x| x.stx_mode)
        }),
        ("unknown flag before ENOENT", Err(Errno::EINVAL), |s| {
            s.statx(CWD, b"", AtFlags::SYMLINK_FOLLOW, STATX_ALL)
                .map(|x| x.stx_mode)
        }),
        ("empty path", Err(Errno::ENOENT), |s| {
            s.statx(CWD, b"", NOAT, STATX_ALL).map(|x| x.stx_mode)
        }),
        (
            "empty path, AT_EMPTY_PATH, cwd",
            Ok((S_IFDIR | 0o1777) as u16),
            |s| {
                s.statx(CWD, b"", AtFlags::EMPTY_PATH, STATX_ALL)
                    .map(|x| x.stx_mode)
            },
        ),
        (
            "AT_EMPTY_PATH on a descriptor",
            Ok((S_IFREG | 0o644) as u16),
            |s| {
                posix_tree(s);
                let fd = s.open(b"/d/f", RO, 0).unwrap();
                s.statx(fd, b"", AtFlags::EMPTY_PATH, STATX_ALL)
                    .map(|x| x.stx_mode)
            },
        ),
        (
            "AT_EMPTY_PATH on an O_PATH symlink",
            Ok((S_IFLNK | 0o777) as u16),
            |s| {
                posix_tree(s);
                let fd = s
                    .open(b"/l", OpenFlags::PATH | OpenFlags::NOFOLLOW, 0)
                    .unwrap();
                s.statx(fd, b"", AtFlags::EMPTY_PATH, STATX_ALL)
                    .map(|x| x.stx_mode)
            },
        ),
        ("bad dirfd", Err(Errno::EBADF), |s| {
            s.statx(Fd(9), b"x", NOAT, STATX_ALL).map(|x| x.stx_mode)
        }),
        ("dirfd is a file", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            let fd = s.open(b"/d/f", RO, 0).unwrap();
            s.statx(fd, b"x", NOAT, STATX_ALL).map(|x| x.stx_mode)
        }),
        ("missing", Err(Errno::ENOENT), |s| {
            s.statx(CWD, b"/x", NOAT, STATX_ALL).map(|x| x.stx_mode)
        }),
        ("no search permission", Err(Errno::EACCES), |s| {
            posix_tree(s);
            s.mkdirat(CWD, b"/n", 0o700).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.statx(CWD, b"/n/x", NOAT, STATX_ALL).map(|x| x.stx_mode)
        }),
    ]);
}

type C = Result<Vec<u8>, Errno>;

#[test]
fn chroot_changes_the_root() {
    table::<C>(&[
        (
            "absolute paths start at the new root",
            Ok(b"data".to_vec()),
            |s| {
                posix_tree(s);
                s.chroot(b"/d")?;
                s.read_file(b"/f")
            },
        ),
        ("dot-dot stops at the new root", Ok(b"data".to_vec()), |s| {
            posix_tree(s);
            s.chroot(b"/d")?;
            s.read_file(b"/../../f")
        }),
        (
            "absolute symlinks resolve inside",
            Ok(b"data".to_vec()),
            |s| {
                posix_tree(s);
                s.symlink(b"/f", b"/d/abs");
                s.chroot(b"/d")?;
                s.read_file(b"/abs")
            },
        ),
        ("through a symlink", Ok(b"data".to_vec()), |s| {
            posix_tree(s);
            s.chroot(b"/ld")?;
            s.read_file(b"/f")
        }),
        ("relative to the cwd", Ok(b"data".to_vec()), |s| {
            posix_tree(s);
            s.chdir(b"/d/sub")?;
            s.chroot(b"..")?;
            s.read_file(b"/f")
        }),
        (
            "the cwd stays (outside the root)",
            Ok(b"hello".to_vec()),
            |s| {
                posix_tree(s);
                s.chroot(b"/d")?;
                s.read_file(b"f")
            },
        ),
        ("chdir / then getcwd", Ok(b"/".to_vec()), |s| {
            posix_tree(s);
            s.chroot(b"/d")?;
            s.chdir(b"/")?;
            s.getcwd()
        }),
        ("cwd inside the new root", Ok(b"/sub".to_vec()), |s| {
            posix_tree(s);
            s.chdir(b"/d/sub")?;
            s.chroot(b"/d")?;
            s.getcwd()
        }),
        ("shared with threads", Ok(b"data".to_vec()), |s| {
            posix_tree(s);
            s.thread(&mut |t| t.chroot(b"/d").unwrap());
            s.read_file(b"/f")
        }),
        ("not with forked children", Ok(b"hello".to_vec()), |s| {
            posix_tree(s);
            s.fork(&mut |t| t.chroot(b"/d").unwrap());
            s.read_file(b"/f")
        }),
    ]);
    // A cwd outside the root: "(unreachable)" and the path from the file system's root
    // (on the host that root is above the test's sandbox, so only the end is compared).
    expect(ok((true, true)), |s| {
        posix_tree(s);
        s.chdir(b"/d")?;
        s.chroot(b"/d/sub")?;
        let cwd = s.getcwd()?;
        Ok((cwd.starts_with(b"(unreachable)/"), cwd.ends_with(b"/d")))
    });
}

#[test]
fn chroot_errors() {
    table::<Result<(), Errno>>(&[
        ("missing", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            s.chroot(b"/x")
        }),
        ("empty path", Err(Errno::ENOENT), |s| s.chroot(b"")),
        ("a file", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            s.chroot(b"/f")
        }),
        ("through a file", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            s.chroot(b"/f/x")
        }),
        ("symlink loop", Err(Errno::ELOOP), |s| {
            posix_tree(s);
            s.chroot(b"/loop")
        }),
        ("non-root", Err(Errno::EPERM), |s| {
            posix_tree(s);
            s.set_cred(1000, 1000, &[]);
            s.chroot(b"/d")
        }),
        (
            "non-root, no search on the dir: EACCES first",
            Err(Errno::EACCES),
            |s| {
                posix_tree(s);
                s.mkdirat(CWD, b"/n", 0o700).unwrap();
                s.mkdir(b"/n/x");
                s.set_cred(1000, 1000, &[]);
                s.chroot(b"/n")
            },
        ),
        ("non-root, no search on the path", Err(Errno::EACCES), |s| {
            posix_tree(s);
            s.mkdirat(CWD, b"/n", 0o700).unwrap();
            s.mkdir(b"/n/x");
            s.set_cred(1000, 1000, &[]);
            s.chroot(b"/n/x")
        }),
        ("root, no search bits", Ok(()), |s| {
            posix_tree(s);
            s.mkdirat(CWD, b"/z", 0).unwrap();
            s.chroot(b"/z")
        }),
    ]);
}

/// `makedev(major, minor)` (glibc's encoding).
fn makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xfff) << 8) | ((major & !0xfff) << 32) | (minor & 0xff) | ((minor & !0xff) << 12)
}

type N = Result<(Shape, u64), Errno>;

/// `mknod(/n, mode, dev)`; the shape and `st_rdev` of the result.
fn mknod(s: &dyn Sys, mode: u32, dev: u64) -> N {
    s.mknodat(CWD, b"/n", mode, dev)?;
    let st = s.lstat(b"/n").unwrap();
    Ok((shape(st), st.st_rdev))
}

fn special(ty: u32, perm: u32, uid: u32) -> Shape {
    Shape {
        mode: ty | perm,
        nlink: 1,
        uid,
        gid: uid,
        size: 0,
        blocks: 0,
    }
}

#[test]
fn mknod_types() {
    table::<N>(&[
        ("FIFO", Ok((special(S_IFIFO, 0o644, 0), 0)), |s| {
            mknod(s, S_IFIFO | 0o666, 0)
        }),
        (
            "FIFO ignores dev",
            Ok((special(S_IFIFO, 0o600, 0), 0)),
            |s| mknod(s, S_IFIFO | 0o600, makedev(1, 3)),
        ),
        ("socket", Ok((special(S_IFSOCK, 0o755, 0), 0)), |s| {
            mknod(s, S_IFSOCK | 0o777, 0)
        }),
        (
            "character device",
            Ok((special(S_IFCHR, 0o600, 0), makedev(240, 7))),
            |s| mknod(s, S_IFCHR | 0o600, makedev(240, 7)),
        ),
        (
            "block device, large minor",
            Ok((special(S_IFBLK, 0o640, 0), makedev(259, 70000))),
            |s| mknod(s, S_IFBLK | 0o640, makedev(259, 70000)),
        ),
        ("regular file", Ok((special(S_IFREG, 0o644, 0), 0)), |s| {
            mknod(s, S_IFREG | 0o644, 0)
        }),
        (
            "type 0 is a regular file",
            Ok((special(S_IFREG, 0o600, 0), 0)),
            |s| mknod(s, 0o600, 0),
        ),
        (
            "set-user-ID kept",
            Ok((special(S_IFREG, 0o4755, 0), 0)),
            |s| mknod(s, S_IFREG | 0o4777, 0),
        ),
        (
            "FIFO by a non-root user",
            Ok((special(S_IFIFO, 0o644, 1000), 0)),
            |s| {
                s.set_cred(1000, 1000, &[]);
                mknod(s, S_IFIFO | 0o644, 0)
            },
        ),
        (
            "whiteout by a non-root user",
            Ok((special(S_IFCHR, 0o600, 1000), 0)),
            |s| {
                s.set_cred(1000, 1000, &[]);
                mknod(s, S_IFCHR | 0o600, 0)
            },
        ),
    ]);
    // getdents types, statx device numbers (the FUSE client's attributes mask: the VFS's,
    // see `on_linux_fuse`).
    let fuse = |(l, x): &(Vec<(String, u8)>, XShape)| {
        let x = XShape {
            attributes_mask: 0x20_3000,
            ..*x
        };
        (l.clone(), x)
    };
    same_fuse(fuse, |s| {
        s.mkdir(b"/d");
        s.mknodat(CWD, b"/d/p", S_IFIFO | 0o644, 0).unwrap();
        s.mknodat(CWD, b"/d/s", S_IFSOCK | 0o644, 0).unwrap();
        s.mknodat(CWD, b"/d/c", S_IFCHR | 0o644, makedev(4095, 1 << 19))
            .unwrap();
        s.mknodat(CWD, b"/d/b", S_IFBLK | 0o644, makedev(8, 1))
            .unwrap();
        let fd = s.open(b"/d", RO, 0).unwrap();
        let mut l = s.list_fd(fd, 4096).unwrap();
        l.sort();
        let x = s.statx(CWD, b"/d/c", NOAT, STATX_BASIC_STATS).unwrap();
        (l, xshape(x))
    });
}

#[test]
fn mknod_errors() {
    table::<Result<(), Errno>>(&[
        ("exists", Err(Errno::EEXIST), |s| {
            s.mkfile(b"/f", b"");
            s.mknodat(CWD, b"/f", S_IFIFO | 0o644, 0)
        }),
        ("exists as a dangling symlink", Err(Errno::EEXIST), |s| {
            s.symlink(b"nowhere", b"/l");
            s.mknodat(CWD, b"/l", S_IFIFO | 0o644, 0)
        }),
        ("root", Err(Errno::EEXIST), |s| {
            s.mknodat(CWD, b"/", S_IFIFO | 0o644, 0)
        }),
        ("directory type", Err(Errno::EPERM), |s| {
            s.mknodat(CWD, b"/x", S_IFDIR | 0o755, 0)
        }),
        ("symlink type", Err(Errno::EINVAL), |s| {
            s.mknodat(CWD, b"/x", S_IFLNK | 0o777, 0)
        }),
        ("bad type", Err(Errno::EINVAL), |s| {
            s.mknodat(CWD, b"/x", 0o030000 | 0o644, 0)
        }),
        ("type checked before the path", Err(Errno::EINVAL), |s| {
            s.mknodat(CWD, b"", S_IFLNK | 0o777, 0)
        }),
        ("device by a non-root user", Err(Errno::EPERM), |s| {
            s.set_cred(1000, 1000, &[]);
            s.mknodat(CWD, b"/x", S_IFCHR | 0o644, makedev(1, 3))
        }),
        (
            "block device 0:0 by a non-root user",
            Err(Errno::EPERM),
            |s| {
                s.set_cred(1000, 1000, &[]);
                s.mknodat(CWD, b"/x", S_IFBLK | 0o644, 0)
            },
        ),
        ("EACCES before EPERM", Err(Errno::EACCES), |s| {
            s.mkdirat(CWD, b"/ro", 0o755).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.mknodat(CWD, b"/ro/x", S_IFCHR | 0o644, makedev(1, 3))
        }),
        ("missing parent", Err(Errno::ENOENT), |s| {
            s.mknodat(CWD, b"/x/y", S_IFIFO | 0o644, 0)
        }),
        ("trailing slash", Err(Errno::ENOENT), |s| {
            s.mknodat(CWD, b"/x/", S_IFIFO | 0o644, 0)
        }),
        ("through a file", Err(Errno::ENOTDIR), |s| {
            s.mkfile(b"/f", b"");
            s.mknodat(CWD, b"/f/x", S_IFIFO | 0o644, 0)
        }),
        ("dev above 32 bits", Err(Errno::EINVAL), |s| {
            s.mknodat(CWD, b"/x", S_IFCHR | 0o644, makedev(5000, 1))
        }),
        ("bad dirfd", Err(Errno::EBADF), |s| {
            s.mknodat(Fd(5), b"x", S_IFIFO | 0o644, 0)
        }),
    ]);
}

type O = Result<u32, Errno>;

/// `mknod(/n, mode, dev)` then `open(/n, flags)`; the opened file's type.
fn open_special(s: &dyn Sys, mode: u32, dev: u64, flags: OpenFlags) -> O {
    s.mknodat(CWD, b"/n", mode, dev).unwrap();
    let fd = s.open(b"/n", flags, 0)?;
    Ok(s.fstat(fd).unwrap().st_mode & S_IFMT)
}

const NONBLOCK: OpenFlags = OpenFlags::NONBLOCK;

#[test]
fn mknod_open() {
    table::<O>(&[
        ("socket", Err(Errno::ENXIO), |s| {
            open_special(s, S_IFSOCK | 0o666, 0, RW)
        }),
        ("socket, O_PATH", Ok(S_IFSOCK), |s| {
            open_special(s, S_IFSOCK | 0o666, 0, OpenFlags::PATH)
        }),
        ("FIFO, writer without readers", Err(Errno::ENXIO), |s| {
            open_special(s, S_IFIFO | 0o666, 0, WO | NONBLOCK)
        }),
        ("FIFO, O_PATH", Ok(S_IFIFO), |s| {
            open_special(s, S_IFIFO | 0o666, 0, OpenFlags::PATH)
        }),
        ("char device without a driver", Err(Errno::ENXIO), |s| {
            open_special(s, S_IFCHR | 0o666, makedev(240, 77), RO)
        }),
        ("char device, O_PATH", Ok(S_IFCHR), |s| {
            open_special(s, S_IFCHR | 0o666, makedev(1, 3), OpenFlags::PATH)
        }),
        ("permission checked first", Err(Errno::EACCES), |s| {
            s.mknodat(CWD, b"/n", S_IFSOCK, 0).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.open(b"/n", RO, 0).map(|_| 0)
        }),
        ("O_DIRECTORY on a FIFO", Err(Errno::ENOTDIR), |s| {
            open_special(s, S_IFIFO | 0o666, 0, RO | OpenFlags::DIRECTORY)
        }),
        ("O_CREAT on an existing socket", Err(Errno::ENXIO), |s| {
            open_special(s, S_IFSOCK | 0o666, 0, CREAT | RW)
        }),
    ]);
    // Divergence (uvfs has no pipes): a FIFO open that Linux would complete (or block on)
    // is EOPNOTSUPP.
    on_uvfs(&|s| {
        for f in [RO | NONBLOCK, RW, RO, WO] {
            assert_eq!(
                open_special(s, S_IFIFO | 0o666, 0, f),
                Err(Errno::EOPNOTSUPP)
            );
            s.unlinkat(CWD, b"/n", NOAT).unwrap();
        }
    });
    // Special files rename and unlink as any other.
    expect((Ok(special(S_IFIFO, 0o644, 0)), false), |s| {
        s.mknodat(CWD, b"/p", S_IFIFO | 0o644, 0).unwrap();
        s.renameat(CWD, b"/p", CWD, b"/q").unwrap();
        let r = s.shape_of(b"/q");
        s.unlinkat(CWD, b"/q", NOAT).unwrap();
        (r, s.exists(b"/q"))
    });
}

#[test]
fn statfs_with_limits() {
    // size=64 KiB (16 pages), nr_inodes=10: counts as shmem_statfs reports them.
    expect_limits(
        65536,
        10,
        ok((16u64, 16u64, 16u64, 10u64, 9u64, 14u64, 6u64)),
        |s| {
            let a = s.statfs(b"/")?;
            s.mkfile(b"/f", &[7u8; 5000]);
            s.mkdir(b"/d");
            s.linkat(CWD, b"/f", CWD, b"/d/g", NOAT)?;
            let fd = s.open(b"/d", RO, 0)?;
            let b = s.fstatfs(fd)?;
            Ok((
                a.f_blocks, a.f_bfree, a.f_bavail, a.f_files, a.f_ffree, b.f_bfree, b.f_ffree,
            ))
        },
    );
    // Only one limit: the other's counts stay 0.
    expect_limits(65536, 0, ok((16u64, 0u64, 0u64)), |s| {
        let a = s.statfs(b"/")?;
        Ok((a.f_blocks, a.f_files, a.f_ffree))
    });
}

/// `Task::fd_path` and `Task::cwd_path`, what the links /proc/PID/fd/N and /proc/PID/cwd
/// show under `uvfs run`: the path from the task's root, following renames, with
/// " (deleted)" once the name is gone, as Linux's `d_path` (on a host directory D: an open
/// file `D/f` reads `D/f`, after its unlink `D/f (deleted)`, a removed working directory
/// `D/d (deleted)`), where `getcwd` fails with ENOENT. On every file system.
#[test]
fn proc_link_paths_follow_renames_and_say_deleted() {
    for u in each_fs() {
        let (t, s): (&uvfs::Task, &dyn Sys) = (&u.task, &u);
        let kind = s.kind();
        s.mkdirat(Fd::AT_FDCWD, b"/d", 0o755).unwrap();
        s.mkfile(b"/d/f", b"x");
        let fd = s.open(b"/d/f", RO, 0).unwrap();
        let root = s.open(b"/", RO | OpenFlags::DIRECTORY, 0).unwrap();
        assert_eq!(t.fd_path(fd), Ok(b"/d/f".to_vec()), "{kind}");
        assert_eq!(t.fd_path(root), Ok(b"/".to_vec()), "{kind}");
        s.renameat(Fd::AT_FDCWD, b"/d/f", Fd::AT_FDCWD, b"/d/g")
            .unwrap();
        assert_eq!(t.fd_path(fd), Ok(b"/d/g".to_vec()), "{kind}");
        s.unlinkat(Fd::AT_FDCWD, b"/d/g", AtFlags::empty()).unwrap();
        assert_eq!(t.fd_path(fd), Ok(b"/d/g (deleted)".to_vec()), "{kind}");
        s.chdir(b"/d").unwrap();
        assert_eq!(t.cwd_path(), Ok(b"/d".to_vec()), "{kind}");
        s.unlinkat(Fd::AT_FDCWD, b"/d", AtFlags::REMOVEDIR).unwrap();
        assert_eq!(t.cwd_path(), Ok(b"/d (deleted)".to_vec()), "{kind}");
        assert_eq!(s.getcwd(), Err(Errno::ENOENT), "{kind}");
        assert_eq!(t.fd_path(Fd(999)), Err(Errno::EBADF), "{kind}");
        // An O_TMPFILE file: `d_tmpfile`'s name, `#` and its inode number.
        let tf = s.open(b"/", OpenFlags::TMPFILE | RW, 0o600).unwrap();
        let ino = s.fstat(tf).unwrap().st_ino;
        assert_eq!(
            t.fd_path(tf),
            Ok(format!("/#{ino} (deleted)").into_bytes()),
            "{kind}"
        );
    }
}
