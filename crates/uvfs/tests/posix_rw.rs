//! `read`, `write`, `pread`, `pwrite`, `lseek` (all five `whence`s) and the `OwnedFd`
//! `Read`/`Write`/`Seek` handle, asserted against Linux (see `common`).

mod common;
use common::*;
use std::io::{Read, Seek, SeekFrom, Write};
use uvfs::types::*;
use uvfs::{Errno, Fd, OpenFlags, OwnedFd};

const APPEND: OpenFlags = OpenFlags::APPEND;
const MIB: i64 = 1 << 20;

type RU = Result<usize, Errno>;
type RI = Result<i64, Errno>;

/// `/f` = "hello" opened with `flags` as fd 0, `/d` opened as fd 1.
fn files(s: &dyn Sys, flags: OpenFlags) -> (Fd, Fd) {
    s.mkfile(b"/f", b"hello");
    s.mkdir(b"/d");
    let f = s.open(b"/f", flags, 0).unwrap();
    let d = s.open(b"/d", RO, 0).unwrap();
    (f, d)
}

#[test]
fn read_write_basics() {
    // write advances the position; reads see the data; a read at end of file returns 0.
    expect(
        (
            Ok(11),
            Ok(11),
            Ok(0),
            Ok(6),
            Ok(b"world!".to_vec()),
            Ok(0),
            Ok(0),
        ),
        |s| {
            let fd = s.open(b"/f", CREAT | RW, 0o644).unwrap();
            let w = s.write(fd, b"hello world");
            let pos = s.lseek(fd, 0, SEEK_CUR);
            let at_end = s.read(fd, &mut [0u8; 4]);
            s.lseek(fd, 6, SEEK_SET).unwrap();
            s.write(fd, b"world!").unwrap();
            s.lseek(fd, 6, SEEK_SET).unwrap();
            let mut b = [0u8; 64];
            let n = s.read(fd, &mut b);
            let data = n.map(|n| b[..n].to_vec());
            (
                w.map(|n| n as i64),
                pos,
                at_end.map(|n| n as i64),
                n.map(|n| n as i64),
                data,
                s.read(fd, &mut b).map(|n| n as i64),
                s.read(fd, &mut []).map(|n| n as i64),
            )
        },
    );
    // Short reads in pieces, a 0-byte read and a 0-byte write.
    expect((vec![3, 2, 0], Ok(0), Ok(0), Ok(3)), |s| {
        s.mkfile(b"/f", b"hello");
        let fd = s.open(b"/f", RW, 0).unwrap();
        let mut b = [0u8; 3];
        let v: Vec<usize> = (0..3).map(|_| s.read(fd, &mut b).unwrap()).collect();
        s.lseek(fd, 3, SEEK_SET).unwrap();
        (
            v,
            s.read(fd, &mut []),
            s.write(fd, b""),
            s.lseek(fd, 0, SEEK_CUR).map(|p| p as usize),
        )
    });
}

#[test]
fn read_write_errors() {
    table::<RU>(&[
        ("read, bad fd", Err(Errno::EBADF), |s| {
            s.read(Fd(5), &mut [0; 4])
        }),
        ("read, negative fd", Err(Errno::EBADF), |s| {
            s.read(Fd(-1), &mut [0; 4])
        }),
        ("read, closed fd", Err(Errno::EBADF), |s| {
            let (f, _) = files(s, RO);
            s.close(f).unwrap();
            s.read(f, &mut [0; 4])
        }),
        ("read, write-only fd", Err(Errno::EBADF), |s| {
            let (f, _) = files(s, WO);
            s.read(f, &mut [0; 4])
        }),
        ("read 0 bytes, write-only fd", Err(Errno::EBADF), |s| {
            let (f, _) = files(s, WO);
            s.read(f, &mut [])
        }),
        ("read, access mode 3", Err(Errno::EBADF), |s| {
            let (f, _) = files(s, OpenFlags::ACCMODE);
            s.read(f, &mut [0; 4])
        }),
        ("read, directory", Err(Errno::EISDIR), |s| {
            let (_, d) = files(s, RO);
            s.read(d, &mut [0; 4])
        }),
        ("read 0 bytes, directory", Err(Errno::EISDIR), |s| {
            let (_, d) = files(s, RO);
            s.read(d, &mut [])
        }),
        ("pread, directory", Err(Errno::EISDIR), |s| {
            let (_, d) = files(s, RO);
            s.pread(d, &mut [0; 4], 0)
        }),
        ("pread, negative offset", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, RO);
            s.pread(f, &mut [0; 4], -1)
        }),
        ("pread, write-only fd", Err(Errno::EBADF), |s| {
            let (f, _) = files(s, WO);
            s.pread(f, &mut [0; 4], 0)
        }),
        ("pread, bad fd", Err(Errno::EBADF), |s| {
            s.pread(Fd(9), &mut [0; 4], 0)
        }),
        ("pread past the end", Ok(0), |s| {
            let (f, _) = files(s, RO);
            s.pread(f, &mut [0; 4], 1000)
        }),
        ("write, bad fd", Err(Errno::EBADF), |s| s.write(Fd(3), b"x")),
        ("write, read-only fd", Err(Errno::EBADF), |s| {
            let (f, _) = files(s, RO);
            s.write(f, b"x")
        }),
        ("write 0 bytes, read-only fd", Err(Errno::EBADF), |s| {
            let (f, _) = files(s, RO);
            s.write(f, b"")
        }),
        ("write, access mode 3", Err(Errno::EBADF), |s| {
            let (f, _) = files(s, OpenFlags::ACCMODE);
            s.write(f, b"x")
        }),
        ("write, directory", Err(Errno::EBADF), |s| {
            let (_, d) = files(s, RO);
            s.write(d, b"x")
        }),
        ("pwrite, negative offset", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, WO);
            s.pwrite(f, b"x", -1)
        }),
        ("pwrite, read-only fd", Err(Errno::EBADF), |s| {
            let (f, _) = files(s, RO);
            s.pwrite(f, b"x", 0)
        }),
        ("pwrite, directory", Err(Errno::EBADF), |s| {
            let (_, d) = files(s, RO);
            s.pwrite(d, b"x", 0)
        }),
    ]);
}

/// Bug: transfers whose end passes `i64::MAX` succeeded (pread returned 0, pwrite wrote a
/// shortened piece or gave EFBIG); Linux's `rw_verify_area` refuses them with EINVAL, for
/// directories too (before EISDIR). Cause: no range check; only `write_at`'s EFBIG limit.
/// Fix: `rw_verify_area` in `check_read`/`check_write`, in `vfs_read`/`vfs_write`'s order
/// (read_write.rs).
#[test]
fn regression_rw_range_past_i64_max() {
    table::<RU>(&[
        ("pread at i64::MAX", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, RO);
            s.pread(f, &mut [0; 4], i64::MAX)
        }),
        ("pread of 0 bytes at i64::MAX", Ok(0), |s| {
            let (f, _) = files(s, RO);
            s.pread(f, &mut [], i64::MAX)
        }),
        ("pread, directory, at i64::MAX", Err(Errno::EINVAL), |s| {
            let (_, d) = files(s, RO);
            s.pread(d, &mut [0; 4], i64::MAX)
        }),
        (
            "pread, write-only fd, at i64::MAX",
            Err(Errno::EBADF),
            |s| {
                let (f, _) = files(s, WO);
                s.pread(f, &mut [0; 4], i64::MAX)
            },
        ),
        ("read at position i64::MAX", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, i64::MAX, SEEK_SET).unwrap();
            s.read(f, &mut [0; 4])
        }),
        ("read at position i64::MAX - 4", Ok(0), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, i64::MAX - 4, SEEK_SET).unwrap();
            s.read(f, &mut [0; 4])
        }),
        ("pwrite at i64::MAX", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, WO);
            s.pwrite(f, b"x", i64::MAX)
        }),
        ("pwrite crossing i64::MAX", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, WO);
            s.pwrite(f, b"xyz", i64::MAX - 1)
        }),
        ("pwrite ending at i64::MAX", Ok(1), |s| {
            let (f, _) = files(s, WO);
            s.pwrite(f, b"x", i64::MAX - 1)
        }),
        ("pwrite of 0 bytes at i64::MAX", Ok(0), |s| {
            let (f, _) = files(s, WO);
            s.pwrite(f, b"", i64::MAX)
        }),
        ("write at position i64::MAX", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, WO);
            s.lseek(f, i64::MAX, SEEK_SET).unwrap();
            s.write(f, b"x")
        }),
        ("write of 0 bytes at position i64::MAX", Ok(0), |s| {
            let (f, _) = files(s, WO);
            s.lseek(f, i64::MAX, SEEK_SET).unwrap();
            s.write(f, b"")
        }),
        (
            "O_APPEND write checks the position, not the end",
            Err(Errno::EINVAL),
            |s| {
                let (f, _) = files(s, WO | APPEND);
                s.lseek(f, i64::MAX, SEEK_SET).unwrap();
                s.write(f, b"x")
            },
        ),
    ]);
}

/// Bug: pread/pwrite with a negative offset on a bad descriptor returned EBADF; Linux's
/// `ksys_pread64`/`ksys_pwrite64` test the offset first (EINVAL). Cause: the descriptor
/// was looked up first. Fix: check the offset before `fdget` (read_write.rs).
#[test]
fn regression_pread_pwrite_negative_offset_before_bad_fd() {
    table::<RU>(&[
        ("pread", Err(Errno::EINVAL), |s| {
            s.pread(Fd(42), &mut [0; 4], -1)
        }),
        ("pwrite", Err(Errno::EINVAL), |s| s.pwrite(Fd(42), b"x", -1)),
    ]);
}

#[test]
fn positions_shared_by_dup_not_by_open() {
    expect((Ok(b"llo".to_vec()), Ok(5), Ok(5), Ok(0)), |s| {
        s.mkfile(b"/f", b"hello");
        let a = s.open(b"/f", RO, 0).unwrap();
        let b = s.dup(a).unwrap();
        let c = s.open(b"/f", RO, 0).unwrap();
        s.read(a, &mut [0; 2]).unwrap();
        let mut buf = [0u8; 10];
        let n = s.read(b, &mut buf).map(|n| buf[..n].to_vec());
        (
            n,
            s.lseek(a, 0, SEEK_CUR),
            s.lseek(b, 0, SEEK_CUR),
            s.lseek(c, 0, SEEK_CUR),
        )
    });
}

#[test]
fn pread_pwrite_leave_the_position() {
    expect(
        (
            Ok(3),
            Ok(b"llo".to_vec()),
            Ok(1),
            Ok(b"heLlo".to_vec()),
            Ok(1),
        ),
        |s| {
            s.mkfile(b"/f", b"hello");
            let fd = s.open(b"/f", RW, 0).unwrap();
            s.read(fd, &mut [0; 1]).unwrap();
            let mut b = [0u8; 10];
            let n = s.pread(fd, &mut b, 2);
            s.pwrite(fd, b"L", 2).unwrap();
            (
                n,
                ok(b[..3].to_vec()),
                s.lseek(fd, 0, SEEK_CUR),
                s.read_file(b"/f"),
                s.lseek(fd, 0, SEEK_CUR),
            )
        },
    );
    // With O_APPEND, pwrite appends whatever the offset (a Linux bug kept for ever).
    expect((Ok(b"hello!".to_vec()), Ok(0)), |s| {
        s.mkfile(b"/f", b"hello");
        let fd = s.open(b"/f", WO | APPEND, 0).unwrap();
        s.pwrite(fd, b"!", 1).unwrap();
        (s.read_file(b"/f"), s.lseek(fd, 0, SEEK_CUR))
    });
}

#[test]
fn sparse_files() {
    // Writing past the end leaves a hole that reads as zeros and takes no blocks.
    expect(
        (
            Ok(Shape {
                mode: S_IFREG | 0o644,
                nlink: 1,
                uid: 0,
                gid: 0,
                size: MIB + 3,
                blocks: 16,
            }),
            Ok(vec![b'a', 0, 0, 0]),
            Ok(b"xyz".to_vec()),
        ),
        |s| {
            s.mkfile(b"/f", b"a");
            let fd = s.open(b"/f", RW, 0).unwrap();
            s.pwrite(fd, b"xyz", MIB).unwrap();
            let mut b = [9u8; 4];
            let head = s.pread(fd, &mut b, 0).map(|n| b[..n].to_vec());
            let mut t = [0u8; 3];
            let tail = s.pread(fd, &mut t, MIB).map(|n| t[..n].to_vec());
            (s.shape_of(b"/f"), head, tail)
        },
    );
    // A write across a page boundary allocates both pages.
    expect(Ok((8194, 24)), |s| {
        let fd = s.open(b"/f", CREAT | RW, 0o644).unwrap();
        s.pwrite(fd, &[1u8; 10], 4090).unwrap();
        s.pwrite(fd, b"z", 8193).unwrap();
        s.fstat(fd).map(|st| (st.st_size, st.st_blocks))
    });
}

#[test]
fn lseek_set_cur_end() {
    table::<RI>(&[
        ("SEEK_SET", Ok(3), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, 3, SEEK_SET)
        }),
        ("SEEK_SET past the end", Ok(100), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, 100, SEEK_SET)
        }),
        ("SEEK_SET i64::MAX", Ok(i64::MAX), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, i64::MAX, SEEK_SET)
        }),
        ("SEEK_SET negative", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, -1, SEEK_SET)
        }),
        ("SEEK_CUR", Ok(5), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, 2, SEEK_SET).unwrap();
            s.lseek(f, 3, SEEK_CUR)
        }),
        ("SEEK_CUR back", Ok(1), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, 2, SEEK_SET).unwrap();
            s.lseek(f, -1, SEEK_CUR)
        }),
        ("SEEK_CUR before 0", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, 2, SEEK_SET).unwrap();
            s.lseek(f, -3, SEEK_CUR)
        }),
        ("SEEK_CUR overflow", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, i64::MAX, SEEK_SET).unwrap();
            s.lseek(f, 1, SEEK_CUR)
        }),
        ("SEEK_CUR failed seek keeps the position", Ok(2), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, 2, SEEK_SET).unwrap();
            s.lseek(f, -3, SEEK_CUR).unwrap_err();
            s.lseek(f, 0, SEEK_CUR)
        }),
        ("SEEK_END", Ok(5), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, 0, SEEK_END)
        }),
        ("SEEK_END back", Ok(3), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, -2, SEEK_END)
        }),
        ("SEEK_END forward", Ok(15), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, 10, SEEK_END)
        }),
        ("SEEK_END before 0", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, -6, SEEK_END)
        }),
        ("SEEK_END overflow", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, i64::MAX, SEEK_END)
        }),
        ("whence 5", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, 0, 5)
        }),
        ("whence -1", Err(Errno::EINVAL), |s| {
            let (f, _) = files(s, RO);
            s.lseek(f, 0, -1)
        }),
        ("bad fd", Err(Errno::EBADF), |s| s.lseek(Fd(4), 0, SEEK_SET)),
        ("bad fd, bad whence", Err(Errno::EBADF), |s| {
            s.lseek(Fd(4), 0, 99)
        }),
        ("write-only fd", Ok(4), |s| {
            let (f, _) = files(s, WO);
            s.lseek(f, -1, SEEK_END)
        }),
        ("dir SEEK_SET", Ok(0), |s| {
            let (_, d) = files(s, RO);
            s.lseek(d, 0, SEEK_SET)
        }),
        ("dir SEEK_CUR", Ok(0), |s| {
            let (_, d) = files(s, RO);
            s.lseek(d, 0, SEEK_CUR)
        }),
        ("dir SEEK_SET negative", Err(Errno::EINVAL), |s| {
            let (_, d) = files(s, RO);
            s.lseek(d, -1, SEEK_SET)
        }),
    ]);
}

/// `SEEK_END`, `SEEK_DATA` and `SEEK_HOLE` on a directory: `EINVAL` on tmpfs
/// (`offset_dir_llseek`), while a FUSE directory seeks as a file against the directory's
/// size (`fuse_dir_operations`' `generic_file_llseek`: measured on Linux 6.18, a kernel
/// mount of libfuse 3.14's `passthrough_ll` over a tmpfs directory whose size is 40 or
/// 100 — `SEEK_END` +0 gives the size and -50 the size less 50; `SEEK_DATA` 0 gives 0,
/// `SEEK_HOLE` 0 the size, both `ENXIO` at the size and at -1). The empty `/d` is 40 bytes
/// (tmpfs's 20 per entry, `.` and `..`).
#[test]
fn directory_seek_past_set_and_cur() {
    type R = Result<i64, Errno>;
    let cases: [(i64, i32, R, R); 7] = [
        (0, SEEK_END, Err(Errno::EINVAL), Ok(40)),
        (-30, SEEK_END, Err(Errno::EINVAL), Ok(10)),
        (0, SEEK_DATA, Err(Errno::EINVAL), Ok(0)),
        (39, SEEK_DATA, Err(Errno::EINVAL), Ok(39)),
        (40, SEEK_DATA, Err(Errno::EINVAL), Err(Errno::ENXIO)),
        (0, SEEK_HOLE, Err(Errno::EINVAL), Ok(40)),
        (-1, SEEK_HOLE, Err(Errno::EINVAL), Err(Errno::ENXIO)),
    ];
    for (off, whence, tmpfs, fuse) in cases {
        expect_fuse(tmpfs, fuse, |s| {
            let (_, d) = files(s, RO);
            s.lseek(d, off, whence)
        });
    }
    // The position a FUSE directory seeked to is where its listing resumes (the server's
    // cookie): at the size, past the last entry of uvfs's server, nothing more is listed.
    expect_fuse(Err(Errno::EINVAL), Ok(0), |s| {
        let (_, d) = files(s, RO);
        s.lseek(d, 0, SEEK_END)?;
        let mut buf = [0u8; 512];
        s.getdents64(d, &mut buf).map(|n| n as i64)
    });
}

/// A file of `3 MiB + 10` bytes with data in page 0 and in the page at 2 MiB, holes
/// elsewhere; opened read-only as fd 0.
fn holey(s: &dyn Sys) -> Fd {
    let fd = s.open(b"/h", CREAT | RW, 0o644).unwrap();
    s.pwrite(fd, b"head", 0).unwrap();
    s.pwrite(fd, b"mid", 2 * MIB + 100).unwrap();
    s.ftruncate(fd, 3 * MIB + 10).unwrap();
    s.close(fd).unwrap();
    s.open(b"/h", RO, 0).unwrap()
}

#[test]
fn lseek_data_hole() {
    table::<RI>(&[
        ("DATA at 0", Ok(0), |s| s.lseek(holey(s), 0, SEEK_DATA)),
        ("DATA inside the first page", Ok(100), |s| {
            s.lseek(holey(s), 100, SEEK_DATA)
        }),
        ("DATA in a hole", Ok(2 * MIB), |s| {
            s.lseek(holey(s), 4096, SEEK_DATA)
        }),
        ("DATA inside the second data page", Ok(2 * MIB + 5), |s| {
            s.lseek(holey(s), 2 * MIB + 5, SEEK_DATA)
        }),
        ("DATA in the trailing hole", Err(Errno::ENXIO), |s| {
            s.lseek(holey(s), 2 * MIB + 4096, SEEK_DATA)
        }),
        ("DATA at the end", Err(Errno::ENXIO), |s| {
            s.lseek(holey(s), 3 * MIB + 10, SEEK_DATA)
        }),
        ("DATA past the end", Err(Errno::ENXIO), |s| {
            s.lseek(holey(s), 5 * MIB, SEEK_DATA)
        }),
        ("DATA negative", Err(Errno::ENXIO), |s| {
            s.lseek(holey(s), -1, SEEK_DATA)
        }),
        ("HOLE at 0", Ok(4096), |s| s.lseek(holey(s), 0, SEEK_HOLE)),
        ("HOLE in a hole", Ok(8192), |s| {
            s.lseek(holey(s), 8192, SEEK_HOLE)
        }),
        ("HOLE in the second data page", Ok(2 * MIB + 4096), |s| {
            s.lseek(holey(s), 2 * MIB + 1, SEEK_HOLE)
        }),
        ("HOLE in the trailing hole", Ok(3 * MIB), |s| {
            s.lseek(holey(s), 3 * MIB, SEEK_HOLE)
        }),
        ("HOLE at the end", Err(Errno::ENXIO), |s| {
            s.lseek(holey(s), 3 * MIB + 10, SEEK_HOLE)
        }),
        ("HOLE negative", Err(Errno::ENXIO), |s| {
            s.lseek(holey(s), -1, SEEK_HOLE)
        }),
        ("HOLE, file ending inside a data page", Ok(10), |s| {
            s.mkfile(b"/s", b"0123456789");
            let fd = s.open(b"/s", RO, 0).unwrap();
            s.lseek(fd, 3, SEEK_HOLE)
        }),
        ("DATA, empty file", Err(Errno::ENXIO), |s| {
            s.mkfile(b"/s", b"");
            let fd = s.open(b"/s", RO, 0).unwrap();
            s.lseek(fd, 0, SEEK_DATA)
        }),
        ("HOLE, empty file", Err(Errno::ENXIO), |s| {
            s.mkfile(b"/s", b"");
            let fd = s.open(b"/s", RO, 0).unwrap();
            s.lseek(fd, 0, SEEK_HOLE)
        }),
        ("DATA moves the position", Ok(2 * MIB), |s| {
            let fd = holey(s);
            s.lseek(fd, 4096, SEEK_DATA).unwrap();
            s.lseek(fd, 0, SEEK_CUR)
        }),
        ("failed DATA keeps the position", Ok(7), |s| {
            let fd = holey(s);
            s.lseek(fd, 7, SEEK_SET).unwrap();
            s.lseek(fd, 9 * MIB, SEEK_DATA).unwrap_err();
            s.lseek(fd, 0, SEEK_CUR)
        }),
        ("DATA after truncating data away", Err(Errno::ENXIO), |s| {
            let fd = s.open(b"/s", CREAT | RW, 0o644).unwrap();
            s.pwrite(fd, b"abc", 0).unwrap();
            s.ftruncate(fd, 0).unwrap();
            s.ftruncate(fd, 3 * MIB).unwrap();
            s.lseek(fd, 0, SEEK_DATA)
        }),
    ]);
}

#[test]
fn write_stamps_mtime_and_ctime() {
    // After write and pwrite: mtime is new, ctime equals it (one timestamp for both),
    // atime is kept. A 0-byte write changes nothing.
    expect(
        ((true, true, true), (true, true, true), (true, true, true)),
        |s| {
            let run = |i: usize, data: &[u8]| {
                s.mkfile(b"/f", b"hello");
                s.set_times(b"/f", T2001, T2001);
                let old_c = s.stat(b"/f").unwrap().st_ctime;
                let fd = s.open(b"/f", WO, 0).unwrap();
                if i == 1 {
                    s.pwrite(fd, data, 2).unwrap();
                } else {
                    s.write(fd, data).unwrap();
                }
                s.close(fd).unwrap();
                let st = s.stat(b"/f").unwrap();
                if data.is_empty() {
                    (
                        st.st_mtime == T2001,
                        st.st_ctime == old_c,
                        st.st_atime == T2001,
                    )
                } else {
                    (
                        st.st_mtime > T2001,
                        st.st_ctime == st.st_mtime,
                        st.st_atime == T2001,
                    )
                }
            };
            (run(0, b"x"), run(1, b"y"), run(2, b""))
        },
    );
}

#[test]
fn read_updates_atime_under_relatime() {
    // (atime after the read) for: an old atime (updated); an atime newer than mtime and ctime
    // and less than a day old (kept); a 0-byte read; a read at end of file.
    expect((true, true), |s| {
        s.mkfile(b"/f", b"hello");
        s.set_times(b"/f", T2001, T2001);
        let fd = s.open(b"/f", RO, 0).unwrap();
        s.read(fd, &mut [0; 2]).unwrap();
        let updated = s.fstat(fd).unwrap().st_atime > T2001;
        // atime in the future: newer than mtime and ctime, so relatime leaves it.
        s.set_times(b"/f", T2100, T2001);
        s.read(fd, &mut [0; 2]).unwrap();
        (updated, s.fstat(fd).unwrap().st_atime == T2100)
    });
    expect((true, true), |s| {
        s.mkfile(b"/f", b"hello");
        s.set_times(b"/f", T2001, T2001);
        let fd = s.open(b"/f", RO, 0).unwrap();
        s.pread(fd, &mut [0; 2], 1).unwrap();
        let pread_updates = s.fstat(fd).unwrap().st_atime > T2001;
        s.set_times(b"/f", T2001, T2001);
        s.lseek(fd, 0, SEEK_END).unwrap();
        s.read(fd, &mut [0; 2]).unwrap();
        (pread_updates, s.fstat(fd).unwrap().st_atime > T2001)
    });
    // Opening, writing and closing do not touch atime.
    expect(T2001, |s| {
        s.mkfile(b"/f", b"hello");
        s.set_times(b"/f", T2001, T2001);
        let fd = s.open(b"/f", RW, 0).unwrap();
        s.write(fd, b"x").unwrap();
        s.close(fd).unwrap();
        s.stat(b"/f").unwrap().st_atime
    });
}

/// Bug: a read of 0 bytes left atime alone; Linux's `shmem_file_read_iter` calls
/// `file_accessed` for every read that gets past the checks, 0 bytes too. Cause: `read`
/// and `pread` touched atime only when `len > 0`. Fix: touch atime after every successful
/// read (read_write.rs).
#[test]
fn regression_zero_length_read_updates_atime() {
    expect((true, true), |s| {
        s.mkfile(b"/f", b"hello");
        s.set_times(b"/f", T2001, T2001);
        let fd = s.open(b"/f", RO, 0).unwrap();
        s.read(fd, &mut []).unwrap();
        let read = s.fstat(fd).unwrap().st_atime > T2001;
        s.set_times(b"/f", T2001, T2001);
        s.pread(fd, &mut [], 100).unwrap();
        (read, s.fstat(fd).unwrap().st_atime > T2001)
    });
}

/// Bug (part): a non-root write kept set-group-ID on a file without group execute even
/// when the writer was not in the file's group; Linux drops it (`setattr_should_drop_sgid`,
/// 5.19+). Cause: `Inode::kill_suid` dropped set-group-ID only with group execute, the
/// old mandatory-locking rule. Fix: also drop it when the writer is not in the file's group
/// (inode.rs).
///
/// Through the FUSE client, set-group-ID without group execute stays for a writer outside
/// the group: Linux's FUSE client recomputes the kill from refreshed attributes
/// (`fuse_setattr`) and clears set-group-ID only with group execute (measured: a kernel
/// FUSE mount of libfuse 3.14's passthrough_ll, a 06767 file of group 0 written by uid
/// 1000 became 02767, a 02777 one 0777).
#[test]
fn regression_write_by_non_root_clears_setuid_and_setgid() {
    // Modes after writes to files created 06777 (by root), 02767 (by root, gid 0) and
    // 02767 (by uid 1000, gid 1000).
    expect_fuse(
        [
            ("root writes", 0o106777),
            ("1000 writes 06777", 0o100777),
            ("1000 writes 02767 of group 0", 0o100767),
            ("1000 writes 02767 of its own group", 0o102767),
            ("2000 in group 1000 writes 02767", 0o102767),
            ("2000 writes 02767 of group 1000", 0o100767),
            ("1000 writes 0 bytes to 06777", 0o106777),
        ],
        [
            ("root writes", 0o106777),
            ("1000 writes 06777", 0o100777),
            ("1000 writes 02767 of group 0", 0o102767),
            ("1000 writes 02767 of its own group", 0o102767),
            ("2000 in group 1000 writes 02767", 0o102767),
            ("2000 writes 02767 of group 1000", 0o102767),
            ("1000 writes 0 bytes to 06777", 0o106777),
        ],
        |s| {
            s.umask(0);
            s.mkdirat(CWD, b"/w", 0o777).unwrap();
            for (p, m) in [
                (&b"/w/a"[..], 0o6777),
                (b"/w/b", 0o6777),
                (b"/w/c", 0o2767),
                (b"/w/z", 0o6777),
            ] {
                let fd = s.open(p, CREAT | WO, m).unwrap();
                s.close(fd).unwrap();
            }
            let write = |s: &dyn Sys, p: &[u8], data: &[u8]| {
                let fd = s.open(p, WO, 0).unwrap();
                s.write(fd, data).unwrap();
                s.close(fd).unwrap();
                s.stat(p).unwrap().st_mode
            };
            let root = write(s, b"/w/b", b"x");
            s.set_cred(1000, 1000, &[]);
            let a = write(s, b"/w/a", b"x");
            let c = write(s, b"/w/c", b"x");
            let z = write(s, b"/w/z", b"");
            for p in [&b"/w/d"[..], b"/w/e"] {
                let fd = s.open(p, CREAT | WO, 0o2767).unwrap();
                s.close(fd).unwrap();
            }
            let d = write(s, b"/w/d", b"x");
            s.set_cred(2000, 2000, &[1000]);
            let e_in = write(s, b"/w/e", b"x");
            s.set_cred(1000, 1000, &[]);
            let fd = s.open(b"/w/f", CREAT | WO, 0o2767).unwrap();
            s.close(fd).unwrap();
            s.set_cred(2000, 2000, &[]);
            let f_out = write(s, b"/w/f", b"x");
            [
                ("root writes", root),
                ("1000 writes 06777", a),
                ("1000 writes 02767 of group 0", c),
                ("1000 writes 02767 of its own group", d),
                ("2000 in group 1000 writes 02767", e_in),
                ("2000 writes 02767 of group 1000", f_out),
                ("1000 writes 0 bytes to 06777", z),
            ]
        },
    );
}

#[test]
fn owned_fd_read_write_seek() {
    /// The same std::io calls on any handle; results as raw errnos.
    fn exercise<F: Read + Write + Seek>(f: &mut F) -> Vec<Result<String, i32>> {
        let e = |e: std::io::Error| e.raw_os_error().unwrap_or(-1);
        let mut out = Vec::new();
        out.push(f.write_all(b"hello world").map(|_| "ok".into()).map_err(e));
        out.push(f.seek(SeekFrom::Start(0)).map(|p| p.to_string()).map_err(e));
        let mut s = String::new();
        out.push(f.read_to_string(&mut s).map(|_| s.clone()).map_err(e));
        out.push(f.seek(SeekFrom::End(-5)).map(|p| p.to_string()).map_err(e));
        out.push(
            f.seek(SeekFrom::Current(1))
                .map(|p| p.to_string())
                .map_err(e),
        );
        let mut b = [0u8; 3];
        out.push(
            f.read_exact(&mut b)
                .map(|_| String::from_utf8_lossy(&b).into())
                .map_err(e),
        );
        out.push(
            f.seek(SeekFrom::Current(-100))
                .map(|p| p.to_string())
                .map_err(e),
        );
        out.push(f.seek(SeekFrom::End(3)).map(|p| p.to_string()).map_err(e));
        out.push(f.write(b"!").map(|n| n.to_string()).map_err(e));
        out.push(f.stream_position().map(|p| p.to_string()).map_err(e));
        out.push(f.flush().map(|_| "flushed".into()).map_err(e));
        out
    }
    let want: Vec<Result<String, i32>> = vec![
        Ok("ok".into()),
        Ok("0".into()),
        Ok("hello world".into()),
        Ok("6".into()),
        Ok("7".into()),
        Ok("orl".into()),
        Err(22),
        Ok("14".into()),
        Ok("1".into()),
        Ok("15".into()),
        Ok("flushed".into()),
    ];
    let u = Uvfs::new();
    let fd = u.task.open(b"/f", CREAT | RW, 0o644).unwrap();
    let mut owned = OwnedFd::new(&u.task, fd);
    assert_eq!(exercise(&mut owned), want);
    assert_eq!(owned.stat().unwrap().st_size, 15);
    // Drop closes the descriptor; into_raw does not.
    drop(owned);
    assert_eq!(u.task.fstat(fd), Err(Errno::EBADF));
    let owned = u.task.open_owned(b"/f", RO, 0).unwrap();
    assert_eq!(owned.fd(), Fd(0));
    let raw = owned.into_raw();
    assert!(u.task.fstat(raw).is_ok());
    // Seeking to an offset past i64::MAX is EINVAL.
    let mut o = OwnedFd::new(&u.task, raw);
    assert_eq!(
        o.seek(SeekFrom::Start(u64::MAX))
            .unwrap_err()
            .raw_os_error(),
        Some(22)
    );
    // Linux: the same calls on a std::fs::File over the host kernel.
    if let Some(host) = on_host(&|s| {
        use std::os::fd::FromRawFd;
        let fd = s.open(b"/f", CREAT | RW, 0o644).unwrap();
        // SAFETY: `fd` was just opened in this sandbox and is owned by the File from here.
        let mut f = unsafe { std::fs::File::from_raw_fd(fd.0) };
        exercise(&mut f)
    }) {
        assert_eq!(host, want);
    }
}

#[test]
fn change_after_stat_shows_a_later_time() {
    // Multigrain timestamps (tmpfs since Linux 6.13): changes are stamped with the coarse
    // clock, but a change after a stat of the file gets a time later than the one that stat
    // saw, even within one clock tick. Each pair below runs well within one tick.
    expect((true, true, true, true, true), |s| {
        s.mkfile(b"/f", b"");
        let fd = s.open(b"/f", RW, 0).unwrap();
        s.write(fd, b"a").unwrap();
        let a = s.fstat(fd).unwrap();
        s.write(fd, b"b").unwrap();
        let b = s.fstat(fd).unwrap();
        s.pwrite(fd, b"c", 0).unwrap();
        let c = s.stat(b"/f").unwrap();
        s.ftruncate(fd, 1).unwrap();
        let d = s.fstat(fd).unwrap();
        // futimens sets explicit times; the ctime still moves past what was seen.
        s.futimens(fd, Some(&[T2001, T2001])).unwrap();
        let e = s.fstat(fd).unwrap();
        s.close(fd).unwrap();
        (
            b.st_mtime > a.st_mtime && b.st_ctime == b.st_mtime,
            c.st_mtime > b.st_mtime && c.st_ctime == c.st_mtime,
            d.st_mtime > c.st_mtime && d.st_ctime == d.st_mtime,
            e.st_ctime > d.st_ctime && e.st_mtime == T2001,
            // Never backwards: every later ctime is at least the earlier one.
            a.st_ctime <= b.st_ctime && d.st_ctime <= e.st_ctime,
        )
    });
}

#[test]
fn reads_see_writes_truncates_and_reopens() {
    // Through the FUSE client the reads go through its page cache: each read after a
    // change (a write through another descriptor, a shrink, a grow, a write past the end
    // leaving a hole) returns what Linux returns, on the descriptor that read before the
    // change and on a new open.
    const P: usize = 4096;
    let mut want: Vec<Vec<u8>> = Vec::new();
    let mut data = vec![b'a'; 3 * P + 100];
    want.push(data[P..3 * P].to_vec());
    data[P + 10..P + 13].copy_from_slice(b"XYZ");
    want.push(data[P..P + 20].to_vec());
    data.truncate(5000);
    want.push(data[P..].to_vec());
    data.resize(9000, 0);
    want.push(data.clone());
    data.resize(12000, 0);
    data.extend_from_slice(b"end");
    want.push(data[11990..].to_vec());
    want.push(data.clone());
    expect(Ok(want), |s| {
        let rd = |fd: Fd, len: usize, off: i64| {
            let mut b = vec![0u8; len];
            s.pread(fd, &mut b, off).map(|n| {
                b.truncate(n);
                b
            })
        };
        let f = s.open(b"/f", CREAT | RW, 0o644)?;
        s.pwrite(f, &[b'a'; 3 * P + 100], 0)?;
        let g = s.open(b"/f", RO, 0)?;
        let mut got = vec![rd(g, 2 * P, P as i64)?];
        s.pwrite(f, b"XYZ", P as i64 + 10)?;
        got.push(rd(g, 20, P as i64)?);
        s.ftruncate(f, 5000)?;
        got.push(rd(g, 2 * P, P as i64)?);
        s.ftruncate(f, 9000)?;
        got.push(rd(g, 4 * P, 0)?);
        s.pwrite(f, b"end", 12000)?;
        got.push(rd(g, 100, 11990)?);
        s.close(g)?;
        let h = s.open(b"/f", RO, 0)?;
        got.push(rd(h, 4 * P, 0)?);
        Ok::<_, Errno>(got)
    });
}
