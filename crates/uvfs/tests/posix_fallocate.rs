//! `fallocate(2)`: allocation (mode 0, `FALLOC_FL_KEEP_SIZE`), hole punching
//! (`FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`), the refused modes, the error order, the
//! timestamps and set-ID bits, `SEEK_DATA`/`SEEK_HOLE`, `size=` limits and `RLIMIT_FSIZE`,
//! asserted against Linux tmpfs (each case also runs on the host kernel, see `common`).
//!
//! Linux: `ksys_fallocate` (`EBADF` for a descriptor that is not open or is `O_PATH`),
//! `vfs_fallocate` (`EINVAL`, the mode checks, `EBADF` without `FMODE_WRITE`,
//! `ESPIPE`/`EISDIR`/`ENODEV`, `EFBIG`), then `shmem_fallocate` (only `KEEP_SIZE` and
//! `PUNCH_HOLE`: `EOPNOTSUPP` for the modes `vfs_fallocate` let through; `RLIMIT_FSIZE`;
//! `ENOSPC`).

mod common;
use common::*;
use uvfs::types::*;
use uvfs::{Errno, Fd, OpenFlags};

type R<T> = Result<T, Errno>;

/// `FALLOC_FL_KEEP_SIZE`.
const KEEP: i32 = 0x01;
/// `FALLOC_FL_PUNCH_HOLE` (alone it is refused: it needs `KEEP_SIZE`).
const PUNCH_HOLE: i32 = 0x02;
/// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`, the only way to punch.
const PUNCH: i32 = PUNCH_HOLE | KEEP;
/// `FALLOC_FL_NO_HIDE_STALE` (not in `FALLOC_FL_SUPPORTED_MASK`).
const NO_HIDE_STALE: i32 = 0x04;
/// `FALLOC_FL_COLLAPSE_RANGE`.
const COLLAPSE: i32 = 0x08;
/// `FALLOC_FL_ZERO_RANGE`.
const ZERO: i32 = 0x10;
/// `FALLOC_FL_INSERT_RANGE`.
const INSERT: i32 = 0x20;
/// `FALLOC_FL_UNSHARE_RANGE`.
const UNSHARE: i32 = 0x40;
/// `FALLOC_FL_WRITE_ZEROES` (Linux 6.17+; before, an unknown bit).
const WRITE_ZEROES: i32 = 0x80;

const PS: i64 = 4096;
const KIB: u64 = 1024;

/// Contents as runs of equal bytes: `[(b'a', 4096), (0, 10)]`.
type Runs = Vec<(u8, usize)>;

fn runs(data: &[u8]) -> Runs {
    let mut out: Runs = Vec::new();
    for &b in data {
        match out.last_mut() {
            Some((c, n)) if *c == b => *n += 1,
            _ => out.push((b, 1)),
        }
    }
    out
}

/// `(st_size, st_blocks, contents)` of the open file `fd` (opened for reading).
fn state(s: &dyn Sys, fd: Fd) -> (i64, i64, Runs) {
    let st = s.fstat(fd).unwrap();
    let mut data = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = s.pread(fd, &mut buf, data.len() as i64).unwrap();
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
    }
    (st.st_size, st.st_blocks, runs(&data))
}

/// `(st_size, st_blocks)` of `fd`.
fn sb(s: &dyn Sys, fd: Fd) -> (i64, i64) {
    let st = s.fstat(fd).unwrap();
    (st.st_size, st.st_blocks)
}

/// A new empty file `/f` open read-write.
fn new_file(s: &dyn Sys) -> Fd {
    s.open(b"/f", CREAT | RW, 0o644).unwrap()
}

/// `/f` open read-write, holding `n` bytes of `c`.
fn file_of(s: &dyn Sys, c: u8, n: usize) -> Fd {
    let fd = new_file(s);
    assert_eq!(s.write(fd, &vec![c; n]), Ok(n));
    fd
}

/// `/f` open read-write: three pages, of `a`, `b` and `c`.
fn abc(s: &dyn Sys) -> Fd {
    let fd = new_file(s);
    for c in [b'a', b'b', b'c'] {
        s.write(fd, &[c; PS as usize]).unwrap();
    }
    fd
}

/// `(SEEK_DATA, SEEK_HOLE)` from each of `offs`.
fn seeks(s: &dyn Sys, fd: Fd, offs: &[i64]) -> Vec<(R<i64>, R<i64>)> {
    offs.iter()
        .map(|&o| (s.lseek(fd, o, SEEK_DATA), s.lseek(fd, o, SEEK_HOLE)))
        .collect()
}

type St = (R<()>, (i64, i64, Runs));

#[test]
fn allocate_grows_the_file_and_counts_blocks() {
    // Mode 0 allocates zeroed pages for the holes of the range and grows the size to its
    // end; KEEP_SIZE allocates without growing. Data already there is kept; blocks count
    // every allocated page (past the end of file too).
    table::<St>(&[
        (
            "mode 0, empty file",
            (Ok(()), (10, 8, vec![(0, 10)])),
            |s| {
                let fd = new_file(s);
                (s.fallocate(fd, 0, 0, 10), state(s, fd))
            },
        ),
        (
            "mode 0, second page only",
            (Ok(()), (5100, 8, vec![(0, 5100)])),
            |s| {
                let fd = new_file(s);
                (s.fallocate(fd, 0, 5000, 100), state(s, fd))
            },
        ),
        (
            "mode 0, across a page boundary",
            (Ok(()), (4200, 16, vec![(0, 4200)])),
            |s| {
                let fd = new_file(s);
                (s.fallocate(fd, 0, 4000, 200), state(s, fd))
            },
        ),
        (
            "mode 0 inside the data",
            (Ok(()), (100, 8, vec![(b'a', 100)])),
            |s| {
                let fd = file_of(s, b'a', 100);
                (s.fallocate(fd, 0, 10, 20), state(s, fd))
            },
        ),
        (
            "mode 0 never shrinks",
            (
                Ok(()),
                (12288, 24, vec![(b'a', 4096), (b'b', 4096), (b'c', 4096)]),
            ),
            |s| {
                let fd = abc(s);
                (s.fallocate(fd, 0, 0, 10), state(s, fd))
            },
        ),
        (
            "mode 0 past the end keeps the data",
            (Ok(()), (20000, 40, vec![(b'a', 100), (0, 19900)])),
            |s| {
                let fd = file_of(s, b'a', 100);
                (s.fallocate(fd, 0, 50, 19950), state(s, fd))
            },
        ),
        (
            "mode 0 fills a hole of a sparse file",
            (Ok(()), (12288, 16, vec![(b'a', 1), (0, 12287)])),
            |s| {
                let fd = file_of(s, b'a', 1);
                s.ftruncate(fd, 3 * PS).unwrap();
                (s.fallocate(fd, 0, PS, PS), state(s, fd))
            },
        ),
        (
            "mode 0 far from the start",
            (Ok(()), (1 << 20, 8, vec![(0, 1 << 20)])),
            |s| {
                let fd = new_file(s);
                (s.fallocate(fd, 0, (1 << 20) - 1, 1), state(s, fd))
            },
        ),
        (
            "KEEP_SIZE past the end",
            (Ok(()), (10, 24, vec![(b'a', 10)])),
            |s| {
                let fd = file_of(s, b'a', 10);
                (s.fallocate(fd, KEEP, 0, 3 * PS), state(s, fd))
            },
        ),
        (
            "KEEP_SIZE on an empty file",
            (Ok(()), (0, 16, vec![])),
            |s| {
                let fd = new_file(s);
                (s.fallocate(fd, KEEP, PS, PS + 1), state(s, fd))
            },
        ),
        (
            "KEEP_SIZE inside a sparse file",
            (Ok(()), (12288, 8, vec![(0, 12288)])),
            |s| {
                let fd = new_file(s);
                s.ftruncate(fd, 3 * PS).unwrap();
                (s.fallocate(fd, KEEP, PS, 10), state(s, fd))
            },
        ),
        (
            "KEEP_SIZE, then ftruncate up over the pages",
            (Ok(()), (8192, 16, vec![(b'a', 10), (0, 8182)])),
            |s| {
                let fd = file_of(s, b'a', 10);
                let r = s.fallocate(fd, KEEP, 0, 2 * PS);
                s.ftruncate(fd, 2 * PS).unwrap();
                (r, state(s, fd))
            },
        ),
        (
            "KEEP_SIZE, then a write past the end",
            (Ok(()), (5001, 16, vec![(b'a', 10), (0, 4990), (b'b', 1)])),
            |s| {
                let fd = file_of(s, b'a', 10);
                let r = s.fallocate(fd, KEEP, 0, 2 * PS);
                s.pwrite(fd, b"b", 5000).unwrap();
                (r, state(s, fd))
            },
        ),
        (
            "KEEP_SIZE, then ftruncate up keeps the pages past the new size",
            (Ok(()), (5000, 32, vec![(b'a', 10), (0, 4990)])),
            |s| {
                let fd = file_of(s, b'a', 10);
                let r = s.fallocate(fd, KEEP, 0, 4 * PS);
                s.ftruncate(fd, 5000).unwrap();
                (r, state(s, fd))
            },
        ),
        (
            "KEEP_SIZE, then ftruncate down frees the pages past the new size",
            (Ok(()), (5000, 16, vec![(b'a', 5000)])),
            |s| {
                let fd = file_of(s, b'a', 10000);
                let r = s.fallocate(fd, KEEP, 0, 4 * PS);
                s.ftruncate(fd, 5000).unwrap();
                (r, state(s, fd))
            },
        ),
        (
            "twice over the same range",
            (Ok(()), (8192, 16, vec![(0, 8192)])),
            |s| {
                let fd = new_file(s);
                s.fallocate(fd, 0, 0, 2 * PS).unwrap();
                (s.fallocate(fd, 0, 0, 2 * PS), state(s, fd))
            },
        ),
        (
            "write-only descriptor",
            (Ok(()), (10, 8, vec![(0, 10)])),
            |s| {
                s.mkfile(b"/f", b"");
                let w = s.open(b"/f", WO, 0).unwrap();
                let r = s.fallocate(w, 0, 0, 10);
                let fd = s.open(b"/f", RO, 0).unwrap();
                (r, state(s, fd))
            },
        ),
        // IS_APPEND is the inode's append-only attribute (chattr +a), not O_APPEND.
        (
            "O_APPEND descriptor",
            (Ok(()), (10, 8, vec![(0, 10)])),
            |s| {
                let fd = s
                    .open(b"/f", CREAT | RW | OpenFlags::APPEND, 0o644)
                    .unwrap();
                (s.fallocate(fd, 0, 0, 10), state(s, fd))
            },
        ),
    ]);
}

#[test]
fn allocate_up_to_the_largest_offset() {
    // offset + len == MAX_LFS_FILESIZE is allowed (`sum > s_maxbytes` is the check): one
    // page at the very end, and the size becomes 2^63 - 1.
    expect((Ok(()), (i64::MAX, 8)), |s| {
        let fd = new_file(s);
        (s.fallocate(fd, 0, i64::MAX - 1, 1), sb(s, fd))
    });
    // Two pages (the range is not page-aligned). The last page can never be punched whole
    // (its last byte lies past the largest offset + len): a punch of it only zeroes; one of
    // the page before frees that page.
    expect(
        ((Ok(()), (0, 16)), (Ok(()), (0, 16)), (Ok(()), (0, 8))),
        |s| {
            let fd = new_file(s);
            let a = (s.fallocate(fd, KEEP, i64::MAX - PS, PS), sb(s, fd));
            let b = (s.fallocate(fd, PUNCH, i64::MAX - PS + 1, PS - 1), sb(s, fd));
            let c = (s.fallocate(fd, PUNCH, i64::MAX - 2 * PS + 1, PS), sb(s, fd));
            (a, b, c)
        },
    );
}

#[test]
fn punch_hole_frees_whole_pages_and_zeroes_partial_ones() {
    let (a, b, c, z) = (b'a', b'b', b'c', 0u8);
    table::<St>(&[
        (
            "the middle page",
            (Ok(()), (12288, 16, vec![(a, 4096), (z, 4096), (c, 4096)])),
            |s| {
                let fd = abc(s);
                (s.fallocate(fd, PUNCH, PS, PS), state(s, fd))
            },
        ),
        (
            "inside one page",
            (
                Ok(()),
                (
                    12288,
                    24,
                    vec![(a, 100), (z, 100), (a, 3896), (b, 4096), (c, 4096)],
                ),
            ),
            |s| {
                let fd = abc(s);
                (s.fallocate(fd, PUNCH, 100, 100), state(s, fd))
            },
        ),
        (
            "partial pages at both ends, a whole one between",
            (Ok(()), (12288, 16, vec![(a, 4000), (z, 4300), (c, 3988)])),
            |s| {
                let fd = abc(s);
                (s.fallocate(fd, PUNCH, 4000, 4300), state(s, fd))
            },
        ),
        (
            "partial pages at both ends, none between",
            (
                Ok(()),
                (12288, 24, vec![(a, 4000), (z, 200), (b, 3992), (c, 4096)]),
            ),
            |s| {
                let fd = abc(s);
                (s.fallocate(fd, PUNCH, 4000, 200), state(s, fd))
            },
        ),
        (
            "page-aligned start, partial end",
            (Ok(()), (12288, 16, vec![(z, 5000), (b, 3192), (c, 4096)])),
            |s| {
                let fd = abc(s);
                (s.fallocate(fd, PUNCH, 0, 5000), state(s, fd))
            },
        ),
        (
            "the last page: the size stays",
            (Ok(()), (12288, 16, vec![(a, 4096), (b, 4096), (z, 4096)])),
            |s| {
                let fd = abc(s);
                (s.fallocate(fd, PUNCH, 2 * PS, PS), state(s, fd))
            },
        ),
        (
            "the whole file",
            (Ok(()), (12288, 0, vec![(z, 12288)])),
            |s| {
                let fd = abc(s);
                (s.fallocate(fd, PUNCH, 0, 3 * PS), state(s, fd))
            },
        ),
        (
            "running past the end",
            (Ok(()), (12288, 8, vec![(a, 4096), (z, 8192)])),
            |s| {
                let fd = abc(s);
                (s.fallocate(fd, PUNCH, PS, 1 << 20), state(s, fd))
            },
        ),
        (
            "entirely past the end",
            (Ok(()), (12288, 24, vec![(a, 4096), (b, 4096), (c, 4096)])),
            |s| {
                let fd = abc(s);
                (s.fallocate(fd, PUNCH, 1 << 20, PS), state(s, fd))
            },
        ),
        (
            "the partial last page",
            (Ok(()), (5000, 16, vec![(a, 4500), (z, 100), (a, 400)])),
            |s| {
                let fd = file_of(s, b'a', 5000);
                (s.fallocate(fd, PUNCH, 4500, 100), state(s, fd))
            },
        ),
        ("an empty file", (Ok(()), (0, 0, vec![])), |s| {
            let fd = new_file(s);
            (s.fallocate(fd, PUNCH, 0, PS), state(s, fd))
        }),
        (
            "a hole",
            (Ok(()), (12288, 16, vec![(a, 4096), (z, 4096), (c, 4096)])),
            |s| {
                let fd = abc(s);
                s.fallocate(fd, PUNCH, PS, PS).unwrap();
                (s.fallocate(fd, PUNCH, PS, PS), state(s, fd))
            },
        ),
        (
            "pages allocated past the end (KEEP_SIZE)",
            (Ok(()), (10, 8, vec![(a, 10)])),
            |s| {
                let fd = file_of(s, b'a', 10);
                s.fallocate(fd, KEEP, 0, 4 * PS).unwrap();
                (s.fallocate(fd, PUNCH, PS, 3 * PS), state(s, fd))
            },
        ),
        (
            "pages allocated by mode 0",
            (Ok(()), (16384, 16, vec![(z, 16384)])),
            |s| {
                let fd = new_file(s);
                s.fallocate(fd, 0, 0, 4 * PS).unwrap();
                (s.fallocate(fd, PUNCH, PS, 2 * PS), state(s, fd))
            },
        ),
        (
            "then a write into the punched page",
            (
                Ok(()),
                (
                    12288,
                    24,
                    vec![(a, 4096), (z, 10), (b'x', 1), (z, 4085), (c, 4096)],
                ),
            ),
            |s| {
                let fd = abc(s);
                let r = s.fallocate(fd, PUNCH, PS, PS);
                s.pwrite(fd, b"x", PS + 10).unwrap();
                (r, state(s, fd))
            },
        ),
        (
            "then mode 0 over the hole",
            (Ok(()), (12288, 24, vec![(a, 4096), (z, 4096), (c, 4096)])),
            |s| {
                let fd = abc(s);
                let r = s.fallocate(fd, PUNCH, PS, PS);
                s.fallocate(fd, 0, 0, 3 * PS).unwrap();
                (r, state(s, fd))
            },
        ),
    ]);
}

#[test]
fn seek_data_and_hole_after_punch() {
    type Sk = Vec<(R<i64>, R<i64>)>;
    let enxio = Err(Errno::ENXIO);
    table::<Sk>(&[
        (
            "the middle page",
            vec![
                (Ok(0), Ok(4096)),
                (Ok(8192), Ok(4096)),
                (Ok(8192), Ok(5000)),
                (Ok(8192), Ok(12288)),
            ],
            |s| {
                let fd = abc(s);
                s.fallocate(fd, PUNCH, PS, PS).unwrap();
                seeks(s, fd, &[0, PS, 5000, 2 * PS])
            },
        ),
        (
            "the last page",
            vec![(Ok(0), Ok(8192)), (enxio, Ok(8192)), (enxio, Ok(9000))],
            |s| {
                let fd = abc(s);
                s.fallocate(fd, PUNCH, 2 * PS, PS).unwrap();
                seeks(s, fd, &[0, 2 * PS, 9000])
            },
        ),
        (
            "the whole file",
            vec![(enxio, Ok(0)), (enxio, Ok(4096))],
            |s| {
                let fd = abc(s);
                s.fallocate(fd, PUNCH, 0, 3 * PS).unwrap();
                seeks(s, fd, &[0, PS])
            },
        ),
        // A partial punch zeroes bytes; the page stays allocated, and data.
        (
            "inside one page",
            vec![(Ok(0), Ok(12288)), (Ok(150), Ok(12288))],
            |s| {
                let fd = abc(s);
                s.fallocate(fd, PUNCH, 100, 100).unwrap();
                seeks(s, fd, &[0, 150])
            },
        ),
        (
            "then a write into the hole",
            vec![(Ok(0), Ok(12288)), (Ok(4096), Ok(12288))],
            |s| {
                let fd = abc(s);
                s.fallocate(fd, PUNCH, PS, PS).unwrap();
                s.pwrite(fd, b"x", PS + 10).unwrap();
                seeks(s, fd, &[0, PS])
            },
        ),
        // SEEK_* stop at the size: pages past it (KEEP_SIZE) are not found.
        ("a page past the end", vec![(enxio, enxio)], |s| {
            let fd = file_of(s, b'a', 10);
            s.fallocate(fd, KEEP, 0, 4 * PS).unwrap();
            s.fallocate(fd, PUNCH, 0, PS).unwrap();
            seeks(s, fd, &[10])
        }),
    ]);
}

/// Difference (documented in the README): Linux tmpfs keeps a page that `fallocate`
/// allocated "not uptodate" until something writes it (`shmem_get_folio_gfp` with
/// `SGP_FALLOC` leaves a new folio `!uptodate`; `shmem_write_end` marks it uptodate; so
/// does a second `SGP_FALLOC` over it), and `SEEK_DATA`/`SEEK_HOLE` report such pages as
/// holes (`mapping_seek_hole_data` -> `folio_seek_hole_data`). uvfs stores a zeroed page
/// and reports every stored page as data, which `SEEK_*` allow (a hole may always be
/// reported as data): the file reads the same (zeros) and has the same `st_blocks`.
/// Where the two agree: after a second `fallocate` over the pages, or once a page is written.
#[test]
fn seek_over_fallocated_pages_differs_from_linux() {
    type Sk = Vec<(R<i64>, R<i64>)>;
    let enxio = Err(Errno::ENXIO);
    let fallocated = |s: &mut dyn Sys| {
        let fd = new_file(s);
        s.fallocate(fd, 0, 0, 2 * PS).unwrap();
        seeks(s, fd, &[0, PS])
    };
    let written_second = |s: &mut dyn Sys| {
        let fd = new_file(s);
        s.fallocate(fd, 0, 0, 2 * PS).unwrap();
        s.pwrite(fd, b"x", 5000).unwrap();
        seeks(s, fd, &[0])
    };
    let linux: Sk = vec![(enxio, Ok(0)), (enxio, Ok(4096))];
    let uvfs: Sk = vec![(Ok(0), Ok(8192)), (Ok(4096), Ok(8192))];
    assert_eq!(on_uvfs(&fallocated), uvfs);
    if let Some(h) = on_host(&fallocated) {
        assert_eq!(
            h, linux,
            "Linux reports fallocated, unwritten pages as holes"
        );
    }
    // Linux: page 0 (never written) is a hole, page 1 data.
    assert_eq!(on_uvfs(&written_second), vec![(Ok(0), Ok(8192))]);
    if let Some(h) = on_host(&written_second) {
        assert_eq!(h, vec![(Ok(4096), Ok(0))]);
    }
    table::<Sk>(&[
        ("fallocated twice", vec![(Ok(0), Ok(8192))], |s| {
            let fd = new_file(s);
            s.fallocate(fd, 0, 0, 2 * PS).unwrap();
            s.fallocate(fd, 0, 0, 2 * PS).unwrap();
            seeks(s, fd, &[0])
        }),
        ("every page written", vec![(Ok(0), Ok(8192))], |s| {
            let fd = new_file(s);
            s.fallocate(fd, 0, 0, 2 * PS).unwrap();
            s.pwrite(fd, b"x", 0).unwrap();
            s.pwrite(fd, b"x", PS).unwrap();
            seeks(s, fd, &[0])
        }),
        (
            "written pages, then fallocate over them",
            vec![(Ok(0), Ok(8192))],
            |s| {
                let fd = file_of(s, b'a', 2 * PS as usize);
                s.fallocate(fd, 0, 0, 2 * PS).unwrap();
                seeks(s, fd, &[0])
            },
        ),
    ]);
}

#[test]
fn error_order() {
    // ksys_fallocate: EBADF for a descriptor that is not open (or O_PATH); vfs_fallocate:
    // EINVAL (offset < 0, len <= 0), EOPNOTSUPP (unknown bits, PUNCH_HOLE without
    // KEEP_SIZE, COLLAPSE/INSERT/WRITE_ZEROES with it, two modes at once), EBADF (not open
    // for writing), EFBIG (offset + len overflows); then shmem_fallocate: EOPNOTSUPP for
    // the modes vfs_fallocate accepted but tmpfs lacks (ZERO_RANGE, UNSHARE_RANGE,
    // COLLAPSE_RANGE, INSERT_RANGE, WRITE_ZEROES).
    fn ro(s: &dyn Sys) -> Fd {
        s.mkfile(b"/f", b"data");
        s.open(b"/f", RO, 0).unwrap()
    }
    let (ebadf, einval, eop, efbig) = (
        Err(Errno::EBADF),
        Err(Errno::EINVAL),
        Err(Errno::EOPNOTSUPP),
        Err(Errno::EFBIG),
    );
    table::<R<()>>(&[
        ("not open", ebadf, |s| s.fallocate(Fd(9), 0, 0, 1)),
        ("negative", ebadf, |s| s.fallocate(Fd(-1), 0, 0, 1)),
        ("not open: before EINVAL", ebadf, |s| {
            s.fallocate(Fd(9), 0, -1, 0)
        }),
        ("not open: before EOPNOTSUPP", ebadf, |s| {
            s.fallocate(Fd(9), 0x100, 0, 1)
        }),
        ("closed", ebadf, |s| {
            let fd = new_file(s);
            s.close(fd).unwrap();
            s.fallocate(fd, 0, 0, 1)
        }),
        ("O_PATH", ebadf, |s| {
            s.mkfile(b"/f", b"");
            let fd = s.open(b"/f", OpenFlags::PATH, 0).unwrap();
            s.fallocate(fd, 0, 0, 1)
        }),
        ("O_PATH: before EINVAL", ebadf, |s| {
            s.mkfile(b"/f", b"");
            let fd = s.open(b"/f", OpenFlags::PATH, 0).unwrap();
            s.fallocate(fd, 0x100, -1, 0)
        }),
        ("negative offset", einval, |s| {
            s.fallocate(new_file(s), 0, -1, 1)
        }),
        ("zero length", einval, |s| s.fallocate(new_file(s), 0, 0, 0)),
        ("negative length", einval, |s| {
            s.fallocate(new_file(s), 0, 0, -1)
        }),
        ("zero length, punching", einval, |s| {
            s.fallocate(new_file(s), PUNCH, 0, 0)
        }),
        ("zero length: before EOPNOTSUPP", einval, |s| {
            s.fallocate(new_file(s), 0x100, 0, 0)
        }),
        ("zero length: before EBADF (read-only)", einval, |s| {
            s.fallocate(ro(s), 0, 0, 0)
        }),
        ("negative offset: before EFBIG", einval, |s| {
            s.fallocate(new_file(s), 0, -1, i64::MAX)
        }),
        ("PUNCH_HOLE alone: before EBADF (read-only)", eop, |s| {
            s.fallocate(ro(s), PUNCH_HOLE, 0, 1)
        }),
        ("NO_HIDE_STALE", eop, |s| {
            s.fallocate(ro(s), NO_HIDE_STALE, 0, 1)
        }),
        ("NO_HIDE_STALE | PUNCH", eop, |s| {
            s.fallocate(new_file(s), NO_HIDE_STALE | PUNCH, 0, 1)
        }),
        ("unknown bit", eop, |s| s.fallocate(ro(s), 0x100, 0, 1)),
        ("sign bit", eop, |s| s.fallocate(ro(s), i32::MIN, 0, 1)),
        ("COLLAPSE | KEEP_SIZE", eop, |s| {
            s.fallocate(ro(s), COLLAPSE | KEEP, 0, 1)
        }),
        ("INSERT | KEEP_SIZE", eop, |s| {
            s.fallocate(ro(s), INSERT | KEEP, 0, 1)
        }),
        ("WRITE_ZEROES | KEEP_SIZE", eop, |s| {
            s.fallocate(ro(s), WRITE_ZEROES | KEEP, 0, 1)
        }),
        ("PUNCH | ZERO", eop, |s| {
            s.fallocate(ro(s), PUNCH | ZERO, 0, 1)
        }),
        ("ZERO | COLLAPSE", eop, |s| {
            s.fallocate(ro(s), ZERO | COLLAPSE, 0, 1)
        }),
        ("PUNCH_HOLE alone: before EFBIG", eop, |s| {
            s.fallocate(new_file(s), PUNCH_HOLE, i64::MAX, 1)
        }),
        ("read-only", ebadf, |s| s.fallocate(ro(s), 0, 0, 1)),
        ("read-only, KEEP_SIZE", ebadf, |s| {
            s.fallocate(ro(s), KEEP, 0, 1)
        }),
        ("read-only, PUNCH", ebadf, |s| {
            s.fallocate(ro(s), PUNCH, 0, 1)
        }),
        ("read-only: before EFBIG", ebadf, |s| {
            s.fallocate(ro(s), 0, i64::MAX, 1)
        }),
        ("a directory (read-only)", ebadf, |s| {
            let fd = s.open(b"/", RO | OpenFlags::DIRECTORY, 0).unwrap();
            s.fallocate(fd, 0, 0, 1)
        }),
        ("offset + len overflows", efbig, |s| {
            s.fallocate(new_file(s), 0, i64::MAX, 1)
        }),
        ("offset + len overflows, KEEP_SIZE", efbig, |s| {
            s.fallocate(new_file(s), KEEP, 1, i64::MAX)
        }),
        ("offset + len overflows, PUNCH", efbig, |s| {
            s.fallocate(new_file(s), PUNCH, i64::MAX - 10, 11)
        }),
        ("ZERO_RANGE", eop, |s| s.fallocate(new_file(s), ZERO, 0, 1)),
        ("ZERO_RANGE | KEEP_SIZE", eop, |s| {
            s.fallocate(new_file(s), ZERO | KEEP, 0, 1)
        }),
        ("UNSHARE_RANGE", eop, |s| {
            s.fallocate(new_file(s), UNSHARE, 0, 1)
        }),
        ("COLLAPSE_RANGE", eop, |s| {
            s.fallocate(new_file(s), COLLAPSE, 0, PS)
        }),
        ("INSERT_RANGE", eop, |s| {
            s.fallocate(new_file(s), INSERT, 0, PS)
        }),
        ("WRITE_ZEROES", eop, |s| {
            s.fallocate(new_file(s), WRITE_ZEROES, 0, 1)
        }),
    ]);
}

/// Bug: a mode that `vfs_fallocate` accepts but tmpfs lacks (`ZERO_RANGE`,
/// `UNSHARE_RANGE`, `COLLAPSE_RANGE`, `INSERT_RANGE`, `WRITE_ZEROES`) gave `EOPNOTSUPP` on a
/// read-only descriptor (Linux: `EBADF`) and for an overflowing range (Linux: `EFBIG`).
/// Cause: `Task::fallocate` refused every mode but `KEEP_SIZE`/`PUNCH_HOLE` in one check
/// before `EBADF`, where Linux refuses them in two places: `vfs_fallocate` (unknown bits,
/// invalid combinations) before the write and range checks, `shmem_fallocate` after them.
/// Fix: the two checks, each where Linux makes it (read_write.rs).
#[test]
fn regression_modes_tmpfs_lacks_are_refused_after_ebadf_and_efbig() {
    fn ro(s: &dyn Sys) -> Fd {
        s.mkfile(b"/f", b"data");
        s.open(b"/f", RO, 0).unwrap()
    }
    let (ebadf, efbig) = (Err(Errno::EBADF), Err(Errno::EFBIG));
    table::<R<()>>(&[
        (
            "read-only, ZERO_RANGE (a mode vfs_fallocate accepts)",
            ebadf,
            |s| s.fallocate(ro(s), ZERO, 0, 1),
        ),
        ("read-only, ZERO_RANGE | KEEP_SIZE", ebadf, |s| {
            s.fallocate(ro(s), ZERO | KEEP, 0, 1)
        }),
        ("read-only, UNSHARE_RANGE", ebadf, |s| {
            s.fallocate(ro(s), UNSHARE, 0, 1)
        }),
        ("read-only, UNSHARE_RANGE | KEEP_SIZE", ebadf, |s| {
            s.fallocate(ro(s), UNSHARE | KEEP, 0, 1)
        }),
        ("read-only, COLLAPSE_RANGE", ebadf, |s| {
            s.fallocate(ro(s), COLLAPSE, 0, 1)
        }),
        ("read-only, INSERT_RANGE", ebadf, |s| {
            s.fallocate(ro(s), INSERT, 0, 1)
        }),
        ("read-only, WRITE_ZEROES", ebadf, |s| {
            s.fallocate(ro(s), WRITE_ZEROES, 0, 1)
        }),
        (
            "offset + len overflows, ZERO_RANGE: before tmpfs refuses it",
            efbig,
            |s| s.fallocate(new_file(s), ZERO, i64::MAX, 1),
        ),
        ("offset + len overflows, COLLAPSE_RANGE", efbig, |s| {
            s.fallocate(new_file(s), COLLAPSE, i64::MAX, i64::MAX)
        }),
        ("overflows, UNSHARE_RANGE | KEEP_SIZE", efbig, |s| {
            s.fallocate(new_file(s), UNSHARE | KEEP, 1, i64::MAX)
        }),
        ("overflows, INSERT_RANGE", efbig, |s| {
            s.fallocate(new_file(s), INSERT, i64::MAX, 1)
        }),
        ("overflows, WRITE_ZEROES", efbig, |s| {
            s.fallocate(new_file(s), WRITE_ZEROES, i64::MAX, 1)
        }),
    ]);
}

#[test]
fn failures_change_nothing() {
    // Size, blocks, contents and times stay as they were after each refused call.
    expect((vec![false; 8], (10, 8, vec![(b'a', 10)])), |s| {
        let fd = file_of(s, b'a', 10);
        s.futimens(fd, Some(&[T2001, T2001])).unwrap();
        let r = [
            s.fallocate(fd, 0, -1, PS),
            s.fallocate(fd, PUNCH_HOLE, 0, PS),
            s.fallocate(fd, ZERO, 0, PS),
            s.fallocate(fd, COLLAPSE, 0, PS),
            s.fallocate(fd, 0, i64::MAX, PS),
            s.fallocate(fd, PUNCH, i64::MAX, PS),
            s.fallocate(ro_of(s), 0, 0, PS),
            s.fallocate(ro_of(s), PUNCH, 0, PS),
        ];
        let st = s.fstat(fd).unwrap();
        assert_eq!((st.st_mtime, st.st_atime), (T2001, T2001));
        (r.iter().map(Result::is_ok).collect(), state(s, fd))
    });
}

/// `/f` opened again, read-only.
fn ro_of(s: &dyn Sys) -> Fd {
    s.open(b"/f", RO, 0).unwrap()
}

/// ESPIPE (a FIFO), EISDIR (a directory) and ENODEV (a device) come after the EBADF of a
/// descriptor not open for writing, so they need a FIFO or device open for writing: uvfs
/// opens neither (README: no pipes or drivers), and no directory opens for writing. uvfs
/// therefore gives the open's error; Linux's answers are checked here on the host.
#[test]
fn fifos_and_devices_cannot_be_opened_on_uvfs() {
    let f = |s: &mut dyn Sys| {
        s.mknodat(CWD, b"/p", S_IFIFO | 0o666, 0).unwrap();
        s.mknodat(CWD, b"/null", S_IFCHR | 0o666, makedev(1, 3))
            .unwrap();
        let p = s.open(b"/p", RW, 0);
        let null = s.open(b"/null", WO, 0);
        let dir = s.open(b"/", RW | OpenFlags::DIRECTORY, 0);
        (
            p.map(|fd| s.fallocate(fd, 0, 0, 1)),
            null.map(|fd| s.fallocate(fd, 0, 0, 1)),
            dir.map(|fd| s.fallocate(fd, 0, 0, 1)),
        )
    };
    assert_eq!(
        on_uvfs(&f),
        (
            Err(Errno::EOPNOTSUPP),
            Err(Errno::ENXIO),
            Err(Errno::EISDIR)
        )
    );
    if let Some(h) = on_host(&f) {
        assert_eq!(
            h,
            (
                Ok(Err(Errno::ESPIPE)),
                Ok(Err(Errno::ENODEV)),
                Err(Errno::EISDIR)
            )
        );
    }
}

fn makedev(major: u64, minor: u64) -> u64 {
    (major << 8) | minor
}

#[test]
fn stamps_mtime_and_ctime() {
    // file_modified after every successful call, whatever it changed (nothing, for a
    // KEEP_SIZE over allocated pages or a punch of a hole); atime is kept.
    type T = (R<()>, bool, bool, bool);
    fn run(s: &dyn Sys, prep: &dyn Fn(&dyn Sys, Fd), mode: i32, off: i64, len: i64) -> T {
        let fd = file_of(s, b'a', 10);
        prep(s, fd);
        s.futimens(fd, Some(&[T2001, T2001])).unwrap();
        let old_c = s.fstat(fd).unwrap().st_ctime;
        let r = s.fallocate(fd, mode, off, len);
        let st = s.fstat(fd).unwrap();
        if r.is_ok() {
            (
                r,
                st.st_mtime > T2001,
                st.st_ctime == st.st_mtime,
                st.st_atime == T2001,
            )
        } else {
            (
                r,
                st.st_mtime == T2001,
                st.st_ctime == old_c,
                st.st_atime == T2001,
            )
        }
    }
    fn none(_: &dyn Sys, _: Fd) {}
    let ok = (Ok(()), true, true, true);
    table::<T>(&[
        ("mode 0", ok, |s| run(s, &none, 0, 0, PS)),
        ("mode 0 inside the data", ok, |s| run(s, &none, 0, 0, 5)),
        ("KEEP_SIZE past the end", ok, |s| {
            run(s, &none, KEEP, 0, 3 * PS)
        }),
        ("KEEP_SIZE over allocated pages", ok, |s| {
            run(s, &none, KEEP, 0, 5)
        }),
        ("PUNCH", ok, |s| run(s, &none, PUNCH, 0, PS)),
        ("PUNCH of a hole", ok, |s| {
            run(s, &|s, fd| s.ftruncate(fd, 3 * PS).unwrap(), PUNCH, PS, PS)
        }),
        ("PUNCH past the end", ok, |s| run(s, &none, PUNCH, PS, PS)),
        ("EINVAL", (Err(Errno::EINVAL), true, true, true), |s| {
            run(s, &none, 0, 0, 0)
        }),
        (
            "EOPNOTSUPP",
            (Err(Errno::EOPNOTSUPP), true, true, true),
            |s| run(s, &none, ZERO, 0, PS),
        ),
        ("EFBIG", (Err(Errno::EFBIG), true, true, true), |s| {
            run(s, &none, 0, i64::MAX, PS)
        }),
    ]);
}

#[test]
fn drops_set_id_bits_for_non_root() {
    // file_modified -> file_remove_privs, as a write: a caller without CAP_FSETID drops
    // set-user-ID, and set-group-ID when the file is group-executable or the caller is
    // not in its group; root keeps both. A refused call changes nothing.
    // Through the FUSE client set-group-ID without group execute stays (Linux's
    // `fuse_setattr`; posix_rw.rs's regression_write_by_non_root_clears_setuid_and_setgid),
    // and a ZERO_RANGE the server refuses has dropped the bits already: Linux's
    // `fuse_file_fallocate` runs `file_modified` before its request (measured on Linux
    // 6.18: a kernel FUSE mount of `uvfs mount`, 06777 -> 0777 with EOPNOTSUPP; tmpfs keeps
    // 06777).
    type M = Vec<(&'static str, u32)>;
    let rows = |not_in_group: u32, refused: u32| {
        vec![
            ("root, mode 0", 0o106777),
            ("1000, mode 0", 0o100777),
            ("1000, KEEP_SIZE", 0o100777),
            ("1000, PUNCH", 0o100777),
            ("1000, 02767 of group 0", not_in_group),
            ("1000, EOPNOTSUPP", refused),
        ]
    };
    let (local, fuse) = (rows(0o100767, 0o106777), rows(0o102767, 0o100777));
    expect_fuse(local, fuse, |s| -> M {
        s.umask(0);
        s.mkdirat(CWD, b"/w", 0o777).unwrap();
        let names: [&[u8]; 6] = [b"/w/a", b"/w/b", b"/w/c", b"/w/d", b"/w/e", b"/w/f"];
        for (i, p) in names.iter().enumerate() {
            let m = if i == 4 { 0o2767 } else { 0o6777 };
            let fd = s.open(p, CREAT | WO, m).unwrap();
            s.close(fd).unwrap();
        }
        let fa = |s: &dyn Sys, p: &[u8], mode: i32| {
            let fd = s.open(p, WO, 0).unwrap();
            let _ = s.fallocate(fd, mode, 0, PS);
            s.close(fd).unwrap();
            s.stat(p).unwrap().st_mode
        };
        let root = fa(s, names[0], 0);
        s.set_cred(1000, 1000, &[]);
        vec![
            ("root, mode 0", root),
            ("1000, mode 0", fa(s, names[1], 0)),
            ("1000, KEEP_SIZE", fa(s, names[2], KEEP)),
            ("1000, PUNCH", fa(s, names[3], PUNCH)),
            ("1000, 02767 of group 0", fa(s, names[4], 0)),
            ("1000, EOPNOTSUPP", fa(s, names[5], ZERO)),
        ]
    });
}

/// Bug: `ftruncate`, `truncate` or `O_TRUNC` to the file's own size kept the pages that
/// `FALLOC_FL_KEEP_SIZE` had allocated past the end (their blocks, and their space on a
/// `size=` mount); Linux frees them. Cause: `Inode::truncate_at` dropped pages only when
/// the size shrank; `shmem_setattr` calls `shmem_truncate_range(inode, newsize, -1)`
/// whenever `newsize <= oldsize`. Fix: drop the pages past the new size then too (inode.rs).
#[test]
fn regression_truncate_to_the_same_size_frees_pages_past_the_end() {
    expect_limits(
        16 * KIB,
        0,
        [
            ("ftruncate", (5, 8), 3),
            ("truncate", (5, 8), 3),
            ("O_TRUNC", (0, 0), 4),
            ("ftruncate up", (8000, 32), 0),
        ],
        |s| {
            let run = |s: &dyn Sys, how: usize| {
                let fd = file_of(s, b'a', 5);
                s.fallocate(fd, KEEP, 0, 4 * PS).unwrap();
                match how {
                    0 => s.ftruncate(fd, 5).unwrap(),
                    1 => s.truncate(b"/f", 5).unwrap(),
                    2 => {
                        s.ftruncate(fd, 0).unwrap();
                        s.fallocate(fd, KEEP, 0, 4 * PS).unwrap();
                        let t = s.open(b"/f", WO | OpenFlags::TRUNC, 0).unwrap();
                        s.close(t).unwrap();
                    }
                    // Growing keeps them (`newsize <= oldsize` is false).
                    _ => s.ftruncate(fd, 8000).unwrap(),
                }
                let r = (sb(s, fd), bfree(s));
                s.close(fd).unwrap();
                s.unlinkat(CWD, b"/f", NOAT).unwrap();
                r
            };
            let [a, b, c, d] = [0, 1, 2, 3].map(|i| run(s, i));
            [
                ("ftruncate", a.0, a.1),
                ("truncate", b.0, b.1),
                ("O_TRUNC", c.0, c.1),
                ("ftruncate up", d.0, d.1),
            ]
        },
    );
}

/// Free blocks of the mount (`statfs`).
fn bfree(s: &dyn Sys) -> u64 {
    s.statfs(b"/").unwrap().f_bfree
}

#[test]
fn enospc_on_a_limited_mount_allocates_nothing() {
    // size=16k: 4 pages. shmem_fallocate gives back the pages it allocated before running
    // out (`undone:`), so a refused call leaves size, blocks, times and free space as they
    // were; pages the range already holds need no space.
    expect_limits(
        16 * KIB,
        0,
        (
            (Err(Errno::ENOSPC), (0, 0), 4),
            (Err(Errno::ENOSPC), (8192, 16), 2),
            (Ok(()), (16384, 32), 0),
            true,
        ),
        |s| {
            let fd = new_file(s);
            s.futimens(fd, Some(&[T2001, T2001])).unwrap();
            // More than the mount holds.
            let a = (s.fallocate(fd, 0, 0, 5 * PS), sb(s, fd), bfree(s));
            // Two pages held; four more asked for, two free.
            s.fallocate(fd, 0, 0, 2 * PS).unwrap();
            s.futimens(fd, Some(&[T2001, T2001])).unwrap();
            let b = (s.fallocate(fd, 0, PS, 4 * PS), sb(s, fd), bfree(s));
            let untouched = s.fstat(fd).unwrap().st_mtime == T2001;
            // Two held, two more needed.
            let c = (s.fallocate(fd, 0, 0, 4 * PS), sb(s, fd), bfree(s));
            (a, b, c, untouched)
        },
    );
}

/// Bug: on a mount with `size=`, `fallocate` of a range of more pages than the mount holds
/// (e.g. `fallocate(fd, 0, 0, 1 << 62)`) ran for hours and grew without bound instead of
/// failing; Linux answers `ENOSPC` at once. Cause: `Inode::fallocate` listed every missing
/// page of the range in a `Vec` before reserving them. Fix: `shmem_fallocate`'s early check
/// ("Try to avoid a swapstorm if len is impossible to satisfy": more pages than the mount's
/// `max_blocks` is `ENOSPC`), and the missing pages counted from the pages held (inode.rs).
#[test]
fn regression_a_range_larger_than_the_mount_is_enospc_at_once() {
    expect_limits(
        16 * KIB,
        0,
        [
            Err(Errno::ENOSPC),
            Err(Errno::ENOSPC),
            Err(Errno::ENOSPC),
            Ok(()),
        ],
        |s| {
            let fd = file_of(s, b'a', PS as usize);
            [
                s.fallocate(fd, 0, 0, i64::MAX - 1),
                s.fallocate(fd, KEEP, PS, 1 << 62),
                // Five pages, one of them held: still more than the mount (4 pages).
                s.fallocate(fd, 0, 0, 5 * PS),
                s.fallocate(fd, 0, 0, 4 * PS),
            ]
        },
    );
}

#[test]
fn enospc_with_keep_size_and_sparse_files() {
    expect_limits(
        16 * KIB,
        0,
        (
            Ok(()),
            Err(Errno::ENOSPC),
            (12289, 32),
            Err(Errno::ENOSPC),
            (12289, 32),
        ),
        |s| {
            // Pages 0 and 3 written, 1 and 2 holes: filling the holes needs two pages.
            let fd = new_file(s);
            s.pwrite(fd, b"x", 0).unwrap();
            s.pwrite(fd, b"y", 3 * PS).unwrap();
            let a = s.fallocate(fd, 0, 0, 3 * PS + 1);
            // Full: one more page, with or without KEEP_SIZE, is refused.
            let b = s.fallocate(fd, KEEP, 0, 5 * PS);
            let c = sb(s, fd);
            let d = s.fallocate(fd, 0, 4 * PS, 1);
            (a, b, c, d, sb(s, fd))
        },
    );
}

#[test]
fn punch_and_close_give_space_back() {
    expect_limits(
        16 * KIB,
        0,
        (
            (Ok(()), 0),
            (Ok(()), 2),
            (Err(Errno::ENOSPC), Ok(()), 0),
            4,
            (Ok(()), 0),
        ),
        |s| {
            let a = s.open(b"/a", CREAT | RW, 0o644).unwrap();
            let x = (s.fallocate(a, KEEP, 0, 4 * PS), bfree(s));
            let y = (s.fallocate(a, PUNCH, PS, 2 * PS), bfree(s));
            // Two free: /b gets them, not a third.
            let b = s.open(b"/b", CREAT | RW, 0o644).unwrap();
            let z = (
                s.fallocate(b, 0, 0, 3 * PS),
                s.fallocate(b, 0, 0, 2 * PS),
                bfree(s),
            );
            // An unlinked file's pages come back at its last close.
            s.unlinkat(CWD, b"/a", NOAT).unwrap();
            s.unlinkat(CWD, b"/b", NOAT).unwrap();
            s.close(a).unwrap();
            s.close(b).unwrap();
            let w = bfree(s);
            let c = s.open(b"/c", CREAT | RW, 0o644).unwrap();
            let v = (s.fallocate(c, 0, 0, 4 * PS), bfree(s));
            (x, y, z, w, v)
        },
    );
}

/// RLIMIT_FSIZE: shmem_fallocate checks `inode_newsize_ok(inode, offset + len)` for both
/// allocating modes ("We need to check rlimit even when FALLOC_FL_KEEP_SIZE"): EFBIG when
/// the range ends past the limit and past the size; punching is not checked. uvfs only (the
/// limit is per process on the host; see posix_limits.rs). Linux 6.18 tmpfs gives the same
/// results for this sequence (checked with a C program under `setrlimit(RLIMIT_FSIZE,
/// 10000)` and SIGXFSZ ignored).
#[test]
fn rlimit_fsize_gives_efbig() {
    for u in each_fs() {
        let t = &u.task;
        let fd = t.open("/f", CREAT | RW, 0o644).unwrap();
        let big = t.open("/big", CREAT | RW, 0o644).unwrap();
        t.ftruncate(big, 20000).unwrap();
        t.setrlimit_fsize(10000);
        assert_eq!(t.fallocate(fd, 0, 0, 10001), Err(Errno::EFBIG));
        assert_eq!(t.fallocate(fd, KEEP, 0, 10001), Err(Errno::EFBIG));
        assert_eq!(t.fallocate(fd, KEEP, 10000, 1), Err(Errno::EFBIG));
        assert_eq!(t.fstat(fd).map(|s| (s.st_size, s.st_blocks)), Ok((0, 0)));
        assert_eq!(t.fallocate(fd, 0, 0, 10000), Ok(()));
        assert_eq!(
            t.fstat(fd).map(|s| (s.st_size, s.st_blocks)),
            Ok((10000, 24))
        );
        // Punching is not limited; the size is at the limit, the range past it.
        assert_eq!(t.fallocate(fd, PUNCH, 0, 100000), Ok(()));
        assert_eq!(
            t.fstat(fd).map(|s| (s.st_size, s.st_blocks)),
            Ok((10000, 0))
        );
        assert_eq!(t.fallocate(fd, KEEP, 0, 10001), Err(Errno::EFBIG));
        // Within the size, a file already past the limit can be allocated.
        assert_eq!(t.fallocate(big, 0, 0, 15000), Ok(()));
        assert_eq!(t.fallocate(big, KEEP, 0, 20000), Ok(()));
        assert_eq!(t.fallocate(big, 0, 0, 20001), Err(Errno::EFBIG));
        assert_eq!(
            t.fstat(big).map(|s| (s.st_size, s.st_blocks)),
            Ok((20000, 40))
        );
        // EFBIG for overflow comes before the limit (vfs_fallocate), and an overflow of a
        // punch too.
        assert_eq!(t.fallocate(fd, PUNCH, i64::MAX, 1), Err(Errno::EFBIG));
    }
}

/// Bug (issue 15 item 3): on `tmpfs::mount(Default::default())`, `fallocate` of 100 GiB
/// grew at ~220 MB/s, holding the file's data lock, until memory ran out. Cause: the
/// library's default mount had no size limit, so neither the early check nor the
/// reservation applied. Fix: the default mount has tmpfs's limits (half of RAM), and a
/// range larger than that fails before a page is allocated, as on a Linux tmpfs mounted
/// without options.
#[test]
fn regression_a_huge_fallocate_on_a_default_mount_is_enospc_at_once() {
    // 100 GiB, or more than the default limit on a machine where that would fit.
    let len = (100 << 30).max(uvfs::TmpfsOptions::default_size() as i64 + PS);
    expect(
        [(Err(Errno::ENOSPC), (0, 0)), (Err(Errno::ENOSPC), (0, 0))],
        |s| {
            let fd = new_file(s);
            let before = bfree(s);
            let t = std::time::Instant::now();
            let r = [
                (s.fallocate(fd, 0, 0, len), sb(s, fd)),
                (s.fallocate(fd, KEEP, PS, len), sb(s, fd)),
            ];
            assert!(t.elapsed().as_secs() < 2, "ENOSPC took {:?}", t.elapsed());
            assert_eq!(bfree(s), before, "nothing allocated");
            r
        },
    );
}

/// A range of several `FALLOC_BATCH`es (the data lock is dropped between them) while
/// another thread punches, writes and truncates the same file: the mount's accounting ends
/// where it started, and the pages the last `fallocate` leaves are all there.
#[test]
fn fallocate_in_batches_racing_punch_write_truncate_keeps_the_accounting() {
    const PAGES: i64 = 1300; // two whole batches of 512 and a partial one
    let u = Uvfs::with_options(uvfs::TmpfsOptions {
        size: Some(4 * PAGES as u64 * PS as u64),
        ..uvfs::TmpfsOptions::default()
    });
    let t = &u.task;
    let full = t.statfs(b"/").unwrap().f_bfree;
    let fd = t.open(b"/f", CREAT | RW, 0o644).unwrap();
    let other = t.fork();
    let stop = &std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(move || {
            let mut i: i64 = 0;
            // Relaxed: a stop flag; the scope's join orders everything else.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let at = (i * 97 % PAGES) * PS;
                match i % 3 {
                    0 => other.fallocate(fd, PUNCH, at, 200 * PS).unwrap(),
                    1 => assert_eq!(other.pwrite(fd, b"x", at), Ok(1)),
                    _ => other.ftruncate(fd, at).unwrap(),
                }
                i += 1;
            }
        });
        for _ in 0..40 {
            assert_eq!(t.fallocate(fd, KEEP, 0, PAGES * PS), Ok(()));
        }
        // Relaxed: see above.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(t.fallocate(fd, KEEP, 0, PAGES * PS), Ok(()));
    let st = t.fstat(fd).unwrap();
    assert!(st.st_blocks >= PAGES * 8, "every page of the range: {st:?}");
    let used = full - t.statfs(b"/").unwrap().f_bfree;
    assert_eq!(used as i64 * 8, st.st_blocks, "charged = held");
    t.ftruncate(fd, 0).unwrap();
    assert_eq!(t.statfs(b"/").unwrap().f_bfree, full);
}
