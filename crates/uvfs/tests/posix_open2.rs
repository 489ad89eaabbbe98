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

/// `/d/` (`f` = "data", `sub/`), `/f` = "hello", `/l -> f`, `/ld -> d`,
/// `/dangling -> nowhere`.
fn tree(s: &dyn Sys) {
    s.mkdir(b"/d");
    s.mkfile(b"/d/f", b"data");
    s.mkdir(b"/d/sub");
    s.mkfile(b"/f", b"hello");
    s.symlink(b"f", b"/l");
    s.symlink(b"d", b"/ld");
    s.symlink(b"nowhere", b"/dangling");
}

/// Opens `path` with `O_PATH | flags` in the tree; returns `F_GETFL` and the file type.
fn o_path(s: &dyn Sys, path: &[u8], flags: OpenFlags) -> Result<(i32, u32), Errno> {
    tree(s);
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
        tree(s);
        s.set_times(b"/f", T2001, T2002);
        let fd = s.open(b"/f", PATH | OpenFlags::TRUNC | WO, 0).unwrap();
        let st = s.fstat(fd)?;
        Ok((st.st_size, st.st_atime))
    });
    // The descriptor is close-on-exec with O_CLOEXEC, and F_SETFD works.
    expect(ok((FD_CLOEXEC, 0)), |s| {
        tree(s);
        let fd = s.open(b"/f", PATH | OpenFlags::CLOEXEC, 0).unwrap();
        let a = s.fcntl(fd, Fcntl::GetFd)?;
        s.fcntl(fd, Fcntl::SetFd(0))?;
        Ok((a, s.fcntl(fd, Fcntl::GetFd)?))
    });
}

/// Opens `/f` (or `/d` for `dir`) with `O_PATH` at descriptor 0.
fn pfd(s: &dyn Sys, dir: bool) -> Fd {
    tree(s);
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
        ("utimensat AT_EMPTY_PATH", Ok(0), |s| {
            let fd = pfd(s, false);
            s.utimensat(fd, b"", None, EMPTY).map(|_| 0)
        }),
        ("readlinkat of an O_PATH symlink", Ok(1), |s| {
            tree(s);
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
            tree(s);
            s.openat(CWD, b"/x", CREAT | WO, 0).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.open(b"/x", PATH, 0).map(|_| 0)
        }),
        ("dir without search: O_PATH open is fine", Ok(0), |s| {
            tree(s);
            s.mkdirat(CWD, b"/n", 0o600).unwrap();
            s.set_cred(1000, 1000, &[]);
            s.open(b"/n", PATH, 0).map(|_| 0)
        }),
        (
            "dir without search: lookups in it are not",
            Err(Errno::EACCES),
            |s| {
                tree(s);
                s.mkdirat(CWD, b"/n", 0o600).unwrap();
                s.set_cred(1000, 1000, &[]);
                let fd = s.open(b"/n", PATH, 0).unwrap();
                s.openat(fd, b"x", PATH, 0).map(|f| f.0 as u64)
            },
        ),
        ("path without search", Err(Errno::EACCES), |s| {
            tree(s);
            s.mkdirat(CWD, b"/n", 0o600).unwrap();
            s.mkfile(b"/n/x", b"");
            s.set_cred(1000, 1000, &[]);
            s.open(b"/n/x", PATH, 0).map(|f| f.0 as u64)
        }),
        ("fchdir needs search on the dir", Err(Errno::EACCES), |s| {
            tree(s);
            s.mkdirat(CWD, b"/n", 0o600).unwrap();
            s.set_cred(1000, 1000, &[]);
            let fd = s.open(b"/n", PATH, 0).unwrap();
            s.fchdir(fd).map(|_| 0)
        }),
    ]);
}
