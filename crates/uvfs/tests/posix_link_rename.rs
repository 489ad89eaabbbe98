//! `linkat` (`AT_SYMLINK_FOLLOW`, `AT_EMPTY_PATH`, `protected_hardlinks`), `renameat2`
//! (`RENAME_NOREPLACE`, `RENAME_EXCHANGE`, `RENAME_WHITEOUT`) and `rmdir`, asserted against
//! Linux (see `common`). The plain `renameat` cases live in posix_dir.rs.

mod common;
use common::*;
use uvfs::types::*;
use uvfs::{tmpfs, AtFlags, Errno, Fd, OpenFlags, RenameFlags, Task};

type R = Result<(), Errno>;

const FOLLOW: AtFlags = AtFlags::SYMLINK_FOLLOW;
const EMPTY: AtFlags = AtFlags::EMPTY_PATH;
const NOREPLACE: RenameFlags = RenameFlags::NOREPLACE;
const EXCHANGE: RenameFlags = RenameFlags::EXCHANGE;
const WHITEOUT: RenameFlags = RenameFlags::WHITEOUT;

fn ln(s: &dyn Sys, a: &[u8], b: &[u8]) -> R {
    s.linkat(CWD, a, CWD, b, NOAT)
}

fn rn2(s: &dyn Sys, a: &[u8], b: &[u8], flags: RenameFlags) -> R {
    s.renameat2(CWD, a, CWD, b, flags)
}

fn long(prefix: &[u8], n: usize) -> Vec<u8> {
    let mut p = prefix.to_vec();
    p.extend(name(b'n', n));
    p
}

/// Inode number of `p` (without following a final symlink).
fn ino(s: &dyn Sys, p: &[u8]) -> u64 {
    s.lstat(p).unwrap().st_ino
}

// ---------------------------------------------------------------------------------------
// linkat

#[test]
fn link_errors() {
    table::<R>(&[
        ("file to a new name", Ok(()), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/g")
        }),
        ("into another dir", Ok(()), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/d/sub/g")
        }),
        ("over an existing file", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/d/f")
        }),
        ("over itself", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/f")
        }),
        ("over a dir", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/e")
        }),
        ("over a dangling symlink", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/dangling")
        }),
        (
            "over an existing dir with a slash",
            Err(Errno::EEXIST),
            |s| {
                posix_tree(s);
                ln(s, b"/f", b"/e/")
            },
        ),
        ("new name with a trailing slash", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/g/")
        }),
        ("target root", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/")
        }),
        ("target dot", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/d/.")
        }),
        ("target dot-dot", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/d/..")
        }),
        ("a dir", Err(Errno::EPERM), |s| {
            posix_tree(s);
            ln(s, b"/d", b"/g")
        }),
        ("a dir with a trailing slash", Err(Errno::EPERM), |s| {
            posix_tree(s);
            ln(s, b"/d/", b"/g")
        }),
        ("the root", Err(Errno::EPERM), |s| {
            posix_tree(s);
            ln(s, b"/", b"/g")
        }),
        ("dot", Err(Errno::EPERM), |s| {
            posix_tree(s);
            ln(s, b"/d/.", b"/g")
        }),
        ("a file with a trailing slash", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            ln(s, b"/f/", b"/g")
        }),
        ("missing source", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            ln(s, b"/x", b"/g")
        }),
        (
            "missing source over an existing name",
            Err(Errno::ENOENT),
            |s| {
                posix_tree(s);
                ln(s, b"/x", b"/f")
            },
        ),
        ("missing source parent", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            ln(s, b"/x/y", b"/g")
        }),
        ("source parent is a file", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            ln(s, b"/f/y", b"/g")
        }),
        ("missing target parent", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/x/g")
        }),
        ("target parent is a file", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/f/g")
        }),
        ("target through a symlink to a dir", Ok(()), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/ld/g")
        }),
        ("empty source", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            ln(s, b"", b"/g")
        }),
        ("empty target", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            ln(s, b"/f", b"")
        }),
        ("unknown flag", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.linkat(CWD, b"/f", CWD, b"/g", AtFlags::from_bits_retain(1))
        }),
        ("AT_SYMLINK_NOFOLLOW", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.linkat(CWD, b"/f", CWD, b"/g", AtFlags::SYMLINK_NOFOLLOW)
        }),
        ("AT_REMOVEDIR", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.linkat(CWD, b"/f", CWD, b"/g", AtFlags::REMOVEDIR)
        }),
        (
            "unknown flag before an empty path",
            Err(Errno::EINVAL),
            |s| s.linkat(CWD, b"", CWD, b"", AtFlags::from_bits_retain(0x8000)),
        ),
        ("long target name", Err(Errno::ENAMETOOLONG), |s| {
            posix_tree(s);
            ln(s, b"/f", &long(b"/", 256))
        }),
        ("target name of 255 bytes", Ok(()), |s| {
            posix_tree(s);
            ln(s, b"/f", &long(b"/", 255))
        }),
        ("long source name", Err(Errno::ENAMETOOLONG), |s| {
            posix_tree(s);
            ln(s, &long(b"/", 256), b"/g")
        }),
        (
            "missing source, too long a target path",
            Err(Errno::ENOENT),
            |s| ln(s, b"/x", &long(b"/", 5000)),
        ),
        ("into a removed dir", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            let e = s.open(b"/e", RO, 0).unwrap();
            s.unlinkat(CWD, b"/e", AtFlags::REMOVEDIR).unwrap();
            s.linkat(CWD, b"/f", e, b"g", NOAT)
        }),
        // Symlinks: not followed unless AT_SYMLINK_FOLLOW.
        ("a symlink", Ok(()), |s| {
            posix_tree(s);
            ln(s, b"/l", b"/g")
        }),
        ("a dangling symlink", Ok(()), |s| {
            posix_tree(s);
            ln(s, b"/dangling", b"/g")
        }),
        ("a looping symlink", Ok(()), |s| {
            posix_tree(s);
            ln(s, b"/loop", b"/g")
        }),
        ("a symlink to a dir", Ok(()), |s| {
            posix_tree(s);
            ln(s, b"/ld", b"/g")
        }),
        ("a symlink to a dir, with a slash", Err(Errno::EPERM), |s| {
            posix_tree(s);
            ln(s, b"/ld/", b"/g")
        }),
        ("followed symlink", Ok(()), |s| {
            posix_tree(s);
            s.linkat(CWD, b"/l", CWD, b"/g", FOLLOW)
        }),
        ("followed dangling symlink", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            s.linkat(CWD, b"/dangling", CWD, b"/g", FOLLOW)
        }),
        ("followed looping symlink", Err(Errno::ELOOP), |s| {
            posix_tree(s);
            s.linkat(CWD, b"/loop", CWD, b"/g", FOLLOW)
        }),
        ("followed symlink to a dir", Err(Errno::EPERM), |s| {
            posix_tree(s);
            s.linkat(CWD, b"/ld", CWD, b"/g", FOLLOW)
        }),
        // Descriptors.
        ("relative to dir fds", Ok(()), |s| {
            posix_tree(s);
            let d = s.open(b"/d", RO, 0).unwrap();
            let e = s.open(b"/e", RO, 0).unwrap();
            s.linkat(d, b"f", e, b"g", NOAT)
        }),
        ("relative to a bad old fd", Err(Errno::EBADF), |s| {
            posix_tree(s);
            s.linkat(Fd(8), b"f", CWD, b"/g", NOAT)
        }),
        ("relative to a bad new fd", Err(Errno::EBADF), |s| {
            posix_tree(s);
            s.linkat(CWD, b"/f", Fd(8), b"g", NOAT)
        }),
        ("missing source and a bad new fd", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            s.linkat(CWD, b"/x", Fd(8), b"g", NOAT)
        }),
        ("absolute paths ignore bad fds", Ok(()), |s| {
            posix_tree(s);
            s.linkat(Fd(8), b"/f", Fd(9), b"/g", NOAT)
        }),
        ("relative to a file fd", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            let f = s.open(b"/f", RO, 0).unwrap();
            s.linkat(f, b"x", CWD, b"/g", NOAT)
        }),
        // AT_EMPTY_PATH (as root: CAP_DAC_READ_SEARCH).
        ("empty path: the file of the fd", Ok(()), |s| {
            posix_tree(s);
            let f = s.open(b"/f", RO, 0).unwrap();
            s.linkat(f, b"", CWD, b"/g", EMPTY)
        }),
        ("empty path: a write-only fd", Ok(()), |s| {
            posix_tree(s);
            let f = s.open(b"/f", WO, 0).unwrap();
            s.linkat(f, b"", CWD, b"/g", EMPTY)
        }),
        (
            "empty path without AT_EMPTY_PATH",
            Err(Errno::ENOENT),
            |s| {
                posix_tree(s);
                let f = s.open(b"/f", RO, 0).unwrap();
                s.linkat(f, b"", CWD, b"/g", NOAT)
            },
        ),
        ("empty path: a dir fd", Err(Errno::EPERM), |s| {
            posix_tree(s);
            let d = s.open(b"/d", RO, 0).unwrap();
            s.linkat(d, b"", CWD, b"/g", EMPTY)
        }),
        ("empty path: the cwd", Err(Errno::EPERM), |s| {
            posix_tree(s);
            s.linkat(CWD, b"", CWD, b"/g", EMPTY)
        }),
        ("empty path: a bad fd", Err(Errno::EBADF), |s| {
            posix_tree(s);
            s.linkat(Fd(8), b"", CWD, b"/g", EMPTY)
        }),
        ("empty path: an unlinked file", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            let f = s.open(b"/f", RO, 0).unwrap();
            s.unlinkat(CWD, b"/f", NOAT).unwrap();
            s.linkat(f, b"", CWD, b"/g", EMPTY)
        }),
        (
            "empty path: an unlinked name of a linked file",
            Ok(()),
            |s| {
                posix_tree(s);
                ln(s, b"/f", b"/f2").unwrap();
                let f = s.open(b"/f", RO, 0).unwrap();
                s.unlinkat(CWD, b"/f", NOAT).unwrap();
                s.linkat(f, b"", CWD, b"/g", EMPTY)
            },
        ),
        (
            "empty path: over an existing name",
            Err(Errno::EEXIST),
            |s| {
                posix_tree(s);
                let f = s.open(b"/f", RO, 0).unwrap();
                s.linkat(f, b"", CWD, b"/d/f", EMPTY)
            },
        ),
        ("AT_EMPTY_PATH with a path", Ok(()), |s| {
            posix_tree(s);
            let d = s.open(b"/d", RO, 0).unwrap();
            s.linkat(d, b"f", CWD, b"/g", EMPTY)
        }),
        ("AT_EMPTY_PATH with both flags", Ok(()), |s| {
            posix_tree(s);
            let f = s.open(b"/f", RO, 0).unwrap();
            s.linkat(f, b"", CWD, b"/g", EMPTY | FOLLOW)
        }),
        (
            "AT_EMPTY_PATH and a missing file",
            Err(Errno::ENOENT),
            |s| {
                posix_tree(s);
                s.linkat(CWD, b"/x", CWD, b"/g", EMPTY)
            },
        ),
    ]);
}

#[test]
fn link_results() {
    // Both names are one inode: the link count, data written through one name read through
    // the other; unlinking one name leaves the other; the new parent's size grows by one
    // entry. A symlink is linked as itself, or followed with AT_SYMLINK_FOLLOW.
    expect(
        (
            (2, 2, true, b"hello, world".to_vec()),
            (1, b"hello, world".to_vec()),
            (S_IFLNK, 2, true, b"f".to_vec()),
            (S_IFREG, 3, true),
            (80, 100),
            vec!["f".to_string(), "g".into(), "sub".into()],
        ),
        |s| {
            posix_tree(s);
            let before = s.stat(b"/d").unwrap().st_size;
            ln(s, b"/f", b"/d/g").unwrap();
            let fd = s.open(b"/d/g", WO | OpenFlags::APPEND, 0).unwrap();
            s.write(fd, b", world").unwrap();
            s.close(fd).unwrap();
            let a = (
                s.stat(b"/f").unwrap().st_nlink,
                s.stat(b"/d/g").unwrap().st_nlink,
                ino(s, b"/f") == ino(s, b"/d/g"),
                s.read_file(b"/f").unwrap(),
            );
            s.unlinkat(CWD, b"/f", NOAT).unwrap();
            let b = (
                s.stat(b"/d/g").unwrap().st_nlink,
                s.read_file(b"/d/g").unwrap(),
            );
            s.mkfile(b"/f", b"x");
            ln(s, b"/l", b"/l2").unwrap();
            let l2 = s.lstat(b"/l2").unwrap();
            let c = (
                l2.file_type(),
                l2.st_nlink,
                ino(s, b"/l") == ino(s, b"/l2"),
                s.readlink(b"/l2").unwrap(),
            );
            s.linkat(CWD, b"/l", CWD, b"/f3", FOLLOW).unwrap();
            ln(s, b"/f", b"/f4").unwrap();
            let f3 = s.lstat(b"/f3").unwrap();
            let d = (f3.file_type(), f3.st_nlink, ino(s, b"/f3") == ino(s, b"/f"));
            (
                a,
                b,
                c,
                d,
                (before, s.stat(b"/d").unwrap().st_size),
                s.ls(b"/d").unwrap(),
            )
        },
    );
}

#[test]
fn link_by_descriptor_results() {
    // AT_EMPTY_PATH gives the open file a name: also one whose other name was removed, and
    // a file opened write-only. The directory fd as newdirfd.
    expect((Ok(2), Ok(b"data".to_vec()), Ok(2)), |s| {
        posix_tree(s);
        let f = s.open(b"/d/f", WO, 0).unwrap();
        ln(s, b"/d/f", b"/keep").unwrap();
        s.unlinkat(CWD, b"/d/f", NOAT).unwrap();
        let e = s.open(b"/e", RO | OpenFlags::DIRECTORY, 0).unwrap();
        s.linkat(f, b"", e, b"again", EMPTY).unwrap();
        (
            s.fstat(f).map(|st| st.st_nlink),
            s.read_file(b"/e/again"),
            s.stat(b"/keep").map(|st| st.st_nlink),
        )
    });
}

#[test]
fn link_times() {
    // The inode's ctime and the new parent's mtime and ctime move (to one time); the
    // inode's mtime and the old parent stay.
    expect((true, true, true, true, true), |s| {
        s.mkdir(b"/a");
        s.mkdir(b"/b");
        s.mkfile(b"/a/f", b"x");
        for p in [&b"/a"[..], b"/b", b"/a/f"] {
            s.set_times(p, T2001, T2001);
        }
        let c = s.stat(b"/a/f").unwrap().st_ctime;
        ln(s, b"/a/f", b"/b/g").unwrap();
        let a = s.stat(b"/a").unwrap();
        let b = s.stat(b"/b").unwrap();
        let g = s.stat(b"/b/g").unwrap();
        (
            a.st_mtime == T2001,
            b.st_mtime > T2001 && b.st_mtime == b.st_ctime,
            g.st_mtime == T2001,
            g.st_ctime > c,
            b.st_ctime == g.st_ctime,
        )
    });
}

#[test]
fn link_refused_changes_nothing() {
    // After each refused link: no new name, the link count and ctime unchanged.
    expect(true, |s| {
        posix_tree(s);
        let before = (s.stat(b"/f").unwrap(), s.stat(b"/d").unwrap());
        let r = [
            ln(s, b"/f", b"/d/f"),
            ln(s, b"/f", b"/d/x/"),
            s.linkat(CWD, b"/f", CWD, b"/d/x", AtFlags::from_bits_retain(1)),
        ];
        let after = (s.stat(b"/f").unwrap(), s.stat(b"/d").unwrap());
        r.iter().all(|r| r.is_err()) && before == after && !s.exists(b"/d/x")
    });
}

/// `fs.protected_hardlinks = 1` (the host's setting; `may_linkat`).
#[test]
fn link_permissions() {
    fn setup(s: &mut dyn Sys) {
        s.umask(0);
        s.mkdirat(CWD, b"/w", 0o777).unwrap();
        s.mkdirat(CWD, b"/ro", 0o755).unwrap();
        s.mkdirat(CWD, b"/private", 0o700).unwrap();
        s.mkfile(b"/private/f", b"");
        for (p, mode) in [
            (&b"/w/r644"[..], 0o644),
            (b"/w/r666", 0o666),
            (b"/w/suid", 0o4777),
            (b"/w/sgidx", 0o2777),
            (b"/w/sgid", 0o2767),
        ] {
            let fd = s.open(p, CREAT | WO, mode).unwrap();
            s.close(fd).unwrap();
        }
        s.symlink(b"r666", b"/w/rlink");
        s.mkdirat(CWD, b"/w/rdir", 0o777).unwrap();
        s.set_cred(1000, 1000, &[]);
        s.mkfile(b"/w/mine", b"");
        s.symlink(b"r644", b"/w/mylink");
        s.mkdirat(CWD, b"/w/mydir", 0o755).unwrap();
    }
    table::<R>(&[
        ("own file", Ok(()), |s| {
            setup(s);
            ln(s, b"/w/mine", b"/w/x")
        }),
        (
            "own file into a non-writable dir",
            Err(Errno::EACCES),
            |s| {
                setup(s);
                ln(s, b"/w/mine", b"/ro/x")
            },
        ),
        ("own read-only file", Ok(()), |s| {
            setup(s);
            s.mkdirat(CWD, b"/w/sub", 0o755).unwrap();
            let fd = s.open(b"/w/sub/ro", CREAT | WO, 0o400).unwrap();
            s.close(fd).unwrap();
            ln(s, b"/w/sub/ro", b"/w/x")
        }),
        ("root's 0644 file", Err(Errno::EPERM), |s| {
            setup(s);
            ln(s, b"/w/r644", b"/w/x")
        }),
        ("root's 0666 file", Ok(()), |s| {
            setup(s);
            ln(s, b"/w/r666", b"/w/x")
        }),
        ("root's set-user-ID file", Err(Errno::EPERM), |s| {
            setup(s);
            ln(s, b"/w/suid", b"/w/x")
        }),
        (
            "root's setgid group-executable file",
            Err(Errno::EPERM),
            |s| {
                setup(s);
                ln(s, b"/w/sgidx", b"/w/x")
            },
        ),
        ("root's setgid non-executable file", Ok(()), |s| {
            setup(s);
            ln(s, b"/w/sgid", b"/w/x")
        }),
        ("root's symlink", Err(Errno::EPERM), |s| {
            setup(s);
            ln(s, b"/w/rlink", b"/w/x")
        }),
        ("root's symlink followed to a 0666 file", Ok(()), |s| {
            setup(s);
            s.linkat(CWD, b"/w/rlink", CWD, b"/w/x", FOLLOW)
        }),
        ("own symlink", Ok(()), |s| {
            setup(s);
            ln(s, b"/w/mylink", b"/w/x")
        }),
        (
            "own symlink followed to root's 0644 file",
            Err(Errno::EPERM),
            |s| {
                setup(s);
                s.linkat(CWD, b"/w/mylink", CWD, b"/w/x", FOLLOW)
            },
        ),
        ("root's dir", Err(Errno::EPERM), |s| {
            setup(s);
            ln(s, b"/w/rdir", b"/w/x")
        }),
        ("own dir", Err(Errno::EPERM), |s| {
            setup(s);
            ln(s, b"/w/mydir", b"/w/x")
        }),
        (
            "own dir into a non-writable dir (permission first)",
            Err(Errno::EACCES),
            |s| {
                setup(s);
                ln(s, b"/w/mydir", b"/ro/x")
            },
        ),
        (
            "root's 0644 file into a non-writable dir (protected first)",
            Err(Errno::EPERM),
            |s| {
                setup(s);
                ln(s, b"/w/r644", b"/ro/x")
            },
        ),
        (
            "over an existing name in a non-writable dir",
            Err(Errno::EEXIST),
            |s| {
                setup(s);
                ln(s, b"/w/mine", b"/ro")
            },
        ),
        (
            "source without search permission",
            Err(Errno::EACCES),
            |s| {
                setup(s);
                ln(s, b"/private/f", b"/w/x")
            },
        ),
        (
            "target without search permission",
            Err(Errno::EACCES),
            |s| {
                setup(s);
                ln(s, b"/w/mine", b"/private/x")
            },
        ),
        (
            "AT_EMPTY_PATH on a descriptor opened with other credentials",
            Err(Errno::ENOENT),
            |s| {
                s.mkfile(b"/f", b"");
                let f = s.open(b"/f", RO, 0).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.linkat(f, b"", CWD, b"/x", EMPTY)
            },
        ),
        (
            "AT_EMPTY_PATH with a path, dir fd opened with other credentials",
            Err(Errno::ENOENT),
            |s| {
                s.umask(0);
                s.mkdirat(CWD, b"/w", 0o777).unwrap();
                let fd = s.open(b"/w/f", CREAT | WO, 0o666).unwrap();
                s.close(fd).unwrap();
                let d = s.open(b"/w", RO, 0).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.linkat(d, b"f", CWD, b"/w/x", EMPTY)
            },
        ),
        (
            "AT_EMPTY_PATH: absolute path, other credentials",
            Ok(()),
            |s| {
                s.umask(0);
                s.mkdirat(CWD, b"/w", 0o777).unwrap();
                let fd = s.open(b"/w/f", CREAT | WO, 0o666).unwrap();
                s.close(fd).unwrap();
                let d = s.open(b"/w", RO, 0).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.linkat(d, b"/w/f", CWD, b"/w/x", EMPTY)
            },
        ),
    ]);
}

/// uvfs-only: a descriptor of another namespace (another mount) is `EXDEV`, as a source
/// (`AT_EMPTY_PATH`) or as a dirfd.
#[test]
fn link_and_rename_across_namespaces() {
    let a = tmpfs::mount(Default::default());
    let t = Task::init(&a);
    let b = tmpfs::mount(Default::default());
    let o = Task::init(&b);
    o.mkdirat(CWD, "/d", 0o755).unwrap();
    let f = o.filp_open(CWD, "/d/f", CREAT | RW, 0o644).unwrap();
    let d = o.filp_open(CWD, "/d", OpenFlags::DIRECTORY, 0).unwrap();
    let ffd = t.install_file(f, false).unwrap();
    let dfd = t.install_file(d, false).unwrap();
    t.mkdirat(CWD, "/e", 0o755).unwrap();
    assert_eq!(t.linkat(ffd, "", CWD, "/x", EMPTY), Err(Errno::EXDEV));
    assert_eq!(t.linkat(dfd, "f", CWD, "/x", NOAT), Err(Errno::EXDEV));
    assert_eq!(t.linkat(CWD, "/e", dfd, "x", NOAT), Err(Errno::EXDEV));
    for flags in [RenameFlags::empty(), NOREPLACE, EXCHANGE] {
        assert_eq!(t.renameat2(dfd, "f", CWD, "/x", flags), Err(Errno::EXDEV));
        assert_eq!(t.renameat2(CWD, "/e", dfd, "f", flags), Err(Errno::EXDEV));
    }
    assert_eq!(
        o.fstatat(CWD, "/d/f", AtFlags::empty()).unwrap().st_nlink,
        1
    );
}

// ---------------------------------------------------------------------------------------
// renameat2

#[test]
fn rename2_flag_errors() {
    table::<R>(&[
        ("no flags", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/g", RenameFlags::empty())
        }),
        ("unknown flag", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/g", RenameFlags::from_bits_retain(8))
        }),
        ("high unknown flag", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/g", RenameFlags::from_bits_retain(1 << 31))
        }),
        ("NOREPLACE | EXCHANGE", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/d/f", NOREPLACE | EXCHANGE)
        }),
        ("EXCHANGE | WHITEOUT", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/d/f", EXCHANGE | WHITEOUT)
        }),
        (
            "bad flags before a missing source",
            Err(Errno::EINVAL),
            |s| rn2(s, b"/x", b"/y", NOREPLACE | EXCHANGE),
        ),
        ("bad flags before empty paths", Err(Errno::EINVAL), |s| {
            rn2(s, b"", b"", RenameFlags::from_bits_retain(8))
        }),
        // The parents are walked first (source, then target); the entries are looked up
        // after both walks.
        ("missing source, bad new fd", Err(Errno::EBADF), |s| {
            s.renameat2(CWD, b"/x", Fd(8), b"y", RenameFlags::empty())
        }),
        (
            "missing source parent, bad new fd",
            Err(Errno::ENOENT),
            |s| s.renameat2(CWD, b"/x/y", Fd(8), b"y", RenameFlags::empty()),
        ),
        (
            "missing source parent, long target",
            Err(Errno::ENOENT),
            |s| s.renameat2(CWD, b"/x/y", CWD, &long(b"/", 5000), RenameFlags::empty()),
        ),
    ]);
}

#[test]
fn rename2_noreplace() {
    table::<R>(&[
        ("to a new name", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/g", NOREPLACE)
        }),
        ("dir to a new name", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/d", b"/e/d", NOREPLACE)
        }),
        ("over a file", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/d/f", NOREPLACE)
        }),
        ("over itself", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/f", NOREPLACE)
        }),
        ("over a hard link of itself", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/g").unwrap();
            rn2(s, b"/f", b"/g", NOREPLACE)
        }),
        ("over a dangling symlink", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/dangling", NOREPLACE)
        }),
        ("empty dir over an empty dir", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            s.mkdir(b"/e2");
            rn2(s, b"/e2", b"/e", NOREPLACE)
        }),
        ("file over a dir", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/e", NOREPLACE)
        }),
        ("missing source over a file", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            rn2(s, b"/x", b"/f", NOREPLACE)
        }),
        ("file with a slash over a file", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            rn2(s, b"/f/", b"/d/f", NOREPLACE)
        }),
        (
            "file with a slash to a new name",
            Err(Errno::ENOTDIR),
            |s| {
                posix_tree(s);
                rn2(s, b"/f/", b"/g", NOREPLACE)
            },
        ),
        (
            "file to a new name with a slash",
            Err(Errno::ENOTDIR),
            |s| {
                posix_tree(s);
                rn2(s, b"/f", b"/g/", NOREPLACE)
            },
        ),
        ("target dot", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            rn2(s, b"/e", b"/d/.", NOREPLACE)
        }),
        ("target root", Err(Errno::EEXIST), |s| {
            posix_tree(s);
            rn2(s, b"/e", b"/", NOREPLACE)
        }),
        ("source dot", Err(Errno::EBUSY), |s| {
            posix_tree(s);
            rn2(s, b"/d/.", b"/y", NOREPLACE)
        }),
        ("dir into itself", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            rn2(s, b"/d", b"/d/sub/x", NOREPLACE)
        }),
    ]);
}

#[test]
fn rename2_exchange_errors() {
    table::<R>(&[
        ("two files", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/d/f", EXCHANGE)
        }),
        ("a file and a dir", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/e", EXCHANGE)
        }),
        ("a dir and a file", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/e", b"/f", EXCHANGE)
        }),
        ("two non-empty dirs", Ok(()), |s| {
            posix_tree(s);
            s.mkfile(b"/e/x", b"");
            rn2(s, b"/d", b"/e", EXCHANGE)
        }),
        ("a symlink and a dir", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/ld", b"/e", EXCHANGE)
        }),
        ("with itself", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/f", EXCHANGE)
        }),
        ("dir with itself", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/d", b"/d", EXCHANGE)
        }),
        ("with a hard link of itself", Ok(()), |s| {
            posix_tree(s);
            ln(s, b"/f", b"/d/g").unwrap();
            rn2(s, b"/f", b"/d/g", EXCHANGE)
        }),
        ("missing target", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/g", EXCHANGE)
        }),
        ("missing source", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            rn2(s, b"/x", b"/f", EXCHANGE)
        }),
        ("both missing", Err(Errno::ENOENT), |s| {
            rn2(s, b"/x", b"/y", EXCHANGE)
        }),
        ("file, dir with a slash", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/f", b"/e/", EXCHANGE)
        }),
        ("dir, file with a slash", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            rn2(s, b"/e", b"/f/", EXCHANGE)
        }),
        ("file with a slash, dir", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            rn2(s, b"/f/", b"/e", EXCHANGE)
        }),
        ("file with a slash, missing", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            rn2(s, b"/f/", b"/g", EXCHANGE)
        }),
        ("dirs with slashes", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/d/", b"/e/", EXCHANGE)
        }),
        ("dir with its child", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            rn2(s, b"/d", b"/d/sub", EXCHANGE)
        }),
        ("dir with its grandchild", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.mkfile(b"/d/sub/x", b"");
            rn2(s, b"/d", b"/d/sub/x", EXCHANGE)
        }),
        ("child with its dir", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            rn2(s, b"/d/sub", b"/d", EXCHANGE)
        }),
        ("grandchild with its dir", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            s.mkfile(b"/d/sub/x", b"");
            rn2(s, b"/d/sub/x", b"/d", EXCHANGE)
        }),
        ("a file with its own dir", Err(Errno::EINVAL), |s| {
            posix_tree(s);
            rn2(s, b"/d/f", b"/d", EXCHANGE)
        }),
        ("dir with a sibling's child", Ok(()), |s| {
            posix_tree(s);
            rn2(s, b"/e", b"/d/sub", EXCHANGE)
        }),
        ("target dot", Err(Errno::EBUSY), |s| {
            posix_tree(s);
            rn2(s, b"/e", b"/d/.", EXCHANGE)
        }),
        ("source dot-dot", Err(Errno::EBUSY), |s| {
            posix_tree(s);
            rn2(s, b"/d/..", b"/e", EXCHANGE)
        }),
        ("into a removed dir", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            let e = s.open(b"/e", RO, 0).unwrap();
            s.unlinkat(CWD, b"/e", AtFlags::REMOVEDIR).unwrap();
            s.renameat2(CWD, b"/f", e, b"f", EXCHANGE)
        }),
        ("relative to dir fds", Ok(()), |s| {
            posix_tree(s);
            let d = s.open(b"/d", RO, 0).unwrap();
            let r = s.open(b"/", RO, 0).unwrap();
            s.renameat2(d, b"f", r, b"f", EXCHANGE)
        }),
    ]);
}

#[test]
fn rename2_exchange_results() {
    // Across parents: the names swap inodes; contents and types follow; the parents' link
    // counts follow the directory; the moved directory's `..` is its new parent; the
    // parents' sizes stay (one entry each).
    expect(
        (
            (S_IFDIR, S_IFREG, true, true),
            (b"in dir".to_vec(), vec!["f".to_string(), "sub".into()]),
            // `/`'s links: 2 + `d`, `e`, `sticky`, `a` (posix_tree's plus `/a`), then the
            // directory swapped in for `f`; its size: posix_tree's 10 entries plus `a`.
            ((3, 6), (2, 7)),
            (true, true),
            ((40 + 11 * 20, 60), (40 + 11 * 20, 60)),
        ),
        |s| {
            posix_tree(s);
            s.mkdir(b"/a");
            s.mkdir(b"/a/dir");
            s.mkfile(b"/a/dir/f", b"in dir");
            s.mkdir(b"/a/dir/sub");
            let (fi, di) = (ino(s, b"/f"), ino(s, b"/a/dir"));
            let links = |s: &dyn Sys| {
                (
                    s.stat(b"/a").unwrap().st_nlink,
                    s.stat(b"/").unwrap().st_nlink,
                )
            };
            let sizes = |s: &dyn Sys| {
                (
                    s.stat(b"/").unwrap().st_size,
                    s.stat(b"/a").unwrap().st_size,
                )
            };
            let (l0, s0) = (links(s), sizes(s));
            rn2(s, b"/f", b"/a/dir", EXCHANGE).unwrap();
            let a = (
                s.lstat(b"/f").unwrap().file_type(),
                s.lstat(b"/a/dir").unwrap().file_type(),
                ino(s, b"/f") == di,
                ino(s, b"/a/dir") == fi,
            );
            let b = (s.read_file(b"/f/f").unwrap(), s.ls(b"/f").unwrap());
            let d = (
                ino(s, b"/f/..") == ino(s, b"/"),
                ino(s, b"/f/sub/../..") == ino(s, b"/"),
            );
            (a, b, (l0, links(s)), d, (s0, sizes(s)))
        },
    );
}

#[test]
fn rename2_exchange_link_counts() {
    // nlink of both parents after each kind of exchange across parents (and within one).
    expect(vec![(2, 3), (3, 2), (3, 3), (2, 2), (4, 4)], |s| {
        let counts = |s: &dyn Sys| {
            (
                s.stat(b"/p").unwrap().st_nlink,
                s.stat(b"/q").unwrap().st_nlink,
            )
        };
        s.mkdir(b"/p");
        s.mkdir(b"/q");
        s.mkdir(b"/p/dir");
        s.mkfile(b"/q/file", b"");
        let mut out = Vec::new();
        rn2(s, b"/p/dir", b"/q/file", EXCHANGE).unwrap(); // p: a file, q: the dir
        out.push(counts(s));
        rn2(s, b"/p/dir", b"/q/file", EXCHANGE).unwrap(); // back
        out.push(counts(s));
        s.mkdir(b"/q/dir2");
        rn2(s, b"/p/dir", b"/q/dir2", EXCHANGE).unwrap(); // dir <-> dir
        out.push(counts(s));
        s.unlinkat(CWD, b"/p/dir", AtFlags::REMOVEDIR).unwrap();
        s.unlinkat(CWD, b"/q/dir2", AtFlags::REMOVEDIR).unwrap();
        s.mkfile(b"/p/f", b"");
        rn2(s, b"/p/f", b"/q/file", EXCHANGE).unwrap(); // file <-> file
        out.push(counts(s));
        for d in [&b"/p/x"[..], b"/p/y", b"/q/x", b"/q/y"] {
            s.mkdir(d);
        }
        rn2(s, b"/p/x", b"/p/f", EXCHANGE).unwrap(); // within one parent
        out.push(counts(s));
        out
    });
}

#[test]
fn rename2_exchange_keeps_open_files() {
    // Open descriptors follow their inodes; getdents lists each name once.
    expect(
        (
            Ok(b"hello".to_vec()),
            Ok(b"data".to_vec()),
            vec![
                "d".to_string(),
                "dangling".into(),
                "e".into(),
                "f".into(),
                "labs".into(),
                "private".into(),
                "sticky".into(),
            ],
        ),
        |s| {
            posix_tree(s);
            s.unlinkat(CWD, b"/l", NOAT).unwrap();
            s.unlinkat(CWD, b"/ld", NOAT).unwrap();
            s.unlinkat(CWD, b"/loop", NOAT).unwrap();
            let a = s.open(b"/f", RO, 0).unwrap();
            let b = s.open(b"/d/f", RO, 0).unwrap();
            rn2(s, b"/f", b"/d/f", EXCHANGE).unwrap();
            let r = s.open(b"/", RO | OpenFlags::DIRECTORY, 0).unwrap();
            let mut names: Vec<String> = s
                .list_fd(r, 4096)
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .filter(|n| n != "." && n != "..")
                .collect();
            names.sort();
            (s.read_to_end(a), s.read_to_end(b), names)
        },
    );
}

#[test]
fn rename2_exchange_times() {
    // Both parents' mtime and ctime move, both inodes' ctime, neither inode's mtime.
    expect((true, true, true, true, true, true), |s| {
        s.mkdir(b"/a");
        s.mkdir(b"/b");
        s.mkfile(b"/a/f", b"x");
        s.mkdir(b"/b/g");
        for p in [&b"/a"[..], b"/b", b"/a/f", b"/b/g"] {
            s.set_times(p, T2001, T2001);
        }
        let (cf, cg) = (
            s.stat(b"/a/f").unwrap().st_ctime,
            s.stat(b"/b/g").unwrap().st_ctime,
        );
        rn2(s, b"/a/f", b"/b/g", EXCHANGE).unwrap();
        let (a, b) = (s.stat(b"/a").unwrap(), s.stat(b"/b").unwrap());
        let (g, f) = (s.stat(b"/a/f").unwrap(), s.stat(b"/b/g").unwrap());
        (
            a.st_mtime > T2001,
            b.st_mtime > T2001,
            f.st_ctime > cf,
            g.st_ctime > cg,
            f.st_mtime == T2001,
            g.st_mtime == T2001,
        )
    });
}

#[test]
fn rename2_exchange_permissions() {
    fn setup(s: &mut dyn Sys) {
        s.umask(0);
        s.mkdirat(CWD, b"/w", 0o777).unwrap();
        s.mkdirat(CWD, b"/w2", 0o777).unwrap();
        s.mkdirat(CWD, b"/ro", 0o755).unwrap();
        s.mkdirat(CWD, b"/sticky", 0o1777).unwrap();
        s.mkfile(b"/ro/f", b"");
        s.mkdirat(CWD, b"/w/rootdir", 0o755).unwrap();
        s.mkfile(b"/w/rootfile", b"");
        s.mkfile(b"/sticky/root", b"");
        s.set_cred(1000, 1000, &[]);
        s.mkfile(b"/w/mine", b"");
        s.mkfile(b"/w2/mine2", b"");
        s.mkdirat(CWD, b"/w2/mydir", 0o755).unwrap();
        s.mkfile(b"/sticky/mine", b"");
    }
    table::<R>(&[
        ("own files across dirs", Ok(()), |s| {
            setup(s);
            rn2(s, b"/w/mine", b"/w2/mine2", EXCHANGE)
        }),
        (
            "with a file in a non-writable dir",
            Err(Errno::EACCES),
            |s| {
                setup(s);
                rn2(s, b"/w/mine", b"/ro/f", EXCHANGE)
            },
        ),
        ("root's dir across dirs", Err(Errno::EACCES), |s| {
            setup(s);
            rn2(s, b"/w2/mydir", b"/w/rootdir", EXCHANGE)
        }),
        (
            "root's dir across dirs, as source",
            Err(Errno::EACCES),
            |s| {
                setup(s);
                rn2(s, b"/w/rootdir", b"/w2/mine2", EXCHANGE)
            },
        ),
        ("root's dir within its dir", Ok(()), |s| {
            setup(s);
            rn2(s, b"/w/rootdir", b"/w/mine", EXCHANGE)
        }),
        ("root's file across dirs", Ok(()), |s| {
            setup(s);
            rn2(s, b"/w/rootfile", b"/w2/mine2", EXCHANGE)
        }),
        ("sticky: with root's file", Err(Errno::EPERM), |s| {
            setup(s);
            rn2(s, b"/sticky/mine", b"/sticky/root", EXCHANGE)
        }),
        ("sticky: own file with a file elsewhere", Ok(()), |s| {
            setup(s);
            rn2(s, b"/sticky/mine", b"/w/mine", EXCHANGE)
        }),
        // The entries are looked up before any permission check.
        (
            "with a missing name in a non-writable dir",
            Err(Errno::ENOENT),
            |s| {
                setup(s);
                rn2(s, b"/w/mine", b"/ro/x", EXCHANGE)
            },
        ),
        (
            "NOREPLACE over a name in a non-writable dir",
            Err(Errno::EEXIST),
            |s| {
                setup(s);
                rn2(s, b"/w/mine", b"/ro/f", NOREPLACE)
            },
        ),
        (
            "NOREPLACE into a non-writable dir",
            Err(Errno::EACCES),
            |s| {
                setup(s);
                rn2(s, b"/w/mine", b"/ro/x", NOREPLACE)
            },
        ),
        (
            "NOREPLACE out of a non-writable dir",
            Err(Errno::EACCES),
            |s| {
                setup(s);
                rn2(s, b"/ro/f", b"/w/x", NOREPLACE)
            },
        ),
    ]);
}

/// Linux tmpfs supports `RENAME_WHITEOUT` (it leaves a 0:0 character device at the source);
/// uvfs has no device inodes and refuses with `EINVAL` (documented on `renameat2`).
#[test]
fn rename2_whiteout() {
    let u = on_uvfs(&|s| {
        posix_tree(s);
        (
            rn2(s, b"/f", b"/g", WHITEOUT),
            s.exists(b"/f"),
            s.exists(b"/g"),
        )
    });
    assert_eq!(u, (Err(Errno::EINVAL), true, false));
    // What Linux does instead, recorded so a change in the kernel shows.
    if let Some(h) = on_host(&|s| {
        posix_tree(s);
        let r = rn2(s, b"/f", b"/g", WHITEOUT);
        (r, s.lstat(b"/f").map(|st| (st.file_type(), st.st_rdev)))
    }) {
        assert_eq!(h, (Ok(()), Ok((S_IFCHR, 0))));
    }
}

// ---------------------------------------------------------------------------------------
// rename over open files

#[test]
fn rename_over_an_open_file_keeps_its_data() {
    // The replaced file's descriptors still read and write its data; the name shows the
    // new file.
    expect(
        (
            Ok(b"data".to_vec()),
            Ok(0),
            Ok(b"datamore".to_vec()),
            Ok(b"hello".to_vec()),
        ),
        |s| {
            posix_tree(s);
            let old = s.open(b"/d/f", RW, 0).unwrap();
            s.renameat2(CWD, b"/f", CWD, b"/d/f", RenameFlags::empty())
                .unwrap();
            let a = s.read_to_end(old);
            s.write(old, b"more").unwrap();
            s.lseek(old, 0, SEEK_SET).unwrap();
            (
                a,
                s.fstat(old).map(|st| st.st_nlink),
                s.read_to_end(old),
                s.read_file(b"/d/f"),
            )
        },
    );
}

// ---------------------------------------------------------------------------------------
// rmdir

/// uvfs-only (`rmdir` is `unlinkat(AT_FDCWD, path, AT_REMOVEDIR)`, whose cases posix_dir.rs
/// checks against Linux): the same results for the usual cases.
#[test]
fn rmdir_is_unlinkat_removedir() {
    for p in [
        &b"/e"[..],
        b"/d",
        b"/f",
        b"/x",
        b"/d/.",
        b"/d/..",
        b"/",
        b"/ld",
        b"/ld/",
        b"/e/",
        b"",
    ] {
        let a = Uvfs::new();
        posix_tree(&a);
        let b = Uvfs::new();
        posix_tree(&b);
        assert_eq!(
            a.task.rmdir(p),
            b.task.unlinkat(CWD, p, AtFlags::REMOVEDIR),
            "{}",
            show(p)
        );
        assert_eq!(a.task.getdents_names("/"), b.task.getdents_names("/"));
    }
    let a = Uvfs::new();
    posix_tree(&a);
    assert_eq!(a.task.rmdir("/e"), Ok(()));
    assert_eq!(a.task.rmdir("/d"), Err(Errno::ENOTEMPTY));
    assert_eq!(a.task.rmdir("/f"), Err(Errno::ENOTDIR));
}

trait Names {
    fn getdents_names(&self, p: &str) -> Vec<String>;
}

impl Names for Task {
    fn getdents_names(&self, p: &str) -> Vec<String> {
        let fd = self.open(p, OpenFlags::DIRECTORY, 0).unwrap();
        let mut buf = [0u8; 4096];
        let n = self.getdents64(fd, &mut buf).unwrap();
        self.close(fd).unwrap();
        let mut v: Vec<String> = uvfs::parse_dirents(&buf[..n])
            .into_iter()
            .map(|e| String::from_utf8(e.name).unwrap())
            .collect();
        v.sort();
        v
    }
}

/// `AT_EMPTY_PATH` without `CAP_DAC_READ_SEARCH` (Linux 6.10+): allowed on a descriptor
/// opened with the caller's current credentials, by itself or by another thread sharing
/// them; refused (`ENOENT`) after the caller changed credentials (even back to equal ids).
#[test]
fn link_empty_path_own_descriptor() {
    expect(
        ((Ok(()), Ok(())), Ok(()), Err(Errno::ENOENT), Ok(())),
        |s| {
            s.umask(0);
            s.mkdirat(CWD, b"/w", 0o777).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.mkfile(b"/w/f", b"");
            let f = s.open(b"/w/f", RO, 0).unwrap();
            let d = s.open(b"/w", RO, 0).unwrap();
            let own = (
                s.linkat(f, b"", CWD, b"/w/x", EMPTY),
                s.linkat(d, b"f", CWD, b"/w/y", EMPTY),
            );
            let mut thread = None;
            s.thread(&mut |t| thread = Some(t.linkat(f, b"", CWD, b"/w/t", EMPTY)));
            s.set_cred(1000, 1000, &[]);
            let again = s.linkat(f, b"", CWD, b"/w/z", EMPTY);
            // Without AT_EMPTY_PATH the descriptor's credentials do not matter.
            let plain = s.linkat(d, b"f", CWD, b"/w/p", NOAT);
            (own, thread.unwrap(), again, plain)
        },
    );
}

/// uvfs-only: a forked child has new credentials (Linux `copy_creds` prepares a new
/// `struct cred` unless `CLONE_THREAD`), so without root it cannot `AT_EMPTY_PATH`-link an
/// inherited descriptor; the harness's host-side "fork" is a thread, which shares the
/// parent's credentials, so it cannot show this.
#[test]
fn link_empty_path_in_a_forked_child() {
    let u = Uvfs::new();
    u.task.umask(0);
    u.task.mkdirat(CWD, "/w", 0o777).unwrap();
    let mut t = u.task.fork();
    t.set_cred(uvfs::Cred {
        uid: 1000,
        gid: 1000,
        groups: std::sync::Arc::from(Vec::new()),
        real: None,
        caps: uvfs::Caps::EMPTY,
        permitted: uvfs::Caps::EMPTY,
    });
    let f = t.open("/w/f", CREAT | RW, 0o600).unwrap();
    assert_eq!(t.linkat(f, "", CWD, "/w/x", EMPTY), Ok(()));
    let child = t.fork();
    assert_eq!(child.linkat(f, "", CWD, "/w/c", EMPTY), Err(Errno::ENOENT));
    assert_eq!(
        child.clone_thread().linkat(f, "", CWD, "/w/c", EMPTY),
        Err(Errno::ENOENT)
    );
    assert_eq!(t.clone_thread().linkat(f, "", CWD, "/w/t", EMPTY), Ok(()));
    // Root (CAP_DAC_READ_SEARCH) may link any descriptor.
    assert_eq!(
        u.task.fork().linkat(f, "", CWD, "/w/r", EMPTY),
        Err(Errno::EBADF)
    );
    let r = u
        .task
        .install_file(t.files().fget(f.0).unwrap(), false)
        .unwrap();
    assert_eq!(u.task.linkat(r, "", CWD, "/w/r", EMPTY), Ok(()));
    assert_eq!(
        u.task
            .fstatat(CWD, "/w/f", AtFlags::empty())
            .unwrap()
            .st_nlink,
        4
    );
}

/// Bug (found by tests/differential.rs): renaming another user's file out of the sticky
/// root into a removed directory gave EPERM (sticky); Linux gives ENOENT.
/// Cause: Linux's `do_renameat2` looks the target up right after the source, and
/// `lookup_one_qstr_excl` refuses a dead directory before `vfs_rename`'s `may_delete`;
/// uvfs checked the dead target directory only in `may_create`, after the sticky check.
/// Fix: `rename_locked` refuses a dead target directory right after the source lookup.
#[test]
fn rename_into_removed_dir_is_enoent_before_sticky() {
    expect(Err(Errno::ENOENT), |s| {
        s.mkdir(b"/d");
        s.mkfile(b"/f", b"");
        let d = s.open(b"/d", RO, 0).unwrap();
        s.unlinkat(CWD, b"/d", AtFlags::REMOVEDIR).unwrap();
        let mut r = Ok(());
        s.thread(&mut |t| {
            t.set_cred(1001, 1001, &[]);
            r = t.renameat(CWD, b"/f", d, b"a");
        });
        r
    });
}
