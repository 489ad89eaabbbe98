//! tmpfs `size=` and `nr_inodes=` limits (`ENOSPC`), space held by unlinked open files,
//! the largest offset, asserted against Linux tmpfs mounted with the same options (see `common`).

mod common;
use common::*;
use uvfs::types::*;
use uvfs::Errno;

type R<T> = Result<T, Errno>;
const KIB: u64 = 1024;

/// Blocks (512-byte units) of `path`.
fn blocks(s: &dyn Sys, path: &[u8]) -> R<i64> {
    s.fstatat(CWD, path, NOAT).map(|st| st.st_blocks)
}

#[test]
fn write_past_size_is_short_then_enospc() {
    // 16 pages: a 100 KiB write stores 64 KiB and says so; the next write fails and changes
    // nothing; rewriting pages already held needs no space.
    expect_limits(
        64 * KIB,
        0,
        (
            Ok(65536),
            Err(Errno::ENOSPC),
            Ok(65536),
            Ok(128),
            Ok(10),
            Ok(65536),
        ),
        |s| {
            let fd = s.openat(CWD, b"/f", CREAT | RW, 0o644).unwrap();
            let a = s.write(fd, &[7u8; 100 * 1024]);
            let b = s.write(fd, b"more");
            let size = s.fstat(fd).map(|st| st.st_size);
            let bl = blocks(s, b"/f");
            let c = s.pwrite(fd, b"0123456789", 100);
            let size2 = s.fstat(fd).map(|st| st.st_size);
            (a, b, size, bl, c, size2)
        },
    );
}

#[test]
fn a_second_file_gets_only_what_is_left() {
    expect_limits(
        16 * KIB,
        0,
        (Ok(12288), Ok(4096), Err(Errno::ENOSPC), Ok(())),
        |s| {
            let a = s.openat(CWD, b"/a", CREAT | RW, 0o644).unwrap();
            let b = s.openat(CWD, b"/b", CREAT | RW, 0o644).unwrap();
            let x = s.write(a, &[1u8; 12288]);
            let y = s.write(b, &[2u8; 12288]);
            let z = s.write(b, b"x");
            (x, y, z, s.close(a))
        },
    );
}

#[test]
fn holes_take_no_space() {
    // A 1-byte write at 1 MiB takes one page; the size says 1 MiB + 1.
    expect_limits(8 * KIB, 0, (Ok(1), Ok(1), Ok(1048577), Ok(16)), |s| {
        let fd = s.openat(CWD, b"/f", CREAT | RW, 0o644).unwrap();
        let a = s.pwrite(fd, b"x", 1 << 20);
        let b = s.pwrite(fd, b"y", 0);
        (a, b, s.fstat(fd).map(|st| st.st_size), blocks(s, b"/f"))
    });
}

#[test]
fn truncate_gives_pages_back() {
    expect_limits(
        8 * KIB,
        0,
        (Ok(8192), Err(Errno::ENOSPC), Ok(()), Ok(4096), Ok(8)),
        |s| {
            let fd = s.openat(CWD, b"/f", CREAT | RW, 0o644).unwrap();
            let a = s.write(fd, &[1u8; 8192]);
            let g = s.openat(CWD, b"/g", CREAT | RW, 0o644).unwrap();
            let b = s.write(g, b"x");
            // Keeps the first page: one page comes back.
            let t = s.ftruncate(fd, 100);
            let c = s.write(g, &[3u8; 8192]);
            (a, b, t, c, blocks(s, b"/f"))
        },
    );
}

#[test]
fn unlinked_open_file_keeps_data_and_space_until_last_close() {
    expect_limits(
        8 * KIB,
        0,
        (
            Ok(8192),
            Ok(()),
            Err(Errno::ENOSPC),
            Ok(vec![9u8; 16]),
            Ok(()),
            Ok(8192),
        ),
        |s| {
            let fd = s.openat(CWD, b"/a", CREAT | RW, 0o644).unwrap();
            let a = s.write(fd, &[9u8; 8192]);
            let u = s.unlinkat(CWD, b"/a", NOAT);
            let b = s.openat(CWD, b"/b", CREAT | RW, 0o644).unwrap();
            let full = s.write(b, b"x");
            let mut buf = [0u8; 16];
            let data = s.pread(fd, &mut buf, 100).map(|n| buf[..n].to_vec());
            let c = s.close(fd);
            let after = s.write(b, &[5u8; 8192]);
            (a, u, full, data, c, after)
        },
    );
}

#[test]
fn nr_inodes_counts_the_root_and_every_kind() {
    // 4 inodes: the root and three more; then creat, mkdir, symlink fail and leave nothing;
    // an existing file still opens with O_CREAT; a hard link needs an inode too (tmpfs
    // counts names: shmem_link), so it fails; an unlink frees one.
    expect_limits(
        0,
        4,
        (
            (Ok(()), Ok(()), Ok(())),
            (
                Err(Errno::ENOSPC),
                Err(Errno::ENOSPC),
                Err(Errno::ENOSPC),
                Err(Errno::ENOENT),
            ),
            (Ok(()), Err(Errno::ENOSPC), Ok(())),
            Ok(()),
        ),
        |s| {
            let made = (
                s.openat(CWD, b"/f", CREAT | RW, 0o644)
                    .and_then(|fd| s.close(fd)),
                s.mkdirat(CWD, b"/d", 0o755),
                s.symlinkat(b"f", CWD, b"/l"),
            );
            let refused = (
                s.openat(CWD, b"/g", CREAT | RW, 0o644).map(drop),
                s.mkdirat(CWD, b"/e", 0o755),
                s.symlinkat(b"f", CWD, b"/m"),
                s.fstatat(CWD, b"/g", NOAT).map(drop),
            );
            let still = (
                s.openat(CWD, b"/f", CREAT | RW, 0o644)
                    .and_then(|fd| s.close(fd)),
                s.linkat(CWD, b"/f", CWD, b"/h", NOAT),
                s.unlinkat(CWD, b"/l", NOAT),
            );
            let again = s.mkdirat(CWD, b"/e", 0o755);
            (made, refused, still, again)
        },
    );
}

#[test]
fn long_symlinks_take_a_page() {
    // Targets of 128 bytes or more live in a page (shmem_symlink), shorter ones in the inode.
    let long = [b'x'; 200];
    expect_limits(
        8 * KIB,
        0,
        (Ok(()), Ok(()), Ok(4096), Err(Errno::ENOSPC), Ok(8)),
        |s| {
            let a = s.symlinkat(&[b'y'; 20], CWD, b"/short");
            let b = s.symlinkat(&long, CWD, b"/long");
            let fd = s.openat(CWD, b"/f", CREAT | RW, 0o644).unwrap();
            let w = s.write(fd, &[0u8; 8192]);
            let c = s.symlinkat(&long, CWD, b"/long2");
            (
                a,
                b,
                w,
                c,
                s.fstatat(CWD, b"/long", AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| st.st_blocks),
            )
        },
    );
}

#[test]
fn zero_means_unlimited() {
    expect_limits(0, 0, Ok(1 << 20), |s| {
        let fd = s.openat(CWD, b"/f", CREAT | RW, 0o644).unwrap();
        s.write(fd, &vec![1u8; 1 << 20])
    });
}

#[test]
fn write_past_the_largest_offset_is_einval() {
    // A write whose end would pass MAX_LFS_FILESIZE (2^63 - 1) overflows the offset:
    // EINVAL (rw_verify_area), nothing changes. (tmpfs gives EFBIG only under RLIMIT_FSIZE,
    // which uvfs does not model.)
    expect((Err(Errno::EINVAL), Ok((0, 0))), |s| {
        let fd = s.openat(CWD, b"/f", CREAT | RW, 0o644).unwrap();
        (
            s.pwrite(fd, b"x", i64::MAX),
            s.fstat(fd).map(|st| (st.st_size, st.st_blocks)),
        )
    });
}

/// RLIMIT_FSIZE (setrlimit(2)): "Attempts to extend a file beyond this limit result in
/// delivery of a SIGXFSZ signal ... in which case the relevant system call (e.g., write(2),
/// truncate(2)) fails with the error EFBIG." A write that starts below the limit is
/// shortened to it (`generic_write_check_limits`); shrinking and rewriting are allowed.
/// uvfs only: the limit is per process on the host, and the harness's host side runs in
/// threads of the test process.
#[test]
fn rlimit_fsize_gives_efbig_and_short_writes() {
    for u in each_fs() {
        let t = &u.task;
        assert_eq!(t.getrlimit_fsize(), u64::MAX);
        let fd = t.open("/f", CREAT | RW, 0o644).unwrap();
        t.setrlimit_fsize(10);
        assert_eq!(t.write(fd, &[1u8; 20]), Ok(10));
        assert_eq!(t.write(fd, b"x"), Err(Errno::EFBIG));
        assert_eq!(t.pwrite(fd, b"abc", 5), Ok(3));
        assert_eq!(t.pwrite(fd, b"abcdef", 8), Ok(2));
        assert_eq!(t.ftruncate(fd, 11), Err(Errno::EFBIG));
        assert_eq!(t.truncate("/f", 100), Err(Errno::EFBIG));
        assert_eq!(t.fstat(fd).map(|s| s.st_size), Ok(10));
        assert_eq!(t.ftruncate(fd, 4), Ok(()));
        assert_eq!(t.ftruncate(fd, 10), Ok(()));
        // Threads share the limit; a fork copies it.
        let th = t.clone_thread();
        let child = t.fork();
        th.setrlimit_fsize(2);
        assert_eq!(t.getrlimit_fsize(), 2);
        assert_eq!(child.getrlimit_fsize(), 10);
        child.setrlimit_fsize(u64::MAX);
        assert_eq!(t.getrlimit_fsize(), 2);
        assert_eq!(child.write(fd, &[0u8; 100]), Ok(100));
    }
}

#[test]
fn hard_links_hold_inodes_until_unlinked() {
    // nr_inodes=3: root, /f, one more name of /f (tmpfs counts every name but the last as
    // an inode: shmem_link / shmem_unlink); the third name and a new file fail until a name
    // goes away; the last name's inode comes back only when the file is gone.
    expect_limits(
        0,
        3,
        (
            Ok(()),
            Err(Errno::ENOSPC),
            Err(Errno::ENOSPC),
            Ok(()),
            Ok(()),
            Ok(2),
            Ok(()),
            Ok(()),
            Err(Errno::ENOSPC),
        ),
        |s| {
            let fd = s.openat(CWD, b"/f", CREAT | RW, 0o644).unwrap();
            s.close(fd).unwrap();
            let a = s.linkat(CWD, b"/f", CWD, b"/g", NOAT);
            let b = s.linkat(CWD, b"/f", CWD, b"/h", NOAT);
            let c = s.openat(CWD, b"/n", CREAT | RW, 0o644).map(drop);
            let d = s.unlinkat(CWD, b"/g", NOAT);
            let e = s.linkat(CWD, b"/f", CWD, b"/h", NOAT);
            let nlink = s.fstatat(CWD, b"/f", NOAT).map(|st| st.st_nlink);
            let f = s.unlinkat(CWD, b"/f", NOAT);
            let g = s.mkdirat(CWD, b"/d", 0o755);
            let h = s.mkdirat(CWD, b"/e", 0o755);
            (a, b, c, d, e, nlink, f, g, h)
        },
    );
}

/// An `O_TMPFILE` (linkable, never linked) gives its space back at its last close.
#[test]
fn tmpfile_space_comes_back_at_close() {
    expect_limits(
        8 * KIB,
        0,
        (Ok(8192), Err(Errno::ENOSPC), Ok(()), Ok(8192)),
        |s| {
            let t = s
                .openat(CWD, b"/", uvfs::OpenFlags::TMPFILE | RW, 0o600)
                .unwrap();
            let a = s.write(t, &[1u8; 8192]);
            let f = s.openat(CWD, b"/f", CREAT | RW, 0o644).unwrap();
            let full = s.write(f, b"x");
            let c = s.close(t);
            (a, full, c, s.write(f, &[2u8; 8192]))
        },
    );
}
