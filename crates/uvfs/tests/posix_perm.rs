//! Credentials and permissions: mode bits for owner, group (primary and supplementary) and
//! others; search permission on every path component; write and search permission on the
//! parent for namespace changes; sticky and set-group-ID directories; chmod, chown,
//! truncate and access by non-root callers; set-ID bits cleared on write and chown; root
//! as `CAP_DAC_OVERRIDE`/`CAP_FOWNER`. Every case runs on uvfs and on Linux (see
//! `common`), with non-root credentials set per thread.

mod common;
use common::*;
use uvfs::attr::{F_OK, R_OK, W_OK, X_OK};
use uvfs::types::*;
use uvfs::{AtFlags, Errno, OpenFlags};

type R = Result<(), Errno>;
/// `(mode, uid, gid)` of a file after an operation.
type RM = Result<(u32, u32, u32), Errno>;

const M: u32 = u32::MAX;
const RMDIR: AtFlags = AtFlags::REMOVEDIR;

fn owner(s: &dyn Sys, p: &[u8]) -> RM {
    s.lstat(p).map(|st| (st.st_mode, st.st_uid, st.st_gid))
}

/// As root, umask 0: `/pub` 0777, `/priv` 0700 holding `f`, `/xonly` 0711 holding `f`
/// 0644, `/f` root's 0644, `/u` user 1000's 0644 (group 1000), `/g` root's 0640 in group
/// 2000; then becomes user 1000 in group 1000 with supplementary `groups`.
fn setup(s: &mut dyn Sys, groups: &[u32]) {
    s.umask(0);
    s.mkdirat(CWD, b"/pub", 0o777).unwrap();
    s.mkdirat(CWD, b"/priv", 0o700).unwrap();
    s.mkfile(b"/priv/f", b"x");
    s.mkdirat(CWD, b"/xonly", 0o711).unwrap();
    s.mkfile(b"/xonly/f", b"x");
    s.mkfile(b"/f", b"x");
    s.fchmodat(CWD, b"/f", 0o644, NOAT).unwrap();
    s.mkfile(b"/u", b"x");
    s.fchownat(CWD, b"/u", 1000, 1000, NOAT).unwrap();
    s.mkfile(b"/g", b"x");
    s.fchownat(CWD, b"/g", 0, 2000, NOAT).unwrap();
    s.fchmodat(CWD, b"/g", 0o640, NOAT).unwrap();
    s.set_cred(1000, 1000, groups);
}

fn open_close(s: &dyn Sys, p: &[u8], flags: OpenFlags) -> R {
    let fd = s.open(p, flags, 0o644)?;
    s.close(fd)
}

#[test]
fn mode_bits_and_classes() {
    table::<R>(&[
        ("other may read 0644", Ok(()), |s| {
            setup(s, &[]);
            open_close(s, b"/f", RO)
        }),
        ("other may not write 0644", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            open_close(s, b"/f", WO)
        }),
        ("O_RDWR needs both", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            open_close(s, b"/f", RW)
        }),
        ("O_RDONLY|O_TRUNC needs write", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            open_close(s, b"/f", RO | OpenFlags::TRUNC)
        }),
        (
            "O_CREAT of an existing file checks it",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                open_close(s, b"/f", WO | CREAT)
            },
        ),
        ("not in the group: other bits", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            open_close(s, b"/g", RO)
        }),
        ("supplementary group: group bits", Ok(()), |s| {
            setup(s, &[5, 2000]);
            open_close(s, b"/g", RO)
        }),
        ("primary group: group bits", Ok(()), |s| {
            setup(s, &[]);
            s.set_cred(1000, 2000, &[]);
            open_close(s, b"/g", RO)
        }),
        ("group bits do not grant write", Err(Errno::EACCES), |s| {
            setup(s, &[2000]);
            open_close(s, b"/g", WO)
        }),
        ("the owner gets owner bits only", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.fchmodat(CWD, b"/u", 0o077, NOAT).unwrap();
            open_close(s, b"/u", RO)
        }),
        (
            "a group member gets group bits only",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[2000]);
                s.set_cred(0, 0, &[]);
                s.fchmodat(CWD, b"/g", 0o604, NOAT).unwrap();
                s.set_cred(1000, 1000, &[2000]);
                open_close(s, b"/g", RO)
            },
        ),
        ("owner write-only file", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.fchmodat(CWD, b"/u", 0o200, NOAT).unwrap();
            open_close(s, b"/u", RO)
        }),
        ("root reads and writes a 000 file", Ok(()), |s| {
            setup(s, &[]);
            s.set_cred(0, 0, &[]);
            s.fchmodat(CWD, b"/f", 0, NOAT).unwrap();
            open_close(s, b"/f", RW | OpenFlags::TRUNC)
        }),
    ]);
}

#[test]
fn search_permission() {
    table::<R>(&[
        ("stat under a 0700 dir", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.stat(b"/priv/f").map(drop)
        }),
        (
            "missing under a 0700 dir: EACCES first",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                s.stat(b"/priv/nope").map(drop)
            },
        ),
        ("stat under a 0711 dir", Ok(()), |s| {
            setup(s, &[]);
            s.stat(b"/xonly/f").map(drop)
        }),
        ("list a 0711 dir", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.ls(b"/xonly").map(drop)
        }),
        ("chdir into a 0700 dir", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.chdir(b"/priv")
        }),
        ("every component: the first", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.set_cred(0, 0, &[]);
            s.mkdirat(CWD, b"/priv/sub", 0o777).unwrap();
            s.mkfile(b"/priv/sub/f", b"");
            s.set_cred(1000, 1000, &[]);
            s.stat(b"/priv/sub/f").map(drop)
        }),
        ("every component: a later one", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.mkdirat(CWD, b"/pub/a", 0o777).unwrap();
            s.mkdirat(CWD, b"/pub/a/b", 0o777).unwrap();
            s.mkfile(b"/pub/a/b/c", b"");
            s.fchmodat(CWD, b"/pub/a/b", 0o666, NOAT).unwrap();
            s.stat(b"/pub/a/b/c").map(drop)
        }),
        (
            "through a relative dirfd opened before",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                s.set_cred(0, 0, &[]);
                let fd = s.open(b"/priv", RO, 0).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.fstatat(fd, b"f", NOAT).map(drop)
            },
        ),
        ("group search bit via a supplementary group", Ok(()), |s| {
            setup(s, &[2000]);
            s.set_cred(0, 0, &[]);
            s.fchownat(CWD, b"/priv", 0, 2000, NOAT).unwrap();
            s.fchmodat(CWD, b"/priv", 0o710, NOAT).unwrap();
            s.set_cred(1000, 1000, &[2000]);
            s.stat(b"/priv/f").map(drop)
        }),
        ("chmod under a 0700 dir", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.fchmodat(CWD, b"/priv/f", 0o777, NOAT)
        }),
        ("truncate under a 0700 dir", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.truncate(b"/priv/f", 0)
        }),
        ("root searches a 000 dir", Ok(()), |s| {
            setup(s, &[]);
            s.set_cred(0, 0, &[]);
            s.fchmodat(CWD, b"/priv", 0, NOAT).unwrap();
            s.stat(b"/priv/f").map(drop)
        }),
    ]);
}

#[test]
fn parent_write_and_search() {
    table::<R>(&[
        ("create in a dir without write", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            open_close(s, b"/xonly/new", WO | CREAT)
        }),
        (
            "create in a dir with write but no search",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                s.mkdirat(CWD, b"/pub/w", 0o666).unwrap();
                open_close(s, b"/pub/w/new", WO | CREAT)
            },
        ),
        ("mkdir in a dir without write", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.mkdirat(CWD, b"/xonly/new", 0o777)
        }),
        (
            "mkdir of an existing name without write",
            Err(Errno::EEXIST),
            |s| {
                setup(s, &[]);
                s.mkdirat(CWD, b"/xonly/f", 0o777)
            },
        ),
        ("symlink in a dir without write", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.symlinkat(b"x", CWD, b"/xonly/new")
        }),
        ("unlink in a dir without write", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.unlinkat(CWD, b"/xonly/f", NOAT)
        }),
        ("rmdir in a dir without write", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.set_cred(0, 0, &[]);
            s.mkdirat(CWD, b"/xonly/d", 0o777).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.unlinkat(CWD, b"/xonly/d", RMDIR)
        }),
        (
            "rename out of a dir without write",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                s.renameat(CWD, b"/xonly/f", CWD, b"/pub/f")
            },
        ),
        ("rename into a dir without write", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.mkfile(b"/pub/f", b"");
            s.renameat(CWD, b"/pub/f", CWD, b"/xonly/g")
        }),
        (
            "rename over a file in a dir without write",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                s.mkfile(b"/pub/f", b"");
                s.renameat(CWD, b"/pub/f", CWD, b"/xonly/f")
            },
        ),
        (
            "moving a dir to another parent needs write on it",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                s.mkdirat(CWD, b"/pub/a", 0o777).unwrap();
                s.mkdirat(CWD, b"/pub/b", 0o777).unwrap();
                s.mkdirat(CWD, b"/pub/a/d", 0o555).unwrap();
                s.renameat(CWD, b"/pub/a/d", CWD, b"/pub/b/d")
            },
        ),
        ("renaming it in place does not", Ok(()), |s| {
            setup(s, &[]);
            s.mkdirat(CWD, b"/pub/a", 0o777).unwrap();
            s.mkdirat(CWD, b"/pub/a/d", 0o555).unwrap();
            s.renameat(CWD, b"/pub/a/d", CWD, b"/pub/a/e")
        }),
        (
            "unlink another user's file in a writable dir",
            Ok(()),
            |s| {
                setup(s, &[]);
                s.set_cred(0, 0, &[]);
                s.mkfile(b"/pub/root", b"");
                s.fchmodat(CWD, b"/pub/root", 0, NOAT).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.unlinkat(CWD, b"/pub/root", NOAT)
            },
        ),
        ("write permission via the group", Ok(()), |s| {
            setup(s, &[2000]);
            s.set_cred(0, 0, &[]);
            s.mkdirat(CWD, b"/gw", 0o770).unwrap();
            s.fchownat(CWD, b"/gw", 0, 2000, NOAT).unwrap();
            s.set_cred(1000, 1000, &[2000]);
            open_close(s, b"/gw/new", WO | CREAT)
        }),
    ]);
}

#[test]
fn sticky_directories() {
    fn st(s: &mut dyn Sys) {
        setup(s, &[]);
        s.set_cred(0, 0, &[]);
        s.mkdirat(CWD, b"/t", 0o1777).unwrap();
        s.set_cred(2000, 2000, &[]);
        s.mkfile(b"/t/other", b"");
        s.set_cred(1000, 1000, &[]);
        s.mkfile(b"/t/mine", b"");
    }
    table::<R>(&[
        ("rename another user's file", Err(Errno::EPERM), |s| {
            st(s);
            s.renameat(CWD, b"/t/other", CWD, b"/t/x")
        }),
        ("rename one's own file", Ok(()), |s| {
            st(s);
            s.renameat(CWD, b"/t/mine", CWD, b"/t/x")
        }),
        ("rename over another user's file", Err(Errno::EPERM), |s| {
            st(s);
            s.renameat(CWD, b"/t/mine", CWD, b"/t/other")
        }),
        (
            "rename another user's file out of it",
            Err(Errno::EPERM),
            |s| {
                st(s);
                s.renameat(CWD, b"/t/other", CWD, b"/pub/x")
            },
        ),
        ("the directory's owner may", Ok(()), |s| {
            st(s);
            s.set_cred(0, 0, &[]);
            s.fchownat(CWD, b"/t", 1000, M, NOAT).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.unlinkat(CWD, b"/t/other", NOAT)
        }),
        ("group membership does not help", Err(Errno::EPERM), |s| {
            st(s);
            s.set_cred(1000, 2000, &[2000]);
            s.unlinkat(CWD, b"/t/other", NOAT)
        }),
        ("root may (CAP_FOWNER)", Ok(()), |s| {
            st(s);
            s.set_cred(0, 0, &[]);
            s.unlinkat(CWD, b"/t/other", NOAT)
        }),
        ("EACCES before EPERM", Err(Errno::EACCES), |s| {
            st(s);
            s.set_cred(0, 0, &[]);
            s.fchmodat(CWD, b"/t", 0o1755, NOAT).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.unlinkat(CWD, b"/t/other", NOAT)
        }),
        (
            "rmdir of another user's directory",
            Err(Errno::EPERM),
            |s| {
                st(s);
                s.set_cred(2000, 2000, &[]);
                s.mkdirat(CWD, b"/t/od", 0o777).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.unlinkat(CWD, b"/t/od", RMDIR)
            },
        ),
        (
            "rename of another user's directory",
            Err(Errno::EPERM),
            |s| {
                st(s);
                s.set_cred(2000, 2000, &[]);
                s.mkdirat(CWD, b"/t/od", 0o777).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.renameat(CWD, b"/t/od", CWD, b"/t/x")
            },
        ),
        ("creating in it is unrestricted", Ok(()), |s| {
            st(s);
            open_close(s, b"/t/new", WO | CREAT)
        }),
    ]);
}

#[test]
fn setgid_directories() {
    fn sg(s: &mut dyn Sys) {
        setup(s, &[]);
        s.set_cred(0, 0, &[]);
        s.mkdirat(CWD, b"/s", 0o777).unwrap();
        s.fchownat(CWD, b"/s", 0, 3000, NOAT).unwrap();
        s.fchmodat(CWD, b"/s", 0o2777, NOAT).unwrap();
        s.set_cred(1000, 1000, &[]);
    }
    table::<RM>(&[
        (
            "a new file gets the directory's group",
            Ok((S_IFREG | 0o644, 1000, 3000)),
            |s| {
                sg(s);
                open_close(s, b"/s/f", WO | CREAT)?;
                owner(s, b"/s/f")
            },
        ),
        (
            "a new subdirectory inherits S_ISGID",
            Ok((S_IFDIR | 0o2755, 1000, 3000)),
            |s| {
                sg(s);
                s.mkdirat(CWD, b"/s/d", 0o755)?;
                owner(s, b"/s/d")
            },
        ),
        (
            "and passes it on",
            Ok((S_IFDIR | 0o2700, 1000, 3000)),
            |s| {
                sg(s);
                s.mkdirat(CWD, b"/s/d", 0o755)?;
                s.mkdirat(CWD, b"/s/d/e", 0o700)?;
                owner(s, b"/s/d/e")
            },
        ),
        (
            "a symlink gets the group",
            Ok((S_IFLNK | 0o777, 1000, 3000)),
            |s| {
                sg(s);
                s.symlinkat(b"x", CWD, b"/s/l")?;
                owner(s, b"/s/l")
            },
        ),
        (
            "a non-member's group-executable setgid file loses S_ISGID",
            Ok((S_IFREG | 0o755, 1000, 3000)),
            |s| {
                sg(s);
                open_close(s, b"/s/f", WO | CREAT | OpenFlags::EXCL)
                    .and_then(|_| s.fchmodat(CWD, b"/s/f", 0o644, NOAT))?;
                s.unlinkat(CWD, b"/s/f", NOAT)?;
                let fd = s.open(b"/s/f", WO | CREAT, 0o2755)?;
                s.close(fd)?;
                owner(s, b"/s/f")
            },
        ),
        (
            "a non-member keeps S_ISGID without group execute",
            Ok((S_IFREG | 0o2644, 1000, 3000)),
            |s| {
                sg(s);
                let fd = s.open(b"/s/f", WO | CREAT, 0o2644)?;
                s.close(fd)?;
                owner(s, b"/s/f")
            },
        ),
        (
            "a member keeps it",
            Ok((S_IFREG | 0o2750, 1000, 3000)),
            |s| {
                sg(s);
                s.set_cred(1000, 1000, &[3000]);
                s.umask(0o027);
                let fd = s.open(b"/s/f", WO | CREAT, 0o2770)?;
                s.close(fd)?;
                owner(s, b"/s/f")
            },
        ),
        (
            "outside a setgid dir the creator's group",
            Ok((S_IFREG | 0o2755, 1000, 1000)),
            |s| {
                sg(s);
                let fd = s.open(b"/pub/f", WO | CREAT, 0o2755)?;
                s.close(fd)?;
                owner(s, b"/pub/f")
            },
        ),
    ]);
}

/// Bug: a non-member creating `O_CREAT` with mode 02770 under umask 077 in a setgid
/// directory got 02700; Linux gives 0700. Cause: uvfs applied the umask first and then
/// asked whether the file was group-executable; Linux's `vfs_prepare_mode` runs
/// `mode_strip_sgid` on the mode as given, before `mode_strip_umask`. Fix: open.rs strips
/// with `namei::mode_strip_sgid` on the unmasked mode.
#[test]
fn regression_create_strips_setgid_before_umask() {
    expect(Ok((S_IFREG | 0o700, 1000, 3000)), |s| {
        setup(s, &[]);
        s.set_cred(0, 0, &[]);
        s.mkdirat(CWD, b"/s", 0o777).unwrap();
        s.fchownat(CWD, b"/s", 0, 3000, NOAT).unwrap();
        s.fchmodat(CWD, b"/s", 0o2777, NOAT).unwrap();
        s.set_cred(1000, 1000, &[]);
        s.umask(0o077);
        let fd = s.open(b"/s/f", WO | CREAT, 0o2770)?;
        s.close(fd)?;
        owner(s, b"/s/f")
    });
}

/// Bug (review): `mknodat` of a regular file by a non-member in a setgid directory with
/// mode 02070 under umask 010 kept set-group-ID (02060); Linux gives 0060. Cause: mknodat
/// stripped on the masked mode (no longer group-executable). Fix: it strips on the mode as
/// given, like `openat`.
#[test]
fn regression_mknod_strips_setgid_before_umask() {
    expect(Ok((S_IFREG | 0o060, 1000, 3000)), |s| {
        setup(s, &[]);
        s.set_cred(0, 0, &[]);
        s.mkdirat(CWD, b"/s", 0o777).unwrap();
        s.fchownat(CWD, b"/s", 0, 3000, NOAT).unwrap();
        s.fchmodat(CWD, b"/s", 0o2777, NOAT).unwrap();
        s.set_cred(1000, 1000, &[]);
        s.umask(0o010);
        s.mknodat(CWD, b"/s/f", S_IFREG | 0o2070, 0)?;
        owner(s, b"/s/f")
    });
}

#[test]
fn chmod_rules() {
    table::<RM>(&[
        ("the owner may", Ok((S_IFREG | 0o4700, 1000, 1000)), |s| {
            setup(s, &[]);
            s.fchmodat(CWD, b"/u", 0o4700, NOAT)?;
            owner(s, b"/u")
        }),
        (
            "the owner may set the sticky bit on a file",
            Ok((S_IFREG | 0o1644, 1000, 1000)),
            |s| {
                setup(s, &[]);
                s.fchmodat(CWD, b"/u", 0o1644, NOAT)?;
                owner(s, b"/u")
            },
        ),
        (
            "and on a directory",
            Ok((S_IFDIR | 0o1777, 1000, 1000)),
            |s| {
                setup(s, &[]);
                s.mkdirat(CWD, b"/pub/d", 0o755)?;
                s.fchmodat(CWD, b"/pub/d", 0o1777, NOAT)?;
                owner(s, b"/pub/d")
            },
        ),
        ("others may not", Err(Errno::EPERM), |s| {
            setup(s, &[]);
            s.fchmodat(CWD, b"/f", 0o666, NOAT)?;
            owner(s, b"/f")
        }),
        ("not even a group member", Err(Errno::EPERM), |s| {
            setup(s, &[2000]);
            s.fchmodat(CWD, b"/g", 0o660, NOAT)?;
            owner(s, b"/g")
        }),
        (
            "nor through a descriptor with write access",
            Err(Errno::EPERM),
            |s| {
                setup(s, &[]);
                s.set_cred(0, 0, &[]);
                s.fchmodat(CWD, b"/f", 0o666, NOAT).unwrap();
                s.set_cred(1000, 1000, &[]);
                let fd = s.open(b"/f", RW, 0)?;
                s.fchmod(fd, 0o600)?;
                owner(s, b"/f")
            },
        ),
        (
            "the owner in the group keeps S_ISGID",
            Ok((S_IFREG | 0o2755, 1000, 1000)),
            |s| {
                setup(s, &[]);
                s.fchmodat(CWD, b"/u", 0o2755, NOAT)?;
                owner(s, b"/u")
            },
        ),
        (
            "the owner outside the group loses it",
            Ok((S_IFREG | 0o755, 1000, 2000)),
            |s| {
                setup(s, &[]);
                s.set_cred(0, 0, &[]);
                s.fchownat(CWD, b"/u", M, 2000, NOAT).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.fchmodat(CWD, b"/u", 0o2755, NOAT)?;
                owner(s, b"/u")
            },
        ),
        (
            "a supplementary group counts",
            Ok((S_IFREG | 0o2755, 1000, 2000)),
            |s| {
                setup(s, &[2000]);
                s.set_cred(0, 0, &[]);
                s.fchownat(CWD, b"/u", M, 2000, NOAT).unwrap();
                s.set_cred(1000, 1000, &[2000]);
                s.fchmodat(CWD, b"/u", 0o2755, NOAT)?;
                owner(s, b"/u")
            },
        ),
        (
            "root keeps it anywhere",
            Ok((S_IFREG | 0o2755, 1000, 2000)),
            |s| {
                setup(s, &[]);
                s.set_cred(0, 0, &[]);
                s.fchownat(CWD, b"/u", M, 2000, NOAT).unwrap();
                s.fchmodat(CWD, b"/u", 0o2755, NOAT)?;
                owner(s, b"/u")
            },
        ),
        (
            "a symlink: EOPNOTSUPP before EPERM",
            Err(Errno::EOPNOTSUPP),
            |s| {
                setup(s, &[]);
                s.set_cred(0, 0, &[]);
                s.symlink(b"f", b"/l");
                s.set_cred(1000, 1000, &[]);
                s.fchmodat(CWD, b"/l", 0o600, AtFlags::SYMLINK_NOFOLLOW)?;
                owner(s, b"/f")
            },
        ),
    ]);
}

#[test]
fn chown_rules() {
    table::<RM>(&[
        ("a user may not give a file away", Err(Errno::EPERM), |s| {
            setup(s, &[]);
            s.fchownat(CWD, b"/u", 2000, M, NOAT)?;
            owner(s, b"/u")
        }),
        ("nor take one", Err(Errno::EPERM), |s| {
            setup(s, &[]);
            s.fchownat(CWD, b"/f", 1000, M, NOAT)?;
            owner(s, b"/f")
        }),
        (
            "the owner may name itself",
            Ok((S_IFREG | 0o644, 1000, 1000)),
            |s| {
                setup(s, &[]);
                s.fchownat(CWD, b"/u", 1000, 1000, NOAT)?;
                owner(s, b"/u")
            },
        ),
        (
            "the owner may pick a supplementary group",
            Ok((S_IFREG | 0o644, 1000, 2000)),
            |s| {
                setup(s, &[2000]);
                s.fchownat(CWD, b"/u", M, 2000, NOAT)?;
                owner(s, b"/u")
            },
        ),
        ("but not a group it is not in", Err(Errno::EPERM), |s| {
            setup(s, &[2000]);
            s.fchownat(CWD, b"/u", M, 3000, NOAT)?;
            owner(s, b"/u")
        }),
        (
            "a member who is not the owner may not chgrp",
            Err(Errno::EPERM),
            |s| {
                setup(s, &[2000, 3000]);
                s.fchownat(CWD, b"/g", M, 3000, NOAT)?;
                owner(s, b"/g")
            },
        ),
        (
            "-1, -1 by a non-owner succeeds",
            Ok((S_IFREG | 0o644, 0, 0)),
            |s| {
                setup(s, &[]);
                s.fchownat(CWD, b"/f", M, M, NOAT)?;
                owner(s, b"/f")
            },
        ),
        (
            "unless set-ID bits would be cleared",
            Err(Errno::EPERM),
            |s| {
                setup(s, &[]);
                s.set_cred(0, 0, &[]);
                s.fchmodat(CWD, b"/f", 0o4755, NOAT).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.fchownat(CWD, b"/f", M, M, NOAT)?;
                owner(s, b"/f")
            },
        ),
        (
            "the owner's chgrp clears S_ISUID",
            Ok((S_IFREG | 0o755, 1000, 2000)),
            |s| {
                setup(s, &[2000]);
                s.fchmodat(CWD, b"/u", 0o4755, NOAT)?;
                s.fchownat(CWD, b"/u", M, 2000, NOAT)?;
                owner(s, b"/u")
            },
        ),
        (
            "and group-executable S_ISGID",
            Ok((S_IFREG | 0o750, 1000, 2000)),
            |s| {
                setup(s, &[2000]);
                s.fchmodat(CWD, b"/u", 0o2750, NOAT)?;
                s.fchownat(CWD, b"/u", M, 2000, NOAT)?;
                owner(s, b"/u")
            },
        ),
        (
            "a member keeps S_ISGID without group execute",
            Ok((S_IFREG | 0o2640, 1000, 2000)),
            |s| {
                setup(s, &[2000]);
                s.fchmodat(CWD, b"/u", 0o2640, NOAT)?;
                s.fchownat(CWD, b"/u", M, 2000, NOAT)?;
                owner(s, b"/u")
            },
        ),
        (
            "the owner outside the file's group loses it",
            Ok((S_IFREG | 0o640, 1000, 3000)),
            |s| {
                setup(s, &[]);
                s.set_cred(0, 0, &[]);
                s.fchownat(CWD, b"/u", M, 3000, NOAT).unwrap();
                s.fchmodat(CWD, b"/u", 0o2640, NOAT).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.fchownat(CWD, b"/u", M, M, NOAT)?;
                owner(s, b"/u")
            },
        ),
        (
            "a directory's chgrp keeps S_ISGID",
            Ok((S_IFDIR | 0o2775, 1000, 2000)),
            |s| {
                setup(s, &[2000]);
                s.mkdirat(CWD, b"/pub/d", 0o775)?;
                s.fchmodat(CWD, b"/pub/d", 0o2775, NOAT)?;
                s.fchownat(CWD, b"/pub/d", M, 2000, NOAT)?;
                owner(s, b"/pub/d")
            },
        ),
        (
            "root chowns anything",
            Ok((S_IFREG | 0o640, 1000, 5)),
            |s| {
                setup(s, &[]);
                s.set_cred(0, 0, &[]);
                s.fchownat(CWD, b"/g", 1000, 5, NOAT)?;
                owner(s, b"/g")
            },
        ),
        ("fchown follows the same rules", Err(Errno::EPERM), |s| {
            setup(s, &[]);
            let fd = s.open(b"/u", RO, 0)?;
            s.fchown(fd, 0, M)?;
            owner(s, b"/u")
        }),
    ]);
}

/// A write by a non-root caller clears S_ISUID, and S_ISGID when group-executable or when
/// the writer is outside the file's group (`file_remove_privs`); root's writes keep both.
#[test]
fn write_clears_set_id_bits() {
    fn wr(s: &mut dyn Sys, mode: u32, groups: &[u32], uid: u32) -> RM {
        setup(s, &[]);
        s.set_cred(0, 0, &[]);
        s.fchownat(CWD, b"/f", M, 2000, NOAT).unwrap();
        s.fchmodat(CWD, b"/f", mode, NOAT).unwrap();
        s.set_cred(uid, uid, groups);
        let fd = s.open(b"/f", WO, 0)?;
        s.write(fd, b"y")?;
        s.close(fd)?;
        s.set_cred(0, 0, &[]);
        owner(s, b"/f")
    }
    table::<RM>(&[
        (
            "both, group-executable",
            Ok((S_IFREG | 0o777, 0, 2000)),
            |s| wr(s, 0o6777, &[2000], 1000),
        ),
        (
            "S_ISGID kept for a member without group execute",
            Ok((S_IFREG | 0o2766, 0, 2000)),
            |s| wr(s, 0o6766, &[2000], 1000),
        ),
        (
            "S_ISGID cleared for a non-member",
            Ok((S_IFREG | 0o766, 0, 2000)),
            |s| wr(s, 0o2766, &[], 1000),
        ),
        ("root keeps both", Ok((S_IFREG | 0o6777, 0, 2000)), |s| {
            wr(s, 0o6777, &[], 0)
        }),
    ]);
}

/// Two rows of the tables above through the FUSE client, where Linux's FUSE client
/// differs from a local file system: set-group-ID without group execute stays for a caller
/// outside the file's group, at chown and at write (`fuse_setattr` recomputes the kill as
/// `S_ISGID | S_IXGRP` from refreshed attributes; measured on a kernel FUSE mount of
/// libfuse 3.14's passthrough_ll: a 06767 file of group 0 written by uid 1000 became
/// 02767). Set-user-ID goes either way.
#[test]
fn fuse_keeps_set_group_id_without_group_execute() {
    let fuse = [
        ("chown by the owner outside the group", S_IFREG | 0o2640),
        ("write by a non-member", S_IFREG | 0o2766),
        ("write of 06766 by a non-member", S_IFREG | 0o2766),
    ];
    let mut local = fuse;
    for (i, m) in [0o640, 0o766, 0o766].into_iter().enumerate() {
        local[i].1 = S_IFREG | m;
    }
    expect_fuse(local, fuse, |s| {
        setup(s, &[]);
        s.set_cred(0, 0, &[]);
        s.fchownat(CWD, b"/u", M, 3000, NOAT).unwrap();
        s.fchmodat(CWD, b"/u", 0o2640, NOAT).unwrap();
        s.set_cred(1000, 1000, &[]);
        s.fchownat(CWD, b"/u", M, M, NOAT).unwrap();
        let chown = s.stat(b"/u").unwrap().st_mode;
        let mut w = [0; 2];
        for (i, m) in [0o2766, 0o6766].into_iter().enumerate() {
            let p: &[u8] = [b"/w1".as_slice(), b"/w2"][i];
            s.set_cred(0, 0, &[]);
            let fd = s.open(p, CREAT | WO, 0).unwrap();
            s.close(fd).unwrap();
            s.fchownat(CWD, p, 0, 2000, NOAT).unwrap();
            s.fchmodat(CWD, p, m, NOAT).unwrap();
            s.set_cred(1000, 1000, &[]);
            let fd = s.open(p, WO, 0).unwrap();
            s.write(fd, b"x").unwrap();
            s.close(fd).unwrap();
            w[i] = s.stat(p).unwrap().st_mode;
        }
        [
            ("chown by the owner outside the group", chown),
            ("write by a non-member", w[0]),
            ("write of 06766 by a non-member", w[1]),
        ]
    });
}

#[test]
fn access_real_and_effective_ids() {
    const EACCESS: AtFlags = AtFlags::EACCESS;
    table::<R>(&[
        ("other: F_OK on a 0600 file", Ok(()), |s| {
            setup(s, &[]);
            s.fchmodat(CWD, b"/u", 0o600, NOAT).unwrap();
            s.set_cred(2000, 2000, &[]);
            s.faccessat2(CWD, b"/u", F_OK, NOAT)
        }),
        ("other: R_OK on a 0600 file", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.fchmodat(CWD, b"/u", 0o600, NOAT).unwrap();
            s.set_cred(2000, 2000, &[]);
            s.faccessat2(CWD, b"/u", R_OK, NOAT)
        }),
        ("group via a supplementary group", Ok(()), |s| {
            setup(s, &[2000]);
            s.faccessat2(CWD, b"/g", R_OK, NOAT)
        }),
        ("group bits deny write", Err(Errno::EACCES), |s| {
            setup(s, &[2000]);
            s.faccessat2(CWD, b"/g", R_OK | W_OK, NOAT)
        }),
        ("owner X_OK without owner x", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.fchmodat(CWD, b"/u", 0o677, NOAT).unwrap();
            s.faccessat2(CWD, b"/u", X_OK, NOAT)
        }),
        ("no search permission on the way", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.faccessat2(CWD, b"/priv/f", F_OK, NOAT)
        }),
        (
            "real uid 1000, effective root: real ids",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                s.set_cred_real(1000, 0, 1000, 0, &[]);
                s.faccessat2(CWD, b"/g", R_OK, NOAT)
            },
        ),
        ("... and no capabilities", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.set_cred_real(1000, 0, 1000, 0, &[]);
            s.faccessat2(CWD, b"/f", W_OK, NOAT)
        }),
        ("... walking with them too", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.set_cred_real(1000, 0, 1000, 0, &[]);
            s.faccessat2(CWD, b"/priv/f", F_OK, NOAT)
        }),
        ("... AT_EACCESS: effective root", Ok(()), |s| {
            setup(s, &[]);
            s.set_cred_real(1000, 0, 1000, 0, &[]);
            s.faccessat2(CWD, b"/priv/f", R_OK | W_OK, EACCESS)
        }),
        ("real root, effective 1000: root", Ok(()), |s| {
            setup(s, &[]);
            s.set_cred_real(0, 1000, 0, 1000, &[]);
            s.faccessat2(CWD, b"/priv/f", R_OK | W_OK, NOAT)
        }),
        ("... AT_EACCESS: user 1000", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.set_cred_real(0, 1000, 0, 1000, &[]);
            s.faccessat2(CWD, b"/f", W_OK, EACCESS)
        }),
        ("real group used without AT_EACCESS", Ok(()), |s| {
            setup(s, &[]);
            s.set_cred_real(1000, 1000, 2000, 1000, &[]);
            s.faccessat2(CWD, b"/g", R_OK, NOAT)
        }),
        ("effective group with AT_EACCESS", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.set_cred_real(1000, 1000, 2000, 1000, &[]);
            s.faccessat2(CWD, b"/g", R_OK, EACCESS)
        }),
        ("other calls use the effective ids", Ok(()), |s| {
            setup(s, &[]);
            s.set_cred_real(1000, 0, 1000, 0, &[]);
            s.stat(b"/priv/f").map(drop)
        }),
    ]);
}

#[test]
fn getuid_is_the_real_uid() {
    expect((1000, 0o644), |s| {
        setup(s, &[]);
        s.set_cred_real(1000, 0, 1000, 0, &[]);
        let uid = s.getuid();
        // Files are created with the effective ids.
        let fd = s.open(b"/pub/n", WO | CREAT, 0o644).unwrap();
        s.close(fd).unwrap();
        let st = s.stat(b"/pub/n").unwrap();
        assert_eq!((st.st_uid, st.st_gid), (0, 0));
        (uid, st.st_mode & 0o7777)
    });
}

/// Bug: `open(O_TRUNC)` by a non-root caller left S_ISUID/S_ISGID on the file; Linux
/// clears them as a write does, even when the file is already empty (root's open keeps
/// them). Cause: `do_open` truncated without `kill_suid`. Fix: open.rs calls
/// `Inode::kill_suid` before the truncation (Linux `handle_truncate` -> `do_truncate` with
/// `dentry_needs_remove_privs`).
#[test]
fn regression_open_trunc_clears_set_id_bits() {
    fn tr(s: &mut dyn Sys, data: &[u8], uid: u32) -> RM {
        setup(s, &[]);
        s.set_cred(0, 0, &[]);
        s.mkfile(b"/pub/x", data);
        s.fchmodat(CWD, b"/pub/x", 0o6777, NOAT).unwrap();
        s.set_cred(uid, uid, &[]);
        open_close(s, b"/pub/x", WO | OpenFlags::TRUNC)?;
        owner(s, b"/pub/x")
    }
    table::<RM>(&[
        ("non-root, data", Ok((S_IFREG | 0o777, 0, 0)), |s| {
            tr(s, b"abc", 1000)
        }),
        ("non-root, empty", Ok((S_IFREG | 0o777, 0, 0)), |s| {
            tr(s, b"", 1000)
        }),
        ("root", Ok((S_IFREG | 0o6777, 0, 0)), |s| tr(s, b"abc", 0)),
    ]);
}

#[test]
fn more_parent_checks() {
    use uvfs::attr::{R_OK, W_OK};
    table::<R>(&[
        (
            "O_CREAT of an existing file needs no write on the dir",
            Ok(()),
            |s| {
                setup(s, &[]);
                open_close(s, b"/xonly/f", RO | CREAT)
            },
        ),
        (
            "O_CREAT|O_EXCL of an existing name: EEXIST",
            Err(Errno::EEXIST),
            |s| {
                setup(s, &[]);
                open_close(s, b"/xonly/f", RO | CREAT | OpenFlags::EXCL)
            },
        ),
        (
            "a file created with mode 0 opens O_RDWR; reopening it does not",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                let fd = s.open(b"/pub/n", RW | CREAT | OpenFlags::EXCL, 0).unwrap();
                assert_eq!(s.write(fd, b"x"), Ok(1));
                s.close(fd).unwrap();
                open_close(s, b"/pub/n", RO)
            },
        ),
        (
            "rmdir of a non-empty dir without write: EACCES",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                s.set_cred(0, 0, &[]);
                s.mkdirat(CWD, b"/xonly/d", 0o777).unwrap();
                s.mkfile(b"/xonly/d/f", b"");
                s.set_cred(1000, 1000, &[]);
                s.unlinkat(CWD, b"/xonly/d", RMDIR)
            },
        ),
        (
            "unlink of a missing name in a 0700 dir: EACCES",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                s.unlinkat(CWD, b"/priv/nope", NOAT)
            },
        ),
        ("access W_OK on a 0711 dir", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.faccessat2(CWD, b"/xonly", W_OK, NOAT)
        }),
        ("access R_OK on a 0711 dir", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.faccessat2(CWD, b"/xonly", R_OK, NOAT)
        }),
        (
            "getdents needs read permission at open",
            Err(Errno::EACCES),
            |s| {
                setup(s, &[]);
                s.open(b"/xonly", RO | OpenFlags::DIRECTORY, 0).map(drop)
            },
        ),
    ]);
}

/// Search permission is checked on the directory of every component, `.` and `..`
/// included (`link_path_walk` calls `may_lookup` before each); an empty path with
/// `AT_EMPTY_PATH` looks nothing up.
#[test]
fn dot_and_dotdot_need_search() {
    fn cwd_unsearchable(s: &mut dyn Sys) {
        setup(s, &[]);
        s.mkdirat(CWD, b"/pub/a", 0o777).unwrap();
        s.chdir(b"/pub/a").unwrap();
        s.fchmodat(CWD, b"/pub/a", 0o666, NOAT).unwrap();
    }
    table::<R>(&[
        ("stat(\".\")", Err(Errno::EACCES), |s| {
            cwd_unsearchable(s);
            s.stat(b".").map(drop)
        }),
        ("stat(\"..\")", Err(Errno::EACCES), |s| {
            cwd_unsearchable(s);
            s.stat(b"..").map(drop)
        }),
        ("stat(\"/pub/a/..\")", Err(Errno::EACCES), |s| {
            cwd_unsearchable(s);
            s.stat(b"/pub/a/..").map(drop)
        }),
        ("AT_EMPTY_PATH on the cwd", Ok(()), |s| {
            cwd_unsearchable(s);
            s.fstatat(CWD, b"", AtFlags::EMPTY_PATH).map(drop)
        }),
        ("an absolute path avoids the cwd", Ok(()), |s| {
            cwd_unsearchable(s);
            s.stat(b"/pub").map(drop)
        }),
        ("stat(\"/\")", Ok(()), |s| {
            setup(s, &[]);
            s.set_cred(0, 0, &[]);
            s.fchmodat(CWD, b"/", 0o700, NOAT).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.stat(b"/").map(drop)
        }),
        ("below a 0700 root", Err(Errno::EACCES), |s| {
            setup(s, &[]);
            s.set_cred(0, 0, &[]);
            s.fchmodat(CWD, b"/", 0o700, NOAT).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.stat(b"/f").map(drop)
        }),
    ]);
}

/// `utimensat`: setting the times to now needs ownership or write permission (which a
/// supplementary group can give); explicit times need ownership (`CAP_FOWNER` for root).
#[test]
fn utimens_with_groups_and_ownership() {
    use uvfs::Timespec;
    const T: [Timespec; 2] = [T2001, T2002];
    table::<R>(&[
        (
            "now, group-writable via a supplementary group",
            Ok(()),
            |s| {
                setup(s, &[2000]);
                s.set_cred(0, 0, &[]);
                s.fchmodat(CWD, b"/g", 0o664, NOAT).unwrap();
                s.set_cred(1000, 1000, &[2000]);
                s.utimensat(CWD, b"/g", None, NOAT)
            },
        ),
        ("now, group-readable only", Err(Errno::EACCES), |s| {
            setup(s, &[2000]);
            s.utimensat(CWD, b"/g", None, NOAT)
        }),
        ("explicit, group-writable", Err(Errno::EPERM), |s| {
            setup(s, &[2000]);
            s.set_cred(0, 0, &[]);
            s.fchmodat(CWD, b"/g", 0o664, NOAT).unwrap();
            s.set_cred(1000, 1000, &[2000]);
            s.utimensat(CWD, b"/g", Some(&T), NOAT)
        }),
        ("now, the owner of a 0444 file", Ok(()), |s| {
            setup(s, &[]);
            s.fchmodat(CWD, b"/u", 0o444, NOAT).unwrap();
            s.utimensat(CWD, b"/u", None, NOAT)
        }),
        ("explicit, the owner of a 0000 file", Ok(()), |s| {
            setup(s, &[]);
            s.fchmodat(CWD, b"/u", 0, NOAT).unwrap();
            s.utimensat(CWD, b"/u", Some(&T), NOAT)
        }),
    ]);
}

/// Every capability except those in `drop` (bits as in `CapEff:`).
fn all_but(drop: u64) -> u64 {
    0x1ff_ffff_ffff & !drop
}

const CAP_CHOWN: u64 = 1 << 0;
const CAP_DAC_OVERRIDE: u64 = 1 << 1;
const CAP_DAC_READ_SEARCH: u64 = 1 << 2;
const CAP_FOWNER: u64 = 1 << 3;
const CAP_FSETID: u64 = 1 << 4;

/// As root after [`setup`]: `/u` (user 1000's) set to `mode`, then the effective set cut
/// to `caps`.
fn root_with(s: &mut dyn Sys, mode: u32, caps: u64) {
    setup(s, &[]);
    s.set_cred(0, 0, &[]);
    s.fchmodat(CWD, b"/u", mode, NOAT).unwrap();
    s.set_caps(caps);
}

/// Root's capabilities count one by one (capabilities(7); fs/namei.c `generic_permission`,
/// fs/attr.c `chown_ok`, `inode_owner_or_capable`, `check_sticky`,
/// `setattr_should_drop_suidgid`), each compared with Linux on a thread whose effective
/// set was cut by `capset`.
///
/// Regression (issue 12 B1): bug: a uid 0 lacking any one of the five file capabilities got
/// none under `uvfs run` (`Cred::without_caps`), so it was refused what the others allow;
/// cause: `Cred` held them all or none; fix: `Cred::caps`, a set, each check asking for
/// its own capability.
#[test]
fn capabilities_one_by_one() {
    table::<R>(&[
        (
            "root without CAP_CHOWN may not chown",
            Err(Errno::EPERM),
            |s| {
                root_with(s, 0o644, all_but(CAP_CHOWN));
                s.fchownat(CWD, b"/f", 1, 1, NOAT)
            },
        ),
        ("nor chgrp", Err(Errno::EPERM), |s| {
            root_with(s, 0o644, all_but(CAP_CHOWN));
            s.fchownat(CWD, b"/u", M, 2000, NOAT)
        }),
        ("CAP_CHOWN alone chowns", Ok(()), |s| {
            root_with(s, 0o644, CAP_CHOWN);
            s.fchownat(CWD, b"/u", 1, 1, NOAT)
        }),
        (
            "without CAP_DAC_READ_SEARCH, CAP_DAC_OVERRIDE still reads a 000 file",
            Ok(()),
            |s| {
                root_with(s, 0o000, all_but(CAP_DAC_READ_SEARCH));
                open_close(s, b"/u", OpenFlags::RDONLY)
            },
        ),
        ("and writes it", Ok(()), |s| {
            root_with(s, 0o000, all_but(CAP_DAC_READ_SEARCH));
            open_close(s, b"/u", OpenFlags::WRONLY)
        }),
        ("CAP_DAC_READ_SEARCH alone reads a 000 file", Ok(()), |s| {
            root_with(s, 0o000, CAP_DAC_READ_SEARCH);
            open_close(s, b"/u", OpenFlags::RDONLY)
        }),
        ("but does not write a 0444 one", Err(Errno::EACCES), |s| {
            root_with(s, 0o444, CAP_DAC_READ_SEARCH);
            open_close(s, b"/u", OpenFlags::WRONLY)
        }),
        ("and searches a 0700 directory", Ok(()), |s| {
            root_with(s, 0o644, all_but(0));
            s.fchownat(CWD, b"/priv", 1000, 1000, NOAT)?;
            s.set_caps(CAP_DAC_READ_SEARCH);
            s.fstatat(CWD, b"/priv/f", NOAT).map(drop)
        }),
        ("but creates nothing in it", Err(Errno::EACCES), |s| {
            root_with(s, 0o644, all_but(0));
            s.fchownat(CWD, b"/priv", 1000, 1000, NOAT)?;
            s.set_caps(CAP_DAC_READ_SEARCH);
            s.mkdirat(CWD, b"/priv/d", 0o755)
        }),
        ("CAP_DAC_OVERRIDE executes with one x bit", Ok(()), |s| {
            root_with(s, 0o001, CAP_DAC_OVERRIDE);
            s.faccessat2(CWD, b"/u", X_OK, AtFlags::EACCESS)
        }),
        ("but not with none", Err(Errno::EACCES), |s| {
            root_with(s, 0o666, CAP_DAC_OVERRIDE);
            s.faccessat2(CWD, b"/u", X_OK, AtFlags::EACCESS)
        }),
        (
            "without either, the mode bits decide",
            Err(Errno::EACCES),
            |s| {
                root_with(s, 0o000, all_but(CAP_DAC_OVERRIDE | CAP_DAC_READ_SEARCH));
                open_close(s, b"/u", OpenFlags::RDONLY)
            },
        ),
        (
            "CAP_FOWNER without CAP_DAC_OVERRIDE chmods another's file",
            Ok(()),
            |s| {
                root_with(s, 0o644, CAP_FOWNER);
                s.fchmodat(CWD, b"/u", 0o600, NOAT)
            },
        ),
        ("without CAP_FOWNER root may not", Err(Errno::EPERM), |s| {
            root_with(s, 0o644, all_but(CAP_FOWNER));
            s.fchmodat(CWD, b"/u", 0o600, NOAT)
        }),
        (
            "nor delete another's file in another's sticky directory",
            Err(Errno::EPERM),
            |s| {
                root_with(s, 0o644, all_but(0));
                s.mkdirat(CWD, b"/pub/t", 0o1777)?;
                s.fchownat(CWD, b"/pub/t", 2000, 2000, NOAT)?;
                s.mkfile(b"/pub/t/x", b"x");
                s.fchownat(CWD, b"/pub/t/x", 1000, 1000, NOAT)?;
                s.set_caps(all_but(CAP_FOWNER));
                s.unlinkat(CWD, b"/pub/t/x", NOAT)
            },
        ),
        (
            "a write without CAP_FSETID clears set-user-ID",
            Ok(()),
            |s| {
                root_with(s, 0o4755, all_but(CAP_FSETID));
                let fd = s.openat(CWD, b"/u", OpenFlags::WRONLY, 0)?;
                s.write(fd, b"y")?;
                s.close(fd)?;
                owner(s, b"/u").map(|(m, u, g)| {
                    assert_eq!((m, u, g), (S_IFREG | 0o755, 1000, 1000));
                })
            },
        ),
        ("with it the bit stays", Ok(()), |s| {
            root_with(s, 0o4755, CAP_FSETID | CAP_DAC_OVERRIDE);
            let fd = s.openat(CWD, b"/u", OpenFlags::WRONLY, 0)?;
            s.write(fd, b"y")?;
            s.close(fd)?;
            let m = owner(s, b"/u")?.0;
            assert_eq!(m, S_IFREG | 0o4755);
            Ok(())
        }),
    ]);
}
