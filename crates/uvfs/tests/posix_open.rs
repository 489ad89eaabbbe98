//! `openat(2)`: every flag the issue lists, the mode and umask, and each errno, asserted
//! against Linux (each case also runs on the host kernel, see `common`).

mod common;
use common::*;
use uvfs::open::{Fcntl, FD_CLOEXEC};
use uvfs::types::*;
use uvfs::{Errno, Fd, OpenFlags};

const TRUNC: OpenFlags = OpenFlags::TRUNC;
const EXCL: OpenFlags = OpenFlags::EXCL;
const APPEND: OpenFlags = OpenFlags::APPEND;
const DIRECTORY: OpenFlags = OpenFlags::DIRECTORY;
const NOFOLLOW: OpenFlags = OpenFlags::NOFOLLOW;
const CLOEXEC: OpenFlags = OpenFlags::CLOEXEC;

/// Opens `path` after building [`posix_tree`] and returns what open returned, then closes it.
fn open_in_tree(s: &dyn Sys, path: &[u8], flags: OpenFlags) -> Result<Fd, Errno> {
    posix_tree(s);
    let r = s.open(path, flags, 0o644);
    if let Ok(fd) = r {
        s.close(fd).unwrap();
    }
    r
}

type R = Result<Fd, Errno>;

#[test]
fn open_existing_and_missing() {
    table::<R>(&[
        ("file", Ok(Fd(0)), |s| open_in_tree(s, b"/f", RO)),
        ("file rdwr", Ok(Fd(0)), |s| open_in_tree(s, b"/f", RW)),
        ("dir rdonly", Ok(Fd(0)), |s| open_in_tree(s, b"/d", RO)),
        ("root", Ok(Fd(0)), |s| open_in_tree(s, b"/", RO)),
        ("missing", Err(Errno::ENOENT), |s| {
            open_in_tree(s, b"/x", RO)
        }),
        ("missing parent", Err(Errno::ENOENT), |s| {
            open_in_tree(s, b"/x/y", RO)
        }),
        ("missing parent with O_CREAT", Err(Errno::ENOENT), |s| {
            open_in_tree(s, b"/x/y", CREAT | RW)
        }),
        ("file as a directory", Err(Errno::ENOTDIR), |s| {
            open_in_tree(s, b"/f/x", RO)
        }),
        (
            "file as a directory with O_CREAT",
            Err(Errno::ENOTDIR),
            |s| open_in_tree(s, b"/f/x", CREAT | RW),
        ),
        ("file with a trailing slash", Err(Errno::ENOTDIR), |s| {
            open_in_tree(s, b"/f/", RO)
        }),
        ("file with a trailing /.", Err(Errno::ENOTDIR), |s| {
            open_in_tree(s, b"/f/.", RO)
        }),
        ("dir with a trailing slash", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/d//", RO)
        }),
        ("missing with a trailing slash", Err(Errno::ENOENT), |s| {
            open_in_tree(s, b"/x/", RO)
        }),
        ("empty path", Err(Errno::ENOENT), |s| {
            open_in_tree(s, b"", RO)
        }),
        ("empty path with O_CREAT", Err(Errno::ENOENT), |s| {
            open_in_tree(s, b"", CREAT | RW)
        }),
        ("dir for writing", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/d", WO)
        }),
        ("dir for reading and writing", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/d", RW)
        }),
        ("dir with O_TRUNC", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/d", RO | TRUNC)
        }),
        ("root for writing", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/", WO)
        }),
        ("dir with access mode 3", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/d", OpenFlags::ACCMODE)
        }),
        ("dot-dot at the root is the root", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/../../..", DIRECTORY)
        }),
        ("dot-dot walks up", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/d/sub/../../f", RO)
        }),
        ("dot-dot through a file", Err(Errno::ENOTDIR), |s| {
            open_in_tree(s, b"/f/..", RO)
        }),
        ("unknown flag bits are ignored", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/f", OpenFlags::from_bits_retain(1 << 30) | RO)
        }),
        ("O_EXCL without O_CREAT is ignored", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/f", EXCL | RO)
        }),
    ]);
}

#[test]
fn open_creat() {
    table::<R>(&[
        ("new file", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/new", CREAT | WO)
        }),
        ("existing file", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/f", CREAT | WO)
        }),
        ("existing dir", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/d", CREAT | RO)
        }),
        ("existing dir with O_EXCL", Err(Errno::EEXIST), |s| {
            open_in_tree(s, b"/d", CREAT | EXCL | RO)
        }),
        ("trailing slash, missing", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/new/", CREAT | RW)
        }),
        ("trailing slash, existing dir", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/d/", CREAT | RO)
        }),
        ("trailing slash, existing file", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/f/", CREAT | RO)
        }),
        ("root", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/", CREAT | RO)
        }),
        ("dot", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/d/.", CREAT | RO)
        }),
        ("dot-dot", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/d/..", CREAT | RO)
        }),
        ("O_EXCL, existing file", Err(Errno::EEXIST), |s| {
            open_in_tree(s, b"/f", CREAT | EXCL | RW)
        }),
        ("O_EXCL, symlink to a file", Err(Errno::EEXIST), |s| {
            open_in_tree(s, b"/l", CREAT | EXCL | RW)
        }),
        ("O_EXCL, dangling symlink", Err(Errno::EEXIST), |s| {
            open_in_tree(s, b"/dangling", CREAT | EXCL | RW)
        }),
        ("O_EXCL, new", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/new", CREAT | EXCL | RW)
        }),
        ("O_CREAT|O_DIRECTORY", Err(Errno::EINVAL), |s| {
            open_in_tree(s, b"/new", CREAT | DIRECTORY | RO)
        }),
        ("O_CREAT|O_DIRECTORY on a dir", Err(Errno::EINVAL), |s| {
            open_in_tree(s, b"/d", CREAT | DIRECTORY | RO)
        }),
        ("through a symlink to a dir", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/ld/new", CREAT | RW)
        }),
        ("dangling symlink creates its target", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/dangling", CREAT | RW)
        }),
        (
            "trailing slash, existing dir, O_EXCL",
            Err(Errno::EISDIR),
            |s| open_in_tree(s, b"/d/", CREAT | EXCL | RO),
        ),
        ("symlink to a dir", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/ld", CREAT | RW)
        }),
        (
            "dangling symlink into a missing dir",
            Err(Errno::ENOENT),
            |s| {
                posix_tree(s);
                s.symlink(b"/missing/x", b"/dl2");
                s.open(b"/dl2", CREAT | RW, 0o644)
            },
        ),
        (
            "dangling symlink whose body ends in a slash",
            Err(Errno::EISDIR),
            |s| {
                posix_tree(s);
                s.symlink(b"nowhere/", b"/dl3");
                s.open(b"/dl3", CREAT | RW, 0o644)
            },
        ),
        (
            "dangling symlink to a name of 256 bytes",
            Err(Errno::ENAMETOOLONG),
            |s| {
                posix_tree(s);
                s.symlink(&name(b'n', 256), b"/dl4");
                s.open(b"/dl4", CREAT | RW, 0o644)
            },
        ),
        ("O_NOFOLLOW on a regular file", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/f", CREAT | NOFOLLOW | RW)
        }),
        ("O_NOFOLLOW on a dangling symlink", Err(Errno::ELOOP), |s| {
            open_in_tree(s, b"/dangling", CREAT | NOFOLLOW | RW)
        }),
        ("O_NOFOLLOW on a symlink", Err(Errno::ELOOP), |s| {
            open_in_tree(s, b"/l", CREAT | NOFOLLOW | RW)
        }),
        ("symlink loop", Err(Errno::ELOOP), |s| {
            open_in_tree(s, b"/loop", CREAT | RW)
        }),
        ("name of 255 bytes", Ok(Fd(0)), |s| {
            posix_tree(s);
            let mut p = b"/".to_vec();
            p.extend(name(b'n', 255));
            s.open(&p, CREAT | RW, 0o644)
        }),
        ("name of 256 bytes", Err(Errno::ENAMETOOLONG), |s| {
            posix_tree(s);
            let mut p = b"/".to_vec();
            p.extend(name(b'n', 256));
            s.open(&p, CREAT | RW, 0o644)
        }),
    ]);
}

#[test]
fn open_creat_results() {
    // The dangling symlink's target is created in the symlink's directory.
    expect((Ok(true), Ok(Fd(0))), |s| {
        posix_tree(s);
        s.mkdir(b"/d/x");
        s.symlink(b"../made", b"/d/x/link");
        let fd = s.open(b"/d/x/link", CREAT | RW, 0o600).unwrap();
        s.close(fd).unwrap();
        (
            s.stat(b"/d/made").map(|st| st.file_type() == S_IFREG),
            s.open(b"/d/made", RO, 0),
        )
    });
    // A new file is empty and regular, with the creator's ids; the parent's mtime/ctime move.
    expect(
        (
            Shape {
                mode: S_IFREG | 0o640,
                nlink: 1,
                uid: 0,
                gid: 0,
                size: 0,
                blocks: 0,
            },
            true,
            true,
        ),
        |s| {
            s.mkdir(b"/p");
            s.set_times(b"/p", T2001, T2001);
            let fd = s.open(b"/p/n", CREAT | WO, 0o640).unwrap();
            let p = s.stat(b"/p").unwrap();
            (
                shape(s.fstat(fd).unwrap()),
                p.st_mtime > T2001,
                p.st_ctime > T2001,
            )
        },
    );
    // Opening an existing file with O_CREAT does not change it or its directory.
    expect(
        (
            Shape {
                mode: S_IFREG | 0o644,
                nlink: 1,
                uid: 0,
                gid: 0,
                size: 5,
                blocks: 8,
            },
            T2001,
        ),
        |s| {
            s.mkfile(b"/f", b"hello");
            s.set_times(b"/", T2001, T2001);
            let fd = s.open(b"/f", CREAT | RW, 0o600).unwrap();
            (shape(s.fstat(fd).unwrap()), s.stat(b"/").unwrap().st_mtime)
        },
    );
}

#[test]
fn open_mode_and_umask() {
    // (umask, mode) -> permission bits of the new file.
    expect(
        vec![0o644, 0o755, 0o777, 0o600, 0o4755, 0o7755, 0o000, 0o7750],
        |s| {
            let cases: [(u32, u32); 8] = [
                (0o022, 0o666),
                (0o022, 0o777),
                (0o000, 0o777),
                (0o077, 0o666),
                (0o022, 0o4755),
                (0o022, 0o7777),
                (0o777, 0o777),
                (0o027, 0o177777), // file-type bits in `mode` are ignored, special bits kept
            ];
            cases
                .iter()
                .enumerate()
                .map(|(i, &(mask, mode))| {
                    s.umask(mask);
                    let p = format!("/f{i}");
                    let fd = s.open(p.as_bytes(), CREAT | WO, mode).unwrap();
                    s.close(fd).unwrap();
                    let st = s.stat(p.as_bytes()).unwrap();
                    assert_eq!(st.file_type(), S_IFREG);
                    st.st_mode & 0o7777
                })
                .collect::<Vec<_>>()
        },
    );
}

#[test]
fn open_trunc() {
    // O_TRUNC empties a regular file, also with O_RDONLY (Linux truncates anyway).
    expect((0, 0, 5, 0), |s| {
        s.mkfile(b"/a", b"hello");
        s.mkfile(b"/b", b"hello");
        s.mkfile(b"/c", b"hello");
        let a = s.open(b"/a", WO | TRUNC, 0).unwrap();
        let b = s.open(b"/b", RO | TRUNC, 0).unwrap();
        let c = s.open(b"/c", RO, 0).unwrap();
        // O_TRUNC through a symlink truncates the target.
        s.symlink(b"c", b"/lc");
        let sz_c = s.fstat(c).unwrap().st_size;
        let lc = s.open(b"/lc", WO | TRUNC, 0).unwrap();
        (
            s.fstat(a).unwrap().st_size,
            s.fstat(b).unwrap().st_size,
            sz_c,
            s.fstat(lc).unwrap().st_size,
        )
    });
    // O_TRUNC stamps mtime and ctime (even when the file is already empty).
    expect((true, true, true, true), |s| {
        s.mkfile(b"/a", b"hello");
        s.mkfile(b"/z", b"");
        s.set_times(b"/a", T2001, T2001);
        s.set_times(b"/z", T2001, T2001);
        s.open(b"/a", WO | TRUNC, 0).unwrap();
        s.open(b"/z", WO | TRUNC, 0).unwrap();
        let a = s.stat(b"/a").unwrap();
        let z = s.stat(b"/z").unwrap();
        (
            a.st_mtime > T2001,
            a.st_ctime > T2001,
            z.st_mtime > T2001,
            z.st_atime == T2001,
        )
    });
    // O_TRUNC on a newly created file is harmless.
    expect(Ok(0), |s| {
        let fd = s.open(b"/n", CREAT | TRUNC | WO, 0o644)?;
        s.fstat(fd).map(|st| st.st_size)
    });
}

#[test]
fn open_access_modes() {
    // For each access mode: (read result, write result).
    expect(
        vec![
            (Ok(5), Err(Errno::EBADF)),
            (Err(Errno::EBADF), Ok(1)),
            (Ok(5), Ok(1)),
            (Err(Errno::EBADF), Err(Errno::EBADF)),
        ],
        |s| {
            s.mkfile(b"/f", b"hello");
            [RO, WO, RW, OpenFlags::ACCMODE]
                .iter()
                .map(|&m| {
                    let fd = s.open(b"/f", m, 0).unwrap();
                    let mut b = [0u8; 16];
                    let r = s.read(fd, &mut b);
                    let w = s.pwrite(fd, b"h", 0);
                    s.close(fd).unwrap();
                    (r, w)
                })
                .collect::<Vec<_>>()
        },
    );
    // Reading a directory descriptor: EISDIR.
    expect(Err(Errno::EISDIR), |s| {
        s.mkdir(b"/d");
        let fd = s.open(b"/d", RO, 0).unwrap();
        s.read(fd, &mut [0u8; 8])
    });
}

#[test]
fn open_append() {
    // Every write goes to the end, whatever the position; the position follows.
    expect((Ok(b"hello world!".to_vec()), Ok(12)), |s| {
        s.mkfile(b"/f", b"hello");
        let fd = s.open(b"/f", WO | APPEND, 0).unwrap();
        s.lseek(fd, 0, SEEK_SET).unwrap();
        s.write(fd, b" world").unwrap();
        s.lseek(fd, 2, SEEK_SET).unwrap();
        s.write(fd, b"!").unwrap();
        let pos = s.lseek(fd, 0, SEEK_CUR);
        (s.read_file(b"/f"), pos)
    });
    // Two descriptors appending never overwrite each other.
    expect(Ok(b"0a1b".to_vec()), |s| {
        let a = s.open(b"/f", CREAT | WO | APPEND, 0o644).unwrap();
        let b = s.open(b"/f", WO | APPEND, 0).unwrap();
        s.write(a, b"0").unwrap();
        s.write(b, b"a").unwrap();
        s.write(a, b"1").unwrap();
        s.write(b, b"b").unwrap();
        s.read_file(b"/f")
    });
    // O_APPEND with O_RDONLY: reads start at 0.
    expect(Ok(5), |s| {
        s.mkfile(b"/f", b"hello");
        let fd = s.open(b"/f", RO | APPEND, 0).unwrap();
        s.read(fd, &mut [0u8; 10])
    });
}

#[test]
fn open_directory_flag() {
    table::<R>(&[
        ("dir", Ok(Fd(0)), |s| open_in_tree(s, b"/d", DIRECTORY)),
        ("file", Err(Errno::ENOTDIR), |s| {
            open_in_tree(s, b"/f", DIRECTORY)
        }),
        ("symlink to a dir", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/ld", DIRECTORY)
        }),
        ("symlink to a file", Err(Errno::ENOTDIR), |s| {
            open_in_tree(s, b"/l", DIRECTORY)
        }),
        ("dangling symlink", Err(Errno::ENOENT), |s| {
            open_in_tree(s, b"/dangling", DIRECTORY)
        }),
        ("missing", Err(Errno::ENOENT), |s| {
            open_in_tree(s, b"/x", DIRECTORY)
        }),
        (
            "with O_NOFOLLOW on a symlink to a dir",
            Err(Errno::ENOTDIR),
            |s| open_in_tree(s, b"/ld", DIRECTORY | NOFOLLOW),
        ),
        ("for writing", Err(Errno::EISDIR), |s| {
            open_in_tree(s, b"/d", DIRECTORY | WO)
        }),
        ("file for writing", Err(Errno::ENOTDIR), |s| {
            open_in_tree(s, b"/f", DIRECTORY | WO)
        }),
    ]);
}

#[test]
fn open_nofollow_and_symlinks() {
    table::<R>(&[
        ("symlink followed", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/l", RO)
        }),
        ("absolute symlink followed", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/labs", RO)
        }),
        ("O_NOFOLLOW, symlink", Err(Errno::ELOOP), |s| {
            open_in_tree(s, b"/l", RO | NOFOLLOW)
        }),
        ("O_NOFOLLOW, symlink to a dir", Err(Errno::ELOOP), |s| {
            open_in_tree(s, b"/ld", RO | NOFOLLOW)
        }),
        ("O_NOFOLLOW, dangling", Err(Errno::ELOOP), |s| {
            open_in_tree(s, b"/dangling", RO | NOFOLLOW)
        }),
        (
            "O_NOFOLLOW, intermediate symlink followed",
            Ok(Fd(0)),
            |s| open_in_tree(s, b"/ld/f", RO | NOFOLLOW),
        ),
        ("O_NOFOLLOW, trailing slash follows", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/ld/", RO | NOFOLLOW)
        }),
        ("O_NOFOLLOW, regular file", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/f", RO | NOFOLLOW)
        }),
        ("dangling", Err(Errno::ENOENT), |s| {
            open_in_tree(s, b"/dangling", RO)
        }),
        ("loop", Err(Errno::ELOOP), |s| open_in_tree(s, b"/loop", RO)),
        ("loop as intermediate", Err(Errno::ELOOP), |s| {
            open_in_tree(s, b"/loop/x", RO)
        }),
        (
            "symlink to a file with a trailing slash",
            Err(Errno::ENOTDIR),
            |s| open_in_tree(s, b"/l/", RO),
        ),
        ("symlink to a dir with a trailing slash", Ok(Fd(0)), |s| {
            open_in_tree(s, b"/ld/", RO)
        }),
        ("dangling with a trailing slash", Err(Errno::ENOENT), |s| {
            open_in_tree(s, b"/dangling/", RO)
        }),
        ("symlink with dot-dot", Ok(Fd(0)), |s| {
            posix_tree(s);
            s.symlink(b"../f", b"/d/up");
            s.open(b"/d/up", RO, 0)
        }),
    ]);
}

#[test]
fn open_cloexec() {
    expect((Ok(FD_CLOEXEC), Ok(0)), |s| {
        s.mkfile(b"/f", b"");
        let a = s.open(b"/f", RO | CLOEXEC, 0).unwrap();
        let b = s.open(b"/f", RO, 0).unwrap();
        (s.fcntl(a, Fcntl::GetFd), s.fcntl(b, Fcntl::GetFd))
    });
}

#[test]
fn open_returns_lowest_free_descriptor() {
    expect(vec![0, 1, 2, 1, 3, 0], |s| {
        s.mkfile(b"/f", b"");
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(s.open(b"/f", RO, 0).unwrap().0);
        }
        s.close(Fd(1)).unwrap();
        v.push(s.open(b"/f", RO, 0).unwrap().0);
        v.push(s.open(b"/f", RO, 0).unwrap().0);
        s.close(Fd(0)).unwrap();
        v.push(s.open(b"/f", RO, 0).unwrap().0);
        v
    });
}

#[test]
fn open_dirfd() {
    table::<R>(&[
        ("relative to a dir fd", Ok(Fd(1)), |s| {
            posix_tree(s);
            let d = s.open(b"/d", DIRECTORY, 0).unwrap();
            s.openat(d, b"f", RO, 0)
        }),
        ("dot relative to a dir fd", Ok(Fd(1)), |s| {
            posix_tree(s);
            let d = s.open(b"/d", DIRECTORY, 0).unwrap();
            s.openat(d, b".", RO, 0)
        }),
        ("relative to a file fd", Err(Errno::ENOTDIR), |s| {
            posix_tree(s);
            let f = s.open(b"/f", RO, 0).unwrap();
            s.openat(f, b"x", RO, 0)
        }),
        ("absolute path ignores a file fd", Ok(Fd(1)), |s| {
            posix_tree(s);
            let f = s.open(b"/f", RO, 0).unwrap();
            s.openat(f, b"/f", RO, 0)
        }),
        ("relative to a bad fd", Err(Errno::EBADF), |s| {
            posix_tree(s);
            s.openat(Fd(7), b"f", RO, 0)
        }),
        ("relative to a negative fd", Err(Errno::EBADF), |s| {
            posix_tree(s);
            s.openat(Fd(-1), b"f", RO, 0)
        }),
        ("absolute path ignores a bad fd", Ok(Fd(0)), |s| {
            posix_tree(s);
            s.openat(Fd(-5), b"/f", RO, 0)
        }),
        ("empty path relative to a dir fd", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            let d = s.open(b"/d", DIRECTORY, 0).unwrap();
            s.openat(d, b"", RO, 0)
        }),
        ("relative to the cwd", Ok(Fd(0)), |s| {
            posix_tree(s);
            s.chdir(b"/d").unwrap();
            s.openat(CWD, b"sub/../f", RO, 0)
        }),
        ("dir fd of a removed dir", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            let d = s.open(b"/e", DIRECTORY, 0).unwrap();
            s.unlinkat(CWD, b"/e", uvfs::AtFlags::REMOVEDIR).unwrap();
            s.openat(d, b"new", CREAT | RW, 0o644)
        }),
        ("dot of a removed dir", Ok(Fd(1)), |s| {
            posix_tree(s);
            let d = s.open(b"/e", DIRECTORY, 0).unwrap();
            s.unlinkat(CWD, b"/e", uvfs::AtFlags::REMOVEDIR).unwrap();
            s.openat(d, b".", RO, 0)
        }),
    ]);
}

#[test]
fn open_name_and_path_limits() {
    table::<R>(&[
        ("name of 255 bytes, missing", Err(Errno::ENOENT), |s| {
            let mut p = b"/".to_vec();
            p.extend(name(b'n', 255));
            s.open(&p, RO, 0)
        }),
        ("name of 256 bytes", Err(Errno::ENAMETOOLONG), |s| {
            let mut p = b"/".to_vec();
            p.extend(name(b'n', 256));
            s.open(&p, RO, 0)
        }),
        ("long intermediate name", Err(Errno::ENAMETOOLONG), |s| {
            let mut p = b"/".to_vec();
            p.extend(name(b'n', 256));
            p.extend(b"/x");
            s.open(&p, RO, 0)
        }),
        ("long name below a missing dir", Err(Errno::ENOENT), |s| {
            let mut p = b"/missing/".to_vec();
            p.extend(name(b'n', 256));
            s.open(&p, RO, 0)
        }),
        ("long name below a file", Err(Errno::ENOTDIR), |s| {
            s.mkfile(b"/f", b"");
            let mut p = b"/f/".to_vec();
            p.extend(name(b'n', 256));
            s.open(&p, RO, 0)
        }),
        ("path of 4095 bytes", Ok(Fd(0)), |s| {
            s.mkfile(b"/f", b"");
            let mut p = name(b'/', 4094);
            p.push(b'f');
            s.open(&p, RO, 0)
        }),
        ("path of 4096 bytes", Err(Errno::ENAMETOOLONG), |s| {
            s.mkfile(b"/f", b"");
            let mut p = name(b'/', 4095);
            p.push(b'f');
            s.open(&p, RO, 0)
        }),
        ("path of 5000 bytes", Err(Errno::ENAMETOOLONG), |s| {
            s.open(&name(b'/', 5000), RO, 0)
        }),
        ("relative path of 4095 bytes", Ok(Fd(0)), |s| {
            s.mkfile(b"/f", b"");
            let mut p = b"./".repeat(2047);
            p.push(b'f');
            s.open(&p, RO, 0)
        }),
        (
            "relative path of 4096 bytes",
            Err(Errno::ENAMETOOLONG),
            |s| {
                s.mkfile(b"/f", b"");
                let mut p = b"./".repeat(2047);
                p.extend(b"/f");
                s.open(&p, RO, 0)
            },
        ),
    ]);
}

#[test]
fn open_symlink_limit_exactly_40() {
    // MAXSYMLINKS is 40 (path_resolution(7)): a chain of exactly 40 resolves.
    for u in each_fs() {
        let t = &u.task;
        let f = t.open("/target", RO | CREAT, 0o644).unwrap();
        t.close(f).unwrap();
        for i in 0..40 {
            let target = if i == 0 {
                "target".to_string()
            } else {
                format!("l{}", i - 1)
            };
            t.symlinkat(&target, Fd::AT_FDCWD, format!("/l{i}"))
                .unwrap();
        }
        assert_eq!(t.open("/l39", RO, 0), Ok(Fd(0)));
        assert_eq!(t.open("/l39", RO | CREAT, 0o644), Ok(Fd(1)));
        t.symlinkat("l39", Fd::AT_FDCWD, "/l40").unwrap();
        assert_eq!(t.open("/l40", RO, 0), Err(Errno::ELOOP));
        // Counted across components: 38 + /ldd + /dd/x = 40 resolves.
        t.mkdirat(Fd::AT_FDCWD, "/dd", 0o755).unwrap();
        t.symlinkat("/dd", Fd::AT_FDCWD, "/ldd").unwrap();
        t.symlinkat("/l37", Fd::AT_FDCWD, "/dd/x").unwrap();
        assert_eq!(t.open("/ldd/x", RO, 0), Ok(Fd(2)));
    }
}

#[test]
fn open_symlink_limit() {
    // A chain of 40 symlinks resolves; 41 is ELOOP.
    fn chain(s: &dyn Sys, n: usize) {
        s.mkfile(b"/target", b"x");
        symlink_chain(s, "target", n);
    }
    table::<R>(&[
        // 19, not 40: Linux counts links across its RCU-walk -> ref-walk retry
        // (`total_link_count` is not reset), and parallel tests mounting tmpfs make RCU walks
        // retry, so a chain of 21 to 40 links gives ELOOP now and then on the host. The
        // exact limit of 40 is checked on uvfs alone.
        ("19 links", Ok(Fd(0)), |s| {
            chain(s, 19);
            s.open(b"/l18", RO, 0)
        }),
        ("41 links", Err(Errno::ELOOP), |s| {
            chain(s, 41);
            s.open(b"/l40", RO, 0)
        }),
        ("41 links with O_CREAT", Err(Errno::ELOOP), |s| {
            chain(s, 41);
            s.open(b"/l40", RO | CREAT, 0o644)
        }),
        ("19 links with O_CREAT", Ok(Fd(0)), |s| {
            chain(s, 19);
            s.open(b"/l18", RO | CREAT, 0o644)
        }),
        (
            "41 links counted across components",
            Err(Errno::ELOOP),
            |s| {
                chain(s, 40);
                s.mkdir(b"/dd");
                s.symlink(b"/dd", b"/ldd");
                s.symlink(b"/l39", b"/dd/x");
                s.open(b"/ldd/x", RO, 0)
            },
        ),
        ("20 links counted across components", Ok(Fd(0)), |s| {
            chain(s, 18);
            s.mkdir(b"/dd");
            s.symlink(b"/dd", b"/ldd");
            s.symlink(b"/l17", b"/dd/x");
            s.open(b"/ldd/x", RO, 0)
        }),
    ]);
}

#[test]
fn open_permissions_non_root() {
    // uid 1000, gid 1000 against files of root (0/0) and of 2000/3000.
    fn setup(s: &mut dyn Sys) {
        s.umask(0);
        s.mkdirat(CWD, b"/w", 0o777).unwrap(); // world-writable, not sticky
        s.mkdirat(CWD, b"/ro", 0o755).unwrap();
        s.mkdirat(CWD, b"/nox", 0o766).unwrap(); // no search for others
        for (p, m) in [
            (&b"/w/600"[..], 0o600),
            (b"/w/644", 0o644),
            (b"/w/666", 0o666),
            (b"/w/000", 0o000),
            (b"/w/060", 0o060),
            (b"/ro/644", 0o644),
            (b"/nox/666", 0o666),
        ] {
            let fd = s.open(p, CREAT | WO, m).unwrap();
            s.close(fd).unwrap();
        }
        s.set_cred(1000, 1000, &[]);
    }
    table::<R>(&[
        ("read 0600 of root", Err(Errno::EACCES), |s| {
            setup(s);
            s.open(b"/w/600", RO, 0)
        }),
        ("read 0644 of root", Ok(Fd(0)), |s| {
            setup(s);
            s.open(b"/w/644", RO, 0)
        }),
        ("write 0644 of root", Err(Errno::EACCES), |s| {
            setup(s);
            s.open(b"/w/644", WO, 0)
        }),
        ("O_TRUNC 0644 of root read-only", Err(Errno::EACCES), |s| {
            setup(s);
            s.open(b"/w/644", RO | TRUNC, 0)
        }),
        (
            "O_CREAT on an existing 0644 of root for writing",
            Err(Errno::EACCES),
            |s| {
                setup(s);
                s.open(b"/w/644", CREAT | WO, 0o644)
            },
        ),
        ("write 0666 of root", Ok(Fd(0)), |s| {
            setup(s);
            s.open(b"/w/666", RW, 0)
        }),
        ("access mode 3 on 0644", Err(Errno::EACCES), |s| {
            setup(s);
            s.open(b"/w/644", OpenFlags::ACCMODE, 0)
        }),
        ("access mode 3 on 0666", Ok(Fd(0)), |s| {
            setup(s);
            s.open(b"/w/666", OpenFlags::ACCMODE, 0)
        }),
        ("group bits with a supplementary group", Ok(Fd(0)), |s| {
            setup(s);
            s.set_cred(1000, 1000, &[0]);
            s.open(b"/w/060", RW, 0)
        }),
        ("group bits as the primary group", Ok(Fd(0)), |s| {
            setup(s);
            s.set_cred(1000, 0, &[]);
            s.open(b"/w/060", RW, 0)
        }),
        ("group bits, other user", Err(Errno::EACCES), |s| {
            setup(s);
            s.open(b"/w/060", RO, 0)
        }),
        ("other user, mode 0000", Err(Errno::EACCES), |s| {
            setup(s);
            s.open(b"/w/000", RO, 0)
        }),
        ("create in a non-writable dir", Err(Errno::EACCES), |s| {
            setup(s);
            s.open(b"/ro/new", CREAT | WO, 0o644)
        }),
        (
            "O_EXCL of an existing name in a non-writable dir",
            Err(Errno::EEXIST),
            |s| {
                setup(s);
                s.open(b"/ro/644", CREAT | EXCL | WO, 0o644)
            },
        ),
        (
            "O_CREAT of an existing readable file in a non-writable dir",
            Ok(Fd(0)),
            |s| {
                setup(s);
                s.open(b"/ro/644", CREAT | RO, 0o644)
            },
        ),
        (
            "missing name in a non-writable dir without O_CREAT",
            Err(Errno::ENOENT),
            |s| {
                setup(s);
                s.open(b"/ro/new", RO, 0)
            },
        ),
        ("create in a world-writable dir", Ok(Fd(0)), |s| {
            setup(s);
            s.open(b"/w/new", CREAT | WO, 0o644)
        }),
        ("no search permission on a dir", Err(Errno::EACCES), |s| {
            setup(s);
            s.open(b"/nox/666", RO, 0)
        }),
        (
            "no search permission, missing name",
            Err(Errno::EACCES),
            |s| {
                setup(s);
                s.open(b"/nox/missing", RO, 0)
            },
        ),
        ("no search permission, the dir itself", Ok(Fd(0)), |s| {
            setup(s);
            s.open(b"/nox", RO, 0)
        }),
        ("no search permission, dot-dot", Err(Errno::EACCES), |s| {
            setup(s);
            s.open(b"/nox/..", RO, 0)
        }),
        ("root ignores the mode bits", Ok(Fd(0)), |s| {
            setup(s);
            s.set_cred(0, 0, &[]);
            s.open(b"/w/000", RW, 0)
        }),
        ("root searches a dir with no x bits", Ok(Fd(0)), |s| {
            s.mkdirat(CWD, b"/n", 0o000).unwrap();
            s.mkfile(b"/n/f", b"");
            s.open(b"/n/f", RO, 0)
        }),
    ]);
    // A file created by a non-root user gets its uid and gid.
    expect(ok((1000, 1001, 0o100640)), |s| {
        setup(s);
        s.set_cred(1000, 1001, &[]);
        let fd = s.open(b"/w/mine", CREAT | WO, 0o640)?;
        let st = s.fstat(fd)?;
        Ok((st.st_uid, st.st_gid, st.st_mode))
    });
}

/// Bug: `open(O_NOATIME)` by a user who does not own the file succeeded; Linux returns
/// EPERM (open(2)). Cause: `do_open` accepted `O_NOATIME` as an ignored flag and never made
/// `may_open`'s ownership check. Fix: `do_open` returns EPERM unless the caller owns the
/// inode or is root (open.rs).
#[test]
fn regression_open_noatime_needs_ownership() {
    table::<R>(&[
        ("root, file of another user", Ok(Fd(1)), |s| {
            s.umask(0);
            s.mkdirat(CWD, b"/w", 0o777).unwrap();
            s.set_cred(1000, 1000, &[]);
            let fd = s.open(b"/w/f", CREAT | WO, 0o644).unwrap();
            s.set_cred(0, 0, &[]);
            assert_eq!(fd, Fd(0));
            s.open(b"/w/f", RO | OpenFlags::NOATIME, 0)
        }),
        ("owner", Ok(Fd(1)), |s| {
            s.umask(0);
            s.mkdirat(CWD, b"/w", 0o777).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.open(b"/w/f", CREAT | WO, 0o644).unwrap();
            s.open(b"/w/f", RO | OpenFlags::NOATIME, 0)
        }),
        ("not the owner", Err(Errno::EPERM), |s| {
            s.mkfile(b"/f", b"");
            s.set_cred(1000, 1000, &[]);
            s.open(b"/f", RO | OpenFlags::NOATIME, 0)
        }),
    ]);
}

/// Bug (found by tests/differential.rs): `open("l", O_CREAT | O_NOFOLLOW)` on a symlink
/// of another user in the sticky, world-writable root gave ELOOP; Linux gives EACCES, even
/// to root.
/// Cause: Linux's `do_open` runs `may_create_in_sticky` on an existing O_CREAT target
/// before `may_open`'s ELOOP; with protected_regular/protected_fifos at 0 it refuses only
/// other types (a symlink here) owned by neither the directory's owner nor the caller.
/// Fix: `openat` makes that check before ELOOP.
#[test]
fn creat_nofollow_on_foreign_symlink_in_sticky_dir() {
    expect((Err(Errno::EACCES), Err(Errno::ELOOP)), |s| {
        s.thread(&mut |t| {
            t.set_cred(1000, 1000, &[]);
            t.symlink(b"a", b"/l");
        });
        s.symlink(b"a", b"/m");
        let flags = CREAT | OpenFlags::NOFOLLOW;
        (s.open(b"/l", flags, 0o644), s.open(b"/m", flags, 0o644))
    });
}

/// Bug (found by tests/differential.rs): `open("l", O_CREAT)` through symlink `l` left the
/// link's atime alone; Linux stamps it (relatime rules) as any walk that follows a link.
/// Cause: the O_CREAT path follows a final symlink itself (restarting at its body) and
/// did not do `pick_link`'s `touch_atime`.
/// Fix: it touches the link's atime after counting it.
#[test]
fn creat_through_symlink_stamps_link_atime() {
    expect(true, |s| {
        s.mkfile(b"/a", b"");
        s.symlink(b"a", b"/l");
        s.utimensat(
            CWD,
            b"/l",
            Some(&[T2001, T2002]),
            uvfs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .unwrap();
        s.open(b"/l", CREAT, 0o644).unwrap();
        s.lstat(b"/l").unwrap().st_atime != T2001
    });
}

/// Bug (found by tests/differential.rs): `open(O_TRUNC)` by a non-root owner kept the
/// set-group-ID bit of a group-executable file; Linux clears it (and set-user-ID).
/// Cause: open's truncation skipped `kill_suid`, which ftruncate and write do; Linux's
/// `handle_truncate` -> `do_truncate` adds the `dentry_needs_remove_privs` attributes.
/// Fix: open's truncation runs `kill_suid` first.
#[test]
fn open_trunc_clears_setid_bits() {
    expect(ok((0o100755, 0o104755)), |s| {
        let mut modes = (0, 0);
        s.thread(&mut |t| {
            t.set_cred(1000, 1000, &[]);
            t.umask(0);
            let fd = t.open(b"/b", CREAT | WO, 0o6755).unwrap();
            t.close(fd).unwrap();
            t.close(t.open(b"/b", WO | OpenFlags::TRUNC, 0).unwrap())
                .unwrap();
            modes.0 = t.stat(b"/b").unwrap().st_mode;
        });
        let fd = s.open(b"/r", CREAT | WO, 0o4755).unwrap();
        s.close(fd).unwrap();
        s.close(s.open(b"/r", WO | OpenFlags::TRUNC, 0).unwrap())
            .unwrap();
        modes.1 = s.stat(b"/r").unwrap().st_mode;
        Ok(modes)
    });
}

/// Bug (found by tests/differential.rs): `open("s", O_CREAT)` on a socket of another user
/// in the sticky, world-writable root gave ENXIO; Linux gives EACCES, even to root (and
/// ENXIO without O_CREAT).
/// Cause: as `creat_nofollow_on_foreign_symlink_in_sticky_dir`: `may_create_in_sticky`
/// covers every existing O_CREAT target that is not a directory, a regular file or a FIFO;
/// uvfs checked only symlinks.
/// Fix: the check runs for every such target.
#[test]
fn creat_on_foreign_socket_in_sticky_dir() {
    expect((Err(Errno::EACCES), Err(Errno::ENXIO)), |s| {
        s.thread(&mut |t| {
            t.set_cred(1000, 1000, &[]);
            t.mknodat(CWD, b"/s", S_IFSOCK | 0o644, 0).unwrap();
        });
        (s.open(b"/s", CREAT, 0o644), s.open(b"/s", RO, 0))
    });
}

/// `ETXTBSY`, as Linux's `i_writecount` (`deny_write_access` at exec, `get_write_access` at
/// an open for writing and at `truncate`), on every file system behind the seam: while an
/// [`open_exec`](uvfs::Task::open_exec) file is open (a program runs it), opens for writing
/// and `truncate` fail with `ETXTBSY` (after the permission check: `EACCES` first), a
/// read-only or `O_PATH` open does not; while a file is open for writing, the exec open
/// fails; the last close of either gives the file back. (pjdfstest's `open::etxtbsy` and
/// `truncate::etxtbsy` assert the same on Linux.)
#[test]
fn etxtbsy_between_exec_and_writers() {
    for u in each_fs() {
        let t = &u.task;
        let fd = t
            .openat(
                Fd::AT_FDCWD,
                "/prog",
                OpenFlags::CREAT | OpenFlags::WRONLY,
                0o755,
            )
            .unwrap();
        assert_eq!(t.write(fd, b"#!/bin/sh\n"), Ok(10));
        assert_eq!(
            t.open_exec(Fd::AT_FDCWD, "/prog").err(),
            Some(Errno::ETXTBSY),
            "exec of a file open for writing"
        );
        t.close(fd).unwrap();
        let exe = t.open_exec(Fd::AT_FDCWD, "/prog").unwrap();
        let open = |fl: OpenFlags| {
            t.openat(Fd::AT_FDCWD, "/prog", fl, 0)
                .and_then(|fd| t.close(fd))
        };
        assert_eq!(open(OpenFlags::WRONLY), Err(Errno::ETXTBSY));
        assert_eq!(open(OpenFlags::RDWR | TRUNC), Err(Errno::ETXTBSY));
        assert_eq!(open(RO | TRUNC), Err(Errno::ETXTBSY), "handle_truncate");
        assert_eq!(open(RO), Ok(()));
        assert_eq!(open(OpenFlags::PATH | OpenFlags::WRONLY), Ok(()));
        assert_eq!(t.truncate("/prog", 0), Err(Errno::ETXTBSY));
        // A second run of the same program is allowed.
        let exe2 = t.open_exec(Fd::AT_FDCWD, "/prog").unwrap();
        drop(exe);
        assert_eq!(open(OpenFlags::WRONLY), Err(Errno::ETXTBSY), "one run left");
        // EACCES comes first (may_open before do_dentry_open; vfs_truncate's permission
        // check before get_write_access).
        let mut other = t.fork();
        other.set_cred(uvfs::Cred::new(1000, 1000, &[]));
        assert_eq!(
            other
                .openat(Fd::AT_FDCWD, "/prog", OpenFlags::WRONLY, 0)
                .err(),
            Some(Errno::EACCES)
        );
        assert_eq!(other.truncate("/prog", 0), Err(Errno::EACCES));
        drop(exe2);
        assert_eq!(open(OpenFlags::WRONLY), Ok(()), "no run left");
        assert_eq!(t.truncate("/prog", 1), Ok(()));
        assert_eq!(
            t.fstatat(Fd::AT_FDCWD, "/prog", uvfs::AtFlags::empty())
                .unwrap()
                .st_size,
            1
        );
    }
}
