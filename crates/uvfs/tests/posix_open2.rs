//! `O_PATH`, `O_TMPFILE` and `openat2(2)`, asserted against Linux (each case also runs on
//! the host kernel, see `common`).

mod common;
use common::*;
use uvfs::open::{Fcntl, FD_CLOEXEC};
use uvfs::types::*;
use uvfs::{AtFlags, Errno, Fd, OpenFlags};

const PATH: OpenFlags = OpenFlags::PATH;
const DIRECTORY: OpenFlags = OpenFlags::DIRECTORY;
const NOFOLLOW: OpenFlags = OpenFlags::NOFOLLOW;
const EMPTY: AtFlags = AtFlags::EMPTY_PATH;

/// Opens `path` with `O_PATH | flags` in [`posix_tree`]; returns `F_GETFL` and the file type.
fn o_path(s: &dyn Sys, path: &[u8], flags: OpenFlags) -> Result<(i32, u32), Errno> {
    posix_tree(s);
    let fd = s.open(path, PATH | flags, 0o644)?;
    let fl = s.fcntl(fd, Fcntl::GetFl).unwrap();
    let st = s.fstat(fd).unwrap();
    s.close(fd).unwrap();
    Ok((fl, st.st_mode & S_IFMT))
}

type P = Result<(i32, u32), Errno>;
const FL_PATH: i32 = OpenFlags::PATH.bits() as i32;
const FL_DIR: i32 = OpenFlags::DIRECTORY.bits() as i32;
const FL_NOFOLLOW: i32 = OpenFlags::NOFOLLOW.bits() as i32;

#[test]
fn o_path_open() {
    table::<P>(&[
        ("file", Ok((FL_PATH, S_IFREG)), |s| o_path(s, b"/f", RO)),
        ("dir", Ok((FL_PATH, S_IFDIR)), |s| o_path(s, b"/d", RO)),
        ("symlink followed", Ok((FL_PATH, S_IFREG)), |s| {
            o_path(s, b"/l", RO)
        }),
        (
            "symlink itself with O_NOFOLLOW",
            Ok((FL_PATH | FL_NOFOLLOW, S_IFLNK)),
            |s| o_path(s, b"/l", NOFOLLOW),
        ),
        (
            "dangling symlink with O_NOFOLLOW",
            Ok((FL_PATH | FL_NOFOLLOW, S_IFLNK)),
            |s| o_path(s, b"/dangling", NOFOLLOW),
        ),
        ("dangling symlink", Err(Errno::ENOENT), |s| {
            o_path(s, b"/dangling", RO)
        }),
        (
            "symlink with a trailing slash is followed",
            Ok((FL_PATH | FL_NOFOLLOW, S_IFDIR)),
            |s| o_path(s, b"/ld/", NOFOLLOW),
        ),
        (
            "O_DIRECTORY on a dir",
            Ok((FL_PATH | FL_DIR, S_IFDIR)),
            |s| o_path(s, b"/d", DIRECTORY),
        ),
        ("O_DIRECTORY on a file", Err(Errno::ENOTDIR), |s| {
            o_path(s, b"/f", DIRECTORY)
        }),
        (
            "O_DIRECTORY|O_NOFOLLOW on a symlink to a dir",
            Err(Errno::ENOTDIR),
            |s| o_path(s, b"/ld", DIRECTORY | NOFOLLOW),
        ),
        (
            "access mode and O_TRUNC dropped",
            Ok((FL_PATH, S_IFDIR)),
            |s| o_path(s, b"/d", RW | OpenFlags::TRUNC | OpenFlags::APPEND),
        ),
        ("O_CREAT dropped: missing", Err(Errno::ENOENT), |s| {
            o_path(s, b"/new", CREAT | OpenFlags::EXCL)
        }),
        (
            "O_CREAT|O_DIRECTORY is no EINVAL",
            Ok((FL_PATH | FL_DIR, S_IFDIR)),
            |s| o_path(s, b"/d", CREAT | DIRECTORY),
        ),
        (
            "O_CREAT|O_EXCL on an existing file",
            Ok((FL_PATH, S_IFREG)),
            |s| o_path(s, b"/f", CREAT | OpenFlags::EXCL),
        ),
        ("missing", Err(Errno::ENOENT), |s| o_path(s, b"/x", RO)),
        ("through a file", Err(Errno::ENOTDIR), |s| {
            o_path(s, b"/f/x", RO)
        }),
    ]);
}

#[test]
fn o_path_keeps_data_and_times() {
    // O_TRUNC is dropped: the data stays; the atime is not touched.
    expect(ok((5, T2001)), |s| {
        posix_tree(s);
        s.set_times(b"/f", T2001, T2002);
        let fd = s.open(b"/f", PATH | OpenFlags::TRUNC | WO, 0).unwrap();
        let st = s.fstat(fd)?;
        Ok((st.st_size, st.st_atime))
    });
    // The descriptor is close-on-exec with O_CLOEXEC, and F_SETFD works.
    expect(ok((FD_CLOEXEC, 0)), |s| {
        posix_tree(s);
        let fd = s.open(b"/f", PATH | OpenFlags::CLOEXEC, 0).unwrap();
        let a = s.fcntl(fd, Fcntl::GetFd)?;
        s.fcntl(fd, Fcntl::SetFd(0))?;
        Ok((a, s.fcntl(fd, Fcntl::GetFd)?))
    });
}

/// Opens `/f` (or `/d` for `dir`) with `O_PATH` at descriptor 0.
fn pfd(s: &dyn Sys, dir: bool) -> Fd {
    posix_tree(s);
    s.open(if dir { b"/d" } else { b"/f" }, PATH, 0).unwrap()
}

type U = Result<u64, Errno>;

#[test]
fn o_path_refused_calls() {
    table::<U>(&[
        ("read", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.read(fd, &mut [0; 4]).map(|n| n as u64)
        }),
        ("write", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.write(fd, b"x").map(|n| n as u64)
        }),
        ("pread", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.pread(fd, &mut [0; 4], 0).map(|n| n as u64)
        }),
        ("pwrite", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.pwrite(fd, b"x", 0).map(|n| n as u64)
        }),
        ("lseek", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.lseek(fd, 0, SEEK_SET).map(|n| n as u64)
        }),
        ("ftruncate", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.ftruncate(fd, 0).map(|_| 0)
        }),
        ("getdents64", Err(Errno::EBADF), |s| {
            let fd = pfd(s, true);
            s.getdents64(fd, &mut [0; 4096]).map(|n| n as u64)
        }),
        ("futimens", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.futimens(fd, None).map(|_| 0)
        }),
        ("fsync", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.fsync(fd).map(|_| 0)
        }),
        ("fdatasync", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.fdatasync(fd).map(|_| 0)
        }),
        ("fchmod", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.fchmod(fd, 0o600).map(|_| 0)
        }),
        ("fchown", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.fchown(fd, 0, 0).map(|_| 0)
        }),
        ("F_SETFL", Err(Errno::EBADF), |s| {
            let fd = pfd(s, false);
            s.fcntl(fd, Fcntl::SetFl(0)).map(|n| n as u64)
        }),
    ]);
}

#[test]
fn o_path_allowed_calls() {
    table::<U>(&[
        ("fstat", Ok(5), |s| {
            let fd = pfd(s, false);
            s.fstat(fd).map(|st| st.st_size as u64)
        }),
        ("fstatat AT_EMPTY_PATH", Ok(5), |s| {
            let fd = pfd(s, false);
            s.fstatat(fd, b"", EMPTY).map(|st| st.st_size as u64)
        }),
        ("fstatfs", Ok(0x0102_1994), |s| {
            let fd = pfd(s, false);
            s.fstatfs(fd).map(|st| st.f_type as u64)
        }),
        ("as a dirfd", Ok(4), |s| {
            let fd = pfd(s, true);
            let f = s.openat(fd, b"f", RO, 0)?;
            s.fstat(f).map(|st| st.st_size as u64)
        }),
        ("as a dirfd, a file", Err(Errno::ENOTDIR), |s| {
            let fd = pfd(s, false);
            s.openat(fd, b"x", RO, 0).map(|f| f.0 as u64)
        }),
        ("fchdir", Ok(4), |s| {
            let fd = pfd(s, true);
            s.fchdir(fd)?;
            s.stat(b"f").map(|st| st.st_size as u64)
        }),
        ("fchdir, a file", Err(Errno::ENOTDIR), |s| {
            let fd = pfd(s, false);
            s.fchdir(fd).map(|_| 0)
        }),
        ("dup", Ok(1), |s| {
            let fd = pfd(s, false);
            s.dup(fd).map(|f| f.0 as u64)
        }),
        ("dup2 onto itself", Ok(0), |s| {
            let fd = pfd(s, false);
            s.dup2(fd, fd).map(|f| f.0 as u64)
        }),
        ("dup3", Ok(5), |s| {
            let fd = pfd(s, false);
            s.dup3(fd, Fd(5), OpenFlags::CLOEXEC).map(|f| f.0 as u64)
        }),
        ("F_DUPFD", Ok(3), |s| {
            let fd = pfd(s, false);
            s.fcntl(fd, Fcntl::DupFd(3)).map(|n| n as u64)
        }),
        ("F_DUPFD_CLOEXEC", Ok(3), |s| {
            let fd = pfd(s, false);
            s.fcntl(fd, Fcntl::DupFdCloexec(3)).map(|n| n as u64)
        }),
        ("F_SETFD", Ok(0), |s| {
            let fd = pfd(s, false);
            s.fcntl(fd, Fcntl::SetFd(FD_CLOEXEC)).map(|n| n as u64)
        }),
        ("fchmodat AT_EMPTY_PATH", Ok(0o600), |s| {
            let fd = pfd(s, false);
            s.fchmodat(fd, b"", 0o600, EMPTY)?;
            s.fstat(fd).map(|st| (st.st_mode & 0o7777) as u64)
        }),
        ("fchownat AT_EMPTY_PATH", Ok(7), |s| {
            let fd = pfd(s, false);
            s.fchownat(fd, b"", 7, 7, EMPTY)?;
            s.fstat(fd).map(|st| st.st_uid as u64)
        }),
        ("faccessat2 AT_EMPTY_PATH", Ok(0), |s| {
            let fd = pfd(s, false);
            s.faccessat2(fd, b"", 4, EMPTY).map(|_| 0)
        }),
        ("utimensat AT_EMPTY_PATH", Ok(0), |s| {
            let fd = pfd(s, false);
            s.utimensat(fd, b"", None, EMPTY).map(|_| 0)
        }),
        ("readlinkat of an O_PATH symlink", Ok(1), |s| {
            posix_tree(s);
            let fd = s.open(b"/l", PATH | NOFOLLOW, 0)?;
            s.readlinkat(fd, b"", &mut [0; 16]).map(|n| n as u64)
        }),
        (
            "readlinkat empty path, not a symlink",
            Err(Errno::ENOENT),
            |s| {
                let fd = pfd(s, false);
                s.readlinkat(fd, b"", &mut [0; 16]).map(|n| n as u64)
            },
        ),
        ("close", Ok(0), |s| {
            let fd = pfd(s, false);
            s.close(fd).map(|_| 0)
        }),
    ]);
}

#[test]
fn o_path_permissions() {
    table::<U>(&[
        ("file without any permission", Ok(0), |s| {
            posix_tree(s);
            s.openat(CWD, b"/x", CREAT | WO, 0).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.open(b"/x", PATH, 0).map(|_| 0)
        }),
        ("dir without search: O_PATH open is fine", Ok(0), |s| {
            posix_tree(s);
            s.mkdirat(CWD, b"/n", 0o600).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.open(b"/n", PATH, 0).map(|_| 0)
        }),
        (
            "dir without search: lookups in it are not",
            Err(Errno::EACCES),
            |s| {
                posix_tree(s);
                s.mkdirat(CWD, b"/n", 0o600).unwrap();
                s.set_cred(1000, 1000, &[]);
                let fd = s.open(b"/n", PATH, 0).unwrap();
                s.openat(fd, b"x", PATH, 0).map(|f| f.0 as u64)
            },
        ),
        ("path without search", Err(Errno::EACCES), |s| {
            posix_tree(s);
            s.mkdirat(CWD, b"/n", 0o600).unwrap();
            s.mkfile(b"/n/x", b"");
            s.set_cred(1000, 1000, &[]);
            s.open(b"/n/x", PATH, 0).map(|f| f.0 as u64)
        }),
        ("fchdir needs search on the dir", Err(Errno::EACCES), |s| {
            posix_tree(s);
            s.mkdirat(CWD, b"/n", 0o600).unwrap();
            s.set_cred(1000, 1000, &[]);
            let fd = s.open(b"/n", PATH, 0).unwrap();
            s.fchdir(fd).map(|_| 0)
        }),
    ]);
}

const TMPFILE: OpenFlags = OpenFlags::TMPFILE;
/// `__O_TMPFILE` alone.
const TMPFILE_BIT: OpenFlags = OpenFlags::from_bits_retain(0o20000000);

type T = Result<(Shape, i32), Errno>;

/// Opens an `O_TMPFILE` in `dir` with `flags` and `mode`; returns its shape and `F_GETFL`.
fn tmpfile(s: &dyn Sys, dir: &[u8], flags: OpenFlags, mode: u32) -> T {
    posix_tree(s);
    let fd = s.open(dir, flags, mode)?;
    let st = s.fstat(fd).unwrap();
    Ok((shape(st), s.fcntl(fd, Fcntl::GetFl).unwrap()))
}

fn reg(mode: u32, uid: u32, gid: u32) -> Shape {
    Shape {
        mode: S_IFREG | mode,
        nlink: 0,
        uid,
        gid,
        size: 0,
        blocks: 0,
    }
}

const FL_TMP_RW: i32 = (OpenFlags::TMPFILE.bits() | RW.bits() | 0o100000) as i32;

#[test]
fn o_tmpfile_open() {
    table::<T>(&[
        ("O_RDWR", Ok((reg(0o600, 0, 0), FL_TMP_RW)), |s| {
            tmpfile(s, b"/d", TMPFILE | RW, 0o600)
        }),
        ("umask applies", Ok((reg(0o644, 0, 0), FL_TMP_RW)), |s| {
            tmpfile(s, b"/d", TMPFILE | RW, 0o666)
        }),
        (
            "O_WRONLY|O_EXCL",
            Ok((
                reg(0o600, 0, 0),
                (OpenFlags::TMPFILE.bits() | WO.bits() | OpenFlags::EXCL.bits() | 0o100000) as i32
                    & !(OpenFlags::EXCL.bits() as i32),
            )),
            |s| tmpfile(s, b"/d", TMPFILE | WO | OpenFlags::EXCL, 0o600),
        ),
        (
            "through a symlink to a dir",
            Ok((reg(0o600, 0, 0), FL_TMP_RW)),
            |s| tmpfile(s, b"/ld", TMPFILE | RW, 0o600),
        ),
        (
            "symlink to a dir with O_NOFOLLOW",
            Err(Errno::ENOTDIR),
            |s| tmpfile(s, b"/ld", TMPFILE | RW | NOFOLLOW, 0o600),
        ),
        ("O_RDONLY", Err(Errno::EINVAL), |s| {
            tmpfile(s, b"/d", TMPFILE | RO, 0o600)
        }),
        ("__O_TMPFILE without O_DIRECTORY", Err(Errno::EINVAL), |s| {
            tmpfile(s, b"/d", TMPFILE_BIT | RW, 0o600)
        }),
        ("with O_CREAT", Err(Errno::EINVAL), |s| {
            tmpfile(s, b"/d", TMPFILE | RW | CREAT, 0o600)
        }),
        ("on a file", Err(Errno::ENOTDIR), |s| {
            tmpfile(s, b"/f", TMPFILE | RW, 0o600)
        }),
        ("on a missing dir", Err(Errno::ENOENT), |s| {
            tmpfile(s, b"/x", TMPFILE | RW, 0o600)
        }),
        ("on a dangling symlink", Err(Errno::ENOENT), |s| {
            tmpfile(s, b"/dangling", TMPFILE | RW, 0o600)
        }),
        (
            "in a dir without write permission",
            Err(Errno::EACCES),
            |s| {
                posix_tree(s);
                s.mkdirat(CWD, b"/ro", 0o555).unwrap();
                s.set_cred(1000, 1000, &[]);
                s.open(b"/ro", TMPFILE | RW, 0o600)
                    .map(|fd| (shape(s.fstat(fd).unwrap()), 0))
            },
        ),
        (
            "as another user",
            Ok((reg(0o640, 1000, 1000), FL_TMP_RW)),
            |s| {
                posix_tree(s);
                s.set_cred(1000, 1000, &[]);
                let fd = s.open(b"/", TMPFILE | RW, 0o640)?;
                Ok((shape(s.fstat(fd)?), s.fcntl(fd, Fcntl::GetFl)?))
            },
        ),
        (
            "O_PATH wins over O_TMPFILE",
            Ok((
                Shape {
                    mode: S_IFDIR | 0o755,
                    nlink: 3,
                    uid: 0,
                    gid: 0,
                    size: 80,
                    blocks: 0,
                },
                FL_PATH | FL_DIR,
            )),
            |s| tmpfile(s, b"/d", TMPFILE | RW | PATH, 0o600),
        ),
    ]);
}

#[test]
fn o_tmpfile_in_setgid_dir() {
    expect_root_mode(0o2777, ok((0o2755 | S_IFREG, 0, 0)), |s| {
        let fd = s.open(b"/", TMPFILE | RW, 0o2755)?;
        let st = s.fstat(fd)?;
        Ok((st.st_mode, st.st_gid, st.st_nlink))
    });
    // Not in the group: the set-group-ID bit of a group-executable file goes.
    expect_root_mode(0o2777, ok((0o755 | S_IFREG, 0)), |s| {
        s.set_cred(1000, 1000, &[]);
        let fd = s.open(b"/", TMPFILE | RW, 0o2755)?;
        let st = s.fstat(fd)?;
        Ok((st.st_mode, st.st_gid))
    });
}

#[test]
fn o_tmpfile_data_and_directory() {
    // Data goes through the descriptor; the directory shows nothing and keeps its times.
    expect(
        ok((
            b"tmp data".to_vec(),
            8,
            vec!["f".to_string(), "sub".to_string()],
            T2002,
        )),
        |s| {
            posix_tree(s);
            s.set_times(b"/d", T2001, T2002);
            let fd = s.open(b"/d", TMPFILE | RW, 0o600)?;
            s.write(fd, b"tmp data")?;
            s.lseek(fd, 0, SEEK_SET)?;
            let data = s.read_to_end(fd)?;
            let size = s.fstat(fd)?.st_size;
            let ls = s.ls(b"/d")?;
            Ok((data, size, ls, s.stat(b"/d")?.st_mtime))
        },
    );
    // Two tmpfiles are distinct inodes; each keeps its own data.
    same(|s| {
        posix_tree(s);
        let a = s.open(b"/d", TMPFILE | RW, 0o600).unwrap();
        let b = s.open(b"/d", TMPFILE | RW, 0o600).unwrap();
        s.write(a, b"a").unwrap();
        s.write(b, b"bb").unwrap();
        let (sa, sb) = (s.fstat(a).unwrap(), s.fstat(b).unwrap());
        (sa.st_ino != sb.st_ino, sa.st_size, sb.st_size)
    });
    // A tmpfile in a removed directory: Linux's shmem_tmpfile does not check for it.
    expect(ok(()), |s| {
        posix_tree(s);
        let d = s.open(b"/d/sub", RO, 0).unwrap();
        s.unlinkat(CWD, b"/d/sub", AtFlags::REMOVEDIR).unwrap();
        s.openat(d, b".", TMPFILE | RW, 0o600).map(|_| ())
    });
}

/// uvfs only: the data of a tmpfile is freed at its last close (no size limits to observe
/// it through `statfs`, so through the inode's reference count).
#[test]
fn o_tmpfile_freed_at_last_close() {
    let mnt = uvfs::tmpfs::mount(Default::default());
    let t = uvfs::Task::init(&mnt);
    let fd = t.open("/", TMPFILE | RW, 0o600).unwrap();
    t.write(fd, &[7u8; 10000]).unwrap();
    let dup = t.dup(fd).unwrap();
    let inode = std::sync::Arc::downgrade(t.files().fget(fd.0).unwrap().inode());
    t.close(fd).unwrap();
    assert!(inode.upgrade().is_some(), "still open through the dup");
    t.close(dup).unwrap();
    assert!(inode.upgrade().is_none(), "freed at the last close");
}

use uvfs::open::{
    OpenHow, RESOLVE_BENEATH, RESOLVE_CACHED, RESOLVE_IN_ROOT, RESOLVE_NO_MAGICLINKS,
    RESOLVE_NO_SYMLINKS, RESOLVE_NO_XDEV,
};

/// [`posix_tree`] plus, in `/d`: `abs -> /f`, `up -> ../f`, `in -> sub`, `sub/up -> ../f`,
/// `sub/g` = "g", `dl -> nowhere`. Returns `/d` opened `O_PATH|O_DIRECTORY` (descriptor 0).
fn openat2_tree(s: &dyn Sys) -> Fd {
    posix_tree(s);
    s.symlink(b"/f", b"/d/abs");
    s.symlink(b"../f", b"/d/up");
    s.symlink(b"sub", b"/d/in");
    s.symlink(b"../f", b"/d/sub/up");
    s.mkfile(b"/d/sub/g", b"g");
    s.symlink(b"nowhere", b"/d/dl");
    s.open(b"/d", PATH | DIRECTORY, 0).unwrap()
}

/// `openat2(/d, path, how)` in `openat2_tree`; the file type and size of what was opened.
fn o2(s: &dyn Sys, path: &[u8], flags: OpenFlags, mode: u64, resolve: u64) -> P2 {
    let d = openat2_tree(s);
    let how = OpenHow {
        flags: flags.bits() as u64,
        mode,
        resolve,
    };
    let fd = s.openat2(d, path, &how)?;
    let st = s.fstat(fd).unwrap();
    Ok((st.st_mode & S_IFMT, st.st_size))
}

type P2 = Result<(u32, i64), Errno>;
const IN_D: P2 = Ok((S_IFREG, 4)); // /d/f
const TOP: P2 = Ok((S_IFREG, 5)); // /f
const G: P2 = Ok((S_IFREG, 1)); // /d/sub/g
const DIR_D: P2 = Ok((S_IFDIR, 40 + 20 * 6)); // /d itself

#[test]
fn openat2_argument_checks() {
    table::<P2>(&[
        ("plain", IN_D, |s| o2(s, b"f", RO, 0, 0)),
        ("unknown flag bit", Err(Errno::EINVAL), |s| {
            o2(s, b"f", OpenFlags::from_bits_retain(1 << 30), 0, 0)
        }),
        ("flag bit above 32", Err(Errno::EINVAL), |s| {
            let d = openat2_tree(s);
            let how = OpenHow {
                flags: 1 << 40,
                ..Default::default()
            };
            s.openat2(d, b"f", &how).map(|_| (0, 0))
        }),
        ("unknown resolve bit", Err(Errno::EINVAL), |s| {
            o2(s, b"f", RO, 0, 0x40)
        }),
        ("RESOLVE_BENEATH|RESOLVE_IN_ROOT", Err(Errno::EINVAL), |s| {
            o2(s, b"f", RO, 0, RESOLVE_BENEATH | RESOLVE_IN_ROOT)
        }),
        ("mode without O_CREAT", Err(Errno::EINVAL), |s| {
            o2(s, b"f", RO, 0o644, 0)
        }),
        ("mode above 0o7777", Err(Errno::EINVAL), |s| {
            o2(s, b"new", CREAT | WO, 0o10644, 0)
        }),
        ("mode with O_CREAT", Ok((S_IFREG, 0)), |s| {
            o2(s, b"new", CREAT | WO, 0o7644, 0)
        }),
        ("mode with O_TMPFILE", Ok((S_IFREG, 0)), |s| {
            o2(s, b"sub", TMPFILE | RW, 0o600, 0)
        }),
        ("O_CREAT|O_DIRECTORY", Err(Errno::EINVAL), |s| {
            o2(s, b"new", CREAT | DIRECTORY, 0o644, 0)
        }),
        ("O_TMPFILE, O_RDONLY", Err(Errno::EINVAL), |s| {
            o2(s, b"sub", TMPFILE, 0o600, 0)
        }),
        ("O_PATH|O_RDWR", Err(Errno::EINVAL), |s| {
            o2(s, b"f", PATH | RW, 0, 0)
        }),
        ("O_PATH|O_CREAT", Err(Errno::EINVAL), |s| {
            o2(s, b"f", PATH | CREAT, 0o644, 0)
        }),
        ("O_PATH|O_CLOEXEC|O_NOFOLLOW", Ok((S_IFLNK, 4)), |s| {
            o2(s, b"up", PATH | OpenFlags::CLOEXEC | NOFOLLOW, 0, 0)
        }),
        ("RESOLVE_CACHED", IN_D, |s| {
            o2(s, b"f", RO, 0, RESOLVE_CACHED)
        }),
        ("RESOLVE_CACHED with O_CREAT", Err(Errno::EAGAIN), |s| {
            o2(s, b"f", CREAT | RW, 0o644, RESOLVE_CACHED)
        }),
        ("RESOLVE_CACHED with O_TRUNC", Err(Errno::EAGAIN), |s| {
            o2(s, b"f", OpenFlags::TRUNC | RW, 0, RESOLVE_CACHED)
        }),
        ("RESOLVE_NO_XDEV", TOP, |s| {
            o2(s, b"/f", RO, 0, RESOLVE_NO_XDEV)
        }),
        ("RESOLVE_NO_MAGICLINKS", TOP, |s| {
            o2(s, b"up", RO, 0, RESOLVE_NO_MAGICLINKS)
        }),
        ("bad dirfd", Err(Errno::EBADF), |s| {
            s.openat2(Fd(7), b"f", &OpenHow::default()).map(|_| (0, 0))
        }),
    ]);
    // Flags and close-on-exec of the result, as openat's (with O_LARGEFILE).
    same(|s| {
        let d = openat2_tree(s);
        let how = OpenHow {
            flags: (RW | OpenFlags::CLOEXEC | OpenFlags::APPEND).bits() as u64,
            ..Default::default()
        };
        let fd = s.openat2(d, b"f", &how).unwrap();
        (
            s.fcntl(fd, Fcntl::GetFl).unwrap(),
            s.fcntl(fd, Fcntl::GetFd).unwrap(),
        )
    });
}

#[test]
fn openat2_no_symlinks() {
    const R: u64 = RESOLVE_NO_SYMLINKS;
    table::<P2>(&[
        ("no symlink", IN_D, |s| o2(s, b"f", RO, 0, R)),
        ("symlink in the middle", Err(Errno::ELOOP), |s| {
            o2(s, b"in/g", RO, 0, R)
        }),
        ("final symlink", Err(Errno::ELOOP), |s| {
            o2(s, b"abs", RO, 0, R)
        }),
        ("final symlink, O_NOFOLLOW", Err(Errno::ELOOP), |s| {
            o2(s, b"abs", NOFOLLOW, 0, R)
        }),
        ("final symlink, O_PATH|O_NOFOLLOW", Ok((S_IFLNK, 2)), |s| {
            o2(s, b"abs", PATH | NOFOLLOW, 0, R)
        }),
        (
            "final symlink with a trailing slash",
            Err(Errno::ELOOP),
            |s| o2(s, b"in/", PATH | NOFOLLOW, 0, R),
        ),
        (
            "O_CREAT through a dangling symlink",
            Err(Errno::ELOOP),
            |s| o2(s, b"dl", CREAT | WO, 0o644, R),
        ),
        ("O_CREAT|O_EXCL on a symlink", Err(Errno::EEXIST), |s| {
            o2(s, b"dl", CREAT | OpenFlags::EXCL | WO, 0o644, R)
        }),
        (
            "dirfd itself may be reached by a symlink before",
            IN_D,
            |s| {
                openat2_tree(s);
                let d = s.open(b"/ld", PATH, 0).unwrap();
                let how = OpenHow {
                    resolve: R,
                    ..Default::default()
                };
                let fd = s.openat2(d, b"f", &how)?;
                let st = s.fstat(fd).unwrap();
                Ok((st.st_mode & S_IFMT, st.st_size))
            },
        ),
    ]);
}

#[test]
fn openat2_beneath() {
    const R: u64 = RESOLVE_BENEATH;
    table::<P2>(&[
        ("child", IN_D, |s| o2(s, b"f", RO, 0, R)),
        ("down and up", IN_D, |s| o2(s, b"sub/../f", RO, 0, R)),
        ("dot", DIR_D, |s| o2(s, b".", RO, 0, R)),
        ("dot-dot at dirfd", Err(Errno::EXDEV), |s| {
            o2(s, b"..", RO, 0, R)
        }),
        ("dot-dot above dirfd", Err(Errno::EXDEV), |s| {
            o2(s, b"sub/../../f", RO, 0, R)
        }),
        ("absolute path", Err(Errno::EXDEV), |s| {
            o2(s, b"/d/f", RO, 0, R)
        }),
        ("absolute symlink", Err(Errno::EXDEV), |s| {
            o2(s, b"abs", RO, 0, R)
        }),
        ("relative symlink escaping", Err(Errno::EXDEV), |s| {
            o2(s, b"up", RO, 0, R)
        }),
        ("relative symlink staying inside", IN_D, |s| {
            o2(s, b"sub/up", RO, 0, R)
        }),
        ("symlink to a subdir", G, |s| o2(s, b"in/g", RO, 0, R)),
        ("O_CREAT inside", Ok((S_IFREG, 0)), |s| {
            o2(s, b"sub/new", CREAT | WO, 0o644, R)
        }),
        (
            "O_CREAT through an escaping symlink",
            Err(Errno::EXDEV),
            |s| {
                openat2_tree(s);
                s.symlink(b"/newtop", b"/d/esc");
                let how = OpenHow {
                    flags: (CREAT | WO).bits() as u64,
                    mode: 0o644,
                    resolve: R,
                };
                let r = s.openat2(Fd(0), b"esc", &how).map(|_| (0, 0));
                assert!(!s.exists(b"/newtop"));
                r
            },
        ),
        (
            "absolute path checked before the dirfd",
            Err(Errno::EXDEV),
            |s| {
                let how = OpenHow {
                    resolve: R,
                    ..Default::default()
                };
                s.openat2(Fd(9), b"/x", &how).map(|_| (0, 0))
            },
        ),
        ("AT_FDCWD at the root: dot-dot", Err(Errno::EXDEV), |s| {
            openat2_tree(s);
            let how = OpenHow {
                resolve: R,
                ..Default::default()
            };
            s.openat2(CWD, b"..", &how).map(|_| (0, 0))
        }),
        ("AT_FDCWD, a child", TOP, |s| {
            openat2_tree(s);
            let how = OpenHow {
                resolve: R,
                ..Default::default()
            };
            let fd = s.openat2(CWD, b"f", &how)?;
            let st = s.fstat(fd).unwrap();
            Ok((st.st_mode & S_IFMT, st.st_size))
        }),
    ]);
}

#[test]
fn openat2_in_root() {
    const R: u64 = RESOLVE_IN_ROOT;
    table::<P2>(&[
        ("child", IN_D, |s| o2(s, b"f", RO, 0, R)),
        ("absolute path starts at dirfd", IN_D, |s| {
            o2(s, b"/f", RO, 0, R)
        }),
        ("root is dirfd", DIR_D, |s| o2(s, b"/", RO, 0, R)),
        ("dot-dot clamped", DIR_D, |s| o2(s, b"..", RO, 0, R)),
        ("dot-dot clamped, then down", IN_D, |s| {
            o2(s, b"../../f", RO, 0, R)
        }),
        ("absolute symlink", IN_D, |s| o2(s, b"abs", RO, 0, R)),
        ("relative symlink climbing", IN_D, |s| {
            o2(s, b"up", RO, 0, R)
        }),
        ("symlink in a subdir", IN_D, |s| o2(s, b"sub/up", RO, 0, R)),
        (
            "O_CREAT through an absolute symlink",
            Ok((S_IFREG, 0)),
            |s| {
                openat2_tree(s);
                s.symlink(b"/newtop", b"/d/esc");
                let how = OpenHow {
                    flags: (CREAT | WO).bits() as u64,
                    mode: 0o644,
                    resolve: R,
                };
                s.openat2(Fd(0), b"esc", &how)?;
                assert!(!s.exists(b"/newtop"));
                s.stat(b"/d/newtop")
                    .map(|st| (st.st_mode & S_IFMT, st.st_size))
            },
        ),
        ("absolute path with a bad dirfd", Err(Errno::EBADF), |s| {
            let how = OpenHow {
                resolve: R,
                ..Default::default()
            };
            s.openat2(Fd(9), b"/x", &how).map(|_| (0, 0))
        }),
        ("with RESOLVE_NO_SYMLINKS", Err(Errno::ELOOP), |s| {
            o2(s, b"abs", RO, 0, R | RESOLVE_NO_SYMLINKS)
        }),
    ]);
}

/// uvfs only (a race): a scoped walk must not escape `dirfd` through `..` while another
/// thread moves the directory it is in out of the subtree. Linux answers `EAGAIN` when a
/// rename ran during such a walk; uvfs when the walk found itself outside.
#[test]
fn openat2_scoped_dotdot_does_not_escape_under_rename() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mnt = uvfs::tmpfs::mount(Default::default());
    let t = uvfs::Task::init(&mnt);
    for d in ["/r", "/r/x", "/r/x/y", "/o"] {
        t.mkdirat(CWD, d, 0o755).unwrap();
    }
    let fd = t.open("/secret", CREAT | WO, 0o644).unwrap();
    t.close(fd).unwrap();
    let r = t.open("/r", PATH | DIRECTORY, 0).unwrap();
    let mover = t.clone_thread();
    let stop = &AtomicBool::new(false);
    // Many `.` components after `y` widen the window for the move.
    let path = format!("x/y/{}../../../secret", "./".repeat(1000));
    let mut bad = Vec::new();
    let mut eagain = 0;
    std::thread::scope(|sc| {
        sc.spawn(move || {
            // Relaxed: a stop flag; nothing else is published through it.
            while !stop.load(Ordering::Relaxed) {
                mover.renameat(CWD, "/r/x/y", CWD, "/o/y").unwrap();
                mover.renameat(CWD, "/o/y", CWD, "/r/x/y").unwrap();
            }
        });
        for resolve in [RESOLVE_BENEATH, RESOLVE_IN_ROOT] {
            let how = OpenHow {
                resolve,
                ..Default::default()
            };
            for _ in 0..3_000 {
                match t.openat2(r, &path, &how) {
                    Err(Errno::EAGAIN) => eagain += 1,
                    Err(Errno::EXDEV | Errno::ENOENT) => {}
                    other => bad.push((resolve, other)),
                }
            }
        }
        // Relaxed: see above.
        stop.store(true, Ordering::Relaxed);
    });
    assert!(bad.is_empty(), "escaped: {bad:?}");
    eprintln!("{eagain} walks caught outside their root");
}

/// `linkat(fd, "", AT_FDCWD, new, AT_EMPTY_PATH)`.
fn link_fd(s: &dyn Sys, fd: Fd, new: &[u8]) -> Result<(), Errno> {
    s.linkat(fd, b"", CWD, new, EMPTY)
}

#[test]
fn o_tmpfile_linkat() {
    table::<Result<(Shape, Vec<u8>), Errno>>(&[
        (
            "linked back with its data",
            Ok((
                Shape {
                    size: 3,
                    blocks: 8,
                    ..reg(0o600, 0, 0)
                },
                b"tmp".to_vec(),
            )),
            |s| {
                posix_tree(s);
                let fd = s.open(b"/d", TMPFILE | RW, 0o600).unwrap();
                s.write(fd, b"tmp").unwrap();
                link_fd(s, fd, b"/d/named")?;
                let st = s.fstat(fd).unwrap();
                let mut sh = shape(st);
                sh.nlink -= 1; // compare with `reg`'s nlink 0 ...
                assert_eq!(st.st_nlink, 1, "... as it is 1 now");
                Ok((sh, s.read_file(b"/d/named").unwrap()))
            },
        ),
        ("O_EXCL: never linkable", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            let fd = s
                .open(b"/d", TMPFILE | RW | OpenFlags::EXCL, 0o600)
                .unwrap();
            link_fd(s, fd, b"/d/named").map(|_| (reg(0, 0, 0), vec![]))
        }),
        ("linked, unlinked: not again", Err(Errno::ENOENT), |s| {
            posix_tree(s);
            let fd = s.open(b"/d", TMPFILE | RW, 0o600).unwrap();
            link_fd(s, fd, b"/d/a").unwrap();
            s.unlinkat(CWD, b"/d/a", NOAT).unwrap();
            link_fd(s, fd, b"/d/b").map(|_| (reg(0, 0, 0), vec![]))
        }),
        (
            "through an O_PATH descriptor of a file",
            Ok((reg(0o644, 0, 0), b"hello".to_vec())),
            |s| {
                posix_tree(s);
                let fd = s.open(b"/f", PATH, 0).unwrap();
                link_fd(s, fd, b"/g")?;
                let mut sh = s.shape_of(b"/g").unwrap();
                sh.nlink -= 2;
                sh.size = 0;
                sh.blocks = 0;
                Ok((sh, s.read_file(b"/g").unwrap()))
            },
        ),
    ]);
}

#[test]
fn o_tmpfile_limits() {
    // A tmpfile takes an inode and its pages, and gives them back at its last close.
    expect_limits(
        4 * 4096,
        4,
        ok(((4u64, 3u64, 4u64, 2u64), (4, 1, 4, 1), (4, 3, 4, 2), 4096)),
        |s| {
            let counts = |s: &dyn Sys| {
                let f = s.statfs(b"/").unwrap();
                (f.f_blocks, f.f_bfree, f.f_files, f.f_ffree)
            };
            s.mkfile(b"/f", b"x");
            let before = counts(s);
            let fd = s.open(b"/", TMPFILE | RW, 0o600)?;
            s.write(fd, &[1u8; 8192])?;
            let during = counts(s);
            // One page left: the write is short.
            let full = s.write(fd, &[1u8; 8192])?;
            s.close(fd)?;
            Ok((before, during, counts(s), full))
        },
    );
}
