//! `fsync`/`fdatasync`, `statfs`/`fstatfs`, `statx`, `chroot`, `mknodat`, asserted against
//! Linux (each case also runs on the host kernel, see `common`).

mod common;
use common::*;
use uvfs::statfs::{ST_RELATIME, ST_VALID, TMPFS_MAGIC};
use uvfs::{Errno, Fd};

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
    // uvfs's tmpfs has no limits: counts are 0 (as a Linux tmpfs with size=0,nr_inodes=0;
    // the host side here is a default mount and reports half of RAM).
    let u = on_uvfs(&|s| s.statfs(b"/").unwrap());
    assert_eq!(
        (u.f_blocks, u.f_bfree, u.f_bavail, u.f_files, u.f_ffree),
        (0, 0, 0, 0, 0)
    );
    // statfs and fstatfs agree, and the id is stable.
    same(|s| {
        let fd = s.open(b"/", RO, 0).unwrap();
        s.fstatfs(fd).unwrap() == s.statfs(b"/").unwrap()
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
